//! The engine: one database file, its connections and its configuration. Every method blocks
//! and is meant to run off Node's main thread (the binding uses tokio's blocking pool).

use serde_json::Value;

use crate::config::Config;
use crate::db::{self, migrate::MigrationReport, pool::Pool};
use crate::error::Result;
use crate::store::conversations::{self, ConversationInfo, SchemaFlags, Target};
use crate::store::messages::{self, IngestOutcome, StoredMessage};
use crate::store::normalize;
use crate::store::summaries::{self, SummaryRecord};

pub struct Engine {
    config: Config,
    pool: Pool,
    flags: SchemaFlags,
    migration: MigrationReport,
}

impl Engine {
    /// Opens (creating if needed) and migrates the database of `config`.
    pub fn open(config: Config) -> Result<Engine> {
        let mut conn = db::open_connection(&config.db_path, config.busy_timeout_ms)?;
        let migration = db::migrate::migrate(&mut conn, &config.db_path)?;
        let flags = SchemaFlags::read(&conn)?;
        let pool = Pool::new(&config.db_path, config.busy_timeout_ms, conn)?;
        Ok(Engine {
            config,
            pool,
            flags,
            migration,
        })
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// What the migration run by `open` did.
    pub fn migration(&self) -> &MigrationReport {
        &self.migration
    }

    /// Validates every message first (a malformed one rejects the call with its index and
    /// nothing is written), then stores them in one transaction.
    pub fn ingest(&self, target: &Target, messages: &[Value]) -> Result<IngestOutcome> {
        let normalized = messages
            .iter()
            .enumerate()
            .map(|(i, m)| normalize::normalize(i, m))
            .collect::<Result<Vec<_>>>()?;
        self.pool
            .write(|conn| messages::ingest(conn, self.flags, target, &normalized))
    }

    /// Stored messages of a conversation, in order, with their content rebuilt.
    pub fn messages(&self, conversation_id: i64, after_seq: i64, limit: i64) -> Result<Vec<StoredMessage>> {
        self.pool
            .read(|conn| messages::list(conn, conversation_id, after_seq, limit))
    }

    /// Every conversation with its message, summary and context-item counts.
    pub fn conversations(&self) -> Result<Vec<ConversationInfo>> {
        self.pool.read(conversations::list)
    }

    /// Summaries of a conversation in creation order, optionally one depth only.
    pub fn summaries(&self, conversation_id: i64, depth: Option<i64>) -> Result<Vec<SummaryRecord>> {
        self.pool.read(|conn| summaries::list(conn, conversation_id, depth))
    }

    /// Closes the connections; later calls fail with E_CLOSED.
    pub fn close(&self) -> bool {
        self.pool.close()
    }
}

/// Runs the migration on `path` and closes the file again.
pub fn migrate_file(path: &str, busy_timeout_ms: i64) -> Result<MigrationReport> {
    let mut conn = db::open_connection(path, busy_timeout_ms)?;
    db::migrate::migrate(&mut conn, path)
}

#[cfg(test)]
mod tests;
