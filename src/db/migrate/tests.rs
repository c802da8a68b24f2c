//! Migration tests against the lossless-claw oracle databases in `fixtures/`.

use std::path::{Path, PathBuf};

use rusqlite::Connection;
use serde_json::Value;

use super::*;
use crate::db::open_connection;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures").join(name)
}

/// Copies a fixture database into a temp dir (fixtures stay read-only and pristine).
fn copy_fixture(name: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let dst = dir.path().join(name);
    std::fs::copy(fixture(name), &dst).unwrap();
    let mut perms = std::fs::metadata(&dst).unwrap().permissions();
    #[allow(clippy::permissions_set_readonly_false)]
    perms.set_readonly(false);
    std::fs::set_permissions(&dst, perms).unwrap();
    (dir, dst.to_string_lossy().into_owned())
}

fn run(path: &str) -> Result<MigrationReport> {
    let mut conn = open_connection(path, 5000)?;
    migrate(&mut conn, path)
}

/// summary_id -> [depth, earliest_at, latest_at, descendant_count, descendant_token_count,
/// source_message_token_count], as JSON values for direct comparison with the oracle files.
fn summary_values(path: &str) -> Vec<(String, Vec<Value>)> {
    let conn = Connection::open(path).unwrap();
    let mut stmt = conn
        .prepare(
            "SELECT summary_id, depth, earliest_at, latest_at, descendant_count,
                    descendant_token_count, source_message_token_count
             FROM summaries ORDER BY rowid",
        )
        .unwrap();
    let rows = stmt
        .query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                vec![
                    Value::from(r.get::<_, i64>(1)?),
                    r.get::<_, Option<String>>(2)?.map(Value::from).unwrap_or(Value::Null),
                    r.get::<_, Option<String>>(3)?.map(Value::from).unwrap_or(Value::Null),
                    Value::from(r.get::<_, i64>(4)?),
                    Value::from(r.get::<_, i64>(5)?),
                    Value::from(r.get::<_, i64>(6)?),
                ],
            ))
        })
        .unwrap();
    rows.map(|r| r.unwrap()).collect()
}

fn expected_values(file: &str) -> Vec<(String, Vec<Value>)> {
    let doc: Value = serde_json::from_slice(&std::fs::read(fixture(file)).unwrap()).unwrap();
    doc["summaries"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(id, v)| {
            (
                id.clone(),
                [
                    "depth",
                    "earliest_at",
                    "latest_at",
                    "descendant_count",
                    "descendant_token_count",
                    "source_message_token_count",
                ]
                .iter()
                .map(|k| v[*k].clone())
                .collect(),
            )
        })
        .collect()
}

fn count(path: &str, sql: &str) -> i64 {
    Connection::open(path)
        .unwrap()
        .query_row(sql, [], |r| r.get(0))
        .unwrap()
}

fn assert_healthy(path: &str) {
    let conn = Connection::open(path).unwrap();
    let ok: String = conn.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
    assert_eq!(ok, "ok");
    let fk: i64 = conn
        .query_row("SELECT count(*) FROM pragma_foreign_key_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(fk, 0, "foreign key violations");
    let ids: Vec<i64> = conn
        .prepare("SELECT conversation_id FROM conversations")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    for id in ids {
        assert_eq!(crate::store::totals::drift(&conn, id).unwrap(), None);
    }
}

fn assert_values_match(actual: &[(String, Vec<Value>)], expected: &[(String, Vec<Value>)], columns: usize) {
    assert_eq!(actual.len(), expected.len(), "summary count");
    for ((id_a, a), (id_e, e)) in actual.iter().zip(expected) {
        assert_eq!(id_a, id_e, "summary order");
        assert_eq!(&a[..columns], &e[..columns], "values of {id_a}");
    }
}

#[test]
fn new_file_gets_the_full_schema_and_second_run_is_a_no_op() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("new.db").to_string_lossy().into_owned();
    let r = run(&path).unwrap();
    assert_eq!(r.era, "new");
    assert!(!r.up_to_date);
    assert_eq!(r.tables_created.len(), TABLES.len());
    assert!(r.fts_rebuilt.iter().any(|f| f.starts_with("messages_fts")));
    assert!(r.steps_recorded.contains(&"backfillSummaryDepths@1".to_string()));
    assert!(r.steps_recorded.contains(&"backfillSummaryMetadata@1".to_string()));
    let again = run(&path).unwrap();
    assert!(again.up_to_date, "{again:?}");
    assert_eq!(again.era, "lcm-native");
    assert!(again.tables_created.is_empty() && again.backfills.is_empty());
    assert!(again.summary.contains("nothing was done"));
    assert_healthy(&path);
}

#[test]
fn legacy_pre_depth_database_matches_the_plugin_value_by_value() {
    let (_dir, path) = copy_fixture("legacy-pre-depth.db");
    let messages_before = count(&path, "SELECT count(*) FROM messages");
    let r = run(&path).unwrap();
    assert_eq!(r.era, "legacy");
    for col in [
        "summaries.depth",
        "summaries.earliest_at",
        "summaries.latest_at",
        "summaries.descendant_count",
        "conversations.bootstrapped_at",
    ] {
        assert!(r.columns_added.contains(&col.to_string()), "{col} not added: {r:?}");
    }
    assert!(r.tables_created.contains(&"lcm_migration_state".to_string()));
    let depth_rows = r
        .backfills
        .iter()
        .find(|b| b.step == "backfillSummaryDepths")
        .unwrap()
        .rows;
    assert!(depth_rows > 0, "depth backfill changed nothing");

    let actual = summary_values(&path);
    assert_values_match(&actual, &expected_values("legacy-pre-depth.expected-head.json"), 6);
    // The seed plugin's own migration agrees on the four columns it knows.
    assert_values_match(&actual, &expected_values("legacy-pre-depth.expected-seed.json"), 4);

    assert_eq!(count(&path, "SELECT count(*) FROM messages"), messages_before);
    assert_eq!(count(&path, "SELECT count(*) FROM summaries_fts_cjk"), 175);
    assert_eq!(count(&path, "SELECT count(*) FROM summaries_fts"), 175);
    assert_eq!(
        count(&path, "SELECT count(*) FROM lcm_migration_state WHERE step_name IN ('backfillSummaryDepths','backfillSummaryMetadata') AND algorithm_version = 1"),
        2
    );
    assert_healthy(&path);
    assert!(run(&path).unwrap().up_to_date);
}

#[test]
fn seed_database_keeps_the_values_the_seed_plugin_wrote() {
    let (_dir, path) = copy_fixture("seed-theme.db");
    let conn = Connection::open(&path).unwrap();
    let before: Vec<(String, String, String, i64, i64)> = conn
        .prepare("SELECT summary_id, earliest_at, latest_at, depth, descendant_count FROM summaries ORDER BY rowid")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)))
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    drop(conn);
    let r = run(&path).unwrap();
    assert_eq!(r.era, "seed");
    assert!(r
        .columns_added
        .contains(&"summaries.source_message_token_count".to_string()));
    let after = summary_values(&path);
    for ((id, e, l, d, dc), (id2, v)) in before.iter().zip(&after) {
        assert_eq!(id, id2);
        assert_eq!(v[0], Value::from(*d), "{id} depth");
        assert_eq!(v[1], Value::from(e.as_str()), "{id} earliest");
        assert_eq!(v[2], Value::from(l.as_str()), "{id} latest");
        assert_eq!(v[3], Value::from(*dc), "{id} descendants");
    }
    // Same transcript and graph as the legacy fixture: the token sums match the plugin's too.
    assert_values_match(&after, &expected_values("legacy-pre-depth.expected-head.json"), 6);
    assert_healthy(&path);
}

#[test]
fn lossless_claw_database_keeps_its_extra_tables_and_skips_recorded_backfills() {
    let (_dir, path) = copy_fixture("head-theme.db");
    let schema = |p: &str| -> Vec<(String, String)> {
        Connection::open(p)
            .unwrap()
            .prepare("SELECT name, COALESCE(sql,'') FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY name")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .map(|r| r.unwrap())
            .collect()
    };
    let schema_before = schema(&path);
    let values_before = summary_values(&path);
    let counts = |p: &str| -> Vec<i64> {
        [
            "messages",
            "message_parts",
            "summaries",
            "context_items",
            "summary_parents",
            "summary_messages",
            "conversation_bootstrap_state",
            "focus_briefs",
            "lcm_migration_state",
        ]
        .iter()
        .map(|t| count(p, &format!("SELECT count(*) FROM {t}")))
        .collect()
    };
    let counts_before = counts(&path);

    let r = run(&path).unwrap();
    assert_eq!(r.era, "lossless-claw");
    assert!(r.columns_added.is_empty(), "{r:?}");
    // Only lcm-native's own tables and lossless-claw 1.x's turn records are new: this file's
    // plugin had everything else (the identity columns among it).
    assert_eq!(
        r.tables_created,
        [
            "turn_advancements",
            "lcm_native_turns",
            "lcm_native_turn_positions",
            "message_transcript_anchor_trust",
            "lcm_native_prompt_cache",
            "lcm_native_recalls",
            "lcm_native_message_kinds",
            "lcm_native_context_resets",
            "lcm_native_summary_fidelity",
            "lcm_native_summary_versions",
            "lcm_native_summary_context",
            "lcm_native_redactions",
            "lcm_native_redaction_pending",
            "lcm_native_scrub_pending"
        ],
        "{r:?}"
    );
    assert!(
        !r.backfills.iter().any(|b| b.step == "backfillSummaryDepths"),
        "recorded backfill re-ran"
    );
    // The plugin's schema stays untouched; the only additions are lcm-native's live totals and
    // message counts,
    // its table of committed host turns, the partial index on live summary items, and
    // lossless-claw 1.x's tables of turn records and transcript trust (with their indexes, in
    // 1.x's own DDL).
    let (ours, theirs): (Vec<_>, Vec<_>) = schema(&path).into_iter().partition(|(name, _)| {
        name == totals::TABLE
            || name == totals::COUNTS_TABLE
            || totals::TRIGGER_NAMES.contains(&name.as_str())
            || name == "context_items_summary_idx"
            || name.starts_with("lcm_native_")
            || name.starts_with("turn_advancements")
            || name == "message_transcript_anchor_trust"
            || name == "message_anchor_trust_conv_entry_idx"
    });
    assert!(theirs == schema_before, "the plugin's schema must stay untouched");
    assert_eq!(ours.len(), 28 + totals::TRIGGER_NAMES.len(), "{ours:?}");
    assert_eq!(
        r.indexes_created,
        [
            "turn_advancements_session_idx",
            "context_items_summary_idx",
            "lcm_native_turn_positions_position_idx",
            "lcm_native_message_kinds_person_idx",
            "lcm_native_message_kinds_date_idx",
            "lcm_native_message_kinds_address_idx",
            "lcm_native_message_kinds_ticket_idx",
            "lcm_native_message_kinds_commit_idx",
            "lcm_native_message_kinds_quantity_idx",
            "lcm_native_message_kinds_preference_idx",
            "lcm_native_message_kinds_decision_idx",
            "message_anchor_trust_conv_entry_idx"
        ]
    );
    assert!(r.live_totals_rebuilt);
    assert_eq!(summary_values(&path), values_before);
    let mut expected_counts = counts_before.clone();
    *expected_counts.last_mut().unwrap() += 2; // lcmNativeFtsBackfill + lcmNativeSchema
    assert_eq!(counts(&path), expected_counts);
    assert_healthy(&path);
    assert!(run(&path).unwrap().up_to_date);
}

#[test]
fn backfills_reproduce_the_plugins_insert_time_values() {
    // With its state rows removed and the columns blanked, the backfills must rebuild exactly
    // what the plugin wrote when it created each summary.
    let (_dir, path) = copy_fixture("head-theme.db");
    let original = summary_values(&path);
    let conn = Connection::open(&path).unwrap();
    conn.execute_batch(
        "DELETE FROM lcm_migration_state WHERE step_name IN ('backfillSummaryDepths', 'backfillSummaryMetadata');
         UPDATE summaries SET depth = 0, earliest_at = NULL, latest_at = NULL, descendant_count = 0,
                              descendant_token_count = 0, source_message_token_count = 0;",
    )
    .unwrap();
    drop(conn);
    let r = run(&path).unwrap();
    assert!(r
        .backfills
        .iter()
        .any(|b| b.step == "backfillSummaryDepths" && b.rows > 0));
    assert_values_match(&summary_values(&path), &original, 6);
}

#[test]
fn depth_backfill_handles_orphans_cycles_and_foreign_inputs() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g.db").to_string_lossy().into_owned();
    run(&path).unwrap();
    let conn = Connection::open(&path).unwrap();
    conn.execute_batch(
        "INSERT INTO conversations (conversation_id, session_id) VALUES (1, 'a'), (2, 'b');
         INSERT INTO messages (message_id, conversation_id, seq, role, content, token_count, created_at) VALUES
           (1, 1, 1, 'user', 'one', 10, '2026-01-01 00:00:00'),
           (2, 1, 2, 'assistant', 'two', 5, '2026-01-01 00:01:00'),
           (3, 1, 3, 'user', 'three', 7, '2026-01-01 00:02:00');
         INSERT INTO summaries (summary_id, conversation_id, kind, content, token_count, created_at) VALUES
           ('leaf_a', 1, 'leaf', 'A', 10, '2026-01-02 00:00:00'),
           ('leaf_b', 1, 'leaf', 'B', 10, '2026-01-02 00:00:01'),
           ('cond_1', 1, 'condensed', 'C1', 20, '2026-01-02 00:00:02'),
           ('cond_2', 1, 'condensed', 'C2', 30, '2026-01-02 00:00:03'),
           ('orphan', 1, 'condensed', 'O', 5, '2026-01-02 00:00:04'),
           ('cyc_x', 1, 'condensed', 'X', 5, '2026-01-02 00:00:05'),
           ('cyc_y', 1, 'condensed', 'Y', 5, '2026-01-02 00:00:06'),
           ('other_leaf', 2, 'leaf', 'L', 5, '2026-01-02 00:00:07'),
           ('foreign', 1, 'condensed', 'F', 5, '2026-01-02 00:00:08');
         INSERT INTO summary_messages (summary_id, message_id, ordinal) VALUES
           ('leaf_a', 1, 0), ('leaf_a', 2, 1), ('leaf_b', 3, 0);
         INSERT INTO summary_parents (summary_id, parent_summary_id, ordinal) VALUES
           ('cond_1', 'leaf_a', 0), ('cond_1', 'leaf_b', 1),
           ('cond_2', 'cond_1', 0),
           ('cyc_x', 'cyc_y', 0), ('cyc_y', 'cyc_x', 0),
           ('foreign', 'other_leaf', 0);
         DELETE FROM lcm_migration_state WHERE step_name IN ('backfillSummaryDepths', 'backfillSummaryMetadata');",
    )
    .unwrap();
    drop(conn);
    run(&path).unwrap();
    let conn = Connection::open(&path).unwrap();
    let get = |id: &str| -> (i64, Option<String>, Option<String>, i64, i64, i64) {
        conn.query_row(
            "SELECT depth, earliest_at, latest_at, descendant_count, descendant_token_count, source_message_token_count
             FROM summaries WHERE summary_id = ?1",
            [id],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?)),
        )
        .unwrap()
    };
    let leaf_a = get("leaf_a");
    assert_eq!(
        leaf_a,
        (
            0,
            Some("2026-01-01T00:00:00.000Z".into()),
            Some("2026-01-01T00:01:00.000Z".into()),
            0,
            0,
            15
        )
    );
    assert_eq!(get("leaf_b").5, 7);
    let c1 = get("cond_1");
    assert_eq!(
        c1,
        (
            1,
            Some("2026-01-01T00:00:00.000Z".into()),
            Some("2026-01-01T00:02:00.000Z".into()),
            2,
            20,
            22
        )
    );
    let c2 = get("cond_2");
    assert_eq!(
        c2,
        (
            2,
            Some("2026-01-01T00:00:00.000Z".into()),
            Some("2026-01-01T00:02:00.000Z".into()),
            3,
            40,
            22
        )
    );
    // No inputs: depth 1, its own created_at as the range.
    assert_eq!(
        get("orphan"),
        (
            1,
            Some("2026-01-02T00:00:04.000Z".into()),
            Some("2026-01-02T00:00:04.000Z".into()),
            0,
            0,
            0
        )
    );
    assert_eq!(get("cyc_x").0, 1);
    assert_eq!(get("cyc_y").0, 1);
    // An input in another conversation never resolves: depth 1, input ignored.
    assert_eq!(get("foreign").0, 1);
    assert_eq!(get("foreign").3, 0);
}

#[test]
fn a_newer_lcm_native_database_is_refused_and_left_byte_identical() {
    let (_dir, path) = copy_fixture("legacy-pre-depth.db");
    let conn = Connection::open(&path).unwrap();
    conn.execute_batch(&format!(
        "{}; INSERT INTO lcm_migration_state (step_name, algorithm_version) VALUES ('lcmNativeSchema', 99);",
        TABLES.iter().find(|(t, _)| *t == "lcm_migration_state").unwrap().1
    ))
    .unwrap();
    drop(conn);
    let bytes = std::fs::read(&path).unwrap();
    let err = run(&path).unwrap_err();
    assert_eq!(err.code(), "E_SCHEMA");
    assert!(err.to_string().contains("newer lcm-native"), "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), bytes, "file changed");
    assert!(!Path::new(&format!("{path}-wal")).exists(), "a WAL file was created");
}

#[test]
fn broken_or_missing_fts_tables_are_rebuilt_and_reseeded() {
    let (_dir, path) = copy_fixture("seed-theme.db");
    run(&path).unwrap();
    let conn = Connection::open(&path).unwrap();
    conn.execute_batch("DROP TABLE messages_fts_docsize; DROP TABLE summaries_fts_cjk;")
        .unwrap();
    drop(conn);
    let r = run(&path).unwrap();
    assert!(!r.up_to_date);
    assert!(
        r.fts_rebuilt.iter().any(|f| f.starts_with("messages_fts (rebuilt")),
        "{r:?}"
    );
    assert!(
        r.fts_rebuilt
            .iter()
            .any(|f| f.starts_with("summaries_fts_cjk (created")),
        "{r:?}"
    );
    assert_eq!(
        count(&path, "SELECT count(*) FROM messages_fts"),
        count(&path, "SELECT count(*) FROM messages WHERE content <> ''")
    );
    assert!(
        count(
            &path,
            "SELECT count(*) FROM messages_fts WHERE messages_fts MATCH 'theme'"
        ) > 0
    );
    assert_eq!(count(&path, "SELECT count(*) FROM summaries_fts_cjk"), 175);
    assert_healthy(&path);
}

#[test]
fn stale_external_content_fts_is_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db").to_string_lossy().into_owned();
    run(&path).unwrap();
    let conn = Connection::open(&path).unwrap();
    conn.execute_batch(
        "INSERT INTO conversations (conversation_id, session_id) VALUES (1, 's');
         INSERT INTO messages (conversation_id, seq, role, content, token_count) VALUES (1, 1, 'user', 'hello world', 3);
         DROP TABLE messages_fts;
         CREATE VIRTUAL TABLE messages_fts USING fts5(content, content='messages', content_rowid='message_id');",
    )
    .unwrap();
    drop(conn);
    let r = run(&path).unwrap();
    assert!(r.fts_rebuilt.iter().any(|f| f.contains("content_rowid")), "{r:?}");
    assert_eq!(
        count(
            &path,
            "SELECT count(*) FROM messages_fts WHERE messages_fts MATCH 'hello'"
        ),
        1
    );
}

#[test]
fn the_fts_fill_step_indexes_what_the_seed_plugin_skipped() {
    let (_dir, path) = copy_fixture("legacy-pre-depth.db");
    let conn = Connection::open(&path).unwrap();
    conn.execute_batch(
        "DELETE FROM messages_fts WHERE rowid IN (SELECT message_id FROM messages WHERE content <> '' LIMIT 50);",
    )
    .unwrap();
    drop(conn);
    let r = run(&path).unwrap();
    let fill = r.backfills.iter().find(|b| b.step == "lcmNativeFtsBackfill").unwrap();
    assert_eq!(fill.rows, 50);
    assert_eq!(count(&path, "SELECT count(*) FROM messages_fts"), 1089);
}

/// The in-memory schema a PostgreSQL schema is made from is a new file's, entry for entry, and
/// the same migration state.
#[test]
fn the_in_memory_schema_is_a_new_files() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("new.db").to_string_lossy().into_owned();
    run(&path).unwrap();
    let file = open_connection(&path, 5000).unwrap();
    let memory = current_in_memory().unwrap();
    let catalog = |c: &Connection| -> Vec<(String, String, Option<String>)> {
        let mut stmt = c
            .prepare("SELECT type, name, sql FROM sqlite_master ORDER BY type, name")
            .unwrap();
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).unwrap();
        rows.map(|r| r.unwrap()).collect()
    };
    let steps = |c: &Connection| -> Vec<(String, i64)> {
        let mut stmt = c
            .prepare("SELECT step_name, algorithm_version FROM lcm_migration_state ORDER BY step_name")
            .unwrap();
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).unwrap();
        rows.map(|r| r.unwrap()).collect()
    };
    let file_catalog = catalog(&file);
    assert!(file_catalog.len() > 20, "{file_catalog:?}");
    assert_eq!(catalog(&memory), file_catalog);
    assert_eq!(steps(&memory), steps(&file));
}
