//! Moving a database between SQLite and PostgreSQL (either way, or within one engine):
//! every row of every table, ids, lineage and counters (`sqlite_sequence` ↔ identity
//! sequences) as they are, verified by a per-table digest on both sides.
//!
//! The source is read in one snapshot (a running gateway may keep writing to it). The target
//! must be new (a file that does not exist, an empty or missing schema). Rows go in keyed
//! batches, each committed together with the copy's progress, so a copy that is killed or
//! loses its connection resumes after the last batch committed when run again; until it
//! completes, the target holds `lcm_native_copy` and lcm-native refuses to open it. A resumed
//! copy first checks that the source still has the digests it started from (else E_STALE:
//! the source changed; remove the target and copy again).

mod catalog;
mod digest;
mod pg_side;
mod sqlite_side;

use crate::api::{CopyOptions, CopyReport, SequenceValue};
use std::collections::BTreeMap;
use std::time::Instant;

use rusqlite::types::Value;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::error::{LcmError, Result};
pub(crate) use catalog::SQLITE_SCHEMA_TABLE;
use catalog::{Catalog, SchemaEntry, TableSpec};

/// One end of a copy.
trait Side {
    fn describe(&self) -> String;
    /// The database's schema entries (sqlite_master's rows), in creation order.
    fn schema(&self) -> Result<Vec<SchemaEntry>>;
    /// Starts the read snapshot the whole copy reads from (source).
    fn begin_snapshot(&mut self) -> Result<()>;
    /// Up to `limit` rows after `after` in key order (a table without a key: all of it).
    fn read_batch(&self, table: &TableSpec, after: Option<&[Value]>, limit: usize) -> Result<Vec<Vec<Value>>>;
    fn sequences(&self, catalog: &Catalog) -> Result<Vec<(String, i64)>>;
    /// Target: makes this copy the only one writing it, until it ends (E_BUSY otherwise).
    fn claim(&mut self) -> Result<()> {
        Ok(())
    }
    /// Target: new, an unfinished copy (its source record and per-table progress), or taken.
    fn state(&self) -> Result<TargetState>;
    /// Target: creates the tables (not yet the indexes) and records the source.
    fn create(&mut self, catalog: &Catalog, source_state: &str) -> Result<()>;
    /// Target: inserts `rows` and records `progress` for the table, in one transaction.
    fn write_batch(&mut self, table: &TableSpec, rows: &[Vec<Value>], progress: &str) -> Result<()>;
    fn progress(&self) -> Result<Vec<(String, String)>>;
    /// Target: indexes, rebuilt full-text rows, triggers, counters; drops the progress.
    fn finish(&mut self, catalog: &Catalog, sequences: &[(String, i64)]) -> Result<()>;
}

enum TargetState {
    Empty,
    Unfinished(String),
    Holds(String),
}

/// A table's progress, as recorded with each batch.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Progress {
    rows: u64,
    last_key: Option<Vec<serde_json::Value>>,
    done: bool,
}

const DEFAULT_BATCH_ROWS: u32 = 2000;

fn open(location: &str, schema: Option<&str>, busy_timeout_ms: i64, source: bool) -> Result<Box<dyn Side>> {
    if crate::pg::is_url(location) {
        let l = crate::pg::Location::parse(location, schema)?;
        return Ok(Box::new(pg_side::PgSide::open(&l)?));
    }
    if schema.is_some() {
        return Err(LcmError::invalid_input(format!(
            "a schema was given for {location}, which is a SQLite file, not a postgres:// URL"
        )));
    }
    Ok(Box::new(if source {
        sqlite_side::SqliteSide::source(location, busy_timeout_ms)?
    } else {
        sqlite_side::SqliteSide::target(location, busy_timeout_ms)?
    }))
}

/// Copies `options.from` into `options.to`; see the module's documentation.
pub(crate) fn run(options: CopyOptions) -> Result<CopyReport> {
    let started = Instant::now();
    let batch_rows = options.batch_rows.unwrap_or(DEFAULT_BATCH_ROWS);
    if !(1..=100_000).contains(&batch_rows) {
        return Err(LcmError::invalid_input(format!(
            "options.batchRows: must be from 1 to 100000, got {batch_rows}"
        )));
    }
    let batch_rows = batch_rows as usize;
    let busy = options.busy_timeout_ms.unwrap_or(5000);
    let to_pg = crate::pg::is_url(&options.to);
    if !to_pg && std::path::Path::new(&options.to).exists() && !crate::pg::is_url(&options.from) {
        let same = std::fs::canonicalize(&options.to).ok() == std::fs::canonicalize(&options.from).ok();
        if same {
            return Err(LcmError::invalid_input(
                "from and to are the same file; nothing was copied",
            ));
        }
    }
    let source = open(&options.from, options.from_schema.as_deref(), busy, true)?;
    let target = open(&options.to, options.to_schema.as_deref(), busy, false)?;
    copy_between(source, target, to_pg, batch_rows, options.stop_after_batches, started)
}

/// Makes lcm-native's tables, indexes and triggers in the empty PostgreSQL schema `schema` of
/// `to`: the current schema as the migration describes it (`db::migrate::current_in_memory`,
/// no file), copied across as `copy` makes it, so the schema can be copied back to a file at
/// any time. The caller holds the schema's setup lock.
pub(crate) fn create_schema(to: &str, schema: &str) -> Result<()> {
    let source: Box<dyn Side> = Box::new(sqlite_side::SqliteSide::current_schema()?);
    let location = crate::pg::Location::parse(to, Some(schema))?;
    let target: Box<dyn Side> = Box::new(pg_side::PgSide::open(&location)?.under_setup_lock());
    let batch_rows = DEFAULT_BATCH_ROWS as usize;
    copy_between(source, target, true, batch_rows, None, Instant::now()).map(|_| ())
}

/// The copy itself, from an opened source into an opened target.
fn copy_between(
    mut source: Box<dyn Side>,
    mut target: Box<dyn Side>,
    to_pg: bool,
    batch_rows: usize,
    stop_after_batches: Option<usize>,
    started: Instant,
) -> Result<CopyReport> {
    if source.describe() == target.describe() {
        return Err(LcmError::invalid_input(format!(
            "from and to are the same database ({}); nothing was copied",
            source.describe()
        )));
    }
    let catalog = Catalog::new(source.schema()?)?;
    source.begin_snapshot()?;

    // The source's digests (and, for PostgreSQL, a check that every value fits) before
    // anything is written.
    let mut digests = Vec::new();
    for table in &catalog.tables {
        let mut collector = digest::Collector::default();
        for_each_batch(source.as_ref(), table, None, batch_rows, |rows| {
            for row in rows {
                if to_pg {
                    check_fits(table, row)?;
                }
                collector.add(row);
            }
            Ok(())
        })?;
        digests.push(collector.finish(&table.name));
    }
    let sequences = source.sequences(&catalog)?;
    let source_state = json!({
        "source": source.describe(),
        "tables": digests,
        "sequences": sequences,
    });

    target.claim()?;
    let resumed = match target.state()? {
        TargetState::Empty => {
            target.create(&catalog, &source_state.to_string())?;
            false
        }
        TargetState::Unfinished(stored) => {
            let stored: serde_json::Value = serde_json::from_str(&stored).unwrap_or_default();
            if stored.get("tables") != source_state.get("tables")
                || stored.get("sequences") != source_state.get("sequences")
            {
                return Err(LcmError::Stale {
                    conversation_id: 0,
                    message: format!(
                        "{} holds an unfinished copy of a different state of the source (the source changed since that copy began, or it came from another database): remove {} and copy again",
                        target.describe(),
                        target.describe()
                    ),
                });
            }
            true
        }
        TargetState::Holds(what) => {
            return Err(LcmError::invalid_input(format!(
                "{what}; copy writes only into a new SQLite file or an empty PostgreSQL schema. Nothing was written."
            )))
        }
    };

    let mut progress: BTreeMap<String, Progress> = target
        .progress()?
        .into_iter()
        .filter_map(|(item, value)| {
            let table = item.strip_prefix("table:")?.to_string();
            Some((table, serde_json::from_str(&value).ok()?))
        })
        .collect();
    let mut rows_copied = 0u64;
    let mut batches = 0usize;
    for table in &catalog.tables {
        let p = progress.entry(table.name.clone()).or_default();
        while !p.done {
            let after = p
                .last_key
                .as_ref()
                .map(|k| k.iter().map(json_to_value).collect::<Vec<_>>());
            let rows = source.read_batch(table, after.as_deref(), batch_rows)?;
            p.rows += rows.len() as u64;
            p.done = table.key.is_empty() || rows.len() < batch_rows;
            if let Some(last) = rows.last() {
                p.last_key = Some(table.key.iter().map(|i| value_to_json(&last[*i])).collect());
            }
            let record = serde_json::to_string(&*p).expect("progress serializes");
            target.write_batch(table, &rows, &record)?;
            rows_copied += rows.len() as u64;
            batches += 1;
            if stop_after_batches == Some(batches) {
                return Err(LcmError::Aborted(format!("stopped after {batches} batches (test)")));
            }
        }
    }

    // The target as written, against the source's digests.
    for (table, want) in catalog.tables.iter().zip(&digests) {
        let mut collector = digest::Collector::default();
        for_each_batch(target.as_ref(), table, None, batch_rows, |rows| {
            rows.iter().for_each(|r| collector.add(r));
            Ok(())
        })?;
        let got = collector.finish(&table.name);
        if &got != want {
            return Err(LcmError::Internal(format!(
                "the copy of table {} does not match its source ({} rows, {} there; digests {} and {}); the target is left unfinished",
                table.name, got.rows, want.rows, got.sha256, want.sha256
            )));
        }
    }
    target.finish(&catalog, &sequences)?;
    let written = target.sequences(&catalog)?;
    if written != sequences {
        return Err(LcmError::Internal(format!(
            "the copy's counters {written:?} differ from the source's {sequences:?}"
        )));
    }

    let total: u64 = digests.iter().map(|d| d.rows).sum();
    Ok(CopyReport {
        summary: format!(
            "{} {} rows in {} tables from {} to {}; every table's digest matches",
            if resumed { "finished copying" } else { "copied" },
            total,
            digests.len(),
            source.describe(),
            target.describe()
        ),
        from: source.describe(),
        to: target.describe(),
        resumed,
        rows_copied,
        tables: digests,
        sequences: sequences
            .into_iter()
            .map(|(table, value)| SequenceValue { table, value })
            .collect(),
        duration_ms: started.elapsed().as_secs_f64() * 1000.0,
    })
}

/// Every row of `table`, in key-ordered batches.
fn for_each_batch(
    side: &dyn Side,
    table: &TableSpec,
    mut after: Option<Vec<Value>>,
    batch_rows: usize,
    mut f: impl FnMut(&[Vec<Value>]) -> Result<()>,
) -> Result<()> {
    loop {
        let rows = side.read_batch(table, after.as_deref(), batch_rows)?;
        f(&rows)?;
        if table.key.is_empty() || rows.len() < batch_rows {
            return Ok(());
        }
        let last = rows.last().expect("a full batch has a last row");
        after = Some(table.key.iter().map(|i| last[*i].clone()).collect());
    }
}

/// A value PostgreSQL's column cannot hold as it is (SQLite's typing is per value) is refused
/// before anything is written, naming the row, never converted.
fn check_fits(table: &TableSpec, row: &[Value]) -> Result<()> {
    for (i, value) in row.iter().enumerate() {
        let pg = crate::pg::ddl::pg_type(&table.declared[i]).unwrap_or("?");
        let fits = match value {
            Value::Null => true,
            Value::Integer(_) => pg == "BIGINT",
            Value::Real(_) => pg == "DOUBLE PRECISION",
            Value::Text(s) => pg == "TEXT" && !s.contains('\0'),
            Value::Blob(_) => pg == "BYTEA",
        };
        if !fits {
            let key: Vec<String> = table
                .key
                .iter()
                .map(|k| format!("{}={}", table.columns[*k], show(&row[*k])))
                .collect();
            let what = match value {
                Value::Text(s) if s.contains('\0') => {
                    "text with a NUL character (PostgreSQL's text cannot hold one)".to_string()
                }
                v => format!("a {} value", crate::pg::value::storage_class(v)),
            };
            return Err(LcmError::invalid_input(format!(
                "{}.{} (row {}) holds {what}, which its PostgreSQL column ({pg}) cannot hold as it is; nothing was copied",
                table.name,
                table.columns[i],
                if key.is_empty() { "without a key".to_string() } else { key.join(", ") }
            )));
        }
    }
    Ok(())
}

fn show(v: &Value) -> String {
    match v {
        Value::Text(s) => format!("'{s}'"),
        other => format!("{}", value_to_json(other)),
    }
}

fn value_to_json(v: &Value) -> serde_json::Value {
    match v {
        Value::Null => serde_json::Value::Null,
        Value::Integer(i) => json!(i),
        Value::Real(f) => json!({ "real": f }),
        Value::Text(s) => json!(s),
        Value::Blob(b) => json!({ "hex": b.iter().map(|x| format!("{x:02x}")).collect::<String>() }),
    }
}

fn json_to_value(v: &serde_json::Value) -> Value {
    match v {
        serde_json::Value::Null => Value::Null,
        serde_json::Value::Number(n) => n.as_i64().map(Value::Integer).unwrap_or(Value::Null),
        serde_json::Value::String(s) => Value::Text(s.clone()),
        serde_json::Value::Object(o) => {
            if let Some(f) = o.get("real").and_then(|f| f.as_f64()) {
                Value::Real(f)
            } else {
                let hex = o.get("hex").and_then(|h| h.as_str()).unwrap_or_default();
                Value::Blob(
                    (0..hex.len() / 2)
                        .filter_map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok())
                        .collect(),
                )
            }
        }
        _ => Value::Null,
    }
}

#[cfg(test)]
mod tests;
