//! The prompt-cache report's rows (`lcm_native_prompt_cache`): per conversation, how many
//! assemblies it had, what they sent, how much of each began with the whole assembly before it
//! (what a provider's prompt cache serves at a tenth of the price), how often that broke, how
//! many compactions it had, and the outline of its last assembly, which the next one is
//! compared with (also in another process).

use rusqlite::params;

use crate::db::schema::PROMPT_CACHE_TABLE;
use crate::error::Result;
use crate::sql::Db;

/// What some assemblies and compactions of one conversation add to its report.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct CacheDelta {
    pub assemblies: i64,
    pub tokens_sent: i64,
    pub tokens_kept: i64,
    pub breaks: i64,
    pub compactions: i64,
}

impl CacheDelta {
    pub(crate) fn is_empty(&self) -> bool {
        *self == CacheDelta::default()
    }
}

/// A conversation's prompt-cache report, as `stats` and `doctor` show it.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct PromptCacheReport {
    /// Assemblies counted (each is one request's history).
    pub assemblies: i64,
    /// Σ of their estimated tokens.
    pub tokens_sent: i64,
    /// Σ of the tokens of each that were the whole previous assembly, unchanged, at its start.
    pub tokens_kept: i64,
    /// Assemblies that did not begin with the whole previous one (a compaction, an eviction).
    pub breaks: i64,
    /// Sweeps that wrote summaries.
    pub compactions: i64,
    /// `tokensKept / tokensSent` (0 before any assembly).
    pub kept_share: f64,
    pub updated_at: String,
}

/// The outline of the conversation's last recorded assembly, if any.
pub(crate) fn last_outline<'a>(db: impl Into<Db<'a>>, conversation_id: i64) -> Result<Option<String>> {
    let db = db.into();
    if !db.has_table(PROMPT_CACHE_TABLE)? {
        return Ok(None);
    }
    Ok(db
        .query_row(
            "SELECT last_outline FROM lcm_native_prompt_cache WHERE conversation_id = ?1",
            params![conversation_id],
            |r| r.get::<Option<String>>(0),
        )?
        .flatten())
}

/// Adds `delta` to the conversation's report, and records `outline` (when given) as its last
/// assembly's. A conversation that is gone by now gets nothing.
pub(crate) fn add<'a>(
    db: impl Into<Db<'a>>,
    conversation_id: i64,
    delta: &CacheDelta,
    outline: Option<&str>,
    now: &str,
) -> Result<()> {
    db.into().execute(
        "INSERT INTO lcm_native_prompt_cache
           (conversation_id, assemblies, tokens_sent, tokens_kept, breaks, compactions, last_outline, updated_at)
         SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8 WHERE EXISTS (SELECT 1 FROM conversations WHERE conversation_id = ?1)
         ON CONFLICT (conversation_id) DO UPDATE SET
           assemblies = lcm_native_prompt_cache.assemblies + excluded.assemblies,
           tokens_sent = lcm_native_prompt_cache.tokens_sent + excluded.tokens_sent,
           tokens_kept = lcm_native_prompt_cache.tokens_kept + excluded.tokens_kept,
           breaks = lcm_native_prompt_cache.breaks + excluded.breaks,
           compactions = lcm_native_prompt_cache.compactions + excluded.compactions,
           last_outline = COALESCE(excluded.last_outline, lcm_native_prompt_cache.last_outline),
           updated_at = excluded.updated_at",
        params![
            conversation_id,
            delta.assemblies,
            delta.tokens_sent,
            delta.tokens_kept,
            delta.breaks,
            delta.compactions,
            outline,
            now
        ],
    )?;
    Ok(())
}

/// `add` for each entry (conversation, delta, outline), under a savepoint of the caller's
/// transaction: the report is a diagnostic, so a failure to write it is let go and leaves the
/// rest of the transaction (a turn's messages) to commit.
pub(crate) fn add_in_passing(db: Db, entries: &[(i64, CacheDelta, Option<String>)], now: &str) {
    if entries.is_empty() || db.execute("SAVEPOINT lcm_report", params![]).is_err() {
        return;
    }
    // In conversation order, as every writer does: two writers of other conversations
    // sharing PostgreSQL's schema never wait for each other's report rows in a circle.
    let mut sorted: Vec<_> = entries.iter().collect();
    sorted.sort_by_key(|e| e.0);
    let written = sorted
        .into_iter()
        .try_for_each(|(cid, delta, outline)| add(db, *cid, delta, outline.as_deref(), now));
    let end = match written {
        Ok(()) => "RELEASE SAVEPOINT lcm_report",
        Err(_) => "ROLLBACK TO SAVEPOINT lcm_report",
    };
    let _ = db.execute(end, params![]);
}

/// Every conversation's report, by conversation id (empty on a file without the table).
pub(crate) fn reports<'a>(db: impl Into<Db<'a>>) -> Result<std::collections::HashMap<i64, PromptCacheReport>> {
    let db = db.into();
    if !db.has_table(PROMPT_CACHE_TABLE)? {
        return Ok(Default::default());
    }
    let rows = db.query_map(
        "SELECT conversation_id, assemblies, tokens_sent, tokens_kept, breaks, compactions, updated_at
         FROM lcm_native_prompt_cache",
        params![],
        |r| {
            let (sent, kept): (i64, i64) = (r.get(2)?, r.get(3)?);
            Ok((
                r.get::<i64>(0)?,
                PromptCacheReport {
                    assemblies: r.get(1)?,
                    tokens_sent: sent,
                    tokens_kept: kept,
                    breaks: r.get(4)?,
                    compactions: r.get(5)?,
                    kept_share: if sent > 0 { kept as f64 / sent as f64 } else { 0.0 },
                    updated_at: r.get(6)?,
                },
            ))
        },
    )?;
    Ok(rows.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{on_both_engines, seed_conversation};

    #[test]
    fn deltas_add_up_and_the_last_outline_is_kept_on_both_engines() {
        on_both_engines("prompt_cache", |db, _flags, engine| {
            seed_conversation(db, 1);
            assert_eq!(last_outline(db, 1).unwrap(), None, "{engine}");
            let one = CacheDelta {
                assemblies: 2,
                tokens_sent: 100,
                tokens_kept: 60,
                breaks: 1,
                compactions: 0,
            };
            add(db, 1, &one, Some("m1:10 m2:20"), "2026-11-27 08:00:00").unwrap();
            add(
                db,
                1,
                &CacheDelta {
                    compactions: 1,
                    ..Default::default()
                },
                None,
                "2026-11-27 08:01:00",
            )
            .unwrap();
            // A conversation that does not exist gets no row.
            add(db, 99, &one, Some("x:1"), "2026-11-27 08:01:00").unwrap();
            assert_eq!(last_outline(db, 1).unwrap().as_deref(), Some("m1:10 m2:20"), "{engine}");
            let reports = reports(db).unwrap();
            assert_eq!(reports.len(), 1, "{engine}");
            let r = &reports[&1];
            assert_eq!(
                (r.assemblies, r.tokens_sent, r.tokens_kept, r.breaks, r.compactions),
                (2, 100, 60, 1, 1),
                "{engine}"
            );
            assert!((r.kept_share - 0.6).abs() < 1e-9);
            assert_eq!(r.updated_at, "2026-11-27 08:01:00");
        });
    }

    /// The report rides in another write's transaction: one it cannot write (its table gone)
    /// is let go, and the transaction goes on and commits what else it holds (on PostgreSQL a
    /// failed statement would otherwise abort the whole transaction).
    #[test]
    fn a_report_that_cannot_be_written_leaves_its_transaction_whole_on_both_engines() {
        on_both_engines("prompt_cache_passing", |db, _flags, engine| {
            seed_conversation(db, 1);
            let delta = CacheDelta {
                assemblies: 1,
                tokens_sent: 10,
                ..Default::default()
            };
            let entries = [(1, delta, Some("m1:10".to_string()))];
            db.execute("ALTER TABLE lcm_native_prompt_cache RENAME TO hidden_report", params![])
                .unwrap();
            db.execute("BEGIN", params![]).unwrap();
            add_in_passing(db, &entries, "2026-11-28 04:00:00");
            db.execute(
                "UPDATE conversations SET title = 'kept' WHERE conversation_id = 1",
                params![],
            )
            .unwrap();
            db.execute("COMMIT", params![]).unwrap();
            let title: Option<String> = db
                .query_row(
                    "SELECT title FROM conversations WHERE conversation_id = 1",
                    params![],
                    |r| r.get(0),
                )
                .unwrap()
                .flatten();
            assert_eq!(title.as_deref(), Some("kept"), "{engine}");
            db.execute("ALTER TABLE hidden_report RENAME TO lcm_native_prompt_cache", params![])
                .unwrap();
            db.execute("BEGIN", params![]).unwrap();
            add_in_passing(db, &entries, "2026-11-28 04:00:00");
            db.execute("COMMIT", params![]).unwrap();
            assert_eq!(reports(db).unwrap()[&1].tokens_sent, 10, "{engine}");
        });
    }
}
