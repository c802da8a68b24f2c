//! lcm-native: Lossless Context Management for AI agents, as a Node.js addon.
//!
//! The core modules below know nothing of Node. This file is the only one that uses napi: it
//! converts JS values in, runs the core off Node's main thread (tokio's blocking pool), and
//! turns core errors into JS errors with a stable `code`.

pub mod assemble;
pub mod compaction;
pub mod config;
pub mod db;
pub mod diff;
pub mod engine;
pub mod error;
pub mod fidelity;
pub mod json_text;
pub mod prompts;
pub mod recall;
pub mod rewrite;
pub mod store;
pub mod summarizer;
pub mod time;
pub mod tokens;

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};
use std::sync::{Arc, Mutex};

use napi::bindgen_prelude::*;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi_derive::napi;
use serde_json::Value;

use crate::compaction::{PassOptions, SweepOptions};
use crate::config::Config;
use crate::engine::Engine;
use crate::error::LcmError;
use crate::store::conversations::Target;
use crate::summarizer::{SummarizeRequest, Summarizer, SummarizerFailure, SummaryFuture};

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
        self.parse_repairing(what).map(|(v, _)| v)
    }

    /// `parse`, also saying how many lone UTF-16 surrogates (text JavaScript allows and UTF-8
    /// cannot hold) were replaced with U+FFFD on the way.
    fn parse_repairing(self, what: &str) -> error::Result<(Option<Value>, usize)> {
        match self {
            JsonArg::Absent => Ok((None, 0)),
            JsonArg::Invalid(why) => Err(LcmError::invalid_input(format!("{what} cannot be read as JSON: {why}"))),
            JsonArg::Text(t) => {
                let (text, replaced) = json_text::replace_lone_surrogates(&t);
                serde_json::from_str(&text)
                    .map(|v| (Some(v), replaced))
                    .map_err(|e| LcmError::invalid_input(format!("{what} cannot be read as JSON: {e}")))
            }
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

/// Runs `fut` on napi's tokio runtime (operations that wait on the summarizer) and settles a
/// JS promise with its result, rejecting with a coded error on failure.
fn spawn_coded<'env, F>(env: &'env Env, fut: F) -> napi::Result<PromiseRaw<'env, JsonText>>
where
    F: Future<Output = error::Result<JsonText>> + Send + 'static,
{
    spawn_coded_then(env, fut, |_| {})
}

/// `spawn_coded`, running `after` on Node's thread when the operation has ended, however it
/// ended (to release what the call attached to JS objects).
fn spawn_coded_then<'env, F>(
    env: &'env Env,
    fut: F,
    after: impl FnOnce(&Env) + 'static,
) -> napi::Result<PromiseRaw<'env, JsonText>>
where
    F: Future<Output = error::Result<JsonText>> + Send + 'static,
{
    env.spawn_future_with_callback(async move { Ok(fut.await) }, move |env, res| {
        after(env);
        match res {
            Ok(v) => Ok(v),
            Err(e) => Err(js_error(env, e)),
        }
    })
}

/// The host's summarize callback, called on Node's thread through a threadsafe function.
type SummarizeTsfn =
    ThreadsafeFunction<FnArgs<(String, JsonText)>, Unknown<'static>, FnArgs<(String, JsonText)>, Status, false>;

type Settle = Arc<Mutex<Option<tokio::sync::oneshot::Sender<std::result::Result<String, SummarizerFailure>>>>>;

fn settle(tx: &Settle, result: std::result::Result<String, SummarizerFailure>) {
    if let Some(tx) = tx.lock().unwrap_or_else(|e| e.into_inner()).take() {
        // The receiver is gone when the pass timed out: the late answer is dropped.
        let _ = tx.send(result);
    }
}

/// Clears a JS exception left pending by a failed napi call (a Proxy trap, a throwing getter,
/// `String(symbol)`): left pending, it would surface as an uncaught exception and, with no
/// handler, end the process.
fn clear_pending_exception(env: napi::sys::napi_env) {
    let mut pending = false;
    // SAFETY: plain N-API calls on the live env of the current callback.
    unsafe {
        if napi::sys::napi_is_exception_pending(env, &mut pending) == napi::sys::Status::napi_ok && pending {
            let mut exception = std::ptr::null_mut();
            napi::sys::napi_get_and_clear_last_exception(env, &mut exception);
        }
    }
}

/// A string property of an object, or `None` (missing, not a string, or its getter threw).
fn string_property(obj: &Object<'_>, env: napi::sys::napi_env, key: &str) -> Option<String> {
    let value = match obj.get_named_property::<Unknown>(key) {
        Ok(v) => v,
        Err(_) => {
            clear_pending_exception(env);
            return None;
        }
    };
    match value.get_type() {
        // SAFETY: checked to be a string.
        Ok(ValueType::String) => unsafe { String::from_napi_value(env, value.raw()).ok() },
        _ => None,
    }
}

/// What can be said of any JS value without running code that might throw: its type, and its
/// text for primitives (`5`, `true`) and strings.
fn describe_value(value: Unknown<'_>) -> String {
    let env = value.env();
    let coerced = || -> Option<String> {
        let s = value
            .coerce_to_string()
            .ok()
            .and_then(|s| s.into_utf8().ok()?.into_owned().ok());
        if s.is_none() {
            clear_pending_exception(env);
        }
        s
    };
    match value.get_type() {
        Ok(ValueType::Symbol) => "a Symbol".into(),
        Ok(ValueType::String) => unsafe { String::from_napi_value(env, value.raw()) }
            .map(|s| format!("the string {s:?}"))
            .unwrap_or_else(|_| "a string".into()),
        Ok(t @ (ValueType::Number | ValueType::Boolean | ValueType::BigInt)) => {
            let kind = format!("{t:?}").to_lowercase();
            coerced().map_or(format!("a {kind}"), |s| format!("{kind} {s}"))
        }
        Ok(ValueType::Undefined) => "undefined".into(),
        Ok(ValueType::Null) => "null".into(),
        Ok(ValueType::Function) => "a function".into(),
        Ok(_) => "an object".into(),
        Err(_) => {
            clear_pending_exception(env);
            "a value of unknown type".into()
        }
    }
}

/// Sorts a rejection: `code === 'LCM_AUTH'` or `name === 'LcmProviderAuthError'` is an auth
/// failure (the pass is aborted and reported); anything else fails the pass. Whatever the
/// value (a Symbol, a Proxy whose traps throw, an object whose getters throw), no JS
/// exception is left pending.
fn classify_rejection(value: Unknown<'_>, how: &str) -> SummarizerFailure {
    let env = value.env();
    if let Ok(ValueType::Object) = value.get_type() {
        // SAFETY: checked to be an object.
        if let Ok(obj) = unsafe { Object::from_napi_value(env, value.raw()) } {
            let message = string_property(&obj, env, "message")
                .unwrap_or_else(|| format!("it {how} {} that has no readable message", describe_value(value)));
            if string_property(&obj, env, "code").as_deref() == Some("LCM_AUTH")
                || string_property(&obj, env, "name").as_deref() == Some("LcmProviderAuthError")
            {
                return SummarizerFailure::Auth(message);
            }
            return SummarizerFailure::Failed(message);
        }
        clear_pending_exception(env);
    }
    SummarizerFailure::Failed(format!("it {how} {}", describe_value(value)))
}

/// What the callback returned: a string is taken as is, a promise is awaited; anything else
/// fails the pass. Runs on Node's thread and never throws (a throw here would be fatal).
fn on_returned(ret: napi::Result<Unknown<'static>>, env: Env, tx: Settle) {
    let value = match ret {
        Ok(v) => v,
        Err(e) => {
            // napi-rs turned the thrown value into this error; nothing may stay pending.
            clear_pending_exception(env.raw());
            let reason = e.reason.clone();
            // The thrown value itself, when napi-rs kept it: sorted like a rejection, so a
            // synchronously thrown auth error is an auth failure too.
            // napi-rs keeps a thrown Error object (not a thrown primitive or Symbol).
            let thrown = JsError::from(e).into_unknown(env);
            let failure = classify_rejection(thrown, "threw");
            clear_pending_exception(env.raw());
            let failure = match failure {
                SummarizerFailure::Failed(_) if reason.is_empty() => SummarizerFailure::Failed(
                    "it threw something that is not a readable Error (a Symbol, a number, a Proxy…); \
                     throw an Error or return a rejected promise"
                        .into(),
                ),
                SummarizerFailure::Failed(m) => SummarizerFailure::Failed(format!("it threw: {m}")),
                other => other,
            };
            return settle(&tx, Err(failure));
        }
    };
    match value.get_type() {
        Ok(ValueType::String) => {
            let s = unsafe { String::from_napi_value(env.raw(), value.raw()) };
            settle(&tx, s.map_err(|e| SummarizerFailure::Failed(e.reason)));
        }
        Ok(ValueType::Object) => {
            let promise: PromiseRaw<Unknown> = PromiseRaw::new(env.raw(), value.raw());
            let (ok_tx, err_tx) = (tx.clone(), tx.clone());
            let chained = promise
                .then(move |ctx: CallbackContext<Unknown>| {
                    let resolved = ctx.value;
                    let answer = match resolved.get_type() {
                        // SAFETY: checked to be a string.
                        Ok(ValueType::String) => unsafe { String::from_napi_value(resolved.env(), resolved.raw()) }
                            .map_err(|e| SummarizerFailure::Failed(e.reason)),
                        _ => Err(SummarizerFailure::Failed(format!(
                            "it resolved with {}, expected a string",
                            describe_value(resolved)
                        ))),
                    };
                    settle(&ok_tx, answer);
                    Ok(())
                })
                .and_then(|p| {
                    p.catch(move |ctx: CallbackContext<Unknown>| {
                        settle(&err_tx, Err(classify_rejection(ctx.value, "rejected with")));
                        Ok(())
                    })
                });
            if chained.is_err() {
                clear_pending_exception(env.raw());
                settle(
                    &tx,
                    Err(SummarizerFailure::Failed(
                        "it returned an object that is not a Promise".into(),
                    )),
                );
            }
        }
        Ok(_) => settle(
            &tx,
            Err(SummarizerFailure::Failed(format!(
                "it returned {}, expected Promise<string>",
                describe_value(value)
            ))),
        ),
        Err(e) => {
            clear_pending_exception(env.raw());
            settle(&tx, Err(SummarizerFailure::Failed(e.reason)))
        }
    }
}

/// The JS callback as a core `Summarizer`. The threadsafe function is owned by the call that
/// received it and dropped when that call ends, so it never keeps Node alive afterwards.
struct JsSummarizer {
    tsfn: SummarizeTsfn,
    model: String,
}

impl Summarizer for JsSummarizer {
    fn summarize(&self, prompt: String, request: &SummarizeRequest) -> SummaryFuture {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let tx: Settle = Arc::new(Mutex::new(Some(tx)));
        let args = match serde_json::to_string(request) {
            Ok(r) => (prompt, JsonText(r)),
            Err(e) => return Box::pin(async move { Err(SummarizerFailure::Failed(e.to_string())) }),
        };
        let cb_tx = tx.clone();
        let status =
            self.tsfn
                .call_with_return_value(args.into(), ThreadsafeFunctionCallMode::NonBlocking, move |ret, env| {
                    on_returned(ret, env, cb_tx);
                    Ok(())
                });
        if status != Status::Ok {
            settle(
                &tx,
                Err(SummarizerFailure::Failed(format!("cannot call it ({status})"))),
            );
        }
        Box::pin(async move {
            match rx.await {
                Ok(result) => result,
                // Every holder of the sender is gone: V8 collected a promise that can never
                // settle, together with our handlers. It will never answer: wait for the
                // summary timeout, as for any promise that never resolves.
                Err(_) => std::future::pending().await,
            }
        })
    }

    fn model(&self) -> String {
        self.model.clone()
    }
}

/// The `summarize` argument: a callback, or `'offline'` for the built-in summarizer.
enum SummarizerArg {
    Js(SummarizeTsfn),
    Offline,
    Invalid(String),
}

impl SummarizerArg {
    fn from_js(value: Unknown<'_>) -> SummarizerArg {
        match value.get_type() {
            Ok(ValueType::Function) => {
                let f: napi::Result<Function<FnArgs<(String, JsonText)>, Unknown<'static>>> =
                    unsafe { Function::from_napi_value(value.env(), value.raw()) };
                match f.and_then(|f| f.build_threadsafe_function().callee_handled::<false>().build()) {
                    Ok(tsfn) => SummarizerArg::Js(tsfn),
                    Err(e) => SummarizerArg::Invalid(format!("cannot use the summarize callback: {}", e.reason)),
                }
            }
            Ok(ValueType::String)
                if unsafe { String::from_napi_value(value.env(), value.raw()) }.is_ok_and(|s| s == "offline") =>
            {
                SummarizerArg::Offline
            }
            _ => SummarizerArg::Invalid(
                "summarize must be a function (prompt, request) => Promise<string>, or 'offline'".into(),
            ),
        }
    }

    fn into_summarizer(self, model: Option<String>) -> error::Result<Arc<dyn Summarizer>> {
        match self {
            SummarizerArg::Js(tsfn) => Ok(Arc::new(JsSummarizer {
                tsfn,
                model: model.unwrap_or_else(|| "unknown".into()),
            })),
            SummarizerArg::Offline => Ok(Arc::new(summarizer::offline::OfflineSummarizer)),
            SummarizerArg::Invalid(why) => Err(LcmError::invalid_input(why)),
        }
    }
}

/// How long a rewrite waits for `onProgress` to return before going on.
const PROGRESS_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// `onProgress`, called on Node's thread with one JSON argument.
type ProgressTsfn = ThreadsafeFunction<JsonText, Unknown<'static>, JsonText, Status, false>;

fn progress_callback(options: &Object<'_>) -> error::Result<Option<ProgressTsfn>> {
    let napi_err = |e: napi::Error| LcmError::invalid_input(format!("onProgress: {}", e.reason));
    let value: Unknown = options.get_named_property("onProgress").map_err(napi_err)?;
    match value.get_type().map_err(napi_err)? {
        ValueType::Undefined | ValueType::Null => Ok(None),
        ValueType::Function => {
            // SAFETY: checked to be a function.
            let f: Function<JsonText, Unknown<'static>> =
                unsafe { Function::from_napi_value(value.env(), value.raw()) }.map_err(napi_err)?;
            Ok(Some(
                f.build_threadsafe_function()
                    .callee_handled::<false>()
                    .build()
                    .map_err(napi_err)?,
            ))
        }
        other => Err(LcmError::invalid_input(format!(
            "onProgress must be a function, got {other:?}"
        ))),
    }
}

/// `EventTarget.prototype.addEventListener(type, listener, options)`.
type AddEventListener<'a> = Function<'a, FnArgs<(&'a str, Function<'a, (), ()>, Object<'a>)>, Unknown<'a>>;
/// `EventTarget.prototype.removeEventListener(type, listener)`.
type RemoveEventListener<'a> = Function<'a, FnArgs<(&'a str, Function<'a, (), ()>)>, Unknown<'a>>;

/// The abort listener a call attached to the caller's AbortSignal, removed when the call ends
/// so that a long-lived signal does not collect one listener per call.
struct AbortWatch {
    signal: ObjectRef<false>,
    listener: FunctionRef<(), ()>,
}

impl AbortWatch {
    fn release(self, env: &Env) {
        let remove = || -> napi::Result<()> {
            let signal = self.signal.get_value(env)?;
            let remove: Unknown = signal.get_named_property("removeEventListener")?;
            if remove.get_type()? == ValueType::Function {
                // SAFETY: checked to be a function.
                let remove: RemoveEventListener = unsafe { Function::from_napi_value(env.raw(), remove.raw())? };
                let listener = self.listener.borrow_back(env)?;
                remove.apply(signal, FnArgs::from(("abort", listener)))?;
            }
            Ok(())
        };
        // Nothing to report to: the operation has already ended.
        let _ = remove();
        let _ = self.signal.unref(env);
    }
}

/// Sets `cancel` when `options.signal` (an AbortSignal) is or becomes aborted.
fn watch_abort(env: &Env, options: &Object<'_>, cancel: Arc<AtomicBool>) -> error::Result<Option<AbortWatch>> {
    let napi_err = |e: napi::Error| LcmError::invalid_input(format!("signal: {}", e.reason));
    let not_a_signal = || LcmError::invalid_input("signal must be an AbortSignal");
    let value: Unknown = options.get_named_property("signal").map_err(napi_err)?;
    match value.get_type().map_err(napi_err)? {
        ValueType::Undefined | ValueType::Null => return Ok(None),
        ValueType::Object => {}
        _ => return Err(not_a_signal()),
    }
    // SAFETY: checked to be an object.
    let signal = unsafe { Object::from_napi_value(env.raw(), value.raw()) }.map_err(napi_err)?;
    let add: Unknown = signal.get_named_property("addEventListener").map_err(napi_err)?;
    let aborted: Unknown = signal.get_named_property("aborted").map_err(napi_err)?;
    if add.get_type().map_err(napi_err)? != ValueType::Function
        || aborted.get_type().map_err(napi_err)? != ValueType::Boolean
    {
        return Err(not_a_signal());
    }
    if signal.get_named_property::<bool>("aborted").map_err(napi_err)? {
        cancel.store(true, AtomicOrdering::SeqCst);
        return Ok(None);
    }
    let attach = || -> napi::Result<AbortWatch> {
        let on_abort = env.create_function_from_closure("lcmNativeOnAbort", move |_| {
            cancel.store(true, AtomicOrdering::SeqCst);
            Ok(())
        })?;
        let listener = on_abort.create_ref()?;
        let mut once = Object::new(env)?;
        once.set_named_property("once", true)?;
        // SAFETY: checked to be a function.
        let add: AddEventListener = unsafe { Function::from_napi_value(env.raw(), add.raw())? };
        add.apply(signal, FnArgs::from(("abort", on_abort, once)))?;
        Ok(AbortWatch {
            signal: signal.create_ref::<false>()?,
            listener,
        })
    };
    attach().map(Some).map_err(napi_err)
}

fn pass_options(options: &Option<Value>) -> error::Result<PassOptions> {
    let get = |k: &str| options.as_ref().and_then(|o| o.get(k)).filter(|v| !v.is_null());
    Ok(PassOptions {
        hard_trigger: opt_bool(options, "hardTrigger")?,
        depth: match get("depth") {
            None => None,
            Some(_) => Some(opt_int(options, "depth", 0, 0)?),
        },
        model: match get("model") {
            None => None,
            Some(Value::String(m)) => Some(m.clone()),
            Some(v) => return Err(LcmError::invalid_input(format!("`model` must be a string, got {v}"))),
        },
    })
}

fn to_json<T: serde::Serialize>(v: &T) -> error::Result<JsonText> {
    Ok(JsonText(serde_json::to_string(v)?))
}

fn parse_target(v: &Value) -> error::Result<Target> {
    let bad = || {
        LcmError::invalid_input(
            "target must be { sessionId: string }, { sessionKey: string, sessionId?: string } or { conversationId: number }",
        )
    };
    let obj = v.as_object().ok_or_else(bad)?;
    let text = |k: &str| match obj.get(k) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if !s.is_empty() => Ok(Some(s.clone())),
        Some(_) => Err(bad()),
    };
    match (text("sessionKey")?, text("sessionId")?, obj.get("conversationId")) {
        (Some(key), session_id, None) => Ok(Target::SessionKey { key, session_id }),
        (None, Some(id), None) => Ok(Target::Session(id)),
        (None, None, Some(id)) => Ok(Target::Conversation(parse_id(id)?)),
        _ => Err(bad()),
    }
}

/// `ingest`'s options: `{ advancementKey?: string, bootstrap?: boolean }`.
fn ingest_options(options: &Option<Value>) -> error::Result<store::messages::IngestOptions> {
    let advancement_key = match options.as_ref().and_then(|o| o.get("advancementKey")) {
        None | Some(Value::Null) => None,
        Some(Value::String(k)) if !k.is_empty() => Some(k.clone()),
        Some(v) => {
            return Err(LcmError::invalid_input(format!(
                "`advancementKey` must be a non-empty string, got {v}"
            )))
        }
    };
    Ok(store::messages::IngestOptions {
        advancement_key,
        bootstrap: opt_bool(options, "bootstrap")?,
    })
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

/// An optional boolean option: false when absent or null.
fn opt_bool(options: &Option<Value>, key: &str) -> error::Result<bool> {
    match options.as_ref().and_then(|o| o.get(key)) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(v) => Err(LcmError::invalid_input(format!("`{key}` must be a boolean, got {v}"))),
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

/// An optional integer option ≥ `min`: `None` when absent or null.
fn maybe_int(options: &Option<Value>, key: &str, min: i64) -> error::Result<Option<i64>> {
    match options.as_ref().and_then(|o| o.get(key)) {
        None | Some(Value::Null) => Ok(None),
        Some(_) => opt_int(options, key, 0, min).map(Some),
    }
}

/// The required `tokenBudget` option (a positive integer).
fn token_budget(options: &Option<Value>) -> error::Result<i64> {
    maybe_int(options, "tokenBudget", 1)?
        .ok_or_else(|| LcmError::invalid_input("`tokenBudget` is required (a positive integer)"))
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
    /// `advancementKey` stores the host's turn key in the same transaction (a key already
    /// stored makes the call a no-op, `duplicate: true`); `bootstrap` imports only into a
    /// conversation that holds no message yet. Lone UTF-16 surrogates are stored as U+FFFD
    /// (`replacedSurrogates` counts them).
    #[napi(ts_return_type = "Promise<IngestResult>")]
    pub fn ingest(
        &self,
        #[napi(ts_arg_type = "ConversationTarget")] target: JsonArg,
        #[napi(ts_arg_type = "IngestMessage[]")] messages: JsonArg,
        #[napi(ts_arg_type = "IngestOptions")] options: Option<JsonArg>,
    ) -> AsyncTask<CoreTask<JsonText>> {
        let engine = self.inner.clone();
        CoreTask::new(move || {
            let target = parse_target(&required(target, "target")?)?;
            let (messages, replaced) = messages.parse_repairing("messages")?;
            let Some(Value::Array(messages)) = messages else {
                return Err(LcmError::invalid_input("messages must be an array"));
            };
            let options = ingest_options(&optional(options, "options")?)?;
            let outcome = engine.ingest_with(&target, &messages, options)?;
            let mut json = serde_json::to_value(&outcome).map_err(|e| LcmError::Internal(e.to_string()))?;
            json["replacedSurrogates"] = Value::from(replaced);
            to_json(&json)
        })
    }

    /// The conversation a session maps to (`{ sessionKey, sessionId? }` as lossless-claw maps
    /// them, `{ sessionId }`, or `{ conversationId }`), or `null` when there is none. Creates
    /// nothing.
    #[napi(ts_return_type = "Promise<SessionConversation | null>")]
    pub fn find_conversation(
        &self,
        #[napi(ts_arg_type = "ConversationTarget")] target: JsonArg,
    ) -> AsyncTask<CoreTask<JsonText>> {
        let engine = self.inner.clone();
        CoreTask::new(move || {
            let target = parse_target(&required(target, "target")?)?;
            to_json(&engine.find_conversation(&target)?)
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
            let depth = maybe_int(&options, "depth", 0)?;
            to_json(&engine.summaries(id, depth)?)
        })
    }

    /// Per-depth distribution of the stored fidelity scores of a conversation's summaries
    /// (share of their source's identifiers they keep; see the README).
    #[napi(ts_return_type = "Promise<DepthFidelity[]>")]
    pub fn fidelity(&self, #[napi(ts_arg_type = "number")] conversation_id: JsonArg) -> AsyncTask<CoreTask<JsonText>> {
        let engine = self.inner.clone();
        CoreTask::new(move || {
            let id = parse_id(&required(conversation_id, "conversationId")?)?;
            to_json(&engine.fidelity(id)?)
        })
    }

    /// Scores the summaries that have no fidelity score yet (written before scores existed,
    /// or by lossless-claw), or every summary with `all: true`, and stores the scores.
    #[napi(ts_return_type = "Promise<ScoreFidelityReport>")]
    pub fn score_fidelity(
        &self,
        #[napi(ts_arg_type = "number")] conversation_id: JsonArg,
        #[napi(ts_arg_type = "{ all?: boolean }")] options: Option<JsonArg>,
    ) -> AsyncTask<CoreTask<JsonText>> {
        let engine = self.inner.clone();
        CoreTask::new(move || {
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
        let engine = self.inner.clone();
        let summarizer = SummarizerArg::from_js(summarize);
        spawn_coded(env, async move {
            let id = parse_id(&required(conversation_id, "conversationId")?)?;
            let opts = pass_options(&optional(options, "options")?)?;
            let summarizer = summarizer.into_summarizer(opts.model.clone())?;
            to_json(&engine.leaf_pass(id, summarizer, opts).await?)
        })
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
        let engine = self.inner.clone();
        let summarizer = SummarizerArg::from_js(summarize);
        spawn_coded(env, async move {
            let id = parse_id(&required(conversation_id, "conversationId")?)?;
            let opts = pass_options(&optional(options, "options")?)?;
            let summarizer = summarizer.into_summarizer(opts.model.clone())?;
            to_json(&engine.condensed_pass(id, summarizer, opts).await?)
        })
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
        let cancel = Arc::new(AtomicBool::new(false));
        let mut progress: Option<ProgressTsfn> = None;
        let mut watch: Option<AbortWatch> = None;
        // A bad `signal` or `onProgress` rejects the promise like any bad option.
        let mut invalid: Option<LcmError> = None;
        let mut options_json = JsonArg::Absent;
        if let Some(o) = options {
            // SAFETY: `o` is the live argument of this call.
            options_json = unsafe { JsonArg::from_napi_value(env.raw(), o.raw())? };
            if let Ok(ValueType::Object) = o.get_type() {
                // SAFETY: checked to be an object.
                let obj = unsafe { Object::from_napi_value(env.raw(), o.raw())? };
                match watch_abort(env, &obj, cancel.clone()) {
                    Ok(w) => watch = w,
                    Err(e) => invalid = Some(e),
                }
                match progress_callback(&obj) {
                    Ok(p) => progress = p,
                    Err(e) => invalid = invalid.or(Some(e)),
                }
            }
        }
        let work = async move {
            if let Some(e) = invalid {
                return Err(e);
            }
            let id = parse_id(&required(conversation_id, "conversationId")?)?;
            let opts = rewrite::RewriteOptions::from_json(options_json.parse("options")?.as_ref())?;
            let summarizer = summarizer.into_summarizer(opts.model.clone())?;
            // The summary starts once onProgress has returned, so that an abort from inside it
            // stops before that summary. A throwing callback does not stop the rewrite; one that
            // does not return within PROGRESS_WAIT is not waited for.
            let report = |p: rewrite::Progress| {
                if let (Some(tsfn), Ok(text)) = (&progress, to_json(&p)) {
                    let (tx, rx) = std::sync::mpsc::channel();
                    let status =
                        tsfn.call_with_return_value(text, ThreadsafeFunctionCallMode::NonBlocking, move |_, _| {
                            let _ = tx.send(());
                            Ok(())
                        });
                    if status == Status::Ok {
                        tokio::task::block_in_place(|| {
                            let _ = rx.recv_timeout(PROGRESS_WAIT);
                        });
                    }
                }
            };
            to_json(&engine.rewrite(id, summarizer, &opts, &cancel, &report).await?)
        };
        spawn_coded_then(env, work, move |env| {
            if let Some(w) = watch {
                w.release(env);
            }
        })
    }

    /// The context for the next turn within `tokenBudget`: the fresh tail always, older items
    /// evicted oldest first, summaries presented as `<summary …>` XML (or one markdown
    /// section), raw messages rebuilt in the host's shapes, tool calls and results paired.
    #[napi(ts_return_type = "Promise<AssembleResult>")]
    pub fn assemble(
        &self,
        #[napi(ts_arg_type = "number")] conversation_id: JsonArg,
        #[napi(ts_arg_type = "AssembleOptions")] options: JsonArg,
    ) -> AsyncTask<CoreTask<JsonText>> {
        let engine = self.inner.clone();
        CoreTask::new(move || {
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
            to_json(&engine.assemble(id, &opts)?)
        })
    }

    /// The live context items (what the model sees, before assembly) in order.
    #[napi(ts_return_type = "Promise<ContextEntry[]>")]
    pub fn context(&self, #[napi(ts_arg_type = "number")] conversation_id: JsonArg) -> AsyncTask<CoreTask<JsonText>> {
        let engine = self.inner.clone();
        CoreTask::new(move || {
            let id = parse_id(&required(conversation_id, "conversationId")?)?;
            to_json(&engine.context(id)?)
        })
    }

    /// The threshold decision, the leaf trigger and the rolling-summary trigger.
    #[napi(ts_return_type = "Promise<Evaluation>")]
    pub fn evaluate(
        &self,
        #[napi(ts_arg_type = "number")] conversation_id: JsonArg,
        #[napi(ts_arg_type = "{ tokenBudget: number; observedTokens?: number }")] options: JsonArg,
    ) -> AsyncTask<CoreTask<JsonText>> {
        let engine = self.inner.clone();
        CoreTask::new(move || {
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
    pub fn grep(
        &self,
        #[napi(ts_arg_type = "number | null")] conversation_id: JsonArg,
        #[napi(ts_arg_type = "GrepOptions")] options: JsonArg,
    ) -> AsyncTask<CoreTask<JsonText>> {
        let engine = self.inner.clone();
        CoreTask::new(move || {
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
    pub fn describe(&self, #[napi(ts_arg_type = "string | number")] id: JsonArg) -> AsyncTask<CoreTask<JsonText>> {
        let engine = self.inner.clone();
        CoreTask::new(move || {
            let id = recall::ItemId::from_json(&required(id, "id")?)?;
            to_json(&engine.describe(&id)?)
        })
    }

    /// What a summary stands for: its inputs, breadth first, down to the messages, until
    /// `tokenBudget` (default 4000) is spent.
    #[napi(ts_return_type = "Promise<Expansion>")]
    pub fn expand(
        &self,
        #[napi(ts_arg_type = "string")] summary_id: JsonArg,
        #[napi(ts_arg_type = "ExpandOptions")] options: Option<JsonArg>,
    ) -> AsyncTask<CoreTask<JsonText>> {
        let engine = self.inner.clone();
        CoreTask::new(move || {
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

    /// Checks the invariants (coverage, dense ordinals, DAG facts, SQLite integrity) of one
    /// conversation, or of all, and returns a digest of the stored contents.
    #[napi(ts_return_type = "Promise<VerifyReport>")]
    pub fn verify(
        &self,
        #[napi(ts_arg_type = "number")] conversation_id: Option<JsonArg>,
    ) -> AsyncTask<CoreTask<JsonText>> {
        let engine = self.inner.clone();
        CoreTask::new(move || {
            let id = match optional(conversation_id, "conversationId")? {
                None => None,
                Some(v) => Some(parse_id(&v)?),
            };
            to_json(&engine.verify(id)?)
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

/// Renders prompt template `name` (`leaf`, `condensed-d1`, `condensed-d2`, `condensed-d3`)
/// with `vars`, resolving it as the engine does (`promptDir`, then
/// `~/.config/lcm-tui/prompts`, then the built-in default).
#[napi(ts_return_type = "Promise<string>")]
pub fn render_prompt(
    #[napi(ts_arg_type = "string")] name: JsonArg,
    #[napi(ts_arg_type = "Partial<PromptVars>")] vars: Option<JsonArg>,
    #[napi(ts_arg_type = "{ promptDir?: string }")] options: Option<JsonArg>,
) -> AsyncTask<CoreTask<JsonText>> {
    CoreTask::new(move || {
        let name = template_name(name)?;
        let canonical = prompts::canonical_name(&name)?;
        let depth = match canonical {
            "leaf" => 0,
            "condensed-d1" => 1,
            "condensed-d2" => 2,
            _ => 3,
        };
        let mut merged = serde_json::to_value(prompts::PromptVars::sample(depth))?;
        if let Some(Value::Object(given)) = optional(vars, "vars")? {
            for (k, v) in given {
                if merged.get(&k).is_none() {
                    return Err(LcmError::invalid_input(format!("unknown prompt variable `{k}`")));
                }
                merged[k] = v;
            }
        }
        let vars: prompts::PromptVars =
            serde_json::from_value(merged).map_err(|e| LcmError::invalid_input(format!("prompt variables: {e}")))?;
        to_json(&prompt_set(options)?.render(canonical, &vars)?)
    })
}

/// Where each of the four templates comes from (`embedded` or the override's path).
#[napi(ts_return_type = "Promise<PromptSource[]>")]
pub fn list_prompts(
    #[napi(ts_arg_type = "{ promptDir?: string }")] options: Option<JsonArg>,
) -> AsyncTask<CoreTask<JsonText>> {
    CoreTask::new(move || to_json(&prompt_set(options)?.sources()))
}

/// One template in effect (override or default), with the default text and the unified diff
/// from the default to the override.
#[napi(ts_return_type = "Promise<PromptText>")]
pub fn show_prompt(
    #[napi(ts_arg_type = "string")] name: JsonArg,
    #[napi(ts_arg_type = "{ promptDir?: string }")] options: Option<JsonArg>,
) -> AsyncTask<CoreTask<JsonText>> {
    CoreTask::new(move || {
        let name = template_name(name)?;
        to_json(&prompt_set(options)?.show(&name)?)
    })
}

/// Writes the four default templates into `dir` (default `~/.config/lcm-tui/prompts`, where
/// lcm-native and lcm-tui both look), to edit there; resolves with the paths written.
#[napi(ts_return_type = "Promise<string[]>")]
pub fn export_prompts(#[napi(ts_arg_type = "string")] dir: Option<JsonArg>) -> AsyncTask<CoreTask<JsonText>> {
    CoreTask::new(move || {
        let dir = match optional(dir, "dir")? {
            Some(Value::String(d)) if !d.trim().is_empty() => std::path::PathBuf::from(d),
            None => std::env::var_os("HOME")
                .filter(|h| !h.is_empty())
                .map(|h| std::path::PathBuf::from(h).join(".config/lcm-tui/prompts"))
                .ok_or_else(|| LcmError::invalid_input("HOME is not set: give the directory to export to"))?,
            Some(v) => return Err(LcmError::invalid_input(format!("dir must be a string, got {v}"))),
        };
        let paths: Vec<String> = prompts::export(&dir)?
            .into_iter()
            .map(|p| p.display().to_string())
            .collect();
        to_json(&paths)
    })
}

/// A template name argument.
fn template_name(name: JsonArg) -> error::Result<String> {
    match required(name, "name")? {
        Value::String(s) => Ok(s),
        other => Err(LcmError::invalid_input(format!("name must be a string, got {other}"))),
    }
}

/// The templates as `{ promptDir }` resolves them.
fn prompt_set(options: Option<JsonArg>) -> error::Result<prompts::PromptSet> {
    let dir = prompt_dir_option(optional(options, "options")?)?;
    prompts::PromptSet::load(&prompts::PromptDirs::new(dir.as_deref()))
}

fn prompt_dir_option(options: Option<Value>) -> error::Result<Option<String>> {
    match options.as_ref().and_then(|o| o.get("promptDir")) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(v) => Err(LcmError::invalid_config(
            "promptDir",
            format!("expected a string, got {v}"),
        )),
    }
}
