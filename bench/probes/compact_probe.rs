//! Sweep bookkeeping of the Rust core alone (stub summarizer, no napi), for profiling:
//! `cargo run --release --example compact_probe -- [messages] [db-path] [iterations] [sweeps]`.
//! With a db-path that exists, the ingest is skipped (profile the sweep alone on a copy of a
//! prepared file). With `iterations` (e.g. 12, the default `maxSweepIterations`), `sweeps`
//! bounded sweeps run one after another, as a host's turns would run them.

use std::sync::Arc;
use std::time::Instant;

use lcm_native::probe::Config;
use lcm_native::probe::Engine;
use lcm_native::probe::Target;
use lcm_native::probe::{PassOptions, SweepOptions};
use lcm_native::probe::{SummarizeRequest, Summarizer, SummaryFuture};
use serde_json::json;

struct Stub;
impl Summarizer for Stub {
    fn summarize(&self, _prompt: String, r: &SummarizeRequest) -> SummaryFuture {
        let text = format!(
            "STUB {} d{} of {} inputs\nExpand for details about: stub.",
            r.kind.as_str(),
            r.depth,
            r.input_count
        );
        Box::pin(async move { Ok(text) })
    }
    fn model(&self) -> String {
        "stub".into()
    }
}

fn main() {
    let n: usize = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(50_000);
    let dir = std::env::temp_dir().join(format!("lcm-compact-probe-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let given = std::env::args().nth(2).map(std::path::PathBuf::from);
    let reuse = given.as_ref().is_some_and(|p| p.exists());
    let path = given.clone().unwrap_or_else(|| dir.join("c.db"));
    let iterations: i64 = std::env::args()
        .nth(3)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let sweeps: usize = std::env::args().nth(4).and_then(|s| s.parse().ok()).unwrap_or(1);
    let config = Config::from_options(
        &json!({"dbPath": path.to_str().unwrap(), "maxSweepIterations": iterations, "sweepDeadlineMs": 3_600_000}),
        None,
    )
    .unwrap();
    let engine = Engine::open(config).unwrap();
    let body = "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor ".repeat(17);
    let msgs: Vec<_> = (0..n)
        .map(|i| match i % 3 {
            0 => json!({"role": "user", "content": format!("{i} {body}")}),
            1 => json!({"role": "assistant", "content": [{"type": "text", "text": format!("{i} {body}")},
                {"type": "toolCall", "id": format!("c{i}"), "name": "read", "arguments": {"path": "x"}}]}),
            _ => json!({"role": "toolResult", "toolCallId": format!("c{}", i - 1), "content": [{"type": "text", "text": format!("{i} {body}")}]}),
        })
        .collect();
    let mut cid = 1;
    if !reuse {
        for c in msgs.chunks(1000) {
            cid = engine.ingest(&Target::Session("p".into()), c).unwrap().conversation_id;
        }
        if given.is_some() {
            engine.close();
            println!("prepared {}", path.display());
            return;
        }
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let (mut passes, mut bookkeeping, mut summarizer) = (0i64, 0f64, 0f64);
    let t = Instant::now();
    for _ in 0..sweeps {
        let r = rt
            .block_on(engine.compact(
                cid,
                Arc::new(Stub),
                SweepOptions {
                    token_budget: 128_000,
                    force: true,
                    target: Default::default(),
                    pass: PassOptions::default(),
                    cancel: None,
                },
            ))
            .unwrap();
        passes += r.leaf_passes + r.condensed_passes.values().sum::<i64>();
        bookkeeping += r.duration_ms - r.summarizer_ms;
        summarizer += r.summarizer_ms;
    }
    println!(
        "{n} messages, {sweeps} sweep(s): {passes} passes in {:.0} ms ({:.2} ms/pass, summarizer {:.0} ms)",
        t.elapsed().as_secs_f64() * 1000.0,
        bookkeeping / passes.max(1) as f64,
        summarizer
    );
    engine.close();
    std::fs::remove_dir_all(dir).ok();
}
