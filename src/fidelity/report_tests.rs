//! The fidelity benchmark (`npm run bench:fidelity`): compacts both bundled transcripts and a
//! synthetic session with the offline summarizer at the demo's settings, then reports per
//! summary kind the junk-line share, identifier and salient retention next to plain
//! truncation of the source to the summary's length, and the summarizer's time per leaf.
//! Ignored in `npm test`: it is a measurement, not an assertion.

use crate::api::{PassOptions, SweepOptions};
use std::sync::Arc;
use std::time::Instant;

use rusqlite::Connection;
use serde_json::{json, Value};

use super::{extract::Haystack, junk, score, source_identifiers};
use crate::compaction::escalation::target_tokens;

use crate::config::Config;
use crate::engine::Engine;
use crate::offline::OfflineSummarizer;
use crate::source;
use crate::store::conversations::Target;
use crate::summarizer::{SummarizeRequest, Summarizer, SummaryKind};
use crate::time::DisplayZone;
use crate::tokens;

fn transcript(name: &str) -> Vec<Value> {
    crate::test_support::transcript(name)
}

/// A deterministic coding session: asks that name files, reads, edits, test runs that fail
/// with located errors and then pass, file bodies, and the assistant's conclusions.
fn synthetic(turns: usize) -> Vec<Value> {
    let files = [
        "src/auth/login.ts",
        "src/db/store.rs",
        "packages/core/src/main.ts",
        "lib/render/theme.ts",
        "scripts/migrate.sh",
        "docs/api/errors.md",
    ];
    let funcs = [
        "validateUser",
        "open_store",
        "renderTheme",
        "parseConfig",
        "migrate_v3",
        "sessionToken",
    ];
    let mut out = Vec::new();
    let mut t = 0;
    let mut stamp = || {
        t += 37;
        format!(
            "2026-03-01T{:02}:{:02}:{:02}.000Z",
            8 + t / 3600 % 12,
            t / 60 % 60,
            t % 60
        )
    };
    for i in 0..turns {
        let f = files[i % files.len()];
        let g = files[(i * 5 + 2) % files.len()];
        let func = funcs[i % funcs.len()];
        let id = |k: usize| format!("call_{i}_{k}");
        out.push(json!({"role": "user", "timestamp": stamp(), "content": format!(
            "Turn {i}: {func} in {f} breaks when the session expires. Please fix it and make sure `npm test` passes; keep {g} as it is."
        )}));
        out.push(json!({"role": "assistant", "timestamp": stamp(), "content": [
            {"type": "text", "text": format!("I'll read {f} and {g} first.")},
            {"type": "toolCall", "id": id(0), "name": "read", "arguments": {"path": f}},
            {"type": "toolCall", "id": id(1), "name": "read", "arguments": {"path": g}},
        ]}));
        let body: String = (0..40)
            .map(|k| {
                format!("export function helper{k}(input: string): string {{\n  return input.trim() + \"{k}\";\n}}\n")
            })
            .collect();
        out.push(json!({"role": "toolResult", "toolCallId": id(0), "toolName": "read", "timestamp": stamp(), "content": body}));
        out.push(json!({"role": "toolResult", "toolCallId": id(1), "toolName": "read", "timestamp": stamp(), "content": format!("# {g}\n\nNothing to change here; {func} is only called from {f}.\n")}));
        out.push(json!({"role": "assistant", "timestamp": stamp(), "content": [
            {"type": "toolCall", "id": id(2), "name": "edit", "arguments": {"path": f, "oldText": format!("if (session) {{ {func}(session) }}"), "newText": format!("if (session && !session.expired) {{\n  {func}(session)\n}}")}},
            {"type": "toolCall", "id": id(3), "name": "bash", "arguments": {"command": "npm test -- --run"}},
        ]}));
        out.push(json!({"role": "toolResult", "toolCallId": id(2), "toolName": "edit", "timestamp": stamp(), "content": format!("Successfully replaced text in {f}.")}));
        out.push(json!({"role": "toolResult", "toolCallId": id(3), "toolName": "bash", "isError": true, "timestamp": stamp(), "content": format!(
            "> vitest run\n\n FAIL  {f} > {func} > refreshes an expired session\nTypeError: Cannot read properties of undefined (reading 'expired')\n    at {func} ({f}:{line}:17)\n\n Tests  1 failed | {passed} passed ({total})\n Duration  {ms}ms\n\nCommand exited with code 1",
            line = 40 + i, passed = 120 + i, total = 121 + i, ms = 900 + 7 * i
        )}));
        out.push(json!({"role": "assistant", "timestamp": stamp(), "content": [
            {"type": "text", "text": format!("The session can be undefined when it expired before the request; guarding it with optional chaining in {func}.")},
            {"type": "toolCall", "id": id(4), "name": "edit", "arguments": {"path": f, "oldText": "session.expired", "newText": "session?.expired"}},
            {"type": "toolCall", "id": id(5), "name": "bash", "arguments": {"command": "npm test -- --run"}},
        ]}));
        out.push(json!({"role": "toolResult", "toolCallId": id(4), "toolName": "edit", "timestamp": stamp(), "content": format!("Successfully replaced text in {f}.")}));
        out.push(json!({"role": "toolResult", "toolCallId": id(5), "toolName": "bash", "timestamp": stamp(), "content": format!(
            "> vitest run\n\n Tests  {total} passed ({total})\n Duration  {ms}ms", total = 121 + i, ms = 880 + 5 * i
        )}));
        out.push(json!({"role": "assistant", "timestamp": stamp(), "content": format!(
            "Fixed: {func} in {f} now checks session?.expired before use; all {} tests pass. Committed as {:07x}.", 121 + i, 0x7f3a9c2 + i * 4099
        )}));
    }
    out
}

#[derive(Default)]
struct Tally {
    summaries: usize,
    lines: usize,
    junk: usize,
    identifiers: u64,
    kept: u64,
    salient: u64,
    salient_kept: u64,
    trunc_kept: u64,
    trunc_salient_kept: u64,
}

impl Tally {
    fn row(&self, label: &str) -> String {
        let pct = |a: u64, b: u64| if b == 0 { f64::NAN } else { 100.0 * a as f64 / b as f64 };
        let kept = pct(self.kept, self.identifiers);
        let trunc = pct(self.trunc_kept, self.identifiers);
        let salient = pct(self.salient_kept, self.salient);
        let trunc_salient = pct(self.trunc_salient_kept, self.salient);
        format!(
            "| {label} | {} | {:.1} % ({}/{}) | {kept:.1} % | {trunc:.1} % | {:.2}× | {salient:.1} % | {trunc_salient:.1} % |",
            self.summaries,
            pct(self.junk as u64, self.lines as u64),
            self.junk,
            self.lines,
            kept / trunc
        )
    }
}

fn ingest(engine: &Engine, session: &str, msgs: &[Value]) -> i64 {
    let target = Target::Session(session.to_string());
    let mut cid = 0;
    let mut start = 0;
    for i in 1..=msgs.len() {
        if i == msgs.len() || msgs[i]["role"] == "user" {
            cid = engine.ingest(&target, &msgs[start..i]).unwrap().conversation_id;
            start = i;
        }
    }
    cid
}

async fn measure(label: &str, msgs: &[Value]) -> (String, String, f64, usize) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lcm.db").to_string_lossy().into_owned();
    let config = Config::from_options(
        &json!({"dbPath": path, "leafChunkTokens": 3000, "leafTargetTokens": 400, "maxSweepIterations": 1000}),
        None,
    )
    .unwrap();
    let engine = Engine::open(config.clone()).unwrap();
    let cid = ingest(&engine, label, msgs);
    let summarizer: Arc<dyn Summarizer> = Arc::new(OfflineSummarizer);
    let sweep = SweepOptions {
        token_budget: 16_000,
        force: true,
        target: Default::default(),
        pass: PassOptions::default(),
        cancel: None,
    };
    engine.compact(cid, summarizer.clone(), sweep).await.unwrap();

    let conn = Connection::open(&path).unwrap();
    let rows: Vec<(String, String, String)> = conn
        .prepare(
            "SELECT summary_id, kind, content FROM summaries WHERE conversation_id = ?1 ORDER BY depth, created_at",
        )
        .unwrap()
        .query_map([cid], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let (mut leaf, mut condensed) = (Tally::default(), Tally::default());
    let mut requests = Vec::new();
    for (id, kind, content) in &rows {
        let entries = source::summary_entries(&conn, id, DisplayZone::Utc, 3000).unwrap();
        let text = if kind == "leaf" {
            let ids: Vec<i64> = conn
                .prepare("SELECT message_id FROM summary_messages WHERE summary_id = ?1 ORDER BY ordinal")
                .unwrap()
                .query_map([id], |r| r.get(0))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap();
            source::leaf_source(&conn, &ids, DisplayZone::Utc, 3000, source::Stamps::With)
                .unwrap()
                .text
        } else {
            entries
                .iter()
                .map(|e| match &e.parts[..] {
                    [crate::summarizer::entries::SourcePart::Text(t)] => format!("[{}]\n{t}", e.stamp),
                    _ => String::new(),
                })
                .collect::<Vec<_>>()
                .join("\n\n")
        };
        let idents = source_identifiers(&entries);
        let f = score(&idents, content);
        let truncated: String = text.chars().take(content.chars().count()).collect();
        let hay = Haystack::new(&truncated);
        let t = if kind == "leaf" { &mut leaf } else { &mut condensed };
        let (j, n) = junk::share(content);
        if std::env::var_os("LCM_FIDELITY_DUMP").is_some() {
            for line in content.lines() {
                println!(
                    "{:?}\t{}",
                    junk::classify(line),
                    line.chars().take(160).collect::<String>()
                );
            }
        }
        t.summaries += 1;
        t.junk += j;
        t.lines += n;
        t.identifiers += f.identifiers as u64;
        t.kept += f.kept as u64;
        t.salient += f.salient as u64;
        t.salient_kept += f.salient_kept as u64;
        for ident in idents.items() {
            if super::extract::kept_in(&hay, ident) {
                t.trunc_kept += 1;
                t.trunc_salient_kept += ident.salient as u64;
            }
        }
        if kind == "leaf" {
            let input_tokens = tokens::estimate(&text);
            requests.push(SummarizeRequest {
                kind: SummaryKind::Leaf,
                depth: 0,
                aggressive: false,
                target_tokens: target_tokens(&config, SummaryKind::Leaf, input_tokens, false),
                conversation_id: cid,
                input_tokens,
                input_count: entries.len() as i64,
                time_range: String::new(),
                source_text: text,
                entries: Arc::new(entries),
                timeout_ms: config.summary_timeout_ms,
                on_timeout: Default::default(),
            });
        }
    }
    // Time per leaf: every leaf's source summarised again, ten rounds.
    let rounds = 10;
    let started = Instant::now();
    for _ in 0..rounds {
        for r in &requests {
            std::hint::black_box(summarizer.summarize(String::new(), r).await.unwrap());
        }
    }
    let per_leaf_ms = started.elapsed().as_secs_f64() * 1000.0 / (rounds * requests.len().max(1)) as f64;
    (
        leaf.row(&format!("{label}, leaves")),
        condensed.row(&format!("{label}, condensed")),
        per_leaf_ms,
        requests.len(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a benchmark: npm run bench:fidelity"]
async fn fidelity_report() {
    let sets = [
        ("theme", transcript(crate::test_support::THEME)),
        ("refactor", transcript(crate::test_support::REFACTOR)),
        ("synthetic", synthetic(60)),
    ];
    println!("| source | summaries | junk lines | identifiers kept | truncation keeps | ratio | salient kept | truncation keeps salient |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    let mut timing = Vec::new();
    for (label, msgs) in &sets {
        let (leaf, condensed, ms, n) = measure(label, msgs).await;
        println!("{leaf}\n{condensed}");
        timing.push(format!("{label}: {ms:.3} ms per leaf over {n} leaves"));
    }
    println!("\noffline summarizer time: {}", timing.join("; "));
}
