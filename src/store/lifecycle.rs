//! A session's lifecycle as OpenClaw's `/new` and `/reset` change it, handled the way
//! lossless-claw 1.x handles them (its `before_reset` hook), so that a user sees the same
//! behaviour whichever of the two plugins runs:
//!
//! * `/new` keeps the conversation but takes its raw messages and its summaries shallower than
//!   `retainDepth` out of the context: the next turns start from the deep summaries only. Nothing
//!   is deleted (grep, describe and expand still reach every message); the reset is recorded in
//!   `lcm_native_context_resets`, which tells `verify` which messages left the context on
//!   purpose.
//! * `/reset` archives the conversation (`active = 0`, `archived_at`, `archive_cause`) and starts
//!   an empty one for the same session; a conversation that is still empty is left as it is.
//! * A deleted session (its `session_end`) archives the conversation; none replaces it.

use rusqlite::params;

use crate::db::SchemaFlags;
use crate::error::{LcmError, Result};
use crate::sql::Db;

/// lossless-claw's `newSessionRetainDepth` default: condensed summaries of depth 2 and deeper
/// stay in the context after `/new`.
pub(crate) const DEFAULT_RETAIN_DEPTH: i64 = 2;

/// What the host asked for.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ResetReason {
    /// `/new`: summaries of depth `retain_depth` and deeper stay in the context.
    New { retain_depth: i64 },
    /// `/reset`: a new, empty conversation for the session.
    Reset,
    /// The host deleted the session: its conversation is archived, none replaces it.
    Deleted,
}

/// What a reset did.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct SessionReset {
    /// `pruned` (/new), `archived` (/reset), or `none`: no conversation for the session, or one
    /// with nothing in it yet.
    pub action: String,
    /// The conversation the reset applied to.
    pub conversation_id: Option<i64>,
    /// The session's new conversation after `/reset`.
    pub replacement_id: Option<i64>,
    /// Context items taken out of the context by `/new`.
    pub context_items_removed: i64,
}

impl SessionReset {
    fn none(conversation_id: Option<i64>) -> SessionReset {
        SessionReset {
            action: "none".into(),
            conversation_id,
            replacement_id: None,
            context_items_removed: 0,
        }
    }
}

/// Applies `reason` to conversation `conversation_id`, in the caller's write transaction
/// (`Backend::write_preserving_messages`).
pub(crate) fn reset(
    db: Db,
    flags: SchemaFlags,
    conversation_id: i64,
    reason: ResetReason,
    now: &str,
) -> Result<SessionReset> {
    if !flags.conversations_have_active {
        return Err(LcmError::invalid_input(
            "this file's conversations cannot be archived (open it writable once to migrate it)",
        ));
    }
    match reason {
        ResetReason::New { retain_depth } => prune(db, conversation_id, retain_depth, now),
        ResetReason::Reset => archive(db, flags, conversation_id, "manual-reset", true, now),
        ResetReason::Deleted => archive(db, flags, conversation_id, "session-deleted", false, now),
    }
}

fn prune(db: Db, conversation_id: i64, retain_depth: i64, now: &str) -> Result<SessionReset> {
    let through_seq: Option<i64> = db.query_one(
        "SELECT max(seq) FROM messages WHERE conversation_id = ?1",
        params![conversation_id],
        |r| r.get(0),
    )?;
    let removed = db.execute(
        "DELETE FROM context_items WHERE conversation_id = ?1 AND (item_type = 'message' OR summary_id IN
           (SELECT summary_id FROM summaries WHERE conversation_id = ?1 AND depth < ?2))",
        params![conversation_id, retain_depth],
    )? as i64;
    let Some(through_seq) = through_seq.filter(|_| removed > 0) else {
        return Ok(SessionReset::none(Some(conversation_id)));
    };
    // The items left keep their order, numbered from 0 again (lcm-native's writes assume it;
    // lossless-claw reads by order). Negative first: the primary key holds at every step.
    let ordinals: Vec<i64> = db.query_map(
        "SELECT ordinal FROM context_items WHERE conversation_id = ?1 ORDER BY ordinal",
        params![conversation_id],
        |r| r.get(0),
    )?;
    db.execute(
        "UPDATE context_items SET ordinal = -1 - ordinal WHERE conversation_id = ?1",
        params![conversation_id],
    )?;
    for (new, old) in ordinals.iter().enumerate() {
        db.execute(
            "UPDATE context_items SET ordinal = ?3 WHERE conversation_id = ?1 AND ordinal = ?2",
            params![conversation_id, -1 - old, new as i64],
        )?;
    }
    db.execute(
        "INSERT INTO lcm_native_context_resets (conversation_id, reason, through_seq, retain_depth, items_removed, reset_at)
         VALUES (?1, 'new', ?2, ?3, ?4, ?5)",
        params![conversation_id, through_seq, retain_depth, removed, now],
    )?;
    Ok(SessionReset {
        action: "pruned".into(),
        conversation_id: Some(conversation_id),
        replacement_id: None,
        context_items_removed: removed,
    })
}

/// Archives the active conversation with `cause`; with `replace`, an empty one follows for the
/// same session (unless the conversation is still empty: nothing to do then).
fn archive(
    db: Db,
    flags: SchemaFlags,
    conversation_id: i64,
    cause: &str,
    replace: bool,
    now: &str,
) -> Result<SessionReset> {
    let key_col = if flags.conversations_have_session_key {
        "session_key"
    } else {
        "NULL"
    };
    /// The active conversation's session, and whether anything is in it yet.
    struct Current {
        session_id: String,
        session_key: Option<String>,
        empty: bool,
    }
    let current: Option<Current> = db.query_row(
        &format!(
            "SELECT session_id, {key_col},
                    CASE WHEN bootstrapped_at IS NULL
                    AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.conversation_id = c.conversation_id)
                    AND NOT EXISTS (SELECT 1 FROM context_items i WHERE i.conversation_id = c.conversation_id)
                    THEN 1 ELSE 0 END
             FROM conversations c WHERE conversation_id = ?1 AND active = 1"
        ),
        params![conversation_id],
        |r| {
            Ok(Current {
                session_id: r.get(0)?,
                session_key: r.get(1)?,
                empty: r.get(2)?,
            })
        },
    )?;
    let Some(Current {
        session_id,
        session_key,
        empty,
    }) = current
    else {
        return Ok(SessionReset::none(Some(conversation_id)));
    };
    if empty && replace {
        // Already what a reset would make.
        return Ok(SessionReset::none(Some(conversation_id)));
    }
    db.execute(
        "UPDATE conversations SET active = 0, archived_at = COALESCE(archived_at, ?2),
           archive_cause = COALESCE(archive_cause, ?3), updated_at = ?2
         WHERE conversation_id = ?1",
        params![conversation_id, now, cause],
    )?;
    let replacement = if replace {
        Some(crate::store::conversations::insert(
            db,
            flags,
            &session_id,
            session_key.as_deref(),
            now,
        )?)
    } else {
        None
    };
    Ok(SessionReset {
        action: "archived".into(),
        conversation_id: Some(conversation_id),
        replacement_id: replacement,
        context_items_removed: 0,
    })
}

/// The highest message seq of each conversation that `/new` took out of the context on
/// purpose (none when the table is absent: a file opened read-only before its migration).
pub(crate) fn reset_through<'a>(db: impl Into<Db<'a>>, conversation_id: i64) -> Result<Option<i64>> {
    let db = db.into();
    if !db.has_table("lcm_native_context_resets")? {
        return Ok(None);
    }
    db.query_one(
        "SELECT max(through_seq) FROM lcm_native_context_resets WHERE conversation_id = ?1",
        params![conversation_id],
        |r| r.get(0),
    )
}
