//! Background WAL checkpoints. SQLite's automatic checkpoint runs inside the commit that
//! crosses the threshold, so that one write pays for copying the whole log back into the
//! database file. Instead the writer's WAL hook wakes this thread, which checkpoints with its
//! own connection (PASSIVE: it never blocks readers or the writer) while writes go on.

use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use rusqlite::Connection;

use crate::error::Result;

/// Checkpoint once the log holds this many pages (SQLite's own default threshold).
pub(crate) const CHECKPOINT_PAGES: i32 = 1000;
/// Past this, the committing writer checkpoints itself, as SQLite would: the background
/// thread is not keeping up (for example, long-lived readers pin the log).
const WRITER_CHECKPOINT_PAGES: i32 = 4 * CHECKPOINT_PAGES;
/// How long the writer's own checkpoint waits for one of the thread's to finish: two cannot
/// run at once, and a passive one gives up at once when the other holds the lock.
const WRITER_WAIT: std::time::Duration = std::time::Duration::from_millis(250);

#[derive(Default)]
struct State {
    pending: bool,
    stop: bool,
    /// The thread is checkpointing.
    running: bool,
    /// Holds in force (see [`Checkpointer::hold`]): the thread starts no checkpoint.
    held: u32,
    /// Checkpoints the thread has run, for tests.
    runs: u64,
}

/// Owns the checkpoint thread; dropping it stops and joins the thread.
pub(crate) struct Checkpointer {
    shared: Arc<(Mutex<State>, Condvar)>,
    thread: Option<JoinHandle<()>>,
}

impl Checkpointer {
    /// Starts the thread with its own connection to `path`, and installs the WAL hook on
    /// `writer` that wakes it (its connection through `wal_runs` as the writer's is).
    pub(crate) fn start(
        path: &str,
        busy_timeout_ms: i64,
        writer: &mut Connection,
        wal_runs: bool,
    ) -> Result<Checkpointer> {
        let conn = super::open_configured_with(path, busy_timeout_ms, wal_runs)?;
        let shared: Arc<(Mutex<State>, Condvar)> = Arc::default();
        let thread_shared = shared.clone();
        let thread = std::thread::Builder::new()
            .name("lcm-checkpoint".into())
            .spawn(move || run(conn, thread_shared))
            .map_err(|e| crate::error::LcmError::Internal(format!("cannot start checkpoint thread: {e}")))?;
        let hook_shared = shared.clone();
        // The log's length when the thread was last woken. A passive checkpoint that ran
        // while commits went on leaves the log unrestarted and past the threshold; waking the
        // thread at every later commit would checkpoint (and fsync twice) per commit, so it is
        // woken once per CHECKPOINT_PAGES new frames. A log shorter than at the previous
        // commit has restarted. Past WRITER_CHECKPOINT_PAGES the writer checkpoints at every
        // commit, as SQLite's own auto-checkpoint does: that bound must hold even when the
        // thread's checkpoint keeps losing the race.
        let (mut woken_at, mut previous) = (0, 0);
        writer.wal_hook(Some(move |wal: &mut rusqlite::hooks::Wal, pages: i32| {
            if pages <= previous || pages < woken_at {
                woken_at = 0;
            }
            previous = pages;
            let (lock, cv) = &*hook_shared;
            if pages >= WRITER_CHECKPOINT_PAGES {
                // Let a checkpoint of the thread's finish first: while it holds the checkpoint
                // lock the writer's would do nothing, and under load that can go on for many
                // commits while the log grows.
                {
                    let st = lock.lock().unwrap_or_else(|e| e.into_inner());
                    let _ = cv.wait_timeout_while(st, WRITER_WAIT, |st| st.running);
                }
                // Never fail the commit over a checkpoint: a busy one is retried next commit.
                let _ = wal.checkpoint();
            } else if pages >= woken_at + CHECKPOINT_PAGES {
                woken_at = pages;
                lock.lock().unwrap_or_else(|e| e.into_inner()).pending = true;
                cv.notify_all();
            }
            Ok(())
        }))?;
        Ok(Checkpointer {
            shared,
            thread: Some(thread),
        })
    }

    /// Keeps the thread from checkpointing until the returned guard drops, after waiting for
    /// a checkpoint in progress to finish. Two checkpoints cannot run at once, and one that
    /// must complete (a redaction's TRUNCATE) fails at once, without waiting, while the
    /// thread's holds the checkpoint lock.
    pub(crate) fn hold(&self) -> Hold {
        let (lock, cv) = &*self.shared;
        let mut st = lock.lock().unwrap_or_else(|e| e.into_inner());
        st.held += 1;
        while st.running {
            st = cv.wait(st).unwrap_or_else(|e| e.into_inner());
        }
        Hold {
            shared: self.shared.clone(),
        }
    }

    /// How many checkpoints the background thread has run so far.
    #[cfg(test)]
    pub(crate) fn runs(&self) -> u64 {
        self.shared.0.lock().unwrap_or_else(|e| e.into_inner()).runs
    }

    /// Stops the thread (after any checkpoint in progress) and closes its connection.
    pub(crate) fn stop(&mut self) {
        {
            let (lock, cv) = &*self.shared;
            lock.lock().unwrap_or_else(|e| e.into_inner()).stop = true;
            cv.notify_all();
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// While alive, the checkpoint thread starts no checkpoint (see [`Checkpointer::hold`]).
pub(crate) struct Hold {
    shared: Arc<(Mutex<State>, Condvar)>,
}

impl Drop for Hold {
    fn drop(&mut self) {
        let (lock, cv) = &*self.shared;
        let mut st = lock.lock().unwrap_or_else(|e| e.into_inner());
        st.held -= 1;
        cv.notify_all();
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        self.stop();
    }
}

fn run(conn: Connection, shared: Arc<(Mutex<State>, Condvar)>) {
    let (lock, cv) = &*shared;
    loop {
        {
            let mut st = lock.lock().unwrap_or_else(|e| e.into_inner());
            while (!st.pending || st.held > 0) && !st.stop {
                st = cv.wait(st).unwrap_or_else(|e| e.into_inner());
            }
            if st.stop {
                return;
            }
            st.pending = false;
            st.running = true;
        }
        // PASSIVE copies what it can without waiting; a busy database just means "later".
        let _ = conn.wal_checkpoint_v2(Some(rusqlite::MAIN_DB), rusqlite::wal::CheckpointMode::PASSIVE);
        let mut st = lock.lock().unwrap_or_else(|e| e.into_inner());
        st.runs += 1;
        st.running = false;
        cv.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::Checkpointer;
    use crate::config::Config;
    use crate::engine::Engine;
    use crate::store::conversations::Target;
    use serde_json::json;

    /// Sustained writes must not grow the WAL without bound: the background thread (or, when
    /// it falls behind, the writer) checkpoints and the log restarts.
    #[test]
    fn wal_stays_bounded_under_sustained_ingest() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.db");
        let engine = Engine::open(Config::with_db_path(path.to_str().unwrap())).unwrap();
        let body = "some words to index ".repeat(100);
        let wal = path.with_extension("db-wal");
        let mut largest = 0;
        for batch in 0..60 {
            let msgs: Vec<_> = (0..100)
                .map(|i| json!({"role": "user", "content": format!("{body} {batch} {i}")}))
                .collect();
            engine.ingest(&Target::Session("s".into()), &msgs).unwrap();
            largest = largest.max(std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0));
        }
        let db_size = std::fs::metadata(&path).unwrap().len();
        assert!(
            db_size > 10 << 20,
            "the data reached the database file ({db_size} bytes)"
        );
        // 4,000 pages is where the writer takes over; allow one batch on top.
        assert!(largest < 24 << 20, "WAL grew to {largest} bytes");
        assert!(engine.close());
    }

    /// Small commits after the log has passed the threshold must not each wake the thread:
    /// a passive checkpoint racing the writer rarely restarts the log, and one checkpoint (two
    /// fsyncs) per commit made single-message ingest slower.
    #[test]
    fn small_commits_wake_the_thread_once_per_threshold() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.db");
        let path = path.to_str().unwrap();
        let mut writer = crate::db::open_configured(path, 1000).unwrap();
        writer.execute_batch("CREATE TABLE t (body BLOB)").unwrap();
        let mut cp = Checkpointer::start(path, 1000, &mut writer, true).unwrap();
        let commits = 2000;
        for _ in 0..commits {
            // About five log frames per commit, 10,000 in all, paced like calls from Node.
            writer.execute("INSERT INTO t VALUES (zeroblob(16000))", []).unwrap();
            std::thread::sleep(std::time::Duration::from_micros(300));
        }
        cp.stop();
        let runs = cp.runs();
        // One wake per 1,000 new frames (and after each restart): a few dozen at most.
        assert!((1..=100).contains(&runs), "{runs} checkpoints for {commits} commits");
    }

    /// While a hold is in force the thread starts no checkpoint (a redaction's TRUNCATE must
    /// not lose the checkpoint lock to it); afterwards it checkpoints again.
    #[test]
    fn a_hold_keeps_the_thread_from_checkpointing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("h.db");
        let path = path.to_str().unwrap();
        let mut writer = crate::db::open_configured(path, 1000).unwrap();
        writer.execute_batch("CREATE TABLE t (body BLOB)").unwrap();
        let mut cp = Checkpointer::start(path, 1000, &mut writer, true).unwrap();
        let write = |n: usize| {
            for _ in 0..n {
                writer.execute("INSERT INTO t VALUES (zeroblob(16000))", []).unwrap();
            }
        };
        let hold = cp.hold();
        write(500);
        std::thread::sleep(std::time::Duration::from_millis(100));
        assert_eq!(cp.runs(), 0, "no checkpoint while held");
        drop(hold);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while cp.runs() == 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(cp.runs() > 0, "the wake during the hold runs once it is released");
        cp.stop();
    }
}
