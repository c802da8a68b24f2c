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
pub(crate) struct MessagePage {
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
