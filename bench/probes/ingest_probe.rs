//! Ingest throughput of the Rust core alone (no napi), for profiling:
//! `cargo run --release --example ingest_probe -- [single|batched|tiny] [messages]`
//! (`tiny`: one message of a few words per call, the cost of a commit itself).
//! Build with `CARGO_PROFILE_RELEASE_STRIP=false CARGO_PROFILE_RELEASE_DEBUG=1` for perf.

use std::time::Instant;

use lcm_native::probe::{Config, Engine, Target};
use serde_json::json;

fn main() {
    let mode = std::env::args().nth(1).unwrap_or_else(|| "batched".into());
    let n: usize = std::env::args().nth(2).and_then(|s| s.parse().ok()).unwrap_or(10_000);
    let dir = std::env::temp_dir().join(format!("lcm-probe-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let engine = Engine::open(Config::with_db_path(dir.join("probe.db").to_str().unwrap())).unwrap();
    let body = "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor ".repeat(16);
    let messages: Vec<_> = (0..n)
        .map(|i| {
            if mode == "tiny" {
                return json!({"role": "user", "content": format!("hello there {i}")});
            }
            json!({"role": "assistant", "entryId": format!("e{i}"), "content": [
                {"type": "text", "text": format!("{body} {i}")},
                {"type": "toolCall", "id": format!("c{i}"), "name": "read", "arguments": {"path": "x"}}
            ]})
        })
        .collect();
    let target = Target::Session("probe".into());
    let started = Instant::now();
    if mode != "batched" {
        for m in &messages {
            engine.ingest(&target, std::slice::from_ref(m)).unwrap();
        }
    } else {
        for chunk in messages.chunks(500) {
            engine.ingest(&target, chunk).unwrap();
        }
    }
    println!(
        "{mode}: {:.4} ms/message",
        started.elapsed().as_secs_f64() * 1000.0 / n as f64
    );
    engine.close();
    std::fs::remove_dir_all(dir).ok();
}
