//! Locks that last an operation through a transaction pooler (`Pooler::Transaction`), as
//! rows: an advisory lock lasts at most a transaction there, and a transaction left open for a
//! compaction (minutes of model calls) would keep one of the pooler's few server sessions idle
//! all along (every gateway compacting at once could take them all, and wait for one more)
//! and die with the server's `idle_in_transaction_session_timeout`. A lease is a row naming
//! its holder and when it runs out; the holder's thread renews it while the operation runs
//! and deletes it at the end. A holder that dies (a killed process, a lost network) stops
//! renewing: its lease runs out within `TTL`, and the next taker replaces it.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use tokio::sync::watch;

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
    lost: watch::Receiver<Option<String>>,
}

/// Takes the lease for `purpose` on `id` in `conn`'s schema, waiting up to `wait` (zero: one
/// try); E_BUSY, naming `what`, while another holder keeps it. `conn` is the lease's from then
/// on (its thread renews and deletes it there).
pub(crate) fn take(conn: Conn, purpose: &str, id: i64, wait: Duration, what: &str) -> Result<Lease> {
    let space = format!("{}:{purpose}", conn.schema);
    let holder = uuid::Uuid::now_v7().to_string();
    let key = vec![Value::Text(space), Value::Integer(id), Value::Text(holder)];
    super::locks::poll(&conn, wait, &format!("{what} is held by another gateway"), || {
        Ok(!conn.query_cached(TAKE, &with_ttl(&key))?.is_empty())
    })?;
    let (stop, stopped) = mpsc::channel::<()>();
    let (lose, lost) = watch::channel(None);
    let what = what.to_string();
    let renewer = std::thread::Builder::new()
        .name("lcm-pg-lease".into())
        .spawn(move || {
            if renew(&conn, &key, &stopped, &lose, &what) {
                let _ = conn.execute_cached(RELEASE, &key);
            }
        })
        .map_err(|e| LcmError::Internal(format!("cannot start the lease's renewing thread: {e}")))?;
    Ok(Lease {
        stop: Some(stop),
        renewer: Some(renewer),
        lost,
    })
}

/// The lease's key with its time to live, for `TAKE` and `RENEW`.
fn with_ttl(key: &[Value]) -> Vec<Value> {
    let mut p = key.to_vec();
    p.push(Value::Real(TTL.as_secs_f64()));
    p
}

/// Renews the lease every third of `TTL` until told to stop (or abandoned, in tests). A lease
/// another holder took (the renewal found no row of this holder's), or one whose renewals
/// failed for two thirds of `TTL` (it may run out before the next one), is lost: `lose` says
/// so and why, and the lease is no longer renewed. Whether to delete it now (not when abandoned).
fn renew(
    conn: &Conn,
    key: &[Value],
    stopped: &mpsc::Receiver<()>,
    lose: &watch::Sender<Option<String>>,
    what: &str,
) -> bool {
    let mut renewed = Instant::now();
    loop {
        match stopped.recv_timeout(TTL / 3) {
            Err(mpsc::RecvTimeoutError::Timeout) if lose.borrow().is_none() => {
                let why = match conn.execute_cached(RENEW, &with_ttl(key)) {
                    Ok(0) => Some("its lease ran out and another gateway took it".to_string()),
                    Ok(_) => {
                        renewed = Instant::now();
                        None
                    }
                    // A failed renewal is tried again at the next tick, while the lease has time.
                    Err(e) if renewed.elapsed() >= TTL * 2 / 3 => Some(format!(
                        "its lease could not be renewed for {} s ({e}) and may have run out",
                        renewed.elapsed().as_secs()
                    )),
                    Err(_) => None,
                };
                if let Some(why) = why {
                    let _ = lose.send(Some(format!(
                        "{what} was lost while the operation ran: {why}; the operation stopped before its next write, retry it"
                    )));
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Ok(()) => return false, // abandoned (tests): left to run out
            Err(mpsc::RecvTimeoutError::Disconnected) => return true,
        }
    }
}

impl Lease {
    /// Says, once the lease is lost, why (`renew`).
    pub(crate) fn lost(&self) -> watch::Receiver<Option<String>> {
        self.lost.clone()
    }

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
