//! `expand`: what a summary stands for, walking down the DAG (never up) to its inputs and, below
//! the leaves, to the messages, until the token budget is spent.
//!
//! The walk is breadth first: all direct inputs (in order) before any of their inputs, so a
//! small budget shows the whole span at the coarsest level instead of the first input in full.

use std::collections::VecDeque;

use rusqlite::Connection;
use serde::Serialize;
use serde_json::Value;

use crate::assemble::render::host_message;
use crate::error::Result;
use crate::store::messages::load_parts;
use crate::store::summaries;

pub(crate) const DEFAULT_TOKEN_BUDGET: i64 = 4000;

/// Options of `expand`.
#[derive(Clone, Debug, serde::Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExpandOptions {
    /// Stored tokens of the entries returned, at most. Default 4000.
    #[serde(
        default = "default_budget",
        skip_serializing,
        deserialize_with = "crate::input::positive"
    )]
    pub token_budget: i64,
    /// Levels below the summary to walk (1 = its direct inputs or messages). Default: no limit.
    #[serde(default, skip_serializing, deserialize_with = "crate::input::opt_positive")]
    pub max_depth: Option<i64>,
}

fn default_budget() -> i64 {
    DEFAULT_TOKEN_BUDGET
}

impl Default for ExpandOptions {
    fn default() -> ExpandOptions {
        ExpandOptions {
            token_budget: DEFAULT_TOKEN_BUDGET,
            max_depth: None,
        }
    }
}

/// An entry of an expansion: an input summary, or a message below a leaf.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[cfg_attr(test, ts(rename = "ExpansionEntry"))]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Entry {
    #[serde(rename_all = "camelCase")]
    Summary {
        summary_id: String,
        /// The summary it was reached from.
        parent_id: String,
        /// Levels below the expanded summary (1 = a direct input).
        level: i64,
        #[cfg_attr(test, ts(type = "SummaryKind"))]
        kind: String,
        depth: i64,
        token_count: i64,
        earliest_at: Option<String>,
        latest_at: Option<String>,
        content: String,
    },
    #[serde(rename_all = "camelCase")]
    Message {
        message_id: i64,
        parent_id: String,
        level: i64,
        token_count: i64,
        /// The message as `assemble` presents it.
        #[cfg_attr(test, ts(type = "AssembledMessage"))]
        message: Value,
    },
}

/// What `expand` returns.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct Expansion {
    pub summary_id: String,
    /// Breadth first: every direct input (in order) before any of their inputs.
    pub entries: Vec<Entry>,
    /// Stored tokens of the entries returned.
    pub estimated_tokens: i64,
    /// The budget ran out before everything below the summary (within `maxDepth`) was reached.
    pub truncated: bool,
}

pub(crate) fn expand(conn: &Connection, summary_id: &str, o: &ExpandOptions) -> Result<Expansion> {
    let tx = conn.unchecked_transaction()?;
    let conn: &Connection = &tx;
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
fn children(conn: &Connection, id: &str, level: i64) -> Result<Vec<Entry>> {
    let inputs: Vec<Entry> = conn
        .prepare_cached(
            "SELECT s.summary_id, s.kind, s.depth, s.token_count, s.earliest_at, s.latest_at, s.content
             FROM summary_parents p JOIN summaries s ON s.summary_id = p.parent_summary_id
             WHERE p.summary_id = ?1 ORDER BY p.ordinal",
        )?
        .query_map([id], |r| {
            Ok(Entry::Summary {
                summary_id: r.get(0)?,
                parent_id: id.to_string(),
                level,
                kind: r.get(1)?,
                depth: r.get(2)?,
                token_count: r.get(3)?,
                earliest_at: r.get::<_, Option<String>>(4)?.map(crate::time::iso_or_raw),
                latest_at: r.get::<_, Option<String>>(5)?.map(crate::time::iso_or_raw),
                content: r.get(6)?,
            })
        })?
        .collect::<std::result::Result<_, _>>()?;
    if !inputs.is_empty() {
        return Ok(inputs);
    }
    let rows: Vec<(i64, String, String, i64)> = conn
        .prepare_cached(
            "SELECT m.message_id, m.role, m.content, m.token_count FROM summary_messages sm
             JOIN messages m ON m.message_id = sm.message_id
             WHERE sm.summary_id = ?1 ORDER BY sm.ordinal",
        )?
        .query_map([id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?
        .collect::<std::result::Result<_, _>>()?;
    let ids: Vec<i64> = rows.iter().map(|r| r.0).collect();
    let parts = load_parts(conn, &ids)?;
    Ok(rows
        .into_iter()
        .zip(parts)
        .map(|((message_id, role, content, token_count), parts)| Entry::Message {
            message_id,
            parent_id: id.to_string(),
            level,
            token_count,
            message: host_message(&role, &content, &parts).to_json(),
        })
        .collect())
}
