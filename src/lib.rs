//! lcm-native: Lossless Context Management for AI agents, as a Node.js addon.
//!
//! The core modules below know nothing of Node. This file is the only one that uses napi: it
//! converts JS values in, runs the core off Node's main thread (tokio's blocking pool), and
//! turns core errors into JS errors with a stable `code`.

pub mod config;
pub mod db;
pub mod engine;
pub mod error;
pub mod prompts;
pub mod store;
pub mod time;
pub mod tokens;

use std::sync::Arc;

use napi::bindgen_prelude::*;
use napi_derive::napi;
use serde_json::Value;

use crate::config::Config;
use crate::engine::Engine;
use crate::error::LcmError;
use crate::store::conversations::Target;

/// A JS `Error` with `code` set to the core error's stable code.
fn js_error(env: &Env, err: LcmError) -> napi::Error {
    let js = JsError::from(napi::Error::new(err.code(), err.to_string())).into_unknown(*env);
    napi::Error::from(js)
}

/// Calls `JSON.<name>` with one argument on Node's thread.
fn call_json(env: &Env, name: &str, arg: Unknown<'_>) -> napi::Result<napi::sys::napi_value> {
    let json: Object = env.get_global()?.get_named_property("JSON")?;
    let f: Function<Unknown, Unknown> = json.get_named_property(name)?;
    Ok(f.call(arg)?.raw())
}

/// A JS argument carried to the worker as JSON text. V8's `JSON.stringify` on Node's thread is
/// much cheaper than converting an object graph property by property through napi, and the
/// text is parsed off-thread. A value JSON cannot represent (a cycle, a BigInt) becomes
/// E_INVALID_INPUT when the call runs, so it rejects the promise rather than throwing.
pub enum JsonArg {
    Text(String),
    Absent,
    Invalid(String),
}

impl FromNapiValue for JsonArg {
    unsafe fn from_napi_value(raw_env: napi::sys::napi_env, value: napi::sys::napi_value) -> napi::Result<Self> {
        let env = Env::from_raw(raw_env);
        // SAFETY: `value` is the live argument napi handed us for this call.
        let arg = unsafe { Unknown::from_raw_unchecked(raw_env, value) };
        if matches!(arg.get_type()?, ValueType::Undefined | ValueType::Null) {
            return Ok(JsonArg::Absent);
        }
        match call_json(&env, "stringify", arg) {
            Err(e) => Ok(JsonArg::Invalid(e.reason)),
            Ok(out) => {
                // SAFETY: `out` was just returned by JSON.stringify in this scope.
                let out = unsafe { Unknown::from_raw_unchecked(raw_env, out) };
                match out.get_type()? {
                    // SAFETY: checked to be a string.
                    ValueType::String => Ok(JsonArg::Text(unsafe { String::from_napi_value(raw_env, out.raw())? })),
                    _ => Ok(JsonArg::Absent),
                }
            }
        }
    }
}

impl TypeName for JsonArg {
    fn type_name() -> &'static str {
        "unknown"
    }
    fn value_type() -> ValueType {
        ValueType::Unknown
    }
}

impl ValidateNapiValue for JsonArg {}

impl JsonArg {
    /// The parsed value; `None` when the argument was undefined or null. `what` names the
    /// argument in errors.
    fn parse(self, what: &str) -> error::Result<Option<Value>> {
        match self {
            JsonArg::Absent => Ok(None),
            JsonArg::Invalid(why) => Err(LcmError::invalid_input(format!("{what} cannot be read as JSON: {why}"))),
            JsonArg::Text(t) => serde_json::from_str(&t)
                .map(Some)
                .map_err(|e| LcmError::invalid_input(format!("{what} cannot be read as JSON: {e}"))),
        }
    }
}

/// A result handed to JS as JSON text and turned into objects by V8's `JSON.parse` (the
/// serialisation already happened on the worker).
pub struct JsonText(String);

impl ToNapiValue for JsonText {
    unsafe fn to_napi_value(raw_env: napi::sys::napi_env, val: Self) -> napi::Result<napi::sys::napi_value> {
        let env = Env::from_raw(raw_env);
        let text = env.create_string(&val.0)?;
        // SAFETY: `text` is a live JS string created just above.
        call_json(&env, "parse", unsafe {
            Unknown::from_raw_unchecked(raw_env, text.raw())
        })
    }
}

impl TypeName for JsonText {
    fn type_name() -> &'static str {
        "Object"
    }
    fn value_type() -> ValueType {
        ValueType::Object
    }
}

/// Blocking core work (SQLite) run on libuv's thread pool: one hop out and one back, the
/// cheapest way off Node's thread for short calls. A core error is kept aside and turned
/// into a coded JS error on the JS thread.
pub struct CoreTask<T> {
    work: Option<Box<dyn FnOnce() -> error::Result<T> + Send>>,
    failure: Option<LcmError>,
}

impl<T> CoreTask<T> {
    fn new(work: impl FnOnce() -> error::Result<T> + Send + 'static) -> AsyncTask<CoreTask<T>>
    where
        CoreTask<T>: Task,
    {
        AsyncTask::new(CoreTask {
            work: Some(Box::new(work)),
            failure: None,
        })
    }
}

impl<T: ToNapiValue + TypeName + Send + 'static> Task for CoreTask<T> {
    type Output = T;
    type JsValue = T;

    fn compute(&mut self) -> napi::Result<T> {
        let work = self.work.take().expect("a task runs once");
        work().map_err(|e| {
            let reason = e.to_string();
            self.failure = Some(e);
            napi::Error::from_reason(reason)
        })
    }

    fn resolve(&mut self, _env: Env, output: T) -> napi::Result<T> {
        Ok(output)
    }

    fn reject(&mut self, env: Env, err: napi::Error) -> napi::Result<T> {
        let e = self
            .failure
            .take()
            .unwrap_or_else(|| LcmError::Internal(err.reason.clone()));
        Err(js_error(&env, e))
    }
}

fn to_json<T: serde::Serialize>(v: &T) -> error::Result<JsonText> {
    Ok(JsonText(serde_json::to_string(v)?))
}

fn parse_target(v: &Value) -> error::Result<Target> {
    let bad = || LcmError::invalid_input("target must be { sessionId: string } or { conversationId: number }");
    let obj = v.as_object().ok_or_else(bad)?;
    match (obj.get("sessionId"), obj.get("conversationId")) {
        (Some(Value::String(s)), None) if !s.is_empty() => Ok(Target::Session(s.clone())),
        (None, Some(id)) => Ok(Target::Conversation(parse_id(id)?)),
        _ => Err(bad()),
    }
}

fn parse_id(v: &Value) -> error::Result<i64> {
    v.as_i64()
        .filter(|id| *id > 0)
        .ok_or_else(|| LcmError::invalid_input(format!("conversationId must be a positive integer, got {v}")))
}

/// A required argument.
fn required(arg: JsonArg, what: &str) -> error::Result<Value> {
    arg.parse(what)?
        .ok_or_else(|| LcmError::invalid_input(format!("{what} is required")))
}

/// An optional options object.
fn optional(arg: Option<JsonArg>, what: &str) -> error::Result<Option<Value>> {
    match arg {
        Some(a) => a.parse(what),
        None => Ok(None),
    }
}

fn opt_int(options: &Option<Value>, key: &str, default: i64, min: i64) -> error::Result<i64> {
    match options.as_ref().and_then(|o| o.get(key)) {
        None | Some(Value::Null) => Ok(default),
        Some(v) => v
            .as_i64()
            .filter(|n| *n >= min)
            .ok_or_else(|| LcmError::invalid_input(format!("`{key}` must be an integer ≥ {min}, got {v}"))),
    }
}

/// Creates the lcm-native schema in `dbPath`, or upgrades a lossless-claw database in place
/// (one transaction). A second run does nothing and says so (`upToDate`).
#[napi(ts_return_type = "Promise<MigrationReport>")]
pub fn migrate(
    #[napi(ts_arg_type = "string")] db_path: JsonArg,
    #[napi(ts_arg_type = "{ busyTimeoutMs?: number }")] options: Option<JsonArg>,
) -> AsyncTask<CoreTask<JsonText>> {
    CoreTask::new(move || {
        let db_path = db_path.parse("dbPath")?;
        let path = db_path
            .as_ref()
            .and_then(Value::as_str)
            .ok_or_else(|| LcmError::invalid_config("dbPath", "expected a string"))?;
        let options = optional(options, "options")?;
        let busy = opt_int(&options, "busyTimeoutMs", 30_000, 0)?;
        to_json(&engine::migrate_file(path, busy)?)
    })
}

/// Reads lossless-claw's environment variables (`LCM_DATABASE_PATH`, `LCM_FRESH_TAIL_COUNT`,
/// …, `LCM_TIMEZONE`, then `TZ`) into options for `LcmEngine.open`. Only variables that are
/// set appear. A malformed value throws E_INVALID_CONFIG naming the variable.
#[napi(ts_return_type = "Partial<LcmConfig>")]
pub fn config_from_env(env: Env) -> napi::Result<Value> {
    config::config_from_env(|k| std::env::var(k).ok())
        .map(Value::Object)
        .map_err(|e| js_error(&env, e))
}

/// The token estimate lcm-native stores and budgets with (CJK 1.5, astral 2, other 0.25 per
/// code point, rounded up).
#[napi]
pub fn estimate_tokens(text: String) -> i64 {
    tokens::estimate(&text)
}

/// One lcm database. Create it with `LcmEngine.open`; every method returns a Promise and does
/// its work off Node's main thread.
#[napi]
pub struct LcmEngine {
    inner: Arc<Engine>,
}

#[napi]
impl LcmEngine {
    /// Opens (and creates or migrates) the database at `options.dbPath`. Invalid options
    /// reject with E_INVALID_CONFIG naming the option.
    #[napi(ts_return_type = "Promise<LcmEngine>")]
    pub fn open(#[napi(ts_arg_type = "LcmConfig")] options: JsonArg) -> AsyncTask<CoreTask<LcmEngine>> {
        CoreTask::new(move || {
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

    /// Stores messages in one transaction and appends them to the live context. Every message
    /// is validated first; a malformed one rejects with E_INVALID_INPUT naming its index, and
    /// nothing of the call is written. Messages whose `entryId` is already stored are skipped.
    #[napi(ts_return_type = "Promise<IngestResult>")]
    pub fn ingest(
        &self,
        #[napi(ts_arg_type = "ConversationTarget")] target: JsonArg,
        #[napi(ts_arg_type = "IngestMessage[]")] messages: JsonArg,
    ) -> AsyncTask<CoreTask<JsonText>> {
        let engine = self.inner.clone();
        CoreTask::new(move || {
            let target = parse_target(&required(target, "target")?)?;
            let Value::Array(messages) = required(messages, "messages")? else {
                return Err(LcmError::invalid_input("messages must be an array"));
            };
            to_json(&engine.ingest(&target, &messages)?)
        })
    }

    /// Stored messages of a conversation in order, content blocks rebuilt exactly as ingested.
    #[napi(ts_return_type = "Promise<StoredMessage[]>")]
    pub fn messages(
        &self,
        #[napi(ts_arg_type = "number")] conversation_id: JsonArg,
        #[napi(ts_arg_type = "{ afterSeq?: number; limit?: number }")] options: Option<JsonArg>,
    ) -> AsyncTask<CoreTask<JsonText>> {
        let engine = self.inner.clone();
        CoreTask::new(move || {
            let id = parse_id(&required(conversation_id, "conversationId")?)?;
            let options = optional(options, "options")?;
            let after = opt_int(&options, "afterSeq", 0, 0)?;
            let limit = opt_int(&options, "limit", 1000, 1)?;
            to_json(&engine.messages(id, after, limit)?)
        })
    }

    /// Every conversation, oldest first, with its message, summary and context-item counts.
    #[napi(ts_return_type = "Promise<ConversationInfo[]>")]
    pub fn conversations(&self) -> AsyncTask<CoreTask<JsonText>> {
        let engine = self.inner.clone();
        CoreTask::new(move || to_json(&engine.conversations()?))
    }

    /// Summaries of a conversation in creation order (leaves and condensed nodes), optionally
    /// of one depth only.
    #[napi(ts_return_type = "Promise<SummaryRecord[]>")]
    pub fn summaries(
        &self,
        #[napi(ts_arg_type = "number")] conversation_id: JsonArg,
        #[napi(ts_arg_type = "{ depth?: number }")] options: Option<JsonArg>,
    ) -> AsyncTask<CoreTask<JsonText>> {
        let engine = self.inner.clone();
        CoreTask::new(move || {
            let id = parse_id(&required(conversation_id, "conversationId")?)?;
            let options = optional(options, "options")?;
            let depth = match options.as_ref().and_then(|o| o.get("depth")) {
                None | Some(Value::Null) => None,
                Some(_) => Some(opt_int(&options, "depth", 0, 0)?),
            };
            to_json(&engine.summaries(id, depth)?)
        })
    }

    /// Closes the database. Later calls reject with E_CLOSED; closing twice is harmless.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn close(&self) -> AsyncTask<CoreTask<()>> {
        let engine = self.inner.clone();
        CoreTask::new(move || {
            engine.close();
            Ok(())
        })
    }
}
