//! What a pass, a sweep (`compact`) and `evaluate` take, and what they answer.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::input;
use crate::summarizer::{SummaryKind, TimeoutPolicy};

/// Options of one pass (`leafPass`, `condensedPass`) or of a sweep's passes.
#[derive(Clone, Debug, Default, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PassOptions {
    /// Condense with `condensedMinFanoutHard` instead of the normal fanout.
    #[serde(default, skip_serializing)]
    pub hard_trigger: bool,
    /// condensedPass: condense only runs whose inputs have this depth.
    #[serde(default, skip_serializing, deserialize_with = "input::opt_non_negative")]
    pub depth: Option<i64>,
    /// Recorded in `summaries.model` for summaries the callback wrote. Default "unknown".
    #[serde(default, skip_serializing)]
    pub model: Option<String>,
    /// leafPass, condensedPass: the model's context budget, which bounds the fresh tail in
    /// tokens as `evaluate` and `assemble` bound it for the same budget (see
    /// `freshTailMaxTokens`). Without it the tail is bounded in messages only.
    #[serde(default, skip_serializing, deserialize_with = "input::opt_positive")]
    pub token_budget: Option<i64>,
    /// Instructions for this call's prompts (a manual `/compact …`), given to the templates as
    /// `CustomInstructions` after the configured `customInstructions`.
    #[serde(default, skip_serializing)]
    pub custom_instructions: Option<String>,
    /// When the summarizer has not answered within `summaryTimeoutMs`: `fail` (default) fails
    /// the pass with E_TIMEOUT, writing nothing; `fallback` writes the deterministic fallback
    /// summary, marked for repair.
    #[serde(default, skip_serializing)]
    pub on_summary_timeout: TimeoutPolicy,
}

/// Options of `compact`, a sweep.
#[derive(Clone, Debug, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct CompactOptions {
    /// The model's context budget; a sweep is due above `contextThreshold × tokenBudget`.
    #[serde(deserialize_with = "input::positive")]
    pub token_budget: i64,
    /// Sweep even when under the threshold.
    #[serde(default, skip_serializing)]
    pub force: bool,
    /// What the sweep must reach (see `SweepTarget`). Default `threshold`.
    #[serde(default, skip_serializing)]
    pub target: SweepTarget,
    /// Condense with `condensedMinFanoutHard` instead of the normal fanout.
    #[serde(default, skip_serializing)]
    pub hard_trigger: bool,
    /// Condense only runs whose inputs have this depth.
    #[serde(default, skip_serializing, deserialize_with = "input::opt_non_negative")]
    pub depth: Option<i64>,
    /// Recorded in `summaries.model` for summaries the callback wrote. Default "unknown".
    #[serde(default, skip_serializing)]
    pub model: Option<String>,
    /// Instructions for this sweep's prompts (a manual `/compact …`), given to the templates
    /// as `CustomInstructions` after the configured `customInstructions`.
    #[serde(default, skip_serializing)]
    pub custom_instructions: Option<String>,
    /// When the summarizer has not answered within `summaryTimeoutMs`: `fail` (default) ends
    /// the sweep with E_TIMEOUT (passes already written stay); `fallback` writes the
    /// deterministic fallback summary, marked for repair, and goes on.
    #[serde(default, skip_serializing)]
    pub on_summary_timeout: TimeoutPolicy,
    /// Stops the sweep before its next pass (`stopReason: 'aborted'`); passes already written
    /// stay.
    #[serde(default, skip_serializing, rename = "signal")]
    #[cfg_attr(test, ts(type = "AbortSignal"))]
    pub _signal: Option<serde::de::IgnoredAny>,
}

/// What a sweep must reach before it may stop early.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "lowercase")]
pub enum SweepTarget {
    /// `threshold`: the usual sweep, run when the stored tokens exceed `contextThreshold ×
    /// tokenBudget` (or `force`): everything outside the fresh tail that is due.
    #[default]
    Threshold,
    /// `budget`: budget pressure. Leaf passes, oldest first, until the context is under the
    /// low-water mark (`contextLowWater × tokenBudget`): into the fresh tail as far as the mark
    /// needs, never past the newest turn (`compactedTail: true` when it reached into it). Then
    /// condensation as in the usual sweep; when that leaves the context over `contextThreshold
    /// × tokenBudget`, the rest of the tail too, down to the newest turn, until it is under.
    /// One large step: the next sweep is due only when the context has grown back over the
    /// threshold, and until then the context only grows at its end.
    Budget,
    /// `fit` (a host's preflight or overflow): the assembled context must fit `tokenBudget`.
    /// When it already does, nothing is compacted (`stopReason: 'fits'`; `force` compacts
    /// anyway); otherwise a `budget` sweep runs whatever the threshold. `fit` in the result
    /// says where it ended.
    Fit,
    /// `leaf` (background maintenance): leaf passes only, while the raw messages outside the
    /// fresh tail reach `leafChunkTokens` (the leaf trigger), bounded as any sweep.
    Leaf,
}

/// Options of a sweep.
#[derive(Clone, Debug, Default)]
pub struct SweepOptions {
    pub token_budget: i64,
    pub force: bool,
    /// What the sweep must reach.
    pub target: SweepTarget,
    pub pass: PassOptions,
    /// Set by the caller to stop the sweep before its next pass (passes already written stay).
    pub cancel: Option<Arc<std::sync::atomic::AtomicBool>>,
}

/// Options of `evaluate`.
#[derive(Clone, Debug, serde::Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct EvaluateOptions {
    /// The model's context budget.
    #[serde(deserialize_with = "crate::input::positive")]
    pub token_budget: i64,
    /// The host's count of the prompt's tokens, when it has one: the decision takes the larger
    /// of it and the stored estimate.
    #[serde(default, skip_serializing, deserialize_with = "crate::input::opt_non_negative")]
    pub observed_tokens: Option<i64>,
}

impl CompactOptions {
    /// The sweep these options ask for; `cancel` stops it before its next pass.
    pub(crate) fn sweep(self, cancel: Option<Arc<std::sync::atomic::AtomicBool>>) -> SweepOptions {
        SweepOptions {
            token_budget: self.token_budget,
            force: self.force,
            target: self.target,
            pass: PassOptions {
                hard_trigger: self.hard_trigger,
                depth: self.depth,
                model: self.model,
                token_budget: Some(self.token_budget),
                custom_instructions: self.custom_instructions,
                on_summary_timeout: self.on_summary_timeout,
            },
            cancel,
        }
    }
}

/// The outcome of one pass.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct PassResult {
    pub kind: SummaryKind,
    /// Absent when the pass was aborted by an auth failure.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub summary_id: Option<String>,
    pub depth: i64,
    /// How the summary was obtained; `fallback` summaries are marked `lcm-native/fallback`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub level: Option<Level>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub model: Option<String>,
    pub input_count: i64,
    pub input_tokens: i64,
    pub output_tokens: i64,
    /// Σ stored tokens of the live context before and after.
    pub tokens_before: i64,
    pub tokens_after: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub earliest_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub latest_at: Option<String>,
    pub summarizer_calls: u32,
    /// Time spent waiting for the summarizer; the rest of the pass is bookkeeping.
    pub summarizer_ms: f64,
    /// True when the provider refused the credentials (`LCM_AUTH`) or the host allowed no more
    /// calls (`LCM_STOP`); nothing of this pass was written.
    pub auth_failure: bool,
    /// Condensations run right after a leaf pass (`incrementalMaxDepth`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(test, ts(as = "Option<_>", optional))]
    pub incremental: Vec<PassResult>,
    /// Why that incremental condensation stopped early; the leaf pass itself was written.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub incremental_error: Option<PassFailure>,
}

/// A failure reported inside a result instead of rejecting the call.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct PassFailure {
    pub code: &'static str,
    pub message: String,
}

/// Why a sweep stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "kebab-case")]
pub enum StopReason {
    BelowThreshold,
    NoCandidates,
    NoProgress,
    MaxIterations,
    Deadline,
    AuthFailure,
    /// The caller's signal asked the sweep to stop (between two passes).
    Aborted,
    /// `target: 'fit'`: the assembled context already fit the budget; nothing was compacted.
    Fits,
}

/// Where the assembled context stands against a sweep's `tokenBudget` (`target: 'fit'`
/// and every `compact`): what `assemble` would send before and after the sweep.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct ContextFit {
    /// `assemble`'s `estimatedTokens` for the budget before the sweep, and after it.
    pub tokens_before: i64,
    pub tokens_after: i64,
    /// After the sweep: within the budget, the fresh tail included.
    pub fits: bool,
    /// The fresh tail after the sweep (never compacted below the newest turn).
    pub fresh_tail_items: i64,
    pub fresh_tail_tokens: i64,
}

/// The outcome of `compact`.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct SweepResult {
    pub action_taken: bool,
    pub tokens_before: i64,
    pub tokens_after: i64,
    pub threshold: i64,
    pub leaf_passes: i64,
    /// Condensed passes by the depth they produced, e.g. `{ "1": 3, "2": 1 }`.
    #[cfg_attr(test, ts(type = "Record<string, number>"))]
    pub condensed_passes: BTreeMap<i64, i64>,
    pub created_summary_ids: Vec<String>,
    /// Passes by how their summary was obtained.
    #[cfg_attr(test, ts(type = "Partial<Record<PassLevel, number>>"))]
    pub passes_by_level: BTreeMap<&'static str, i64>,
    pub fallback_summaries: i64,
    pub stop_reason: StopReason,
    pub auth_failure: bool,
    /// True when the normal fanout found nothing to condense while the context was still over the
    /// threshold (leaf summaries too large for `leafMinFanout` of them to fit one `leafChunkTokens`
    /// chunk), and the sweep went on with `condensedMinFanoutHard`.
    pub relaxed_fanout: bool,
    /// True when, under budget pressure (`target: "budget"` or `"fit"`), the sweep compacted
    /// into the configured fresh tail, oldest first: to reach the low-water mark
    /// (`contextLowWater`), or because compacting outside it did not bring the context under
    /// the threshold.
    pub compacted_tail: bool,
    pub duration_ms: f64,
    /// Time spent waiting for the summarizer; `durationMs − summarizerMs` is bookkeeping.
    pub summarizer_ms: f64,
    /// The assembled context against the budget, before and after (set by `LcmEngine.compact`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub fit: Option<ContextFit>,
}

/// What `evaluate` decides.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct Evaluation {
    /// Σ stored `token_count` of the live items.
    pub stored_tokens: i64,
    /// max(storedTokens, observedTokens).
    pub current_tokens: i64,
    /// floor(contextThreshold × tokenBudget).
    pub threshold: i64,
    /// Where a sweep may come early, at a cheap moment (see `reason`).
    pub early_mark: i64,
    pub should_compact: bool,
    /// Why a maintenance sweep is due: `threshold` (over it), `early` (past the early mark at
    /// a moment when little of the context would be sent again after the sweep, see
    /// `sweep_due`), else `none`.
    #[cfg_attr(test, ts(type = "\"threshold\" | \"early\" | \"none\""))]
    pub reason: &'static str,
    pub leaf_trigger: LeafTrigger,
    /// The rolling-summary trigger: `messagesPerSummary` messages since the last summary.
    pub rolling: RollingTrigger,
    pub live_items: i64,
    pub raw_messages: i64,
    pub summaries: i64,
}

/// The leaf trigger: raw tokens outside the fresh tail against a leaf chunk.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct LeafTrigger {
    pub raw_tokens_outside_tail: i64,
    pub threshold: i64,
    pub should_compact: bool,
}

/// The rolling-summary seed's trigger: summarise once `messagesPerSummary` messages arrived
/// since the last summary, keeping the fresh tail verbatim.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct RollingTrigger {
    pub messages_since_last_summary: i64,
    pub messages_per_summary: i64,
    /// Messages already covered by summaries.
    pub covered_messages: i64,
    /// Raw messages outside the fresh tail (what a summary would cover now).
    pub summarizable_messages: i64,
    pub should_summarize: bool,
}

/// How a summary was obtained.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[cfg_attr(test, ts(rename = "PassLevel"))]
#[serde(rename_all = "camelCase")]
pub enum Level {
    Normal,
    Aggressive,
    Fallback,
    Capped,
}

impl SweepResult {
    /// A sweep that has done nothing (yet): `stored` tokens in the live context, before and
    /// after, and why it stopped.
    pub fn nothing_done(stored: i64, threshold: i64, stop_reason: StopReason) -> SweepResult {
        SweepResult {
            action_taken: false,
            tokens_before: stored,
            tokens_after: stored,
            threshold,
            leaf_passes: 0,
            condensed_passes: BTreeMap::new(),
            created_summary_ids: Vec::new(),
            passes_by_level: BTreeMap::new(),
            fallback_summaries: 0,
            stop_reason,
            auth_failure: false,
            relaxed_fanout: false,
            compacted_tail: false,
            duration_ms: 0.0,
            summarizer_ms: 0.0,
            fit: None,
        }
    }

    /// `target: 'fit'` when the context already fits: nothing compacted.
    pub fn fits(fit: ContextFit, stored: i64, threshold: i64) -> SweepResult {
        SweepResult {
            fit: Some(fit),
            ..SweepResult::nothing_done(stored, threshold, StopReason::Fits)
        }
    }
}
