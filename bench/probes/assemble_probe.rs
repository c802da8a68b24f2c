//! Assembly cost of the Rust core alone on an existing database, for profiling:
//! `cargo run --release --example assemble_probe -- <db-path> [conversation] [budget] [runs]`.

use std::time::Instant;

use lcm_native::assemble::AssembleOptions;
use lcm_native::config::Config;
use lcm_native::engine::Engine;
use serde_json::json;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let path = args.get(1).expect("db path");
    let cid: i64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(1);
    let budget: i64 = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(128_000);
    let runs: usize = args.get(4).and_then(|s| s.parse().ok()).unwrap_or(50);
    let engine = Engine::open(Config::from_options(&json!({ "dbPath": path }), None).unwrap()).unwrap();
    let opts = AssembleOptions {
        token_budget: budget,
        fresh_tail_count: None,
        presentation: None,
    };
    let mut times = Vec::new();
    let mut out = None;
    for _ in 0..runs {
        let t = Instant::now();
        out = Some(engine.assemble(cid, &opts).unwrap());
        times.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    times.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let a = out.unwrap();
    println!(
        "{} messages, {} tokens; median {:.2} ms, min {:.2} ms",
        a.messages.len(),
        a.estimated_tokens,
        times[times.len() / 2],
        times[0]
    );
}
