//! Assembly: each turn's context within a token budget.
//!
//! The fresh tail (the newest raw messages, back to the newest user message) is always kept;
//! older items are evicted oldest first until the rest fits. Summaries are presented as the
//! seed's XML wrapper (or one markdown section), raw messages are rebuilt from their parts,
//! and the result goes through tool-call pairing repair. The cost follows what is emitted, not
//! the length of the history: the live items are read newest first only until the budget is
//! spent, two more queries read the rows of the kept messages the last assembly did not
//! already render (`cache`), and the counts of everything evicted come from the live totals
//! the triggers keep (`db::totals`).

pub(crate) mod cache;
pub(crate) mod content;
pub(crate) mod excerpt;
pub(crate) mod render;
pub(crate) mod repair;

#[cfg(test)]
mod tests;

use crate::api::{AssembleOptions, Presentation};
use std::collections::{HashMap, HashSet};

use rusqlite::Connection;
use serde::Serialize;

use crate::config::Config;
use crate::error::Result;
use crate::live::{ItemRef, LiveContext, TailRule, TailWalk};
use crate::sql::Db;
use crate::store::conversations;
use crate::store::messages::load_parts;
use crate::store::normalize::Role;
use crate::store::recalls::StoredRecall;
use crate::store::totals;
use crate::tokens;
use cache::{Rendered, Wrapper, WrapperFacts};
use render::{HostMessage, Msg, SummaryView};
use repair::RepairStats;

/// Put first when the kept messages begin inside a turn.
pub(crate) const TURN_START_NOTE: &str =
    "[lcm-native] The start of this turn is not shown: it did not fit the context budget.";

impl Assembled {
    /// About how long the JSON text of this result is (a little more, rarely less).
    pub fn json_size_hint(&self) -> usize {
        let content: usize = self.messages.iter().map(|m| m.msg.content.json_size_hint()).sum();
        // Role, usage and tool fields of each message, and the stats.
        content + self.messages.len() * 256 + 1024
    }

    /// The messages as JSON values (they are held as the text they are emitted as), for tests.
    #[cfg(test)]
    pub fn message_values(&self) -> Vec<serde_json::Value> {
        self.messages
            .iter()
            .map(|m| serde_json::to_value(m).expect("a message serializes"))
            .collect()
    }
}

/// Reads and renders the kept messages not rendered already (`rendered`, by message id) but
/// for `copies` (left out, as a missing message is): their rows and parts with a fixed number
/// of queries.
fn render_missing(
    db: Db,
    items: &[Box<crate::live::Item>],
    copies: &HashSet<i64>,
    rendered: &mut HashMap<i64, Msg>,
) -> Result<()> {
    let message_ids: Vec<i64> = items
        .iter()
        .filter_map(|i| match i.r {
            ItemRef::Message(id) if !rendered.contains_key(&id) && !copies.contains(&id) => Some(id),
            _ => None,
        })
        .collect();
    if message_ids.is_empty() {
        return Ok(());
    }
    let messages = crate::store::messages::roles_for_rebuild(db, &message_ids)?;
    for (id, parts) in message_ids.iter().zip(load_parts(db, &message_ids)?) {
        // A message the items name but that is gone is left out, as before.
        if let Some((role, content)) = messages.get(id) {
            rendered.insert(*id, render::host_message(role, content, &parts));
        }
    }
    Ok(())
}

#[cfg(test)]
thread_local! {
    /// Builds made on this thread (tests: assembly must not rebuild per evicted item).
    pub(crate) static BUILDS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Builds the messages for items `from..` (before repair). `ranges` holds each summary's
/// formatted time range (by item index), computed once while costing it.
#[allow(clippy::too_many_arguments)]
fn build(
    live: &LiveContext,
    from: usize,
    rendered: &HashMap<i64, Msg>,
    summaries: &HashMap<String, String>,
    ranges: &[String],
    presentation: Presentation,
    max_message_tokens: i64,
    recalls: &HashMap<i64, StoredRecall>,
) -> Vec<Msg> {
    #[cfg(test)]
    BUILDS.with(|b| b.set(b.get() + 1));
    let mut out = Vec::with_capacity(live.items.len() - from);
    // Markdown presentation: consecutive summaries become one section, tied to the first one.
    let mut run: Vec<SummaryView<'_>> = Vec::new();
    let mut run_item = None;
    let flush_run = |run: &mut Vec<SummaryView<'_>>, run_item: &mut Option<usize>, out: &mut Vec<Msg>| {
        if run.is_empty() {
            return;
        }
        out.push(Msg::user(render::markdown(run), run_item.take()));
        run.clear();
    };
    for (i, item) in live.items.iter().enumerate().skip(from) {
        match &item.r {
            ItemRef::Message(id) => {
                flush_run(&mut run, &mut run_item, &mut out);
                let Some(msg) = rendered.get(id) else {
                    continue;
                };
                let msg = excerpt::excerpt(msg, *id, max_message_tokens).unwrap_or_else(|| msg.clone());
                out.push(Msg { item: Some(i), ..msg });
                // The block an earlier turn was sent with, where it was sent.
                if let Some(r) = recalls.get(id) {
                    out.push(recalled(r.content.clone(), *id));
                }
            }
            ItemRef::Summary(id) => {
                let (Some(facts), Some(content)) = (item.summary_facts(), summaries.get(id)) else {
                    continue;
                };
                let view = SummaryView {
                    id,
                    depth: facts.depth,
                    descendant_count: facts.descendant_count,
                    range: ranges[i].clone(),
                    content,
                };
                match presentation {
                    Presentation::Xml => out.push(Msg::user(render::xml(&view), Some(i))),
                    Presentation::Markdown => {
                        run_item.get_or_insert(i);
                        run.push(view);
                    }
                }
            }
        }
    }
    flush_run(&mut run, &mut run_item, &mut out);
    out
}

/// Upper-bound cost of an item before its content is read: its stored tokens (at most an
/// excerpt's for a message), plus the wrapper for a summary; and a summary's formatted time
/// range (empty for a message). A summary's wrapper is computed once per set of facts
/// (`wrappers`, kept between assemblies).
fn cost(
    item: &crate::live::Item,
    config: &Config,
    presentation: Presentation,
    max_message_tokens: i64,
    wrappers: &mut HashMap<String, Wrapper>,
) -> (i64, String) {
    match (&item.r, item.summary_facts()) {
        (ItemRef::Summary(id), Some(f)) => {
            if let Some(w) = wrappers.get(id).filter(|w| w.facts.describe(f, presentation)) {
                return (item.tokens + w.tokens, w.range.clone());
            }
            let facts = WrapperFacts {
                earliest_at: f.earliest_at.clone(),
                latest_at: f.latest_at.clone(),
                depth: f.depth,
                descendant_count: f.descendant_count,
                presentation,
            };
            let range = render::range(f.earliest_at.as_deref(), f.latest_at.as_deref(), config.zone);
            let tokens = match presentation {
                Presentation::Xml => render::xml_overhead(id, &range, f.depth, f.descendant_count),
                Presentation::Markdown => tokens::estimate(render::MARKDOWN_HEADING) + tokens::estimate(&range) + 3,
            };
            wrappers.insert(
                id.clone(),
                Wrapper {
                    facts,
                    range: range.clone(),
                    tokens,
                },
            );
            (item.tokens + tokens, range)
        }
        _ => (item.tokens.clamp(1, max_message_tokens), String::new()),
    }
}

/// What an emitted message is, for an assembly's outline: the live item it shows (`m<id>`,
/// `s<id>`), or what repair put there (a synthetic result for a call, the turn-start note).
fn outline_key(live: &LiveContext, m: &Msg) -> String {
    if let Some(anchor) = m.recall {
        return format!("q{anchor}");
    }
    match m.item.and_then(|i| live.items.get(i)).map(|i| &i.r) {
        Some(ItemRef::Message(id)) => format!("m{id}"),
        Some(ItemRef::Summary(id)) => format!("s{id}"),
        None => match &m.tool_call_id {
            Some(call) => format!("r{call}"),
            None => "note".to_string(),
        },
    }
}

/// A `<recalled>` block as a user message, sent after message `anchor`.
pub(crate) fn recalled(text: String, anchor: i64) -> Msg {
    Msg {
        recall: Some(anchor),
        ..Msg::user(text, None)
    }
}

/// The user message put first when the kept messages begin inside a turn.
fn turn_start_note() -> Msg {
    Msg::user(TURN_START_NOTE.to_string(), None)
}

/// Assembles the context of a conversation.
pub fn assemble(
    conn: &Connection,
    config: &Config,
    conversation_id: i64,
    options: &AssembleOptions,
) -> Result<Assembled> {
    // One read transaction: the totals, the items and their rows are one snapshot even while
    // ingest or another process writes.
    let snapshot = conn.unchecked_transaction()?;
    let (out, _) = assemble_reusing(
        Db::Sqlite(&snapshot),
        config,
        conversation_id,
        options,
        Rendered::default(),
    )?;
    Ok(out)
}

/// `assemble_in` inside the caller's read snapshot `db`, for a conversation that must exist:
/// `rendered` is what earlier assemblies rendered and is still right (`cache::check_out`),
/// and comes back with this one's.
pub(crate) fn assemble_reusing(
    db: Db,
    config: &Config,
    conversation_id: i64,
    options: &AssembleOptions,
    rendered: Rendered,
) -> Result<(Assembled, Rendered)> {
    conversations::get(db, conversation_id)?;
    assemble_in(db, config, conversation_id, options, rendered)
}

/// The assembly itself, inside the caller's read snapshot, on either engine: `rendered` holds
/// what an earlier assembly rendered and still holds (empty without a cache), and comes back
/// with this one's.
pub(crate) fn assemble_in(
    db: Db,
    config: &Config,
    conversation_id: i64,
    options: &AssembleOptions,
    mut rendered: Rendered,
) -> Result<(Assembled, Rendered)> {
    let totals = totals::load(db, conversation_id)?;
    let presentation = options.presentation.unwrap_or(config.presentation);
    let budget = options.token_budget.max(0);
    let mut rule = TailRule::of(config, Some(budget));
    if let Some(count) = options.fresh_tail_count {
        rule.count = count;
    }
    let max_message_tokens = excerpt::max_message_tokens(budget);
    // A row lossless-claw stored twice is sent once: its copy costs nothing and is not built.
    let copies = match rendered.copies.take() {
        Some(copies) => copies,
        None => crate::store::copies::ids(db, conversation_id)?,
    };
    // Blocks earlier turns were sent with: each is sent again after its anchor, and costs
    // with it (it is evicted with it).
    let recalls: HashMap<i64, StoredRecall> = crate::store::recalls::live(db, conversation_id)?
        .into_iter()
        .map(|r| (r.after_message_id, r))
        .collect();
    // Read newest first: the whole fresh tail, then older items until one no longer fits.
    // Everything older than that is evicted without being read.
    let mut walk = TailWalk::new(rule);
    let mut used = 0i64;
    let (mut costs, mut ranges): (Vec<i64>, Vec<String>) = (Vec::new(), Vec::new());
    let mut summaries = HashMap::new();
    let (live, _) = LiveContext::load_newest(db, conversation_id, true, |item, content| {
        if let (ItemRef::Summary(id), Some(content)) = (&item.r, content) {
            summaries.insert(id.clone(), content);
        }
        let tail_open = walk.push(0, item);
        let (mut c, range) = cost(item, config, presentation, max_message_tokens, &mut rendered.wrappers);
        if let ItemRef::Message(id) = &item.r {
            c = match copies.contains(id) {
                true => 0,
                false => c + recalls.get(id).map_or(0, |r| r.tokens),
            };
        }
        costs.push(c);
        ranges.push(range);
        used += c;
        tail_open || used <= budget
    })?;
    // Collected newest first, one per item read.
    costs.reverse();
    ranges.reverse();
    let tail = live.tail_start(rule);
    let tail_cost: i64 = costs[tail..].iter().sum();
    let mut start = tail;
    let mut used = tail_cost;
    while start > 0 && used + costs[start - 1] <= budget {
        start -= 1;
        used += costs[start];
    }
    // What was rendered last time for items no longer kept is not carried over.
    let (mut kept_messages, mut kept_summaries) = (HashSet::new(), HashSet::new());
    for item in &live.items[start..] {
        match &item.r {
            ItemRef::Message(id) => kept_messages.insert(*id),
            ItemRef::Summary(id) => kept_summaries.insert(id.as_str()),
        };
    }
    rendered.messages.retain(|id, _| kept_messages.contains(id));
    rendered.wrappers.retain(|id, _| kept_summaries.contains(id.as_str()));
    render_missing(db, &live.items[start..], &copies, &mut rendered.messages)?;
    rendered.copies = Some(copies);

    // Build, repair, and evict further while the exact estimate is over the budget or the
    // sequence would start with something other than a user message.
    let (messages, repair_stats, tokens) = loop {
        let built = build(
            &live,
            start,
            &rendered.messages,
            &summaries,
            &ranges,
            presentation,
            max_message_tokens,
            &recalls,
        );
        let (repaired, stats) = repair::repair(built);
        let tokens: Vec<i64> = repaired.iter().map(Msg::tokens).collect();
        let total: i64 = tokens.iter().sum();
        let first_bad = repaired
            .first()
            .filter(|m| m.role != Role::User)
            .and_then(|m| m.item)
            .filter(|i| *i < tail);
        // Begin at the next user message (a summary is one) before the tail, if there is one;
        // otherwise keep what fits and put the note first, rather than evict the whole turn.
        if let Some(i) = first_bad {
            let next_user = (i + 1..tail).find(|&j| {
                let item = &live.items[j];
                !item.is_message() || item.role() == Some("user") || item.role() == Some("system")
            });
            if let Some(j) = next_user {
                start = j;
                continue;
            }
        }
        // The note that will be put first counts against the budget too.
        let note = if repaired.first().is_some_and(|m| m.role != Role::User) {
            turn_start_note().tokens()
        } else {
            0
        };
        if total + note > budget && start < tail {
            // Stored token counts leave out what a message costs once rendered, so the first
            // cut can keep too much. Drop, oldest first, the items whose messages cover the
            // excess in one step (a rebuild per dropped item made this quadratic: 26,000
            // one-word messages at 128k took 10–21 s); repair may shift the sum a little, so
            // the loop checks again.
            let excess = total + note - budget;
            let mut covered = 0i64;
            let mut next = start + 1;
            for (m, t) in repaired.iter().zip(&tokens) {
                covered += t;
                if let Some(i) = m.item {
                    next = next.max(i + 1);
                }
                if covered >= excess {
                    break;
                }
            }
            start = next.min(tail);
            continue;
        }
        break (repaired, stats, tokens);
    };
    // The fresh tail can begin inside a long agentic turn; when nothing before it fits, say so
    // in a user message rather than start with an assistant message.
    let mut messages = messages;
    let mut tokens = tokens;
    let turn_start_omitted = messages.first().is_some_and(|m| m.role != Role::User);
    if turn_start_omitted {
        let note = turn_start_note();
        tokens.insert(0, note.tokens());
        messages.insert(0, note);
    }

    // Everything before `start` is evicted, read or not: the totals give what was not read.
    let kept_items = (live.items.len() - start) as i64;
    let kept_tokens: i64 = live.items[start..].iter().map(|i| i.tokens).sum();
    let estimated: i64 = tokens.iter().sum();
    // What recall at assembly must not show again: the kept raw messages (from the first on)
    // and the excerpts of the kept blocks.
    let kept_ids: Vec<i64> = live.items[start..]
        .iter()
        .filter_map(|i| match i.r {
            ItemRef::Message(id) => Some(id),
            _ => None,
        })
        .collect();
    let kept_recalls: Vec<&StoredRecall> = kept_ids.iter().filter_map(|id| recalls.get(id)).collect();
    let recall_basis = RecallBasis {
        first_kept_message: kept_ids.iter().copied().min(),
        shortened: kept_ids
            .iter()
            .copied()
            .filter(|id| {
                rendered
                    .messages
                    .get(id)
                    .is_some_and(|m| m.tokens() > max_message_tokens)
            })
            .collect(),
        shown: kept_recalls.iter().flat_map(|r| r.places.iter().copied()).collect(),
        last_sent: kept_ids
            .iter()
            .rev()
            .copied()
            .find(|id| !rendered.copies.as_ref().is_some_and(|c| c.contains(id))),
        earlier_blocks: kept_recalls.len() as i64,
        earlier_tokens: kept_recalls.iter().map(|r| r.tokens).sum(),
    };
    let outline = messages
        .iter()
        .zip(&tokens)
        .map(|(m, t)| (outline_key(&live, m), *t))
        .collect();
    let assembled = Assembled {
        outline,
        estimated_tokens: estimated,
        messages: messages
            .into_iter()
            .zip(tokens)
            .map(|(msg, tokens)| HostMessage { msg, tokens })
            .collect(),
        stats: AssembleStats {
            raw_message_count: totals.items - totals.summaries,
            summary_count: totals.summaries,
            total_context_items: totals.items,
            kept_items,
            evicted_items: totals.items - kept_items,
            evicted_tokens: totals.tokens() - kept_tokens,
            fresh_tail_items: (live.items.len() - tail) as i64,
            fresh_tail_tokens: tail_cost,
            // Over only when the tail (with the note it may need) cannot fit.
            fresh_tail_over_budget: tail_cost > budget || estimated > budget,
            turn_start_omitted,
            repair: repair_stats,
            previous_tokens: None,
            kept_tokens: None,
            recall: None,
        },
        recall_basis,
    };
    Ok((assembled, rendered))
}

#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct AssembleStats {
    /// Live items of each kind, before the budget is applied.
    pub raw_message_count: i64,
    pub summary_count: i64,
    pub total_context_items: i64,
    /// Live items emitted (before pairing repair added or dropped messages), and those evicted
    /// (oldest first) with their stored tokens.
    pub kept_items: i64,
    pub evicted_items: i64,
    /// Stored tokens of the evicted items.
    pub evicted_tokens: i64,
    pub fresh_tail_items: i64,
    pub fresh_tail_tokens: i64,
    /// True when the fresh tail alone exceeds the budget (it is kept anyway).
    pub fresh_tail_over_budget: bool,
    /// True when the kept messages began inside a turn (an assistant message or tool result)
    /// and a short user note saying so was put first, as strict providers require.
    pub turn_start_omitted: bool,
    #[serde(flatten)]
    pub repair: RepairStats,
    /// Estimated tokens of the previous assembly of this conversation (`LcmEngine.assemble`;
    /// null when none is known), and how many of them this one begins with, unchanged: the
    /// prefix a provider's prompt cache serves (the whole previous assembly, between two
    /// compactions).
    pub previous_tokens: Option<i64>,
    pub kept_tokens: Option<i64>,
    /// What recall at assembly added (`autoRecall`): null when it did not run and no block of
    /// an earlier turn was kept.
    pub recall: Option<crate::api::RecallStats>,
}

/// What an assembly kept that recall at assembly needs to know.
#[derive(Clone, Debug, Default)]
pub(crate) struct RecallBasis {
    /// The oldest raw message kept: it and everything after it are not searched.
    pub first_kept_message: Option<i64>,
    /// Kept messages shown only in part (their beginning and end: `excerpt`): searched too.
    pub shortened: Vec<i64>,
    /// The excerpts of the kept blocks (message id, byte start).
    pub shown: Vec<(i64, usize)>,
    /// The newest kept message that is not one of lossless-claw's re-imported rows (which are
    /// left out, `store::copies`): a block made now is anchored on it, so that it is sent
    /// again where it was.
    pub last_sent: Option<i64>,
    pub earlier_blocks: i64,
    pub earlier_tokens: i64,
}

/// What `assemble` returns: the messages for the model and how they were chosen.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[cfg_attr(test, ts(rename = "AssembleResult"))]
#[serde(rename_all = "camelCase")]
pub struct Assembled {
    #[cfg_attr(test, ts(type = "AssembledMessage[]"))]
    pub messages: Vec<HostMessage>,
    /// Estimated tokens of what is emitted, summary wrappers included.
    pub estimated_tokens: i64,
    pub stats: AssembleStats,
    /// What each emitted message is (`m<id>`, `s<id>`, or what repair added) and its tokens,
    /// to compare the next assembly with (`engine::prompt_cache`).
    #[serde(skip)]
    #[cfg_attr(test, ts(skip))]
    pub(crate) outline: Vec<(String, i64)>,
    #[serde(skip)]
    #[cfg_attr(test, ts(skip))]
    pub(crate) recall_basis: RecallBasis,
}
