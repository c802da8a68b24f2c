//! `LcmEngine`, the exported class: each method translates its arguments and runs the core
//! engine's operation off Node's thread.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use napi::bindgen_prelude::*;
use napi_derive::napi;
use serde_json::Value;

use super::args::{
    ingest_options, maybe_int, opt_bool, opt_int, optional, parse_id, parse_target, pass_options, required,
    required_string, sweep_target, token_budget,
};
use super::bridge::{blocking, spawn_coded, spawn_coded_then, to_json, to_json_sized, JsonArg, JsonText};
use super::signals::{report_progress, watch_abort, AbortWatch, RunControls};
use super::summarize::SummarizerArg;
use crate::compaction::SweepOptions;
use crate::config::{self, Config};
use crate::engine::Engine;
use crate::error::LcmError;
use crate::redact::RedactOptions;
use crate::store::messages::IngestOutcome;
use crate::summarizer::SummaryKind;
use crate::{assemble, recall, rewrite};

/// What `ingest` did.
#[derive(serde::Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub(crate) struct IngestResult {
    #[serde(flatten)]
    outcome: IngestOutcome,
    /// Lone UTF-16 surrogates (half an emoji) stored as U+FFFD. Counted by the binding, which
    /// repairs them while it reads the messages.
    replaced_surrogates: usize,
}

/// One lcm database. Create it with `LcmEngine.open`; every method returns a Promise and does
/// its work off Node's main thread.
#[napi]
pub struct LcmEngine {
    inner: Arc<Engine>,
}

impl LcmEngine {
    /// `leafPass` and `condensedPass`: one pass of `kind`.
    fn pass<'env>(
        &self,
        env: &'env Env,
        kind: SummaryKind,
        conversation_id: JsonArg,
        summarize: Unknown<'_>,
        options: Option<JsonArg>,
    ) -> napi::Result<PromiseRaw<'env, JsonText>> {
        let engine = self.inner.clone();
        let summarizer = SummarizerArg::from_js(summarize);
        spawn_coded(env, async move {
            let id = parse_id(&required(conversation_id, "conversationId")?)?;
            let opts = pass_options(&optional(options, "options")?)?;
            let summarizer = summarizer.into_summarizer(opts.model.clone())?;
            to_json(&engine.pass(id, kind, summarizer, opts).await?)
        })
    }
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
            let options = options.parse("options")?.unwrap_or(Value::Null);
            let config = Config::from_options(&options, std::env::var("TZ").ok().as_deref())?;
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
        let engine = self.inner.clone();
        blocking(env, move || {
            let target = parse_target(&required(target, "target")?)?;
            let (messages, replaced) = messages.parse_repairing("messages")?;
            let Some(Value::Array(messages)) = messages else {
                return Err(LcmError::invalid_input("messages must be an array"));
            };
            let options = ingest_options(&optional(options, "options")?)?;
            let outcome = engine.ingest_with(&target, &messages, options)?;
            to_json(&IngestResult {
                outcome,
                replaced_surrogates: replaced,
            })
        })
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
        let engine = self.inner.clone();
        blocking(env, move || {
            let target = parse_target(&required(target, "target")?)?;
            to_json(&engine.find_conversation(&target)?)
        })
    }

    /// Stored messages of a conversation in order, content blocks rebuilt exactly as ingested.
    #[napi(ts_return_type = "Promise<StoredMessage[]>")]
    pub fn messages<'env>(
        &self,
        env: &'env Env,
        #[napi(ts_arg_type = "number")] conversation_id: JsonArg,
        #[napi(ts_arg_type = "{ afterSeq?: number; limit?: number }")] options: Option<JsonArg>,
    ) -> napi::Result<PromiseRaw<'env, JsonText>> {
        let engine = self.inner.clone();
        blocking(env, move || {
            let id = parse_id(&required(conversation_id, "conversationId")?)?;
            let options = optional(options, "options")?;
            let after = opt_int(&options, "afterSeq", 0, 0)?;
            let limit = opt_int(&options, "limit", 1000, 1)?;
            to_json(&engine.messages(id, after, limit)?)
        })
    }

    /// Every conversation, oldest first, with its message, summary and context-item counts.
    #[napi(ts_return_type = "Promise<ConversationInfo[]>")]
    pub fn conversations<'env>(&self, env: &'env Env) -> napi::Result<PromiseRaw<'env, JsonText>> {
        let engine = self.inner.clone();
        blocking(env, move || to_json(&engine.conversations()?))
    }

    /// Summaries of a conversation in creation order (leaves and condensed nodes), optionally
    /// of one depth only.
    #[napi(ts_return_type = "Promise<SummaryRecord[]>")]
    pub fn summaries<'env>(
        &self,
        env: &'env Env,
        #[napi(ts_arg_type = "number")] conversation_id: JsonArg,
        #[napi(ts_arg_type = "{ depth?: number }")] options: Option<JsonArg>,
    ) -> napi::Result<PromiseRaw<'env, JsonText>> {
        let engine = self.inner.clone();
        blocking(env, move || {
            let id = parse_id(&required(conversation_id, "conversationId")?)?;
            let options = optional(options, "options")?;
            let depth = maybe_int(&options, "depth", 0)?;
            to_json(&engine.summaries(id, depth)?)
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
        let engine = self.inner.clone();
        blocking(env, move || {
            let id = parse_id(&required(conversation_id, "conversationId")?)?;
            to_json(&engine.fidelity(id)?)
        })
    }

    /// Scores the summaries that have no fidelity score yet (written before scores existed,
    /// or by lossless-claw), or every summary with `all: true`, and stores the scores.
    #[napi(ts_return_type = "Promise<ScoreFidelityReport>")]
    pub fn score_fidelity<'env>(
        &self,
        env: &'env Env,
        #[napi(ts_arg_type = "number")] conversation_id: JsonArg,
        #[napi(ts_arg_type = "{ all?: boolean }")] options: Option<JsonArg>,
    ) -> napi::Result<PromiseRaw<'env, JsonText>> {
        let engine = self.inner.clone();
        blocking(env, move || {
            let id = parse_id(&required(conversation_id, "conversationId")?)?;
            let options = optional(options, "options")?;
            let all = opt_bool(&options, "all")?;
            to_json(&engine.score_fidelity(id, all)?)
        })
    }

    /// Summarises the oldest chunk of raw messages outside the fresh tail into a leaf summary
    /// (then condenses up to `incrementalMaxDepth`). Resolves `null` when there is nothing to
    /// do. A summarizer failure rejects (E_SUMMARIZER, E_TIMEOUT) with nothing written; an
    /// `LCM_AUTH` rejection resolves with `authFailure: true`, also with nothing written.
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
        let engine = self.inner.clone();
        let summarizer = SummarizerArg::from_js(summarize);
        let cancel = Arc::new(AtomicBool::new(false));
        let mut watch: Option<AbortWatch> = None;
        let mut invalid: Option<LcmError> = None;
        if let Ok(ValueType::Object) = options.get_type() {
            // SAFETY: checked to be an object.
            let obj = unsafe { Object::from_napi_value(env.raw(), options.raw())? };
            match watch_abort(env, &obj, cancel.clone()) {
                Ok(w) => watch = w,
                Err(e) => invalid = Some(e),
            }
        }
        // SAFETY: `options` is the live argument of this call.
        let options = unsafe { JsonArg::from_napi_value(env.raw(), options.raw())? };
        let work = async move {
            if let Some(e) = invalid.take() {
                return Err(e);
            }
            let id = parse_id(&required(conversation_id, "conversationId")?)?;
            let options = Some(required(options, "options")?);
            let token_budget = token_budget(&options)?;
            let force = opt_bool(&options, "force")?;
            let pass = pass_options(&options)?;
            let summarizer = summarizer.into_summarizer(pass.model.clone())?;
            let sweep = SweepOptions {
                token_budget,
                force,
                target: sweep_target(&options)?,
                pass,
                cancel: Some(cancel),
            };
            to_json(&engine.compact(id, summarizer, sweep).await?)
        };
        spawn_coded_then(env, work, move |env| {
            if let Some(w) = watch {
                w.release(env);
            }
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
        let engine = self.inner.clone();
        let summarizer = SummarizerArg::from_js(summarize);
        let RunControls {
            options,
            cancel,
            progress,
            watch,
            invalid,
        } = RunControls::read(env, options)?;
        let work = async move {
            if let Some(e) = invalid {
                return Err(e);
            }
            let id = parse_id(&required(conversation_id, "conversationId")?)?;
            let opts = rewrite::RewriteOptions::from_json(options.parse("options")?.as_ref())?;
            let summarizer = summarizer.into_summarizer(opts.model.clone())?;
            let report = |p: rewrite::Progress| report_progress(&progress, &p);
            to_json(&engine.rewrite(id, summarizer, &opts, &cancel, &report).await?)
        };
        spawn_coded_then(env, work, move |env| {
            if let Some(w) = watch {
                w.release(env);
            }
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
        let engine = self.inner.clone();
        let summarizer = summarize.map(SummarizerArg::from_js);
        let RunControls {
            options,
            cancel,
            progress,
            watch,
            invalid,
        } = RunControls::read(env, Some(options))?;
        let work = async move {
            if let Some(e) = invalid {
                return Err(e);
            }
            let opts = RedactOptions::from_json(&required(options, "options")?)?;
            let summarizer: Arc<dyn crate::summarizer::Summarizer> = match summarizer {
                Some(s) => s.into_summarizer(None)?,
                None => Arc::new(crate::offline::OfflineSummarizer),
            };
            let report = |p: rewrite::Progress| report_progress(&progress, &p);
            to_json(&engine.redact(&opts, summarizer, &cancel, &report).await?)
        };
        spawn_coded_then(env, work, move |env| {
            if let Some(w) = watch {
                w.release(env);
            }
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
        #[napi(ts_arg_type = "{ promptDir?: string; timestamps?: boolean }")] options: Option<JsonArg>,
    ) -> napi::Result<PromiseRaw<'env, JsonText>> {
        let engine = self.inner.clone();
        blocking(env, move || {
            let id = parse_id(&required(conversation_id, "conversationId")?)?;
            let summary_id = required_string(summary_id, "summaryId")?;
            let mut given = match optional(options, "options")? {
                Some(Value::Object(o)) => o,
                None => serde_json::Map::new(),
                Some(other) => {
                    return Err(LcmError::invalid_input(format!(
                        "options must be an object, got {other}"
                    )))
                }
            };
            if let Some(key) = given
                .keys()
                .find(|k| !["promptDir", "timestamps"].contains(&k.as_str()))
            {
                return Err(LcmError::invalid_input(format!(
                    "unknown rewritePreview option `{key}`"
                )));
            }
            given.insert("summaryId".into(), summary_id.clone().into());
            let opts = rewrite::RewriteOptions::from_json(Some(&Value::Object(given)))?;
            to_json(&engine.rewrite_preview(id, &summary_id, &opts)?)
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
        let engine = self.inner.clone();
        blocking(env, move || {
            let id = parse_id(&required(conversation_id, "conversationId")?)?;
            to_json(&engine.dag(id)?)
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
        let engine = self.inner.clone();
        blocking(env, move || {
            let id = required_string(summary_id, "summaryId")?;
            to_json(&engine.history(&id)?)
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
        let engine = self.inner.clone();
        spawn_coded(env, async move {
            let id = required_string(summary_id, "summaryId")?;
            let version = required(version, "version")?
                .as_i64()
                .filter(|v| *v > 0)
                .ok_or_else(|| LcmError::invalid_input("`version` must be a positive integer"))?;
            to_json(&engine.rollback(&id, version).await?)
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
        #[napi(ts_arg_type = "{ reason: 'new' | 'reset' | 'deleted'; retainDepth?: number }")] options: JsonArg,
    ) -> napi::Result<PromiseRaw<'env, JsonText>> {
        use crate::store::lifecycle::{ResetReason, DEFAULT_RETAIN_DEPTH};
        let engine = self.inner.clone();
        spawn_coded(env, async move {
            let target = parse_target(&required(target, "target")?)?;
            let options = Some(required(options, "options")?);
            let retain_depth = maybe_int(&options, "retainDepth", 0)?.unwrap_or(DEFAULT_RETAIN_DEPTH);
            let reason = match options.as_ref().and_then(|o| o.get("reason")).and_then(|r| r.as_str()) {
                Some("new") => ResetReason::New { retain_depth },
                Some("reset") => ResetReason::Reset,
                Some("deleted") => ResetReason::Deleted,
                _ => return Err(LcmError::invalid_input("`reason` must be 'new', 'reset' or 'deleted'")),
            };
            to_json(&engine.reset_session(&target, reason).await?)
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
            let id = parse_id(&required(conversation_id, "conversationId")?)?;
            let options = Some(required(options, "options")?);
            let token_budget = token_budget(&options)?;
            let fresh_tail_count = maybe_int(&options, "freshTailCount", 0)?;
            let presentation = match options.as_ref().and_then(|o| o.get("presentation")) {
                None | Some(Value::Null) => None,
                Some(Value::String(p)) if p == "xml" => Some(config::Presentation::Xml),
                Some(Value::String(p)) if p == "markdown" => Some(config::Presentation::Markdown),
                Some(v) => {
                    return Err(LcmError::invalid_input(format!(
                        "`presentation` must be \"xml\" or \"markdown\", got {v}"
                    )))
                }
            };
            let opts = assemble::AssembleOptions {
                token_budget,
                fresh_tail_count,
                presentation,
            };
            let assembled = engine.assemble(id, &opts)?;
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
        let engine = self.inner.clone();
        blocking(env, move || {
            let id = parse_id(&required(conversation_id, "conversationId")?)?;
            to_json(&engine.context(id)?)
        })
    }

    /// The threshold decision, the leaf trigger and the rolling-summary trigger.
    #[napi(ts_return_type = "Promise<Evaluation>")]
    pub fn evaluate<'env>(
        &self,
        env: &'env Env,
        #[napi(ts_arg_type = "number")] conversation_id: JsonArg,
        #[napi(ts_arg_type = "{ tokenBudget: number; observedTokens?: number }")] options: JsonArg,
    ) -> napi::Result<PromiseRaw<'env, JsonText>> {
        let engine = self.inner.clone();
        blocking(env, move || {
            let id = parse_id(&required(conversation_id, "conversationId")?)?;
            let options = Some(required(options, "options")?);
            let budget = token_budget(&options)?;
            let observed = maybe_int(&options, "observedTokens", 0)?;
            to_json(&engine.evaluate(id, budget, observed)?)
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
        let engine = self.inner.clone();
        blocking(env, move || {
            let id = match conversation_id.parse("conversationId")? {
                None => None,
                Some(v) => Some(parse_id(&v)?),
            };
            let options = recall::GrepOptions::from_json(&required(options, "options")?)?;
            to_json(&engine.grep(id, &options)?)
        })
    }

    /// One summary (`"sum_…"`) or message (its id): its facts, and the summaries above it up
    /// to the live one.
    #[napi(ts_return_type = "Promise<Description>")]
    pub fn describe<'env>(
        &self,
        env: &'env Env,
        #[napi(ts_arg_type = "string | number")] id: JsonArg,
    ) -> napi::Result<PromiseRaw<'env, JsonText>> {
        let engine = self.inner.clone();
        blocking(env, move || {
            let id = recall::ItemId::from_json(&required(id, "id")?)?;
            to_json(&engine.describe(&id)?)
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
        let engine = self.inner.clone();
        blocking(env, move || {
            let id = match required(summary_id, "summaryId")? {
                Value::String(s) if !s.trim().is_empty() => s,
                other => {
                    return Err(LcmError::invalid_input(format!(
                        "summaryId must be a string, got {other}"
                    )))
                }
            };
            let options = recall::ExpandOptions::from_json(optional(options, "options")?.as_ref())?;
            to_json(&engine.expand(&id, &options)?)
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
        let engine = self.inner.clone();
        blocking(env, move || {
            let id = match optional(conversation_id, "conversationId")? {
                None => None,
                Some(v) => Some(parse_id(&v)?),
            };
            to_json(&engine.verify(id)?)
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
        let engine = self.inner.clone();
        blocking(env, move || {
            let path = required_string(path, "path")?;
            to_json(&engine.backup(&path)?)
        })
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
