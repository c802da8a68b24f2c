//! `verify` against damaged files: what it finds, and that it stays bounded.

use std::time::{Duration, Instant};

use rusqlite::Connection;

use crate::config::Config;
use crate::engine::Engine;

/// A copy of lossless-claw's head-theme.db in which a depth-2 summary is made an input of
/// one of its own inputs: `verify` reports the cycle at once instead of walking forever.
#[test]
fn a_cycle_in_summary_parents_is_reported_not_walked() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lcm.db");
    std::fs::copy(concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/head-theme.db"), &path).unwrap();
    let path = path.to_string_lossy().into_owned();
    let engine = Engine::open(Config::with_db_path(&path)).unwrap();
    let conn = Connection::open(&path).unwrap();
    let (top, input): (String, String) = conn
        .query_row(
            "SELECT p.summary_id, p.parent_summary_id FROM summary_parents p
             JOIN summaries s ON s.summary_id = p.summary_id WHERE s.depth = 2 LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    conn.execute(
        "INSERT INTO summary_parents (summary_id, parent_summary_id, ordinal) VALUES (?1, ?2, 99)",
        [&input, &top],
    )
    .unwrap();
    // A conversation that does not exist is no check.
    assert_eq!(engine.verify(Some(999_999)).unwrap_err().code(), "E_NOT_FOUND");
    let started = Instant::now();
    let report = engine.verify(Some(1)).unwrap();
    assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
    assert!(!report.ok);
    let cycle = report
        .problems
        .iter()
        .find(|p| p.starts_with("summary_parents has a cycle"))
        .unwrap_or_else(|| panic!("{:?}", report.problems));
    assert!(cycle.contains(&top) && cycle.contains(&input), "{cycle}");
}

#[test]
fn cycles_finds_each_loop_once_and_nothing_in_a_dag() {
    let graph = |edges: &[(&str, &str)]| {
        let mut g = std::collections::HashMap::<String, Vec<String>>::new();
        for (a, b) in edges {
            g.entry(a.to_string()).or_default().push(b.to_string());
        }
        g
    };
    // A diamond is no cycle.
    assert!(super::verify::cycles(&graph(&[("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")])).is_empty());
    assert_eq!(super::verify::cycles(&graph(&[("a", "a")])), vec![vec!["a", "a"]]);
    let found = super::verify::cycles(&graph(&[("a", "b"), ("b", "c"), ("c", "a"), ("x", "y")]));
    assert_eq!(found, vec![vec!["a", "b", "c", "a"]]);
}
