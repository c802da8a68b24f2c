//! Opening SQLite files the way lcm-native needs them, and the schema migration.

pub(crate) mod checkpoint;
pub(crate) mod damage;
mod flags;
pub(crate) mod migrate;
pub(crate) mod pool;
pub(crate) mod schema;
pub(crate) mod totals;
pub(crate) mod waits;
pub(crate) mod wal_runs;

pub(crate) use flags::SchemaFlags;

use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

use crate::error::{LcmError, Result};

/// Opens `path` read-write without changing the file: no pragma that writes runs here, so a
/// database we then refuse (not SQLite, newer schema) is left exactly as it was.
pub(crate) fn open_connection(path: &str, busy_timeout_ms: i64) -> Result<Connection> {
    open_connection_with(path, busy_timeout_ms, true)
}

/// `open_connection`; `wal_runs: false` (the `walRuns` option) opens through SQLite's own VFS
/// even where the environment does not say so.
pub(crate) fn open_connection_with(path: &str, busy_timeout_ms: i64, wal_runs: bool) -> Result<Connection> {
    open_read_write(path, busy_timeout_ms, wal_runs).map_err(|e| e.with_path(path))
}

/// Whether writers open through `wal_runs`: yes unless `LCM_WAL_RUNS` is `0`, `false`, `off`
/// or `no`, a switch for bisecting a field problem down to the VFS.
fn wal_runs_wanted(value: Option<&str>) -> bool {
    !matches!(
        value.map(|v| v.trim().to_ascii_lowercase()).as_deref(),
        Some("0" | "false" | "off" | "no")
    )
}

fn open_read_write(path: &str, busy_timeout_ms: i64, allowed: bool) -> Result<Connection> {
    let wal_runs = allowed && wal_runs_wanted(std::env::var("LCM_WAL_RUNS").ok().as_deref());
    open_read_write_via(path, busy_timeout_ms, wal_runs)
}

fn open_read_write_via(path: &str, busy_timeout_ms: i64, wal_runs: bool) -> Result<Connection> {
    check_path(path)?;
    let p = Path::new(path);
    if let Some(parent) = p.parent().filter(|d| !d.as_os_str().is_empty()) {
        if !parent.is_dir() {
            return Err(LcmError::io(
                parent.display(),
                format!(
                    "the directory {} does not exist; create it or choose another dbPath",
                    parent.display()
                ),
            ));
        }
    }
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    // Writers open through `wal_runs`: each commit's log frames in one write (see there),
    // unless `LCM_WAL_RUNS=0` asks for SQLite's own VFS (the file is the same either way).
    let conn = if wal_runs {
        Connection::open_with_flags_and_vfs(p, flags, wal_runs::vfs_name()?)?
    } else {
        Connection::open_with_flags(p, flags)?
    };
    conn.busy_timeout(Duration::from_millis(busy_timeout_ms.max(0) as u64))?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    if conn.is_readonly(rusqlite::MAIN_DB)? {
        return Err(LcmError::io(
            path,
            format!(
            "the database {path} is read-only; make the file and its directory writable, or open it with readOnly: true"
        ),
        ));
    }
    // Touch the header: a file that is not SQLite fails here with E_SCHEMA, before any write.
    conn.query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get::<_, i64>(0))?;
    Ok(conn)
}

/// Rejects paths that cannot name a database file shared between connections.
fn check_path(path: &str) -> Result<()> {
    if path.trim().is_empty() {
        return Err(LcmError::invalid_config("dbPath", "must not be empty"));
    }
    if path == ":memory:" || path.starts_with("file:") {
        return Err(LcmError::invalid_config(
            "dbPath",
            "must be a file path (in-memory and URI databases cannot be shared between connections)",
        ));
    }
    if Path::new(path).is_dir() {
        return Err(LcmError::io(
            path,
            format!("dbPath {path} is a directory; give the path of a database file inside it"),
        ));
    }
    Ok(())
}

/// SQLite's `data_version` of `conn`: it changes when another connection commits to the file
/// (this connection's own commits leave it as it is).
pub(crate) fn data_version(conn: &Connection) -> Result<i64> {
    Ok(conn
        .prepare_cached("PRAGMA data_version")?
        .query_row([], |r| r.get(0))?)
}

/// Writes a consistent copy of the database behind `conn` to the new file `out` (SQLite's
/// `VACUUM INTO`, from one read snapshot; works on a read-only connection); the copy's size.
pub(crate) fn vacuum_into(conn: &Connection, out: &str) -> Result<u64> {
    conn.execute("VACUUM INTO ?1", [out])?;
    Ok(std::fs::metadata(out).map(|m| m.len()).unwrap_or(0))
}

/// Opens an existing file for reading only, without writing to it (not even the journal
/// mode). SQLite may create the empty `-wal`/`-shm` side files a WAL database's readers share;
/// where the directory is not writable it cannot, and then only an `immutable` open works: one
/// that trusts nobody writes the file (a backup, a read-only mount) and takes no locks.
pub(crate) fn open_read_only(path: &str, busy_timeout_ms: i64, immutable: bool) -> Result<Connection> {
    open_reading(path, busy_timeout_ms, immutable).map_err(|e| e.with_path(path))
}

fn open_reading(path: &str, busy_timeout_ms: i64, immutable: bool) -> Result<Connection> {
    check_path(path)?;
    let p = Path::new(path);
    if !p.is_file() {
        return Err(LcmError::io(
            path,
            format!("the database {path} does not exist; readOnly opens existing files only"),
        ));
    }
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = if immutable {
        let log = std::fs::metadata(format!("{path}-wal")).map(|m| m.len()).unwrap_or(0);
        if log > 0 {
            return Err(LcmError::io(
                path,
                format!(
                    "{path} has a write-ahead log ({path}-wal, {log} bytes) that an immutable open would \
                 not read; open it once without immutable, as a user who can write its directory, to fold it in"
                ),
            ));
        }
        Connection::open_with_flags(
            format!("{}?immutable=1", file_uri(path)),
            flags | OpenFlags::SQLITE_OPEN_URI,
        )?
    } else {
        Connection::open_with_flags(p, flags)?
    };
    conn.busy_timeout(Duration::from_millis(busy_timeout_ms.max(0) as u64))?;
    match conn.query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get::<_, i64>(0)) {
        Ok(_) => {}
        Err(e) if !immutable && cannot_share_wal_index(&e) => {
            return Err(LcmError::io(
                path,
                format!(
                    "cannot read {path}: SQLite needs to create {path}-shm (the index readers of a write-ahead \
                 log share) and its directory is not writable. If nothing writes this file (a backup, a \
                 read-only mount), open it with readOnly and immutable: true"
                ),
            ))
        }
        Err(e) => return Err(e.into()),
    }
    read_pragmas(&conn)?;
    Ok(conn)
}

fn cannot_share_wal_index(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::ReadOnly | rusqlite::ErrorCode::CannotOpen)
    )
}

/// A `file:` URI naming `path`, with the characters SQLite's URI parser treats specially
/// escaped. An absolute path gets an empty authority (`file:///…`), so `//x` stays a path.
fn file_uri(path: &str) -> String {
    let escaped = path.replace('%', "%25").replace('?', "%3f").replace('#', "%23");
    match escaped.starts_with('/') {
        true => format!("file://{escaped}"),
        false => format!("file:{escaped}"),
    }
}

/// Switches the file to WAL (readers never wait for the writer) and sets the per-connection
/// pragmas every lcm-native connection uses.
pub(crate) fn configure(conn: &Connection) -> Result<()> {
    let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(LcmError::Io {
            path: None,
            sqlite: None,
            message: format!(
                "could not switch the database to WAL mode (got `{mode}`); the file system may not support shared memory"
            ),
        });
    }
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    read_pragmas(conn)
}

/// The per-connection settings every connection uses, read-only ones included (none of
/// them writes to the file).
fn read_pragmas(conn: &Connection) -> Result<()> {
    // Stable query plans: with STAT4 compiled in, SQLite would otherwise recompile a cached
    // statement every time a parameter compared to an indexed column is re-bound.
    conn.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)?;
    conn.pragma_update(None, "temp_store", "MEMORY")?;
    // A modest cache: appends touch few pages, and SQLite scans the whole page cache at the
    // end of every write transaction, so a large one slows each commit down.
    conn.pragma_update(None, "cache_size", -8192)?;
    // Room for every statement a connection prepares (rusqlite keeps 16): the writer also
    // serves each turn's reads (`Pool::read_current`), and an evicted statement is parsed
    // and planned again on its next use.
    conn.set_prepared_statement_cache_capacity(64);
    Ok(())
}

/// Opens a further connection to an already migrated file (readers and the writer).
pub fn open_configured(path: &str, busy_timeout_ms: i64) -> Result<Connection> {
    open_configured_with(path, busy_timeout_ms, true)
}

/// `open_configured`, through SQLite's own VFS when `wal_runs` is false (see
/// `open_connection_with`).
pub(crate) fn open_configured_with(path: &str, busy_timeout_ms: i64, wal_runs: bool) -> Result<Connection> {
    let conn = open_connection_with(path, busy_timeout_ms, wal_runs)?;
    configure(&conn)?;
    Ok(conn)
}

#[cfg(test)]
mod tests {
    #[test]
    fn writers_open_through_wal_runs_unless_switched_off() {
        use super::wal_runs::testing::runs_written;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v.db").to_string_lossy().into_owned();
        // Runs written on this thread by one committed insert through each kind of connection.
        let runs_of_a_commit = |wal_runs: bool| {
            let conn = super::open_read_write_via(&path, 1000, wal_runs).unwrap();
            super::configure(&conn).unwrap();
            // Two pages change (the table and its index): a commit of more than one frame.
            conn.execute_batch("CREATE TABLE IF NOT EXISTS t(x); CREATE INDEX IF NOT EXISTS t_x ON t(x);")
                .unwrap();
            let before = runs_written().0;
            conn.execute_batch("INSERT INTO t VALUES (1)").unwrap();
            runs_written().0 - before
        };
        assert_eq!(runs_of_a_commit(true), 1, "the commit's frames in one run");
        assert_eq!(runs_of_a_commit(false), 0, "SQLite's own VFS writes them itself");
    }

    #[test]
    fn lcm_wal_runs_turns_the_vfs_off_only_when_asked() {
        for off in ["0", "false", "OFF", " no "] {
            assert!(!super::wal_runs_wanted(Some(off)), "{off}");
        }
        for on in [None, Some("1"), Some("true"), Some(""), Some("on")] {
            assert!(super::wal_runs_wanted(on), "{on:?}");
        }
    }

    use super::*;

    #[test]
    fn errors_carry_the_path_and_sqlites_code() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("not-sqlite.db");
        std::fs::write(&path, vec![b'x'; 4096]).unwrap();
        let path = path.to_str().unwrap();
        for err in [
            open_connection(path, 100).unwrap_err(),
            open_read_only(path, 100, false).unwrap_err(),
        ] {
            assert_eq!(err.code(), "E_SCHEMA");
            assert_eq!(err.path(), Some(path));
            assert_eq!(err.sqlite_code(), Some(rusqlite::ffi::SQLITE_NOTADB));
            assert!(
                err.to_string().starts_with("the file is not a SQLite database"),
                "{err}"
            );
        }
        let missing = open_connection("/definitely/not/here/x.db", 100).unwrap_err();
        assert_eq!(missing.path(), Some("/definitely/not/here"));
    }

    #[test]
    fn missing_directory_is_e_io() {
        let err = open_connection("/definitely/not/here/x.db", 100).unwrap_err();
        assert_eq!(err.code(), "E_IO");
        assert!(err.to_string().contains("does not exist"));
    }

    #[test]
    fn not_sqlite_is_e_schema_and_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notes.txt");
        let text = b"this is not a database, just some notes that are long enough to look like a header....";
        std::fs::write(&path, text).unwrap();
        let err = open_connection(path.to_str().unwrap(), 100).unwrap_err();
        assert_eq!(err.code(), "E_SCHEMA", "{err}");
        assert_eq!(std::fs::read(&path).unwrap(), text);
    }

    #[test]
    fn directory_path_and_memory_are_rejected() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            open_connection(dir.path().to_str().unwrap(), 100).unwrap_err().code(),
            "E_IO"
        );
        assert_eq!(open_connection(":memory:", 100).unwrap_err().code(), "E_INVALID_CONFIG");
    }

    #[test]
    fn configure_enables_wal() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.db");
        let conn = open_configured(path.to_str().unwrap(), 100).unwrap();
        let mode: String = conn.query_row("PRAGMA journal_mode", [], |r| r.get(0)).unwrap();
        assert_eq!(mode, "wal");
        let fk: i64 = conn.query_row("PRAGMA foreign_keys", [], |r| r.get(0)).unwrap();
        assert_eq!(fk, 1);
    }
}

#[cfg(test)]
mod uri_tests {
    use super::file_uri;

    #[test]
    fn file_uris_escape_what_sqlite_parses_and_keep_absolute_paths_paths() {
        assert_eq!(file_uri("/tmp/a?b#c%d.db"), "file:///tmp/a%3fb%23c%25d.db");
        assert_eq!(file_uri("//srv/x.db"), "file:////srv/x.db");
        assert_eq!(file_uri("rel/x.db"), "file:rel/x.db");
    }
}
