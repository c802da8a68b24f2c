//! One error type for the whole core. Each variant carries a stable `code` that the binding
//! turns into the JS error's `code` property, so hosts can branch on it without parsing text.

use std::fmt;

/// Result alias used throughout the core.
pub(crate) type Result<T> = std::result::Result<T, LcmError>;

#[derive(Debug, Clone, thiserror::Error)]
pub enum LcmError {
    /// A config option has the wrong type or an out-of-range value, or is unknown.
    #[error("invalid config option `{option}`: {reason}")]
    InvalidConfig { option: String, reason: String },

    /// The database's schema cannot be used: not SQLite, corrupt, or written by a newer version.
    #[error("{message}")]
    Schema {
        /// The database file, when known.
        path: Option<String>,
        /// SQLite's extended result code, when SQLite reported it.
        sqlite: Option<i32>,
        message: String,
    },

    /// The database file is damaged (SQLite found a malformed page, or the check at open
    /// did): the engine writes nothing more to it.
    #[error("{message}")]
    Corrupt {
        /// The database file, when known.
        path: Option<String>,
        /// SQLite's extended result code, when SQLite reported it.
        sqlite: Option<i32>,
        message: String,
    },

    /// An id (conversation, summary, message) does not exist.
    #[error("{kind} {id} not found")]
    NotFound { kind: &'static str, id: String },

    /// The database (SQLite's lock: `sqlite` set) or a conversation (another operation of this
    /// engine: `conversation_id` set) stayed busy for longer than we may wait.
    #[error("{message}")]
    Busy {
        sqlite: Option<i32>,
        conversation_id: Option<i64>,
        message: String,
    },

    /// The file system refused: missing directory, read-only file, disk full.
    #[error("{message}")]
    Io {
        /// The file or directory concerned, when known.
        path: Option<String>,
        sqlite: Option<i32>,
        message: String,
    },

    /// The caller passed data we cannot store or act on.
    #[error("{0}")]
    InvalidInput(String),

    /// A prompt template is missing or does not parse/render.
    #[error("{message}")]
    Prompt {
        /// Where the template came from (a path, or `embedded:<name>`), when known.
        template: Option<String>,
        message: String,
    },

    /// The summarizer callback threw, rejected, or returned something that is not a string.
    #[error("{0}")]
    Summarizer(String),

    /// The summarizer did not answer in time.
    #[error("{message}")]
    Timeout { ms: i64, message: String },

    /// The inputs of a pass changed while the summarizer was running.
    #[error("{message}")]
    Stale { conversation_id: i64, message: String },

    /// A write was asked of an engine opened with `readOnly`.
    #[error("{message}")]
    ReadOnly { path: String, message: String },

    /// The engine was closed; open a new one.
    #[error("the engine is closed; open a new LcmEngine to continue")]
    Closed,

    /// The operation was cancelled by the caller (AbortSignal).
    #[error("{0}")]
    Aborted(String),

    /// SQLite reported something we do not classify further; `source` is rusqlite's error
    /// (shared, so that one failed group commit can answer each of its callers with it).
    #[error("sqlite error: {message}")]
    Sqlite {
        code: Option<i32>,
        message: String,
        #[source]
        source: std::sync::Arc<rusqlite::Error>,
    },

    /// The PostgreSQL server cannot be reached, refused the login, or the connection was lost
    /// (what was not committed is not written).
    #[error("{message}")]
    Connection { message: String },

    /// PostgreSQL reported something we do not classify further (`sqlstate`: its SQLSTATE).
    #[error("postgres error: {message}")]
    Postgres { sqlstate: Option<String>, message: String },

    /// The operation does not run where the engine's rows are (PostgreSQL, for what is not
    /// ported yet).
    #[error("{0}")]
    Unsupported(String),

    /// An answer larger than one JavaScript string can hold (about 536 million characters of
    /// JSON): the call is to ask for less.
    #[error("{0}")]
    TooLarge(String),

    /// A bug or an unexpected state inside lcm-native.
    #[error("internal error: {0}")]
    Internal(String),
}

impl LcmError {
    /// The stable code exposed to JavaScript as `err.code`.
    pub fn code(&self) -> &'static str {
        match self {
            LcmError::InvalidConfig { .. } => "E_INVALID_CONFIG",
            LcmError::Schema { .. } => "E_SCHEMA",
            LcmError::Corrupt { .. } => "E_CORRUPT",
            LcmError::NotFound { .. } => "E_NOT_FOUND",
            LcmError::Busy { .. } => "E_BUSY",
            LcmError::Io { .. } => "E_IO",
            LcmError::InvalidInput(_) => "E_INVALID_INPUT",
            LcmError::Prompt { .. } => "E_PROMPT",
            LcmError::Summarizer(_) => "E_SUMMARIZER",
            LcmError::Timeout { .. } => "E_TIMEOUT",
            LcmError::Stale { .. } => "E_STALE",
            LcmError::ReadOnly { .. } => "E_READ_ONLY",
            LcmError::Closed => "E_CLOSED",
            LcmError::Aborted(_) => "E_ABORTED",
            LcmError::Sqlite { .. } => "E_SQLITE",
            LcmError::Connection { .. } => "E_CONNECTION",
            LcmError::Postgres { .. } => "E_POSTGRES",
            LcmError::Unsupported(_) => "E_UNSUPPORTED",
            LcmError::TooLarge(_) => "E_TOO_LARGE",
            LcmError::Internal(_) => "E_INTERNAL",
        }
    }

    /// SQLite's extended result code behind the error, if SQLite reported it.
    pub fn sqlite_code(&self) -> Option<i32> {
        match self {
            LcmError::Schema { sqlite, .. }
            | LcmError::Corrupt { sqlite, .. }
            | LcmError::Busy { sqlite, .. }
            | LcmError::Io { sqlite, .. } => *sqlite,
            LcmError::Sqlite { code, .. } => *code,
            _ => None,
        }
    }

    /// The file or directory the error is about, if known.
    pub fn path(&self) -> Option<&str> {
        match self {
            LcmError::Schema { path, .. } | LcmError::Corrupt { path, .. } | LcmError::Io { path, .. } => {
                path.as_deref()
            }
            LcmError::ReadOnly { path, .. } => Some(path),
            _ => None,
        }
    }

    /// Names `path` on a file-system, schema or damage error that does not name one yet (a
    /// damage message gets the file and what to do).
    pub fn with_path(mut self, p: &str) -> Self {
        if let LcmError::Corrupt {
            path: None, message, ..
        } = &mut self
        {
            *message = format!("{p}: {message}");
        }
        if let LcmError::Schema { path, .. } | LcmError::Corrupt { path, .. } | LcmError::Io { path, .. } = &mut self {
            path.get_or_insert_with(|| p.to_string());
        }
        self
    }

    /// The file is damaged: `what` SQLite (or the check at open) found.
    pub fn corrupt(sqlite: Option<i32>, what: impl fmt::Display) -> Self {
        LcmError::Corrupt {
            path: None,
            sqlite,
            message: format!(
                "the database file is damaged ({what}); lcm-native writes nothing more to it. Stop the host, restore the file from a backup (lcm-native backup makes one), or recover what can be read with `sqlite3 FILE .recover`"
            ),
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

    /// A file-system error about `path`.
    pub fn io(path: impl fmt::Display, message: impl fmt::Display) -> Self {
        LcmError::Io {
            path: Some(crate::shown_location::redact_password(&path.to_string())),
            sqlite: None,
            message: message.to_string(),
        }
    }

    /// A schema error about the database at `path`.
    pub fn schema(path: impl fmt::Display, message: impl fmt::Display) -> Self {
        LcmError::Schema {
            path: Some(crate::shown_location::redact_password(&path.to_string())),
            sqlite: None,
            message: message.to_string(),
        }
    }

    /// A template error; `template` is where the template came from.
    pub fn prompt(template: Option<&str>, message: impl fmt::Display) -> Self {
        LcmError::Prompt {
            template: template.map(str::to_string),
            message: message.to_string(),
        }
    }

    /// The summarizer did not answer within `ms`.
    pub fn timeout(ms: i64) -> Self {
        LcmError::Timeout {
            ms,
            message: format!("summarizer did not answer within {ms} ms; nothing was written"),
        }
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
            let sqlite = Some(e.extended_code);
            let io = |message: String| LcmError::Io {
                path: None,
                sqlite,
                message,
            };
            let schema = |message: String| LcmError::Schema {
                path: None,
                sqlite,
                message,
            };
            return match e.code {
                C::DatabaseBusy | C::DatabaseLocked => LcmError::Busy {
                    sqlite,
                    conversation_id: None,
                    message: format!(
                        "the database is locked by another connection or process ({detail}); retry later or raise busyTimeoutMs"
                    ),
                },
                C::ReadOnly => io(format!(
                    "the database is read-only ({detail}); make the file and its directory writable"
                )),
                C::NotADatabase => schema(format!("the file is not a SQLite database ({detail}); check the database path (dbPath, the CLI's --db)")),
                C::DatabaseCorrupt => LcmError::corrupt(sqlite, detail),
                C::CannotOpen => io(format!(
                    "cannot open the database file ({detail}); check that the path exists and is accessible"
                )),
                C::DiskFull => io(format!("the disk is full ({detail})")),
                C::SystemIoFailure | C::PermissionDenied => io(format!("I/O error on the database ({detail})")),
                _ => LcmError::Sqlite {
                    code: sqlite,
                    message: detail,
                    source: std::sync::Arc::new(rusqlite::Error::SqliteFailure(e, msg.clone())),
                },
            };
        }
        LcmError::Sqlite {
            code: None,
            message: err.to_string(),
            source: std::sync::Arc::new(err),
        }
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
    fn an_unclassified_sqlite_error_keeps_rusqlite_s_error_as_its_source() {
        use std::error::Error as _;
        let rusqlite_of = |e: &LcmError| {
            e.source()
                .and_then(|s| s.downcast_ref::<std::sync::Arc<rusqlite::Error>>())
                .map(|s| s.to_string())
        };
        let e = LcmError::from(rusqlite::Error::InvalidColumnName("nope".into()));
        assert_eq!(e.code(), "E_SQLITE");
        assert!(rusqlite_of(&e).is_some_and(|s| s.contains("nope")), "{e:?}");
        let e = LcmError::from(rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_MISMATCH),
            None,
        ));
        assert!(rusqlite_of(&e).is_some_and(|s| s.contains("mismatch")), "{e:?}");
    }

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
        let e = LcmError::from(e);
        assert_eq!(e.code(), "E_SCHEMA");
        assert_eq!(e.sqlite_code(), Some(rusqlite::ffi::SQLITE_NOTADB));
        assert_eq!(e.path(), None);
        assert_eq!(e.clone().with_path("/x/lcm.db").path(), Some("/x/lcm.db"));
        assert_eq!(
            e.to_string(),
            e.clone().with_path("/x/lcm.db").to_string(),
            "the message stays"
        );
    }
}
