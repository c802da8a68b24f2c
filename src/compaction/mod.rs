//! Compaction: leaf passes (raw messages → a depth-0 summary), condensed passes (a same-depth
//! run of summaries → one node a level deeper) and bounded sweeps of both.
//!
//! A pass is planned on an in-memory model of the live context, the summarizer is called with
//! no lock or transaction held, and the result is written in one transaction that first
//! checks its inputs are still live. A sweep keeps the model across passes, so it never
//! re-reads the history; while the summarizer answers quickly, consecutive passes are written
//! together (renumbering the context once per group, not once per pass).
//!
//! Over 600 lines on purpose: `Run` is one state machine (the model, the pending group, the
//! contents cache) that the leaf pass, the condensed pass and the sweep all drive; split
//! across files its invariants would be too. Options and results are `api::compaction`'s;
//! `evaluate` lives apart.

pub(crate) mod escalation;
pub(crate) mod evaluate;
pub(crate) mod write;

#[cfg(test)]
pub(crate) mod tests;

use crate::api::{Level, PassFailure, PassOptions, PassResult, StopReason, SweepOptions, SweepResult, SweepTarget};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::config::Config;
use crate::db::SchemaFlags;
use crate::error::{LcmError, Result};
use crate::live::{self, Item, ItemRef, LiveContext, TailRule};
use crate::prompts::{PromptSet, PromptVars};
use crate::source;
use crate::store::conversations;
use crate::store::summaries::{NewSummary, SummaryFields};
use crate::summarizer::entries::SourceEntry;
use crate::summarizer::{SummarizeRequest, Summarizer, SummaryKind};
use crate::time;
use crate::tokens;
use escalation::{Escalated, PassError};
use write::Baseline;

pub(crate) use evaluate::evaluate;

/// Write a group once it holds this many passes, or once its first pass waited this long, or
/// four times as long as the last write took: a write rewrites every context row after the
/// first change, so on a long uncompacted history it is spaced out to stay a bounded share
/// of the sweep. With a real LLM (seconds per call) every pass is written on its own.
const GROUP_MAX_PASSES: usize = 256;
const GROUP_MAX_WAIT: Duration = Duration::from_millis(100);
const GROUP_WRITE_SHARE: u32 = 4;

/// What a pass needs from the engine.
#[derive(Clone)]
pub(crate) struct Deps {
    pub backend: Arc<crate::sql::Backend>,
    pub config: Arc<Config>,
    pub prompts: Arc<PromptSet>,
    pub flags: SchemaFlags,
}

/// The ids of the raw messages among `items`.
fn message_ids(items: &[Box<Item>]) -> impl Iterator<Item = i64> + '_ {
    items.iter().filter_map(|i| match i.r {
        ItemRef::Message(id) => Some(id),
        _ => None,
    })
}

/// Runs blocking SQLite work from async code without stalling the runtime's other tasks.
fn blocking<T>(f: impl FnOnce() -> T) -> T {
    tokio::task::block_in_place(f)
}

/// One run of passes over a conversation: the model, the passes not yet written, and the
/// contents of summaries created on the way (for previous context and condensation).
struct Run<'a> {
    deps: &'a Deps,
    summarizer: Arc<dyn Summarizer>,
    options: PassOptions,
    /// What the fresh tail protects; a sweep under budget pressure narrows it.
    tail: TailRule,
    live: LiveContext,
    baseline: Baseline,
    pending: Vec<NewSummary>,
    pending_since: Option<Instant>,
    last_write: Duration,
    contents: HashMap<String, (String, Vec<String>)>,
}

impl<'a> Run<'a> {
    fn start(
        deps: &'a Deps,
        conversation_id: i64,
        summarizer: Arc<dyn Summarizer>,
        options: PassOptions,
    ) -> Result<Self> {
        let config = &deps.config;
        let tail = TailRule::of(config, options.token_budget);
        let live = blocking(|| {
            deps.backend.read(|db| {
                conversations::get(db, conversation_id)?;
                LiveContext::load_window(db, conversation_id, tail, config.head_window)
            })
        })?;
        Ok(Run {
            deps,
            summarizer,
            options,
            tail,
            baseline: Baseline::of(&live),
            live,
            pending: Vec::new(),
            pending_since: None,
            last_write: Duration::ZERO,
            contents: HashMap::new(),
        })
    }

    fn config(&self) -> &Config {
        &self.deps.config
    }

    /// Runs a selection on the model, reading more of the live context (in windows that
    /// double) while the answer depends on items not read yet.
    fn select<T>(&mut self, pick: impl Fn(&LiveContext, &Config, TailRule) -> live::Pick<T>) -> Result<T> {
        loop {
            match pick(&self.live, &self.deps.config, self.tail) {
                Ok(v) => return Ok(v),
                Err(live::ReadMore) => {
                    let n = self.live.items.len().max(self.deps.config.head_window);
                    let (backend, live) = (&self.deps.backend, &mut self.live);
                    let read = blocking(|| backend.read(|db| live.read_more(db, n)))?;
                    // What was read is part of what the pending passes are planned on.
                    self.baseline.add(&self.live.items[read]);
                }
            }
        }
    }

    /// Contents (and file ids) of `ids`, from this run's cache or the database.
    fn contents_of(&self, ids: &[String]) -> Result<Vec<(String, Vec<String>)>> {
        let missing: Vec<String> = ids
            .iter()
            .filter(|id| !self.contents.contains_key(*id))
            .cloned()
            .collect();
        let loaded = if missing.is_empty() {
            HashMap::new()
        } else {
            blocking(|| {
                self.deps
                    .backend
                    .read(|db| crate::store::summaries::contents(db, &missing))
            })?
        };
        ids.iter()
            .map(|id| {
                self.contents
                    .get(id)
                    .or_else(|| loaded.get(id))
                    .cloned()
                    .ok_or_else(|| LcmError::Internal(format!("summary {id} is live but has no row")))
            })
            .collect()
    }

    /// The text a prompt shows as previous context, and the summaries it comes from (stored
    /// with the new summary: a redaction follows them).
    fn previous_context(&self, before: usize, depth: Option<i64>) -> Result<(String, Vec<String>)> {
        let ids = self.live.summaries_before(before, depth, 2);
        let mut shown = Vec::new();
        let mut texts = Vec::new();
        for (id, (content, _)) in ids.iter().zip(self.contents_of(&ids)?) {
            let text = content.trim();
            if !text.is_empty() {
                texts.push(text.to_string());
                shown.push(id.to_string());
            }
        }
        Ok((texts.join("\n\n"), shown))
    }

    fn base_vars(&self, source: &str, previous: String, count: usize, range: &str, depth: i64) -> PromptVars {
        PromptVars {
            target_tokens: 0,
            previous_context: previous,
            source_text: source.to_string(),
            child_count: count as i64,
            time_range: range.to_string(),
            depth,
            aggressive: false,
            custom_instructions: self.custom_instructions(),
            missing_identifiers: String::new(),
        }
    }

    /// The configured instructions, then this call's.
    fn custom_instructions(&self) -> String {
        let call = self.options.custom_instructions.as_deref().map(str::trim).unwrap_or("");
        [self.config().custom_instructions.trim(), call]
            .iter()
            .filter(|s| !s.is_empty())
            .copied()
            .collect::<Vec<_>>()
            .join("\n\n")
    }

    fn request(
        &self,
        kind: SummaryKind,
        depth: i64,
        source: String,
        entries: Vec<SourceEntry>,
        count: usize,
        range: &str,
    ) -> SummarizeRequest {
        SummarizeRequest {
            kind,
            depth,
            aggressive: false,
            target_tokens: 0,
            conversation_id: self.live.conversation_id,
            input_tokens: tokens::estimate(&source),
            input_count: count as i64,
            time_range: range.to_string(),
            source_text: source,
            entries: Arc::new(entries),
            timeout_ms: self.config().summary_timeout_ms,
            on_timeout: self.options.on_summary_timeout,
        }
    }

    fn model_name(&self, e: &Escalated) -> String {
        match (&self.options.model, e.level) {
            (Some(m), Level::Normal | Level::Aggressive | Level::Capped) if !m.is_empty() => m.clone(),
            _ => e.model.clone(),
        }
    }

    /// Records a finished pass in the model and the pending group.
    fn finish(
        &mut self,
        summary: NewSummary,
        chunk: &live::Chunk,
        before: i64,
        e: &Escalated,
        input_tokens: i64,
    ) -> PassResult {
        let item = write::summary_item(&summary);
        self.live.replace(chunk, item);
        let after = self.live.stored_tokens();
        let f = &summary.fields;
        self.contents
            .insert(f.summary_id.clone(), (f.content.clone(), summary.file_ids.clone()));
        let result = PassResult {
            kind: f.kind,
            summary_id: Some(f.summary_id.clone()),
            depth: f.depth,
            level: Some(e.level),
            model: Some(f.model.clone()),
            input_count: chunk.len as i64,
            input_tokens,
            output_tokens: f.token_count,
            tokens_before: before,
            tokens_after: after,
            earliest_at: f.earliest_at.clone(),
            latest_at: f.latest_at.clone(),
            summarizer_calls: e.calls,
            summarizer_ms: e.summarizer_ms,
            auth_failure: false,
            incremental: Vec::new(),
            incremental_error: None,
        };
        self.pending.push(summary);
        self.pending_since.get_or_insert_with(Instant::now);
        result
    }

    /// Asks the summarizer for a pass's summary (with escalation). A refusal of the credentials,
    /// or a host that allows no more calls, ends the pass unwritten: `Err` holds its result.
    async fn summarize(
        &self,
        vars: PromptVars,
        request: SummarizeRequest,
        before: i64,
    ) -> Result<std::result::Result<Escalated, PassResult>> {
        let (kind, depth, count, input_tokens) =
            (request.kind, request.depth, request.input_count, request.input_tokens);
        match escalation::summarize(&self.summarizer, &self.deps.prompts, self.config(), vars, request).await {
            Ok(e) => Ok(Ok(e)),
            Err(PassError::Auth(_)) => Ok(Err(PassResult {
                kind,
                summary_id: None,
                depth,
                level: None,
                model: None,
                input_count: count,
                input_tokens,
                output_tokens: 0,
                tokens_before: before,
                tokens_after: before,
                earliest_at: None,
                latest_at: None,
                summarizer_calls: 1,
                summarizer_ms: 0.0,
                auth_failure: true,
                incremental: Vec::new(),
                incremental_error: None,
            })),
            Err(PassError::Failed(err)) => Err(err),
        }
    }

    /// One leaf pass over the oldest chunk outside the fresh tail; `None` when there is none.
    async fn leaf_pass(&mut self) -> std::result::Result<Option<PassResult>, LcmError> {
        let Some(chunk) = self.select(|live, config, tail| live.leaf_chunk(config, tail))? else {
            return Ok(None);
        };
        let items = &self.live.items[chunk.start..chunk.start + chunk.len];
        let message_ids: Vec<i64> = message_ids(items).collect();
        let message_tokens: i64 = items.iter().map(|i| i.tokens).sum();
        let zone = self.config().zone;
        let chunk_tokens = self.config().leaf_chunk_tokens;
        let cid = self.live.conversation_id;
        let src = blocking(|| {
            self.deps.backend.read(|db| {
                // lossless-claw's re-imported copies are covered but not sent: the summarizer
                // reads each turn once, as the model does (`store::copies`).
                let copies = crate::store::copies::ids(db, cid)?;
                let sent: Vec<i64> = message_ids.iter().copied().filter(|id| !copies.contains(id)).collect();
                let sent = if sent.is_empty() { &message_ids } else { &sent };
                source::leaf_source(db, sent, zone, chunk_tokens, source::Stamps::With)
            })
        })?;
        let (previous, previous_ids) = self.previous_context(chunk.start, None)?;
        let range = source::range_text(src.earliest, src.latest, zone);
        let base = self.base_vars(&src.text, previous, chunk.len, &range, 0);
        let request = self.request(SummaryKind::Leaf, 0, src.text.clone(), src.entries, chunk.len, &range);
        let input_tokens = tokens::estimate(&src.text);
        let before = self.live.stored_tokens();
        let e = match self.summarize(base, request, before).await? {
            Ok(e) => e,
            Err(stopped) => return Ok(Some(stopped)),
        };
        let summary = NewSummary {
            fields: SummaryFields {
                summary_id: write::new_summary_id(&e.content),
                kind: SummaryKind::Leaf,
                depth: 0,
                token_count: tokens::estimate(&e.content),
                earliest_at: src.earliest.map(|t| time::to_iso_ms(&t)),
                latest_at: src.latest.map(|t| time::to_iso_ms(&t)),
                descendant_count: 0,
                descendant_token_count: 0,
                source_message_token_count: message_tokens,
                model: self.model_name(&e),
                content: e.content.clone(),
            },
            file_ids: src.file_ids,
            messages: message_ids,
            parents: Vec::new(),
            previous: previous_ids,
            fidelity: Some(e.fidelity.clone()),
            needs_repair: e.needs_repair,
            template: e.template.clone(),
        };
        Ok(Some(self.finish(summary, &chunk, before, &e, input_tokens)))
    }

    /// One condensed pass over the shallowest eligible same-depth run; `None` when there is none.
    async fn condensed_pass(
        &mut self,
        hard: bool,
        only_depth: Option<i64>,
    ) -> std::result::Result<Option<PassResult>, LcmError> {
        let Some((depth, chunk)) =
            self.select(|live, config, tail| live.condensation_candidate(config, tail, hard, only_depth))?
        else {
            return Ok(None);
        };
        let inputs: Vec<Box<Item>> = self.live.items[chunk.start..chunk.start + chunk.len].to_vec();
        let ids: Vec<String> = inputs
            .iter()
            .filter_map(|i| match &i.r {
                ItemRef::Summary(id) => Some(id.clone()),
                _ => None,
            })
            .collect();
        let contents = self.contents_of(&ids)?;
        let facts: Vec<&live::SummaryFacts> = inputs.iter().filter_map(|i| i.summary_facts()).collect();
        let zone = self.config().zone;
        let pairs: Vec<(&live::SummaryFacts, &str)> = facts
            .iter()
            .copied()
            .zip(contents.iter().map(|(c, _)| c.as_str()))
            .collect();
        let text = source::condensed_source(&pairs, zone);
        let entries = source::condensed_entries(&pairs, zone);
        let ranges: Vec<_> = facts.iter().map(|f| source::summary_range(f)).collect();
        let earliest = ranges.iter().filter_map(|r| r.0).min();
        let latest = ranges.iter().filter_map(|r| r.1).max();
        let range = source::range_text(earliest, latest, zone);
        // Previous context only for depth-1 outputs: the last two leaves before the run.
        let (previous, previous_ids) = if depth == 0 {
            self.previous_context(chunk.start, Some(0))?
        } else {
            (String::new(), Vec::new())
        };
        let out_depth = depth + 1;
        let base = self.base_vars(&text, previous, chunk.len, &range, out_depth);
        let request = self.request(
            SummaryKind::Condensed,
            out_depth,
            text.clone(),
            entries,
            chunk.len,
            &range,
        );
        let input_tokens = tokens::estimate(&text);
        let before = self.live.stored_tokens();
        let e = match self.summarize(base, request, before).await? {
            Ok(e) => e,
            Err(stopped) => return Ok(Some(stopped)),
        };
        let mut file_ids: Vec<String> = Vec::new();
        for (content, ids) in &contents {
            for id in ids {
                if !file_ids.contains(id) {
                    file_ids.push(id.clone());
                }
            }
            source::file_ids_in(content, &mut file_ids);
        }
        let summary = NewSummary {
            fields: SummaryFields {
                summary_id: write::new_summary_id(&e.content),
                kind: SummaryKind::Condensed,
                depth: out_depth,
                token_count: tokens::estimate(&e.content),
                earliest_at: earliest.map(|t| time::to_iso_ms(&t)),
                latest_at: latest.map(|t| time::to_iso_ms(&t)),
                descendant_count: facts.iter().map(|f| f.descendant_count.max(0) + 1).sum(),
                descendant_token_count: inputs
                    .iter()
                    .map(|i| i.tokens + i.summary_facts().map_or(0, |f| f.descendant_token_count))
                    .sum(),
                source_message_token_count: facts.iter().map(|f| f.source_message_token_count).sum(),
                model: self.model_name(&e),
                content: e.content.clone(),
            },
            file_ids,
            messages: Vec::new(),
            parents: ids,
            previous: previous_ids,
            fidelity: Some(e.fidelity.clone()),
            needs_repair: e.needs_repair,
            template: e.template.clone(),
        };
        Ok(Some(self.finish(summary, &chunk, before, &e, input_tokens)))
    }

    /// Writes the pending passes (one transaction).
    fn flush(&mut self) -> Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let pending = std::mem::take(&mut self.pending);
        self.pending_since = None;
        let flags = self.deps.flags;
        let keep_start = self.deps.config.shift_down_rows;
        let baseline = &self.baseline;
        let live = &mut self.live;
        let started = Instant::now();
        blocking(|| write::write_passes(&self.deps.backend, flags, baseline, live, &pending, keep_start))?;
        self.last_write = started.elapsed();
        self.baseline = Baseline::of(&self.live);
        Ok(())
    }

    fn maybe_flush(&mut self) -> Result<()> {
        let wait = GROUP_MAX_WAIT.max(self.last_write * GROUP_WRITE_SHARE);
        let due = self.pending.len() >= GROUP_MAX_PASSES || self.pending_since.is_some_and(|t| t.elapsed() >= wait);
        if due {
            self.flush()?;
        }
        Ok(())
    }

    /// Runs `pass`, and on failure still writes the passes that finished before it.
    fn settle<T>(&mut self, outcome: std::result::Result<T, LcmError>) -> Result<T> {
        match outcome {
            Ok(v) => Ok(v),
            Err(e) => {
                self.flush()?;
                Err(e)
            }
        }
    }
}

/// One leaf pass (plus incremental condensation up to `incrementalMaxDepth`).
pub(crate) async fn leaf_pass(
    deps: &Deps,
    conversation_id: i64,
    summarizer: Arc<dyn Summarizer>,
    options: PassOptions,
) -> Result<Option<PassResult>> {
    let mut run = Run::start(deps, conversation_id, summarizer, options)?;
    let outcome = run.leaf_pass().await;
    let Some(mut result) = run.settle(outcome)? else {
        return Ok(None);
    };
    if result.auth_failure {
        return Ok(Some(result));
    }
    run.flush()?;
    let max_depth = deps.config.incremental_max_depth;
    let mut depth = 0;
    while max_depth < 0 || depth < max_depth {
        let before = run.live.stored_tokens();
        // The leaf pass is written: a failing condensation after it is reported, not thrown.
        let pass = match run.condensed_pass(false, Some(depth)).await {
            Ok(p) => p,
            Err(e) => {
                result.incremental_error = Some(PassFailure {
                    code: e.code(),
                    message: e.to_string(),
                });
                break;
            }
        };
        match pass {
            Some(r) if r.auth_failure => {
                result.incremental.push(r);
                break;
            }
            Some(r) => {
                run.flush()?;
                let progressed = r.tokens_after < before;
                result.incremental.push(r);
                if !progressed {
                    break;
                }
            }
            None => break,
        }
        depth += 1;
    }
    result.tokens_after = run.live.stored_tokens();
    Ok(Some(result))
}

/// One condensed pass over the shallowest eligible run (or the run at `options.depth`).
pub(crate) async fn condensed_pass(
    deps: &Deps,
    conversation_id: i64,
    summarizer: Arc<dyn Summarizer>,
    options: PassOptions,
) -> Result<Option<PassResult>> {
    let hard = options.hard_trigger;
    let only = options.depth;
    let mut run = Run::start(deps, conversation_id, summarizer, options)?;
    let outcome = run.condensed_pass(hard, only).await;
    let result = run.settle(outcome)?;
    run.flush()?;
    Ok(result)
}

/// A full sweep: leaf passes until no chunk or no progress, then condensation, shallowest
/// depth first, until no candidate or no progress; bounded by `maxSweepIterations` and
/// `sweepDeadlineMs`.
pub(crate) async fn compact(
    deps: &Deps,
    conversation_id: i64,
    summarizer: Arc<dyn Summarizer>,
    options: SweepOptions,
) -> Result<SweepResult> {
    let started = Instant::now();
    let config = deps.config.clone();
    let hard = options.pass.hard_trigger;
    let mut pass = options.pass;
    pass.token_budget.get_or_insert(options.token_budget);
    let mut run = Run::start(deps, conversation_id, summarizer, pass)?;
    let tokens_before = run.live.stored_tokens();
    let threshold = (config.context_threshold * options.token_budget as f64).floor() as i64;
    let mut result = SweepResult::nothing_done(tokens_before, threshold, StopReason::NoCandidates);
    let leaf_only = options.target == SweepTarget::Leaf;
    // Under budget pressure the sweep goes down to the low-water mark in one go, so that the
    // next one is far off: its leaf passes reach into the fresh tail as far as the mark needs
    // (never past the newest turn) and stop once the context is under it. Everything after the
    // first summary it writes is new to the provider's prompt cache on the next request, so
    // the fewer and larger the steps, the more of the context the cache keeps serving.
    let low_water = matches!(options.target, SweepTarget::Budget | SweepTarget::Fit)
        .then(|| (config.context_low_water * options.token_budget as f64).floor() as i64);
    // The messages the configured fresh tail protects: a sweep that summarises one of them
    // compacted into the tail (`compactedTail`).
    let protected: Vec<i64> = match low_water {
        Some(_) => message_ids(&run.live.items[run.live.tail_start(run.tail)..]).collect(),
        None => Vec::new(),
    };
    if let Some(goal) = low_water {
        let raw_room = goal.saturating_sub(run.live.summary_tokens()).max(0);
        run.tail.max_tokens = run.tail.max_tokens.min(raw_room);
    }
    let leaf_due = |run: &Run| run.live.raw_tokens_outside_tail(run.tail) >= config.leaf_chunk_tokens;
    let due = match options.target {
        SweepTarget::Leaf => leaf_due(&run),
        // The engine runs `fit` only when the context does not fit: whatever the threshold.
        SweepTarget::Fit => true,
        SweepTarget::Threshold => tokens_before > threshold,
        SweepTarget::Budget => evaluate::sweep_due(
            &config,
            options.token_budget,
            tokens_before,
            run.live.newest_turn_sent_tokens(run.tail),
        )
        .is_some(),
    };
    if !options.force && !due {
        result.stop_reason = StopReason::BelowThreshold;
        result.duration_ms = started.elapsed().as_secs_f64() * 1000.0;
        return Ok(result);
    }
    let deadline = started + Duration::from_millis(config.sweep_deadline_ms as u64);
    let mut passes = 0i64;
    // A hard stop ends the sweep; otherwise it ends when the condensation phase ends.
    let mut stop: Option<StopReason> = None;
    let mut phase_end = StopReason::NoCandidates;
    // Phase 3 relaxes the fanout to `condensedMinFanoutHard` when the normal fanout finds no
    // run to condense while the context is still over the threshold (leaf summaries too large
    // for `leafMinFanout` of them to fit one `leafChunkTokens` chunk): the sweep converges
    // instead of stopping with the context over budget. Under budget pressure, when that
    // still leaves it over, phases 4–6 repeat the three with the tail narrowed to the newest
    // turn, leaf passes stopping once the context is under the threshold.
    'phases: for (pressure, phase, relaxed) in [
        (false, SummaryKind::Leaf, false),
        (false, SummaryKind::Condensed, false),
        (false, SummaryKind::Condensed, true),
        (true, SummaryKind::Leaf, false),
        (true, SummaryKind::Condensed, false),
        (true, SummaryKind::Condensed, true),
    ] {
        if leaf_only && phase != SummaryKind::Leaf {
            break;
        }
        if pressure && !result.compacted_tail {
            let pressing = matches!(options.target, SweepTarget::Budget | SweepTarget::Fit);
            if !pressing || run.live.stored_tokens() <= threshold {
                break;
            }
            run.tail = run.tail.newest_turn();
            result.compacted_tail = true;
        }
        if relaxed {
            if hard || phase_end != StopReason::NoCandidates || run.live.stored_tokens() <= threshold {
                continue;
            }
            result.relaxed_fanout = true;
        }
        loop {
            if passes >= config.max_sweep_iterations {
                stop = Some(StopReason::MaxIterations);
                break 'phases;
            }
            if pressure && phase == SummaryKind::Leaf && run.live.stored_tokens() <= threshold {
                phase_end = StopReason::NoCandidates;
                break;
            }
            if leaf_only && !leaf_due(&run) {
                phase_end = StopReason::BelowThreshold;
                break;
            }
            if phase == SummaryKind::Leaf && low_water.is_some_and(|goal| run.live.stored_tokens() <= goal) {
                phase_end = StopReason::NoCandidates;
                break;
            }
            if Instant::now() >= deadline {
                stop = Some(StopReason::Deadline);
                break 'phases;
            }
            if options
                .cancel
                .as_ref()
                .is_some_and(|c| c.load(std::sync::atomic::Ordering::SeqCst))
            {
                stop = Some(StopReason::Aborted);
                break 'phases;
            }
            let before = run.live.stored_tokens();
            let outcome = match phase {
                SummaryKind::Leaf => run.leaf_pass().await,
                SummaryKind::Condensed => run.condensed_pass(hard || relaxed, None).await,
            };
            let Some(pass) = run.settle(outcome)? else {
                phase_end = StopReason::NoCandidates;
                break;
            };
            if pass.auth_failure {
                stop = Some(StopReason::AuthFailure);
                result.auth_failure = true;
                break 'phases;
            }
            passes += 1;
            result.action_taken = true;
            result.summarizer_ms += pass.summarizer_ms;
            match pass.kind {
                SummaryKind::Leaf => result.leaf_passes += 1,
                SummaryKind::Condensed => *result.condensed_passes.entry(pass.depth).or_insert(0) += 1,
            }
            if let Some(level) = pass.level {
                *result.passes_by_level.entry(level.as_str()).or_insert(0) += 1;
            }
            if pass.level == Some(Level::Fallback) {
                result.fallback_summaries += 1;
            }
            result.created_summary_ids.extend(pass.summary_id.clone());
            run.maybe_flush()?;
            if pass.tokens_after >= before {
                // The pass did not shrink the context: this phase has converged.
                phase_end = StopReason::NoProgress;
                break;
            }
        }
    }
    run.flush()?;
    if !result.compacted_tail && !protected.is_empty() {
        let items = &run.live.items;
        let live: std::collections::HashSet<i64> =
            message_ids(&items[items.len().saturating_sub(protected.len())..]).collect();
        result.compacted_tail = protected.iter().any(|id| !live.contains(id));
    }
    result.stop_reason = stop.unwrap_or(phase_end);
    result.tokens_after = run.live.stored_tokens();
    result.duration_ms = started.elapsed().as_secs_f64() * 1000.0;
    Ok(result)
}
