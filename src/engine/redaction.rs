//! A redaction from start to end, as `Engine::redact` runs it while it holds every conversation
//! in scope: the plugin's spool first (so no drain stores the old text in between), then the
//! messages and the notices in one transaction, then each waiting summary regenerated
//! (`rewrite`), then the storage scrubbed. The steps are `redact`'s; this file orders them
//! (here, above `rewrite` and `compaction`, because `redact`'s text rules sit below both).

use crate::api::{Progress, RedactionResult};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Instant;

use tokio::task::block_in_place as blocking;

use crate::compaction::Deps;
use crate::error::{LcmError, Result};
use crate::redact::{self as steps, RedactOptions};
use crate::sql::WriteScope;
use crate::summarizer::Summarizer;

/// The conversations a redaction touches, and the scrubs an earlier one left to do.
pub(crate) struct Scope {
    pub conversations: Vec<i64>,
    scrubs: i64,
}

/// What `options` reaches (the conversations whose summaries still await regeneration, with
/// `finish`). E_INVALID_INPUT on a file without the redaction tables.
pub(crate) fn scope(deps: &Deps, options: &RedactOptions) -> Result<Scope> {
    deps.backend.check_writable()?;
    if !deps.flags.has_versions {
        return Err(LcmError::invalid_input(
            "this file has no redaction tables (open it writable once to migrate it)",
        ));
    }
    deps.backend.read_current(|db| {
        let conversations = match options.finish {
            true => steps::conversations_awaiting(db, options.conversation_id)?,
            false => steps::conversations_in_scope(db, options)?,
        };
        Ok(Scope {
            conversations,
            scrubs: steps::scrubs_pending(db)?,
        })
    })
}

/// Runs the redaction over `scope` (whose conversations the caller holds); `started` is when
/// the caller began (the result's duration counts from it). `progress` is told before each
/// summary is regenerated; `cancel` stops between two of them (what was regenerated stays; the
/// rest stay marked and the next `redact` finishes them).
pub(crate) async fn run(
    deps: &Deps,
    options: &RedactOptions,
    scope: Scope,
    summarizer: Arc<dyn Summarizer>,
    cancel: &AtomicBool,
    progress: &(dyn Fn(Progress) + Send + Sync),
    started: Instant,
) -> Result<RedactionResult> {
    let (flags, db_path) = (deps.flags, &deps.config.db_path);
    let conversations = &scope.conversations;
    // Turns the plugin spooled beside the file would bring the text back when stored: they
    // are redacted first, and the spool's drain lock is held until the database is, so no
    // drain stores one in between. (The plugin keeps a PostgreSQL database's spool in its
    // state directory, under a name of its own: its turns are stored, and so searched and
    // redacted, at its next call.)
    let spool_scrub = match options.redactor.pattern.is_some() && !crate::pg::is_url(db_path) {
        true => Some(
            blocking(|| crate::spool::scrub::scrub_holding(db_path, &options.redactor))
                .map_err(|e| LcmError::io(db_path, format!("redacting the spool beside it: {e}")))?,
        ),
        false => None,
    };
    let mut result = match options.finish {
        true => RedactionResult {
            conversation_ids: conversations.clone(),
            ..Default::default()
        },
        false => blocking(|| {
            deps.backend.write(WriteScope::Schema, |db| {
                steps::redact_messages(db, flags, options, conversations)
            })
        })?,
    };
    if let Some((spooled, drain_lock)) = spool_scrub {
        drop(drain_lock);
        result.spooled_matches = spooled.matches;
        result.spool_busy = spooled.busy;
    }
    let waiting = blocking(|| deps.backend.read_current(|db| steps::pending(db, conversations)))?;
    let found = result.redaction_id.is_some() || result.spooled_matches > 0;
    if !options.finish && !found && waiting == 0 && scope.scrubs == 0 {
        return Err(LcmError::invalid_input(match options.redactor.pattern {
            Some(_) => "the pattern matches nothing in the messages in scope",
            None => "the messages hold no text to redact",
        }));
    }
    if !options.mark_only && waiting > 0 {
        let rewrite = crate::rewrite::RewriteOptions::regenerate_pending();
        for id in conversations {
            let done = crate::rewrite::rewrite(deps, *id, summarizer.clone(), &rewrite, cancel, progress).await;
            match done {
                Ok(r) => result.regenerated += r.entries.iter().filter(|e| e.applied).count(),
                // Stopped: what was regenerated stays, the rest stays marked.
                Err(LcmError::Aborted(_)) => break,
                Err(e) => return Err(e),
            }
        }
    }
    result.pending = blocking(|| {
        deps.backend.write(WriteScope::Schema, |db| {
            steps::complete(db)?;
            steps::pending(db, conversations)
        })
    })?;
    // The text is replaced (committed above) whatever happens to the scrub: a scrub that
    // fails (a full disk at VACUUM, a lock another gateway holds) is reported in the result
    // and stays recorded for the next `redact`.
    match blocking(|| steps::scrub_storage(&deps.backend, flags, deps.config.busy_timeout_ms)) {
        Ok(emptied) => result.checkpointed = emptied,
        Err(e) => result.scrub_error = Some(format!("{}: {e}", e.code())),
    }
    result.scrub_pending = blocking(|| deps.backend.read_current(|db| steps::scrubs_pending(db)))? > 0;
    result.duration_ms = started.elapsed().as_secs_f64() * 1000.0;
    Ok(result)
}
