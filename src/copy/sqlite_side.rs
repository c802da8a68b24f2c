//! A SQLite file as a copy's source or target.

use std::path::Path;

use rusqlite::types::Value;
use rusqlite::{params_from_iter, Connection, OpenFlags, OptionalExtension};

use super::catalog::{Catalog, SchemaEntry, TableSpec, STATE_TABLE};
use super::{Side, TargetState};
use crate::db::schema::FTS_TABLES;
use crate::error::{LcmError, Result};
use crate::pg::quote_ident;

pub(crate) struct SqliteSide {
    path: String,
    conn: Connection,
}

impl SqliteSide {
    /// The source: opened read-only; its schema must be lcm-native's current one.
    pub(crate) fn source(path: &str, busy_timeout_ms: i64) -> Result<SqliteSide> {
        let conn = crate::db::open_read_only(path, busy_timeout_ms, false)?;
        crate::db::migrate::check_current(&conn, path).map_err(|e| match e {
            LcmError::Schema { .. } => LcmError::schema(
                path,
                format!(
                    "{path} needs a schema upgrade before it can be copied: run `lcm-native migrate --db {path}` (or open it once with lcm-native). Nothing was copied."
                ),
            ),
            other => other,
        })?;
        Ok(SqliteSide {
            path: path.to_string(),
            conn,
        })
    }

    /// lcm-native's current schema with no rows, in memory: the source `create_schema` copies.
    pub(crate) fn current_schema() -> Result<SqliteSide> {
        Ok(SqliteSide {
            path: "lcm-native's empty schema".into(),
            conn: crate::db::migrate::current_in_memory()?,
        })
    }

    /// The target: a new file, or one an interrupted copy left.
    pub(crate) fn target(path: &str, busy_timeout_ms: i64) -> Result<SqliteSide> {
        if let Some(dir) = Path::new(path).parent().filter(|d| !d.as_os_str().is_empty()) {
            if !dir.is_dir() {
                return Err(LcmError::io(path, format!("the directory of {path} does not exist")));
            }
        }
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| LcmError::from(e).with_path(path))?;
        conn.busy_timeout(std::time::Duration::from_millis(busy_timeout_ms.max(0) as u64))?;
        conn.pragma_update(None, "foreign_keys", false)?;
        conn.pragma_update(None, "journal_mode", "wal")?;
        Ok(SqliteSide {
            path: path.to_string(),
            conn,
        })
    }

    fn master(&self) -> Result<Vec<SchemaEntry>> {
        let mut stmt = self
            .conn
            .prepare("SELECT type, name, tbl_name, sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY rowid")?;
        let rows = stmt
            .query_map([], |r| {
                Ok(SchemaEntry {
                    kind: r.get(0)?,
                    name: r.get(1)?,
                    table: r.get(2)?,
                    sql: r.get(3)?,
                })
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(rows)
    }
}

impl Side for SqliteSide {
    fn describe(&self) -> String {
        self.path.clone()
    }

    fn schema(&self) -> Result<Vec<SchemaEntry>> {
        self.master()
    }

    fn begin_snapshot(&mut self) -> Result<()> {
        // One read transaction for the whole copy: every table from the same moment, whatever a
        // running gateway commits meanwhile.
        self.conn.execute_batch("BEGIN")?;
        self.conn
            .query_row("SELECT count(*) FROM sqlite_master", [], |_| Ok(()))?;
        Ok(())
    }

    fn read_batch(&self, table: &TableSpec, after: Option<&[Value]>, limit: usize) -> Result<Vec<Vec<Value>>> {
        let mut stmt = self.conn.prepare(&table.batch_sql(after.is_some(), limit, false))?;
        let mut rows = stmt.query(params_from_iter(after.unwrap_or_default().iter()))?;
        let mut out = Vec::new();
        while let Some(row) = rows.next()? {
            let mut values = Vec::with_capacity(table.columns.len());
            for i in 0..table.columns.len() {
                // Text that is not UTF-8 is refused: neither side can hold it as text.
                values.push(Value::try_from(row.get_ref(i)?).map_err(|_| {
                    LcmError::invalid_input(format!(
                        "{}.{} holds text that is not UTF-8",
                        table.name, table.columns[i]
                    ))
                })?);
            }
            out.push(values);
        }
        Ok(out)
    }

    fn sequences(&self, _: &Catalog) -> Result<Vec<(String, i64)>> {
        if !crate::db::schema::has_table(&self.conn, "sqlite_sequence")? {
            return Ok(Vec::new());
        }
        let mut stmt = self
            .conn
            .prepare("SELECT name, seq FROM sqlite_sequence ORDER BY name")?;
        let rows = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<rusqlite::Result<_>>()?;
        Ok(rows)
    }

    fn state(&self) -> Result<TargetState> {
        if crate::db::schema::has_table(&self.conn, STATE_TABLE)? {
            let state: Option<String> = self
                .conn
                .query_row(
                    &format!("SELECT value FROM {STATE_TABLE} WHERE item = 'source'"),
                    [],
                    |r| r.get(0),
                )
                .optional()?;
            return Ok(TargetState::Unfinished(state.unwrap_or_default()));
        }
        let n: i64 = self
            .conn
            .query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0))?;
        Ok(if n == 0 {
            TargetState::Empty
        } else {
            TargetState::Holds(format!("{} already holds a database", self.path))
        })
    }

    fn create(&mut self, catalog: &Catalog, source_state: &str) -> Result<()> {
        let tx = self.conn.transaction()?;
        for e in catalog.entries.iter().filter(|e| e.kind == "table") {
            tx.execute_batch(&e.sql)?;
        }
        tx.execute_batch(&format!(
            "CREATE TABLE {STATE_TABLE} (item TEXT PRIMARY KEY, value TEXT NOT NULL)"
        ))?;
        tx.execute(
            &format!("INSERT INTO {STATE_TABLE} (item, value) VALUES ('source', ?1)"),
            [source_state],
        )?;
        tx.commit()?;
        Ok(())
    }

    fn write_batch(&mut self, table: &TableSpec, rows: &[Vec<Value>], progress: &str) -> Result<()> {
        let tx = self.conn.transaction()?;
        {
            let mut insert = tx.prepare(&table.insert_sql(false))?;
            for row in rows {
                insert.execute(params_from_iter(row.iter()))?;
            }
        }
        tx.execute(
            &format!("INSERT OR REPLACE INTO {STATE_TABLE} (item, value) VALUES (?1, ?2)"),
            [format!("table:{}", table.name), progress.to_string()],
        )?;
        tx.commit()?;
        Ok(())
    }

    fn progress(&self) -> Result<Vec<(String, String)>> {
        let mut stmt = self.conn.prepare(&format!(
            "SELECT item, value FROM {STATE_TABLE} WHERE item LIKE 'table:%'"
        ))?;
        let rows = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<rusqlite::Result<_>>()?;
        Ok(rows)
    }

    fn finish(&mut self, catalog: &Catalog, sequences: &[(String, i64)]) -> Result<()> {
        let tx = self.conn.transaction()?;
        for e in catalog.indexes() {
            tx.execute_batch(&e.sql)?;
        }
        // Full-text rows are not copied: rebuilt from the rows they index.
        for e in catalog.entries.iter().filter(|e| e.is_virtual()) {
            if let Some(fts) = FTS_TABLES.iter().find(|f| f.name == e.name) {
                tx.execute_batch(&format!("DELETE FROM {}", quote_ident(fts.name)))?;
                tx.execute_batch(fts.seed)?;
            }
        }
        for e in catalog
            .entries
            .iter()
            .filter(|e| e.kind == "trigger" || e.kind == "view")
        {
            tx.execute_batch(&e.sql)?;
        }
        if crate::db::schema::has_table(&tx, "sqlite_sequence")? {
            tx.execute("DELETE FROM sqlite_sequence", [])?;
            for (name, seq) in sequences {
                tx.execute(
                    "INSERT INTO sqlite_sequence (name, seq) VALUES (?1, ?2)",
                    rusqlite::params![name, seq],
                )?;
            }
        }
        let broken: Option<String> = tx
            .query_row("SELECT \"table\" FROM pragma_foreign_key_check LIMIT 1", [], |r| {
                r.get(0)
            })
            .optional()?;
        if let Some(table) = broken {
            return Err(LcmError::Internal(format!(
                "the copy's rows in {table} reference rows that are not there; the copy is left unfinished"
            )));
        }
        tx.execute_batch(&format!("DROP TABLE {STATE_TABLE}"))?;
        tx.commit()?;
        self.conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")?;
        Ok(())
    }
}
