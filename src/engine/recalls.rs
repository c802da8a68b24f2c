//! Recall at assembly as the engine runs it: the block made for a conversation's pending turn
//! waits in memory (every assembly of that turn sends it again, unchanged) and is stored in the
//! transaction of the turn's own messages, anchored after the message before them, never on
//! the assembly's path: a recall must not cost a turn a write. Later assemblies read it back
//! from the store (`store::recalls`) and send it where it was.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::api::{AssembleOptions, RecallStats};
use crate::assemble::{recalled, Assembled};
use crate::compaction::Deps;
use crate::error::Result;
use crate::recall::auto::{self, Request};
use crate::sql::Db;
use crate::store::messages::IngestOutcome;
use crate::store::recalls::{self as store, NewRecall};

/// A block below this room is not worth making.
const MIN_ROOM: i64 = 48;

/// Conversations whose pending block is kept at once (the least recent beyond it go).
const MAX_PENDING: usize = 256;

/// The block made for a conversation's turn, not stored yet.
#[derive(Clone)]
struct Pending {
    after_message_id: i64,
    query: String,
    text: String,
    tokens: i64,
    places: Vec<(i64, usize)>,
    stats: RecallStats,
    /// Order of use, for `MAX_PENDING`.
    used: u64,
}

#[derive(Default)]
pub(crate) struct Recalls {
    pending: Mutex<(HashMap<i64, Pending>, u64)>,
    /// The database's common terms, not counted again (`auto::CommonTerms`).
    common: auto::CommonTerms,
    /// The conversations' statements by meaning (`auto::meaning`).
    meanings: auto::meaning::Meanings,
}

impl Recalls {
    fn lock(&self) -> std::sync::MutexGuard<'_, (HashMap<i64, Pending>, u64)> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds this turn's block to `out` (an assembly of `conversation_id` in `db`'s snapshot):
    /// the one an earlier assembly of the same turn made, or a new one when `options` gives
    /// the turn's message; and says in its stats what recall did.
    pub(crate) fn add_to(
        &self,
        db: Db,
        deps: &Deps,
        conversation_id: i64,
        options: &AssembleOptions,
        out: &mut Assembled,
    ) -> Result<()> {
        let (config, backend) = (&*deps.config, &deps.backend);
        let basis = out.recall_basis.clone();
        let enabled = options.auto_recall.unwrap_or(config.auto_recall);
        let query = options.recall_query.as_deref().map(str::trim).filter(|q| !q.is_empty());
        let mut stats = RecallStats {
            earlier_blocks: basis.earlier_blocks,
            earlier_tokens: basis.earlier_tokens,
            ..RecallStats::default()
        };
        // When every kept message is a copy, the newest stored one (the block goes with it).
        let anchor = match basis.last_sent {
            Some(id) => Some(id),
            None => store::last_message(db, conversation_id)?,
        };
        let Some(anchor) = anchor else {
            return Ok(());
        };
        let reuse = {
            let guard = self.lock();
            guard
                .0
                .get(&conversation_id)
                .filter(|p| p.after_message_id == anchor && query.is_none_or(|q| q == p.query))
                .cloned()
        };
        let block = match (reuse, query) {
            (Some(p), _) if enabled => {
                stats = RecallStats {
                    reused: true,
                    earlier_blocks: basis.earlier_blocks,
                    earlier_tokens: basis.earlier_tokens,
                    ..p.stats.clone()
                };
                Some((p.text, p.tokens))
            }
            (None, Some(q)) if enabled => {
                let budget = options.token_budget.max(0);
                let share = (config.auto_recall_share * budget as f64).floor() as i64;
                let room = config
                    .auto_recall_max_tokens
                    .min(share)
                    .min(budget - out.estimated_tokens);
                if room < MIN_ROOM {
                    stats.abstained = Some(format!("no room for a block ({room} tokens)"));
                    self.drop_block(conversation_id);
                    None
                } else {
                    let request = Request {
                        conversation_id,
                        message: q,
                        scope: config.auto_recall_scope,
                        before_message_id: basis.first_kept_message.unwrap_or(anchor + 1),
                        shortened: &basis.shortened,
                        room,
                        min_score: config.auto_recall_min_score,
                        shown: &basis.shown,
                        zone: config.zone,
                        common: &self.common,
                        meanings: config.auto_recall_meaning.then_some((&self.meanings, backend)),
                    };
                    let (found, s) = auto::recall(db, &request)?;
                    stats = RecallStats {
                        earlier_blocks: basis.earlier_blocks,
                        earlier_tokens: basis.earlier_tokens,
                        ..s
                    };
                    match found {
                        Some(r) => {
                            self.keep(
                                conversation_id,
                                Pending {
                                    after_message_id: anchor,
                                    query: q.to_string(),
                                    text: r.text.clone(),
                                    tokens: r.tokens,
                                    places: r.places,
                                    stats: stats.clone(),
                                    used: 0,
                                },
                            );
                            Some((r.text, r.tokens))
                        }
                        None => {
                            self.drop_block(conversation_id);
                            None
                        }
                    }
                }
            }
            _ => None,
        };
        if let Some((text, tokens)) = block {
            stats.block = Some(text.clone());
            out.outline.push((format!("q{anchor}"), tokens));
            out.estimated_tokens += tokens;
            out.messages.push(crate::assemble::render::HostMessage {
                msg: recalled(text, anchor),
                tokens,
            });
        }
        let ran = query.is_some() && enabled || stats.reused || stats.earlier_blocks > 0;
        if ran {
            out.stats.recall = Some(stats);
        }
        Ok(())
    }

    fn keep(&self, conversation_id: i64, mut p: Pending) {
        let mut guard = self.lock();
        let (pending, clock) = &mut *guard;
        *clock += 1;
        p.used = *clock;
        pending.insert(conversation_id, p);
        if pending.len() > MAX_PENDING {
            if let Some(oldest) = pending.iter().min_by_key(|(_, p)| p.used).map(|(id, _)| *id) {
                pending.remove(&oldest);
            }
        }
    }

    /// Lets go of a conversation's pending block (this turn has none); its statements stay,
    /// as reading them again costs a pass over the whole history.
    fn drop_block(&self, conversation_id: i64) {
        self.lock().0.remove(&conversation_id);
    }

    /// Lets go of a conversation's pending block and statements (its messages changed in place).
    pub(crate) fn forget(&self, conversation_id: i64) {
        self.drop_block(conversation_id);
        self.meanings.forget(conversation_id);
    }

    /// Lets go of every pending block and every conversation's statements (a redaction: they
    /// were made from the text).
    pub(crate) fn forget_all(&self) {
        self.lock().0.clear();
        self.meanings.clear();
    }

    /// In the transaction that stored `outcomes`: the pending block of each conversation that
    /// got messages is stored after its anchor. A failure is let go (the block was advice).
    pub(crate) fn ride_along(&self, db: Db, outcomes: &[IngestOutcome]) {
        let mut taken = Vec::new();
        {
            let mut guard = self.lock();
            for o in outcomes.iter().filter(|o| o.inserted > 0) {
                if let Some(p) = guard.0.remove(&o.conversation_id) {
                    taken.push((o.conversation_id, p));
                }
            }
        }
        if taken.is_empty() || db.execute("SAVEPOINT lcm_recall", rusqlite::params![]).is_err() {
            return;
        }
        taken.sort_by_key(|t| t.0);
        let now = crate::time::now_sqlite();
        let written = taken.iter().try_for_each(|(cid, p)| {
            store::insert(
                db,
                &NewRecall {
                    conversation_id: *cid,
                    after_message_id: p.after_message_id,
                    query: &p.query,
                    content: &p.text,
                    tokens: p.tokens,
                    places: &p.places,
                },
                &now,
            )
        });
        let end = match written {
            Ok(()) => "RELEASE SAVEPOINT lcm_recall",
            Err(_) => "ROLLBACK TO SAVEPOINT lcm_recall",
        };
        let _ = db.execute(end, rusqlite::params![]);
    }
}

#[cfg(test)]
impl Recalls {
    /// Whether the statements of `conversation_id` are held for recall by meaning.
    pub(super) fn holds_statements(&self, conversation_id: i64) -> bool {
        self.meanings.holds(conversation_id)
    }
}
