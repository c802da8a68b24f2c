//! What the calls over summaries take and answer: `summaries`, `fidelity`, `scoreFidelity`, `rewrite`,
//! `rewritePreview`, `redact`, and the prompt templates' `prompts` and `exportPrompts`.

use serde::{Deserialize, Serialize};

use crate::input;
use crate::store::summaries::Listing;

/// Options of `summaries`: a depth, and a page (a panel lists a long conversation's summaries
/// a page at a time, newest first, without reading the rest).
#[derive(Clone, Debug, Default, serde::Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[cfg_attr(test, ts(rename = "SummariesOptions"))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SummaryFilter {
    /// Only summaries of this depth (0: leaves).
    #[serde(default, skip_serializing, deserialize_with = "crate::input::opt_non_negative")]
    pub depth: Option<i64>,
    /// Newest first instead of creation order. Default false.
    #[serde(default, skip_serializing)]
    pub newest_first: bool,
    /// Summaries skipped (in the chosen order) before the first returned. Default 0.
    #[serde(default, skip_serializing, deserialize_with = "crate::input::opt_non_negative")]
    pub offset: Option<i64>,
    /// Most summaries returned. Default: all.
    #[serde(default, skip_serializing, deserialize_with = "crate::input::opt_positive")]
    pub limit: Option<i64>,
    /// Only these summaries (a condensed node's inputs, read in one go). Default: all.
    #[serde(default, skip_serializing)]
    pub summary_ids: Option<Vec<String>>,
}

/// Options of `scoreFidelity`.
#[derive(Clone, Copy, Debug, Default, serde::Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[cfg_attr(test, ts(rename = "ScoreFidelityOptions"))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct ScoreScope {
    /// Score every summary again, not only those without a score from this extractor.
    #[serde(default, skip_serializing)]
    pub all: bool,
}

/// Options of `rewrite`: which summaries (exactly one way of choosing them) and how.
#[derive(Clone, Debug, Default, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[cfg_attr(test, ts(rename = "RewriteOptions"))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RewriteRequest {
    /// Exactly one of `summaryId`, `subtree`, `depth`, `all`, `fallbacks` and `lowFidelity`
    /// chooses the summaries.
    #[serde(default, skip_serializing, deserialize_with = "input::opt_non_empty")]
    pub summary_id: Option<String>,
    /// A summary and every summary beneath it (its inputs, theirs, … down to the leaves),
    /// bottom-up.
    #[serde(default, skip_serializing, deserialize_with = "input::opt_non_empty")]
    pub subtree: Option<String>,
    /// Every summary of this depth.
    #[serde(default, skip_serializing, deserialize_with = "input::opt_non_negative")]
    pub depth: Option<i64>,
    /// Every summary.
    #[serde(default, skip_serializing)]
    pub all: bool,
    /// The deterministic fallbacks a failed summarizer left (see `SummaryRecord.fallback`).
    /// Applying this with `'offline'` is E_INVALID_INPUT: it would only swap one extractive text
    /// for another and unmark them.
    #[serde(default, skip_serializing)]
    pub fallbacks: bool,
    /// The summaries marked for repair because they stayed under `minFidelity`. Applying this
    /// with `'offline'` is E_INVALID_INPUT, as for `fallbacks`.
    #[serde(default, skip_serializing)]
    pub low_fidelity: bool,
    /// Write the new texts. Default false: a dry run that writes nothing.
    #[serde(default, skip_serializing)]
    pub apply: bool,
    /// Prompt templates to use for this run (each file found there overrides one template).
    #[serde(default, skip_serializing, deserialize_with = "input::opt_non_empty")]
    pub prompt_dir: Option<String>,
    /// Show times in the source text. Default true.
    #[serde(default, skip_serializing)]
    pub timestamps: Option<bool>,
    /// Recorded in `summaries.model` for rewritten summaries.
    #[serde(default, skip_serializing, deserialize_with = "input::opt_non_empty")]
    pub model: Option<String>,
    /// Cancels between two summaries: the promise rejects with E_ABORTED, what was applied
    /// stays.
    #[serde(default, skip_serializing, rename = "signal")]
    #[cfg_attr(test, ts(type = "AbortSignal"))]
    pub _signal: Option<serde::de::IgnoredAny>,
    /// Called before each summary, which starts once it has returned (aborting the signal
    /// inside it stops before that summary). A throwing callback does not stop the run.
    #[serde(default, skip_serializing, rename = "onProgress")]
    #[cfg_attr(test, ts(type = "(progress: RewriteProgress) => void"))]
    pub _on_progress: Option<serde::de::IgnoredAny>,
}

/// Options of `rewritePreview`.
#[derive(Clone, Debug, Default, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[cfg_attr(test, ts(rename = "RewritePreviewOptions"))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct PreviewOptions {
    /// Prompt templates to render with (each file found there overrides one template).
    #[serde(default, skip_serializing, deserialize_with = "input::opt_non_empty")]
    pub prompt_dir: Option<String>,
    /// Show times in the source text. Default true.
    #[serde(default, skip_serializing)]
    pub timestamps: Option<bool>,
}

/// Options of `redact` as JavaScript passes them: a `pattern`, or `messageIds` whose whole text
/// is redacted (or both); or neither (or `finish: true`), which finishes what earlier
/// redactions left: the summaries awaiting regeneration (in `conversationId`, else everywhere)
/// and a scrub of the file that a kill or a full disk cut short.
#[derive(Clone, Debug, Default, serde::Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[cfg_attr(test, ts(rename = "RedactOptions"))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RedactRequest {
    /// Only this conversation's messages. Default: those of `messageIds`, else every
    /// conversation.
    #[serde(default, skip_serializing, deserialize_with = "crate::input::opt_positive")]
    pub conversation_id: Option<i64>,
    /// Only these messages (all must exist); without `pattern`, their whole text is replaced.
    #[serde(default, skip_serializing, deserialize_with = "message_ids")]
    pub message_ids: Option<Vec<i64>>,
    /// A Rust `regex` pattern (linear-time; no look-around or backreferences), at most 4 KiB;
    /// one that is invalid, matches the empty string or matches nothing is E_INVALID_INPUT.
    #[serde(default, skip_serializing)]
    pub pattern: Option<String>,
    /// What each match becomes (literally; `$1` is not expanded). Default `[REDACTED]`.
    #[serde(default, skip_serializing)]
    pub replacement: Option<String>,
    /// Recorded in the redaction log (which never holds the redacted text).
    #[serde(default, skip_serializing)]
    pub reason: Option<String>,
    /// Replace the covering summaries with a notice and leave them marked instead of
    /// regenerating them; the next `redact` (or `rewrite` with `fallbacks: true`) regenerates
    /// them.
    #[serde(default, skip_serializing)]
    pub mark_only: bool,
    /// Finish earlier redactions only (what a call with no `pattern` and no `messageIds` does).
    #[serde(default, skip_serializing)]
    pub finish: bool,
    /// Stops between two regenerated summaries; the rest stay marked.
    #[serde(default, skip_serializing, rename = "signal")]
    #[cfg_attr(test, ts(type = "AbortSignal"))]
    pub _signal: Option<serde::de::IgnoredAny>,
    /// Called before each summary is regenerated.
    #[serde(default, skip_serializing, rename = "onProgress")]
    #[cfg_attr(test, ts(type = "(progress: RewriteProgress) => void"))]
    pub _on_progress: Option<serde::de::IgnoredAny>,
}

/// Options of the prompt tools (`renderPrompt`, `listPrompts`, `showPrompt`).
#[derive(Clone, Debug, Default, serde::Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct PromptOptions {
    /// Directory searched first for prompt templates (as the engine's `promptDir`).
    #[serde(default, skip_serializing)]
    pub prompt_dir: Option<String>,
    /// `renderPrompt`: the engine's options (as `open` takes them; `dbPath` not needed), so
    /// that a render without `vars.targetTokens` asks for the length compaction asks for
    /// with them: `leafTargetTokens` for a leaf, `condensedTargetTokens` (at least 512) for a
    /// condensed summary, their defaults when absent.
    #[serde(default, skip_serializing)]
    #[cfg_attr(test, ts(type = "Partial<LcmConfig>"))]
    pub engine: Option<serde_json::Value>,
}

/// Options of `exportPrompts`.
#[derive(Clone, Debug, Default, serde::Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS), ts(rename = "ExportPromptsOptions"))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct ExportOptions {
    /// Replace templates that differ from the defaults (edited ones). Default false.
    #[serde(default, skip_serializing)]
    pub overwrite: bool,
}

impl SummaryFilter {
    /// Every summary of one depth, in creation order.
    #[cfg(test)]
    pub(crate) fn at_depth(depth: i64) -> Self {
        SummaryFilter {
            depth: Some(depth),
            ..Default::default()
        }
    }

    /// The rows these options ask the store for.
    pub(crate) fn listing(&self) -> Listing<'_> {
        Listing {
            depth: self.depth,
            newest_first: self.newest_first,
            offset: self.offset.unwrap_or(0),
            limit: self.limit,
            ids: self.summary_ids.as_deref(),
        }
    }
}

fn message_ids<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Option<Vec<i64>>, D::Error> {
    let ids = Vec::<i64>::deserialize(d)?;
    if ids.is_empty() {
        return Err(serde::de::Error::custom("must be a non-empty array of message ids"));
    }
    Ok(Some(ids))
}

/// What `onProgress` receives before each summary of a rewrite.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[cfg_attr(test, ts(rename = "RewriteProgress"))]
#[serde(rename_all = "camelCase")]
pub struct Progress {
    /// Summaries finished before this one.
    pub done: usize,
    pub total: usize,
    pub summary_id: String,
    pub depth: i64,
    /// The summary finished just before this one (none before the first): a caller can show
    /// each result as it comes instead of waiting for the whole run.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub finished: Option<RewriteEntry>,
}

/// One summary of a rewrite.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct RewriteEntry {
    pub summary_id: String,
    #[cfg_attr(test, ts(type = "SummaryKind"))]
    pub kind: String,
    pub depth: i64,
    /// Inputs of a condensed summary, messages of a leaf.
    pub child_count: usize,
    pub time_range: String,
    pub old_tokens: i64,
    pub new_tokens: i64,
    pub delta: i64,
    pub old_content: String,
    pub new_content: String,
    /// Unified diff of the old and new content (empty when equal).
    pub diff: String,
    /// How the new text was obtained; `fallback` means the summarizer gave nothing usable and the
    /// old text is kept.
    #[cfg_attr(test, ts(type = "PassLevel"))]
    pub level: &'static str,
    /// True when the new text was written (an applying run, not a fallback, and not the same
    /// text by the same model as before).
    pub applied: bool,
    /// The new text's fidelity score; null when the old text is kept or names nothing.
    pub fidelity: Option<f64>,
    /// The new text stayed under `minFidelity` after the retry (it stays marked).
    pub needs_repair: bool,
}

/// What `rewrite` did (or, without `apply`, would do).
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct RewriteResult {
    pub conversation_id: i64,
    pub apply: bool,
    /// Bottom-up by depth, chronological within a depth.
    pub entries: Vec<RewriteEntry>,
    pub tokens_before: i64,
    pub tokens_after: i64,
    pub duration_ms: f64,
}

/// The prompt a rewrite of one summary would send first, before anything is sent (the TUI's
/// preview).
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct RewritePreview {
    pub summary_id: String,
    #[cfg_attr(test, ts(type = "SummaryKind"))]
    pub kind: String,
    pub depth: i64,
    /// The template the prompt comes from: its name, and the override file or `embedded`.
    pub template: PromptSource,
    /// The rendered prompt of the first attempt.
    pub prompt: String,
    /// Estimated tokens of the prompt.
    pub prompt_tokens: i64,
    /// Estimated tokens of the source text inside it.
    pub source_tokens: i64,
    /// Inputs of a condensed summary, messages of a leaf.
    pub child_count: usize,
    pub time_range: String,
    /// The length the summarizer is asked for.
    pub target_tokens: i64,
    /// The summary's current length.
    pub old_tokens: i64,
}

/// What `redact` did.
#[derive(Clone, Debug, Default, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct RedactionResult {
    /// The log entry of this redaction; null when it only finished an earlier one's summaries.
    pub redaction_id: Option<i64>,
    pub conversation_ids: Vec<i64>,
    /// Messages whose text changed, and their parts that changed.
    pub messages: usize,
    pub parts: usize,
    /// Matches replaced in the stored columns (a message's text is stored in the message and in
    /// its parts, so each copy counts); without a pattern, text values replaced.
    pub matches: usize,
    /// Summaries the redacted text can have reached, replaced by a notice and regenerated:
    /// those whose subtree covers a redacted message, those whose text or stored version
    /// holds a match, and every summary made from one of them or shown one as previous
    /// context.
    pub summaries: usize,
    /// Old versions deleted because they were made from the redacted text.
    pub versions_purged: usize,
    /// Of `summaries`, those reached not through the redacted messages' lineage but because
    /// their text or a stored version held a match (the text came as previous context, or
    /// the message that brought it is outside the scope), or from such a summary.
    pub summaries_found: usize,
    /// Summaries regenerated by this call (an earlier redaction's included).
    pub regenerated: usize,
    /// Summaries still holding the notice: `markOnly`, a summarizer that gave nothing usable, or
    /// a stopped run. The next `redact` in their conversation (or `rewrite` with
    /// `fallbacks: true`) regenerates them.
    pub pending: usize,
    /// False when another connection kept the write-ahead log from being emptied: old bytes may
    /// stay in the `-wal` file until its next checkpoint. On PostgreSQL: true once `VACUUM
    /// FULL` rewrote the tables (its write-ahead log is PostgreSQL's to recycle).
    pub checkpointed: bool,
    /// True when the replaced text may still be in the file's free pages or its WAL: the scrub
    /// failed (`scrubError`: a full disk at VACUUM, on PostgreSQL a table lock another gateway
    /// held past `busyTimeoutMs`) or the WAL could not be emptied. The text
    /// itself is replaced; the file records the pending scrub, `open` reports it
    /// (`migration.scrubsPending`), and `redact` with no pattern finishes it.
    pub scrub_pending: bool,
    /// Matches replaced in turns the OpenClaw plugin spooled beside the database (turns it could
    /// not store yet; stored later, they would bring the text back).
    pub spooled_matches: usize,
    /// A drain of that spool was running, so it was left as it was: `redact` again.
    pub spool_busy: bool,
    /// Why the scrub failed, with its code (`E_IO: …`), when it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub scrub_error: Option<String>,
    pub duration_ms: f64,
}

/// What `scoreFidelity` did.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[cfg_attr(test, ts(rename = "ScoreFidelityReport"))]
#[serde(rename_all = "camelCase")]
pub struct ScoreReport {
    pub conversation_id: i64,
    /// Summaries scored by this call.
    pub scored: usize,
    pub by_depth: Vec<DepthFidelity>,
}

/// The fidelity scores of one depth of a conversation.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct DepthFidelity {
    pub depth: i64,
    pub summaries: usize,
    /// Summaries with a stored score (the rest are not scored yet).
    pub scored: usize,
    /// Scored summaries whose source names no identifier (no score).
    pub without_identifiers: usize,
    pub mean: Option<f64>,
    pub min: Option<f64>,
    pub p10: Option<f64>,
    pub median: Option<f64>,
    /// Marked for repair (`minFidelity`).
    pub low_fidelity: usize,
}

/// Where a prompt template comes from.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct PromptSource {
    pub name: String,
    /// `embedded`, or the path of the override file.
    pub source: String,
    /// True when an override file is used.
    pub overridden: bool,
}

/// A template in effect, with the default it replaces (`showPrompt`).
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct PromptText {
    #[serde(flatten)]
    pub source: PromptSource,
    /// The text in effect (the override's, or the default).
    pub text: String,
    /// The embedded default.
    pub embedded: String,
    /// Unified diff from the default to the override (empty when not overridden or equal).
    pub diff: String,
}
