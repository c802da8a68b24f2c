//! Conversations: finding one by id or session id, creating one for a new session.

use rusqlite::{params, Connection, OptionalExtension};

use crate::db::SchemaFlags;
use crate::error::{LcmError, Result};

/// Which conversation a call is about. Read from JavaScript's `ConversationTarget` (one of
/// `{ sessionId }`, `{ sessionKey, sessionId? }`, `{ conversationId }`).
#[derive(Clone, Debug, PartialEq, serde::Deserialize)]
#[serde(try_from = "TargetFields")]
pub enum Target {
    /// The host's session id; the newest (active) conversation of that session, created on
    /// first ingest.
    Session(String),
    /// The host's session key (stable across the session ids a key goes through) and its
    /// current session id, mapped as lossless-claw maps them: the active conversation of the
    /// key, else the active conversation of the id, else a new one.
    SessionKey {
        key: String,
        /// None when the caller does not know it: the conversation's recorded id is kept.
        session_id: Option<String>,
    },
    Conversation(i64),
}

/// The fields a `ConversationTarget` may have; which of them are given says which target it is.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct TargetFields {
    #[serde(default)]
    session_id: Option<String>,
    #[serde(default)]
    session_key: Option<String>,
    #[serde(default)]
    conversation_id: Option<i64>,
}

impl TryFrom<TargetFields> for Target {
    type Error = &'static str;

    fn try_from(f: TargetFields) -> std::result::Result<Target, &'static str> {
        const BAD: &str = "must be { sessionId: string }, { sessionKey: string, sessionId?: string } or { conversationId: number } (a positive integer)";
        if [&f.session_key, &f.session_id].iter().any(|s| s.as_deref() == Some("")) {
            return Err(BAD);
        }
        match (f.session_key, f.session_id, f.conversation_id) {
            (Some(key), session_id, None) => Ok(Target::SessionKey { key, session_id }),
            (None, Some(id), None) => Ok(Target::Session(id)),
            (None, None, Some(id)) if id > 0 => Ok(Target::Conversation(id)),
            _ => Err(BAD),
        }
    }
}

/// A conversation row, as far as the core needs it.
#[derive(Clone, Debug)]
pub(crate) struct Conversation {
    pub conversation_id: i64,
    pub session_id: String,
}

pub(crate) fn get(conn: &Connection, conversation_id: i64) -> Result<Conversation> {
    conn.prepare_cached("SELECT session_id FROM conversations WHERE conversation_id = ?1")?
        .query_row([conversation_id], |r| r.get::<_, String>(0))
        .optional()?
        .map(|session_id| Conversation {
            conversation_id,
            session_id,
        })
        .ok_or_else(|| LcmError::not_found("conversation", conversation_id))
}

pub(crate) fn find_by_session(conn: &Connection, flags: SchemaFlags, session_id: &str) -> Result<Option<Conversation>> {
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

/// The active conversation recorded under a session key.
pub(crate) fn find_by_session_key(conn: &Connection, flags: SchemaFlags, key: &str) -> Result<Option<Conversation>> {
    if !flags.conversations_have_session_key {
        return Ok(None);
    }
    let sql = if flags.conversations_have_active {
        "SELECT conversation_id, session_id FROM conversations WHERE session_key = ?1 AND active = 1
         ORDER BY created_at DESC, conversation_id DESC LIMIT 1"
    } else {
        "SELECT conversation_id, session_id FROM conversations WHERE session_key = ?1
         ORDER BY created_at DESC, conversation_id DESC LIMIT 1"
    };
    Ok(conn
        .prepare_cached(sql)?
        .query_row([key], |r| {
            Ok(Conversation {
                conversation_id: r.get(0)?,
                session_id: r.get(1)?,
            })
        })
        .optional()?)
}

/// Finds (or, with `create`, makes) the conversation of a session key: the key's active
/// conversation (its session id updated when the host moved the key to a new one), else the
/// session id's active conversation (the key recorded on it when it had none), else a new
/// row with both.
fn for_session_key(
    conn: &Connection,
    flags: SchemaFlags,
    key: &str,
    session_id: Option<&str>,
    create: Option<&str>,
) -> Result<Option<Conversation>> {
    if let Some(mut c) = find_by_session_key(conn, flags, key)? {
        if let (Some(_), Some(session_id)) = (create, session_id.filter(|id| *id != c.session_id)) {
            conn.prepare_cached("UPDATE conversations SET session_id = ?2 WHERE conversation_id = ?1")?
                .execute(params![c.conversation_id, session_id])?;
            // What is written next (message_parts.session_id) carries the host's current id.
            c.session_id = session_id.to_string();
        }
        return Ok(Some(c));
    }
    if let Some(c) = match session_id {
        Some(id) => find_by_session(conn, flags, id)?,
        None => None,
    } {
        let recorded: Option<String> = if flags.conversations_have_session_key {
            conn.prepare_cached("SELECT session_key FROM conversations WHERE conversation_id = ?1")?
                .query_row([c.conversation_id], |r| r.get(0))?
        } else {
            None
        };
        match recorded {
            None => {
                if create.is_some() && flags.conversations_have_session_key {
                    conn.prepare_cached("UPDATE conversations SET session_key = ?2 WHERE conversation_id = ?1")?
                        .execute(params![c.conversation_id, key])?;
                }
                return Ok(Some(c));
            }
            // The id's conversation belongs to another key: this key gets its own.
            Some(other) if other != key => {}
            Some(_) => return Ok(Some(c)),
        }
    }
    let Some(now) = create else { return Ok(None) };
    // A new conversation needs a session id; without one the key stands for it.
    let session_id = session_id.unwrap_or(key);
    Ok(Some(Conversation {
        conversation_id: insert(conn, flags, session_id, Some(key), now)?,
        session_id: session_id.to_string(),
    }))
}

/// A new, active conversation row for a session (its key recorded where the file has the
/// column); returns its id.
pub(crate) fn insert(
    conn: &Connection,
    flags: SchemaFlags,
    session_id: &str,
    key: Option<&str>,
    now: &str,
) -> Result<i64> {
    if flags.conversations_have_session_key {
        conn.prepare_cached(
            "INSERT INTO conversations (session_id, session_key, created_at, updated_at) VALUES (?1, ?2, ?3, ?3)",
        )?
        .execute(params![session_id, key, now])?;
    } else {
        conn.prepare_cached("INSERT INTO conversations (session_id, created_at, updated_at) VALUES (?1, ?2, ?2)")?
            .execute(params![session_id, now])?;
    }
    Ok(conn.last_insert_rowid())
}

/// Resolves a target; a session without a conversation gets one (inside the caller's
/// transaction, so a failed ingest leaves no empty conversation behind).
pub(crate) fn resolve_or_create(
    conn: &Connection,
    flags: SchemaFlags,
    target: &Target,
    now: &str,
) -> Result<Conversation> {
    match target {
        Target::Conversation(id) => get(conn, *id),
        Target::SessionKey { key, session_id } => {
            Ok(for_session_key(conn, flags, key, session_id.as_deref(), Some(now))?.expect("created when missing"))
        }
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
pub(crate) fn resolve(conn: &Connection, flags: SchemaFlags, target: &Target) -> Result<Conversation> {
    match target {
        Target::Conversation(id) => get(conn, *id),
        Target::Session(s) => find_by_session(conn, flags, s)?.ok_or_else(|| LcmError::not_found("session", s)),
        Target::SessionKey { key, session_id } => for_session_key(conn, flags, key, session_id.as_deref(), None)?
            .ok_or_else(|| LcmError::not_found("session", key)),
    }
}

/// The conversation behind a session, as `findConversation` reports it: what a host needs to decide
/// whether to import the session's earlier transcript.
#[derive(Clone, Debug, serde::Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct SessionConversation {
    pub conversation_id: i64,
    pub session_id: String,
    pub session_key: Option<String>,
    pub message_count: i64,
    /// When the session's earlier transcript was imported (or its first turn stored), by lcm-native
    /// or lossless-claw; null if never.
    pub bootstrapped_at: Option<String>,
}

/// The conversation a target names, without creating one; `None` when there is none.
pub(crate) fn lookup(conn: &Connection, flags: SchemaFlags, target: &Target) -> Result<Option<SessionConversation>> {
    let found = match resolve(conn, flags, target) {
        Ok(c) => c,
        Err(LcmError::NotFound { .. }) => return Ok(None),
        Err(e) => return Err(e),
    };
    let key_col = if flags.conversations_have_session_key {
        "session_key"
    } else {
        "NULL"
    };
    let row = conn
        .prepare_cached(&format!(
            "SELECT {key_col}, bootstrapped_at,
                    (SELECT count(*) FROM messages m WHERE m.conversation_id = c.conversation_id)
             FROM conversations c WHERE c.conversation_id = ?1"
        ))?
        .query_row([found.conversation_id], |r| {
            Ok(SessionConversation {
                conversation_id: found.conversation_id,
                session_id: found.session_id.clone(),
                session_key: r.get(0)?,
                bootstrapped_at: r.get(1)?,
                message_count: r.get(2)?,
            })
        })?;
    Ok(Some(row))
}

/// A conversation with its sizes.
#[derive(Clone, Debug, serde::Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct ConversationInfo {
    pub conversation_id: i64,
    pub session_id: String,
    /// The host's session key (`agent:main:main`), when the file records one.
    pub session_key: Option<String>,
    pub message_count: i64,
    /// Σ of the messages' estimated tokens.
    pub message_tokens: i64,
    pub summary_count: i64,
    /// Summaries per depth: element `d` counts those of depth `d` (empty without summaries;
    /// a depth past 1,000, which only a damaged file holds, is left out).
    pub summaries_by_depth: Vec<i64>,
    pub context_item_count: i64,
    pub created_at: String,
    pub updated_at: String,
}

/// Every conversation's id, in order.
pub(crate) fn ids(conn: &Connection) -> Result<Vec<i64>> {
    let ids = conn
        .prepare("SELECT conversation_id FROM conversations ORDER BY conversation_id")?
        .query_map([], |r| r.get(0))?
        .collect::<std::result::Result<_, _>>()?;
    Ok(ids)
}

/// Every conversation, oldest first.
pub(crate) fn list(conn: &Connection, flags: SchemaFlags) -> Result<Vec<ConversationInfo>> {
    let key = if flags.conversations_have_session_key {
        "c.session_key"
    } else {
        "NULL"
    };
    let mut rows = conn
        .prepare_cached(&format!(
            "SELECT c.conversation_id, c.session_id, {key},
                    (SELECT count(*) FROM messages m WHERE m.conversation_id = c.conversation_id),
                    (SELECT COALESCE(SUM(m.token_count), 0) FROM messages m WHERE m.conversation_id = c.conversation_id),
                    (SELECT count(*) FROM summaries s WHERE s.conversation_id = c.conversation_id),
                    (SELECT count(*) FROM context_items ci WHERE ci.conversation_id = c.conversation_id),
                    c.created_at, c.updated_at
             FROM conversations c ORDER BY c.conversation_id"
        ))?
        .query_map([], |r| {
            Ok(ConversationInfo {
                conversation_id: r.get(0)?,
                session_id: r.get(1)?,
                session_key: r.get(2)?,
                message_count: r.get(3)?,
                message_tokens: r.get(4)?,
                summary_count: r.get(5)?,
                summaries_by_depth: Vec::new(),
                context_item_count: r.get(6)?,
                created_at: r.get(7)?,
                updated_at: r.get(8)?,
            })
        })?
        .collect::<std::result::Result<Vec<_>, _>>()?;
    let index: std::collections::HashMap<i64, usize> =
        rows.iter().enumerate().map(|(i, c)| (c.conversation_id, i)).collect();
    let mut stmt = conn.prepare_cached(
        "SELECT conversation_id, depth, count(*) FROM summaries WHERE depth BETWEEN 0 AND 1000 GROUP BY conversation_id, depth",
    )?;
    let counts = stmt.query_map([], |r| {
        Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?, r.get::<_, i64>(2)?))
    })?;
    for count in counts {
        let (cid, depth, n) = count?;
        if let Some(&i) = index.get(&cid) {
            let by_depth = &mut rows[i].summaries_by_depth;
            let d = depth as usize;
            if by_depth.len() <= d {
                by_depth.resize(d + 1, 0);
            }
            by_depth[d] = n;
        }
    }
    Ok(rows)
}
