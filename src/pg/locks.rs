//! Locks that hold across machines: PostgreSQL's advisory locks, which every gateway sharing
//! the database sees (the in-process locks of `engine::locks` do not). A lock is taken on a
//! connection its holder keeps, and ends when released or when that session ends (a killed
//! process, a lost network), so a crashed holder never blocks the others for good.
//!
//! Advisory locks are per database, not per schema: the key pairs a hash of the schema and
//! the lock's purpose (PostgreSQL's `hashtext`, the same on every machine) with the id it
//! guards, so two schemas' locks never meet. A collision of hashes would only make one wait.

use std::time::{Duration, Instant};

use super::Conn;
use crate::error::{LcmError, Result};

/// How often a waiter asks again.
const POLL: Duration = Duration::from_millis(50);

/// Takes the lock for `purpose` on `id` in the connection's schema, waiting up to `wait`
/// (zero: one try), and keeps it until the session ends (or `pg_advisory_unlock`). E_BUSY,
/// naming `what`, when another session holds it longer.
pub(crate) fn take(conn: &Conn, purpose: &str, id: i64, wait: Duration, what: &str) -> Result<()> {
    let space = format!("{}:{purpose}", conn.schema);
    // Ids beyond i32 fold onto it: a shared key only means a wait.
    let key = (id & 0x7fff_ffff) as i32;
    let deadline = Instant::now() + wait;
    loop {
        let got: bool = conn.query_one_value("SELECT pg_try_advisory_lock(hashtext($1), $2)", &[&space, &key])?;
        if got {
            return Ok(());
        }
        let now = Instant::now();
        if now >= deadline {
            return Err(LcmError::Busy {
                sqlite: None,
                conversation_id: None,
                message: format!(
                    "{what} is held by another session on {} (waited {} ms)",
                    conn.describe(),
                    wait.as_millis()
                ),
            });
        }
        std::thread::sleep(POLL.min(deadline - now));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::pg_test_location;

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
