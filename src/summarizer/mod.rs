//! The summarizer boundary. The core renders prompts and runs escalation; a `Summarizer` only
//! turns a prompt into text. The host's JavaScript callback is one implementation (in the
//! binding); the offline summarizer (`crate::offline`) is the other, and also the fallback.

pub(crate) mod entries;

use std::future::Future;
use std::pin::Pin;

use serde::Serialize;

/// Leaf (messages → depth 0) or condensed (summaries → depth + 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub enum SummaryKind {
    Leaf,
    Condensed,
}

impl SummaryKind {
    pub fn as_str(self) -> &'static str {
        match self {
            SummaryKind::Leaf => "leaf",
            SummaryKind::Condensed => "condensed",
        }
    }
}

/// What a pass does when the summarizer has not answered within `summaryTimeoutMs`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[cfg_attr(test, ts(rename = "SummaryTimeoutPolicy"))]
#[serde(rename_all = "lowercase")]
pub enum TimeoutPolicy {
    /// The pass fails with E_TIMEOUT and writes nothing (the default).
    #[default]
    Fail,
    /// The pass writes the deterministic fallback summary, marked for repair (a host that
    /// must keep its context shrinking while its model is slow).
    Fallback,
}

/// What the summarizer is asked for besides the prompt: the second argument of the JS callback (the
/// source text and its structure stay in Rust).
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct SummarizeRequest {
    pub kind: SummaryKind,
    /// Depth of the summary being made: 0 for a leaf, input depth + 1 for a condensed node.
    pub depth: i64,
    /// True on the second attempt, after the first answer was not shorter than its input.
    pub aggressive: bool,
    pub target_tokens: i64,
    pub conversation_id: i64,
    /// Estimated tokens of the source text inside the prompt.
    pub input_tokens: i64,
    /// Messages (leaf) or summaries (condensed) being summarised.
    pub input_count: i64,
    /// The time range the inputs cover, in the configured zone.
    pub time_range: String,
    /// How long the engine waits for this call (`summaryTimeoutMs`): a callback may give up
    /// its own request then, as the engine has.
    pub timeout_ms: i64,
    /// What the pass does when that time is up.
    #[serde(skip)]
    pub on_timeout: TimeoutPolicy,
    /// The source text itself, for in-process summarizers; not sent to JavaScript.
    #[serde(skip)]
    pub source_text: String,
    /// The structure of the source (messages with their tool calls and results, or input
    /// summaries), for the offline summarizer and the fidelity score.
    #[serde(skip)]
    pub entries: std::sync::Arc<Vec<entries::SourceEntry>>,
}

/// Why a summarizer call produced no text.
#[derive(Clone, Debug, PartialEq)]
pub enum SummarizerFailure {
    /// The provider refused the credentials (`code: 'LCM_AUTH'`): abort, write nothing.
    Auth(String),
    /// Threw, rejected, or returned something that is not a string.
    Failed(String),
    /// The engine was closed while the call was in flight: its answer no longer matters.
    Closed,
    /// The operation's lock across gateways was lost (why): another may be writing the
    /// conversation, so this answer must not be written.
    LockLost(String),
}

pub type SummaryFuture = Pin<Box<dyn Future<Output = Result<String, SummarizerFailure>> + Send>>;

pub trait Summarizer: Send + Sync {
    /// Summarises: `prompt` is the rendered template, `request` says what for.
    fn summarize(&self, prompt: String, request: &SummarizeRequest) -> SummaryFuture;
    /// The model id recorded in `summaries.model` for text this summarizer wrote.
    fn model(&self) -> String;
    /// Whether this is the built-in extractive summarizer: deterministic, so a retry asks it
    /// nothing new and its text repairs no fallback.
    fn is_offline(&self) -> bool {
        false
    }
}

/// `summaries.model` of deterministic fallback summaries, so they can be found and
/// re-summarised later.
pub(crate) const FALLBACK_MODEL: &str = "lcm-native/fallback";
/// `summaries.model` when the host asked for the offline summarizer.
pub(crate) const OFFLINE_MODEL: &str = "lcm-native/offline";

/// A summarizer whose calls end (with `SummarizerFailure::Closed`) as soon as `closed` turns
/// true, so that closing an engine never waits on, or keeps alive, a callback that does not
/// answer; and (with `SummarizerFailure::LockLost`) as soon as one of the operation's locks
/// across gateways is `lost`, whose answers are then not asked for or not written.
pub(crate) struct UntilClosed {
    pub inner: std::sync::Arc<dyn Summarizer>,
    pub closed: tokio::sync::watch::Receiver<bool>,
    pub lost: Vec<tokio::sync::watch::Receiver<Option<String>>>,
}

impl UntilClosed {
    /// Why a lock of the operation was lost, if one was.
    fn lost_now(&self) -> Option<String> {
        self.lost.iter().find_map(|l| l.borrow().clone())
    }
}

/// Why the first of `lost` to say so was lost; never, while none is (a lock released when
/// its operation ends says nothing).
async fn first_lost(lost: Vec<tokio::sync::watch::Receiver<Option<String>>>) -> String {
    if lost.is_empty() {
        return std::future::pending().await;
    }
    let waits = lost.into_iter().map(|mut l| {
        Box::pin(async move {
            let said = l.wait_for(Option::is_some).await.ok().and_then(|why| why.clone());
            match said {
                Some(why) => why,
                None => std::future::pending().await,
            }
        })
    });
    futures::future::select_all(waits).await.0
}

impl Summarizer for UntilClosed {
    fn summarize(&self, prompt: String, request: &SummarizeRequest) -> SummaryFuture {
        if let Some(why) = self.lost_now() {
            return Box::pin(async move { Err(SummarizerFailure::LockLost(why)) });
        }
        let call = self.inner.summarize(prompt, request);
        let mut closed = self.closed.clone();
        let lost = self.lost.clone();
        Box::pin(async move {
            let answer = tokio::select! {
                answer = call => answer,
                _ = closed.wait_for(|c| *c) => Err(SummarizerFailure::Closed),
                why = first_lost(lost.clone()) => Err(SummarizerFailure::LockLost(why)),
            };
            // Lost as the answer came: not written either.
            match lost.iter().find_map(|l| l.borrow().clone()) {
                Some(why) if answer.is_ok() => Err(SummarizerFailure::LockLost(why)),
                _ => answer,
            }
        })
    }

    fn model(&self) -> String {
        self.inner.model()
    }

    fn is_offline(&self) -> bool {
        self.inner.is_offline()
    }
}
