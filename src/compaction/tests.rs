//! Compaction tests with scripted summarizers, on synthetic conversations and the real
//! transcripts. Every test ends by checking DESIGN.md's invariants.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

use super::*;
use crate::engine::Engine;
use crate::store::conversations::Target;
use crate::summarizer::offline::OfflineSummarizer;
use crate::summarizer::SummaryKind;
use crate::summarizer::{SummarizerFailure, SummaryFuture, FALLBACK_MODEL, OFFLINE_MODEL};

/// What a scripted summarizer does on a call.
#[derive(Clone, Debug)]
pub(crate) enum Act {
    /// The fixtures' stub: `STUB <kind> d<depth> summary of <N> chars. First line: …`.
    Stub,
    Text(String),
    Fail,
    Auth,
    Hang,
    Empty,
}

type Script = Box<dyn Fn(usize, &SummarizeRequest) -> Act + Send + Sync>;

pub(crate) struct Scripted {
    pub calls: Mutex<Vec<(String, SummarizeRequest)>>,
    script: Script,
    n: AtomicUsize,
}

impl Scripted {
    pub(crate) fn new(script: impl Fn(usize, &SummarizeRequest) -> Act + Send + Sync + 'static) -> Arc<Scripted> {
        Arc::new(Scripted {
            calls: Mutex::new(Vec::new()),
            script: Box::new(script),
            n: AtomicUsize::new(0),
        })
    }

    pub(crate) fn stub() -> Arc<Scripted> {
        Self::new(|_, _| Act::Stub)
    }

    pub(crate) fn prompts(&self) -> Vec<String> {
        self.calls.lock().unwrap().iter().map(|(p, _)| p.clone()).collect()
    }
}

pub(crate) fn stub_text(r: &SummarizeRequest) -> String {
    let first: String = r
        .source_text
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .take(80)
        .collect();
    format!(
        "STUB {} d{} summary of {} chars. First line: {first}\nExpand for details about: stub.",
        r.kind.as_str(),
        r.depth,
        r.source_text.chars().count()
    )
}

impl Summarizer for Scripted {
    fn summarize(&self, prompt: String, request: &SummarizeRequest) -> SummaryFuture {
        let i = self.n.fetch_add(1, Ordering::SeqCst);
        let act = (self.script)(i, request);
        self.calls.lock().unwrap().push((prompt, request.clone()));
        let stub = stub_text(request);
        Box::pin(async move {
            match act {
                Act::Stub => Ok(stub),
                Act::Text(t) => Ok(t),
                Act::Fail => Err(SummarizerFailure::Failed("provider exploded".into())),
                Act::Auth => Err(SummarizerFailure::Auth("bad key".into())),
                Act::Hang => std::future::pending().await,
                Act::Empty => Ok(String::new()),
            }
        })
    }

    fn model(&self) -> String {
        "scripted".into()
    }
}

pub(crate) fn engine_with(dir: &tempfile::TempDir, extra: Value) -> Engine {
    let mut opts = json!({
        "dbPath": dir.path().join("lcm.db").to_string_lossy(),
        "freshTailCount": 8,
        "leafChunkTokens": 3000,
        "condensedTargetTokens": 80,
        "timezone": "UTC",
        "maxSweepIterations": 10000,
    });
    for (k, v) in extra.as_object().unwrap() {
        opts[k] = v.clone();
    }
    Engine::open(Config::from_options(&opts, None).unwrap()).unwrap()
}

/// An engine (in a temp dir, kept alive by the first element) with `synthetic(n, chars)`
/// ingested into session `s`.
pub(crate) fn with_synthetic(extra: Value, n: usize, chars: usize) -> (tempfile::TempDir, Engine, i64) {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_with(&dir, extra);
    let cid = engine
        .ingest(&Target::Session("s".into()), &synthetic(n, chars))
        .unwrap()
        .conversation_id;
    (dir, engine, cid)
}

/// A forced sweep with the built-in offline summarizer.
pub(crate) async fn compact_offline(engine: &Engine, cid: i64, token_budget: i64) -> SweepResult {
    engine
        .compact(
            cid,
            Arc::new(OfflineSummarizer),
            SweepOptions {
                token_budget,
                force: true,
                ..Default::default()
            },
        )
        .await
        .unwrap()
}

/// `n` messages in turns of user / assistant+tool call / tool result / assistant.
pub(crate) fn synthetic(n: usize, chars: usize) -> Vec<Value> {
    let body = |i: usize| format!("message {i}: {}", "lorem ipsum dolor sit amet ".repeat(chars / 27 + 1));
    (0..n)
        .map(|i| {
            let ts = format!("2026-03-0{} {:02}:{:02}:00", 1 + i / 1440 % 9, i / 60 % 24, i % 60);
            match i % 4 {
                0 => json!({"role": "user", "content": body(i), "timestamp": ts}),
                1 => json!({"role": "assistant", "timestamp": ts, "content": [
                    {"type": "text", "text": body(i)},
                    {"type": "toolCall", "id": format!("call{i}"), "name": "read", "arguments": {"path": format!("src/f{i}.rs")}}]}),
                2 => json!({"role": "toolResult", "toolCallId": format!("call{}", i - 1), "timestamp": ts,
                            "content": [{"type": "text", "text": body(i)}]}),
                _ => json!({"role": "assistant", "content": [{"type": "text", "text": body(i)}], "timestamp": ts}),
            }
        })
        .collect()
}

pub(crate) fn assert_invariants(engine: &Engine, cid: i64) -> String {
    let report = engine.verify(Some(cid)).unwrap();
    assert!(report.ok, "invariants violated: {:#?}", report.problems);
    // Every summary is found in the full-text index by its own id's row and a word of it.
    let conn = rusqlite::Connection::open(&engine.config().db_path).unwrap();
    let missing: i64 = conn
        .query_row(
            "SELECT count(*) FROM summaries s WHERE s.conversation_id = ?1 AND NOT EXISTS
               (SELECT 1 FROM summaries_fts f WHERE summaries_fts MATCH 'expand' AND f.summary_id = s.summary_id)
               AND s.content LIKE '%Expand for details%'",
            [cid],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(missing, 0, "summaries missing from the full-text index");
    report.digest
}

fn deps(engine: &Engine) -> Deps {
    // Tests call the compaction functions directly where the engine's lock is not the subject.
    engine.test_deps()
}

async fn leaf(engine: &Engine, cid: i64, s: Arc<dyn Summarizer>) -> Result<Option<PassResult>> {
    engine.pass(cid, SummaryKind::Leaf, s, PassOptions::default()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leaf_pass_summarises_the_oldest_chunk_with_headers_and_lineage() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_with(&dir, json!({"leafChunkTokens": 600}));
    let out = engine
        .ingest(&Target::Session("s".into()), &synthetic(40, 200))
        .unwrap();
    let cid = out.conversation_id;
    let stub = Scripted::stub();
    let r = leaf(&engine, cid, stub.clone()).await.unwrap().expect("a chunk");
    assert_eq!(r.kind, SummaryKind::Leaf);
    assert_eq!(r.depth, 0);
    assert_eq!(r.level, Some(Level::Normal));
    assert!(r.input_count >= 2 && r.tokens_after < r.tokens_before, "{r:?}");
    assert_eq!(r.earliest_at.as_deref(), Some("2026-03-01T00:00:00.000Z"));
    let (prompt, req) = stub.calls.lock().unwrap()[0].clone();
    assert!(
        req.source_text.starts_with("[2026-03-01 00:00 UTC | user]\nmessage 0:"),
        "{}",
        req.source_text
    );
    assert!(req.source_text.contains("[2026-03-01 00:01 UTC | assistant]"));
    assert!(req.source_text.contains("[tool call: read] {\"path\":\"src/f1.rs\"}"));
    assert!(req.source_text.contains("| tool]\nmessage 2:"));
    assert!(prompt.contains("<conversation_segment>") && prompt.contains("Expand for details about:"));
    assert!(
        !prompt.contains("<previous_context>"),
        "no previous context for the first pass"
    );

    let sums = engine.summaries(cid, None).unwrap();
    assert_eq!(sums.len(), 1);
    assert_eq!(sums[0].fields.summary_id, r.summary_id.clone().unwrap());
    assert_eq!(sums[0].fields.model, "scripted");
    assert!(sums[0].fields.source_message_token_count > 0);
    assert_invariants(&engine, cid);

    // The second pass gets the first summary as previous context.
    leaf(&engine, cid, stub.clone()).await.unwrap().unwrap();
    let prompts = stub.prompts();
    assert!(prompts[1].contains(&format!(
        "<previous_context>\n{}\n</previous_context>",
        sums[0].fields.content
    )));
    assert_invariants(&engine, cid);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_to_do_returns_none_and_unknown_ids_are_not_found() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_with(&dir, json!({}));
    let out = engine.ingest(&Target::Session("s".into()), &synthetic(6, 50)).unwrap();
    assert!(leaf(&engine, out.conversation_id, Scripted::stub())
        .await
        .unwrap()
        .is_none());
    assert!(engine
        .pass(
            out.conversation_id,
            SummaryKind::Condensed,
            Scripted::stub(),
            PassOptions::default()
        )
        .await
        .unwrap()
        .is_none());
    assert_eq!(
        leaf(&engine, 999, Scripted::stub()).await.unwrap_err().code(),
        "E_NOT_FOUND"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn condensation_makes_the_next_depth_with_correct_dag_facts() {
    let (_dir, engine, cid) = with_synthetic(json!({"leafChunkTokens": 300, "leafMinFanout": 4}), 60, 200);
    let stub = Scripted::stub();
    for _ in 0..6 {
        leaf(&engine, cid, stub.clone()).await.unwrap().unwrap();
    }
    let r = engine
        .pass(cid, SummaryKind::Condensed, stub.clone(), PassOptions::default())
        .await
        .unwrap()
        .expect("4+ leaves are eligible");
    assert_eq!((r.kind, r.depth), (SummaryKind::Condensed, 1));
    let (prompt, req) = stub.calls.lock().unwrap().last().unwrap().clone();
    assert_eq!(req.depth, 1);
    assert!(req.source_text.starts_with("[2026-03-01 00:00–"), "{}", req.source_text);
    assert!(prompt.contains("<conversation_to_condense>"));
    let node = engine.summaries(cid, Some(1)).unwrap().into_iter().next().unwrap();
    let leaves = engine.summaries(cid, Some(0)).unwrap();
    let inputs: Vec<_> = leaves.iter().take(r.input_count as usize).collect();
    assert_eq!(node.fields.descendant_count, r.input_count);
    assert_eq!(node.fields.earliest_at, inputs.first().unwrap().fields.earliest_at);
    assert_eq!(node.fields.latest_at, inputs.last().unwrap().fields.latest_at);
    assert_eq!(
        node.fields.descendant_token_count,
        inputs
            .iter()
            .map(|s| s.fields.token_count + s.fields.descendant_token_count)
            .sum::<i64>()
    );
    assert_eq!(
        node.fields.source_message_token_count,
        inputs.iter().map(|s| s.fields.source_message_token_count).sum::<i64>()
    );
    assert_invariants(&engine, cid);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callback_failures_leave_the_database_exactly_as_it_was() {
    let (_dir, engine, cid) = with_synthetic(json!({"leafChunkTokens": 600, "summaryTimeoutMs": 150}), 40, 200);
    leaf(&engine, cid, Scripted::stub()).await.unwrap().unwrap();
    let before = assert_invariants(&engine, cid);

    let err = leaf(&engine, cid, Scripted::new(|_, _| Act::Fail)).await.unwrap_err();
    assert_eq!(err.code(), "E_SUMMARIZER");
    assert!(err.to_string().contains("provider exploded"));
    assert_eq!(assert_invariants(&engine, cid), before);

    let err = leaf(&engine, cid, Scripted::new(|_, _| Act::Hang)).await.unwrap_err();
    assert_eq!(err.code(), "E_TIMEOUT");
    assert_eq!(assert_invariants(&engine, cid), before);

    let r = leaf(&engine, cid, Scripted::new(|_, _| Act::Auth))
        .await
        .unwrap()
        .unwrap();
    assert!(r.auth_failure && r.summary_id.is_none());
    assert_eq!(assert_invariants(&engine, cid), before);

    // The same holds inside a sweep: earlier passes stay, the failing one writes nothing.
    let s = Scripted::new(|i, _| if i < 2 { Act::Stub } else { Act::Fail });
    let err = engine
        .compact(
            cid,
            s,
            SweepOptions {
                token_budget: 1000,
                force: true,
                ..Default::default()
            },
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), "E_SUMMARIZER");
    assert_eq!(
        engine.summaries(cid, None).unwrap().len(),
        3,
        "the two passes before the failure were kept"
    );
    assert_invariants(&engine, cid);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn escalation_goes_aggressive_then_falls_back_and_marks_the_fallback() {
    let (_dir, engine, cid) = with_synthetic(json!({"leafChunkTokens": 600}), 40, 200);
    let huge = "x ".repeat(5000);
    // Too long, then fine: accepted as aggressive.
    let s = Scripted::new(move |i, _| {
        if i == 0 {
            Act::Text(huge.clone())
        } else {
            Act::Text("short enough\nExpand for details about: a".into())
        }
    });
    let r = leaf(&engine, cid, s.clone()).await.unwrap().unwrap();
    assert_eq!(r.level, Some(Level::Aggressive));
    let reqs: Vec<bool> = s.calls.lock().unwrap().iter().map(|(_, r)| r.aggressive).collect();
    assert_eq!(reqs, [false, true]);
    assert!(s.prompts()[1].contains("aggressive"));
    // Empty: straight to the fallback, marked for later re-summarisation.
    let s = Scripted::new(|_, _| Act::Empty);
    let r = leaf(&engine, cid, s.clone()).await.unwrap().unwrap();
    assert_eq!(r.level, Some(Level::Fallback));
    assert_eq!(r.model.as_deref(), Some(FALLBACK_MODEL));
    assert_eq!(
        s.calls.lock().unwrap().len(),
        1,
        "no aggressive retry after an empty answer"
    );
    let sums = engine.summaries(cid, None).unwrap();
    assert!(sums
        .last()
        .unwrap()
        .fields
        .content
        .contains("Expand for details about:"));
    assert_invariants(&engine, cid);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_accepted_summary_over_three_times_its_target_is_capped() {
    let (_dir, engine, cid) = with_synthetic(json!({"leafChunkTokens": 20000, "freshTailCount": 4}), 120, 1200);
    // Target is 1200 (0.35 × input capped); 4,000 tokens is below the input but over 3×.
    let long = format!("{}\nExpand for details about: everything", "detail ".repeat(2300));
    let r = leaf(&engine, cid, Scripted::new(move |_, _| Act::Text(long.clone())))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(r.level, Some(Level::Capped));
    assert!(r.output_tokens <= 3600, "{}", r.output_tokens);
    let s = engine.summaries(cid, None).unwrap().pop().unwrap();
    assert!(
        s.fields.content.contains("[Capped from") && s.fields.content.ends_with("Expand for details about: everything")
    );
}

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
async fn sweeps_are_bounded_by_iterations_and_deadline() {
    let (_dir, engine, cid) = with_synthetic(json!({"leafChunkTokens": 300, "maxSweepIterations": 3}), 80, 200);
    let r = engine
        .compact(
            cid,
            Scripted::stub(),
            SweepOptions {
                token_budget: 100,
                force: true,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!((r.leaf_passes, r.stop_reason), (3, StopReason::MaxIterations));
    assert_invariants(&engine, cid);

    let (_dir, engine, cid) = with_synthetic(json!({"leafChunkTokens": 300, "sweepDeadlineMs": 150}), 80, 200);
    let slow = Scripted::new(|_, _| {
        std::thread::sleep(std::time::Duration::from_millis(60));
        Act::Stub
    });
    let r = engine
        .compact(
            cid,
            slow,
            SweepOptions {
                token_budget: 100,
                force: true,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(r.stop_reason, StopReason::Deadline);
    assert!(r.leaf_passes >= 1 && r.leaf_passes <= 4, "{}", r.leaf_passes);
    assert_invariants(&engine, cid);

    // Under the threshold and not forced: nothing happens.
    let r = engine
        .compact(
            cid,
            Scripted::stub(),
            SweepOptions {
                token_budget: 10_000_000,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert!(!r.action_taken);
    assert_eq!(r.stop_reason, StopReason::BelowThreshold);
}

/// Every condensed node has ≥ fanout inputs of one depth, and live summaries sit deepest
/// first (the seed's context ordering); with every leaf at the same depth below its root.
/// `relaxed`: a sweep relaxed the fanout (`relaxedFanout`), so nodes need only the hard one.
fn assert_balanced(engine: &Engine, cid: i64, config: &Config, relaxed: bool) {
    let deps = deps(engine);
    let (live, parents) = deps
        .pool
        .read(|conn| {
            let live = LiveContext::load(conn, cid)?;
            let mut parents: HashMap<String, Vec<String>> = HashMap::new();
            let mut stmt = conn.prepare("SELECT summary_id, parent_summary_id FROM summary_parents")?;
            let mut rows = stmt.query([])?;
            while let Some(r) = rows.next()? {
                parents.entry(r.get(0)?).or_default().push(r.get(1)?);
            }
            Ok((live, parents))
        })
        .unwrap();
    let sums: HashMap<String, i64> = engine
        .summaries(cid, None)
        .unwrap()
        .into_iter()
        .map(|s| (s.fields.summary_id, s.fields.depth))
        .collect();
    for (id, inputs) in &parents {
        let d = sums[&inputs[0]];
        let fanout = LiveContext::fanout(config, d, relaxed);
        assert!(
            inputs.len() as i64 >= fanout,
            "{id}: {} inputs at depth {d} < fanout {fanout}",
            inputs.len()
        );
    }
    // Depth below each live root is uniform: walking any path down reaches leaves after
    // exactly `depth` steps.
    fn leaf_distances(id: &str, parents: &HashMap<String, Vec<String>>, d: i64, out: &mut Vec<i64>) {
        match parents.get(id) {
            None => out.push(d),
            Some(ps) => ps.iter().for_each(|p| leaf_distances(p, parents, d + 1, out)),
        }
    }
    let live_depths: Vec<i64> = live.items.iter().filter_map(|i| i.depth()).collect();
    assert!(
        live_depths.windows(2).all(|w| w[0] >= w[1]),
        "live summaries not deepest-first: {live_depths:?}"
    );
    for item in &live.items {
        if let (ItemRef::Summary(id), Some(depth)) = (&item.r, item.depth()) {
            let mut dist = Vec::new();
            leaf_distances(id, &parents, 0, &mut dist);
            assert!(
                dist.iter().all(|x| *x == depth),
                "{id} (depth {depth}) has leaves at {dist:?}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_transcripts_compact_to_a_balanced_dag_with_the_offline_summarizer() {
    for name in [crate::engine::tests::THEME, crate::engine::tests::REFACTOR] {
        let dir = tempfile::tempdir().unwrap();
        // Leaves of ~300 tokens and a 3,000-token chunk budget: runs of 8+ leaves fit.
        let engine = engine_with(
            &dir,
            json!({"leafChunkTokens": 3000, "leafTargetTokens": 300, "freshTailCount": 32}),
        );
        let msgs = crate::engine::tests::transcript(name);
        let cid = engine
            .ingest(&Target::Session(name.into()), &msgs)
            .unwrap()
            .conversation_id;
        let before = engine.messages(cid, 0, 100_000).unwrap();
        let r = compact_offline(&engine, cid, 8000).await;
        assert!(r.action_taken && r.tokens_after < r.tokens_before / 3, "{name}: {r:?}");
        assert!(r.condensed_passes.contains_key(&1), "{name}: no depth-1 node: {r:?}");
        let sums = engine.summaries(cid, None).unwrap();
        assert!(sums
            .iter()
            .all(|s| s.fields.model == OFFLINE_MODEL || s.fields.model == FALLBACK_MODEL));
        assert!(sums
            .iter()
            .all(|s| s.fields.content.contains("Expand for details about:")));
        assert_balanced(&engine, cid, engine.config(), r.relaxed_fanout);
        assert_invariants(&engine, cid);
        // Lossless: every message is exactly as it was.
        assert_eq!(engine.messages(cid, 0, 100_000).unwrap().len(), before.len());
        for (a, b) in before.iter().zip(engine.messages(cid, 0, 100_000).unwrap()) {
            assert_eq!(a.content, b.content);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_rounds_of_ingest_and_compaction_keep_the_tree_balanced() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_with(&dir, json!({"leafChunkTokens": 400, "freshTailCount": 6}));
    let all = synthetic(600, 150);
    let mut cid = 0;
    let mut relaxed = false;
    for round in all.chunks(50) {
        cid = engine
            .ingest(&Target::Session("s".into()), round)
            .unwrap()
            .conversation_id;
        let r = engine
            .compact(
                cid,
                Scripted::stub(),
                SweepOptions {
                    token_budget: 2000,
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        relaxed |= r.relaxed_fanout;
        assert_invariants(&engine, cid);
        assert_balanced(&engine, cid, engine.config(), relaxed);
    }
    let depths: Vec<i64> = engine
        .summaries(cid, None)
        .unwrap()
        .iter()
        .map(|s| s.fields.depth)
        .collect();
    assert!(
        depths.iter().max().copied().unwrap_or(0) >= 2,
        "expected depth 2 after 600 messages: {depths:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hard_trigger_relaxes_the_fanout() {
    let (_dir, engine, cid) = with_synthetic(json!({"leafChunkTokens": 300}), 30, 200);
    for _ in 0..3 {
        leaf(&engine, cid, Scripted::stub()).await.unwrap().unwrap();
    }
    // Three leaves: below the leaf fanout of 8, but enough for the hard fanout of 2.
    assert!(engine
        .pass(cid, SummaryKind::Condensed, Scripted::stub(), PassOptions::default())
        .await
        .unwrap()
        .is_none());
    let r = engine
        .pass(
            cid,
            SummaryKind::Condensed,
            Scripted::stub(),
            PassOptions {
                hard_trigger: true,
                ..Default::default()
            },
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(r.depth, 1);
    assert_invariants(&engine, cid);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweep_still_over_the_threshold_relaxes_the_fanout_to_converge() {
    // Leaf summaries of ~100 tokens and chunks of 300: at most 3 fit a condensation chunk,
    // never the leaf fanout of 8. The seed's sweep would stop over the budget.
    let (_dir, engine, cid) = with_synthetic(
        json!({"leafChunkTokens": 300, "freshTailCount": 2, "maxSweepIterations": 500}),
        60,
        200,
    );
    let wordy = Scripted::new(|_, r| {
        Act::Text(format!(
            "{} {}\nExpand for details about: x",
            r.kind.as_str(),
            "word ".repeat(360)
        ))
    });
    let sweep = |budget: i64| {
        engine.compact(
            cid,
            wordy.clone(),
            SweepOptions {
                token_budget: budget,
                force: false,
                pass: PassOptions::default(),
                cancel: None,
            },
        )
    };
    let r = sweep(800).await.unwrap();
    assert!(r.relaxed_fanout, "{r:?}");
    assert!(!r.condensed_passes.is_empty(), "{r:?}");
    assert!(r.tokens_after < r.tokens_before / 2, "{r:?}");
    assert_invariants(&engine, cid);
    // Under a budget it already fits, nothing is relaxed.
    let calm = sweep(10_000_000).await.unwrap();
    assert!(!calm.relaxed_fanout && !calm.action_taken);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn incremental_condensation_follows_a_leaf_pass() {
    let (_dir, engine, cid) = with_synthetic(
        json!({"leafChunkTokens": 300, "leafMinFanout": 3, "incrementalMaxDepth": 1}),
        40,
        200,
    );
    let mut incremental = 0;
    for _ in 0..4 {
        let r = leaf(&engine, cid, Scripted::stub()).await.unwrap().unwrap();
        incremental += r.incremental.len();
    }
    assert_eq!(incremental, 1);
    assert_eq!(engine.summaries(cid, Some(1)).unwrap().len(), 1);
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

#[test]
fn evaluate_reports_threshold_leaf_and_rolling_triggers() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_with(
        &dir,
        json!({"freshTailCount": 4, "messagesPerSummary": 20, "leafChunkTokens": 100000}),
    );
    let msgs: Vec<Value> = (0..45)
        .map(|i| json!({"role": if i % 2 == 0 { "user" } else { "assistant" }, "content": format!("message number {i}")}))
        .collect();
    // US-301: 19 messages and no summary: no trigger; the 20th triggers.
    let cid = engine
        .ingest(&Target::Session("s".into()), &msgs[..19])
        .unwrap()
        .conversation_id;
    let e = engine.evaluate(cid, 1000, None).unwrap();
    assert_eq!(e.rolling.messages_since_last_summary, 19);
    assert!(!e.rolling.should_summarize);
    engine.ingest(&Target::Conversation(cid), &msgs[19..20]).unwrap();
    assert!(engine.evaluate(cid, 1000, None).unwrap().rolling.should_summarize);
    // Summarise everything outside the fresh tail (the tail stays verbatim).
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(engine.pass(cid, SummaryKind::Leaf, Scripted::stub(), PassOptions::default()))
        .unwrap()
        .unwrap();
    let e = engine.evaluate(cid, 1000, None).unwrap();
    assert_eq!(
        e.rolling.covered_messages, 16,
        "messages_covered reflects what was summarised"
    );
    assert_eq!(e.rolling.messages_since_last_summary, 4);
    // 25 messages with 20 covered... here 16 covered: 5 more arrive, 9 since: no trigger.
    engine.ingest(&Target::Conversation(cid), &msgs[20..25]).unwrap();
    assert!(!engine.evaluate(cid, 1000, None).unwrap().rolling.should_summarize);
    // 45 messages: 29 since the last summary ≥ 20: triggered.
    engine.ingest(&Target::Conversation(cid), &msgs[25..45]).unwrap();
    let e = engine.evaluate(cid, 1000, None).unwrap();
    assert_eq!(e.rolling.messages_since_last_summary, 29);
    assert!(e.rolling.should_summarize);

    // Threshold: strictly greater than floor(0.75 × budget); observed tokens count too.
    let stored = e.stored_tokens;
    let budget = (stored as f64 / 0.75).ceil() as i64 + 10;
    let e = engine.evaluate(cid, budget, None).unwrap();
    assert!(!e.should_compact && e.reason == "none");
    let e = engine.evaluate(cid, budget, Some(budget)).unwrap();
    assert!(e.should_compact && e.reason == "threshold");
    assert_eq!(e.current_tokens, budget);
    assert!(!e.leaf_trigger.should_compact);
}

/// Evaluate's facts as `evaluate` computes them (bounded read + live totals) and as a full
/// read of the live context gives them: they must agree.
fn evaluation_both_ways(engine: &Engine, cid: i64) -> ([i64; 6], [i64; 6]) {
    let e = engine.evaluate(cid, 1000, None).unwrap();
    let bounded = [
        e.stored_tokens,
        e.leaf_trigger.raw_tokens_outside_tail,
        e.rolling.summarizable_messages,
        e.raw_messages,
        e.summaries,
        e.live_items,
    ];
    let conn = crate::db::open_configured(&engine.config().db_path, 1000).unwrap();
    let live = LiveContext::load(&conn, cid).unwrap();
    let tail = live.tail_start(engine.config().fresh_tail_count);
    let raw = live.items.iter().filter(|i| i.is_message()).count() as i64;
    let full = [
        live.stored_tokens(),
        live.raw_tokens_outside_tail(engine.config().fresh_tail_count),
        live.items[..tail].iter().filter(|i| i.is_message()).count() as i64,
        raw,
        live.items.len() as i64 - raw,
        live.items.len() as i64,
    ];
    (bounded, full)
}

mod properties {
    use proptest::prelude::*;

    use super::*;

    #[derive(Clone, Debug)]
    enum Op {
        Ingest(usize),
        Leaf,
        Condensed(bool),
        Compact(bool, bool),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (1usize..40).prop_map(Op::Ingest),
            Just(Op::Leaf),
            any::<bool>().prop_map(Op::Condensed),
            (any::<bool>(), any::<bool>()).prop_map(|(f, h)| Op::Compact(f, h)),
        ]
    }

    fn act() -> impl Strategy<Value = Act> {
        prop_oneof![
            6 => Just(Act::Stub),
            1 => Just(Act::Fail),
            1 => Just(Act::Empty),
            1 => Just(Act::Auth),
            1 => Just(Act::Text("tiny\nExpand for details about: x".into())),
            1 => Just(Act::Text("long ".repeat(3000))),
        ]
    }

    fn messages(start: usize, n: usize, sizes: &[usize]) -> Vec<Value> {
        (start..start + n)
            .map(|i| {
                let text = format!("m{i} {}", "word ".repeat(sizes[i % sizes.len()]));
                match i % 3 {
                    0 => json!({"role": "user", "content": text, "entryId": format!("e{i}")}),
                    1 => json!({"role": "assistant", "content": [{"type": "text", "text": text}], "entryId": format!("e{i}")}),
                    _ => json!({"role": "toolResult", "toolCallId": format!("c{i}"), "content": [{"type": "text", "text": text}], "entryId": format!("e{i}")}),
                }
            })
            .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

        /// DESIGN.md's invariants hold after every operation, whatever the summarizer does;
        /// a failed single pass changes nothing; messages are never changed or lost.
        #[test]
        fn invariants_hold_after_every_pass(
            initial in 5usize..150,
            sizes in prop::collection::vec(1usize..200, 1..8),
            tail in 0i64..10,
            chunk in 100i64..1500,
            leaf_fanout in 2i64..5,
            fanout in 2i64..4,
            incremental in -1i64..2,
            ops in prop::collection::vec(op(), 1..10),
            acts in prop::collection::vec(act(), 1..12),
        ) {
            let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
            let dir = tempfile::tempdir().unwrap();
            let engine = engine_with(&dir, json!({
                "freshTailCount": tail, "leafChunkTokens": chunk, "leafMinFanout": leaf_fanout,
                "condensedMinFanout": fanout, "condensedTargetTokens": 5, "incrementalMaxDepth": incremental,
                "maxSweepIterations": 60,
            }));
            let mut total = initial;
            let cid = engine.ingest(&Target::Session("p".into()), &messages(0, initial, &sizes)).unwrap().conversation_id;
            let script = acts.clone();
            let summarizer = Scripted::new(move |i, _| script[i % script.len()].clone());
            for op in ops {
                let before = engine.verify(Some(cid)).unwrap();
                let outcome = rt.block_on(async {
                    match op {
                        Op::Ingest(n) => {
                            engine.ingest(&Target::Conversation(cid), &messages(total, n, &sizes)).map(|_| "ingest")
                        }
                        Op::Leaf => engine.pass(cid, SummaryKind::Leaf, summarizer.clone(), PassOptions::default()).await.map(|_| "pass"),
                        Op::Condensed(hard) => engine
                            .pass(cid, SummaryKind::Condensed, summarizer.clone(), PassOptions { hard_trigger: hard, ..Default::default() })
                            .await
                            .map(|_| "pass"),
                        Op::Compact(force, hard) => engine
                            .compact(cid, summarizer.clone(), SweepOptions {
                                token_budget: 500, force, pass: PassOptions { hard_trigger: hard, ..Default::default() }, cancel: None,
                            })
                            .await
                            .map(|_| "sweep"),
                    }
                });
                if let Op::Ingest(n) = op {
                    total += n;
                }
                let after = engine.verify(Some(cid)).unwrap();
                prop_assert!(after.ok, "after {:?}: {:?}", op, after.problems);
                let (bounded, full) = evaluation_both_ways(&engine, cid);
                prop_assert_eq!(bounded, full, "evaluate's tail-bounded read after {:?}", op);
                prop_assert_eq!(after.messages as usize, total);
                if let Err(e) = &outcome {
                    prop_assert!(["E_SUMMARIZER", "E_TIMEOUT"].contains(&e.code()), "unexpected {e}");
                    if matches!(op, Op::Leaf | Op::Condensed(_)) {
                        prop_assert_eq!(&after.digest, &before.digest, "a failed pass wrote something");
                    }
                }
            }
            // Lossless: every message reads back as it was ingested.
            let stored = engine.messages(cid, 0, 100_000).unwrap();
            let expected = messages(0, total, &sizes);
            prop_assert_eq!(stored.len(), expected.len());
            for (s, e) in stored.iter().zip(&expected) {
                prop_assert_eq!(&s.content, &e["content"]);
            }
        }
    }
}
