//! The rows of a conversation's live context (`context_items`), each with what a reader needs
//! of the message or summary it names, read in ordinal order or newest first, whole or by
//! ordinal range, stopping when the reader has enough. `live` makes items of them.

use rusqlite::params;

use crate::error::Result;
use crate::sql::Db;

/// One row of `context_items` with the row it names (`None` fields when that row is missing
/// or the item is of the other kind).
pub(crate) struct ItemRow {
    pub ordinal: i64,
    /// `message` or `summary`.
    pub item_type: String,
    pub message_id: Option<i64>,
    pub summary_id: Option<String>,
    pub role: Option<String>,
    pub message_tokens: Option<i64>,
    pub depth: Option<i64>,
    pub summary_tokens: Option<i64>,
    pub earliest_at: Option<String>,
    pub latest_at: Option<String>,
    pub created_at: Option<String>,
    pub descendant_count: Option<i64>,
    pub descendant_token_count: Option<i64>,
    pub source_message_token_count: Option<i64>,
    /// A summary's text, when asked for.
    pub content: Option<String>,
}

/// Which items to read, and in which order.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Span {
    /// Every item, oldest first.
    All,
    /// Every item, newest first.
    NewestFirst,
    /// The items before this ordinal, oldest first.
    Before(i64),
    /// The item at this ordinal.
    At(i64),
    /// At most `limit` items strictly between two ordinals, oldest first.
    Between { after: i64, before: i64, limit: i64 },
}

/// The query of the live items, with each summary's content as the last column when
/// `$content` (the row is at hand; a second query would look every summary up again).
macro_rules! item_query {
    ($content:literal) => {
        concat!(
            "SELECT ci.ordinal, ci.item_type, ci.message_id, ci.summary_id,
        m.role, m.token_count,
        s.depth, s.token_count, s.earliest_at, s.latest_at, s.created_at,
        s.descendant_count, s.descendant_token_count, s.source_message_token_count, ",
            $content,
            "
 FROM context_items ci
 LEFT JOIN messages m ON ci.item_type = 'message' AND m.message_id = ci.message_id
 LEFT JOIN summaries s ON ci.item_type = 'summary' AND s.summary_id = ci.summary_id
 WHERE ci.conversation_id = ?1"
        )
    };
}

const WITHOUT_CONTENT: &str = item_query!("NULL");
const WITH_CONTENT: &str = item_query!("s.content");

/// Reads the items of `span` of a conversation, handing each row to `each` until it returns
/// false. With `content`, a summary's row carries its text.
pub(crate) fn read_items<'a>(
    db: impl Into<Db<'a>>,
    conversation_id: i64,
    span: Span,
    content: bool,
    mut each: impl FnMut(ItemRow) -> Result<bool>,
) -> Result<()> {
    let db = db.into();
    let base = if content { WITH_CONTENT } else { WITHOUT_CONTENT };
    let (tail, a, b, c) = match span {
        // PostgreSQL answers a query whole, every row sent before the first is read: a read
        // that may stop early goes in pages there (SQLite stops reading where `each` stops).
        Span::All | Span::NewestFirst | Span::Before(_) if matches!(db, Db::Pg(_)) => {
            return read_pages(db, conversation_id, span, base, each);
        }
        Span::All => (" ORDER BY ci.ordinal", None, None, None),
        Span::NewestFirst => (" ORDER BY ci.ordinal DESC", None, None, None),
        Span::Before(o) => (" AND ci.ordinal < ?2 ORDER BY ci.ordinal", Some(o), None, None),
        Span::At(o) => (" AND ci.ordinal = ?2", Some(o), None, None),
        Span::Between { after, before, limit } => (RANGE_OLDEST_FIRST, Some(after), Some(before), Some(limit)),
    };
    let sql = format!("{base}{tail}");
    let mut params: Vec<&dyn rusqlite::ToSql> = vec![&conversation_id];
    params.extend(a.iter().map(|v| v as &dyn rusqlite::ToSql));
    params.extend(b.iter().map(|v| v as &dyn rusqlite::ToSql));
    if b.is_some() {
        params.push(&c);
    }
    db.query_each(&sql, params.as_slice(), |r| each(item_row(r)?))
}

/// At most `?4` items strictly between ordinals `?2` and `?3`, in either order.
const RANGE_OLDEST_FIRST: &str = " AND ci.ordinal > ?2 AND ci.ordinal < ?3 ORDER BY ci.ordinal LIMIT ?4";
const RANGE_NEWEST_FIRST: &str = " AND ci.ordinal > ?2 AND ci.ordinal < ?3 ORDER BY ci.ordinal DESC LIMIT ?4";

/// First page of `read_pages`; each next one is twice as long, up to `LAST_PAGE`: a read that
/// stops after a few items reads a few, one that reads all takes a handful of round trips.
const FIRST_PAGE: i64 = 1024;
const LAST_PAGE: i64 = 8192;

/// `read_items` of a whole span, oldest or newest first, one page of ordinals after another.
fn read_pages(
    db: Db,
    conversation_id: i64,
    span: Span,
    base: &str,
    mut each: impl FnMut(ItemRow) -> Result<bool>,
) -> Result<()> {
    let newest_first = matches!(span, Span::NewestFirst);
    let range = if newest_first {
        RANGE_NEWEST_FIRST
    } else {
        RANGE_OLDEST_FIRST
    };
    let sql = format!("{base}{range}");
    let (mut after, mut before) = match span {
        Span::Before(o) => (i64::MIN, o),
        _ => (i64::MIN, i64::MAX),
    };
    let mut page = FIRST_PAGE;
    loop {
        let (mut read, mut stopped, mut edge) = (0, false, None);
        db.query_each(&sql, params![conversation_id, after, before, page], |r| {
            let row = item_row(r)?;
            read += 1;
            edge = Some(row.ordinal);
            stopped = !each(row)?;
            Ok(!stopped)
        })?;
        match edge {
            Some(edge) if !stopped && read == page => match newest_first {
                true => before = edge,
                false => after = edge,
            },
            _ => return Ok(()),
        }
        page = (page * 2).min(LAST_PAGE);
    }
}

fn item_row(r: &crate::sql::Row) -> Result<ItemRow> {
    Ok(ItemRow {
        ordinal: r.get(0)?,
        item_type: r.get(1)?,
        message_id: r.get(2)?,
        summary_id: r.get(3)?,
        role: r.get(4)?,
        message_tokens: r.get(5)?,
        depth: r.get(6)?,
        summary_tokens: r.get(7)?,
        earliest_at: r.get(8)?,
        latest_at: r.get(9)?,
        created_at: r.get(10)?,
        descendant_count: r.get(11)?,
        descendant_token_count: r.get(12)?,
        source_message_token_count: r.get(13)?,
        content: r.get(14)?,
    })
}

/// The highest ordinal of a conversation's live items, -1 when it has none.
pub(crate) fn last_ordinal<'a>(db: impl Into<Db<'a>>, conversation_id: i64) -> Result<i64> {
    db.into().query_one(
        "SELECT COALESCE(MAX(ordinal), -1) FROM context_items WHERE conversation_id = ?1",
        params![conversation_id],
        |r| r.get(0),
    )
}

/// What a context row names: a message, a summary, or (a malformed row) neither.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Named {
    Message(i64),
    Summary(String),
    Nothing,
}

/// The rows with ordinals in `lo..=hi`, in order, with what each names.
pub(crate) fn named_between<'a>(
    db: impl Into<Db<'a>>,
    conversation_id: i64,
    lo: i64,
    hi: i64,
) -> Result<Vec<(i64, Named)>> {
    db.into().query_map(
        "SELECT ordinal, item_type, message_id, summary_id FROM context_items
         WHERE conversation_id = ?1 AND ordinal >= ?2 AND ordinal <= ?3 ORDER BY ordinal",
        params![conversation_id, lo, hi],
        |r| {
            let kind: String = r.get(1)?;
            let named = if kind == "message" {
                r.get::<Option<i64>>(2)?.map_or(Named::Nothing, Named::Message)
            } else {
                r.get::<Option<String>>(3)?.map_or(Named::Nothing, Named::Summary)
            };
            Ok((r.get(0)?, named))
        },
    )
}

/// How one write renumbers a conversation's live context (`compaction::write` plans it):
/// the rows of `moved` go to negative temporary ordinals, `consumed` ranges are deleted, each
/// run of `survivors` (from, to, shift) moves to its new place in one UPDATE, every row after
/// the span shifts by `after_shift`, and `inserted` summaries take their ordinals. Only real
/// changes touch rows (and fire the live-totals triggers); rows that stay keep `created_at`.
pub(crate) struct Renumbering<'a> {
    pub moved: (i64, i64),
    pub consumed: &'a [(i64, i64)],
    pub survivors: &'a [(i64, i64, i64)],
    pub after_shift: i64,
    pub inserted: Vec<(i64, &'a str)>,
}

/// Applies `r` in the caller's transaction; new rows get `now` as their `created_at`.
pub(crate) fn renumber<'a>(tx: impl Into<Db<'a>>, conversation_id: i64, r: &Renumbering<'_>, now: &str) -> Result<()> {
    let tx = tx.into();
    let cid = conversation_id;
    let (from, to) = r.moved;
    tx.execute(
        "UPDATE context_items SET ordinal = -1 - ordinal WHERE conversation_id = ?1 AND ordinal >= ?2 AND ordinal <= ?3",
        params![cid, from, to],
    )?;
    for (from, to) in r.consumed {
        tx.execute(
            "DELETE FROM context_items WHERE conversation_id = ?1 AND ordinal >= -1 - ?3 AND ordinal <= -1 - ?2",
            params![cid, from, to],
        )?;
    }
    for (from, to, by) in r.survivors {
        tx.execute(
            "UPDATE context_items SET ordinal = (-1 - ordinal) + ?4
             WHERE conversation_id = ?1 AND ordinal >= -1 - ?3 AND ordinal <= -1 - ?2",
            params![cid, from, to, by],
        )?;
    }
    if r.after_shift != 0 {
        tx.execute(
            "UPDATE context_items SET ordinal = (-1 - ordinal) + ?2 WHERE conversation_id = ?1 AND ordinal < 0",
            params![cid, r.after_shift],
        )?;
    }
    for (ordinal, id) in &r.inserted {
        tx.execute(
            "INSERT INTO context_items (conversation_id, ordinal, item_type, summary_id, created_at)
             VALUES (?1, ?2, 'summary', ?3, ?4)",
            params![cid, ordinal, id, now],
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::on_both_engines;

    /// Ordinal, message id, summary id and summary text of each item read.
    type Item = (i64, Option<i64>, Option<String>, Option<String>);

    fn ordinals(db: Db, span: Span) -> Vec<Item> {
        let mut out = Vec::new();
        read_items(db, 1, span, true, |r| {
            out.push((r.ordinal, r.message_id, r.summary_id, r.content));
            Ok(true)
        })
        .unwrap();
        out
    }

    /// A context longer than a page reads whole, in order, on both engines; a reader that
    /// stops mid-way is handed nothing more (PostgreSQL reads it in pages).
    #[test]
    fn a_long_context_reads_across_pages_and_stops_where_the_reader_stops() {
        on_both_engines("context_pages", |db, _, engine| {
            let n = FIRST_PAGE * 3 + 5;
            crate::test_support::seed_conversation(db, n);
            for seq in 0..n {
                db.execute(
                    "INSERT INTO context_items (conversation_id, ordinal, item_type, message_id) VALUES (1, ?1, 'message', ?2)",
                    params![seq, seq + 1],
                )
                .unwrap();
            }
            let all: Vec<i64> = ordinals(db, Span::All).iter().map(|r| r.0).collect();
            assert_eq!(all, (0..n).collect::<Vec<_>>(), "{engine}");
            let newest: Vec<i64> = ordinals(db, Span::NewestFirst).iter().map(|r| r.0).collect();
            assert_eq!(newest, (0..n).rev().collect::<Vec<_>>(), "{engine}");
            let before: Vec<i64> = ordinals(db, Span::Before(FIRST_PAGE + 7)).iter().map(|r| r.0).collect();
            assert_eq!(before, (0..FIRST_PAGE + 7).collect::<Vec<_>>(), "{engine}");
            for span in [Span::All, Span::NewestFirst, Span::Before(n)] {
                let mut seen = Vec::new();
                read_items(db, 1, span, false, |r| {
                    seen.push(r.ordinal);
                    Ok(seen.len() < FIRST_PAGE as usize + 3)
                })
                .unwrap();
                assert_eq!(seen.len(), FIRST_PAGE as usize + 3, "{engine} {span:?}");
                let first = if matches!(span, Span::NewestFirst) { n - 1 } else { 0 };
                assert_eq!(seen[0], first, "{engine} {span:?}");
            }
        });
    }

    /// The live context reads and renumbers the same on SQLite and on PostgreSQL.
    #[test]
    fn items_read_and_renumber_alike_on_both_engines() {
        on_both_engines("context", |db, _, engine| {
            crate::test_support::seed_conversation(db, 5);
            for seq in 0..5i64 {
                db.execute(
                    "INSERT INTO context_items (conversation_id, ordinal, item_type, message_id) VALUES (1, ?1, 'message', ?2)",
                    params![seq, seq + 1],
                )
                .unwrap();
            }
            db.execute(
                "INSERT INTO summaries (summary_id, conversation_id, kind, content, token_count) VALUES ('sum_a', 1, 'leaf', 'a summary', 3)",
                params![],
            )
            .unwrap();
            assert_eq!(last_ordinal(db, 1).unwrap(), 4, "{engine}");
            assert_eq!(last_ordinal(db, 2).unwrap(), -1, "{engine}");
            let newest: Vec<i64> = ordinals(db, Span::NewestFirst).iter().map(|r| r.0).collect();
            assert_eq!(newest, [4, 3, 2, 1, 0], "{engine}");
            assert_eq!(ordinals(db, Span::Before(2)).len(), 2, "{engine}");
            assert_eq!(ordinals(db, Span::At(3))[0].1, Some(4), "{engine}");
            let between = ordinals(
                db,
                Span::Between {
                    after: 0,
                    before: 4,
                    limit: 2,
                },
            );
            assert_eq!(between.iter().map(|r| r.0).collect::<Vec<_>>(), [1, 2], "{engine}");
            // A reader that has enough stops the reading.
            let mut seen = 0;
            read_items(db, 1, Span::All, false, |_| {
                seen += 1;
                Ok(seen < 2)
            })
            .unwrap();
            assert_eq!(seen, 2, "{engine}");

            // Items 1–3 become one summary; item 4 moves up to 2.
            let r = Renumbering {
                moved: (1, 4),
                consumed: &[(1, 3)],
                survivors: &[],
                after_shift: -2,
                inserted: vec![(1, "sum_a")],
            };
            renumber(db, 1, &r, "2026-11-26 09:30:00").unwrap();
            assert_eq!(
                ordinals(db, Span::All),
                vec![
                    (0, Some(1), None, None),
                    (1, None, Some("sum_a".into()), Some("a summary".into())),
                    (2, Some(5), None, None),
                ],
                "{engine}"
            );
            assert_eq!(
                named_between(db, 1, 0, 2).unwrap(),
                vec![
                    (0, Named::Message(1)),
                    (1, Named::Summary("sum_a".into())),
                    (2, Named::Message(5))
                ],
                "{engine}"
            );
        });
    }
}
