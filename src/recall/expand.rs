//! `expand`: what a summary stands for, walking down the DAG (never up) to its inputs and, below
//! the leaves, to the messages, until the token budget is spent.
//!
//! The walk is breadth first: all direct inputs (in order) before any of their inputs, so a
//! small budget shows the whole span at the coarsest level instead of the first input in full.

use std::collections::VecDeque;

use crate::api::{Entry, ExpandOptions, Expansion};
use crate::assemble::render::host_message;
use crate::error::Result;
use crate::sql::Db;
use crate::store::messages;
use crate::store::summaries;

pub(crate) fn expand<'a>(db: impl Into<Db<'a>>, summary_id: &str, o: &ExpandOptions) -> Result<Expansion> {
    let db = db.into();
    let _snapshot = db.snapshot()?;
    let conn = db;
    summaries::get(conn, summary_id)?;
    let mut out = Expansion {
        summary_id: summary_id.to_string(),
        entries: Vec::new(),
        estimated_tokens: 0,
        truncated: false,
    };
    // (summary to open, its level)
    let mut queue: VecDeque<(String, i64)> = VecDeque::from([(summary_id.to_string(), 0)]);
    let mut visited = std::collections::HashSet::new();
    while let Some((id, level)) = queue.pop_front() {
        if !visited.insert(id.clone()) {
            continue;
        }
        if o.max_depth.is_some_and(|max| level >= max) {
            continue;
        }
        let children = children(conn, &id, level + 1)?;
        for child in children {
            let tokens = match &child {
                Entry::Summary { token_count, .. } | Entry::Message { token_count, .. } => *token_count,
            };
            if out.estimated_tokens + tokens > o.token_budget {
                out.truncated = true;
                return Ok(out);
            }
            out.estimated_tokens += tokens;
            if let Entry::Summary { summary_id, .. } = &child {
                queue.push_back((summary_id.clone(), level + 1));
            }
            out.entries.push(child);
        }
    }
    Ok(out)
}

/// The inputs of a condensed summary, or the messages of a leaf, in order.
fn children(conn: Db, id: &str, level: i64) -> Result<Vec<Entry>> {
    let inputs: Vec<Entry> = summaries::inputs_of(conn, id)?
        .into_iter()
        .map(|i| Entry::Summary {
            summary_id: i.summary_id,
            parent_id: id.to_string(),
            level,
            kind: i.kind,
            depth: i.depth,
            token_count: i.token_count,
            earliest_at: i.earliest_at.map(crate::time::iso_or_raw),
            latest_at: i.latest_at.map(crate::time::iso_or_raw),
            content: i.content,
        })
        .collect();
    if !inputs.is_empty() {
        return Ok(inputs);
    }
    // A message the leaf names but that is gone is left out.
    let ids = summaries::messages_of(conn, id)?;
    let texts = messages::texts(conn, &ids)?;
    let ids: Vec<i64> = ids.into_iter().filter(|m| texts.contains_key(m)).collect();
    let parts = messages::load_parts(conn, &ids)?;
    Ok(ids
        .iter()
        .zip(parts)
        .map(|(message_id, parts)| {
            let m = &texts[message_id];
            Entry::Message {
                message_id: *message_id,
                parent_id: id.to_string(),
                level,
                token_count: m.token_count,
                message: host_message(&m.role, &m.content, &parts).to_json(),
            }
        })
        .collect())
}
