//! Versions of summary texts (`lcm_native_summary_versions`): every text a summary has had,
//! with the model and prompt template that made it and why it changed. The current text stays
//! in `summaries` (what lossless-claw reads); its version here is the highest. Writes happen in
//! the transaction of the change (`store::summaries`); this module reads, numbers and prunes.

use rusqlite::params;
use serde::Serialize;

use crate::error::{LcmError, Result};
use crate::sql::Db;

pub(crate) const TABLE: &str = crate::db::schema::VERSIONS_TABLE;

/// The model of a summary whose text a redaction replaced with its notice until it is
/// regenerated (not a version of it).
pub(crate) const NOTICE_MODEL: &str = "lcm-native/redacted";

/// Why a summary's text changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[cfg_attr(test, ts(rename = "VersionReason"))]
#[serde(rename_all = "kebab-case")]
pub enum Reason {
    Compaction,
    Rewrite,
    FallbackRepair,
    Redaction,
    Rollback,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Compaction => "compaction",
            Reason::Rewrite => "rewrite",
            Reason::FallbackRepair => "fallback-repair",
            Reason::Redaction => "redaction",
            Reason::Rollback => "rollback",
        }
    }
}

/// Read from the column's text; a reason this version does not know (the column's CHECK
/// admits none, but a newer lcm-native might) is an error, never taken for another.
impl rusqlite::types::FromSql for Reason {
    fn column_result(value: rusqlite::types::ValueRef<'_>) -> rusqlite::types::FromSqlResult<Reason> {
        let text = value.as_str()?;
        [
            Reason::Compaction,
            Reason::Rewrite,
            Reason::FallbackRepair,
            Reason::Redaction,
            Reason::Rollback,
        ]
        .into_iter()
        .find(|r| r.as_str() == text)
        .ok_or_else(|| rusqlite::types::FromSqlError::Other(format!("unknown version reason `{text}`").into()))
    }
}

/// The prompt template a summary was made with.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[cfg_attr(test, ts(rename = "TemplateRef"))]
#[serde(rename_all = "camelCase")]
pub struct TemplateRef {
    /// `leaf.tmpl`, `condensed-d1.tmpl`, …
    pub name: String,
    /// SHA-256 of the template's text (hex): tells two edits of an override apart.
    pub sha256: String,
    /// True when it came from an override file rather than the embedded default.
    pub overridden: bool,
}

/// One version of a summary's text.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct SummaryVersion {
    pub summary_id: String,
    /// 1 for the text compaction wrote; each rewrite, rollback and redaction adds one.
    pub version: i64,
    pub content: String,
    pub token_count: i64,
    pub model: String,
    /// The template that produced it (for a rollback, the restored version's); null for a
    /// deterministic fallback, the offline summarizer and versions from before lcm-native kept
    /// versions.
    pub template: Option<TemplateRef>,
    pub reason: Reason,
    /// ISO-8601 UTC.
    pub created_at: String,
    /// True for the text in `summaries` now.
    pub current: bool,
    /// False for a version shown from the summary's row because none is stored yet (a summary
    /// from before versions were kept, or a read-only file without the table).
    pub stored: bool,
}

/// What a change writes into the version table.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Change<'a> {
    pub reason: Reason,
    pub template: Option<&'a TemplateRef>,
    /// Versions kept per summary (`maxSummaryVersions`), the new one included.
    pub keep: i64,
}

/// Whether the version table exists (a read-only open of an older file may lack it).
fn exists(db: Db) -> Result<bool> {
    db.has_table(TABLE)
}

/// Writes a version row.
#[allow(clippy::too_many_arguments)]
pub(crate) fn insert<'a>(
    tx: impl Into<Db<'a>>,
    summary_id: &str,
    version: i64,
    content: &str,
    token_count: i64,
    model: &str,
    template: Option<&TemplateRef>,
    reason: Reason,
) -> Result<()> {
    tx.into().execute(
        "INSERT INTO lcm_native_summary_versions
           (summary_id, version, content, token_count, model, template_name, template_sha256,
            template_overridden, reason)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        params![
            summary_id,
            version,
            content,
            token_count,
            model,
            template.map(|t| t.name.as_str()),
            template.map(|t| t.sha256.as_str()),
            template.is_some_and(|t| t.overridden),
            reason.as_str(),
        ],
    )?;
    Ok(())
}

/// The number the next version of `summary_id` gets, in the caller's transaction, before its
/// row changes. A summary awaiting regeneration after a redaction continues the numbering its
/// purged versions had; one without stored versions first gets its current text as version 1.
pub(crate) fn next_version<'a>(db: impl Into<Db<'a>>, summary_id: &str) -> Result<i64> {
    let tx = db.into();
    let pending: Option<i64> = tx.query_row(
        "SELECT next_version FROM lcm_native_redaction_pending WHERE summary_id = ?1",
        params![summary_id],
        |r| r.get(0),
    )?;
    if let Some(next) = pending {
        tx.execute(
            "DELETE FROM lcm_native_redaction_pending WHERE summary_id = ?1",
            params![summary_id],
        )?;
        return Ok(next);
    }
    let newest: Option<(i64, bool)> = tx.query_row(
        "SELECT v.version, CASE WHEN v.content = s.content THEN 1 ELSE 0 END FROM lcm_native_summary_versions v
         JOIN summaries s ON s.summary_id = v.summary_id
         WHERE v.summary_id = ?1 ORDER BY v.version DESC LIMIT 1",
        params![summary_id],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    // The text in the row becomes a version first when none holds it: version 1 of a summary
    // from before versions were kept (what compaction or lossless-claw wrote), or the next one
    // of a summary another program (lossless-claw) changed since.
    let (row_version, reason) = match newest {
        Some((max, true)) => return Ok(max + 1),
        Some((max, false)) => (max + 1, "rewrite"),
        None => (1, "compaction"),
    };
    // Version 1 is as old as the summary; a later one is of now (ISO-8601 with milliseconds).
    let created_at = match row_version {
        1 => tx
            .query_row(
                "SELECT created_at FROM summaries WHERE summary_id = ?1",
                params![summary_id],
                |r| r.get::<String>(0),
            )?
            .map(crate::time::iso_or_raw)
            .unwrap_or_default(),
        _ => crate::time::to_iso_ms(&chrono::Utc::now()),
    };
    tx.execute(
        "INSERT INTO lcm_native_summary_versions (summary_id, version, content, token_count, model, reason, created_at)
         SELECT summary_id, ?2, content, token_count, model, ?3, ?4
         FROM summaries WHERE summary_id = ?1",
        params![summary_id, row_version, reason, created_at],
    )?;
    Ok(row_version + 1)
}

/// Deletes every stored version of a summary (a redaction: no copy of the old text may stay).
/// Returns the highest version number there was and how many rows went.
pub(crate) fn purge(tx: Db, summary_id: &str) -> Result<(Option<i64>, usize)> {
    let (max, n): (Option<i64>, i64) = tx.query_one(
        "SELECT max(version), count(*) FROM lcm_native_summary_versions WHERE summary_id = ?1",
        params![summary_id],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    tx.execute(
        "DELETE FROM lcm_native_summary_versions WHERE summary_id = ?1",
        params![summary_id],
    )?;
    Ok((max, n as usize))
}

/// Drops the oldest versions of `summary_id` beyond the newest `keep`.
pub(crate) fn prune<'a>(db: impl Into<Db<'a>>, summary_id: &str, keep: i64) -> Result<()> {
    db.into().execute(
        "DELETE FROM lcm_native_summary_versions WHERE summary_id = ?1 AND version <= (
           SELECT max(version) FROM lcm_native_summary_versions WHERE summary_id = ?1) - ?2",
        params![summary_id, keep.max(1)],
    )?;
    Ok(())
}

fn row(r: &crate::sql::Row) -> Result<SummaryVersion> {
    let name: Option<String> = r.get(5)?;
    Ok(SummaryVersion {
        summary_id: r.get(0)?,
        version: r.get(1)?,
        content: r.get(2)?,
        token_count: r.get(3)?,
        model: r.get(4)?,
        template: match name {
            Some(name) => Some(TemplateRef {
                name,
                sha256: r.get::<Option<String>>(6)?.unwrap_or_default(),
                overridden: r.get(7)?,
            }),
            None => None,
        },
        reason: r.get(8)?,
        created_at: r.get(9)?,
        current: false,
        stored: true,
    })
}

/// Every version of `summary_id`, oldest first, the current one marked. Without stored
/// versions, the summary's row as version 1 (`stored: false`).
pub(crate) fn list<'a>(db: impl Into<Db<'a>>, summary_id: &str) -> Result<Vec<SummaryVersion>> {
    let conn = db.into();
    let current: Option<(String, i64, String, String)> = conn.query_row(
        "SELECT content, token_count, model, created_at FROM summaries WHERE summary_id = ?1",
        params![summary_id],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
    )?;
    let Some((content, token_count, model, created_at)) = current else {
        return Err(LcmError::not_found("summary", summary_id));
    };
    let mut versions = if exists(conn)? {
        conn.query_map(
            "SELECT summary_id, version, content, token_count, model, template_name, template_sha256,
                    template_overridden, reason, created_at
             FROM lcm_native_summary_versions WHERE summary_id = ?1 ORDER BY version",
            params![summary_id],
            row,
        )?
    } else {
        Vec::new()
    };
    match versions.last_mut() {
        // The newest stored version is the current text unless a redaction replaced the text
        // with its notice (the notice is not a version).
        Some(last) if last.content == content => last.current = true,
        _ => {
            let pending: Option<i64> = if exists(conn)? {
                conn.query_row(
                    "SELECT next_version FROM lcm_native_redaction_pending WHERE summary_id = ?1",
                    params![summary_id],
                    |r| r.get(0),
                )?
            } else {
                None
            };
            let version = pending.unwrap_or_else(|| versions.last().map_or(1, |v| v.version + 1));
            versions.push(SummaryVersion {
                summary_id: summary_id.to_string(),
                version,
                content,
                token_count,
                model,
                template: None,
                reason: if pending.is_some() {
                    Reason::Redaction
                } else {
                    Reason::Compaction
                },
                created_at: crate::time::iso_or_raw(created_at),
                current: true,
                stored: false,
            });
        }
    }
    Ok(versions)
}

/// Version `version` of `summary_id`: E_NOT_FOUND when the summary or the version does not
/// exist (or was pruned or purged).
pub(crate) fn get<'a>(conn: impl Into<Db<'a>>, summary_id: &str, version: i64) -> Result<SummaryVersion> {
    list(conn, summary_id)?
        .into_iter()
        .find(|v| v.version == version)
        .ok_or_else(|| LcmError::not_found("summary version", format!("{summary_id} version {version}")))
}

/// What `verify` finds wrong in the redaction tables: a pending summary without its redaction
/// or its notice, a summary holding the notice without a pending row. (A row whose text is not
/// its newest version is not wrong: lossless-claw may have changed it; its next change records
/// it as a version first.)
pub(crate) fn problems<'a>(db: impl Into<Db<'a>>, only: Option<i64>) -> Result<Vec<String>> {
    let db = db.into();
    if !exists(db)? {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    // (The CAST gives PostgreSQL the parameter's type where it stands alone.)
    let waiting = db.query_map(
        "SELECT p.summary_id FROM lcm_native_redaction_pending p JOIN summaries s ON s.summary_id = p.summary_id
         WHERE (CAST(?1 AS BIGINT) IS NULL OR s.conversation_id = ?1)
           AND (p.redaction_id NOT IN (SELECT redaction_id FROM lcm_native_redactions) OR s.model <> ?2)",
        params![only, NOTICE_MODEL],
        |r| r.get::<String>(0),
    )?;
    for id in waiting {
        out.push(format!(
            "summary {id}: awaits regeneration but its redaction or notice is missing"
        ));
    }
    let noticed = db.query_map(
        "SELECT summary_id FROM summaries WHERE (CAST(?1 AS BIGINT) IS NULL OR conversation_id = ?1) AND model = ?2
           AND summary_id NOT IN (SELECT summary_id FROM lcm_native_redaction_pending)",
        params![only, NOTICE_MODEL],
        |r| r.get::<String>(0),
    )?;
    for id in noticed {
        out.push(format!(
            "summary {id}: holds a redaction notice but is not marked for regeneration"
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::Reason;

    #[test]
    fn a_reason_is_read_back_as_written_and_an_unknown_one_is_an_error() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        for r in [
            Reason::Compaction,
            Reason::Rewrite,
            Reason::FallbackRepair,
            Reason::Redaction,
            Reason::Rollback,
        ] {
            let back: Reason = conn.query_row("SELECT ?1", [r.as_str()], |row| row.get(0)).unwrap();
            assert_eq!(back, r);
        }
        let unknown = conn.query_row("SELECT 'merge'", [], |row| row.get::<_, Reason>(0));
        assert!(unknown.is_err());
    }
}
