//! Fuzzing damaged DAGs: random cycles, dangling parents, missing rows and wrong depths
//! written into a compacted conversation behind the engine's back. Every operation that walks
//! the DAG must answer (a report, a result or a coded error) within a bound, never panic or
//! hang, and `verify` must always give its report.

use crate::api::{ExpandOptions, GrepOptions, Progress};
use std::sync::{mpsc, Arc, OnceLock};
use std::time::Duration;

use proptest::prelude::*;
use rusqlite::Connection;
use serde_json::json;

use super::*;
use crate::recall::ItemId;
use crate::test_support::{temp_engine, transcript, THEME};

/// A compacted copy of the theme transcript (leaves and condensed nodes), made once.
fn base() -> &'static (tempfile::TempDir, String) {
    static BASE: OnceLock<(tempfile::TempDir, String)> = OnceLock::new();
    BASE.get_or_init(|| {
        let (dir, engine) = temp_engine();
        let cid = engine
            .ingest(&Target::Session("s".into()), &transcript(THEME))
            .unwrap()
            .conversation_id;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .unwrap();
        let offline: Arc<dyn Summarizer> = Arc::new(crate::offline::OfflineSummarizer);
        rt.block_on(engine.compact(
            cid,
            offline,
            SweepOptions {
                token_budget: 2_000,
                force: true,
                pass: PassOptions {
                    hard_trigger: true,
                    ..Default::default()
                },
                ..Default::default()
            },
        ))
        .unwrap();
        let path = engine.config().db_path.clone();
        engine.close();
        (dir, path)
    })
}

#[derive(Clone, Debug)]
enum Damage {
    /// Makes summary `a` an input of summary `b` (may close a cycle).
    Edge(usize, usize),
    /// Deletes a summary row, leaving its links dangling.
    DropSummary(usize),
    /// Deletes the links of a summary to its messages.
    DropLeafLinks(usize),
    /// Sets a summary's depth.
    Depth(usize, i64),
    /// Deletes a context item.
    DropItem(usize),
    /// Points a context item at a summary.
    ItemToSummary(usize, usize),
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        3 => (0usize..64, 0usize..64).prop_map(|(a, b)| Damage::Edge(a, b)),
        1 => (0usize..64).prop_map(Damage::DropSummary),
        1 => (0usize..64).prop_map(Damage::DropLeafLinks),
        1 => (0usize..64, -2i64..6).prop_map(|(i, d)| Damage::Depth(i, d)),
        1 => (0usize..64).prop_map(Damage::DropItem),
        1 => (0usize..64, 0usize..64).prop_map(|(i, s)| Damage::ItemToSummary(i, s)),
    ]
}

fn apply(conn: &Connection, damage: &[Damage]) {
    conn.execute_batch("PRAGMA foreign_keys = OFF").unwrap();
    let ids: Vec<String> = conn
        .prepare("SELECT summary_id FROM summaries ORDER BY summary_id")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    let pick = |i: usize| ids[i % ids.len()].clone();
    for d in damage {
        // Conflicts (a link that exists, an ordinal taken) are skipped: the damage is what stays.
        let _ = match d {
            Damage::Edge(a, b) => conn.execute(
                "INSERT OR IGNORE INTO summary_parents (summary_id, parent_summary_id, ordinal) VALUES (?1, ?2, 1000)",
                [pick(*b), pick(*a)],
            ),
            Damage::DropSummary(i) => conn.execute("DELETE FROM summaries WHERE summary_id = ?1", [pick(*i)]),
            Damage::DropLeafLinks(i) => conn.execute("DELETE FROM summary_messages WHERE summary_id = ?1", [pick(*i)]),
            Damage::Depth(i, depth) => conn.execute(
                "UPDATE summaries SET depth = ?2 WHERE summary_id = ?1",
                rusqlite::params![pick(*i), depth],
            ),
            Damage::DropItem(i) => conn.execute(
                "DELETE FROM context_items WHERE rowid = (SELECT rowid FROM context_items ORDER BY ordinal LIMIT 1 OFFSET ?1)",
                [(*i % 40) as i64],
            ),
            Damage::ItemToSummary(i, s) => conn.execute(
                "UPDATE OR IGNORE context_items SET item_type = 'summary', message_id = NULL, summary_id = ?2
                 WHERE rowid = (SELECT rowid FROM context_items ORDER BY ordinal LIMIT 1 OFFSET ?1)",
                rusqlite::params![(*i % 40) as i64, pick(*s)],
            ),
        };
    }
}

/// Runs every DAG walk on the damaged file; returns what each answered.
fn walk_everything(path: String) -> Vec<(String, std::result::Result<(), String>)> {
    let engine = match Engine::open(Config::with_db_path(&path)) {
        Ok(e) => e,
        Err(e) => return vec![("open".into(), Err(e.code().to_string()))],
    };
    let code = |r: Result<()>| r.map_err(|e| e.code().to_string());
    let mut out = Vec::new();
    // A report (ok or not: some damage is a no-op, such as a depth set to what it was).
    out.push(("verify".into(), code(engine.verify(None).map(|_| ()))));
    let ids: Vec<String> = Connection::open(&path)
        .unwrap()
        .prepare("SELECT summary_id FROM summaries ORDER BY depth DESC LIMIT 6")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    for id in &ids {
        out.push((
            "describe".into(),
            code(engine.describe(&ItemId::Summary(id.clone())).map(|_| ())),
        ));
        let all = ExpandOptions {
            token_budget: i64::MAX / 4,
            max_depth: None,
        };
        out.push(("expand".into(), code(engine.expand(id, &all).map(|_| ()))));
    }
    out.push(("context".into(), code(engine.context(1).map(|_| ()))));
    out.push((
        "assemble".into(),
        code(
            engine
                .assemble(
                    1,
                    &crate::api::AssembleOptions {
                        token_budget: 100_000,
                        fresh_tail_count: None,
                        presentation: None,
                        recall_query: None,
                        auto_recall: None,
                    },
                )
                .map(|_| ()),
        ),
    ));
    let grep = crate::input::decode::<GrepOptions>(json!({ "query": "theme" }), "options").unwrap();
    out.push(("grep".into(), code(engine.grep(Some(1), &grep).map(|_| ()))));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let offline: Arc<dyn Summarizer> = Arc::new(crate::offline::OfflineSummarizer);
    let rewrite = crate::input::decode::<crate::rewrite::RewriteOptions>(json!({ "all": true }), "options").unwrap();
    let no_progress = |_: Progress| {};
    let cancel = std::sync::atomic::AtomicBool::new(false);
    out.push((
        "rewrite".into(),
        code(
            rt.block_on(engine.rewrite(1, offline.clone(), &rewrite, &cancel, &no_progress))
                .map(|_| ()),
        ),
    ));
    let sweep = SweepOptions {
        token_budget: 500,
        force: true,
        ..Default::default()
    };
    out.push((
        "compact".into(),
        code(rt.block_on(engine.compact(1, offline, sweep)).map(|_| ())),
    ));
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
    #[test]
    fn every_walk_of_a_damaged_dag_answers_in_bounded_time(damage in prop::collection::vec(damage(), 1..8)) {
        let (_keep, base_path) = base();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lcm.db");
        std::fs::copy(base_path, &path).unwrap();
        apply(&Connection::open(&path).unwrap(), &damage);
        let (tx, rx) = mpsc::channel();
        let p = path.to_string_lossy().into_owned();
        std::thread::spawn(move || {
            let _ = tx.send(std::panic::catch_unwind(|| walk_everything(p)).map_err(|_| ()));
        });
        let answered = rx.recv_timeout(Duration::from_secs(20));
        prop_assert!(answered.is_ok(), "no answer within 20 s for {damage:?}");
        let results = answered.unwrap();
        prop_assert!(results.is_ok(), "panicked on {damage:?}");
        for (op, r) in results.unwrap() {
            if let Err(code) = r {
                prop_assert!(code.starts_with("E_") && op != "verify", "{op}: {code} on {damage:?}");
            }
        }
    }
}
