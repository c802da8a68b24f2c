//! One pass at a time: what a leaf and a condensed pass write, escalation, fallback and capping,
//! and a failing summarizer leaving nothing behind.

use super::*;
use crate::api::SummaryFilter;

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

    let sums = engine.summaries(cid, &SummaryFilter::default()).unwrap();
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
    let node = engine
        .summaries(cid, &SummaryFilter::at_depth(1))
        .unwrap()
        .into_iter()
        .next()
        .unwrap();
    let leaves = engine.summaries(cid, &SummaryFilter::at_depth(0)).unwrap();
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
        engine.summaries(cid, &SummaryFilter::default()).unwrap().len(),
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
    let sums = engine.summaries(cid, &SummaryFilter::default()).unwrap();
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
    let s = engine.summaries(cid, &SummaryFilter::default()).unwrap().pop().unwrap();
    assert!(
        s.fields.content.contains("[Capped from") && s.fields.content.ends_with("Expand for details about: everything")
    );
}
