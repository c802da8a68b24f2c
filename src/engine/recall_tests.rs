//! Recall at assembly through the engine: a fact under a summary reaches the context when a
//! turn asks for it, as an excerpt, newest value first; nothing is added when nothing scores;
//! the block stays where it was sent for the requests after it; other conversations and
//! redacted text stay out.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use serde_json::{json, Value};

use super::*;
use crate::api::{AssembleOptions, SweepOptions};
use crate::offline::OfflineSummarizer;
use crate::test_support::engine_with;

fn user(text: &str, minute: usize) -> Value {
    json!({"role": "user", "content": text, "timestamp": format!("2026-03-01 10:{minute:02}:00")})
}

fn assistant(text: &str, minute: usize) -> Value {
    json!({"role": "assistant", "content": [{"type": "text", "text": text}], "timestamp": format!("2026-03-01 10:{minute:02}:30")})
}

/// Chatter of a working session, with no fact in it.
fn filler(i: usize) -> String {
    let topics = [
        "the build pipeline",
        "lint warnings",
        "the release notes",
        "flaky snapshots",
        "the docs site",
    ];
    format!(
        "Turn {i}: let us look at {} again and tidy the wording of the summary table.",
        topics[i % topics.len()]
    )
}

/// A session: a fact planted at turn 1, its new value at turn 12, a pasted log with one
/// warning at turn 5, filler elsewhere; 30 turns, compacted so the plants are under summaries.
fn session(engine: &Engine, key: &str) -> i64 {
    let mut msgs = Vec::new();
    for t in 0..30 {
        let text = match t {
            1 => "For the record, staging Redis lives at cache-stg.internal:6380 for now.".to_string(),
            5 => {
                let mut log: String = (0..1_500)
                    .map(|i| format!("2026-03-01T10:05:{:02} INFO worker {i} heartbeat ok\n", i % 60))
                    .collect();
                log.push_str("2026-03-01T10:06:00 WARN payment-gateway rejected batch 7781 with quota_exceeded\n");
                log.push_str(
                    &(0..300)
                        .map(|i| format!("2026-03-01T10:07:00 INFO tail {i}\n"))
                        .collect::<String>(),
                );
                format!("Here is the worker log:\n{log}")
            }
            12 => "Update: staging Redis moved to cache-stg2.internal:6390 this morning.".to_string(),
            _ => filler(t),
        };
        msgs.push(user(&text, t));
        msgs.push(assistant(&format!("Understood, noted for turn {t}."), t));
    }
    stored_and_compacted(engine, key, &msgs)
}

/// The session `key` of `msgs`, stored and compacted to 4,000 tokens with the offline
/// summarizer, so that its older messages are under summaries.
fn stored_and_compacted(engine: &Engine, key: &str, msgs: &[Value]) -> i64 {
    let cid = engine
        .ingest(&Target::Session(key.into()), msgs)
        .unwrap()
        .conversation_id;
    compacted(engine, cid);
    cid
}

/// Conversation `cid` compacted to 4,000 tokens with the offline summarizer.
fn compacted(engine: &Engine, cid: i64) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(engine.compact(
        cid,
        Arc::new(OfflineSummarizer),
        SweepOptions {
            token_budget: 4_000,
            force: true,
            ..Default::default()
        },
    ))
    .unwrap();
}

fn ask(budget: i64, query: Option<&str>) -> AssembleOptions {
    AssembleOptions {
        token_budget: budget,
        fresh_tail_count: None,
        presentation: None,
        recall_query: query.map(str::to_string),
        auto_recall: None,
    }
}

fn texts(out: &crate::assemble::Assembled) -> Vec<String> {
    out.message_values()
        .iter()
        .map(|m| match &m["content"] {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
        .collect()
}

fn blocks(out: &crate::assemble::Assembled) -> Vec<String> {
    texts(out).into_iter().filter(|t| t.starts_with("<recalled")).collect()
}

fn setup() -> (tempfile::TempDir, Engine, i64) {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_with(&dir, json!({"freshTailCount": 4, "leafChunkTokens": 600}));
    let cid = session(&engine, "s1");
    (dir, engine, cid)
}

#[test]
fn a_fact_under_a_summary_is_recalled_newest_value_first_with_both_times() {
    let (_dir, engine, cid) = setup();
    // Without recall the context does not show the address (the offline summaries may keep
    // it; the plant itself is not a live message).
    let plain = engine.assemble(cid, &ask(8_000, None)).unwrap();
    assert!(blocks(&plain).is_empty());
    let out = engine
        .assemble(
            cid,
            &ask(
                8_000,
                Some("Which address should the client dial for the staging Redis?"),
            ),
        )
        .unwrap();
    let b = blocks(&out);
    assert_eq!(b.len(), 1, "{:?}", out.stats.recall);
    let block = &b[0];
    let (new, old) = (
        block.find("cache-stg2.internal:6390").unwrap(),
        block.find("cache-stg.internal:6380").unwrap(),
    );
    assert!(new < old, "newest first:\n{block}");
    assert!(
        block.contains("time=\"2026-03-01 10:12 UTC\"") && block.contains("time=\"2026-03-01 10:01 UTC\""),
        "{block}"
    );
    assert!(block.contains("superseded-by="), "{block}");
    // The block is the last message, after the history; the stats say what was found.
    assert_eq!(texts(&out).last(), Some(block));
    let stats = out.stats.recall.as_ref().unwrap();
    assert!(stats.tokens > 0 && stats.tokens <= 400, "{stats:?}");
    assert!(stats.terms.contains(&"redis".to_string()), "{stats:?}");
    assert!(stats.hits.iter().any(|h| h.superseded_by.is_some()));
    assert_eq!(out.estimated_tokens, plain.estimated_tokens + stats.tokens);
}

#[test]
fn an_excerpt_is_the_line_not_the_log() {
    let (_dir, engine, cid) = setup();
    let out = engine
        .assemble(cid, &ask(8_000, Some("what did the payment gateway reject, and why?")))
        .unwrap();
    let block = blocks(&out)
        .pop()
        .unwrap_or_else(|| panic!("no block: {:?} {:?}", out.stats.recall, out.outline));
    assert!(block.contains("rejected batch 7781 with quota_exceeded"), "{block}");
    assert!(
        !block.contains("heartbeat ok\n2026"),
        "whole log lines came along:\n{block}"
    );
    assert!(block.len() < 1_500, "{} bytes", block.len());
}

#[test]
fn nothing_is_added_when_nothing_scores() {
    let (_dir, engine, cid) = setup();
    for q in [
        "thanks!",
        "ok, continue",
        "Sounds good to me.",
        "what is the capital of Mongolia?",
    ] {
        let out = engine.assemble(cid, &ask(8_000, Some(q))).unwrap();
        assert!(blocks(&out).is_empty(), "{q}: {:?}", out.stats.recall);
        let stats = out.stats.recall.as_ref().expect("recall ran");
        assert!(stats.abstained.is_some() && stats.tokens == 0, "{q}: {stats:?}");
    }
    // Off: not even run.
    let off = AssembleOptions {
        auto_recall: Some(false),
        ..ask(8_000, Some("Which address for the staging Redis?"))
    };
    let out = engine.assemble(cid, &off).unwrap();
    assert!(blocks(&out).is_empty() && out.stats.recall.is_none());
    // Nor is the turn's pending block given again when this call turns recall off.
    let q = "Which address should the client dial for the staging Redis?";
    assert_eq!(blocks(&engine.assemble(cid, &ask(8_000, Some(q))).unwrap()).len(), 1);
    let off = AssembleOptions {
        auto_recall: Some(false),
        ..ask(8_000, None)
    };
    assert!(blocks(&engine.assemble(cid, &off).unwrap()).is_empty());
}

#[test]
fn the_block_stays_where_it_was_sent_for_the_requests_after_it() {
    let (_dir, engine, cid) = setup();
    let q = "Which address should the client dial for the staging Redis?";
    let first = engine.assemble(cid, &ask(8_000, Some(q))).unwrap();
    let block = blocks(&first).pop().unwrap();
    // The turn's second assembly (no prompt) gives it again, unchanged.
    let second = engine.assemble(cid, &ask(8_000, None)).unwrap();
    assert_eq!(texts(&second), texts(&first));
    assert!(second.stats.recall.as_ref().unwrap().reused);
    // The turn is stored: the next request begins with everything this one sent (the block
    // where it was, before the turn's own messages), then the turn.
    engine
        .ingest(
            &Target::Session("s1".into()),
            &[user(q, 40), assistant("It is cache-stg2.internal:6390.", 40)],
        )
        .unwrap();
    let next = engine.assemble(cid, &ask(8_000, Some("thanks!"))).unwrap();
    let (sent, now) = (texts(&first), texts(&next));
    assert_eq!(
        &now[..sent.len()],
        &sent[..],
        "the previous request is not a prefix of the next one"
    );
    assert_eq!(blocks(&next), vec![block.clone()]);
    assert!(now[sent.len()].contains(q));
    assert_eq!(next.stats.kept_tokens, next.stats.previous_tokens, "{:?}", next.stats);
    let stats = next.stats.recall.as_ref().unwrap();
    assert_eq!(stats.earlier_blocks, 1);
    assert!(stats.abstained.is_some());
    // Also after a restart (the block is read back from the store).
    let path = engine.config().db_path.clone();
    engine.close();
    let reopened = Engine::open(
        crate::config::Config::from_options(
            &json!({"dbPath": path, "freshTailCount": 4, "leafChunkTokens": 600, "timezone": "UTC"}),
            None,
        )
        .unwrap(),
    )
    .unwrap();
    let again = reopened.assemble(cid, &ask(8_000, None)).unwrap();
    assert_eq!(texts(&again), texts(&next)[..texts(&next).len()].to_vec());
    // An excerpt an earlier block shows is not shown again.
    let repeat = reopened.assemble(cid, &ask(8_000, Some(q))).unwrap();
    assert_eq!(
        blocks(&repeat).len(),
        1,
        "the earlier block is kept, no second copy of it: {:?}",
        repeat.stats.recall
    );
}

#[test]
fn other_conversations_only_when_the_scope_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_with(&dir, json!({"freshTailCount": 4, "leafChunkTokens": 600}));
    let cid = session(&engine, "s1");
    let other = engine
        .ingest(
            &Target::Session("s2".into()),
            &[
                user(
                    "The vault rotation ticket is ZEBRA-4411, owned by the platform team.",
                    1,
                ),
                assistant("ok", 1),
            ],
        )
        .unwrap()
        .conversation_id;
    assert_ne!(other, cid);
    let q = Some("any news on the vault rotation ticket?");
    let out = engine.assemble(cid, &ask(8_000, q)).unwrap();
    assert!(!blocks(&out).concat().contains("ZEBRA-4411"));
    engine.close();
    let all = engine_with(
        &dir,
        json!({"freshTailCount": 4, "leafChunkTokens": 600, "autoRecallScope": "all"}),
    );
    let out = all.assemble(cid, &ask(8_000, q)).unwrap();
    let block = blocks(&out).pop().expect("found in the other conversation");
    assert!(
        block.contains("ZEBRA-4411") && block.contains(&format!("conversation=\"{other}\"")),
        "{block}"
    );
}

#[test]
fn redacted_text_is_never_recalled_and_stored_blocks_go_with_it() {
    let (dir, engine, cid) = setup();
    let q = "Which address should the client dial for the staging Redis?";
    engine.assemble(cid, &ask(8_000, Some(q))).unwrap();
    engine
        .ingest(
            &Target::Session("s1".into()),
            &[user(q, 40), assistant("See above.", 40)],
        )
        .unwrap();
    let path = dir.path().join("lcm.db");
    let count = |c: &rusqlite::Connection| -> i64 {
        c.query_row("SELECT count(*) FROM lcm_native_recalls", [], |r| r.get(0))
            .unwrap()
    };
    assert_eq!(count(&rusqlite::Connection::open(&path).unwrap()), 1);
    // The message's kinds of value follow its redacted text: its address goes with it.
    let address = |c: &rusqlite::Connection| -> i64 {
        c.query_row(
            "SELECT k.kinds FROM lcm_native_message_kinds k JOIN messages m USING (message_id)
             WHERE m.content LIKE 'Update: staging Redis moved%'",
            [],
            |r| r.get::<_, i64>(0),
        )
        .unwrap()
            & crate::value_kinds::Want::Address.bit()
    };
    assert_ne!(address(&rusqlite::Connection::open(&path).unwrap()), 0);
    let options =
        crate::input::decode::<crate::redact::RedactOptions>(json!({"pattern": "cache-stg2\\.internal"}), "options")
            .unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(engine.redact(&options, Arc::new(OfflineSummarizer), &AtomicBool::new(false), &|_| {}))
        .unwrap();
    assert_eq!(count(&rusqlite::Connection::open(&path).unwrap()), 0);
    assert_eq!(address(&rusqlite::Connection::open(&path).unwrap()), 0);
    let out = engine.assemble(cid, &ask(8_000, Some(q))).unwrap();
    let all = texts(&out).concat();
    assert!(!all.contains("cache-stg2.internal"), "{all}");
}

#[test]
fn the_block_keeps_within_its_budget_and_the_context_within_its_own() {
    let (_dir, engine, cid) = setup();
    let q = "Which address should the client dial for the staging Redis, and what did the payment gateway reject?";
    // 5 % of 4,000 is 200 tokens.
    let out = engine.assemble(cid, &ask(4_000, Some(q))).unwrap();
    let stats = out.stats.recall.as_ref().unwrap();
    assert!(stats.tokens <= 200, "{stats:?}");
    assert!(out.estimated_tokens <= 4_000);
    // No room left: nothing added.
    let tight = engine
        .assemble(cid, &ask(out.estimated_tokens - stats.tokens, Some(q)))
        .unwrap();
    assert!(blocks(&tight).is_empty() || tight.estimated_tokens <= out.estimated_tokens - stats.tokens);
}

/// A session of pasted-log turns that all open alike ("Here is the log of run N, what went
/// wrong?"), two of them with a remark beside the question, compacted.
fn log_turns(engine: &Engine) -> i64 {
    let mut msgs = Vec::new();
    for t in 0..24 {
        let remark = match t {
            2 => " Also, unrelated: the SOC audit fieldwork starts on 2027-02-15.",
            6 => " Side note, so it is written down somewhere: the flaky checkout test is INC-40718.",
            9 => " The retry budget of that job was 312, later 313.",
            _ => "",
        };
        let log: String = (0..40)
            .map(|i| format!("2026-03-01T10:{:02}:{:02} INFO run {t} step {i} ok\n", t % 60, i % 60))
            .collect();
        msgs.push(user(
            &format!("Here is the log of run {t}, what went wrong?{remark}\n{log}"),
            t,
        ));
        msgs.push(assistant(&format!("ack: Here is the log of run {t}, what went wro"), t));
    }
    stored_and_compacted(engine, "logs", &msgs)
}

#[test]
fn the_words_beside_a_question_about_what_comes_next_recall_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_with(&dir, json!({"freshTailCount": 4, "leafChunkTokens": 600}));
    let cid = log_turns(&engine);
    // The remark's words ("side note", "written down", "checkout") are rare in this history,
    // but they are not what the message asks: the question is about what to do next.
    for q in [
        "Side note, so it is written down somewhere: our checkout budget is 350 ms. Anyway, what should we look at next?",
        "Here is the log of run 30, what went wrong? Also, unrelated: the mobile app talks GraphQL now.",
    ] {
        let out = engine.assemble(cid, &ask(8_000, Some(q))).unwrap();
        assert!(blocks(&out).is_empty(), "{q}: {:?}", out.stats.recall);
    }
    // A bare number says nothing by itself (a run's number is in log lines of other runs).
    let out = engine
        .assemble(cid, &ask(8_000, Some("Did runs 312 and 313 finish?")))
        .unwrap();
    assert!(blocks(&out).is_empty(), "{:?}", out.stats.recall);
    // Asked, the same rare word is an answer; an identifier named in a statement is too.
    let out = engine
        .assemble(cid, &ask(8_000, Some("What was the checkout flake tracked as?")))
        .unwrap();
    assert!(blocks(&out).concat().contains("INC-40718"), "{:?}", out.stats.recall);
    let out = engine
        .assemble(cid, &ask(8_000, Some("INC-40718 is fixed, closing it.")))
        .unwrap();
    assert!(
        blocks(&out).concat().contains("flaky checkout test"),
        "{:?}",
        out.stats.recall
    );
    // A word in capitals is not an identifier: a statement naming one recalls nothing.
    let out = engine
        .assemble(cid, &ask(8_000, Some("The SOC team will join the call.")))
        .unwrap();
    assert!(blocks(&out).is_empty(), "{:?}", out.stats.recall);
}

#[test]
fn only_answers_are_grouped_as_newer_values_of_a_fact() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_with(&dir, json!({"freshTailCount": 4, "leafChunkTokens": 600}));
    let cid = log_turns(&engine);
    // The audit remark answers; the other turns' opening lines and their acks share two of
    // the question's words ("log", "wrong") with other numbers, and answer nothing: they are
    // not shown, least of all as a newer value that supersedes the answer.
    let out = engine
        .assemble(
            cid,
            &ask(
                8_000,
                Some("In which log did I mention when the audit fieldwork starts, and what went wrong there?"),
            ),
        )
        .unwrap();
    let block = blocks(&out)
        .pop()
        .unwrap_or_else(|| panic!("no block: {:?}", out.stats.recall));
    assert!(block.contains("2027-02-15"), "{block}");
    assert!(!block.contains("superseded-by") && !block.contains("ack:"), "{block}");
}

/// A long session `key`: a ticket id planted at its first turn in words that no question
/// below shares, then `turns` turns of chatter, compacted.
fn long_session(engine: &Engine, key: &str, turns: usize) -> i64 {
    let at = |t: usize, s: usize| format!("2026-03-01 {:02}:{:02}:{s:02}", 8 + t / 60, t % 60);
    let mut msgs = Vec::new();
    for t in 0..turns {
        let text = match t {
            1 => "The failing rollout is tracked as OPS-4121, keep it handy.".to_string(),
            _ => filler(t),
        };
        msgs.push(json!({"role": "user", "content": text, "timestamp": at(t, 0)}));
        msgs.push(json!({"role": "assistant", "content": [{"type": "text", "text": format!("Understood, noted for turn {t}.")}], "timestamp": at(t, 30)}));
    }
    stored_and_compacted(engine, key, &msgs)
}

#[test]
fn a_value_of_the_kind_asked_for_is_found_at_any_age_through_the_kinds_indexed_at_ingest() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_with(&dir, json!({"freshTailCount": 4, "leafChunkTokens": 600}));
    // 320 messages: the plant is far more than the scan's 200 newest messages back.
    let cid = long_session(&engine, "long", 160);
    let conn = rusqlite::Connection::open(dir.path().join("lcm.db")).unwrap();
    let (rows, plant_kinds): (i64, i64) = conn
        .query_row(
            "SELECT (SELECT count(*) FROM lcm_native_message_kinds WHERE conversation_id = ?1),
                    (SELECT k.kinds FROM lcm_native_message_kinds k JOIN messages m USING (message_id)
                     WHERE m.content LIKE 'The failing rollout%')",
            [cid],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(rows, 320, "every message stored has its row");
    assert_eq!(plant_kinds, crate::value_kinds::Want::Ticket.bit());
    let q = "What was the incident reference again?";
    let out = engine.assemble(cid, &ask(8_000, Some(q))).unwrap();
    let b = blocks(&out);
    assert_eq!(b.len(), 1, "{:?}", out.stats.recall);
    assert!(b[0].contains("OPS-4121"), "{}", b[0]);
    assert!(out.stats.recall.as_ref().unwrap().hits.iter().all(|h| h.value_of_kind));

    // The same session with its rows gone (as a file lossless-claw wrote): the scan reads only
    // the newest messages not indexed, and the plant is too old for it.
    let other = long_session(&engine, "unindexed", 160);
    conn.execute(
        "DELETE FROM lcm_native_message_kinds WHERE conversation_id = ?1",
        [other],
    )
    .unwrap();
    let out = engine.assemble(other, &ask(8_000, Some(q))).unwrap();
    assert!(
        blocks(&out).iter().all(|b| !b.contains("OPS-4121")),
        "{:?}",
        out.stats.recall
    );
    // A message not indexed among the newest is still read: a new plant, not indexed.
    engine
        .ingest(
            &Target::Session("unindexed".into()),
            &[
                json!({"role": "user", "content": "The rollback is tracked as OPS-5150.", "timestamp": "2026-03-01 11:00:00"}),
                json!({"role": "assistant", "content": "Noted.", "timestamp": "2026-03-01 11:00:30"}),
            ],
        )
        .unwrap();
    conn.execute(
        "DELETE FROM lcm_native_message_kinds WHERE conversation_id = ?1",
        [other],
    )
    .unwrap();
    for _ in 0..12 {
        let more: Vec<Value> = (0..4)
            .map(|i| json!({"role": "user", "content": filler(200 + i), "timestamp": "2026-03-01 11:05:00"}))
            .collect();
        engine.ingest(&Target::Session("unindexed".into()), &more).unwrap();
    }
    compacted(&engine, other);
    let out = engine.assemble(other, &ask(8_000, Some(q))).unwrap();
    let b = blocks(&out);
    assert_eq!(b.len(), 1, "{:?}", out.stats.recall);
    assert!(b[0].contains("OPS-5150") && !b[0].contains("OPS-4121"), "{}", b[0]);
}

#[test]
fn a_question_that_shares_no_word_with_its_fact_reaches_it_by_meaning_and_not_once_redacted() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_with(&dir, json!({"freshTailCount": 4, "leafChunkTokens": 600}));
    let mut msgs = Vec::new();
    for t in 0..30 {
        let text = match t {
            2 => "Quick aside: we settled on Automerge for resolving conflicts in offline sync.".to_string(),
            4 => "The SoC core rail on the sensor board has to sit at 0.85 V, within 3 %.".to_string(),
            6 => "We just moved the iOS CI builds over to Xcode 17.".to_string(),
            _ => filler(t),
        };
        msgs.push(user(&text, t));
        msgs.push(assistant(&format!("Understood, noted for turn {t}."), t));
    }
    let cid = stored_and_compacted(&engine, "meaning", &msgs);
    let q = "What did we pick to merge edits made without a connection?";
    let out = engine.assemble(cid, &ask(8_000, Some(q))).unwrap();
    let b = blocks(&out);
    assert_eq!(b.len(), 1, "{:?}", out.stats.recall);
    assert!(b[0].contains("settled on Automerge"), "{}", b[0]);
    assert!(!b[0].contains("0.85 V") && !b[0].contains("Xcode"), "{}", b[0]);
    let stats = out.stats.recall.as_ref().unwrap();
    let hit = stats
        .hits
        .iter()
        .find(|h| h.similarity.is_some())
        .expect("a hit by meaning");
    assert!(hit.matched.is_empty() && !hit.value_of_kind, "{hit:?}");
    // A greeting asks nothing: the bridge is not crossed, and the statements stay held (read
    // again, a long history would cost every turn that abstains a pass over it).
    let out = engine.assemble(cid, &ask(8_000, Some("Great, thank you."))).unwrap();
    assert!(blocks(&out).is_empty(), "{:?}", out.stats.recall);
    assert!(
        engine.recalls.holds_statements(cid),
        "an abstention keeps the statements"
    );
    // Nor by a question of only the history's common words: nothing there to find by meaning.
    let out = engine
        .assemble(
            cid,
            &ask(8_000, Some("Shall we look at the wording of the summary table again?")),
        )
        .unwrap();
    let hits = &out.stats.recall.as_ref().unwrap().hits;
    assert!(hits.iter().all(|h| h.similarity.is_none()), "{hits:?}");

    let options =
        crate::input::decode::<crate::redact::RedactOptions>(json!({"pattern": "Automerge"}), "options").unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(engine.redact(&options, Arc::new(OfflineSummarizer), &AtomicBool::new(false), &|_| {}))
        .unwrap();
    assert!(!engine.recalls.holds_statements(cid), "a redaction lets them go");
    let out = engine.assemble(cid, &ask(8_000, Some(q))).unwrap();
    let all = texts(&out).concat();
    assert!(!all.contains("Automerge"), "{all}");
}

/// Right after a switch from lossless-claw the conversation can end on one of its re-imported
/// copies, which assembly leaves out: a block made then is anchored on the last row that is
/// not a copy, so the requests after it keep it where it was sent.
#[test]
fn a_block_made_while_the_conversation_ends_on_a_lossless_claw_copy_stays_for_the_next_requests() {
    let (_dir, path, engine) = super::tests::doubled();
    // The rows after the last copy go, so that the file ends on one.
    let conn = crate::db::open_configured(&path, 1000).unwrap();
    let copies = crate::store::copies::ids(crate::sql::Db::Sqlite(&conn), 1).unwrap();
    let last_copy: i64 = conn
        .query_row(
            &format!(
                "SELECT max(seq) FROM messages WHERE message_id IN ({})",
                copies.iter().map(i64::to_string).collect::<Vec<_>>().join(",")
            ),
            [],
            |r| r.get(0),
        )
        .unwrap();
    let ends: i64 = conn
        .query_row(
            "SELECT message_id FROM messages WHERE conversation_id = 1 AND seq = ?1",
            [last_copy],
            |r| r.get(0),
        )
        .unwrap();
    assert!(copies.contains(&ends));
    conn.execute_batch(&format!(
        "DELETE FROM context_items WHERE message_id IN (SELECT message_id FROM messages WHERE conversation_id = 1 AND seq > {last_copy});
         DELETE FROM messages WHERE conversation_id = 1 AND seq > {last_copy};"
    ))
    .unwrap();
    drop(conn);
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(crate::test_support::compact_offline(&engine, 1, 3000));
    let q = "Which turn carried the marker apple-2?";
    let first = engine.assemble(1, &ask(8_000, Some(q))).unwrap();
    let block = blocks(&first)
        .pop()
        .unwrap_or_else(|| panic!("{:?}", first.stats.recall));
    assert!(block.contains("apple-2"), "{block}");
    engine
        .ingest(&Target::Session("dbl".into()), &[user(q, 50), assistant("Turn 2.", 50)])
        .unwrap();
    let next = engine.assemble(1, &ask(8_000, None)).unwrap();
    assert_eq!(blocks(&next), vec![block], "{:?}", next.stats.recall);
    assert_eq!(next.stats.recall.as_ref().unwrap().earlier_blocks, 1);
    // Where it was sent: the previous request is the next one's beginning.
    let (sent, now) = (texts(&first), texts(&next));
    assert_eq!(&now[..sent.len()], &sent[..]);
}

/// A question asked long ago is no answer to a question about it; the reply after it is. A
/// plant line that ends by asking something else ("…, anyway, what next?") says its fact, and
/// a reply that repeats the question is no answer either.
#[test]
fn a_recalled_question_gives_way_to_its_reply_and_a_restatement_is_no_answer() {
    let dir = tempfile::tempdir().unwrap();
    let options = json!({"freshTailCount": 4, "leafChunkTokens": 600});
    question_and_reply(&engine_with(&dir, options.clone()));
    // PostgreSQL reads the neighbouring messages with the same query.
    if let Some((location, url)) = crate::test_support::pg_test_url("recall_replies") {
        let mut on_pg = options;
        on_pg["dbPath"] = json!(url);
        question_and_reply(&engine_with(&dir, on_pg));
        crate::test_support::drop_test_schema(&location);
    }
}

fn question_and_reply(engine: &Engine) {
    let mut msgs = Vec::new();
    for t in 0..30 {
        let (asked, replied) = match t {
            3 => (
                "Can you think of a name for the charging-dock firmware branch?".to_string(),
                "Maybe Betelgeuse? Easy to spot, and nobody uses it yet.".to_string(),
            ),
            7 => (
                "Noting this: the fleet manager answers on amr-fleet.dc3.lan:9443. Anyway, what should we look at next?"
                    .to_string(),
                "Understood, noted for turn 7.".to_string(),
            ),
            9 => (
                "How many pallets does the night shift at the loading dock move?".to_string(),
                "ack: How many pallets does the night shift at the loading dock move".to_string(),
            ),
            _ => (filler(t), format!("Understood, noted for turn {t}.")),
        };
        msgs.push(user(&asked, t));
        msgs.push(assistant(&replied, t));
    }
    let cid = stored_and_compacted(engine, "replies", &msgs);
    let out = engine
        .assemble(
            cid,
            &ask(
                8_000,
                Some("Which name did you come up with for the charging-dock firmware branch?"),
            ),
        )
        .unwrap();
    let b = blocks(&out);
    assert_eq!(b.len(), 1, "{:?}", out.stats.recall);
    assert!(b[0].contains("Maybe Betelgeuse?"), "the reply: {}", b[0]);
    assert!(!b[0].contains("Can you think of a name"), "the question: {}", b[0]);
    let hits = &out.stats.recall.as_ref().unwrap().hits;
    let hit = hits
        .iter()
        .find(|h| b[0].contains(&format!("message=\"{}\"", h.message_id)))
        .unwrap();
    assert_eq!(hit.role, "assistant", "{hits:?}");
    assert!(
        hit.matched.contains(&"firmware".to_string()),
        "the question's words: {hit:?}"
    );

    // The plant line's fact is said, not asked: its words count in full, and it is recalled.
    let out = engine
        .assemble(
            cid,
            &ask(8_000, Some("Where does the fleet manager answer these days?")),
        )
        .unwrap();
    let b = blocks(&out);
    assert!(
        b.first().is_some_and(|b| b.contains("amr-fleet.dc3.lan:9443")),
        "{:?}",
        out.stats.recall
    );

    // Only the question and its restatement hold the words: nothing answers, no block.
    let out = engine
        .assemble(
            cid,
            &ask(
                8_000,
                Some("How many pallets does the night shift at the loading dock move?"),
            ),
        )
        .unwrap();
    assert!(
        blocks(&out).iter().all(|b| !b.contains("does the night shift")),
        "{:?}",
        out.stats.recall
    );
}
