//! One error type for the whole core. Each variant carries a stable `code` that the binding
//! turns into the JS error's `code` property, so hosts can branch on it without parsing text.

use std::fmt;

/// Result alias used throughout the core.
pub type Result<T> = std::result::Result<T, LcmError>;

#[derive(Debug, Clone, thiserror::Error)]
pub enum LcmError {
    /// A config option has the wrong type or an out-of-range value, or is unknown.
    #[error("invalid config option `{option}`: {reason}")]
    InvalidConfig { option: String, reason: String },

    /// The database's schema cannot be used: not SQLite, corrupt, or written by a newer version.
    #[error("{0}")]
    Schema(String),

    /// An id (conversation, summary, message) does not exist.
    #[error("{kind} {id} not found")]
    NotFound { kind: &'static str, id: String },

    /// The database or a conversation is locked by someone else for longer than we may wait.
    #[error("{0}")]
    Busy(String),

    /// The file system refused: missing directory, read-only file, disk full.
    #[error("{0}")]
    Io(String),

    /// The caller passed data we cannot store or act on.
    #[error("{0}")]
    InvalidInput(String),

    /// A prompt template is missing or does not parse/render.
    #[error("{0}")]
    Prompt(String),

    /// The summarizer callback threw, rejected, or returned something that is not a string.
    #[error("{0}")]
    Summarizer(String),

    /// The summarizer did not answer in time.
    #[error("{0}")]
    Timeout(String),

    /// The inputs of a pass changed while the summarizer was running.
    #[error("{0}")]
    Stale(String),

    /// A write was asked of an engine opened with `readOnly`.
    #[error("{0}")]
    ReadOnly(String),

    /// The engine was closed; open a new one.
    #[error("the engine is closed; open a new LcmEngine to continue")]
    Closed,

    /// The operation was cancelled by the caller (AbortSignal).
    #[error("{0}")]
    Aborted(String),

    /// SQLite reported something we do not classify further.
    #[error("sqlite error: {0}")]
    Sqlite(String),

    /// A bug or an unexpected state inside lcm-native.
    #[error("internal error: {0}")]
    Internal(String),
}

impl LcmError {
    /// The stable code exposed to JavaScript as `err.code`.
    pub fn code(&self) -> &'static str {
        match self {
            LcmError::InvalidConfig { .. } => "E_INVALID_CONFIG",
            LcmError::Schema(_) => "E_SCHEMA",
            LcmError::NotFound { .. } => "E_NOT_FOUND",
            LcmError::Busy(_) => "E_BUSY",
            LcmError::Io(_) => "E_IO",
            LcmError::InvalidInput(_) => "E_INVALID_INPUT",
            LcmError::Prompt(_) => "E_PROMPT",
            LcmError::Summarizer(_) => "E_SUMMARIZER",
            LcmError::Timeout(_) => "E_TIMEOUT",
            LcmError::Stale(_) => "E_STALE",
            LcmError::ReadOnly(_) => "E_READ_ONLY",
            LcmError::Closed => "E_CLOSED",
            LcmError::Aborted(_) => "E_ABORTED",
            LcmError::Sqlite(_) => "E_SQLITE",
            LcmError::Internal(_) => "E_INTERNAL",
        }
    }

    pub fn invalid_config(option: impl Into<String>, reason: impl fmt::Display) -> Self {
        LcmError::InvalidConfig {
            option: option.into(),
            reason: reason.to_string(),
        }
    }

    pub fn invalid_input(message: impl fmt::Display) -> Self {
        LcmError::InvalidInput(message.to_string())
    }

    /// The summarizer did not answer within `ms`.
    pub fn timeout(ms: i64) -> Self {
        LcmError::Timeout(format!("summarizer did not answer within {ms} ms; nothing was written"))
    }

    pub fn not_found(kind: &'static str, id: impl fmt::Display) -> Self {
        LcmError::NotFound {
            kind,
            id: id.to_string(),
        }
    }
}

impl From<rusqlite::Error> for LcmError {
    fn from(err: rusqlite::Error) -> Self {
        use rusqlite::ErrorCode as C;
        if let rusqlite::Error::SqliteFailure(e, ref msg) = err {
            let detail = msg.clone().unwrap_or_else(|| e.to_string());
            return match e.code {
                C::DatabaseBusy | C::DatabaseLocked => LcmError::Busy(format!(
                    "the database is locked by another connection or process ({detail}); retry later or raise busyTimeoutMs"
                )),
                C::ReadOnly => LcmError::Io(format!(
                    "the database is read-only ({detail}); make the file and its directory writable"
                )),
                C::NotADatabase => LcmError::Schema(format!(
                    "the file is not a SQLite database ({detail}); check dbPath"
                )),
                C::DatabaseCorrupt => LcmError::Schema(format!(
                    "the database file is corrupt ({detail}); restore it from a backup"
                )),
                C::CannotOpen => LcmError::Io(format!(
                    "cannot open the database file ({detail}); check that the path exists and is accessible"
                )),
                C::DiskFull => LcmError::Io(format!("the disk is full ({detail})")),
                C::SystemIoFailure | C::PermissionDenied => {
                    LcmError::Io(format!("I/O error on the database ({detail})"))
                }
                _ => LcmError::Sqlite(detail),
            };
        }
        LcmError::Sqlite(err.to_string())
    }
}

impl From<serde_json::Error> for LcmError {
    fn from(err: serde_json::Error) -> Self {
        LcmError::Internal(format!("json: {err}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_stable() {
        assert_eq!(LcmError::invalid_config("x", "bad").code(), "E_INVALID_CONFIG");
        assert_eq!(LcmError::not_found("conversation", 7).code(), "E_NOT_FOUND");
        assert_eq!(
            LcmError::not_found("conversation", 7).to_string(),
            "conversation 7 not found"
        );
        assert_eq!(LcmError::timeout(5).code(), "E_TIMEOUT");
    }

    #[test]
    fn sqlite_busy_maps_to_e_busy() {
        let e = rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_BUSY), None);
        assert_eq!(LcmError::from(e).code(), "E_BUSY");
        let e = rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_NOTADB), None);
        assert_eq!(LcmError::from(e).code(), "E_SCHEMA");
    }
}
