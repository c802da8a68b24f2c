//! What `ingest` (and the turns the plugin commits through it), `messages` and `resetSession`
//! take, converted here into what the store writes; and `ingest`'s answer.

use crate::error::{LcmError, Result};
use crate::store::lifecycle::{ResetReason, DEFAULT_RETAIN_DEPTH};
use crate::store::messages::{Advancement, IngestMode, IngestOutcome};

/// Options of `ingest`: how the call is applied.
#[derive(Clone, Debug, Default, serde::Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IngestOptions {
    /// The host's key of the turn these messages complete, stored in the same transaction: a
    /// key already stored for the conversation makes the call a no-op (`duplicate: true`), also
    /// after a restart.
    #[serde(default, skip_serializing, deserialize_with = "crate::input::opt_non_empty")]
    pub advancement_key: Option<String>,
    /// Import a session's earlier transcript: only into a conversation with no message yet,
    /// once (`alreadyBootstrapped` otherwise).
    #[serde(default, skip_serializing)]
    pub bootstrap: bool,
    /// With `advancementKey`: the turn's row in lossless-claw 1.x's `turn_advancements`, so
    /// that lossless-claw answers `duplicate` for it after a switch (the plugin computes
    /// `payloadHash` as lossless-claw does).
    #[serde(default, skip_serializing)]
    pub turn: Option<TurnRecord>,
    /// With `advancementKey`: where the turn's first message sits in the host's transcript
    /// (OpenClaw's `admission.activeMessagePosition`). A turn replayed after turns that came
    /// later in the transcript is then stored as `late` instead of as if in order.
    #[serde(default, skip_serializing)]
    pub transcript_position: Option<i64>,
}

/// A committed turn as lossless-claw 1.x records it in `turn_advancements`. `payloadHash` is
/// its hash of the host's commit parameters (the plugin computes it exactly as lossless-claw
/// does).
#[derive(Clone, Debug, Default, serde::Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TurnRecord {
    pub payload_hash: String,
    pub session_id: String,
    #[serde(default, skip_serializing)]
    pub session_key: Option<String>,
    pub admission_entry_id: String,
    pub terminal_entry_id: String,
}

/// Options of `messages`: a page of a conversation's messages.
#[derive(Clone, Copy, Debug, serde::Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[cfg_attr(test, ts(rename = "MessagesOptions"))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MessagePage {
    /// Messages after this `seq` (exclusive). Default 0: from the first.
    #[serde(default, skip_serializing, deserialize_with = "crate::input::non_negative")]
    pub after_seq: i64,
    /// Most messages returned. Default 1000.
    #[serde(
        default = "MessagePage::default_limit",
        skip_serializing,
        deserialize_with = "crate::input::positive"
    )]
    pub limit: i64,
    /// Each text of a message (a string content, any string in a block but its `type`: a
    /// text, a thinking, a tool call's argument, …) longer than this many characters comes
    /// back as its first `maxChars`, and the message's `folded` names it with its length;
    /// `messageText` pages through the rest. The texts are cut as they are read, so a message
    /// of any size costs about `maxChars` per text. From 1 to 1,000,000. Default: every text
    /// whole.
    #[serde(default, skip_serializing, deserialize_with = "crate::input::opt_chars")]
    pub max_chars: Option<usize>,
}

/// Options of `messageText`: which text of the message (as its `folded` names it) and which
/// page of it.
#[derive(Clone, Debug, serde::Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[cfg_attr(test, ts(rename = "MessageTextOptions"))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TextRequest {
    /// The content block the text is in (its index in `content`); left out when the content
    /// is a string.
    #[serde(default, skip_serializing, deserialize_with = "crate::input::opt_non_negative")]
    pub block: Option<i64>,
    /// Where in the block, a JSON Pointer (`/text`, `/thinking`, `/arguments/command`). Default
    /// `/text` in a block, `""` (the content itself) for a string content.
    #[serde(default, skip_serializing)]
    pub path: Option<String>,
    /// The page's first character (0 is the text's first; at most its length). Default 0.
    #[serde(default, skip_serializing, deserialize_with = "crate::input::non_negative")]
    pub offset: i64,
    /// Characters in the page, from 1 to 1,000,000. Default 60,000.
    #[serde(
        default = "TextRequest::default_limit",
        skip_serializing,
        deserialize_with = "crate::input::chars"
    )]
    pub limit: usize,
    /// The conversation the message must be in: one of another is E_NOT_FOUND, as one that
    /// does not exist, before anything of it is read (for a caller that shows one
    /// conversation, as the panel shows a session's).
    #[serde(default, skip_serializing, deserialize_with = "crate::input::opt_positive")]
    pub conversation_id: Option<i64>,
}

impl TextRequest {
    fn default_limit() -> usize {
        60_000
    }

    /// The block and the path within it, with the path's default.
    pub(crate) fn at(&self) -> (Option<usize>, String) {
        let block = self.block.map(|b| usize::try_from(b).unwrap_or(usize::MAX));
        let default = if block.is_some() { "/text" } else { "" };
        (block, self.path.clone().unwrap_or_else(|| default.to_string()))
    }
}

impl Default for TextRequest {
    fn default() -> TextRequest {
        TextRequest {
            block: None,
            path: None,
            offset: 0,
            limit: TextRequest::default_limit(),
            conversation_id: None,
        }
    }
}

/// What `messageText` answers: a page of one text of a message.
#[derive(Clone, Debug, serde::Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct MessageTextPage {
    pub message_id: i64,
    pub conversation_id: i64,
    /// The block the text is in (null: the content is that string).
    pub block: Option<usize>,
    /// Where in the block (a JSON Pointer; `""` for the content itself).
    pub path: String,
    /// The page's first character.
    pub offset: u64,
    /// Characters `offset .. offset + limit` of the text (fewer at its end).
    pub text: String,
    /// The text's length in characters (Unicode code points).
    pub chars: u64,
    /// Where the next page starts; null when this one reaches the end.
    pub next_offset: Option<u64>,
}

/// Options of `resetSession`.
#[derive(Clone, Copy, Debug, serde::Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[cfg_attr(test, ts(rename = "ResetOptions"))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct ResetRequest {
    /// `new` (`/new`), `reset` (`/reset`) or `deleted` (the host deleted the session).
    pub reason: ResetKind,
    /// `new`: summaries of this depth and deeper stay in the context. Default 2.
    #[serde(default, skip_serializing, deserialize_with = "crate::input::opt_non_negative")]
    pub retain_depth: Option<i64>,
}

/// The reasons `resetSession` takes, as the host names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "lowercase")]
pub(crate) enum ResetKind {
    New,
    Reset,
    Deleted,
}

impl IngestOptions {
    /// E_INVALID_INPUT for options that contradict each other.
    pub fn check(&self) -> Result<()> {
        if self.turn.is_some() && self.advancement_key.is_none() {
            return Err(LcmError::invalid_input(
                "options.turn needs the `advancementKey` it records",
            ));
        }
        if self.transcript_position.is_some() && self.advancement_key.is_none() {
            return Err(LcmError::invalid_input(
                "options.transcriptPosition needs the `advancementKey` of the turn it places",
            ));
        }
        if self.transcript_position.is_some_and(|p| p < 0) {
            return Err(LcmError::invalid_input(
                "options.transcriptPosition must be a position (0 or more)",
            ));
        }
        Ok(())
    }
}

impl MessagePage {
    fn default_limit() -> i64 {
        1000
    }
}

impl Default for MessagePage {
    fn default() -> MessagePage {
        MessagePage {
            after_seq: 0,
            limit: MessagePage::default_limit(),
            max_chars: None,
        }
    }
}

impl From<IngestOptions> for IngestMode {
    fn from(o: IngestOptions) -> IngestMode {
        IngestMode {
            advancement_key: o.advancement_key,
            bootstrap: o.bootstrap,
            turn: o.turn.map(|t| Advancement {
                payload_hash: t.payload_hash,
                session_id: t.session_id,
                session_key: t.session_key,
                admission_entry_id: t.admission_entry_id,
                terminal_entry_id: t.terminal_entry_id,
            }),
            transcript_position: o.transcript_position,
        }
    }
}

impl ResetRequest {
    /// The reset the store makes of this request.
    pub(crate) fn reason(&self) -> ResetReason {
        match self.reason {
            ResetKind::New => ResetReason::New {
                retain_depth: self.retain_depth.unwrap_or(DEFAULT_RETAIN_DEPTH),
            },
            ResetKind::Reset => ResetReason::Reset,
            ResetKind::Deleted => ResetReason::Deleted,
        }
    }
}

/// What `ingest` did.
#[derive(serde::Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub(crate) struct IngestResult {
    #[serde(flatten)]
    pub outcome: IngestOutcome,
    /// Lone UTF-16 surrogates (half an emoji) stored as U+FFFD. Counted by the binding, which
    /// repairs them while it reads the messages.
    pub replaced_surrogates: usize,
}
