//! What `assemble` takes (what it answers is `assemble::Assembled`, the renderer's own).

use serde::{Deserialize, Serialize};

/// Options of `assemble`.
#[derive(Clone, Debug, serde::Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AssembleOptions {
    /// The model's context budget for these messages.
    #[serde(deserialize_with = "crate::input::positive")]
    pub token_budget: i64,
    /// Overrides the configured fresh tail for this call.
    #[serde(default, skip_serializing, deserialize_with = "crate::input::opt_non_negative")]
    pub fresh_tail_count: Option<i64>,
    /// Overrides the configured presentation of summaries.
    #[serde(default, skip_serializing)]
    pub presentation: Option<Presentation>,
    /// The turn's user message (OpenClaw's `prompt`): recall at assembly searches the history
    /// outside the context for it and adds what it finds as one `<recalled>` block at the end
    /// (`autoRecall`). Without it, a block made for the same turn by an earlier assembly is
    /// given again, unchanged.
    #[serde(default, skip_serializing)]
    pub recall_query: Option<String>,
    /// Overrides `autoRecall` for this call.
    #[serde(default, skip_serializing)]
    pub auto_recall: Option<bool>,
}

/// Which conversations recall at assembly searches.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "lowercase")]
pub enum RecallScope {
    /// The conversation assembled.
    #[default]
    Conversation,
    /// Every conversation in the database (other agents' too).
    All,
}

/// What recall at assembly did for one assembly (`AssembleStats.recall`).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct RecallStats {
    /// The terms searched for (identifiers and numbers first).
    pub terms: Vec<String>,
    /// The kind of answer the message asks for (`person`, `address`, `date`, …), if it names one.
    pub wants: Option<String>,
    /// Messages outside the context the search read.
    pub candidates: i64,
    /// This turn's excerpts, in the order shown.
    pub hits: Vec<RecallHit>,
    /// Tokens of this turn's block (0 when nothing was added).
    pub tokens: i64,
    /// Why nothing was added, when nothing was (and no block of this turn was kept).
    pub abstained: Option<String>,
    /// The block was made by an earlier assembly of the same turn and is given again as it was.
    pub reused: bool,
    /// Blocks of earlier turns kept where they were sent (the provider's cached prefix), and
    /// their tokens.
    pub earlier_blocks: i64,
    pub earlier_tokens: i64,
    /// The block as sent, when one was added.
    pub block: Option<String>,
    /// What recall by meaning did, when the message asks something: `compared` (its
    /// questions with the history's statements), `reading` (the history is being read on a
    /// thread of its own; this turn recalled by words alone) or `common` (its questions hold
    /// only words common in the history: nothing to find by meaning).
    pub meaning: Option<String>,
}

/// One excerpt of a `<recalled>` block, and why it was chosen.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct RecallHit {
    pub message_id: i64,
    pub conversation_id: i64,
    pub role: String,
    /// When the message was stored (ISO-8601 UTC).
    pub time: String,
    /// Its score: the index's relevance plus the excerpt's terms, a little more when newer.
    pub score: f64,
    /// The query's terms found in the excerpt.
    pub matched: Vec<String>,
    /// The excerpt holds a value of the kind the message asks for (`wants`).
    pub value_of_kind: bool,
    /// The cosine (about 0 … 1) of the excerpt and the message, when the excerpt was found by
    /// its meaning alone (it holds none of the words or kinds asked for).
    pub similarity: Option<f64>,
    /// A newer excerpt of the same subject with another value (its message id), shown first.
    pub superseded_by: Option<i64>,
    /// Tokens of the excerpt's text.
    pub tokens: i64,
}

/// How live summaries are presented to the model by `assemble`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "lowercase")]
pub enum Presentation {
    /// `<summary id=… range=… depth=… descendants=…>` … `</summary>` per summary.
    Xml,
    /// One `## Earlier in this conversation` section (rolling-summary seed).
    Markdown,
}
