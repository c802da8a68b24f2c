//! Random interleavings of ingest, passes, sweeps and failures keep every invariant.

use proptest::prelude::*;

use super::sweeps::evaluation_both_ways;
use super::*;

#[derive(Clone, Debug)]
enum Op {
    Ingest(usize),
    Leaf,
    Condensed(bool),
    /// force, hardTrigger, target "budget".
    Compact(bool, bool, bool),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (1usize..40).prop_map(Op::Ingest),
        Just(Op::Leaf),
        any::<bool>().prop_map(Op::Condensed),
        (any::<bool>(), any::<bool>(), any::<bool>()).prop_map(|(f, h, b)| Op::Compact(f, h, b)),
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

/// Engine options of a random compaction policy, with at most `iterations` passes a sweep.
fn policy(iterations: std::ops::Range<i64>) -> impl Strategy<Value = Value> {
    (
        0i64..10,
        100i64..1500,
        2i64..5,
        2i64..4,
        -1i64..2,
        iterations,
        prop::option::of(0i64..2000),
    )
        .prop_map(
            |(tail, chunk, leaf_fanout, fanout, incremental, iterations, tail_tokens)| {
                json!({
                    "freshTailCount": tail, "leafChunkTokens": chunk, "leafMinFanout": leaf_fanout,
                    "condensedMinFanout": fanout, "condensedTargetTokens": 5, "incrementalMaxDepth": incremental,
                    "maxSweepIterations": iterations, "freshTailMaxTokens": tail_tokens,
                })
            },
        )
}

/// Runs `op` (an ingest appends messages from `total` on); what it returned, as text.
async fn apply(
    engine: &Engine,
    cid: i64,
    op: &Op,
    summarizer: Arc<Scripted>,
    total: usize,
    sizes: &[usize],
) -> Result<String> {
    match *op {
        Op::Ingest(n) => engine
            .ingest(&Target::Conversation(cid), &messages(total, n, sizes))
            .map(|r| format!("ingest {}", r.inserted)),
        Op::Leaf => engine
            .pass(cid, SummaryKind::Leaf, summarizer, PassOptions::default())
            .await
            .map(|r| {
                format!(
                    "{:?}",
                    r.map(|r| (r.input_count, r.tokens_before, r.tokens_after, r.incremental.len()))
                )
            }),
        Op::Condensed(hard) => engine
            .pass(
                cid,
                SummaryKind::Condensed,
                summarizer,
                PassOptions {
                    hard_trigger: hard,
                    ..Default::default()
                },
            )
            .await
            .map(|r| {
                format!(
                    "{:?}",
                    r.map(|r| (r.input_count, r.depth, r.tokens_before, r.tokens_after))
                )
            }),
        Op::Compact(force, hard, budget) => engine
            .compact(
                cid,
                summarizer,
                SweepOptions {
                    token_budget: 500,
                    force,
                    target: if budget {
                        SweepTarget::Budget
                    } else {
                        SweepTarget::Threshold
                    },
                    pass: PassOptions {
                        hard_trigger: hard,
                        ..Default::default()
                    },
                    cancel: None,
                },
            )
            .await
            .map(|r| {
                format!(
                    "{} {:?} {} {} {:?}",
                    r.leaf_passes, r.condensed_passes, r.tokens_before, r.tokens_after, r.stop_reason
                )
            }),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    /// DESIGN.md's invariants hold after every operation, whatever the summarizer does;
    /// a failed single pass changes nothing; messages are never changed or lost.
    #[test]
    fn invariants_hold_after_every_pass(
        initial in 5usize..150,
        sizes in prop::collection::vec(1usize..200, 1..8),
        options in policy(60..61),
        ops in prop::collection::vec(op(), 1..10),
        acts in prop::collection::vec(act(), 1..12),
    ) {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let engine = engine_with(&dir, options);
        let mut total = initial;
        let cid = engine.ingest(&Target::Session("p".into()), &messages(0, initial, &sizes)).unwrap().conversation_id;
        let script = acts.clone();
        let summarizer = Scripted::new(move |i, _| script[i % script.len()].clone());
        for op in ops {
            let before = engine.verify(Some(cid)).unwrap();
            let outcome = rt.block_on(apply(&engine, cid, &op, summarizer.clone(), total, &sizes));
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

/// The live context as a comparable shape: each item as a message id, or as a summary's depth
/// and the messages it covers (summary ids are random).
fn shape(engine: &Engine, cid: i64) -> Vec<(i64, Vec<i64>)> {
    deps(engine)
        .backend
        .sqlite()
        .unwrap()
        .read(|conn| {
            let mut covered = conn.prepare(
                "WITH RECURSIVE below(id) AS (SELECT ?1 UNION SELECT parent_summary_id FROM summary_parents, below
                   WHERE summary_parents.summary_id = below.id)
                 SELECT message_id FROM summary_messages WHERE summary_id IN (SELECT id FROM below) ORDER BY message_id",
            )?;
            let mut out = Vec::new();
            for e in LiveContext::load(conn, cid)?.entries() {
                match (e.message_id, e.summary_id) {
                    (Some(m), _) => out.push((-1, vec![m])),
                    (_, Some(s)) => {
                        let ids = covered.query_map([&s], |r| r.get(0))?.collect::<rusqlite::Result<Vec<i64>>>()?;
                        out.push((e.depth.unwrap_or(-2), ids));
                    }
                    _ => {}
                }
            }
            Ok(out)
        })
        .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// Compaction reads the oldest items, the tail and the totals, and more only when a
    /// decision needs it; writes move the rows before a span up instead of the many after it.
    /// Neither changes a decision: with a one-message read window and every write moving the
    /// front, every operation has the outcome, and the context the shape, of the run that reads
    /// the whole context and renumbers from 0.
    #[test]
    fn a_partly_read_context_decides_as_the_whole_one(
        initial in 5usize..200,
        sizes in prop::collection::vec(1usize..200, 1..8),
        options in policy(1..30),
        ops in prop::collection::vec(op(), 1..10),
        acts in prop::collection::vec(act(), 1..12),
    ) {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let partly = engine_tuned(&dir_a, options.clone(), |c| {
            c.head_window = 1;
            c.shift_down_rows = 0;
        });
        let whole = engine_tuned(&dir_b, options, |c| {
            c.head_window = 1 << 30;
            c.shift_down_rows = i64::MAX;
        });
        let mut total = initial;
        let mut cid = 0;
        for engine in [&partly, &whole] {
            cid = engine.ingest(&Target::Session("p".into()), &messages(0, initial, &sizes)).unwrap().conversation_id;
        }
        let summarizers: Vec<Arc<Scripted>> = (0..2)
            .map(|_| {
                let script = acts.clone();
                Scripted::new(move |i, _| script[i % script.len()].clone())
            })
            .collect();
        for op in ops {
            let mut outcomes = Vec::new();
            for (engine, summarizer) in [&partly, &whole].into_iter().zip(&summarizers) {
                let outcome = rt.block_on(apply(engine, cid, &op, summarizer.clone(), total, &sizes));
                outcomes.push(outcome.map_err(|e| e.code()));
                let report = engine.verify(Some(cid)).unwrap();
                prop_assert!(report.ok, "after {:?}: {:?}", op, report.problems);
            }
            if let Op::Ingest(n) = op {
                total += n;
            }
            prop_assert_eq!(&outcomes[0], &outcomes[1], "outcome of {:?}", op);
            prop_assert_eq!(shape(&partly, cid), shape(&whole, cid), "context after {:?}", op);
        }
    }
}
