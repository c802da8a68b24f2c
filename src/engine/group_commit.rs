//! Group commit for ingest: calls that arrive while another one is writing wait for it, then
//! go into the database together, in one transaction through the backend's write door (on
//! SQLite and PostgreSQL alike). A gateway serving many sessions sends many small concurrent
//! ingests; each commit costs about fifteen log frames on SQLite (a WAL flush and the schema's
//! write lock on PostgreSQL) whatever it holds, so sharing one commit raises throughput. Each
//! call stays atomic on its own (see [`messages::ingest_group`]): its messages are all stored
//! or none are.
//!
//! The first caller to find no writer at work becomes the leader: it takes the queued jobs,
//! writes them and hands every caller its result; if more calls queued meanwhile, it passes
//! the lead to the oldest of them and returns, so no caller waits on writes that are not its
//! own.
//! Calls announce themselves before validating their messages, and a leader about to write
//! waits a little (at most [`GATHER_MAX`]) for announced calls to join, so that calls which
//! start together commit together.

use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::db::SchemaFlags;
use crate::error::{LcmError, Result};
use crate::sql::{Backend, Db, WriteScope};
use crate::store::conversations::Target;
use crate::store::messages::{self, IngestJob, IngestMode, IngestOutcome};
use crate::store::normalize::NewMessage;

/// Most calls one transaction takes; more wait for the next one.
const MAX_GROUP: usize = 64;
/// Longest a leader waits for announced calls still validating their messages.
const GATHER_MAX: Duration = Duration::from_micros(500);

/// What a queued caller is told: its result, or that it leads the next write.
enum Reply {
    Done(Result<IngestOutcome>),
    Lead,
}

struct Queued {
    /// The call's turn at the writer must come by then (`busyTimeoutMs` from its start).
    deadline: Instant,
    target: Target,
    messages: Vec<NewMessage>,
    mode: IngestMode,
    reply: SyncSender<Reply>,
    #[cfg(test)]
    owner: std::thread::ThreadId,
}

#[derive(Default)]
struct State {
    queued: Vec<Queued>,
    leading: bool,
    /// Calls announced but not queued yet.
    arriving: usize,
    /// Transactions written, the most calls one of them held, and how many were written by
    /// a thread other than the oldest call's (a caller kept writing for others).
    #[cfg(test)]
    counts: (usize, usize, usize),
}

/// Where a group goes: the backend's write door, the schema's flags, and what rides in each
/// group's transaction after its messages (the prompt-cache report).
pub(super) struct Door<'a> {
    pub backend: &'a Backend,
    pub flags: SchemaFlags,
    pub after: &'a dyn Fn(Db, &[IngestOutcome]),
}

#[derive(Default)]
pub(super) struct GroupCommit {
    state: Mutex<State>,
    /// Signalled when an announced call queues or withdraws.
    joined: Condvar,
}

/// An announced call; dropping it unqueued (validation failed) withdraws the announcement.
pub(super) struct Arrival<'a> {
    group: &'a GroupCommit,
    pending: bool,
}

impl Arrival<'_> {
    fn settle(&mut self, st: &mut State) {
        if std::mem::replace(&mut self.pending, false) {
            st.arriving -= 1;
            self.group.joined.notify_all();
        }
    }
}

impl Drop for Arrival<'_> {
    fn drop(&mut self) {
        if self.pending {
            let group = self.group;
            self.settle(&mut group.lock());
        }
    }
}

impl GroupCommit {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Announces a call that is about to validate its messages and then queue them.
    pub(super) fn arrive(&self) -> Arrival<'_> {
        self.lock().arriving += 1;
        Arrival {
            group: self,
            pending: true,
        }
    }

    /// Stores `messages` (already validated) and returns this call's outcome, possibly in a
    /// transaction shared with concurrent calls. Blocks the calling thread.
    pub(super) fn ingest(
        &self,
        mut arrival: Arrival<'_>,
        door: &Door<'_>,
        target: Target,
        messages: Vec<NewMessage>,
        mode: IngestMode,
    ) -> Result<IngestOutcome> {
        // One message at a time: `Lead` is read before the caller writes, `Done` last.
        let (reply, replies) = sync_channel(1);
        let lead = {
            let mut st = self.lock();
            arrival.settle(&mut st);
            st.queued.push(Queued {
                deadline: door.backend.deadline(),
                target,
                messages,
                mode,
                reply,
                #[cfg(test)]
                owner: std::thread::current().id(),
            });
            !std::mem::replace(&mut st.leading, true)
        };
        if lead {
            self.lead(door);
        }
        loop {
            match replies.recv() {
                Ok(Reply::Done(result)) => return result,
                Ok(Reply::Lead) => self.lead(door),
                Err(_) => {
                    return Err(LcmError::Internal(
                        "the ingest that was writing this call's messages stopped".into(),
                    ))
                }
            }
        }
    }

    /// See `State::counts`.
    #[cfg(test)]
    fn counts(&self) -> (usize, usize, usize) {
        self.lock().counts
    }

    /// Writes one group of queued jobs (the leader's own is the oldest, so it is in it), then
    /// passes the lead to the oldest call still queued, or steps down.
    fn lead(&self, door: &Door<'_>) {
        // If a write panics, the guard fails whatever is still queued and steps down, so the
        // next caller can lead.
        let mut leader = Leader {
            group: self,
            done: false,
        };
        let group: Vec<Queued> = {
            let mut st = self.lock();
            let deadline = Instant::now() + GATHER_MAX;
            while st.arriving > 0 && st.queued.len() < MAX_GROUP {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                st = self.joined.wait_timeout(st, left).unwrap_or_else(|e| e.into_inner()).0;
            }
            let n = st.queued.len().min(MAX_GROUP);
            #[cfg(test)]
            {
                let foreign = usize::from(
                    st.queued
                        .first()
                        .is_some_and(|q| q.owner != std::thread::current().id()),
                );
                st.counts = (st.counts.0 + 1, st.counts.1.max(n), st.counts.2 + foreign);
            }
            st.queued.drain(..n).collect()
        };
        // A call that waited in line past its deadline fails now (E_BUSY) rather than wait
        // another full timeout for its own write; the others are written by the earliest of
        // their deadlines, so none waits longer than its own.
        let now = Instant::now();
        let (group, late): (Vec<Queued>, Vec<Queued>) = group.into_iter().partition(|q| q.deadline > now);
        for q in late {
            let _ = q.reply.send(Reply::Done(Err(door.backend.waited_too_long())));
        }
        let jobs: Vec<IngestJob<'_>> = group
            .iter()
            .map(|q| IngestJob {
                target: &q.target,
                messages: &q.messages,
                mode: &q.mode,
            })
            .collect();
        if let Some(deadline) = group.iter().map(|q| q.deadline).min() {
            let write = |f: &mut dyn FnMut(Db) -> Result<Vec<IngestOutcome>>| {
                door.backend
                    .write_preserving_messages_by(deadline, WriteScope::Found, f)
            };
            let results = messages::ingest_group(write, door.flags, &jobs, door.after);
            for (q, r) in group.iter().zip(results) {
                let _ = q.reply.send(Reply::Done(r));
            }
        }
        let mut st = self.lock();
        // Under the state lock: a call queued after this finds either a leader or none.
        while let Some(next) = st.queued.first() {
            if next.reply.send(Reply::Lead).is_ok() {
                leader.done = true;
                return;
            }
            // Its caller is gone: nothing to write for it.
            st.queued.remove(0);
        }
        st.leading = false;
        leader.done = true;
    }
}

/// Steps a leader down if it stops without handing on or stepping down itself, that is, by a
/// panic.
struct Leader<'a> {
    group: &'a GroupCommit,
    /// Set, under the state lock, when the lead was passed on or given up; by then another
    /// call may lead, and its queue must be left alone.
    done: bool,
}

impl Drop for Leader<'_> {
    fn drop(&mut self) {
        if !self.done {
            let mut st = self.group.lock();
            // Drop the queued jobs so their callers stop waiting (they get E_INTERNAL).
            st.queued.clear();
            st.leading = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Barrier};

    use serde_json::json;

    use crate::engine::Engine;
    use crate::store::conversations::Target;
    use crate::test_support::engine_with;

    /// Concurrent calls from many threads: every message stored once, each call's messages
    /// contiguous and in order in its conversation, and a call that fails (an unknown
    /// conversation) fails alone.
    #[test]
    fn concurrent_ingests_share_commits_and_stay_atomic_each() {
        let dir = tempfile::tempdir().unwrap();
        concurrent_ingests(engine_with(&dir, json!({})));
    }

    /// The same on PostgreSQL, where the group's transaction locks the conversations it writes
    /// (or the whole schema, for the first turn of a session).
    #[test]
    fn concurrent_ingests_share_commits_and_stay_atomic_each_on_postgres() {
        let Some((location, url)) = crate::test_support::pg_test_url("group_commit") else {
            return;
        };
        let options = json!({ "dbPath": url });
        concurrent_ingests(Engine::open(crate::config::Config::from_options(&options, None).unwrap()).unwrap());
        crate::test_support::drop_test_schema(&location);
    }

    fn concurrent_ingests(engine: Engine) {
        let engine = Arc::new(engine);
        let threads = 8;
        let rounds = 40;
        let barrier = Arc::new(Barrier::new(threads));
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (engine, barrier) = (engine.clone(), barrier.clone());
                std::thread::spawn(move || {
                    let mut failures = 0;
                    for r in 0..rounds {
                        barrier.wait();
                        let batch: Vec<_> = (0..3)
                            .map(|k| json!({"role": "user", "content": format!("t{t} r{r} k{k}"), "entryId": format!("{t}-{r}-{k}")}))
                            .collect();
                        // Every fifth round, thread 0 writes to a conversation that does not exist.
                        let target = match (t, r % 5) {
                            (0, 0) => Target::Conversation(999_999),
                            _ => Target::Session(format!("s{}", t % 3)),
                        };
                        match engine.ingest(&target, &batch) {
                            Ok(o) => assert_eq!((o.inserted, o.skipped), (3, 0)),
                            Err(e) => {
                                assert_eq!(e.code(), "E_NOT_FOUND", "{e}");
                                failures += 1;
                            }
                        }
                    }
                    failures
                })
            })
            .collect();
        let failures: usize = handles.into_iter().map(|h| h.join().unwrap()).sum();
        assert_eq!(failures, rounds / 5);
        let expected = (threads * rounds - rounds / 5) * 3;
        let mut stored = 0;
        for c in engine.conversations().unwrap() {
            let msgs = engine.messages(c.conversation_id, 0, 100_000).unwrap();
            stored += msgs.len();
            // Each call's three messages are adjacent and in order.
            for chunk in msgs.chunks(3) {
                let texts: Vec<String> = chunk.iter().map(|m| m.content.as_str().unwrap().to_string()).collect();
                let prefix = texts[0].trim_end_matches("k0").to_string();
                assert_eq!(
                    texts,
                    vec![format!("{prefix}k0"), format!("{prefix}k1"), format!("{prefix}k2")]
                );
            }
        }
        assert_eq!(stored, expected);
        let (transactions, largest, foreign) = engine.ingests.counts();
        assert!(
            largest > 1 && transactions < threads * rounds,
            "{transactions} transactions, largest {largest}"
        );
        // Each group is written by the thread of its oldest call, which then passes the lead
        // on: no caller is kept writing other calls' messages.
        assert_eq!(foreign, 0, "{foreign} of {transactions} groups written for others");
        let report = engine.verify(None).unwrap();
        assert!(report.ok, "{:?}", report.problems);
    }

    #[test]
    fn a_closed_engine_fails_every_queued_call() {
        let dir = tempfile::tempdir().unwrap();
        let engine: Engine = engine_with(&dir, json!({}));
        assert!(engine.close());
        let err = engine
            .ingest(&Target::Session("s".into()), &[json!({"role": "user", "content": "x"})])
            .unwrap_err();
        assert_eq!(err.code(), "E_CLOSED");
    }
}
