//! `minFidelity` end to end: the retry with the missing identifiers listed, the mark when the
//! retry still scores under, and `rewrite` with `lowFidelity` clearing it.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use rusqlite::Connection;
use serde_json::{json, Value};

use crate::api::{Description, PassOptions, SummaryFilter};
use crate::engine::Engine;
use crate::rewrite::RewriteOptions;
use crate::store::conversations::Target;
use crate::store::fidelity_scores as store;
use crate::summarizer::SummaryKind;
use crate::test_support::{engine_with, Act, Scripted};

fn conversation() -> Vec<Value> {
    vec![
        json!({"role": "user", "content": "Please fix the crash in src/auth/login.ts and make sure npm test passes."}),
        json!({"role": "assistant", "content": [
            {"type": "text", "text": "Reading it first."},
            {"type": "toolCall", "id": "c1", "name": "read", "arguments": {"path": "src/auth/login.ts"}},
            {"type": "toolCall", "id": "c2", "name": "bash", "arguments": {"command": "npm test"}},
        ]}),
        json!({"role": "toolResult", "toolCallId": "c1", "content": "export function validateUser() {}"}),
        json!({"role": "toolResult", "toolCallId": "c2", "content": "Tests 3 failed | 9 passed (12)"}),
        json!({"role": "assistant", "content": "The session guard was missing; fixed it in validateUser."}),
        json!({"role": "user", "content": "thanks"}),
    ]
}

fn setup(extra: Value) -> (tempfile::TempDir, Engine, i64) {
    let dir = tempfile::tempdir().unwrap();
    let mut opts = json!({"freshTailCount": 0, "leafChunkTokens": 1000});
    for (k, v) in extra.as_object().unwrap() {
        opts[k] = v.clone();
    }
    let engine = engine_with(&dir, opts);
    let cid = engine
        .ingest(&Target::Session("s".into()), &conversation())
        .unwrap()
        .conversation_id;
    (dir, engine, cid)
}

fn stored(engine: &Engine, summary_id: &str) -> store::StoredFidelity {
    let conn = Connection::open(&engine.config().db_path).unwrap();
    store::get(&conn, summary_id)
        .unwrap()
        .expect("a score is written with the summary")
}

/// One leaf pass answered with `PRECISE`; its summary id.
async fn precise_leaf(engine: &Engine, cid: i64) -> String {
    let s = Scripted::new(|_, _| Act::Text(PRECISE.into()));
    let pass = engine.pass(cid, SummaryKind::Leaf, s, PassOptions::default()).await;
    pass.unwrap().unwrap().summary_id.unwrap()
}

const VAGUE: &str = "Worked on the login code.";
const PRECISE: &str = "Fixed the session guard in validateUser (src/auth/login.ts); npm test had 3 failed.";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_summary_under_min_fidelity_is_asked_for_again_with_what_it_left_out() {
    let (_d, engine, cid) = setup(json!({"minFidelity": 0.5}));
    let s = Scripted::new(|i, _| Act::Text(if i == 0 { VAGUE } else { PRECISE }.into()));
    let pass = engine
        .pass(cid, SummaryKind::Leaf, s.clone(), PassOptions::default())
        .await
        .unwrap()
        .unwrap();
    let prompts = s.prompts();
    assert_eq!(prompts.len(), 2, "one retry");
    assert!(!prompts[0].contains("left out identifiers"));
    // The default template does not use MissingIdentifiers: the list is appended.
    let note = prompts[1].rsplit("verbatim").next().unwrap();
    for ident in ["src/auth/login.ts", "npm test"] {
        assert!(note.contains(ident), "{ident} not asked for: {note}");
    }
    let id = pass.summary_id.unwrap();
    let summary = &engine.summaries(cid, &SummaryFilter::default()).unwrap()[0];
    assert_eq!(summary.fields.content, PRECISE);
    let f = stored(&engine, &id);
    assert!(f.fidelity.score.unwrap() >= 0.5 && !f.needs_repair, "{f:?}");
    assert_eq!(summary.fidelity, f.fidelity.score);
    assert!(!summary.low_fidelity);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_min_fidelity_there_is_no_retry_but_the_score_is_stored() {
    let (_d, engine, cid) = setup(json!({}));
    let s = Scripted::new(|_, _| Act::Text(VAGUE.into()));
    let pass = engine
        .pass(cid, SummaryKind::Leaf, s.clone(), PassOptions::default())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(s.prompts().len(), 1);
    let f = stored(&engine, &pass.summary_id.unwrap());
    assert_eq!(f.fidelity.kept, 0);
    assert!(f.fidelity.score == Some(0.0) && !f.needs_repair, "{f:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn still_under_after_the_retry_it_is_kept_marked_and_rewrite_low_fidelity_repairs_it() {
    let (_d, engine, cid) = setup(json!({"minFidelity": 0.5}));
    let vague = Scripted::new(|_, _| Act::Text(VAGUE.into()));
    let pass = engine
        .pass(cid, SummaryKind::Leaf, vague.clone(), PassOptions::default())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(vague.prompts().len(), 2);
    let id = pass.summary_id.unwrap();
    assert!(stored(&engine, &id).needs_repair);
    let listed = &engine.summaries(cid, &SummaryFilter::default()).unwrap()[0];
    assert_eq!(listed.fields.content, VAGUE, "kept, not dropped");
    assert!(listed.low_fidelity);

    let options =
        crate::input::decode::<RewriteOptions>(json!({"lowFidelity": true, "apply": true}), "options").unwrap();
    let cancel = AtomicBool::new(false);
    // The offline summarizer cannot repair it (it would only unmark it).
    let offline = Arc::new(crate::offline::OfflineSummarizer);
    let refused = engine
        .rewrite(cid, offline, &options, &cancel, &|_| {})
        .await
        .unwrap_err();
    assert_eq!(refused.code(), "E_INVALID_INPUT");

    let precise = Scripted::new(|_, _| Act::Text(PRECISE.into()));
    let r = engine.rewrite(cid, precise, &options, &cancel, &|_| {}).await.unwrap();
    assert_eq!(r.entries.len(), 1);
    assert!(r.entries[0].applied && !r.entries[0].needs_repair, "{:?}", r.entries[0]);
    let f = stored(&engine, &id);
    assert!(!f.needs_repair && f.fidelity.score.unwrap() >= 0.5, "{f:?}");
    // Nothing is marked any more: a second run selects nothing.
    let again = Scripted::new(|_, _| Act::Text(PRECISE.into()));
    let r = engine.rewrite(cid, again, &options, &cancel, &|_| {}).await.unwrap();
    assert!(r.entries.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_retry_keeps_the_first_answer_marked() {
    for (i, second) in [Act::Fail, Act::Hang, Act::Empty].into_iter().enumerate() {
        let (_d, engine, cid) = setup(json!({"minFidelity": 0.5, "summaryTimeoutMs": 200}));
        let s = Scripted::new(move |n, _| {
            if n == 0 {
                Act::Text(VAGUE.into())
            } else {
                second.clone()
            }
        });
        let pass = engine
            .pass(cid, SummaryKind::Leaf, s.clone(), PassOptions::default())
            .await
            .unwrap_or_else(|e| panic!("case {i}: {e}"))
            .unwrap();
        assert_eq!(s.prompts().len(), 2, "case {i}");
        let id = pass.summary_id.unwrap();
        assert!(stored(&engine, &id).needs_repair, "case {i}");
        let summaries = engine.summaries(cid, &SummaryFilter::default()).unwrap();
        let written = summaries.iter().find(|x| x.fields.summary_id == id).unwrap();
        assert_eq!(written.fields.content, VAGUE, "case {i}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_template_that_uses_missing_identifiers_gets_them_and_no_appended_note() {
    let prompts = tempfile::tempdir().unwrap();
    std::fs::write(
        prompts.path().join("leaf.tmpl"),
        "Summarise.{{if .MissingIdentifiers}} MISSING: {{.MissingIdentifiers}}{{end}}\n{{.SourceText}}",
    )
    .unwrap();
    let (_d, engine, cid) = setup(json!({"minFidelity": 0.5, "promptDir": prompts.path().to_string_lossy()}));
    let s = Scripted::new(|i, _| Act::Text(if i == 0 { VAGUE } else { PRECISE }.into()));
    engine
        .pass(cid, SummaryKind::Leaf, s.clone(), PassOptions::default())
        .await
        .unwrap()
        .unwrap();
    let p = s.prompts();
    assert!(!p[0].contains("MISSING"));
    assert!(
        p[1].starts_with("Summarise. MISSING: src/auth/login.ts, npm test"),
        "{}",
        p[1]
    );
    assert!(!p[1].contains("left out identifiers"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn old_summaries_are_scored_on_demand() {
    let (_d, engine, cid) = setup(json!({}));
    let id = precise_leaf(&engine, cid).await;
    // As if written before scores existed (or by lossless-claw).
    Connection::open(&engine.config().db_path)
        .unwrap()
        .execute("DELETE FROM lcm_native_summary_fidelity", [])
        .unwrap();
    assert_eq!(
        engine.summaries(cid, &SummaryFilter::default()).unwrap()[0].fidelity,
        None
    );
    let Description::Summary(d) = engine.describe(&crate::recall::ItemId::Summary(id.clone())).unwrap() else {
        panic!()
    };
    assert!(!d.fidelity_detail.stored && d.fidelity_detail.fidelity.score.is_some());
    let report = engine.score_fidelity(cid, false).unwrap();
    assert_eq!(report.scored, 1);
    assert_eq!(report.by_depth[0].scored, 1);
    assert_eq!(
        stored(&engine, &id).fidelity,
        d.fidelity_detail.fidelity,
        "the same score, now stored"
    );
    assert_eq!(
        engine.score_fidelity(cid, false).unwrap().scored,
        0,
        "nothing left to score"
    );
    assert_eq!(engine.score_fidelity(cid, true).unwrap().scored, 1, "all: rescored");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_an_earlier_lcm_native_migrated_opens_read_only_without_the_table() {
    let (dir, engine, cid) = setup(json!({}));
    let id = precise_leaf(&engine, cid).await;
    let path = engine.config().db_path.clone();
    engine.close();
    Connection::open(&path)
        .unwrap()
        .execute("DROP TABLE lcm_native_summary_fidelity", [])
        .unwrap();
    let ro =
        Engine::open(crate::config::Config::from_options(&json!({"dbPath": path, "readOnly": true}), None).unwrap())
            .unwrap();
    let listed = ro.summaries(cid, &SummaryFilter::default()).unwrap();
    assert_eq!((listed[0].fidelity, listed[0].low_fidelity), (None, false));
    let Description::Summary(d) = ro.describe(&crate::recall::ItemId::Summary(id)).unwrap() else {
        panic!()
    };
    assert!(!d.fidelity_detail.stored && d.fidelity_detail.fidelity.score.is_some());
    assert!(ro.fidelity(cid).unwrap()[0].scored == 0);
    let dry = crate::input::decode::<RewriteOptions>(json!({"lowFidelity": true}), "options").unwrap();
    let r = ro
        .rewrite(cid, Scripted::stub(), &dry, &AtomicBool::new(false), &|_| {})
        .await
        .unwrap();
    assert!(r.entries.is_empty());
    assert_eq!(ro.score_fidelity(cid, false).unwrap_err().code(), "E_READ_ONLY");
    drop(dir);
}
