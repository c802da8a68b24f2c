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
            writer: Mutex::new(Some(writer)),
            readers: Mutex::new(Some(Vec::new())),
            checkpointer: Mutex::new(Some(checkpointer)),
        })
    }

    pub fn path(&self) -> &str {
        &self.path
    }

    /// Runs `f` with the writer connection. Writers are serialised in-process by the mutex
    /// and across processes by SQLite's lock (waiting up to the busy timeout).
    pub fn write<T>(&self, f: impl FnOnce(&mut Connection) -> Result<T>) -> Result<T> {
        let mut guard = lock(&self.writer);
        let conn = guard.as_mut().ok_or(LcmError::Closed)?;
        f(conn)
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
            None => super::open_configured(&self.path, self.busy_timeout_ms)?,
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
        let was_open = writer.is_some();
        if let Some(w) = writer {
            // Fold the WAL back so the file is self-contained; failure here is harmless.
            let _ = w.execute_batch("PRAGMA wal_checkpoint(PASSIVE); PRAGMA optimize;");
            drop(w);
        }
        drop(readers);
        was_open
    }

    pub fn is_closed(&self) -> bool {
        lock(&self.writer).is_none()
    }
}
