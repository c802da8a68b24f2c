//! Passes beside other writers: a stale plan writes nothing, ingest during a pass is kept, and
//! one mutating operation runs per conversation at a time.

use super::*;
use crate::api::SummaryFilter;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pass_whose_inputs_changed_meanwhile_fails_stale_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let engine = Arc::new(engine_with(&dir, json!({"leafChunkTokens": 600})));
    let cid = engine
        .ingest(&Target::Session("s".into()), &synthetic(40, 200))
        .unwrap()
        .conversation_id;
    // A second engine on the same file (as another process would be) compacts the same chunk
    // while the first one's summarizer is running.
    let other = Arc::new(engine_with(&dir, json!({"leafChunkTokens": 600})));
    let other2 = other.clone();
    let interfering = Scripted::new(move |i, _| {
        if i == 0 {
            let o = other2.clone();
            std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_multi_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                rt.block_on(o.pass(cid, SummaryKind::Leaf, Scripted::stub(), PassOptions::default()))
                    .unwrap();
            })
            .join()
            .unwrap();
        }
        Act::Stub
    });
    let err = leaf(&engine, cid, interfering).await.unwrap_err();
    assert_eq!(err.code(), "E_STALE");
    assert_eq!(
        engine.summaries(cid, &SummaryFilter::default()).unwrap().len(),
        1,
        "only the other engine's pass"
    );
    assert_invariants(&engine, cid);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_ingested_during_a_pass_are_kept_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let engine = Arc::new(engine_with(&dir, json!({"leafChunkTokens": 600})));
    let cid = engine
        .ingest(&Target::Session("s".into()), &synthetic(40, 200))
        .unwrap()
        .conversation_id;
    let e2 = engine.clone();
    let s = Scripted::new(move |_, _| {
        e2.ingest(
            &Target::Conversation(cid),
            &[json!({"role": "user", "content": "arrived mid-pass"})],
        )
        .unwrap();
        Act::Stub
    });
    engine
        .compact(
            cid,
            s,
            SweepOptions {
                token_budget: 100,
                force: true,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let msgs = engine.messages(cid, 0, 10_000).unwrap();
    let arrived = msgs.iter().filter(|m| m.content == json!("arrived mid-pass")).count();
    assert!(arrived >= 2, "{arrived}");
    assert_invariants(&engine, cid);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_mutating_operation_per_conversation_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let engine = Arc::new(engine_with(&dir, json!({"leafChunkTokens": 300, "lockTimeoutMs": 100})));
    let cid = engine
        .ingest(&Target::Session("s".into()), &synthetic(60, 200))
        .unwrap()
        .conversation_id;
    let in_flight = Arc::new(AtomicUsize::new(0));
    let max_seen = Arc::new(AtomicUsize::new(0));
    let (f, m) = (in_flight.clone(), max_seen.clone());
    let slow = Scripted::new(move |_, _| {
        let now = f.fetch_add(1, Ordering::SeqCst) + 1;
        m.fetch_max(now, Ordering::SeqCst);
        std::thread::sleep(std::time::Duration::from_millis(250));
        f.fetch_sub(1, Ordering::SeqCst);
        Act::Stub
    });
    let (e1, e2) = (engine.clone(), engine.clone());
    let (s1, s2) = (slow.clone(), slow.clone());
    let a = tokio::spawn(async move { e1.pass(cid, SummaryKind::Leaf, s1, PassOptions::default()).await });
    tokio::time::sleep(std::time::Duration::from_millis(30)).await;
    let b = tokio::spawn(async move { e2.pass(cid, SummaryKind::Leaf, s2, PassOptions::default()).await });
    // Reads are not blocked while the summarizer runs.
    let t = std::time::Instant::now();
    engine.messages(cid, 0, 10).unwrap();
    assert!(t.elapsed() < std::time::Duration::from_millis(100));
    assert!(a.await.unwrap().is_ok());
    assert_eq!(b.await.unwrap().unwrap_err().code(), "E_BUSY");
    assert_eq!(max_seen.load(Ordering::SeqCst), 1);
    assert_invariants(&engine, cid);
}

/// What lossless-claw does when it compacts: the oldest `n` items become one summary item and
/// every row is renumbered from 0.
fn compact_as_lossless_claw_would(conn: &rusqlite::Connection, cid: i64, n: i64) {
    conn.execute_batch(&format!(
        "BEGIN;
         INSERT INTO summaries (summary_id, conversation_id, kind, depth, content, token_count, created_at)
         VALUES ('sum_other_process', {cid}, 'leaf', 0, 'by another process', 5, '2026-03-01 00:00:00');
         DELETE FROM context_items WHERE conversation_id = {cid} AND ordinal < {n};
         UPDATE context_items SET ordinal = -1 - (ordinal - {n} + 1) WHERE conversation_id = {cid};
         UPDATE context_items SET ordinal = -1 - ordinal WHERE conversation_id = {cid};
         INSERT INTO context_items (conversation_id, ordinal, item_type, summary_id)
         VALUES ({cid}, 0, 'summary', 'sum_other_process');
         COMMIT;"
    ))
    .unwrap();
}

#[test]
fn reading_more_after_another_process_renumbered_the_context_is_stale() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_with(&dir, json!({}));
    let cid = engine
        .ingest(&Target::Session("s".into()), &synthetic(200, 100))
        .unwrap()
        .conversation_id;
    let conn = crate::db::open_configured(&engine.config().db_path, 5_000).unwrap();
    let mut live = LiveContext::load_window(&conn, cid, TailRule::messages(8), 16).unwrap();
    assert!(live.gap.is_some(), "the middle was not left unread");
    let ids = |l: &LiveContext| l.items.iter().map(|i| i.r.clone()).collect::<Vec<_>>();
    let unchanged = (ids(&live), live.gap.clone());
    // Nothing changed: the middle reads as it is.
    let mut control = live.clone();
    control.read_more(&conn, 1_000).unwrap();
    assert_eq!(ids(&control), ids(&LiveContext::load(&conn, cid).unwrap()));
    // Another process compacts the oldest ten items and renumbers every row from 0.
    compact_as_lossless_claw_would(&rusqlite::Connection::open(&engine.config().db_path).unwrap(), cid, 10);
    let err = live.read_more(&conn, 1_000).unwrap_err();
    assert_eq!(err.code(), "E_STALE");
    assert_eq!(
        (ids(&live), live.gap.clone()),
        unchanged,
        "a stale read changed the model"
    );
}
