//! Conversations: finding one by id or session id, creating one for a new session.

use rusqlite::params;

use crate::db::SchemaFlags;
use crate::error::{LcmError, Result};
use crate::sql::Db;

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

pub(crate) fn get<'a>(db: impl Into<Db<'a>>, conversation_id: i64) -> Result<Conversation> {
    db.into()
        .query_row(
            "SELECT session_id FROM conversations WHERE conversation_id = ?1",
            params![conversation_id],
            |r| r.get::<String>(0),
        )?
        .map(|session_id| Conversation {
            conversation_id,
            session_id,
        })
        .ok_or_else(|| LcmError::not_found("conversation", conversation_id))
}

pub(crate) fn find_by_session<'a>(
    db: impl Into<Db<'a>>,
    flags: SchemaFlags,
    session_id: &str,
) -> Result<Option<Conversation>> {
    let sql = if flags.conversations_have_active {
        "SELECT conversation_id FROM conversations WHERE session_id = ?1 AND active = 1
         ORDER BY created_at DESC, conversation_id DESC LIMIT 1"
    } else {
        "SELECT conversation_id FROM conversations WHERE session_id = ?1
         ORDER BY created_at DESC, conversation_id DESC LIMIT 1"
    };
    Ok(db
        .into()
        .query_row(sql, params![session_id], |r| r.get::<i64>(0))?
        .map(|conversation_id| Conversation {
            conversation_id,
            session_id: session_id.to_string(),
        }))
}

/// The active conversation recorded under a session key.
pub(crate) fn find_by_session_key<'a>(
    db: impl Into<Db<'a>>,
    flags: SchemaFlags,
    key: &str,
) -> Result<Option<Conversation>> {
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
    db.into().query_row(sql, params![key], |r| {
        Ok(Conversation {
            conversation_id: r.get(0)?,
            session_id: r.get(1)?,
        })
    })
}

/// What a session key comes to under lossless-claw's mapping, found by reading only.
enum KeyMatch {
    /// The key's active conversation, with the session id to record on it when the host
    /// moved the key to a new one.
    Key(Conversation, Option<String>),
    /// The session id's active conversation, `unkeyed` when it has no key yet (the key is
    /// recorded on it).
    Id { conversation: Conversation, unkeyed: bool },
    /// Neither: a new conversation.
    New,
}

impl KeyMatch {
    /// The conversation it names when finding it writes nothing.
    fn unchanged(self) -> Option<Conversation> {
        match self {
            KeyMatch::Key(c, None)
            | KeyMatch::Id {
                conversation: c,
                unkeyed: false,
            } => Some(c),
            _ => None,
        }
    }
}

/// The key's active conversation, else the session id's active conversation when it has no
/// key or this one, else none.
fn match_session_key(db: Db, flags: SchemaFlags, key: &str, session_id: Option<&str>) -> Result<KeyMatch> {
    if let Some(c) = find_by_session_key(db, flags, key)? {
        let moved = session_id.filter(|id| *id != c.session_id).map(str::to_string);
        return Ok(KeyMatch::Key(c, moved));
    }
    let Some(c) = session_id
        .map(|id| find_by_session(db, flags, id))
        .transpose()?
        .flatten()
    else {
        return Ok(KeyMatch::New);
    };
    let recorded: Option<String> = if flags.conversations_have_session_key {
        db.query_one(
            "SELECT session_key FROM conversations WHERE conversation_id = ?1",
            params![c.conversation_id],
            |r| r.get(0),
        )?
    } else {
        None
    };
    Ok(match recorded {
        None => KeyMatch::Id {
            conversation: c,
            unkeyed: flags.conversations_have_session_key,
        },
        Some(same) if same == key => KeyMatch::Id {
            conversation: c,
            unkeyed: false,
        },
        // The id's conversation belongs to another key: this key gets its own.
        Some(_) => KeyMatch::New,
    })
}

/// Finds (or, with `create`, makes) the conversation of a session key (`match_session_key`),
/// recording what the match says when creating: the key's new session id, the key on an
/// unkeyed conversation, a new row with both.
fn for_session_key(
    db: Db,
    flags: SchemaFlags,
    key: &str,
    session_id: Option<&str>,
    create: Option<&str>,
) -> Result<Option<Conversation>> {
    let found = match_session_key(db, flags, key, session_id)?;
    let Some(now) = create else {
        return Ok(match found {
            KeyMatch::Key(c, _) | KeyMatch::Id { conversation: c, .. } => Some(c),
            KeyMatch::New => None,
        });
    };
    Ok(Some(match found {
        KeyMatch::Key(mut c, Some(moved)) => {
            db.execute(
                "UPDATE conversations SET session_id = ?2 WHERE conversation_id = ?1",
                params![c.conversation_id, moved],
            )?;
            // What is written next (message_parts.session_id) carries the host's current id.
            c.session_id = moved;
            c
        }
        KeyMatch::Key(c, None)
        | KeyMatch::Id {
            conversation: c,
            unkeyed: false,
        } => c,
        KeyMatch::Id {
            conversation: c,
            unkeyed: true,
        } => {
            db.execute(
                "UPDATE conversations SET session_key = ?2 WHERE conversation_id = ?1",
                params![c.conversation_id, key],
            )?;
            c
        }
        KeyMatch::New => {
            // A new conversation needs a session id; without one the key stands for it.
            let session_id = session_id.unwrap_or(key);
            Conversation {
                conversation_id: insert(db, flags, session_id, Some(key), now)?,
                session_id: session_id.to_string(),
            }
        }
    }))
}

/// A new, active conversation row for a session (its key recorded where the file has the
/// column); returns its id.
pub(crate) fn insert<'a>(
    db: impl Into<Db<'a>>,
    flags: SchemaFlags,
    session_id: &str,
    key: Option<&str>,
    now: &str,
) -> Result<i64> {
    let db = db.into();
    if flags.conversations_have_session_key {
        db.insert_returning(
            "INSERT INTO conversations (session_id, session_key, created_at, updated_at) VALUES (?1, ?2, ?3, ?3)",
            params![session_id, key, now],
            "conversation_id",
        )
    } else {
        db.insert_returning(
            "INSERT INTO conversations (session_id, created_at, updated_at) VALUES (?1, ?2, ?2)",
            params![session_id, now],
            "conversation_id",
        )
    }
}

/// Resolves a target; a session without a conversation gets one (inside the caller's
/// transaction, so a failed ingest leaves no empty conversation behind).
pub(crate) fn resolve_or_create<'a>(
    db: impl Into<Db<'a>>,
    flags: SchemaFlags,
    target: &Target,
    now: &str,
) -> Result<Conversation> {
    let db = db.into();
    match target {
        Target::Conversation(id) => get(db, *id),
        Target::SessionKey { key, session_id } => {
            Ok(for_session_key(db, flags, key, session_id.as_deref(), Some(now))?.expect("created when missing"))
        }
        Target::Session(session_id) => {
            if let Some(c) = find_by_session(db, flags, session_id)? {
                return Ok(c);
            }
            let conversation_id = db.insert_returning(
                "INSERT INTO conversations (session_id, created_at, updated_at) VALUES (?1, ?2, ?2)",
                params![session_id, now],
                "conversation_id",
            )?;
            Ok(Conversation {
                conversation_id,
                session_id: session_id.clone(),
            })
        }
    }
}

/// Resolves a target without creating anything.
pub(crate) fn resolve<'a>(db: impl Into<Db<'a>>, flags: SchemaFlags, target: &Target) -> Result<Conversation> {
    let db = db.into();
    match target {
        Target::Conversation(id) => get(db, *id),
        Target::Session(s) => find_by_session(db, flags, s)?.ok_or_else(|| LcmError::not_found("session", s)),
        Target::SessionKey { key, session_id } => for_session_key(db, flags, key, session_id.as_deref(), None)?
            .ok_or_else(|| LcmError::not_found("session", key)),
    }
}

/// The conversation `resolve_or_create` would pick, when picking it writes nothing (no new
/// conversation, no session id or key recorded on one): what a write may lock before it
/// writes (`Db::lock_conversations`). `None` when it would write.
pub(crate) fn resolve_unchanged(db: Db, flags: SchemaFlags, target: &Target) -> Result<Option<Conversation>> {
    match target {
        Target::Conversation(id) => get(db, *id).map(Some),
        Target::Session(s) => find_by_session(db, flags, s),
        Target::SessionKey { key, session_id } => {
            Ok(match_session_key(db, flags, key, session_id.as_deref())?.unchanged())
        }
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
pub(crate) fn lookup<'a>(
    db: impl Into<Db<'a>>,
    flags: SchemaFlags,
    target: &Target,
) -> Result<Option<SessionConversation>> {
    let db = db.into();
    let found = match resolve(db, flags, target) {
        Ok(c) => c,
        Err(LcmError::NotFound { .. }) => return Ok(None),
        Err(e) => return Err(e),
    };
    let key_col = if flags.conversations_have_session_key {
        "session_key"
    } else {
        "NULL"
    };
    let row = db.query_one(
        &format!(
            "SELECT {key_col}, bootstrapped_at,
                    COALESCE((SELECT messages FROM lcm_message_counts n WHERE n.conversation_id = c.conversation_id), 0)
             FROM conversations c WHERE c.conversation_id = ?1"
        ),
        params![found.conversation_id],
        |r| {
            Ok(SessionConversation {
                conversation_id: found.conversation_id,
                session_id: found.session_id.clone(),
                session_key: r.get(0)?,
                bootstrapped_at: r.get(1)?,
                message_count: r.get(2)?,
            })
        },
    )?;
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
    /// The conversation row's times (when it was created, and last written).
    pub created_at: String,
    pub updated_at: String,
    /// When its first and its newest stored message were written (ISO-8601 UTC; null without
    /// messages): its first and last activity.
    pub first_message_at: Option<String>,
    pub last_message_at: Option<String>,
    /// What a provider's prompt cache could serve of its assemblies (null before its first
    /// recorded turn, and on a file lcm-native never assembled from).
    pub prompt_cache: Option<super::prompt_cache::PromptCacheReport>,
}

/// Every conversation's id, in order.
pub(crate) fn ids<'a>(db: impl Into<Db<'a>>) -> Result<Vec<i64>> {
    db.into().query_map(
        "SELECT conversation_id FROM conversations ORDER BY conversation_id",
        params![],
        |r| r.get(0),
    )
}

/// Every conversation, oldest first.
pub(crate) fn list<'a>(db: impl Into<Db<'a>>, flags: SchemaFlags) -> Result<Vec<ConversationInfo>> {
    let db = db.into();
    let key = if flags.conversations_have_session_key {
        "c.session_key"
    } else {
        "NULL"
    };
    // CAST: PostgreSQL sums bigints as numeric.
    let mut rows = db.query_map(
        &format!(
            "SELECT c.conversation_id, c.session_id, {key},
                    COALESCE((SELECT messages FROM lcm_message_counts n WHERE n.conversation_id = c.conversation_id), 0),
                    (SELECT CAST(COALESCE(SUM(m.token_count), 0) AS BIGINT) FROM messages m WHERE m.conversation_id = c.conversation_id),
                    (SELECT count(*) FROM summaries s WHERE s.conversation_id = c.conversation_id),
                    (SELECT count(*) FROM context_items ci WHERE ci.conversation_id = c.conversation_id),
                    c.created_at, c.updated_at,
                    (SELECT m.created_at FROM messages m WHERE m.conversation_id = c.conversation_id ORDER BY m.seq LIMIT 1),
                    (SELECT m.created_at FROM messages m WHERE m.conversation_id = c.conversation_id ORDER BY m.seq DESC LIMIT 1)
             FROM conversations c ORDER BY c.conversation_id"
        ),
        params![],
        |r| {
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
                first_message_at: r.get::<Option<String>>(9)?.map(crate::time::iso_or_raw),
                last_message_at: r.get::<Option<String>>(10)?.map(crate::time::iso_or_raw),
                prompt_cache: None,
            })
        },
    )?;
    let mut cache = super::prompt_cache::reports(db)?;
    for row in &mut rows {
        row.prompt_cache = cache.remove(&row.conversation_id);
    }
    let index: std::collections::HashMap<i64, usize> =
        rows.iter().enumerate().map(|(i, c)| (c.conversation_id, i)).collect();
    let counts = db.query_map(
        "SELECT conversation_id, depth, count(*) FROM summaries WHERE depth BETWEEN 0 AND 1000 GROUP BY conversation_id, depth",
        params![],
        |r| Ok((r.get::<i64>(0)?, r.get::<i64>(1)?, r.get::<i64>(2)?)),
    )?;
    for (cid, depth, n) in counts {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::on_both_engines;

    const NOW: &str = "2026-11-26 09:00:00";

    /// The same calls give the same conversations on SQLite and on PostgreSQL.
    #[test]
    fn sessions_and_keys_map_to_conversations_on_both_engines() {
        on_both_engines("conversations", |db, flags, engine| {
            let a = resolve_or_create(db, flags, &Target::Session("s1".into()), NOW).unwrap();
            assert_eq!(a.conversation_id, 1, "{engine}");
            let again = resolve_or_create(db, flags, &Target::Session("s1".into()), NOW).unwrap();
            assert_eq!(again.conversation_id, 1, "{engine}");
            // A key takes the id's conversation when it has none, and follows the key when the
            // host moves it to a new session id.
            let keyed = Target::SessionKey {
                key: "agent:main".into(),
                session_id: Some("s1".into()),
            };
            let unchanged = |t: &Target| resolve_unchanged(db, flags, t).unwrap().map(|c| c.conversation_id);
            // Finding it would record the key: nothing a write may lock before it writes.
            assert_eq!(unchanged(&keyed), None, "{engine}");
            assert_eq!(
                resolve_or_create(db, flags, &keyed, NOW).unwrap().conversation_id,
                1,
                "{engine}"
            );
            assert_eq!(unchanged(&keyed), Some(1), "{engine}");
            assert_eq!(unchanged(&Target::Session("s1".into())), Some(1), "{engine}");
            assert_eq!(unchanged(&Target::Session("new".into())), None, "{engine}");
            let moved = Target::SessionKey {
                key: "agent:main".into(),
                session_id: Some("s2".into()),
            };
            // Finding it would record the key's new session id.
            assert_eq!(unchanged(&moved), None, "{engine}");
            let c = resolve_or_create(db, flags, &moved, NOW).unwrap();
            assert_eq!(unchanged(&moved), Some(1), "{engine}");
            assert_eq!((c.conversation_id, c.session_id.as_str()), (1, "s2"), "{engine}");
            let other = resolve_or_create(db, flags, &Target::Session("s3".into()), NOW).unwrap();
            assert_eq!(other.conversation_id, 2, "{engine}");
            assert_eq!(
                insert(db, flags, "s4", Some("agent:other"), NOW).unwrap(),
                3,
                "{engine}"
            );

            assert_eq!(get(db, 2).unwrap().session_id, "s3", "{engine}");
            assert_eq!(get(db, 9).unwrap_err().code(), "E_NOT_FOUND", "{engine}");
            assert_eq!(
                resolve(db, flags, &Target::Session("nope".into())).unwrap_err().code(),
                "E_NOT_FOUND",
                "{engine}"
            );
            let found = lookup(db, flags, &moved).unwrap().unwrap();
            assert_eq!(found.session_key.as_deref(), Some("agent:main"), "{engine}");
            assert_eq!(found.message_count, 0, "{engine}");
            assert!(lookup(db, flags, &Target::Session("nope".into())).unwrap().is_none());
            assert_eq!(ids(db).unwrap(), vec![1, 2, 3], "{engine}");

            for (i, depth) in [0, 0, 1].iter().enumerate() {
                db.execute(
                    "INSERT INTO summaries (summary_id, conversation_id, kind, depth, content, token_count) VALUES (?1, 1, ?2, ?3, 'x', 5)",
                    params![format!("sum_{i}"), if *depth == 0 { "leaf" } else { "condensed" }, depth],
                )
                .unwrap();
            }
            // The messages' own times, not the row's: the newest by seq whatever the insert order.
            db.execute(
                "INSERT INTO messages (conversation_id, seq, role, content, token_count, created_at)
                 VALUES (1, 1, 'assistant', 'yo', 0, '2026-11-26 09:07:00'), (1, 0, 'user', 'hi', 7, '2026-11-26 08:59:30')",
                params![],
            )
            .unwrap();
            let listed = list(db, flags).unwrap();
            assert_eq!(
                listed[0].first_message_at.as_deref(),
                Some("2026-11-26T08:59:30.000Z"),
                "{engine}"
            );
            assert_eq!(
                listed[0].last_message_at.as_deref(),
                Some("2026-11-26T09:07:00.000Z"),
                "{engine}"
            );
            assert_eq!(listed[1].last_message_at, None, "{engine}");
            assert_eq!(listed.len(), 3, "{engine}");
            assert_eq!(listed[0].summaries_by_depth, vec![2, 1], "{engine}");
            assert_eq!((listed[0].message_count, listed[0].message_tokens), (2, 7), "{engine}");
            assert_eq!(listed[0].session_key.as_deref(), Some("agent:main"), "{engine}");
            assert!(listed[1].summaries_by_depth.is_empty(), "{engine}");
            assert_eq!(listed[2].created_at, NOW, "{engine}");
        });
    }
}
