//! The redaction log (`lcm_native_redactions`): what was redacted, by ids and counts, never
//! the text. Ingest writes its entry here, in the ingest's transaction; `crate::redact` does the
//! operator's redactions and their cascade.

use rusqlite::{params, Connection};

use crate::error::Result;

/// What ingest replaced in one message before storing it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IngestRedaction {
    /// Content blocks (the message's parts) that held a match; 1 for a string content.
    pub parts: usize,
    pub matches: usize,
}

/// The reason the log records for what `redactPatterns` replaced at ingest.
pub const INGEST_REASON: &str = "redactPatterns at ingest";

/// Logs the messages an ingest stored redacted (in the ingest's transaction): complete at
/// once, since no summary covers them yet.
pub fn log_ingest(tx: &Connection, conversation_id: i64, redacted: &[(i64, IngestRedaction)]) -> Result<()> {
    let ids: Vec<i64> = redacted.iter().map(|(id, _)| *id).collect();
    let (parts, matches) = redacted
        .iter()
        .fold((0, 0), |(p, m), (_, r)| (p + r.parts as i64, m + r.matches as i64));
    tx.prepare_cached(
        "INSERT INTO lcm_native_redactions
           (conversation_ids, message_ids, messages, parts, matches, summaries, versions_purged, reason,
            completed_at)
         VALUES (?1, ?2, ?3, ?4, ?5, 0, 0, ?6, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))",
    )?
    .execute(params![
        serde_json::to_string(&[conversation_id])?,
        serde_json::to_string(&ids)?,
        ids.len() as i64,
        parts,
        matches,
        INGEST_REASON,
    ])?;
    Ok(())
}
