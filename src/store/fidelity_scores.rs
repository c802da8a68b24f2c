//! The fidelity table (`lcm_native_summary_fidelity`): one row per scored summary, and the
//! score it holds (`crate::fidelity` computes it). Readers treat a missing table (a read-only
//! open of a file an earlier lcm-native migrated) as empty.

use std::collections::HashMap;

use rusqlite::params;
use serde::Serialize;

use crate::error::Result;
use crate::sql::{Db, Row};

pub(crate) const TABLE: &str = crate::db::schema::FIDELITY_TABLE;

/// Bumped when the extractor's rules change, so stored scores can be told apart.
pub(crate) const EXTRACTOR_VERSION: i64 = 1;

/// What of its source's identifiers a summary keeps (the counts of `FidelityScore`).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[cfg_attr(test, ts(rename = "FidelityCounts"))]
#[serde(rename_all = "camelCase")]
pub struct Fidelity {
    /// (kept + salient kept) / (identifiers + salient); null when the source names nothing.
    pub score: Option<f64>,
    /// Salient kept / salient; null when nothing is salient.
    pub salient_score: Option<f64>,
    pub identifiers: u32,
    pub kept: u32,
    /// Identifiers the user named or a tool call used (in a condensed node: named by two or more
    /// inputs).
    pub salient: u32,
    pub salient_kept: u32,
    /// The salient identifiers it left out, first seen first (at most 40).
    pub missing_salient: Vec<String>,
}

impl Fidelity {
    /// Under `min`? A summary whose source names nothing is never under.
    pub fn is_under(&self, min: Option<f64>) -> bool {
        matches!((self.score, min), (Some(s), Some(m)) if s < m)
    }
}

/// A summary's fidelity: what of its source's identifiers it keeps, and whether it is marked for
/// repair.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[cfg_attr(test, ts(rename = "FidelityScore"))]
#[serde(rename_all = "camelCase")]
pub struct StoredFidelity {
    #[serde(flatten)]
    pub fidelity: Fidelity,
    /// Stayed under `minFidelity` after the retry: `rewrite` with `lowFidelity: true` re-summarises
    /// it.
    pub needs_repair: bool,
    pub extractor_version: i64,
    /// When it was stored (ISO-8601); empty when computed on demand.
    pub computed_at: String,
    /// False when computed for this call and not written (a summary not scored yet, or a read-only
    /// engine).
    pub stored: bool,
}

/// Writes (or replaces) the score of `summary_id`.
pub(crate) fn put<'a>(db: impl Into<Db<'a>>, summary_id: &str, f: &Fidelity, needs_repair: bool) -> Result<()> {
    db.into().execute(
        "INSERT INTO lcm_native_summary_fidelity
           (summary_id, score, salient_score, identifiers, kept, salient, salient_kept, missing_salient,
            needs_repair, extractor_version, computed_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)
         ON CONFLICT (summary_id) DO UPDATE SET score = excluded.score, salient_score = excluded.salient_score,
           identifiers = excluded.identifiers, kept = excluded.kept, salient = excluded.salient,
           salient_kept = excluded.salient_kept, missing_salient = excluded.missing_salient,
           needs_repair = excluded.needs_repair, extractor_version = excluded.extractor_version,
           computed_at = excluded.computed_at",
        params![
            summary_id,
            f.score,
            f.salient_score,
            f.identifiers,
            f.kept,
            f.salient,
            f.salient_kept,
            serde_json::to_string(&f.missing_salient)?,
            needs_repair,
            EXTRACTOR_VERSION,
            crate::time::to_iso_ms(&chrono::Utc::now()),
        ],
    )?;
    Ok(())
}

fn row(r: &Row) -> Result<StoredFidelity> {
    let missing: String = r.get(7)?;
    Ok(StoredFidelity {
        fidelity: Fidelity {
            score: r.get(1)?,
            salient_score: r.get(2)?,
            identifiers: r.get(3)?,
            kept: r.get(4)?,
            salient: r.get(5)?,
            salient_kept: r.get(6)?,
            missing_salient: serde_json::from_str(&missing).unwrap_or_default(),
        },
        needs_repair: r.get(8)?,
        extractor_version: r.get(9)?,
        computed_at: r.get(10)?,
        stored: true,
    })
}

const COLUMNS: &str = "f.summary_id, f.score, f.salient_score, f.identifiers, f.kept, f.salient, f.salient_kept, \
                       f.missing_salient, f.needs_repair, f.extractor_version, f.computed_at";

pub(crate) fn exists<'a>(db: impl Into<Db<'a>>) -> Result<bool> {
    db.into().has_table(TABLE)
}

pub(crate) fn get<'a>(db: impl Into<Db<'a>>, summary_id: &str) -> Result<Option<StoredFidelity>> {
    let db = db.into();
    if !exists(db)? {
        return Ok(None);
    }
    let sql = format!("SELECT {COLUMNS} FROM lcm_native_summary_fidelity f WHERE f.summary_id = ?1");
    db.query_row(&sql, params![summary_id], row)
}

/// The scores of a conversation's summaries, by summary id.
pub(crate) fn for_conversation<'a>(
    db: impl Into<Db<'a>>,
    conversation_id: i64,
) -> Result<HashMap<String, StoredFidelity>> {
    let db = db.into();
    if !exists(db)? {
        return Ok(HashMap::new());
    }
    let sql = format!(
        "SELECT {COLUMNS} FROM lcm_native_summary_fidelity f
         JOIN summaries s ON s.summary_id = f.summary_id WHERE s.conversation_id = ?1"
    );
    Ok(db
        .query_map(&sql, params![conversation_id], |r| Ok((r.get(0)?, row(r)?)))?
        .into_iter()
        .collect())
}

/// The stored scores of some summaries (a page of them), by summary id.
pub(crate) fn for_summaries<'a>(
    db: impl Into<Db<'a>>,
    summary_ids: &[&str],
) -> Result<HashMap<String, StoredFidelity>> {
    let db = db.into();
    if summary_ids.is_empty() || !exists(db)? {
        return Ok(HashMap::new());
    }
    let sql = format!(
        "SELECT {COLUMNS} FROM lcm_native_summary_fidelity f WHERE f.summary_id {}",
        db.in_texts("?1")
    );
    Ok(db
        .query_map(&sql, params![serde_json::to_string(summary_ids)?], |r| {
            Ok((r.get(0)?, row(r)?))
        })?
        .into_iter()
        .collect())
}

/// Summaries of a conversation without a score from this extractor, oldest first (depth
/// order, so a condensed node is scored after its inputs).
pub(crate) fn unscored<'a>(db: impl Into<Db<'a>>, conversation_id: i64, all: bool) -> Result<Vec<String>> {
    let db = db.into();
    let table = exists(db)?;
    let sql = if all || !table {
        "SELECT summary_id FROM summaries WHERE conversation_id = ?1 ORDER BY depth, created_at, summary_id".to_string()
    } else {
        format!(
            "SELECT s.summary_id FROM summaries s LEFT JOIN lcm_native_summary_fidelity f ON f.summary_id = s.summary_id
             WHERE s.conversation_id = ?1 AND (f.summary_id IS NULL OR f.extractor_version <> {EXTRACTOR_VERSION})
             ORDER BY s.depth, s.created_at, s.summary_id"
        )
    };
    db.query_map(&sql, params![conversation_id], |r| r.get(0))
}

/// Whether `summary_id` is marked for repair.
pub(crate) fn needs_repair<'a>(db: impl Into<Db<'a>>, summary_id: &str) -> Result<bool> {
    Ok(get(db, summary_id)?.is_some_and(|f| f.needs_repair))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn put_get_and_cascade_with_the_summary_on_both_engines() {
        crate::test_support::on_both_engines("fidelity", |db, _, engine| {
            db.execute("INSERT INTO conversations (session_id) VALUES ('s')", params![])
                .unwrap();
            db.execute(
                "INSERT INTO summaries (summary_id, conversation_id, kind, content, token_count) VALUES ('sum_1', 1, 'leaf', 'x', 1)",
                params![],
            )
            .unwrap();
            assert_eq!(unscored(db, 1, false).unwrap(), ["sum_1"], "{engine}");
            let f = Fidelity {
                score: Some(0.5),
                salient_score: None,
                identifiers: 4,
                kept: 2,
                salient: 0,
                salient_kept: 0,
                missing_salient: vec!["a.ts".into()],
            };
            put(db, "sum_1", &f, true).unwrap();
            let got = get(db, "sum_1").unwrap().unwrap();
            assert_eq!(got.fidelity, f, "{engine}");
            assert!(got.needs_repair && needs_repair(db, "sum_1").unwrap(), "{engine}");
            // A second score replaces the first.
            let better = Fidelity {
                kept: 4,
                score: Some(1.0),
                ..f.clone()
            };
            put(db, "sum_1", &better, false).unwrap();
            let got = get(db, "sum_1").unwrap().unwrap();
            assert_eq!((got.fidelity, got.needs_repair), (better, false), "{engine}");
            assert!(unscored(db, 1, false).unwrap().is_empty(), "{engine}");
            assert_eq!(unscored(db, 1, true).unwrap(), ["sum_1"], "{engine}");
            assert_eq!(for_conversation(db, 1).unwrap().len(), 1, "{engine}");
            db.execute("DELETE FROM summaries WHERE summary_id = 'sum_1'", params![])
                .unwrap();
            assert_eq!(
                get(db, "sum_1").unwrap(),
                None,
                "{engine}: the row goes with its summary"
            );
        });
    }
}
