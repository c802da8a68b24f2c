//! Sweeps: bounds, a balanced DAG on real and synthetic histories, relaxed fanout, incremental
//! condensation, and the decisions `evaluate` reports.

use super::*;
use crate::api::{StopReason, SummaryFilter};

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
        .backend
        .sqlite()
        .unwrap()
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
        .summaries(cid, &SummaryFilter::default())
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
    for name in [crate::test_support::THEME, crate::test_support::REFACTOR] {
        let dir = tempfile::tempdir().unwrap();
        // Leaves of ~300 tokens and a 3,000-token chunk budget: runs of 8+ leaves fit.
        let engine = engine_with(
            &dir,
            json!({"leafChunkTokens": 3000, "leafTargetTokens": 300, "freshTailCount": 32}),
        );
        let msgs = crate::test_support::transcript(name);
        let cid = engine
            .ingest(&Target::Session(name.into()), &msgs)
            .unwrap()
            .conversation_id;
        let before = engine.messages(cid, 0, 100_000).unwrap();
        let r = compact_offline(&engine, cid, 8000).await;
        assert!(r.action_taken && r.tokens_after < r.tokens_before / 3, "{name}: {r:?}");
        assert!(r.condensed_passes.contains_key(&1), "{name}: no depth-1 node: {r:?}");
        let sums = engine.summaries(cid, &SummaryFilter::default()).unwrap();
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
        .summaries(cid, &SummaryFilter::default())
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
                target: Default::default(),
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
    assert_eq!(engine.summaries(cid, &SummaryFilter::at_depth(1)).unwrap().len(), 1);
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

    // Threshold: strictly greater than floor(0.75 × budget); observed tokens count too. Just
    // under it, the context is past the early mark (0.1 + (0.75 − 0.1) × ⅔ ≈ 0.53 of the budget
    // with the defaults) and its newest turn (one short user
    // message) is small: a sweep is due early. Under the early mark, none is.
    let stored = e.stored_tokens;
    let budget = (stored as f64 / 0.75).ceil() as i64 + 10;
    let e = engine.evaluate(cid, budget, None).unwrap();
    assert!(e.should_compact && e.reason == "early", "{e:?}");
    let budget = (stored as f64 / 0.5).ceil() as i64 + 10;
    let e = engine.evaluate(cid, budget, None).unwrap();
    assert!(!e.should_compact && e.reason == "none", "{e:?}");
    let e = engine.evaluate(cid, budget, Some(budget)).unwrap();
    assert!(e.should_compact && e.reason == "threshold");
    assert_eq!(e.current_tokens, budget);
    assert!(!e.leaf_trigger.should_compact);
}

/// Evaluate's facts as `evaluate` computes them (bounded read + live totals) and as a full
/// read of the live context gives them: they must agree.
pub(super) fn evaluation_both_ways(engine: &Engine, cid: i64) -> ([i64; 6], [i64; 6]) {
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
    // The rule `evaluate` applies for its budget.
    let rule = TailRule::of(engine.config(), Some(1000));
    let tail = live.tail_start(rule);
    let raw = live.items.iter().filter(|i| i.is_message()).count() as i64;
    let full = [
        live.stored_tokens(),
        live.raw_tokens_outside_tail(rule),
        live.items[..tail].iter().filter(|i| i.is_message()).count() as i64,
        raw,
        live.items.len() as i64 - raw,
        live.items.len() as i64,
    ];
    (bounded, full)
}

/// Compaction reads the oldest items and the tail, and the totals describe the middle: the
/// tokens and the leaf trigger's measure equal the whole context's, and reading on until the
/// gap closes gives exactly the whole context.
#[test]
fn a_partly_read_context_adds_up_to_the_whole_one() {
    let (_dir, engine, cid) = with_synthetic(json!({}), 2_000, 300);
    let count = engine.config().fresh_tail_count;
    // Bounded in messages, and in tokens (a few of the synthetic messages).
    for fresh in [
        TailRule::messages(count),
        TailRule {
            count,
            max_tokens: 1_500,
        },
    ] {
        deps(&engine)
            .backend
            .sqlite()
            .unwrap()
            .read(|conn| {
                let whole = LiveContext::load(conn, cid)?;
                let mut partly = LiveContext::load_window(conn, cid, fresh, 16)?;
                let gap = partly.gap.clone().expect("a gap on 2,000 messages");
                assert_eq!(gap.at, 16, "16 messages first");
                assert!(partly.items.len() < 100, "{} items read", partly.items.len());
                assert_eq!(partly.stored_tokens(), whole.stored_tokens());
                assert_eq!(
                    partly.raw_tokens_outside_tail(fresh),
                    whole.raw_tokens_outside_tail(fresh)
                );
                assert_eq!(
                    partly.items.len() - partly.tail_start(fresh),
                    whole.items.len() - whole.tail_start(fresh),
                    "the same tail"
                );
                let mut reads = 0;
                while partly.gap.is_some() {
                    let read = partly.read_more(conn, 300)?;
                    assert!(!read.is_empty() || partly.gap.is_none());
                    reads += 1;
                }
                assert_eq!(reads, 7, "300 at a time");
                assert_eq!(partly.items, whole.items);
                assert_eq!(partly.stored_tokens(), whole.stored_tokens());
                Ok(())
            })
            .unwrap();
    }
}

/// A bounded sweep over a long history writes at the front: the rows after its span keep
/// their ordinals (the newest message's is unchanged), those before it move up, and the
/// ordinals stay contiguous.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweep_over_a_long_history_leaves_the_rows_after_it_in_place() {
    let (_dir, engine, cid) = with_synthetic(json!({"leafChunkTokens": 2000, "maxSweepIterations": 4}), 3_000, 300);
    let newest = |engine: &Engine| {
        engine
            .context(cid)
            .unwrap()
            .last()
            .map(|e| (e.ordinal, e.message_id))
            .unwrap()
    };
    let before = newest(&engine);
    assert_eq!(before.0, 2_999);
    let mut passes = 0;
    for _ in 0..3 {
        let r = engine
            .compact(
                cid,
                Scripted::stub(),
                SweepOptions {
                    token_budget: 1_000,
                    force: true,
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        assert_eq!(r.stop_reason, StopReason::MaxIterations);
        passes += r.leaf_passes + r.condensed_passes.values().sum::<i64>();
    }
    assert_eq!(passes, 12);
    assert_eq!(newest(&engine), before, "the newest row did not move");
    let entries = engine.context(cid).unwrap();
    assert!(entries[0].ordinal > 0, "the front moved up");
    assert_eq!(
        entries.last().unwrap().ordinal - entries[0].ordinal + 1,
        entries.len() as i64
    );
    assert_eq!(engine.summaries(cid, &SummaryFilter::default()).unwrap().len(), 12);
    assert_invariants(&engine, cid);
}

/// A user who pastes ~6k-token logs into a 40k window: every turn fits the 32-message tail
/// by count, so only a tail bounded in tokens leaves anything to compact. `evaluate` says a
/// sweep is due, and the sweep brings the context under the threshold with no new turn lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tail_bounded_in_tokens_lets_long_turns_compact() {
    let turns: Vec<Value> = (0..16)
        .map(|i| {
            if i % 2 == 0 {
                json!({"role": "user", "content": format!("turn {i} log:\n{}", "error at line 42 of db.rs\n".repeat(900)), "entryId": format!("e{i}")})
            } else {
                json!({"role": "assistant", "content": [{"type": "text", "text": format!("reply {i}")}], "entryId": format!("e{i}")})
            }
        })
        .collect();
    let budget = 40_000;
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_with(&dir, json!({"freshTailCount": 32, "leafChunkTokens": 20_000}));
    let cid = engine
        .ingest(&Target::Session("s".into()), &turns)
        .unwrap()
        .conversation_id;
    let ev = engine.evaluate(cid, budget, None).unwrap();
    assert!(ev.should_compact, "{ev:?}");
    assert!(
        ev.leaf_trigger.should_compact,
        "16k of tail leave ~33k outside it: {ev:?}"
    );
    let options = SweepOptions {
        token_budget: budget,
        ..Default::default()
    };
    let r = engine.compact(cid, Scripted::stub(), options).await.unwrap();
    assert!(r.action_taken && !r.compacted_tail, "{r:?}");
    assert!(r.tokens_after <= ev.threshold, "{} > {}", r.tokens_after, ev.threshold);
    assert_invariants(&engine, cid);
    // The newest turns are still raw, the newest user message among them.
    let context = engine.context(cid).unwrap();
    assert!(context
        .iter()
        .any(|e| e.kind == crate::api::ItemKind::Message && e.role.as_deref() == Some("user")));
    assert!(
        context
            .iter()
            .filter(|e| e.kind == crate::api::ItemKind::Message)
            .count()
            >= 2,
        "{context:?}"
    );
}

/// Budget pressure with a tail that holds everything (a huge `freshTailMaxTokens`): the usual
/// sweep finds nothing outside the tail, so `target: "budget"` compacts into it, oldest first,
/// down to the newest turn, and stops once under the threshold.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn budget_pressure_compacts_into_the_tail_down_to_the_newest_turn() {
    let turns: Vec<Value> = (0..12)
        .map(|i| {
            let role = if i % 2 == 0 { "user" } else { "assistant" };
            json!({"role": role, "content": format!("m{i} {}", "word ".repeat(2_000)), "entryId": format!("e{i}")})
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_with(
        &dir,
        json!({"freshTailCount": 32, "freshTailMaxTokens": 1_000_000, "leafChunkTokens": 3_000}),
    );
    let cid = engine
        .ingest(&Target::Session("s".into()), &turns)
        .unwrap()
        .conversation_id;
    let budget = 8_000;
    let sweep = |target| SweepOptions {
        token_budget: budget,
        target,
        ..Default::default()
    };
    let r = engine
        .compact(cid, Scripted::stub(), sweep(SweepTarget::Threshold))
        .await
        .unwrap();
    assert_eq!(
        (r.action_taken, r.stop_reason),
        (false, StopReason::NoCandidates),
        "{r:?}"
    );
    let r = engine
        .compact(cid, Scripted::stub(), sweep(SweepTarget::Budget))
        .await
        .unwrap();
    assert!(r.action_taken && r.compacted_tail, "{r:?}");
    assert!(r.tokens_after <= r.threshold, "{r:?}");
    assert_invariants(&engine, cid);
    let context = engine.context(cid).unwrap();
    let raw: Vec<_> = context
        .iter()
        .filter(|e| e.kind == crate::api::ItemKind::Message)
        .collect();
    assert!(!raw.is_empty(), "the newest turn is never compacted");
    assert_eq!(
        raw.last().and_then(|e| e.message_id),
        context.last().and_then(|e| e.message_id)
    );
    // Oldest first: what is left raw is the newest messages, contiguous at the end.
    let first_raw = context
        .iter()
        .position(|e| e.kind == crate::api::ItemKind::Message)
        .unwrap();
    assert!(
        context[first_raw..]
            .iter()
            .all(|e| e.kind == crate::api::ItemKind::Message),
        "{context:?}"
    );
}

/// `target: leaf` (background maintenance): leaf passes only, while the raw messages outside
/// the fresh tail reach `leafChunkTokens`; no condensation even where a run is eligible.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leaf_sweep_runs_leaf_passes_while_the_leaf_trigger_is_due() {
    let (_dir, engine, cid) = with_synthetic(json!({"leafChunkTokens": 600, "leafMinFanout": 2}), 80, 200);
    let budget = 1_000_000;
    let due = |engine: &Engine| engine.evaluate(cid, budget, None).unwrap().leaf_trigger;
    assert!(due(&engine).should_compact);
    let r = engine
        .compact(
            cid,
            Scripted::stub(),
            SweepOptions {
                token_budget: budget,
                target: SweepTarget::Leaf,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert!(r.leaf_passes >= 2, "{r:?}");
    assert!(r.condensed_passes.is_empty(), "{r:?}");
    assert_eq!(r.stop_reason, StopReason::BelowThreshold, "{r:?}");
    let trigger = due(&engine);
    assert!(!trigger.should_compact, "{trigger:?}");
    assert_invariants(&engine, cid);
    // Not due: nothing runs.
    let again = engine
        .compact(
            cid,
            Scripted::stub(),
            SweepOptions {
                token_budget: budget,
                target: SweepTarget::Leaf,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert!(!again.action_taken && again.leaf_passes == 0, "{again:?}");
}

/// `target: fit`: nothing when the assembled context already fits (unless `force`); otherwise
/// a budget sweep whatever the threshold, and `fit` says where the context ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fit_sweep_compacts_only_what_does_not_fit_and_reports_the_estimate() {
    let (_dir, engine, cid) = with_synthetic(json!({"leafChunkTokens": 600}), 60, 200);
    let fit = |budget, force| SweepOptions {
        token_budget: budget,
        target: SweepTarget::Fit,
        force,
        ..Default::default()
    };
    let before = assert_invariants(&engine, cid);
    let roomy = engine
        .compact(cid, Scripted::stub(), fit(1_000_000, false))
        .await
        .unwrap();
    assert_eq!(roomy.stop_reason, StopReason::Fits, "{roomy:?}");
    let f = roomy.fit.clone().unwrap();
    assert!(
        f.fits && f.tokens_before == f.tokens_after && f.tokens_after > 0,
        "{f:?}"
    );
    assert_eq!(assert_invariants(&engine, cid), before, "nothing written");

    // Assembly evicts the oldest items to fit any budget down to the newest turn's: a budget
    // under that is one the context does not fit. The sweep compacts all it may (into the
    // tail, down to that turn) and says it still does not fit.
    let tiny = 10;
    let r = engine.compact(cid, Scripted::stub(), fit(tiny, false)).await.unwrap();
    let f = r.fit.clone().unwrap();
    assert!(r.action_taken && r.compacted_tail, "{r:?}");
    assert!(
        !f.fits && f.fresh_tail_tokens > tiny && f.tokens_after <= f.tokens_before,
        "{f:?}"
    );
    assert_invariants(&engine, cid);
    // `force` compacts although it fits.
    let forced = engine
        .compact(cid, Scripted::stub(), fit(1_000_000, true))
        .await
        .unwrap();
    assert_ne!(forced.stop_reason, StopReason::Fits, "{forced:?}");
    assert!(forced.fit.as_ref().is_some_and(|f| f.fits), "{forced:?}");
    assert_invariants(&engine, cid);
}

/// Per-call instructions reach the prompt through the templates' `CustomInstructions`, after
/// the configured ones; the summarizer is told how long the engine waits for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_call_instructions_reach_the_prompt_after_the_configured_ones() {
    let (_dir, engine, cid) = with_synthetic(
        json!({"leafChunkTokens": 600, "customInstructions": "CONFIGURED-RULE", "summaryTimeoutMs": 4321}),
        40,
        200,
    );
    let s = Scripted::stub();
    engine
        .pass(
            cid,
            SummaryKind::Leaf,
            s.clone(),
            PassOptions {
                custom_instructions: Some("  focus on PER-CALL-RULE  ".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap()
        .unwrap();
    let calls = s.calls.lock().unwrap().clone();
    let (prompt, request) = &calls[0];
    let configured = prompt
        .find("CONFIGURED-RULE")
        .expect("configured instructions in the prompt");
    let call = prompt
        .find("focus on PER-CALL-RULE")
        .expect("the call's instructions in the prompt");
    assert!(configured < call);
    assert_eq!(request.timeout_ms, 4321);
}

/// `onSummaryTimeout: fallback`: a summarizer that never answers gets the deterministic
/// fallback written (marked), where the default fails the pass with E_TIMEOUT.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timeout_writes_the_fallback_when_the_caller_asks_for_it() {
    let (_dir, engine, cid) = with_synthetic(json!({"leafChunkTokens": 600, "summaryTimeoutMs": 100}), 40, 200);
    let hang = || Scripted::new(|_, _| Act::Hang);
    let before = assert_invariants(&engine, cid);
    let err = engine
        .pass(cid, SummaryKind::Leaf, hang(), PassOptions::default())
        .await
        .unwrap_err();
    assert_eq!(err.code(), "E_TIMEOUT");
    assert_eq!(assert_invariants(&engine, cid), before);
    let r = engine
        .pass(
            cid,
            SummaryKind::Leaf,
            hang(),
            PassOptions {
                on_summary_timeout: crate::summarizer::TimeoutPolicy::Fallback,
                ..Default::default()
            },
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(r.level, Some(Level::Fallback), "{r:?}");
    assert_invariants(&engine, cid);
}

/// A budget sweep (maintenance over the threshold) goes down to the low-water mark in one go,
/// into the configured fresh tail as far as that takes and never past the newest turn, so that
/// the next sweep is far off; it stops once under the mark.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_sweep_goes_down_to_the_low_water_mark_in_one_go() {
    let budget = 20_000;
    for low_water in [0.2, 0.4] {
        let (_dir, engine, cid) = with_synthetic(
            json!({"contextThreshold": 0.75, "contextLowWater": low_water, "freshTailCount": 32, "leafChunkTokens": 20_000}),
            120,
            600,
        );
        let before = engine.evaluate(cid, budget, None).unwrap();
        assert!(before.should_compact, "{before:?}");
        let r = engine
            .compact(
                cid,
                Scripted::stub(),
                SweepOptions {
                    token_budget: budget,
                    target: SweepTarget::Budget,
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        let goal = (low_water * budget as f64) as i64;
        assert!(r.action_taken && r.tokens_after <= goal, "low water {low_water}: {r:?}");
        // The configured fresh tail (32 messages, ~5k tokens) holds more than the lower mark
        // allows, and less than the higher one.
        assert_eq!(r.compacted_tail, low_water < 0.25, "{r:?}");
        // One step, not a pass per chunk of the old leaf trigger: the context is far under the
        // threshold, and no sweep is due until it has grown back over it.
        assert!(!engine.evaluate(cid, budget, None).unwrap().should_compact);
        let context = engine.context(cid).unwrap();
        assert_eq!(
            context.last().and_then(|e| e.message_id),
            Some(engine.messages(cid, 0, 1_000).unwrap().last().unwrap().message_id)
        );
        assert_invariants(&engine, cid);
    }
}

/// Past the early mark and under the threshold, maintenance sweeps at the first turn that is
/// cheap to send again after a sweep, not at one that pasted a log: `evaluate` and the sweep
/// itself agree, and the sweep goes down to the low-water mark keeping the newest turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_maintenance_sweep_comes_early_at_a_cheap_moment() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_with(
        &dir,
        json!({"contextThreshold": 0.75, "contextLowWater": 0.3, "freshTailCount": 8}),
    );
    let budget = 20_000;
    let words = |n: usize, tag: &str| (0..n).map(|i| format!("{tag}{i}")).collect::<Vec<_>>().join(" ");
    // ~13k tokens of ordinary turns: past the early mark (0.3 + 0.45 × ⅔ = 0.6 → 12,000).
    let mut msgs = Vec::new();
    for t in 0..26 {
        msgs.push(json!({"role": "user", "content": words(130, &format!("q{t}w"))}));
        msgs.push(json!({"role": "assistant", "content": words(130, &format!("a{t}w"))}));
    }
    let cid = engine
        .ingest(&Target::Session("s".into()), &msgs)
        .unwrap()
        .conversation_id;
    // The newest turn pasted a log (~1,400 tokens, over 2 % of the budget): not yet.
    let log = json!({"role": "user", "content": words(900, "log")});
    engine
        .ingest(
            &Target::Conversation(cid),
            &[log, json!({"role": "assistant", "content": "Seen."})],
        )
        .unwrap();
    let e = engine.evaluate(cid, budget, None).unwrap();
    assert!(
        e.current_tokens > e.early_mark && e.current_tokens <= e.threshold,
        "{e:?}"
    );
    assert!(!e.should_compact && e.reason == "none", "{e:?}");
    let options = || SweepOptions {
        token_budget: budget,
        target: SweepTarget::Budget,
        ..Default::default()
    };
    let r = engine.compact(cid, Scripted::stub(), options()).await.unwrap();
    assert!(!r.action_taken && r.stop_reason == StopReason::BelowThreshold, "{r:?}");
    // A short question and its answer: now.
    let turn = [
        json!({"role": "user", "content": "And the next step?"}),
        json!({"role": "assistant", "content": words(60, "reply")}),
    ];
    engine.ingest(&Target::Conversation(cid), &turn).unwrap();
    let e = engine.evaluate(cid, budget, None).unwrap();
    assert!(e.should_compact && e.reason == "early", "{e:?}");
    let r = engine.compact(cid, Scripted::stub(), options()).await.unwrap();
    assert!(
        r.action_taken && r.tokens_after <= (0.3 * budget as f64) as i64,
        "{r:?}"
    );
    let newest = engine.messages(cid, 0, 1_000).unwrap();
    let context = engine.context(cid).unwrap();
    let kept: Vec<_> = context.iter().filter_map(|e| e.message_id).collect();
    assert!(
        kept.ends_with(&[newest[newest.len() - 2].message_id, newest[newest.len() - 1].message_id]),
        "{kept:?}"
    );
    assert!(!engine.evaluate(cid, budget, None).unwrap().should_compact);
    assert_invariants(&engine, cid);

    // Without a fresh tail a sweep keeps no turn verbatim, every moment costs the same, and the
    // sweep waits for the threshold.
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_with(
        &dir,
        json!({"contextThreshold": 0.75, "contextLowWater": 0.3, "freshTailCount": 0}),
    );
    msgs.push(json!({"role": "user", "content": words(900, "log")}));
    msgs.push(json!({"role": "assistant", "content": "Seen."}));
    msgs.extend(turn);
    let cid = engine
        .ingest(&Target::Session("s".into()), &msgs)
        .unwrap()
        .conversation_id;
    let e = engine.evaluate(cid, budget, None).unwrap();
    assert!(e.current_tokens > e.early_mark && !e.should_compact, "{e:?}");
    let r = engine.compact(cid, Scripted::stub(), options()).await.unwrap();
    assert!(!r.action_taken, "{r:?}");
}

/// The mark is never above the threshold: a low water configured higher is the threshold.
#[test]
fn the_low_water_mark_is_at_most_the_threshold() {
    let c = Config::from_options(
        &json!({"dbPath": "x.db", "contextThreshold": 0.5, "contextLowWater": 0.9}),
        None,
    )
    .unwrap();
    assert_eq!(c.context_low_water, 0.5);
    let c = Config::from_options(&json!({"dbPath": "x.db"}), None).unwrap();
    assert_eq!((c.context_threshold, c.context_low_water), (0.75, 0.1));
}
