//! Conversations: finding one by id or session id, creating one for a new session.

use rusqlite::{params, Connection, OptionalExtension};

use crate::error::{LcmError, Result};

/// Which conversation a call is about.
#[derive(Clone, Debug, PartialEq)]
pub enum Target {
    /// The host's session id; the newest (active) conversation of that session, created on
    /// first ingest.
    Session(String),
    Conversation(i64),
}

/// Facts about the file's schema that change how rows are read or written. Read once at open.
#[derive(Clone, Copy, Debug, Default)]
pub struct SchemaFlags {
    /// lossless-claw 0.15 marks archived conversations with `active = 0`; new messages of a
    /// session must go to its active one.
    pub conversations_have_active: bool,
    /// The trigram full-text table for summaries exists (SQLite with the trigram tokenizer).
    pub has_cjk_fts: bool,
}

impl SchemaFlags {
    pub fn read(conn: &Connection) -> Result<SchemaFlags> {
        let active: i64 = conn.query_row(
            "SELECT count(*) FROM pragma_table_info('conversations') WHERE name = 'active'",
            [],
            |r| r.get(0),
        )?;
        let cjk: i64 = conn.query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'summaries_fts_cjk'",
            [],
            |r| r.get(0),
        )?;
        Ok(SchemaFlags {
            conversations_have_active: active > 0,
            has_cjk_fts: cjk > 0,
        })
    }
}

/// A conversation row, as far as the core needs it.
#[derive(Clone, Debug)]
pub struct Conversation {
    pub conversation_id: i64,
    pub session_id: String,
}

pub fn get(conn: &Connection, conversation_id: i64) -> Result<Conversation> {
    conn.prepare_cached("SELECT session_id FROM conversations WHERE conversation_id = ?1")?
        .query_row([conversation_id], |r| r.get::<_, String>(0))
        .optional()?
        .map(|session_id| Conversation {
            conversation_id,
            session_id,
        })
        .ok_or_else(|| LcmError::not_found("conversation", conversation_id))
}

pub fn find_by_session(conn: &Connection, flags: SchemaFlags, session_id: &str) -> Result<Option<Conversation>> {
    let sql = if flags.conversations_have_active {
        "SELECT conversation_id FROM conversations WHERE session_id = ?1 AND active = 1
         ORDER BY created_at DESC, conversation_id DESC LIMIT 1"
    } else {
        "SELECT conversation_id FROM conversations WHERE session_id = ?1
         ORDER BY created_at DESC, conversation_id DESC LIMIT 1"
    };
    Ok(conn
        .prepare_cached(sql)?
        .query_row([session_id], |r| r.get::<_, i64>(0))
        .optional()?
        .map(|conversation_id| Conversation {
            conversation_id,
            session_id: session_id.to_string(),
        }))
}

/// Resolves a target; a session without a conversation gets one (inside the caller's
/// transaction, so a failed ingest leaves no empty conversation behind).
pub fn resolve_or_create(conn: &Connection, flags: SchemaFlags, target: &Target, now: &str) -> Result<Conversation> {
    match target {
        Target::Conversation(id) => get(conn, *id),
        Target::Session(session_id) => {
            if let Some(c) = find_by_session(conn, flags, session_id)? {
                return Ok(c);
            }
            conn.prepare_cached("INSERT INTO conversations (session_id, created_at, updated_at) VALUES (?1, ?2, ?2)")?
                .execute(params![session_id, now])?;
            Ok(Conversation {
                conversation_id: conn.last_insert_rowid(),
                session_id: session_id.clone(),
            })
        }
    }
}

/// Resolves a target without creating anything.
pub fn resolve(conn: &Connection, flags: SchemaFlags, target: &Target) -> Result<Conversation> {
    match target {
        Target::Conversation(id) => get(conn, *id),
        Target::Session(s) => find_by_session(conn, flags, s)?.ok_or_else(|| LcmError::not_found("session", s)),
    }
}

/// A conversation with its sizes, for listings.
#[derive(Clone, Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConversationInfo {
    pub conversation_id: i64,
    pub session_id: String,
    pub message_count: i64,
    pub summary_count: i64,
    pub context_item_count: i64,
    pub created_at: String,
    pub updated_at: String,
}

/// Every conversation, oldest first.
pub fn list(conn: &Connection) -> Result<Vec<ConversationInfo>> {
    let rows = conn
        .prepare_cached(
            "SELECT c.conversation_id, c.session_id,
                    (SELECT count(*) FROM messages m WHERE m.conversation_id = c.conversation_id),
                    (SELECT count(*) FROM summaries s WHERE s.conversation_id = c.conversation_id),
                    (SELECT count(*) FROM context_items ci WHERE ci.conversation_id = c.conversation_id),
                    c.created_at, c.updated_at
             FROM conversations c ORDER BY c.conversation_id",
        )?
        .query_map([], |r| {
            Ok(ConversationInfo {
                conversation_id: r.get(0)?,
                session_id: r.get(1)?,
                message_count: r.get(2)?,
                summary_count: r.get(3)?,
                context_item_count: r.get(4)?,
                created_at: r.get(5)?,
                updated_at: r.get(6)?,
            })
        })?
        .collect::<std::result::Result<Vec<_>, _>>()?;
    Ok(rows)
}
