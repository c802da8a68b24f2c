//! A PostgreSQL schema as a copy's source or target. The tables are SQLite's statements
//! translated (`pg::ddl`); the statements themselves are kept in `lcm_native_sqlite_schema`,
//! so a copy back to SQLite makes the same file, and identity sequences stand for
//! `sqlite_sequence`.

use rusqlite::types::Value;
use tokio_postgres::types::ToSql;

use super::catalog::{Catalog, SchemaEntry, TableSpec, SQLITE_SCHEMA_TABLE, STATE_TABLE};
use super::{Side, TargetState};
use crate::error::{LcmError, Result};
use crate::pg::value::{read, Param};
use crate::pg::{ddl, quote_ident, Conn, Location};

pub(crate) struct PgSide {
    conn: Conn,
    location: Location,
    /// The copy's lock (`claim`), on a connection of its own, held as long as this side.
    claimed: Option<crate::pg::pool::HeldLock>,
    /// The caller holds a lock that keeps other copies and engines out (an engine's setup).
    claimed_by_caller: bool,
}

impl PgSide {
    pub(crate) fn open(location: &Location) -> Result<PgSide> {
        Ok(PgSide {
            conn: location.connect()?,
            location: location.clone(),
            claimed: None,
            claimed_by_caller: false,
        })
    }

    /// This side for a caller that already holds the schema's setup lock: the copy takes no
    /// lock of its own (through a transaction pooler each held lock keeps a server session).
    pub(crate) fn under_setup_lock(mut self) -> PgSide {
        self.claimed_by_caller = true;
        self
    }

    fn schema_exists(&self) -> Result<bool> {
        self.conn.query_one_value(
            "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = $1)",
            &[&self.conn.schema],
        )
    }

    /// `schema.table`, for pg_get_serial_sequence.
    fn qualified(&self, table: &str) -> String {
        format!("{}.{}", quote_ident(&self.conn.schema), quote_ident(table))
    }
}

fn upsert_state(c: &Conn, item: &str, value: &str) -> Result<()> {
    c.execute(
        &format!(
            "INSERT INTO {STATE_TABLE} (item, value) VALUES ($1, $2) ON CONFLICT (item) DO UPDATE SET value = EXCLUDED.value"
        ),
        &[&item, &value],
    )?;
    Ok(())
}

fn identity_of(table: &TableSpec) -> Result<Option<String>> {
    Ok(ddl::table(&table.sql)?.identity)
}

impl Side for PgSide {
    fn describe(&self) -> String {
        self.conn.describe().to_string()
    }

    fn schema(&self) -> Result<Vec<SchemaEntry>> {
        if !self.conn.has_table(SQLITE_SCHEMA_TABLE)? {
            return Err(LcmError::schema(
                self.conn.describe(),
                format!(
                    "{} holds no lcm-native database (no {SQLITE_SCHEMA_TABLE} table); nothing was copied",
                    self.conn.describe()
                ),
            ));
        }
        if self.conn.has_table(STATE_TABLE)? {
            return Err(LcmError::schema(
                self.conn.describe(),
                format!(
                    "{} is an unfinished copy (lcm-native copy was interrupted): run that copy again to finish it",
                    self.conn.describe()
                ),
            ));
        }
        let rows = self.conn.query(
            &format!("SELECT kind, name, tbl_name, sql FROM {SQLITE_SCHEMA_TABLE} ORDER BY position"),
            &[],
        )?;
        Ok(rows
            .iter()
            .map(|r| SchemaEntry {
                kind: r.get(0),
                name: r.get(1),
                table: r.get(2),
                sql: r.get(3),
            })
            .collect())
    }

    fn begin_snapshot(&mut self) -> Result<()> {
        // Left open: the snapshot lasts as long as this side's connection.
        self.conn.begin_open("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
    }

    fn read_batch(&self, table: &TableSpec, after: Option<&[Value]>, limit: usize) -> Result<Vec<Vec<Value>>> {
        let params: Vec<Param> = after.unwrap_or_default().iter().map(Param).collect();
        let refs: Vec<&(dyn ToSql + Sync)> = params.iter().map(|p| p as &(dyn ToSql + Sync)).collect();
        let rows = self.conn.query(&table.batch_sql(after.is_some(), limit, true), &refs)?;
        rows.iter()
            .map(|r| (0..table.columns.len()).map(|i| read(r, i)).collect::<Result<Vec<_>>>())
            .collect()
    }

    fn sequences(&self, catalog: &Catalog) -> Result<Vec<(String, i64)>> {
        let mut out = Vec::new();
        for t in &catalog.tables {
            let Some(column) = identity_of(t)? else { continue };
            let row = self.conn.query(
                "SELECT pg_get_serial_sequence($1, $2)",
                &[&self.qualified(&t.name), &column],
            )?;
            let Some(seq) = row.first().and_then(|r| r.get::<_, Option<String>>(0)) else {
                continue;
            };
            let state = self
                .conn
                .query(&format!("SELECT last_value, is_called FROM {seq}"), &[])?;
            if let Some(r) = state.first() {
                if r.get::<_, bool>(1) {
                    out.push((t.name.clone(), r.get::<_, i64>(0)));
                }
            }
        }
        out.sort();
        Ok(out)
    }

    fn claim(&mut self) -> Result<()> {
        if self.claimed_by_caller {
            return Ok(());
        }
        // Kept until this side is dropped with the copy (or its process dies), on a connection
        // of its own (through a transaction pooler a lock lasts a transaction, and the copy's
        // connection commits many).
        self.claimed = Some(crate::pg::pool::HeldLock::take(
            self.location.connect()?,
            "copy",
            0,
            std::time::Duration::ZERO,
            &format!("a copy into {} (another copy is writing it)", self.conn.describe()),
        )?);
        Ok(())
    }

    fn state(&self) -> Result<TargetState> {
        if !self.schema_exists()? {
            return Ok(TargetState::Empty);
        }
        if self.conn.has_table(STATE_TABLE)? {
            let rows = self
                .conn
                .query(&format!("SELECT value FROM {STATE_TABLE} WHERE item = 'source'"), &[])?;
            let source = rows.first().map(|r| r.get::<_, String>(0)).unwrap_or_default();
            return Ok(TargetState::Unfinished(source));
        }
        let n: i64 = self.conn.query_one_value(
            "SELECT count(*) FROM pg_catalog.pg_tables WHERE schemaname = $1",
            &[&self.conn.schema],
        )?;
        Ok(if n == 0 {
            TargetState::Empty
        } else {
            TargetState::Holds(format!("{} already holds {n} tables", self.conn.describe()))
        })
    }

    fn create(&mut self, catalog: &Catalog, source_state: &str) -> Result<()> {
        // Everything is translated before anything is created: a table PostgreSQL cannot hold
        // is refused with nothing written.
        let creates: Vec<String> = catalog
            .tables
            .iter()
            .map(|t| Ok(ddl::table(&t.sql)?.create))
            .collect::<Result<_>>()?;
        for e in catalog.indexes() {
            ddl::index(&e.sql)?;
        }
        let schema = quote_ident(&self.conn.schema);
        self.conn.transaction(|c| {
            c.batch(&format!("CREATE SCHEMA IF NOT EXISTS {schema}"))?;
            for create in &creates {
                c.batch(create)?;
            }
            c.batch(&format!(
                "CREATE TABLE {SQLITE_SCHEMA_TABLE} (position BIGINT PRIMARY KEY, kind TEXT NOT NULL, name TEXT NOT NULL, tbl_name TEXT NOT NULL, sql TEXT NOT NULL);
                 CREATE TABLE {STATE_TABLE} (item TEXT PRIMARY KEY, value TEXT NOT NULL)"
            ))?;
            let insert = format!(
                "INSERT INTO {SQLITE_SCHEMA_TABLE} (position, kind, name, tbl_name, sql) VALUES ($1, $2, $3, $4, $5)"
            );
            for (i, e) in catalog.entries.iter().enumerate() {
                c.execute(&insert, &[&(i as i64), &e.kind, &e.name, &e.table, &e.sql])?;
            }
            c.execute(
                &format!("INSERT INTO {STATE_TABLE} (item, value) VALUES ('source', $1)"),
                &[&source_state],
            )?;
            Ok(())
        })
    }

    fn write_batch(&mut self, table: &TableSpec, rows: &[Vec<Value>], progress: &str) -> Result<()> {
        let insert = table.insert_sql(true);
        self.conn.transaction(|c| {
            for row in rows {
                c.execute_cached(&insert, row)?;
            }
            // The progress commits with the rows it counts.
            upsert_state(c, &format!("table:{}", table.name), progress)
        })
    }

    fn progress(&self) -> Result<Vec<(String, String)>> {
        let rows = self.conn.query(
            &format!("SELECT item, value FROM {STATE_TABLE} WHERE item LIKE 'table:%'"),
            &[],
        )?;
        Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
    }

    fn finish(&mut self, catalog: &Catalog, sequences: &[(String, i64)]) -> Result<()> {
        let indexes: Vec<String> = catalog.indexes().map(|e| ddl::index(&e.sql)).collect::<Result<_>>()?;
        let qualified: Vec<(String, String, i64)> = sequences
            .iter()
            .map(|(t, v)| (self.qualified(t), t.clone(), *v))
            .collect();
        let mut columns = Vec::new();
        for (q, t, v) in &qualified {
            let spec = catalog.tables.iter().find(|s| &s.name == t);
            if let Some(column) = spec.map(identity_of).transpose()?.flatten() {
                columns.push((q.clone(), column, *v));
            }
        }
        let rowids: Vec<String> = catalog
            .tables
            .iter()
            .filter(|t| t.hidden_rowid)
            .map(|t| {
                format!(
                    "SELECT setval(pg_get_serial_sequence('{q}', 'rowid'), coalesce((SELECT max(rowid) FROM {q}), 0) + 1, false)",
                    q = self.qualified(&t.name).replace('\'', "''")
                )
            })
            .collect();
        self.conn.transaction(|c| {
            for sql in &indexes {
                c.batch(sql)?;
            }
            // New rows are numbered after the copied ones, as SQLite would.
            for sql in &rowids {
                c.batch(sql)?;
            }
            // The live totals (copied as they were) kept from here on by PostgreSQL's triggers.
            if catalog.tables.iter().any(|t| t.name == crate::db::totals::TABLE) {
                c.batch(&crate::pg::totals::install())?;
            }
            // Assembly's cache of rendered messages follows changes to them by this count.
            if catalog.tables.iter().any(|t| t.name == "messages") {
                c.batch(crate::pg::rewrites::INSTALL)?;
            }
            // grep's word and trigram indexes, built over the copied rows.
            let has = |name: &str| catalog.tables.iter().any(|t| t.name == name);
            if has("messages") && has("summaries") {
                crate::pg::search::install(c, crate::db::schema::TEXT_COLUMNS)?;
            }
            for (q, column, value) in &columns {
                c.query(
                    "SELECT setval(pg_get_serial_sequence($1, $2), $3, true)",
                    &[q, column, value],
                )?;
            }
            c.batch(&format!("DROP TABLE {STATE_TABLE}"))
        })
    }
}
