//! What a host adapter relies on: sessions mapped by key, turns stored once by their
//! advancement key, one-time imports, the host's extra message kinds, and sweeps that stop
//! when asked.

use std::sync::atomic::AtomicBool;

use rusqlite::Connection;
use serde_json::{json, Value};

use super::*;
use crate::api::{StopReason, SummaryFilter};
use crate::test_support::temp_engine;

fn turn(n: usize) -> Vec<Value> {
    vec![
        json!({"role": "user", "content": format!("question {n}")}),
        json!({"role": "assistant", "content": [{"type": "text", "text": format!("answer {n}")}]}),
    ]
}

fn key(k: &str, id: &str) -> Target {
    Target::SessionKey {
        key: k.into(),
        session_id: Some(id.into()),
    }
}

fn commit(engine: &Engine, target: &Target, advancement: &str, msgs: &[Value]) -> IngestOutcome {
    let options = IngestOptions {
        advancement_key: Some(advancement.into()),
        ..Default::default()
    };
    engine.ingest_with(target, msgs, options).unwrap()
}

#[test]
fn a_session_key_keeps_its_conversation_when_the_session_id_changes() {
    let (_dir, engine) = temp_engine();
    let first = engine.ingest(&key("agent:main:main", "s1"), &turn(1)).unwrap();
    // The host moved the key to a new session id (a /new, a restart): same conversation,
    // whose session id follows the host's.
    let second = engine.ingest(&key("agent:main:main", "s2"), &turn(2)).unwrap();
    assert_eq!(first.conversation_id, second.conversation_id);
    // The parts written after the move carry the new id.
    let part_session: String = Connection::open(&engine.config().db_path)
        .unwrap()
        .query_row(
            "SELECT p.session_id FROM message_parts p JOIN messages m USING (message_id) ORDER BY m.seq DESC LIMIT 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(part_session, "s2");
    let found = engine
        .find_conversation(&Target::Session("s2".into()))
        .unwrap()
        .unwrap();
    assert_eq!(found.conversation_id, first.conversation_id);
    assert_eq!(found.session_key.as_deref(), Some("agent:main:main"));
    assert_eq!(found.message_count, 4);
    // Another key gets its own conversation.
    let other = engine.ingest(&key("agent:main:explicit:x", "s3"), &turn(1)).unwrap();
    assert_ne!(other.conversation_id, first.conversation_id);
    // A call that knows only the key keeps the recorded session id.
    engine
        .ingest(
            &Target::SessionKey {
                key: "agent:main:main".into(),
                session_id: None,
            },
            &turn(3),
        )
        .unwrap();
    let found = engine
        .find_conversation(&key("agent:main:main", "other"))
        .unwrap()
        .unwrap();
    assert_eq!((found.session_id.as_str(), found.message_count), ("s2", 6));
    // Looking up never creates.
    assert!(engine
        .find_conversation(&key("agent:main:none", "s9"))
        .unwrap()
        .is_none());
    assert_eq!(engine.conversations().unwrap().len(), 2);
    // A new key with no session id: the key stands for it.
    let fresh = engine
        .ingest(
            &Target::SessionKey {
                key: "agent:ops:main".into(),
                session_id: None,
            },
            &turn(1),
        )
        .unwrap();
    let found = engine
        .find_conversation(&Target::Conversation(fresh.conversation_id))
        .unwrap()
        .unwrap();
    assert_eq!(found.session_id, "agent:ops:main");
}

#[test]
fn a_conversation_stored_by_session_id_is_adopted_by_its_key() {
    let (_dir, engine) = temp_engine();
    let by_id = engine.ingest(&Target::Session("s1".into()), &turn(1)).unwrap();
    let by_key = engine.ingest(&key("agent:main:main", "s1"), &turn(2)).unwrap();
    assert_eq!(by_id.conversation_id, by_key.conversation_id);
    let found = engine
        .find_conversation(&key("agent:main:main", "other"))
        .unwrap()
        .unwrap();
    assert_eq!(found.conversation_id, by_id.conversation_id);
}

#[test]
fn a_turn_is_stored_once_by_its_advancement_key() {
    let (dir, engine) = temp_engine();
    let target = key("agent:main:main", "s1");
    let first = commit(&engine, &target, "turn-1", &turn(1));
    assert_eq!((first.inserted, first.duplicate), (2, false));
    let again = commit(&engine, &target, "turn-1", &turn(1));
    assert_eq!((again.inserted, again.skipped, again.duplicate), (0, 2, true));
    commit(&engine, &target, "turn-2", &turn(2));
    let path = engine.config().db_path.clone();
    drop(engine);
    // Also after a restart.
    let engine = Engine::open(Config::with_db_path(&path)).unwrap();
    assert!(commit(&engine, &target, "turn-2", &turn(2)).duplicate);
    let conn = Connection::open(dir.path().join("lcm.db")).unwrap();
    let keys: Vec<(String, i64)> = conn
        .prepare("SELECT advancement_key, message_count FROM lcm_native_turns ORDER BY advancement_key")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    assert_eq!(keys, [("turn-1".to_string(), 2), ("turn-2".to_string(), 2)]);
    let messages: i64 = conn
        .query_row("SELECT count(*) FROM messages", [], |r| r.get(0))
        .unwrap();
    assert_eq!(messages, 4);
}

#[test]
fn a_failed_turn_leaves_no_advancement_key_behind() {
    let (_dir, engine) = temp_engine();
    let target = key("k", "s");
    let bad = vec![
        json!({"role": "user", "content": "ok"}),
        json!({"role": "nobody", "content": "x"}),
    ];
    let options = IngestOptions {
        advancement_key: Some("t1".into()),
        ..Default::default()
    };
    assert_eq!(
        engine.ingest_with(&target, &bad, options).unwrap_err().code(),
        "E_INVALID_INPUT"
    );
    // The same key then commits: the failed call wrote nothing.
    assert!(!commit(&engine, &target, "t1", &turn(1)).duplicate);
}

#[test]
fn a_bootstrap_imports_only_into_an_empty_conversation() {
    let (_dir, engine) = temp_engine();
    let target = key("agent:main:explicit:a", "a");
    let history: Vec<Value> = (1..=3).flat_map(turn).collect();
    let boot = IngestOptions {
        bootstrap: true,
        ..Default::default()
    };
    let first = engine.ingest_with(&target, &history, boot.clone()).unwrap();
    assert_eq!((first.inserted, first.already_bootstrapped), (6, false));
    let again = engine.ingest_with(&target, &history, boot.clone()).unwrap();
    assert_eq!((again.inserted, again.already_bootstrapped), (0, true));
    let found = engine.find_conversation(&target).unwrap().unwrap();
    assert!(found.bootstrapped_at.is_some());
    // A session whose first turn lcm-native stored needs no import either.
    let fresh = key("agent:main:explicit:b", "b");
    commit(&engine, &fresh, "t1", &turn(1));
    assert!(engine.ingest_with(&fresh, &turn(1), boot).unwrap().already_bootstrapped);
}

#[test]
fn the_hosts_other_message_kinds_are_stored_and_shown_as_user_messages() {
    let (_dir, engine) = temp_engine();
    let msgs = vec![
        json!({"role": "user", "content": "run it"}),
        json!({"role": "custom", "customType": "memory-note", "display": true, "content": "remember the port",
               "details": {"n": 1}, "timestamp": 1_763_900_000_000_i64}),
        json!({"role": "bashExecution", "command": "ls", "output": "a.txt", "exitCode": 0,
               "cancelled": false, "truncated": false}),
        json!({"role": "compactionSummary", "summary": "earlier work", "tokensBefore": 10}),
    ];
    let out = engine.ingest(&key("k", "s"), &msgs).unwrap();
    assert_eq!(out.inserted, 4);
    let assembled = engine
        .assemble(
            out.conversation_id,
            &crate::api::AssembleOptions {
                token_budget: 10_000,
                fresh_tail_count: None,
                presentation: None,
                recall_query: None,
                auto_recall: None,
            },
        )
        .unwrap();
    let shown: Vec<(String, String)> = assembled
        .message_values()
        .iter()
        .map(|m| (m["role"].as_str().unwrap().to_string(), m["content"].to_string()))
        .collect();
    assert_eq!(shown[1], ("user".into(), "\"remember the port\"".into()));
    assert_eq!(shown[2], ("user".into(), "\"$ ls\\na.txt\\n[exit code 0]\"".into()));
    assert_eq!(shown[3], ("user".into(), "\"earlier work\"".into()));
    // Nothing of the host's message is lost: its role and fields are in the parts.
    let conn = Connection::open(&engine.config().db_path).unwrap();
    let meta: String = conn
        .query_row(
            "SELECT metadata FROM message_parts p JOIN messages m USING (message_id) WHERE m.seq = 2",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let meta: Value = serde_json::from_str(&meta).unwrap();
    assert_eq!(meta["originalRole"], "custom");
    assert_eq!(meta["rawMessage"]["customType"], "memory-note");
    assert_eq!(meta["rawMessage"]["details"]["n"], 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sweep_asked_to_stop_stops_before_its_next_pass() {
    let (_dir, engine) = temp_engine();
    let msgs: Vec<Value> = (0..80).flat_map(turn).collect();
    let cid = engine.ingest(&key("k", "s"), &msgs).unwrap().conversation_id;
    let summarizer: Arc<dyn Summarizer> = Arc::new(crate::offline::OfflineSummarizer);
    let stopped = engine
        .compact(
            cid,
            summarizer,
            SweepOptions {
                token_budget: 100,
                force: true,
                cancel: Some(Arc::new(AtomicBool::new(true))),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(stopped.stop_reason, StopReason::Aborted);
    assert_eq!(stopped.leaf_passes, 0);
    assert!(engine.summaries(cid, &SummaryFilter::default()).unwrap().is_empty());
}

/// lossless-claw 1.x shares the file: a turn it recorded in `turn_advancements` is a duplicate
/// here, a turn committed here with its record is one there, messages carry lossless-claw's
/// stable event keys (each key once per conversation), and the rows carry the identity hash
/// lossless-claw computes (sha256 of role, NUL, content).
#[test]
fn turns_and_messages_are_recognised_across_lossless_claw() {
    use crate::api::TurnRecord;
    let (_dir, engine) = temp_engine();
    let target = key("agent:main:main", "s1");
    let conn = Connection::open(&engine.config().db_path).unwrap();
    // A turn lossless-claw committed (its key is global).
    conn.execute(
        "INSERT INTO turn_advancements (advancement_key, payload_hash, session_id, admission_entry_id,
                                        terminal_entry_id, message_count) VALUES ('theirs', 'h', 's1', 'a', 't', 2)",
        [],
    )
    .unwrap();
    let r = commit(&engine, &target, "theirs", &turn(1));
    assert!(r.duplicate && r.inserted == 0, "{r:?}");
    // A turn committed here with lossless-claw's record of it.
    let record = TurnRecord {
        payload_hash: "abc".into(),
        session_id: "s1".into(),
        session_key: Some("agent:main:main".into()),
        admission_entry_id: "e-adm".into(),
        terminal_entry_id: "e-term".into(),
    };
    let msgs = vec![
        json!({"role": "user", "content": "read it"}),
        json!({"role": "assistant", "responseId": "resp_1", "content": [
            {"type": "text", "text": "reading"},
            {"type": "toolCall", "id": "call_abcdefghijkl1", "name": "read", "arguments": {}}]}),
        json!({"role": "toolResult", "toolCallId": "call_abcdefghijkl1", "content": [{"type": "text", "text": "file"}]}),
    ];
    let options = IngestOptions {
        advancement_key: Some("mine".into()),
        turn: Some(record),
        ..Default::default()
    };
    let r = engine.ingest_with(&target, &msgs, options).unwrap();
    assert_eq!(r.inserted, 3);
    let (hash, count): (String, i64) = conn
        .query_row(
            "SELECT payload_hash, message_count FROM turn_advancements WHERE advancement_key = 'mine'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!((hash.as_str(), count), ("abc", 3));
    let rows: Vec<(String, Option<String>, Option<String>, String)> = conn
        .prepare("SELECT role, identity_hash, stable_event_key, content FROM messages ORDER BY seq")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap()
        .collect::<std::result::Result<_, _>>()
        .unwrap();
    let keys: Vec<_> = rows.iter().map(|r| r.2.as_deref()).collect();
    assert_eq!(
        keys,
        [
            None,
            Some("assistant-response:resp_1"),
            Some("tool-result:call_abcdefghijkl1")
        ]
    );
    for (role, hash, _, content) in &rows {
        use sha2::{Digest, Sha256};
        let mut h = Sha256::new();
        h.update(format!("{role}\0{content}").as_bytes());
        assert_eq!(hash.as_deref(), Some(format!("{:x}", h.finalize()).as_str()), "{role}");
    }
    // The same provider ids in a turn under another key are new messages (a provider that
    // reuses ids): stored, without the keys the first ones hold.
    let again = vec![
        msgs[1].clone(),
        msgs[2].clone(),
        json!({"role": "user", "content": "next"}),
    ];
    let r = commit(&engine, &target, "another turn", &again);
    assert_eq!((r.inserted, r.skipped), (3, 0));
    let keyed: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM messages WHERE stable_event_key IS NOT NULL",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(keyed, 2);
    // A user message carrying OpenClaw's metadata block is left for lossless-claw to hash.
    let meta = json!({"role": "user", "content": "Conversation info (untrusted metadata):\n```json\n{}\n```\n\nhi"});
    commit(&engine, &target, "meta", &[meta]);
    let last: Option<String> = conn
        .query_row(
            "SELECT identity_hash FROM messages ORDER BY seq DESC LIMIT 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(last, None);
}

/// Providers reuse response ids (Ollama's `chatcmpl-<n below 1000>`, a local server that
/// restarts): a reply is never dropped because its id was seen before, a turn is deduplicated
/// by its advancement key, and a replay of the transcript without one is still stored once.
#[test]
fn a_reply_is_never_dropped_because_its_provider_reused_an_id() {
    let (_dir, engine) = temp_engine();
    let target = key("agent:main:main", "s1");
    let reply = |id: &str, text: &str| json!({"role": "assistant", "responseId": id, "content": [{"type": "text", "text": text}]});
    let user = |text: &str| json!({"role": "user", "content": text});
    // Ids restart at 1 with other texts, then with the very same texts.
    for (n, (id, text)) in [
        ("chatcmpl-1", "one"),
        ("chatcmpl-2", "two"),
        ("chatcmpl-1", "three"),
        ("chatcmpl-2", "two"),
    ]
    .into_iter()
    .enumerate()
    {
        let r = commit(
            &engine,
            &target,
            &format!("turn {n}"),
            &[user(&format!("q{n}")), reply(id, text)],
        );
        assert_eq!((r.inserted, r.skipped, r.duplicate), (2, 0, false), "turn {n}");
    }
    // Two replies with one id inside one turn are two messages as well.
    let r = commit(
        &engine,
        &target,
        "turn 4",
        &[user("q4"), reply("chatcmpl-7", "a"), reply("chatcmpl-7", "a")],
    );
    assert_eq!(r.inserted, 3);
    // A true replay of a turn (its advancement key again) is stored once.
    let r = commit(&engine, &target, "turn 2", &[user("q2"), reply("chatcmpl-1", "three")]);
    assert!(r.duplicate && r.inserted == 0, "{r:?}");
    // A replay of the transcript without a turn key: what is stored under the key with the same
    // text is skipped, a different text under a held key is a new message.
    let r = engine
        .ingest(&target, &[reply("chatcmpl-1", "one"), reply("chatcmpl-2", "five")])
        .unwrap();
    assert_eq!((r.inserted, r.skipped), (1, 1));
    let conn = Connection::open(&engine.config().db_path).unwrap();
    let texts: Vec<String> = conn
        .prepare("SELECT content FROM messages WHERE role = 'assistant' ORDER BY seq")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<std::result::Result<_, _>>()
        .unwrap();
    assert_eq!(texts, ["one", "two", "three", "two", "a", "a", "five"]);
    // Replies that only call a tool have no text: their calls tell them apart.
    let call = |id: &str, call_id: &str| {
        json!({"role": "assistant", "responseId": id, "content": [
            {"type": "toolCall", "id": call_id, "name": "read", "arguments": {"path": "x"}}]})
    };
    let first = call("chatcmpl-9", "call_aaaaaaaaaaaa1");
    assert_eq!(
        engine.ingest(&target, std::slice::from_ref(&first)).unwrap().inserted,
        1
    );
    let other = engine
        .ingest(&target, &[call("chatcmpl-9", "call_bbbbbbbbbbbb2")])
        .unwrap();
    assert_eq!((other.inserted, other.skipped), (1, 0));
    let again = engine.ingest(&target, std::slice::from_ref(&first)).unwrap();
    assert_eq!((again.inserted, again.skipped), (0, 1));
    // A message a redaction changed is recognised by its key when its original comes again.
    let (id, cid): (i64, i64) = conn
        .query_row(
            "SELECT message_id, conversation_id FROM messages WHERE stable_event_key = 'assistant-response:chatcmpl-1'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    conn.execute("UPDATE messages SET content = '[REDACTED]' WHERE message_id = ?1", [id])
        .unwrap();
    conn.execute(
        "INSERT INTO lcm_native_redactions (conversation_ids, message_ids, messages, parts, matches, summaries, versions_purged)
         VALUES (?1, ?2, 1, 0, 1, 0, 0)",
        rusqlite::params![format!("[{cid}]"), format!("[{},{id}]", id + 1000)],
    )
    .unwrap();
    let replay = engine.ingest(&target, &[reply("chatcmpl-1", "one")]).unwrap();
    assert_eq!((replay.inserted, replay.skipped), (0, 1));
    // Partly redacted: its original still fits it and is a replay; another reply under the
    // reused id does not fit and is stored (without the key), never dropped.
    conn.execute(
        "UPDATE messages SET content = 'one [REDACTED] done' WHERE message_id = ?1",
        [id],
    )
    .unwrap();
    let replay = engine
        .ingest(&target, &[reply("chatcmpl-1", "one sk-live-42 done")])
        .unwrap();
    assert_eq!((replay.inserted, replay.skipped), (0, 1));
    let other = engine.ingest(&target, &[reply("chatcmpl-1", "a new answer")]).unwrap();
    assert_eq!((other.inserted, other.skipped), (1, 0));
    conn.execute("UPDATE messages SET content = '[REDACTED]' WHERE message_id = ?1", [id])
        .unwrap();
    // Each key is held by one message (lossless-claw's unique index), the first that came.
    let keys: Vec<(String, String)> = conn
        .prepare("SELECT stable_event_key, content FROM messages WHERE stable_event_key IS NOT NULL ORDER BY seq")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<std::result::Result<_, _>>()
        .unwrap();
    let keys: Vec<(&str, &str)> = keys.iter().map(|(k, c)| (k.as_str(), c.as_str())).collect();
    assert_eq!(
        keys,
        [
            ("assistant-response:chatcmpl-1", "[REDACTED]"),
            ("assistant-response:chatcmpl-2", "two"),
            ("assistant-response:chatcmpl-7", "a"),
            ("assistant-response:chatcmpl-9", "")
        ]
    );
}

/// The options of a turn the host committed at `position` of its transcript.
fn at(advancement: &str, position: i64) -> IngestOptions {
    IngestOptions {
        advancement_key: Some(advancement.into()),
        transcript_position: Some(position),
        ..Default::default()
    }
}

/// A turn whose first and last messages carry the host's transcript entry ids, as the plugin
/// hands it over: `e<n>-u` … `e<n>-a`, with a tool call and its result between them.
fn anchored_turn(n: usize) -> Vec<Value> {
    vec![
        json!({"role": "user", "content": format!("look up {n}"), "entryId": format!("e{n}-u")}),
        json!({"role": "assistant", "content": [{"type": "toolCall", "id": format!("call_{n}"), "name": "lcm_grep", "arguments": {"pattern": "x"}}]}),
        json!({"role": "toolResult", "toolCallId": format!("call_{n}"), "content": [{"type": "text", "text": format!("found {n}")}]}),
        json!({"role": "assistant", "content": [{"type": "text", "text": format!("it is {n}")}], "entryId": format!("e{n}-a")}),
    ]
}

#[test]
fn the_hosts_entry_ids_are_stored_and_trusted_as_lossless_claw_trusts_its_own() {
    let (_dir, engine) = temp_engine();
    let target = key("agent:main:main", "s1");
    let r = engine.ingest_with(&target, &anchored_turn(1), at("t1", 0)).unwrap();
    assert_eq!((r.inserted, r.late), (4, false));
    let conn = Connection::open(&engine.config().db_path).unwrap();
    let rows: Vec<(Option<String>, Option<String>)> = conn
        .prepare(
            "SELECT m.transcript_entry_id, t.trust_state FROM messages m
             LEFT JOIN message_transcript_anchor_trust t USING (message_id) ORDER BY m.seq",
        )
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<std::result::Result<_, _>>()
        .unwrap();
    let verified = || Some("verified".to_string());
    assert_eq!(
        rows,
        [
            (Some("e1-u".into()), verified()),
            (None, None),
            (None, None),
            (Some("e1-a".into()), verified())
        ]
    );
}

#[test]
fn a_replayed_turn_the_other_engine_stored_already_is_recognised_not_stored_twice() {
    let (_dir, engine) = temp_engine();
    let target = key("agent:main:main", "s1");
    engine.ingest_with(&target, &anchored_turn(1), at("t1", 0)).unwrap();
    // lossless-claw took turn 2 from the host's transcript while it held the slot: every row
    // with its entry id, the middle ones too (which the host never hands lcm-native).
    let cid = engine.find_conversation(&target).unwrap().unwrap().conversation_id;
    let conn = Connection::open(&engine.config().db_path).unwrap();
    let theirs = anchored_turn(2);
    engine.ingest(&target, &theirs).unwrap();
    conn.execute(
        "UPDATE messages SET transcript_entry_id = 'e2-m' || seq WHERE conversation_id = ?1 AND seq IN (6, 7)",
        [cid],
    )
    .unwrap();
    let before: i64 = conn
        .query_row("SELECT count(*) FROM messages", [], |r| r.get(0))
        .unwrap();
    // The host replays turn 2 to lcm-native, which had failed to commit it.
    let r = engine.ingest_with(&target, &theirs, at("t2", 4)).unwrap();
    assert_eq!((r.inserted, r.skipped, r.late), (0, 4, false), "{r:?}");
    let after: i64 = conn
        .query_row("SELECT count(*) FROM messages", [], |r| r.get(0))
        .unwrap();
    assert_eq!(before, after);
    // Stored by lossless-claw's commit instead: rows without ids, which take the host's.
    engine.ingest(&target, &turn(3)).unwrap();
    let mut third = turn(3);
    third[0]["entryId"] = json!("e3-u");
    third[1]["entryId"] = json!("e3-a");
    conn.execute(
        "UPDATE messages SET transcript_entry_id = 'e3-u' WHERE conversation_id = ?1 AND seq = 9",
        [cid],
    )
    .unwrap();
    let r = engine.ingest_with(&target, &third, at("t3", 8)).unwrap();
    assert_eq!((r.inserted, r.skipped), (0, 2), "{r:?}");
    let adopted: (String, String) = conn
        .query_row(
            "SELECT m.transcript_entry_id, t.trust_state FROM messages m
             JOIN message_transcript_anchor_trust t USING (message_id) WHERE m.seq = 10",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(adopted, ("e3-a".into(), "verified".into()));
    // A message that differs from the row after the anchor is new: stored.
    let mut fourth = turn(3);
    fourth[0]["entryId"] = json!("e3-u");
    fourth[1] = json!({"role": "assistant", "content": [{"type": "text", "text": "another answer"}]});
    let r = engine.ingest_with(&target, &fourth, at("t3b", 8)).unwrap();
    assert_eq!((r.inserted, r.skipped), (1, 1), "{r:?}");
}

#[test]
fn a_turn_replayed_after_later_turns_is_stored_at_the_end_marked_late_and_noted_by_verify() {
    let (_dir, engine) = temp_engine();
    let target = key("agent:main:main", "s1");
    engine.ingest_with(&target, &anchored_turn(1), at("t1", 0)).unwrap();
    engine.ingest_with(&target, &anchored_turn(3), at("t3", 8)).unwrap();
    assert!(engine.verify(None).unwrap().notes.is_empty());
    // Turn 2 (positions 4–7), replayed only now: nothing of it is stored yet.
    let r = engine.ingest_with(&target, &anchored_turn(2), at("t2", 4)).unwrap();
    assert_eq!((r.inserted, r.late), (4, true), "{r:?}");
    let report = engine.verify(None).unwrap();
    assert!(report.ok, "{:?}", report.problems);
    assert_eq!(report.notes.len(), 1, "{:?}", report.notes);
    assert!(
        report.notes[0].contains("turn t2") && report.notes[0].contains("late"),
        "{:?}",
        report.notes
    );
    // A later turn in order is not late; a replay of the late one is a duplicate.
    let r = engine.ingest_with(&target, &anchored_turn(4), at("t4", 12)).unwrap();
    assert!(!r.late);
    assert!(
        engine
            .ingest_with(&target, &anchored_turn(2), at("t2", 4))
            .unwrap()
            .duplicate
    );
    // A position needs the turn's key, and is never negative.
    let bad = IngestOptions {
        transcript_position: Some(3),
        ..Default::default()
    };
    assert_eq!(
        engine.ingest_with(&target, &turn(9), bad).unwrap_err().code(),
        "E_INVALID_INPUT"
    );
    assert_eq!(
        engine.ingest_with(&target, &turn(9), at("t9", -1)).unwrap_err().code(),
        "E_INVALID_INPUT"
    );
}

#[test]
fn a_turn_from_before_a_reset_replayed_after_it_goes_to_the_conversation_the_reset_archived() {
    use crate::store::lifecycle::ResetReason;
    let (_dir, engine) = temp_engine();
    let target = key("agent:main:main", "s1");
    let at_ms = |ago_s: i64| (chrono::Utc::now() - chrono::Duration::seconds(ago_s)).timestamp_millis();
    let dated = |n: usize, ago_s: i64| -> Vec<Value> {
        let mut t = anchored_turn(n);
        for m in &mut t {
            m["timestamp"] = json!(at_ms(ago_s));
        }
        t
    };
    let before = engine
        .ingest_with(&target, &dated(1, 120), at("t1", 0))
        .unwrap()
        .conversation_id;
    // Turn 2 was admitted a minute ago; its commit failed. Then the user reset the session.
    let rt = tokio::runtime::Runtime::new().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let reset = rt.block_on(engine.reset_session(&target, ResetReason::Reset)).unwrap();
    let after = reset.replacement_id.unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1100));
    // The host replays turn 2 now: it goes where it happened, in order there.
    let r = engine.ingest_with(&target, &dated(2, 60), at("t2", 4)).unwrap();
    assert_eq!((r.conversation_id, r.inserted, r.late), (before, 4, false), "{r:?}");
    // A turn after the reset stays in the new conversation.
    let r = engine.ingest_with(&target, &dated(3, 0), at("t3", 9)).unwrap();
    assert_eq!((r.conversation_id, r.inserted), (after, 4));
    let count = |cid: i64| {
        Connection::open(&engine.config().db_path)
            .unwrap()
            .query_row("SELECT count(*) FROM messages WHERE conversation_id = ?1", [cid], |r| {
                r.get::<_, i64>(0)
            })
            .unwrap()
    };
    assert_eq!((count(before), count(after)), (8, 4));
    let report = engine.verify(None).unwrap();
    assert!(report.ok && report.notes.is_empty(), "{report:?}");
    // A turn after the reset that comes after a later one: late in the new conversation.
    let r = engine.ingest_with(&target, &dated(4, 0), at("t4", 7)).unwrap();
    assert_eq!((r.conversation_id, r.late), (after, true));
}
