//! Connections of one engine to PostgreSQL: a few kept open and reused. Every read runs in
//! one REPEATABLE READ snapshot (as a SQLite read transaction), every write in a transaction
//! that first takes the write locks of what it changes (`locks::WriteScope`): writers of one
//! conversation on every machine take turns as SQLite's single writer does (turn numbering,
//! `seq`, ordinals stay dense), writers of different conversations do not wait for each
//! other. A connection that failed is dropped, not reused.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use super::locks::{Held, WriteScope};
use super::{Conn, Location, Pooler};
use crate::error::{LcmError, Result};

/// Connections kept open between calls.
const IDLE: usize = 4;

pub(crate) struct PgPool {
    location: Location,
    described: String,
    idle: Mutex<Vec<Conn>>,
    read_only: bool,
    closed: AtomicBool,
    /// A call's bound (`busyTimeoutMs`): the server's `lock_timeout` and `statement_timeout`,
    /// and, a little past it, how long a round trip may go unanswered.
    call: Duration,
    /// Whether the schema keeps the count of message rewrites (`rewrites`), found out once.
    counts_rewrites: std::sync::OnceLock<bool>,
}

/// How long past the server's own timeouts a round trip may take before the server counts
/// as gone.
const ANSWER_GRACE: Duration = Duration::from_millis(500);

impl PgPool {
    /// Connects once (so a wrong URL fails the open). Every call is bounded by
    /// `busy_timeout_ms`: a lock waited for (E_BUSY), a statement (E_TIMEOUT), a server that
    /// does not answer at all (E_CONNECTION).
    pub(crate) fn open(location: &Location, read_only: bool, busy_timeout_ms: i64) -> Result<PgPool> {
        let call = Duration::from_millis(busy_timeout_ms.max(1) as u64);
        let limit = Some(call + ANSWER_GRACE);
        let first = location.handshake(limit)?;
        first.set_limit(limit);
        let mut idle = Vec::new();
        if location.pooler == Pooler::None {
            // Asked before either sets anything on its session (each answer bounded as a call).
            let second = location.handshake(limit)?;
            second.set_limit(limit);
            check_sessions_apart(&first, &second)?;
            idle.push(bounded(second.configured()?, call)?);
        }
        idle.insert(0, bounded(first.configured()?, call)?);
        Ok(PgPool {
            described: idle[0].describe().to_string(),
            location: location.clone(),
            idle: Mutex::new(idle),
            read_only,
            closed: AtomicBool::new(false),
            call,
            counts_rewrites: std::sync::OnceLock::new(),
        })
    }

    pub(crate) fn describe(&self) -> &str {
        &self.described
    }

    fn take(&self) -> Result<Conn> {
        if self.is_closed() {
            return Err(LcmError::Closed);
        }
        let idle = self.idle.lock().unwrap_or_else(|p| p.into_inner()).pop();
        match idle {
            Some(c) => Ok(c),
            None => bounded(self.location.connect_within(Some(self.call + ANSWER_GRACE))?, self.call),
        }
    }

    /// Runs `f` on a connection of the pool outside any transaction, bounded as every call.
    fn with<T>(&self, f: impl FnOnce(&Conn) -> Result<T>) -> Result<T> {
        let conn = self.take()?;
        let out = f(&conn);
        self.give_back(conn, &out);
        out
    }

    /// `with` for work that may take long on a large database (the schema made or upgraded at
    /// open, the redaction's `VACUUM FULL`): no statement or answer bound (lock waits stay
    /// bounded, by `lock_timeout` or what `f` sets), the connection's bounds restored afterwards.
    pub(crate) fn with_unbounded<T>(&self, f: impl FnOnce(&Conn) -> Result<T>) -> Result<T> {
        let conn = self.take()?;
        conn.set_limit(None);
        let out = conn.set_bounds(self.call.as_millis() as u64, 0).and_then(|()| f(&conn));
        match bounded(conn, self.call) {
            Ok(conn) => {
                self.give_back(conn, &out);
                out
            }
            Err(e) => out.and(Err(e)),
        }
    }

    /// Keeps `conn` for later calls unless it was lost (or the pool closed).
    fn give_back<T>(&self, conn: Conn, out: &Result<T>) {
        let lost = matches!(out, Err(LcmError::Connection { .. })) || conn.is_broken();
        if !lost && !self.is_closed() {
            let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
            if idle.len() < IDLE {
                idle.push(conn);
            }
        }
    }

    /// Whether the schema keeps the count of message rewrites (`super::rewrites`): every schema
    /// opened for writing does (the open adds it); one opened read-only before that upgrade
    /// does not. Asked of the server once.
    pub(crate) fn counts_rewrites(&self) -> Result<bool> {
        if let Some(known) = self.counts_rewrites.get() {
            return Ok(*known);
        }
        let found = self.with(|c| c.has_table(super::rewrites::TABLE))?;
        Ok(*self.counts_rewrites.get_or_init(|| found))
    }

    /// `f` in one read-only snapshot.
    pub(crate) fn read<T>(&self, f: impl FnOnce(&Conn) -> Result<T>) -> Result<T> {
        self.with(|c| c.transaction_as("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", f))
    }

    /// `f` in one transaction holding the locks `scope` says (released at commit): the
    /// schema's write lock shared and the conversations' alone, or the schema's alone. A
    /// `WriteScope::Found` write whose work asks for the whole schema runs again holding it.
    pub(crate) fn write<T>(&self, scope: WriteScope<'_>, mut f: impl FnMut(&Conn) -> Result<T>) -> Result<T> {
        self.check_writable()?;
        self.with(|c| {
            if !matches!(scope, WriteScope::Schema) {
                let out = c.transaction(|c| {
                    c.begin_write(Held::Shared, scope)?;
                    f(c)
                });
                let wants_whole = c.end_write();
                if out.is_ok() || !wants_whole {
                    return out;
                }
            }
            let out = c.transaction(|c| {
                c.begin_write(Held::Whole, scope)?;
                f(c)
            });
            c.end_write();
            out
        })
    }

    /// When a call starting now must have had its turn (a group commit's queue).
    pub(crate) fn deadline(&self) -> std::time::Instant {
        std::time::Instant::now() + self.call
    }

    /// The error of a call that waited in this engine's queue of writes past its deadline.
    pub(crate) fn waited_too_long(&self) -> LcmError {
        if self.is_closed() {
            return LcmError::Closed;
        }
        LcmError::Busy {
            sqlite: None,
            conversation_id: None,
            message: format!(
                "this engine's other writes to {} took longer than busyTimeoutMs ({} ms) to commit; retry later or raise busyTimeoutMs",
                self.described,
                self.call.as_millis()
            ),
        }
    }

    /// The conversation's operation lock across machines (passes, sweeps, rewrites), waited for
    /// up to `wait`: held as long as the operation, whatever connections the operation's reads
    /// and writes use (`hold`; through a transaction pooler a lease, `leases`, which keeps no
    /// server session while the operation waits for its model). E_BUSY after `wait`.
    pub(crate) fn operation_lock(&self, conversation_id: i64, wait: std::time::Duration) -> Result<HeldLock> {
        let what =
            format!("conversation {conversation_id}'s operation lock (another gateway is compacting or rewriting it)");
        let held = match self.location.pooler {
            Pooler::None => self.hold("operation", conversation_id, wait, &what),
            Pooler::Transaction => self.take().and_then(|conn| {
                super::leases::take(conn, "operation", conversation_id, wait, &what).map(|lease| HeldLock {
                    conn: None,
                    lease: Some(lease),
                })
            }),
        };
        held.map_err(|e| match e {
            LcmError::Busy { message, .. } => LcmError::Busy {
                sqlite: None,
                conversation_id: Some(conversation_id),
                message: format!("{message}; retry later or raise lockTimeoutMs"),
            },
            e => e,
        })
    }

    /// The lock for `purpose` on `id` across machines (`locks::take`), waited for up to `wait`,
    /// taken on a connection of its own that the returned guard keeps: it lasts until the guard
    /// is dropped, and a holder that dies (its session ends) frees it.
    pub(crate) fn hold(&self, purpose: &str, id: i64, wait: Duration, what: &str) -> Result<HeldLock> {
        let conn = self.take()?;
        super::locks::take(&conn, purpose, id, wait, what)?;
        Ok(HeldLock {
            conn: Some(conn),
            lease: None,
        })
    }

    pub(crate) fn check_writable(&self) -> Result<()> {
        if self.is_closed() {
            Err(LcmError::Closed)
        } else if self.read_only {
            Err(LcmError::ReadOnly {
                path: self.described.clone(),
                message: format!(
                    "{} was opened with readOnly: true, which never writes; open it without readOnly to change it",
                    self.described
                ),
            })
        } else {
            Ok(())
        }
    }

    /// Closes the idle connections; later calls get E_CLOSED. True if it was open.
    pub(crate) fn close(&self) -> bool {
        let was_open = !self.closed.swap(true, Ordering::SeqCst);
        self.idle.lock().unwrap_or_else(|p| p.into_inner()).clear();
        was_open
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }
}

/// `conn` with a pool's bounds: the server's lock and statement timeouts at `call`, and round
/// trips answered within a little more.
fn bounded(conn: Conn, call: Duration) -> Result<Conn> {
    // The statement's bound a little past the lock's, so that a lock waited for out says so
    // (E_BUSY) rather than the statement (E_TIMEOUT).
    let ms = call.as_millis() as u64;
    conn.set_limit(Some(call + ANSWER_GRACE));
    conn.set_bounds(ms, ms + ANSWER_GRACE.as_millis() as u64 / 2)?;
    Ok(conn)
}

/// Two connections opened without `pooler=transaction` must be two server sessions: a pooler
/// in transaction mode (PgBouncer's `pool_mode = transaction`) hands one idle server session
/// to each client in turn, and there lcm-native's session settings, kept statements and
/// session locks would reach other clients. E_INVALID_CONFIG naming the setting, before
/// anything is written.
fn check_sessions_apart(a: &Conn, b: &Conn) -> Result<()> {
    // Directly, each connection has one process all along; through such a pooler the one just
    // given back is usually handed out next (asked twice, in case another client took it).
    let (mut of_a, mut of_b) = (Vec::new(), Vec::new());
    for _ in 0..2 {
        of_a.push(a.backend_pid()?);
        of_b.push(b.backend_pid()?);
    }
    let Some(pid) = of_a.iter().find(|pid| of_b.contains(pid)) else {
        return Ok(());
    };
    Err(LcmError::invalid_config(
        "pooler",
        format!(
            "two connections to {} reached the same server session (process {pid}): a pooler in transaction mode (PgBouncer's pool_mode = transaction) is between lcm-native and the server; add pooler=transaction to the URL (or connect to the server itself, or to a pooler in session mode)",
            a.describe()
        ),
    ))
}

/// A lock across machines (`PgPool::hold`, `PgPool::operation_lock`), held while this lives:
/// on its connection's session, through a transaction pooler by the transaction left open on
/// it, or as a lease.
pub(crate) struct HeldLock {
    conn: Option<Conn>,
    lease: Option<super::leases::Lease>,
}

impl HeldLock {
    /// `locks::take` on `conn`, which the lock then keeps to itself.
    pub(crate) fn take(conn: Conn, purpose: &str, id: i64, wait: Duration, what: &str) -> Result<HeldLock> {
        super::locks::take(&conn, purpose, id, wait, what)?;
        Ok(HeldLock {
            conn: Some(conn),
            lease: None,
        })
    }

    /// Says, once the lock is lost while held, why: a lease can be (`leases::renew`).
    pub(crate) fn lost(&self) -> Option<tokio::sync::watch::Receiver<Option<String>>> {
        self.lease.as_ref().map(super::leases::Lease::lost)
    }

    /// Lets the lock go as a holder that died would: a lease is left to run out (tests).
    #[cfg(test)]
    pub(crate) fn abandon(mut self) {
        if let Some(lease) = self.lease.take() {
            lease.abandon();
        }
    }
}

impl Drop for HeldLock {
    fn drop(&mut self) {
        // A lease is deleted by its thread, waited for; a lock held by a transaction ends with
        // it (`Conn`'s drop rolls it back); a session's lock ends with the session.
        drop(self.lease.take());
        drop(self.conn.take());
    }
}
