//! Recall tests on the real transcripts, compacted into a DAG with depth-1 nodes: grep in its
//! three modes and two orders, CJK, hostile queries, describe and expand.

use crate::api::{GrepOptions, Mode, PassOptions, Scope, Sort};
use std::collections::HashSet;
use std::time::Instant;

use rusqlite::Connection;
use serde_json::{json, Value};

use super::*;
use crate::engine::Engine;
use crate::store::conversations::Target;
use crate::summarizer::SummaryKind;
use crate::test_support::{compact_offline, engine_with, Act, Scripted};
use crate::test_support::{transcript, REFACTOR, THEME};

/// Both transcripts ingested (theme = 1, refactor = 2) and compacted to depth 1.
async fn compacted() -> (tempfile::TempDir, Engine) {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_with(
        &dir,
        // A fanout of 8 keeps the sweep from condensing the five depth-1 nodes further: the
        // tests below want a live depth-1 node over leaves.
        json!({"leafChunkTokens": 3000, "leafTargetTokens": 300, "freshTailCount": 32, "timezone": "UTC", "condensedMinFanout": 8, "condensedMinFanoutHard": 8}),
    );
    for name in [THEME, REFACTOR] {
        let cid = engine
            .ingest(&Target::Session(name.into()), &transcript(name))
            .unwrap()
            .conversation_id;
        let r = compact_offline(&engine, cid, 8000).await;
        assert!(r.condensed_passes.contains_key(&1), "{r:?}");
    }
    (dir, engine)
}

fn opts(query: &str) -> GrepOptions {
    GrepOptions {
        query: query.into(),
        mode: Mode::Fts,
        scope: Scope::Both,
        since: None,
        until: None,
        limit: 50,
        sort: Sort::Recency,
    }
}

fn conn(engine: &Engine) -> Connection {
    Connection::open(&engine.config().db_path).unwrap()
}

fn is_live_summary(engine: &Engine, id: &str) -> bool {
    conn(engine)
        .query_row("SELECT count(*) FROM context_items WHERE summary_id = ?1", [id], |r| {
            r.get::<_, i64>(0)
        })
        .unwrap()
        == 1
}

mod describe_tests;
mod grep_tests;
mod postgres_tests;
