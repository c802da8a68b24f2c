//! The prompt-cache report as assemblies happen: each assembly of a conversation is compared
//! with the one before it (kept in memory, else read back from the store, so that a host that
//! runs each turn in a new process is followed too), and what a provider's cache would serve
//! of it is added up. The sums wait in memory and are written in the transaction of the
//! conversation's next stored turn (or at close), never on the assembly's path: a report must
//! not cost a turn a write.

use crate::assemble::Assembled;
use std::collections::HashMap;
use std::sync::Mutex;

use crate::sql::{Backend, Db, WriteScope};
use crate::store::messages::IngestOutcome;
use crate::store::prompt_cache::{self as store, CacheDelta};

/// One emitted message in an outline: what it is, and its estimated tokens.
pub(crate) type OutlineEntry = (String, i64);

/// Longest wait for the writer to record the report at close (past it, that part of the report
/// is let go).
const WRITE_WAIT: std::time::Duration = std::time::Duration::from_millis(500);

/// Conversations followed at once; the least recently assembled beyond it are written out
/// and forgotten.
const MAX_TRACKED: usize = 256;

#[derive(Default)]
struct Tracked {
    /// The last assembly's outline (None: not known yet, read it from the store).
    last: Option<Vec<OutlineEntry>>,
    /// Not written yet.
    pending: CacheDelta,
    /// The outline changed since it was last written.
    outline_dirty: bool,
    /// Order of use, for `MAX_TRACKED`.
    used: u64,
}

/// What one assembly kept of the one before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Kept {
    pub previous_tokens: i64,
    pub kept_tokens: i64,
}

#[derive(Default)]
pub(crate) struct PromptCache {
    tracked: Mutex<(HashMap<i64, Tracked>, u64)>,
}

/// Tokens of the leading entries of `next` that are `previous`'s, in order, while `previous`
/// lasts: the whole previous assembly when nothing before its end changed.
fn kept_prefix(previous: &[OutlineEntry], next: &[OutlineEntry]) -> i64 {
    previous
        .iter()
        .zip(next)
        .take_while(|(a, b)| a == b)
        .map(|(_, b)| b.1)
        .sum()
}

/// The outline as stored: one `key:tokens` entry a line.
pub(crate) fn outline_text(outline: &[OutlineEntry]) -> String {
    outline
        .iter()
        .map(|(key, tokens)| format!("{}:{tokens}", key.replace(['\n', '\r'], " ")))
        .collect::<Vec<_>>()
        .join("\n")
}

/// An outline read back (an unreadable line ends it).
pub(crate) fn parse_outline(text: &str) -> Vec<OutlineEntry> {
    text.lines()
        .map_while(|line| {
            let (key, tokens) = line.rsplit_once(':')?;
            Some((key.to_string(), tokens.parse().ok()?))
        })
        .collect()
}

impl PromptCache {
    fn lock(&self) -> std::sync::MutexGuard<'_, (HashMap<i64, Tracked>, u64)> {
        self.tracked.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records an assembly of `conversation_id` (`tokens` estimated, `outline` what it
    /// emitted) and says what it kept of the previous one; `stored` reads the last outline the
    /// store has when this process has none (None when it has none either).
    pub(crate) fn observe(
        &self,
        conversation_id: i64,
        tokens: i64,
        outline: Vec<OutlineEntry>,
        stored: impl FnOnce() -> Option<Vec<OutlineEntry>>,
    ) -> Option<Kept> {
        let known = self.lock().0.get(&conversation_id).is_some_and(|t| t.last.is_some());
        // Read outside the lock: the store may be slow.
        let from_store = if known { None } else { stored() };
        let mut guard = self.lock();
        let (tracked, clock) = &mut *guard;
        *clock += 1;
        let t = tracked.entry(conversation_id).or_default();
        t.used = *clock;
        let previous = t.last.take().or(from_store);
        let kept = previous.as_ref().map(|p| Kept {
            previous_tokens: p.iter().map(|e| e.1).sum(),
            kept_tokens: kept_prefix(p, &outline),
        });
        t.pending.assemblies += 1;
        t.pending.tokens_sent += tokens;
        if let Some(k) = kept {
            t.pending.tokens_kept += k.kept_tokens;
            if k.kept_tokens < k.previous_tokens {
                t.pending.breaks += 1;
            }
        }
        if previous.as_ref() != Some(&outline) {
            t.outline_dirty = true;
        }
        t.last = Some(outline);
        Some(kept).flatten()
    }

    /// Counts `out` in its conversation's report and says in its stats what it kept of the
    /// conversation's previous assembly (read back from the store when this process has none).
    pub(crate) fn record(&self, backend: &Backend, conversation_id: i64, out: &mut Assembled) {
        let outline = std::mem::take(&mut out.outline);
        let stored = || {
            backend
                .read(|db| store::last_outline(db, conversation_id))
                .ok()
                .flatten()
                .map(|text| parse_outline(&text))
        };
        if let Some(kept) = self.observe(conversation_id, out.estimated_tokens, outline, stored) {
            out.stats.previous_tokens = Some(kept.previous_tokens);
            out.stats.kept_tokens = Some(kept.kept_tokens);
        }
    }

    /// Writes, in a transaction of stored turns (`db`), the report of their conversations and of
    /// those no longer followed; a failure is let go (`store::add_in_passing`).
    pub(crate) fn ride_along(&self, db: Db, outcomes: &[IngestOutcome]) {
        let mut entries = self.take_all(true);
        for o in outcomes {
            if let Some((delta, outline)) = self.take(o.conversation_id) {
                entries.push((o.conversation_id, delta, outline));
            }
        }
        store::add_in_passing(db, &entries, &crate::time::now_sqlite());
    }

    /// Writes everything the report holds, in a write of its own that waits at most
    /// `WRITE_WAIT` (at close, another process may hold the file). A failure is let go.
    pub(crate) fn write_all(&self, backend: &Backend) {
        let entries = self.take_all(false);
        if entries.is_empty() {
            return;
        }
        let deadline = std::time::Instant::now() + WRITE_WAIT;
        let ids: Vec<i64> = entries.iter().map(|e| e.0).collect();
        let _ = backend.write_preserving_messages_by(deadline, WriteScope::Conversations(&ids), |db| {
            store::add_in_passing(db, &entries, &crate::time::now_sqlite());
            Ok(())
        });
    }

    /// A sweep of `conversation_id` wrote summaries.
    pub(crate) fn compacted(&self, conversation_id: i64) {
        let mut guard = self.lock();
        let (tracked, clock) = &mut *guard;
        *clock += 1;
        let t = tracked.entry(conversation_id).or_default();
        t.used = *clock;
        t.pending.compactions += 1;
    }

    /// What is waiting to be written for `conversation_id`: the sums and the last outline (when
    /// it changed). Taken: a failed write loses them, which a report can afford.
    pub(crate) fn take(&self, conversation_id: i64) -> Option<(CacheDelta, Option<String>)> {
        let mut guard = self.lock();
        let t = guard.0.get_mut(&conversation_id)?;
        Self::take_from(t)
    }

    fn take_from(t: &mut Tracked) -> Option<(CacheDelta, Option<String>)> {
        let outline = t.outline_dirty.then(|| t.last.as_deref().map(outline_text)).flatten();
        if t.pending.is_empty() && outline.is_none() {
            return None;
        }
        t.outline_dirty = false;
        Some((std::mem::take(&mut t.pending), outline))
    }

    /// Everything waiting, for every conversation (at close), and the conversations beyond
    /// `MAX_TRACKED`, least recently used first, which are forgotten.
    pub(crate) fn take_all(&self, beyond_limit_only: bool) -> Vec<(i64, CacheDelta, Option<String>)> {
        let mut guard = self.lock();
        let tracked = &mut guard.0;
        if beyond_limit_only && tracked.len() <= MAX_TRACKED {
            return Vec::new();
        }
        let mut ids: Vec<(u64, i64)> = tracked.iter().map(|(id, t)| (t.used, *id)).collect();
        ids.sort_unstable();
        let n = if beyond_limit_only {
            ids.len().saturating_sub(MAX_TRACKED)
        } else {
            ids.len()
        };
        let mut out = Vec::new();
        for (_, id) in ids.into_iter().take(n) {
            if let Some(mut t) = tracked.remove(&id) {
                if let Some((delta, outline)) = Self::take_from(&mut t) {
                    out.push((id, delta, outline));
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outline(entries: &[(&str, i64)]) -> Vec<OutlineEntry> {
        entries.iter().map(|(k, t)| (k.to_string(), *t)).collect()
    }

    #[test]
    fn an_assembly_that_continues_the_previous_one_keeps_all_of_it() {
        let cache = PromptCache::default();
        let first = outline(&[("s_a", 100), ("m1", 50)]);
        assert_eq!(cache.observe(1, 150, first.clone(), || None), None);
        let next = outline(&[("s_a", 100), ("m1", 50), ("m2", 30)]);
        let kept = cache.observe(1, 180, next, || panic!("known in memory"));
        assert_eq!(
            kept,
            Some(Kept {
                previous_tokens: 150,
                kept_tokens: 150
            })
        );
        // A compaction replaced m1 and m2: only the summary before them is kept.
        cache.compacted(1);
        let after = outline(&[("s_a", 100), ("s_b", 20), ("m3", 10)]);
        assert_eq!(
            cache.observe(1, 130, after, || None),
            Some(Kept {
                previous_tokens: 180,
                kept_tokens: 100
            })
        );
        let (delta, text) = cache.take(1).unwrap();
        assert_eq!(
            delta,
            CacheDelta {
                assemblies: 3,
                tokens_sent: 460,
                tokens_kept: 250,
                breaks: 1,
                compactions: 1
            }
        );
        assert_eq!(
            parse_outline(&text.unwrap()),
            outline(&[("s_a", 100), ("s_b", 20), ("m3", 10)])
        );
        // Nothing new: nothing to write.
        assert_eq!(cache.take(1), None);
    }

    #[test]
    fn the_previous_outline_comes_from_the_store_when_this_process_has_none() {
        let cache = PromptCache::default();
        let stored = outline_text(&outline(&[("m1", 5), ("m2", 7)]));
        let kept = cache.observe(9, 20, outline(&[("m1", 5), ("m2", 7), ("m3", 8)]), || {
            Some(parse_outline(&stored))
        });
        assert_eq!(
            kept,
            Some(Kept {
                previous_tokens: 12,
                kept_tokens: 12
            })
        );
        // A changed message (an excerpt, a redaction) shows as a different size.
        let kept = cache.observe(9, 19, outline(&[("m1", 4), ("m2", 7), ("m3", 8)]), || None);
        assert_eq!(
            kept,
            Some(Kept {
                previous_tokens: 20,
                kept_tokens: 0
            })
        );
    }

    #[test]
    fn keys_with_line_breaks_or_colons_read_back() {
        let o = outline(&[("rcall:1", 3), ("rx\ny", 4)]);
        assert_eq!(
            parse_outline(&outline_text(&o)),
            outline(&[("rcall:1", 3), ("rx y", 4)])
        );
    }

    #[test]
    fn only_the_least_recently_used_beyond_the_limit_are_let_go() {
        let cache = PromptCache::default();
        for id in 0..(MAX_TRACKED as i64 + 3) {
            cache.observe(id, 1, outline(&[("m", 1)]), || None);
        }
        let gone: Vec<i64> = cache.take_all(true).into_iter().map(|(id, ..)| id).collect();
        assert_eq!(gone, vec![0, 1, 2]);
        assert_eq!(cache.take_all(false).len(), MAX_TRACKED);
    }
}
