//! The `<recalled>` blocks turns were sent with (`lcm_native_recalls`): one per turn that had
//! one, anchored after the message that was the conversation's last when it was made. A block
//! is sent again, unchanged, by every assembly that keeps its anchor as a raw message: the
//! provider's prompt cache holds the request up to there. When its anchor is summarized or
//! evicted the block goes with it (the prefix breaks there anyway).

use rusqlite::params;

use crate::db::schema::RECALLS_TABLE;
use crate::error::Result;
use crate::sql::Db;

/// A stored block.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct StoredRecall {
    pub after_message_id: i64,
    pub content: String,
    pub tokens: i64,
    /// The excerpts' places (message id, byte start), which later recalls do not show again.
    pub places: Vec<(i64, usize)>,
}

/// A block to store.
pub(crate) struct NewRecall<'a> {
    pub conversation_id: i64,
    pub after_message_id: i64,
    pub query: &'a str,
    pub content: &'a str,
    pub tokens: i64,
    pub places: &'a [(i64, usize)],
}

/// The conversation's blocks whose anchor is a live raw message (the only ones an assembly can
/// send), in anchor order. None on a file without the table (read-only, made before it).
pub(crate) fn live<'a>(db: impl Into<Db<'a>>, conversation_id: i64) -> Result<Vec<StoredRecall>> {
    let db = db.into();
    if !db.has_table(RECALLS_TABLE)? {
        return Ok(Vec::new());
    }
    db.query_map(
        "SELECT r.after_message_id, r.content, r.tokens, r.places
         FROM lcm_native_recalls r
         JOIN context_items c ON c.conversation_id = r.conversation_id AND c.item_type = 'message'
           AND c.message_id = r.after_message_id
         WHERE r.conversation_id = ?1
         ORDER BY r.after_message_id",
        params![conversation_id],
        |r| {
            let places: String = r.get(3)?;
            Ok(StoredRecall {
                after_message_id: r.get(0)?,
                content: r.get(1)?,
                tokens: r.get(2)?,
                places: serde_json::from_str(&places).unwrap_or_default(),
            })
        },
    )
}

/// Tokens of the conversation's blocks an assembly would send again (anchored at a live raw
/// message): part of what the context holds, for the compaction threshold.
pub(crate) fn live_tokens<'a>(db: impl Into<Db<'a>>, conversation_id: i64) -> Result<i64> {
    let db = db.into();
    if !db.has_table(RECALLS_TABLE)? {
        return Ok(0);
    }
    Ok(db
        .query_row(
            "SELECT CAST(COALESCE(SUM(r.tokens), 0) AS BIGINT) FROM lcm_native_recalls r
             JOIN context_items c ON c.conversation_id = r.conversation_id AND c.item_type = 'message'
               AND c.message_id = r.after_message_id
             WHERE r.conversation_id = ?1",
            params![conversation_id],
            |r| r.get(0),
        )?
        .unwrap_or(0))
}

/// Stores a block (a turn's first one stays: the request that carried it is what the cache
/// holds). Nothing when the conversation or its anchor is gone.
pub(crate) fn insert(db: Db, r: &NewRecall<'_>, now: &str) -> Result<()> {
    let places = serde_json::to_string(r.places)?;
    db.execute(
        "INSERT INTO lcm_native_recalls
           (conversation_id, after_message_id, query, content, tokens, places, created_at)
         SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7
         WHERE EXISTS (SELECT 1 FROM messages WHERE message_id = ?2 AND conversation_id = ?1)
         ON CONFLICT (conversation_id, after_message_id) DO NOTHING",
        params![
            r.conversation_id,
            r.after_message_id,
            r.query,
            r.content,
            r.tokens,
            places,
            now
        ],
    )?;
    Ok(())
}

/// Deletes the blocks of these conversations (a redaction: their excerpts may hold the text).
pub(crate) fn forget<'a>(db: impl Into<Db<'a>>, conversation_ids: &[i64]) -> Result<()> {
    let db = db.into();
    if conversation_ids.is_empty() || !db.has_table(RECALLS_TABLE)? {
        return Ok(());
    }
    let ids = serde_json::to_string(conversation_ids)?;
    db.execute(
        &format!(
            "DELETE FROM lcm_native_recalls WHERE conversation_id {}",
            db.in_ids("?1")
        ),
        params![ids],
    )?;
    Ok(())
}

/// The last message of a conversation (the anchor of a block made now), if it has one.
pub(crate) fn last_message<'a>(db: impl Into<Db<'a>>, conversation_id: i64) -> Result<Option<i64>> {
    db.into().query_row(
        "SELECT message_id FROM messages WHERE conversation_id = ?1 ORDER BY seq DESC LIMIT 1",
        params![conversation_id],
        |r| r.get(0),
    )
}
