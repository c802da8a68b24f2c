//! Where ingest time goes, phase by phase, on the benchmark's own messages (Rust core only):
//!
//! ```text
//! node -e "import('./bench/synth.mjs').then(m => process.stdout.write(JSON.stringify(m.conversation(20000, 7))))" > /tmp/synth.json
//! cargo run --release --example ingest_phases -- /tmp/synth.json
//! ```
//!
//! Prints, per message: JSON parsing, validation, the whole batched ingest (500 per call), a
//! single-message call, and the cost of the full-text index alone (the plugin's FTS5 table,
//! a contentless one, and a plain table holding the same text) in 500-row transactions.

use std::time::Instant;

use lcm_native::probe::{normalize, Config, Engine, Target};
use serde_json::Value;

const BATCH: usize = 500;

fn main() {
    let path = std::env::args().nth(1).expect("the path of a JSON array of messages");
    let all: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let n = all.len();
    let per_message = |t: Instant| t.elapsed().as_secs_f64() * 1e6 / n as f64;
    let batches: Vec<String> = all.chunks(BATCH).map(|c| serde_json::to_string(c).unwrap()).collect();

    let t = Instant::now();
    let parsed: Vec<Vec<Value>> = batches.iter().map(|b| serde_json::from_str(b).unwrap()).collect();
    println!("parse JSON          {:7.2} us/message", per_message(t));

    let t = Instant::now();
    let contents: Vec<String> = parsed
        .iter()
        .flat_map(|b| b.iter().enumerate())
        .map(|(i, m)| normalize(i, m).unwrap().content)
        .collect();
    println!("validate + rows     {:7.2} us/message", per_message(t));

    let dir = tempfile::tempdir().unwrap();
    let open = |name: &str| Engine::open(Config::with_db_path(dir.path().join(name).to_str().unwrap())).unwrap();
    let target = Target::Session("phases".into());

    let engine = open("batched.db");
    let t = Instant::now();
    for b in &parsed {
        engine.ingest(&target, b).unwrap();
    }
    println!(
        "ingest, batched     {:7.2} us/message (validation and every write)",
        per_message(t)
    );
    engine.close();

    let engine = open("single.db");
    let singles: Vec<&Value> = all.iter().take(2000).collect();
    let t = Instant::now();
    for m in &singles {
        engine.ingest(&target, std::slice::from_ref(*m)).unwrap();
    }
    let single = t.elapsed().as_secs_f64() * 1e6 / singles.len() as f64;
    println!("ingest, one per call {:6.2} us/call", single);
    engine.close();

    for (i, (name, ddl)) in [
        (
            "FTS5 (plugin's)",
            "CREATE VIRTUAL TABLE t USING fts5(content, tokenize='porter unicode61')",
        ),
        (
            "FTS5 index only",
            "CREATE VIRTUAL TABLE t USING fts5(content, content='', tokenize='porter unicode61')",
        ),
        ("plain table", "CREATE TABLE t (content TEXT)"),
    ]
    .into_iter()
    .enumerate()
    {
        let file = dir.path().join(format!("table{i}.db"));
        let mut conn = lcm_native::probe::open_configured(file.to_str().unwrap(), 1000).unwrap();
        conn.execute_batch(ddl).unwrap();
        let t = Instant::now();
        for chunk in contents.chunks(BATCH) {
            let tx = conn.transaction().unwrap();
            {
                let mut insert = tx.prepare_cached("INSERT INTO t (content) VALUES (?1)").unwrap();
                for text in chunk {
                    insert.execute([text]).unwrap();
                }
            }
            tx.commit().unwrap();
        }
        println!("{name:<19} {:7.2} us/message", per_message(t));
    }
}
