//! The redaction log (`lcm_native_redactions`): what was redacted, by ids and counts, never
//! the text; the summaries awaiting regeneration (`lcm_native_redaction_pending`) and the
//! scrubs not yet run (`lcm_native_scrub_pending`). Ingest and `crate::redact` (the operator's
//! redactions and their cascade) write these rows through this module only.

use rusqlite::params;

use crate::error::Result;
use crate::sql::Db;

/// What ingest puts where a secret was. The store knows it too: a replayed message whose stored
/// text holds it is matched with each marker standing for what it replaced.
pub(crate) const INGEST_REPLACEMENT: &str = "[REDACTED]";

/// What ingest replaced in one message before storing it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IngestRedaction {
    /// Content blocks (the message's parts) that held a match; 1 for a string content.
    pub parts: usize,
    pub matches: usize,
}

/// The reason the log records for what `redactPatterns` replaced at ingest.
pub(crate) const INGEST_REASON: &str = "redactPatterns at ingest";

/// Logs the messages an ingest stored redacted (in the ingest's transaction): complete at
/// once, since no summary covers them yet.
pub(crate) fn log_ingest(tx: Db, conversation_id: i64, redacted: &[(i64, IngestRedaction)]) -> Result<()> {
    let ids: Vec<i64> = redacted.iter().map(|(id, _)| *id).collect();
    let (parts, matches) = redacted
        .iter()
        .fold((0, 0), |(p, m), (_, r)| (p + r.parts as i64, m + r.matches as i64));
    tx.execute(
        "INSERT INTO lcm_native_redactions
           (conversation_ids, message_ids, messages, parts, matches, summaries, versions_purged, reason,
            completed_at)
         VALUES (?1, ?2, ?3, ?4, ?5, 0, 0, ?6, ?7)",
        params![
            serde_json::to_string(&[conversation_id])?,
            serde_json::to_string(&ids)?,
            ids.len() as i64,
            parts,
            matches,
            INGEST_REASON,
            crate::time::to_iso_ms(&chrono::Utc::now()),
        ],
    )?;
    Ok(())
}

/// An operator's redaction as the log records it (ids and counts, never the text).
pub(crate) struct OperatorRedaction<'a> {
    /// The conversations concerned, as a JSON array.
    pub scope: &'a str,
    /// The redacted messages' ids, as a JSON array.
    pub message_ids: &'a str,
    pub messages: usize,
    pub parts: usize,
    pub matches: usize,
    pub mark_only: bool,
    pub reason: Option<&'a str>,
}

/// Logs an operator's redaction (in its transaction) and records that the file still holds
/// the old text until its scrub has run. Returns the redaction's id.
pub(crate) fn log_operator(tx: Db, r: &OperatorRedaction) -> Result<i64> {
    let redaction_id = tx.insert_returning(
        "INSERT INTO lcm_native_redactions
           (conversation_ids, message_ids, messages, parts, matches, summaries, versions_purged, mark_only, reason)
         VALUES (?1, ?2, ?3, ?4, ?5, 0, 0, ?6, ?7)",
        params![
            r.scope,
            r.message_ids,
            r.messages as i64,
            r.parts as i64,
            r.matches as i64,
            r.mark_only,
            r.reason
        ],
        "redaction_id",
    )?;
    tx.execute(
        "INSERT OR IGNORE INTO lcm_native_scrub_pending (redaction_id) VALUES (?1)",
        params![redaction_id],
    )?;
    Ok(redaction_id)
}

/// Lists a summary as awaiting regeneration after `redaction_id`, its next text to be
/// version `next_version` (a summary already waiting keeps its entry).
pub(crate) fn await_regeneration(tx: Db, summary_id: &str, redaction_id: i64, next_version: i64) -> Result<()> {
    tx.execute(
        "INSERT OR IGNORE INTO lcm_native_redaction_pending (summary_id, redaction_id, next_version)
         VALUES (?1, ?2, ?3)",
        params![summary_id, redaction_id, next_version],
    )?;
    Ok(())
}

/// Records what a redaction's cascade touched.
pub(crate) fn record_cascade(tx: Db, redaction_id: i64, summaries: usize, versions_purged: usize) -> Result<()> {
    tx.execute(
        "UPDATE lcm_native_redactions SET summaries = ?2, versions_purged = ?3 WHERE redaction_id = ?1",
        params![redaction_id, summaries as i64, versions_purged as i64],
    )?;
    Ok(())
}

/// Every pending scrub has run: the file no longer holds replaced text.
pub(crate) fn scrubbed<'a>(db: impl Into<Db<'a>>) -> Result<()> {
    db.into().execute("DELETE FROM lcm_native_scrub_pending", params![])?;
    Ok(())
}

/// Conversations with summaries awaiting regeneration (within `only` when given): what
/// `redact` with nothing new to redact finishes.
pub(crate) fn conversations_awaiting<'a>(db: impl Into<Db<'a>>, only: Option<i64>) -> Result<Vec<i64>> {
    db.into().query_map(
        "SELECT DISTINCT s.conversation_id FROM lcm_native_redaction_pending p
         JOIN summaries s ON s.summary_id = p.summary_id
         WHERE CAST(?1 AS BIGINT) IS NULL OR s.conversation_id = ?1 ORDER BY 1",
        params![only],
        |r| r.get(0),
    )
}

/// Summaries of `conversations` still awaiting regeneration.
pub(crate) fn pending<'a>(db: impl Into<Db<'a>>, conversations: &[i64]) -> Result<usize> {
    let db = db.into();
    let n: i64 = db.query_one(
        &format!(
            "SELECT count(*) FROM lcm_native_redaction_pending p JOIN summaries s ON s.summary_id = p.summary_id
             WHERE s.conversation_id {}",
            db.in_ids("?1")
        ),
        params![serde_json::to_string(conversations)?],
        |r| r.get(0),
    )?;
    Ok(n as usize)
}

/// Marks every redaction with no summary left to regenerate as complete.
pub(crate) fn complete<'a>(db: impl Into<Db<'a>>) -> Result<()> {
    db.into().execute(
        "UPDATE lcm_native_redactions SET completed_at = ?1
         WHERE completed_at IS NULL
           AND NOT EXISTS (SELECT 1 FROM lcm_native_redaction_pending p WHERE p.redaction_id = lcm_native_redactions.redaction_id)",
        params![crate::time::to_iso_ms(&chrono::Utc::now())],
    )?;
    Ok(())
}

/// Redactions whose scrub has not completed (0 when the file has no such table: a read-only
/// open of a file from before it).
pub(crate) fn scrubs_pending<'a>(db: impl Into<Db<'a>>) -> Result<i64> {
    let db = db.into();
    if !db.has_table("lcm_native_scrub_pending")? {
        return Ok(0);
    }
    db.query_one("SELECT count(*) FROM lcm_native_scrub_pending", params![], |r| r.get(0))
}
