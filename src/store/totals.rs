//! The live-context totals as stored (`lcm_context_totals`, kept by the triggers of
//! `db::totals` on SQLite and of `pg::totals` on PostgreSQL), and as summed from the live
//! items for checks.

use rusqlite::params;

use crate::db::totals::{COUNT_MESSAGES, SELECT_MESSAGE_COUNT, SELECT_RECOMPUTED, SELECT_STORED};
use crate::error::Result;
use crate::sql::Db;

/// The live totals of one conversation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct LiveTotals {
    pub items: i64,
    pub summaries: i64,
    pub message_tokens: i64,
    pub summary_tokens: i64,
}

impl LiveTotals {
    pub(crate) fn tokens(&self) -> i64 {
        self.message_tokens + self.summary_tokens
    }
}

fn read(db: Db, sql: &str, conversation_id: i64) -> Result<Option<LiveTotals>> {
    db.query_row(sql, params![conversation_id], |r| {
        Ok(LiveTotals {
            items: r.get(0)?,
            summaries: r.get(1)?,
            message_tokens: r.get(2)?,
            summary_tokens: r.get(3)?,
        })
    })
}

/// The stored totals of a conversation; zero when it never had a live item.
pub(crate) fn load<'a>(db: impl Into<Db<'a>>, conversation_id: i64) -> Result<LiveTotals> {
    Ok(read(db.into(), SELECT_STORED, conversation_id)?.unwrap_or_default())
}

/// The totals summed from the live items themselves (O(items): for checks, not for hot paths).
pub(crate) fn recompute<'a>(db: impl Into<Db<'a>>, conversation_id: i64) -> Result<LiveTotals> {
    Ok(read(db.into(), SELECT_RECOMPUTED, conversation_id)?.unwrap_or_default())
}

/// How many messages a conversation has stored, as the triggers count them (O(1), whatever the
/// length of the history).
pub(crate) fn message_count<'a>(db: impl Into<Db<'a>>, conversation_id: i64) -> Result<i64> {
    db.into()
        .query_one(SELECT_MESSAGE_COUNT, params![conversation_id], |r| r.get(0))
}

/// Messages stored in all conversations (the sum of their counts).
pub(crate) fn all_message_count<'a>(db: impl Into<Db<'a>>) -> Result<i64> {
    db.into().query_one(
        "SELECT CAST(COALESCE(SUM(messages), 0) AS BIGINT) FROM lcm_message_counts",
        params![],
        |r| r.get(0),
    )
}

/// Describes how the stored totals of a conversation differ from its live items, or its count
/// of messages from its rows, if they do.
pub(crate) fn drift<'a>(db: impl Into<Db<'a>>, conversation_id: i64) -> Result<Option<String>> {
    let db = db.into();
    let stored = load(db, conversation_id)?;
    let actual = recompute(db, conversation_id)?;
    if stored != actual {
        return Ok(Some(format!(
            "conversation {conversation_id}: stored live totals {stored:?} differ from the live items {actual:?}"
        )));
    }
    let counted = message_count(db, conversation_id)?;
    let rows: i64 = db.query_one(COUNT_MESSAGES, params![conversation_id], |r| r.get(0))?;
    Ok((counted != rows).then(|| {
        format!("conversation {conversation_id}: the stored count of messages ({counted}) differs from its {rows} message rows")
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::on_both_engines;

    fn totals(items: i64, summaries: i64, message_tokens: i64, summary_tokens: i64) -> LiveTotals {
        LiveTotals {
            items,
            summaries,
            message_tokens,
            summary_tokens,
        }
    }

    fn run(db: Db, statements: &str) {
        for sql in statements.split(';').map(str::trim).filter(|s| !s.is_empty()) {
            db.execute(sql, params![]).unwrap_or_else(|e| panic!("{sql}: {e}"));
        }
    }

    fn fresh(db: Db) {
        run(
            db,
            "INSERT INTO conversations (conversation_id, session_id) VALUES (1, 'a'), (2, 'b');
             INSERT INTO messages (message_id, conversation_id, seq, role, content, token_count) VALUES
               (1, 1, 1, 'user', 'a', 10), (2, 1, 2, 'assistant', 'b', 20), (3, 1, 3, 'user', 'c', 30),
               (4, 2, 1, 'user', 'd', 7);
             INSERT INTO summaries (summary_id, conversation_id, kind, content, token_count) VALUES
               ('sum_a', 1, 'leaf', 'ab', 5);
             INSERT INTO context_items (conversation_id, ordinal, item_type, message_id) VALUES
               (1, 0, 'message', 1), (1, 1, 'message', 2), (1, 2, 'message', 3), (2, 0, 'message', 4)",
        );
    }

    /// Every kind of write (lossless-claw's, lcm-tui's, lcm-native's) keeps the stored totals
    /// equal to the live items, by SQLite's triggers and by PostgreSQL's alike.
    #[test]
    fn every_kind_of_write_keeps_the_totals_equal_to_the_live_items_on_both_engines() {
        on_both_engines("totals", |db, _, engine| {
            fresh(db);
            assert_eq!(load(db, 1).unwrap(), totals(3, 0, 60, 0), "{engine}");
            assert_eq!(load(db, 2).unwrap(), totals(1, 0, 7, 0), "{engine}");
            let steps = [
                // A leaf pass the way lossless-claw writes it: delete the range, insert the summary.
                "DELETE FROM context_items WHERE conversation_id = 1 AND ordinal IN (0, 1);
                 INSERT INTO context_items (conversation_id, ordinal, item_type, summary_id) VALUES (1, 0, 'summary', 'sum_a')",
                // Renumbering touches only ordinals.
                "UPDATE context_items SET ordinal = 1 WHERE conversation_id = 1 AND ordinal = 2",
                // lcm-tui's rewrite changes a live summary's text and token count.
                "UPDATE summaries SET token_count = 9 WHERE summary_id = 'sum_a'",
                // A message's token count re-estimated while it is live, and while it is not.
                "UPDATE messages SET token_count = 33 WHERE message_id = 3;
                 UPDATE messages SET token_count = 11 WHERE message_id = 1",
                // An item swapped in place from message to summary.
                "UPDATE context_items SET item_type = 'summary', message_id = NULL, summary_id = 'sum_a'
                   WHERE conversation_id = 2 AND ordinal = 0",
            ];
            for step in steps {
                run(db, step);
                for id in [1, 2] {
                    assert_eq!(drift(db, id).unwrap(), None, "{engine}: after {step}");
                }
            }
            assert_eq!(load(db, 1).unwrap(), totals(2, 1, 33, 9), "{engine}");
            assert_eq!(load(db, 1).unwrap().tokens(), 42, "{engine}");

            // A damaged database: conversation 2 shows conversation 1's summary twice more.
            run(
                db,
                "INSERT INTO context_items (conversation_id, ordinal, item_type, summary_id) VALUES
                   (2, 1, 'summary', 'sum_a'), (2, 2, 'summary', 'sum_a');
                 UPDATE summaries SET token_count = 50 WHERE summary_id = 'sum_a'",
            );
            for id in [1, 2] {
                assert_eq!(drift(db, id).unwrap(), None, "{engine}");
            }
            assert_eq!(load(db, 2).unwrap().summary_tokens, 150, "{engine}");

            // A deleted conversation leaves no totals; a new one reusing its id starts from zero.
            run(db, "DELETE FROM conversations WHERE conversation_id = 2");
            let rows: i64 = db
                .query_one(
                    "SELECT count(*) FROM lcm_context_totals WHERE conversation_id = 2",
                    params![],
                    |r| r.get(0),
                )
                .unwrap();
            assert_eq!(rows, 0, "{engine}");
            run(
                db,
                "INSERT INTO conversations (conversation_id, session_id) VALUES (2, 'c');
                 INSERT INTO messages (message_id, conversation_id, seq, role, content, token_count) VALUES (5, 2, 1, 'user', 'e', 4);
                 INSERT INTO context_items (conversation_id, ordinal, item_type, message_id) VALUES (2, 0, 'message', 5)",
            );
            assert_eq!(load(db, 2).unwrap(), totals(1, 0, 4, 0), "{engine}");
        });
    }

    /// The stored-message counts follow inserts, moves and deletes on both engines, a deleted
    /// conversation's id starts again from zero, and a count that drifted from the rows (a
    /// writer without the triggers) is reported.
    #[test]
    fn message_counts_follow_every_write_and_drift_is_reported_on_both_engines() {
        on_both_engines("message_counts", |db, _, engine| {
            fresh(db);
            assert_eq!(
                (message_count(db, 1).unwrap(), message_count(db, 2).unwrap()),
                (3, 1),
                "{engine}"
            );
            run(
                db,
                "UPDATE messages SET conversation_id = 2, seq = 9 WHERE message_id = 3",
            );
            assert_eq!(
                (message_count(db, 1).unwrap(), message_count(db, 2).unwrap()),
                (2, 2),
                "{engine}"
            );
            run(
                db,
                "DELETE FROM context_items WHERE message_id IN (3, 4);
                 DELETE FROM messages WHERE conversation_id = 2;
                 DELETE FROM conversations WHERE conversation_id = 2;
                 INSERT INTO conversations (conversation_id, session_id) VALUES (2, 'c');
                 INSERT INTO messages (message_id, conversation_id, seq, role, content, token_count) VALUES (6, 2, 1, 'user', 'f', 4)",
            );
            assert_eq!(message_count(db, 2).unwrap(), 1, "{engine}");
            assert_eq!(drift(db, 2).unwrap(), None, "{engine}");
            run(
                db,
                "UPDATE lcm_message_counts SET messages = 99 WHERE conversation_id = 1",
            );
            let found = drift(db, 1).unwrap().unwrap_or_default();
            assert!(
                found.contains("(99) differs from its 2 message rows"),
                "{engine}: {found}"
            );
        });
    }
}
