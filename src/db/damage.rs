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

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use rusqlite::Connection;
use serde::Serialize;

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

/// Tries of a background check that met a busy file before it is given up as failed.
const BUSY_TRIES: u32 = 3;

/// The pause between two such tries.
const BUSY_PAUSE: Duration = Duration::from_secs(1);

/// What the integrity check of a SQLite file came to (`engine.integrityCheck`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum IntegrityState {
    /// Checked, nothing found.
    Passed,
    /// Damage found (by the check, or when SQLite met a malformed page): writes are refused.
    Damaged,
    /// The background check of a large file runs; writes wait for it.
    Running,
    /// The check could not run to its end for another reason than damage (the file could not
    /// be opened or read, it stayed busy, the check's thread could not start): the file is not
    /// known sound, and writes go ahead unchecked.
    Failed,
    /// Not checked by this engine: opened read-only (no write to keep out of a damaged file),
    /// or PostgreSQL (which checks its own pages).
    Skipped,
}

/// The integrity check's state, and the error that ended it when it failed or found damage.
#[derive(Clone, Debug)]
pub struct Integrity {
    pub state: IntegrityState,
    pub error: Option<LcmError>,
}

#[derive(Default)]
struct State {
    found: Option<LcmError>,
    /// A background check is running: writes wait for it.
    checking: bool,
    /// Checked by this engine (at open or in the background), to its end.
    checked: bool,
    /// Why the check could not run to its end.
    failed: Option<LcmError>,
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

    /// Records that the file was checked to its end at open (what it found is `note`d).
    pub(crate) fn checked_at_open(&self) {
        self.state().checked = true;
    }

    /// What the integrity check came to.
    pub(crate) fn integrity(&self) -> Integrity {
        let state = self.state();
        let (state, error) = match (&state.found, &state.failed) {
            (Some(found), _) => (IntegrityState::Damaged, Some(found.clone())),
            _ if state.checking => (IntegrityState::Running, None),
            (None, Some(failed)) => (IntegrityState::Failed, Some(failed.clone())),
            _ if state.checked => (IntegrityState::Passed, None),
            _ => (IntegrityState::Skipped, None),
        };
        Integrity { state, error }
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

    /// Ends a background check: `Ok(found)` when it ran to its end, else why it could not.
    fn finish(&self, outcome: Result<Option<LcmError>>, path: &str) {
        match outcome {
            Ok(Some(found)) => self.note(&found, path),
            Ok(None) => self.state().checked = true,
            Err(why) => self.state().failed = Some(why.with_path(path)),
        }
        self.state().checking = false;
        self.0 .1.notify_all();
    }

    /// Checks `path` on a thread of its own with a connection of its own (read-only); writes
    /// wait for it. A check that meets a busy file (at its open or while it reads) tries again
    /// (`BUSY_TRIES`); one that cannot run to its end for another reason is recorded as
    /// failed, not as a pass (`integrity`), and writes go ahead. One stopped because the engine
    /// closes (`closing`, then the returned handle's `interrupt`) records nothing.
    pub(crate) fn check_in_background(&self, path: &str, busy_timeout_ms: i64, closing: Arc<AtomicBool>) -> Check {
        self.state().checking = true;
        let check = Check::default();
        let (damage, at, running) = (self.clone(), path.to_string(), check.clone());
        let spawned = std::thread::Builder::new()
            .name("lcm-integrity-check".into())
            .spawn(move || match checked(&at, busy_timeout_ms, &closing, &running) {
                Some(outcome) => damage.finish(outcome, &at),
                None => damage.stopped(),
            });
        if let Err(e) = spawned {
            let why = LcmError::io(path, format!("the integrity check's thread could not start ({e})"));
            self.finish(Err(why), path);
        }
        check
    }

    /// Ends a background check stopped because the engine closes.
    fn stopped(&self) {
        self.state().checking = false;
        self.0 .1.notify_all();
    }
}

/// A background check, to stop when the engine closes: the handle of its connection, once open.
#[derive(Clone, Default)]
pub(crate) struct Check(Arc<Mutex<Option<rusqlite::InterruptHandle>>>);

impl Check {
    /// Stops the statement the check runs, if it runs one.
    pub(crate) fn interrupt(&self) {
        if let Some(handle) = &*self.0.lock().unwrap_or_else(|e| e.into_inner()) {
            handle.interrupt();
        }
    }
}

/// The background check's work: what it found, or why it could not run to its end; None when
/// the engine closed meanwhile.
fn checked(path: &str, busy_timeout_ms: i64, closing: &AtomicBool, check: &Check) -> Option<Result<Option<LcmError>>> {
    let mut tries = 0;
    loop {
        tries += 1;
        let outcome = super::open_read_only(path, busy_timeout_ms, false).and_then(|conn| {
            *check.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(conn.get_interrupt_handle());
            match closing.load(Ordering::SeqCst) {
                true => Ok(None),
                false => integrity_check(&conn),
            }
        });
        match outcome {
            _ if closing.load(Ordering::SeqCst) => return None,
            Err(LcmError::Busy { .. }) if tries < BUSY_TRIES => {
                if !pause(closing) {
                    return None;
                }
            }
            outcome => return Some(outcome),
        }
    }
}

/// `BUSY_PAUSE`, cut short when the engine closes: false when it was.
fn pause(closing: &AtomicBool) -> bool {
    let until = Instant::now() + BUSY_PAUSE;
    while Instant::now() < until {
        if closing.load(Ordering::SeqCst) {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    true
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
        damage.check_in_background(&path, 1000, never());
        let done = ended(&damage);
        assert_eq!(done.state, IntegrityState::Damaged);
        assert_eq!(damage.get().map(|e| e.code()), Some("E_CORRUPT"));
        assert_eq!(done.error.map(|e| e.code()), Some("E_CORRUPT"));
    }

    fn never() -> Arc<AtomicBool> {
        Arc::new(AtomicBool::new(false))
    }

    /// The state once a background check has ended (within 20 s).
    fn ended(damage: &Damage) -> Integrity {
        let until = Instant::now() + Duration::from_secs(20);
        while damage.integrity().state == IntegrityState::Running && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(10));
        }
        damage.integrity()
    }

    /// A sound file in journal mode DELETE, and a connection holding its exclusive lock (no
    /// reader gets in until it is dropped).
    fn locked_file(dir: &tempfile::TempDir) -> (String, Connection) {
        let path = dir.path().join("l.db").to_str().unwrap().to_string();
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch(
            "PRAGMA journal_mode=DELETE; CREATE TABLE t(a); INSERT INTO t VALUES (1);
             PRAGMA locking_mode=EXCLUSIVE; BEGIN EXCLUSIVE;",
        )
        .unwrap();
        (path, conn)
    }

    #[test]
    fn a_sound_file_passes_and_writes_go_ahead() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db").to_str().unwrap().to_string();
        Connection::open(&path)
            .unwrap()
            .execute_batch("CREATE TABLE t(a);")
            .unwrap();
        let damage = Damage::default();
        assert_eq!(damage.integrity().state, IntegrityState::Skipped, "nothing checked yet");
        damage.check_in_background(&path, 1000, never());
        let done = ended(&damage);
        assert_eq!(done.state, IntegrityState::Passed);
        assert!(done.error.is_none());
        damage.before_write(Instant::now(), &path).unwrap();
    }

    /// The reason a check could not run is not a pass: the state says `failed` and why.
    #[test]
    fn a_file_that_cannot_be_opened_is_a_failed_check_not_a_pass() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gone.db").to_str().unwrap().to_string();
        let damage = Damage::default();
        damage.check_in_background(&path, 1000, never());
        let done = ended(&damage);
        assert_eq!(done.state, IntegrityState::Failed);
        let why = done.error.expect("a reason");
        assert_eq!(why.code(), "E_IO", "{why}");
        assert!(why.to_string().contains(&path), "{why}");
        // Not damage: writes are not refused for it.
        assert!(damage.get().is_none());
        damage.before_write(Instant::now(), &path).unwrap();
    }

    #[test]
    fn a_file_that_stays_busy_is_tried_again_then_a_failed_check() {
        let dir = tempfile::tempdir().unwrap();
        let (path, holder) = locked_file(&dir);
        let damage = Damage::default();
        let started = Instant::now();
        damage.check_in_background(&path, 50, never());
        assert_eq!(damage.integrity().state, IntegrityState::Running);
        let done = ended(&damage);
        assert_eq!(done.state, IntegrityState::Failed, "{:?}", done.error);
        assert_eq!(done.error.map(|e| e.code()), Some("E_BUSY"));
        // Tried BUSY_TRIES times, a pause between two.
        assert!(
            started.elapsed() >= BUSY_PAUSE * (BUSY_TRIES - 1),
            "{:?}",
            started.elapsed()
        );
        drop(holder);
    }

    #[test]
    fn a_file_busy_for_a_moment_is_checked_once_free() {
        let dir = tempfile::tempdir().unwrap();
        let (path, holder) = locked_file(&dir);
        let damage = Damage::default();
        damage.check_in_background(&path, 50, never());
        std::thread::sleep(Duration::from_millis(300));
        drop(holder);
        assert_eq!(ended(&damage).state, IntegrityState::Passed);
    }

    /// A check stopped because the engine closes records neither a pass nor a failure.
    #[test]
    fn a_check_stopped_by_closing_records_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let (path, holder) = locked_file(&dir);
        let (damage, closing) = (Damage::default(), never());
        let handle = damage.check_in_background(&path, 50, closing.clone());
        std::thread::sleep(Duration::from_millis(200));
        closing.store(true, Ordering::SeqCst);
        handle.interrupt();
        let done = ended(&damage);
        assert_eq!(done.state, IntegrityState::Skipped, "{:?}", done.error);
        drop(holder);
    }
}
