//! Where an item sits in the DAG: whether it is live, and the chain of summaries above it up
//! to the live one. A message is covered by its leaf summary (`summary_messages`); a summary
//! by the condensed node that took it as an input (`summary_parents`).

use std::collections::{HashMap, HashSet};

use rusqlite::{Connection, OptionalExtension};
use serde::Serialize;

use crate::error::Result;

/// Longest chain followed (a DAG deeper than this is not one lcm-native or the plugin wrote;
/// the bound also stops a cycle in a damaged database).
const MAX_CHAIN: usize = 64;

/// A summary in a covering chain.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct ChainLink {
    pub summary_id: String,
    #[cfg_attr(test, ts(type = "SummaryKind"))]
    pub kind: String,
    pub depth: i64,
    pub live: bool,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Cover {
    /// The item itself is a live context item.
    pub live: bool,
    /// The live summary above the item (None when the item is live, or when nothing live
    /// covers it in a damaged database).
    pub live_summary: Option<String>,
    /// The summaries above the item, nearest first, up to and including the live one.
    pub chain: Vec<ChainLink>,
}

fn is_live_summary(conn: &Connection, summary_id: &str) -> Result<bool> {
    Ok(conn
        .prepare_cached("SELECT 1 FROM context_items WHERE summary_id = ?1 LIMIT 1")?
        .query_row([summary_id], |_| Ok(()))
        .optional()?
        .is_some())
}

fn link(conn: &Connection, summary_id: String) -> Result<Option<ChainLink>> {
    let row = conn
        .prepare_cached("SELECT kind, depth FROM summaries WHERE summary_id = ?1")?
        .query_row([&summary_id], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))
        .optional()?;
    let Some((kind, depth)) = row else { return Ok(None) };
    let live = is_live_summary(conn, &summary_id)?;
    Ok(Some(ChainLink {
        summary_id,
        kind,
        depth,
        live,
    }))
}

/// Follows consumers from `first` (the nearest covering summary) up to a live one.
fn climb(conn: &Connection, first: Option<String>) -> Result<Cover> {
    let mut cover = Cover::default();
    let mut next = first;
    while let Some(id) = next.take() {
        if cover.chain.len() >= MAX_CHAIN || cover.chain.iter().any(|l| l.summary_id == id) {
            break;
        }
        let Some(l) = link(conn, id)? else { break };
        let live = l.live;
        let id = l.summary_id.clone();
        cover.chain.push(l);
        if live {
            cover.live_summary = Some(id);
            break;
        }
        next = consumer_of(conn, &id)?;
    }
    Ok(cover)
}

/// The condensed node that took `summary_id` as an input, if any.
pub(crate) fn consumer_of(conn: &Connection, summary_id: &str) -> Result<Option<String>> {
    Ok(conn
        .prepare_cached("SELECT summary_id FROM summary_parents WHERE parent_summary_id = ?1 ORDER BY rowid LIMIT 1")?
        .query_row([summary_id], |r| r.get(0))
        .optional()?)
}

fn leaf_of(conn: &Connection, message_id: i64) -> Result<Option<String>> {
    Ok(conn
        .prepare_cached("SELECT summary_id FROM summary_messages WHERE message_id = ?1 ORDER BY rowid LIMIT 1")?
        .query_row([message_id], |r| r.get(0))
        .optional()?)
}

/// Which of `ids` (messages no summary covers) are live context items. Under the lossless
/// invariant all are; seed-era compaction-event rows are neither. One scan of the live items
/// of the conversations involved.
fn live_among(conn: &Connection, ids: &[i64]) -> Result<HashSet<i64>> {
    if ids.is_empty() {
        return Ok(HashSet::new());
    }
    let json = serde_json::to_string(ids)?;
    let live = conn
        .prepare_cached(
            "SELECT ci.message_id FROM context_items ci
             WHERE ci.conversation_id IN (SELECT DISTINCT m.conversation_id FROM messages m
                                          WHERE m.message_id IN (SELECT value FROM json_each(?1)))
               AND ci.message_id IN (SELECT value FROM json_each(?1))",
        )?
        .query_map([json], |r| r.get(0))?
        .collect::<std::result::Result<_, _>>()?;
    Ok(live)
}

/// Where each of these messages sits: covered by a chain up to a live summary, or live itself.
pub(crate) fn of_messages(conn: &Connection, ids: &[i64]) -> Result<HashMap<i64, Cover>> {
    let mut out = HashMap::with_capacity(ids.len());
    let mut uncovered = Vec::new();
    for &id in ids {
        match leaf_of(conn, id)? {
            Some(leaf) => {
                out.insert(id, climb(conn, Some(leaf))?);
            }
            None => uncovered.push(id),
        }
    }
    let live = live_among(conn, &uncovered)?;
    for id in uncovered {
        out.insert(
            id,
            Cover {
                live: live.contains(&id),
                ..Cover::default()
            },
        );
    }
    Ok(out)
}

pub(crate) fn of_message(conn: &Connection, message_id: i64) -> Result<Cover> {
    Ok(of_messages(conn, &[message_id])?
        .remove(&message_id)
        .unwrap_or_default())
}

pub(crate) fn of_summary(conn: &Connection, summary_id: &str) -> Result<Cover> {
    if is_live_summary(conn, summary_id)? {
        return Ok(Cover {
            live: true,
            ..Cover::default()
        });
    }
    climb(conn, consumer_of(conn, summary_id)?)
}
