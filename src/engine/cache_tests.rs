//! Assemblies that reuse what earlier ones rendered (`assemble::cache`) give exactly what a
//! fresh assembly gives, whatever changed the stored messages in between.

use crate::api::{AssembleOptions, SweepOptions};
use std::sync::Arc;

use rusqlite::Connection;
use serde_json::Value;

use super::assembly::LARGE_CONTEXT_ITEMS;
use super::*;
use crate::test_support::{temp_engine, transcript, THEME};

fn options() -> AssembleOptions {
    AssembleOptions {
        token_budget: 64_000,
        fresh_tail_count: None,
        presentation: None,
        recall_query: None,
        auto_recall: None,
    }
}

/// What the engine's assemble returns (reusing when it can) and what an assembly on a new
/// connection without any cache returns, as JSON.
fn both(engine: &Engine, cid: i64) -> (Value, Value) {
    // Without the prompt-cache report, which a fresh assembly has no previous one for.
    let reused =
        serde_json::to_value(engine.assemblies.assemble(&engine.deps, cid, &options(), None).unwrap()).unwrap();
    let conn = engine.deps.backend.sqlite().unwrap().fresh_connection().unwrap();
    let fresh = crate::assemble::assemble(&conn, engine.config(), cid, &options()).unwrap();
    (reused, serde_json::to_value(fresh).unwrap())
}

fn assert_same(engine: &Engine, cid: i64, when: &str) -> Value {
    let (reused, fresh) = both(engine, cid);
    assert_eq!(reused, fresh, "{when}: the reused assembly differs from a fresh one");
    reused
}

/// Ingests THEME turn by turn, running `check` (conversation, when) after each turn; returns
/// the conversation.
fn ingest_theme(engine: &Engine, mut check: impl FnMut(i64, &str)) -> i64 {
    let msgs = transcript(THEME);
    let (mut start, mut cid) = (0, 0);
    for i in 1..=msgs.len() {
        if i == msgs.len() || msgs[i]["role"] == "user" {
            cid = engine
                .ingest(&Target::Session("theme".into()), &msgs[start..i])
                .unwrap()
                .conversation_id;
            check(cid, &format!("after the turn ending at message {i}"));
            start = i;
        }
    }
    cid
}

/// Ingests THEME turn by turn, assembling after each turn; returns the conversation.
fn ingest_assembling(engine: &Engine) -> i64 {
    ingest_theme(engine, |cid, when| {
        assert_same(engine, cid, when);
    })
}

/// The id of a text part whose text the assembly shows.
fn emitted_text_part(engine: &Engine, cid: i64) -> String {
    let shown = serde_json::to_string(&engine.assemble(cid, &options()).unwrap()).unwrap();
    let conn = Connection::open(&engine.config().db_path).unwrap();
    let mut stmt = conn
        .prepare(
            "SELECT p.part_id, p.text_content FROM message_parts p
             JOIN context_items c ON c.message_id = p.message_id
             WHERE c.conversation_id = ?1 AND p.part_type = 'text' AND length(p.text_content) > 40
             ORDER BY c.ordinal DESC",
        )
        .unwrap();
    let rows: Vec<(String, String)> = stmt
        .query_map([cid], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    rows.into_iter()
        .find(|(_, text)| shown.contains(&serde_json::to_string(text).unwrap()[1..20]))
        .expect("an emitted text part")
        .0
}

/// Replaces a part's text (and drops its original JSON, so the block is rebuilt from the
/// column) with SQL run by `run`.
fn edit_sql(part_id: &str, text: &str) -> String {
    format!(
        "UPDATE message_parts SET text_content = '{text}', metadata = NULL WHERE part_id = '{}'",
        part_id.replace('\'', "''")
    )
}

#[test]
fn reuse_gives_a_fresh_assemblys_result_turn_after_turn_and_across_compaction() {
    let (_dir, engine) = temp_engine();
    let cid = ingest_assembling(&engine);
    let before = assert_same(&engine, cid, "back to back");
    // Compaction writes summaries and context items, not messages: entries stay usable.
    let summarizer: Arc<dyn Summarizer> = Arc::new(crate::offline::OfflineSummarizer);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let swept = rt
        .block_on(engine.compact(
            cid,
            summarizer,
            SweepOptions {
                token_budget: 8_000,
                force: true,
                ..Default::default()
            },
        ))
        .unwrap();
    assert!(swept.leaf_passes > 0, "the compaction did nothing");
    let after = assert_same(&engine, cid, "after compaction");
    assert_ne!(before, after);
    assert!(!engine.assemblies.rendered.lock().unwrap().is_empty());
    // Closing lets go of it.
    assert!(engine.close());
    assert!(engine.assemblies.rendered.lock().unwrap().is_empty());
}

/// Runs `edit` with the SQL that gives `part` the text `text`, then checks that the next
/// assembly shows it and equals a fresh one.
fn shows_after_edit(engine: &Engine, cid: i64, part: &str, text: &str, edit: impl FnOnce(&str)) {
    edit(&edit_sql(part, text));
    let shown = assert_same(engine, cid, &format!("after the edit to {text:?}"));
    assert!(shown.to_string().contains(text), "{text:?} is not shown");
}

#[test]
fn another_connections_edit_of_a_kept_message_shows_at_once() {
    let (_dir, engine) = temp_engine();
    let cid = ingest_assembling(&engine);
    let part = emitted_text_part(&engine, cid);
    // Another connection (another process, as far as SQLite can tell) rewrites the part.
    let other = Connection::open(&engine.config().db_path).unwrap();
    shows_after_edit(&engine, cid, &part, "EDITED BY ANOTHER CONNECTION", |sql| {
        other.execute_batch(sql).unwrap()
    });
}

#[test]
fn an_edit_through_the_engines_own_writer_shows_at_once() {
    let (_dir, engine) = temp_engine();
    let cid = ingest_assembling(&engine);
    let part = emitted_text_part(&engine, cid);
    let pool = engine.deps.backend.sqlite().unwrap();
    // A general write (redaction, rollback, rewrite use this path).
    shows_after_edit(&engine, cid, &part, "EDITED BY A WRITE", |sql| {
        pool.write(|c| Ok(c.execute_batch(sql)?)).unwrap()
    });
    // A write that promised to leave messages alone and edited one anyway: the writer's
    // update hook counts it.
    shows_after_edit(&engine, cid, &part, "EDITED DESPITE THE PROMISE", |sql| {
        pool.write_preserving_messages(|c| Ok(c.execute_batch(sql)?)).unwrap()
    });
}

#[test]
fn a_deleted_and_reused_message_id_is_not_served_from_the_cache() {
    let (_dir, engine) = temp_engine();
    let cid = engine
        .ingest(
            &Target::Session("s".into()),
            &[
                serde_json::json!({"role": "user", "content": "first question"}),
                serde_json::json!({"role": "assistant", "content": [{"type": "text", "text": "the old answer"}]}),
            ],
        )
        .unwrap()
        .conversation_id;
    assert!(assert_same(&engine, cid, "first")
        .to_string()
        .contains("the old answer"));
    // The newest message goes and another takes its id. `messages` is AUTOINCREMENT, so
    // this needs its sequence moved back too (as a file without it would behave).
    let max_id = |engine: &Engine| -> i64 {
        engine
            .deps
            .backend
            .sqlite()
            .unwrap()
            .read(|c| Ok(c.query_row("SELECT max(message_id) FROM messages", [], |r| r.get(0))?))
            .unwrap()
    };
    let old_id = max_id(&engine);
    engine
        .deps
        .backend
        .sqlite()
        .unwrap()
        .write(|c| {
            Ok(c.execute_batch(
                "DELETE FROM context_items WHERE message_id = (SELECT max(message_id) FROM messages);
                 DELETE FROM message_parts WHERE message_id = (SELECT max(message_id) FROM messages);
                 DELETE FROM messages_fts WHERE rowid = (SELECT max(message_id) FROM messages);
                 DELETE FROM messages WHERE message_id = (SELECT max(message_id) FROM messages);
                 UPDATE sqlite_sequence SET seq = seq - 1 WHERE name = 'messages';",
            )?)
        })
        .unwrap();
    engine
        .ingest(
            &Target::Session("s".into()),
            &[serde_json::json!({"role": "assistant", "content": [{"type": "text", "text": "the new answer"}]})],
        )
        .unwrap();
    assert_eq!(max_id(&engine), old_id, "the id was not reused");
    let shown = assert_same(&engine, cid, "after the id was reused").to_string();
    assert!(shown.contains("the new answer") && !shown.contains("the old answer"));
}

#[test]
fn a_panic_while_the_cache_was_held_starts_it_over() {
    let (_dir, engine) = temp_engine();
    let cid = ingest_assembling(&engine);
    assert!(!engine.assemblies.rendered.lock().unwrap().is_empty());
    let panicked = std::thread::scope(|s| {
        s.spawn(|| {
            let _held = engine.assemblies.rendered.lock().unwrap();
            panic!("an assembly that panics holding the cache");
        })
        .join()
    });
    assert!(panicked.is_err() && engine.assemblies.rendered.is_poisoned());
    assert_same(&engine, cid, "after the panic");
    assert!(!engine.assemblies.rendered.is_poisoned());
}

/// A conversation of more live items than `LARGE_CONTEXT_ITEMS` assembles on a reader after
/// its first assembly (a long assembly must not hold the writer, #33 item 4), with the same
/// result; one that shrinks below returns to the writer.
#[test]
fn large_contexts_assemble_off_the_writer() {
    let (_dir, engine) = temp_engine();
    let msgs: Vec<Value> = (0..LARGE_CONTEXT_ITEMS + 50)
        .map(|i| serde_json::json!({"role": if i % 2 == 0 { "user" } else { "assistant" }, "content": format!("m{i}")}))
        .collect();
    let big = engine
        .ingest(&Target::Session("big".into()), &msgs)
        .unwrap()
        .conversation_id;
    let small = engine
        .ingest(&Target::Session("small".into()), &msgs[..10])
        .unwrap()
        .conversation_id;
    let (first, fresh) = both(&engine, big);
    assert_eq!(first, fresh);
    assert!(engine.assemblies.large.lock().unwrap().contains(&big));
    let (second, fresh) = both(&engine, big);
    assert_eq!(second, fresh);
    both(&engine, small);
    assert!(!engine.assemblies.large.lock().unwrap().contains(&small));
}

/// On PostgreSQL the cache serves every assembly of a gateway and follows every writer's
/// change to a stored message: another gateway's (any connection's), and this engine's own,
/// show at the next assembly, which equals one rendered from nothing.
#[test]
fn on_postgres_every_writers_edit_of_a_kept_message_shows_at_once() {
    let Some((location, url)) = crate::test_support::pg_test_url("render_cache") else {
        return;
    };
    let config = serde_json::json!({ "dbPath": url, "timezone": "UTC" });
    let engine = Engine::open(crate::config::Config::from_options(&config, None).unwrap()).unwrap();
    let other = location.connect().unwrap();
    let fresh = |cid: i64| {
        let read = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY";
        let out = other
            .transaction_as(read, |c| {
                crate::assemble::assemble_reusing(c.into(), engine.config(), cid, &options(), Default::default())
                    .map(|(out, _)| out)
            })
            .unwrap();
        serde_json::to_value(out).unwrap()
    };
    let same = |cid: i64, when: &str| {
        let reused =
            serde_json::to_value(engine.assemblies.assemble(&engine.deps, cid, &options(), None).unwrap()).unwrap();
        assert_eq!(
            reused,
            fresh(cid),
            "{when}: the reused assembly differs from a fresh one"
        );
        assert!(
            !engine.assemblies.rendered.lock().unwrap().is_empty(),
            "{when}: nothing kept"
        );
        reused
    };
    let cid = ingest_theme(&engine, |cid, when| {
        same(cid, when);
    });
    let shown = serde_json::to_string(&same(cid, "back to back")).unwrap();
    let parts = other
        .query(
            "SELECT p.part_id, p.text_content FROM message_parts p
             JOIN context_items c ON c.message_id = p.message_id
             WHERE c.conversation_id = $1 AND p.part_type = 'text' AND length(p.text_content) > 40
             ORDER BY c.ordinal DESC",
            &[&cid],
        )
        .unwrap();
    let part: String = parts
        .iter()
        .map(|r| (r.get::<_, String>(0), r.get::<_, String>(1)))
        .find(|(_, text)| shown.contains(&serde_json::to_string(text).unwrap()[1..20]))
        .expect("an emitted text part")
        .0;
    // Another gateway (here, any connection) rewrites the part.
    other.batch(&edit_sql(&part, "EDITED BY ANOTHER GATEWAY")).unwrap();
    let after = same(cid, "after another gateway's edit");
    assert!(after.to_string().contains("EDITED BY ANOTHER GATEWAY"));
    // This engine's own write door, even one that promised to leave messages alone.
    engine
        .deps
        .backend
        .write_preserving_messages(crate::sql::WriteScope::Schema, |db| {
            db.execute(&edit_sql(&part, "EDITED BY THIS GATEWAY"), &[])
        })
        .unwrap();
    let after = same(cid, "after this engine's edit");
    assert!(after.to_string().contains("EDITED BY THIS GATEWAY"));
    engine.close();
    crate::test_support::drop_test_schema(&location);
}
