//! Opening an engine on PostgreSQL: the schema is made, when it is missing or empty, from the
//! current schema as the migration describes it (built in memory, copied in with no rows), so
//! it is exactly what `lcm-native copy` makes and can be copied back to a file at any time;
//! otherwise it must hold a finished lcm-native database of a version this build knows.

use std::time::{Duration, Instant};

use crate::config::Config;
use crate::db::migrate::MigrationReport;
use crate::db::schema::{COPY_STATE_TABLE, NATIVE_SCHEMA_STEP, NATIVE_SCHEMA_VERSION};
use crate::db::SchemaFlags;
use crate::error::{LcmError, Result};
use crate::pg::pool::PgPool;
use crate::pg::Conn;

/// What PostgreSQL's schema has: lcm-native's current one, without SQLite's trigram table.
pub(super) const FLAGS: SchemaFlags = SchemaFlags {
    conversations_have_active: true,
    conversations_have_session_key: true,
    has_cjk_fts: false,
    has_fidelity: true,
    has_versions: true,
};

/// Makes the schema ready (under the schema's setup lock, so two gateways starting at once
/// make it once) and says what was done.
pub(super) fn prepare(pool: &PgPool, config: &Config) -> Result<MigrationReport> {
    let started = Instant::now();
    let wait = Duration::from_millis(config.busy_timeout_ms.max(0) as u64);
    // Held on a connection of its own (through a transaction pooler, by a transaction left
    // open there) until the schema is ready.
    let _setup = pool.hold("setup", 0, wait, &format!("the setup of {}", pool.describe()))?;
    let created = pool.with_unbounded(|c| {
        make_or_check(c, config).and_then(|created| {
            // A schema made before grep ran on PostgreSQL gets its search indexes now.
            if !config.read_only {
                if !crate::pg::search::probe(c)?.full_text {
                    c.transaction(|c| crate::pg::search::install(c, crate::db::schema::TEXT_COLUMNS))?;
                } else {
                    crate::pg::search::upgrade(c)?;
                }
                crate::pg::search::analyze_if_never(c)?;
                add_missing_tables(c)?;
            } else if !c.has_table(crate::db::totals::COUNTS_TABLE)? {
                let described = c.describe().to_string();
                return Err(LcmError::schema(
                    &described,
                    format!("{described} was made by an earlier lcm-native and needs an upgrade, which readOnly never writes; open it once without readOnly"),
                ));
            }
            Ok(created)
        })
    })?;
    Ok(MigrationReport {
        db_path: pool.describe().to_string(),
        era: "postgres".into(),
        up_to_date: !created,
        duration_ms: started.elapsed().as_secs_f64() * 1000.0,
        summary: if created {
            format!("created lcm-native's tables in {}", pool.describe())
        } else {
            "schema is up to date; nothing was done".into()
        },
        ..Default::default()
    })
}

/// What a schema made by an earlier version lacks, added as a migration adds it to a file: the
/// prompt-cache report's, the summaries' previous-context, the turns' transcript positions,
/// the messages' kinds of value and lossless-claw's transcript-trust tables (empty, with their
/// indexes; a message stored before the kinds table is read by recall as unindexed), the stored-message
/// counts (counted once, then kept by their trigger), the count of message rewrites
/// assembly's render cache follows, the index of live messages (`ddl::MESSAGE_ITEMS_INDEX`)
/// and the operations' leases through a transaction pooler (`leases`).
fn add_missing_tables(c: &Conn) -> Result<()> {
    for (name, sql) in crate::db::schema::TABLES {
        let later = [
            crate::db::schema::PROMPT_CACHE_TABLE,
            crate::db::schema::SUMMARY_CONTEXT_TABLE,
            crate::db::schema::TURN_POSITIONS_TABLE,
            crate::db::schema::TRUST_TABLE,
            crate::db::schema::MESSAGE_KINDS_TABLE,
        ];
        if later.contains(name) && !c.has_table(name)? {
            c.batch(&crate::pg::ddl::table(sql)?.create)?;
            for (_, index) in crate::db::schema::INDEXES
                .iter()
                .filter(|(_, ddl)| ddl.contains(&format!(" ON {name} (")))
            {
                c.batch(&crate::pg::ddl::index(index)?)?;
            }
        }
    }
    if !c.has_table(crate::db::totals::COUNTS_TABLE)? {
        c.transaction(|c| {
            c.batch(
                "CREATE TABLE lcm_message_counts (conversation_id BIGINT PRIMARY KEY, messages BIGINT NOT NULL DEFAULT 0);
                 LOCK TABLE messages IN SHARE MODE;
                 INSERT INTO lcm_message_counts (conversation_id, messages)
                 SELECT conversation_id, count(*) FROM messages GROUP BY conversation_id;",
            )?;
            c.batch(&crate::pg::totals::install())
        })?;
    }
    if !c.has_table(crate::pg::rewrites::TABLE)? {
        c.transaction(|c| c.batch(crate::pg::rewrites::INSTALL))?;
    }
    c.batch(crate::pg::ddl::MESSAGE_ITEMS_INDEX)?;
    c.batch(crate::pg::leases::CREATE)?;
    Ok(())
}

/// True when it created the tables.
fn make_or_check(c: &Conn, config: &Config) -> Result<bool> {
    let described = c.describe().to_string();
    if c.has_table(COPY_STATE_TABLE)? {
        return Err(LcmError::schema(
            &described,
            format!(
                "{described} is an unfinished copy (lcm-native copy was interrupted): run that copy again to finish it"
            ),
        ));
    }
    if c.has_table(crate::copy::SQLITE_SCHEMA_TABLE)? {
        let newest: Option<i64> = c.query_one_value(
            "SELECT max(algorithm_version) FROM lcm_migration_state WHERE step_name = $1",
            &[&NATIVE_SCHEMA_STEP],
        )?;
        if newest.is_some_and(|v| v > NATIVE_SCHEMA_VERSION) {
            return Err(LcmError::schema(
                &described,
                format!(
                    "{described} was written by a newer lcm-native (schema version {}); upgrade lcm-native to open it",
                    newest.unwrap_or_default()
                ),
            ));
        }
        return Ok(false);
    }
    let tables: i64 = c.query_one_value(
        "SELECT count(*) FROM pg_catalog.pg_tables WHERE schemaname = $1",
        &[&c.schema],
    )?;
    if tables > 0 {
        return Err(LcmError::schema(
            &described,
            format!("{described} holds {tables} tables that are not an lcm-native database; give lcm-native a schema of its own (?schema=NAME)"),
        ));
    }
    if config.read_only {
        return Err(LcmError::schema(
            &described,
            format!(
                "{described} holds no lcm-native database, and readOnly never writes; open it once without readOnly"
            ),
        ));
    }
    // The current schema, as the migration makes it, copied in: the same tables, indexes,
    // triggers and statements a copy from SQLite makes.
    crate::copy::create_schema(&config.db_path, &c.schema)?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::{json, Value};

    use crate::api::{AssembleOptions, Description, IngestOptions, RewriteResult, SummaryFilter};
    use crate::config::Config;
    use crate::engine::Engine;
    use crate::store::conversations::Target;
    use crate::test_support::{pg_test_location, transcript, THEME};

    fn open(db_path: &str) -> Engine {
        let options = json!({ "dbPath": db_path, "timezone": "UTC", "freshTailCount": 8 });
        Engine::open(Config::from_options(&options, None).unwrap()).unwrap()
    }

    /// A schema without the count of message rewrites (made before it), opened read-only so
    /// that it cannot be added: assembly runs without the render cache, with the same result.
    #[test]
    fn a_read_only_schema_without_the_rewrite_count_assembles_uncached() {
        let Some((location, url)) = crate::test_support::pg_test_url("no_rewrite_count") else {
            return;
        };
        let target = Target::Session("s".into());
        let writer = open(&url);
        let cid = writer
            .ingest(&target, &transcript(THEME)[..12])
            .unwrap()
            .conversation_id;
        let options = AssembleOptions {
            token_budget: 10_000,
            fresh_tail_count: None,
            presentation: None,
            recall_query: None,
            auto_recall: None,
        };
        let expected = serde_json::to_value(writer.assemble(cid, &options).unwrap().messages).unwrap();
        drop(writer);
        location
            .connect()
            .unwrap()
            .batch(
                "DROP TRIGGER lcm_messages_rewritten ON messages; DROP TRIGGER lcm_message_parts_rewritten ON message_parts;
                 DROP TABLE lcm_native_message_rewrites",
            )
            .unwrap();
        let read_only = json!({ "dbPath": url, "readOnly": true, "timezone": "UTC", "freshTailCount": 8 });
        let reader = Engine::open(Config::from_options(&read_only, None).unwrap()).unwrap();
        for _ in 0..2 {
            let shown = serde_json::to_value(reader.assemble(cid, &options).unwrap().messages).unwrap();
            assert_eq!(shown, expected);
        }
        assert!(
            reader.assemblies.rendered.lock().unwrap().is_empty(),
            "a cache without a stamp"
        );
        drop(reader);
        crate::test_support::drop_test_schema(&location);
    }

    /// A schema an earlier lcm-native made, without the prompt-cache report's table and the
    /// stored-message counts, gets them at the next open (its messages counted); the report
    /// then follows assemblies and turns as on SQLite, and the counts every new message.
    #[test]
    fn a_schema_of_an_earlier_version_gets_the_new_tables() {
        let Some((location, url)) = crate::test_support::pg_test_url("earlier_schema") else {
            return;
        };
        let target = Target::Session("s".into());
        let turn = |i: usize| {
            vec![
                json!({"role": "user", "content": format!("question {i}")}),
                json!({"role": "assistant", "content": format!("answer {i}")}),
            ]
        };
        let earlier = open(&url);
        earlier.ingest(&target, &turn(0)).unwrap();
        drop(earlier);
        let c = location.connect().unwrap();
        c.batch(
            "DROP TABLE lcm_native_prompt_cache; DROP TRIGGER lcm_messages_count ON messages; DROP TABLE lcm_message_counts;
             DROP TABLE lcm_native_turn_positions; DROP TABLE message_transcript_anchor_trust;
             DROP TRIGGER lcm_messages_rewritten ON messages; DROP TRIGGER lcm_message_parts_rewritten ON message_parts;
             DROP TABLE lcm_native_message_rewrites; DROP INDEX context_items_message_idx;
             DROP TABLE lcm_native_message_kinds",
        )
        .unwrap();
        let has_message_items_index = || -> bool {
            c.query_one_value(
                "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_indexes WHERE schemaname = $1 AND indexname = 'context_items_message_idx')",
                &[&location.schema],
            )
            .unwrap()
        };
        // Read-only, it cannot be upgraded: said so, nothing written.
        let read_only = json!({ "dbPath": url, "readOnly": true });
        let refused = Engine::open(Config::from_options(&read_only, None).unwrap())
            .err()
            .unwrap();
        assert_eq!(refused.code(), "E_SCHEMA", "{refused}");
        assert!(!c.has_table("lcm_message_counts").unwrap());
        let engine = open(&url);
        assert!(c.has_table("lcm_native_prompt_cache").unwrap());
        assert!(c.has_table(crate::pg::rewrites::TABLE).unwrap());
        assert!(c.has_table(crate::db::schema::MESSAGE_KINDS_TABLE).unwrap());
        assert!(has_message_items_index());
        assert_eq!(engine.find_conversation(&target).unwrap().unwrap().message_count, 2);
        let cid = engine.ingest(&target, &turn(0)).unwrap().conversation_id;
        assert_eq!(engine.find_conversation(&target).unwrap().unwrap().message_count, 4);
        let options = AssembleOptions {
            token_budget: 10_000,
            fresh_tail_count: None,
            presentation: None,
            recall_query: None,
            auto_recall: None,
        };
        for i in 1..=3 {
            engine.assemble(cid, &options).unwrap();
            engine.ingest(&target, &turn(i)).unwrap();
        }
        let report = engine.conversations().unwrap()[0].prompt_cache.clone().unwrap();
        assert_eq!((report.assemblies, report.breaks), (3, 0), "{report:?}");
        assert!(
            report.tokens_kept > 0 && report.tokens_kept < report.tokens_sent,
            "{report:?}"
        );
        // The transcript tables came back with the upgrade: the host's entry ids are trusted, a
        // replay is recognised, a late one is stored as such and noted, as on SQLite.
        let anchored = |n: usize, position: i64| {
            let messages = vec![
                json!({"role": "user", "content": format!("anchored {n}"), "entryId": format!("e{n}-u")}),
                json!({"role": "assistant", "content": format!("reply {n}"), "entryId": format!("e{n}-a")}),
            ];
            let options = IngestOptions {
                advancement_key: Some(format!("k{n}")),
                transcript_position: Some(position),
                ..Default::default()
            };
            engine.ingest_with(&target, &messages, options).unwrap()
        };
        assert_eq!(anchored(10, 20).inserted, 2);
        assert!(anchored(10, 20).duplicate);
        let late = anchored(9, 18);
        assert_eq!((late.inserted, late.late), (2, true));
        let trusted: i64 = c
            .query_one_value(
                "SELECT count(*) FROM message_transcript_anchor_trust WHERE trust_state = 'verified'",
                &[],
            )
            .unwrap();
        assert_eq!(trusted, 4);
        let verified = engine.verify(Some(cid)).unwrap();
        assert!(verified.ok, "{verified:?}");
        assert!(verified.notes.iter().any(|n| n.contains("turn k9")), "{verified:?}");
        drop(engine);
        crate::test_support::drop_test_schema(&location);
    }

    /// A real session's turns through an engine on PostgreSQL and one on SQLite: the same
    /// conversation, messages, live context and assembled context; what is not ported yet
    /// says so with E_UNSUPPORTED. Compaction gives the same DAG.
    #[test]
    fn an_engine_on_postgres_stores_and_assembles_as_on_sqlite() {
        if let Some((location, url)) = crate::test_support::pg_test_url("engine") {
            stores_and_assembles_as_on_sqlite(location, url);
        }
    }

    /// The same through PgBouncer in transaction mode (`pooler=transaction`).
    #[test]
    fn an_engine_on_postgres_stores_and_assembles_as_on_sqlite_through_a_transaction_pooler() {
        if let Some((location, url)) = crate::test_support::pooler_test_url("engine_pooled") {
            stores_and_assembles_as_on_sqlite(location, url);
        }
    }

    fn stores_and_assembles_as_on_sqlite(location: crate::pg::Location, url: String) {
        let dir = tempfile::tempdir().unwrap();
        let sqlite = open(&dir.path().join("lcm.db").to_string_lossy());
        let pg = open(&url);
        assert!(!pg.migration().up_to_date, "{:?}", pg.migration());
        assert!(pg.migration().summary.contains("created lcm-native's tables"));

        let session = transcript(THEME);
        let target = Target::SessionKey {
            key: "agent:main:main".into(),
            session_id: Some("theme".into()),
        };
        for (i, turn) in session.chunks(12).take(20).enumerate() {
            let options = IngestOptions {
                advancement_key: Some(format!("turn-{i}")),
                ..Default::default()
            };
            let a = sqlite.ingest_with(&target, turn, options.clone()).unwrap();
            let b = pg.ingest_with(&target, turn, options.clone()).unwrap();
            assert_eq!((a.inserted, a.skipped), (b.inserted, b.skipped), "turn {i}");
            // A replayed turn is a duplicate on both.
            assert!(pg.ingest_with(&target, turn, options).unwrap().duplicate);
        }
        let same = |what: &str, a: Value, b: Value| assert_eq!(a, b, "{what}");
        let cid = pg.find_conversation(&target).unwrap().unwrap().conversation_id;
        assert_eq!(cid, 1);
        same(
            "messages",
            serde_json::to_value(sqlite.messages(1, 0, 1000).unwrap()).unwrap(),
            serde_json::to_value(pg.messages(1, 0, 1000).unwrap()).unwrap(),
        );
        same(
            "context",
            serde_json::to_value(sqlite.context(1).unwrap()).unwrap(),
            serde_json::to_value(pg.context(1).unwrap()).unwrap(),
        );
        let listed = pg.conversations().unwrap();
        assert_eq!(
            listed[0].message_count,
            sqlite.conversations().unwrap()[0].message_count
        );
        for budget in [2_000, 20_000, 200_000] {
            let options = AssembleOptions {
                token_budget: budget,
                fresh_tail_count: None,
                presentation: None,
                recall_query: None,
                auto_recall: None,
            };
            let (a, b) = (sqlite.assemble(1, &options).unwrap(), pg.assemble(1, &options).unwrap());
            same(
                &format!("assembled at {budget}"),
                json!(a.message_values()),
                json!(b.message_values()),
            );
            assert_eq!(a.stats.kept_items, b.stats.kept_items, "{budget}");
            assert_eq!(a.stats.total_context_items, b.stats.total_context_items, "{budget}");
        }
        // A NUL character PostgreSQL cannot store: refused with a code, nothing written.
        let before = pg.messages(1, 0, 10_000).unwrap().len();
        let nul = [json!({"role": "user", "content": "a\u{0}b", "timestamp": "2026-11-26T10:00:00Z"})];
        assert_eq!(pg.ingest(&target, &nul).unwrap_err().code(), "E_INVALID_INPUT");
        assert_eq!(pg.messages(1, 0, 10_000).unwrap().len(), before);
        // Compaction (the offline summarizer, forced to a small budget): the same DAG.
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let sweep = |engine: &Engine| {
            rt.block_on(engine.compact(
                1,
                Arc::new(crate::offline::OfflineSummarizer),
                crate::api::SweepOptions {
                    token_budget: 4_000,
                    force: true,
                    ..Default::default()
                },
            ))
            .unwrap()
        };
        let (a, b) = (sweep(&sqlite), sweep(&pg));
        assert!(b.leaf_passes >= 2 && !b.condensed_passes.is_empty(), "{b:?}");
        assert_eq!((a.leaf_passes, a.tokens_after), (b.leaf_passes, b.tokens_after));
        // Summary ids carry the time they were made; the rest must be equal.
        assert_eq!(a.created_summary_ids.len(), b.created_summary_ids.len());
        let ids = |engine: &Engine| -> Vec<(i64, String, i64)> {
            engine
                .summaries(1, &SummaryFilter::default())
                .unwrap()
                .into_iter()
                .map(|s| (s.fields.depth, s.fields.content, s.fields.token_count))
                .collect()
        };
        assert_eq!(ids(&sqlite), ids(&pg));
        // Each engine's summary ids, in creation order, as S0, S1, … (they carry their time).
        let neutral = |engine: &Engine, v: Value| -> String {
            let mut text = v.to_string();
            for (i, s) in engine
                .summaries(1, &SummaryFilter::default())
                .unwrap()
                .iter()
                .enumerate()
            {
                text = text.replace(&s.fields.summary_id, &format!("S{i}"));
            }
            text
        };
        assert_eq!(
            neutral(&sqlite, serde_json::to_value(sqlite.context(1).unwrap()).unwrap()),
            neutral(&pg, serde_json::to_value(pg.context(1).unwrap()).unwrap()),
            "context after compaction"
        );
        let options = AssembleOptions {
            token_budget: 4_000,
            fresh_tail_count: None,
            presentation: None,
            recall_query: None,
            auto_recall: None,
        };
        assert_eq!(
            neutral(&sqlite, json!(sqlite.assemble(1, &options).unwrap().message_values())),
            neutral(&pg, json!(pg.assemble(1, &options).unwrap().message_values())),
            "assembled after compaction"
        );
        // Recall's describe and expand, and a summary's versions: the same on both.
        let deepest = |engine: &Engine| {
            let list = engine.summaries(1, &SummaryFilter::default()).unwrap();
            let top = list
                .iter()
                .max_by_key(|s| s.fields.depth)
                .unwrap()
                .fields
                .summary_id
                .clone();
            (list.len(), top)
        };
        let ((n, top_a), (_, top_b)) = (deepest(&sqlite), deepest(&pg));
        let described =
            |engine: &Engine, id: &str| match engine.describe(&crate::recall::ItemId::Summary(id.into())).unwrap() {
                Description::Summary(d) => (
                    d.inputs.len(),
                    d.covered_messages.count,
                    d.live,
                    d.summary.fields.content.clone(),
                    d.versions.len(),
                ),
                other => panic!("{other:?}"),
            };
        assert_eq!(described(&sqlite, &top_a), described(&pg, &top_b), "{n} summaries");
        let message = |engine: &Engine| match engine.describe(&crate::recall::ItemId::Message(3)).unwrap() {
            Description::Message(d) => (d.chain.len(), d.message.content.clone()),
            other => panic!("{other:?}"),
        };
        assert_eq!(message(&sqlite), message(&pg));
        let expanded = |engine: &Engine, id: &str| {
            let options = crate::api::ExpandOptions {
                token_budget: 20_000,
                max_depth: None,
            };
            let e = engine.expand(id, &options).unwrap();
            (e.entries.len(), e.estimated_tokens, e.truncated)
        };
        assert_eq!(expanded(&sqlite, &top_a), expanded(&pg, &top_b));
        assert_eq!(pg.history(&top_b).unwrap().len(), 1);
        // A backup of a schema is a SQLite file holding the same rows.
        let copy = dir.path().join("backup.db").to_string_lossy().into_owned();
        assert!(pg.backup(&copy).unwrap() > 0);
        let restored = open(&copy);
        assert_eq!(restored.verify(None).unwrap().digest, pg.verify(None).unwrap().digest);
        restored.close();
        pg.close();
        // Opened again: the schema is there; read-only works too.
        let again = open(&url);
        assert!(again.migration().up_to_date);
        assert_eq!(again.messages(1, 0, 5).unwrap().len(), 5);
        again.close();
        let ro =
            Engine::open(Config::from_options(&json!({ "dbPath": url, "readOnly": true }), None).unwrap()).unwrap();
        assert_eq!(ro.ingest(&target, &session[..1]).unwrap_err().code(), "E_READ_ONLY");
        ro.close();
        crate::test_support::drop_test_schema(&location);
    }

    /// A compacted SQLite file copied into PostgreSQL: `verify` finds both sound with the same
    /// digest; fidelity scores, a rewritten summary rolled back, and `/new`, `/reset` and a
    /// deleted session give the same results on both.
    #[test]
    fn verify_fidelity_rollback_and_resets_on_postgres_as_on_sqlite() {
        if let Some((location, url)) = crate::test_support::pg_test_url("engine_verify") {
            verify_fidelity_rollback_and_resets(location, url);
        }
    }

    /// The same through PgBouncer in transaction mode (`pooler=transaction`).
    #[test]
    fn verify_fidelity_rollback_and_resets_on_postgres_as_on_sqlite_through_a_transaction_pooler() {
        if let Some((location, url)) = crate::test_support::pooler_test_url("engine_verify_pooled") {
            verify_fidelity_rollback_and_resets(location, url);
        }
    }

    fn verify_fidelity_rollback_and_resets(location: crate::pg::Location, url: String) {
        use crate::store::lifecycle::ResetReason;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("lcm.db").to_string_lossy().into_owned();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let sqlite = open(&file);
        let target = Target::SessionKey {
            key: "agent:main:main".into(),
            session_id: Some("theme".into()),
        };
        sqlite.ingest(&target, &transcript(THEME)[..240]).unwrap();
        let sweep = crate::api::SweepOptions {
            token_budget: 4_000,
            force: true,
            ..Default::default()
        };
        rt.block_on(sqlite.compact(1, Arc::new(crate::offline::OfflineSummarizer), sweep))
            .unwrap();
        sqlite.close();
        crate::copy::run(crate::api::CopyOptions::new(&file, &url)).unwrap();
        let (sqlite, pg) = (open(&file), open(&url));

        let (a, b) = (sqlite.verify(None).unwrap(), pg.verify(None).unwrap());
        assert!(a.ok && b.ok, "{:?} / {:?}", a.problems, b.problems);
        assert_eq!(
            (a.conversations, a.messages, a.summaries),
            (b.conversations, b.messages, b.summaries)
        );
        assert!(a.summaries > 3, "{a:?}");
        assert_eq!(a.digest, b.digest, "one database, two engines: one digest");
        assert_eq!(pg.verify(Some(1)).unwrap().digest, a.digest);

        let (sa, sb) = (
            sqlite.score_fidelity(1, true).unwrap(),
            pg.score_fidelity(1, true).unwrap(),
        );
        assert_eq!(sa.scored, sb.scored);
        assert_eq!(sa.by_depth, sb.by_depth);
        assert_eq!(sqlite.fidelity(1).unwrap(), pg.fidelity(1).unwrap());

        // A summary's text changed (as a rewrite does), then rolled back: the same versions.
        let top = sqlite
            .summaries(1, &SummaryFilter::default())
            .unwrap()
            .last()
            .unwrap()
            .fields
            .summary_id
            .clone();
        let change = |engine: &Engine| {
            let fidelity = crate::fidelity::score(&Default::default(), "rewritten");
            let replacement = crate::store::summaries::Replacement {
                content: "a rewritten text",
                token_count: 4,
                model: "test",
                fidelity: (&fidelity, false),
                change: Some(crate::store::versions::Change {
                    reason: crate::store::versions::Reason::Rewrite,
                    template: None,
                    keep: 10,
                }),
            };
            let flags = engine.deps.flags;
            engine
                .deps
                .backend
                .write(crate::sql::WriteScope::Schema, |db| {
                    crate::store::summaries::replace_content(db, flags, &top, &replacement)
                })
                .unwrap()
        };
        assert_eq!(change(&sqlite), change(&pg));
        let versions = |engine: &Engine| -> Vec<(i64, String, String, bool)> {
            engine
                .history(&top)
                .unwrap()
                .into_iter()
                .map(|v| (v.version, v.content, format!("{:?}", v.reason), v.current))
                .collect()
        };
        assert_eq!(versions(&sqlite), versions(&pg));
        assert_eq!(versions(&pg).len(), 2);
        let (ra, rb) = (
            rt.block_on(sqlite.rollback(&top, 1)).unwrap(),
            rt.block_on(pg.rollback(&top, 1)).unwrap(),
        );
        assert_eq!((ra.version, &ra.content), (rb.version, &rb.content));
        assert_eq!(versions(&sqlite), versions(&pg));
        let (a, b) = (sqlite.verify(None).unwrap(), pg.verify(None).unwrap());
        assert!(a.ok && b.ok, "{:?} / {:?}", a.problems, b.problems);
        assert_eq!(a.digest, b.digest, "after the rollback");

        // A rewrite of every summary, applied: the same texts, versions and digest.
        let rewrite = |engine: &Engine| {
            let options = serde_json::from_value(json!({ "all": true, "apply": true })).unwrap();
            let summarizer = crate::test_support::Scripted::stub();
            rt.block_on(engine.rewrite(
                1,
                summarizer,
                &options,
                &std::sync::atomic::AtomicBool::new(false),
                &|_| {},
            ))
            .unwrap()
        };
        let (wa, wb) = (rewrite(&sqlite), rewrite(&pg));
        assert!(wa.entries.len() > 3, "{wa:?}");
        let entries = |r: &RewriteResult| serde_json::to_value(&r.entries).unwrap();
        assert_eq!(entries(&wa), entries(&wb));
        assert_eq!((wa.tokens_before, wa.tokens_after), (wb.tokens_before, wb.tokens_after));
        assert_eq!(versions(&sqlite), versions(&pg));
        let (a, b) = (sqlite.verify(None).unwrap(), pg.verify(None).unwrap());
        assert!(a.ok && b.ok, "{:?} / {:?}", a.problems, b.problems);
        assert_eq!(a.digest, b.digest, "after the rewrite");

        // `/new` (keeping depth 2 and up), `/reset`, then the session deleted.
        for reason in [
            ResetReason::New { retain_depth: 2 },
            ResetReason::Reset,
            ResetReason::Deleted,
        ] {
            let (ra, rb) = (
                rt.block_on(sqlite.reset_session(&target, reason)).unwrap(),
                rt.block_on(pg.reset_session(&target, reason)).unwrap(),
            );
            assert_eq!(
                serde_json::to_value(&ra).unwrap(),
                serde_json::to_value(&rb).unwrap(),
                "{reason:?}"
            );
            assert_eq!(
                serde_json::to_value(sqlite.context(1).unwrap()).unwrap(),
                serde_json::to_value(pg.context(1).unwrap()).unwrap()
            );
            let (a, b) = (sqlite.verify(None).unwrap(), pg.verify(None).unwrap());
            assert!(a.ok && b.ok, "{reason:?}: {:?} / {:?}", a.problems, b.problems);
        }
        assert_eq!(pg.conversations().unwrap().len(), 2);
        pg.close();
        crate::test_support::drop_test_schema(&location);
    }

    #[test]
    fn a_schema_that_is_not_lcm_natives_is_refused() {
        let Some(location) = pg_test_location("engine_foreign") else {
            return;
        };
        let c = location.connect().unwrap();
        let schema = crate::pg::quote_ident(&location.schema);
        c.batch(&format!("CREATE SCHEMA {schema}; CREATE TABLE {schema}.other (x int)"))
            .unwrap();
        let url = format!(
            "{}?schema={}",
            std::env::var("LCM_TEST_DATABASE_URL").unwrap(),
            location.schema
        );
        let e = Engine::open(Config::from_options(&json!({ "dbPath": url }), None).unwrap())
            .err()
            .unwrap();
        assert_eq!(e.code(), "E_SCHEMA", "{e}");
        assert!(e.to_string().contains("not an lcm-native database"), "{e}");
        c.batch(&format!("DROP SCHEMA {schema} CASCADE")).unwrap();
        // An empty schema and readOnly: nothing to read, nothing made.
        let e = Engine::open(Config::from_options(&json!({ "dbPath": url, "readOnly": true }), None).unwrap())
            .err()
            .unwrap();
        assert_eq!(e.code(), "E_SCHEMA", "{e}");
    }

    /// Two gateways (two engines) on one schema: while one compacts a conversation (its
    /// summarizer still answering), the other's compaction of it waits, then gives up with
    /// E_BUSY; once the first ends, the second runs. Turns committed meanwhile are kept.
    #[test]
    fn one_operation_per_conversation_across_gateways() {
        if let Some((location, url)) = crate::test_support::pg_test_url("engine_op_lock") {
            one_operation_per_conversation(location, url);
        }
    }

    /// The same through PgBouncer in transaction mode (`pooler=transaction`).
    #[test]
    fn one_operation_per_conversation_across_gateways_through_a_transaction_pooler() {
        if let Some((location, url)) = crate::test_support::pooler_test_url("engine_op_lock_pooled") {
            one_operation_per_conversation(location, url);
        }
    }

    /// A runtime of two workers, and a forced sweep into 3,000 tokens: what the tests of
    /// compactions across gateways run.
    fn runtime_and_sweep() -> (tokio::runtime::Runtime, crate::api::SweepOptions) {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let sweep = crate::api::SweepOptions {
            token_budget: 3_000,
            force: true,
            ..Default::default()
        };
        (rt, sweep)
    }

    /// A compaction's lease through a transaction pooler, lost while the compaction runs
    /// (another gateway took it once it ran out): the holder notices, and writes nothing more.
    /// Once as its summarizer answers (the answer is not written), once while its summarizer
    /// still thinks (the call ends with E_BUSY).
    #[test]
    fn a_lease_lost_while_its_compaction_runs_stops_it_before_it_writes() {
        use crate::test_support::{Act, Scripted};
        let Some((location, url)) = crate::test_support::pooler_test_url("engine_lease_lost") else {
            return;
        };
        let options = json!({ "dbPath": url, "timezone": "UTC", "freshTailCount": 4, "lockTimeoutMs": 400 });
        let engine = Engine::open(Config::from_options(&options, None).unwrap()).unwrap();
        engine
            .ingest(&Target::Session("lease".into()), &transcript(THEME)[..120])
            .unwrap();
        let (rt, sweep) = runtime_and_sweep();
        // What another gateway does once the lease ran out: takes it.
        let steal = {
            let location = location.clone();
            move || {
                let schema = crate::pg::quote_ident(&location.schema);
                let taken = location
                    .connect()
                    .unwrap()
                    .transaction(|c| {
                        c.execute_cached(
                            &format!("UPDATE {schema}.lcm_native_leases SET holder = 'another gateway', expires_at = clock_timestamp() + interval '1 hour'"),
                            &[],
                        )
                    })
                    .unwrap();
                assert_eq!(taken, 1, "the compaction holds no lease");
            }
        };
        let answers_late = Scripted::new({
            let steal = steal.clone();
            move |_, _| {
                steal();
                // Long enough for the holder's renewal to find the lease gone.
                std::thread::sleep(crate::pg::leases::TTL);
                Act::Stub
            }
        });
        let e = rt
            .block_on(engine.compact(1, answers_late.clone(), sweep.clone()))
            .unwrap_err();
        assert_eq!(e.code(), "E_BUSY", "{e}");
        assert!(e.to_string().contains("was lost while the operation ran"), "{e}");
        assert_eq!(
            answers_late.calls.lock().unwrap().len(),
            1,
            "asked again after the loss"
        );
        let written = |engine: &Engine| engine.summaries(1, &Default::default()).unwrap().len();
        assert_eq!(written(&engine), 0, "the late answer was written");
        // The lease is the other gateway's for an hour: given back, as it would run out.
        let schema = crate::pg::quote_ident(&location.schema);
        let free = format!("DELETE FROM {schema}.lcm_native_leases");
        location
            .connect()
            .unwrap()
            .transaction(|c| c.execute_cached(&free, &[]))
            .unwrap();
        let hanging = Scripted::new(move |_, _| {
            steal();
            Act::Hang
        });
        let started = std::time::Instant::now();
        let e = rt.block_on(engine.compact(1, hanging, sweep)).unwrap_err();
        assert_eq!(e.code(), "E_BUSY", "{e}");
        assert!(
            started.elapsed() < crate::pg::leases::TTL * 3,
            "{:?}",
            started.elapsed()
        );
        assert_eq!(written(&engine), 0);
        engine.close();
        crate::test_support::drop_test_schema(&location);
    }

    fn one_operation_per_conversation(location: crate::pg::Location, url: String) {
        use crate::test_support::{Act, Scripted};
        let gateway = || {
            let options = json!({ "dbPath": url, "timezone": "UTC", "freshTailCount": 4, "lockTimeoutMs": 400 });
            Engine::open(Config::from_options(&options, None).unwrap()).unwrap()
        };
        let (a, b) = (Arc::new(gateway()), gateway());
        let target = Target::Session("shared".into());
        a.ingest(&target, &transcript(THEME)[..120]).unwrap();
        let (rt, sweep) = runtime_and_sweep();
        let hanging = Scripted::new(|_, _| Act::Hang);
        let first = rt.spawn({
            let (a, hanging, sweep) = (a.clone(), hanging.clone(), sweep.clone());
            async move { a.compact(1, hanging, sweep).await }
        });
        let started = std::time::Instant::now();
        while hanging.calls.lock().unwrap().is_empty() {
            assert!(
                started.elapsed() < std::time::Duration::from_secs(10),
                "the first compaction never called its summarizer"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let offline = Arc::new(crate::offline::OfflineSummarizer);
        let e = rt.block_on(b.compact(1, offline.clone(), sweep.clone())).unwrap_err();
        assert_eq!(e.code(), "E_BUSY", "{e}");
        assert!(e.to_string().contains("operation lock"), "{e}");
        // A turn while the first gateway still compacts: stored, and kept by what follows.
        b.ingest(&target, &transcript(THEME)[120..130]).unwrap();
        // The first gateway stops (its summarizer never answered): its lock goes with it.
        a.close();
        assert!(rt.block_on(first).unwrap().is_err());
        let done = rt.block_on(b.compact(1, offline, sweep)).unwrap();
        assert!(done.leaf_passes > 0, "{done:?}");
        assert_eq!(b.messages(1, 0, 1000).unwrap().len(), 130);
        b.close();
        crate::test_support::drop_test_schema(&location);
    }
    /// Gateways writing at once: two on one session (made by whichever comes first, once) and
    /// one on its own. Each turn is stored once, `seq` stays dense, each gateway's turns keep
    /// their order, and the lone gateway's session is written beside the shared one.
    #[test]
    fn gateways_writing_at_once_on_one_conversation_and_on_others() {
        if let Some((location, url)) = crate::test_support::pg_test_url("engine_writers") {
            gateways_writing_at_once(location, url);
        }
    }

    /// The same through PgBouncer in transaction mode (`pooler=transaction`).
    #[test]
    fn gateways_writing_at_once_on_one_conversation_and_on_others_through_a_transaction_pooler() {
        if let Some((location, url)) = crate::test_support::pooler_test_url("engine_writers_pooled") {
            gateways_writing_at_once(location, url);
        }
    }

    fn gateways_writing_at_once(location: crate::pg::Location, url: String) {
        let gateway = || {
            let options = json!({ "dbPath": url, "timezone": "UTC" });
            Arc::new(Engine::open(Config::from_options(&options, None).unwrap()).unwrap())
        };
        let turns = 15;
        let turn = |k: usize, t: usize| {
            vec![
                json!({ "role": "user", "content": format!("gateway {k} turn {t} asks") }),
                json!({ "role": "assistant", "content": format!("gateway {k} turn {t} answers") }),
            ]
        };
        let writers: Vec<_> = [("shared", 0), ("shared", 1), ("own", 2)]
            .into_iter()
            .map(|(session, k)| {
                let engine = gateway();
                std::thread::spawn(move || {
                    let target = Target::Session(session.into());
                    for t in 0..turns {
                        engine.ingest(&target, &turn(k, t)).unwrap();
                    }
                    engine.close();
                })
            })
            .collect();
        for w in writers {
            w.join().unwrap();
        }
        let reader = gateway();
        let conversations = reader.conversations().unwrap();
        assert_eq!(
            conversations.len(),
            2,
            "one conversation per session: {conversations:?}"
        );
        for c in conversations {
            let stored: Vec<(i64, String)> = reader
                .messages(c.conversation_id, 0, 1000)
                .unwrap()
                .into_iter()
                .map(|m| (m.seq, m.content.to_string()))
                .collect();
            let seqs: Vec<i64> = stored.iter().map(|m| m.0).collect();
            assert_eq!(seqs, (1..=stored.len() as i64).collect::<Vec<_>>(), "seq dense");
            let writers: &[usize] = if c.session_id == "shared" { &[0, 1] } else { &[2] };
            assert_eq!(stored.len(), writers.len() * turns * 2, "each turn once");
            for &k in writers {
                let own: Vec<String> = (0..turns)
                    .flat_map(|t| turn(k, t))
                    .map(|m| m["content"].as_str().unwrap().to_string())
                    .collect();
                let found: Vec<String> = stored
                    .iter()
                    .filter_map(|(_, text)| own.iter().find(|o| text.contains(o.as_str())).cloned())
                    .collect();
                assert_eq!(found, own, "gateway {k}'s turns once each, in order");
            }
        }
        reader.close();
        crate::test_support::drop_test_schema(&location);
    }

    /// A batch whose rows go out together on PostgreSQL (`sql::Rows`) is still read as SQLite
    /// reads it mid-batch: a replay that lines its next message up with the row after a
    /// stored one finds there the row this batch just wrote (a message without an entry id),
    /// and takes it for the same message on both engines.
    #[test]
    fn a_replay_lined_up_with_a_row_of_its_own_batch_is_stored_alike() {
        let Some((location, url)) = crate::test_support::pg_test_url("replay_own_row") else {
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lcm.db").to_string_lossy().into_owned();
        let target = Target::Session("s".into());
        let first = [json!({"role": "user", "content": "first", "entryId": "e1"})];
        let replay = [
            json!({"role": "user", "content": "dup"}),
            json!({"role": "user", "content": "first", "entryId": "e1"}),
            json!({"role": "user", "content": "dup", "entryId": "b"}),
        ];
        let mut seen = Vec::new();
        for db in [path.as_str(), url.as_str()] {
            let engine = open(db);
            engine.ingest(&target, &first).unwrap();
            let o = engine.ingest(&target, &replay).unwrap();
            let rows: Vec<String> = engine
                .assemble(
                    o.conversation_id,
                    &AssembleOptions {
                        token_budget: 10_000,
                        fresh_tail_count: None,
                        presentation: None,
                        recall_query: None,
                        auto_recall: None,
                    },
                )
                .unwrap()
                .messages
                .iter()
                .map(|m| serde_json::to_string(m).unwrap())
                .collect();
            seen.push((o.inserted, o.skipped, rows));
            engine.close();
        }
        assert_eq!(
            seen[0].0, 1,
            "SQLite stores the batch's first message only: {:?}",
            seen[0]
        );
        assert_eq!(seen[1], seen[0], "PostgreSQL as SQLite");
        let entries: Vec<Option<String>> = location
            .connect()
            .unwrap()
            .query("SELECT transcript_entry_id FROM messages ORDER BY seq", &[])
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        assert_eq!(entries, [Some("e1".to_string()), Some("b".to_string())]);
        crate::test_support::drop_test_schema(&location);
    }
}
