//! Reading what a file holds, without writing: its tables, columns, indexes, triggers,
//! recorded steps and the state of its full-text tables, and so its era and what is missing.

use std::collections::{HashMap, HashSet};

use rusqlite::Connection;

use super::{
    totals, FtsTable, LcmError, Result, ADDED_COLUMNS, FTS_SHADOW_SUFFIXES, FTS_TABLES, INDEXES, NATIVE_SCHEMA_STEP,
    NATIVE_SCHEMA_VERSION, READ_OPTIONAL_TABLES, STEP_DEPTHS, STEP_FTS_FILL, STEP_METADATA, STEP_SCHEMA, TABLES,
};

/// State of one FTS table.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum FtsState {
    Ok,
    Missing,
    Broken(String),
}

/// Everything the migration needs to know about a file, read without writing.
pub(super) struct Inspection {
    pub(super) tables: HashSet<String>,
    pub(super) indexes: HashSet<String>,
    /// Trigger name → its SQL as stored.
    pub(super) triggers: HashMap<String, String>,
    pub(super) columns: HashMap<String, HashSet<String>>,
    pub(super) steps: HashSet<(String, i64)>,
    pub(super) fts: Vec<(&'static FtsTable, FtsState)>,
}

impl Inspection {
    pub(super) fn read(conn: &Connection, trigram: bool) -> Result<Inspection> {
        let mut tables = HashSet::new();
        let mut indexes = HashSet::new();
        let mut triggers = HashMap::new();
        let mut sql_of: HashMap<String, String> = HashMap::new();
        {
            let mut stmt = conn.prepare("SELECT type, name, COALESCE(sql, '') FROM sqlite_master")?;
            let mut rows = stmt.query([])?;
            while let Some(r) = rows.next()? {
                let kind: String = r.get(0)?;
                let name: String = r.get(1)?;
                match kind.as_str() {
                    "table" => {
                        sql_of.insert(name.clone(), r.get(2)?);
                        tables.insert(name);
                    }
                    "index" => {
                        indexes.insert(name);
                    }
                    "trigger" => {
                        triggers.insert(name, r.get(2)?);
                    }
                    _ => {}
                }
            }
        }
        let mut columns = HashMap::new();
        for (table, _) in TABLES {
            if tables.contains(*table) {
                columns.insert(table.to_string(), table_columns(conn, table)?);
            }
        }
        let mut steps = HashSet::new();
        if tables.contains("lcm_migration_state") {
            let mut stmt = conn.prepare("SELECT step_name, algorithm_version FROM lcm_migration_state")?;
            let rows = stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))?;
            for row in rows {
                steps.insert(row?);
            }
        }
        let mut fts = Vec::new();
        for t in FTS_TABLES {
            if t.trigram && !trigram {
                continue;
            }
            let state = match sql_of.get(t.name) {
                None => FtsState::Missing,
                Some(sql) => fts_health(conn, t, sql, &tables),
            };
            fts.push((t, state));
        }
        Ok(Inspection {
            tables,
            indexes,
            triggers,
            columns,
            steps,
            fts,
        })
    }

    pub(super) fn has_step(&self, (name, version): (&str, i64)) -> bool {
        self.steps.contains(&(name.to_string(), version))
    }

    pub(super) fn has_column(&self, table: &str, column: &str) -> bool {
        self.columns.get(table).is_some_and(|c| c.contains(column))
    }

    pub(super) fn era(&self) -> &'static str {
        if !self.tables.contains("conversations") && !self.tables.contains("messages") {
            "new"
        } else if self.steps.iter().any(|(s, _)| s == NATIVE_SCHEMA_STEP) {
            "lcm-native"
        } else if self.tables.contains("lcm_migration_state") {
            "lossless-claw"
        } else if self.tables.contains("summaries") && !self.has_column("summaries", "depth") {
            "legacy"
        } else {
            "seed"
        }
    }

    /// Refuses a database written by a newer lcm-native.
    pub(super) fn check_version(&self) -> Result<()> {
        if self.tables.contains(crate::db::schema::COPY_STATE_TABLE) {
            return Err(LcmError::Schema {
                path: None,
                sqlite: None,
                message: "this file is an unfinished copy (lcm-native copy was interrupted): run the same copy again to finish it, or delete the file. Nothing was changed.".into(),
            });
        }
        let newest = self
            .steps
            .iter()
            .filter(|(s, _)| s == NATIVE_SCHEMA_STEP)
            .map(|(_, v)| *v)
            .max();
        match newest {
            Some(v) if v > NATIVE_SCHEMA_VERSION => Err(LcmError::Schema {
                path: None,
                sqlite: None,
                message: format!(
                    "this database was migrated by a newer lcm-native (schema version {v}; this build knows \
                     {NATIVE_SCHEMA_VERSION}); upgrade lcm-native to open it. Nothing was changed."
                ),
            }),
            _ => Ok(()),
        }
    }

    /// The totals table exists and every trigger is there with exactly the SQL this version
    /// installs (a changed definition is reinstalled, and the totals recomputed).
    pub(super) fn live_totals_ok(&self) -> bool {
        self.tables.contains(totals::TABLE)
            && self.tables.contains(totals::COUNTS_TABLE)
            && totals::triggers()
                .iter()
                .all(|(name, sql)| self.triggers.get(*name).is_some_and(|stored| stored == sql))
    }

    /// Nothing to migrate; `reading`: for a read-only open, which does without the tables
    /// of `READ_OPTIONAL_TABLES`.
    pub(super) fn nothing_to_do(&self, reading: bool) -> bool {
        self.live_totals_ok()
            && TABLES
                .iter()
                .all(|(t, _)| self.tables.contains(*t) || reading && READ_OPTIONAL_TABLES.contains(t))
            && ADDED_COLUMNS.iter().all(|(t, c, _)| self.has_column(t, c))
            && INDEXES
                .iter()
                .all(|(i, ddl)| self.indexes.contains(*i) || reading && on_optional_table(ddl))
            && [STEP_DEPTHS, STEP_METADATA, STEP_FTS_FILL, STEP_SCHEMA]
                .iter()
                .all(|s| self.has_step(*s))
            && self.fts.iter().all(|(_, s)| *s == FtsState::Ok)
    }
}

/// Whether an index of `INDEXES` is on one of `READ_OPTIONAL_TABLES` (a read-only open does
/// without it as it does without its table).
fn on_optional_table(ddl: &str) -> bool {
    READ_OPTIONAL_TABLES.iter().any(|t| ddl.contains(&format!(" ON {t} (")))
}

pub(super) fn table_columns(conn: &Connection, table: &str) -> Result<HashSet<String>> {
    let mut stmt = conn.prepare(&format!("PRAGMA table_info(\"{table}\")"))?;
    let cols = stmt.query_map([], |r| r.get::<_, String>(1))?;
    Ok(cols.collect::<std::result::Result<_, _>>()?)
}

pub(super) fn fts_health(conn: &Connection, t: &FtsTable, sql: &str, tables: &HashSet<String>) -> FtsState {
    if let Some(marker) = t.stale_markers.iter().find(|m| sql.contains(**m)) {
        return FtsState::Broken(format!("old definition ({marker})"));
    }
    if let Some(missing) = FTS_SHADOW_SUFFIXES
        .iter()
        .map(|s| format!("{}{s}", t.name))
        .find(|s| !tables.contains(s))
    {
        return FtsState::Broken(format!("shadow table {missing} is missing"));
    }
    match table_columns(conn, t.name) {
        Ok(cols) => match t.columns.iter().find(|c| !cols.contains(**c)) {
            Some(c) => FtsState::Broken(format!("column {c} is missing")),
            None => FtsState::Ok,
        },
        Err(e) => FtsState::Broken(format!("unreadable ({e})")),
    }
}

/// Whether this SQLite has the trigram tokenizer (3.34+; the bundled build does). Probed on a
/// private in-memory database, so the file (which may be open read-only) is not touched.
pub(super) fn has_trigram() -> bool {
    Connection::open_in_memory()
        .and_then(|c| c.execute_batch("CREATE VIRTUAL TABLE lcm_trigram_probe USING fts5(x, tokenize='trigram')"))
        .is_ok()
}
