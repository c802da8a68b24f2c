//! The copies lossless-claw 1.0 stores of its own rows, found so that the model sees each
//! turn once after a switch to lcm-native.
//!
//! Why they exist (seen in a lossless-claw-only session in OpenClaw 2026.9.6, the file in
//! `fixtures/lossless-claw-doubled.db`): once a session has two tool turns, lossless-claw's
//! bootstrap anchors a tool-call row to the host's empty tool-search transcript entry, marks
//! that anchor `suspect` and the conversation's transcript epoch `legacy_prefix`; from then on
//! the rows its `commitTurn` stores get no transcript entry id, and every later bootstrap
//! imports that turn's user row and tool results again as new rows, both live.
//!
//! What tells such a copy from a user who sent the same words twice: the copy carries the
//! host's entry id and an anchor trust row, the row it copies has neither; both keep the host
//! message's time to the second (a real resend is a new host message, with its own time, and
//! gets its own copy); and the copy follows its original's turn, no unanchored user row of a
//! later turn between them. Only files lossless-claw has written hold transcript epochs, and
//! only a conversation whose epoch went `legacy_prefix` is searched; PostgreSQL, which
//! lossless-claw never writes, has no such table.

use std::collections::HashSet;

use serde::Serialize;

use crate::error::Result;
use crate::sql::Db;

/// One re-imported row and the row it copies.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct StoredCopy {
    pub conversation_id: i64,
    /// The row stored first, in its turn's place.
    pub original_id: i64,
    /// lossless-claw's re-imported copy of it.
    pub copy_id: i64,
    pub role: String,
}

/// Copies of rows stored before them in the conversation, oldest copy first, with the rows
/// they copy. The original is looked up by its identity hash (lossless-claw's index on
/// `(conversation_id, identity_hash)`; a copy has its original's), so the search is one pass
/// over the conversation's anchored rows, not one over every earlier row for each.
const FIND: &str = "SELECT o.message_id, c.message_id, c.role
 FROM messages c
 JOIN message_transcript_anchor_trust t ON t.message_id = c.message_id
 JOIN messages o ON o.conversation_id = c.conversation_id AND o.seq < c.seq
  AND o.identity_hash = c.identity_hash
  AND o.role = c.role AND o.content = c.content AND o.created_at = c.created_at
 WHERE c.conversation_id = ?1 AND o.conversation_id = ?1
  AND c.transcript_entry_id IS NOT NULL AND o.transcript_entry_id IS NULL
  AND NOT EXISTS (SELECT 1 FROM message_transcript_anchor_trust t2 WHERE t2.message_id = o.message_id)
  AND NOT EXISTS (SELECT 1 FROM messages x WHERE x.conversation_id = c.conversation_id
   AND x.seq > o.seq AND x.seq < c.seq AND x.role = 'user' AND x.transcript_entry_id IS NULL)
 ORDER BY c.seq, o.seq DESC";

/// The conversation's re-imported copies (none outside a lossless-claw file whose transcript
/// epoch for it went `legacy_prefix`). A copy matching several earlier rows is paired with the
/// nearest; each row is an original of one copy at most.
pub(crate) fn find(db: Db, conversation_id: i64) -> Result<Vec<StoredCopy>> {
    if !searched(db, conversation_id)? {
        return Ok(Vec::new());
    }
    let (mut out, mut copies, mut originals) = (Vec::new(), HashSet::new(), HashSet::new());
    db.query_each(FIND, &[&conversation_id], |r| {
        let (original_id, copy_id): (i64, i64) = (r.get(0)?, r.get(1)?);
        // The nearest original comes first for each copy (`o.seq DESC`).
        if !copies.contains(&copy_id) && !originals.contains(&original_id) {
            copies.insert(copy_id);
            originals.insert(original_id);
            out.push(StoredCopy {
                conversation_id,
                original_id,
                copy_id,
                role: r.get(2)?,
            });
        }
        Ok(true)
    })?;
    Ok(out)
}

/// The ids of the conversation's copies (`find`), for an assembly to leave out.
pub(crate) fn ids(db: Db, conversation_id: i64) -> Result<HashSet<i64>> {
    Ok(find(db, conversation_id)?.into_iter().map(|c| c.copy_id).collect())
}

/// Whether the conversation can hold copies: a SQLite file with lossless-claw's transcript
/// epochs, its epoch `legacy_prefix` (a primary-key lookup: the search itself is not made for
/// any other conversation).
fn searched(db: Db, conversation_id: i64) -> Result<bool> {
    if !db.has_table("conversation_transcript_epochs")? {
        return Ok(false);
    }
    Ok(db
        .query_row(
            "SELECT 1 FROM conversation_transcript_epochs WHERE conversation_id = ?1 AND migration_mode = 'legacy_prefix'",
            &[&conversation_id],
            |_| Ok(()),
        )?
        .is_some())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rusqlite::Connection;

    fn fixture() -> (tempfile::TempDir, Connection) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("doubled.db");
        std::fs::copy(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/lossless-claw-doubled.db"),
            &path,
        )
        .unwrap();
        let conn = Connection::open(&path).unwrap();
        (dir, conn)
    }

    /// The 11 copies of the fixture's session, and not the user's two real resends (turn 9's
    /// words sent again, "Repeat me" twice): each of those is an original with a copy of its own.
    #[test]
    fn lossless_claws_copies_are_found_and_real_repeats_are_not() {
        let (_dir, conn) = fixture();
        let found = find((&conn).into(), 1).unwrap();
        let pairs: Vec<(i64, i64)> = found.iter().map(|c| (c.original_id, c.copy_id)).collect();
        assert_eq!(
            pairs,
            [
                (15, 17),
                (18, 22),
                (20, 23),
                (24, 26),
                (27, 29),
                (30, 32),
                (33, 35),
                (36, 38),
                (39, 41),
                (42, 46),
                (44, 47)
            ]
        );
        let roles: Vec<&str> = found.iter().map(|c| c.role.as_str()).collect();
        assert_eq!(roles.iter().filter(|r| **r == "tool").count(), 2);
        // The resends are originals, never copies of the earlier words.
        for resend in [33, 39] {
            assert!(!found.iter().any(|c| c.copy_id == resend), "{resend} taken for a copy");
        }
    }

    #[test]
    fn a_conversation_whose_epoch_is_sound_is_not_searched() {
        let (_dir, conn) = fixture();
        conn.execute(
            "UPDATE conversation_transcript_epochs SET migration_mode = 'verified'",
            [],
        )
        .unwrap();
        assert!(find((&conn).into(), 1).unwrap().is_empty());
        conn.execute("DROP TABLE conversation_transcript_epochs", []).unwrap();
        assert!(find((&conn).into(), 1).unwrap().is_empty());
    }

    /// A resend within the same second of a row that lost its anchor: taken for a copy only
    /// when it is anchored and the original is not, as lossless-claw's copies are.
    #[test]
    fn an_anchored_row_is_never_an_original() {
        let (_dir, conn) = fixture();
        conn.execute(
            "UPDATE messages SET transcript_entry_id = 'host-entry' WHERE message_id = 15",
            [],
        )
        .unwrap();
        let found = find((&conn).into(), 1).unwrap();
        assert!(!found.iter().any(|c| c.original_id == 15), "{found:?}");
        assert_eq!(found.len(), 10);
    }
}
