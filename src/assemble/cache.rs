//! Messages (and summaries' wrapper costs) rendered by the last assemblies, reused by the
//! next ones.
//!
//! A host assembles every turn, and from one turn to the next the context gains a few
//! messages and loses a few to compaction; every other message is read and rebuilt from its
//! parts again, most of an assembly's cost. A stored message does not change unless a write
//! rewrites it (redaction, another process), so what was rendered from it stays right until
//! then. Entries are used only by assemblies that read a stamp of such writes in their own
//! snapshot (`Backend::read_stamped`), and are all dropped as soon as the stamp moves: on
//! SQLite's writer the pool's count of writes that changed a message or part and the file's
//! `PRAGMA data_version` (which another connection's commit moves); on PostgreSQL the
//! schema's count, kept by triggers in the writing transaction (`pg::rewrites`).

use std::collections::HashMap;

use super::render::Msg;
use crate::api::Presentation;
use crate::live::SummaryFacts;

/// Conversations whose last context is kept; the least recently assembled goes first.
const MAX_CONVERSATIONS: usize = 8;

/// Rendered bytes kept over all conversations (the one just assembled is always kept).
const MAX_BYTES: usize = 32 << 20;

/// What the last assembly of each of a few conversations rendered.
#[derive(Default)]
pub(crate) struct RenderCache {
    /// (count of message-changing writes, the writer's data_version) the entries were read at.
    stamp: Option<(u64, i64)>,
    /// Most recently assembled last, with the rendered size of each.
    conversations: Vec<Kept>,
}

struct Kept {
    conversation_id: i64,
    bytes: usize,
    rendered: Rendered,
}

/// One conversation's rendered items.
#[derive(Default)]
pub(crate) struct Rendered {
    /// Messages by id, as `render::host_message` built them (`item` unset).
    pub messages: HashMap<i64, Msg>,
    /// Summaries' wrappers by summary id.
    pub wrappers: HashMap<String, Wrapper>,
    /// lossless-claw's re-imported copies in the conversation (`store::copies`), left out:
    /// found once while the stamp stays (only another process's writes can add one).
    pub copies: Option<std::collections::HashSet<i64>>,
}

/// A summary's formatted time range and the tokens its wrapper adds, with the facts they were
/// computed from: reused only for the same facts, so a summary's row never goes stale here.
/// (The display zone is the engine's, fixed when it opens.)
pub(crate) struct Wrapper {
    pub facts: WrapperFacts,
    pub range: String,
    pub tokens: i64,
}

pub(crate) struct WrapperFacts {
    pub earliest_at: Option<String>,
    pub latest_at: Option<String>,
    pub depth: i64,
    pub descendant_count: i64,
    pub presentation: Presentation,
}

impl WrapperFacts {
    /// True when these are the facts of `summary` presented as `presentation`.
    pub(crate) fn describe(&self, summary: &SummaryFacts, presentation: Presentation) -> bool {
        self.presentation == presentation
            && self.depth == summary.depth
            && self.descendant_count == summary.descendant_count
            && self.earliest_at == summary.earliest_at
            && self.latest_at == summary.latest_at
    }
}

impl RenderCache {
    /// Empties the cache unless `stamp` (`Backend::read_stamped`'s, read in the snapshot the
    /// assembly reads in) is the one its entries were rendered at.
    pub(crate) fn validate_stamp(&mut self, stamp: (u64, i64)) {
        if self.stamp != Some(stamp) {
            self.conversations.clear();
            self.stamp = Some(stamp);
        }
    }

    /// The conversation's entry for an assembly whose snapshot has `stamp`
    /// (`Backend::read_stamped`'s), after emptying the cache if the stamp moved. Taken out:
    /// the assembly renders into it without holding the cache, and `check_in` puts it back.
    pub(crate) fn check_out(&mut self, stamp: (u64, i64), conversation_id: i64) -> Rendered {
        self.validate_stamp(stamp);
        self.take(conversation_id)
    }

    /// Keeps what an assembly at `stamp` rendered, unless another assembly moved the cache to
    /// another stamp meanwhile (entries are only ever kept beside those of their own stamp).
    pub(crate) fn check_in(&mut self, stamp: (u64, i64), conversation_id: i64, rendered: Rendered) {
        if self.stamp == Some(stamp) {
            self.keep(conversation_id, rendered);
        }
    }

    /// What was rendered for this conversation last time (taken out; `keep` puts it back).
    pub(crate) fn take(&mut self, conversation_id: i64) -> Rendered {
        match self
            .conversations
            .iter()
            .position(|k| k.conversation_id == conversation_id)
        {
            Some(i) => self.conversations.remove(i).rendered,
            None => Rendered::default(),
        }
    }

    /// Keeps what this assembly rendered as the conversation's entry, the most recent.
    pub(crate) fn keep(&mut self, conversation_id: i64, rendered: Rendered) {
        self.conversations.retain(|k| k.conversation_id != conversation_id);
        let bytes = rendered
            .messages
            .values()
            .map(|m| m.content.json_size_hint())
            .sum::<usize>()
            + rendered.wrappers.values().map(|w| w.range.len() + 64).sum::<usize>();
        self.conversations.push(Kept {
            conversation_id,
            bytes,
            rendered,
        });
        let mut total: usize = self.conversations.iter().map(|k| k.bytes).sum();
        while self.conversations.len() > 1 && (self.conversations.len() > MAX_CONVERSATIONS || total > MAX_BYTES) {
            total -= self.conversations.remove(0).bytes;
        }
    }

    /// Messages held, over all conversations.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.conversations.iter().map(|k| k.rendered.messages.len()).sum()
    }

    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rendered(messages: usize, text_len: usize) -> Rendered {
        let mut r = Rendered::default();
        for id in 0..messages as i64 {
            r.messages.insert(id, Msg::user("x".repeat(text_len), None));
        }
        r
    }

    #[test]
    fn keeps_the_most_recent_conversations_within_the_bounds() {
        let mut cache = RenderCache::default();
        for cid in 0..MAX_CONVERSATIONS as i64 + 3 {
            cache.keep(cid, rendered(2, 10));
        }
        assert_eq!(cache.conversations.len(), MAX_CONVERSATIONS);
        // The oldest went first; taking one out and keeping it again makes it the newest.
        assert!(cache.take(0).messages.is_empty());
        let third = cache.take(3);
        assert_eq!(third.messages.len(), 2);
        cache.keep(3, third);
        cache.keep(100, rendered(1, 10));
        assert!(cache.conversations.iter().any(|k| k.conversation_id == 3));
        assert!(cache.take(4).messages.is_empty());
        // Over the byte bound the older ones go, but the one just kept always stays.
        cache.keep(200, rendered(1, MAX_BYTES + 1));
        assert_eq!(cache.conversations.len(), 1);
        assert_eq!(cache.len(), 1);
    }

    #[test]
    fn a_moved_stamp_empties_the_cache() {
        let mut cache = RenderCache::default();
        cache.validate_stamp((7, 1));
        cache.keep(1, rendered(3, 10));
        cache.validate_stamp((7, 1));
        assert_eq!(cache.len(), 3);
        cache.validate_stamp((7, 2));
        assert!(cache.is_empty());
        cache.keep(1, rendered(3, 10));
        cache.validate_stamp((8, 2));
        assert!(cache.is_empty());
    }

    /// Assemblies check entries out and in without holding the cache in between: entries of
    /// several conversations come back; one rendered at a stamp the cache has moved on from
    /// does not.
    #[test]
    fn entries_checked_out_together_come_back_unless_the_stamp_moved() {
        let mut cache = RenderCache::default();
        let (one, two) = (cache.check_out((1, 1), 1), cache.check_out((1, 1), 2));
        assert!(one.messages.is_empty() && two.messages.is_empty());
        cache.check_in((1, 1), 1, rendered(2, 10));
        cache.check_in((1, 1), 2, rendered(3, 10));
        assert_eq!(cache.len(), 5);
        let older = cache.check_out((1, 1), 1);
        assert_eq!(older.messages.len(), 2);
        // A newer snapshot's assembly meanwhile: the cache moves to its stamp, empty.
        assert!(cache.check_out((2, 1), 2).messages.is_empty());
        assert!(cache.is_empty());
        cache.check_in((1, 1), 1, older);
        assert!(cache.is_empty(), "an entry of the older stamp came back");
        cache.check_in((2, 1), 2, rendered(3, 10));
        assert_eq!(cache.len(), 3);
    }
}
