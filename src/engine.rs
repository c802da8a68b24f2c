//! The engine: one database file, its connections, configuration and prompts. Synchronous
//! methods block (the binding runs them on libuv's pool); the async ones wait on the
//! summarizer and run on tokio's runtime, doing their SQLite work with `block_in_place`.

mod assembly;
mod files;
mod folded;
mod group_commit;
mod locks;
mod open;
mod postgres;
mod prompt_cache;
mod recalls;
mod redaction;

use crate::api::{
    AssembleOptions, ContextFit, DepthFidelity, Description, DrainReport, Evaluation, ExpandOptions, Expansion,
    GrepOptions, GrepResult, IngestOptions, PassOptions, PassResult, Progress, RedactionResult, RewritePreview,
    RewriteResult, ScoreReport, SummaryFilter, SweepOptions, SweepResult, SweepTarget,
};
use crate::assemble::Assembled;
use std::sync::Arc;

use serde_json::Value;

use crate::compaction::{self, Deps};
use crate::config::Config;
use crate::db::migrate::MigrationReport;
use crate::error::{LcmError, Result};
use crate::prompts::{PromptDirs, PromptSet};
use crate::recall;
use crate::sql::{Db, WriteScope};
use crate::store::conversations::{self, ConversationInfo, SessionConversation, Target};
use crate::store::messages::{self, IngestOutcome, StoredMessage};
use crate::store::summaries::{self, SummaryRecord};
use crate::summarizer::{Summarizer, SummaryKind};
pub(crate) use files::{migrate_file, snapshot_file};
use group_commit::GroupCommit;
use locks::{ConversationLocks, Turn};

pub struct Engine {
    deps: Deps,
    migration: MigrationReport,
    locks: ConversationLocks,
    ingests: GroupCommit,
    /// What assemblies keep between calls (rendered messages, where each conversation assembles).
    assemblies: assembly::Assemblies,
    /// What each conversation's assemblies kept of the one before them, until written.
    prompt_cache: prompt_cache::PromptCache,
    /// The `<recalled>` block of each conversation's pending turn, until its turn is stored.
    recalls: recalls::Recalls,
    /// Turns true at `close`: operations waiting on a summarizer or on another operation's
    /// lock end at once with E_CLOSED.
    closed: tokio::sync::watch::Sender<bool>,
}

impl Engine {
    /// Opens (creating if needed) and migrates the database of `config`, and loads the
    /// prompt templates (a broken one fails the open with E_PROMPT).
    pub fn open(config: Config) -> Result<Engine> {
        let prompts = PromptSet::load(&PromptDirs::new(config.prompt_dir.as_deref()))?;
        let (migration, flags, pool) = open::backend(&config)?;
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
            assemblies: Default::default(),
            prompt_cache: Default::default(),
            recalls: Default::default(),
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

    /// What the integrity check of the database file came to.
    pub fn integrity(&self) -> crate::db::damage::Integrity {
        self.deps.backend.integrity()
    }

    /// Validates every message first (a malformed one rejects the call with its index and
    /// nothing is written), then stores them in one transaction.
    pub fn ingest(&self, target: &Target, messages: &[Value]) -> Result<IngestOutcome> {
        self.ingest_with(target, messages, IngestOptions::default())
    }

    /// Stores what the OpenClaw plugin spooled under `base` (see `crate::spool`).
    pub fn drain_spool(&self, base: &str) -> Result<DrainReport> {
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
        let normalized = crate::redact::secrets::normalize_incoming(redactor, messages)?;
        // The prompt-cache report of the group's conversations rides in its transaction: no
        // second write per turn.
        // And each conversation's pending `<recalled>` block, anchored where it was sent.
        let report = |db: crate::sql::Db, outcomes: &[IngestOutcome]| {
            self.prompt_cache.ride_along(db, outcomes);
            self.recalls.ride_along(db, outcomes);
        };
        let door = group_commit::Door {
            backend: &self.deps.backend,
            flags: self.deps.flags,
            after: &report,
        };
        self.ingests
            .ingest(arrival, &door, target.clone(), normalized, options.into())
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
    pub fn summaries(&self, conversation_id: i64, filter: &SummaryFilter) -> Result<Vec<SummaryRecord>> {
        self.deps
            .backend
            .read(|db| summaries::list(db, conversation_id, filter.listing()))
    }

    /// Per-depth distribution of a conversation's stored fidelity scores.
    pub fn fidelity(&self, conversation_id: i64) -> Result<Vec<DepthFidelity>> {
        self.deps.backend.read(|db| {
            conversations::get(db, conversation_id)?;
            crate::fidelity::survey::distribution(db, conversation_id)
        })
    }

    /// Scores the summaries without a score (all of them with `all`) and stores the scores.
    pub fn score_fidelity(&self, conversation_id: i64, all: bool) -> Result<ScoreReport> {
        self.deps.backend.check_writable()?;
        let zone = self.deps.config.zone;
        self.deps
            .backend
            .write(WriteScope::Conversations(&[conversation_id]), |db| {
                crate::fidelity::survey::score_conversation(db, conversation_id, all, zone)
            })
    }

    /// The context for the next turn, within `options.token_budget`, with what it kept of the
    /// previous one (`stats.previousTokens`, `stats.keptTokens`), which the prompt-cache
    /// report adds up.
    pub fn assemble(&self, conversation_id: i64, options: &AssembleOptions) -> Result<Assembled> {
        let mut out = self
            .assemblies
            .assemble(&self.deps, conversation_id, options, Some(&self.recalls))?;
        self.prompt_cache.record(&self.deps.backend, conversation_id, &mut out);
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
    pub fn grep(&self, conversation_id: Option<i64>, options: &GrepOptions) -> Result<GrepResult> {
        let trigram = self.deps.flags.has_cjk_fts;
        self.deps
            .backend
            .read(|db| recall::grep(db, trigram, conversation_id, options))
    }

    /// One summary or message, and where it sits in the DAG.
    pub fn describe(&self, id: &recall::ItemId) -> Result<Description> {
        self.deps
            .backend
            .read(|db| recall::describe(db, id, self.deps.config.zone))
    }

    /// What a summary stands for, walked down within a token budget.
    pub fn expand(&self, summary_id: &str, options: &ExpandOptions) -> Result<Expansion> {
        self.deps.backend.read(|db| recall::expand(db, summary_id, options))
    }

    /// Checks the invariants (of one conversation, or all) and digests the contents.
    pub fn verify(&self, conversation_id: Option<i64>) -> Result<crate::store::verify::VerifyReport> {
        self.deps
            .backend
            .read_fresh(|db| crate::store::verify::verify(db, conversation_id))
    }

    /// Folds lossless-claw's re-imported copies into the rows they copy (`store::copies::fold`):
    /// a dry run, which reads only, unless `options.apply`. An applying run waits for, and
    /// holds off, other mutating operations on each conversation with copies, writes
    /// `options.backup` first, then folds them all in one transaction. E_NOT_FOUND for an
    /// unknown `conversationId`.
    pub(crate) async fn fold_copies(&self, options: &crate::api::FoldOptions) -> Result<crate::api::FoldReport> {
        use crate::store::copies::{fold, FoldedCopies};
        let all = |db: Db, apply: bool, ids: &[i64]| -> Result<FoldedCopies> {
            let mut out = FoldedCopies::default();
            for id in ids {
                out.add(fold(db, *id, apply)?);
            }
            Ok(out)
        };
        let ids: Vec<i64> = self.deps.backend.read(|db| match options.conversation_id {
            Some(id) => Ok(vec![conversations::get(db, id)?.conversation_id]),
            None => conversations::ids(db),
        })?;
        let found = tokio::task::block_in_place(|| self.deps.backend.read_fresh(|db| all(db, false, &ids)))?;
        let mut with_copies: Vec<i64> = found.copies.iter().map(|c| c.conversation_id).collect();
        with_copies.dedup();
        if !options.apply || found.folded.is_empty() {
            return Ok(crate::api::FoldReport {
                applied: false,
                backup: None,
                result: found,
            });
        }
        self.deps.backend.check_writable()?;
        let mut turns = Vec::with_capacity(with_copies.len());
        for id in &with_copies {
            turns.push(self.turn(*id).await?);
        }
        // The backup (a whole-file copy) and the fold block: off the runtime's worker.
        let result = tokio::task::block_in_place(|| {
            if let Some(out) = &options.backup {
                self.backup(out)?;
            }
            self.deps.backend.write(WriteScope::Conversations(&with_copies), |db| {
                all(db, true, &with_copies)
            })
        })?;
        for id in &with_copies {
            self.recalls.forget(*id);
        }
        Ok(crate::api::FoldReport {
            applied: !result.folded.is_empty(),
            backup: options.backup.clone(),
            result,
        })
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
        let before = blocking(|| self.assemblies.fit(&self.deps, conversation_id, budget))?;
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
            ..blocking(|| self.assemblies.fit(&self.deps, conversation_id, budget))?
        });
        Ok(result)
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
        let summarizer = self.until_closed(summarizer, &[&turn]);
        Ok((turn, summarizer))
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
                .write(WriteScope::Conversations(&[conversation_id]), |db| {
                    crate::history::rollback(db, flags, zone, keep, summary_id, version)
                })
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
            // A reset changes which conversation the session names.
            self.deps.backend.write_preserving_messages(WriteScope::Schema, |db| {
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
        progress: &(dyn Fn(Progress) + Send + Sync),
    ) -> Result<RedactionResult> {
        let started = std::time::Instant::now();
        let scope = redaction::scope(&self.deps, options)?;
        let mut turns = Vec::with_capacity(scope.conversations.len());
        for id in &scope.conversations {
            turns.push(self.turn(*id).await?);
        }
        let summarizer = self.until_closed(summarizer, &turns.iter().collect::<Vec<_>>());
        // A pending `<recalled>` block may quote the text: made again from the redacted one.
        self.recalls.forget_all();
        let report = redaction::run(&self.deps, options, scope, summarizer, cancel, progress, started).await;
        // And what a recall during the run made from the text before it.
        self.recalls.forget_all();
        report
    }

    /// Re-summarises the selected summaries bottom-up (a dry run unless `options.apply`). An
    /// applying run waits for, and holds off, other mutating operations on the conversation.
    pub async fn rewrite(
        &self,
        conversation_id: i64,
        summarizer: Arc<dyn Summarizer>,
        options: &crate::rewrite::RewriteOptions,
        cancel: &std::sync::atomic::AtomicBool,
        progress: &(dyn Fn(Progress) + Send + Sync),
    ) -> Result<RewriteResult> {
        if options.apply {
            self.deps.backend.check_writable()?;
        }
        // A dry run writes nothing: it must not hold compaction off for the length of its LLM calls.
        let _turn = match options.apply {
            true => Some(self.turn(conversation_id).await?),
            false => None,
        };
        let summarizer = self.until_closed(summarizer, &_turn.iter().collect::<Vec<_>>());
        crate::rewrite::rewrite(&self.deps, conversation_id, summarizer, options, cancel, progress).await
    }

    /// The first prompt a rewrite of one summary would send (template, rendered prompt, token
    /// estimates), without sending it.
    pub fn rewrite_preview(
        &self,
        conversation_id: i64,
        summary_id: &str,
        options: &crate::rewrite::RewriteOptions,
    ) -> Result<RewritePreview> {
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
        let timeout_ms = self.deps.config.lock_timeout_ms;
        let closed = self.closed.subscribe();
        self.locks
            .turn(&self.deps.backend, conversation_id, timeout_ms, closed)
            .await
    }

    /// `summarizer`, its calls ended when the engine closes or one of `turns`' locks is lost.
    fn until_closed(&self, summarizer: Arc<dyn Summarizer>, turns: &[&Turn]) -> Arc<dyn Summarizer> {
        Arc::new(crate::summarizer::UntilClosed {
            inner: summarizer,
            closed: self.closed.subscribe(),
            lost: turns.iter().filter_map(|t| t.lost()).collect(),
        })
    }

    /// A consistent copy of the whole database at `out` (a new file) while writers carry on;
    /// its size in bytes (`files::backup`).
    pub fn backup(&self, out: &str) -> Result<u64> {
        files::backup(&self.deps.backend, &self.deps.config.db_path, out)
    }

    /// Closes the connections; later calls fail with E_CLOSED, and calls in flight end with
    /// E_CLOSED at their next wait (a summarizer call, another operation's lock).
    pub fn close(&self) -> bool {
        if !self.deps.backend.is_closed() && !self.deps.config.read_only {
            self.prompt_cache.write_all(&self.deps.backend);
        }
        self.closed.send_replace(true);
        let was_open = self.deps.backend.close();
        // What assemblies rendered goes with the connections (it can be megabytes), not when
        // the host lets go of the engine.
        self.assemblies.forget();
        was_open
    }
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
#[cfg(test)]
mod recall_tests;
