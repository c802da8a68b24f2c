//! Per-conversation totals of the live context (items, summaries, message and summary tokens),
//! and each conversation's count of stored messages, kept by triggers so that every writer
//! (lcm-native, lossless-claw, lcm-tui) keeps them right. Assembly, `evaluate` and
//! `findConversation` read them instead of counting or summing rows, so their cost follows what
//! they emit, not the length of the history.

/// The live totals' table.
pub(crate) const TABLE: &str = "lcm_context_totals";
/// The stored-message counts' table.
pub(crate) const COUNTS_TABLE: &str = "lcm_message_counts";

pub(crate) const DDL: &str = "CREATE TABLE IF NOT EXISTS lcm_context_totals (
      conversation_id INTEGER PRIMARY KEY,
      items INTEGER NOT NULL DEFAULT 0,
      summaries INTEGER NOT NULL DEFAULT 0,
      message_tokens INTEGER NOT NULL DEFAULT 0,
      summary_tokens INTEGER NOT NULL DEFAULT 0
    );
    CREATE TABLE IF NOT EXISTS lcm_message_counts (
      conversation_id INTEGER PRIMARY KEY,
      messages INTEGER NOT NULL DEFAULT 0
    )";

/// The triggers' names; `triggers()` gives their DDL.
pub(crate) const TRIGGER_NAMES: [&str; 9] = [
    "lcm_context_items_totals_insert",
    "lcm_context_items_totals_delete",
    "lcm_context_items_totals_update",
    "lcm_summaries_totals_token_count",
    "lcm_messages_totals_token_count",
    "lcm_conversations_totals_delete",
    "lcm_messages_count_insert",
    "lcm_messages_count_delete",
    "lcm_messages_count_move",
];

/// Counts one message (`NEW` or `OLD`) in (`+`) or out of (`-`) its conversation.
fn count_message(sign: char, row: &str) -> String {
    if sign == '+' {
        format!(
            "INSERT INTO lcm_message_counts (conversation_id, messages) VALUES ({row}.conversation_id, 1)
             ON CONFLICT (conversation_id) DO UPDATE SET messages = messages + 1;"
        )
    } else {
        format!("UPDATE lcm_message_counts SET messages = messages - 1 WHERE conversation_id = {row}.conversation_id;")
    }
}

/// Adds (`+`) or removes (`-`) the context item `row` (`NEW` or `OLD`) from its totals, in one
/// statement (a trigger's cost is mostly per statement: this runs on every ingested message).
fn count_item(sign: char, row: &str) -> String {
    let tokens = |table: &str, key: &str| {
        format!("CASE WHEN {row}.{key} IS NULL THEN 0 ELSE COALESCE((SELECT token_count FROM {table} WHERE {key} = {row}.{key}), 0) END")
    };
    let (messages, summaries) = (tokens("messages", "message_id"), tokens("summaries", "summary_id"));
    if sign == '+' {
        format!(
            "INSERT INTO lcm_context_totals (conversation_id, items, summaries, message_tokens, summary_tokens)
             VALUES ({row}.conversation_id, 1, {row}.item_type = 'summary', {messages}, {summaries})
             ON CONFLICT (conversation_id) DO UPDATE SET
               items = items + 1,
               summaries = summaries + excluded.summaries,
               message_tokens = message_tokens + excluded.message_tokens,
               summary_tokens = summary_tokens + excluded.summary_tokens;"
        )
    } else {
        format!(
            "UPDATE lcm_context_totals SET
               items = items - 1,
               summaries = summaries - ({row}.item_type = 'summary'),
               message_tokens = message_tokens - {messages},
               summary_tokens = summary_tokens - {summaries}
             WHERE conversation_id = {row}.conversation_id;"
        )
    }
}

/// Follows a change of `token_count` on a row of `table` (keyed by `key`) into `column` of
/// every conversation whose live context references the row, once per reference (a damaged
/// database may reference a row from another conversation, or twice).
fn follow_tokens(name: &str, table: &str, key: &str, column: &str) -> String {
    format!(
        "CREATE TRIGGER {name} AFTER UPDATE OF token_count ON {table}
           WHEN NEW.token_count IS NOT OLD.token_count BEGIN
           UPDATE lcm_context_totals SET {column} = {column} + (NEW.token_count - OLD.token_count)
             * (SELECT count(*) FROM context_items ci
                WHERE ci.conversation_id = lcm_context_totals.conversation_id AND ci.{key} = NEW.{key})
           WHERE conversation_id IN (SELECT conversation_id FROM context_items WHERE {key} = NEW.{key});
         END"
    )
}

/// The triggers, by name (in `TRIGGER_NAMES` order).
pub(crate) fn triggers() -> [(&'static str, String); 9] {
    let [insert, delete, update, summaries, messages, conversations, counted, uncounted, moved] = TRIGGER_NAMES;
    [
        (
            insert,
            format!(
                "CREATE TRIGGER {insert} AFTER INSERT ON context_items BEGIN {} END",
                count_item('+', "NEW")
            ),
        ),
        (
            delete,
            format!(
                "CREATE TRIGGER {delete} AFTER DELETE ON context_items BEGIN {} END",
                count_item('-', "OLD")
            ),
        ),
        (
            update,
            format!(
                "CREATE TRIGGER {update} AFTER UPDATE OF conversation_id, item_type, message_id, summary_id
                   ON context_items BEGIN {} {} END",
                count_item('-', "OLD"),
                count_item('+', "NEW")
            ),
        ),
        (
            summaries,
            follow_tokens(summaries, "summaries", "summary_id", "summary_tokens"),
        ),
        (
            messages,
            follow_tokens(messages, "messages", "message_id", "message_tokens"),
        ),
        (
            // BEFORE, so the rows its cascade deletes find no totals to update: deleting a
            // conversation leaves no stale totals for a later conversation reusing its id.
            conversations,
            format!(
                "CREATE TRIGGER {conversations} BEFORE DELETE ON conversations BEGIN
                   DELETE FROM lcm_context_totals WHERE conversation_id = OLD.conversation_id;
                   DELETE FROM lcm_message_counts WHERE conversation_id = OLD.conversation_id;
                 END"
            ),
        ),
        (
            counted,
            format!(
                "CREATE TRIGGER {counted} AFTER INSERT ON messages BEGIN {} END",
                count_message('+', "NEW")
            ),
        ),
        (
            uncounted,
            format!(
                "CREATE TRIGGER {uncounted} AFTER DELETE ON messages BEGIN {} END",
                count_message('-', "OLD")
            ),
        ),
        (
            moved,
            format!(
                "CREATE TRIGGER {moved} AFTER UPDATE OF conversation_id ON messages
                   WHEN NEW.conversation_id IS NOT OLD.conversation_id BEGIN {} {} END",
                count_message('-', "OLD"),
                count_message('+', "NEW")
            ),
        ),
    ]
}

/// The totals summed from the live items: `SELECT <conversation_id,> {items, summaries,
/// message tokens, summary tokens} FROM …`, shared by the rebuild and the check.
macro_rules! live_sums {
    () => {
        "count(*), CAST(COALESCE(SUM(CASE WHEN ci.item_type = 'summary' THEN 1 ELSE 0 END), 0) AS BIGINT),
                CAST(COALESCE(SUM(m.token_count), 0) AS BIGINT), CAST(COALESCE(SUM(s.token_count), 0) AS BIGINT)
         FROM context_items ci
         LEFT JOIN messages m ON ci.item_type = 'message' AND m.message_id = ci.message_id
         LEFT JOIN summaries s ON ci.item_type = 'summary' AND s.summary_id = ci.summary_id"
    };
}

/// Recomputes every conversation's totals from the live items, and its count from the
/// messages (once, when the triggers are installed, and whenever they were missing).
pub(crate) const REBUILD: &str = concat!(
    "DELETE FROM lcm_context_totals;
     INSERT INTO lcm_context_totals (conversation_id, items, summaries, message_tokens, summary_tokens)
     SELECT ci.conversation_id, ",
    live_sums!(),
    " GROUP BY ci.conversation_id;
     DELETE FROM lcm_message_counts;
     INSERT INTO lcm_message_counts (conversation_id, messages)
     SELECT conversation_id, count(*) FROM messages GROUP BY conversation_id;"
);

/// A conversation's stored messages, as counted (`?1`: the conversation), when there is a count
/// table; otherwise the count of its rows.
pub(crate) const SELECT_MESSAGE_COUNT: &str =
    "SELECT COALESCE((SELECT messages FROM lcm_message_counts WHERE conversation_id = ?1), 0)";
pub(crate) const COUNT_MESSAGES: &str = "SELECT count(*) FROM messages WHERE conversation_id = ?1";

/// The stored totals of a conversation (`store::totals` reads them).
pub(crate) const SELECT_STORED: &str =
    "SELECT items, summaries, message_tokens, summary_tokens FROM lcm_context_totals WHERE conversation_id = ?1";

/// The totals summed from a conversation's live items.
pub(crate) const SELECT_RECOMPUTED: &str = concat!("SELECT ", live_sums!(), " WHERE ci.conversation_id = ?1");

#[cfg(test)]
mod tests {
    use rusqlite::{params, Connection};

    use super::*;
    use crate::db::{migrate::migrate, open_connection};

    fn fresh() -> (tempfile::TempDir, String, Connection) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db").to_string_lossy().into_owned();
        let mut conn = open_connection(&path, 5000).unwrap();
        migrate(&mut conn, &path).unwrap();
        conn.execute_batch(
            "INSERT INTO conversations (conversation_id, session_id) VALUES (1, 'a');
             INSERT INTO messages (message_id, conversation_id, seq, role, content, token_count) VALUES
               (1, 1, 1, 'user', 'a', 10), (2, 1, 2, 'assistant', 'b', 20), (3, 1, 3, 'user', 'c', 30);
             INSERT INTO summaries (summary_id, conversation_id, kind, content, token_count) VALUES
               ('sum_a', 1, 'leaf', 'ab', 5);
             INSERT INTO context_items (conversation_id, ordinal, item_type, message_id) VALUES
               (1, 0, 'message', 1), (1, 1, 'message', 2), (1, 2, 'message', 3);",
        )
        .unwrap();
        (dir, path, conn)
    }

    /// (stored, recomputed) totals of conversation 1.
    fn both(conn: &Connection) -> ([i64; 4], [i64; 4]) {
        let read = |sql: &str| {
            conn.query_row(sql, params![1], |r| Ok([r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?]))
                .unwrap()
        };
        (read(SELECT_STORED), read(SELECT_RECOMPUTED))
    }

    #[test]
    fn a_trigger_with_another_definition_is_replaced() {
        let (_dir, path, mut conn) = fresh();
        // An older or tampered definition that ignores token changes.
        conn.execute_batch(
            "DROP TRIGGER lcm_summaries_totals_token_count;
             CREATE TRIGGER lcm_summaries_totals_token_count AFTER UPDATE OF token_count ON summaries BEGIN SELECT 1; END;",
        )
        .unwrap();
        let report = migrate(&mut conn, &path).unwrap();
        assert!(report.live_totals_rebuilt, "{report:?}");
        conn.execute_batch(
            "INSERT INTO context_items (conversation_id, ordinal, item_type, summary_id) VALUES (1, 3, 'summary', 'sum_a');
             UPDATE summaries SET token_count = 77 WHERE summary_id = 'sum_a';",
        )
        .unwrap();
        let (stored, live) = both(&conn);
        assert_eq!(stored, live);
        assert!(migrate(&mut conn, &path).unwrap().up_to_date);
    }

    #[test]
    fn a_missing_trigger_is_reinstalled_and_the_totals_recomputed() {
        let (_dir, path, mut conn) = fresh();
        // Another tool drops a trigger, then writes while it is gone.
        conn.execute_batch(
            "DROP TRIGGER lcm_context_items_totals_delete;
             DELETE FROM context_items WHERE conversation_id = 1 AND ordinal = 2;",
        )
        .unwrap();
        let (stored, live) = both(&conn);
        assert_ne!(stored, live, "the test must create drift");
        let report = migrate(&mut conn, &path).unwrap();
        assert!(report.live_totals_rebuilt && !report.up_to_date, "{report:?}");
        assert_eq!(both(&conn), ([2, 0, 30, 0], [2, 0, 30, 0]));
        assert!(migrate(&mut conn, &path).unwrap().up_to_date);
    }

    fn counts(conn: &Connection) -> Vec<(i64, i64)> {
        let mut stmt = conn
            .prepare("SELECT conversation_id, messages FROM lcm_message_counts ORDER BY conversation_id")
            .unwrap();
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).unwrap();
        rows.map(Result::unwrap).collect()
    }

    /// Every writer's inserts, deletes and moves of messages are counted per conversation; a
    /// deleted conversation leaves no count; a file whose count trigger went missing is
    /// counted again by the next migration.
    #[test]
    fn stored_messages_are_counted_per_conversation_by_every_writer() {
        let (_dir, path, mut conn) = fresh();
        assert_eq!(counts(&conn), [(1, 3)]);
        conn.execute_batch(
            "INSERT INTO conversations (conversation_id, session_id) VALUES (2, 'b');
             INSERT INTO messages (message_id, conversation_id, seq, role, content, token_count) VALUES
               (4, 2, 1, 'user', 'd', 1), (5, 2, 2, 'user', 'e', 1);
             UPDATE messages SET conversation_id = 2, seq = 9 WHERE message_id = 3;
             DELETE FROM context_items WHERE message_id = 3;
             DELETE FROM messages WHERE message_id = 4;",
        )
        .unwrap();
        assert_eq!(counts(&conn), [(1, 2), (2, 2)]);
        conn.execute_batch("DELETE FROM context_items WHERE conversation_id = 1; DELETE FROM messages WHERE conversation_id = 1; DELETE FROM conversations WHERE conversation_id = 1;").unwrap();
        assert_eq!(counts(&conn), [(2, 2)]);
        // A writer without the trigger: the next migration counts again.
        conn.execute_batch(
            "DROP TRIGGER lcm_messages_count_insert;
             INSERT INTO messages (message_id, conversation_id, seq, role, content, token_count) VALUES (6, 2, 3, 'user', 'f', 1);",
        )
        .unwrap();
        assert_eq!(counts(&conn), [(2, 2)], "the test must create drift");
        assert!(migrate(&mut conn, &path).unwrap().live_totals_rebuilt);
        assert_eq!(counts(&conn), [(2, 3)]);
    }
}
