//! The rows of a conversation's live context (`context_items`), each with what a reader needs
//! of the message or summary it names, read in ordinal order or newest first, whole or by
//! ordinal range, stopping when the reader has enough. `live` makes items of them.

use rusqlite::{params, Connection};

use crate::error::Result;

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
pub(crate) fn read_items(
    conn: &Connection,
    conversation_id: i64,
    span: Span,
    content: bool,
    mut each: impl FnMut(ItemRow) -> Result<bool>,
) -> Result<()> {
    let base = if content { WITH_CONTENT } else { WITHOUT_CONTENT };
    let (tail, a, b, c) = match span {
        Span::All => (" ORDER BY ci.ordinal", None, None, None),
        Span::NewestFirst => (" ORDER BY ci.ordinal DESC", None, None, None),
        Span::Before(o) => (" AND ci.ordinal < ?2 ORDER BY ci.ordinal", Some(o), None, None),
        Span::At(o) => (" AND ci.ordinal = ?2", Some(o), None, None),
        Span::Between { after, before, limit } => (
            " AND ci.ordinal > ?2 AND ci.ordinal < ?3 ORDER BY ci.ordinal LIMIT ?4",
            Some(after),
            Some(before),
            Some(limit),
        ),
    };
    let sql = format!("{base}{tail}");
    let mut stmt = conn.prepare_cached(&sql)?;
    let mut rows = match (a, b, c) {
        (None, ..) => stmt.query(params![conversation_id])?,
        (Some(a), None, _) => stmt.query(params![conversation_id, a])?,
        (Some(a), Some(b), c) => stmt.query(params![conversation_id, a, b, c])?,
    };
    while let Some(r) = rows.next()? {
        let row = ItemRow {
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
        };
        if !each(row)? {
            break;
        }
    }
    Ok(())
}

/// The highest ordinal of a conversation's live items, -1 when it has none.
pub(crate) fn last_ordinal(conn: &Connection, conversation_id: i64) -> Result<i64> {
    Ok(conn
        .prepare_cached("SELECT COALESCE(MAX(ordinal), -1) FROM context_items WHERE conversation_id = ?1")?
        .query_row(params![conversation_id], |r| r.get(0))?)
}

/// What a context row names: a message, a summary, or (a malformed row) neither.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Named {
    Message(i64),
    Summary(String),
    Nothing,
}

/// The rows with ordinals in `lo..=hi`, in order, with what each names.
pub(crate) fn named_between(conn: &Connection, conversation_id: i64, lo: i64, hi: i64) -> Result<Vec<(i64, Named)>> {
    let mut stmt = conn.prepare_cached(
        "SELECT ordinal, item_type, message_id, summary_id FROM context_items
         WHERE conversation_id = ?1 AND ordinal >= ?2 AND ordinal <= ?3 ORDER BY ordinal",
    )?;
    let rows = stmt
        .query_map(params![conversation_id, lo, hi], |r| {
            let kind: String = r.get(1)?;
            let named = if kind == "message" {
                r.get::<_, Option<i64>>(2)?.map_or(Named::Nothing, Named::Message)
            } else {
                r.get::<_, Option<String>>(3)?.map_or(Named::Nothing, Named::Summary)
            };
            Ok((r.get(0)?, named))
        })?
        .collect::<std::result::Result<_, _>>()?;
    Ok(rows)
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
pub(crate) fn renumber(tx: &Connection, conversation_id: i64, r: &Renumbering<'_>, now: &str) -> Result<()> {
    let cid = conversation_id;
    let (from, to) = r.moved;
    tx.prepare_cached(
        "UPDATE context_items SET ordinal = -1 - ordinal WHERE conversation_id = ?1 AND ordinal >= ?2 AND ordinal <= ?3",
    )?
    .execute(params![cid, from, to])?;
    let mut delete = tx.prepare_cached(
        "DELETE FROM context_items WHERE conversation_id = ?1 AND ordinal >= -1 - ?3 AND ordinal <= -1 - ?2",
    )?;
    for (from, to) in r.consumed {
        delete.execute(params![cid, from, to])?;
    }
    let mut shift = tx.prepare_cached(
        "UPDATE context_items SET ordinal = (-1 - ordinal) + ?4
         WHERE conversation_id = ?1 AND ordinal >= -1 - ?3 AND ordinal <= -1 - ?2",
    )?;
    for (from, to, by) in r.survivors {
        shift.execute(params![cid, from, to, by])?;
    }
    if r.after_shift != 0 {
        tx.prepare_cached(
            "UPDATE context_items SET ordinal = (-1 - ordinal) + ?2 WHERE conversation_id = ?1 AND ordinal < 0",
        )?
        .execute(params![cid, r.after_shift])?;
    }
    let mut insert = tx.prepare_cached(
        "INSERT INTO context_items (conversation_id, ordinal, item_type, summary_id, created_at)
         VALUES (?1, ?2, 'summary', ?3, ?4)",
    )?;
    for (ordinal, id) in &r.inserted {
        insert.execute(params![cid, ordinal, id, now])?;
    }
    Ok(())
}
