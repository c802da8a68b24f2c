//! What tests share: scripted summarizers, engines in temporary directories, synthetic and
//! real conversations, and the invariant check every compaction test ends with.

use crate::api::{SweepOptions, SweepResult};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

use crate::config::Config;
use crate::engine::Engine;
use crate::offline::OfflineSummarizer;
use crate::store::conversations::Target;
use crate::summarizer::{SummarizeRequest, Summarizer, SummarizerFailure, SummaryFuture};

/// The two real sessions in `data/transcripts/`, as host messages (`entryId` = their line).
pub(crate) fn transcript(name: &str) -> Vec<Value> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("data/transcripts")
        .join(name);
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .enumerate()
        .map(|(i, l)| {
            let mut m: Value = serde_json::from_str(l).unwrap();
            let obj = m.as_object_mut().unwrap();
            if obj["role"] == "tool" {
                obj.insert("role".into(), json!("toolResult"));
            }
            if let Some(ts) = obj.remove("createdAt") {
                obj.insert("timestamp".into(), ts);
            }
            obj.insert("entryId".into(), json!(format!("line-{i}")));
            m
        })
        .collect()
}

pub(crate) const THEME: &str = "pi-coding-agent-theme-session.jsonl";
pub(crate) const REFACTOR: &str = "pi-coding-agent-refactor-compaction-session.jsonl";

pub(crate) fn temp_engine() -> (tempfile::TempDir, Engine) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lcm.db").to_string_lossy().into_owned();
    let engine = Engine::open(Config::with_db_path(&path)).unwrap();
    (dir, engine)
}

/// What a scripted summarizer does on a call.
#[derive(Clone, Debug)]
pub(crate) enum Act {
    /// The fixtures' stub: `STUB <kind> d<depth> summary of <N> chars. First line: …`.
    Stub,
    Text(String),
    Fail,
    Auth,
    Hang,
    Empty,
}

type Script = Box<dyn Fn(usize, &str, &SummarizeRequest) -> Act + Send + Sync>;

pub(crate) struct Scripted {
    pub calls: Mutex<Vec<(String, SummarizeRequest)>>,
    script: Script,
    n: AtomicUsize,
}

impl Scripted {
    pub(crate) fn new(script: impl Fn(usize, &SummarizeRequest) -> Act + Send + Sync + 'static) -> Arc<Scripted> {
        Self::reading_prompts(move |i, _, r| script(i, r))
    }

    /// A script that sees the rendered prompt as well (previous context included).
    pub(crate) fn reading_prompts(
        script: impl Fn(usize, &str, &SummarizeRequest) -> Act + Send + Sync + 'static,
    ) -> Arc<Scripted> {
        Arc::new(Scripted {
            calls: Mutex::new(Vec::new()),
            script: Box::new(script),
            n: AtomicUsize::new(0),
        })
    }

    pub(crate) fn stub() -> Arc<Scripted> {
        Self::new(|_, _| Act::Stub)
    }

    pub(crate) fn prompts(&self) -> Vec<String> {
        self.calls.lock().unwrap().iter().map(|(p, _)| p.clone()).collect()
    }
}

pub(crate) fn stub_text(r: &SummarizeRequest) -> String {
    let first: String = r
        .source_text
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .take(80)
        .collect();
    format!(
        "STUB {} d{} summary of {} chars. First line: {first}\nExpand for details about: stub.",
        r.kind.as_str(),
        r.depth,
        r.source_text.chars().count()
    )
}

impl Summarizer for Scripted {
    fn summarize(&self, prompt: String, request: &SummarizeRequest) -> SummaryFuture {
        let i = self.n.fetch_add(1, Ordering::SeqCst);
        let act = (self.script)(i, &prompt, request);
        self.calls.lock().unwrap().push((prompt, request.clone()));
        let stub = stub_text(request);
        Box::pin(async move {
            match act {
                Act::Stub => Ok(stub),
                Act::Text(t) => Ok(t),
                Act::Fail => Err(SummarizerFailure::Failed("provider exploded".into())),
                Act::Auth => Err(SummarizerFailure::Auth("bad key".into())),
                Act::Hang => std::future::pending().await,
                Act::Empty => Ok(String::new()),
            }
        })
    }

    fn model(&self) -> String {
        "scripted".into()
    }
}

pub(crate) fn engine_with(dir: &tempfile::TempDir, extra: Value) -> Engine {
    engine_tuned(dir, extra, |_| {})
}

/// `engine_with`, with the config's internal settings changed by `tune`.
pub(crate) fn engine_tuned(dir: &tempfile::TempDir, extra: Value, tune: impl FnOnce(&mut Config)) -> Engine {
    let mut opts = json!({
        "dbPath": dir.path().join("lcm.db").to_string_lossy(),
        "freshTailCount": 8,
        "leafChunkTokens": 3000,
        "condensedTargetTokens": 80,
        "timezone": "UTC",
        "maxSweepIterations": 10000,
    });
    for (k, v) in extra.as_object().unwrap() {
        opts[k] = v.clone();
    }
    let mut config = Config::from_options(&opts, None).unwrap();
    tune(&mut config);
    Engine::open(config).unwrap()
}

/// An engine (in a temp dir, kept alive by the first element) with `synthetic(n, chars)`
/// ingested into session `s`.
pub(crate) fn with_synthetic(extra: Value, n: usize, chars: usize) -> (tempfile::TempDir, Engine, i64) {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_with(&dir, extra);
    let cid = engine
        .ingest(&Target::Session("s".into()), &synthetic(n, chars))
        .unwrap()
        .conversation_id;
    (dir, engine, cid)
}

/// A forced sweep with the built-in offline summarizer.
pub(crate) async fn compact_offline(engine: &Engine, cid: i64, token_budget: i64) -> SweepResult {
    engine
        .compact(
            cid,
            Arc::new(OfflineSummarizer),
            SweepOptions {
                token_budget,
                force: true,
                ..Default::default()
            },
        )
        .await
        .unwrap()
}

/// `n` messages in turns of user / assistant+tool call / tool result / assistant.
pub(crate) fn synthetic(n: usize, chars: usize) -> Vec<Value> {
    let body = |i: usize| format!("message {i}: {}", "lorem ipsum dolor sit amet ".repeat(chars / 27 + 1));
    (0..n)
        .map(|i| {
            let ts = format!("2026-03-0{} {:02}:{:02}:00", 1 + i / 1440 % 9, i / 60 % 24, i % 60);
            match i % 4 {
                0 => json!({"role": "user", "content": body(i), "timestamp": ts}),
                1 => json!({"role": "assistant", "timestamp": ts, "content": [
                    {"type": "text", "text": body(i)},
                    {"type": "toolCall", "id": format!("call{i}"), "name": "read", "arguments": {"path": format!("src/f{i}.rs")}}]}),
                2 => json!({"role": "toolResult", "toolCallId": format!("call{}", i - 1), "timestamp": ts,
                            "content": [{"type": "text", "text": body(i)}]}),
                _ => json!({"role": "assistant", "content": [{"type": "text", "text": body(i)}], "timestamp": ts}),
            }
        })
        .collect()
}

pub(crate) fn assert_invariants(engine: &Engine, cid: i64) -> String {
    let report = engine.verify(Some(cid)).unwrap();
    assert!(report.ok, "invariants violated: {:#?}", report.problems);
    // Every summary is found in the full-text index by its own id's row and a word of it.
    let conn = rusqlite::Connection::open(&engine.config().db_path).unwrap();
    let missing: i64 = conn
        .query_row(
            "SELECT count(*) FROM summaries s WHERE s.conversation_id = ?1 AND NOT EXISTS
               (SELECT 1 FROM summaries_fts f WHERE summaries_fts MATCH 'expand' AND f.summary_id = s.summary_id)
               AND s.content LIKE '%Expand for details%'",
            [cid],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(missing, 0, "summaries missing from the full-text index");
    report.digest
}

/// A fresh schema on the test server (`LCM_TEST_DATABASE_URL`, which `npm test` and `.ci/run`
/// set through scripts/pg-test-server.cjs), named after `tag` and the process, dropped first if
/// a previous run left it. `None` (with one line saying so) when no server is given, except
/// where PostgreSQL is required (CI=true, LCM_REQUIRE_POSTGRES=1): there it fails the test.
pub(crate) fn pg_test_location(tag: &str) -> Option<crate::pg::Location> {
    let Ok(url) = std::env::var("LCM_TEST_DATABASE_URL") else {
        assert!(
            !postgres_required(),
            "LCM_TEST_DATABASE_URL is not set, and PostgreSQL is required here: run the tests through scripts/pg-test-server.cjs"
        );
        eprintln!("postgres: skipped {tag} (LCM_TEST_DATABASE_URL is not set; npm test sets it)");
        return None;
    };
    let schema = format!(
        "t_{}_{}",
        tag.to_ascii_lowercase()
            .replace(|c: char| !c.is_ascii_alphanumeric(), "_"),
        std::process::id()
    );
    let location = crate::pg::Location::parse(&url, Some(&schema)).expect("LCM_TEST_DATABASE_URL parses");
    let conn = location.connect().expect("the test server answers");
    conn.batch(&format!(
        "DROP SCHEMA IF EXISTS {} CASCADE",
        crate::pg::quote_ident(&schema)
    ))
    .unwrap();
    Some(location)
}

/// `pg_test_location`, with the URL an engine opens that schema by.
pub(crate) fn pg_test_url(tag: &str) -> Option<(crate::pg::Location, String)> {
    let location = pg_test_location(tag)?;
    let url = format!(
        "{}?schema={}",
        std::env::var("LCM_TEST_DATABASE_URL").expect("pg_test_location checked it"),
        location.schema
    );
    Some((location, url))
}

/// `pg_test_url`, the URL going through PgBouncer in transaction mode in front of the same
/// server (`LCM_TEST_POOLER_URL`, which names `pooler=transaction`; scripts/pg-test-server.cjs
/// starts it). None where there is none, which CI does not allow.
pub(crate) fn pooler_test_url(tag: &str) -> Option<(crate::pg::Location, String)> {
    let Ok(pooler) = std::env::var("LCM_TEST_POOLER_URL") else {
        assert!(
            !postgres_required(),
            "LCM_TEST_POOLER_URL is not set, and the pooler is required here: run the tests through scripts/pg-test-server.cjs with Debian's pgbouncer installed"
        );
        eprintln!(
            "pgbouncer: skipped {tag} (LCM_TEST_POOLER_URL is not set; npm test sets it where pgbouncer is installed)"
        );
        return None;
    };
    let location = pg_test_location(tag)?;
    let url = format!("{pooler}&schema={}", location.schema);
    Some((location, url))
}

/// Whether the PostgreSQL (and pooler) cases must run here rather than be skipped.
fn postgres_required() -> bool {
    std::env::var("CI").as_deref() == Ok("true") || std::env::var("LCM_REQUIRE_POSTGRES").as_deref() == Ok("1")
}

/// Drops a test's schema (what `pg_test_location` made room for).
pub(crate) fn drop_test_schema(location: &crate::pg::Location) {
    location
        .connect()
        .unwrap()
        .batch(&format!(
            "DROP SCHEMA IF EXISTS {} CASCADE",
            crate::pg::quote_ident(&location.schema)
        ))
        .unwrap();
}

/// Runs `check` on a fresh lcm-native database in each engine: a new SQLite file, and (when
/// the test server is there, see `pg_test_location`) a new PostgreSQL schema holding the same
/// empty database (copied from such a file, as `lcm-native copy` makes one). `check` gets the
/// connection, the file's schema flags (the same for both) and the engine's name for messages.
pub(crate) fn on_both_engines(tag: &str, mut check: impl FnMut(crate::sql::Db, crate::db::SchemaFlags, &str)) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fresh.db").to_string_lossy().into_owned();
    let mut conn = crate::db::open_connection(&path, 5000).unwrap();
    crate::db::migrate::migrate(&mut conn, &path).unwrap();
    let flags = crate::db::SchemaFlags::read(&conn).unwrap();
    check(crate::sql::Db::Sqlite(&conn), flags, "sqlite");
    let Some(location) = pg_test_location(tag) else { return };
    let fresh = dir.path().join("empty.db").to_string_lossy().into_owned();
    let mut empty = crate::db::open_connection(&fresh, 5000).unwrap();
    crate::db::migrate::migrate(&mut empty, &fresh).unwrap();
    drop(empty);
    let url = format!(
        "{}?schema={}",
        std::env::var("LCM_TEST_DATABASE_URL").unwrap(),
        location.schema
    );
    crate::copy::run(crate::api::CopyOptions::new(&fresh, &url)).unwrap();
    let pg = location.connect().unwrap();
    check(crate::sql::Db::Pg(&pg), flags, "postgres");
    pg.batch(&format!(
        "DROP SCHEMA {} CASCADE",
        crate::pg::quote_ident(&location.schema)
    ))
    .unwrap();
}

/// One conversation (session `s`, id 1) with `n` user messages of 10 tokens each (seq
/// 0…n-1, ids 1…n), for the tests that run on both engines.
pub(crate) fn seed_conversation(db: crate::sql::Db, n: i64) {
    db.execute(
        "INSERT INTO conversations (session_id) VALUES ('s')",
        rusqlite::params![],
    )
    .unwrap();
    for seq in 0..n {
        db.execute(
            "INSERT INTO messages (conversation_id, seq, role, content, token_count) VALUES (1, ?1, 'user', 'm', 10)",
            rusqlite::params![seq],
        )
        .unwrap();
    }
}
