//! Locks that hold across machines: PostgreSQL's advisory locks, which every gateway sharing
//! the database sees (the in-process locks of `engine::locks` do not). A lock is taken on a
//! connection its holder keeps, and ends when released or when that session ends (a killed
//! process, a lost network), so a crashed holder never blocks the others for good.
//!
//! Advisory locks are per database, not per schema: the key pairs a hash of the schema and
//! the lock's purpose (PostgreSQL's `hashtext`, the same on every machine) with the id it
//! guards, so two schemas' locks never meet. A collision of hashes would only make one wait.

use std::time::{Duration, Instant};

use super::{Conn, Pooler};
use crate::error::{LcmError, Result};

/// How often a waiter asks again.
const POLL: Duration = Duration::from_millis(50);

/// The lock key of an id: ids beyond i32 fold onto it (a shared key only means a wait).
fn fold(id: i64) -> i32 {
    (id & 0x7fff_ffff) as i32
}

/// Takes the lock for `purpose` on `id` in the connection's schema, waiting up to `wait`
/// (zero: one try), and keeps it until the session ends (or `pg_advisory_unlock`); through a
/// transaction pooler, until the transaction this leaves open on `conn` ends, so `conn` must
/// be the lock's alone (`PgPool::hold`). E_BUSY, naming `what`, when another session holds it
/// longer.
pub(crate) fn take(conn: &Conn, purpose: &str, id: i64, wait: Duration, what: &str) -> Result<()> {
    let space = format!("{}:{purpose}", conn.schema);
    let key = fold(id);
    poll(
        conn,
        wait,
        &format!("{what} is held by another session"),
        || match conn.pooler() {
            Pooler::None => conn.query_one_value("SELECT pg_try_advisory_lock(hashtext($1), $2)", &[&space, &key]),
            // Each try in a transaction of its own, rolled back when it fails: a waiter keeps no
            // server session of the pooler from the others (the holder among them).
            Pooler::Transaction => {
                conn.begin_open("BEGIN")?;
                let got = conn.query_one_value("SELECT pg_try_advisory_xact_lock(hashtext($1), $2)", &[&space, &key]);
                if got.as_ref().map_or(true, |got| !got) {
                    conn.rollback_open()?;
                }
                got
            }
        },
    )
}

/// Asks `try_once` until it says it got the lock, every `POLL`, for up to `wait` (zero: one
/// try); then E_BUSY saying `held` (what is held, by whom) on `conn`'s database.
pub(crate) fn poll(conn: &Conn, wait: Duration, held: &str, mut try_once: impl FnMut() -> Result<bool>) -> Result<()> {
    let deadline = Instant::now() + wait;
    loop {
        if try_once()? {
            return Ok(());
        }
        let now = Instant::now();
        if now >= deadline {
            return Err(LcmError::Busy {
                sqlite: None,
                conversation_id: None,
                message: format!("{held} on {} (waited {} ms)", conn.describe(), wait.as_millis()),
            });
        }
        std::thread::sleep(POLL.min(deadline - now));
    }
}

/// What a write changes, which says whom it waits for on PostgreSQL: writes to different
/// conversations run side by side (each holds the schema's write lock shared and its
/// conversations' locks alone), a write to the whole schema waits for all of them and they for
/// it. SQLite has one writer whatever the scope.
#[derive(Clone, Copy, Debug)]
pub(crate) enum WriteScope<'a> {
    /// The rows of these conversations, and nothing that decides which conversation a
    /// session names.
    Conversations(&'a [i64]),
    /// Conversations the work finds in the transaction: it locks them
    /// (`Db::lock_conversations`) before it writes to them, or says it must change which
    /// conversation a session names (`Db::lock_whole_schema`), and is then run again under
    /// the whole schema's lock.
    Found,
    /// Anything: new conversations, `/new` resets, redaction across conversations.
    Schema,
}

/// How a connection's transaction holds the schema's write lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Held {
    /// Not in a write.
    Nothing,
    /// Shared with writers of other conversations; conversations are locked one by one.
    Shared,
    /// Alone.
    Whole,
}

/// Asks for the schema's write lock in the transaction `conn` is in (released at its end),
/// sent with the next round trip.
pub(crate) fn hold_schema(conn: &Conn, held: Held) -> Result<()> {
    let sql = match held {
        Held::Shared => "SELECT pg_advisory_xact_lock_shared(hashtext($1), 0)",
        Held::Whole => "SELECT pg_advisory_xact_lock(hashtext($1), 0)",
        Held::Nothing => return Ok(()),
    };
    conn.execute_deferred(sql, &[format!("{}:write", conn.schema).into()])
}

/// Asks for the write locks of `ids` in the transaction `conn` is in, in one order every
/// writer follows (the folded keys ascending, each once), so two writers never wait for each
/// other in a circle; sent with the next round trip.
pub(crate) fn hold_conversations(conn: &Conn, ids: &[i64]) -> Result<()> {
    let mut keys: Vec<i64> = ids.iter().map(|id| i64::from(fold(*id))).collect();
    keys.sort_unstable();
    keys.dedup();
    let space = format!("{}:conversation", conn.schema);
    for key in keys {
        conn.execute_deferred(
            "SELECT pg_advisory_xact_lock(hashtext($1), $2::int4)",
            &[space.clone().into(), key.into()],
        )?;
    }
    Ok(())
}

impl Conn {
    fn write_lock(&self) -> std::sync::MutexGuard<'_, (Held, bool)> {
        self.write_lock.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Begins a write's transaction holding the schema's write lock as `held` (and, for a
    /// scope that names them, its conversations' locks).
    pub(crate) fn begin_write(&self, held: Held, scope: WriteScope<'_>) -> Result<()> {
        *self.write_lock() = (held, false);
        hold_schema(self, held)?;
        match (held, scope) {
            (Held::Shared, WriteScope::Conversations(ids)) => hold_conversations(self, ids),
            _ => Ok(()),
        }
    }

    /// Ends the write; true when its work asked for the whole schema.
    pub(crate) fn end_write(&self) -> bool {
        std::mem::replace(&mut *self.write_lock(), (Held::Nothing, false)).1
    }

    /// Locks conversations a `WriteScope::Found` write is about to change (nothing to do in a write
    /// that holds the whole schema, or outside a write).
    pub(crate) fn lock_conversations(&self, ids: &[i64]) -> Result<()> {
        match self.write_lock().0 {
            Held::Shared => hold_conversations(self, ids),
            Held::Whole | Held::Nothing => Ok(()),
        }
    }

    /// Whether a write holds the schema's lock shared, so that what it changes must be locked
    /// by conversation.
    pub(crate) fn shares_schema(&self) -> bool {
        self.write_lock().0 == Held::Shared
    }

    /// A `WriteScope::Found` write's work must change which conversation a session names (a new
    /// conversation, a session id or key recorded on one): when it holds the schema's lock
    /// shared, this fails its transaction, and the write runs again holding the whole schema.
    pub(crate) fn lock_whole_schema(&self) -> Result<()> {
        let mut held = self.write_lock();
        if held.0 != Held::Shared {
            return Ok(());
        }
        held.1 = true;
        Err(LcmError::Busy {
            sqlite: None,
            conversation_id: None,
            message: "this write changes which conversation a session names, which needs the schema's whole write lock (retried with it)".into(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::pg_test_location;

    /// A write to one conversation never waits for a write to another; a write to the same
    /// conversation, a write to the whole schema, and a found-conversations write that must
    /// re-key a session each wait for it (the last one run again, holding the whole schema).
    #[test]
    fn writers_of_other_conversations_go_side_by_side() {
        use crate::pg::pool::PgPool;
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::sync::{mpsc, Arc};
        let Some(location) = pg_test_location("write_locks") else {
            return;
        };
        let pool = Arc::new(PgPool::open(&location, false, 10_000).unwrap());
        let (entered, inside) = mpsc::channel();
        let (release, released) = mpsc::channel::<()>();
        let holder = std::thread::spawn({
            let pool = pool.clone();
            move || {
                pool.write(WriteScope::Conversations(&[1]), |c| {
                    // A round trip, so that the locks are held before it says so.
                    c.query_one_value::<i32>("SELECT 1", &[])?;
                    entered.send(()).unwrap();
                    released.recv().unwrap();
                    Ok(())
                })
            }
        });
        inside.recv_timeout(Duration::from_secs(10)).unwrap();
        let at_once = |scope: WriteScope<'_>| {
            let t = Instant::now();
            pool.write(scope, |c| {
                c.lock_conversations(&[2])?;
                c.query_one_value::<i32>("SELECT 1", &[])
            })
            .unwrap();
            assert!(
                t.elapsed() < Duration::from_secs(2),
                "{scope:?} waited {:?}",
                t.elapsed()
            );
        };
        at_once(WriteScope::Conversations(&[2, 3]));
        at_once(WriteScope::Found);
        let runs = Arc::new(AtomicUsize::new(0));
        let done = Arc::new(AtomicUsize::new(0));
        let waiters: Vec<_> = [0, 1, 2]
            .into_iter()
            .map(|which| {
                let (pool, runs, done) = (pool.clone(), runs.clone(), done.clone());
                std::thread::spawn(move || {
                    let t = Instant::now();
                    let whole_at_last = pool
                        .write(
                            match which {
                                0 => WriteScope::Conversations(&[1]),
                                1 => WriteScope::Schema,
                                _ => WriteScope::Found,
                            },
                            |c| {
                                if which == 2 {
                                    runs.fetch_add(1, Ordering::SeqCst);
                                    c.lock_whole_schema()?;
                                }
                                c.query_one_value::<i32>("SELECT 1", &[])?;
                                Ok(!c.shares_schema())
                            },
                        )
                        .unwrap();
                    done.fetch_add(1, Ordering::SeqCst);
                    (t.elapsed(), whole_at_last)
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(400));
        assert_eq!(
            done.load(Ordering::SeqCst),
            0,
            "a write went ahead of conversation 1's holder"
        );
        release.send(()).unwrap();
        holder.join().unwrap().unwrap();
        for (which, w) in waiters.into_iter().enumerate() {
            let (waited, whole) = w.join().unwrap();
            assert!(
                waited >= Duration::from_millis(350),
                "writer {which} waited only {waited:?}"
            );
            assert_eq!(whole, which != 0, "writer {which}");
        }
        assert_eq!(
            runs.load(Ordering::SeqCst),
            2,
            "found-conversations work runs again under the whole schema"
        );
    }

    #[test]
    fn one_holder_at_a_time_per_schema_and_a_dead_holder_releases() {
        let Some(location) = pg_test_location("locks") else {
            return;
        };
        let a = location.connect().unwrap();
        let b = location.connect().unwrap();
        take(&a, "op", 7, Duration::ZERO, "conversation 7").unwrap();
        let started = Instant::now();
        let e = take(&b, "op", 7, Duration::from_millis(200), "conversation 7")
            .err()
            .unwrap();
        assert_eq!(e.code(), "E_BUSY");
        assert!(
            e.to_string().contains("conversation 7 is held by another session"),
            "{e}"
        );
        assert!(started.elapsed() >= Duration::from_millis(200), "it waited");
        // Another id, another purpose, another schema: free.
        take(&b, "op", 8, Duration::ZERO, "x").unwrap();
        take(&b, "copy", 7, Duration::ZERO, "x").unwrap();
        let other = crate::pg::Location::parse(
            &std::env::var("LCM_TEST_DATABASE_URL").unwrap(),
            Some(&format!("{}_other", location.schema)),
        )
        .unwrap()
        .connect()
        .unwrap();
        take(&other, "op", 7, Duration::ZERO, "x").unwrap();
        // Released: the next one gets it; a waiter gets it as soon as the holder lets go.
        a.batch("SELECT pg_advisory_unlock_all()").unwrap();
        take(&b, "op", 7, Duration::ZERO, "x").unwrap();
        let waiter = std::thread::spawn({
            let location = location.clone();
            move || {
                let c = location.connect().unwrap();
                let t = Instant::now();
                take(&c, "op", 7, Duration::from_secs(10), "x").unwrap();
                t.elapsed()
            }
        });
        std::thread::sleep(Duration::from_millis(300));
        // The holder's session ends (a killed gateway): its lock goes with it.
        let pid: i32 = b.query_one_value("SELECT pg_backend_pid()", &[]).unwrap();
        a.query("SELECT pg_terminate_backend($1)", &[&pid]).unwrap();
        let waited = waiter.join().unwrap();
        assert!(
            waited >= Duration::from_millis(250) && waited < Duration::from_secs(5),
            "{waited:?}"
        );
    }
}
