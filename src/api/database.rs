//! What the calls over a whole database take and answer: `migrate`, `copyDatabase`,
//! `foldCopies`, and the spool of turns not yet stored (`spoolStatus`, `drainSpool`).

use serde::{Deserialize, Serialize};

/// What `copyDatabase` takes.
#[derive(Debug, Clone, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct CopyOptions {
    /// The source: a SQLite file's path or a `postgres://` URL.
    pub from: String,
    /// The target: a SQLite file that does not exist yet, or a `postgres://` URL whose schema
    /// is missing or empty.
    pub to: String,
    /// The source's PostgreSQL schema (over the URL's `?schema=`; default `lcm`).
    #[serde(default)]
    #[cfg_attr(test, ts(optional))]
    pub from_schema: Option<String>,
    /// The target's PostgreSQL schema (over the URL's `?schema=`; default `lcm`).
    #[serde(default)]
    #[cfg_attr(test, ts(optional))]
    pub to_schema: Option<String>,
    /// Rows per committed batch (1 to 100000; default 2000).
    #[serde(default)]
    #[cfg_attr(test, ts(optional))]
    pub batch_rows: Option<u32>,
    /// How long to wait for a SQLite file another process holds (default 5000).
    #[serde(default)]
    #[cfg_attr(test, ts(optional))]
    pub busy_timeout_ms: Option<i64>,
    /// Tests: stop (as a kill would) after this many batches were committed.
    #[serde(skip)]
    #[cfg_attr(test, ts(skip))]
    pub(crate) stop_after_batches: Option<usize>,
}

/// What `foldCopies` takes.
#[derive(Debug, Clone, Default, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct FoldOptions {
    /// Only this conversation (default: every conversation).
    #[serde(default, deserialize_with = "crate::input::opt_positive")]
    #[cfg_attr(test, ts(optional, type = "number"))]
    pub conversation_id: Option<i64>,
    /// Fold them (default false: a dry run, which reads only).
    #[serde(default, skip_serializing)]
    pub apply: bool,
    /// With `apply`: a new file to write a backup of the database to first (as `backup`
    /// does), after the conversations' locks are held and before anything is written.
    #[serde(default)]
    #[cfg_attr(test, ts(optional))]
    pub backup: Option<String>,
}

/// What `foldCopies` did, or would do on a dry run.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub(crate) struct FoldReport {
    /// Whether anything was written (false on a dry run, and when nothing was found).
    pub applied: bool,
    /// The backup written first, if any.
    pub backup: Option<String>,
    #[serde(flatten)]
    pub result: crate::store::copies::FoldedCopies,
}

/// Options of `migrate`.
#[derive(Clone, Copy, Debug, serde::Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct MigrateOptions {
    /// SQLite busy timeout while the migration waits for the file. Default 30000.
    #[serde(
        default = "MigrateOptions::default_busy",
        skip_serializing,
        deserialize_with = "crate::input::non_negative"
    )]
    pub busy_timeout_ms: i64,
}

impl CopyOptions {
    /// `from` → `to` with every other option at its default.
    pub(crate) fn new(from: &str, to: &str) -> CopyOptions {
        CopyOptions {
            from: from.into(),
            to: to.into(),
            from_schema: None,
            to_schema: None,
            batch_rows: None,
            busy_timeout_ms: None,
            stop_after_batches: None,
        }
    }
}

impl MigrateOptions {
    fn default_busy() -> i64 {
        30_000
    }
}

impl Default for MigrateOptions {
    fn default() -> MigrateOptions {
        MigrateOptions {
            busy_timeout_ms: MigrateOptions::default_busy(),
        }
    }
}

/// What a copy did.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub(crate) struct CopyReport {
    /// The source and target, without passwords.
    pub from: String,
    pub to: String,
    /// This run finished a copy an earlier run had begun.
    pub resumed: bool,
    /// Rows this run wrote (a resumed copy counts only its own).
    pub rows_copied: u64,
    /// Every table's row count and digest, equal on both sides.
    pub tables: Vec<TableDigest>,
    /// Each AUTOINCREMENT table's counter (`sqlite_sequence`), equal on both sides.
    pub sequences: Vec<SequenceValue>,
    pub duration_ms: f64,
    pub summary: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub(crate) struct SequenceValue {
    pub table: String,
    pub value: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub(crate) struct TableDigest {
    pub table: String,
    pub rows: u64,
    /// SHA-256 (hex) of the rows' hashes in sorted order.
    pub sha256: String,
}

/// What a spool holds, for `doctor` and the plugin.
#[derive(Debug, Default, Serialize, PartialEq)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub(crate) struct SpoolStatus {
    /// Turns waiting to be stored (complete lines of the pending and taken files).
    pub turns: u32,
    /// When the oldest of them was spooled (ms since the epoch; a turn of an older version
    /// counts from its file's time).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub oldest_at: Option<f64>,
    /// Turns set aside after failing every try (`B.lcm-native-held.jsonl`).
    pub held: u32,
    /// The drain lock, when a file holds it.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub lock: Option<LockState>,
    /// The spool location cannot be read or written: what and why.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub problem: Option<String>,
}

/// A lock file as `doctor` shows it.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub(crate) struct LockState {
    /// The holder's pid and host, as the file names them (null when it names none).
    #[cfg_attr(test, ts(type = "number | null"))]
    pub pid: Option<i64>,
    #[cfg_attr(test, ts(type = "string | null"))]
    pub host: Option<String>,
    /// Milliseconds since the holder last renewed it.
    pub age_ms: f64,
    /// Why it is stale (the next drain takes it over), or null while its holder is alive.
    #[cfg_attr(test, ts(type = "string | null"))]
    pub stale: Option<String>,
    /// Why this process cannot read it (a directory at its path, a file of another user
    /// without read permission), or null. Such a lock ages by its file time like any other.
    #[cfg_attr(test, ts(type = "string | null"))]
    pub unreadable: Option<String>,
}

/// What a drain did.
#[derive(Debug, Default, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct DrainReport {
    /// Turns stored (a turn stored before, now `duplicate`, included).
    pub stored: u32,
    /// Turns set aside in the held file by this drain, with their error.
    pub held: Vec<HeldTurn>,
    /// Turns still waiting (the drain stopped at one that could not be stored yet).
    pub remaining: u32,
    /// The error that stopped it, with its code.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub stopped_by: Option<String>,
    /// Another live process holds the drain lock: it drains.
    pub busy: bool,
    /// A stale lock was taken over, and why it was stale.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub took_over: Option<String>,
}

#[derive(Debug, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct HeldTurn {
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub advancement_key: Option<String>,
    pub error: String,
}
