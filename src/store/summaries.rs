//! Summary rows: reading them back, and the columns every writer must fill.

use rusqlite::{params, Connection, OptionalExtension, Row};
use serde::Serialize;

use super::conversations;
use crate::error::{LcmError, Result};

/// A summary row as the API shows it.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SummaryRecord {
    pub summary_id: String,
    pub conversation_id: i64,
    pub kind: String,
    pub depth: i64,
    pub content: String,
    pub token_count: i64,
    pub earliest_at: Option<String>,
    pub latest_at: Option<String>,
    pub descendant_count: i64,
    pub descendant_token_count: i64,
    pub source_message_token_count: i64,
    pub model: String,
    pub created_at: String,
    /// A deterministic fallback rather than a model's summary, to re-summarise (`rewrite`
    /// with `fallbacks: true`); see [`FALLBACK_SQL`].
    pub fallback: bool,
    /// Its stored fidelity score (`None`: not scored yet, or its source names nothing).
    pub fidelity: Option<f64>,
    /// Stayed under `minFidelity`: re-summarise with `rewrite` `lowFidelity: true`.
    pub low_fidelity: bool,
}

/// True for a summary that is a deterministic fallback: lcm-native marks its own with the
/// model `lcm-native/fallback`; lossless-claw's end with its note on a line of its own,
/// `[Truncated from N tokens]` or (seed, empty answer) `[LCM fallback summary; truncated for
/// context management]`, or are just `[Truncated from 0 tokens]`. A model's text that merely
/// mentions a note is not one. Reads the `model` and `content` columns.
pub const FALLBACK_SQL: &str = "(model = 'lcm-native/fallback' \
     OR rtrim(content, ' ' || char(9, 10, 13)) GLOB '[[]Truncated from [0-9]* tokens]' \
     OR rtrim(content, ' ' || char(9, 10, 13)) GLOB '*' || char(10) || '[[]Truncated from [0-9]* tokens]' \
     OR rtrim(content, ' ' || char(9, 10, 13)) GLOB '*' || char(10) || '[[]LCM fallback summary; truncated for context management]')";

const SUMMARY_COLUMNS: &str = "summary_id, conversation_id, kind, depth, content, token_count, earliest_at, latest_at,
     descendant_count, descendant_token_count, source_message_token_count, model, created_at";

pub fn from_row(r: &Row<'_>) -> rusqlite::Result<SummaryRecord> {
    Ok(SummaryRecord {
        summary_id: r.get(0)?,
        conversation_id: r.get(1)?,
        kind: r.get(2)?,
        depth: r.get(3)?,
        content: r.get(4)?,
        token_count: r.get(5)?,
        earliest_at: r.get(6)?,
        latest_at: r.get(7)?,
        descendant_count: r.get(8)?,
        descendant_token_count: r.get(9)?,
        source_message_token_count: r.get(10)?,
        model: r.get(11)?,
        created_at: r.get(12)?,
        fallback: r.get(13)?,
        fidelity: None,
        low_fidelity: false,
    })
}

/// Every summary of a conversation in creation order, optionally only one depth.
pub fn list(conn: &Connection, conversation_id: i64, depth: Option<i64>) -> Result<Vec<SummaryRecord>> {
    conversations::get(conn, conversation_id)?;
    let sql = format!(
        "SELECT {SUMMARY_COLUMNS}, {FALLBACK_SQL} FROM summaries
         WHERE conversation_id = ?1 AND (?2 IS NULL OR depth = ?2) ORDER BY rowid"
    );
    let mut rows = conn
        .prepare_cached(&sql)?
        .query_map(params![conversation_id, depth], from_row)?
        .collect::<std::result::Result<Vec<_>, _>>()?;
    let scores = crate::fidelity::store::for_conversation(conn, conversation_id)?;
    for r in &mut rows {
        if let Some(f) = scores.get(&r.summary_id) {
            r.fidelity = f.fidelity.score;
            r.low_fidelity = f.needs_repair;
        }
    }
    Ok(rows)
}

pub fn get(conn: &Connection, summary_id: &str) -> Result<SummaryRecord> {
    let sql = format!("SELECT {SUMMARY_COLUMNS}, {FALLBACK_SQL} FROM summaries WHERE summary_id = ?1");
    let mut record = conn
        .prepare_cached(&sql)?
        .query_row([summary_id], from_row)
        .optional()?
        .ok_or_else(|| LcmError::not_found("summary", summary_id))?;
    if let Some(f) = crate::fidelity::store::get(conn, summary_id)? {
        record.fidelity = f.fidelity.score;
        record.low_fidelity = f.needs_repair;
    }
    Ok(record)
}
