//! `LcmEngine`, the exported class: each method translates its arguments and runs the core
//! engine's operation off Node's thread.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use napi::bindgen_prelude::*;
use napi_derive::napi;
use serde_json::Value;

use super::bridge::{
    blocking, decode_or_default, spawn_coded, spawn_coded_then, to_json, to_json_sized, JsonArg, JsonText,
};
use super::signals::{report_progress, RunControls};
use super::summarize::SummarizerArg;
use crate::api::{
    AssembleOptions, CompactOptions, DescribeOptions, EvaluateOptions, ExpandOptions, GrepOptions, IngestOptions,
    IngestResult, MessagePage, PassOptions, PreviewOptions, Progress, ResetRequest, RewriteRequest, ScoreScope,
    SummaryFilter, TextRequest,
};
use crate::config::{Config, LcmOptions};
use crate::engine::Engine;
use crate::error::{self, LcmError};
use crate::input::{ConversationId, NonEmpty, Positive};
use crate::redact::RedactOptions;
use crate::store::conversations::Target;
use crate::summarizer::SummaryKind;
use crate::{recall, rewrite};

/// One lcm database. Create it with `LcmEngine.open`; every method returns a Promise and does
/// its work off Node's main thread.
#[napi]
pub struct LcmEngine {
    inner: Arc<Engine>,
}

impl LcmEngine {
    /// Runs `work` with the engine on lcm-native's blocking threads (a read or a short write)
    /// and hands its result to JS as JSON.
    fn run<'env, T: serde::Serialize>(
        &self,
        env: &'env Env,
        work: impl FnOnce(&Engine) -> error::Result<T> + Send + 'static,
    ) -> napi::Result<PromiseRaw<'env, JsonText>> {
        let engine = self.inner.clone();
        blocking(env, move || to_json(&work(&engine)?))
    }

    /// Runs `work` on napi's tokio runtime (an operation that waits for the summarizer or the
    /// conversation's lock) and hands its result to JS as JSON.
    fn run_async<'env, T, F>(
        &self,
        env: &'env Env,
        work: impl FnOnce(Arc<Engine>) -> F + Send + 'static,
    ) -> napi::Result<PromiseRaw<'env, JsonText>>
    where
        T: serde::Serialize,
        F: std::future::Future<Output = error::Result<T>> + Send + 'static,
    {
        let engine = self.inner.clone();
        spawn_coded(env, async move { to_json(&work(engine).await?) })
    }

    /// A long run (`compact`, `rewrite`, `redact`) that reads an AbortSignal and `onProgress`
    /// from its options: `work` gets the engine and those controls, and the listener it
    /// attached is removed when the run ends, however it ends.
    fn run_controlled<'env, T, F>(
        &self,
        env: &'env Env,
        options: Option<Unknown<'_>>,
        work: impl FnOnce(Arc<Engine>, Controls) -> F + Send + 'static,
    ) -> napi::Result<PromiseRaw<'env, JsonText>>
    where
        T: serde::Serialize,
        F: std::future::Future<Output = error::Result<T>> + Send + 'static,
    {
        let engine = self.inner.clone();
        let RunControls {
            options,
            cancel,
            progress,
            watch,
            invalid,
        } = RunControls::read(env, options)?;
        let run = async move {
            if let Some(e) = invalid {
                return Err(e);
            }
            to_json(
                &work(
                    engine,
                    Controls {
                        options,
                        cancel,
                        progress,
                    },
                )
                .await?,
            )
        };
        spawn_coded_then(env, run, move |env| {
            if let Some(w) = watch {
                w.release(env);
            }
        })
    }

    /// `leafPass` and `condensedPass`: one pass of `kind`.
    fn pass<'env>(
        &self,
        env: &'env Env,
        kind: SummaryKind,
        conversation_id: JsonArg,
        summarize: Unknown<'_>,
        options: Option<JsonArg>,
    ) -> napi::Result<PromiseRaw<'env, JsonText>> {
        let summarizer = SummarizerArg::from_js(summarize);
        self.run_async(env, move |engine| async move {
            let id: ConversationId = conversation_id.decode("conversationId")?;
            let opts: PassOptions = decode_or_default(options, "options")?;
            let summarizer = summarizer.into_summarizer(opts.model.clone())?;
            engine.pass(id.0, kind, summarizer, opts).await
        })
    }
}

/// What `run_controlled` read from a run's options object: the JSON part, the flag its
/// AbortSignal sets, and `onProgress`.
struct Controls {
    options: JsonArg,
    cancel: Arc<AtomicBool>,
    progress: Option<super::signals::ProgressTsfn>,
}

#[napi]
impl LcmEngine {
    /// Opens (and creates or migrates) the database at `options.dbPath`. Invalid options
    /// reject with E_INVALID_CONFIG naming the option.
    #[napi(ts_return_type = "Promise<LcmEngine>")]
    pub fn open<'env>(
        env: &'env Env,
        #[napi(ts_arg_type = "LcmConfig")] options: JsonArg,
    ) -> napi::Result<PromiseRaw<'env, LcmEngine>> {
        blocking(env, move || {
            let options = LcmOptions::read(options.parse("options")?.unwrap_or(Value::Null))?;
            let config = Config::resolve(options, std::env::var("TZ").ok().as_deref())?;
            Ok(LcmEngine {
                inner: Arc::new(Engine::open(config)?),
            })
        })
    }

    /// The resolved configuration (every option with its effective value).
    #[napi(getter, ts_return_type = "ResolvedConfig")]
    pub fn config(&self) -> Value {
        self.inner.config().to_json()
    }

    /// What the migration run by `open` did.
    #[napi(getter, ts_return_type = "MigrationReport")]
    pub fn migration(&self) -> napi::Result<Value> {
        serde_json::to_value(self.inner.migration()).map_err(napi::Error::from)
    }

    /// The damage found in the database file, or null: a file found damaged (by the quick
    /// check at open, or when SQLite met a malformed page) gets no more writes, each refused
    /// with this E_CORRUPT error; reads go on where they can.
    #[napi(
        getter,
        ts_return_type = "{ code: 'E_CORRUPT'; message: string; path: string | null } | null"
    )]
    pub fn damage(&self) -> Value {
        match self.inner.damage() {
            Some(e) => serde_json::json!({ "code": e.code(), "message": e.to_string(), "path": e.path() }),
            None => Value::Null,
        }
    }

    /// What the integrity check of the database file came to: `passed`; `damaged` (writes are
    /// refused, `error` is `damage`); `running` (a file over 32 MB is checked in the
    /// background, writes wait for it); `failed` (the check could not run to its end for
    /// another reason than damage, `error` says why: the file is not known sound and writes go
    /// ahead unchecked); `skipped` (opened read-only, or PostgreSQL).
    #[napi(
        getter,
        ts_return_type = "{ state: 'passed' | 'damaged' | 'running' | 'failed' | 'skipped'; error: { code: string; message: string } | null }"
    )]
    pub fn integrity_check(&self) -> Value {
        let found = self.inner.integrity();
        serde_json::json!({
            "state": found.state,
            "error": found.error.map(|e| serde_json::json!({ "code": e.code(), "message": e.to_string() })),
        })
    }

    /// Stores messages in one transaction and appends them to the live context. Every message
    /// is validated first; a malformed one rejects with E_INVALID_INPUT naming its index, and
    /// nothing of the call is written. Messages whose `entryId` is already stored are skipped.
    /// `advancementKey` stores the host's turn key in the same transaction (a key already
    /// stored makes the call a no-op, `duplicate: true`); `bootstrap` imports only into a
    /// conversation that holds no message yet. Lone UTF-16 surrogates are stored as U+FFFD
    /// (`replacedSurrogates` counts them).
    #[napi(ts_return_type = "Promise<IngestResult>")]
    pub fn ingest<'env>(
        &self,
        env: &'env Env,
        #[napi(ts_arg_type = "ConversationTarget")] target: JsonArg,
        #[napi(ts_arg_type = "IngestMessage[]")] messages: JsonArg,
        #[napi(ts_arg_type = "IngestOptions")] options: Option<JsonArg>,
    ) -> napi::Result<PromiseRaw<'env, JsonText>> {
        self.run(env, move |engine| {
            let target: Target = target.decode("target")?;
            let (messages, replaced) = messages.parse_repairing("messages")?;
            let Some(Value::Array(messages)) = messages else {
                return Err(LcmError::invalid_input("messages must be an array"));
            };
            let options: IngestOptions = decode_or_default(options, "options")?;
            Ok(IngestResult {
                outcome: engine.ingest_with(&target, &messages, options)?,
                replaced_surrogates: replaced,
            })
        })
    }

    /// Stores the turns the OpenClaw plugin spooled under `base` (see `spoolTurn`), in order,
    /// each once, one drainer at a time across processes; stops at the first that cannot be
    /// stored yet, and sets aside one that fails for good on every try.
    #[napi(ts_return_type = "Promise<DrainReport>")]
    pub fn drain_spool<'env>(&self, env: &'env Env, base: String) -> napi::Result<PromiseRaw<'env, JsonText>> {
        self.run(env, move |engine| engine.drain_spool(&base))
    }

    /// The conversation a session maps to (`{ sessionKey, sessionId? }` as lossless-claw maps
    /// them, `{ sessionId }`, or `{ conversationId }`), or `null` when there is none. Creates
    /// nothing.
    #[napi(ts_return_type = "Promise<SessionConversation | null>")]
    pub fn find_conversation<'env>(
        &self,
        env: &'env Env,
        #[napi(ts_arg_type = "ConversationTarget")] target: JsonArg,
    ) -> napi::Result<PromiseRaw<'env, JsonText>> {
        self.run(env, move |engine| engine.find_conversation(&target.decode("target")?))
    }

    /// Stored messages of a conversation in order, content blocks rebuilt exactly as ingested;
    /// with `maxChars`, each longer text cut to its first `maxChars` characters as it is read
    /// (named in `folded`).
    #[napi(ts_return_type = "Promise<StoredMessage[]>")]
    pub fn messages<'env>(
        &self,
        env: &'env Env,
        #[napi(ts_arg_type = "number")] conversation_id: JsonArg,
        #[napi(ts_arg_type = "MessagesOptions")] options: Option<JsonArg>,
    ) -> napi::Result<PromiseRaw<'env, JsonText>> {
        self.run(env, move |engine| {
            let id: ConversationId = conversation_id.decode("conversationId")?;
            let page: MessagePage = decode_or_default(options, "options")?;
            engine.messages_page(id.0, &page)
        })
    }

    /// A page of one text of a message (a string content, or the text at `path` in block
    /// `block`, as `folded` names it): characters `offset .. offset + limit` and the text's
    /// length, read without holding the rest. E_NOT_FOUND for a message that does not exist;
    /// E_INVALID_INPUT for a block or path that names no text, or an offset past its end.
    #[napi(ts_return_type = "Promise<MessageTextPage>")]
    pub fn message_text<'env>(
        &self,
        env: &'env Env,
        #[napi(ts_arg_type = "number")] message_id: JsonArg,
        #[napi(ts_arg_type = "MessageTextOptions")] options: Option<JsonArg>,
    ) -> napi::Result<PromiseRaw<'env, JsonText>> {
        self.run(env, move |engine| {
            let id: Positive = message_id.decode("messageId")?;
            let request: TextRequest = decode_or_default(options, "options")?;
            engine.message_text(id.0, &request)
        })
    }

    /// Every conversation, oldest first, with its message, summary and context-item counts.
    #[napi(ts_return_type = "Promise<ConversationInfo[]>")]
    pub fn conversations<'env>(&self, env: &'env Env) -> napi::Result<PromiseRaw<'env, JsonText>> {
        self.run(env, |engine| engine.conversations())
    }

    /// Summaries of a conversation in creation order (leaves and condensed nodes), optionally
    /// of one depth only.
    #[napi(ts_return_type = "Promise<SummaryRecord[]>")]
    pub fn summaries<'env>(
        &self,
        env: &'env Env,
        #[napi(ts_arg_type = "number")] conversation_id: JsonArg,
        #[napi(ts_arg_type = "SummariesOptions")] options: Option<JsonArg>,
    ) -> napi::Result<PromiseRaw<'env, JsonText>> {
        self.run(env, move |engine| {
            let id: ConversationId = conversation_id.decode("conversationId")?;
            let filter: SummaryFilter = decode_or_default(options, "options")?;
            engine.summaries(id.0, &filter)
        })
    }

    /// Per-depth distribution of the stored fidelity scores of a conversation's summaries
    /// (share of their source's identifiers they keep; see the README).
    #[napi(ts_return_type = "Promise<DepthFidelity[]>")]
    pub fn fidelity<'env>(
        &self,
        env: &'env Env,
        #[napi(ts_arg_type = "number")] conversation_id: JsonArg,
    ) -> napi::Result<PromiseRaw<'env, JsonText>> {
        self.run(env, move |engine| {
            engine.fidelity(conversation_id.decode::<ConversationId>("conversationId")?.0)
        })
    }

    /// Scores the summaries that have no fidelity score yet (written before scores existed,
    /// or by lossless-claw), or every summary with `all: true`, and stores the scores.
    #[napi(ts_return_type = "Promise<ScoreFidelityReport>")]
    pub fn score_fidelity<'env>(
        &self,
        env: &'env Env,
        #[napi(ts_arg_type = "number")] conversation_id: JsonArg,
        #[napi(ts_arg_type = "ScoreFidelityOptions")] options: Option<JsonArg>,
    ) -> napi::Result<PromiseRaw<'env, JsonText>> {
        self.run(env, move |engine| {
            let id: ConversationId = conversation_id.decode("conversationId")?;
            let scope: ScoreScope = decode_or_default(options, "options")?;
            engine.score_fidelity(id.0, scope.all)
        })
    }

    /// Summarises the oldest chunk of raw messages outside the fresh tail into a leaf summary
    /// (then condenses up to `incrementalMaxDepth`). Resolves `null` when there is nothing to
    /// do. A summarizer failure rejects (E_SUMMARIZER, E_TIMEOUT) with nothing written; an
    /// `LCM_AUTH` or `LCM_STOP` rejection resolves with `authFailure: true`, also with nothing
    /// written.
    #[napi(ts_return_type = "Promise<PassResult | null>")]
    pub fn leaf_pass<'env>(
        &self,
        env: &'env Env,
        #[napi(ts_arg_type = "number")] conversation_id: JsonArg,
        #[napi(ts_arg_type = "Summarize")] summarize: Unknown<'_>,
        #[napi(ts_arg_type = "PassOptions")] options: Option<JsonArg>,
    ) -> napi::Result<PromiseRaw<'env, JsonText>> {
        self.pass(env, SummaryKind::Leaf, conversation_id, summarize, options)
    }

    /// Condenses the shallowest eligible run of same-depth summaries (or the run at
    /// `options.depth`) into one node a level deeper. Resolves `null` when none is eligible.
    #[napi(ts_return_type = "Promise<PassResult | null>")]
    pub fn condensed_pass<'env>(
        &self,
        env: &'env Env,
        #[napi(ts_arg_type = "number")] conversation_id: JsonArg,
        #[napi(ts_arg_type = "Summarize")] summarize: Unknown<'_>,
        #[napi(ts_arg_type = "PassOptions")] options: Option<JsonArg>,
    ) -> napi::Result<PromiseRaw<'env, JsonText>> {
        self.pass(env, SummaryKind::Condensed, conversation_id, summarize, options)
    }

    /// A full sweep: leaf passes until no chunk or no progress, then condensation shallowest
    /// depth first, bounded by `maxSweepIterations` and `sweepDeadlineMs`. Runs only when
    /// `force` or the stored tokens exceed `contextThreshold × tokenBudget`. `signal` (an
    /// AbortSignal) stops it before its next pass (`stopReason: 'aborted'`; passes already
    /// written stay).
    #[napi(ts_return_type = "Promise<SweepResult>")]
    pub fn compact<'env>(
        &self,
        env: &'env Env,
        #[napi(ts_arg_type = "number")] conversation_id: JsonArg,
        #[napi(ts_arg_type = "Summarize")] summarize: Unknown<'_>,
        #[napi(ts_arg_type = "CompactOptions")] options: Unknown<'_>,
    ) -> napi::Result<PromiseRaw<'env, JsonText>> {
        let summarizer = SummarizerArg::from_js(summarize);
        self.run_controlled(env, Some(options), move |engine, run| async move {
            let id: ConversationId = conversation_id.decode("conversationId")?;
            let options: CompactOptions = run.options.decode("options")?;
            let summarizer = summarizer.into_summarizer(options.model.clone())?;
            engine.compact(id.0, summarizer, options.sweep(Some(run.cancel))).await
        })
    }

    /// Re-summarises existing summaries with the current (or `promptDir`'s) prompts, bottom-up
    /// and chronologically within a depth. A dry run unless `apply: true`: the report has the
    /// old and new text of each summary and a unified diff. `signal` cancels between two
    /// summaries (rejects with E_ABORTED; what was applied stays); `onProgress` is called
    /// before each summary.
    #[napi(ts_return_type = "Promise<RewriteResult>")]
    pub fn rewrite<'env>(
        &self,
        env: &'env Env,
        #[napi(ts_arg_type = "number")] conversation_id: JsonArg,
        #[napi(ts_arg_type = "Summarize")] summarize: Unknown<'_>,
        #[napi(ts_arg_type = "RewriteOptions")] options: Option<Unknown<'_>>,
    ) -> napi::Result<PromiseRaw<'env, JsonText>> {
        let summarizer = SummarizerArg::from_js(summarize);
        self.run_controlled(env, options, move |engine, run| async move {
            let id: ConversationId = conversation_id.decode("conversationId")?;
            let request: RewriteRequest = decode_or_default(Some(run.options), "options")?;
            let options = rewrite::RewriteOptions::try_from(request).map_err(LcmError::invalid_input)?;
            let summarizer = summarizer.into_summarizer(options.model.clone())?;
            let report = |p: Progress| report_progress(&run.progress, &p);
            engine.rewrite(id.0, summarizer, &options, &run.cancel, &report).await
        })
    }

    /// Redacts text everywhere it is stored: `pattern` (a Rust regular expression) in the
    /// messages of `conversationId` (or of `messageIds`, or of every conversation), or the
    /// whole text of `messageIds`; their parts and full-text rows; every summary whose subtree
    /// covers a redacted message, regenerated bottom-up with `summarize` (`'offline'` by
    /// default), or with `markOnly` replaced by a notice and left marked; their old versions
    /// purged; then the file is rebuilt (`VACUUM`) and its write-ahead log truncated, so the text
    /// cannot be read back from its bytes. The log records ids and counts, never the text.
    /// `signal` stops between two regenerated summaries (the rest stay marked; the next
    /// `redact` finishes them); `onProgress` is called before each. With no `pattern` and no
    /// `messageIds` it finishes earlier redactions: summaries awaiting regeneration and a scrub
    /// a kill or a full disk cut short (the file records it; `migration.scrubsPending`). A scrub
    /// that fails does not reject: the text is replaced, and `scrubPending` / `scrubError` say
    /// so. E_INVALID_INPUT for an invalid pattern or one that matches nothing (with no scrub
    /// pending); E_NOT_FOUND for unknown ids.
    #[napi(ts_return_type = "Promise<RedactionResult>")]
    pub fn redact<'env>(
        &self,
        env: &'env Env,
        #[napi(ts_arg_type = "RedactOptions")] options: Unknown<'_>,
        #[napi(ts_arg_type = "Summarize")] summarize: Option<Unknown<'_>>,
    ) -> napi::Result<PromiseRaw<'env, JsonText>> {
        let summarizer = summarize.map(SummarizerArg::from_js);
        self.run_controlled(env, Some(options), move |engine, run| async move {
            let options: RedactOptions = run.options.decode("options")?;
            let summarizer: Arc<dyn crate::summarizer::Summarizer> = match summarizer {
                Some(s) => s.into_summarizer(None)?,
                None => Arc::new(crate::offline::OfflineSummarizer),
            };
            let report = |p: Progress| report_progress(&run.progress, &p);
            engine.redact(&options, summarizer, &run.cancel, &report).await
        })
    }

    /// The first prompt a rewrite of `summaryId` would send, rendered with the engine's
    /// templates (or `promptDir`'s), with the template it came from and token estimates.
    /// Calls no summarizer and writes nothing.
    #[napi(ts_return_type = "Promise<RewritePreview>")]
    pub fn rewrite_preview<'env>(
        &self,
        env: &'env Env,
        #[napi(ts_arg_type = "number")] conversation_id: JsonArg,
        #[napi(ts_arg_type = "string")] summary_id: JsonArg,
        #[napi(ts_arg_type = "RewritePreviewOptions")] options: Option<JsonArg>,
    ) -> napi::Result<PromiseRaw<'env, JsonText>> {
        self.run(env, move |engine| {
            let id: ConversationId = conversation_id.decode("conversationId")?;
            let summary_id: String = summary_id.decode::<NonEmpty>("summaryId")?.0;
            let options: PreviewOptions = decode_or_default(options, "options")?;
            engine.rewrite_preview(id.0, &summary_id, &options.rewrite_of(&summary_id))
        })
    }

    /// Every summary of a conversation with its links, for drawing the DAG: inputs (in order),
    /// the node that consumed it, whether it is live, and the messages it stands for. Deepest
    /// first, then oldest first.
    #[napi(ts_return_type = "Promise<DagNode[]>")]
    pub fn dag<'env>(
        &self,
        env: &'env Env,
        #[napi(ts_arg_type = "number")] conversation_id: JsonArg,
    ) -> napi::Result<PromiseRaw<'env, JsonText>> {
        self.run(env, move |engine| {
            engine.dag(conversation_id.decode::<ConversationId>("conversationId")?.0)
        })
    }

    /// Every version of a summary's text, oldest first, the current one marked (`current`).
    /// A summary from before versions were kept shows its text as version 1 (`stored: false`).
    #[napi(ts_return_type = "Promise<SummaryVersion[]>")]
    pub fn history<'env>(
        &self,
        env: &'env Env,
        #[napi(ts_arg_type = "string")] summary_id: JsonArg,
    ) -> napi::Result<PromiseRaw<'env, JsonText>> {
        self.run(env, move |engine| {
            engine.history(&summary_id.decode::<NonEmpty>("summaryId")?.0)
        })
    }

    /// Makes version `version` of a summary its text again, as a new version (reason
    /// `rollback`); its full-text rows and fidelity score follow. E_NOT_FOUND for an unknown
    /// summary or a version not kept.
    #[napi(ts_return_type = "Promise<SummaryVersion>")]
    pub fn rollback<'env>(
        &self,
        env: &'env Env,
        #[napi(ts_arg_type = "string")] summary_id: JsonArg,
        #[napi(ts_arg_type = "number")] version: JsonArg,
    ) -> napi::Result<PromiseRaw<'env, JsonText>> {
        self.run_async(env, move |engine| async move {
            let id = summary_id.decode::<NonEmpty>("summaryId")?.0;
            let version = version.decode::<Positive>("version")?.0;
            engine.rollback(&id, version).await
        })
    }

    /// OpenClaw's `/new` or `/reset` for a session, as lossless-claw 1.x handles them:
    /// `reason: 'new'` takes the raw messages and the summaries shallower than `retainDepth`
    /// (default 2) out of the context, deleting nothing; `reason: 'reset'` archives the
    /// conversation and starts an empty one for the session; `reason: 'deleted'` (the host
    /// deleted the session) archives it with none after it. `action: 'none'` when the session
    /// has no conversation, or nothing to take out. E_INVALID_INPUT for another reason.
    #[napi(ts_return_type = "Promise<SessionReset>")]
    pub fn reset_session<'env>(
        &self,
        env: &'env Env,
        #[napi(ts_arg_type = "ConversationTarget")] target: JsonArg,
        #[napi(ts_arg_type = "ResetOptions")] options: JsonArg,
    ) -> napi::Result<PromiseRaw<'env, JsonText>> {
        self.run_async(env, move |engine| async move {
            let target: Target = target.decode("target")?;
            let options: ResetRequest = options.decode("options")?;
            engine.reset_session(&target, options.reason()).await
        })
    }

    /// The context for the next turn within `tokenBudget`: the fresh tail always, older items
    /// evicted oldest first, summaries presented as `<summary …>` XML (or one markdown
    /// section), raw messages rebuilt in the host's shapes, tool calls and results paired.
    #[napi(ts_return_type = "Promise<AssembleResult>")]
    pub fn assemble<'env>(
        &self,
        env: &'env Env,
        #[napi(ts_arg_type = "number")] conversation_id: JsonArg,
        #[napi(ts_arg_type = "AssembleOptions")] options: JsonArg,
    ) -> napi::Result<PromiseRaw<'env, JsonText>> {
        let engine = self.inner.clone();
        blocking(env, move || {
            let id: ConversationId = conversation_id.decode("conversationId")?;
            let options: AssembleOptions = options.decode("options")?;
            let assembled = engine.assemble(id.0, &options)?;
            to_json_sized(&assembled, assembled.json_size_hint())
        })
    }

    /// The live context items (what the model sees, before assembly) in order.
    #[napi(ts_return_type = "Promise<ContextEntry[]>")]
    pub fn context<'env>(
        &self,
        env: &'env Env,
        #[napi(ts_arg_type = "number")] conversation_id: JsonArg,
    ) -> napi::Result<PromiseRaw<'env, JsonText>> {
        self.run(env, move |engine| {
            engine.context(conversation_id.decode::<ConversationId>("conversationId")?.0)
        })
    }

    /// The threshold decision, the leaf trigger and the rolling-summary trigger.
    #[napi(ts_return_type = "Promise<Evaluation>")]
    pub fn evaluate<'env>(
        &self,
        env: &'env Env,
        #[napi(ts_arg_type = "number")] conversation_id: JsonArg,
        #[napi(ts_arg_type = "EvaluateOptions")] options: JsonArg,
    ) -> napi::Result<PromiseRaw<'env, JsonText>> {
        self.run(env, move |engine| {
            let id: ConversationId = conversation_id.decode("conversationId")?;
            let options: EvaluateOptions = options.decode("options")?;
            engine.evaluate(id.0, options.token_budget, options.observed_tokens)
        })
    }

    /// Finds messages and summaries by full text (default), regular expression or substring,
    /// in one conversation or, with `null`, in all of them. Each hit says whether it is live
    /// and which live summary covers it.
    #[napi(ts_return_type = "Promise<GrepResult>")]
    pub fn grep<'env>(
        &self,
        env: &'env Env,
        #[napi(ts_arg_type = "number | null")] conversation_id: JsonArg,
        #[napi(ts_arg_type = "GrepOptions")] options: JsonArg,
    ) -> napi::Result<PromiseRaw<'env, JsonText>> {
        self.run(env, move |engine| {
            let id: Option<ConversationId> = decode_or_default(Some(conversation_id), "conversationId")?;
            let options: GrepOptions = options.decode("options")?;
            engine.grep(id.map(|id| id.0), &options)
        })
    }

    /// One summary (`"sum_…"`) or message (its id): its facts, and the summaries above it up
    /// to the live one; with `maxChars`, a message's longer texts cut as `messages` cuts them.
    #[napi(ts_return_type = "Promise<Description>")]
    pub fn describe<'env>(
        &self,
        env: &'env Env,
        #[napi(ts_arg_type = "string | number")] id: JsonArg,
        #[napi(ts_arg_type = "DescribeOptions")] options: Option<JsonArg>,
    ) -> napi::Result<PromiseRaw<'env, JsonText>> {
        self.run(env, move |engine| {
            let id = recall::ItemId::from_json(&id.decode::<Value>("id")?)?;
            let options: DescribeOptions = decode_or_default(options, "options")?;
            engine.describe_with(&id, options)
        })
    }

    /// What a summary stands for: its inputs, breadth first, down to the messages, until
    /// `tokenBudget` (default 4000) is spent.
    #[napi(ts_return_type = "Promise<Expansion>")]
    pub fn expand<'env>(
        &self,
        env: &'env Env,
        #[napi(ts_arg_type = "string")] summary_id: JsonArg,
        #[napi(ts_arg_type = "ExpandOptions")] options: Option<JsonArg>,
    ) -> napi::Result<PromiseRaw<'env, JsonText>> {
        self.run(env, move |engine| {
            let id = summary_id.decode::<NonEmpty>("summaryId")?.0;
            let options: ExpandOptions = decode_or_default(options, "options")?;
            engine.expand(&id, &options)
        })
    }

    /// Checks the invariants (coverage, contiguous ordinals, DAG facts, SQLite integrity) of one
    /// conversation, or of all, and returns a digest of the stored contents.
    #[napi(ts_return_type = "Promise<VerifyReport>")]
    pub fn verify<'env>(
        &self,
        env: &'env Env,
        #[napi(ts_arg_type = "number")] conversation_id: Option<JsonArg>,
    ) -> napi::Result<PromiseRaw<'env, JsonText>> {
        self.run(env, move |engine| {
            let id: Option<ConversationId> = decode_or_default(conversation_id, "conversationId")?;
            engine.verify(id.map(|id| id.0))
        })
    }

    /// Folds the turns lossless-claw 1.0 stored twice (`VerifyReport.copies`) into the rows they
    /// copy: each copy's host entry id and anchor trust move to its original, its live context
    /// row or summary link goes, and its row is deleted. A dry run (reads only) unless
    /// `apply`; with `backup`, the database is copied there first. What the model is sent does
    /// not change (assembly already sends each turn once). E_NOT_FOUND for an unknown
    /// `conversationId`; E_READ_ONLY to apply on a read-only engine.
    #[napi(ts_return_type = "Promise<FoldReport>")]
    pub fn fold_copies<'env>(
        &self,
        env: &'env Env,
        #[napi(ts_arg_type = "FoldOptions")] options: Option<JsonArg>,
    ) -> napi::Result<PromiseRaw<'env, JsonText>> {
        self.run_async(env, move |engine| async move {
            let options: crate::api::FoldOptions = decode_or_default(options, "options")?;
            engine.fold_copies(&options).await
        })
    }

    /// Writes a consistent copy of the database to `path` (a new file; SQLite's `VACUUM INTO`),
    /// with every turn committed so far, while the engine and other processes keep writing.
    /// Resolves to the copy's size in bytes.
    #[napi(ts_return_type = "Promise<number>")]
    pub fn backup<'env>(
        &self,
        env: &'env Env,
        #[napi(ts_arg_type = "string")] path: JsonArg,
    ) -> napi::Result<PromiseRaw<'env, JsonText>> {
        self.run(env, move |engine| engine.backup(&path.decode::<NonEmpty>("path")?.0))
    }

    /// Closes the database now, on the calling thread (for a process `exit` handler, where
    /// nothing asynchronous runs any more): the log is checkpointed into the file. Later calls
    /// reject with E_CLOSED; closing twice is harmless.
    #[napi]
    pub fn close_sync(&self) {
        self.inner.close();
    }

    /// Closes the database. Later calls reject with E_CLOSED; closing twice is harmless.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn close<'env>(&self, env: &'env Env) -> napi::Result<PromiseRaw<'env, ()>> {
        let engine = self.inner.clone();
        blocking(env, move || {
            engine.close();
            Ok(())
        })
    }
}
