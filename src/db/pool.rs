//! Connections of one engine: a single writer and a few readers. With WAL, readers never wait
//! for the writer, so `assemble` and searches go on while a pass is writing. All methods
//! block; the binding calls them from tokio's blocking pool, never on Node's thread.

use std::sync::{Mutex, MutexGuard};

use rusqlite::Connection;

use super::checkpoint::Checkpointer;
use crate::error::{LcmError, Result};

/// Readers kept open between calls; more are opened on demand and dropped afterwards.
const IDLE_READERS: usize = 4;

pub struct Pool {
    path: String,
    busy_timeout_ms: i64,
    /// Opened with `readOnly`: there is no writer, and every connection is read-only.
    read_only: bool,
    /// Read-only connections open the file as immutable (see [`super::open_read_only`]).
    immutable: bool,
    writer: Mutex<Option<Connection>>,
    readers: Mutex<Option<Vec<Connection>>>,
    checkpointer: Mutex<Option<Checkpointer>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock leaves the connection usable (SQLite rolls back the
    // open transaction when the Transaction guard drops), so recover the guard.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Pool {
    /// Wraps an already migrated and configured writer connection, and starts the
    /// background checkpointer for it.
    pub fn new(path: &str, busy_timeout_ms: i64, mut writer: Connection) -> Result<Pool> {
        let checkpointer = Checkpointer::start(path, busy_timeout_ms, &mut writer)?;
        Ok(Pool {
            path: path.to_string(),
            busy_timeout_ms,
            read_only: false,
            immutable: false,
            writer: Mutex::new(Some(writer)),
            readers: Mutex::new(Some(Vec::new())),
            checkpointer: Mutex::new(Some(checkpointer)),
        })
    }

    /// A pool that never writes: `reader` (opened with [`super::open_read_only`]) becomes the
    /// first idle reader, further readers are read-only too, and no checkpointer runs.
    pub fn read_only(path: &str, busy_timeout_ms: i64, immutable: bool, reader: Connection) -> Pool {
        Pool {
            path: path.to_string(),
            busy_timeout_ms,
            read_only: true,
            immutable,
            writer: Mutex::new(None),
            readers: Mutex::new(Some(vec![reader])),
            checkpointer: Mutex::new(None),
        }
    }

    /// E_READ_ONLY for a read-only pool, E_CLOSED for a closed one: checked before work that
    /// would end in a write (a compaction pass asks the summarizer first).
    pub fn check_writable(&self) -> Result<()> {
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
    pub fn fresh_connection(&self) -> Result<Connection> {
        if self.is_closed() {
            return Err(LcmError::Closed);
        }
        match self.read_only {
            true => super::open_read_only(&self.path, self.busy_timeout_ms, self.immutable),
            false => super::open_configured(&self.path, self.busy_timeout_ms),
        }
    }

    pub fn path(&self) -> &str {
        &self.path
    }

    /// Runs `f` with the writer connection. Writers are serialised in-process by the mutex
    /// and across processes by SQLite's lock (waiting up to the busy timeout).
    pub fn write<T>(&self, f: impl FnOnce(&mut Connection) -> Result<T>) -> Result<T> {
        self.check_writable()?;
        let mut guard = lock(&self.writer);
        let conn = guard.as_mut().ok_or(LcmError::Closed)?;
        f(conn)
    }

    /// Runs `f` with the writer connection while the background checkpointer is held off, for
    /// a checkpoint that must complete rather than give up to the thread's.
    pub fn write_without_checkpointer<T>(&self, f: impl FnOnce(&mut Connection) -> Result<T>) -> Result<T> {
        self.check_writable()?;
        let _hold = lock(&self.checkpointer).as_ref().map(|c| c.hold());
        self.write(f)
    }

    /// Runs `f` with a reader connection (its own snapshot per statement or transaction).
    pub fn read<T>(&self, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        let conn = {
            let mut guard = lock(&self.readers);
            let idle = guard.as_mut().ok_or(LcmError::Closed)?;
            idle.pop()
        };
        let conn = match conn {
            Some(c) => c,
            None => self.fresh_connection()?,
        };
        let out = f(&conn);
        let mut guard = lock(&self.readers);
        if let Some(idle) = guard.as_mut() {
            if idle.len() < IDLE_READERS {
                idle.push(conn);
            }
        }
        out
    }

    /// Closes every connection. Calls made afterwards fail with E_CLOSED. Returns false when
    /// the pool was already closed.
    pub fn close(&self) -> bool {
        if let Some(mut c) = lock(&self.checkpointer).take() {
            c.stop();
        }
        let writer = lock(&self.writer).take();
        let readers = lock(&self.readers).take();
        let was_open = readers.is_some();
        if let Some(w) = writer {
            // Fold the WAL back so the file is self-contained; failure here is harmless.
            let _ = w.execute_batch("PRAGMA wal_checkpoint(PASSIVE); PRAGMA optimize;");
            drop(w);
        }
        drop(readers);
        was_open
    }

    pub fn is_closed(&self) -> bool {
        lock(&self.readers).is_none()
    }
}
