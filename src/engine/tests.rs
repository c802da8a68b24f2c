//! Engine-level tests on the real transcripts in `data/transcripts/`.

use crate::db::damage::IntegrityState;
use std::path::Path;

use rusqlite::{params, Connection};
use serde_json::json;

use super::*;
use crate::api::{AssembleOptions, SummaryFilter};
use crate::test_support::{temp_engine, transcript, REFACTOR, THEME};

fn count(engine: &Engine, sql: &str) -> i64 {
    Connection::open(&engine.config().db_path)
        .unwrap()
        .query_row(sql, [], |r| r.get(0))
        .unwrap()
}

#[test]
fn both_transcripts_ingest_completely_and_round_trip() {
    let (_dir, engine) = temp_engine();
    for (session, name) in [("theme", THEME), ("refactor", REFACTOR)] {
        let msgs = transcript(name);
        // Ingest turn by turn, as a host does (a new call at every user message).
        let mut conversation_id = None;
        let mut start = 0;
        for i in 1..=msgs.len() {
            if i == msgs.len() || msgs[i]["role"] == "user" {
                let out = engine
                    .ingest(&Target::Session(session.into()), &msgs[start..i])
                    .unwrap();
                assert_eq!(out.inserted as usize, i - start);
                conversation_id.get_or_insert(out.conversation_id);
                assert_eq!(conversation_id, Some(out.conversation_id));
                start = i;
            }
        }
        let cid = conversation_id.unwrap();
        let stored = engine.messages(cid, 0, i64::MAX).unwrap();
        assert_eq!(stored.len(), msgs.len(), "{name}");
        for (i, (orig, back)) in msgs.iter().zip(&stored).enumerate() {
            assert_eq!(back.seq, i as i64 + 1);
            assert_eq!(
                back.content, orig["content"],
                "{name} message {i}: content blocks differ"
            );
            assert_eq!(back.role, orig["role"].as_str().unwrap(), "{name} message {i}");
            assert_eq!(back.entry_id.as_deref(), orig["entryId"].as_str());
            if back.role == "toolResult" {
                assert_eq!(
                    back.tool_call_id.as_deref(),
                    orig["toolCallId"].as_str(),
                    "{name} message {i}"
                );
            }
            let ts = crate::time::parse_timestamp(orig["timestamp"].as_str().unwrap()).unwrap();
            assert_eq!(back.created_at, crate::time::to_iso_ms(&ts.with_nanosecond(0).unwrap()));
        }
    }
    assert_eq!(count(&engine, "SELECT count(*) FROM messages"), 1906);
    assert_eq!(count(&engine, "SELECT count(*) FROM context_items"), 1906);
    assert_eq!(
        count(&engine, "SELECT count(*) FROM messages_fts"),
        count(&engine, "SELECT count(*) FROM messages WHERE content <> ''")
    );
    // The full-text index finds messages by their words (rows are indexed, not only stored).
    let conn = Connection::open(&engine.config().db_path).unwrap();
    let sample: Vec<(i64, String)> = conn
        .prepare("SELECT message_id, content FROM messages WHERE message_id % 97 = 0 AND content <> ''")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    let mut checked = 0;
    for (id, content) in &sample {
        let Some(word) = content
            .split(|c: char| !c.is_ascii_alphanumeric())
            .find(|w| w.len() >= 6)
        else {
            continue;
        };
        let hit: bool = conn
            .query_row(
                "SELECT EXISTS (SELECT 1 FROM messages_fts WHERE messages_fts MATCH ?1 AND rowid = ?2)",
                params![format!("\"{word}\""), id],
                |r| r.get(0),
            )
            .unwrap();
        assert!(hit, "message {id} not found by {word:?}");
        checked += 1;
    }
    assert!(checked >= 10, "only {checked} messages checked");
    // Dense ordinals 0..n-1 in each conversation, in message order.
    assert_eq!(
        count(
            &engine,
            "SELECT count(*) FROM context_items ci JOIN messages m ON m.message_id = ci.message_id
             WHERE ci.ordinal <> m.seq - 1"
        ),
        0
    );
}

use crate::summarizer::SummaryKind;
use chrono::Timelike;

#[test]
fn reingesting_a_transcript_with_entry_ids_is_a_no_op() {
    let (_dir, engine) = temp_engine();
    let msgs = transcript(THEME);
    let first = engine.ingest(&Target::Session("s".into()), &msgs).unwrap();
    assert_eq!((first.inserted, first.skipped), (914, 0));
    let again = engine.ingest(&Target::Session("s".into()), &msgs).unwrap();
    assert_eq!((again.inserted, again.skipped), (0, 914));
    assert_eq!(again.conversation_id, first.conversation_id);
    // A partial overlap stores only the new tail.
    let mut more = msgs[900..].to_vec();
    more.push(json!({"role": "user", "content": "one more", "entryId": "line-9999"}));
    let third = engine
        .ingest(&Target::Conversation(first.conversation_id), &more)
        .unwrap();
    assert_eq!((third.inserted, third.skipped), (1, 14));
    // Duplicates inside one call are skipped too.
    let dup = json!({"role": "user", "content": "x", "entryId": "dup"});
    let out = engine
        .ingest(&Target::Conversation(first.conversation_id), &[dup.clone(), dup])
        .unwrap();
    assert_eq!((out.inserted, out.skipped), (1, 1));
    assert_eq!(count(&engine, "SELECT count(*) FROM messages"), 916);
}

#[test]
fn a_malformed_message_rejects_the_whole_call_with_its_index() {
    let (_dir, engine) = temp_engine();
    let mut msgs = transcript(THEME)[..20].to_vec();
    msgs[13] = json!({"role": "assistant", "content": [{"type": "text", "text": 42}]});
    let err = engine.ingest(&Target::Session("s".into()), &msgs).unwrap_err();
    assert_eq!(err.code(), "E_INVALID_INPUT");
    assert!(err.to_string().starts_with("message 13:"), "{err}");
    assert_eq!(count(&engine, "SELECT count(*) FROM messages"), 0);
    assert_eq!(
        count(&engine, "SELECT count(*) FROM conversations"),
        0,
        "no empty conversation left behind"
    );
}

#[test]
fn unknown_conversation_is_not_found() {
    let (_dir, engine) = temp_engine();
    let err = engine
        .ingest(&Target::Conversation(999), &[json!({"role": "user", "content": "x"})])
        .unwrap_err();
    assert_eq!(err.code(), "E_NOT_FOUND");
    assert_eq!(engine.messages(999, 0, 10).unwrap_err().code(), "E_NOT_FOUND");
}

#[test]
fn sessions_map_to_their_newest_active_conversation() {
    let (_dir, engine) = temp_engine();
    let a = engine
        .ingest(&Target::Session("a".into()), &[json!({"role": "user", "content": "1"})])
        .unwrap();
    let b = engine
        .ingest(&Target::Session("b".into()), &[json!({"role": "user", "content": "2"})])
        .unwrap();
    assert_ne!(a.conversation_id, b.conversation_id);
    let a2 = engine
        .ingest(&Target::Session("a".into()), &[json!({"role": "user", "content": "3"})])
        .unwrap();
    assert_eq!(a2.conversation_id, a.conversation_id);
    let seqs: Vec<i64> = engine
        .messages(a.conversation_id, 0, 10)
        .unwrap()
        .iter()
        .map(|m| m.seq)
        .collect();
    assert_eq!(seqs, [1, 2]);
}

#[test]
fn ingest_into_a_lossless_claw_database_respects_archived_conversations() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("head.db");
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/head-theme.db"),
        &path,
    )
    .unwrap();
    let engine = Engine::open(Config::with_db_path(path.to_str().unwrap())).unwrap();
    let out = engine
        .ingest(
            &Target::Session("pi-coding-agent-theme-session".into()),
            &[json!({"role": "user", "content": "next"})],
        )
        .unwrap();
    assert_eq!(out.conversation_id, 1);
    let last = engine.messages(1, 914, 10).unwrap();
    assert_eq!(last.len(), 1);
    assert_eq!(last[0].seq, 915);
    assert_eq!(
        count(
            &engine,
            "SELECT max(ordinal) FROM context_items WHERE conversation_id = 1"
        ),
        36
    );
    // Archive it the way lossless-claw does: the session then gets a fresh conversation.
    Connection::open(&path)
        .unwrap()
        .execute_batch("UPDATE conversations SET active = 0")
        .unwrap();
    let out = engine
        .ingest(
            &Target::Session("pi-coding-agent-theme-session".into()),
            &[json!({"role": "user", "content": "new"})],
        )
        .unwrap();
    assert_ne!(out.conversation_id, 1);
}

#[test]
fn closed_engine_refuses_calls() {
    let (_dir, engine) = temp_engine();
    assert!(engine.close());
    assert!(!engine.close());
    let err = engine
        .ingest(&Target::Session("s".into()), &[json!({"role": "user", "content": "x"})])
        .unwrap_err();
    assert_eq!(err.code(), "E_CLOSED");
    assert_eq!(engine.messages(1, 0, 1).unwrap_err().code(), "E_CLOSED");
}

#[test]
fn entry_id_lookup_uses_the_partial_unique_index() {
    let (_dir, engine) = temp_engine();
    let conn = crate::db::open_configured(&engine.config().db_path, 1000).unwrap();
    let mut stmt = conn
        .prepare(
            "EXPLAIN QUERY PLAN SELECT 1 FROM messages
             WHERE conversation_id = ?1 AND transcript_entry_id = ?2 AND transcript_entry_id IS NOT NULL",
        )
        .unwrap();
    let details: Vec<String> = stmt
        .query_map(rusqlite::params![1, "x"], |r| r.get::<_, String>(3))
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    assert!(
        details.iter().any(|d| d.contains("messages_conv_entry_unique_idx")),
        "plan: {details:?}"
    );
}

/// The bytes of the database file and of its log, if any.
fn file_bytes(path: &str) -> (Vec<u8>, Option<Vec<u8>>) {
    (std::fs::read(path).unwrap(), std::fs::read(format!("{path}-wal")).ok())
}

/// A file last written by an earlier lcm-native (without the tables added since, which their
/// readers treat as empty) opens read-only: a read-only open must not need a migration for
/// them, and the readers work.
#[test]
fn read_only_opens_a_file_from_before_the_newest_tables() {
    let (_dir, engine) = temp_engine();
    let cid = engine
        .ingest(
            &Target::Session("s".into()),
            &[json!({"role": "user", "content": "kept"})],
        )
        .unwrap()
        .conversation_id;
    let path = engine.config().db_path.clone();
    assert!(engine.close());
    Connection::open(&path)
        .unwrap()
        .execute_batch("DROP TABLE lcm_native_context_resets; DROP TABLE lcm_native_scrub_pending;")
        .unwrap();
    let ro = read_only(&path).unwrap();
    assert_eq!(ro.migration().scrubs_pending, 0);
    assert_eq!(ro.messages(cid, 0, 10).unwrap().len(), 1);
    assert!(ro.verify(Some(cid)).unwrap().ok);
}

fn read_only(path: &str) -> Result<Engine> {
    Engine::open(Config::from_options(&json!({"dbPath": path, "readOnly": true}), None).unwrap())
}

#[tokio::test(flavor = "multi_thread")]
async fn read_only_engines_read_everything_and_write_nothing() {
    use crate::api::{PassOptions, SweepOptions};
    use crate::test_support::{compact_offline, with_synthetic, Scripted};
    let (dir, engine, cid) = with_synthetic(json!({}), 120, 400);
    compact_offline(&engine, cid, 4000).await;
    let digest = engine.verify(None).unwrap().digest;
    let path = engine.config().db_path.clone();
    assert!(engine.close());
    let before = file_bytes(&path);

    let ro = read_only(&path).unwrap();
    assert!(ro.migration().up_to_date);
    assert_eq!(ro.config().to_json()["readOnly"], json!(true));
    // Every read works.
    assert_eq!(ro.messages(cid, 0, 1000).unwrap().len(), 120);
    assert_eq!(ro.conversations().unwrap().len(), 1);
    assert!(!ro.summaries(cid, &SummaryFilter::default()).unwrap().is_empty());
    let assembled = ro
        .assemble(
            cid,
            &crate::api::AssembleOptions {
                token_budget: 100_000,
                fresh_tail_count: None,
                presentation: None,
                recall_query: None,
                auto_recall: None,
            },
        )
        .unwrap();
    assert!(!assembled.messages.is_empty());
    let grep = crate::input::decode::<crate::api::GrepOptions>(json!({"query": "lorem"}), "options").unwrap();
    assert!(!ro.grep(Some(cid), &grep).unwrap().hits.is_empty());
    let report = ro.verify(None).unwrap();
    assert!(report.ok, "{:?}", report.problems);
    assert_eq!(report.digest, digest);
    let dry = crate::input::decode::<crate::rewrite::RewriteOptions>(json!({"all": true}), "options").unwrap();
    let summarizer = Scripted::stub();
    let flag = std::sync::atomic::AtomicBool::new(false);
    assert!(!ro
        .rewrite(cid, summarizer.clone(), &dry, &flag, &|_| {})
        .await
        .unwrap()
        .entries
        .is_empty());
    let dry_calls = summarizer.calls.lock().unwrap().len();

    // Every write is refused before any work, the summarizer included.
    let code = |r: Result<_>| r.err().map(|e: crate::error::LcmError| e.code());
    let msg = json!({"role": "user", "content": "not stored"});
    assert_eq!(
        code(ro.ingest(&Target::Session("s".into()), &[msg]).map(|_| ())),
        Some("E_READ_ONLY")
    );
    let sweep = SweepOptions {
        token_budget: 100,
        force: true,
        ..Default::default()
    };
    assert_eq!(
        code(ro.compact(cid, summarizer.clone(), sweep).await.map(|_| ())),
        Some("E_READ_ONLY")
    );
    let pass = PassOptions::default();
    assert_eq!(
        code(
            ro.pass(cid, SummaryKind::Leaf, summarizer.clone(), pass.clone())
                .await
                .map(|_| ())
        ),
        Some("E_READ_ONLY")
    );
    assert_eq!(
        code(
            ro.pass(cid, SummaryKind::Condensed, summarizer.clone(), pass)
                .await
                .map(|_| ())
        ),
        Some("E_READ_ONLY")
    );
    let apply =
        crate::input::decode::<crate::rewrite::RewriteOptions>(json!({"all": true, "apply": true}), "options").unwrap();
    assert_eq!(
        code(
            ro.rewrite(cid, summarizer.clone(), &apply, &flag, &|_| {})
                .await
                .map(|_| ())
        ),
        Some("E_READ_ONLY")
    );
    assert_eq!(
        summarizer.calls.lock().unwrap().len(),
        dry_calls,
        "no summarizer call for a refused write"
    );
    assert!(ro.close());
    assert_eq!(code(ro.messages(cid, 0, 1).map(|_| ())), Some("E_CLOSED"));
    assert_eq!(
        code(ro.ingest(&Target::Session("s".into()), &[]).map(|_| ())),
        Some("E_CLOSED")
    );
    let after = file_bytes(&path);
    assert!(
        after.0 == before.0,
        "the database file changed under a read-only engine"
    );
    // SQLite's readers may create an empty log beside a WAL database; its contents stay as they were.
    assert_eq!(
        after.1.filter(|l| !l.is_empty()),
        before.1,
        "the log changed under a read-only engine"
    );
    drop(dir);
}

#[test]
fn read_only_sees_what_a_writer_commits_meanwhile() {
    let (_dir, writer) = temp_engine();
    let target = Target::Session("live".into());
    let cid = writer
        .ingest(&target, &[json!({"role": "user", "content": "one"})])
        .unwrap()
        .conversation_id;
    let ro = read_only(&writer.config().db_path).unwrap();
    assert_eq!(ro.messages(cid, 0, 10).unwrap().len(), 1);
    writer
        .ingest(&target, &[json!({"role": "user", "content": "two"})])
        .unwrap();
    assert_eq!(ro.messages(cid, 0, 10).unwrap().len(), 2);
}

#[test]
fn read_only_refuses_files_that_need_a_migration_or_do_not_exist() {
    let dir = tempfile::tempdir().unwrap();
    for fixture in ["legacy-pre-depth.db", "seed-theme.db", "newer-lcm-native.db"] {
        let path = dir.path().join(fixture);
        std::fs::copy(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures").join(fixture),
            &path,
        )
        .unwrap();
        let path = path.to_string_lossy().into_owned();
        let before = file_bytes(&path);
        let err = read_only(&path).err().expect(fixture);
        assert_eq!(err.code(), "E_SCHEMA", "{fixture}: {err}");
        let expected = match fixture {
            "newer-lcm-native.db" => "newer lcm-native",
            _ => "needs a schema upgrade",
        };
        assert!(err.to_string().contains(expected), "{fixture}: {err}");
        assert!(file_bytes(&path) == before, "{fixture} changed");
    }
    let missing = dir.path().join("nope.db").to_string_lossy().into_owned();
    let err = read_only(&missing).err().unwrap();
    assert_eq!(err.code(), "E_IO", "{err}");
    assert!(!Path::new(&missing).exists());
    let empty = dir.path().join("empty.db");
    std::fs::write(&empty, b"").unwrap();
    let err = read_only(empty.to_str().unwrap()).err().unwrap();
    assert_eq!(
        (err.code(), err.to_string().contains("is empty")),
        ("E_SCHEMA", true),
        "{err}"
    );
}

/// A damaged page: the check at open finds it, every write is refused with E_CORRUPT naming
/// the file and what to do, a call that reads the page rejects with E_CORRUPT too (no panic, no
/// crash), calls that do not touch it go on, and verify reports the damage (#33 item 6).
#[tokio::test(flavor = "multi_thread")]
async fn a_damaged_file_gives_coded_errors_and_verify_reports_it() {
    use crate::test_support::{compact_offline, with_synthetic};
    let (_dir, engine, cid) = with_synthetic(json!({}), 400, 600);
    compact_offline(&engine, cid, 8000).await;
    let path = engine.config().db_path.clone();
    assert!(engine.close());
    let root: i64 = Connection::open(&path)
        .unwrap()
        .query_row(
            "SELECT rootpage FROM sqlite_master WHERE name = 'message_parts'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    {
        use std::io::{Seek, SeekFrom, Write};
        let mut f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        f.seek(SeekFrom::Start((root as u64 - 1) * 4096)).unwrap();
        f.write_all(&[0x5a; 4096]).unwrap();
    }
    let size = std::fs::metadata(&path).unwrap().len();
    let engine = Engine::open(Config::with_db_path(&path)).unwrap();
    assert_eq!(engine.damage().map(|e| e.code()), Some("E_CORRUPT"));
    let err = engine.messages(cid, 0, 10).unwrap_err();
    assert_eq!(err.code(), "E_CORRUPT", "{err}");
    assert!(
        err.to_string().contains(&path) && err.to_string().contains("damaged"),
        "{err}"
    );
    // A write to another session would not touch the damaged page: refused all the same.
    let err = engine
        .ingest(
            &Target::Session("elsewhere".into()),
            &[json!({"role": "user", "content": "more"})],
        )
        .unwrap_err();
    assert_eq!(err.code(), "E_CORRUPT", "{err}");
    assert!(err.to_string().contains("restore the file from a backup"), "{err}");
    assert_eq!(std::fs::metadata(&path).unwrap().len(), size);
    // Summaries do not live on that page.
    assert!(!engine.summaries(cid, &SummaryFilter::default()).unwrap().is_empty());
    let report = engine.verify(None).unwrap();
    assert!(!report.ok);
    assert!(report.digest.is_empty());
    assert!(
        report.problems.len() == 1 && report.problems[0].starts_with("integrity_check: "),
        "{:?}",
        report.problems
    );
}

/// Pads `path` past the size checked at open with a table of its own and an index on it, and
/// damages the index's root page: a page no lcm-native statement touches.
fn pad_and_damage(path: &str) {
    let conn = Connection::open(path).unwrap();
    conn.execute_batch(
        "CREATE TABLE padding(x BLOB); CREATE INDEX padding_x ON padding(length(x));
         WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < 9000)
         INSERT INTO padding SELECT randomblob(4000) FROM c;
         PRAGMA wal_checkpoint(TRUNCATE);",
    )
    .unwrap();
    let root: i64 = conn
        .query_row("SELECT rootpage FROM sqlite_master WHERE name = 'padding_x'", [], |r| {
            r.get(0)
        })
        .unwrap();
    drop(conn);
    assert!(crate::db::damage::file_bytes(path) > crate::db::damage::CHECK_AT_OPEN_BYTES);
    use std::io::{Seek, SeekFrom, Write};
    let mut f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.seek(SeekFrom::Start((root as u64 - 1) * 4096)).unwrap();
    f.write_all(&[0x5a; 4096]).unwrap();
}

/// A file too large to check before `open` returns is checked in the background, and no write
/// lands before that check has spoken: each waits for it and is refused once it finds damage.
#[test]
fn a_large_damaged_file_takes_no_write_while_it_is_checked() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.db").to_string_lossy().into_owned();
    let engine = Engine::open(Config::with_db_path(&path)).unwrap();
    let cid = engine
        .ingest(
            &Target::Session("s".into()),
            &[json!({"role": "user", "content": "first"})],
        )
        .unwrap()
        .conversation_id;
    assert!(engine.close());
    pad_and_damage(&path);
    let bytes = std::fs::read(&path).unwrap();
    for round in 0..3 {
        let engine = Engine::open(Config::with_db_path(&path)).unwrap();
        // At once, before the check can have finished: it waits, then is refused.
        let err = engine
            .ingest(
                &Target::Session("s".into()),
                &[json!({"role": "user", "content": format!("lost {round}")})],
            )
            .unwrap_err();
        assert_eq!(err.code(), "E_CORRUPT", "{err}");
        assert_eq!(engine.integrity().state, IntegrityState::Damaged);
        assert_eq!(engine.messages(cid, 0, 10).unwrap().len(), 1);
        assert!(engine.close());
    }
    assert!(std::fs::read(&path).unwrap() == bytes, "the file was written");
}

/// What `engine.integrityCheck` says: a small file checked at open passed, a large sound one
/// runs in the background and then passes, a read-only open is skipped.
#[test]
fn the_integrity_check_says_what_it_came_to() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("i.db").to_string_lossy().into_owned();
    let engine = Engine::open(Config::with_db_path(&path)).unwrap();
    assert_eq!(engine.integrity().state, IntegrityState::Passed);
    assert!(engine.close());
    assert_eq!(read_only(&path).unwrap().integrity().state, IntegrityState::Skipped);
    let conn = Connection::open(&path).unwrap();
    conn.execute_batch(
        "CREATE TABLE padding(x BLOB);
         WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < 9000)
         INSERT INTO padding SELECT randomblob(4000) FROM c;
         PRAGMA wal_checkpoint(TRUNCATE);",
    )
    .unwrap();
    drop(conn);
    let engine = Engine::open(Config::with_db_path(&path)).unwrap();
    // A write waits for the check, so once it is stored the check has spoken.
    engine
        .ingest(
            &Target::Session("s".into()),
            &[json!({"role": "user", "content": "after"})],
        )
        .unwrap();
    let done = engine.integrity();
    assert_eq!(done.state, IntegrityState::Passed, "{:?}", done.error);
    assert!(engine.close());
}

/// A damaged file that needs a migration (a lossless-claw database) is checked before it,
/// whatever its size: the migration never runs on it, and the file is left as it was.
#[test]
fn a_damaged_file_is_never_migrated() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("theirs.db").to_string_lossy().into_owned();
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/legacy-pre-depth.db"),
        &path,
    )
    .unwrap();
    pad_and_damage(&path);
    let bytes = std::fs::read(&path).unwrap();
    let err = Engine::open(Config::with_db_path(&path)).err().expect("opened");
    assert_eq!(err.code(), "E_CORRUPT", "{err}");
    assert!(std::fs::read(&path).unwrap() == bytes, "the file was written");
}

/// An index out of step with its table passes SQLite's quick check; the integrity check at
/// open finds it, and the file takes no write.
#[test]
fn an_index_out_of_step_with_its_table_is_found_at_open() {
    let (dir, engine) = crate::test_support::temp_engine();
    let path = engine.config().db_path.clone();
    let cid = engine
        .ingest(
            &Target::Session("s".into()),
            &(0..50)
                .map(|i| json!({"role": "user", "content": format!("m{i}")}))
                .collect::<Vec<_>>(),
        )
        .unwrap()
        .conversation_id;
    assert!(engine.close());
    {
        // The index's definition changed behind SQLite's back: its entries no longer match.
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch("CREATE INDEX probe_idx ON messages(seq); PRAGMA writable_schema = ON;")
            .unwrap();
        conn.execute(
            "UPDATE sqlite_master SET sql = 'CREATE INDEX probe_idx ON messages(token_count)' WHERE name = 'probe_idx'",
            [],
        )
        .unwrap();
    }
    let conn = Connection::open(&path).unwrap();
    let quick: String = conn.query_row("PRAGMA quick_check", [], |r| r.get(0)).unwrap();
    assert_eq!(quick, "ok", "the quick check does not see it");
    drop(conn);
    let engine = Engine::open(Config::with_db_path(&path)).unwrap();
    assert_eq!(engine.damage().map(|e| e.code()), Some("E_CORRUPT"));
    let err = engine
        .ingest(
            &Target::Session("s".into()),
            &[json!({"role": "user", "content": "more"})],
        )
        .unwrap_err();
    assert_eq!(err.code(), "E_CORRUPT", "{err}");
    assert_eq!(engine.messages(cid, 0, 100).unwrap().len(), 50);
    drop(dir);
}

/// One flipped byte in a stored message (invalid UTF-8) does not make its conversation
/// unreadable: it is read with U+FFFD in place of what cannot be decoded, compaction and
/// search go on, and verify names the message.
#[tokio::test(flavor = "multi_thread")]
async fn a_message_with_invalid_utf8_is_read_with_replacement_characters() {
    use crate::test_support::{compact_offline, with_synthetic};
    let (_dir, engine, cid) = with_synthetic(json!({}), 120, 600);
    let path = engine.config().db_path.clone();
    let (id, seq): (i64, i64) = Connection::open(&path)
        .unwrap()
        .query_row(
            "SELECT message_id, seq FROM messages WHERE conversation_id = ?1 AND role = 'user' ORDER BY seq LIMIT 1 OFFSET 3",
            [cid],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    let before = engine.grep(Some(cid), &crate::api::GrepOptions::new("lorem")).unwrap();
    assert!(!before.hits.is_empty(), "{before:?}");
    {
        let conn = Connection::open(&path).unwrap();
        for sql in [
            "UPDATE messages SET content = content || CAST(X'FF20C3' AS TEXT) WHERE message_id = ?1",
            "UPDATE message_parts SET text_content = text_content || CAST(X'FF' AS TEXT) WHERE message_id = ?1",
        ] {
            conn.execute(sql, [id]).unwrap();
        }
    }
    let listed = engine.messages(cid, seq - 1, 1).unwrap();
    assert_eq!(listed.len(), 1);
    assert!(
        listed[0].content.to_string().contains('\u{FFFD}'),
        "{}",
        listed[0].content
    );
    assert_eq!(listed[0].damaged, Some(true));
    assert!(engine.messages(cid, 0, 3).unwrap().iter().all(|m| m.damaged.is_none()));
    let hits = engine.grep(Some(cid), &crate::api::GrepOptions::new("lorem")).unwrap();
    assert!(!hits.hits.is_empty(), "{hits:?}");
    compact_offline(&engine, cid, 4000).await;
    assert!(!engine.summaries(cid, &SummaryFilter::default()).unwrap().is_empty());
    let report = engine.verify(None).unwrap();
    assert!(
        report
            .problems
            .iter()
            .any(|p| p.contains(&format!("message {id}")) && p.contains("UTF-8")),
        "{:?}",
        report.problems
    );
}

#[test]
fn immutable_opens_read_a_snapshot_and_refuse_a_pending_log() {
    let dir = tempfile::tempdir().unwrap();
    // Characters a file: URI treats specially, in the file name (Windows allows no `?` in one).
    let name = if cfg!(windows) {
        "odd#name%with.db"
    } else {
        "odd?name#with%.db"
    };
    let path = dir.path().join(name).to_string_lossy().into_owned();
    let writer = Engine::open(Config::with_db_path(&path)).unwrap();
    let cid = writer
        .ingest(
            &Target::Session("s".into()),
            &[json!({"role": "user", "content": "kept"})],
        )
        .unwrap()
        .conversation_id;
    let open = || {
        Engine::open(Config::from_options(&json!({"dbPath": path, "readOnly": true, "immutable": true}), None).unwrap())
    };
    // While the writer is open its log holds the commit: an immutable open would not see it.
    assert!(std::fs::metadata(format!("{path}-wal")).unwrap().len() > 0);
    let err = open().err().unwrap();
    assert_eq!(err.code(), "E_IO", "{err}");
    assert!(err.to_string().contains("write-ahead log"), "{err}");
    assert!(writer.close());
    let ro = open().unwrap();
    assert_eq!(ro.messages(cid, 0, 10).unwrap().len(), 1);
    assert!(ro.verify(None).unwrap().ok);
    assert_eq!(
        ro.ingest(&Target::Session("s".into()), &[]).unwrap_err().code(),
        "E_READ_ONLY"
    );
}

/// `walRuns: false` opens the engine's writers through SQLite's own VFS: a commit writes no
/// run through `wal_runs` (which the default does).
#[test]
fn the_wal_runs_option_turns_the_vfs_off() {
    use crate::db::wal_runs::testing::runs_written;
    for wal_runs in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lcm.db").to_string_lossy().into_owned();
        let engine =
            Engine::open(Config::from_options(&json!({ "dbPath": path, "walRuns": wal_runs }), None).unwrap()).unwrap();
        assert_eq!(engine.config().to_json()["walRuns"], json!(wal_runs));
        let before = runs_written().0;
        let message = json!({ "role": "user", "content": "a longer message ".repeat(2_000) });
        engine.ingest(&Target::Session("s".into()), &[message]).unwrap();
        assert_eq!(runs_written().0 > before, wal_runs, "walRuns: {wal_runs}");
        engine.close();
    }
}

/// An engine on a copy of `fixtures/lossless-claw-doubled.db`, with the copy's folder and path.
pub(super) fn doubled() -> (tempfile::TempDir, String, Engine) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("doubled.db").to_string_lossy().into_owned();
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/lossless-claw-doubled.db"),
        &path,
    )
    .unwrap();
    let engine = Engine::open(Config::with_db_path(&path)).unwrap();
    (dir, path, engine)
}

/// An assembly with room for the whole of a small conversation.
const WHOLE: AssembleOptions = AssembleOptions {
    token_budget: 100_000,
    fresh_tail_count: None,
    presentation: None,
    recall_query: None,
    auto_recall: None,
};

/// A file lossless-claw 1.0 wrote with turns stored twice (`store::copies`): once lcm-native
/// opens it, the model sees each of those turns once, and a user's real resends twice;
/// `verify` names the copies and still counts the file sound; nothing is removed.
#[test]
fn after_lossless_claws_doubled_turns_the_model_sees_each_turn_once() {
    let (_dir, _path, engine) = doubled();
    let options = WHOLE;
    let sent = |engine: &Engine| -> Vec<String> {
        engine
            .assemble(1, &options)
            .unwrap()
            .message_values()
            .iter()
            .filter(|m| m["role"] != "assistant")
            .map(|m| m["content"].to_string())
            .collect()
    };
    let times = |sent: &[String], words: &str| sent.iter().filter(|m| m.contains(words)).count();
    for round in 0..2 {
        // The second round reuses what the first rendered.
        let sent = sent(&engine);
        assert_eq!(times(&sent, "Plain turn 6"), 1, "round {round}: {sent:#?}");
        assert_eq!(times(&sent, "Plain turn 10"), 1, "round {round}");
        assert_eq!(
            times(&sent, "TOOLCALL lcm_grep {\\\"pattern\\\": \\\"apple-4\\\"}"),
            1,
            "round {round}"
        );
        // Sent twice by the user: twice, each once.
        assert_eq!(times(&sent, "Repeat me: same words."), 2, "round {round}");
        assert_eq!(times(&sent, "Plain turn 9"), 2, "round {round}");
    }
    let report = engine.verify(None).unwrap();
    assert!(report.ok, "{:?}", report.problems);
    assert_eq!(report.copies.len(), 11, "{:?}", report.copies);
    assert!(
        report
            .notes
            .iter()
            .any(|n| n.contains("17 of 15") && n.contains("11 message(s)")),
        "{:?}",
        report.notes
    );
    assert_eq!(engine.messages(1, 0, 1000).unwrap().len(), 49, "a row was removed");
    assert!(engine.close());
}

/// `foldCopies` on lossless-claw's doubled turns, after lcm-native compacted some of them into
/// summaries: the dry run writes nothing; applied, it writes the backup first, removes the
/// copies (the live ones and those under summaries), leaves what the model is sent exactly as
/// it was and a file `verify` passes with no copies, and later turns are stored after it.
#[tokio::test(flavor = "multi_thread")]
async fn folding_lossless_claws_copies_changes_nothing_the_model_sees() {
    use crate::api::FoldOptions;
    use crate::test_support::compact_offline;
    let (dir, path, engine) = doubled();
    let read_only =
        Engine::open(Config::from_options(&json!({ "dbPath": path, "readOnly": true }), None).unwrap()).unwrap();
    let apply = FoldOptions {
        apply: true,
        ..Default::default()
    };
    let refused = read_only.fold_copies(&apply).await.err().map(|e| e.code());
    assert_eq!(refused, Some("E_READ_ONLY"));
    assert!(read_only.close());
    compact_offline(&engine, 1, 600).await;
    let options = WHOLE;
    let sent = |engine: &Engine| engine.assemble(1, &options).unwrap().message_values();
    let before = sent(&engine);
    let digest = engine.verify(None).unwrap().digest;
    let covered: i64 = Connection::open(&path)
        .unwrap()
        .query_row(
            "SELECT COUNT(*) FROM summary_messages WHERE message_id IN (17, 22, 23, 26, 29, 32, 35, 38, 41, 46, 47)",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(
        covered > 0,
        "no copy under a summary: the test would not test that path"
    );

    let dry = engine.fold_copies(&FoldOptions::default()).await.unwrap();
    assert!(!dry.applied);
    assert_eq!(dry.result.copies.len(), 11);
    assert_eq!(dry.result.folded.len(), 11, "{:?}", dry.result.kept);
    assert_eq!(engine.verify(None).unwrap().digest, digest, "the dry run wrote");

    let backup = dir.path().join("before-fold.db").to_string_lossy().into_owned();
    let applied = engine
        .fold_copies(&FoldOptions {
            conversation_id: Some(1),
            apply: true,
            backup: Some(backup.clone()),
        })
        .await
        .unwrap();
    assert!(applied.applied);
    assert_eq!(applied.result.folded, dry.result.folded);
    assert_eq!(applied.result.summary_links_removed, covered);
    assert_eq!(applied.backup.as_deref(), Some(backup.as_str()));
    let in_backup: i64 = Connection::open(&backup)
        .unwrap()
        .query_row("SELECT COUNT(*) FROM messages", [], |r| r.get(0))
        .unwrap();
    assert_eq!(in_backup, 49, "the backup was not taken before the fold");

    assert_eq!(sent(&engine), before, "what the model is sent changed");
    let report = engine.verify(None).unwrap();
    assert!(report.ok, "{:?}", report.problems);
    assert!(report.copies.is_empty(), "{:?}", report.copies);
    assert_eq!(engine.messages(1, 0, 1000).unwrap().len(), 38);

    let next = json!({ "role": "user", "content": "After the fold." });
    engine.ingest(&Target::Conversation(1), &[next]).unwrap();
    let last = engine.messages(1, 0, 1000).unwrap().pop().unwrap();
    assert_eq!(last.content, "After the fold.");
    let code = |r: Result<crate::api::FoldReport>| r.err().map(|e| e.code());
    let unknown = FoldOptions {
        conversation_id: Some(99),
        ..Default::default()
    };
    assert_eq!(code(engine.fold_copies(&unknown).await), Some("E_NOT_FOUND"));
    assert!(engine.close());
}

/// A leaf pass over lossless-claw's doubled turns sends the summarizer each turn once (the
/// copies are covered by the summary, not read twice), and a user's real resend twice.
#[tokio::test(flavor = "multi_thread")]
async fn a_leaf_pass_sends_the_summarizer_each_of_lossless_claws_doubled_turns_once() {
    use crate::api::SweepOptions;
    use crate::test_support::Scripted;
    let (_dir, _path, engine) = doubled();
    let summarizer = Scripted::stub();
    let sweep = SweepOptions {
        token_budget: 600,
        force: true,
        ..Default::default()
    };
    engine.compact(1, summarizer.clone(), sweep).await.unwrap();
    let sources: String = summarizer
        .calls
        .lock()
        .unwrap()
        .iter()
        .filter(|(_, r)| r.depth == 0)
        .map(|(_, r)| r.source_text.clone())
        .collect();
    // The user's rows (the fake model's replies echo their words).
    let times = |words: &str| sources.matches(&format!("user]\n{words}")).count();
    assert_eq!(times("Plain turn 6"), 1, "{sources}");
    assert_eq!(times("Plain turn 10"), 1, "{sources}");
    assert_eq!(times("Repeat me: same words."), 2, "{sources}");
    let report = engine.verify(None).unwrap();
    assert!(report.ok, "{:?}", report.problems);
    assert!(engine.close());
}
