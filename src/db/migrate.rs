//! Schema migration: creates the schema on a new file and upgrades, in place and in one
//! transaction, the three eras of lossless-claw databases (legacy pre-depth, seed, 0.15.3).
//!
//! The migration first inspects the file without writing. When nothing is missing it returns
//! at once (`upToDate`), so a second run is cheap. Otherwise it takes the write lock, inspects
//! again (another process may have migrated meanwhile), and applies what is missing. Tables
//! and columns it does not know are never touched.
//!
//! Backfills are versioned in `lcm_migration_state` under the plugin's own step names
//! (`backfillSummaryDepths` 1, `backfillSummaryMetadata` 1), so after either implementation
//! ran them the other skips them. Every backfill is set-based SQL: no step loads all rows
//! into memory, whatever the size of the database.

use std::collections::HashSet;
use std::time::Instant;

use rusqlite::{params, Connection, OptionalExtension};
use serde::Serialize;

use super::schema::{
    FtsTable, ADDED_COLUMNS, FTS_SHADOW_SUFFIXES, FTS_TABLES, INDEXES, NATIVE_SCHEMA_STEP, NATIVE_SCHEMA_VERSION,
    READ_OPTIONAL_TABLES, TABLES,
};
use super::totals;
use crate::error::{LcmError, Result};
use inspect::{has_trigram, FtsState, Inspection};

mod inspect;

pub(crate) const STEP_DEPTHS: (&str, i64) = ("backfillSummaryDepths", 1);
pub(crate) const STEP_METADATA: (&str, i64) = ("backfillSummaryMetadata", 1);
/// lcm-native's own one-time step: index messages and summaries the FTS tables are missing
/// (the seed plugin created `messages_fts` empty and indexed summaries best-effort).
pub(crate) const STEP_FTS_FILL: (&str, i64) = ("lcmNativeFtsBackfill", 1);
const STEP_SCHEMA: (&str, i64) = (NATIVE_SCHEMA_STEP, NATIVE_SCHEMA_VERSION);

/// What `migrate` (or `LcmEngine.open`) found and did.
#[derive(Debug, Clone, Serialize, Default)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct MigrationReport {
    pub db_path: String,
    /// What the file was: `new`, `legacy` (pre-depth), `seed`, `lossless-claw` (0.15 era, with
    /// `lcm_migration_state`) or `lcm-native`.
    #[cfg_attr(
        test,
        ts(type = "\"new\" | \"legacy\" | \"seed\" | \"lossless-claw\" | \"lcm-native\"")
    )]
    pub era: String,
    /// True when nothing had to be done (and nothing was written).
    pub up_to_date: bool,
    pub tables_created: Vec<String>,
    pub columns_added: Vec<String>,
    pub indexes_created: Vec<String>,
    pub backfills: Vec<BackfillReport>,
    pub fts_rebuilt: Vec<String>,
    /// True when the live-context totals and their triggers were (re)installed and recomputed.
    pub live_totals_rebuilt: bool,
    pub steps_recorded: Vec<String>,
    /// Batches of summaries lossless-claw 1.x had prepared but not published, taken over at
    /// open (`store::pending`): their finished leaf summaries published, the rest dropped so
    /// that lcm-native compacts those messages itself.
    pub pending_batches_taken_over: i64,
    /// Finished leaf summaries of those batches published as lossless-claw would have.
    pub pending_summaries_published: i64,
    /// Redactions whose scrub of the file did not complete (killed, a full disk, a WAL held
    /// open): the replaced text may still be in free pages or the WAL. `redact` with no
    /// pattern (`lcm-native redact --finish`) finishes them.
    pub scrubs_pending: i64,
    pub duration_ms: f64,
    /// One line saying what happened (for logs).
    pub summary: String,
}

/// One data step of a migration.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct BackfillReport {
    pub step: String,
    pub version: i64,
    /// Rows the step wrote.
    pub rows: i64,
}

/// Whether `migrate` would find nothing to do (a file too new for this version counts as
/// not up to date: opening it fails anyway).
pub(crate) fn up_to_date(conn: &Connection) -> Result<bool> {
    let ins = Inspection::read(conn, has_trigram())?;
    Ok(ins.check_version().is_ok() && ins.nothing_to_do(false))
}

/// For a read-only open: inspects the file without writing and accepts it only when no
/// migration step is missing (queries rely on the current schema). Otherwise E_SCHEMA, saying
/// how to upgrade it.
pub(crate) fn check_current(conn: &Connection, db_path: &str) -> Result<MigrationReport> {
    let started = Instant::now();
    let ins = Inspection::read(conn, has_trigram())?;
    ins.check_version().map_err(|e| e.with_path(db_path))?;
    let era = ins.era();
    if !ins.nothing_to_do(true) {
        let what = match era {
            "new" => "is empty (no lcm-native or lossless-claw schema)".to_string(),
            era => format!("needs a schema upgrade (it is a {era} database)"),
        };
        return Err(LcmError::schema(
            db_path,
            format!(
                "the database {db_path} {what}, and readOnly never writes; open it without readOnly, \
             or run migrate(dbPath) once, which upgrades it in place. Nothing was changed."
            ),
        ));
    }
    Ok(MigrationReport {
        db_path: db_path.to_string(),
        era: era.to_string(),
        up_to_date: true,
        duration_ms: started.elapsed().as_secs_f64() * 1000.0,
        summary: "opened read-only; schema is up to date; nothing was done".into(),
        ..Default::default()
    })
}

/// Migrates the database behind `conn` (which must be open read-write; see
/// [`super::open_connection`]). `conn` is left in WAL mode.
/// lcm-native's current schema, made by the migration's own steps in a new in-memory
/// database (no file, no WAL): the description a PostgreSQL schema is made from
/// (`copy::create_schema`).
pub(crate) fn current_in_memory() -> Result<Connection> {
    let mut conn = Connection::open_in_memory()?;
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    let now = Inspection::read(&tx, has_trigram())?;
    apply(&tx, &now, &mut MigrationReport::default())?;
    tx.commit()?;
    Ok(conn)
}

pub(crate) fn migrate(conn: &mut Connection, db_path: &str) -> Result<MigrationReport> {
    let started = Instant::now();
    let trigram = has_trigram();
    let first = Inspection::read(conn, trigram)?;
    first.check_version().map_err(|e| e.with_path(db_path))?;
    let mut report = MigrationReport {
        db_path: db_path.to_string(),
        era: first.era().to_string(),
        ..Default::default()
    };
    super::configure(conn)?;
    if first.nothing_to_do(false) {
        report.up_to_date = true;
        report.duration_ms = started.elapsed().as_secs_f64() * 1000.0;
        report.summary = "schema is up to date; nothing was done".into();
        return Ok(report);
    }

    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    // Inspect again under the write lock: another process may have migrated in between.
    let now = Inspection::read(&tx, trigram)?;
    now.check_version()?;
    apply(&tx, &now, &mut report)?;
    tx.commit()?;

    report.up_to_date = false;
    report.duration_ms = started.elapsed().as_secs_f64() * 1000.0;
    report.summary = summarize(&report);
    Ok(report)
}

fn apply(tx: &Connection, ins: &Inspection, report: &mut MigrationReport) -> Result<()> {
    for (table, ddl) in TABLES {
        if !ins.tables.contains(*table) {
            tx.execute_batch(ddl)?;
            report.tables_created.push(table.to_string());
        }
    }
    for (table, column, decl) in ADDED_COLUMNS {
        // Tables created just now already have every column.
        if ins.tables.contains(*table) && !ins.has_column(table, column) {
            tx.execute_batch(&format!("ALTER TABLE {table} ADD COLUMN {column} {decl}"))?;
            report.columns_added.push(format!("{table}.{column}"));
        }
    }
    if !ins.has_step(STEP_DEPTHS) {
        let rows = backfill_depths(tx)?;
        record_step(tx, STEP_DEPTHS, report, rows)?;
    }
    if !ins.has_step(STEP_METADATA) {
        let rows = backfill_metadata(tx)?;
        record_step(tx, STEP_METADATA, report, rows)?;
    }
    for (name, ddl) in INDEXES {
        if !ins.indexes.contains(*name) {
            tx.execute_batch(ddl)?;
            report.indexes_created.push(name.to_string());
        }
    }
    let mut rebuilt = HashSet::new();
    for (t, state) in &ins.fts {
        if *state != FtsState::Ok {
            rebuild_fts(tx, t)?;
            rebuilt.insert(t.name);
            report.fts_rebuilt.push(match state {
                FtsState::Missing => format!("{} (created)", t.name),
                FtsState::Broken(why) => format!("{} (rebuilt: {why})", t.name),
                FtsState::Ok => unreachable!(),
            });
        }
    }
    if !ins.live_totals_ok() {
        // Reinstall all of them and recompute: totals without their triggers are not trusted.
        tx.execute_batch(totals::DDL)?;
        for (name, ddl) in totals::triggers() {
            tx.execute_batch(&format!("DROP TRIGGER IF EXISTS {name}"))?;
            tx.execute_batch(&ddl)?;
        }
        tx.execute_batch(totals::REBUILD)?;
        report.live_totals_rebuilt = true;
    }
    if !ins.has_step(STEP_FTS_FILL) {
        let mut rows = 0;
        for (t, _) in &ins.fts {
            if !rebuilt.contains(t.name) {
                rows += fill_missing_fts(tx, t)?;
            }
        }
        record_step(tx, STEP_FTS_FILL, report, rows)?;
    }
    if !ins.has_step(STEP_SCHEMA) {
        insert_step(tx, STEP_SCHEMA)?;
        report
            .steps_recorded
            .push(format!("{}@{}", STEP_SCHEMA.0, STEP_SCHEMA.1));
    }
    Ok(())
}

fn insert_step(tx: &Connection, (name, version): (&str, i64)) -> Result<()> {
    tx.execute(
        "INSERT INTO lcm_migration_state (step_name, algorithm_version, completed_at)
         VALUES (?1, ?2, datetime('now'))
         ON CONFLICT (step_name, algorithm_version) DO UPDATE SET completed_at = excluded.completed_at",
        params![name, version],
    )?;
    Ok(())
}

fn record_step(tx: &Connection, step: (&str, i64), report: &mut MigrationReport, rows: i64) -> Result<()> {
    insert_step(tx, step)?;
    report.steps_recorded.push(format!("{}@{}", step.0, step.1));
    report.backfills.push(BackfillReport {
        step: step.0.to_string(),
        version: step.1,
        rows,
    });
    Ok(())
}

/// Depth of every summary from the DAG (lossless-claw's `backfillSummaryDepths` v1): leaves
/// are 0; a condensed node is 1 + the deepest of its inputs in the same conversation, resolved
/// round by round; a node without inputs, or whose inputs never resolve (cycles, inputs in
/// another conversation, dangling ids), gets 1. Returns the number of rows changed.
fn backfill_depths(tx: &Connection) -> Result<i64> {
    tx.execute_batch(
        "DROP TABLE IF EXISTS temp.lcm_depth;
         CREATE TEMP TABLE lcm_depth (summary_id TEXT PRIMARY KEY, depth INTEGER NOT NULL) WITHOUT ROWID;
         INSERT INTO temp.lcm_depth (summary_id, depth) SELECT summary_id, 0 FROM summaries WHERE kind = 'leaf';
         INSERT INTO temp.lcm_depth (summary_id, depth)
           SELECT s.summary_id, 1 FROM summaries s
           WHERE s.kind = 'condensed'
             AND NOT EXISTS (SELECT 1 FROM summary_parents sp WHERE sp.summary_id = s.summary_id);",
    )?;
    loop {
        let resolved = tx.execute(
            "INSERT INTO temp.lcm_depth (summary_id, depth)
             SELECT s.summary_id, 1 + MAX(d.depth)
             FROM summaries s
             JOIN summary_parents sp ON sp.summary_id = s.summary_id
             LEFT JOIN summaries p ON p.summary_id = sp.parent_summary_id AND p.conversation_id = s.conversation_id
             LEFT JOIN temp.lcm_depth d ON d.summary_id = p.summary_id
             WHERE s.kind = 'condensed'
               AND NOT EXISTS (SELECT 1 FROM temp.lcm_depth x WHERE x.summary_id = s.summary_id)
             GROUP BY s.summary_id
             HAVING COUNT(*) = COUNT(d.depth)",
            [],
        )?;
        if resolved == 0 {
            break;
        }
    }
    tx.execute(
        "INSERT INTO temp.lcm_depth (summary_id, depth)
         SELECT summary_id, 1 FROM summaries s
         WHERE NOT EXISTS (SELECT 1 FROM temp.lcm_depth x WHERE x.summary_id = s.summary_id)",
        [],
    )?;
    let changed = tx.execute(
        "UPDATE summaries SET depth = d.depth
         FROM temp.lcm_depth d
         WHERE d.summary_id = summaries.summary_id AND summaries.depth IS NOT d.depth",
        [],
    )?;
    tx.execute_batch("DROP TABLE temp.lcm_depth")?;
    Ok(changed as i64)
}

/// Time ranges, descendant counts and token sums (lossless-claw's `backfillSummaryMetadata`
/// v1). Leaves take the min/max `created_at` and the token sum of their messages (falling
/// back to their own `created_at`); condensed nodes, depth by depth, take the min/max and sums
/// of their inputs. Times are parsed as UTC and written as `YYYY-MM-DDTHH:MM:SS.sssZ`.
fn backfill_metadata(tx: &Connection) -> Result<i64> {
    const ISO: &str = "'%Y-%m-%dT%H:%M:%fZ'";
    let mut changed = tx.execute(
        &format!(
            "WITH ranges AS (
               SELECT sm.summary_id AS summary_id,
                      MIN(m.created_at) AS lo, MAX(m.created_at) AS hi,
                      COALESCE(SUM(m.token_count), 0) AS tokens
               FROM summary_messages sm JOIN messages m ON m.message_id = sm.message_id
               GROUP BY sm.summary_id)
             UPDATE summaries SET
               earliest_at = COALESCE(strftime({ISO}, r.lo), strftime({ISO}, summaries.created_at)),
               latest_at = COALESCE(strftime({ISO}, r.hi), strftime({ISO}, summaries.created_at)),
               descendant_count = 0,
               descendant_token_count = 0,
               source_message_token_count = COALESCE(r.tokens, 0)
             FROM (SELECT s.summary_id AS summary_id, x.lo AS lo, x.hi AS hi, x.tokens AS tokens
                   FROM summaries s LEFT JOIN ranges x ON x.summary_id = s.summary_id
                   WHERE s.kind = 'leaf') AS r
             WHERE r.summary_id = summaries.summary_id"
        ),
        [],
    )? as i64;
    let max_depth: i64 = tx.query_row(
        "SELECT COALESCE(MAX(depth), 0) FROM summaries WHERE kind = 'condensed'",
        [],
        |r| r.get(0),
    )?;
    for depth in 1..=max_depth {
        changed += tx.execute(
            &format!(
                "WITH agg AS (
                   SELECT sp.summary_id AS summary_id,
                          MIN(p.earliest_at) AS lo, MAX(p.latest_at) AS hi,
                          SUM(MAX(p.descendant_count, 0) + 1) AS dcount,
                          SUM(p.token_count + p.descendant_token_count) AS dtokens,
                          SUM(p.source_message_token_count) AS stokens
                   FROM summary_parents sp
                   JOIN summaries c ON c.summary_id = sp.summary_id
                   JOIN summaries p ON p.summary_id = sp.parent_summary_id
                   WHERE c.kind = 'condensed' AND c.depth = ?1
                     AND p.conversation_id = c.conversation_id AND p.depth < c.depth
                   GROUP BY sp.summary_id)
                 UPDATE summaries SET
                   earliest_at = COALESCE(r.lo, strftime({ISO}, summaries.created_at)),
                   latest_at = COALESCE(r.hi, strftime({ISO}, summaries.created_at)),
                   descendant_count = COALESCE(r.dcount, 0),
                   descendant_token_count = COALESCE(r.dtokens, 0),
                   source_message_token_count = COALESCE(r.stokens, 0)
                 FROM (SELECT s.summary_id AS summary_id, a.lo AS lo, a.hi AS hi, a.dcount AS dcount,
                              a.dtokens AS dtokens, a.stokens AS stokens
                       FROM summaries s LEFT JOIN agg a ON a.summary_id = s.summary_id
                       WHERE s.kind = 'condensed' AND s.depth = ?1) AS r
                 WHERE r.summary_id = summaries.summary_id"
            ),
            params![depth],
        )? as i64;
    }
    Ok(changed)
}

/// Drops a full-text table, including a broken one whose shadow tables are gone.
fn drop_fts(tx: &Connection, name: &str) -> Result<()> {
    if tx.execute_batch(&format!("DROP TABLE IF EXISTS \"{name}\"")).is_ok() {
        return Ok(());
    }
    for suffix in FTS_SHADOW_SUFFIXES {
        tx.execute_batch(&format!("DROP TABLE IF EXISTS \"{name}{suffix}\""))?;
    }
    if tx.execute_batch(&format!("DROP TABLE IF EXISTS \"{name}\"")).is_ok() {
        return Ok(());
    }
    // The virtual table cannot even be connected: remove its schema row directly.
    let still_there: Option<String> = tx
        .query_row(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name = ?1",
            [name],
            |r| r.get(0),
        )
        .optional()?;
    if still_there.is_some() {
        tx.execute_batch("PRAGMA writable_schema = ON")?;
        let res = tx.execute("DELETE FROM sqlite_master WHERE type = 'table' AND name = ?1", [name]);
        tx.execute_batch("PRAGMA writable_schema = OFF")?;
        res?;
    }
    Ok(())
}

fn rebuild_fts(tx: &Connection, t: &FtsTable) -> Result<()> {
    drop_fts(tx, t.name)?;
    for suffix in FTS_SHADOW_SUFFIXES {
        tx.execute_batch(&format!("DROP TABLE IF EXISTS \"{}{suffix}\"", t.name))?;
    }
    tx.execute_batch(t.create)?;
    tx.execute_batch(t.seed)?;
    Ok(())
}

/// Indexes the rows an existing FTS table is missing. Set-based: existing summary ids are
/// collected once into a temporary keyed table, so the check is not quadratic.
fn fill_missing_fts(tx: &Connection, t: &FtsTable) -> Result<i64> {
    let n = match t.name {
        "messages_fts" => tx.execute(
            "INSERT INTO messages_fts(rowid, content)
             SELECT m.message_id, m.content FROM messages m
             WHERE m.content <> '' AND NOT EXISTS (SELECT 1 FROM messages_fts f WHERE f.rowid = m.message_id)",
            [],
        )?,
        name => {
            tx.execute_batch(&format!(
                "DROP TABLE IF EXISTS temp.lcm_fts_ids;
                 CREATE TEMP TABLE lcm_fts_ids (summary_id TEXT PRIMARY KEY) WITHOUT ROWID;
                 INSERT OR IGNORE INTO temp.lcm_fts_ids SELECT summary_id FROM \"{name}\";"
            ))?;
            let n = tx.execute(
                &format!(
                    "INSERT INTO \"{name}\"(summary_id, content)
                     SELECT s.summary_id, s.content FROM summaries s
                     WHERE NOT EXISTS (SELECT 1 FROM temp.lcm_fts_ids i WHERE i.summary_id = s.summary_id)"
                ),
                [],
            )?;
            tx.execute_batch("DROP TABLE temp.lcm_fts_ids")?;
            n
        }
    };
    Ok(n as i64)
}

fn summarize(r: &MigrationReport) -> String {
    let mut parts = Vec::new();
    if !r.tables_created.is_empty() {
        parts.push(format!("created {} table(s)", r.tables_created.len()));
    }
    if !r.columns_added.is_empty() {
        parts.push(format!("added column(s) {}", r.columns_added.join(", ")));
    }
    for b in &r.backfills {
        if b.rows > 0 {
            parts.push(format!("{} v{} updated {} row(s)", b.step, b.version, b.rows));
        }
    }
    if !r.indexes_created.is_empty() {
        parts.push(format!("created {} index(es)", r.indexes_created.len()));
    }
    if !r.fts_rebuilt.is_empty() {
        parts.push(format!("full-text: {}", r.fts_rebuilt.join(", ")));
    }
    if parts.is_empty() {
        parts.push("recorded migration steps".into());
    }
    format!("migrated {} database: {}", r.era, parts.join("; "))
}

#[cfg(test)]
mod tests;
