//! grep on PostgreSQL finds what it finds on SQLite: the same transcripts (and a conversation
//! of hard cases) through an engine on each, compacted alike, then one battery of queries in
//! every mode, scope, order and bound, compared hit by hit (summary ids, which carry the time
//! they were made, compared by their place in creation order).

use super::*;
use crate::api::{GrepOptions, GrepResult, SummaryFilter};
use crate::config::Config;

/// Messages that tell tokenizers apart: accents and case, punctuation inside words, numbers,
/// stems, phrases, LIKE's wildcards, CJK, a long text.
fn hard_cases() -> Vec<Value> {
    let texts = [
        "The café on the corner; ÉCOLE d'été opens at 9.".to_string(),
        "set foo_bar=3.14 in config.yaml (v2) — don't forget the /usr/lib/x86_64 path".to_string(),
        "検索する機能を追加しました。데이터베이스 색인".to_string(),
        "The running connections were dropped by the debugger at 10:42.".to_string(),
        "50% off a_b \"quoted\" text, user@example.com and https://example.org/a?b=c".to_string(),
        "Dark mode: the theme switcher (dark-mode.ts) reads prefers-color-scheme".to_string(),
        format!("{} needleword at the end", "lorem ipsum dolor sit amet ".repeat(6_000)),
        "NEAR(a b) OR content:x* ^start -not".to_string(),
    ];
    texts
        .iter()
        .enumerate()
        .map(|(i, t)| {
            json!({"role": if i % 2 == 0 { "user" } else { "assistant" }, "content": t,
                   "timestamp": format!("2026-11-20T10:0{i}:00Z")})
        })
        .collect()
}

fn grep_options() -> Value {
    json!({"leafChunkTokens": 3000, "leafTargetTokens": 300, "freshTailCount": 32, "timezone": "UTC", "condensedMinFanout": 8, "condensedMinFanoutHard": 8})
}

/// One engine's hits, with summary ids as `c{conversation}S{n}` (their place in creation order).
fn neutral(engine: &Engine, r: &GrepResult, ordered: bool) -> Vec<String> {
    let mut names = std::collections::HashMap::new();
    for cid in 1..=3 {
        for (i, s) in engine
            .summaries(cid, &SummaryFilter::default())
            .unwrap()
            .iter()
            .enumerate()
        {
            names.insert(s.fields.summary_id.clone(), format!("c{cid}S{i}"));
        }
    }
    let name = |id: &Option<String>| id.as_ref().map(|s| names.get(s).cloned().unwrap_or_else(|| s.clone()));
    let mut out: Vec<String> = r
        .hits
        .iter()
        .map(|h| {
            format!(
                "{:?} m{:?} {:?} c{} {:?} {:?} d{:?} {} live={} cover={:?} | {}",
                h.kind,
                h.message_id,
                name(&h.summary_id),
                h.conversation_id,
                h.role,
                h.summary_kind,
                h.depth,
                h.time,
                h.live,
                name(&h.covered_by),
                h.snippet
            )
        })
        .collect();
    if !ordered {
        out.sort();
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grep_on_postgres_finds_what_sqlite_finds() {
    if let Some((location, url)) = crate::test_support::pg_test_url("grep_parity") {
        finds_what_sqlite_finds(location, url).await;
    }
}

/// The same through PgBouncer in transaction mode (`pooler=transaction`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grep_on_postgres_finds_what_sqlite_finds_through_a_transaction_pooler() {
    if let Some((location, url)) = crate::test_support::pooler_test_url("grep_parity_pooled") {
        finds_what_sqlite_finds(location, url).await;
    }
}

async fn finds_what_sqlite_finds(location: crate::pg::Location, url: String) {
    let dir = tempfile::tempdir().unwrap();
    let sqlite = engine_with(&dir, grep_options());
    let mut options = grep_options();
    options["dbPath"] = json!(url);
    options["maxSweepIterations"] = json!(10000);
    options["condensedTargetTokens"] = json!(80);
    let pg = Engine::open(Config::from_options(&options, None).unwrap()).unwrap();
    for engine in [&sqlite, &pg] {
        for name in [THEME, REFACTOR] {
            let cid = engine
                .ingest(&Target::Session(name.into()), &transcript(name))
                .unwrap()
                .conversation_id;
            compact_offline(engine, cid, 8000).await;
        }
        engine.ingest(&Target::Session("hard".into()), &hard_cases()).unwrap();
    }
    let middle = sqlite.messages(1, 0, 1000).unwrap()[60].created_at.clone();
    let o = |query: &str, mode: Mode| GrepOptions {
        query: query.into(),
        mode,
        scope: Scope::Both,
        since: None,
        until: None,
        limit: 1000,
        sort: Sort::Recency,
    };
    let mut cases: Vec<(Option<i64>, GrepOptions)> = Vec::new();
    for q in [
        "debugger",
        "theme",
        "THEME colors",
        "\"dark mode\"",
        "running",
        "connect",
        "cafe",
        "école",
        "foo_bar",
        "3.14",
        "v2",
        "don't",
        "usr lib",
        "example.com",
        "needleword",
        "NEAR(a b) OR content:x* ^start -not",
        "検索する",
        "색인",
        "nothingmatchesthis",
    ] {
        cases.push((None, o(q, Mode::Fts)));
        cases.push((Some(1), o(q, Mode::Fts)));
    }
    for q in ["50%", "a_b", "\"quoted\"", "DEBUGGER", "config.yaml", "検索", "ÉCOLE"] {
        cases.push((None, o(q, Mode::Like)));
    }
    for q in ["deb+ug", r"\d+\.\d+", "(?i)theme switch", "^The"] {
        cases.push((None, o(q, Mode::Regex)));
        cases.push((Some(1), o(q, Mode::Regex)));
    }
    for scope in [Scope::Messages, Scope::Summaries] {
        cases.push((
            Some(1),
            GrepOptions {
                scope,
                ..o("theme", Mode::Fts)
            },
        ));
    }
    cases.push((
        Some(1),
        GrepOptions {
            limit: 5,
            ..o("theme", Mode::Fts)
        },
    ));
    cases.push((
        None,
        GrepOptions {
            limit: 3,
            ..o("the", Mode::Regex)
        },
    ));
    cases.push((
        None,
        GrepOptions {
            limit: 4,
            ..o("theme", Mode::Like)
        },
    ));
    cases.push((
        Some(1),
        GrepOptions {
            since: Some(middle.replace('T', " ").trim_end_matches('Z').to_string()),
            ..o("theme", Mode::Fts)
        },
    ));
    cases.push((
        Some(1),
        GrepOptions {
            until: Some(middle.replace('T', " ").trim_end_matches('Z').to_string()),
            ..o("theme", Mode::Like)
        },
    ));
    let mut differences = Vec::new();
    for (cid, q) in &cases {
        let (a, b) = (sqlite.grep(*cid, q).unwrap(), pg.grep(*cid, q).unwrap());
        let what = format!("{:?} {:?} in {cid:?}", q.mode, q.query);
        assert!(q.mode == Mode::Regex || a.rows_scanned.is_none());
        if neutral(&sqlite, &a, true) != neutral(&pg, &b, true) || a.truncated != b.truncated {
            differences.push(format!(
                "{what}: sqlite {} hits (truncated {}), postgres {} (truncated {})\n  sqlite only: {:?}\n  postgres only: {:?}",
                a.hits.len(),
                a.truncated,
                b.hits.len(),
                b.truncated,
                neutral(&sqlite, &a, false)
                    .into_iter()
                    .filter(|h| !neutral(&pg, &b, false).contains(h))
                    .take(3)
                    .collect::<Vec<_>>(),
                neutral(&pg, &b, false)
                    .into_iter()
                    .filter(|h| !neutral(&sqlite, &a, false).contains(h))
                    .take(3)
                    .collect::<Vec<_>>(),
            ));
        }
        assert_eq!(a.rows_scanned, b.rows_scanned, "{what}");
    }
    assert!(differences.is_empty(), "{}", differences.join("\n"));
    // The hard cases are found (the comparison above could pass on two empty answers).
    for q in [
        "cafe",
        "école",
        "foo_bar",
        "3.14",
        "v2",
        "don't",
        "usr lib",
        "example.com",
        "needleword",
        "検索する",
        "색인",
        "\"dark mode\"",
        "connect",
        "running",
    ] {
        let hits = pg.grep(Some(3), &o(q, Mode::Fts)).unwrap().hits.len();
        assert!(hits >= 1, "{q}: {hits} hits on PostgreSQL");
    }
    // The better-ranked orders rank differently (bm25, ts_rank) but find the same hits.
    for sort in [Sort::Relevance, Sort::Hybrid] {
        let q = GrepOptions {
            sort,
            ..o("theme", Mode::Fts)
        };
        let (a, b) = (sqlite.grep(Some(1), &q).unwrap(), pg.grep(Some(1), &q).unwrap());
        assert!(a.hits.len() > 10, "{}", a.hits.len());
        assert_eq!(neutral(&sqlite, &a, false), neutral(&pg, &b, false), "{sort:?}");
        assert!(b.hits.iter().all(|h| h.rank.is_some_and(|r| r <= 0.0)), "{sort:?}");
        assert!(b.hits.windows(2).all(|w| w[0].rank <= w[1].rank) || sort == Sort::Hybrid);
    }
    pg.close();
    crate::test_support::drop_test_schema(&location);
}

/// A tool result whose word list passes PostgreSQL's 1 MB limit for one tsvector (hundreds of
/// thousands of distinct tokens) is stored all the same: the turn does not fail; its words are
/// indexed as far as they fit, and substring and regex searches find the rest.
#[test]
fn a_text_too_large_for_one_word_index_is_stored_and_found() {
    let Some((location, url)) = crate::test_support::pg_test_url("grep_huge") else {
        return;
    };
    let pg = Engine::open(Config::from_options(&json!({ "dbPath": url }), None).unwrap()).unwrap();
    let tokens: String = (0..250_000).map(|i| format!("tok{i:07x} ")).collect();
    let text = format!("firstword {tokens} lastword");
    assert!(text.len() > 2_500_000);
    let started = Instant::now();
    let cid = pg
        .ingest(
            &Target::Session("huge".into()),
            &[json!({"role": "toolResult", "toolCallId": "call-1", "toolName": "cat", "content": text})],
        )
        .unwrap()
        .conversation_id;
    eprintln!(
        "a 2.75 MB text of 250,000 distinct tokens ingested on PostgreSQL in {:?}",
        started.elapsed()
    );
    let found = |q: &str, mode: Mode| {
        let o = GrepOptions {
            mode,
            ..GrepOptions::new(q)
        };
        pg.grep(Some(cid), &o).unwrap().hits.len()
    };
    assert_eq!(found("firstword", Mode::Fts), 1);
    assert_eq!(found("tok0000010", Mode::Fts), 1);
    assert_eq!(found("lastword", Mode::Like), 1);
    assert_eq!(found("tok003d08f", Mode::Regex), 1);
    pg.close();
    crate::test_support::drop_test_schema(&location);
}

/// Full text newest first past the newest rows read in order (`PG_NEWEST_WINDOW`): a word in
/// every message fills its hits from the newest rows, a word only in old messages is found
/// through the index below them, and one in both gets the window's hits then the older ones;
/// in one conversation and across all, each hit by hit as SQLite finds it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_text_newest_first_reads_the_newest_rows_then_the_index() {
    let Some((location, url)) = crate::test_support::pg_test_url("grep_window") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let sqlite = engine_with(&dir, json!({}));
    let pg = Engine::open(Config::from_options(&json!({ "dbPath": url }), None).unwrap()).unwrap();
    let n = super::super::grep::PG_NEWEST_WINDOW + 500;
    let messages: Vec<Value> = (0..n)
        .map(|i| {
            let old = if i < 300 { " archaic" } else { "" };
            let both = if i < 200 || i % 97 == 0 { " sometimes" } else { "" };
            json!({"role": "user", "content": format!("common message {i}{old}{both}")})
        })
        .collect();
    for engine in [&sqlite, &pg] {
        engine.ingest(&Target::Session("other".into()), &messages[..5]).unwrap();
        engine.ingest(&Target::Session("long".into()), &messages).unwrap();
    }
    let ids = |engine: &Engine, cid: Option<i64>, q: &str, limit: usize| {
        let r = engine
            .grep(
                cid,
                &GrepOptions {
                    limit,
                    ..GrepOptions::new(q)
                },
            )
            .unwrap();
        let ids: Vec<i64> = r.hits.iter().map(|h| h.message_id.unwrap()).collect();
        (ids, r.truncated)
    };
    for cid in [Some(2), None] {
        for (q, limit) in [
            ("common", 50),
            ("archaic", 50),
            ("archaic", 400),
            ("sometimes", 60),
            ("sometimes", 1000),
        ] {
            let (want, pg_found) = (ids(&sqlite, cid, q, limit), ids(&pg, cid, q, limit));
            assert_eq!(pg_found, want, "{q:?} limit {limit} in {cid:?}");
            assert!(!want.0.is_empty(), "{q:?}");
        }
    }
    // Where the window alone answers: the newest 50 of a word every message holds.
    let (newest, more) = ids(&pg, Some(2), "common", 50);
    assert!(more && newest.len() == 50 && newest.windows(2).all(|w| w[0] > w[1]));
    pg.close();
    crate::test_support::drop_test_schema(&location);
}

/// A schema made by an earlier lcm-native (its words function plpgsql, its punctuation
/// through `translate`, its search indexes' pending lists the server's 4 MB) gets today's
/// functions and limits at the next open, and nothing it stored
/// changes meaning: the new punctuation expression turns exactly the 32 ASCII marks into
/// spaces, as `translate` did, over every character; the words stored before and after the
/// upgrade are what the function gives; searches find rows of both.
#[test]
fn a_schema_with_the_earlier_search_functions_is_brought_up_to_date() {
    let Some((location, url)) = crate::test_support::pg_test_url("search_functions") else {
        return;
    };
    let open = || Engine::open(Config::from_options(&json!({ "dbPath": url }), None).unwrap()).unwrap();
    let schema = crate::pg::quote_ident(&location.schema);
    let marks = r##"!"#$%&''()*+,-./:;<=>?@[\]^_`{|}~"##;
    let translated = format!("translate(t, '{marks}', '{}')", " ".repeat(32));
    let pg = open();
    let before = pg
        .ingest(&Target::Session("s".into()), &hard_cases())
        .unwrap()
        .conversation_id;
    pg.close();
    let c = location.connect().unwrap();
    c.batch(&format!(
        "DROP FUNCTION {schema}.lcm_search_vector_large(text);
         CREATE OR REPLACE FUNCTION {schema}.lcm_search_text(t text) RETURNS text
           LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT {translated} $$;
         CREATE OR REPLACE FUNCTION {schema}.lcm_search_vector(t text) RETURNS tsvector
           LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE COST 10000 AS $$
           BEGIN RETURN to_tsvector('{schema}.lcm_search'::regconfig, {schema}.lcm_search_text(t)); END $$;
         ALTER INDEX {schema}.messages_search_idx RESET (gin_pending_list_limit);
         ALTER INDEX {schema}.messages_trigram_idx RESET (gin_pending_list_limit);"
    ))
    .unwrap();
    let limited = |c: &crate::pg::Conn| -> i64 {
        c.query_one_value(
            "SELECT count(*) FROM pg_catalog.pg_class i JOIN pg_catalog.pg_namespace n ON n.oid = i.relnamespace
             WHERE n.nspname = $1 AND i.relname LIKE '%_idx' AND i.reloptions @> ARRAY['gin_pending_list_limit=512']",
            &[&location.schema],
        )
        .unwrap()
    };
    assert_eq!(limited(&c), 2, "the summaries' two indexes keep theirs");
    let language = |c: &crate::pg::Conn| -> String {
        c.query_one_value(
            "SELECT l.lanname::text FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
             JOIN pg_catalog.pg_language l ON l.oid = p.prolang WHERE n.nspname = $1 AND p.proname = 'lcm_search_vector'",
            &[&location.schema],
        )
        .unwrap()
    };
    assert_eq!(language(&c), "plpgsql");

    let pg = open();
    assert_eq!(language(&c), "sql", "the open replaced the words function");
    assert_eq!(limited(&c), 4, "and gave every search index the pending-list limit");
    let after = pg
        .ingest(&Target::Session("t".into()), &hard_cases())
        .unwrap()
        .conversation_id;
    let stale: i64 = c
        .query_one_value(
            &format!("SELECT count(*) FROM {schema}.messages WHERE lcm_search IS DISTINCT FROM {schema}.lcm_search_vector(content)"),
            &[],
        )
        .unwrap();
    assert_eq!(stale, 0, "the words stored before and after are the function's");
    let (changed, differ): (i64, i64) = {
        let row = c
            .query(
                &format!(
                    "SELECT count(*) FILTER (WHERE {schema}.lcm_search_text(t) <> t),
                            count(*) FILTER (WHERE {schema}.lcm_search_text(t) <> {translated})
                     FROM (SELECT chr(i) AS t FROM generate_series(1, 1114111) i WHERE i < 55296 OR i > 57343) cs"
                ),
                &[],
            )
            .unwrap();
        (row[0].get(0), row[0].get(1))
    };
    assert_eq!((changed, differ), (32, 0), "exactly the ASCII marks become spaces");
    for (cid, q) in [(before, "foo"), (after, "foo"), (before, "x86"), (after, "ecole")] {
        let hits = pg.grep(Some(cid), &GrepOptions::new(q)).unwrap().hits;
        assert_eq!(hits.len(), 1, "{q} in conversation {cid}");
    }
    pg.close();
    crate::test_support::drop_test_schema(&location);
}
