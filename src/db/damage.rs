//! Finding a damaged database file before lcm-native writes into it. SQLite reports a
//! malformed page only when a statement touches it, so a file damaged where no write goes
//! would take every write and stay broken. An integrity check at open (`PRAGMA
//! integrity_check`: every page, and every index entry against its table, so an index out of
//! step with its rows is found too) finds it first. Files up to `CHECK_AT_OPEN_BYTES` are
//! checked before `open` returns; larger ones on a thread of their own, so that opening stays
//! fast, and writes wait for that check (until their deadline: then E_BUSY, and the OpenClaw
//! plugin spools the turn). A file that needs a migration is checked before it, whatever its
//! size: a migration never runs on a damaged file. Measured on this machine: 1 GB checks in
//! ~1.2 s with the file in the page cache, ~15 s read cold from disk.

use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

use rusqlite::Connection;

use crate::error::{LcmError, Result};

/// Largest file (database and WAL together) checked before `open` returns.
pub(crate) const CHECK_AT_OPEN_BYTES: u64 = 32 << 20;

/// What an integrity check of `conn`'s database found: None when it is sound, else the first
/// problem as a coded E_CORRUPT error. A file that is not SQLite at all stays E_SCHEMA.
pub(crate) fn integrity_check(conn: &Connection) -> Result<Option<LcmError>> {
    let found: rusqlite::Result<String> = conn.query_row("PRAGMA integrity_check(1)", [], |r| r.get(0));
    match found {
        Ok(line) if line == "ok" => Ok(None),
        Ok(line) => {
            let line = line.split_whitespace().collect::<Vec<_>>().join(" ");
            Ok(Some(LcmError::corrupt(None, format!("integrity_check: {line}"))))
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

#[derive(Default)]
struct State {
    found: Option<LcmError>,
    /// A background check is running: writes wait for it.
    checking: bool,
}

/// The damage found in one engine's file, once found (shared with the background check).
#[derive(Clone, Default)]
pub(crate) struct Damage(Arc<(Mutex<State>, Condvar)>);

impl Damage {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.0 .0.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn get(&self) -> Option<LcmError> {
        self.state().found.clone()
    }

    /// Records `err` when it says the file is damaged (the first such error is kept).
    pub(crate) fn note(&self, err: &LcmError, path: &str) {
        if matches!(err, LcmError::Corrupt { .. }) {
            let mut state = self.state();
            if state.found.is_none() {
                state.found = Some(err.clone().with_path(path));
            }
        }
    }

    /// For a write: waits until a running check is done (until `deadline`: then E_BUSY), and
    /// returns the damage it found, if any, as the error to refuse the write with.
    pub(crate) fn before_write(&self, deadline: Instant, path: &str) -> Result<()> {
        let (lock, done) = &*self.0;
        let mut state = lock.lock().unwrap_or_else(|e| e.into_inner());
        while state.checking {
            let now = Instant::now();
            if now >= deadline {
                return Err(LcmError::Busy {
                    sqlite: None,
                    conversation_id: None,
                    message: format!(
                        "{path} ({} MB) is still being checked for damage (integrity_check), which every write waits for; try again shortly (the OpenClaw plugin keeps the turn in its spool meanwhile)",
                        file_bytes(path) >> 20
                    ),
                });
            }
            state = done
                .wait_timeout(state, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        match &state.found {
            Some(found) => Err(found.clone()),
            None => Ok(()),
        }
    }

    fn finish(&self, found: Option<LcmError>, path: &str) {
        if let Some(found) = found {
            self.note(&found, path);
        }
        self.state().checking = false;
        self.0 .1.notify_all();
    }

    /// Checks `path` on a thread of its own with a connection of its own (read-only); writes
    /// wait for it. The returned handle stops it (`interrupt`) when the engine closes first.
    pub(crate) fn check_in_background(&self, path: &str, busy_timeout_ms: i64) -> Option<rusqlite::InterruptHandle> {
        let conn = super::open_read_only(path, busy_timeout_ms, false).ok()?;
        let handle = conn.get_interrupt_handle();
        let (damage, path) = (self.clone(), path.to_string());
        self.state().checking = true;
        let spawned = std::thread::Builder::new()
            .name("lcm-integrity-check".into())
            .spawn(move || {
                let found = integrity_check(&conn).ok().flatten();
                damage.finish(found, &path);
            });
        match spawned {
            Ok(_) => Some(handle),
            Err(_) => {
                self.finish(None, "");
                None
            }
        }
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
        let found = integrity_check(&conn).unwrap().expect("the damage was not found");
        assert_eq!(found.code(), "E_CORRUPT");
        let named = found.with_path(&path);
        assert!(named.to_string().starts_with(&path), "{named}");
        assert!(named.to_string().contains("restore the file from a backup"), "{named}");
        let sound = Connection::open_in_memory().unwrap();
        assert!(integrity_check(&sound).unwrap().is_none());
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
