//! Versions written by compaction, rewrite and rollback, their lineage, the bound, versions
//! made lazily for summaries from before the table, and the failure paths.

use crate::api::{GrepOptions, Mode, Scope, Sort, SummaryFilter, SweepOptions};
use std::sync::atomic::AtomicBool;

use rusqlite::Connection;
use serde_json::json;
use sha2::Digest;

use super::*;
use crate::engine::Engine;

use crate::rewrite::{RewriteOptions, Selection};
use crate::store::conversations::Target;
use crate::test_support::{engine_with, Act, Scripted};
use crate::test_support::{transcript, THEME};

/// The theme transcript compacted to depth 1 by a scripted model.
/// The id of the conversation's first leaf summary.
fn first_leaf(engine: &Engine, cid: i64) -> String {
    engine
        .summaries(cid, &SummaryFilter::at_depth(0))
        .unwrap()
        .remove(0)
        .fields
        .summary_id
}

async fn compacted(extra: serde_json::Value) -> (tempfile::TempDir, Engine, i64) {
    let dir = tempfile::tempdir().unwrap();
    let mut options = json!({"leafChunkTokens": 3000, "leafTargetTokens": 300, "freshTailCount": 32});
    for (k, v) in extra.as_object().unwrap() {
        options[k] = v.clone();
    }
    let engine = engine_with(&dir, options);
    let cid = engine
        .ingest(&Target::Session("t".into()), &transcript(THEME))
        .unwrap()
        .conversation_id;
    let sweep = SweepOptions {
        token_budget: 8000,
        force: true,
        ..Default::default()
    };
    engine.compact(cid, Scripted::stub(), sweep).await.unwrap();
    (dir, engine, cid)
}

async fn rewrite_one(engine: &Engine, cid: i64, summary_id: &str, text: &str) {
    let text = text.to_string();
    let options = RewriteOptions {
        selection: Selection::Summary(summary_id.to_string()),
        apply: true,
        prompt_dir: None,
        timestamps: true,
        model: None,
    };
    let r = engine
        .rewrite(
            cid,
            Scripted::new(move |_, _| Act::Text(text.clone())),
            &options,
            &AtomicBool::new(false),
            &|_| {},
        )
        .await
        .unwrap();
    assert!(r.entries[0].applied);
}

fn finds(engine: &Engine, cid: i64, word: &str) -> usize {
    let options = GrepOptions {
        query: word.to_string(),
        mode: Mode::Fts,
        scope: Scope::Summaries,
        since: None,
        until: None,
        limit: 50,
        sort: Sort::Recency,
    };
    engine.grep(Some(cid), &options).unwrap().hits.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_writes_version_1_with_its_model_and_template() {
    let (_d, engine, cid) = compacted(json!({})).await;
    let leaf = engine.summaries(cid, &SummaryFilter::at_depth(0)).unwrap().remove(0);
    let versions = engine.history(&leaf.fields.summary_id).unwrap();
    assert_eq!(versions.len(), 1);
    let v = &versions[0];
    assert_eq!(
        (v.version, v.reason, v.current, v.stored),
        (1, Reason::Compaction, true, true)
    );
    assert_eq!(v.content, leaf.fields.content);
    assert_eq!(v.model, "scripted");
    let template = v.template.as_ref().expect("a model's summary records its template");
    assert_eq!(template.name, "leaf.tmpl");
    assert!(!template.overridden);
    let embedded = engine.prompts().text("leaf").unwrap();
    assert_eq!(
        template.sha256,
        format!("{:x}", sha2::Sha256::digest(embedded.as_bytes()))
    );
    let condensed = engine.summaries(cid, &SummaryFilter::at_depth(1)).unwrap().remove(0);
    let v = engine.history(&condensed.fields.summary_id).unwrap().remove(0);
    assert_eq!(v.template.unwrap().name, "condensed-d1.tmpl");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rewrite_and_rollback_add_versions_and_fts_follows_the_text() {
    let (_d, engine, cid) = compacted(json!({})).await;
    let id = first_leaf(&engine, cid);
    let original = engine.history(&id).unwrap().remove(0).content;
    rewrite_one(
        &engine,
        cid,
        &id,
        "Second text zqxsecondversion.\nExpand for details about: x.",
    )
    .await;
    let versions = engine.history(&id).unwrap();
    assert_eq!(
        versions
            .iter()
            .map(|v| (v.version, v.reason, v.current))
            .collect::<Vec<_>>(),
        vec![(1, Reason::Compaction, false), (2, Reason::Rewrite, true)]
    );
    assert_eq!(finds(&engine, cid, "zqxsecondversion"), 1);

    let restored = engine.rollback(&id, 1).await.unwrap();
    assert_eq!(
        (restored.version, restored.reason, restored.current),
        (3, Reason::Rollback, true)
    );
    assert_eq!(restored.content, original, "the exact text of version 1");
    assert_eq!(restored.template.as_ref().map(|t| t.name.as_str()), Some("leaf.tmpl"));
    let row = engine
        .summaries(cid, &SummaryFilter::at_depth(0))
        .unwrap()
        .into_iter()
        .find(|s| s.fields.summary_id == id)
        .unwrap();
    assert_eq!(row.fields.content, original);
    assert_eq!(
        finds(&engine, cid, "zqxsecondversion"),
        0,
        "FTS no longer holds version 2"
    );
    let word = original
        .split_whitespace()
        .find(|w| w.len() > 6 && w.chars().all(char::is_alphanumeric))
        .unwrap();
    assert!(finds(&engine, cid, word) >= 1, "FTS finds the restored text ({word})");
    // Rolling back to the rolled-back version works too; every version stays listed.
    engine.rollback(&id, 2).await.unwrap();
    assert_eq!(engine.history(&id).unwrap().len(), 4);
    // Rolling back to the current version changes nothing and adds no version (#30).
    let current = engine.rollback(&id, 4).await.unwrap();
    assert_eq!((current.version, current.current), (4, true));
    assert_eq!(engine.history(&id).unwrap().len(), 4);
    assert!(engine.verify(None).unwrap().ok);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_summary_from_before_versions_gets_version_1_from_its_row() {
    let (_d, engine, cid) = compacted(json!({})).await;
    let id = first_leaf(&engine, cid);
    Connection::open(&engine.config().db_path)
        .unwrap()
        .execute("DELETE FROM lcm_native_summary_versions WHERE summary_id = ?1", [&id])
        .unwrap();
    let before = engine.history(&id).unwrap();
    assert_eq!(
        (before.len(), before[0].version, before[0].stored, before[0].current),
        (1, 1, false, true)
    );
    rewrite_one(&engine, cid, &id, "New text.\nExpand for details about: x.").await;
    let after = engine.history(&id).unwrap();
    assert_eq!(
        after.iter().map(|v| (v.version, v.stored)).collect::<Vec<_>>(),
        vec![(1, true), (2, true)]
    );
    assert_eq!(after[0].content, before[0].content);
    assert!(after[0].template.is_none(), "its template is unknown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_summary_versions_bounds_what_is_kept() {
    let (_d, engine, cid) = compacted(json!({"maxSummaryVersions": 2})).await;
    let id = first_leaf(&engine, cid);
    for i in 0..3 {
        rewrite_one(&engine, cid, &id, &format!("Text {i}.\nExpand for details about: x.")).await;
    }
    let versions = engine.history(&id).unwrap();
    assert_eq!(versions.iter().map(|v| v.version).collect::<Vec<_>>(), vec![3, 4]);
    let err = engine.rollback(&id, 1).await.unwrap_err();
    assert_eq!(err.code(), "E_NOT_FOUND", "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_summaries_and_versions_are_not_found() {
    let (_d, engine, _cid) = compacted(json!({})).await;
    assert_eq!(engine.history("sum_nope").unwrap_err().code(), "E_NOT_FOUND");
    assert_eq!(engine.rollback("sum_nope", 1).await.unwrap_err().code(), "E_NOT_FOUND");
    let id = engine
        .summaries(1, &SummaryFilter::at_depth(0))
        .unwrap()
        .remove(0)
        .fields
        .summary_id;
    assert_eq!(engine.rollback(&id, 9).await.unwrap_err().code(), "E_NOT_FOUND");
}
