//! Connections of one engine: a single writer and a few readers. With WAL, readers never wait
//! for the writer, so `assemble` and searches go on while a pass is writing. All methods
//! block; the binding calls them from tokio's blocking pool, never on Node's thread.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rusqlite::hooks::Action;
use rusqlite::Connection;

use super::checkpoint::Checkpointer;
use super::damage::Damage;
use super::waits::{CallDeadline, TimedMutex};
use crate::error::{LcmError, Result};

/// How long `close` waits for a write that is running, before and after interrupting it.
const CLOSE_WAIT: Duration = Duration::from_millis(1000);
/// What `close` gives its final checkpoint and `optimize`.
const CLOSE_WORK: Duration = Duration::from_millis(1000);

/// Readers kept open between calls; more are opened on demand and dropped afterwards.
const IDLE_READERS: usize = 4;

pub(crate) struct Pool {
    path: String,
    busy_timeout_ms: i64,
    /// Opened with `readOnly`: there is no writer, and every connection is read-only.
    read_only: bool,
    /// Read-only connections open the file as immutable (see [`super::open_read_only`]).
    immutable: bool,
    /// Read-write connections open through `wal_runs` (the `walRuns` option).
    wal_runs: bool,
    /// Taken by one call at a time, waiting at most until the call's deadline
    /// (`busy_timeout_ms` from its start, SQLite's lock wait included: see `waits`).
    writer: TimedMutex<Option<Connection>>,
    /// Stops running statements on the writer (`close`).
    writer_interrupt: Option<rusqlite::InterruptHandle>,
    /// True from the start of `close`: writes waiting for the writer or SQLite's lock stop.
    closing: Arc<AtomicBool>,
    readers: Mutex<Option<Vec<Connection>>>,
    checkpointer: Mutex<Option<Checkpointer>>,
    /// How many writes through this pool may have changed or deleted a stored message or
    /// part: every `write`, and any UPDATE or DELETE of those tables the writer's update hook
    /// sees (also in `write_preserving_messages`). What was rendered from messages on the
    /// writer stays valid while this count (and the writer's `data_version`) is unchanged.
    message_rewrites: Arc<AtomicU64>,
    /// Set once the file is found damaged (the check at open, or SQLITE_CORRUPT on any of
    /// this pool's connections): every write is refused with it from then on.
    damage: Damage,
    /// Stops the background check of a large file when the pool closes first.
    damage_check: Mutex<Option<super::damage::Check>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock leaves the connection usable (SQLite rolls back the
    // open transaction when the Transaction guard drops), so recover the guard.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Pool {
    /// Wraps an already migrated and configured writer connection, and starts the
    /// background checkpointer for it.
    pub(crate) fn new(path: &str, busy_timeout_ms: i64, mut writer: Connection, wal_runs: bool) -> Result<Pool> {
        let checkpointer = Checkpointer::start(path, busy_timeout_ms, &mut writer, wal_runs)?;
        let message_rewrites = Arc::new(AtomicU64::new(0));
        let seen = message_rewrites.clone();
        writer.update_hook(Some(move |action: Action, _db: &str, table: &str, _rowid: i64| {
            if action != Action::SQLITE_INSERT && (table == "messages" || table == "message_parts") {
                seen.fetch_add(1, Ordering::SeqCst);
            }
        }))?;
        // Waits for SQLite's lock end at the calling write's deadline (see `waits`).
        writer.busy_handler(Some(super::waits::wait_for_lock))?;
        let writer_interrupt = Some(writer.get_interrupt_handle());
        Ok(Pool {
            path: path.to_string(),
            busy_timeout_ms,
            read_only: false,
            immutable: false,
            wal_runs,
            writer: TimedMutex::new(Some(writer)),
            writer_interrupt,
            closing: Arc::new(AtomicBool::new(false)),
            readers: Mutex::new(Some(Vec::new())),
            checkpointer: Mutex::new(Some(checkpointer)),
            message_rewrites,
            damage: Damage::default(),
            damage_check: Mutex::new(None),
        })
    }

    /// A pool that never writes: `reader` (opened with [`super::open_read_only`]) becomes the
    /// first idle reader, further readers are read-only too, and no checkpointer runs.
    pub(crate) fn read_only(path: &str, busy_timeout_ms: i64, immutable: bool, reader: Connection) -> Pool {
        Pool {
            path: path.to_string(),
            busy_timeout_ms,
            read_only: true,
            immutable,
            wal_runs: false,
            writer: TimedMutex::new(None),
            writer_interrupt: None,
            closing: Arc::new(AtomicBool::new(false)),
            readers: Mutex::new(Some(vec![reader])),
            checkpointer: Mutex::new(None),
            message_rewrites: Arc::new(AtomicU64::new(0)),
            damage: Damage::default(),
            damage_check: Mutex::new(None),
        }
    }

    /// E_READ_ONLY for a read-only pool, E_CLOSED for a closed one: checked before work that
    /// would end in a write (a compaction pass asks the summarizer first).
    pub(crate) fn check_writable(&self) -> Result<()> {
        if self.is_closed() {
            Err(LcmError::Closed)
        } else if self.read_only {
            Err(LcmError::ReadOnly {
                path: self.path.clone(),
                message: format!(
                    "the database {} was opened with readOnly: true, which never writes; open it without readOnly to change it",
                    self.path
                ),
            })
        } else {
            Ok(())
        }
    }

    /// A new connection outside the pool, of the pool's kind (read-only or not).
    pub(crate) fn fresh_connection(&self) -> Result<Connection> {
        if self.is_closed() {
            return Err(LcmError::Closed);
        }
        match self.read_only {
            true => super::open_read_only(&self.path, self.busy_timeout_ms, self.immutable),
            false => super::open_configured_with(&self.path, self.busy_timeout_ms, self.wal_runs),
        }
    }

    /// Runs `f` with the writer connection. Writers are serialised in-process by the mutex
    /// and across processes by SQLite's lock (waiting up to the busy timeout). Counted as a
    /// write that may change stored messages (see `write_preserving_messages`).
    pub(crate) fn write<T>(&self, f: impl FnOnce(&mut Connection) -> Result<T>) -> Result<T> {
        self.write_as(true, self.deadline(), f)
    }

    /// `write` for work that adds rows but never changes or deletes a stored message or
    /// part, nor adds parts to a message stored earlier: ingest (new messages with their
    /// parts) and compaction (summaries and context items). Messages rendered earlier stay
    /// valid across it; an UPDATE or DELETE of a message or part made anyway is still
    /// counted, by the writer's update hook.
    pub(crate) fn write_preserving_messages<T>(&self, f: impl FnOnce(&mut Connection) -> Result<T>) -> Result<T> {
        self.write_as(false, self.deadline(), f)
    }

    /// `write_preserving_messages` for calls that waited in line before (group commit): the
    /// writer and SQLite's lock are waited for until `deadline`, the earliest of the calls'.
    pub(crate) fn write_preserving_messages_by<T>(
        &self,
        deadline: Instant,
        f: impl FnOnce(&mut Connection) -> Result<T>,
    ) -> Result<T> {
        self.write_as(false, deadline, f)
    }

    /// When a call starting now must have had its turn at the writer and SQLite's lock.
    pub(crate) fn deadline(&self) -> Instant {
        Instant::now() + Duration::from_millis(self.busy_timeout_ms.max(0) as u64)
    }

    /// The error of a call that waited in line past its deadline (group commit): behind this
    /// engine's other writes, which may themselves have waited for another process's lock.
    pub(crate) fn waited_too_long(&self) -> LcmError {
        self.out_of_time(
            "the database stayed busy (this engine's other writes, or another connection's or process's lock)",
        )
    }

    fn write_as<T>(
        &self,
        may_rewrite: bool,
        deadline: Instant,
        f: impl FnOnce(&mut Connection) -> Result<T>,
    ) -> Result<T> {
        self.check_writable()?;
        // A file still being checked takes no write until the check says it is sound.
        self.damage.before_write(deadline, &self.path)?;
        let _call = CallDeadline::set(deadline, &self.closing);
        let mut guard = self
            .writer
            .lock_until(deadline, &self.closing)
            .ok_or_else(|| self.writer_busy())?;
        let conn = guard.as_mut().ok_or(LcmError::Closed)?;
        if let Some(damage) = self.damage.get() {
            return Err(damage);
        }
        if may_rewrite {
            // Under the writer's lock, before `f`: a read on the writer (which holds the same
            // lock) sees the new count whether or not `f` completes.
            self.message_rewrites.fetch_add(1, Ordering::SeqCst);
        }
        self.noting_damage(f(conn))
    }

    /// Why a call did not get the writer in time.
    fn writer_busy(&self) -> LcmError {
        self.out_of_time("this engine's other writes held the database")
    }

    /// E_BUSY for a call whose `busyTimeoutMs` ran out while `what`; E_CLOSED once closing.
    fn out_of_time(&self, what: &str) -> LcmError {
        if self.closing.load(Ordering::SeqCst) {
            return LcmError::Closed;
        }
        LcmError::Busy {
            sqlite: None,
            conversation_id: None,
            message: format!(
                "{what} for longer than busyTimeoutMs ({} ms); retry later or raise busyTimeoutMs",
                self.busy_timeout_ms
            ),
        }
    }

    /// The damage found in the file, if any: writes are refused with it.
    pub(crate) fn damage(&self) -> Option<LcmError> {
        self.damage.get()
    }

    /// Records what the check at open found: the damage, or nothing.
    pub(crate) fn checked_at_open(&self, found: Option<LcmError>) {
        match found {
            Some(found) => self.damage.note(&found, &self.path),
            None => self.damage.checked_at_open(),
        }
    }

    /// What the integrity check of the file came to.
    pub(crate) fn integrity(&self) -> super::damage::Integrity {
        self.damage.integrity()
    }

    /// Checks a file too large to check at open on a thread of its own; writes are refused
    /// once it finds damage.
    pub(crate) fn check_damage_in_background(&self) {
        let check = self
            .damage
            .check_in_background(&self.path, self.busy_timeout_ms, self.closing.clone());
        *lock(&self.damage_check) = Some(check);
    }

    /// `result`, with a damaged-file error recorded (named with the file) on the way out.
    fn noting_damage<T>(&self, result: Result<T>) -> Result<T> {
        result.map_err(|e| {
            self.damage.note(&e, &self.path);
            match e {
                LcmError::Corrupt { .. } => e.with_path(&self.path),
                other => other,
            }
        })
    }

    /// Runs `f` with the writer connection while the background checkpointer is held off, for
    /// a checkpoint that must complete rather than give up to the thread's.
    pub(crate) fn write_without_checkpointer<T>(&self, f: impl FnOnce(&mut Connection) -> Result<T>) -> Result<T> {
        self.check_writable()?;
        let _hold = lock(&self.checkpointer).as_ref().map(|c| c.hold());
        self.write(f)
    }

    /// Runs `f` with a reader connection (its own snapshot per statement or transaction).
    pub(crate) fn read<T>(&self, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        let conn = {
            let mut guard = lock(&self.readers);
            let idle = guard.as_mut().ok_or(LcmError::Closed)?;
            idle.pop()
        };
        let conn = match conn {
            Some(c) => c,
            None => self.fresh_connection()?,
        };
        let out = self.noting_damage(f(&conn));
        let mut guard = lock(&self.readers);
        if let Some(idle) = guard.as_mut() {
            if idle.len() < IDLE_READERS {
                idle.push(conn);
            }
        }
        out
    }

    /// Runs `f` on the writer connection when no write is under way, otherwise on a reader.
    /// For the short reads of every turn (assembly, the compaction check): a reader's page
    /// cache is dropped whenever another connection has written, so after each ingest it
    /// reads every page again, while the writer's cache holds what it wrote itself. A write
    /// that arrives meanwhile waits for `f`, so long reads (searches) use `read`.
    pub(crate) fn read_current<T>(&self, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        self.read_current_counted(|conn, _| f(conn))
    }

    /// `read_current`, telling `f` the count of message-changing writes when it runs on the
    /// writer (None on a reader, whose snapshot may be older than what the writer has seen).
    pub(crate) fn read_current_counted<T>(&self, f: impl FnOnce(&Connection, Option<u64>) -> Result<T>) -> Result<T> {
        let guard = self.writer.try_lock();
        match guard.as_ref().and_then(|g| g.as_ref()) {
            Some(writer) => {
                let _call = CallDeadline::set(self.deadline(), &self.closing);
                self.noting_damage(f(writer, Some(self.message_rewrites.load(Ordering::SeqCst))))
            }
            None => {
                drop(guard);
                self.read(|conn| f(conn, None))
            }
        }
    }

    /// Closes every connection. Calls made afterwards fail with E_CLOSED. Bounded: writes
    /// waiting for the writer or SQLite's lock stop at once; one that is running gets
    /// `CLOSE_WAIT`, then its statement is interrupted (it rolls back whole); the final
    /// checkpoint and `optimize` get `CLOSE_WORK` between them. Returns false when the pool
    /// was already closed.
    pub(crate) fn close(&self) -> bool {
        self.closing.store(true, Ordering::SeqCst);
        if let Some(check) = lock(&self.damage_check).take() {
            check.interrupt();
        }
        if let Some(mut c) = lock(&self.checkpointer).take() {
            c.stop();
        }
        let readers = lock(&self.readers).take();
        let was_open = readers.is_some();
        drop(readers);
        let never = AtomicBool::new(false);
        let mut guard = self.writer.lock_until(Instant::now() + CLOSE_WAIT, &never);
        if guard.is_none() {
            if let Some(h) = &self.writer_interrupt {
                h.interrupt();
            }
            guard = self.writer.lock_until(Instant::now() + CLOSE_WAIT, &never);
        }
        // Still held (a callback of the write that never returns): the connection closes when
        // that call ends and the pool is dropped; the file stays consistent either way.
        if let Some(mut w) = guard.and_then(|mut g| g.take()) {
            // Fold the WAL back so the file is self-contained, and refresh the planner's
            // statistics; bounded (no wait for another process's lock: the pool is closing),
            // and harmless when cut short.
            let until = Instant::now() + CLOSE_WORK;
            let _call = CallDeadline::set(until, &self.closing);
            let _ = w.progress_handler(1000, Some(move || Instant::now() >= until));
            let _ = w.execute_batch("PRAGMA wal_checkpoint(PASSIVE); PRAGMA analysis_limit = 400; PRAGMA optimize;");
            let _ = w.progress_handler(0, None::<fn() -> bool>);
            drop(w);
        }
        was_open
    }

    pub(crate) fn is_closed(&self) -> bool {
        lock(&self.readers).is_none()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::time::Duration;

    use super::*;

    /// A migrated pool on a fresh file. A temporary table lives in one connection only, so
    /// `marker` (made on the writer) tells which connection a read ran on.
    fn pool_with_marker() -> (tempfile::TempDir, Pool) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pool.db").to_string_lossy().into_owned();
        let mut conn = super::super::open_connection(&path, 5_000).unwrap();
        super::super::migrate::migrate(&mut conn, &path).unwrap();
        let pool = Pool::new(&path, 5_000, conn, true).unwrap();
        pool.write(|c| Ok(c.execute_batch("CREATE TEMP TABLE marker(x)")?))
            .unwrap();
        (dir, pool)
    }

    fn on_writer(c: &Connection) -> Result<bool> {
        Ok(c.prepare("SELECT x FROM temp.marker").is_ok())
    }

    #[test]
    fn read_current_uses_the_idle_writer_and_read_never_does() {
        let (_dir, pool) = pool_with_marker();
        assert!(pool.read_current(on_writer).unwrap());
        assert!(!pool.read(on_writer).unwrap());
    }

    /// Runs `read` on another thread while a write holds the writer, and gives what it
    /// returned, or a timeout error when it waited for the write (5 s) instead of a hang.
    fn read_while_writing<T: Send>(
        pool: &Pool,
        read: impl FnOnce(&Pool) -> T + Send,
    ) -> std::result::Result<T, mpsc::RecvTimeoutError> {
        let (started, wait) = mpsc::channel();
        let (release, until) = mpsc::channel::<()>();
        std::thread::scope(|s| {
            s.spawn(move || {
                pool.write(|_| {
                    started.send(()).unwrap();
                    until.recv().unwrap();
                    Ok(())
                })
                .unwrap()
            });
            wait.recv().unwrap();
            let (done_tx, done) = mpsc::channel();
            s.spawn(move || done_tx.send(read(pool)).unwrap());
            let got = done.recv_timeout(Duration::from_secs(5));
            release.send(()).unwrap();
            got
        })
    }

    #[test]
    fn read_current_does_not_wait_for_a_write_under_way() {
        let (_dir, pool) = pool_with_marker();
        // The writer is busy: the read goes to a reader at once.
        let got = read_while_writing(&pool, |pool| pool.read_current(on_writer).unwrap());
        assert_eq!(
            got,
            Ok(false),
            "read_current waited for the write, or ran on the writer"
        );
        assert!(pool.read_current(on_writer).unwrap());
    }

    #[test]
    fn read_current_uses_the_writer_after_a_write_panicked_holding_it() {
        let (_dir, pool) = pool_with_marker();
        let panicked = std::thread::scope(|s| {
            s.spawn(|| pool.write(|_| -> Result<()> { panic!("a write that panics") }))
                .join()
        });
        assert!(panicked.is_err());
        assert!(pool.writer.is_poisoned());
        assert!(pool.read_current(on_writer).unwrap());
    }

    /// `close` is bounded: a write that keeps the writer (here a statement that never ends)
    /// is interrupted after `CLOSE_WAIT` and rolls back; writes waiting behind it stop at once
    /// with E_CLOSED instead of waiting out their timeout (#33 item 5).
    #[test]
    fn close_interrupts_a_running_write_and_stops_the_waiting_ones() {
        let (_dir, pool) = pool_with_marker();
        let started = Instant::now();
        std::thread::scope(|s| {
            let running = s.spawn(|| {
                pool.write(|c| {
                    Ok(c.query_row(
                        "WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r) SELECT count(*) FROM r",
                        [],
                        |r| r.get::<_, i64>(0),
                    )?)
                })
            });
            std::thread::sleep(Duration::from_millis(100));
            let waiting = s.spawn(|| pool.write(|_| Ok(())));
            std::thread::sleep(Duration::from_millis(100));
            assert!(pool.close());
            let closed_in = started.elapsed();
            assert!(closed_in < Duration::from_secs(4), "close took {closed_in:?}");
            assert!(running.join().unwrap().is_err());
            assert_eq!(waiting.join().unwrap().unwrap_err().code(), "E_CLOSED");
        });
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    fn rewrites(pool: &Pool) -> Option<u64> {
        pool.read_current_counted(|_, n| Ok(n)).unwrap()
    }

    #[test]
    fn message_changing_writes_are_counted_and_appending_ones_are_not() {
        let (_dir, pool) = pool_with_marker();
        let n = rewrites(&pool).expect("read on the idle writer");
        pool.write_preserving_messages(|c| {
            Ok(c.execute_batch(
                "INSERT INTO conversations (session_id) VALUES ('s');
                 INSERT INTO messages (conversation_id, seq, role, content, token_count) VALUES (1, 1, 'user', 'hi', 1);
                 INSERT INTO message_parts (part_id, message_id, session_id, part_type, ordinal, text_content)
                 VALUES ('p1', 1, 's', 'text', 0, 'hi');",
            )?)
        })
        .unwrap();
        assert_eq!(rewrites(&pool), Some(n), "adding a message counted as changing one");
        // Any general write counts, whatever it does.
        pool.write(|_| Ok(())).unwrap();
        assert_eq!(rewrites(&pool), Some(n + 1));
        // The update hook counts UPDATE and DELETE of messages and parts in any write.
        for sql in [
            "UPDATE message_parts SET text_content = 'changed'",
            "UPDATE messages SET content = 'changed'",
            "DELETE FROM message_parts",
            "DELETE FROM messages",
        ] {
            let before = rewrites(&pool).unwrap();
            pool.write_preserving_messages(|c| Ok(c.execute_batch(sql)?)).unwrap();
            assert!(rewrites(&pool).unwrap() > before, "not counted: {sql}");
        }
        // Other tables' changes are not.
        let before = rewrites(&pool).unwrap();
        pool.write_preserving_messages(|c| Ok(c.execute_batch("UPDATE conversations SET title = 't'")?))
            .unwrap();
        assert_eq!(rewrites(&pool), Some(before));
    }

    #[test]
    fn a_read_on_a_reader_gets_no_count() {
        let (_dir, pool) = pool_with_marker();
        let got = read_while_writing(&pool, |pool| {
            pool.read_current_counted(|c, n| Ok((on_writer(c)?, n))).unwrap()
        });
        assert_eq!(got, Ok((false, None)));
    }

    #[test]
    fn read_current_after_close_is_e_closed() {
        let (_dir, pool) = pool_with_marker();
        assert!(pool.close());
        let err = pool.read_current(on_writer).unwrap_err();
        assert_eq!(err.code(), "E_CLOSED");
    }
}
