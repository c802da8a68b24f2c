//! `/new` and `/reset` through the engine (`store::lifecycle`): what stays stored, what leaves
//! the context, what `verify` and the next turns see.

use crate::api::SweepOptions;
use std::sync::Arc;

use rusqlite::Connection;

use super::*;
use crate::store::lifecycle::{ResetReason, DEFAULT_RETAIN_DEPTH};
use crate::summarizer::Summarizer;
use crate::test_support::{transcript, THEME};

fn key() -> Target {
    Target::SessionKey {
        key: "agent:main:main".into(),
        session_id: Some("s1".into()),
    }
}

fn rows(engine: &Engine, sql: &str) -> i64 {
    Connection::open(&engine.config().db_path)
        .unwrap()
        .query_row(sql, [], |r| r.get(0))
        .unwrap()
}

/// An engine whose compaction condenses small fixtures into deep summaries.
fn deep_engine() -> (tempfile::TempDir, Engine) {
    let dir = tempfile::tempdir().unwrap();
    let mut config = Config::with_db_path(&dir.path().join("lcm.db").to_string_lossy());
    config.leaf_min_fanout = 2;
    config.condensed_min_fanout = 2;
    config.condensed_target_tokens = 10;
    config.leaf_chunk_tokens = 1_500;
    config.fresh_tail_count = 4;
    config.max_sweep_iterations = 200;
    (dir, Engine::open(config).unwrap())
}

/// The theme transcript, compacted down to condensed summaries of depth 2 and more.
fn compacted(engine: &Engine, rt: &tokio::runtime::Runtime) -> i64 {
    engine.ingest(&key(), &transcript(THEME)).unwrap();
    let cid = engine.find_conversation(&key()).unwrap().unwrap().conversation_id;
    let summarizer: Arc<dyn Summarizer> = Arc::new(crate::offline::OfflineSummarizer);
    let options = SweepOptions {
        token_budget: 2_000,
        force: true,
        ..Default::default()
    };
    for _ in 0..6 {
        rt.block_on(engine.compact(cid, summarizer.clone(), options.clone()))
            .unwrap();
    }
    let deep = format!("SELECT count(*) FROM context_items ci JOIN summaries s USING (summary_id) WHERE ci.conversation_id = {cid} AND s.depth >= 2");
    assert!(rows(engine, &deep) > 0, "no summary of depth 2 in the context");
    cid
}

#[test]
fn new_takes_raw_messages_and_shallow_summaries_out_of_the_context_and_deletes_nothing() {
    let (_dir, engine) = deep_engine();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let cid = compacted(&engine, &rt);
    let messages = rows(&engine, "SELECT count(*) FROM messages");
    let summaries = rows(&engine, "SELECT count(*) FROM summaries");
    let items = rows(
        &engine,
        &format!("SELECT count(*) FROM context_items WHERE conversation_id = {cid}"),
    );
    let r = rt
        .block_on(engine.reset_session(
            &key(),
            ResetReason::New {
                retain_depth: DEFAULT_RETAIN_DEPTH,
            },
        ))
        .unwrap();
    assert_eq!((r.action.as_str(), r.conversation_id), ("pruned", Some(cid)));
    let left = rows(
        &engine,
        &format!("SELECT count(*) FROM context_items WHERE conversation_id = {cid}"),
    );
    assert_eq!(left + r.context_items_removed, items);
    assert!(left > 0);
    // Only deep summaries stay, numbered from 0 in their old order.
    let shallow = format!(
        "SELECT count(*) FROM context_items ci LEFT JOIN summaries s USING (summary_id)
         WHERE ci.conversation_id = {cid} AND (ci.item_type = 'message' OR s.depth < 2)"
    );
    assert_eq!(rows(&engine, &shallow), 0);
    assert_eq!(
        rows(
            &engine,
            &format!("SELECT max(ordinal) + 1 FROM context_items WHERE conversation_id = {cid}")
        ),
        left
    );
    // Nothing deleted; verify knows why the messages left the context.
    assert_eq!(rows(&engine, "SELECT count(*) FROM messages"), messages);
    assert_eq!(rows(&engine, "SELECT count(*) FROM summaries"), summaries);
    let report = engine.verify(Some(cid)).unwrap();
    assert!(report.ok, "{:?}", report.problems);
    // The session goes on: a new turn is stored after the kept summaries and assembled.
    engine
        .ingest(&key(), &[serde_json::json!({"role": "user", "content": "after /new"})])
        .unwrap();
    let assembled = serde_json::to_string(
        &engine
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
            .unwrap(),
    )
    .unwrap();
    assert!(assembled.contains("after /new"));
    let report = engine.verify(Some(cid)).unwrap();
    assert!(report.ok, "{:?}", report.problems);
    // A second /new right away has nothing raw to take out but the new message.
    let again = rt
        .block_on(engine.reset_session(&key(), ResetReason::New { retain_depth: 2 }))
        .unwrap();
    assert_eq!(again.context_items_removed, 1);
}

/// lossless-claw's `/new` does what lcm-native's does and records no marker: `verify` tells
/// that state (one block of messages out of the context after deep summaries only, later turns
/// after it) from damage, which it still reports.
#[test]
fn verify_tells_lossless_claws_new_from_damage() {
    let (_dir, engine) = deep_engine();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let cid = compacted(&engine, &rt);
    rt.block_on(engine.reset_session(&key(), ResetReason::New { retain_depth: 2 }))
        .unwrap();
    let conn = Connection::open(&engine.config().db_path).unwrap();
    conn.execute("DELETE FROM lcm_native_context_resets", []).unwrap();
    for text in ["after /new", "the answer"] {
        engine
            .ingest(&key(), &[serde_json::json!({"role": "user", "content": text})])
            .unwrap();
    }
    let report = engine.verify(Some(cid)).unwrap();
    assert!(report.ok, "{:?}", report.problems);
    assert_eq!(report.notes.len(), 1, "{:?}", report.notes);
    assert!(report.notes[0].contains("lossless-claw's /new"), "{:?}", report.notes);
    // Damage: the newest message's context item lost as well, after one still live (losing the
    // first message after the block would only lengthen it: that cannot be told apart).
    let later: i64 = conn
        .query_row(
            "SELECT ordinal FROM context_items WHERE conversation_id = ?1 AND item_type = 'message' ORDER BY ordinal DESC LIMIT 1",
            [cid],
            |r| r.get(0),
        )
        .unwrap();
    conn.execute(
        "DELETE FROM context_items WHERE conversation_id = ?1 AND ordinal = ?2",
        rusqlite::params![cid, later],
    )
    .unwrap();
    conn.execute(
        "UPDATE context_items SET ordinal = ordinal - 1 WHERE conversation_id = ?1 AND ordinal > ?2",
        rusqlite::params![cid, later],
    )
    .unwrap();
    let report = engine.verify(Some(cid)).unwrap();
    assert!(!report.ok && report.notes.is_empty(), "{report:?}");
    assert!(
        report.problems.iter().any(|p| p.contains("neither live nor covered")),
        "{:?}",
        report.problems
    );
}

/// A message lost from the middle of a context that no `/new` touched is damage, not a `/new`.
#[test]
fn a_message_lost_from_the_middle_of_the_context_is_damage() {
    let (_dir, engine) = deep_engine();
    engine.ingest(&key(), &transcript(THEME)).unwrap();
    let cid = engine.find_conversation(&key()).unwrap().unwrap().conversation_id;
    let conn = Connection::open(&engine.config().db_path).unwrap();
    conn.execute(
        "DELETE FROM context_items WHERE conversation_id = ?1 AND ordinal = 5",
        [cid],
    )
    .unwrap();
    conn.execute(
        "UPDATE context_items SET ordinal = ordinal - 1 WHERE conversation_id = ?1 AND ordinal > 5",
        [cid],
    )
    .unwrap();
    let report = engine.verify(Some(cid)).unwrap();
    assert!(!report.ok && report.notes.is_empty(), "{report:?}");
}

#[test]
fn reset_archives_the_conversation_and_the_session_goes_on_in_a_new_one() {
    let (_dir, engine) = deep_engine();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let cid = compacted(&engine, &rt);
    let r = rt.block_on(engine.reset_session(&key(), ResetReason::Reset)).unwrap();
    assert_eq!((r.action.as_str(), r.conversation_id), ("archived", Some(cid)));
    let fresh = r.replacement_id.unwrap();
    assert_eq!(
        rows(
            &engine,
            &format!("SELECT active FROM conversations WHERE conversation_id = {cid}")
        ),
        0
    );
    assert_eq!(
        rows(&engine, &format!("SELECT count(*) FROM conversations WHERE conversation_id = {cid} AND archive_cause = 'manual-reset' AND archived_at IS NOT NULL")),
        1
    );
    assert_eq!(
        engine.find_conversation(&key()).unwrap().unwrap().conversation_id,
        fresh
    );
    // An empty conversation is what a reset makes: a second one changes nothing.
    let again = rt.block_on(engine.reset_session(&key(), ResetReason::Reset)).unwrap();
    assert_eq!((again.action.as_str(), again.replacement_id), ("none", None));
    engine
        .ingest(
            &key(),
            &[serde_json::json!({"role": "user", "content": "after /reset"})],
        )
        .unwrap();
    assert_eq!(
        engine.find_conversation(&key()).unwrap().unwrap().conversation_id,
        fresh
    );
    assert_eq!(
        rows(
            &engine,
            &format!("SELECT count(*) FROM messages WHERE conversation_id = {fresh}")
        ),
        1
    );
    assert!(engine.verify(None).unwrap().ok);
    // No conversation at all: nothing to do.
    let other = Target::SessionKey {
        key: "agent:main:other".into(),
        session_id: None,
    };
    let none = rt.block_on(engine.reset_session(&other, ResetReason::Reset)).unwrap();
    assert_eq!((none.action.as_str(), none.conversation_id), ("none", None));
    // A deleted session: archived, nothing after it; its key starts afresh at the next turn.
    let deleted = rt.block_on(engine.reset_session(&key(), ResetReason::Deleted)).unwrap();
    assert_eq!(
        (deleted.action.as_str(), deleted.conversation_id, deleted.replacement_id),
        ("archived", Some(fresh), None)
    );
    assert_eq!(
        rows(&engine, &format!("SELECT count(*) FROM conversations WHERE conversation_id = {fresh} AND active = 0 AND archive_cause = 'session-deleted'")),
        1
    );
    assert!(engine.find_conversation(&key()).unwrap().is_none());
}
