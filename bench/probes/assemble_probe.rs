//! Assembly cost of the Rust core alone on an existing database, for profiling:
//! `cargo run --release --example assemble_probe -- <db-path> [conversation] [budget] [runs] [cold|warm] [recall query]`.
//!
//! With a recall query, each call recalls anew for it (a different run number appended each
//! time, so no call reuses the block of the one before).
//!
//! Through the engine, every call after the first reuses the messages the previous one
//! rendered (`assemble::cache`), as a host's next turn does. With `cold`, each call assembles
//! on a connection of its own with nothing reused: the cost of the first assembly, and of one
//! after a rewrite or another process's commit.

use std::time::Instant;

use lcm_native::probe::AssembleOptions;
use lcm_native::probe::Config;
use lcm_native::probe::Engine;
use serde_json::json;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let path = args.get(1).expect("db path");
    let cid: i64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(1);
    let budget: i64 = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(128_000);
    let runs: usize = args.get(4).and_then(|s| s.parse().ok()).unwrap_or(50);
    let cold = args.get(5).is_some_and(|a| a == "cold");
    let engine = Engine::open(Config::from_options(&json!({ "dbPath": path }), None).unwrap()).unwrap();
    let conn = lcm_native::probe::open_configured(path, 5_000).unwrap();
    let query = args.get(6).cloned();
    let mut opts = AssembleOptions {
        token_budget: budget,
        fresh_tail_count: None,
        presentation: None,
        recall_query: None,
        auto_recall: None,
    };
    let (mut times, mut serialized) = (Vec::new(), Vec::new());
    let mut out = None;
    let mut bytes = 0;
    for run in 0..runs {
        opts.recall_query = query.as_ref().map(|q| format!("{q} run{run}"));
        let t = Instant::now();
        let a = match cold {
            true => lcm_native::probe::assemble(&conn, engine.config(), cid, &opts).unwrap(),
            false => engine.assemble(cid, &opts).unwrap(),
        };
        times.push(t.elapsed().as_secs_f64() * 1000.0);
        let t = Instant::now();
        bytes = serde_json::to_string(&a).unwrap().len();
        serialized.push(t.elapsed().as_secs_f64() * 1000.0);
        out = Some(a);
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        (v[v.len() / 2], v[0])
    };
    let p95 = {
        let mut v = times.clone();
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        v[(v.len() * 95 / 100).min(v.len() - 1)]
    };
    let ((med, min), (smed, smin)) = (median(&mut times), median(&mut serialized));
    let a = out.unwrap();
    println!(
        "{} messages, {} tokens; assemble median {med:.2} ms (min {min:.2}, p95 {p95:.2}); JSON text of {bytes} bytes median {smed:.2} ms (min {smin:.2}); recall {} tokens",
        a.messages.len(),
        a.estimated_tokens,
        a.stats.recall.as_ref().map_or(0, |r| r.tokens),
    );
}
