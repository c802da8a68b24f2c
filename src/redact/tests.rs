//! Redaction on the theme transcript with a planted secret that the summaries repeat up to
//! depth 2: afterwards no message, part, full-text row, summary, version or byte of the files
//! holds it, and every covering summary was regenerated or marked.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use rusqlite::Connection;
use serde_json::{json, Value};

use super::*;
use crate::api::{RedactionResult, SummaryFilter, SweepOptions};
use crate::engine::Engine;
use crate::history::Reason;
use crate::offline::OfflineSummarizer;
use crate::store::conversations::Target;
use crate::store::redactions::INGEST_REASON;
use crate::test_support::{engine_with, stub_text, Act, Scripted};
use crate::test_support::{transcript, THEME};

const SECRET: &str = "sk-live-Zq8Xw3Vb7Nn2Kp5Rt9";

/// Database files whose VACUUM fails as on a full disk (`scrub`'s test hook).
static VACUUM_FAILS: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

pub(super) fn vacuum_fails_for(conn: &Connection) -> bool {
    let path = conn.path().unwrap_or_default().to_string();
    VACUUM_FAILS.lock().unwrap().contains(&path)
}

/// The transcript with the secret in a user message, a tool call's arguments and a tool result
/// early on; compacted to depth 2 by a model that repeats the secret when its source holds it.
async fn planted(extra: Value) -> (tempfile::TempDir, Engine, i64) {
    let dir = tempfile::tempdir().unwrap();
    let mut options = json!({"leafChunkTokens": 1200, "leafTargetTokens": 200, "freshTailCount": 16,
                             "leafMinFanout": 2, "condensedMinFanout": 2});
    for (k, v) in extra.as_object().unwrap() {
        options[k] = v.clone();
    }
    let engine = engine_with(&dir, options);
    let mut messages = transcript(THEME);
    let mut planted = 0;
    for m in messages.iter_mut().take(40) {
        match m["role"].as_str() {
            Some("user") if planted == 0 => {
                m["content"] = json!(format!("Use my key {SECRET} for the API."));
                planted += 1;
            }
            Some("toolResult") if planted == 1 => {
                m["content"] = json!([{"type": "text", "text": format!("export KEY={SECRET}")}]);
                planted += 1;
            }
            Some("assistant") if planted == 2 => {
                if let Some(blocks) = m["content"].as_array_mut() {
                    if let Some(call) = blocks.iter_mut().find(|b| b["type"] == "toolCall") {
                        call["arguments"] = json!({"command": format!("curl -H 'Authorization: {SECRET}' x")});
                        planted += 1;
                    }
                }
            }
            _ => {}
        }
    }
    assert_eq!(planted, 3);
    let cid = engine
        .ingest(&Target::Session("t".into()), &messages)
        .unwrap()
        .conversation_id;
    // It repeats the secret whenever its prompt holds it, previous context included: the text
    // reaches summaries whose subtree does not cover the message.
    let repeating = Scripted::reading_prompts(|_, prompt, r| match prompt.contains(SECRET) {
        true => Act::Text(format!("Summary naming {SECRET}.\nExpand for details about: key.")),
        false => Act::Text(stub_text(r)),
    });
    let sweep = SweepOptions {
        token_budget: 3000,
        force: true,
        ..Default::default()
    };
    engine.compact(cid, repeating, sweep).await.unwrap();
    (dir, engine, cid)
}

fn options(v: Value) -> RedactOptions {
    crate::input::decode::<RedactOptions>(v, "options").unwrap()
}

async fn redact(engine: &Engine, o: &RedactOptions) -> Result<RedactionResult> {
    engine
        .redact(o, Arc::new(OfflineSummarizer), &AtomicBool::new(false), &|_| {})
        .await
}

/// Every place in the database that holds the secret, as `table.column` names.
fn holders(path: &str) -> Vec<String> {
    let c = Connection::open(path).unwrap();
    let mut out = Vec::new();
    let tables: Vec<String> = c
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table'")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    for t in tables {
        let cols: Vec<String> = c
            .prepare(&format!("SELECT name FROM pragma_table_info('{t}')"))
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(|r| r.unwrap())
            .collect();
        for col in cols {
            let n: i64 = c
                .query_row(
                    &format!("SELECT count(*) FROM \"{t}\" WHERE instr(CAST(\"{col}\" AS TEXT), ?1) > 0"),
                    [SECRET],
                    |r| r.get(0),
                )
                .unwrap_or(0);
            if n > 0 {
                out.push(format!("{t}.{col}"));
            }
        }
    }
    out
}

/// The files of the database whose bytes hold `needle`.
fn files_holding(path: &str, needle: &str) -> Vec<String> {
    ["", "-wal", "-shm"]
        .iter()
        .map(|s| format!("{path}{s}"))
        .filter(|p| std::fs::read(p).is_ok_and(|b| b.windows(needle.len()).any(|w| w == needle.as_bytes())))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redaction_reaches_every_copy_down_to_the_file_bytes() {
    let (_d, engine, cid) = planted(json!({})).await;
    let path = engine.config().db_path.clone();
    let depth2: Vec<_> = engine.summaries(cid, &SummaryFilter::at_depth(2)).unwrap();
    assert!(
        depth2.iter().any(|s| s.fields.content.contains(SECRET)),
        "a depth-2 summary repeats the secret"
    );
    // An older version holding the secret too: a rewrite of a covering leaf.
    let leaf = engine
        .summaries(cid, &SummaryFilter::at_depth(0))
        .unwrap()
        .into_iter()
        .find(|s| s.fields.content.contains(SECRET))
        .unwrap();
    let again = crate::rewrite::RewriteOptions {
        selection: crate::rewrite::Selection::Summary(leaf.fields.summary_id.clone()),
        apply: true,
        prompt_dir: None,
        timestamps: true,
        model: None,
    };
    let text = format!("Rewritten, still naming {SECRET}.\nExpand for details about: key.");
    engine
        .rewrite(
            cid,
            Scripted::new(move |_, _| Act::Text(text.clone())),
            &again,
            &AtomicBool::new(false),
            &|_| {},
        )
        .await
        .unwrap();
    assert!(holders(&path).len() >= 6, "{:?}", holders(&path));

    let r = redact(
        &engine,
        &options(json!({"conversationId": cid, "pattern": "sk-live-[A-Za-z0-9]+", "reason": "leaked key"})),
    )
    .await
    .unwrap();
    assert!(r.messages == 3 && r.matches >= 3, "{r:?}");
    assert!(
        r.summaries >= 3 && r.regenerated == r.summaries && r.pending == 0,
        "{r:?}"
    );
    assert!(r.versions_purged > r.summaries, "{r:?}");
    assert_eq!(holders(&path), Vec::<String>::new());
    for needle in [SECRET, "Zq8Xw3Vb7Nn2Kp5Rt9", "zq8xw3vb7nn2kp5rt9"] {
        assert_eq!(
            files_holding(&path, needle),
            Vec::<String>::new(),
            "{needle} (checkpointed: {})",
            r.checkpointed
        );
    }
    // Every covering summary was regenerated from the redacted text, as a new version.
    for s in engine.summaries(cid, &SummaryFilter::default()).unwrap() {
        let versions = engine.history(&s.fields.summary_id).unwrap();
        let newest = versions.last().unwrap();
        assert!(newest.current && newest.stored);
        if newest.reason == Reason::Redaction {
            assert_eq!(s.fields.model, crate::summarizer::OFFLINE_MODEL);
            assert!(
                versions.iter().all(|v| v.reason == Reason::Redaction),
                "older versions are purged"
            );
        }
    }
    assert_eq!(
        engine
            .summaries(cid, &SummaryFilter::default())
            .unwrap()
            .iter()
            .filter(|s| engine.history(&s.fields.summary_id).unwrap().last().unwrap().reason == Reason::Redaction)
            .count(),
        r.summaries
    );
    let log: (String, i64, i64, String, Option<String>) = Connection::open(&path)
        .unwrap()
        .query_row(
            "SELECT message_ids, messages, summaries, reason, completed_at FROM lcm_native_redactions",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
        )
        .unwrap();
    assert_eq!((log.1, log.2 as usize, log.3.as_str()), (3, r.summaries, "leaked key"));
    assert!(log.4.is_some(), "complete");
    let report = engine.verify(None).unwrap();
    assert!(report.ok, "{:?}", report.problems);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mark_only_leaves_notices_that_the_next_redaction_regenerates() {
    let (_d, engine, cid) = planted(json!({})).await;
    let path = engine.config().db_path.clone();
    let o = options(json!({"pattern": "sk-live-[A-Za-z0-9]+", "markOnly": true}));
    let r = redact(&engine, &o).await.unwrap();
    assert!(
        r.summaries >= 3 && r.pending == r.summaries && r.regenerated == 0,
        "{r:?}"
    );
    assert_eq!(holders(&path), Vec::<String>::new());
    let marked: Vec<_> = engine
        .summaries(cid, &SummaryFilter::default())
        .unwrap()
        .into_iter()
        .filter(|s| s.fields.content == NOTICE)
        .collect();
    assert_eq!(marked.len(), r.summaries);
    assert!(marked.iter().all(|s| s.fallback), "a notice is a fallback to repair");
    assert!(engine.verify(None).unwrap().ok);
    // The pattern matches nothing now, but the marked summaries are finished.
    let again = redact(&engine, &options(json!({"pattern": "sk-live-[A-Za-z0-9]+"})))
        .await
        .unwrap();
    assert_eq!(
        (again.redaction_id, again.messages, again.regenerated, again.pending),
        (None, 0, r.summaries, 0)
    );
    assert!(engine
        .summaries(cid, &SummaryFilter::default())
        .unwrap()
        .iter()
        .all(|s| s.fields.content != NOTICE));
    assert!(engine.verify(None).unwrap().ok);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redacting_whole_messages_keeps_them_rebuildable() {
    let (_d, engine, cid) = planted(json!({})).await;
    let first = engine.messages(cid, 0, 5).unwrap();
    let target = first.iter().find(|m| m.role == "user").unwrap();
    let o = options(json!({"messageIds": [target.message_id], "replacement": "[removed]"}));
    let r = redact(&engine, &o).await.unwrap();
    assert_eq!(r.messages, 1);
    let after = engine.messages(cid, 0, 5).unwrap();
    let m = after.iter().find(|m| m.message_id == target.message_id).unwrap();
    assert_eq!(m.role, "user");
    assert!(
        m.content.to_string().contains("[removed]") && !m.content.to_string().contains(SECRET),
        "{}",
        m.content
    );
    assert!(engine.verify(None).unwrap().ok);
}

/// The summaries holding the secret, and those of them a redaction following only the
/// DAG (covered messages, then parents) would reach.
fn secret_holders(path: &str) -> (Vec<String>, Vec<String>) {
    let c = Connection::open(path).unwrap();
    let ids = |sql: &str| -> Vec<String> {
        c.prepare(sql)
            .unwrap()
            .query_map([SECRET], |r| r.get(0))
            .unwrap()
            .map(|r| r.unwrap())
            .collect()
    };
    let holding = ids("SELECT summary_id FROM summaries WHERE instr(content, ?1) > 0 ORDER BY summary_id");
    let by_lineage = ids("WITH RECURSIVE a(id) AS (
           SELECT sm.summary_id FROM summary_messages sm JOIN messages m USING (message_id)
            WHERE instr(m.content, ?1) > 0
               OR m.message_id IN (SELECT message_id FROM message_parts WHERE instr(CAST(tool_input AS TEXT), ?1) > 0)
           UNION SELECT p.summary_id FROM summary_parents p JOIN a ON p.parent_summary_id = a.id)
         SELECT id FROM a WHERE id IN (SELECT summary_id FROM summaries WHERE instr(content, ?1) > 0) ORDER BY id");
    (holding, by_lineage)
}

/// A summarizer shown a summary as previous context can repeat what it says: the secret then
/// sits in summaries whose subtree never covered it. A redaction follows the recorded previous
/// context (a whole-message redaction, which has no pattern to look for), and with a pattern
/// also finds the summaries that hold a match with no record of how (made by lossless-claw,
/// or before lcm-native recorded it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_that_reached_summaries_as_previous_context_is_redacted_there_too() {
    let (_d, engine, cid) = planted(json!({})).await;
    let path = engine.config().db_path.clone();
    let (holding, by_lineage) = secret_holders(&path);
    assert!(holding.len() > by_lineage.len(), "{holding:?} / {by_lineage:?}");
    // Whole messages, by id: the recorded previous context is followed.
    let planted_ids: Vec<i64> = Connection::open(&path)
        .unwrap()
        .prepare(
            "SELECT DISTINCT m.message_id FROM messages m LEFT JOIN message_parts p USING (message_id)
              WHERE instr(m.content, ?1) > 0 OR instr(CAST(p.tool_input AS TEXT), ?1) > 0",
        )
        .unwrap()
        .query_map([SECRET], |r| r.get(0))
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    assert_eq!(planted_ids.len(), 3);
    let r = redact(
        &engine,
        &options(json!({"messageIds": planted_ids, "replacement": "[removed]"})),
    )
    .await
    .unwrap();
    assert!(r.summaries >= holding.len() && r.pending == 0, "{r:?}");
    assert_eq!(holders(&path), Vec::<String>::new());
    assert!(engine.verify(None).unwrap().ok);

    // The same file as lossless-claw would have left it: no record of previous context.
    let (_d2, engine, cid2) = planted(json!({})).await;
    let path = engine.config().db_path.clone();
    Connection::open(&path)
        .unwrap()
        .execute("DELETE FROM lcm_native_summary_context", [])
        .unwrap();
    let r = redact(
        &engine,
        &options(json!({"conversationId": cid2, "pattern": "sk-live-[A-Za-z0-9]+"})),
    )
    .await
    .unwrap();
    assert!(r.summaries_found > 0 && r.summaries >= holding.len(), "{r:?}");
    assert_eq!(holders(&path), Vec::<String>::new());
    for needle in [SECRET, "Zq8Xw3Vb7Nn2Kp5Rt9"] {
        assert_eq!(files_holding(&path, needle), Vec::<String>::new(), "{needle}");
    }
    for (query, mode) in [
        ("Zq8Xw3Vb7Nn2Kp5Rt9", "fts"),
        ("Zq8Xw3Vb7Nn2Kp5Rt9", "like"),
        ("sk-live-[A-Za-z0-9]+", "regex"),
    ] {
        let o: crate::api::GrepOptions =
            crate::input::decode(json!({"query": query, "mode": mode}), "options").unwrap();
        assert!(engine.grep(Some(cid2), &o).unwrap().hits.is_empty(), "{mode}");
    }
    let assembled = engine
        .assemble(
            cid2,
            &crate::input::decode(json!({"tokenBudget": 100000}), "options").unwrap(),
        )
        .unwrap();
    assert!(!serde_json::to_string(&assembled.messages).unwrap().contains(SECRET));
    assert!(engine.verify(None).unwrap().ok);
    let _ = cid;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_are_refused_and_change_nothing() {
    let (_d, engine, cid) = planted(json!({})).await;
    let digest = engine.verify(None).unwrap().digest;
    for (v, code) in [
        (json!({"pattern": "(unclosed"}), "E_INVALID_INPUT"),
        (json!({"pattern": ".*"}), "E_INVALID_INPUT"),
        (json!({"finish": true, "pattern": "x"}), "E_INVALID_INPUT"),
        (json!({"pattern": "x", "colour": 1}), "E_INVALID_INPUT"),
        (
            json!({"pattern": "REDACT", "replacement": "[REDACTED]"}),
            "E_INVALID_INPUT",
        ),
    ] {
        assert_eq!(
            crate::input::decode::<RedactOptions>(v.clone(), "options")
                .unwrap_err()
                .code(),
            code,
            "{v}"
        );
    }
    let nothing = redact(
        &engine,
        &options(json!({"conversationId": cid, "pattern": "no-such-text-zzz"})),
    )
    .await
    .unwrap_err();
    assert_eq!(nothing.code(), "E_INVALID_INPUT", "{nothing}");
    let unknown = redact(&engine, &options(json!({"messageIds": [999_999]})))
        .await
        .unwrap_err();
    assert_eq!(unknown.code(), "E_NOT_FOUND");
    let unknown = redact(&engine, &options(json!({"conversationId": 77, "pattern": "x"})))
        .await
        .unwrap_err();
    assert_eq!(unknown.code(), "E_NOT_FOUND");
    assert_eq!(engine.verify(None).unwrap().digest, digest);
}

/// `redactPatterns`: a secret in a new message's text, tool arguments and tool result is
/// replaced before anything is stored, the call says how many, the log records the ids, and a
/// repeat of the turn (same entry ids) stores nothing twice.
#[test]
fn ingest_time_patterns_keep_secrets_out_of_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_with(&dir, json!({"redactPatterns": ["@builtin", "ACME-[0-9]{6}"]}));
    let path = engine.config().db_path.clone();
    let aws = "AKIAIOSFODNN7EXAMPLE";
    let turn = vec![
        json!({"role": "user", "content": format!("my key is {aws}, customer ACME-123456"), "entryId": "e1"}),
        json!({"role": "assistant", "entryId": "e2", "content": [
            {"type": "text", "text": "Checking."},
            {"type": "toolCall", "id": "c1", "name": "bash", "arguments": {"command": format!("aws --key {aws} s3 ls")}}]}),
        json!({"role": "toolResult", "entryId": "e3", "toolCallId": "c1", "toolName": "bash",
               "content": [{"type": "text", "text": format!("listing with {aws}")}]}),
        json!({"role": "user", "content": "nothing secret here", "entryId": "e4"}),
    ];
    let target = Target::Session("s".into());
    let out = engine.ingest(&target, &turn).unwrap();
    assert_eq!((out.inserted, out.redacted), (4, 4));
    // Rows of messages, parts and the full-text index holding `needle`.
    let rows_with = |needle: &str| -> i64 {
        Connection::open(&path)
            .unwrap()
            .query_row(
                "SELECT (SELECT count(*) FROM messages WHERE instr(content, ?1) > 0)
                      + (SELECT count(*) FROM message_parts WHERE instr(coalesce(text_content, '') || coalesce(tool_input, '')
                              || coalesce(tool_output, '') || metadata, ?1) > 0)
                      + (SELECT count(*) FROM messages_fts WHERE messages_fts MATCH '\"' || ?1 || '\"')",
                [needle],
                |r| r.get(0),
            )
            .unwrap()
    };
    assert_eq!(rows_with(aws), 0);
    assert_eq!(rows_with("ACME-123456"), 0);
    // The user's and the tool's text (and their FTS rows), and the 3 parts; the assistant's
    // plain text is only "Checking.".
    assert_eq!(rows_with("REDACTED"), 7);
    let stored = engine.messages(out.conversation_id, 0, 10).unwrap();
    assert_eq!(
        stored[1].content[1]["arguments"]["command"],
        "aws --key [REDACTED] s3 ls"
    );
    assert_eq!(stored[3].content.to_string(), json!("nothing secret here").to_string());

    let log: (String, i64, i64, i64, String, Option<String>) = Connection::open(&path)
        .unwrap()
        .query_row(
            "SELECT message_ids, messages, parts, matches, reason, completed_at FROM lcm_native_redactions",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?)),
        )
        .unwrap();
    let ids: Vec<i64> = stored[..3].iter().map(|m| m.message_id).collect();
    assert_eq!(log.0, serde_json::to_string(&ids).unwrap());
    assert_eq!((log.1, log.2, log.3, log.4.as_str()), (3, 3, 4, INGEST_REASON));
    assert!(log.5.is_some());

    // The host sends the whole session again: nothing new is stored or logged.
    let again = engine.ingest(&target, &turn).unwrap();
    assert_eq!((again.inserted, again.skipped, again.redacted), (0, 4, 0));
    let logged: i64 = Connection::open(&path)
        .unwrap()
        .query_row("SELECT count(*) FROM lcm_native_redactions", [], |r| r.get(0))
        .unwrap();
    assert_eq!(logged, 1);
    assert!(engine.verify(None).unwrap().ok);
}

#[test]
fn redact_patterns_are_checked_when_the_engine_opens() {
    use crate::config::Config;
    for (v, needle) in [
        (json!("yes"), "expected a boolean or an array of strings"),
        (json!([1]), "expected a boolean or an array of strings"),
        (json!(["(unclosed"]), "\"(unclosed\""),
        (json!(["a*"]), "empty string"),
    ] {
        let e = Config::from_options(&json!({"dbPath": "x.db", "redactPatterns": v}), None).unwrap_err();
        assert_eq!(e.code(), "E_INVALID_CONFIG");
        assert!(
            e.to_string().contains("redactPatterns") && e.to_string().contains(needle),
            "{e}"
        );
    }
    let off = Config::from_options(&json!({"dbPath": "x.db"}), None).unwrap();
    assert!(off.ingest_redactor.is_none(), "off by default");
    let env = crate::config::config_from_env(|k| (k == "LCM_REDACT_PATTERNS").then(|| "true".to_string())).unwrap();
    assert_eq!(env["redactPatterns"], json!(true));
    let env =
        crate::config::config_from_env(|k| (k == "LCM_REDACT_PATTERNS").then(|| r#"["x[0-9]+"]"#.into())).unwrap();
    assert_eq!(env["redactPatterns"], json!(["x[0-9]+"]));
    let bad = crate::config::config_from_env(|k| (k == "LCM_REDACT_PATTERNS").then(|| "x[0-9".into())).unwrap_err();
    assert!(bad.to_string().contains("LCM_REDACT_PATTERNS"), "{bad}");
}

/// A scrub cut short (a full disk at VACUUM, or a kill after the text was replaced): the text
/// is replaced and the call says the scrub is pending instead of failing; the file records it,
/// the next open reports it, the same pattern no longer "matches nothing" while it is pending,
/// and `redact` with no pattern finishes it: no byte of the files holds the secret (#33 item 2).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scrub_cut_short_is_recorded_reported_at_open_and_finished() {
    let (_d, engine, cid) = planted(json!({})).await;
    let path = engine.config().db_path.clone();
    let canonical = Connection::open(&path).unwrap().path().unwrap().to_string();
    VACUUM_FAILS.lock().unwrap().push(canonical.clone());
    let pattern = options(json!({"conversationId": cid, "pattern": "sk-live-[A-Za-z0-9]+"}));
    let r = redact(&engine, &pattern).await.unwrap();
    assert!(r.redaction_id.is_some() && r.matches > 0);
    assert!(r.scrub_pending, "{r:?}");
    assert!(r.scrub_error.as_deref().is_some_and(|e| e.starts_with("E_IO")), "{r:?}");
    assert!(holders(&path).is_empty(), "{:?}", holders(&path));
    assert!(
        !files_holding(&path, SECRET).is_empty(),
        "the test needs old bytes left behind"
    );
    // Again with the same pattern: nothing to replace, but the scrub is pending, so it is no
    // longer "matches nothing"; still failing, still pending.
    let again = redact(&engine, &pattern).await.unwrap();
    assert!(again.scrub_pending && again.redaction_id.is_none());
    assert!(engine.close());
    VACUUM_FAILS.lock().unwrap().retain(|p| *p != canonical);

    let engine = Engine::open(crate::config::Config::with_db_path(&path)).unwrap();
    assert_eq!(engine.migration().scrubs_pending, 1);
    assert!(
        engine.migration().summary.contains("redact --finish"),
        "{}",
        engine.migration().summary
    );
    let done = redact(&engine, &options(json!({}))).await.unwrap();
    assert!(!done.scrub_pending && done.scrub_error.is_none(), "{done:?}");
    assert!(
        files_holding(&path, SECRET).is_empty(),
        "{:?}",
        files_holding(&path, SECRET)
    );
    assert!(engine.close());
    let engine = Engine::open(crate::config::Config::with_db_path(&path)).unwrap();
    assert_eq!(engine.migration().scrubs_pending, 0);
    // Nothing left to finish: a no-op, not an error.
    let idle = redact(&engine, &options(json!({"finish": true}))).await.unwrap();
    assert_eq!((idle.regenerated, idle.pending, idle.scrub_pending), (0, 0, false));
}

/// The same redaction on PostgreSQL (the planted file copied into a schema): the same result
/// as on the file, and afterwards no row, column (the words column too) or file of a table or
/// index of the database holds the secret. (The write-ahead log still may until PostgreSQL
/// recycles it: see the README.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgres_no_row_column_index_or_table_file_keeps_the_secret() {
    if let Some((location, url)) = crate::test_support::pg_test_url("redact") {
        no_row_column_index_or_table_file_keeps_the_secret(location, url).await;
    }
}

/// The same through PgBouncer in transaction mode (`pooler=transaction`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgres_no_row_column_index_or_table_file_keeps_the_secret_through_a_transaction_pooler() {
    if let Some((location, url)) = crate::test_support::pooler_test_url("redact_pooled") {
        no_row_column_index_or_table_file_keeps_the_secret(location, url).await;
    }
}

async fn no_row_column_index_or_table_file_keeps_the_secret(location: crate::pg::Location, url: String) {
    let (_d, file_engine, cid) = planted(json!({})).await;
    let path = file_engine.config().db_path.clone();
    file_engine.close();
    crate::copy::run(crate::api::CopyOptions::new(&path, &url)).unwrap();
    // `planted`'s settings, over `engine_with`'s.
    let open = |db: &str| {
        let options = json!({"dbPath": db, "freshTailCount": 16, "leafChunkTokens": 1200, "leafTargetTokens": 200,
                             "leafMinFanout": 2, "condensedMinFanout": 2, "condensedTargetTokens": 80,
                             "timezone": "UTC", "maxSweepIterations": 10000});
        Engine::open(crate::config::Config::from_options(&options, None).unwrap()).unwrap()
    };
    let (sqlite, pg) = (open(&path), open(&url));
    let c = location.connect().unwrap();
    let lexeme = SECRET.rsplit('-').next().unwrap().to_lowercase();
    let in_rows = |c: &crate::pg::Conn| -> Vec<String> {
        let columns = c
            .query(
                "SELECT table_name, column_name FROM information_schema.columns
                 WHERE table_schema = $1 AND data_type IN ('text', 'tsvector')",
                &[&c.schema],
            )
            .unwrap();
        let mut out = Vec::new();
        for r in columns {
            let (t, col): (String, String) = (r.get(0), r.get(1));
            let n: i64 = c
                .query_one_value(
                    &format!("SELECT count(*) FROM \"{t}\" WHERE strpos(lower(CAST(\"{col}\" AS TEXT)), $1) > 0"),
                    &[&lexeme],
                )
                .unwrap();
            if n > 0 {
                out.push(format!("{t}.{col}"));
            }
        }
        out
    };
    let before = in_rows(&c);
    assert!(before.len() >= 4, "{before:?}");
    assert!(before.iter().any(|h| h.ends_with(".lcm_search")), "{before:?}");
    let (files, readable) = database_files(&c);
    if readable {
        assert!(
            !files_with(&files, SECRET).is_empty(),
            "the scan finds the secret in the table files before the redaction"
        );
    }
    // No sample of any text in the planner's statistics (the catalog, which a redaction cannot
    // vacuum): the text columns have none.
    let sampled: i64 = c
        .query_one_value(
            "SELECT count(*) FROM pg_stats WHERE schemaname = $1 AND (attname IN ('content', 'lcm_search')
               OR (tablename = 'message_parts' AND attname IN ('text_content', 'tool_input', 'tool_output')))",
            &[&c.schema],
        )
        .unwrap();
    assert_eq!(sampled, 0);
    let analyzed: i64 = c
        .query_one_value("SELECT count(*) FROM pg_stats WHERE schemaname = $1", &[&c.schema])
        .unwrap();
    assert!(analyzed > 0, "the schema was analysed");
    let o = options(json!({"conversationId": cid, "pattern": "sk-live-[A-Za-z0-9]+", "reason": "leaked key"}));
    let (a, b) = (redact(&sqlite, &o).await.unwrap(), redact(&pg, &o).await.unwrap());
    let counts = |r: &RedactionResult| {
        (
            r.matches,
            r.messages,
            r.parts,
            r.summaries,
            r.versions_purged,
            r.regenerated,
            r.pending,
        )
    };
    assert_eq!(counts(&a), counts(&b));
    assert!(b.matches >= 3 && b.summaries > 0, "{b:?}");
    assert!(b.checkpointed && !b.scrub_pending && b.scrub_error.is_none(), "{b:?}");
    assert_eq!(in_rows(&c), Vec::<String>::new());
    let (va, vb) = (sqlite.verify(None).unwrap(), pg.verify(None).unwrap());
    assert!(va.ok && vb.ok, "{:?} / {:?}", va.problems, vb.problems);
    assert_eq!(va.digest, vb.digest);
    if readable {
        let (files, _) = database_files(&c);
        for needle in [SECRET, lexeme.as_str()] {
            assert_eq!(files_with(&files, needle), Vec::<String>::new(), "{needle}");
        }
    } else {
        eprintln!("postgres: the server's data directory is not readable here; its files were not scanned");
    }
    pg.close();
    sqlite.close();
    crate::test_support::drop_test_schema(&location);
}

/// The files of every table, TOAST table and index of the connection's schema (after a
/// checkpoint, so they hold what was written: each relation's file, its further segments and
/// forks), and whether this process can read the server's directory.
fn database_files(c: &crate::pg::Conn) -> (Vec<std::path::PathBuf>, bool) {
    c.batch("CHECKPOINT").unwrap();
    let rows = c
        .query(
            "WITH rel AS (
               SELECT c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1
               UNION SELECT c.reltoastrelid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                 WHERE n.nspname = $1 AND c.reltoastrelid <> 0
               UNION SELECT i.indexrelid FROM pg_index i JOIN pg_class t ON t.oid = i.indrelid
                 JOIN pg_class c ON c.reltoastrelid = t.oid JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1
             )
             SELECT current_setting('data_directory') || '/' || pg_relation_filepath(oid) FROM rel
             WHERE pg_relation_filepath(oid) IS NOT NULL",
            &[&c.schema],
        )
        .unwrap();
    let prefixes: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
    let Some(dir) = prefixes
        .first()
        .and_then(|p| std::path::Path::new(p).parent().map(|d| d.to_path_buf()))
    else {
        return (Vec::new(), false);
    };
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return (Vec::new(), false);
    };
    let files = entries
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            let name = p.display().to_string();
            prefixes
                .iter()
                .any(|f| name == *f || name.starts_with(&format!("{f}.")) || name.starts_with(&format!("{f}_")))
        })
        .collect();
    (files, true)
}

fn files_with(files: &[std::path::PathBuf], needle: &str) -> Vec<String> {
    files
        .iter()
        .filter(|p| std::fs::read(p).is_ok_and(|b| b.windows(needle.len()).any(|w| w == needle.as_bytes())))
        .map(|p| p.display().to_string())
        .collect()
}
