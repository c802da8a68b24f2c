//! The engine's work on whole files: a backup of its database, and what the binding does with
//! a file without opening an engine on it (a migration, a snapshot of a file it may not
//! upgrade).

use crate::db::{self, migrate::MigrationReport};
use crate::error::{LcmError, Result};
use crate::sql::Backend;

/// A consistent copy of the whole database at `out` (a new file), its size in bytes. SQLite:
/// `VACUUM INTO` from one read snapshot, so turns committed up to then are in it, whatever is
/// still in the log, while writers carry on. PostgreSQL (`db_url`): a copy into a new SQLite
/// file (`lcm-native copy`), read from one snapshot and checked table by table.
pub(super) fn backup(backend: &Backend, db_url: &str, out: &str) -> Result<u64> {
    check_new_file(out)?;
    if let Backend::Postgres(_) = backend {
        crate::copy::run(crate::api::CopyOptions::new(db_url, out))?;
        return std::fs::metadata(out)
            .map(|m| m.len())
            .map_err(|e| LcmError::io(out, e));
    }
    let conn = backend.sqlite()?.fresh_connection()?;
    db::vacuum_into(&conn, out)
}

/// Runs the migration on `path` and closes the file again.
pub(crate) fn migrate_file(path: &str, busy_timeout_ms: i64) -> Result<MigrationReport> {
    let mut conn = db::open_connection(path, busy_timeout_ms)?;
    db::migrate::migrate(&mut conn, path)
}

/// Refuses a copy's destination that exists or whose directory does not.
fn check_new_file(out: &str) -> Result<()> {
    let target = std::path::Path::new(out);
    if target.exists() {
        return Err(LcmError::invalid_input(format!(
            "{out} exists already; a copy never overwrites a file (choose a new path)"
        )));
    }
    if let Some(dir) = target.parent().filter(|d| !d.as_os_str().is_empty() && !d.is_dir()) {
        return Err(LcmError::Io {
            path: Some(dir.display().to_string()),
            sqlite: None,
            message: format!(
                "the directory {} does not exist; create it or choose another path",
                dir.display()
            ),
        });
    }
    Ok(())
}

/// Copies the database at `path` to `out` (a new file) without writing to `path` and without
/// reading its schema: a lossless-claw file that an engine could only open after upgrading
/// it can be copied, and the copy upgraded instead (the CLI's read commands do so).
pub(crate) fn snapshot_file(path: &str, out: &str, busy_timeout_ms: i64) -> Result<u64> {
    check_new_file(out)?;
    let conn = db::open_read_only(path, busy_timeout_ms, false)?;
    db::vacuum_into(&conn, out).map_err(|e| e.with_path(path))
}
