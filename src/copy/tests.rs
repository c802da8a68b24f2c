use serde_json::json;

use super::*;
use crate::test_support::{compact_offline, engine_with, pg_test_location, with_synthetic};

fn options(from: &str, to: &str) -> CopyOptions {
    CopyOptions::new(from, to)
}

/// A compacted conversation (leaves, condensed summaries, context items, versions, fidelity
/// rows) in a closed file.
fn compacted_source() -> (tempfile::TempDir, String) {
    let (dir, engine, cid) = with_synthetic(json!({}), 120, 400);
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(compact_offline(&engine, cid, 4000));
    engine.close();
    let path = dir.path().join("lcm.db").to_string_lossy().into_owned();
    (dir, path)
}

fn sqlite_master(path: &str) -> Vec<(String, String, String)> {
    let c = rusqlite::Connection::open(path).unwrap();
    let mut stmt = c
        .prepare("SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%' ORDER BY type, name")
        .unwrap();
    let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).unwrap();
    rows.map(|r| r.unwrap()).collect()
}

fn count(path: &str, sql: &str) -> i64 {
    rusqlite::Connection::open(path)
        .unwrap()
        .query_row(sql, [], |r| r.get(0))
        .unwrap()
}

/// SQLite → SQLite needs no server: the same file comes out (schema, rows, counters,
/// full-text rows rebuilt), and lcm-native opens it and finds nothing wrong.
#[test]
fn a_sqlite_copy_is_the_same_database() {
    let (dir, from) = compacted_source();
    let to = dir.path().join("copy.db").to_string_lossy().into_owned();
    let report = run(options(&from, &to)).unwrap();
    assert!(!report.resumed);
    let messages = report.tables.iter().find(|t| t.table == "messages").unwrap();
    assert_eq!(messages.rows, 120);
    assert!(
        report.tables.iter().any(|t| t.table == "summary_parents" && t.rows > 0),
        "{report:?}"
    );
    assert_eq!(report.rows_copied, report.tables.iter().map(|t| t.rows).sum::<u64>());
    assert_eq!(sqlite_master(&from), sqlite_master(&to));
    for sql in [
        "SELECT count(*) FROM messages_fts",
        "SELECT count(*) FROM summaries_fts",
        "SELECT seq FROM sqlite_sequence WHERE name = 'messages'",
    ] {
        assert_eq!(count(&from, sql), count(&to, sql), "{sql}");
    }
    let copy = engine_with(&tempfile::tempdir().unwrap(), json!({ "dbPath": to }));
    let verified = copy.verify(None).unwrap();
    assert!(verified.ok, "{verified:?}");
    // The copy is a target only once.
    let e = run(options(&from, &to)).unwrap_err();
    assert_eq!(e.code(), "E_INVALID_INPUT", "{e}");
    assert!(e.to_string().contains("already holds"), "{e}");
}

/// Killed after a few batches: the target is refused by lcm-native until the copy is run
/// again, which goes on from the last batch committed and ends equal to the source.
#[test]
fn an_interrupted_copy_resumes_where_it_stopped() {
    let (dir, from) = compacted_source();
    let to = dir.path().join("copy.db").to_string_lossy().into_owned();
    let mut first = options(&from, &to);
    first.batch_rows = Some(25);
    first.stop_after_batches = Some(4);
    assert_eq!(run(first).unwrap_err().code(), "E_ABORTED");
    let written = count(&to, "SELECT count(*) FROM messages");
    assert!(written > 0 && written < 120, "{written}");
    let e = crate::engine::Engine::open(crate::config::Config::with_db_path(&to))
        .err()
        .unwrap();
    assert_eq!(e.code(), "E_SCHEMA");
    assert!(e.to_string().contains("unfinished copy"), "{e}");

    let mut second = options(&from, &to);
    second.batch_rows = Some(25);
    let report = run(second).unwrap();
    assert!(report.resumed);
    let total: u64 = report.tables.iter().map(|t| t.rows).sum();
    // The first run committed 4 batches: the one conversation, then 3 × 25 messages.
    assert_eq!(written, 75);
    assert_eq!(report.rows_copied, total - 76);
    assert_eq!(count(&to, "SELECT count(*) FROM messages"), 120);
    assert_eq!(sqlite_master(&from), sqlite_master(&to));
}

/// A source that changed between the interrupted run and the next is not mixed into the
/// half-written target.
#[test]
fn a_source_that_changed_is_not_resumed() {
    let (dir, from) = compacted_source();
    let to = dir.path().join("copy.db").to_string_lossy().into_owned();
    let mut first = options(&from, &to);
    first.batch_rows = Some(25);
    first.stop_after_batches = Some(2);
    run(first).unwrap_err();
    rusqlite::Connection::open(&from)
        .unwrap()
        .execute("UPDATE messages SET content = content || '!' WHERE seq = 100", [])
        .unwrap();
    let e = run(options(&from, &to)).unwrap_err();
    assert_eq!(e.code(), "E_STALE", "{e}");
}

#[test]
fn bad_options_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("a.db").to_string_lossy().into_owned();
    let mut o = options(&p, &p);
    o.batch_rows = Some(0);
    assert!(run(o).unwrap_err().to_string().contains("batchRows"));
    let mut o = options(&p, "x.db");
    o.from_schema = Some("lcm".into());
    assert_eq!(run(o).unwrap_err().code(), "E_INVALID_INPUT");
    // A source that does not exist.
    assert_eq!(run(options(&p, "x.db")).unwrap_err().code(), "E_IO");
}

/// SQLite → PostgreSQL → SQLite: every table (lossless-claw's own included), id, counter and
/// statement comes back; PostgreSQL holds the same digests.
#[test]
fn a_round_trip_through_postgres_is_lossless() {
    let Some(location) = pg_test_location("copy_round_trip") else {
        return;
    };
    let url = format!(
        "{}?schema={}",
        std::env::var("LCM_TEST_DATABASE_URL").unwrap(),
        location.schema
    );
    let (dir, from) = compacted_source();
    // Lossless-claw's own tables and rows travel too.
    {
        let c = rusqlite::Connection::open(&from).unwrap();
        c.execute_batch(
            "CREATE TABLE focus_briefs (brief_id TEXT PRIMARY KEY, conversation_id INTEGER NOT NULL REFERENCES conversations(conversation_id) ON DELETE CASCADE, content TEXT NOT NULL, token_count INTEGER NOT NULL DEFAULT 0, created_at TEXT NOT NULL DEFAULT (datetime('now')));
             CREATE INDEX focus_briefs_conversation_idx ON focus_briefs (conversation_id, created_at);
             INSERT INTO focus_briefs (brief_id, conversation_id, content) VALUES ('b1', 1, 'café ✓ 数据库'), ('b2', 1, '');
             DELETE FROM messages WHERE message_id = (SELECT max(message_id) FROM messages) AND message_id NOT IN (SELECT message_id FROM summary_messages) AND message_id NOT IN (SELECT message_id FROM context_items WHERE message_id IS NOT NULL);",
        )
        .unwrap();
    }
    let there = run(options(&from, &url)).unwrap();
    let back_path = dir.path().join("back.db").to_string_lossy().into_owned();
    let back = run(options(&url, &back_path)).unwrap();
    assert_eq!(there.tables, back.tables);
    assert_eq!(there.sequences, back.sequences);
    assert!(there.tables.iter().any(|t| t.table == "focus_briefs" && t.rows == 2));
    assert_eq!(sqlite_master(&from), sqlite_master(&back_path));
    // Creation order (the hidden rowid, which lcm-native reads) comes back too.
    let order = |path: &str| -> Vec<(i64, String)> {
        let c = rusqlite::Connection::open(path).unwrap();
        let mut stmt = c
            .prepare("SELECT rowid, summary_id FROM summaries ORDER BY rowid")
            .unwrap();
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).unwrap();
        rows.map(|r| r.unwrap()).collect()
    };
    assert_eq!(order(&from), order(&back_path));
    assert_eq!(
        count(&from, "SELECT seq FROM sqlite_sequence WHERE name = 'messages'"),
        count(&back_path, "SELECT seq FROM sqlite_sequence WHERE name = 'messages'")
    );
    let engine = engine_with(&tempfile::tempdir().unwrap(), json!({ "dbPath": back_path }));
    assert!(engine.verify(None).unwrap().ok);

    // PostgreSQL's next id continues after the source's counter, not after its highest row.
    let c = location.connect().unwrap();
    let next: i64 = c
        .query_one_value(
            "SELECT nextval(pg_get_serial_sequence($1, 'message_id'))",
            &[&format!("{}.messages", location.schema)],
        )
        .unwrap();
    assert_eq!(
        next,
        count(&from, "SELECT seq FROM sqlite_sequence WHERE name = 'messages'") + 1
    );
    // The schema is taken now.
    let e = run(options(&from, &url)).unwrap_err();
    assert_eq!(e.code(), "E_INVALID_INPUT", "{e}");
    c.batch(&format!(
        "DROP SCHEMA {} CASCADE",
        crate::pg::quote_ident(&location.schema)
    ))
    .unwrap();
}

/// Interrupted on its way into PostgreSQL: nothing half-written, and the next run finishes.
#[test]
fn an_interrupted_copy_into_postgres_resumes() {
    let Some(location) = pg_test_location("copy_resume") else {
        return;
    };
    let url = std::env::var("LCM_TEST_DATABASE_URL").unwrap();
    let (dir, from) = compacted_source();
    let mut first = options(&from, &url);
    first.to_schema = Some(location.schema.clone());
    first.batch_rows = Some(30);
    first.stop_after_batches = Some(3);
    assert_eq!(run(first).unwrap_err().code(), "E_ABORTED");
    let c = location.connect().unwrap();
    let n: i64 = c.query_one_value("SELECT count(*) FROM messages", &[]).unwrap();
    assert!(n > 0 && n < 120, "{n}");
    // Reading an unfinished copy is refused.
    let mut back = options(&url, &dir.path().join("back.db").to_string_lossy());
    back.from_schema = Some(location.schema.clone());
    let e = run(back).unwrap_err();
    assert!(e.to_string().contains("unfinished copy"), "{e}");
    let mut second = options(&from, &url);
    second.to_schema = Some(location.schema.clone());
    second.batch_rows = Some(30);
    let report = run(second).unwrap();
    assert!(report.resumed);
    assert_eq!(
        c.query_one_value::<i64>("SELECT count(*) FROM messages", &[]).unwrap(),
        120
    );
    c.batch(&format!(
        "DROP SCHEMA {} CASCADE",
        crate::pg::quote_ident(&location.schema)
    ))
    .unwrap();
}

/// What PostgreSQL cannot hold as it is (a NUL in text, a text value in an INTEGER column)
/// is refused by name before anything is written.
#[test]
fn values_postgres_cannot_hold_are_refused_before_writing() {
    let Some(location) = pg_test_location("copy_refuse") else {
        return;
    };
    let url = std::env::var("LCM_TEST_DATABASE_URL").unwrap();
    for (edit, want) in [
        (
            "UPDATE messages SET content = 'a' || char(0) || 'b' WHERE message_id = 4",
            "messages.content (row message_id=4) holds text with a NUL",
        ),
        (
            "UPDATE messages SET token_count = 'many' WHERE message_id = 6",
            "messages.token_count (row message_id=6) holds a text value",
        ),
    ] {
        let (_dir, from) = compacted_source();
        rusqlite::Connection::open(&from).unwrap().execute(edit, []).unwrap();
        let mut o = options(&from, &url);
        o.to_schema = Some(location.schema.clone());
        let e = run(o).unwrap_err();
        assert_eq!(e.code(), "E_INVALID_INPUT", "{e}");
        assert!(e.to_string().contains(want), "{e}");
        let c = location.connect().unwrap();
        let exists: bool = c
            .query_one_value(
                "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)",
                &[&location.schema],
            )
            .unwrap();
        assert!(!exists, "nothing was created");
    }
}

/// A second copy into a schema another copy is writing (from this machine or another) is
/// refused at once, before it writes anything.
#[test]
fn a_second_copy_into_the_same_schema_is_busy() {
    let Some(location) = pg_test_location("copy_busy") else {
        return;
    };
    let url = std::env::var("LCM_TEST_DATABASE_URL").unwrap();
    let (_dir, from) = compacted_source();
    let other = location.connect().unwrap();
    crate::pg::locks::take(&other, "copy", 0, std::time::Duration::ZERO, "test").unwrap();
    let mut o = options(&from, &url);
    o.to_schema = Some(location.schema.clone());
    let e = run(o).unwrap_err();
    assert_eq!(e.code(), "E_BUSY", "{e}");
    assert!(e.to_string().contains("another copy is writing it"), "{e}");
    let exists: bool = other
        .query_one_value(
            "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)",
            &[&location.schema],
        )
        .unwrap();
    assert!(!exists, "nothing was created");
}
