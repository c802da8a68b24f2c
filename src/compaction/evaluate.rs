//! `evaluate`: the threshold, leaf-trigger and rolling-trigger decisions for a conversation,
//! read from the live totals and the fresh tail only.

use crate::api::{Evaluation, LeafTrigger, RollingTrigger};
use crate::config::Config;
use crate::error::Result;
use crate::live::{LiveContext, TailRule, TailWalk};
use crate::store::conversations;
use crate::store::totals;

/// Where between the low-water mark and the threshold a sweep may come early: two thirds of
/// the way up.
const EARLY_SHARE: f64 = 2.0 / 3.0;

/// A newest turn this small (a share of the budget) makes a cheap moment for a sweep.
const CHEAP_TURN_SHARE: f64 = 0.02;

/// floor(tokenBudget × the early mark's fraction).
pub(crate) fn early_mark(config: &Config, token_budget: i64) -> i64 {
    let (low, high) = (config.context_low_water, config.context_threshold);
    ((low + (high - low) * EARLY_SHARE) * token_budget as f64).floor() as i64
}

/// Why a maintenance (`budget`) sweep is due for a context of `current` tokens, if it is.
///
/// Over the threshold it is due. A sweep puts its new summary before the newest turn, so
/// everything it keeps verbatim after that summary, at least the part of the newest turn the
/// provider has seen (`newest_sent`), is new to the provider's prompt cache on the next
/// request. The turn that pushes a context over the threshold is often a large one (a pasted
/// log, a long tool result), so the sweep comes early, past the early mark, at the first turn
/// small enough that little is sent again: the same number of sweeps, each cheaper. Without a
/// fresh tail (`newest_sent` None) every moment costs the same, and the sweep waits for the
/// threshold.
pub(crate) fn sweep_due(
    config: &Config,
    token_budget: i64,
    current: i64,
    newest_sent: Option<i64>,
) -> Option<&'static str> {
    let threshold = (config.context_threshold * token_budget as f64).floor() as i64;
    let cheap = (CHEAP_TURN_SHARE * token_budget as f64).floor() as i64;
    if current > threshold {
        Some("threshold")
    } else if current > early_mark(config, token_budget) && newest_sent.is_some_and(|n| n <= cheap) {
        Some("early")
    } else {
        None
    }
}

/// Threshold, leaf-trigger and rolling-trigger decisions for a conversation.
pub(crate) fn evaluate(
    db: crate::sql::Db,
    config: &Config,
    conversation_id: i64,
    token_budget: i64,
    observed_tokens: Option<i64>,
) -> Result<Evaluation> {
    // Cost O(fresh tail): the newest items are read only until the tail is known; everything
    // else comes from the live totals the triggers keep. One snapshot for all of it.
    let _snapshot = db.snapshot()?;
    let conn = db;
    conversations::get(conn, conversation_id)?;
    let totals = totals::load(conn, conversation_id)?;
    let rule = TailRule::of(config, Some(token_budget));
    let mut walk = TailWalk::new(rule);
    let (newest, _) = LiveContext::load_newest(conn, conversation_id, false, |item, _| walk.push(0, item))?;
    let tail = newest.tail_start(rule);
    let (tail_messages, tail_tokens) = newest.items[tail..]
        .iter()
        .filter(|i| i.is_message())
        .fold((0i64, 0i64), |(n, t), i| (n + 1, t + i.tokens));
    let stored = totals.tokens();
    // The `<recalled>` blocks earlier turns were sent with are sent again: the context holds them.
    let recalled = crate::store::recalls::live_tokens(conn, conversation_id)?;
    let current = (stored + recalled).max(observed_tokens.unwrap_or(0).max(0));
    let threshold = (config.context_threshold * token_budget as f64).floor() as i64;
    let due = sweep_due(config, token_budget, current, newest.newest_turn_sent_tokens(rule));
    let raw_messages = totals.items - totals.summaries;
    let raw_outside = totals.message_tokens - tail_tokens;
    let summarizable = raw_messages - tail_messages;
    let total_messages = totals::message_count(conn, conversation_id)?;
    // Messages no longer live are covered by a summary (the lossless invariant; a seed-era
    // database's compaction-event rows, never live, count here too).
    let covered = (total_messages - raw_messages).max(0);
    let n = config.messages_per_summary;
    Ok(Evaluation {
        stored_tokens: stored,
        current_tokens: current,
        threshold,
        early_mark: early_mark(config, token_budget),
        should_compact: due.is_some(),
        reason: due.unwrap_or("none"),
        leaf_trigger: LeafTrigger {
            raw_tokens_outside_tail: raw_outside,
            threshold: config.leaf_chunk_tokens,
            should_compact: raw_outside >= config.leaf_chunk_tokens,
        },
        rolling: RollingTrigger {
            messages_since_last_summary: raw_messages,
            messages_per_summary: n,
            covered_messages: covered,
            summarizable_messages: summarizable,
            should_summarize: n > 0 && raw_messages >= n && summarizable > 0,
        },
        live_items: totals.items,
        raw_messages,
        summaries: totals.summaries,
    })
}
