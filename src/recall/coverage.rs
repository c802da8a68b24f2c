//! Where an item sits in the DAG: whether it is live, and the chain of summaries above it up
//! to the live one. A message is covered by its leaf summary (`summary_messages`); a summary
//! by the condensed node that took it as an input (`summary_parents`).

use std::collections::HashMap;

use crate::api::ChainLink;
use crate::error::Result;
use crate::sql::Db;
use crate::store::dag;

/// Longest chain followed (a DAG deeper than this is not one lcm-native or the plugin wrote;
/// the bound also stops a cycle in a damaged database).
const MAX_CHAIN: usize = 64;

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

fn link(conn: Db, summary_id: String) -> Result<Option<ChainLink>> {
    let Some((kind, depth)) = dag::kind_and_depth(conn, &summary_id)? else {
        return Ok(None);
    };
    let live = dag::is_live(conn, &summary_id)?;
    Ok(Some(ChainLink {
        summary_id,
        kind,
        depth,
        live,
    }))
}

/// Follows consumers from `first` (the nearest covering summary) up to a live one.
fn climb(conn: Db, first: Option<String>) -> Result<Cover> {
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

pub(crate) use dag::consumer_of;

/// Where each of these messages sits: covered by a chain up to a live summary, or live itself.
pub(crate) fn of_messages<'a>(conn: impl Into<Db<'a>>, ids: &[i64]) -> Result<HashMap<i64, Cover>> {
    let conn = conn.into();
    let (mut out, uncovered) = covered(conn, ids)?;
    // Under the lossless invariant every uncovered message is live; seed-era compaction-event
    // rows are neither.
    let live = dag::live_messages_among(conn, &uncovered)?;
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

/// The live summary above each of these messages that a summary covers. Unlike `of_messages`
/// it does not ask whether an uncovered message is a live item: that reads every context item
/// of its conversation (context_items has no index by message), 16 ms at 100,000 messages.
pub(crate) fn live_summaries_over<'a>(conn: impl Into<Db<'a>>, ids: &[i64]) -> Result<HashMap<i64, String>> {
    let (covers, _) = covered(conn.into(), ids)?;
    Ok(covers
        .into_iter()
        .filter_map(|(id, c)| c.live_summary.map(|s| (id, s)))
        .collect())
}

/// The covers of the messages a leaf summary holds, and the ids of those none does.
fn covered(conn: Db, ids: &[i64]) -> Result<(HashMap<i64, Cover>, Vec<i64>)> {
    let mut out = HashMap::with_capacity(ids.len());
    let mut uncovered = Vec::new();
    let mut leaves = dag::leaves_of(conn, ids)?;
    for &id in ids {
        match leaves.remove(&id) {
            Some(leaf) => {
                out.insert(id, climb(conn, Some(leaf))?);
            }
            None => uncovered.push(id),
        }
    }
    Ok((out, uncovered))
}

pub(crate) fn of_message<'a>(conn: impl Into<Db<'a>>, message_id: i64) -> Result<Cover> {
    let conn = conn.into();
    Ok(of_messages(conn, &[message_id])?
        .remove(&message_id)
        .unwrap_or_default())
}

pub(crate) fn of_summary<'a>(conn: impl Into<Db<'a>>, summary_id: &str) -> Result<Cover> {
    let conn = conn.into();
    if dag::is_live(conn, summary_id)? {
        return Ok(Cover {
            live: true,
            ..Cover::default()
        });
    }
    climb(conn, consumer_of(conn, summary_id)?)
}
