//! Writing passes. One transaction writes one or more finished passes: their summary rows,
//! lineage links and FTS rows, and the context rewrite (covered items replaced by their
//! summaries, ordinals dense 0..n-1). Before writing it checks that the items the passes were
//! planned on are still exactly where they were; if not (another process compacted the same
//! conversation), it writes nothing and fails with E_STALE.

use rusqlite::{params, Connection, TransactionBehavior};
use sha2::{Digest, Sha256};

use super::model::{ItemRef, LiveContext};
use crate::db::SchemaFlags;
use crate::error::{LcmError, Result};
use crate::store::summaries::{self, NewSummary};
use crate::time;

/// `sum_` + 16 hex of SHA-256(content ‖ random nonce).
pub fn new_summary_id(content: &str) -> String {
    let mut h = Sha256::new();
    h.update(content.as_bytes());
    h.update(uuid::Uuid::now_v7().as_bytes());
    let digest = h.finalize();
    let hex: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
    format!("sum_{hex}")
}

/// The state of the live context the pending passes were planned on: each item that existed
/// in the database, by its ordinal (survivors and the items the passes consumed).
pub struct Baseline {
    /// (db ordinal, item) for every item the passes read or consumed, sorted by ordinal.
    pub items: Vec<(i64, ItemRef)>,
    pub last_db_ordinal: i64,
}

impl Baseline {
    pub fn of(ctx: &LiveContext) -> Baseline {
        Baseline {
            items: ctx
                .items
                .iter()
                .filter_map(|i| i.db_ordinal.map(|o| (o, i.r.clone())))
                .collect(),
            last_db_ordinal: ctx.last_db_ordinal,
        }
    }
}

/// Writes `new` and rewrites the context to `ctx` (the model after the passes), in one
/// transaction. `baseline` is the state the passes were planned on. On success `ctx` is in
/// sync with the database (dense ordinals).
pub fn write_passes(
    conn: &mut Connection,
    flags: SchemaFlags,
    baseline: &Baseline,
    ctx: &mut LiveContext,
    new: &[NewSummary],
) -> Result<()> {
    if new.is_empty() {
        return Ok(());
    }
    let cid = ctx.conversation_id;
    // The first position the passes changed: items before it keep their ordinals.
    let first_changed = ctx
        .items
        .iter()
        .enumerate()
        .find(|(i, item)| item.db_ordinal != Some(*i as i64))
        .map(|(i, _)| i as i64)
        .unwrap_or(ctx.items.len() as i64);
    let now = time::now_sqlite();
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;

    // 1. The items from `first_changed` on must be exactly those the passes were planned on.
    {
        let mut stmt = tx.prepare_cached(
            "SELECT ordinal, item_type, message_id, summary_id FROM context_items
             WHERE conversation_id = ?1 AND ordinal >= ?2 AND ordinal <= ?3 ORDER BY ordinal",
        )?;
        let mut rows = stmt.query(params![cid, first_changed, baseline.last_db_ordinal])?;
        let mut expected = baseline.items.iter().filter(|(o, _)| *o >= first_changed);
        while let Some(r) = rows.next()? {
            let ordinal: i64 = r.get(0)?;
            let kind: String = r.get(1)?;
            let actual = if kind == "message" {
                r.get::<_, Option<i64>>(2)?.map(ItemRef::Message)
            } else {
                r.get::<_, Option<String>>(3)?.map(ItemRef::Summary)
            };
            match (expected.next(), actual) {
                (Some((o, want)), Some(got)) if *o == ordinal && *want == got => {}
                _ => return Err(stale(cid)),
            }
        }
        if expected.next().is_some() {
            return Err(stale(cid));
        }
    }

    // 2. Summary rows, lineage and scores.
    summaries::insert(&tx, flags, cid, &now, new)?;

    // 3. The context, rewritten in place so that only real changes touch rows (and fire the
    //    live-totals triggers): every item from `first_changed` on moves to a negative
    //    temporary ordinal, consumed items are deleted, each run of survivors moves to its new
    //    place in one UPDATE, items appended meanwhile (by ingest) follow the model, and the new
    //    summaries are inserted into the gaps. Rows that stay keep their `created_at`.
    let final_len = ctx.items.len() as i64;
    let delta = final_len - (baseline.last_db_ordinal + 1);
    let plan = RewritePlan::of(baseline, ctx, first_changed);
    tx.prepare_cached("UPDATE context_items SET ordinal = -1 - ordinal WHERE conversation_id = ?1 AND ordinal >= ?2")?
        .execute(params![cid, first_changed])?;
    {
        let mut delete = tx.prepare_cached(
            "DELETE FROM context_items WHERE conversation_id = ?1 AND ordinal >= -1 - ?3 AND ordinal <= -1 - ?2",
        )?;
        for (from, to) in &plan.consumed {
            delete.execute(params![cid, from, to])?;
        }
        let mut shift = tx.prepare_cached(
            "UPDATE context_items SET ordinal = (-1 - ordinal) + ?4
             WHERE conversation_id = ?1 AND ordinal >= -1 - ?3 AND ordinal <= -1 - ?2",
        )?;
        for (from, to, by) in &plan.survivors {
            shift.execute(params![cid, from, to, by])?;
        }
        // Appended meanwhile: everything still negative lies after the baseline.
        tx.prepare_cached(
            "UPDATE context_items SET ordinal = (-1 - ordinal) + ?2 WHERE conversation_id = ?1 AND ordinal < 0",
        )?
        .execute(params![cid, delta])?;
        let mut insert = tx.prepare_cached(
            "INSERT INTO context_items (conversation_id, ordinal, item_type, summary_id, created_at)
             VALUES (?1, ?2, 'summary', ?3, ?4)",
        )?;
        for (i, item) in ctx.items.iter().enumerate().skip(first_changed as usize) {
            if let (None, ItemRef::Summary(id)) = (item.db_ordinal, &item.r) {
                insert.execute(params![cid, i as i64, id, now])?;
            }
        }
    }
    // 4. Full-text rows last (see `summaries::insert_fts`).
    summaries::insert_fts(&tx, flags, new)?;
    tx.commit()?;

    for (i, item) in ctx.items.iter_mut().enumerate() {
        item.db_ordinal = Some(i as i64);
    }
    ctx.last_db_ordinal = final_len - 1;
    Ok(())
}

/// How the rows from the first changed ordinal on move: inclusive ranges of baseline ordinals.
#[derive(Debug, PartialEq, Eq)]
struct RewritePlan {
    /// Ranges the passes consumed (now covered by a new summary): deleted.
    consumed: Vec<(i64, i64)>,
    /// Runs of surviving items that move together: (from, to, shift to the new ordinal).
    survivors: Vec<(i64, i64, i64)>,
}

impl RewritePlan {
    fn of(baseline: &Baseline, ctx: &LiveContext, first_changed: i64) -> RewritePlan {
        let mut survivors: Vec<(i64, i64, i64)> = Vec::new();
        for (i, item) in ctx.items.iter().enumerate().skip(first_changed as usize) {
            let Some(o) = item.db_ordinal else { continue };
            let by = i as i64 - o;
            match survivors.last_mut() {
                Some((_, to, run_by)) if *to + 1 == o && *run_by == by => *to = o,
                _ => survivors.push((o, o, by)),
            }
        }
        let mut kept = survivors.iter().peekable();
        let mut consumed: Vec<(i64, i64)> = Vec::new();
        for (o, _) in baseline.items.iter().filter(|(o, _)| *o >= first_changed) {
            while kept.peek().is_some_and(|(_, to, _)| to < o) {
                kept.next();
            }
            if kept.peek().is_some_and(|(from, to, _)| from <= o && o <= to) {
                continue;
            }
            match consumed.last_mut() {
                Some((_, to)) if *to + 1 == *o => *to = *o,
                _ => consumed.push((*o, *o)),
            }
        }
        RewritePlan { consumed, survivors }
    }
}

fn stale(cid: i64) -> LcmError {
    LcmError::Stale {
        conversation_id: cid,
        message: format!(
            "the live context of conversation {cid} changed while the summarizer was running (another process \
             compacted it?); nothing was written, retry the pass"
        ),
    }
}

/// Appends created items' facts: an `Item` for a new summary, as the model holds it.
pub fn summary_item(new: &NewSummary) -> super::model::Item {
    let s = &new.fields;
    super::model::Item {
        r: ItemRef::Summary(s.summary_id.clone()),
        tokens: s.token_count,
        db_ordinal: None,
        role: None,
        created_at: None,
        summary: Some(super::model::SummaryFacts {
            depth: s.depth,
            earliest_at: s.earliest_at.clone(),
            latest_at: s.latest_at.clone(),
            created_at: time::now_sqlite(),
            descendant_count: s.descendant_count,
            descendant_token_count: s.descendant_token_count,
            source_message_token_count: s.source_message_token_count,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(r: ItemRef, db_ordinal: Option<i64>) -> Box<super::super::model::Item> {
        Box::new(super::super::model::Item {
            r,
            tokens: 1,
            db_ordinal,
            role: None,
            created_at: None,
            summary: None,
        })
    }

    #[test]
    fn the_rewrite_moves_runs_of_survivors_and_deletes_consumed_ranges() {
        // Baseline 0..=9; the passes replaced 2..=5 by one summary and 7..=8 by another.
        let baseline = Baseline {
            items: (0..10).map(|o| (o, ItemRef::Message(o + 100))).collect(),
            last_db_ordinal: 9,
        };
        let kept = |o: i64| item(ItemRef::Message(o + 100), Some(o));
        let new = |id: &str| item(ItemRef::Summary(id.into()), None);
        let ctx = LiveContext::new(1, vec![kept(0), kept(1), new("s1"), kept(6), new("s2"), kept(9)], 9);
        let plan = RewritePlan::of(&baseline, &ctx, 2);
        assert_eq!(
            plan,
            RewritePlan {
                consumed: vec![(2, 5), (7, 8)],
                survivors: vec![(6, 6, -3), (9, 9, -4)],
            }
        );
    }

    #[test]
    fn summary_ids_have_the_plugin_shape_and_differ_for_equal_content() {
        let a = new_summary_id("same");
        let b = new_summary_id("same");
        assert_ne!(a, b);
        assert!(a.starts_with("sum_") && a.len() == 20);
        assert!(a[4..].chars().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
    }
}
