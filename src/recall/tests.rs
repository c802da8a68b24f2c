//! Recall tests on the real transcripts, compacted into a DAG with depth-1 nodes: grep in its
//! three modes and two orders, CJK, hostile queries, describe and expand.

use std::collections::HashSet;
use std::time::Instant;

use rusqlite::Connection;
use serde_json::{json, Value};

use super::grep::{Mode, Scope, Sort};
use super::*;
use crate::compaction::tests::{compact_offline, engine_with, Act, Scripted};
use crate::compaction::PassOptions;
use crate::engine::tests::{transcript, REFACTOR, THEME};
use crate::engine::Engine;
use crate::store::conversations::Target;
use crate::summarizer::SummaryKind;

/// Both transcripts ingested (theme = 1, refactor = 2) and compacted to depth 1.
async fn compacted() -> (tempfile::TempDir, Engine) {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_with(
        &dir,
        // A fanout of 8 keeps the sweep from condensing the five depth-1 nodes further: the
        // tests below want a live depth-1 node over leaves.
        json!({"leafChunkTokens": 3000, "leafTargetTokens": 300, "freshTailCount": 32, "timezone": "UTC", "condensedMinFanout": 8, "condensedMinFanoutHard": 8}),
    );
    for name in [THEME, REFACTOR] {
        let cid = engine
            .ingest(&Target::Session(name.into()), &transcript(name))
            .unwrap()
            .conversation_id;
        let r = compact_offline(&engine, cid, 8000).await;
        assert!(r.condensed_passes.contains_key(&1), "{r:?}");
    }
    (dir, engine)
}

fn opts(query: &str) -> GrepOptions {
    GrepOptions {
        query: query.into(),
        mode: Mode::Fts,
        scope: Scope::Both,
        since: None,
        until: None,
        limit: 50,
        sort: Sort::Recency,
    }
}

fn conn(engine: &Engine) -> Connection {
    Connection::open(&engine.config().db_path).unwrap()
}

fn is_live_summary(engine: &Engine, id: &str) -> bool {
    conn(engine)
        .query_row("SELECT count(*) FROM context_items WHERE summary_id = ?1", [id], |r| {
            r.get::<_, i64>(0)
        })
        .unwrap()
        == 1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_text_finds_messages_and_summaries_newest_first_with_their_live_cover() {
    let (_d, engine) = compacted().await;
    let r = engine
        .grep(
            Some(1),
            &GrepOptions {
                limit: 200,
                ..opts("debugger")
            },
        )
        .unwrap();
    assert_eq!(r.searched_by.messages, Some("fts"));
    assert_eq!(r.searched_by.summaries, Some("fts"));
    let messages: Vec<_> = r.hits.iter().filter(|h| h.kind == "message").collect();
    assert!(messages.len() > 20, "{} message hits", messages.len());
    assert!(r.hits.windows(2).all(|w| w[0].time >= w[1].time), "not newest first");
    let (mut live, mut covered) = (0, 0);
    for h in &r.hits {
        assert_eq!(h.conversation_id, 1);
        assert!(h.snippet.to_lowercase().contains("debugger"), "{}", h.snippet);
        assert!(!h.snippet.contains('\n'));
        match (&h.covered_by, h.live) {
            (None, true) => live += 1,
            (Some(s), false) => {
                assert!(is_live_summary(&engine, s), "{s} covers {h:?} but is not live");
                covered += 1;
            }
            other => panic!("inconsistent coverage {other:?} for {h:?}"),
        }
    }
    assert!(live > 0 && covered > 0, "live {live}, covered {covered}");
    // A message hit's cover is the summary whose subtree holds it.
    let h = messages.iter().find(|h| !h.live).unwrap();
    let Description::Message(d) = engine.describe(&ItemId::Message(h.message_id.unwrap())).unwrap() else {
        panic!()
    };
    assert_eq!(d.live_summary, h.covered_by);
    assert_eq!(d.chain.last().map(|l| l.summary_id.clone()), h.covered_by);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scope_sort_limit_time_and_conversation_filters() {
    let (_d, engine) = compacted().await;
    let only = |scope| {
        engine
            .grep(
                Some(1),
                &GrepOptions {
                    scope,
                    limit: 1000,
                    ..opts("theme")
                },
            )
            .unwrap()
    };
    let summaries = only(Scope::Summaries);
    assert!(!summaries.hits.is_empty() && summaries.hits.iter().all(|h| h.kind == "summary" && h.depth.is_some()));
    assert!(summaries.searched_by.messages.is_none());
    let messages = only(Scope::Messages);
    assert!(messages.hits.iter().all(|h| h.kind == "message" && h.role.is_some()));
    // Relevance: best rank first.
    let rel = engine
        .grep(
            Some(1),
            &GrepOptions {
                sort: Sort::Relevance,
                ..opts("theme")
            },
        )
        .unwrap();
    let ranks: Vec<f64> = rel.hits.iter().map(|h| h.rank.unwrap()).collect();
    assert!(ranks.windows(2).all(|w| w[0] <= w[1]), "{ranks:?}");
    // Limit and truncation.
    let few = engine
        .grep(
            Some(1),
            &GrepOptions {
                limit: 3,
                ..opts("theme")
            },
        )
        .unwrap();
    assert_eq!(few.hits.len(), 3);
    assert!(few.truncated);
    assert!(!only(Scope::Summaries).truncated);
    // Time window: a bound in the middle of the session splits the hits.
    let times: Vec<String> = messages.hits.iter().map(|h| h.time.clone()).collect();
    let mid = times[times.len() / 2].clone();
    let after = engine
        .grep(
            Some(1),
            &GrepOptions {
                since: Some(mid.replace('T', " ").replace('Z', "")),
                scope: Scope::Messages,
                limit: 1000,
                ..opts("theme")
            },
        )
        .unwrap();
    let before = engine
        .grep(
            Some(1),
            &GrepOptions {
                until: Some(mid.replace('T', " ").replace('Z', "")),
                scope: Scope::Messages,
                limit: 1000,
                ..opts("theme")
            },
        )
        .unwrap();
    assert!(after.hits.iter().all(|h| h.time >= mid) && before.hits.iter().all(|h| h.time < mid));
    assert_eq!(after.hits.len() + before.hits.len(), messages.hits.len());
    // Every conversation, or one.
    let all = engine
        .grep(
            None,
            &GrepOptions {
                limit: 1000,
                ..opts("renderer")
            },
        )
        .unwrap();
    let convs: HashSet<i64> = all.hits.iter().map(|h| h.conversation_id).collect();
    assert_eq!(convs, HashSet::from([1, 2]));
    assert!(engine
        .grep(Some(2), &opts("renderer"))
        .unwrap()
        .hits
        .iter()
        .all(|h| h.conversation_id == 2));
    assert_eq!(engine.grep(Some(99), &opts("x")).unwrap_err().code(), "E_NOT_FOUND");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn like_and_regex_find_what_tokens_do_not() {
    let (_d, engine) = compacted().await;
    // "ebugge" is inside a word: full text finds nothing, a substring search finds it.
    assert!(engine.grep(Some(1), &opts("ebugge")).unwrap().hits.is_empty());
    let like = engine
        .grep(
            Some(1),
            &GrepOptions {
                mode: Mode::Like,
                ..opts("ebugge")
            },
        )
        .unwrap();
    assert_eq!(like.searched_by.messages, Some("like"));
    assert!(!like.hits.is_empty());
    assert!(like.hits.iter().all(|h| h.snippet.to_lowercase().contains("ebugge")));
    // LIKE's wildcards are text.
    assert!(engine
        .grep(
            Some(1),
            &GrepOptions {
                mode: Mode::Like,
                ..opts("%_%")
            }
        )
        .unwrap()
        .hits
        .is_empty());
    let re = engine
        .grep(
            Some(1),
            &GrepOptions {
                mode: Mode::Regex,
                scope: Scope::Messages,
                ..opts(r"dim[A-Z]\w+")
            },
        )
        .unwrap();
    assert_eq!(re.searched_by.messages, Some("regex"));
    assert!(re.rows_scanned.unwrap() > 0);
    let pattern = regex::Regex::new(r"dim[A-Z]\w+").unwrap();
    assert!(
        !re.hits.is_empty() && re.hits.iter().all(|h| pattern.is_match(&h.snippet)),
        "{:?}",
        re.hits.first()
    );
    for bad in ["(unclosed", "a{99999999}", &"x".repeat(grep::MAX_PATTERN_BYTES + 1)] {
        let e = engine
            .grep(
                Some(1),
                &GrepOptions {
                    mode: Mode::Regex,
                    ..opts(bad)
                },
            )
            .unwrap_err();
        assert_eq!(e.code(), "E_INVALID_INPUT", "{bad:.40}: {e}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pathological_regex_runs_in_linear_time() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_with(&dir, json!({}));
    let long = format!("{}b", "a".repeat(200_000));
    let msgs: Vec<Value> = (0..20).map(|_| json!({"role": "user", "content": long})).collect();
    engine.ingest(&Target::Session("s".into()), &msgs).unwrap();
    let t = Instant::now();
    let r = engine
        .grep(
            None,
            &GrepOptions {
                mode: Mode::Regex,
                ..opts("^(a+)+$")
            },
        )
        .unwrap();
    assert!(r.hits.is_empty());
    assert!(t.elapsed().as_secs() < 5, "{:?}", t.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cjk_text_is_found_through_the_trigram_table_or_like() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_with(&dir, json!({"freshTailCount": 2, "leafChunkTokens": 400}));
    let msgs: Vec<Value> = (0..12)
        .map(|i| {
            json!({"role": if i % 2 == 0 { "user" } else { "assistant" },
                   "content": format!("第{i}回の会議では検索機能の設計について話し合いました。데이터베이스 색인 {}", "内容".repeat(60))})
        })
        .collect();
    let cid = engine
        .ingest(&Target::Session("s".into()), &msgs)
        .unwrap()
        .conversation_id;
    let summarizer = Scripted::new(|_, _| {
        Act::Text("長い会議の要約です。検索機能を設計した。\nExpand for details about: 検索".into())
    });
    engine
        .pass(cid, SummaryKind::Leaf, summarizer, PassOptions::default())
        .await
        .unwrap()
        .unwrap();
    let has_trigram = crate::db::SchemaFlags::read(&conn(&engine)).unwrap().has_cjk_fts;

    let long = engine.grep(Some(cid), &opts("検索機能")).unwrap();
    assert_eq!(long.searched_by.messages, Some("like"));
    assert_eq!(
        long.searched_by.summaries,
        Some(if has_trigram { "trigram" } else { "like" })
    );
    assert!(long.hits.iter().any(|h| h.kind == "summary"), "{long:?}");
    assert!(long.hits.iter().filter(|h| h.kind == "message").count() >= 2);
    // Two characters: below the trigram tokenizer's reach, found by LIKE.
    let short = engine.grep(Some(cid), &opts("要約")).unwrap();
    assert_eq!(short.searched_by.summaries, Some("like"));
    assert_eq!(short.hits.len(), 1);
    assert!(short.hits[0].snippet.contains("要約"));
    let hangul = engine
        .grep(
            Some(cid),
            &GrepOptions {
                scope: Scope::Messages,
                ..opts("색인")
            },
        )
        .unwrap();
    assert_eq!(hangul.hits.len(), 12);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_queries_return_results_or_a_coded_error_and_change_nothing() {
    let (_d, engine) = compacted().await;
    let before = engine.verify(None).unwrap();
    let huge = "theme ".repeat(100 * 1024 / 6);
    let hostile = [
        "\"unbalanced",
        "unbalanced\"",
        "NEAR(",
        "NEAR(theme renderer, 2)",
        "content:theme",
        "summary_id:sum_",
        "*",
        "theme*",
        "^theme",
        "a OR b AND NOT c",
        ") (",
        "'; DROP TABLE messages; --",
        "\" OR 1=1 --",
        "\\",
        "%",
        "\u{0}",
        "{theme renderer}",
        "-theme",
        "+",
        &huge,
    ];
    for mode in [Mode::Fts, Mode::Like, Mode::Regex] {
        for q in &hostile {
            for conversation in [None, Some(1)] {
                match engine.grep(conversation, &GrepOptions { mode, ..opts(q) }) {
                    Ok(r) => assert!(r.hits.len() <= 50),
                    Err(e) => assert_eq!(e.code(), "E_INVALID_INPUT", "{mode:?} {q:.40}: {e}"),
                }
            }
        }
    }
    // Operators are text: "^theme" searches the word, it does not anchor or fail.
    assert!(!engine.grep(Some(1), &opts("^theme")).unwrap().hits.is_empty());
    assert_eq!(
        engine.grep(Some(1), &opts(&huge)).unwrap_err().code(),
        "E_INVALID_INPUT"
    );
    let after = engine.verify(None).unwrap();
    assert!(after.ok);
    assert_eq!(after.digest, before.digest);
}

/// A condensed summary of conversation 1 that is live, and one of its inputs.
fn condensed_and_input(engine: &Engine) -> (String, String) {
    let c = conn(engine);
    let node: String = c
        .query_row(
            "SELECT s.summary_id FROM summaries s JOIN context_items ci ON ci.summary_id = s.summary_id
             WHERE s.conversation_id = 1 AND s.depth = 1 ORDER BY ci.ordinal LIMIT 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let input: String = c
        .query_row(
            "SELECT parent_summary_id FROM summary_parents WHERE summary_id = ?1 ORDER BY ordinal LIMIT 1",
            [&node],
            |r| r.get(0),
        )
        .unwrap();
    (node, input)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_tells_what_a_summary_covers_and_where_it_sits() {
    let (_d, engine) = compacted().await;
    let (node, input) = condensed_and_input(&engine);
    let Description::Summary(d) = engine.describe(&ItemId::Summary(node.clone())).unwrap() else {
        panic!()
    };
    assert_eq!(d.summary.fields.depth, 1);
    assert!(d.live && d.live_summary.is_none() && d.consumed_by.is_none() && d.chain.is_empty());
    assert_eq!(d.inputs.len() as i64, d.summary.fields.descendant_count);
    assert_eq!(d.inputs[0].summary_id, input);
    assert!(d.range.ends_with("UTC"), "{}", d.range);
    // The covered messages are the inputs' messages, first to last.
    let c = conn(&engine);
    let ids: Vec<i64> = d
        .inputs
        .iter()
        .flat_map(|i| {
            c.prepare("SELECT message_id FROM summary_messages WHERE summary_id = ?1 ORDER BY ordinal")
                .unwrap()
                .query_map([&i.summary_id], |r| r.get(0))
                .unwrap()
                .map(|r| r.unwrap())
                .collect::<Vec<i64>>()
        })
        .collect();
    assert_eq!(d.covered_messages.count, ids.len() as i64);
    assert_eq!(d.covered_messages.first_message_id, ids.first().copied());
    assert_eq!(d.covered_messages.last_message_id, ids.last().copied());

    let Description::Summary(leaf) = engine.describe(&ItemId::Summary(input.clone())).unwrap() else {
        panic!()
    };
    assert!(!leaf.live && leaf.inputs.is_empty());
    assert_eq!(leaf.consumed_by.as_deref(), Some(node.as_str()));
    assert_eq!(leaf.live_summary.as_deref(), Some(node.as_str()));
    assert_eq!(leaf.chain.len(), 1);
    assert_eq!(leaf.covered_messages.first_message_id, ids.first().copied());

    // A message under that leaf: its parts and the chain leaf → node.
    let Description::Message(m) = engine.describe(&ItemId::Message(ids[0])).unwrap() else {
        panic!()
    };
    assert!(!m.live && m.conversation_id == 1);
    let chain: Vec<&str> = m.chain.iter().map(|l| l.summary_id.as_str()).collect();
    assert_eq!(chain, [input.as_str(), node.as_str()]);
    assert!(!m.parts.is_empty());
    // The newest message is live: no chain.
    let newest: i64 = c
        .query_row(
            "SELECT max(message_id) FROM messages WHERE conversation_id = 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let Description::Message(live) = engine.describe(&ItemId::Message(newest)).unwrap() else {
        panic!()
    };
    assert!(live.live && live.chain.is_empty() && live.live_summary.is_none());
    assert_eq!(serde_json::to_value(&*live).unwrap()["messageId"], json!(newest));

    for missing in [ItemId::Summary("sum_nope".into()), ItemId::Message(9_999_999)] {
        assert_eq!(engine.describe(&missing).unwrap_err().code(), "E_NOT_FOUND");
    }
    assert_eq!(ItemId::from_json(&json!("42")).unwrap(), ItemId::Message(42));
    assert_eq!(ItemId::from_json(&json!(-1)).unwrap_err().code(), "E_INVALID_INPUT");
    assert_eq!(ItemId::from_json(&json!({})).unwrap_err().code(), "E_INVALID_INPUT");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expand_walks_down_breadth_first_within_the_budget() {
    let (_d, engine) = compacted().await;
    let (node, _) = condensed_and_input(&engine);
    let all = engine
        .expand(
            &node,
            &ExpandOptions {
                token_budget: 10_000_000,
                max_depth: None,
            },
        )
        .unwrap();
    assert!(!all.truncated);
    let Description::Summary(d) = engine.describe(&ItemId::Summary(node.clone())).unwrap() else {
        panic!()
    };
    let levels: Vec<i64> = all
        .entries
        .iter()
        .map(|e| match e {
            expand::Entry::Summary { level, .. } | expand::Entry::Message { level, .. } => *level,
        })
        .collect();
    assert!(levels.windows(2).all(|w| w[0] <= w[1]), "not breadth first: {levels:?}");
    let inputs: Vec<&str> = all
        .entries
        .iter()
        .filter_map(|e| match e {
            expand::Entry::Summary {
                summary_id, level: 1, ..
            } => Some(summary_id.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        inputs,
        d.inputs.iter().map(|i| i.summary_id.as_str()).collect::<Vec<_>>()
    );
    let messages: Vec<i64> = all
        .entries
        .iter()
        .filter_map(|e| match e {
            expand::Entry::Message { message_id, .. } => Some(*message_id),
            _ => None,
        })
        .collect();
    assert_eq!(messages.len() as i64, d.covered_messages.count);
    assert_eq!(messages.first().copied(), d.covered_messages.first_message_id);
    // Messages come back as assemble presents them.
    let stored = engine.messages(1, 0, 100_000).unwrap();
    for e in &all.entries {
        if let expand::Entry::Message {
            message_id, message, ..
        } = e
        {
            let s = stored.iter().find(|s| s.message_id == *message_id).unwrap();
            if s.role != "user" {
                assert_eq!(message["content"], s.content, "message {message_id}");
            }
            assert!(["user", "assistant", "toolResult"].contains(&message["role"].as_str().unwrap()));
        }
    }
    // A small budget: a prefix of the same walk, within the budget, marked truncated.
    let small = engine
        .expand(
            &node,
            &ExpandOptions {
                token_budget: 500,
                max_depth: None,
            },
        )
        .unwrap();
    assert!(small.truncated && small.estimated_tokens <= 500);
    assert_eq!(
        serde_json::to_value(&small.entries).unwrap(),
        serde_json::to_value(&all.entries[..small.entries.len()]).unwrap()
    );
    // maxDepth 1: only the inputs.
    let top = engine
        .expand(
            &node,
            &ExpandOptions {
                token_budget: 10_000_000,
                max_depth: Some(1),
            },
        )
        .unwrap();
    assert_eq!(top.entries.len(), d.inputs.len());
    // Never up: expanding an input does not reach its consumer.
    let (_, input) = condensed_and_input(&engine);
    let down = engine
        .expand(
            &input,
            &ExpandOptions {
                token_budget: 10_000_000,
                max_depth: None,
            },
        )
        .unwrap();
    assert!(down.entries.iter().all(|e| matches!(e, expand::Entry::Message { .. })));
    assert_eq!(
        engine
            .expand("sum_nope", &ExpandOptions::from_json(None).unwrap())
            .unwrap_err()
            .code(),
        "E_NOT_FOUND"
    );
    assert_eq!(
        ExpandOptions::from_json(Some(&json!({"tokenBudget": 0})))
            .unwrap_err()
            .code(),
        "E_INVALID_INPUT"
    );
    assert_eq!(
        ExpandOptions::from_json(Some(&json!({"depth": 2}))).unwrap_err().code(),
        "E_INVALID_INPUT"
    );
}

#[test]
fn grep_options_are_validated() {
    let ok = GrepOptions::from_json(&json!({"query": "x", "mode": "like", "scope": "messages", "since": 0, "until": "2026-01-01T00:00:00Z", "limit": 5, "sort": "relevance"})).unwrap();
    assert_eq!(
        (ok.mode, ok.scope, ok.sort, ok.limit),
        (Mode::Like, Scope::Messages, Sort::Relevance, 5)
    );
    assert_eq!(ok.since.as_deref(), Some("1970-01-01 00:00:00"));
    assert_eq!(ok.until.as_deref(), Some("2026-01-01 00:00:00"));
    for bad in [
        json!({}),
        json!({"query": 5}),
        json!({"query": "x", "mode": "glob"}),
        json!({"query": "x", "limit": 0}),
        json!({"query": "x", "limit": 1001}),
        json!({"query": "x", "since": "yesterday"}),
        json!({"query": "x", "colour": "red"}),
        json!({"query": "x", "sort": "best"}),
        json!("x"),
    ] {
        assert_eq!(
            GrepOptions::from_json(&bad).unwrap_err().code(),
            "E_INVALID_INPUT",
            "{bad}"
        );
    }
}

#[test]
fn seed_era_compaction_events_are_neither_live_nor_covered() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seed.db");
    std::fs::copy(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/seed-theme.db"),
        &path,
    )
    .unwrap();
    let mut perms = std::fs::metadata(&path).unwrap().permissions();
    #[allow(clippy::permissions_set_readonly_false)]
    perms.set_readonly(false);
    std::fs::set_permissions(&path, perms).unwrap();
    let config = crate::config::Config::from_options(&json!({"dbPath": path.to_str().unwrap()}), None).unwrap();
    let engine = Engine::open(config).unwrap();
    let r = engine
        .grep(
            Some(1),
            &GrepOptions {
                scope: Scope::Messages,
                ..opts("\"LCM compaction leaf pass\"")
            },
        )
        .unwrap();
    assert!(!r.hits.is_empty());
    for h in &r.hits {
        assert!(!h.live && h.covered_by.is_none(), "{h:?}");
    }
    let Description::Message(d) = engine
        .describe(&ItemId::Message(r.hits[0].message_id.unwrap()))
        .unwrap()
    else {
        panic!()
    };
    assert!(!d.live && d.chain.is_empty());
    // A covered message of the same database still has its chain.
    let covered = engine
        .grep(
            Some(1),
            &GrepOptions {
                scope: Scope::Messages,
                ..opts("renderer")
            },
        )
        .unwrap();
    assert!(covered.hits.iter().any(|h| h.covered_by.is_some()));
}

/// `hybrid` discounts rank by age (rank ÷ (1 + hours × 0.001)): a year-old message that
/// mentions the word three times outranks a fresh one that mentions it once by relevance, and
/// loses to it by hybrid.
#[test]
fn hybrid_sort_trades_rank_for_recency() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_with(&dir, json!({}));
    let now = chrono::Utc::now();
    let at = |days: i64| (now - chrono::Duration::days(days)).to_rfc3339();
    let filler = "other words about the build and the cache ".repeat(3);
    let msgs = vec![
        json!({"role": "user", "content": format!("zebrafish zebrafish zebrafish {filler}"), "timestamp": at(365)}),
        json!({"role": "user", "content": format!("zebrafish {filler}"), "timestamp": at(0)}),
        json!({"role": "user", "content": format!("zebrafish {filler}"), "timestamp": at(30)}),
    ];
    let cid = engine
        .ingest(&Target::Session("h".into()), &msgs)
        .unwrap()
        .conversation_id;
    let order = |sort: Sort| -> Vec<i64> {
        let o = GrepOptions {
            sort,
            ..opts("zebrafish")
        };
        let r = engine.grep(Some(cid), &o).unwrap();
        r.hits.iter().map(|h| h.message_id.unwrap()).collect()
    };
    let ids: Vec<i64> = engine
        .messages(cid, 0, 10)
        .unwrap()
        .iter()
        .map(|m| m.message_id)
        .collect();
    let (old, fresh, month) = (ids[0], ids[1], ids[2]);
    assert_eq!(order(Sort::Relevance)[0], old, "three mentions rank best");
    assert_eq!(
        order(Sort::Hybrid),
        vec![fresh, month, old],
        "by rank discounted by age"
    );
    assert_eq!(order(Sort::Recency), vec![fresh, month, old]);
    let parsed = GrepOptions::from_json(&json!({"query": "x", "sort": "hybrid"})).unwrap();
    assert_eq!(parsed.sort, Sort::Hybrid);
    // A stored time SQLite cannot read (older writers stored raw text) counts as now.
    conn(&engine)
        .execute(
            "UPDATE messages SET created_at = 'sometime' WHERE message_id = ?1",
            [old],
        )
        .unwrap();
    assert_eq!(order(Sort::Hybrid)[0], old, "an unreadable time has no age");
}
