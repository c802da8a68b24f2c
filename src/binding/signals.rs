//! What a call attaches to the caller's JS objects: `onProgress` and an AbortSignal's
//! listener, released when the call ends.

use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};
use std::sync::Arc;

use napi::bindgen_prelude::*;
use napi::threadsafe_function::ThreadsafeFunction;

use super::bridge::JsonText;
use crate::error::{self, LcmError};

/// How long a rewrite waits for `onProgress` to return before going on.
pub(crate) const PROGRESS_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// `onProgress`, called on Node's thread with one JSON argument.
pub(crate) type ProgressTsfn = ThreadsafeFunction<JsonText, Unknown<'static>, JsonText, Status, false>;

pub(crate) fn progress_callback(options: &Object<'_>) -> error::Result<Option<ProgressTsfn>> {
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
pub(crate) type AddEventListener<'a> = Function<'a, FnArgs<(&'a str, Function<'a, (), ()>, Object<'a>)>, Unknown<'a>>;
/// `EventTarget.prototype.removeEventListener(type, listener)`.
pub(crate) type RemoveEventListener<'a> = Function<'a, FnArgs<(&'a str, Function<'a, (), ()>)>, Unknown<'a>>;

/// The abort listener a call attached to the caller's AbortSignal, removed when the call ends
/// so that a long-lived signal does not collect one listener per call.
pub(crate) struct AbortWatch {
    signal: ObjectRef<false>,
    listener: FunctionRef<(), ()>,
}

impl AbortWatch {
    pub(crate) fn release(self, env: &Env) {
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
pub(crate) fn watch_abort(
    env: &Env,
    options: &Object<'_>,
    cancel: Arc<AtomicBool>,
) -> error::Result<Option<AbortWatch>> {
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

/// What a long run (`rewrite`, `redact`) reads from its options object besides JSON: the
/// AbortSignal, `onProgress`, and the first of them that was invalid (the call rejects with it).
pub(crate) struct RunControls {
    pub options: super::bridge::JsonArg,
    pub cancel: Arc<AtomicBool>,
    pub progress: Option<ProgressTsfn>,
    pub watch: Option<AbortWatch>,
    pub invalid: Option<LcmError>,
}

impl RunControls {
    pub(crate) fn read(env: &Env, options: Option<Unknown<'_>>) -> napi::Result<RunControls> {
        let mut c = RunControls {
            options: super::bridge::JsonArg::Absent,
            cancel: Arc::new(AtomicBool::new(false)),
            progress: None,
            watch: None,
            invalid: None,
        };
        if let Some(o) = options {
            // SAFETY: `o` is the live argument of this call.
            c.options = unsafe { super::bridge::JsonArg::from_napi_value(env.raw(), o.raw())? };
            if let Ok(ValueType::Object) = o.get_type() {
                // SAFETY: checked to be an object.
                let obj = unsafe { Object::from_napi_value(env.raw(), o.raw())? };
                match watch_abort(env, &obj, c.cancel.clone()) {
                    Ok(w) => c.watch = w,
                    Err(e) => c.invalid = Some(e),
                }
                match progress_callback(&obj) {
                    Ok(p) => c.progress = p,
                    Err(e) => c.invalid = c.invalid.take().or(Some(e)),
                }
            }
        }
        Ok(c)
    }
}

/// Calls `onProgress` with `progress` and waits (at most `PROGRESS_WAIT`) for it to return, so
/// that an abort from inside it stops before the next step. A throwing callback is ignored.
pub(crate) fn report_progress(progress: &Option<ProgressTsfn>, value: &impl serde::Serialize) {
    let (Some(tsfn), Ok(text)) = (progress, super::bridge::to_json(value)) else {
        return;
    };
    let (tx, rx) = std::sync::mpsc::channel();
    let status = tsfn.call_with_return_value(
        text,
        napi::threadsafe_function::ThreadsafeFunctionCallMode::NonBlocking,
        move |_, _| {
            let _ = tx.send(());
            Ok(())
        },
    );
    if status == Status::Ok {
        tokio::task::block_in_place(|| {
            let _ = rx.recv_timeout(PROGRESS_WAIT);
        });
    }
}
