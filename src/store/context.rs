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
