//! Recall's bridge of meaning: the statements of a conversation's history held in memory as
//! coarse sentence vectors (`semantic`), so that a question reaches a statement that shares no
//! word with it ("which tool ended up carrying usage data?" to "analytics events will go
//! through Segment"). The few nearest are compared again in full, their pieces weighed by
//! their rarity in the history; the excerpt is the statement itself, read from the message's
//! current text (an edited or redacted message gives what it says now).
//!
//! Held per engine, one history per conversation, filled from the store on first use and
//! topped up with the newer messages at each recall; nothing is written to disk. A long
//! history is read on a thread of its own (`fill`): the turns until it is read recall by
//! words alone, as an assembly never waits for it.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use rusqlite::params;

use crate::error::Result;
use crate::semantic::{self, Rarity, COARSE_DIMS};
use crate::sql::{Backend, Db};

/// Conversations held at once (the least recently used beyond it go).
const MAX_HISTORIES: usize = 8;

/// Statements one history holds at most (64 bytes each: 16 MB); past it the oldest go.
const MAX_HELD: usize = 250_000;

/// Messages read per query of a refill.
const REFILL_BATCH: i64 = 2_000;

/// New messages an assembly reads itself (a turn adds a few); past it the rest are read on a
/// thread of their own.
const INLINE_MESSAGES: i64 = 200;

/// Characters of a message read for its statements (as many as its kinds are indexed from).
const READ_CHARS: i64 = crate::value_kinds::SCANNED_CHARS as i64;

/// A question is compared by meaning only when one of its pieces stands in at most this share
/// of the history's sentences (as a rare word is the word path's evidence).
const RARE_SHARE: f32 = 1.0 / 9.0;

/// Messages the coarse pass hands to the full comparison.
const NEAREST: usize = 12;

/// One conversation's statements.
#[derive(Default)]
struct History {
    /// Messages up to this place in the conversation (`seq`, which only grows) are held.
    upto: i64,
    /// Each message with statements and how many (theirs stand together in `vectors`).
    runs: Vec<(i64, u32)>,
    vectors: Vec<[i8; COARSE_DIMS]>,
    /// Shared with the recalls that compare now (a refill copies it if one still does).
    rarity: Arc<Rarity>,
}

/// One conversation's history, with whether a thread is reading it.
#[derive(Default)]
struct Slot {
    filling: AtomicBool,
    history: Mutex<History>,
}

/// The statements of each conversation recalled from, by engine.
#[derive(Default)]
pub(crate) struct Meanings(Mutex<Held>);

/// Each conversation's history with when it was used last (a tick of the clock beside them):
/// kept outside the history's lock, which a refill holds.
type Held = (HashMap<i64, (Arc<Slot>, u64)>, u64);

/// What `Meanings::nearest` could do.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Outcome {
    /// The questions were compared with the history's statements.
    Compared,
    /// The history is being read on a thread; nothing was compared.
    Reading,
    /// The questions hold only pieces common in the history (or none).
    Common,
}

impl Outcome {
    /// As the stats say it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Outcome::Compared => "compared",
            Outcome::Reading => "reading",
            Outcome::Common => "common",
        }
    }
}

/// A statement near the question.
pub(crate) struct Near {
    /// The statement's place in the message's text.
    pub range: Range<usize>,
    /// The cosine of the statement and the question (pieces weighed by rarity).
    pub similarity: f32,
    /// Which of the message's questions it is near (its sentences, in order).
    pub question: usize,
}

impl Meanings {
    fn history(&self, conversation_id: i64) -> Arc<Slot> {
        let mut guard = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let (map, clock) = &mut *guard;
        *clock += 1;
        let now = *clock;
        if !map.contains_key(&conversation_id) && map.len() >= MAX_HISTORIES {
            if let Some(id) = map.iter().min_by_key(|(_, h)| h.1).map(|(&id, _)| id) {
                map.remove(&id);
            }
        }
        let entry = map.entry(conversation_id).or_default();
        entry.1 = now;
        entry.0.clone()
    }

    #[cfg(test)]
    pub(crate) fn holds(&self, conversation_id: i64) -> bool {
        self.0.lock().unwrap().0.contains_key(&conversation_id)
    }

    /// Lets go of a conversation's statements (its messages changed in place).
    pub(crate) fn forget(&self, conversation_id: i64) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .0
            .remove(&conversation_id);
    }

    /// Lets go of every conversation's statements (a redaction: they were made from the text).
    pub(crate) fn clear(&self) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).0.clear();
    }

    /// For each of `questions`: the messages of `conversation_id` outside the context
    /// (`outside` says which ids are) whose statements are nearest in meaning to it by coarse
    /// vector (`NEAREST` at most, nearest first), with what compares a statement in full
    /// (`Found::best`). One pass over the history's coarse vectors a question. Nothing while
    /// the history is being read (`backend` reads what is more than a turn's worth on a thread).
    pub(crate) fn nearest(
        &self,
        db: Db,
        backend: &Arc<Backend>,
        conversation_id: i64,
        questions: &[&str],
        outside: impl Fn(i64) -> bool,
    ) -> Result<(Outcome, Vec<Found>)> {
        let asked: Vec<(Vec<u32>, [i8; COARSE_DIMS])> = questions
            .iter()
            .filter_map(|q| {
                let p = semantic::pieces(q);
                let v = semantic::coarse(&p)?;
                Some((p, v))
            })
            .collect();
        if asked.is_empty() {
            return Ok((Outcome::Common, Vec::new()));
        }
        let slot = self.history(conversation_id);
        if slot.filling.load(Ordering::Acquire) {
            return Ok((Outcome::Reading, Vec::new()));
        }
        let mut h = slot.history.lock().unwrap_or_else(|e| e.into_inner());
        if refill(db, conversation_id, &mut h, INLINE_MESSAGES)? {
            drop(h);
            fill(slot, backend.clone(), conversation_id);
            return Ok((Outcome::Reading, Vec::new()));
        }
        let asked: Vec<_> = asked
            .into_iter()
            .filter(|(p, _)| h.rarity.has_rare(p, RARE_SHARE))
            .collect();
        if asked.is_empty() {
            return Ok((Outcome::Common, Vec::new()));
        }
        // The best statement of each message outside the context for each question, coarse:
        // a message's statements stand together, in the order of its id.
        let mut best: Vec<Vec<(i64, i32)>> = vec![Vec::new(); asked.len()];
        let mut dots = Vec::with_capacity(h.vectors.len());
        for ((_, qv), best) in asked.iter().zip(best.iter_mut()) {
            semantic::coarse_dots(qv, &h.vectors, &mut dots);
            let mut at = 0;
            for &(m, n) in &h.runs {
                let end = at + n as usize;
                if outside(m) {
                    best.push((m, dots[at..end].iter().copied().max().unwrap_or(i32::MIN)));
                }
                at = end;
            }
        }
        let found = asked
            .into_iter()
            .zip(best)
            .map(|((question, _), mut ranked)| {
                let order = |a: &(i64, i32), b: &(i64, i32)| b.1.cmp(&a.1).then(b.0.cmp(&a.0));
                if ranked.len() > NEAREST {
                    ranked.select_nth_unstable_by(NEAREST - 1, order);
                    ranked.truncate(NEAREST);
                }
                ranked.sort_by(order);
                Found {
                    ids: ranked.into_iter().map(|r| r.0).collect(),
                    question: semantic::full(&question, &h.rarity),
                    rarity: Some(h.rarity.clone()),
                }
            })
            .collect();
        Ok((Outcome::Compared, found))
    }
}

/// Reads the rest of a long history into `slot` on a thread of its own, a batch per read
/// (a reader is held no longer than one); a failed read leaves what was read, and the next
/// recall goes on from there.
fn fill(slot: Arc<Slot>, backend: Arc<Backend>, conversation_id: i64) {
    // One reader a history (two assemblies of a conversation at once can both get here).
    if slot
        .filling
        .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        return;
    }
    /// Says the read is over however the thread ends (a panic too): the next recall goes on.
    struct Done(Arc<Slot>);
    impl Drop for Done {
        fn drop(&mut self) {
            self.0.filling.store(false, Ordering::Release);
        }
    }
    let done = Done(slot);
    let spawned = std::thread::Builder::new()
        .name("lcm-recall-meaning".into())
        .spawn(move || loop {
            let mut h = done.0.history.lock().unwrap_or_else(|e| e.into_inner());
            match backend.read(|db| refill(db, conversation_id, &mut h, REFILL_BATCH)) {
                Ok(true) => continue,
                Ok(false) | Err(_) => break,
            }
        });
    // Not spawned: the closure, and the `Done` in it, are dropped with the error.
    drop(spawned);
}

/// The messages `Meanings::nearest` found for one question.
#[derive(Default)]
pub(crate) struct Found {
    pub ids: Vec<i64>,
    /// The question's full vector (`semantic::full`).
    question: Option<Vec<f32>>,
    rarity: Option<Arc<Rarity>>,
}

impl Found {
    /// The statement of `text` nearest in meaning to the question, compared in full.
    pub(crate) fn best(&self, text: &str) -> Option<Near> {
        let (rarity, question) = (self.rarity.as_deref()?, self.question.as_deref()?);
        let mut top: Option<Near> = None;
        for range in semantic::statements(text) {
            let p = semantic::pieces(&text[range.clone()]);
            if p.len() < semantic::MIN_PIECES {
                continue;
            }
            let Some(said) = semantic::full(&p, rarity) else {
                continue;
            };
            let similarity = semantic::cosine(question, &said);
            if top.as_ref().is_none_or(|t| similarity > t.similarity) {
                top = Some(Near {
                    range,
                    similarity,
                    question: 0,
                });
            }
        }
        top
    }
}

/// Reads up to `limit` messages of the conversation newer than the history holds and adds
/// their statements; true when more are left.
fn refill(db: Db, conversation_id: i64, h: &mut History, limit: i64) -> Result<bool> {
    // Along the conversation's (conversation_id, seq) index: a turn's few new messages are
    // found without a pass over the others.
    let rows: Vec<(i64, i64, String)> = db.query_map(
        "SELECT message_id, seq, substr(content, 1, CAST(?3 AS INTEGER)) FROM messages
         WHERE conversation_id = ?1 AND seq > ?2 AND role IN ('user', 'assistant')
         ORDER BY seq LIMIT ?4",
        params![conversation_id, h.upto, READ_CHARS, limit],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
    )?;
    let Some(last) = rows.last().map(|r| r.1) else {
        return Ok(false);
    };
    let rarity = Arc::make_mut(&mut h.rarity);
    for (id, _, text) in &rows {
        let before = h.vectors.len();
        for (range, statement) in semantic::sentences_kept(text) {
            let p = semantic::pieces(&text[range]);
            if p.len() < semantic::MIN_PIECES {
                continue;
            }
            // Questions count for how common a piece is, statements are what is found.
            rarity.add(&p);
            if let Some(v) = semantic::coarse(&p).filter(|_| statement) {
                h.vectors.push(v);
            }
        }
        if h.vectors.len() > before {
            h.runs.push((*id, (h.vectors.len() - before) as u32));
        }
    }
    h.upto = last;
    // Past the bound, the oldest messages' statements go.
    if h.vectors.len() > MAX_HELD {
        let (mut runs, mut statements) = (0, 0);
        while h.vectors.len() - statements > MAX_HELD {
            statements += h.runs[runs].1 as usize;
            runs += 1;
        }
        h.runs.drain(..runs);
        h.vectors.drain(..statements);
    }
    Ok(rows.len() as i64 == limit)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::conversations::Target;
    use serde_json::json;

    #[test]
    fn the_nearest_statement_is_found_new_messages_are_added_and_a_question_of_common_words_finds_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let engine = crate::test_support::engine_with(&dir, json!({}));
        let target = Target::Session("meaning".into());
        let mut msgs: Vec<serde_json::Value> = (0..40)
            .map(|i| json!({"role": "user", "content": format!("Let us tidy the wording of the release notes, part {i}.")}))
            .collect();
        msgs.push(
            json!({"role": "user", "content": "We settled on Automerge for resolving conflicts in offline sync."}),
        );
        msgs.push(json!({"role": "toolResult", "toolCallId": "call_1", "toolName": "read", "content": [{"type": "text", "text": "Automerge merges offline edits without conflicts."}]}));
        let cid = engine.ingest(&target, &msgs).unwrap().conversation_id;
        let conn = crate::db::open_configured(&engine.config().db_path, 1000).unwrap();
        let db = Db::Sqlite(&conn);
        let id_of = |text: &str| -> i64 {
            conn.query_row("SELECT message_id FROM messages WHERE content = ?1", [text], |r| {
                r.get(0)
            })
            .unwrap()
        };
        let plant = id_of("We settled on Automerge for resolving conflicts in offline sync.");
        let backend = engine.test_deps().backend;
        let meanings = Meanings::default();
        let q = "What did we pick to merge edits made without a connection?";
        let found = meanings.nearest(db, &backend, cid, &[q], |_| true).unwrap().1;
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].ids[0], plant, "nearest first");
        let near = found[0]
            .best("We settled on Automerge for resolving conflicts in offline sync.")
            .unwrap();
        assert!(near.similarity > 0.2, "{}", near.similarity);
        // A tool's text is not a statement of the conversation.
        let tool: i64 = conn
            .query_row("SELECT max(message_id) FROM messages WHERE role = 'tool'", [], |r| {
                r.get(0)
            })
            .unwrap();
        assert!(tool > plant && !found[0].ids.contains(&tool));
        // Outside the context only.
        let found = meanings.nearest(db, &backend, cid, &[q], |id| id != plant).unwrap().1;
        assert!(!found[0].ids.contains(&plant));
        // Every word of this question stands in most of the history's sentences.
        let (outcome, found) = meanings
            .nearest(db, &backend, cid, &["Tidy the wording of the release notes?"], |_| true)
            .unwrap();
        assert!(outcome == Outcome::Common && found.is_empty());
        // A message stored later is found at the next call; after `forget` the history is read again.
        engine
            .ingest(
                &target,
                &[json!({"role": "assistant", "content": "Noted: the voltage rail on the sensor board is 0.85 V."})],
            )
            .unwrap();
        let later = id_of("Noted: the voltage rail on the sensor board is 0.85 V.");
        let q2 = "What supply level did the PCB need?";
        assert_eq!(
            meanings.nearest(db, &backend, cid, &[q2], |_| true).unwrap().1[0].ids[0],
            later
        );
        meanings.forget(cid);
        assert_eq!(
            meanings
                .nearest(db, &backend, cid, &[q2, q], |_| true)
                .unwrap()
                .1
                .iter()
                .map(|f| f.ids[0])
                .collect::<Vec<_>>(),
            [later, plant]
        );
    }

    #[test]
    fn a_long_history_is_read_on_a_thread_and_found_once_read() {
        let dir = tempfile::tempdir().unwrap();
        let engine = crate::test_support::engine_with(&dir, json!({}));
        let target = Target::Session("long".into());
        let plant = "We settled on Automerge for resolving conflicts in offline sync.";
        let mut msgs = vec![json!({"role": "user", "content": plant})];
        msgs.extend((0..3 * INLINE_MESSAGES).map(|i| {
            json!({"role": if i % 2 == 0 { "user" } else { "assistant" }, "content": format!("Let us tidy the wording of the release notes, part {i}.")})
        }));
        let cid = engine.ingest(&target, &msgs).unwrap().conversation_id;
        let backend = engine.test_deps().backend;
        let meanings = Meanings::default();
        let q = "What did we pick to merge edits made without a connection?";
        let ask = || {
            backend
                .read(|db| meanings.nearest(db, &backend, cid, &[q], |_| true))
                .unwrap()
        };
        // More than a turn's worth is new: this assembly reads a part and hands the rest on.
        let (outcome, found) = ask();
        assert!(
            outcome == Outcome::Reading && found.is_empty(),
            "nothing until the history is read"
        );
        let slot = meanings.history(cid);
        let started = std::time::Instant::now();
        while slot.filling.load(Ordering::Acquire) {
            assert!(started.elapsed().as_secs() < 30, "the fill ends");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let h = slot.history.lock().unwrap();
        let all: i64 = engine
            .test_deps()
            .backend
            .read(|db| db.query_one("SELECT max(seq) FROM messages", rusqlite::params![], |r| r.get(0)))
            .unwrap();
        assert_eq!(h.upto, all, "read to the end");
        drop(h);
        let (outcome, found) = ask();
        assert_eq!((outcome, found.len()), (Outcome::Compared, 1));
        let first: i64 = backend
            .read(|db| {
                db.query_one("SELECT min(message_id) FROM messages", rusqlite::params![], |r| {
                    r.get(0)
                })
            })
            .unwrap();
        assert_eq!(found[0].ids[0], first, "the plant, nearest");
    }
}
