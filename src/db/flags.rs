//! What the open file's schema has, read once at open: the optional columns and tables that
//! change how rows are read or written.

use rusqlite::Connection;

use super::schema;
use crate::error::Result;

/// Facts about the file's schema that change how rows are read or written. Read once at open.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct SchemaFlags {
    /// lossless-claw 0.15 marks archived conversations with `active = 0`; new messages of a
    /// session must go to its active one.
    pub conversations_have_active: bool,
    /// lossless-claw 0.15 (and lcm-native) record the host's session key.
    pub conversations_have_session_key: bool,
    /// The trigram full-text table for summaries exists (SQLite with the trigram tokenizer).
    pub has_cjk_fts: bool,
    /// lcm-native's fidelity table exists (a read-only open of an older file may lack it).
    pub has_fidelity: bool,
    /// lcm-native's version and redaction tables exist (as for `has_fidelity`).
    pub has_versions: bool,
}

impl SchemaFlags {
    pub(crate) fn read(conn: &Connection) -> Result<SchemaFlags> {
        let active: i64 = conn.query_row(
            "SELECT count(*) FROM pragma_table_info('conversations') WHERE name = 'active'",
            [],
            |r| r.get(0),
        )?;
        let key: i64 = conn.query_row(
            "SELECT count(*) FROM pragma_table_info('conversations') WHERE name = 'session_key'",
            [],
            |r| r.get(0),
        )?;
        let table = |name: &str| schema::has_table(conn, name);
        Ok(SchemaFlags {
            conversations_have_active: active > 0,
            conversations_have_session_key: key > 0,
            has_cjk_fts: table("summaries_fts_cjk")?,
            has_fidelity: table(schema::FIDELITY_TABLE)?,
            has_versions: table(schema::VERSIONS_TABLE)? && table(schema::REDACTION_PENDING_TABLE)?,
        })
    }
}
