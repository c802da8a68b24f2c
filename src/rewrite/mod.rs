//! Re-summarising an existing DAG with (possibly new) prompts: the seed's rewrite tooling
//! (lcm-tui `rewrite`). Summaries are rebuilt bottom-up, chronologically within a depth; each
//! new text is seen by the summaries rebuilt after it, so a condensed node is rebuilt from its
//! children's new content. A dry run (the default) writes nothing and previews exactly what
//! `apply` would write. Apply updates content, token count, model and the full-text rows, one
//! transaction per summary; ids, links and context items stay as they are.

mod source;

#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crate::api::{Level, PreviewOptions, Progress, RewriteEntry, RewritePreview, RewriteRequest, RewriteResult};
use crate::sql::{Db, WriteScope};
use serde::Deserialize;

use crate::compaction::escalation::{self, PassError};
use crate::compaction::Deps;
use crate::error::{LcmError, Result};
use crate::history;
use crate::prompts::{PromptDirs, PromptSet, PromptVars};
use crate::store::conversations;
use crate::store::summaries::Replacement;
use crate::summarizer::{SummarizeRequest, Summarizer, SummaryKind};
use crate::tokens;

/// Which summaries to rewrite.
#[derive(Clone, Debug, PartialEq)]
pub enum Selection {
    Summary(String),
    /// A summary and every summary beneath it (the TUI's `W`).
    Subtree(String),
    Depth(i64),
    All,
    /// Deterministic fallbacks (lcm-native's and lossless-claw's), the summaries a failed
    /// summarizer left in the DAG.
    Fallbacks,
    /// Summaries marked for repair because they stayed under `minFidelity`.
    LowFidelity,
    /// Summaries a redaction replaced with its notice, awaiting regeneration (not an option
    /// of `rewrite`: `redact` selects them).
    PendingRedaction,
}

/// A rewrite: which summaries, and how. Read from JavaScript as a `RewriteRequest`.
#[derive(Clone, Debug, Deserialize)]
#[serde(try_from = "RewriteRequest")]
pub struct RewriteOptions {
    pub selection: Selection,
    /// Write the new texts (default: a dry run that writes nothing).
    pub apply: bool,
    /// Prompt templates to use instead of the engine's for this run.
    pub prompt_dir: Option<String>,
    /// Show times in the source text (`[2026-02-17 15:37 UTC] [user] …`).
    pub timestamps: bool,
    /// Recorded in `summaries.model` for rewritten summaries (JS callbacks).
    pub model: Option<String>,
}

impl RewriteOptions {
    /// Why the summaries' texts change, as their new versions record it.
    pub fn reason(&self) -> history::Reason {
        match self.selection {
            Selection::Fallbacks => history::Reason::FallbackRepair,
            Selection::PendingRedaction => history::Reason::Redaction,
            _ => history::Reason::Rewrite,
        }
    }

    /// Regenerates, and writes, the summaries a redaction left awaiting it.
    pub fn regenerate_pending() -> RewriteOptions {
        RewriteOptions {
            selection: Selection::PendingRedaction,
            apply: true,
            prompt_dir: None,
            timestamps: true,
            model: None,
        }
    }
}

/// A summary to rewrite, as selected.
#[derive(Clone, Debug)]
struct Target {
    summary_id: String,
    kind: String,
    depth: i64,
    content: String,
    token_count: i64,
    model: String,
    earliest_at: Option<String>,
    latest_at: Option<String>,
    created_at: String,
}

fn select(conn: Db, conversation_id: i64, selection: &Selection) -> Result<Vec<Target>> {
    use crate::store::summaries::Which;
    let which = match selection {
        Selection::Summary(id) => Which::One(id),
        Selection::Subtree(id) => Which::Beneath(id),
        Selection::Depth(d) => Which::Depth(*d),
        Selection::All => Which::All,
        Selection::Fallbacks => Which::Fallbacks,
        Selection::LowFidelity => Which::NeedsRepair,
        Selection::PendingRedaction => Which::AwaitingRegeneration,
    };
    let targets: Vec<Target> = crate::store::summaries::select(conn, conversation_id, which)?
        .into_iter()
        .map(|r| Target {
            kind: match r.fields.kind {
                crate::summarizer::SummaryKind::Condensed => "condensed".to_string(),
                crate::summarizer::SummaryKind::Leaf => "leaf".to_string(),
            },
            summary_id: r.fields.summary_id,
            depth: r.fields.depth,
            content: r.fields.content,
            token_count: r.fields.token_count,
            model: r.fields.model,
            earliest_at: r.fields.earliest_at,
            latest_at: r.fields.latest_at,
            created_at: r.created_at,
        })
        .collect();
    if let (Selection::Summary(id) | Selection::Subtree(id), true) = (selection, targets.is_empty()) {
        return Err(LcmError::not_found(
            "summary",
            format!("{id} in conversation {conversation_id}"),
        ));
    }
    Ok(targets)
}

fn blocking<T>(f: impl FnOnce() -> T) -> T {
    tokio::task::block_in_place(f)
}

/// Rewrites the selected summaries of a conversation. `cancel` is checked between summaries;
/// `progress` is told before each one.
pub(crate) async fn rewrite(
    deps: &Deps,
    conversation_id: i64,
    summarizer: Arc<dyn Summarizer>,
    options: &RewriteOptions,
    cancel: &AtomicBool,
    progress: &(dyn Fn(Progress) + Send + Sync),
) -> Result<RewriteResult> {
    let started = Instant::now();
    if options.apply
        && matches!(options.selection, Selection::Fallbacks | Selection::LowFidelity)
        && summarizer.is_offline()
    {
        // The offline summary is deterministic too: writing it would unmark the fallbacks
        // without giving them a model's summary.
        return Err(LcmError::invalid_input(
            "re-summarising fallbacks or low-fidelity summaries needs a model: the offline summarizer would replace them with another deterministic text and unmark them",
        ));
    }
    let config = deps.config.clone();
    let prompts = prompts_for(deps, options)?;
    let targets = blocking(|| {
        deps.backend.read(|db| {
            conversations::get(db, conversation_id)?;
            select(db, conversation_id, &options.selection)
        })
    })?;
    let total = targets.len();
    let model = options.model.clone().unwrap_or_else(|| summarizer.model());
    // New texts so far, seen by the summaries rebuilt after them (in a dry run too).
    let mut rewritten: HashMap<String, String> = HashMap::new();
    let mut result = RewriteResult {
        conversation_id,
        apply: options.apply,
        entries: Vec::with_capacity(total),
        tokens_before: 0,
        tokens_after: 0,
        duration_ms: 0.0,
    };
    let applied_so_far = |r: &RewriteResult| {
        if options.apply {
            format!(
                "this one was not written; {} of {total} summaries were rewritten and written before it",
                r.entries.iter().filter(|e| e.applied).count()
            )
        } else {
            "nothing was written (dry run)".to_string()
        }
    };
    for (done, target) in targets.into_iter().enumerate() {
        // Progress first: a cancel from inside the progress callback stops before this summary.
        progress(Progress {
            done,
            total,
            summary_id: target.summary_id.clone(),
            depth: target.depth,
            finished: result.entries.last().cloned(),
        });
        if cancel.load(Ordering::SeqCst) {
            return Err(LcmError::Aborted(format!(
                "the rewrite was cancelled; {}",
                applied_so_far(&result)
            )));
        }
        let Prepared {
            vars,
            request,
            child_count,
            time_range,
        } = blocking(|| prepare(deps, conversation_id, &target, &rewritten, options.timestamps))?;
        let escalated = escalation::summarize(&summarizer, &prompts, &config, vars, request)
            .await
            .map_err(|e| match e {
                PassError::Failed(e) => with_context(e, &applied_so_far(&result)),
                PassError::Auth(m) => LcmError::Summarizer(format!(
                    "the provider refused the credentials ({m}); {}",
                    applied_so_far(&result)
                )),
            })?;
        // A redaction's notice gives way even to a deterministic fallback (still marked as one).
        let keep_old = escalated.level == Level::Fallback && options.selection != Selection::PendingRedaction;
        let new_content = if keep_old {
            target.content.clone()
        } else {
            escalated.content.clone()
        };
        let new_tokens = if keep_old {
            target.token_count
        } else {
            tokens::estimate(&new_content)
        };
        let writer_model = if escalated.model == summarizer.model() {
            model.clone()
        } else {
            escalated.model.clone()
        };
        // The same text by the same model again (the offline summarizer is deterministic) is
        // not a new version; a redaction's notice is always replaced.
        let unchanged = new_content == target.content
            && writer_model == target.model
            && options.selection != Selection::PendingRedaction;
        let applied = options.apply && !keep_old && !unchanged;
        if applied {
            let change = history::Change {
                reason: options.reason(),
                template: escalated.template.as_ref(),
                keep: config.max_summary_versions,
            };
            let replacement = Replacement {
                content: &new_content,
                token_count: new_tokens,
                model: &writer_model,
                fidelity: (&escalated.fidelity, escalated.needs_repair),
                change: Some(change),
            };
            blocking(|| {
                deps.backend.write(WriteScope::Conversations(&[conversation_id]), |db| {
                    crate::store::summaries::replace_content(db, deps.flags, &target.summary_id, &replacement)
                })
            })?;
        }
        rewritten.insert(target.summary_id.clone(), new_content.clone());
        result.tokens_before += target.token_count;
        result.tokens_after += new_tokens;
        result.entries.push(RewriteEntry {
            diff: crate::diff::unified(
                &format!("{} (old)", target.summary_id),
                &format!("{} (new)", target.summary_id),
                &target.content,
                &new_content,
            ),
            summary_id: target.summary_id,
            kind: target.kind,
            depth: target.depth,
            child_count,
            time_range,
            old_tokens: target.token_count,
            new_tokens,
            delta: new_tokens - target.token_count,
            old_content: target.content,
            new_content,
            level: escalated.level.as_str(),
            applied,
            fidelity: if keep_old { None } else { escalated.fidelity.score },
            needs_repair: !keep_old && escalated.needs_repair,
        });
    }
    result.duration_ms = started.elapsed().as_secs_f64() * 1000.0;
    Ok(result)
}

/// The engine's templates, or those of `options.prompt_dir` for this run.
fn prompts_for(deps: &Deps, options: &RewriteOptions) -> Result<Arc<PromptSet>> {
    Ok(match &options.prompt_dir {
        Some(dir) => Arc::new(PromptSet::load(&PromptDirs::new(Some(dir)))?),
        None => deps.prompts.clone(),
    })
}

/// What one summary's rewrite asks the summarizer, before the attempt's target is set.
struct Prepared {
    vars: PromptVars,
    request: SummarizeRequest,
    child_count: usize,
    time_range: String,
}

/// Builds `target`'s source (with the new texts of `rewritten` in place of the stored ones) and
/// the prompt variables and request made from it.
fn prepare(
    deps: &Deps,
    conversation_id: i64,
    target: &Target,
    rewritten: &HashMap<String, String>,
    timestamps: bool,
) -> Result<Prepared> {
    let config = &deps.config;
    let built = deps.backend.read(|conn| {
        source::build(
            conn,
            target,
            rewritten,
            timestamps,
            config.zone,
            config.leaf_chunk_tokens,
        )
    })?;
    let kind = if target.kind == "condensed" {
        SummaryKind::Condensed
    } else {
        SummaryKind::Leaf
    };
    let vars = PromptVars {
        target_tokens: 0,
        previous_context: built.previous_context,
        source_text: built.text.clone(),
        child_count: built.child_count as i64,
        time_range: built.time_range.clone(),
        depth: target.depth,
        aggressive: false,
        custom_instructions: config.custom_instructions.clone(),
        missing_identifiers: String::new(),
    };
    let request = SummarizeRequest {
        kind,
        depth: target.depth,
        aggressive: false,
        target_tokens: 0,
        conversation_id,
        input_tokens: 0,
        input_count: built.child_count as i64,
        time_range: built.time_range.clone(),
        source_text: built.text,
        entries: Arc::new(built.entries),
        timeout_ms: config.summary_timeout_ms,
        on_timeout: Default::default(),
    };
    Ok(Prepared {
        vars,
        request,
        child_count: built.child_count,
        time_range: built.time_range,
    })
}

/// Renders the first prompt a rewrite of `summary_id` would send, with the engine's templates
/// or those of `options.prompt_dir`. Calls no summarizer and writes nothing.
pub(crate) fn preview(
    deps: &Deps,
    conversation_id: i64,
    summary_id: &str,
    options: &RewriteOptions,
) -> Result<RewritePreview> {
    let prompts = prompts_for(deps, options)?;
    let target = deps
        .backend
        .read(|db| {
            conversations::get(db, conversation_id)?;
            select(db, conversation_id, &Selection::Summary(summary_id.to_string()))
        })?
        .pop()
        .ok_or_else(|| LcmError::not_found("summary", summary_id))?;
    let Prepared {
        vars,
        request,
        child_count,
        time_range,
    } = prepare(deps, conversation_id, &target, &HashMap::new(), options.timestamps)?;
    let source_tokens = escalation::input_tokens(&request);
    let first = escalation::attempt(&prompts, &deps.config, &vars, &request, source_tokens, false)?;
    let template = prompts.source(crate::prompts::name_for_depth(target.depth))?;
    Ok(RewritePreview {
        summary_id: target.summary_id,
        kind: target.kind,
        depth: target.depth,
        template,
        prompt_tokens: tokens::estimate(&first.prompt),
        prompt: first.prompt,
        source_tokens,
        child_count,
        time_range,
        target_tokens: first.target_tokens,
        old_tokens: target.token_count,
    })
}

/// The same error, its message extended with what happened to the run.
fn with_context(e: LcmError, context: &str) -> LcmError {
    // The context says what was written; the error's own "nothing was written" would repeat it.
    let say = |m: &str| format!("{}; {context}", m.trim_end_matches("; nothing was written"));
    match e {
        LcmError::Summarizer(m) => LcmError::Summarizer(say(&m)),
        LcmError::Timeout { ms, message } => LcmError::Timeout {
            ms,
            message: say(&message),
        },
        other => other,
    }
}

impl TryFrom<RewriteRequest> for RewriteOptions {
    type Error = String;

    fn try_from(r: RewriteRequest) -> std::result::Result<RewriteOptions, String> {
        let mut selection: Vec<Selection> = [
            r.summary_id.map(Selection::Summary),
            r.subtree.map(Selection::Subtree),
            r.depth.map(Selection::Depth),
            r.all.then_some(Selection::All),
            r.fallbacks.then_some(Selection::Fallbacks),
            r.low_fidelity.then_some(Selection::LowFidelity),
        ]
        .into_iter()
        .flatten()
        .collect();
        let selection = match selection.len() {
            1 => selection.pop().unwrap_or(Selection::All),
            0 => return Err(
                "say which summaries to rewrite: `summaryId`, `subtree`, `depth`, `all: true`, `fallbacks: true` or `lowFidelity: true`".into(),
            ),
            _ => return Err("give only one of `summaryId`, `subtree`, `depth`, `all`, `fallbacks` and `lowFidelity`".into()),
        };
        Ok(RewriteOptions {
            selection,
            apply: r.apply,
            prompt_dir: r.prompt_dir,
            timestamps: r.timestamps.unwrap_or(true),
            model: r.model,
        })
    }
}

impl PreviewOptions {
    /// The rewrite of `summary_id` these options preview.
    pub(crate) fn rewrite_of(self, summary_id: &str) -> RewriteOptions {
        RewriteOptions {
            selection: Selection::Summary(summary_id.to_string()),
            apply: false,
            prompt_dir: self.prompt_dir,
            timestamps: self.timestamps.unwrap_or(true),
            model: None,
        }
    }
}
