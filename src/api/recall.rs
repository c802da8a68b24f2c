//! What `grep`, `describe` and `expand` take and answer.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::store::messages::StoredMessage;
use crate::store::summaries::SummaryRecord;
use crate::time;

/// How `grep` matches: `fts` (default) full-text words, `like` substrings, `regex` a regular
/// expression.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[cfg_attr(test, ts(rename = "GrepMode"))]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    #[default]
    Fts,
    Regex,
    Like,
}

/// What `grep` searches.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[cfg_attr(test, ts(rename = "GrepScope"))]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    Messages,
    Summaries,
    #[default]
    Both,
}

/// The order of `grep`'s hits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[cfg_attr(test, ts(rename = "GrepSort"))]
#[serde(rename_all = "lowercase")]
pub enum Sort {
    /// Newest first (the default).
    #[default]
    Recency,
    /// Best full-text rank (bm25) first.
    Relevance,
    /// lossless-claw's blend: rank ÷ (1 + age in hours × 0.001), so an old match needs a much
    /// better rank to come before a recent one.
    Hybrid,
}

/// Options of `grep`.
#[derive(Clone, Debug, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GrepOptions {
    /// Words to find (all required; `"quoted phrases"` stay together). In `fts` mode FTS5's
    /// operators are plain text, so any text is a valid query. In `regex` mode, a Rust `regex`
    /// pattern (linear-time; no look-around or backreferences), at most 1024 bytes.
    /// At most 8 KiB and 64 terms.
    pub query: String,
    /// `fts` (default): full-text words; `like`: substrings; `regex`: a regular expression.
    #[serde(default, skip_serializing)]
    pub mode: Mode,
    /// Messages, summaries or both (the default).
    #[serde(default, skip_serializing)]
    pub scope: Scope,
    /// Only items at or after this time (epoch ms or ISO-8601). Held in SQLite's UTC format.
    #[serde(default, skip_serializing, deserialize_with = "time_bound")]
    #[cfg_attr(test, ts(type = "number | string"))]
    pub since: Option<String>,
    /// Only items before this time.
    #[serde(default, skip_serializing, deserialize_with = "time_bound")]
    #[cfg_attr(test, ts(type = "number | string"))]
    pub until: Option<String>,
    /// Most hits returned, 1–1000. Default 50.
    #[serde(default = "default_limit", skip_serializing, deserialize_with = "limit")]
    #[cfg_attr(test, ts(type = "number"))]
    pub limit: usize,
    /// `recency` (default): newest first; `relevance`: best full-text rank first; `hybrid`: rank
    /// divided by (1 + 0.001 × age in hours), as lossless-claw does.
    #[serde(default, skip_serializing)]
    pub sort: Sort,
}

/// Options of `expand`.
#[derive(Clone, Debug, serde::Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExpandOptions {
    /// Stored tokens of the entries returned, at most. Default 4000.
    #[serde(
        default = "default_budget",
        skip_serializing,
        deserialize_with = "crate::input::positive"
    )]
    pub token_budget: i64,
    /// Levels below the summary to walk (1 = its direct inputs or messages). Default: no limit.
    #[serde(default, skip_serializing, deserialize_with = "crate::input::opt_positive")]
    pub max_depth: Option<i64>,
}

/// Options of `describe`.
#[derive(Clone, Copy, Debug, Default, serde::Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DescribeOptions {
    /// A message: each text of it longer than this many characters comes back as its first
    /// `maxChars`, named in `folded` with its length (as `messages` gives them), read without
    /// holding the rest. From 1 to 1,000,000. A summary comes whole (the summarizer bounds
    /// it). Default: whole.
    #[serde(default, skip_serializing, deserialize_with = "crate::input::opt_chars")]
    pub max_chars: Option<usize>,
}

impl GrepOptions {
    /// A search for `query` with every other option at its default.
    pub fn new(query: impl Into<String>) -> GrepOptions {
        GrepOptions {
            query: query.into(),
            mode: Mode::default(),
            scope: Scope::default(),
            since: None,
            until: None,
            limit: DEFAULT_LIMIT,
            sort: Sort::default(),
        }
    }
}

fn default_limit() -> usize {
    DEFAULT_LIMIT
}

fn limit<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<usize, D::Error> {
    let n = u64::deserialize(d)?;
    if !(1..=MAX_LIMIT as u64).contains(&n) {
        return Err(serde::de::Error::custom(format!(
            "must be from 1 to {MAX_LIMIT}, got {n}"
        )));
    }
    Ok(n as usize)
}

/// `since` / `until`: epoch milliseconds or an ISO-8601 time, held as SQLite's UTC text.
fn time_bound<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Option<String>, D::Error> {
    let v = Value::deserialize(d)?;
    let t = match &v {
        Value::Number(n) => n.as_f64().and_then(time::from_epoch_ms),
        Value::String(s) => time::parse_timestamp(s),
        _ => None,
    };
    t.map(|t| Some(time::to_sqlite(&t)))
        .ok_or_else(|| serde::de::Error::custom(format!("must be epoch milliseconds or an ISO-8601 time, got {v}")))
}

pub(crate) const DEFAULT_LIMIT: usize = 50;

pub(crate) const MAX_LIMIT: usize = 1000;

pub(crate) const DEFAULT_TOKEN_BUDGET: i64 = 4000;

fn default_budget() -> i64 {
    DEFAULT_TOKEN_BUDGET
}

impl Default for ExpandOptions {
    fn default() -> ExpandOptions {
        ExpandOptions {
            token_budget: DEFAULT_TOKEN_BUDGET,
            max_depth: None,
        }
    }
}

/// One `grep` match.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct GrepHit {
    #[serde(rename = "type")]
    pub kind: ItemKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub message_id: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub summary_id: Option<String>,
    pub conversation_id: i64,
    /// Message: its role.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional, type = "\"user\" | \"assistant\" | \"toolResult\" | \"system\""))]
    pub role: Option<&'static str>,
    /// Summary: its kind and depth.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional, type = "SummaryKind"))]
    pub summary_kind: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub depth: Option<i64>,
    /// Message: when it was written; summary: the end of the span it covers. ISO-8601 UTC.
    pub time: String,
    /// A one-line excerpt around the match.
    pub snippet: String,
    /// The full-text rank, lower is better: FTS5's bm25 on SQLite, minus `ts_rank` on
    /// PostgreSQL. For full-text matches.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub rank: Option<f64>,
    /// True when the item is itself in the live context.
    pub live: bool,
    /// The live summary that covers the item when it is not live itself (`describe` it, `expand`
    /// it).
    pub covered_by: Option<String>,
}

/// How each scope was searched: `fts`, `trigram` (CJK terms of 3+ characters: in summaries
/// where SQLite has the trigram tokenizer, in both scopes where PostgreSQL has `pg_trgm`),
/// `like` (`like` mode, and CJK otherwise) or `regex`; a scope not searched is absent.
#[derive(Clone, Debug, Default, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct SearchedBy {
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional, type = "\"fts\" | \"trigram\" | \"like\" | \"regex\""))]
    pub messages: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional, type = "\"fts\" | \"trigram\" | \"like\" | \"regex\""))]
    pub summaries: Option<&'static str>,
}

/// Why a search returned before it had looked everywhere.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct GrepPartial {
    /// `E_TIMEOUT`: the search reached its deadline.
    #[cfg_attr(test, ts(type = "\"E_TIMEOUT\""))]
    pub code: &'static str,
    pub message: String,
}

/// What `grep` found.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct GrepResult {
    pub hits: Vec<GrepHit>,
    /// More matches exist than were returned (`limit`), or a search stopped at a bound (its
    /// deadline, or 200,000 rows per scope for a regex).
    pub truncated: bool,
    /// Set when the search stopped at its deadline (3 s): `hits` are what it found by then.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub partial: Option<GrepPartial>,
    /// How each scope was searched.
    pub searched_by: SearchedBy,
    /// Rows a regex search read.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub rows_scanned: Option<usize>,
}

/// An entry of an expansion: an input summary, or a message below a leaf.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[cfg_attr(test, ts(rename = "ExpansionEntry"))]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Entry {
    #[serde(rename_all = "camelCase")]
    Summary {
        summary_id: String,
        /// The summary it was reached from.
        parent_id: String,
        /// Levels below the expanded summary (1 = a direct input).
        level: i64,
        #[cfg_attr(test, ts(type = "SummaryKind"))]
        kind: String,
        depth: i64,
        token_count: i64,
        earliest_at: Option<String>,
        latest_at: Option<String>,
        content: String,
    },
    #[serde(rename_all = "camelCase")]
    Message {
        message_id: i64,
        parent_id: String,
        level: i64,
        token_count: i64,
        /// The message as `assemble` presents it.
        #[cfg_attr(test, ts(type = "AssembledMessage"))]
        message: Value,
    },
}

/// What `expand` returns.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct Expansion {
    pub summary_id: String,
    /// Breadth first: every direct input (in order) before any of their inputs.
    pub entries: Vec<Entry>,
    /// Stored tokens of the entries returned.
    pub estimated_tokens: i64,
    /// The budget ran out before everything below the summary (within `maxDepth`) was reached.
    pub truncated: bool,
}

/// A summary in a covering chain.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct ChainLink {
    pub summary_id: String,
    #[cfg_attr(test, ts(type = "SummaryKind"))]
    pub kind: String,
    pub depth: i64,
    pub live: bool,
}

/// What `describe` returns: a summary or a message, told apart by `type`.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Description {
    Summary(Box<SummaryDescription>),
    Message(Box<MessageDescription>),
}

/// `describe` of a summary.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct SummaryDescription {
    #[serde(flatten)]
    pub summary: SummaryRecord,
    /// The span as shown to the model, in the configured timezone.
    pub range: String,
    pub file_ids: Vec<String>,
    /// Condensed: its inputs, in order.
    pub inputs: Vec<InputRef>,
    /// The messages it stands for (through its inputs for a condensed node), first and last in
    /// conversation order.
    pub covered_messages: CoveredMessages,
    /// True when the summary is itself a live context item.
    pub live: bool,
    /// The condensed node that took it as an input.
    pub consumed_by: Option<String>,
    /// The live summary above it, when it is not live itself.
    pub live_summary: Option<String>,
    /// The summaries above it, nearest first, up to the live one.
    pub chain: Vec<ChainLink>,
    /// Its fidelity in detail (`fidelity` is the score alone): the stored one, else computed now
    /// (`stored: false`).
    pub fidelity_detail: crate::store::fidelity_scores::StoredFidelity,
    /// Every version of its text, oldest first (`history`).
    pub versions: Vec<crate::store::versions::SummaryVersion>,
}

/// `describe` of a message.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct MessageDescription {
    #[serde(flatten)]
    pub message: StoredMessage,
    pub conversation_id: i64,
    /// Its stored parts, in order.
    pub parts: Vec<PartInfo>,
    /// True when no summary covers it: it is a live context item.
    pub live: bool,
    /// The live summary that covers it, when it is not live itself.
    pub live_summary: Option<String>,
    /// The summaries that cover it, from its leaf up to the live one.
    pub chain: Vec<ChainLink>,
}

/// An input of a condensed summary.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[cfg_attr(test, ts(rename = "SummaryInput"))]
#[serde(rename_all = "camelCase")]
pub struct InputRef {
    pub summary_id: String,
    #[cfg_attr(test, ts(type = "SummaryKind"))]
    pub kind: String,
    pub depth: i64,
    pub token_count: i64,
}

/// The messages a summary stands for, directly (leaf) or through its inputs (condensed).
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct CoveredMessages {
    pub count: i64,
    /// The first and last of them in conversation order (the rolling-summary seed's start and
    /// end message ids).
    pub first_message_id: Option<i64>,
    pub last_message_id: Option<i64>,
}

/// A stored part of a message, as `describe` lists it.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[cfg_attr(test, ts(rename = "MessagePart"))]
#[serde(rename_all = "camelCase")]
pub struct PartInfo {
    pub part_id: String,
    pub part_type: String,
    pub ordinal: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub tool_call_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub tool_name: Option<String>,
    /// The block type the host sent, when it is not the part type's usual one.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub block_type: Option<String>,
}

/// What a context item (or a search hit) is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "lowercase")]
pub enum ItemKind {
    Message,
    Summary,
}
