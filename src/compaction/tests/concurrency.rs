//! Passes beside other writers: a stale plan writes nothing, ingest during a pass is kept, and
//! one mutating operation runs per conversation at a time.

use super::*;

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
        engine.summaries(cid, None).unwrap().len(),
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
