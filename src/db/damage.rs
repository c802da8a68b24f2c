//! Finding a damaged database file before lcm-native writes into it. SQLite reports a
//! malformed page only when a statement touches it, so a file damaged where no write goes
//! would take every write and stay broken; a quick check (`PRAGMA quick_check`: every page
//! and index entry, without comparing index contents) at open finds it first. Files up to
//! `CHECK_AT_OPEN_BYTES` are checked before anything is written; larger ones on a thread of
//! their own, so that opening stays fast.

use std::sync::{Arc, Mutex};

use rusqlite::Connection;

use crate::error::{LcmError, Result};

/// Largest file (database and WAL together) checked before `open` returns.
pub(crate) const CHECK_AT_OPEN_BYTES: u64 = 32 << 20;

/// What a quick check of `conn`'s database found: None when it is sound, else the first
/// problem as a coded E_CORRUPT error. A file that is not SQLite at all stays E_SCHEMA.
pub(crate) fn quick_check(conn: &Connection) -> Result<Option<LcmError>> {
    let found: rusqlite::Result<String> = conn.query_row("PRAGMA quick_check(1)", [], |r| r.get(0));
    match found {
        Ok(line) if line == "ok" => Ok(None),
        Ok(line) => {
            let line = line.split_whitespace().collect::<Vec<_>>().join(" ");
            Ok(Some(LcmError::corrupt(None, format!("quick_check: {line}"))))
        }
        Err(e) => match LcmError::from(e) {
            damaged @ LcmError::Corrupt { .. } => Ok(Some(damaged)),
            other => Err(other),
        },
    }
}

/// Bytes of the database file and its WAL.
pub(crate) fn file_bytes(path: &str) -> u64 {
    let size = |p: &str| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
    size(path) + size(&format!("{path}-wal"))
}

/// The damage found in one engine's file, once found (shared with the background check).
#[derive(Clone, Default)]
pub(crate) struct Damage(Arc<Mutex<Option<LcmError>>>);

impl Damage {
    pub(crate) fn get(&self) -> Option<LcmError> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Records `err` when it says the file is damaged (the first such error is kept).
    pub(crate) fn note(&self, err: &LcmError, path: &str) {
        if matches!(err, LcmError::Corrupt { .. }) {
            let mut slot = self.0.lock().unwrap_or_else(|e| e.into_inner());
            if slot.is_none() {
                *slot = Some(err.clone().with_path(path));
            }
        }
    }

    /// Checks `path` on a thread of its own with a connection of its own (read-only); the
    /// returned handle stops it (`interrupt`) when the engine closes first.
    pub(crate) fn check_in_background(&self, path: &str, busy_timeout_ms: i64) -> Option<rusqlite::InterruptHandle> {
        let conn = super::open_read_only(path, busy_timeout_ms, false).ok()?;
        let handle = conn.get_interrupt_handle();
        let (damage, path) = (self.clone(), path.to_string());
        let spawned = std::thread::Builder::new()
            .name("lcm-quick-check".into())
            .spawn(move || {
                if let Ok(Some(found)) = quick_check(&conn) {
                    damage.note(&found, &path);
                }
            });
        spawned.ok().map(|_| handle)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A database with a table and an index, damaged in its last page (an index page).
    fn damaged_file(dir: &tempfile::TempDir) -> String {
        let path = dir.path().join("d.db").to_str().unwrap().to_string();
        {
            let conn = Connection::open(&path).unwrap();
            conn.execute_batch(
                "PRAGMA journal_mode=DELETE; CREATE TABLE t(a TEXT); CREATE INDEX t_a ON t(a);
                 WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 2000)
                 INSERT INTO t SELECT printf('row %08d', x) FROM c;",
            )
            .unwrap();
        }
        let mut bytes = std::fs::read(&path).unwrap();
        let page = 4096;
        let last = bytes.len() - page;
        for b in &mut bytes[last + 8..last + 200] {
            *b = 0xA5;
        }
        std::fs::write(&path, bytes).unwrap();
        path
    }

    #[test]
    fn a_damaged_page_is_found_and_coded_e_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        let path = damaged_file(&dir);
        let conn = Connection::open(&path).unwrap();
        let found = quick_check(&conn).unwrap().expect("the damage was not found");
        assert_eq!(found.code(), "E_CORRUPT");
        let named = found.with_path(&path);
        assert!(named.to_string().starts_with(&path), "{named}");
        assert!(named.to_string().contains("restore the file from a backup"), "{named}");
        let sound = Connection::open_in_memory().unwrap();
        assert!(quick_check(&sound).unwrap().is_none());
    }

    #[test]
    fn the_background_check_records_what_it_finds() {
        let dir = tempfile::tempdir().unwrap();
        let path = damaged_file(&dir);
        let damage = Damage::default();
        damage.check_in_background(&path, 1000).expect("started");
        let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while damage.get().is_none() && std::time::Instant::now() < until {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(damage.get().map(|e| e.code()), Some("E_CORRUPT"));
    }
}
