//! grep: full text, LIKE and regex, scopes, orders, limits and time bounds, CJK, hostile
//! queries, option validation and the hybrid order.

use super::*;
use crate::api::{Description, GrepOptions};

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
    let messages: Vec<_> = r
        .hits
        .iter()
        .filter(|h| h.kind == crate::api::ItemKind::Message)
        .collect();
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
    assert!(
        !summaries.hits.is_empty()
            && summaries
                .hits
                .iter()
                .all(|h| h.kind == crate::api::ItemKind::Summary && h.depth.is_some())
    );
    assert!(summaries.searched_by.messages.is_none());
    let messages = only(Scope::Messages);
    assert!(messages
        .hits
        .iter()
        .all(|h| h.kind == crate::api::ItemKind::Message && h.role.is_some()));
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
    assert!(
        long.hits.iter().any(|h| h.kind == crate::api::ItemKind::Summary),
        "{long:?}"
    );
    assert!(
        long.hits
            .iter()
            .filter(|h| h.kind == crate::api::ItemKind::Message)
            .count()
            >= 2
    );
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

#[test]
fn grep_options_are_validated() {
    let ok = crate::input::decode::<GrepOptions>(json!({"query": "x", "mode": "like", "scope": "messages", "since": 0, "until": "2026-01-01T00:00:00Z", "limit": 5, "sort": "relevance"}), "options").unwrap();
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
            crate::input::decode::<GrepOptions>(bad.clone(), "options")
                .unwrap_err()
                .code(),
            "E_INVALID_INPUT",
            "{bad}"
        );
    }
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
    let parsed = crate::input::decode::<GrepOptions>(json!({"query": "x", "sort": "hybrid"}), "options").unwrap();
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

/// The shapes that made FTS5's snippet() quadratic (#33): a term thousands of times in one
/// message. Each search finishes well inside its deadline and its snippet shows the term.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_text_over_a_term_repeated_through_a_large_message_is_linear() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_with(&dir, json!({}));
    let csv: String = (0..8_000).map(|_| "0,0,0,0,0,0,0,0\n").collect(); // 128 KB of "0"
    let hex: String = (0..8_000)
        .map(|i| format!("{:08x}: ff ff ff ff 00 ff ff ff\n", i * 8))
        .collect();
    let prose = "The gateway restarted a worker after the gateway timed out. ".repeat(4_000);
    let msgs = vec![
        json!({"role": "user", "content": csv}),
        json!({"role": "toolResult", "toolCallId": "c1", "toolName": "exec", "content": hex}),
        json!({"role": "assistant", "content": prose}),
    ];
    engine.ingest(&Target::Session("big".into()), &msgs).unwrap();
    for (query, sort) in [("0", Sort::Recency), ("ff", Sort::Relevance), ("gateway", Sort::Hybrid)] {
        let t = Instant::now();
        let r = engine.grep(None, &GrepOptions { sort, ..opts(query) }).unwrap();
        assert!(
            r.partial.is_none(),
            "{query}: stopped at the deadline after {:?}",
            t.elapsed()
        );
        assert_eq!(r.hits.len(), 1, "{query}: {:?}", r.hits);
        let snippet = &r.hits[0].snippet;
        assert!(
            snippet.to_lowercase().contains(query) && snippet.len() < 1_000,
            "{query}: {snippet}"
        );
    }
}

/// Every mode stops at its deadline with what it found and a coded reason (#33).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_search_past_its_deadline_returns_partial_results_coded_e_timeout() {
    let (_d, engine) = compacted().await;
    let conn = conn(&engine);
    for mode in [Mode::Fts, Mode::Like, Mode::Regex] {
        let o = GrepOptions { mode, ..opts("theme") };
        let full = grep::grep(&conn, true, Some(1), &o).unwrap();
        assert!(full.partial.is_none() && !full.hits.is_empty(), "{mode:?}");
        let cut = grep::grep_within(&conn, true, Some(1), &o, std::time::Duration::ZERO).unwrap();
        let partial = cut.partial.as_ref().unwrap_or_else(|| panic!("{mode:?}: not partial"));
        assert_eq!(partial.code, "E_TIMEOUT");
        assert!(cut.truncated && cut.hits.len() < full.hits.len(), "{mode:?}");
    }
}

/// `like` searches for what it is given: a lone quote, and text with a NUL in it (#33, 7).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn like_finds_a_lone_quote_and_text_with_a_nul() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine_with(&dir, json!({}));
    let msgs = vec![
        json!({"role": "user", "content": "plain words only"}),
        json!({"role": "user", "content": "she said \"stop\" twice"}),
        json!({"role": "user", "content": "binary head\u{0}tail marker"}),
    ];
    engine.ingest(&Target::Session("n".into()), &msgs).unwrap();
    let like = |q: &str| {
        engine
            .grep(
                None,
                &GrepOptions {
                    mode: Mode::Like,
                    scope: Scope::Messages,
                    ..opts(q)
                },
            )
            .unwrap()
    };
    let quote = like("\"");
    assert_eq!(quote.hits.len(), 1, "{:?}", quote.hits);
    assert!(quote.hits[0].snippet.contains("\"stop\""));
    let nul = like("head\u{0}tail");
    assert_eq!(nul.hits.len(), 1, "{:?}", nul.hits);
    assert!(like("head\u{0}nothing").hits.is_empty());
}
