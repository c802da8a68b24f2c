//! The live context of one conversation, held in memory while passes are planned. Each pass
//! edits it the way the database will be edited, so a sweep never re-reads what it has read.
//!
//! Compaction reads it partly (`load_window`): the oldest items (every leading summary and a
//! window of messages), the protected tail, and, for the unread middle, what the live totals
//! say it holds. Passes work on the oldest items, so a bounded sweep over a 50,000-message
//! history reads what its passes touch, not the history. Selection reports `ReadMore` when its
//! answer could depend on the unread middle; the caller reads more and asks again, so every
//! decision is the one the fully read context would make.

use crate::api::ItemKind;
use crate::config::Config;
use crate::error::{LcmError, Result};
use crate::sql::Db;
use crate::store::context::{self, ItemRow, Span};
use crate::store::totals;

/// What a context item points at.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum ItemRef {
    Message(i64),
    Summary(String),
}

pub(crate) use crate::source::SummaryFacts;

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Item {
    pub r: ItemRef,
    /// Stored `token_count` (the threshold contract).
    pub tokens: i64,
    /// `context_items.ordinal` in the database when the model was last in sync with it;
    /// `None` for a summary created by a pass not yet written.
    pub db_ordinal: Option<i64>,
    /// What is known of it besides its id; of the kind `r` says (the constructors keep the two
    /// in step).
    facts: Facts,
}

/// A message's role, or a summary's facts. Either may be missing: a message row
/// without a role, a context item whose summary row is gone (kept as an opaque item).
#[derive(Clone, Debug, PartialEq)]
enum Facts {
    Message {
        /// Stored role: `user`, `assistant`, `tool`, `system`.
        role: Option<String>,
    },
    Summary(Option<SummaryFacts>),
}

impl Item {
    pub(crate) fn message(id: i64, tokens: i64, db_ordinal: Option<i64>, role: Option<String>) -> Item {
        Item {
            r: ItemRef::Message(id),
            tokens,
            db_ordinal,
            facts: Facts::Message { role },
        }
    }

    pub(crate) fn summary(id: String, tokens: i64, db_ordinal: Option<i64>, facts: Option<SummaryFacts>) -> Item {
        Item {
            r: ItemRef::Summary(id),
            tokens,
            db_ordinal,
            facts: Facts::Summary(facts),
        }
    }

    pub(crate) fn is_message(&self) -> bool {
        matches!(self.r, ItemRef::Message(_))
    }

    /// A message's stored role.
    pub(crate) fn role(&self) -> Option<&str> {
        match &self.facts {
            Facts::Message { role, .. } => role.as_deref(),
            Facts::Summary(_) => None,
        }
    }

    /// A summary's facts (None for a message, or a summary whose row is gone).
    pub(crate) fn summary_facts(&self) -> Option<&SummaryFacts> {
        match &self.facts {
            Facts::Summary(f) => f.as_ref(),
            Facts::Message { .. } => None,
        }
    }

    pub(crate) fn depth(&self) -> Option<i64> {
        self.summary_facts().map(|s| s.depth)
    }
}

/// The live context of a conversation. Items are boxed: a pass splices the vector, and moving
/// 8-byte pointers instead of whole items keeps that cheap when tens of thousands of raw
/// messages follow the chunk.
#[derive(Clone, Debug)]
pub(crate) struct LiveContext {
    pub conversation_id: i64,
    /// The items read, in order; with a gap, `items[..gap.at]` are the oldest ones and
    /// `items[gap.at..]` the newest ones. Boxed: passes splice runs in and out of long lists,
    /// which then move pointers, not items.
    #[allow(clippy::vec_box)]
    pub items: Vec<Box<Item>>,
    /// Highest database ordinal the model knows; items appended later (by ingest) sit above it.
    pub last_db_ordinal: i64,
    /// Σ tokens of the live context (read items and the gap), kept up to date by `replace`.
    total_tokens: i64,
    /// The live items between the oldest and the newest read ones, not read (None: all read).
    pub gap: Option<Gap>,
}

/// The unread middle of a partly read live context: where it sits, and what the live totals
/// say it holds.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Gap {
    /// Index in `items` of the first item after it.
    pub at: usize,
    /// It holds the live items with `after < ordinal < before`.
    pub after: i64,
    pub before: i64,
    /// Summary items in it, and its tokens (messages' and all), from the live totals.
    pub summaries: i64,
    pub message_tokens: i64,
    pub tokens: i64,
}

/// A selection on a partly read context whose answer could depend on items not read yet: read
/// more (`LiveContext::read_more`) and select again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ReadMore;

/// What a selection returns on a partly read context.
pub(crate) type Pick<T> = std::result::Result<T, ReadMore>;

/// A live context item.
#[derive(Clone, Debug, serde::Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct ContextEntry {
    pub ordinal: i64,
    pub kind: ItemKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub message_id: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub summary_id: Option<String>,
    /// Message role as stored: user, assistant, tool, system.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub role: Option<String>,
    /// Summary depth.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub depth: Option<i64>,
    /// Stored token count.
    pub tokens: i64,
}

/// The item a live context row stands for (`None` for a malformed row: an item naming no row).
fn item_of(r: ItemRow) -> Option<Box<Item>> {
    if r.item_type == "message" {
        let id = r.message_id?;
        return Some(Box::new(Item::message(
            id,
            r.message_tokens.unwrap_or(0).max(0),
            Some(r.ordinal),
            r.role,
        )));
    }
    let id = r.summary_id?;
    let summary = r.depth.map(|depth| SummaryFacts {
        depth,
        earliest_at: r.earliest_at,
        latest_at: r.latest_at,
        created_at: r.created_at.unwrap_or_default(),
        descendant_count: r.descendant_count.unwrap_or(0),
        descendant_token_count: r.descendant_token_count.unwrap_or(0),
        source_message_token_count: r.source_message_token_count.unwrap_or(0),
    });
    // A dangling summary item (row missing) is kept as an opaque item.
    let tokens = if summary.is_some() {
        r.summary_tokens.unwrap_or(0).max(0)
    } else {
        0
    };
    Some(Box::new(Item::summary(id, tokens, Some(r.ordinal), summary)))
}

/// Share of a call's token budget the fresh tail may hold when `freshTailMaxTokens` is unset.
pub(crate) const FRESH_TAIL_BUDGET_SHARE: f64 = 0.4;

/// Which raw messages the fresh tail protects: the newest `count` of them while together they
/// hold at most `max_tokens` (the newest one always), and in any case the newest turn, from
/// the newest user message on. The same rule serves compaction, `evaluate` and assembly.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TailRule {
    /// 0 protects nothing at all.
    pub count: i64,
    pub max_tokens: i64,
}

impl TailRule {
    /// The configured rule for a call with `token_budget` (None: a call without one, whose
    /// tail is bounded in messages only unless `freshTailMaxTokens` is set).
    pub(crate) fn of(config: &Config, token_budget: Option<i64>) -> TailRule {
        let share = token_budget.map(|b| (b.max(0) as f64 * FRESH_TAIL_BUDGET_SHARE) as i64);
        TailRule {
            count: config.fresh_tail_count,
            max_tokens: config.fresh_tail_max_tokens.or(share).unwrap_or(i64::MAX),
        }
    }

    /// The newest `count` messages (back to the newest user message), whatever they hold.
    #[cfg(test)]
    pub(crate) fn messages(count: i64) -> TailRule {
        TailRule {
            count,
            max_tokens: i64::MAX,
        }
    }

    /// Under budget pressure: the newest turn only.
    pub(crate) fn newest_turn(self) -> TailRule {
        TailRule {
            count: self.count.min(1),
            max_tokens: 0,
        }
    }
}

/// Walks a live context newest first, one item at a time, and finds where its fresh tail
/// begins; also tells a reader of the newest items when it has read the whole tail.
#[derive(Clone, Debug)]
pub(crate) struct TailWalk {
    rule: TailRule,
    counted: i64,
    tokens: i64,
    user_seen: bool,
    /// A message no longer fitted the rule's count or tokens: older ones belong to the tail
    /// only as part of the newest turn.
    closed: bool,
    /// The oldest protected message is a tool result: the messages before it, down to the
    /// call, are protected with it (a call and its results never straddle the tail's edge, or
    /// assembly would drop the results and the model would see neither).
    after_result: bool,
    done: bool,
    /// Index (as the caller numbers items) of the oldest protected item found so far.
    pub start: Option<usize>,
}

impl TailWalk {
    pub(crate) fn new(rule: TailRule) -> TailWalk {
        TailWalk {
            rule,
            counted: 0,
            tokens: 0,
            user_seen: false,
            closed: false,
            after_result: false,
            done: rule.count <= 0,
            start: None,
        }
    }

    /// Feeds the next older item, numbered `index`; false once no older item can be part of
    /// the tail (the walk can stop).
    pub(crate) fn push(&mut self, index: usize, item: &Item) -> bool {
        if self.done {
            return false;
        }
        if !item.is_message() {
            // A summary before a result: its call is summarised already; nothing to keep with it.
            self.after_result = false;
            return true;
        }
        let fits = self.after_result
            || !self.closed
                && (self.counted == 0
                    || (self.counted < self.rule.count
                        && self.tokens.saturating_add(item.tokens) <= self.rule.max_tokens));
        if fits {
            self.start = Some(index);
            self.counted += 1;
            self.tokens = self.tokens.saturating_add(item.tokens);
            self.after_result = item.role() == Some("tool");
        } else if self.user_seen {
            self.done = true;
            return false;
        } else {
            // Protected only if the newest turn's user message is this one or an older one.
            self.closed = true;
        }
        if !self.user_seen && item.role() == Some("user") {
            self.user_seen = true;
            self.start = Some(index);
        }
        self.done = !self.after_result && self.user_seen && (self.closed || self.counted >= self.rule.count);
        !self.done
    }
}

/// A contiguous run of items chosen for one pass.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Chunk {
    /// Index of the first item in `LiveContext::items`.
    pub start: usize,
    /// Number of items.
    pub len: usize,
    pub tokens: i64,
}

impl LiveContext {
    pub(crate) fn load<'a>(db: impl Into<Db<'a>>, conversation_id: i64) -> Result<LiveContext> {
        let mut items = Vec::new();
        let mut last = -1;
        context::read_items(db, conversation_id, Span::All, false, |r| {
            last = r.ordinal;
            items.extend(item_of(r));
            Ok(true)
        })?;
        Ok(LiveContext::new(conversation_id, items, last))
    }

    /// Reads live items newest first while `more` says so, and returns them (in order) as a
    /// partial context, with the ordinal of the oldest item read. Reading stops as soon as
    /// `more` returns false for an item (that item is included). With `summary_content`,
    /// `more` is also handed each summary's content.
    pub(crate) fn load_newest<'a>(
        db: impl Into<Db<'a>>,
        conversation_id: i64,
        summary_content: bool,
        mut more: impl FnMut(&Item, Option<String>) -> bool,
    ) -> Result<(LiveContext, i64)> {
        let mut items = Vec::new();
        let mut last = -1;
        let mut oldest = 0;
        context::read_items(db, conversation_id, Span::NewestFirst, summary_content, |r| {
            if last < 0 {
                last = r.ordinal;
            }
            oldest = r.ordinal;
            let mut r = r;
            let content = r.content.take();
            let Some(item) = item_of(r) else { return Ok(true) };
            let content = if item.summary_facts().is_some() { content } else { None };
            let go_on = more(&item, content);
            items.push(item);
            Ok(go_on)
        })?;
        items.reverse();
        Ok((LiveContext::new(conversation_id, items, last), oldest))
    }

    #[allow(clippy::vec_box)] // see `items`
    pub(crate) fn new(conversation_id: i64, items: Vec<Box<Item>>, last_db_ordinal: i64) -> LiveContext {
        let total_tokens = items.iter().map(|i| i.tokens).sum();
        LiveContext {
            conversation_id,
            items,
            last_db_ordinal,
            total_tokens,
            gap: None,
        }
    }

    /// Reads the context as compaction needs it: the items `tail_start(tail)`
    /// protects (newest first), then the oldest items (every summary before the first message,
    /// and `window` messages), in one snapshot with the live totals, which describe the unread
    /// middle. A context that short is read whole.
    pub(crate) fn load_window<'a>(
        db: impl Into<Db<'a>>,
        conversation_id: i64,
        tail: TailRule,
        window: usize,
    ) -> Result<LiveContext> {
        let db = db.into();
        let _snapshot = db.snapshot()?;
        let conn = db;
        // The tail, walked back exactly as `tail_start` walks it.
        let (tail, last, tail_first) = if tail.count > 0 {
            let mut walk = TailWalk::new(tail);
            let (newest, oldest) =
                LiveContext::load_newest(conn, conversation_id, false, |item, _| walk.push(0, item))?;
            if !walk.done {
                // Every item was read: the context is whole.
                return Ok(newest);
            }
            (newest.items, newest.last_db_ordinal, oldest)
        } else {
            (Vec::new(), context::last_ordinal(conn, conversation_id)?, i64::MAX)
        };
        // The oldest items, up to the tail.
        let mut items: Vec<Box<Item>> = Vec::new();
        let (mut messages, mut head_last) = (0, None);
        let mut more = false;
        context::read_items(conn, conversation_id, Span::Before(tail_first), false, |r| {
            if messages >= window.max(1) {
                more = true;
                return Ok(false);
            }
            head_last = Some(r.ordinal);
            if let Some(item) = item_of(r) {
                messages += usize::from(item.is_message());
                items.push(item);
            }
            Ok(true)
        })?;
        let at = items.len();
        items.extend(tail);
        let mut ctx = LiveContext::new(conversation_id, items, last);
        if more {
            // What the totals hold beyond the items read is the gap.
            let t = totals::load(conn, conversation_id)?;
            let read_summaries = ctx.items.iter().filter(|i| !i.is_message()).count() as i64;
            let read_message_tokens: i64 = ctx.items.iter().filter(|i| i.is_message()).map(|i| i.tokens).sum();
            let gap = Gap {
                at,
                after: head_last.unwrap_or(-1),
                before: tail_first,
                summaries: (t.summaries - read_summaries).max(0),
                message_tokens: (t.message_tokens - read_message_tokens).max(0),
                tokens: (t.tokens() - ctx.total_tokens).max(0),
            };
            ctx.total_tokens += gap.tokens;
            ctx.gap = Some(gap);
        }
        Ok(ctx)
    }

    /// Reads up to `n` more items of the gap, oldest first (at least one while it has any);
    /// the gap closes when none is left. Returns the index range of the items read.
    ///
    /// The gap is read by ordinal, so the rows on each side of it must still be where the
    /// model has them: another process that compacted meanwhile and renumbered the rows (as
    /// lossless-claw does) would make the range hold items already read, and miss others.
    /// Then nothing is read and the error is E_STALE.
    pub(crate) fn read_more<'a>(&mut self, db: impl Into<Db<'a>>, n: usize) -> Result<std::ops::Range<usize>> {
        let db = db.into();
        let Some(gap) = self.gap.as_ref() else {
            return Ok(0..0);
        };
        // One snapshot for the check and the read.
        let _snapshot = db.snapshot()?;
        let conn = db;
        // (ordinal, index of the item there): the last item before the gap and the first after
        // it, where there is one (without a protected tail the gap runs to the end).
        let sides = [
            gap.at.checked_sub(1).map(|i| (gap.after, i)),
            (gap.at < self.items.len()).then_some((gap.before, gap.at)),
        ];
        for (ordinal, index) in sides.into_iter().flatten() {
            // The item the model holds at that ordinal. There may be none: a row that is not
            // an item, or one a pass not yet written consumed (its summary has no ordinal
            // yet); that side is not checked.
            let Some(expected) = self
                .items
                .get(index)
                .filter(|i| i.db_ordinal == Some(ordinal))
                .map(|i| &i.r)
            else {
                continue;
            };
            let mut found = None;
            context::read_items(conn, self.conversation_id, Span::At(ordinal), false, |r| {
                found = Some(item_of(r).map(|i| i.r));
                Ok(false)
            })?;
            if found.as_ref().map(|f| f.as_ref()) != Some(Some(expected)) {
                return Err(LcmError::Stale {
                    conversation_id: self.conversation_id,
                    message: format!(
                        "the live context of conversation {} was renumbered while compaction read it (another \
                         process compacted it?); nothing more was written, retry",
                        self.conversation_id
                    ),
                });
            }
        }
        let Some(gap) = self.gap.as_mut() else {
            return Ok(0..0);
        };
        let span = Span::Between {
            after: gap.after,
            before: gap.before,
            limit: n.max(1) as i64,
        };
        let mut read = Vec::new();
        let mut rows_read = 0;
        context::read_items(conn, self.conversation_id, span, false, |r| {
            rows_read += 1;
            gap.after = r.ordinal;
            read.extend(item_of(r));
            Ok(true)
        })?;
        for item in &read {
            gap.tokens = (gap.tokens - item.tokens).max(0);
            if item.is_message() {
                gap.message_tokens = (gap.message_tokens - item.tokens).max(0);
            } else {
                gap.summaries = (gap.summaries - 1).max(0);
            }
        }
        let at = gap.at;
        gap.at += read.len();
        if rows_read < n.max(1) || gap.after + 1 >= gap.before {
            self.gap = None;
        }
        let range = at..at + read.len();
        self.items.splice(at..at, read);
        // The items read count as they are, whatever the totals said of them.
        self.total_tokens =
            self.items.iter().map(|i| i.tokens).sum::<i64>() + self.gap.as_ref().map_or(0, |g| g.tokens);
        Ok(range)
    }

    /// The live items as the API lists them (of a context read whole).
    pub(crate) fn entries(&self) -> Vec<ContextEntry> {
        debug_assert!(self.gap.is_none(), "entries of a partly read context");
        self.items
            .iter()
            .enumerate()
            .map(|(i, item)| ContextEntry {
                ordinal: item.db_ordinal.unwrap_or(i as i64),
                kind: if item.is_message() {
                    ItemKind::Message
                } else {
                    ItemKind::Summary
                },
                message_id: match item.r {
                    ItemRef::Message(id) => Some(id),
                    _ => None,
                },
                summary_id: match &item.r {
                    ItemRef::Summary(id) => Some(id.clone()),
                    _ => None,
                },
                role: item.role().map(str::to_string),
                depth: item.depth(),
                tokens: item.tokens,
            })
            .collect()
    }

    /// Σ stored tokens of the live items.
    pub(crate) fn stored_tokens(&self) -> i64 {
        self.total_tokens
    }

    /// Σ stored tokens of the live summaries (everything but raw messages, read or in the gap).
    pub(crate) fn summary_tokens(&self) -> i64 {
        let read_messages: i64 = self.items.iter().filter(|i| i.is_message()).map(|i| i.tokens).sum();
        let gap_messages = self.gap.as_ref().map_or(0, |g| g.message_tokens);
        self.total_tokens - read_messages - gap_messages
    }

    /// Index of the first protected item (see `TailRule`). Summaries are never part of the
    /// tail. Items at or after the returned index are never compacted; `len()` when nothing is
    /// protected.
    pub(crate) fn tail_start(&self, rule: TailRule) -> usize {
        // Walk back from the newest item: O(tail), whatever the length of the history.
        let mut walk = TailWalk::new(rule);
        for i in (0..self.items.len()).rev() {
            if !walk.push(i, &self.items[i]) {
                break;
            }
        }
        walk.start.unwrap_or(self.items.len())
    }

    /// Tokens of the newest turn the provider has already been sent: its messages from the
    /// newest user message on, but a closing assistant reply (new to the next request whatever
    /// happens). A sweep keeps the newest turn verbatim after its new summary, so this much of
    /// the cached prefix is sent again after one. None when `tail` protects nothing: a sweep
    /// keeps no turn verbatim then (and the items read need not reach the newest one).
    pub(crate) fn newest_turn_sent_tokens(&self, tail: TailRule) -> Option<i64> {
        if tail.count <= 0 {
            return None;
        }
        let start = self.tail_start(TailRule {
            count: 1,
            max_tokens: 0,
        });
        let turn = &self.items[start..];
        let end = match turn.last() {
            Some(last) if last.role() == Some("assistant") => turn.len() - 1,
            _ => turn.len(),
        };
        Some(turn[..end].iter().filter(|i| i.is_message()).map(|i| i.tokens).sum())
    }

    /// Raw-message tokens outside the fresh tail (the leaf trigger's measure).
    pub(crate) fn raw_tokens_outside_tail(&self, tail: TailRule) -> i64 {
        let end = self.tail_start(tail);
        let read: i64 = self.items[..end]
            .iter()
            .filter(|i| i.is_message())
            .map(|i| i.tokens)
            .sum();
        read + self.gap.as_ref().map_or(0, |g| g.message_tokens)
    }

    /// The oldest run of raw messages outside the tail, up to `leafChunkTokens` (a single
    /// larger message is taken alone).
    pub(crate) fn leaf_chunk(&self, config: &Config, tail: TailRule) -> Pick<Option<Chunk>> {
        // The gap may hold messages (it usually holds nothing else).
        match self.oldest_run(config, tail, Item::is_message, self.gap.is_some())? {
            Some(c) => self.keeping_tool_pairs(config, c, tail).map(Some),
            None => Ok(None),
        }
    }

    /// A leaf chunk that does not end between a tool call and its results: summarised without
    /// its call, a raw result is dropped at assembly and the model sees neither. The chunk takes
    /// the results with it, unless that makes it more than twice `leafChunkTokens` while ending
    /// before the call still leaves half a chunk.
    fn keeping_tool_pairs(&self, config: &Config, chunk: Chunk, tail: TailRule) -> Pick<Chunk> {
        // Whether the item after the first `i` is a result can depend on the unread gap.
        if self.gap.as_ref().is_some_and(|g| chunk.start + chunk.len >= g.at) {
            return Err(ReadMore);
        }
        let is_result = |i: usize| {
            self.items
                .get(i)
                .is_some_and(|item| item.is_message() && item.role() == Some("tool"))
        };
        if !is_result(chunk.start + chunk.len) {
            return Ok(chunk);
        }
        let end = self.tail_start(tail);
        let mut grown = chunk.clone();
        while grown.start + grown.len < end && is_result(grown.start + grown.len) {
            grown.tokens += self.items[grown.start + grown.len].tokens;
            grown.len += 1;
            if self.gap.as_ref().is_some_and(|g| grown.start + grown.len >= g.at) {
                return Err(ReadMore);
            }
        }
        let mut cut = chunk;
        while cut.len > 0 && is_result(cut.start + cut.len) {
            cut.len -= 1;
            cut.tokens -= self.items[cut.start + cut.len].tokens;
        }
        // The shorter chunk only when the longer one is more than twice a chunk and the
        // shorter one still half of one (a tiny chunk's summary is no shorter than its source).
        if grown.tokens > config.leaf_chunk_tokens.saturating_mul(2) && cut.tokens >= config.leaf_chunk_tokens / 2 {
            Ok(cut)
        } else {
            Ok(grown)
        }
    }

    /// The oldest contiguous run of summaries at `depth` outside the tail, up to
    /// `leafChunkTokens` of input.
    pub(crate) fn run_at_depth(&self, config: &Config, tail: TailRule, depth: i64) -> Pick<Option<Chunk>> {
        self.oldest_run(
            config,
            tail,
            |item| item.depth() == Some(depth),
            self.gap.as_ref().is_some_and(|g| g.summaries > 0),
        )
    }

    /// The oldest contiguous run of items that are `wanted`, outside the tail, up to
    /// `leafChunkTokens` (a first item larger than that is taken alone). `gap_may_hold` says
    /// whether the gap can hold wanted items: if not, a run that reaches it ends there.
    fn oldest_run(
        &self,
        config: &Config,
        tail: TailRule,
        wanted: impl Fn(&Item) -> bool,
        gap_may_hold: bool,
    ) -> Pick<Option<Chunk>> {
        let end = self.tail_start(tail);
        let read_end = self.gap.as_ref().map_or(end, |g| g.at.min(end));
        let Some(start) = (0..read_end).find(|&i| wanted(&self.items[i])) else {
            return if gap_may_hold { Err(ReadMore) } else { Ok(None) };
        };
        let mut tokens = 0;
        let mut len = 0;
        let mut ended = false;
        for item in &self.items[start..read_end] {
            if !wanted(item) || (len > 0 && tokens + item.tokens > config.leaf_chunk_tokens) {
                ended = true;
                break;
            }
            tokens += item.tokens;
            len += 1;
            if tokens >= config.leaf_chunk_tokens {
                ended = true;
                break;
            }
        }
        if !ended && gap_may_hold && self.gap.as_ref().is_some_and(|g| g.at == read_end) {
            // The run reaches the gap, whose first items may continue it.
            return Err(ReadMore);
        }
        Ok(Some(Chunk { start, len, tokens }))
    }

    /// Minimum run length to condense summaries of `depth`.
    pub(crate) fn fanout(config: &Config, depth: i64, hard: bool) -> i64 {
        if hard {
            config.condensed_min_fanout_hard
        } else if depth == 0 {
            config.leaf_min_fanout
        } else {
            config.condensed_min_fanout
        }
    }

    /// Minimum input tokens of a condensation: lossless-claw's `max(condensedTargetTokens,
    /// leafChunkTokens / 10)`, but never more than a run can hold (runs stop at
    /// `leafChunkTokens`).
    pub(crate) fn min_condensed_tokens(config: &Config) -> i64 {
        config
            .condensed_target_tokens
            .max(config.leaf_chunk_tokens / 10)
            .min(config.leaf_chunk_tokens)
    }

    /// The shallowest depth with an eligible run (fanout and minimum tokens), and that run.
    /// `only_depth` restricts the search to one input depth. `hard` (the sweep's relaxed phase,
    /// over the threshold with nothing else to do) asks only for the hard fanout: with
    /// `leafChunkTokens` small next to the summaries' size, no run reaches the token minimum,
    /// and a long session's leaf summaries would pile up over the threshold for good.
    pub(crate) fn condensation_candidate(
        &self,
        config: &Config,
        tail: TailRule,
        hard: bool,
        only_depth: Option<i64>,
    ) -> Pick<Option<(i64, Chunk)>> {
        if self.gap.as_ref().is_some_and(|g| g.summaries > 0) {
            // Which depths exist, and where their oldest runs are, depends on the gap.
            return Err(ReadMore);
        }
        let end = self.tail_start(tail);
        let mut depths: Vec<i64> = self.items[..end].iter().filter_map(|i| i.depth()).collect();
        depths.sort_unstable();
        depths.dedup();
        for d in depths.into_iter().filter(|d| only_depth.is_none_or(|o| o == *d)) {
            let Some(mut run) = self.run_at_depth(config, tail, d)? else {
                continue;
            };
            let fanout = Self::fanout(config, d, hard);
            if hard && (run.len as i64) < fanout {
                // Summaries larger than half a chunk never make a run of two: under pressure the
                // run may pass `leafChunkTokens` to reach the hard fanout.
                let more = self.items[run.start + run.len..end]
                    .iter()
                    .take((fanout as usize).saturating_sub(run.len))
                    .take_while(|i| i.depth() == Some(d));
                for item in more {
                    run.len += 1;
                    run.tokens += item.tokens;
                }
            }
            if run.len as i64 >= fanout && (hard || run.tokens >= Self::min_condensed_tokens(config)) {
                return Ok(Some((d, run)));
            }
        }
        Ok(None)
    }

    /// Summary items before index `before` (newest first), up to `limit`, optionally of one
    /// depth only: the previous-context candidates.
    pub(crate) fn summaries_before(&self, before: usize, depth: Option<i64>, limit: usize) -> Vec<String> {
        let mut out: Vec<String> = self.items[..before]
            .iter()
            .rev()
            .filter(|i| depth.is_none() || i.depth() == depth)
            .filter_map(|i| match &i.r {
                ItemRef::Summary(id) if i.summary_facts().is_some() => Some(id.clone()),
                _ => None,
            })
            .take(limit)
            .collect();
        out.reverse();
        out
    }

    /// Replaces the chunk with one new summary item (not yet in the database).
    pub(crate) fn replace(&mut self, chunk: &Chunk, item: Item) {
        if let Some(gap) = self.gap.as_mut() {
            debug_assert!(chunk.start + chunk.len <= gap.at, "a chunk beyond the read items");
            gap.at -= chunk.len - 1;
        }
        self.total_tokens += item.tokens;
        for removed in self
            .items
            .splice(chunk.start..chunk.start + chunk.len, [Box::new(item)])
        {
            self.total_tokens -= removed.tokens;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(id: i64, role: &str, tokens: i64) -> Item {
        Item::message(id, tokens, Some(id), Some(role.into()))
    }

    fn sum(id: &str, depth: i64, tokens: i64) -> Item {
        Item::summary(
            id.into(),
            tokens,
            None,
            Some(SummaryFacts {
                depth,
                earliest_at: None,
                latest_at: None,
                created_at: "2026-01-01 00:00:00".into(),
                descendant_count: 0,
                descendant_token_count: 0,
                source_message_token_count: 0,
            }),
        )
    }

    fn ctx(items: Vec<Item>) -> LiveContext {
        LiveContext::new(1, items.into_iter().map(Box::new).collect(), 0)
    }

    fn config(tail: i64, chunk: i64) -> Config {
        let mut c = Config::with_db_path("/tmp/x.db");
        c.fresh_tail_count = tail;
        c.leaf_chunk_tokens = chunk;
        c.condensed_target_tokens = 10;
        c
    }

    fn tail(c: &Config) -> TailRule {
        TailRule::of(c, None)
    }

    #[test]
    fn fresh_tail_bounded_in_tokens_keeps_the_newest_turn() {
        // u(6) a(1) u(6) a(1) u(6) a(1): 3 turns of 7 tokens.
        let c = ctx(vec![
            msg(0, "user", 6),
            msg(1, "assistant", 1),
            msg(2, "user", 6),
            msg(3, "assistant", 1),
            msg(4, "user", 6),
            msg(5, "assistant", 1),
        ]);
        let rule = |max_tokens| TailRule { count: 32, max_tokens };
        assert_eq!(c.tail_start(rule(i64::MAX)), 0, "messages only: all six");
        assert_eq!(c.tail_start(rule(14)), 2, "two turns fit 14 tokens");
        assert_eq!(
            c.tail_start(rule(13)),
            3,
            "the third message from the end would pass 13"
        );
        assert_eq!(
            c.tail_start(rule(13)),
            c.tail_start(TailRule {
                count: 3,
                max_tokens: i64::MAX
            })
        );
        // Never less than the newest turn, however small the bound.
        assert_eq!(c.tail_start(rule(0)), 4);
        assert_eq!(c.tail_start(rule(14).newest_turn()), 4);
        // A newest message larger than the bound is still protected, alone or with its turn.
        let c = ctx(vec![msg(0, "user", 1), msg(1, "assistant", 1), msg(2, "tool", 50)]);
        assert_eq!(c.tail_start(rule(10)), 0);
        let c = ctx(vec![msg(0, "assistant", 1), msg(1, "assistant", 50)]);
        assert_eq!(
            c.tail_start(rule(10)),
            1,
            "no user message: only what fits, the newest always"
        );
        let c = ctx(vec![msg(0, "assistant", 1), msg(1, "tool", 50)]);
        assert_eq!(c.tail_start(rule(10)), 0, "a newest result keeps its call");
        // The default bound is a share of the budget; `freshTailMaxTokens` replaces it.
        let mut cfg = config(32, 100);
        assert_eq!(TailRule::of(&cfg, Some(1000)).max_tokens, 400);
        assert_eq!(TailRule::of(&cfg, None).max_tokens, i64::MAX);
        cfg.fresh_tail_max_tokens = Some(7);
        assert_eq!(TailRule::of(&cfg, Some(1000)).max_tokens, 7);
        assert_eq!(TailRule::of(&cfg, None).max_tokens, 7);
    }

    #[test]
    fn fresh_tail_extends_back_to_the_newest_user_message() {
        // u a a a a a: tail of 2 would start at index 4, but the newest user is index 0.
        let c = ctx(vec![
            msg(0, "user", 1),
            msg(1, "assistant", 1),
            msg(2, "tool", 1),
            msg(3, "assistant", 1),
            msg(4, "tool", 1),
            msg(5, "assistant", 1),
        ]);
        assert_eq!(c.tail_start(TailRule::messages(2)), 0);
        let c = ctx(vec![
            msg(0, "user", 1),
            msg(1, "assistant", 1),
            msg(2, "user", 1),
            msg(3, "assistant", 1),
            msg(4, "tool", 1),
            msg(5, "assistant", 1),
        ]);
        assert_eq!(c.tail_start(TailRule::messages(2)), 2);
        assert_eq!(c.tail_start(TailRule::messages(0)), 6, "0 protects nothing");
        assert_eq!(c.tail_start(TailRule::messages(100)), 0);
    }

    #[test]
    fn leaf_chunk_is_the_oldest_run_of_messages_within_budget() {
        let c = ctx(vec![
            sum("s", 0, 5),
            msg(1, "user", 4),
            msg(2, "assistant", 4),
            msg(3, "assistant", 4),
            msg(4, "user", 1),
            msg(5, "assistant", 1),
        ]);
        let cfg = config(2, 8);
        assert_eq!(
            c.leaf_chunk(&cfg, tail(&cfg)),
            Ok(Some(Chunk {
                start: 1,
                len: 2,
                tokens: 8
            }))
        );
        // A single message above the budget is taken alone.
        let c = ctx(vec![
            msg(1, "user", 50),
            msg(2, "assistant", 1),
            msg(3, "user", 1),
            msg(4, "assistant", 1),
        ]);
        assert_eq!(
            c.leaf_chunk(&cfg, tail(&cfg)),
            Ok(Some(Chunk {
                start: 0,
                len: 1,
                tokens: 50
            }))
        );
        // Nothing outside the tail: no chunk.
        let c = ctx(vec![msg(1, "user", 1), msg(2, "assistant", 1)]);
        assert_eq!(c.leaf_chunk(&cfg, tail(&cfg)), Ok(None));
    }

    #[test]
    fn condensation_takes_the_shallowest_eligible_same_depth_run() {
        let mut items = vec![
            sum("d1a", 1, 20),
            sum("d1b", 1, 20),
            sum("d1c", 1, 20),
            sum("d1d", 1, 20),
        ];
        items.extend((0..3).map(|i| sum(&format!("l{i}"), 0, 20)));
        items.extend([msg(100, "user", 1), msg(101, "assistant", 1)]);
        let c = ctx(items);
        // Minimum input: max(condensedTargetTokens 10, 500 / 10) = 50 tokens.
        let cfg = config(2, 500);
        // Depth 0 has only 3 leaves (< 8): depth 1 with 4 nodes is the candidate.
        let (d, run) = c
            .condensation_candidate(&cfg, tail(&cfg), false, None)
            .unwrap()
            .unwrap();
        assert_eq!((d, run.start, run.len), (1, 0, 4));
        // With the hard fanout (2), depth 0 goes first.
        let (d, run) = c.condensation_candidate(&cfg, tail(&cfg), true, None).unwrap().unwrap();
        assert_eq!((d, run.start, run.len), (0, 4, 3));
        // A depth break ends a run: it never mixes depths.
        let c = ctx(vec![
            sum("a", 0, 20),
            sum("b", 0, 20),
            sum("x", 1, 20),
            sum("c", 0, 20),
            msg(1, "user", 1),
        ]);
        let run = c.run_at_depth(&cfg, tail(&cfg), 0).unwrap().unwrap();
        assert_eq!((run.start, run.len), (0, 2));
    }

    #[test]
    fn a_tool_call_and_its_results_stay_on_one_side_of_the_tail_and_of_a_leaf_chunk() {
        // Seen with freshTailCount 4 and leafChunkTokens 200: the call summarised, its result
        // left raw and dropped at assembly (orphanResultsDropped: 1).
        let c = ctx(vec![
            msg(0, "user", 10),
            msg(1, "assistant", 10),
            msg(2, "tool", 10),
            msg(3, "tool", 10),
            msg(4, "assistant", 10),
            msg(5, "user", 10),
            msg(6, "assistant", 10),
        ]);
        let rule = TailRule {
            count: 4,
            max_tokens: i64::MAX,
        };
        // Four messages would start the tail at the second result: the call comes along.
        assert_eq!(c.tail_start(rule), 1);
        // A chunk that would end after the call takes the results along, up to twice
        // leafChunkTokens; beyond that it ends before the call, if half a chunk remains.
        let cfg = config(2, 20);
        assert_eq!(c.tail_start(tail(&cfg)), 5);
        let chunk = c.leaf_chunk(&cfg, tail(&cfg)).unwrap().unwrap();
        assert_eq!((chunk.start, chunk.len, chunk.tokens), (0, 4, 40));
        let c = ctx(vec![
            msg(0, "user", 10),
            msg(1, "assistant", 10),
            msg(2, "tool", 40),
            msg(3, "user", 10),
            msg(4, "assistant", 10),
        ]);
        let chunk = c.leaf_chunk(&cfg, tail(&cfg)).unwrap().unwrap();
        assert_eq!((chunk.start, chunk.len, chunk.tokens), (0, 1, 10));
        // A chunk that is the call alone takes its results with it.
        let c = ctx(vec![
            msg(0, "assistant", 30),
            msg(1, "tool", 10),
            msg(2, "tool", 10),
            msg(3, "user", 10),
            msg(4, "assistant", 10),
        ]);
        let chunk = c.leaf_chunk(&cfg, tail(&cfg)).unwrap().unwrap();
        assert_eq!((chunk.start, chunk.len, chunk.tokens), (0, 3, 50));
    }

    #[test]
    fn the_relaxed_phase_condenses_summaries_a_small_chunk_cannot_gather_to_the_minimum() {
        // Seen in OpenClaw with leafChunkTokens 1500: 138 leaf summaries of ~390 tokens stayed
        // over the threshold, since runs stop at 1500 tokens and the minimum input was 2000.
        let items: Vec<Item> = (0..8)
            .map(|i| sum(&format!("l{i}"), 0, 392))
            .chain([msg(1, "user", 1)])
            .collect();
        let c = ctx(items);
        let mut cfg = config(1, 1500);
        cfg.condensed_target_tokens = 2000;
        assert_eq!(LiveContext::min_condensed_tokens(&cfg), 1500);
        assert_eq!(c.condensation_candidate(&cfg, tail(&cfg), false, None), Ok(None));
        let (d, run) = c.condensation_candidate(&cfg, tail(&cfg), true, None).unwrap().unwrap();
        assert_eq!((d, run.start, run.len, run.tokens), (0, 0, 3, 3 * 392));
        // The oldest summary alone fills more than half a chunk: the hard run still takes two.
        let items: Vec<Item> = [900, 800, 392, 392]
            .iter()
            .enumerate()
            .map(|(i, t)| sum(&format!("l{i}"), 0, *t))
            .chain([msg(1, "user", 1)])
            .collect();
        let c = ctx(items);
        assert_eq!(c.condensation_candidate(&cfg, tail(&cfg), false, None), Ok(None));
        let (_, run) = c.condensation_candidate(&cfg, tail(&cfg), true, None).unwrap().unwrap();
        assert_eq!((run.start, run.len, run.tokens), (0, 2, 1700));
    }

    #[test]
    fn minimum_input_tokens_gate_condensation() {
        let items: Vec<Item> = (0..8)
            .map(|i| sum(&format!("l{i}"), 0, 1))
            .chain([msg(1, "user", 1)])
            .collect();
        let c = ctx(items);
        let mut cfg = config(1, 50);
        cfg.condensed_target_tokens = 100;
        assert_eq!(c.condensation_candidate(&cfg, tail(&cfg), false, None), Ok(None));
        cfg.condensed_target_tokens = 8;
        assert!(matches!(
            c.condensation_candidate(&cfg, tail(&cfg), false, None),
            Ok(Some(_))
        ));
    }
}
