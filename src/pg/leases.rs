//! Locks that last an operation through a transaction pooler (`Pooler::Transaction`), as
//! rows: an advisory lock lasts at most a transaction there, and a transaction left open for a
//! compaction (minutes of model calls) would keep one of the pooler's few server sessions idle
//! all along (every gateway compacting at once could take them all, and wait for one more)
//! and die with the server's `idle_in_transaction_session_timeout`. A lease is a row naming
//! its holder and when it runs out; the holder's thread renews it while the operation runs
//! and deletes it at the end. A holder that dies (a killed process, a lost network) stops
//! renewing: its lease runs out within `TTL`, and the next taker replaces it.

use std::sync::mpsc;
use std::time::Duration;

use rusqlite::types::Value;

use super::Conn;
use crate::error::{LcmError, Result};

/// The leases of one schema (PostgreSQL only; made at open with the schema's other
/// PostgreSQL-only tables).
pub(crate) const CREATE: &str = "CREATE TABLE IF NOT EXISTS lcm_native_leases (
    space TEXT NOT NULL,
    key BIGINT NOT NULL,
    holder TEXT NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (space, key)
)";

/// How long a lease outlives its holder's last renewal (renewed every third of it).
#[cfg(not(test))]
pub(crate) const TTL: Duration = Duration::from_secs(30);
#[cfg(test)]
pub(crate) const TTL: Duration = Duration::from_secs(2);

const TAKE: &str = "INSERT INTO lcm_native_leases (space, key, holder, expires_at)
    VALUES ($1, $2, $3, clock_timestamp() + make_interval(secs => $4))
    ON CONFLICT (space, key) DO UPDATE SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at
    WHERE lcm_native_leases.expires_at < clock_timestamp()
    RETURNING holder";

const RENEW: &str = "UPDATE lcm_native_leases SET expires_at = clock_timestamp() + make_interval(secs => $4)
    WHERE space = $1 AND key = $2 AND holder = $3";

const RELEASE: &str = "DELETE FROM lcm_native_leases WHERE space = $1 AND key = $2 AND holder = $3";

/// A lease held: renewed by its own thread on its own connection until dropped, then deleted.
pub(crate) struct Lease {
    stop: Option<mpsc::Sender<()>>,
    renewer: Option<std::thread::JoinHandle<()>>,
}

/// Takes the lease for `purpose` on `id` in `conn`'s schema, waiting up to `wait` (zero: one
/// try); E_BUSY, naming `what`, while another holder keeps it. `conn` is the lease's from then
/// on (its thread renews and deletes it there).
pub(crate) fn take(conn: Conn, purpose: &str, id: i64, wait: Duration, what: &str) -> Result<Lease> {
    let space = format!("{}:{purpose}", conn.schema);
    let holder = uuid::Uuid::now_v7().to_string();
    let key = vec![Value::Text(space), Value::Integer(id), Value::Text(holder)];
    let params = |key: &[Value]| {
        let mut p = key.to_vec();
        p.push(Value::Real(TTL.as_secs_f64()));
        p
    };
    super::locks::poll(&conn, wait, &format!("{what} is held by another gateway"), || {
        Ok(!conn.query_cached(TAKE, &params(&key))?.is_empty())
    })?;
    let (stop, stopped) = mpsc::channel::<()>();
    let renewer = std::thread::Builder::new()
        .name("lcm-pg-lease".into())
        .spawn(move || {
            loop {
                match stopped.recv_timeout(TTL / 3) {
                    Err(mpsc::RecvTimeoutError::Timeout) => {
                        // A renewal that fails is tried again at the next tick; a lease that
                        // ran out meanwhile is another holder's, and stays theirs.
                        let _ = conn.execute_cached(RENEW, &params(&key));
                    }
                    Ok(()) => return, // abandoned (tests): left to run out
                    Err(mpsc::RecvTimeoutError::Disconnected) => break,
                }
            }
            let _ = conn.execute_cached(RELEASE, &key);
        })
        .map_err(|e| LcmError::Internal(format!("cannot start the lease's renewing thread: {e}")))?;
    Ok(Lease {
        stop: Some(stop),
        renewer: Some(renewer),
    })
}

impl Lease {
    /// Stops renewing without deleting, as a holder that died would (tests).
    #[cfg(test)]
    pub(crate) fn abandon(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(renewer) = self.renewer.take() {
            let _ = renewer.join();
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        // Its thread deletes the row; waited for, so the lease is free when this returns.
        drop(self.stop.take());
        if let Some(renewer) = self.renewer.take() {
            let _ = renewer.join();
        }
    }
}
