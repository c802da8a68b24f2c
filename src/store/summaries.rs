//! Summary rows: the one module that writes `summaries`, `summary_messages`,
//! `summary_parents` and their full-text rows, and reads them back.

use rusqlite::{params, OptionalExtension};
use serde::Serialize;

use super::fidelity_scores::{self, Fidelity};
use super::{conversations, versions};
use crate::db::SchemaFlags;
use crate::error::{LcmError, Result};
use crate::sql::{Db, Row};
use crate::summarizer::SummaryKind;

/// A summary's own columns, the same whether a pass writes them or a read returns them.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct SummaryFields {
    pub summary_id: String,
    pub kind: SummaryKind,
    /// 0 for leaves; a condensed node is one deeper than its inputs.
    pub depth: i64,
    pub content: String,
    pub token_count: i64,
    /// ISO-8601 UTC with milliseconds, or null when unknown.
    pub earliest_at: Option<String>,
    pub latest_at: Option<String>,
    /// Summary nodes beneath this one.
    pub descendant_count: i64,
    pub descendant_token_count: i64,
    pub source_message_token_count: i64,
    /// The summarizer's model id; `lcm-native/fallback` marks a deterministic fallback.
    pub model: String,
}

/// A summary made by a pass, with its lineage, before it is written.
#[derive(Clone, Debug)]
pub(crate) struct NewSummary {
    pub fields: SummaryFields,
    pub file_ids: Vec<String>,
    /// Leaf: the covered messages, in order.
    pub messages: Vec<i64>,
    /// Condensed: the input summaries, in order.
    pub parents: Vec<String>,
    /// The summaries its prompt showed as previous context.
    pub previous: Vec<String>,
    /// Its fidelity score, written with it.
    pub fidelity: Option<Fidelity>,
    /// Stayed under `minFidelity` after the retry.
    pub needs_repair: bool,
    /// The prompt template it was made with (none for a fallback or the offline summarizer).
    pub template: Option<versions::TemplateRef>,
}

/// A summary node of the DAG.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct SummaryRecord {
    #[serde(flatten)]
    pub fields: SummaryFields,
    pub conversation_id: i64,
    pub created_at: String,
    /// A deterministic fallback rather than a model's summary: lcm-native's own (model
    /// `lcm-native/fallback`) or lossless-claw's (ending with its `[Truncated from N tokens]` or
    /// `[LCM fallback summary…]` note on a line of its own). `rewrite` with `fallbacks: true`
    /// re-summarises them.
    pub fallback: bool,
    /// Its stored fidelity score: the share of its source's identifiers it keeps, salient ones
    /// counted twice (see the README). Null when not scored yet (`scoreFidelity`) or when its
    /// source names no identifier.
    pub fidelity: Option<f64>,
    /// Stayed under `minFidelity` after the retry: `rewrite` with `lowFidelity: true` re-summarises
    /// it.
    pub low_fidelity: bool,
}

/// True for a summary that is a deterministic fallback: lcm-native marks its own with the
/// model `lcm-native/fallback`; lossless-claw's end with its note on a line of its own,
/// `[Truncated from N tokens]` or (seed, empty answer) `[LCM fallback summary; truncated for
/// context management]`, or are just `[Truncated from 0 tokens]`. A model's text that merely
/// mentions a note is not one. Reads the `model` and `content` columns.
pub(crate) const FALLBACK_SQL: &str = "(model IN ('lcm-native/fallback', 'lcm-native/redacted') \
     OR rtrim(content, ' ' || char(9, 10, 13)) GLOB '[[]Truncated from [0-9]* tokens]' \
     OR rtrim(content, ' ' || char(9, 10, 13)) GLOB '*' || char(10) || '[[]Truncated from [0-9]* tokens]' \
     OR rtrim(content, ' ' || char(9, 10, 13)) GLOB '*' || char(10) || '[[]LCM fallback summary; truncated for context management]')";

/// `FALLBACK_SQL` in PostgreSQL's words (regular expressions for GLOB).
const FALLBACK_SQL_PG: &str = "(model IN ('lcm-native/fallback', 'lcm-native/redacted') \
     OR rtrim(content, E' \\t\\n\\r') ~ '^\\[Truncated from [0-9].* tokens\\]$' \
     OR rtrim(content, E' \\t\\n\\r') ~ '\\n\\[Truncated from [0-9].* tokens\\]$' \
     OR rtrim(content, E' \\t\\n\\r') ~ '\\n\\[LCM fallback summary; truncated for context management\\]$')";

fn fallback_sql(db: Db) -> &'static str {
    match db {
        Db::Sqlite(_) => FALLBACK_SQL,
        Db::Pg(_) => FALLBACK_SQL_PG,
    }
}

const SUMMARY_COLUMNS: &str = "summary_id, conversation_id, kind, depth, content, token_count, earliest_at, latest_at,
     descendant_count, descendant_token_count, source_message_token_count, model, created_at";

pub(crate) fn from_row(r: &Row) -> Result<SummaryRecord> {
    let kind: String = r.get(2)?;
    Ok(SummaryRecord {
        fields: SummaryFields {
            summary_id: r.get(0)?,
            kind: if kind == "condensed" {
                SummaryKind::Condensed
            } else {
                SummaryKind::Leaf
            },
            depth: r.get(3)?,
            content: r.get(4)?,
            token_count: r.get(5)?,
            earliest_at: r.get(6)?,
            latest_at: r.get(7)?,
            descendant_count: r.get(8)?,
            descendant_token_count: r.get(9)?,
            source_message_token_count: r.get(10)?,
            model: r.get(11)?,
        },
        conversation_id: r.get(1)?,
        created_at: r.get(12)?,
        fallback: r.get(13)?,
        fidelity: None,
        low_fidelity: false,
    })
}

/// Which of a conversation's summaries `list` reads, in which order.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Listing<'s> {
    /// Only this depth.
    pub depth: Option<i64>,
    /// Newest first instead of creation order.
    pub newest_first: bool,
    /// Rows skipped before the first read.
    pub offset: i64,
    /// Most rows read; `None`: all.
    pub limit: Option<i64>,
    /// Only these summaries.
    pub ids: Option<&'s [String]>,
}

impl Listing<'_> {
    /// Every summary of one depth, in creation order.
    #[cfg(test)]
    pub(crate) fn at_depth(depth: i64) -> Self {
        Listing {
            depth: Some(depth),
            ..Default::default()
        }
    }
}

/// A conversation's summaries in creation order (or newest first), optionally one depth and
/// one page of them.
pub(crate) fn list<'a>(db: impl Into<Db<'a>>, conversation_id: i64, filter: Listing<'_>) -> Result<Vec<SummaryRecord>> {
    let db = db.into();
    conversations::get(db, conversation_id)?;
    // Creation order is the rowid's (PostgreSQL keeps it as a column).
    let depth = filter.depth.unwrap_or(-1);
    let order = if filter.newest_first { "DESC" } else { "" };
    let ids = filter.ids.map(serde_json::to_string).transpose()?;
    let only = match ids {
        Some(_) => format!("AND summary_id {}", db.in_texts("?5")),
        None => String::new(),
    };
    let sql = format!(
        "SELECT {SUMMARY_COLUMNS}, {} FROM summaries
         WHERE conversation_id = ?1 AND (?2 < 0 OR depth = ?2) {only} ORDER BY rowid {order} LIMIT ?3 OFFSET ?4",
        fallback_sql(db)
    );
    let limit = filter.limit.unwrap_or(i64::MAX);
    let offset = filter.offset;
    let mut rows = match &ids {
        Some(ids) => db.query_map(&sql, params![conversation_id, depth, limit, offset, ids], from_row)?,
        None => db.query_map(&sql, params![conversation_id, depth, limit, offset], from_row)?,
    };
    let scores = if filter.limit.is_some() || filter.ids.is_some() {
        let ids: Vec<&str> = rows.iter().map(|r| r.fields.summary_id.as_str()).collect();
        fidelity_scores::for_summaries(db, &ids)?
    } else {
        fidelity_scores::for_conversation(db, conversation_id)?
    };
    for r in &mut rows {
        if let Some(f) = scores.get(&r.fields.summary_id) {
            r.fidelity = f.fidelity.score;
            r.low_fidelity = f.needs_repair;
        }
    }
    Ok(rows)
}

pub(crate) fn get<'a>(db: impl Into<Db<'a>>, summary_id: &str) -> Result<SummaryRecord> {
    let db = db.into();
    let sql = format!(
        "SELECT {SUMMARY_COLUMNS}, {} FROM summaries WHERE summary_id = ?1",
        fallback_sql(db)
    );
    let mut record = db
        .query_row(&sql, params![summary_id], from_row)?
        .ok_or_else(|| LcmError::not_found("summary", summary_id))?;
    if let Some(f) = fidelity_scores::get(db, summary_id)? {
        record.fidelity = f.fidelity.score;
        record.low_fidelity = f.needs_repair;
    }
    Ok(record)
}

/// Inserts new summaries with their lineage links and fidelity scores, in the caller's
/// transaction. Their full-text rows come separately (`insert_fts`), last in a pass's
/// transaction.
pub(crate) fn insert<'a>(
    tx: impl Into<Db<'a>>,
    flags: SchemaFlags,
    conversation_id: i64,
    created_at: &str,
    summaries: &[NewSummary],
) -> Result<()> {
    let tx = tx.into();
    for s in summaries {
        let f = &s.fields;
        tx.execute(
            "INSERT INTO summaries (summary_id, conversation_id, kind, depth, content, token_count, earliest_at,
                                    latest_at, descendant_count, descendant_token_count, source_message_token_count,
                                    created_at, file_ids, model)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
            params![
                f.summary_id,
                conversation_id,
                f.kind.as_str(),
                f.depth,
                f.content,
                f.token_count,
                f.earliest_at,
                f.latest_at,
                f.descendant_count,
                f.descendant_token_count,
                f.source_message_token_count,
                created_at,
                serde_json::to_string(&s.file_ids)?,
                f.model,
            ],
        )?;
        for (i, m) in s.messages.iter().enumerate() {
            tx.execute(
                "INSERT INTO summary_messages (summary_id, message_id, ordinal) VALUES (?1, ?2, ?3)",
                params![f.summary_id, m, i as i64],
            )?;
        }
        for (i, p) in s.parents.iter().enumerate() {
            tx.execute(
                "INSERT INTO summary_parents (summary_id, parent_summary_id, ordinal) VALUES (?1, ?2, ?3)",
                params![f.summary_id, p, i as i64],
            )?;
        }
        for p in &s.previous {
            tx.execute(
                "INSERT INTO lcm_native_summary_context (previous_summary_id, summary_id) VALUES (?1, ?2)",
                params![p, f.summary_id],
            )?;
        }
        if let (Some(score), true) = (&s.fidelity, flags.has_fidelity) {
            fidelity_scores::put(tx, &f.summary_id, score, s.needs_repair)?;
        }
        if flags.has_versions {
            let (content, model) = (&f.content, &f.model);
            let template = s.template.as_ref();
            versions::insert(
                tx,
                &f.summary_id,
                1,
                content,
                f.token_count,
                model,
                template,
                versions::Reason::Compaction,
            )?;
        }
    }
    Ok(())
}

/// The full-text rows of new summaries on SQLite (PostgreSQL indexes the summaries' text
/// itself). FTS5 flushes its pending rows at every savepoint (multi-row updates, trigger
/// firings), one segment each time, so a pass adds them last.
pub(crate) fn insert_fts(db: Db, flags: SchemaFlags, summaries: &[NewSummary]) -> Result<()> {
    let Db::Sqlite(tx) = db else {
        return Ok(());
    };
    let mut fts = tx.prepare_cached("INSERT INTO summaries_fts (summary_id, content) VALUES (?1, ?2)")?;
    for s in summaries {
        fts.execute(params![s.fields.summary_id, s.fields.content])?;
        if flags.has_cjk_fts {
            tx.prepare_cached("INSERT INTO summaries_fts_cjk (summary_id, content) VALUES (?1, ?2)")?
                .execute(params![s.fields.summary_id, s.fields.content])?;
        }
    }
    Ok(())
}

/// A summary's new text and what to record about it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Replacement<'a> {
    pub content: &'a str,
    pub token_count: i64,
    pub model: &'a str,
    /// Its fidelity score, and whether it stays marked for repair.
    pub fidelity: (&'a Fidelity, bool),
    /// The version it becomes; `None` for a redaction's notice, which is not a version.
    pub change: Option<versions::Change<'a>>,
}

/// Replaces a summary's text in the caller's write transaction: content, token count, model,
/// its fidelity score, its version (the old text kept, the new one recorded), its full-text
/// rows (keeping their rowids), and the `descendant_token_count` of every summary above it
/// (which sums the tokens below). Returns the version the text became, if recorded.
pub(crate) fn replace_content<'a>(
    db: impl Into<Db<'a>>,
    flags: SchemaFlags,
    summary_id: &str,
    new: &Replacement<'_>,
) -> Result<Option<i64>> {
    let tx = db.into();
    let old: Option<i64> = tx.query_row(
        "SELECT token_count FROM summaries WHERE summary_id = ?1",
        params![summary_id],
        |r| r.get(0),
    )?;
    let Some(old) = old else {
        return Err(LcmError::not_found("summary", summary_id));
    };
    let version = match (new.change, flags.has_versions) {
        (Some(change), true) => {
            let version = versions::next_version(tx, summary_id)?;
            versions::insert(
                tx,
                summary_id,
                version,
                new.content,
                new.token_count,
                new.model,
                change.template,
                change.reason,
            )?;
            versions::prune(tx, summary_id, change.keep)?;
            Some(version)
        }
        _ => None,
    };
    tx.execute(
        "UPDATE summaries SET content = ?2, token_count = ?3, model = ?4 WHERE summary_id = ?1",
        params![summary_id, new.content, new.token_count, new.model],
    )?;
    let delta = new.token_count - old;
    if delta != 0 {
        tx.execute(
            "WITH RECURSIVE above(id, steps) AS (
               SELECT summary_id, 1 FROM summary_parents WHERE parent_summary_id = ?1
               UNION
               SELECT p.summary_id, a.steps + 1 FROM summary_parents p JOIN above a ON p.parent_summary_id = a.id
               WHERE a.steps < 64
             )
             UPDATE summaries SET descendant_token_count = descendant_token_count + ?2
             WHERE summary_id IN (SELECT id FROM above)",
            params![summary_id, delta],
        )?;
    }
    if flags.has_fidelity {
        fidelity_scores::put(tx, summary_id, new.fidelity.0, new.fidelity.1)?;
    }
    // (PostgreSQL's word index is over the content itself: nothing to do there.)
    let Db::Sqlite(tx) = tx else {
        return Ok(version);
    };
    let mut tables = vec!["summaries_fts"];
    if flags.has_cjk_fts {
        tables.push("summaries_fts_cjk");
    }
    for t in tables {
        // The row keeps its rowid: full-text searches list newest first by rowid, and a
        // rewritten old summary must not turn up as the newest.
        let rowid: Option<i64> = tx
            .query_row(
                &format!("SELECT rowid FROM {t} WHERE summary_id = ?1"),
                [summary_id],
                |r| r.get(0),
            )
            .optional()?;
        if let Some(rowid) = rowid {
            tx.execute(&format!("DELETE FROM {t} WHERE rowid = ?1"), [rowid])?;
        }
        tx.execute(
            &format!("INSERT INTO {t} (rowid, summary_id, content) VALUES (?1, ?2, ?3)"),
            params![rowid, summary_id, new.content],
        )?;
    }
    Ok(version)
}

/// Every summary above the messages in `message_ids` (a JSON array): those covering them and,
/// transitively, every summary made from one of those; by depth, then in creation order.
pub(crate) fn above_messages(db: Db, message_ids: &str) -> Result<Vec<String>> {
    reached_from(db, message_ids, "[]", false)
}

/// Every summary the text of the messages in `message_ids` or of the summaries in
/// `summary_ids` (JSON arrays) can have reached: those covering the messages, the summaries
/// themselves, and from each of them every summary made from it (its parents in the DAG) and,
/// with `shown`, every summary whose prompt showed it as previous context, transitively; by
/// depth, then in creation order. Previous context reaches every later leaf of a conversation
/// through the chain of leaves, so a redaction with a pattern follows it only where the text
/// is found (`summary_ids`), and one of whole messages, which has no text to look for, always.
pub(crate) fn reached_from(db: Db, message_ids: &str, summary_ids: &str, shown: bool) -> Result<Vec<String>> {
    let context = if shown {
        "UNION ALL SELECT previous_summary_id, summary_id FROM lcm_native_summary_context"
    } else {
        ""
    };
    db.query_map(
        &format!(
            "WITH RECURSIVE flows(source, target) AS (
               SELECT parent_summary_id, summary_id FROM summary_parents
               {context}
             ),
             affected(id) AS (
               SELECT summary_id FROM summary_messages WHERE message_id {}
               UNION
               SELECT value FROM {} k
               UNION
               SELECT f.target FROM flows f JOIN affected a ON f.source = a.id
             )
             SELECT s.summary_id FROM summaries s JOIN affected a ON a.id = s.summary_id ORDER BY s.depth, s.rowid",
            db.in_ids("?1"),
            db.text_list("?2")
        ),
        params![message_ids, summary_ids],
        |r| r.get(0),
    )
}

/// An input of a condensed summary as its parent's source (and `expand`) shows it.
pub(crate) struct InputText {
    pub summary_id: String,
    pub kind: String,
    pub depth: i64,
    pub token_count: i64,
    pub earliest_at: Option<String>,
    pub latest_at: Option<String>,
    pub created_at: String,
    pub content: String,
}

/// The inputs of `summary_id`, in order (none for a leaf).
pub(crate) fn inputs_of<'a>(db: impl Into<Db<'a>>, summary_id: &str) -> Result<Vec<InputText>> {
    db.into().query_map(
        "SELECT s.summary_id, s.kind, s.depth, s.token_count, s.earliest_at, s.latest_at, s.created_at, s.content
         FROM summary_parents p JOIN summaries s ON s.summary_id = p.parent_summary_id
         WHERE p.summary_id = ?1 ORDER BY p.ordinal",
        params![summary_id],
        |r| {
            Ok(InputText {
                summary_id: r.get(0)?,
                kind: r.get(1)?,
                depth: r.get(2)?,
                token_count: r.get(3)?,
                earliest_at: r.get(4)?,
                latest_at: r.get(5)?,
                created_at: r.get(6)?,
                content: r.get(7)?,
            })
        },
    )
}

/// The messages a leaf covers, in order (none for a condensed summary).
pub(crate) fn messages_of<'a>(db: impl Into<Db<'a>>, summary_id: &str) -> Result<Vec<i64>> {
    db.into().query_map(
        "SELECT message_id FROM summary_messages WHERE summary_id = ?1 ORDER BY ordinal",
        params![summary_id],
        |r| r.get(0),
    )
}

/// The text and `file_…` ids of each of `ids` that exists (one query).
pub(crate) fn contents<'a>(
    db: impl Into<Db<'a>>,
    ids: &[String],
) -> Result<std::collections::HashMap<String, (String, Vec<String>)>> {
    let db = db.into();
    let mut out = std::collections::HashMap::with_capacity(ids.len());
    if ids.is_empty() {
        return Ok(out);
    }
    let sql = format!(
        "SELECT s.summary_id, s.content, s.file_ids FROM {} j JOIN summaries s ON s.summary_id = j.value",
        db.text_list("?1")
    );
    db.query_each(&sql, params![serde_json::to_string(ids)?], |r| {
        let file_ids: String = r.get(2)?;
        let file_ids: Vec<String> = serde_json::from_str(&file_ids).unwrap_or_default();
        out.insert(r.get(0)?, (r.get(1)?, file_ids));
        Ok(true)
    })?;
    Ok(out)
}

/// One summary's text; E_NOT_FOUND when it does not exist.
pub(crate) fn content<'a>(db: impl Into<Db<'a>>, summary_id: &str) -> Result<String> {
    db.into()
        .query_row(
            "SELECT content FROM summaries WHERE summary_id = ?1",
            params![summary_id],
            |r| r.get(0),
        )?
        .ok_or_else(|| LcmError::not_found("summary", summary_id))
}

/// Every summary of a conversation with its depth, lowest depth first.
pub(crate) fn depths<'a>(db: impl Into<Db<'a>>, conversation_id: i64) -> Result<Vec<(String, i64)>> {
    db.into().query_map(
        "SELECT summary_id, depth FROM summaries WHERE conversation_id = ?1 ORDER BY depth",
        params![conversation_id],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
}

/// The (at most) two summaries of the same conversation and depth that precede `summary_id`
/// in time, oldest first, with their texts: a rewrite's `PreviousContext`.
pub(crate) fn preceding<'a>(db: impl Into<Db<'a>>, summary_id: &str) -> Result<Vec<(String, String)>> {
    let db = db.into();
    let (time, id) = in_time_order(db);
    let mut rows: Vec<(String, String)> = db.query_map(
        &format!(
            "SELECT s.summary_id, s.content FROM summaries s, summaries t
             WHERE t.summary_id = ?1 AND s.conversation_id = t.conversation_id AND s.depth = t.depth
               AND s.summary_id <> t.summary_id
               AND ({time}(COALESCE(s.earliest_at, s.created_at)), {time}(s.created_at), s.summary_id{id})
                 < ({time}(COALESCE(t.earliest_at, t.created_at)), {time}(t.created_at), t.summary_id{id})
             ORDER BY {time}(COALESCE(s.earliest_at, s.created_at)) DESC, {time}(s.created_at) DESC,
                      s.summary_id{id} DESC
             LIMIT 2"
        ),
        params![summary_id],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    rows.reverse();
    Ok(rows)
}

/// How each engine orders summaries in time: a stored time read as a number (`julianday`, or
/// `lcm_epoch` in PostgreSQL, see `pg::search`), and ids compared byte by byte (SQLite's
/// BINARY; PostgreSQL's "C" collation, whatever the database's).
fn in_time_order(db: Db) -> (&'static str, &'static str) {
    match db {
        Db::Sqlite(_) => ("julianday", ""),
        Db::Pg(_) => ("lcm_epoch", " COLLATE \"C\""),
    }
}

/// Which summaries of a conversation `select` takes (the selections of a rewrite).
pub(crate) enum Which<'a> {
    One(&'a str),
    /// A summary and every summary beneath it.
    Beneath(&'a str),
    Depth(i64),
    All,
    /// The deterministic fallbacks (`FALLBACK_SQL`).
    Fallbacks,
    /// Those whose fidelity stayed under `minFidelity` (marked for repair).
    NeedsRepair,
    /// Those a redaction replaced with its notice, waiting to be written again.
    AwaitingRegeneration,
}

/// The summaries `which` takes, bottom-up: by depth, then by the start of their span (their
/// creation when unknown), then by creation, then by id. Fidelity fields are not filled.
pub(crate) fn select<'a>(db: impl Into<Db<'a>>, conversation_id: i64, which: Which<'_>) -> Result<Vec<SummaryRecord>> {
    use rusqlite::types::Value;
    let db = db.into();
    // (The CASTs give PostgreSQL the parameter's type where it stands alone.)
    let fallbacks = format!("AND CAST(?2 AS TEXT) IS NULL AND {}", fallback_sql(db));
    let (filter, arg): (&str, Value) = match which {
        Which::One(id) => ("AND summary_id = ?2", id.to_string().into()),
        Which::Beneath(id) => (
            "AND summary_id IN (WITH RECURSIVE beneath(id) AS (
                SELECT CAST(?2 AS TEXT) UNION SELECT p.parent_summary_id FROM summary_parents p JOIN beneath b ON p.summary_id = b.id
             ) SELECT id FROM beneath)",
            id.to_string().into(),
        ),
        Which::Depth(d) => ("AND depth = ?2", d.into()),
        Which::All => ("AND CAST(?2 AS TEXT) IS NULL", Value::Null),
        Which::Fallbacks => (fallbacks.as_str(), Value::Null),
        Which::NeedsRepair if !fidelity_scores::exists(db)? => ("AND CAST(?2 AS TEXT) IS NULL AND 1 = 0", Value::Null),
        Which::NeedsRepair => (
            "AND CAST(?2 AS TEXT) IS NULL AND summary_id IN (SELECT summary_id FROM lcm_native_summary_fidelity WHERE needs_repair = 1)",
            Value::Null,
        ),
        Which::AwaitingRegeneration => (
            "AND CAST(?2 AS TEXT) IS NULL AND summary_id IN (SELECT summary_id FROM lcm_native_redaction_pending)",
            Value::Null,
        ),
    };
    let (time, id) = in_time_order(db);
    let sql = format!(
        "SELECT {SUMMARY_COLUMNS}, {} FROM summaries
         WHERE conversation_id = ?1 {filter}
         ORDER BY depth, {time}(COALESCE(earliest_at, created_at)), {time}(created_at), summary_id{id}",
        fallback_sql(db)
    );
    db.query_map(&sql, params![conversation_id, arg], from_row)
}

/// A summary's `file_…` ids (its `file_ids` column), empty when it has none or they do not parse.
pub(crate) fn file_ids<'a>(db: impl Into<Db<'a>>, summary_id: &str) -> Result<Vec<String>> {
    let json: Option<String> = db.into().query_row(
        "SELECT file_ids FROM summaries WHERE summary_id = ?1",
        params![summary_id],
        |r| r.get(0),
    )?;
    Ok(json.and_then(|j| serde_json::from_str(&j).ok()).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use rusqlite::params;

    use super::*;

    fn new(id: &str, kind: SummaryKind, depth: i64, messages: Vec<i64>, parents: Vec<&str>) -> NewSummary {
        NewSummary {
            fields: SummaryFields {
                summary_id: id.into(),
                kind,
                depth,
                content: format!("{id} text"),
                token_count: 12,
                earliest_at: Some("2026-11-26T09:00:00.000Z".into()),
                latest_at: None,
                descendant_count: parents.len() as i64,
                descendant_token_count: 0,
                source_message_token_count: 40,
                model: "test/model".into(),
            },
            file_ids: vec!["file_1".into()],
            messages,
            parents: parents.into_iter().map(str::to_string).collect(),
            previous: Vec::new(),
            fidelity: Some(Fidelity {
                score: Some(0.75),
                salient_score: None,
                identifiers: 4,
                kept: 3,
                salient: 0,
                salient_kept: 0,
                missing_salient: vec![],
            }),
            needs_repair: false,
            template: Some(versions::TemplateRef {
                name: "leaf.tmpl".into(),
                sha256: "ab".into(),
                overridden: false,
            }),
        }
    }

    /// A pass's summaries written on SQLite and on PostgreSQL: rows, lineage, fidelity and
    /// version 1, read back alike.
    #[test]
    fn new_summaries_are_written_alike_on_both_engines() {
        crate::test_support::on_both_engines("summaries", |db, flags, engine| {
            crate::test_support::seed_conversation(db, 4);
            let leaves = [
                new("sum_1", SummaryKind::Leaf, 0, vec![1, 2], vec![]),
                new("sum_2", SummaryKind::Leaf, 0, vec![3, 4], vec![]),
            ];
            insert(db, flags, 1, "2026-11-26 09:00:00", &leaves).unwrap();
            let condensed = [new("sum_3", SummaryKind::Condensed, 1, vec![], vec!["sum_1", "sum_2"])];
            insert(db, flags, 1, "2026-11-26 09:01:00", &condensed).unwrap();

            let listed = list(db, 1, Listing::default()).unwrap();
            assert_eq!(listed.len(), 3, "{engine}");
            assert_eq!(listed[2].fields, condensed[0].fields, "{engine}");
            assert_eq!(listed[0].fidelity, Some(0.75), "{engine}");
            assert_eq!(file_ids(db, "sum_1").unwrap(), ["file_1"], "{engine}");
            let dag = crate::store::dag::read(db, 1).unwrap();
            assert_eq!(dag[0].inputs, ["sum_1", "sum_2"], "{engine}");
            assert_eq!(dag[0].messages.count, 4, "{engine}");
            let versions: Vec<(i64, String, String)> = db
                .query_map(
                    "SELECT version, reason, template_name FROM lcm_native_summary_versions WHERE summary_id = ?1",
                    params!["sum_3"],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
                )
                .unwrap();
            assert_eq!(versions, [(1, "compaction".into(), "leaf.tmpl".into())], "{engine}");
            // A second write of the same id is refused whole.
            assert!(
                insert(db, flags, 1, "2026-11-26 09:02:00", &leaves[..1]).is_err(),
                "{engine}"
            );

            // A page, newest first, with the page's fidelity scores read alone.
            let page = |depth, offset, limit| {
                let filter = Listing {
                    depth,
                    newest_first: true,
                    offset,
                    limit,
                    ids: None,
                };
                let rows = list(db, 1, filter).unwrap();
                rows.into_iter()
                    .map(|r| (r.fields.summary_id, r.fidelity))
                    .collect::<Vec<_>>()
            };
            let scored = |id: &str| (id.to_string(), Some(0.75));
            assert_eq!(page(None, 0, Some(2)), [scored("sum_3"), scored("sum_2")], "{engine}");
            assert_eq!(page(None, 2, Some(2)), [scored("sum_1")], "{engine}");
            assert_eq!(page(Some(0), 1, Some(5)), [scored("sum_1")], "{engine}");
            assert_eq!(page(None, 3, Some(2)), [], "{engine}");
            let wanted = ["sum_2".to_string(), "sum_3".to_string()];
            let only = Listing {
                ids: Some(&wanted),
                ..Default::default()
            };
            let ids: Vec<String> = list(db, 1, only)
                .unwrap()
                .into_iter()
                .map(|r| r.fields.summary_id)
                .collect();
            assert_eq!(ids, ["sum_2", "sum_3"], "{engine}");
        });
    }
}
