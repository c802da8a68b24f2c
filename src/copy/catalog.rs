//! What a database holds, as a copy sees it: SQLite's schema entries (`sqlite_master`'s rows,
//! which a PostgreSQL copy keeps in `lcm_native_sqlite_schema`), and from them the tables
//! whose rows move, with their columns, keys and an order that puts parents first.
//!
//! Columns and keys are read by SQLite itself (`PRAGMA table_info` on the statements loaded
//! into an in-memory database), so both engines' sides agree on them whatever side holds the
//! rows.

use std::collections::{BTreeMap, BTreeSet};

use rusqlite::Connection;

use crate::db::schema::{FTS_SHADOW_SUFFIXES, FTS_TABLES};
use crate::error::{LcmError, Result};
use crate::pg::quote_ident;

/// The copy's own progress, kept in the target until the copy is complete and verified.
pub(crate) const STATE_TABLE: &str = crate::db::schema::COPY_STATE_TABLE;
/// On PostgreSQL: the SQLite statements of the database, so a copy back makes the same file.
pub(crate) const SQLITE_SCHEMA_TABLE: &str = "lcm_native_sqlite_schema";

/// One row of `sqlite_master`: a table (plain or virtual), index, trigger or view.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SchemaEntry {
    pub kind: String,
    pub name: String,
    pub table: String,
    pub sql: String,
}

impl SchemaEntry {
    pub(crate) fn is_virtual(&self) -> bool {
        self.kind == "table" && self.sql.trim_start().to_ascii_uppercase().starts_with("CREATE VIRTUAL")
    }
}

/// A table whose rows move.
#[derive(Debug, Clone)]
pub(crate) struct TableSpec {
    pub name: String,
    pub sql: String,
    /// The columns read and written, `rowid` first where SQLite numbers the rows with a
    /// hidden one (its order is part of the data: see `pg::ddl::Table::hidden_rowid`).
    pub columns: Vec<String>,
    /// SQLite's declared type of each column.
    pub declared: Vec<String>,
    /// The columns batches are ordered and resumed by: the rowid (hidden or its INTEGER
    /// PRIMARY KEY alias), else the primary key (a WITHOUT ROWID table).
    pub key: Vec<usize>,
    pub hidden_rowid: bool,
}

impl TableSpec {
    /// The `SELECT` of a batch: every column, in key order, after the key values bound as the
    /// first parameters (when `after`), at most `limit` rows. The key is the rowid (hidden or
    /// its INTEGER PRIMARY KEY) on both engines, so both read the same batches; a WITHOUT
    /// ROWID table (keyed by its primary key) exists only between SQLite files (PostgreSQL's
    /// translation refuses it).
    pub(crate) fn batch_sql(&self, after: bool, limit: usize, postgres: bool) -> String {
        let cols: Vec<String> = self.columns.iter().map(|c| quote_ident(c)).collect();
        let mut sql = format!("SELECT {} FROM {}", cols.join(", "), quote_ident(&self.name));
        let key: Vec<String> = self.key.iter().map(|i| cols[*i].clone()).collect();
        if !key.is_empty() {
            if after {
                sql.push_str(&format!(
                    " WHERE ({}) > ({})",
                    key.join(", "),
                    marks(key.len(), postgres)
                ));
            }
            sql.push_str(&format!(" ORDER BY {} LIMIT {limit}", key.join(", ")));
        }
        sql
    }

    /// The `INSERT` of one row, every column a parameter.
    pub(crate) fn insert_sql(&self, postgres: bool) -> String {
        let cols: Vec<String> = self.columns.iter().map(|c| quote_ident(c)).collect();
        format!(
            "INSERT INTO {} ({}) VALUES ({})",
            quote_ident(&self.name),
            cols.join(", "),
            marks(cols.len(), postgres)
        )
    }
}

pub(crate) struct Catalog {
    pub entries: Vec<SchemaEntry>,
    /// Tables whose rows are copied, parents before children.
    pub tables: Vec<TableSpec>,
}

impl Catalog {
    /// Reads the entries. Virtual tables must be the full-text tables lcm-native rebuilds from
    /// their base tables (their rows are not copied); any other is refused.
    pub(crate) fn new(entries: Vec<SchemaEntry>) -> Result<Catalog> {
        let shadows: BTreeSet<String> = entries
            .iter()
            .filter(|e| e.is_virtual())
            .flat_map(|e| FTS_SHADOW_SUFFIXES.iter().map(move |s| format!("{}{s}", e.name)))
            .collect();
        let entries: Vec<SchemaEntry> = entries
            .into_iter()
            .filter(|e| !shadows.contains(&e.name) && !e.name.starts_with("sqlite_") && e.name != STATE_TABLE)
            .collect();
        for e in entries.iter().filter(|e| e.is_virtual()) {
            if !FTS_TABLES.iter().any(|f| f.name == e.name) {
                return Err(LcmError::schema(
                    "source",
                    format!(
                        "the virtual table {} is not one lcm-native knows how to rebuild; nothing was copied",
                        e.name
                    ),
                ));
            }
        }
        let memory = Connection::open_in_memory()?;
        let mut tables = Vec::new();
        for e in entries.iter().filter(|e| e.kind == "table" && !e.is_virtual()) {
            memory.execute_batch(&e.sql).map_err(|err| {
                LcmError::schema(
                    "source",
                    format!("table {}: its statement does not load ({err})", e.name),
                )
            })?;
            let mut stmt = memory.prepare(&format!("PRAGMA table_info({})", crate::pg::quote_ident(&e.name)))?;
            let cols: Vec<(String, String, i64)> = stmt
                .query_map([], |r| Ok((r.get(1)?, r.get(2)?, r.get(5)?)))?
                .collect::<rusqlite::Result<_>>()?;
            let mut pk: Vec<(i64, usize)> = cols
                .iter()
                .enumerate()
                .filter(|(_, c)| c.2 > 0)
                .map(|(i, c)| (c.2, i))
                .collect();
            pk.sort();
            let mut key: Vec<usize> = pk.into_iter().map(|(_, i)| i).collect();
            let alias = key.len() == 1 && cols[key[0]].1.eq_ignore_ascii_case("INTEGER");
            let without_rowid = e
                .sql
                .to_ascii_uppercase()
                .replace(char::is_whitespace, "")
                .ends_with("WITHOUTROWID");
            let mut columns: Vec<String> = cols.iter().map(|c| c.0.clone()).collect();
            let mut declared: Vec<String> = cols.iter().map(|c| c.1.clone()).collect();
            let hidden_rowid = !alias && !without_rowid;
            if hidden_rowid {
                columns.insert(0, "rowid".into());
                declared.insert(0, "INTEGER".into());
                key = vec![0];
            }
            tables.push(TableSpec {
                name: e.name.clone(),
                sql: e.sql.clone(),
                columns,
                declared,
                key,
                hidden_rowid,
            });
        }
        let parents = parents(&memory, &tables)?;
        Ok(Catalog {
            tables: parents_first(tables, &parents),
            entries,
        })
    }

    pub(crate) fn indexes(&self) -> impl Iterator<Item = &SchemaEntry> {
        self.entries.iter().filter(|e| e.kind == "index")
    }
}

/// Each table's parents (the tables its foreign keys name), by SQLite's reading.
fn parents(memory: &Connection, tables: &[TableSpec]) -> Result<BTreeMap<String, BTreeSet<String>>> {
    let mut out = BTreeMap::new();
    for t in tables {
        let mut stmt = memory.prepare(&format!("PRAGMA foreign_key_list({})", crate::pg::quote_ident(&t.name)))?;
        let names: BTreeSet<String> = stmt
            .query_map([], |r| r.get::<_, String>(2))?
            .collect::<rusqlite::Result<_>>()?;
        out.insert(t.name.clone(), names.into_iter().filter(|p| *p != t.name).collect());
    }
    Ok(out)
}

/// The tables ordered so that every table comes after the tables it references; otherwise in
/// their creation order.
fn parents_first(tables: Vec<TableSpec>, parents: &BTreeMap<String, BTreeSet<String>>) -> Vec<TableSpec> {
    let mut placed: BTreeSet<String> = BTreeSet::new();
    let mut out = Vec::with_capacity(tables.len());
    let mut rest = tables;
    while !rest.is_empty() {
        let ready = rest.iter().position(|t| {
            parents[&t.name]
                .iter()
                .all(|p| placed.contains(p) || !parents.contains_key(p))
        });
        match ready {
            Some(i) => {
                let t = rest.remove(i);
                placed.insert(t.name.clone());
                out.push(t);
            }
            None => {
                // A cycle of references: what is left keeps its creation order.
                out.append(&mut rest);
            }
        }
    }
    out
}

/// `n` parameters: `?1, ?2, …` (SQLite) or `$1, $2, …` (PostgreSQL).
fn marks(n: usize, postgres: bool) -> String {
    let sign = if postgres { '$' } else { '?' };
    (1..=n).map(|i| format!("{sign}{i}")).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str, sql: &str) -> SchemaEntry {
        SchemaEntry {
            kind: "table".into(),
            name: name.into(),
            table: name.into(),
            sql: sql.into(),
        }
    }

    #[test]
    fn children_come_after_their_parents_and_keys_are_read() {
        let c = Catalog::new(vec![
            entry(
                "child",
                "CREATE TABLE child (b TEXT, a INTEGER REFERENCES parent(id), PRIMARY KEY (a, b))",
            ),
            entry(
                "parent",
                "CREATE TABLE parent (id INTEGER PRIMARY KEY AUTOINCREMENT, v TEXT)",
            ),
            entry("loose", "CREATE TABLE loose (x TEXT)"),
        ])
        .unwrap();
        let names: Vec<&str> = c.tables.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["parent", "child", "loose"]);
        // The parent's key is its INTEGER PRIMARY KEY (the rowid); the others number their
        // rows with a hidden rowid, which the copy reads first and keys on.
        assert!(!c.tables[0].hidden_rowid);
        assert_eq!(c.tables[0].key, vec![0]);
        assert_eq!(c.tables[1].columns, ["rowid", "b", "a"]);
        assert_eq!(c.tables[1].key, vec![0]);
        assert_eq!(c.tables[2].columns, ["rowid", "x"]);
        let without = Catalog::new(vec![entry(
            "w",
            "CREATE TABLE w (a TEXT, b INTEGER, PRIMARY KEY (b, a)) WITHOUT ROWID",
        )])
        .unwrap();
        assert_eq!(without.tables[0].key, vec![1, 0]);
        assert!(!without.tables[0].hidden_rowid);
    }

    #[test]
    fn an_unknown_virtual_table_is_refused() {
        let e = Catalog::new(vec![entry("v", "CREATE VIRTUAL TABLE v USING rtree(id, a, b)")])
            .err()
            .unwrap();
        assert_eq!(e.code(), "E_SCHEMA");
        assert!(e.to_string().contains("virtual table v"), "{e}");
    }
}
