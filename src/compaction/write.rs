//! Writing passes. One transaction writes one or more finished passes: their summary rows,
//! lineage links and FTS rows, and the context rewrite (covered items replaced by their
//! summaries). Before writing it checks that the rows it moves are exactly where the passes
//! planned on them; if not (another process compacted the same conversation), it writes nothing
//! and fails with E_STALE.
//!
//! Ordinals stay contiguous and in order, but a write moves only one side of what changed: the
//! rows after it shift down (the first ordinal stays 0) while that is cheap, else the rows
//! before it shift up. A pass over the oldest messages of a 50,000-item history thus moves the
//! few summaries before it instead of renumbering the 50,000 rows after it. lossless-claw reads
//! ordinals for their order only, and renumbers from 0 when it writes.

use sha2::{Digest, Sha256};

use crate::db::SchemaFlags;
use crate::error::{LcmError, Result};
use crate::live::{ItemRef, LiveContext};
use crate::sql::{Backend, Db, WriteScope};
use crate::store::context::{self, Named, Renumbering};
use crate::store::summaries::{self, NewSummary};
use crate::time;

/// `sum_` + 16 hex of SHA-256(content ‖ random nonce).
pub(crate) fn new_summary_id(content: &str) -> String {
    let mut h = Sha256::new();
    h.update(content.as_bytes());
    h.update(uuid::Uuid::now_v7().as_bytes());
    let digest = h.finalize();
    let hex: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
    format!("sum_{hex}")
}

/// The state of the live context the pending passes were planned on: each item that existed
/// in the database, by its ordinal (survivors and the items the passes consumed).
pub(crate) struct Baseline {
    /// (db ordinal, item) for every item the passes read or consumed, sorted by ordinal.
    pub items: Vec<(i64, ItemRef)>,
}

impl Baseline {
    pub(crate) fn of(ctx: &LiveContext) -> Baseline {
        Baseline {
            items: ctx
                .items
                .iter()
                .filter_map(|i| i.db_ordinal.map(|o| (o, i.r.clone())))
                .collect(),
        }
    }

    /// Adds items read after the baseline was taken (`LiveContext::read_more`).
    pub(crate) fn add(&mut self, items: &[Box<crate::live::Item>]) {
        let read: Vec<(i64, ItemRef)> = items
            .iter()
            .filter_map(|i| i.db_ordinal.map(|o| (o, i.r.clone())))
            .collect();
        let Some((first, _)) = read.first() else { return };
        let at = self.items.partition_point(|(o, _)| o < first);
        self.items.splice(at..at, read);
    }
}

/// Writes `new` and rewrites the context to `ctx` (the model after the passes), in one
/// transaction. `baseline` is the state the passes were planned on. On success `ctx` holds the
/// ordinals the rows now have. `keep_start_rows`: up to this many rows after the changed span
/// are shifted down rather than the rows before it up (see the module's doc).
pub(crate) fn write_passes(
    backend: &Backend,
    flags: SchemaFlags,
    baseline: &Baseline,
    ctx: &mut LiveContext,
    new: &[NewSummary],
    keep_start_rows: i64,
) -> Result<()> {
    if new.is_empty() {
        return Ok(());
    }
    let rewrite = Rewrite::of(baseline, ctx, keep_start_rows)?;
    let now = time::now_sqlite();
    backend.write_preserving_messages(WriteScope::Conversations(&[ctx.conversation_id]), |db| {
        write_in(db, flags, baseline, ctx, new, &rewrite, &now)?;
        // Full-text rows last (see `summaries::insert_fts`).
        summaries::insert_fts(db, flags, new)
    })?;
    rewrite.sync(ctx);
    Ok(())
}

/// The write itself, in the caller's transaction.
fn write_in(
    tx: Db,
    flags: SchemaFlags,
    baseline: &Baseline,
    ctx: &LiveContext,
    new: &[NewSummary],
    rewrite: &Rewrite,
    now: &str,
) -> Result<()> {
    let cid = ctx.conversation_id;

    // 1. The rows the rewrite moves must be exactly those the passes were planned on.
    let (lo, hi) = rewrite.checked;
    let stored = context::named_between(tx, cid, lo, hi)?;
    let expected: Vec<_> = baseline.items.iter().filter(|(o, _)| *o >= lo && *o <= hi).collect();
    let same = stored.len() == expected.len()
        && stored.iter().zip(&expected).all(|((ordinal, named), (o, want))| {
            *o == *ordinal
                && match (want, named) {
                    (ItemRef::Message(a), Named::Message(b)) => a == b,
                    (ItemRef::Summary(a), Named::Summary(b)) => a == b,
                    _ => false,
                }
        });
    if !same {
        return Err(stale(cid));
    }

    // 2. Summary rows, lineage and scores.
    summaries::insert(tx, flags, cid, now, new)?;

    // 3. The context, rewritten so that only real changes touch rows (`context::renumber`):
    //    the unread middle, the tail and items appended meanwhile shift together, and the new
    //    summaries take the gaps.
    let inserted = rewrite
        .renumbered
        .clone()
        .filter_map(|i| match (ctx.items[i].db_ordinal, &ctx.items[i].r) {
            (None, ItemRef::Summary(id)) => Some((rewrite.ordinal_of(i), id.as_str())),
            _ => None,
        })
        .collect();
    let renumbering = Renumbering {
        moved: rewrite.moved,
        consumed: &rewrite.consumed,
        survivors: &rewrite.survivors,
        after_shift: rewrite.after_shift,
        inserted,
    };
    context::renumber(tx, cid, &renumbering, now)?;
    Ok(())
}

/// How one write moves the rows of the live context. The passes replaced runs of items by
/// summaries, so the final list differs from the baseline in one span: from its first new
/// item (`f`) to its last (`l`), which covers the baseline rows `o1..=o2`.
#[derive(Debug, PartialEq, Eq)]
struct Rewrite {
    /// Final indexes whose rows get new ordinals: `f..=l`, or `0..=l` when the front moves.
    renumbered: std::ops::RangeInclusive<usize>,
    /// New ordinal of final index `i` in `renumbered`: `base + i`.
    base: i64,
    /// Rows moved to temporary ordinals (inclusive), and rows checked against the baseline.
    moved: (i64, i64),
    checked: (i64, i64),
    /// Baseline ranges the passes consumed: deleted.
    consumed: Vec<(i64, i64)>,
    /// Runs of surviving rows that move together: (from, to, shift to the new ordinal).
    survivors: Vec<(i64, i64, i64)>,
    /// Shift of every row after the span (`-k`, the rows the span lost), 0 when they stay.
    after_shift: i64,
}

impl Rewrite {
    fn of(baseline: &Baseline, ctx: &LiveContext, keep_start_rows: i64) -> Result<Rewrite> {
        let items = &ctx.items;
        let (Some(f), Some(l)) = (
            items.iter().position(|i| i.db_ordinal.is_none()),
            items.iter().rposition(|i| i.db_ordinal.is_none()),
        ) else {
            return Err(crate::error::LcmError::Internal(
                "passes to write but no new summary in the live context".into(),
            ));
        };
        let ordinals = || baseline.items.iter().map(|(o, _)| *o);
        let first = ordinals().next().unwrap_or(0);
        let o1 = match f {
            0 => first,
            _ => {
                let before = items[f - 1].db_ordinal.unwrap_or(i64::MIN);
                ordinals().find(|o| *o > before).unwrap_or(before + 1)
            }
        };
        let o2 = match items.get(l + 1).and_then(|i| i.db_ordinal) {
            Some(after) => ordinals().rfind(|o| *o < after).unwrap_or(after - 1),
            None => ordinals().next_back().unwrap_or(ctx.last_db_ordinal),
        };
        // The span lost `k` rows; rows after it number about `last - o2` (more if appended).
        let k = (o2 - o1 + 1) - (l - f + 1) as i64;
        let after = ctx.last_db_ordinal - o2;
        let front = k > 0 && after > keep_start_rows.max(f as i64);
        let (renumbered, base, moved, checked) = if front {
            // The rows up to the span's end end where it ended; the rows after it stay put.
            (0..=l, o2 - l as i64, (first, o2), (i64::MIN, o2))
        } else if k == 0 {
            // One item for one: nothing outside the span moves.
            (f..=l, o1 - f as i64, (o1, o2), (o1, o2))
        } else {
            (f..=l, o1 - f as i64, (o1, i64::MAX), (o1, o2))
        };
        let after_shift = if front { 0 } else { -k };
        let mut survivors: Vec<(i64, i64, i64)> = Vec::new();
        for i in renumbered.clone() {
            let Some(o) = items[i].db_ordinal else { continue };
            let by = base + i as i64 - o;
            match survivors.last_mut() {
                Some((_, to, run_by)) if *to + 1 == o && *run_by == by => *to = o,
                _ => survivors.push((o, o, by)),
            }
        }
        let mut kept = survivors.iter().peekable();
        let mut consumed: Vec<(i64, i64)> = Vec::new();
        for o in ordinals().filter(|o| *o >= checked.0 && *o <= checked.1) {
            while kept.peek().is_some_and(|(_, to, _)| *to < o) {
                kept.next();
            }
            if kept.peek().is_some_and(|(from, to, _)| *from <= o && o <= *to) {
                continue;
            }
            match consumed.last_mut() {
                Some((_, to)) if *to + 1 == o => *to = o,
                _ => consumed.push((o, o)),
            }
        }
        Ok(Rewrite {
            renumbered,
            base,
            moved,
            checked,
            consumed,
            survivors,
            after_shift,
        })
    }

    fn ordinal_of(&self, i: usize) -> i64 {
        self.base + i as i64
    }

    /// Puts the ordinals the rows now have into the model.
    fn sync(&self, ctx: &mut LiveContext) {
        let end = *self.renumbered.end();
        for i in self.renumbered.clone() {
            ctx.items[i].db_ordinal = Some(self.ordinal_of(i));
        }
        if self.after_shift != 0 {
            for item in &mut ctx.items[end + 1..] {
                item.db_ordinal = item.db_ordinal.map(|o| o + self.after_shift);
            }
            if let Some(gap) = ctx.gap.as_mut() {
                gap.after += self.after_shift;
                gap.before = gap.before.saturating_add(self.after_shift);
            }
            ctx.last_db_ordinal += self.after_shift;
        }
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
pub(crate) fn summary_item(new: &NewSummary) -> crate::live::Item {
    let s = &new.fields;
    crate::live::Item::summary(
        s.summary_id.clone(),
        s.token_count,
        None,
        Some(crate::live::SummaryFacts {
            depth: s.depth,
            earliest_at: s.earliest_at.clone(),
            latest_at: s.latest_at.clone(),
            created_at: time::now_sqlite(),
            descendant_count: s.descendant_count,
            descendant_token_count: s.descendant_token_count,
            source_message_token_count: s.source_message_token_count,
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(r: ItemRef, db_ordinal: Option<i64>) -> Box<crate::live::Item> {
        Box::new(match r {
            ItemRef::Message(id) => crate::live::Item::message(id, 1, db_ordinal, None),
            ItemRef::Summary(id) => crate::live::Item::summary(id, 1, db_ordinal, None),
        })
    }

    fn baseline(n: i64) -> Baseline {
        Baseline {
            items: (0..n).map(|o| (o, ItemRef::Message(o + 100))).collect(),
        }
    }

    fn kept(o: i64) -> Box<crate::live::Item> {
        item(ItemRef::Message(o + 100), Some(o))
    }

    fn new(id: &str) -> Box<crate::live::Item> {
        item(ItemRef::Summary(id.into()), None)
    }

    #[test]
    fn a_short_suffix_shifts_down_and_the_first_ordinal_stays_0() {
        // Baseline 0..=9; the passes replaced 2..=5 by one summary and 7..=8 by another.
        let ctx = LiveContext::new(1, vec![kept(0), kept(1), new("s1"), kept(6), new("s2"), kept(9)], 9);
        let r = Rewrite::of(&baseline(10), &ctx, 1_000).unwrap();
        assert_eq!(r.renumbered, 2..=4);
        assert_eq!((r.ordinal_of(2), r.ordinal_of(4)), (2, 4));
        assert_eq!(r.consumed, vec![(2, 5), (7, 8)]);
        assert_eq!(r.survivors, vec![(6, 6, -3)]);
        assert_eq!((r.checked, r.moved), ((2, 8), (2, i64::MAX)));
        assert_eq!(r.after_shift, -4, "9 becomes 5");
    }

    #[test]
    fn a_long_suffix_stays_and_the_rows_before_the_span_move_up() {
        // Baseline 0..=20; a summary before the span, then 1..=5 and 7..=8 consumed.
        let mut items = vec![kept(0), new("s1"), kept(6), new("s2")];
        items.extend((9..21).map(kept));
        let mut ctx = LiveContext::new(1, items, 20);
        let r = Rewrite::of(&baseline(21), &ctx, 0).unwrap();
        // 4 items end at 8, where the span ended: 0 → 5, s1 → 6, 6 → 7, s2 → 8.
        assert_eq!(r.renumbered, 0..=3);
        assert_eq!(r.ordinal_of(0), 5);
        assert_eq!(r.survivors, vec![(0, 0, 5), (6, 6, 1)]);
        assert_eq!(r.consumed, vec![(1, 5), (7, 8)]);
        assert_eq!((r.checked, r.moved), ((i64::MIN, 8), (0, 8)));
        assert_eq!(r.after_shift, 0);
        r.sync(&mut ctx);
        let ordinals: Vec<i64> = ctx.items.iter().map(|i| i.db_ordinal.unwrap()).collect();
        assert_eq!(
            ordinals,
            (5..21).collect::<Vec<_>>(),
            "contiguous, the suffix untouched"
        );
        // The same passes with a generous `keep_start_rows` renumber the suffix instead.
        let mut items = vec![kept(0), new("s1"), kept(6), new("s2")];
        items.extend((9..21).map(kept));
        let mut ctx = LiveContext::new(1, items, 20);
        let r = Rewrite::of(&baseline(21), &ctx, 1_000).unwrap();
        r.sync(&mut ctx);
        let ordinals: Vec<i64> = ctx.items.iter().map(|i| i.db_ordinal.unwrap()).collect();
        assert_eq!(ordinals, (0..16).collect::<Vec<_>>());
        assert_eq!(ctx.last_db_ordinal, 15);
    }

    #[test]
    fn one_item_for_one_moves_nothing_outside_the_span() {
        let ctx = LiveContext::new(1, vec![kept(0), new("s1"), kept(2)], 2);
        let r = Rewrite::of(&baseline(3), &ctx, 0).unwrap();
        assert_eq!((r.checked, r.moved, r.after_shift), ((1, 1), (1, 1), 0));
        assert_eq!(r.consumed, vec![(1, 1)]);
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
