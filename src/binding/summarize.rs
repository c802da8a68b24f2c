//! The host's summarize callback as a core `Summarizer`: called on Node's thread through a
//! threadsafe function, its answer (a string, a promise, anything else) sorted into text or a
//! failure without ever leaving a JS exception pending.

use std::sync::{Arc, Mutex};

use napi::bindgen_prelude::*;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};

use super::bridge::{to_json, JsonText};
use crate::error::{self, LcmError};
use crate::offline;
use crate::summarizer::{SummarizeRequest, Summarizer, SummarizerFailure, SummaryFuture};

/// The host's summarize callback, called on Node's thread through a threadsafe function.
pub(crate) type SummarizeTsfn =
    ThreadsafeFunction<FnArgs<(String, JsonText)>, Unknown<'static>, FnArgs<(String, JsonText)>, Status, false>;

pub(crate) type Settle =
    Arc<Mutex<Option<tokio::sync::oneshot::Sender<std::result::Result<String, SummarizerFailure>>>>>;

pub(crate) fn settle(tx: &Settle, result: std::result::Result<String, SummarizerFailure>) {
    if let Some(tx) = tx.lock().unwrap_or_else(|e| e.into_inner()).take() {
        // The receiver is gone when the pass timed out: the late answer is dropped.
        let _ = tx.send(result);
    }
}

/// Clears a JS exception left pending by a failed napi call (a Proxy trap, a throwing getter,
/// `String(symbol)`): left pending, it would surface as an uncaught exception and, with no
/// handler, end the process.
pub(crate) fn clear_pending_exception(env: napi::sys::napi_env) {
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
pub(crate) fn string_property(obj: &Object<'_>, env: napi::sys::napi_env, key: &str) -> Option<String> {
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
pub(crate) fn describe_value(value: Unknown<'_>) -> String {
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
        // SAFETY: checked to be a string; `value` is live on this thread.
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

/// Sorts a rejection: `code === 'LCM_AUTH'` or `name === 'LcmProviderAuthError'` (credentials
/// refused), or `code === 'LCM_STOP'` (the host allows no more calls), stops the sweep with
/// the pass unwritten and is reported as `authFailure`; anything else fails the pass. Whatever the
/// value (a Symbol, a Proxy whose traps throw, an object whose getters throw), no JS
/// exception is left pending.
pub(crate) fn classify_rejection(value: Unknown<'_>, how: &str) -> SummarizerFailure {
    let env = value.env();
    if let Ok(ValueType::Object) = value.get_type() {
        // SAFETY: checked to be an object.
        if let Ok(obj) = unsafe { Object::from_napi_value(env, value.raw()) } {
            let message = string_property(&obj, env, "message")
                .unwrap_or_else(|| format!("it {how} {} that has no readable message", describe_value(value)));
            if matches!(
                string_property(&obj, env, "code").as_deref(),
                Some("LCM_AUTH" | "LCM_STOP")
            ) || string_property(&obj, env, "name").as_deref() == Some("LcmProviderAuthError")
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
pub(crate) fn on_returned(ret: napi::Result<Unknown<'static>>, env: Env, tx: Settle) {
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
            // SAFETY: checked to be a string; `value` is live on this thread.
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
pub(crate) struct JsSummarizer {
    tsfn: SummarizeTsfn,
    model: String,
}

impl Summarizer for JsSummarizer {
    fn summarize(&self, prompt: String, request: &SummarizeRequest) -> SummaryFuture {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let tx: Settle = Arc::new(Mutex::new(Some(tx)));
        let args = match to_json(request) {
            Ok(r) => (prompt, r),
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
pub(crate) enum SummarizerArg {
    Js(SummarizeTsfn),
    Offline,
    Invalid(String),
}

impl SummarizerArg {
    pub(crate) fn from_js(value: Unknown<'_>) -> SummarizerArg {
        match value.get_type() {
            Ok(ValueType::Function) => {
                // SAFETY: checked to be a function; `value` is the live argument of this call.
                let f: napi::Result<Function<FnArgs<(String, JsonText)>, Unknown<'static>>> =
                    unsafe { Function::from_napi_value(value.env(), value.raw()) };
                match f.and_then(|f| f.build_threadsafe_function().callee_handled::<false>().build()) {
                    Ok(tsfn) => SummarizerArg::Js(tsfn),
                    Err(e) => SummarizerArg::Invalid(format!("cannot use the summarize callback: {}", e.reason)),
                }
            }
            Ok(ValueType::String)
                if {
                    // SAFETY: checked to be a string; `value` is the live argument of this call.
                    unsafe { String::from_napi_value(value.env(), value.raw()) }.is_ok_and(|s| s == "offline")
                } =>
            {
                SummarizerArg::Offline
            }
            _ => SummarizerArg::Invalid(
                "summarize must be a function (prompt, request) => Promise<string>, or 'offline'".into(),
            ),
        }
    }

    pub(crate) fn into_summarizer(self, model: Option<String>) -> error::Result<Arc<dyn Summarizer>> {
        match self {
            SummarizerArg::Js(tsfn) => Ok(Arc::new(JsSummarizer {
                tsfn,
                model: model.unwrap_or_else(|| "unknown".into()),
            })),
            SummarizerArg::Offline => Ok(Arc::new(offline::OfflineSummarizer)),
            SummarizerArg::Invalid(why) => Err(LcmError::invalid_input(why)),
        }
    }
}
