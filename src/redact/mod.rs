//! Redaction that reaches every copy of a text: messages, their parts and full-text rows
//! (one transaction), then every summary whose subtree covers a redacted message (replaced with
//! a notice in that same transaction, its old versions purged, then regenerated bottom-up one
//! transaction each), then the file itself (full-text indexes merged, `VACUUM`, the WAL
//! checkpointed and truncated) so that the text cannot be read back from its bytes. A killed
//! redaction leaves each message and summary old or new; the summaries still awaiting
//! regeneration are listed in `lcm_native_redaction_pending`, and the next `redact` finishes
//! them. The log (`lcm_native_redactions`) records ids and counts, never the text.

pub(crate) mod secrets;

pub(crate) mod text;

#[cfg(test)]
mod tests;

use std::collections::BTreeSet;

use rusqlite::{params, Connection};

use crate::api::{RedactRequest, RedactionResult};
use crate::db::SchemaFlags;
use crate::error::{LcmError, Result};
use crate::fidelity::Fidelity;
use crate::sql::Db;
use crate::store::messages::{self, StoredText};
use crate::store::redactions;
use crate::store::summaries::{replace_content, Replacement};
use text::Redactor;

/// The text a summary holds between its redaction and its regeneration.
pub(crate) const NOTICE: &str = "[Redacted] This summary covered messages that were redacted; it awaits regeneration.";
/// The model recorded for a summary holding the notice (a fallback: `rewrite` with
/// `fallbacks: true` repairs it too).
pub(crate) use crate::store::versions::NOTICE_MODEL;

/// What to redact. Read from JavaScript as a `RedactRequest`.
#[derive(Clone, Debug, serde::Deserialize)]
#[serde(try_from = "RedactRequest")]
pub struct RedactOptions {
    pub conversation_id: Option<i64>,
    pub message_ids: Option<Vec<i64>>,
    pub redactor: Redactor,
    /// Recorded in the log.
    pub reason: Option<String>,
    /// Replace the covering summaries with the notice and leave them marked, without
    /// regenerating them.
    pub mark_only: bool,
    /// Nothing new to redact (no `pattern`, no `messageIds`): finish what earlier redactions
    /// left, the summaries awaiting regeneration and the scrub of the file.
    pub finish: bool,
}

/// The conversations a redaction touches: the one given, those of the messages given (all of
/// them must exist), or all.
pub(crate) fn conversations_in_scope<'a>(db: impl Into<Db<'a>>, o: &RedactOptions) -> Result<Vec<i64>> {
    let conn = db.into();
    let mut ids = BTreeSet::new();
    if let Some(id) = o.conversation_id {
        crate::store::conversations::get(conn, id)?;
        ids.insert(id);
    }
    if let Some(messages) = &o.message_ids {
        let found = crate::store::messages::conversations_of(conn, messages)?;
        if let Some(missing) = messages.iter().find(|m| !found.iter().any(|(id, _)| id == *m)) {
            return Err(LcmError::not_found("message", missing));
        }
        if let Some((m, c)) = found.iter().find(|(_, c)| o.conversation_id.is_some_and(|id| id != *c)) {
            return Err(LcmError::invalid_input(format!(
                "message {m} belongs to conversation {c}, not the one given"
            )));
        }
        ids.extend(found.iter().map(|(_, c)| *c));
    }
    if ids.is_empty() {
        ids.extend(crate::store::conversations::ids(conn)?);
    }
    Ok(ids.into_iter().collect())
}

/// Step one, in the caller's write transaction (`Backend::write`): the messages, their parts
/// and full-text rows, the covering summaries (notice, purged versions, pending rows) and the
/// log entry. Returns the result so far; `redaction_id` is `None` when nothing matched.
pub(crate) fn redact_messages(
    tx: Db,
    flags: SchemaFlags,
    o: &RedactOptions,
    conversations: &[i64],
) -> Result<RedactionResult> {
    let scope = serde_json::to_string(conversations)?;
    let only = o.message_ids.as_ref().map(serde_json::to_string).transpose()?;
    let mut result = RedactionResult {
        conversation_ids: conversations.to_vec(),
        ..RedactionResult::default()
    };
    let mut matches = 0;
    let edits = messages::edit_texts(tx, &scope, only.as_deref(), |text| {
        let (new, n) = match text {
            StoredText::Content(content) => o.redactor.text(content),
            StoredText::PartColumn(value) => o.redactor.column(value),
        }?;
        matches += n;
        Some(new)
    })?;
    result.matches = matches;
    result.messages = edits.messages.len();
    result.parts = edits.parts;
    // Summaries that hold the text though no redacted message is under them: it reached
    // them as previous context (before that was recorded), or through lossless-claw.
    let holding = summaries_holding(tx, &scope, &o.redactor)?;
    if edits.messages.is_empty() && holding.is_empty() {
        return Ok(result);
    }
    // The `<recalled>` blocks these conversations were sent with quote their messages: gone
    // with the text (the next turns recall from the redacted text).
    crate::store::recalls::forget(tx, conversations)?;
    let ids_json = serde_json::to_string(&edits.messages)?;
    let redaction_id = redactions::log_operator(
        tx,
        &redactions::OperatorRedaction {
            scope: &scope,
            message_ids: &ids_json,
            messages: result.messages,
            parts: result.parts,
            matches: result.matches,
            mark_only: o.mark_only,
            reason: o.reason.as_deref(),
        },
    )?;
    let whole_messages = o.redactor.pattern.is_none();
    let affected =
        crate::store::summaries::reached_from(tx, &ids_json, &serde_json::to_string(&holding)?, whole_messages)?;
    if !holding.is_empty() {
        let by_lineage = crate::store::summaries::above_messages(tx, &ids_json)?;
        result.summaries_found = affected.iter().filter(|id| !by_lineage.contains(id)).count();
    }
    let blank = Fidelity {
        score: None,
        salient_score: None,
        identifiers: 0,
        kept: 0,
        salient: 0,
        salient_kept: 0,
        missing_salient: Vec::new(),
    };
    for summary_id in &affected {
        let (max, purged) = crate::store::versions::purge(tx, summary_id)?;
        result.versions_purged += purged;
        // A summary already waiting keeps its number; one without stored versions had its
        // text as version 1.
        redactions::await_regeneration(tx, summary_id, redaction_id, max.unwrap_or(1) + 1)?;
        let notice = Replacement {
            content: NOTICE,
            token_count: crate::tokens::estimate(NOTICE),
            model: NOTICE_MODEL,
            fidelity: (&blank, false),
            change: None,
        };
        replace_content(tx, flags, summary_id, &notice)?;
    }
    result.summaries = affected.len();
    redactions::record_cascade(tx, redaction_id, result.summaries, result.versions_purged)?;
    result.redaction_id = Some(redaction_id);
    Ok(result)
}

/// The summaries of the conversations in `scope` (a JSON array) whose text, or one of whose
/// stored versions, the redactor's pattern matches (none without a pattern: a whole-message
/// redaction follows lineage and previous context only).
fn summaries_holding(tx: Db, scope: &str, redactor: &Redactor) -> Result<Vec<String>> {
    let Some(pattern) = &redactor.pattern else {
        return Ok(Vec::new());
    };
    let mut found: Vec<String> = Vec::new();
    tx.query_each(
        &format!(
            "SELECT s.summary_id, s.content FROM summaries s WHERE s.conversation_id {}
             UNION ALL
             SELECT v.summary_id, v.content FROM lcm_native_summary_versions v
               JOIN summaries s ON s.summary_id = v.summary_id
              WHERE s.conversation_id {}",
            tx.in_ids("?1"),
            tx.in_ids("?1")
        ),
        params![scope],
        |r| {
            let id: String = r.get(0)?;
            let content: String = r.get(1)?;
            if pattern.is_match(&content) && !found.contains(&id) {
                found.push(id);
            }
            Ok(true)
        },
    )?;
    Ok(found)
}

pub(crate) use crate::store::redactions::{complete, conversations_awaiting, pending, scrubs_pending};

/// The scrub on PostgreSQL: an `UPDATE` leaves the old row version in the table's pages (and
/// in its TOAST table and every index) until a vacuum, and a plain `VACUUM` only marks that
/// space free. `VACUUM FULL` writes each table and its indexes anew, without the old versions,
/// and drops the old files. It takes each table's exclusive lock: every gateway waits for it,
/// and a gateway's open transaction makes it wait, up to `lock_ms` (then E_BUSY, and the
/// scrub stays pending for the next `redact`). A `CHECKPOINT` follows when the role may, so
/// that the write-ahead log holding the old text is recycled sooner (WAL archives, replicas
/// and backups are the operator's: see the README).
pub(crate) fn scrub_postgres(pool: &crate::pg::pool::PgPool, lock_ms: i64) -> Result<()> {
    pool.with_unbounded(|c| {
        wait_for_older_snapshots(c, lock_ms)?;
        let schema = crate::pg::quote_ident(&c.schema);
        // The tables holding what a user or a tool wrote (with, in PostgreSQL, each row's
        // words and the trigram and word indexes).
        let tables: Vec<String> = crate::db::schema::TEXT_COLUMNS
            .iter()
            .map(|(t, _)| *t)
            .chain([crate::db::schema::RECALLS_TABLE])
            .map(|t| format!("{schema}.{t}"))
            .collect();
        // Through a transaction pooler no session setting reaches the VACUUM, which runs only
        // outside a transaction: its wait for the tables' locks is the server's default there
        // (the README says so); the older snapshots were waited for above, bounded.
        c.set_bounds(lock_ms.max(1) as u64, 0)?;
        let vacuumed = c.batch_outside_transaction(&format!("VACUUM (FULL, ANALYZE) {}", tables.join(", ")));
        c.set_bounds(0, 0)?;
        vacuumed?;
        // Only a superuser or pg_checkpoint may: the log is recycled at the next checkpoint
        // anyway.
        let _ = c.batch("CHECKPOINT");
        redactions::scrubbed(c)
    })
}

/// `VACUUM FULL` keeps a row version that some open transaction's snapshot may still see (a
/// transaction of any session on the database, begun before the redaction committed): the
/// scrub first waits, up to `wait_ms`, until every transaction older than itself has ended.
/// E_BUSY (the scrub stays pending) when one stays open.
fn wait_for_older_snapshots(c: &crate::pg::Conn, wait_ms: i64) -> Result<()> {
    let until = std::time::Instant::now() + std::time::Duration::from_millis(wait_ms.max(0) as u64);
    let started: String = c.query_one_value("SELECT CAST(now() AS TEXT)", &[])?;
    loop {
        let older: i64 = c.query_one_value(
            "SELECT count(*) FROM pg_catalog.pg_stat_activity
             WHERE datname = current_database() AND pid <> pg_backend_pid()
               AND backend_xmin IS NOT NULL AND xact_start < CAST(CAST($1 AS TEXT) AS timestamptz)",
            &[&started],
        )?;
        if older == 0 {
            return Ok(());
        }
        if std::time::Instant::now() >= until {
            return Err(LcmError::Busy {
                sqlite: None,
                conversation_id: None,
                message: format!(
                    "{older} transaction(s) open since before the redaction may still see the old rows, and VACUUM FULL would keep them; the scrub stays pending (lcm-native redact --finish runs it again)"
                ),
            });
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// How long the final checkpoint is retried while another process's checkpoint holds the
/// lock (waiting for readers is the busy timeout's job, within each try).
const TRUNCATE_RETRY: std::time::Duration = std::time::Duration::from_secs(2);

/// Removes what the storage still holds of replaced text besides the live rows (`scrub` on a
/// SQLite file, `scrub_postgres` on a schema). Returns whether SQLite's log was emptied
/// (always true on PostgreSQL, which has no such log of its own to empty here).
pub(crate) fn scrub_storage(backend: &crate::sql::Backend, flags: SchemaFlags, lock_ms: i64) -> Result<bool> {
    match backend {
        crate::sql::Backend::Sqlite(pool) => pool.write_without_checkpointer(|conn| scrub(conn, flags)),
        crate::sql::Backend::Postgres(pg) => scrub_postgres(pg, lock_ms).map(|()| true),
    }
}

/// Removes what the file's free space, the full-text indexes' old segments and the write-ahead
/// log still hold of replaced text: merges each full-text index (dropping deleted entries),
/// rebuilds the file with `VACUUM` (with `secure_delete` on), and checkpoints and truncates the
/// log. Returns whether the log was emptied.
pub(crate) fn scrub(conn: &Connection, flags: SchemaFlags) -> Result<bool> {
    conn.pragma_update(None, "secure_delete", true)?;
    let mut tables = vec!["messages_fts", "summaries_fts"];
    if flags.has_cjk_fts {
        tables.push("summaries_fts_cjk");
    }
    for t in tables {
        conn.execute(&format!("INSERT INTO {t} ({t}) VALUES ('optimize')"), [])?;
    }
    #[cfg(test)]
    if tests::vacuum_fails_for(conn) {
        conn.pragma_update(None, "secure_delete", false)?;
        return Err(LcmError::Io {
            path: None,
            sqlite: Some(rusqlite::ffi::SQLITE_FULL),
            message: "the disk is full (database or disk is full)".into(),
        });
    }
    conn.execute_batch("VACUUM")?;
    // The caller holds this engine's checkpoint thread off; another process's checkpoint
    // makes this one give up at once, so it is retried for a while.
    let until = std::time::Instant::now() + TRUNCATE_RETRY;
    let emptied = loop {
        let busy: i64 = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| r.get(0))?;
        if busy == 0 || std::time::Instant::now() >= until {
            break busy == 0;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    conn.pragma_update(None, "secure_delete", false)?;
    if emptied {
        redactions::scrubbed(conn)?;
    }
    Ok(emptied)
}

impl TryFrom<RedactRequest> for RedactOptions {
    type Error = String;

    fn try_from(r: RedactRequest) -> std::result::Result<RedactOptions, String> {
        let pattern = match &r.pattern {
            Some(p) => Some(text::compile(p).map_err(|e| format!("`pattern`: {e}"))?),
            None => None,
        };
        let nothing_new = pattern.is_none() && r.message_ids.is_none();
        if r.finish && !nothing_new {
            return Err("`finish` finishes earlier redactions; it takes no `pattern` or `messageIds`".into());
        }
        let redactor = Redactor {
            pattern,
            replacement: r.replacement.unwrap_or_else(|| "[REDACTED]".to_string()),
        };
        if let Some(re) = &redactor.pattern {
            if re.is_match(&redactor.replacement) {
                return Err("the `replacement` matches the `pattern`".into());
            }
        }
        Ok(RedactOptions {
            conversation_id: r.conversation_id,
            message_ids: r.message_ids,
            redactor,
            reason: r.reason,
            mark_only: r.mark_only,
            // With nothing new to redact, a call finishes what earlier ones left.
            finish: nothing_new,
        })
    }
}
