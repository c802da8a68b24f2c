//! The engine: one database file, its connections, configuration and prompts. Synchronous
//! methods block (the binding runs them on libuv's pool); the async ones wait on the
//! summarizer and run on tokio's runtime, doing their SQLite work with `block_in_place`.

mod group_commit;
mod locks;
mod postgres;
mod prompt_cache;
mod redaction;

use std::sync::Arc;

use serde_json::Value;

use crate::compaction::{
    self, ContextFit, Deps, Evaluation, PassOptions, PassResult, SweepOptions, SweepResult, SweepTarget,
};
use crate::config::Config;
use crate::db::{self, migrate::MigrationReport, pool::Pool, SchemaFlags};
use crate::error::{LcmError, Result};
use crate::prompts::{PromptDirs, PromptSet};
use crate::recall;
use crate::sql::Backend;
use crate::store::conversations::{self, ConversationInfo, SessionConversation, Target};
use crate::store::messages::{self, IngestOptions, IngestOutcome, StoredMessage};
use crate::store::normalize::{self, NewMessage};
use crate::store::summaries::{self, SummaryRecord};
use crate::summarizer::{Summarizer, SummaryKind};
use group_commit::GroupCommit;
use locks::ConversationLocks;

/// Records in the open's report the redactions whose scrub of the file did not complete, and
/// says so in its summary line (which the host logs).
fn note_scrubs_pending(migration: &mut MigrationReport, conn: &rusqlite::Connection) -> Result<()> {
    migration.scrubs_pending = crate::redact::scrubs_pending(conn)?;
    if migration.scrubs_pending > 0 {
        migration.summary.push_str(&format!(
            "; {} redaction(s) not yet scrubbed from the file (replaced text may remain in its free pages or WAL): run `lcm-native redact --finish`",
            migration.scrubs_pending
        ));
    }
    Ok(())
}

/// A conversation's operation lock, held for an operation's life: this process's, and on
/// PostgreSQL every gateway's.
struct Turn {
    _local: tokio::sync::OwnedMutexGuard<()>,
    _across: Option<crate::pg::pool::OperationLock>,
}

/// Longest wait for the writer to record the prompt-cache report (past it, that part of the
/// report is let go).
const PROMPT_CACHE_WRITE_WAIT: std::time::Duration = std::time::Duration::from_millis(500);

/// Live items above which a conversation assembles on a reader rather than on the writer.
const LARGE_CONTEXT_ITEMS: i64 = 10_000;

pub struct Engine {
    deps: Deps,
    migration: MigrationReport,
    locks: ConversationLocks,
    ingests: GroupCommit,
    /// Messages the last assemblies on the writer rendered (`assemble::cache`).
    rendered: std::sync::Mutex<crate::assemble::cache::RenderCache>,
    /// Conversations whose last assembly saw more than `LARGE_CONTEXT_ITEMS` live items: they
    /// assemble on a reader, so that a long assembly does not hold the writer (an ingest to
    /// another session would wait for it).
    large_contexts: std::sync::Mutex<std::collections::HashSet<i64>>,
    /// What each conversation's assemblies kept of the one before them, until written.
    prompt_cache: prompt_cache::PromptCache,
    /// Turns true at `close`: operations waiting on a summarizer or on another operation's
    /// lock end at once with E_CLOSED.
    closed: tokio::sync::watch::Sender<bool>,
}

impl Engine {
    /// Opens (creating if needed) and migrates the database of `config`, and loads the
    /// prompt templates (a broken one fails the open with E_PROMPT).
    pub fn open(config: Config) -> Result<Engine> {
        let prompts = PromptSet::load(&PromptDirs::new(config.prompt_dir.as_deref()))?;
        let (path, busy) = (&config.db_path, config.busy_timeout_ms);
        let (migration, flags, pool) = if crate::pg::is_url(path) {
            let location = crate::pg::Location::parse(path, None)?;
            let pool = crate::pg::pool::PgPool::open(&location, config.read_only, config.busy_timeout_ms)?;
            let migration = postgres::prepare(&pool, &config)?;
            (migration, postgres::FLAGS, Backend::Postgres(pool))
        } else if config.read_only {
            let conn = db::open_read_only(path, busy, config.immutable)?;
            let mut migration = db::migrate::check_current(&conn, path)?;
            let flags = SchemaFlags::read(&conn)?;
            note_scrubs_pending(&mut migration, &conn)?;
            (
                migration,
                flags,
                Backend::Sqlite(Pool::read_only(path, busy, config.immutable, conn)),
            )
        } else {
            let mut conn = db::open_connection_with(path, busy, config.wal_runs)?;
            // A damaged file gets no write, the migration's included: it opens for reading
            // when its schema is current (what can be read is still served), and every write
            // is refused with E_CORRUPT.
            // A file that needs a migration is checked first whatever its size: a migration
            // never runs on a damaged file.
            let checked = db::damage::file_bytes(path) <= db::damage::CHECK_AT_OPEN_BYTES
                || !db::migrate::up_to_date(&conn).unwrap_or(false);
            let damage = match checked {
                true => db::damage::integrity_check(&conn).map_err(|e| e.with_path(path))?,
                false => None,
            };
            let mut migration = match &damage {
                Some(found) => db::migrate::check_current(&conn, path).map_err(|_| found.clone().with_path(path))?,
                None => db::migrate::migrate(&mut conn, path)?,
            };
            let flags = SchemaFlags::read(&conn)?;
            if damage.is_none() {
                let taken = crate::store::pending::take_over(&conn, flags)?;
                migration.pending_batches_taken_over = taken.batches;
                migration.pending_summaries_published = taken.published;
                if taken.batches > 0 {
                    migration.summary.push_str(&format!(
                        "; took over {} unpublished summary batch(es) of lossless-claw, publishing {} finished summary(ies)",
                        taken.batches, taken.published
                    ));
                }
            }
            note_scrubs_pending(&mut migration, &conn)?;
            let pool = Pool::new(path, busy, conn, config.wal_runs)?;
            match damage {
                Some(found) => pool.set_damage(found),
                None if !checked => pool.check_damage_in_background(),
                None => {}
            }
            (migration, flags, Backend::Sqlite(pool))
        };
        Ok(Engine {
            deps: Deps {
                backend: Arc::new(pool),
                config: Arc::new(config),
                prompts: Arc::new(prompts),
                flags,
            },
            migration,
            locks: ConversationLocks::default(),
            ingests: GroupCommit::default(),
            rendered: Default::default(),
            large_contexts: Default::default(),
            prompt_cache: Default::default(),
            closed: tokio::sync::watch::Sender::new(false),
        })
    }

    pub fn config(&self) -> &Config {
        &self.deps.config
    }

    pub fn prompts(&self) -> &PromptSet {
        &self.deps.prompts
    }

    /// What the migration run by `open` did.
    pub fn migration(&self) -> &MigrationReport {
        &self.migration
    }

    /// The damage found in the database file (E_CORRUPT), if any: writes are refused with it.
    pub fn damage(&self) -> Option<LcmError> {
        self.deps.backend.damage()
    }

    /// Validates every message first (a malformed one rejects the call with its index and
    /// nothing is written), then stores them in one transaction.
    pub fn ingest(&self, target: &Target, messages: &[Value]) -> Result<IngestOutcome> {
        self.ingest_with(target, messages, IngestOptions::default())
    }

    /// Stores what the OpenClaw plugin spooled under `base` (see `crate::spool`).
    pub fn drain_spool(&self, base: &str) -> Result<crate::spool::drain::DrainReport> {
        crate::spool::drain::run(base, |target, messages, options| {
            self.ingest_with(target, messages, options)
        })
    }

    /// `ingest`, with a turn's advancement key or as a one-time import (see `IngestOptions`).
    pub fn ingest_with(&self, target: &Target, messages: &[Value], options: IngestOptions) -> Result<IngestOutcome> {
        self.deps.backend.check_writable()?;
        options.check()?;
        // Announced before validating, so a concurrent writer can wait for this call to join it.
        let arrival = self.ingests.arrive();
        let redactor = self.deps.config.ingest_redactor.as_ref();
        let normalized = messages
            .iter()
            .enumerate()
            .map(
                |(i, m)| match redactor.and_then(|r| crate::redact::secrets::redact_incoming(r, m)) {
                    Some((redacted, counts)) => {
                        normalize::normalize(i, &redacted).map(|n| NewMessage { redacted: counts, ..n })
                    }
                    None => normalize::normalize(i, m),
                },
            )
            .collect::<Result<Vec<_>>>()?;
        if let Backend::Postgres(pg) = &*self.deps.backend {
            // One transaction under the schema's write lock (no group commit: each call
            // commits on its own connection).
            let job = messages::IngestJob {
                target,
                messages: &normalized,
                options: &options,
            };
            let now = crate::time::now_sqlite();
            // The prompt-cache report rides in the turn's own transaction: no second
            // acquisition of the schema's write lock per turn.
            let outcome = pg.write(|c| {
                let outcome = messages::ingest_in(c.into(), self.deps.flags, &job, &now, &mut Vec::new())?;
                let mut entries = self.prompt_cache.take_all(true);
                entries.extend(
                    self.prompt_cache
                        .take(outcome.conversation_id)
                        .map(|(delta, outline)| (outcome.conversation_id, delta, outline)),
                );
                // Under a savepoint: the report is a diagnostic, never a reason to fail a turn.
                c.batch("SAVEPOINT lcm_report")?;
                let written = entries.iter().try_for_each(|(cid, delta, outline)| {
                    crate::store::prompt_cache::add(crate::sql::Db::Pg(c), *cid, delta, outline.as_deref(), &now)
                });
                match written {
                    Ok(()) => c.batch("RELEASE SAVEPOINT lcm_report")?,
                    Err(_) => c.batch("ROLLBACK TO SAVEPOINT lcm_report")?,
                }
                Ok(outcome)
            })?;
            return Ok(outcome);
        }
        let outcome = self.ingests.ingest(
            arrival,
            self.deps.backend.sqlite()?,
            self.deps.flags,
            target.clone(),
            normalized,
            options,
        )?;
        self.write_prompt_cache(outcome.conversation_id);
        Ok(outcome)
    }

    /// Writes what the prompt-cache report holds for `conversation_id` (after one of its turns
    /// was stored), and for conversations no longer followed. A failure is let go: the report
    /// is a diagnostic, never a reason to fail a turn.
    fn write_prompt_cache(&self, conversation_id: i64) {
        let mut entries = self.prompt_cache.take_all(true);
        if let Some((delta, outline)) = self.prompt_cache.take(conversation_id) {
            entries.push((conversation_id, delta, outline));
        }
        self.write_prompt_cache_entries(&entries);
    }

    fn write_prompt_cache_entries(&self, entries: &[(i64, crate::store::prompt_cache::CacheDelta, Option<String>)]) {
        if entries.is_empty() || self.deps.config.read_only {
            return;
        }
        let now = crate::time::now_sqlite();
        let write = |db: crate::sql::Db| {
            for (cid, delta, outline) in entries {
                crate::store::prompt_cache::add(db, *cid, delta, outline.as_deref(), &now)?;
            }
            Ok(())
        };
        // Never a long wait for a report (at close, another process may hold the file).
        let deadline = std::time::Instant::now() + PROMPT_CACHE_WRITE_WAIT;
        let _ = self.deps.backend.write_preserving_messages_by(deadline, write);
    }

    /// The conversation a session maps to, if there is one (nothing is created).
    pub fn find_conversation(&self, target: &Target) -> Result<Option<SessionConversation>> {
        let flags = self.deps.flags;
        self.deps
            .backend
            .read_current(|db| conversations::lookup(db, flags, target))
    }

    /// Stored messages of a conversation, in order, with their content rebuilt.
    pub fn messages(&self, conversation_id: i64, after_seq: i64, limit: i64) -> Result<Vec<StoredMessage>> {
        self.deps
            .backend
            .read(|db| messages::list(db, conversation_id, after_seq, limit))
    }

    /// Every conversation with its message, summary and context-item counts.
    pub fn conversations(&self) -> Result<Vec<ConversationInfo>> {
        let flags = self.deps.flags;
        self.deps.backend.read(|db| conversations::list(db, flags))
    }

    /// Summaries of a conversation in creation order (or newest first), optionally one depth
    /// and one page.
    pub fn summaries(&self, conversation_id: i64, filter: &summaries::SummaryFilter) -> Result<Vec<SummaryRecord>> {
        self.deps
            .backend
            .read(|db| summaries::list(db, conversation_id, filter))
    }

    /// Per-depth distribution of a conversation's stored fidelity scores.
    pub fn fidelity(&self, conversation_id: i64) -> Result<Vec<crate::fidelity::survey::DepthFidelity>> {
        self.deps.backend.read(|db| {
            conversations::get(db, conversation_id)?;
            crate::fidelity::survey::distribution(db, conversation_id)
        })
    }

    /// Scores the summaries without a score (all of them with `all`) and stores the scores.
    pub fn score_fidelity(&self, conversation_id: i64, all: bool) -> Result<crate::fidelity::survey::ScoreReport> {
        self.deps.backend.check_writable()?;
        let zone = self.deps.config.zone;
        self.deps
            .backend
            .write(|db| crate::fidelity::survey::score_conversation(db, conversation_id, all, zone))
    }

    /// The context for the next turn, within `options.token_budget`, with what it kept of the
    /// previous one (`stats.previousTokens`, `stats.keptTokens`), which the prompt-cache
    /// report adds up.
    pub fn assemble(
        &self,
        conversation_id: i64,
        options: &crate::assemble::AssembleOptions,
    ) -> Result<crate::assemble::Assembled> {
        let mut out = self.assemble_unreported(conversation_id, options)?;
        let outline = std::mem::take(&mut out.outline);
        let stored = || {
            self.deps
                .backend
                .read(|db| crate::store::prompt_cache::last_outline(db, conversation_id))
                .ok()
                .flatten()
                .map(|text| prompt_cache::parse_outline(&text))
        };
        if let Some(kept) = self
            .prompt_cache
            .observe(conversation_id, out.estimated_tokens, outline, stored)
        {
            out.stats.previous_tokens = Some(kept.previous_tokens);
            out.stats.kept_tokens = Some(kept.kept_tokens);
        }
        Ok(out)
    }

    /// `assemble`, not counted in the prompt-cache report (what compaction measures).
    fn assemble_unreported(
        &self,
        conversation_id: i64,
        options: &crate::assemble::AssembleOptions,
    ) -> Result<crate::assemble::Assembled> {
        use crate::assemble::{assemble_reusing, cache::Reuse};
        let config = &self.deps.config;
        if let Backend::Postgres(pg) = &*self.deps.backend {
            // No cache of rendered messages yet: every assembly renders what it keeps.
            return pg.read(|c| {
                conversations::get(c, conversation_id)?;
                let (out, _) =
                    crate::assemble::assemble_in(c.into(), config, conversation_id, options, Default::default())?;
                Ok(out)
            });
        }
        let large = || self.large_contexts.lock().unwrap_or_else(|e| e.into_inner());
        let out = if large().contains(&conversation_id) {
            self.deps
                .backend
                .sqlite()?
                .read(|conn| assemble_reusing(conn, config, conversation_id, options, None))?
        } else {
            self.deps
                .backend
                .sqlite()?
                .read_current_counted(|conn, rewrites| match rewrites {
                    // On the writer: only one such read runs at a time (it holds the writer's lock).
                    Some(rewrites) => {
                        // After a panic mid-assembly, start over rather than trust what it left.
                        let mut cache = self.rendered.lock().unwrap_or_else(|e| {
                            self.rendered.clear_poison();
                            let mut cache = e.into_inner();
                            *cache = Default::default();
                            cache
                        });
                        let reuse = Reuse {
                            cache: &mut cache,
                            rewrites,
                        };
                        assemble_reusing(conn, config, conversation_id, options, Some(reuse))
                    }
                    None => assemble_reusing(conn, config, conversation_id, options, None),
                })?
        };
        if out.stats.total_context_items > LARGE_CONTEXT_ITEMS {
            large().insert(conversation_id);
        } else {
            large().remove(&conversation_id);
        }
        Ok(out)
    }

    /// The live context items in order.
    pub fn context(&self, conversation_id: i64) -> Result<Vec<crate::live::ContextEntry>> {
        self.deps.backend.read(|db| {
            conversations::get(db, conversation_id)?;
            Ok(crate::live::LiveContext::load(db, conversation_id)?.entries())
        })
    }

    /// Threshold, leaf-trigger and rolling-trigger decisions.
    pub fn evaluate(&self, conversation_id: i64, token_budget: i64, observed: Option<i64>) -> Result<Evaluation> {
        self.deps
            .backend
            .read_current(|db| compaction::evaluate(db, &self.deps.config, conversation_id, token_budget, observed))
    }

    /// Finds messages and summaries of one conversation (or all) by text, regex or substring.
    pub fn grep(&self, conversation_id: Option<i64>, options: &recall::GrepOptions) -> Result<recall::GrepResult> {
        let trigram = self.deps.flags.has_cjk_fts;
        self.deps
            .backend
            .read(|db| recall::grep(db, trigram, conversation_id, options))
    }

    /// One summary or message, and where it sits in the DAG.
    pub fn describe(&self, id: &recall::ItemId) -> Result<recall::Description> {
        self.deps
            .backend
            .read(|db| recall::describe(db, id, self.deps.config.zone))
    }

    /// What a summary stands for, walked down within a token budget.
    pub fn expand(&self, summary_id: &str, options: &recall::ExpandOptions) -> Result<recall::Expansion> {
        self.deps.backend.read(|db| recall::expand(db, summary_id, options))
    }

    /// Checks the invariants (of one conversation, or all) and digests the contents.
    pub fn verify(&self, conversation_id: Option<i64>) -> Result<crate::store::verify::VerifyReport> {
        self.deps
            .backend
            .read_fresh(|db| crate::store::verify::verify(db, conversation_id))
    }

    /// One pass: a leaf pass (with incremental condensation up to `incrementalMaxDepth`) or a
    /// condensed pass; waits for other mutating operations on the conversation.
    pub async fn pass(
        &self,
        conversation_id: i64,
        kind: SummaryKind,
        summarizer: Arc<dyn Summarizer>,
        options: PassOptions,
    ) -> Result<Option<PassResult>> {
        let (_turn, summarizer) = self.mutation(conversation_id, summarizer).await?;
        match kind {
            SummaryKind::Leaf => compaction::leaf_pass(&self.deps, conversation_id, summarizer, options).await,
            SummaryKind::Condensed => {
                compaction::condensed_pass(&self.deps, conversation_id, summarizer, options).await
            }
        }
    }

    /// A bounded full sweep; waits for other mutating operations on the conversation.
    pub async fn compact(
        &self,
        conversation_id: i64,
        summarizer: Arc<dyn Summarizer>,
        options: SweepOptions,
    ) -> Result<SweepResult> {
        let (_turn, summarizer) = self.mutation(conversation_id, summarizer).await?;
        use tokio::task::block_in_place as blocking;
        let budget = options.token_budget;
        // Reads off the runtime's worker thread, as the sweep's own are.
        let before = blocking(|| self.fit_of(conversation_id, budget))?;
        if options.target == SweepTarget::Fit && !options.force && before.fits {
            let now = blocking(|| self.evaluate(conversation_id, budget, None))?;
            return Ok(SweepResult::fits(before, now.stored_tokens, now.threshold));
        }
        let mut result = compaction::compact(&self.deps, conversation_id, summarizer, options).await?;
        if !result.created_summary_ids.is_empty() {
            self.prompt_cache.compacted(conversation_id);
        }
        result.fit = Some(ContextFit {
            tokens_before: before.tokens_after,
            ..blocking(|| self.fit_of(conversation_id, budget))?
        });
        Ok(result)
    }

    /// What `assemble` would send for `token_budget` now, as a `ContextFit` whose before and
    /// after are both now.
    fn fit_of(&self, conversation_id: i64, token_budget: i64) -> Result<ContextFit> {
        let assembled = self.assemble_unreported(
            conversation_id,
            &crate::assemble::AssembleOptions {
                token_budget,
                fresh_tail_count: None,
                presentation: None,
            },
        )?;
        let s = &assembled.stats;
        Ok(ContextFit {
            tokens_before: assembled.estimated_tokens,
            tokens_after: assembled.estimated_tokens,
            fits: assembled.estimated_tokens <= token_budget && !s.fresh_tail_over_budget,
            fresh_tail_items: s.fresh_tail_items,
            fresh_tail_tokens: s.fresh_tail_tokens,
        })
    }

    /// What every mutating operation starts with: a writable file, the conversation's lock,
    /// and a summarizer whose calls end when the engine closes.
    async fn mutation(
        &self,
        conversation_id: i64,
        summarizer: Arc<dyn Summarizer>,
    ) -> Result<(Turn, Arc<dyn Summarizer>)> {
        self.deps.backend.check_writable()?;
        let turn = self.turn(conversation_id).await?;
        Ok((turn, self.until_closed(summarizer)))
    }

    /// Every version of a summary's text, oldest first (`history::list`).
    pub fn history(&self, summary_id: &str) -> Result<Vec<crate::history::SummaryVersion>> {
        self.deps.backend.read(|db| crate::history::list(db, summary_id))
    }

    /// Makes an earlier version of a summary its text again, as a new version; waits for other
    /// mutating operations on the summary's conversation.
    pub async fn rollback(&self, summary_id: &str, version: i64) -> Result<crate::history::SummaryVersion> {
        self.deps.backend.check_writable()?;
        let conversation_id = self
            .deps
            .backend
            .read(|db| Ok(summaries::get(db, summary_id)?.conversation_id))?;
        let _turn = self.turn(conversation_id).await?;
        let (flags, zone, keep) = (
            self.deps.flags,
            self.deps.config.zone,
            self.deps.config.max_summary_versions,
        );
        tokio::task::block_in_place(|| {
            self.deps
                .backend
                .write(|db| crate::history::rollback(db, flags, zone, keep, summary_id, version))
        })
    }

    /// OpenClaw's `/new` or `/reset` for the session `target` names (`store::lifecycle`):
    /// waits for other mutating operations on its conversation; `none` when it has none.
    pub async fn reset_session(
        &self,
        target: &Target,
        reason: crate::store::lifecycle::ResetReason,
    ) -> Result<crate::store::lifecycle::SessionReset> {
        self.deps.backend.check_writable()?;
        let Some(found) = self.find_conversation(target)? else {
            return Ok(crate::store::lifecycle::SessionReset {
                action: "none".into(),
                conversation_id: None,
                replacement_id: None,
                context_items_removed: 0,
            });
        };
        let _turn = self.turn(found.conversation_id).await?;
        let flags = self.deps.flags;
        let now = crate::time::now_sqlite();
        tokio::task::block_in_place(|| {
            self.deps.backend.write_preserving_messages(|db| {
                crate::store::lifecycle::reset(db, flags, found.conversation_id, reason, &now)
            })
        })
    }

    /// Redacts text from messages and every summary built over them (see `redact`): waits for,
    /// and holds off, other mutating operations on every conversation in scope. `progress` is
    /// told before each summary is regenerated; `cancel` stops between two of them (what was
    /// regenerated stays; the rest stay marked and the next `redact` finishes them).
    pub async fn redact(
        &self,
        options: &crate::redact::RedactOptions,
        summarizer: Arc<dyn Summarizer>,
        cancel: &std::sync::atomic::AtomicBool,
        progress: &(dyn Fn(crate::rewrite::Progress) + Send + Sync),
    ) -> Result<crate::redact::RedactionResult> {
        let started = std::time::Instant::now();
        let scope = redaction::scope(&self.deps, options)?;
        let mut turns = Vec::with_capacity(scope.conversations.len());
        for id in &scope.conversations {
            turns.push(self.turn(*id).await?);
        }
        let summarizer = self.until_closed(summarizer);
        redaction::run(&self.deps, options, scope, summarizer, cancel, progress, started).await
    }

    /// Re-summarises the selected summaries bottom-up (a dry run unless `options.apply`). An
    /// applying run waits for, and holds off, other mutating operations on the conversation.
    pub async fn rewrite(
        &self,
        conversation_id: i64,
        summarizer: Arc<dyn Summarizer>,
        options: &crate::rewrite::RewriteOptions,
        cancel: &std::sync::atomic::AtomicBool,
        progress: &(dyn Fn(crate::rewrite::Progress) + Send + Sync),
    ) -> Result<crate::rewrite::RewriteResult> {
        if options.apply {
            self.deps.backend.check_writable()?;
        }
        // A dry run writes nothing: it must not hold compaction off for the length of its LLM calls.
        let _turn = match options.apply {
            true => Some(self.turn(conversation_id).await?),
            false => None,
        };
        let summarizer = self.until_closed(summarizer);
        crate::rewrite::rewrite(&self.deps, conversation_id, summarizer, options, cancel, progress).await
    }

    /// The first prompt a rewrite of one summary would send (template, rendered prompt, token
    /// estimates), without sending it.
    pub fn rewrite_preview(
        &self,
        conversation_id: i64,
        summary_id: &str,
        options: &crate::rewrite::RewriteOptions,
    ) -> Result<crate::rewrite::RewritePreview> {
        crate::rewrite::preview(&self.deps, conversation_id, summary_id, options)
    }

    /// Every summary of a conversation with its inputs, consumer, liveness and message span.
    pub fn dag(&self, conversation_id: i64) -> Result<Vec<crate::store::dag::DagNode>> {
        self.deps
            .backend
            .read(|db| crate::store::dag::read(db, conversation_id))
    }

    /// The conversation's operation lock, waited for until `lockTimeoutMs` (E_BUSY) or until
    /// the engine closes (E_CLOSED).
    async fn turn(&self, conversation_id: i64) -> Result<Turn> {
        let mut closed = self.closed.subscribe();
        let timeout_ms = self.deps.config.lock_timeout_ms;
        let local = tokio::select! {
            guard = self.locks.acquire(conversation_id, timeout_ms) => guard,
            _ = closed.wait_for(|c| *c) => Err(crate::error::LcmError::Closed),
        }?;
        // On PostgreSQL, other gateways' operations too (this process's wait for its own came
        // first, so one process asks the server once).
        let wait = std::time::Duration::from_millis(timeout_ms.max(0) as u64);
        let across = tokio::task::block_in_place(|| self.deps.backend.operation_lock(conversation_id, wait))?;
        Ok(Turn {
            _local: local,
            _across: across,
        })
    }

    fn until_closed(&self, summarizer: Arc<dyn Summarizer>) -> Arc<dyn Summarizer> {
        Arc::new(crate::summarizer::UntilClosed {
            inner: summarizer,
            closed: self.closed.subscribe(),
        })
    }

    /// Writes a consistent copy of the whole database to `out` (a new file): SQLite's
    /// `VACUUM INTO` from one read snapshot, so turns committed up to then are in it, whatever
    /// is still in the log, while writers carry on. Returns the copy's size in bytes.
    /// On PostgreSQL: a copy into a new SQLite file (`lcm-native copy`), read from one snapshot
    /// and checked table by table.
    pub fn backup(&self, out: &str) -> Result<u64> {
        check_new_file(out)?;
        if let Backend::Postgres(_) = &*self.deps.backend {
            crate::copy::run(crate::copy::CopyOptions::new(&self.deps.config.db_path, out))?;
            return std::fs::metadata(out)
                .map(|m| m.len())
                .map_err(|e| LcmError::io(out, e));
        }
        let conn = self.deps.backend.sqlite()?.fresh_connection()?;
        db::vacuum_into(&conn, out)
    }

    /// Closes the connections; later calls fail with E_CLOSED, and calls in flight end with
    /// E_CLOSED at their next wait (a summarizer call, another operation's lock).
    pub fn close(&self) -> bool {
        if !self.deps.backend.is_closed() {
            self.write_prompt_cache_entries(&self.prompt_cache.take_all(false));
        }
        self.closed.send_replace(true);
        let was_open = self.deps.backend.close();
        // What assemblies rendered goes with the connections (it can be megabytes), not when
        // the host lets go of the engine.
        *self.rendered.lock().unwrap_or_else(|e| e.into_inner()) = Default::default();
        was_open
    }
}

/// Options of `migrate`.
#[derive(Clone, Copy, Debug, serde::Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct MigrateOptions {
    /// SQLite busy timeout while the migration waits for the file. Default 30000.
    #[serde(
        default = "MigrateOptions::default_busy",
        skip_serializing,
        deserialize_with = "crate::input::non_negative"
    )]
    pub busy_timeout_ms: i64,
}

impl MigrateOptions {
    fn default_busy() -> i64 {
        30_000
    }
}

impl Default for MigrateOptions {
    fn default() -> MigrateOptions {
        MigrateOptions {
            busy_timeout_ms: MigrateOptions::default_busy(),
        }
    }
}

/// Runs the migration on `path` and closes the file again.
pub(crate) fn migrate_file(path: &str, busy_timeout_ms: i64) -> Result<MigrationReport> {
    let mut conn = db::open_connection(path, busy_timeout_ms)?;
    db::migrate::migrate(&mut conn, path)
}

#[cfg(test)]
impl Engine {
    pub(crate) fn test_deps(&self) -> Deps {
        self.deps.clone()
    }
}

#[cfg(test)]
pub(crate) mod tests;

#[cfg(test)]
mod cache_tests;
#[cfg(test)]
mod damage_tests;
#[cfg(test)]
mod host_tests;
#[cfg(test)]
mod lifecycle_tests;

/// Refuses a copy's destination that exists or whose directory does not.
fn check_new_file(out: &str) -> Result<()> {
    let target = std::path::Path::new(out);
    if target.exists() {
        return Err(LcmError::invalid_input(format!(
            "{out} exists already; a copy never overwrites a file (choose a new path)"
        )));
    }
    if let Some(dir) = target.parent().filter(|d| !d.as_os_str().is_empty() && !d.is_dir()) {
        return Err(LcmError::Io {
            path: Some(dir.display().to_string()),
            sqlite: None,
            message: format!(
                "the directory {} does not exist; create it or choose another path",
                dir.display()
            ),
        });
    }
    Ok(())
}

/// Copies the database at `path` to `out` (a new file) without writing to `path` and without
/// reading its schema: a lossless-claw file that an engine could only open after upgrading
/// it can be copied, and the copy upgraded instead (the CLI's read commands do so).
pub(crate) fn snapshot_file(path: &str, out: &str, busy_timeout_ms: i64) -> Result<u64> {
    check_new_file(out)?;
    let conn = db::open_read_only(path, busy_timeout_ms, false)?;
    db::vacuum_into(&conn, out).map_err(|e| e.with_path(path))
}
