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

/// A copy `fold` left where it was, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub(crate) struct KeptCopy {
    pub copy_id: i64,
    pub reason: String,
}

/// What `fold` did (or, on a dry run, would do) to one or more conversations.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub(crate) struct FoldedCopies {
    /// Every copy found, with the row it copies.
    pub copies: Vec<StoredCopy>,
    /// The copies removed (each into its original); on a dry run, those that would be.
    pub folded: Vec<i64>,
    /// The copies left in place, with the reason.
    pub kept: Vec<KeptCopy>,
    /// Live context rows of copies removed (the rows after them renumbered).
    pub context_items_removed: i64,
    /// Summary source links of copies removed (each summary still covers the original or
    /// another of its messages).
    pub summary_links_removed: i64,
}

impl FoldedCopies {
    pub(crate) fn add(&mut self, other: FoldedCopies) {
        self.copies.extend(other.copies);
        self.folded.extend(other.folded);
        self.kept.extend(other.kept);
        self.context_items_removed += other.context_items_removed;
        self.summary_links_removed += other.summary_links_removed;
    }
}

/// Folds the conversation's copies into their originals, in the caller's write transaction
/// (nothing is written unless `apply`): the copy's host entry id and anchor trust move to its
/// original (which is then tied to the host's transcript as lcm-native's own rows are), the
/// copy's live context row goes (the rows after it renumbered, no gap) or its link to the
/// summary covering it does, and its row, parts and full-text row are deleted. Nothing the
/// model was sent changes: assembly already left copies out. A copy is kept when removing it
/// would leave a summary with no source (the summary covers only copies) or when
/// lossless-claw's own unfinished compaction names it.
pub(crate) fn fold(db: Db, conversation_id: i64, apply: bool) -> Result<FoldedCopies> {
    let mut out = FoldedCopies {
        copies: find(db, conversation_id)?,
        ..FoldedCopies::default()
    };
    let pending = db.has_table("pending_summary_node_messages")?;
    // How many sources each summary keeps as copies are taken from it.
    let mut sources: std::collections::HashMap<String, i64> = std::collections::HashMap::new();
    let mut plan = Vec::new();
    for copy in &out.copies {
        let id = copy.copy_id;
        if pending
            && db
                .query_row(
                    "SELECT 1 FROM pending_summary_node_messages WHERE message_id = ?1",
                    &[&id],
                    |_| Ok(()),
                )?
                .is_some()
        {
            out.kept.push(KeptCopy {
                copy_id: id,
                reason: "named by lossless-claw's unfinished compaction (pending_summary_node_messages)".into(),
            });
            continue;
        }
        let links: Vec<String> = db.query_map(
            "SELECT summary_id FROM summary_messages WHERE message_id = ?1",
            &[&id],
            |r| r.get(0),
        )?;
        let mut last_source = None;
        for s in &links {
            let left = match sources.get(s) {
                Some(n) => *n,
                None => db.query_one(
                    "SELECT COUNT(*) FROM summary_messages WHERE summary_id = ?1",
                    &[s],
                    |r| r.get(0),
                )?,
            };
            sources.insert(s.clone(), left);
            if left <= 1 {
                last_source = Some(s.clone());
            }
        }
        if let Some(s) = last_source {
            out.kept.push(KeptCopy {
                copy_id: id,
                reason: format!("the last source of summary {s}"),
            });
            continue;
        }
        for s in &links {
            *sources.get_mut(s).expect("counted above") -= 1;
        }
        out.summary_links_removed += links.len() as i64;
        plan.push(copy.clone());
    }
    out.folded = plan.iter().map(|c| c.copy_id).collect();
    let live: HashSet<i64> = db
        .query_map(
            "SELECT message_id FROM context_items WHERE conversation_id = ?1 AND item_type = 'message'",
            &[&conversation_id],
            |r| r.get(0),
        )?
        .into_iter()
        .collect();
    out.context_items_removed = plan.iter().filter(|c| live.contains(&c.copy_id)).count() as i64;
    if !apply || plan.is_empty() {
        return Ok(out);
    }
    for copy in &plan {
        let (o, c) = (&copy.original_id, &copy.copy_id);
        db.execute("DELETE FROM summary_messages WHERE message_id = ?1", &[c])?;
        db.execute(
            "DELETE FROM context_items WHERE conversation_id = ?1 AND item_type = 'message' AND message_id = ?2",
            &[&conversation_id, c],
        )?;
        // The host's entry id is unique per conversation: off the copy before onto the original.
        let entry: Option<String> = db.query_one(
            "SELECT transcript_entry_id FROM messages WHERE message_id = ?1",
            &[c],
            |r| r.get(0),
        )?;
        db.execute(
            "UPDATE messages SET transcript_entry_id = NULL WHERE message_id = ?1",
            &[c],
        )?;
        db.execute(
            "UPDATE messages SET transcript_entry_id = ?2 WHERE message_id = ?1",
            &[o, &entry],
        )?;
        db.execute(
            "UPDATE message_transcript_anchor_trust SET message_id = ?2 WHERE message_id = ?1",
            &[c, o],
        )?;
        if let Db::Sqlite(conn) = db {
            conn.execute("DELETE FROM messages_fts WHERE rowid = ?1", [c])?;
        }
        // Its parts (and a `<recalled>` block placed after it) go with it.
        db.execute("DELETE FROM message_parts WHERE message_id = ?1", &[c])?;
        db.execute("DELETE FROM messages WHERE message_id = ?1", &[c])?;
    }
    if out.context_items_removed > 0 {
        close_gaps(db, conversation_id)?;
    }
    Ok(out)
}

/// Renumbers the conversation's live context contiguously from its first ordinal, keeping the
/// order: the rows that move go to negative ordinals first, so no two rows ever share one.
fn close_gaps(db: Db, conversation_id: i64) -> Result<()> {
    let ordinals: Vec<i64> = db.query_map(
        "SELECT ordinal FROM context_items WHERE conversation_id = ?1 ORDER BY ordinal",
        &[&conversation_id],
        |r| r.get(0),
    )?;
    let Some(first) = ordinals.first().copied() else {
        return Ok(());
    };
    let moves: Vec<(i64, i64)> = ordinals
        .iter()
        .enumerate()
        .map(|(i, o)| (*o, first + i as i64))
        .filter(|(from, to)| from != to)
        .collect();
    for (from, _) in &moves {
        db.execute(
            "UPDATE context_items SET ordinal = -1 - ordinal WHERE conversation_id = ?1 AND ordinal = ?2",
            &[&conversation_id, from],
        )?;
    }
    for (from, to) in &moves {
        db.execute(
            "UPDATE context_items SET ordinal = ?3 WHERE conversation_id = ?1 AND ordinal = -1 - ?2",
            &[&conversation_id, from, to],
        )?;
    }
    Ok(())
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

    fn count(conn: &Connection, sql: &str) -> i64 {
        conn.query_row(sql, [], |r| r.get(0)).unwrap()
    }

    /// A dry run finds all 11 copies, says what it would remove and writes nothing.
    #[test]
    fn a_dry_run_says_what_it_would_fold_and_writes_nothing() {
        let (_dir, conn) = fixture();
        let before: i64 = count(&conn, "SELECT total_changes()");
        let report = fold((&conn).into(), 1, false).unwrap();
        assert_eq!(report.copies.len(), 11);
        assert_eq!(
            report.folded,
            report.copies.iter().map(|c| c.copy_id).collect::<Vec<_>>()
        );
        assert!(report.kept.is_empty(), "{:?}", report.kept);
        assert_eq!(report.context_items_removed, 11);
        assert_eq!(count(&conn, "SELECT total_changes()"), before, "a dry run wrote");
        assert_eq!(count(&conn, "SELECT COUNT(*) FROM messages"), 49);
    }

    /// Applied: each copy's host entry id and anchor trust are its original's, its row, parts,
    /// full-text row and context row are gone, the context is contiguous and in order, and a
    /// second fold finds nothing.
    #[test]
    fn a_fold_moves_each_copys_anchor_to_its_original_and_removes_the_copy() {
        let (_dir, conn) = fixture();
        conn.execute_batch("PRAGMA foreign_keys = ON").unwrap();
        let entry = |id: i64| -> Option<String> {
            conn.query_row(
                "SELECT transcript_entry_id FROM messages WHERE message_id = ?1",
                [id],
                |r| r.get(0),
            )
            .unwrap()
        };
        let pairs: Vec<(i64, i64, Option<String>)> = find((&conn).into(), 1)
            .unwrap()
            .iter()
            .map(|c| (c.original_id, c.copy_id, entry(c.copy_id)))
            .collect();
        let tx = conn.unchecked_transaction().unwrap();
        let report = fold((&tx).into(), 1, true).unwrap();
        tx.commit().unwrap();
        assert_eq!(report.folded.len(), 11);
        for (original, copy, copy_entry) in &pairs {
            assert!(copy_entry.is_some());
            assert_eq!(&entry(*original), copy_entry, "message {original}");
            for table in [
                "messages",
                "message_parts",
                "message_transcript_anchor_trust",
                "context_items",
            ] {
                let n = count(
                    &conn,
                    &format!("SELECT COUNT(*) FROM {table} WHERE message_id = {copy}"),
                );
                assert_eq!(n, 0, "{table} still names copy {copy}");
            }
            assert_eq!(
                count(
                    &conn,
                    &format!("SELECT COUNT(*) FROM messages_fts WHERE rowid = {copy}")
                ),
                0
            );
            let trust = count(
                &conn,
                &format!("SELECT COUNT(*) FROM message_transcript_anchor_trust WHERE message_id = {original}"),
            );
            assert_eq!(trust, 1, "original {original} has no trust row");
        }
        assert_eq!(count(&conn, "SELECT COUNT(*) FROM messages"), 38);
        let ordinals: Vec<(i64, i64)> = conn
            .prepare(
                "SELECT ci.ordinal, m.seq FROM context_items ci JOIN messages m USING (message_id) ORDER BY ci.ordinal",
            )
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .map(|r| r.unwrap())
            .collect();
        assert_eq!(ordinals.len(), 38);
        assert!(
            ordinals.iter().enumerate().all(|(i, (o, _))| *o == i as i64),
            "{ordinals:?}"
        );
        assert!(
            ordinals.windows(2).all(|w| w[0].1 < w[1].1),
            "out of order: {ordinals:?}"
        );
        assert_eq!(count(&conn, "SELECT COUNT(*) FROM pragma_foreign_key_check"), 0);
        assert!(find((&conn).into(), 1).unwrap().is_empty(), "a copy is left");
        let again = fold((&conn).into(), 1, true).unwrap();
        assert!(again.copies.is_empty() && again.folded.is_empty());
    }

    /// A copy that is a summary's last source stays (the summary would cover nothing); one
    /// beside its original in a summary leaves that summary; one in lossless-claw's unfinished
    /// compaction stays.
    #[test]
    fn a_copy_stays_where_removing_it_would_empty_a_summary_or_break_a_pending_compaction() {
        let (_dir, conn) = fixture();
        conn.execute_batch(
            "PRAGMA foreign_keys = ON;
             INSERT INTO summaries (summary_id, conversation_id, kind, content, token_count)
              VALUES ('sum_only_copy', 1, 'leaf', 'x', 1), ('sum_both', 1, 'leaf', 'y', 1);
             INSERT INTO summary_messages VALUES ('sum_only_copy', 17, 0), ('sum_both', 18, 0), ('sum_both', 22, 1);
             DELETE FROM context_items WHERE message_id IN (17, 18, 22);",
        )
        .unwrap();
        // A pending node naming copy 23 (foreign keys off for the node's own parent rows).
        conn.execute_batch(
            "PRAGMA foreign_keys = OFF;
             INSERT INTO pending_summary_node_messages (node_id, message_id, ordinal) VALUES ('node', 23, 0);
             PRAGMA foreign_keys = ON;",
        )
        .unwrap();
        let tx = conn.unchecked_transaction().unwrap();
        let report = fold((&tx).into(), 1, true).unwrap();
        tx.commit().unwrap();
        let kept: Vec<i64> = report.kept.iter().map(|k| k.copy_id).collect();
        assert_eq!(kept, [17, 23], "{:?}", report.kept);
        assert!(report.kept[0].reason.contains("sum_only_copy"), "{:?}", report.kept);
        assert_eq!(report.folded.len(), 9);
        assert_eq!(report.summary_links_removed, 1);
        assert_eq!(report.context_items_removed, 8);
        let links: Vec<i64> = conn
            .prepare("SELECT message_id FROM summary_messages WHERE summary_id = 'sum_both'")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(|r| r.unwrap())
            .collect();
        assert_eq!(links, [18]);
        assert_eq!(
            count(&conn, "SELECT COUNT(*) FROM messages WHERE message_id IN (17, 23)"),
            2
        );
    }
}
