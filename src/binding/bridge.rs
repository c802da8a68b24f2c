//! The JSON bridge between JS and the core: arguments cross as JSON text (stringified by V8
//! on Node's thread, parsed off it), results go back as JSON text for V8's `JSON.parse`, core
//! work runs on tokio's blocking pool or napi's tokio runtime (never libuv's pool, which Node
//! needs for its own I/O), and core errors become JS errors with
//! their stable `code`.

use std::future::Future;

use napi::bindgen_prelude::*;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::{self, LcmError};
use crate::{input, json_text};

/// A JS `Error` with `code` set to the core error's stable code.
pub(crate) fn js_error(env: &Env, err: LcmError) -> napi::Error {
    let js = JsError::from(napi::Error::new(err.code(), err.to_string())).into_unknown(*env);
    napi::Error::from(js)
}

/// Calls `JSON.<name>` with one argument on Node's thread.
pub(crate) fn call_json(env: &Env, name: &str, arg: Unknown<'_>) -> napi::Result<napi::sys::napi_value> {
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
    pub(crate) fn parse(self, what: &str) -> error::Result<Option<Value>> {
        self.parse_repairing(what).map(|(v, _)| v)
    }

    /// A required argument read as the core's input type `T` (E_INVALID_INPUT naming `what`
    /// and the field when it is missing or is not one).
    pub(crate) fn decode<T: DeserializeOwned>(self, what: &str) -> error::Result<T> {
        match self.parse(what)? {
            Some(v) => input::decode(v, what),
            None => Err(LcmError::invalid_input(format!("{what} is required"))),
        }
    }

    /// `parse`, also saying how many lone UTF-16 surrogates (text JavaScript allows and UTF-8
    /// cannot hold) were replaced with U+FFFD on the way.
    pub(crate) fn parse_repairing(self, what: &str) -> error::Result<(Option<Value>, usize)> {
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

/// An optional argument read as `T`: `T::default()` when it is left out, undefined or null.
pub(crate) fn decode_or_default<T: DeserializeOwned + Default>(arg: Option<JsonArg>, what: &str) -> error::Result<T> {
    match arg {
        Some(a) => input::decode_or_default(a.parse(what)?, what),
        None => Ok(T::default()),
    }
}

/// A result handed to JS as JSON text and turned into objects by V8's `JSON.parse` (the
/// serialisation already happened on the worker). The text is ASCII only (`to_json` is its
/// one writer), so V8 copies it as one-byte text rather than decoding UTF-8.
pub struct JsonText(String);

impl ToNapiValue for JsonText {
    unsafe fn to_napi_value(raw_env: napi::sys::napi_env, val: Self) -> napi::Result<napi::sys::napi_value> {
        let env = Env::from_raw(raw_env);
        let text = env.create_string_latin1(val.0.as_bytes())?;
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

/// Runs blocking core work (SQLite) on lcm-native's own threads (tokio's blocking pool) and
/// settles a JS promise with its result, rejecting with a coded error on failure. Not on
/// libuv's thread pool: it has four threads for all of Node's file, DNS and zlib work, and a
/// call waiting for a database lock (up to `busyTimeoutMs`) must not hold one of them. The
/// worker settles the promise itself (one hop back to Node's thread).
pub(crate) fn blocking<'env, T>(
    env: &'env Env,
    work: impl FnOnce() -> error::Result<T> + Send + 'static,
) -> napi::Result<PromiseRaw<'env, T>>
where
    T: ToNapiValue + Send + 'static,
{
    let (deferred, promise) = env.create_deferred()?;
    napi::bindgen_prelude::spawn_blocking(move || {
        let done = std::panic::catch_unwind(std::panic::AssertUnwindSafe(work))
            .unwrap_or_else(|_| Err(LcmError::Internal("the operation panicked".into())));
        deferred.resolve(move |env| done.map_err(|e| js_error(&env, e)));
    });
    Ok(PromiseRaw::new(env.raw(), promise.raw()))
}

/// Runs `fut` on napi's tokio runtime (operations that wait on the summarizer) and settles a
/// JS promise with its result, rejecting with a coded error on failure.
pub(crate) fn spawn_coded<'env, F>(env: &'env Env, fut: F) -> napi::Result<PromiseRaw<'env, JsonText>>
where
    F: Future<Output = error::Result<JsonText>> + Send + 'static,
{
    spawn_coded_then(env, fut, |_| {})
}

/// `spawn_coded`, running `after` on Node's thread when the operation has ended, however it
/// ended (to release what the call attached to JS objects).
pub(crate) fn spawn_coded_then<'env, F>(
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

pub(crate) fn to_json<T: serde::Serialize>(v: &T) -> error::Result<JsonText> {
    to_json_sized(v, 128)
}

/// `to_json` into a buffer of `capacity` bytes: a large result then is written once, not
/// copied each time its buffer doubles.
pub(crate) fn to_json_sized<T: serde::Serialize>(v: &T, capacity: usize) -> error::Result<JsonText> {
    checked_size(JsonText(json_text::to_ascii_json(v, capacity)?))
}

/// The longest string V8 makes (2^29 − 24 characters on 64-bit builds): a longer answer would
/// fail as a `GenericFailure` with no message.
const MAX_JS_STRING: usize = (1 << 29) - 24;

/// `json`, or E_TOO_LARGE when JavaScript could not hold it as one string.
fn checked_size(json: JsonText) -> error::Result<JsonText> {
    match too_large(json.0.len()) {
        Some(e) => Err(e),
        None => Ok(json),
    }
}

fn too_large(len: usize) -> Option<error::LcmError> {
    (len > MAX_JS_STRING).then(|| {
        error::LcmError::TooLarge(format!(
            "the answer is {} MB of JSON, more than one JavaScript string holds (about 512 MB): ask for less (a smaller limit, tokenBudget or page)",
            len >> 20
        ))
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_answer_javascript_cannot_hold_is_e_too_large() {
        assert!(super::too_large(super::MAX_JS_STRING).is_none());
        let e = super::too_large(super::MAX_JS_STRING + 1).expect("refused");
        assert_eq!(e.code(), "E_TOO_LARGE");
        assert!(e.to_string().contains("ask for less"), "{e}");
    }
}
