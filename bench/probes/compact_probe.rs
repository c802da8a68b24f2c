//! Full-sweep bookkeeping of the Rust core alone (stub summarizer, no napi), for profiling:
//! `cargo run --release --example compact_probe -- [messages] [db-path]`. With a db-path that
//! exists, the ingest is skipped (profile the sweep alone on a copy of a prepared file).

use std::sync::Arc;
use std::time::Instant;

use lcm_native::compaction::{PassOptions, SweepOptions};
use lcm_native::config::Config;
use lcm_native::engine::Engine;
use lcm_native::store::conversations::Target;
use lcm_native::summarizer::{SummarizeRequest, Summarizer, SummaryFuture};
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
    let config = Config::from_options(
        &json!({"dbPath": path.to_str().unwrap(), "maxSweepIterations": 1_000_000, "sweepDeadlineMs": 3_600_000}),
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
    let t = Instant::now();
    let r = rt
        .block_on(engine.compact(
            cid,
            Arc::new(Stub),
            SweepOptions {
                token_budget: 128_000,
                force: true,
                pass: PassOptions::default(),
                cancel: None,
            },
        ))
        .unwrap();
    let passes = r.leaf_passes + r.condensed_passes.values().sum::<i64>();
    println!(
        "{n} messages: {passes} passes in {:.0} ms ({:.2} ms/pass, summarizer {:.0} ms)",
        t.elapsed().as_secs_f64() * 1000.0,
        (r.duration_ms - r.summarizer_ms) / passes as f64,
        r.summarizer_ms
    );
    engine.close();
    std::fs::remove_dir_all(dir).ok();
}
