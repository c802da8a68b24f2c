//! Rewrite tests on the theme transcript compacted to depth 1: dry run, apply, order, what a
//! condensed node is rebuilt from, cancellation, failures and prompt overrides.

use crate::api::{GrepOptions, Mode, Progress, RewriteResult, Scope, Sort, SummaryFilter};
use std::sync::atomic::AtomicBool;
use std::sync::Mutex;

use rusqlite::Connection;
use serde_json::json;

use super::*;
use crate::engine::Engine;

use crate::store::conversations::Target as ConversationTarget;
use crate::test_support::{compact_offline, engine_with, Act, Scripted};
use crate::test_support::{transcript, THEME};

async fn compacted() -> (tempfile::TempDir, Engine, i64) {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_with(
        &dir,
        json!({"leafChunkTokens": 3000, "leafTargetTokens": 300, "freshTailCount": 32}),
    );
    let cid = engine
        .ingest(&ConversationTarget::Session("t".into()), &transcript(THEME))
        .unwrap()
        .conversation_id;
    assert!(compact_offline(&engine, cid, 8000)
        .await
        .condensed_passes
        .contains_key(&1));
    (dir, engine, cid)
}

/// Answers `REWRITTEN <id-less marker> d<depth> #<call>` so each new text is unique and says
/// which call made it.
fn marking() -> Arc<Scripted> {
    Scripted::new(|i, r| {
        Act::Text(format!(
            "REWRITTEN d{} call{i} zqxmarker{i}\nExpand for details about: rewrite.",
            r.depth
        ))
    })
}

fn all(apply: bool) -> RewriteOptions {
    RewriteOptions {
        selection: Selection::All,
        apply,
        prompt_dir: None,
        timestamps: true,
        model: None,
    }
}

async fn run(engine: &Engine, cid: i64, s: Arc<Scripted>, o: &RewriteOptions) -> Result<RewriteResult> {
    engine.rewrite(cid, s, o, &AtomicBool::new(false), &|_| {}).await
}

/// The rows a rewrite must leave alone: links, context items, ids, depths.
fn structure(engine: &Engine) -> Vec<String> {
    let c = Connection::open(&engine.config().db_path).unwrap();
    let mut out = Vec::new();
    for sql in [
        "SELECT summary_id || ':' || parent_summary_id || ':' || ordinal FROM summary_parents ORDER BY 1",
        "SELECT summary_id || ':' || message_id || ':' || ordinal FROM summary_messages ORDER BY 1",
        "SELECT conversation_id || ':' || ordinal || ':' || COALESCE(message_id, summary_id) FROM context_items ORDER BY 1",
        "SELECT summary_id || ':' || depth || ':' || kind || ':' || descendant_count FROM summaries ORDER BY 1",
    ] {
        let mut stmt = c.prepare(sql).unwrap();
        out.extend(stmt.query_map([], |r| r.get::<_, String>(0)).unwrap().map(|r| r.unwrap()));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_writes_nothing_and_reports_each_summary_with_a_diff() {
    let (_d, engine, cid) = compacted().await;
    let before = engine.verify(None).unwrap();
    let summaries = engine.summaries(cid, &SummaryFilter::default()).unwrap();
    let r = run(&engine, cid, marking(), &all(false)).await.unwrap();
    assert_eq!(
        engine.verify(None).unwrap().digest,
        before.digest,
        "a dry run wrote something"
    );
    assert_eq!(r.entries.len(), summaries.len());
    assert!(!r.apply);
    for e in &r.entries {
        let stored = summaries.iter().find(|s| s.fields.summary_id == e.summary_id).unwrap();
        assert_eq!(e.old_content, stored.fields.content);
        assert_eq!(e.old_tokens, stored.fields.token_count);
        assert!(e.new_content.starts_with("REWRITTEN"));
        assert_eq!(e.delta, e.new_tokens - e.old_tokens);
        assert!(e
            .diff
            .starts_with(&format!("--- {} (old)\n+++ {} (new)\n@@", e.summary_id, e.summary_id)));
        assert!(!e.applied);
        assert!(e.child_count > 0 && !e.time_range.is_empty());
    }
    assert_eq!(r.tokens_before, r.entries.iter().map(|e| e.old_tokens).sum::<i64>());
    assert_eq!(r.tokens_after, r.entries.iter().map(|e| e.new_tokens).sum::<i64>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn order_is_bottom_up_and_condensed_nodes_are_rebuilt_from_their_childrens_new_text() {
    let (_d, engine, cid) = compacted().await;
    let line =
        regex::Regex::new(r"\n\[\d{4}-\d\d-\d\d \d\d:\d\d UTC \| (user|assistant|toolResult|system)\]\n").unwrap();
    for apply in [false, true] {
        let s = marking();
        let r = run(&engine, cid, s.clone(), &all(apply)).await.unwrap();
        let depths: Vec<i64> = r.entries.iter().map(|e| e.depth).collect();
        assert!(depths.windows(2).all(|w| w[0] <= w[1]), "{depths:?}");
        // Chronological within a depth.
        let sums = engine.summaries(cid, &SummaryFilter::default()).unwrap();
        let start = |id: &str| {
            let s = sums.iter().find(|s| s.fields.summary_id == id).unwrap();
            s.fields.earliest_at.clone().unwrap_or_else(|| s.created_at.clone())
        };
        for w in r.entries.windows(2).filter(|w| w[0].depth == w[1].depth) {
            assert!(start(&w[0].summary_id) <= start(&w[1].summary_id));
        }
        // Each condensed prompt holds its inputs' new text, not their old one.
        let calls = s.calls.lock().unwrap().clone();
        let new_of: HashMap<&str, &str> = r
            .entries
            .iter()
            .map(|e| (e.summary_id.as_str(), e.new_content.as_str()))
            .collect();
        let c = Connection::open(&engine.config().db_path).unwrap();
        for (e, (prompt, _)) in r.entries.iter().zip(&calls) {
            if e.depth == 0 {
                assert!(line.is_match(prompt), "leaf source lines: {prompt:.600}");
                continue;
            }
            let inputs: Vec<String> = c
                .prepare("SELECT parent_summary_id FROM summary_parents WHERE summary_id = ?1 ORDER BY ordinal")
                .unwrap()
                .query_map([&e.summary_id], |r| r.get(0))
                .unwrap()
                .map(|r| r.unwrap())
                .collect();
            assert!(!inputs.is_empty());
            for input in inputs {
                let marker = new_of[input.as_str()].lines().next().unwrap();
                assert!(
                    prompt.contains(marker),
                    "condensed {} lacks the new text of {input}",
                    e.summary_id
                );
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_updates_text_tokens_and_full_text_and_keeps_the_structure() {
    let (_d, engine, cid) = compacted().await;
    let shape = structure(&engine);
    let old = engine.summaries(cid, &SummaryFilter::at_depth(0)).unwrap();
    // A word that only the old text of the first leaf has.
    let grep_one = |q: &str| {
        engine
            .grep(
                Some(cid),
                &GrepOptions {
                    query: q.into(),
                    mode: Mode::Fts,
                    scope: Scope::Summaries,
                    since: None,
                    until: None,
                    limit: 1000,
                    sort: Sort::Recency,
                },
            )
            .unwrap()
    };
    let fts_rows = |engine: &Engine| -> Vec<(i64, String)> {
        let c = Connection::open(&engine.config().db_path).unwrap();
        let mut stmt = c
            .prepare("SELECT rowid, summary_id FROM summaries_fts ORDER BY rowid")
            .unwrap();
        let rows = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .map(|r| r.unwrap())
            .collect();
        rows
    };
    let fts_before = fts_rows(&engine);
    assert!(!fts_before.is_empty());
    let before_hits = grep_one("zqxmarker0");
    assert!(before_hits.hits.is_empty());
    let r = run(&engine, cid, marking(), &all(true)).await.unwrap();
    assert!(r.entries.iter().all(|e| e.applied));
    assert_eq!(structure(&engine), shape, "ids, links or context items changed");
    let report = engine.verify(None).unwrap();
    assert!(report.ok, "{:?}", report.problems);
    for e in &r.entries {
        let s =
            crate::store::summaries::get(&Connection::open(&engine.config().db_path).unwrap(), &e.summary_id).unwrap();
        assert_eq!(s.fields.content, e.new_content);
        assert_eq!(s.fields.token_count, e.new_tokens);
        assert_eq!(s.fields.model, "scripted");
    }
    // Full text is fresh: the new words are found, in the summary that has them.
    let hits = grep_one("zqxmarker0");
    assert_eq!(hits.hits.len(), 1);
    assert_eq!(
        hits.hits[0].summary_id.as_deref(),
        Some(r.entries[0].summary_id.as_str())
    );
    let old_word = old[0]
        .fields
        .content
        .split_whitespace()
        .find(|w| w.len() > 8 && w.chars().all(|c| c.is_ascii_alphabetic()))
        .unwrap();
    assert!(grep_one(old_word)
        .hits
        .iter()
        .all(|h| h.summary_id.as_deref() != Some(old[0].fields.summary_id.as_str())));
    // Rows keep their full-text rowid (newest-first search orders by it): same ids, same rowids.
    assert_eq!(fts_rows(&engine), fts_before);
    // descendant_token_count above the rewritten leaves follows their new tokens.
    let c = Connection::open(&engine.config().db_path).unwrap();
    let stale: i64 = c
        .query_row(
            "SELECT count(*) FROM summaries s WHERE s.kind = 'condensed' AND s.descendant_token_count <>
               (SELECT SUM(i.token_count + i.descendant_token_count) FROM summary_parents p
                JOIN summaries i ON i.summary_id = p.parent_summary_id WHERE p.summary_id = s.summary_id)",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(stale, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_in_the_middle_stops_between_summaries_and_leaves_a_consistent_database() {
    let (_d, engine, cid) = compacted().await;
    let cancel = AtomicBool::new(false);
    let seen = Mutex::new(Vec::new());
    let finished = Mutex::new(Vec::new());
    let progress = |p: Progress| {
        seen.lock().unwrap().push(p.done);
        finished
            .lock()
            .unwrap()
            .push(p.finished.map(|e| (e.summary_id, e.new_content)));
        if p.done == 3 {
            cancel.store(true, Ordering::SeqCst);
        }
    };
    let err = engine
        .rewrite(cid, marking(), &all(true), &cancel, &progress)
        .await
        .unwrap_err();
    assert_eq!(err.code(), "E_ABORTED");
    // Cancelled while told about the fourth: three were rewritten.
    assert!(err.to_string().contains("3 of"), "{err}");
    assert_eq!(*seen.lock().unwrap(), [0, 1, 2, 3]);
    // Each report carries the summary finished before it, as written: a caller can show it.
    let finished = finished.into_inner().unwrap();
    assert!(finished[0].is_none());
    for (i, f) in finished.iter().enumerate().skip(1) {
        let (id, text) = f.as_ref().unwrap();
        assert!(text.contains(&format!("call{}", i - 1)), "{id}: {text}");
        let stored = engine.summaries(cid, &SummaryFilter::default()).unwrap();
        assert_eq!(
            &stored
                .iter()
                .find(|s| &s.fields.summary_id == id)
                .unwrap()
                .fields
                .content,
            text
        );
    }
    let changed = engine
        .summaries(cid, &SummaryFilter::default())
        .unwrap()
        .iter()
        .filter(|s| s.fields.content.starts_with("REWRITTEN"))
        .count();
    assert_eq!(changed, 3);
    assert!(engine.verify(None).unwrap().ok);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_stop_the_run_and_keep_what_was_applied_and_fallbacks_keep_the_old_text() {
    let (_d, engine, cid) = compacted().await;
    let failing = Scripted::new(|i, _| {
        if i < 2 {
            Act::Text(format!("NEW {i}\nExpand for details about: x"))
        } else {
            Act::Fail
        }
    });
    let err = run(&engine, cid, failing, &all(true)).await.unwrap_err();
    assert_eq!(err.code(), "E_SUMMARIZER");
    assert!(err.to_string().contains("2 of"), "{err}");
    assert_eq!(
        engine
            .summaries(cid, &SummaryFilter::default())
            .unwrap()
            .iter()
            .filter(|s| s.fields.content.starts_with("NEW "))
            .count(),
        2
    );
    // A summarizer that never answers times out with its own code, after what was applied.
    let hanging = Scripted::new(|i, _| {
        if i < 1 {
            Act::Text("NEW hang\nExpand for details about: x".into())
        } else {
            Act::Hang
        }
    });
    let err = run(&fast_timeout(&engine), cid, hanging, &all(true)).await.unwrap_err();
    assert_eq!(err.code(), "E_TIMEOUT");
    assert!(err.to_string().contains("1 of"), "{err}");
    let auth = Scripted::new(|_, _| Act::Auth);
    assert_eq!(
        run(&engine, cid, auth, &all(true)).await.unwrap_err().code(),
        "E_SUMMARIZER"
    );
    // Empty answers: the deterministic fallback is not written over a summary.
    let before = engine.verify(None).unwrap().digest;
    let empty = Scripted::new(|_, _| Act::Empty);
    let r = run(
        &engine,
        cid,
        empty,
        &RewriteOptions {
            selection: Selection::Depth(1),
            ..all(true)
        },
    )
    .await
    .unwrap();
    assert!(r
        .entries
        .iter()
        .all(|e| e.level == "fallback" && !e.applied && e.diff.is_empty()));
    assert_eq!(engine.verify(None).unwrap().digest, before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_override_in_a_directory_changes_exactly_one_depth() {
    let (_d, engine, cid) = compacted().await;
    let prompts = tempfile::tempdir().unwrap();
    std::fs::write(
        prompts.path().join("condensed-d1.tmpl"),
        "CUSTOM D1 PROMPT for {{.ChildCount}} inputs:\n{{.SourceText}}",
    )
    .unwrap();
    let s = marking();
    let o = RewriteOptions {
        prompt_dir: Some(prompts.path().to_string_lossy().into_owned()),
        ..all(false)
    };
    run(&engine, cid, s.clone(), &o).await.unwrap();
    let calls = s.calls.lock().unwrap().clone();
    assert!(calls.iter().any(|(_, r)| r.depth == 1));
    for (prompt, r) in &calls {
        assert_eq!(
            prompt.starts_with("CUSTOM D1 PROMPT"),
            r.depth == 1,
            "depth {}",
            r.depth
        );
    }
    // The engine's own prompts are untouched for the next call.
    let plain = marking();
    run(&engine, cid, plain.clone(), &all(false)).await.unwrap();
    assert!(plain.prompts().iter().all(|p| !p.contains("CUSTOM D1 PROMPT")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn selection_and_options() {
    let (_d, engine, cid) = compacted().await;
    let leaf = engine.summaries(cid, &SummaryFilter::at_depth(0)).unwrap()[0]
        .fields
        .summary_id
        .clone();
    let one = run(
        &engine,
        cid,
        marking(),
        &RewriteOptions {
            selection: Selection::Summary(leaf.clone()),
            ..all(false)
        },
    )
    .await
    .unwrap();
    assert_eq!(one.entries.len(), 1);
    assert_eq!(one.entries[0].summary_id, leaf);
    let d1 = run(
        &engine,
        cid,
        marking(),
        &RewriteOptions {
            selection: Selection::Depth(1),
            ..all(false)
        },
    )
    .await
    .unwrap();
    assert!(!d1.entries.is_empty() && d1.entries.iter().all(|e| e.depth == 1));
    let none = run(
        &engine,
        cid,
        marking(),
        &RewriteOptions {
            selection: Selection::Depth(7),
            ..all(false)
        },
    )
    .await
    .unwrap();
    assert!(none.entries.is_empty());
    let missing = run(
        &engine,
        cid,
        marking(),
        &RewriteOptions {
            selection: Selection::Summary("sum_nope".into()),
            ..all(false)
        },
    )
    .await;
    assert_eq!(missing.unwrap_err().code(), "E_NOT_FOUND");
    assert_eq!(
        run(&engine, 999, marking(), &all(false)).await.unwrap_err().code(),
        "E_NOT_FOUND"
    );
    // Without timestamps the leaf source has no times.
    let s = marking();
    run(
        &engine,
        cid,
        s.clone(),
        &RewriteOptions {
            selection: Selection::Summary(leaf),
            timestamps: false,
            ..all(false)
        },
    )
    .await
    .unwrap();
    assert!(s.prompts()[0].contains("\n[user]\n") || s.prompts()[0].contains("\n[assistant]\n"));
    assert!(!s.prompts()[0].contains(" UTC | "));

    let parse = |v: serde_json::Value| crate::input::decode::<RewriteOptions>(v, "options");
    assert_eq!(parse(json!({"depth": 0})).unwrap().selection, Selection::Depth(0));
    assert_eq!(
        parse(json!({"fallbacks": true})).unwrap().selection,
        Selection::Fallbacks
    );
    assert!(parse(json!({"all": true, "apply": true})).unwrap().apply);
    for bad in [
        json!({}),
        json!({"all": true, "depth": 1}),
        json!({"fallbacks": true, "all": true}),
        json!({"depth": -1}),
        json!({"all": true, "apply": "yes"}),
        json!({"all": true, "colour": 1}),
    ] {
        assert_eq!(parse(bad.clone()).unwrap_err().code(), "E_INVALID_INPUT", "{bad}");
    }
}

/// The same database, opened with a 100 ms summary timeout.
fn fast_timeout(engine: &Engine) -> Engine {
    let mut config = engine.config().clone();
    config.summary_timeout_ms = 100;
    Engine::open(config).unwrap()
}

/// `fallbacks: true` selects the summaries a failed summarizer left behind: lcm-native's own
/// (model `lcm-native/fallback`) and lossless-claw's (`[Truncated from N tokens]` at the end,
/// or its `[LCM fallback summary…]` note), bottom-up; once rewritten they are no longer
/// selected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fallbacks_selects_deterministic_fallbacks_of_either_implementation() {
    let (_d, engine, cid) = compacted().await;
    let sums = engine.summaries(cid, &SummaryFilter::default()).unwrap();
    assert!(
        sums.iter().all(|s| !s.fallback),
        "the offline summarizer's summaries are not fallbacks"
    );
    let leaves: Vec<&str> = sums
        .iter()
        .filter(|s| s.fields.depth == 0)
        .map(|s| s.fields.summary_id.as_str())
        .collect();
    let condensed = sums
        .iter()
        .find(|s| s.fields.depth == 1)
        .unwrap()
        .fields
        .summary_id
        .clone();
    let c = Connection::open(&engine.config().db_path).unwrap();
    c.execute(
        "UPDATE summaries SET model = 'lcm-native/fallback' WHERE summary_id = ?1",
        [&condensed],
    )
    .unwrap();
    c.execute(
        "UPDATE summaries SET content = content || char(10) || '[Truncated from 4321 tokens]' WHERE summary_id = ?1",
        [leaves[3]],
    )
    .unwrap();
    c.execute(
        "UPDATE summaries SET content = content || char(10) || '[LCM fallback summary; truncated for context management]' WHERE summary_id = ?1",
        [leaves[1]],
    )
    .unwrap();
    // The seed's fallback for an empty source is just the note.
    c.execute(
        "UPDATE summaries SET content = '[Truncated from 0 tokens]' || char(10) WHERE summary_id = ?1",
        [leaves[4]],
    )
    .unwrap();
    // Neither note in the middle of a model's text, nor a cap note, makes a fallback.
    c.execute(
        "UPDATE summaries SET content = content || ' [Truncated from 12 tokens] and the [LCM fallback summary; truncated for context management] note' || char(10) || '[Capped to ~300]' WHERE summary_id = ?1",
        [leaves[2]],
    )
    .unwrap();
    let flagged: Vec<String> = engine
        .summaries(cid, &SummaryFilter::default())
        .unwrap()
        .into_iter()
        .filter(|s| s.fallback)
        .map(|s| s.fields.summary_id)
        .collect();
    let expected = vec![
        leaves[1].to_string(),
        leaves[3].to_string(),
        leaves[4].to_string(),
        condensed.clone(),
    ];
    let mut sorted = flagged.clone();
    sorted.sort();
    let mut want = expected.clone();
    want.sort();
    assert_eq!(sorted, want);

    let fallbacks = RewriteOptions {
        selection: Selection::Fallbacks,
        ..all(true)
    };
    let offline = engine
        .rewrite(
            cid,
            Arc::new(crate::offline::OfflineSummarizer),
            &fallbacks,
            &AtomicBool::new(false),
            &|_| {},
        )
        .await
        .unwrap_err();
    assert_eq!(offline.code(), "E_INVALID_INPUT", "{offline}");
    let r = run(&engine, cid, marking(), &fallbacks).await.unwrap();
    // Bottom-up: the leaves (in the rewrite's chronological order) before the condensed node.
    let mut ids: Vec<String> = r.entries.iter().map(|e| e.summary_id.clone()).collect();
    assert_eq!(ids.pop().as_ref(), Some(&condensed), "bottom-up");
    ids.sort();
    let mut leaves_wanted = vec![leaves[1].to_string(), leaves[3].to_string(), leaves[4].to_string()];
    leaves_wanted.sort();
    assert_eq!(ids, leaves_wanted);
    assert!(r.entries.iter().all(|e| e.applied));
    assert!(engine
        .summaries(cid, &SummaryFilter::default())
        .unwrap()
        .iter()
        .all(|s| !s.fallback));
    assert!(run(&engine, cid, marking(), &fallbacks)
        .await
        .unwrap()
        .entries
        .is_empty());
    assert!(engine.verify(None).unwrap().ok);
}

/// `subtree`: a condensed node and everything beneath it, leaves first, each later one rebuilt
/// from the new texts; summaries outside it are not touched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subtree_is_a_node_and_everything_beneath_it_bottom_up() {
    let (_d, engine, cid) = compacted().await;
    let dag = engine.dag(cid).unwrap();
    let root = dag.iter().find(|n| n.record.fields.depth == 1).unwrap();
    let beneath: Vec<&str> = root.inputs.iter().map(String::as_str).collect();
    let o = RewriteOptions {
        selection: Selection::Subtree(root.record.fields.summary_id.clone()),
        ..all(true)
    };
    let r = run(&engine, cid, marking(), &o).await.unwrap();
    let ids: Vec<&str> = r.entries.iter().map(|e| e.summary_id.as_str()).collect();
    assert_eq!(ids.len(), beneath.len() + 1, "{ids:?}");
    assert_eq!(
        ids.last(),
        Some(&root.record.fields.summary_id.as_str()),
        "the node comes last"
    );
    let mut leaves = ids[..ids.len() - 1].to_vec();
    leaves.sort();
    let mut expected = beneath.clone();
    expected.sort();
    assert_eq!(leaves, expected);
    let untouched = engine
        .summaries(cid, &SummaryFilter::at_depth(0))
        .unwrap()
        .into_iter()
        .filter(|s| !beneath.contains(&s.fields.summary_id.as_str()))
        .all(|s| !s.fields.content.contains("REWRITTEN"));
    assert!(untouched);
    let missing = RewriteOptions {
        selection: Selection::Subtree("sum_nope".into()),
        ..all(false)
    };
    assert_eq!(
        run(&engine, cid, marking(), &missing).await.unwrap_err().code(),
        "E_NOT_FOUND"
    );
}

/// The preview is the prompt the rewrite then sends first, with its template and estimates.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_preview_is_the_first_prompt_the_rewrite_sends() {
    let (_d, engine, cid) = compacted().await;
    let node = engine.summaries(cid, &SummaryFilter::at_depth(1)).unwrap().remove(0);
    let id = node.fields.summary_id.clone();
    let o = RewriteOptions {
        selection: Selection::Summary(id.clone()),
        ..all(false)
    };
    let p = engine.rewrite_preview(cid, &id, &o).unwrap();
    assert_eq!((p.depth, p.kind.as_str()), (1, "condensed"));
    assert_eq!(
        (
            p.template.name.as_str(),
            p.template.source.as_str(),
            p.template.overridden
        ),
        ("condensed-d1.tmpl", "embedded", false)
    );
    assert_eq!(p.old_tokens, node.fields.token_count);
    assert!(p.child_count >= 2 && p.source_tokens > 0 && p.prompt_tokens > p.source_tokens);
    let target = engine.config().condensed_target_tokens.max(512);
    assert_eq!(p.target_tokens, target, "condensedTargetTokens, at least 512");
    let s = Scripted::new(|_, _| Act::Text("short.\nExpand for details about: x".into()));
    run(&engine, cid, s.clone(), &o).await.unwrap();
    assert_eq!(s.prompts()[0], p.prompt);
    // An override directory changes the template and says where it came from.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("condensed-d1.tmpl"),
        "Custom {{.TargetTokens}}: {{.SourceText}}",
    )
    .unwrap();
    let o = RewriteOptions {
        prompt_dir: Some(dir.path().to_str().unwrap().into()),
        ..o
    };
    let p = engine.rewrite_preview(cid, &id, &o).unwrap();
    assert!(
        p.prompt.starts_with(&format!("Custom {target}: ")),
        "{}",
        &p.prompt[..40.min(p.prompt.len())]
    );
    assert!(p.template.overridden && p.template.source.ends_with("condensed-d1.tmpl"));
    assert_eq!(
        engine.rewrite_preview(cid, "sum_nope", &o).unwrap_err().code(),
        "E_NOT_FOUND"
    );
}

/// A rewrite sees the source compaction saw (tool calls with their arguments, results: one
/// rendering), and its fidelity is scored against that source: a rewrite that drops the tool
/// actions scores lower than one that keeps them (#30, item 2).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rewrite_sees_what_compaction_saw_and_dropping_tool_actions_scores_lower() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_with(
        &dir,
        json!({"leafChunkTokens": 3000, "leafTargetTokens": 1200, "summaryMaxOverageFactor": 100, "freshTailCount": 32}),
    );
    let cid = engine
        .ingest(&ConversationTarget::Session("t".into()), &transcript(THEME))
        .unwrap()
        .conversation_id;
    let first = Scripted::stub();
    let sweep = engine
        .compact(
            cid,
            first.clone(),
            crate::api::SweepOptions {
                token_budget: 8000,
                force: true,
                target: crate::api::SweepTarget::Leaf,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert!(sweep.leaf_passes > 1);
    let compacted: Vec<String> = first
        .calls
        .lock()
        .unwrap()
        .iter()
        .map(|(_, r)| r.source_text.clone())
        .collect();
    assert!(
        compacted.iter().any(|t| t.contains("[tool call: ")),
        "the theme session has tool calls"
    );

    // Keeps the source but its tool results, and with `keep_calls` false its tool-call lines.
    let rewrite_with = |keep_calls: bool| {
        Scripted::new(move |_, r| {
            let kept: Vec<String> = r
                .source_text
                .split("\n\n[")
                .filter(|entry| !entry.contains("| toolResult]") && !entry.starts_with("toolResult]"))
                .map(|entry| {
                    entry
                        .lines()
                        .filter(|l| keep_calls || !l.starts_with("[tool call: "))
                        .collect::<Vec<_>>()
                        .join("\n")
                })
                .collect();
            Act::Text(kept.join("\n\n"))
        })
    };
    let depth0 = RewriteOptions {
        selection: Selection::Depth(0),
        ..all(false)
    };
    let keeping = rewrite_with(true);
    let kept = run(&engine, cid, keeping.clone(), &depth0).await.unwrap();
    for (_, request) in keeping.calls.lock().unwrap().iter() {
        assert!(
            compacted.contains(&request.source_text),
            "a rewrite's source differs from every source compaction rendered: {:.400}",
            request.source_text
        );
    }
    let dropped = run(&engine, cid, rewrite_with(false), &depth0).await.unwrap();
    let total = |r: &RewriteResult| r.entries.iter().map(|e| e.fidelity.unwrap_or(0.0)).sum::<f64>();
    assert_eq!(kept.entries.len(), dropped.entries.len());
    assert!(
        total(&dropped) < total(&kept),
        "dropping the tool calls scored {} against {} for keeping them",
        total(&dropped),
        total(&kept)
    );
}

/// The offline summarizer is deterministic: applying its rewrite twice writes a version the
/// first time (its text differs from the model's) and none the second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_text_by_the_same_model_again_is_not_a_new_version() {
    let (_d, engine, cid) = compacted().await;
    run(&engine, cid, marking(), &all(true)).await.unwrap();
    let (options, cancel) = (all(true), AtomicBool::new(false));
    let offline = || {
        engine.rewrite(
            cid,
            Arc::new(crate::offline::OfflineSummarizer),
            &options,
            &cancel,
            &|_| {},
        )
    };
    let first = offline().await.unwrap();
    assert!(
        first.entries.iter().all(|e| e.applied),
        "the first offline rewrite replaces every model text"
    );
    let versions = |id: &str| engine.history(id).unwrap().len();
    let id = first.entries[0].summary_id.clone();
    let before = versions(&id);
    let second = offline().await.unwrap();
    assert!(
        second.entries.iter().all(|e| !e.applied && e.diff.is_empty()),
        "nothing changed the second time"
    );
    assert_eq!(versions(&id), before);
    assert!(engine.verify(None).unwrap().ok);
}
