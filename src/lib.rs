//! lcm-native: Lossless Context Management for AI agents, as a Node.js addon.
//!
//! The core modules below know nothing of Node. This file is the only one that uses napi: it
//! converts JS values in, runs the core off Node's main thread (tokio's blocking pool), and
//! turns core errors into JS errors with a stable `code`.

pub mod config;
pub mod db;
pub mod engine;
pub mod error;
pub mod store;
pub mod time;
pub mod tokens;

use std::future::Future;
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

/// Runs `fut` on napi's tokio runtime and settles a JS promise with its result, rejecting
/// with a coded error on failure.
fn spawn_coded<'env, T, F>(env: &'env Env, fut: F) -> napi::Result<PromiseRaw<'env, T>>
where
    T: ToNapiValue + Send + 'static,
    F: Future<Output = error::Result<T>> + Send + 'static,
{
    env.spawn_future_with_callback(async move { Ok(fut.await) }, |env, res| match res {
        Ok(v) => Ok(v),
        Err(e) => Err(js_error(env, e)),
    })
}

/// Runs blocking core work (SQLite) on tokio's blocking pool.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> error::Result<T> + Send + 'static) -> error::Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .unwrap_or_else(|e| Err(LcmError::Internal(format!("worker thread failed: {e}"))))
}

fn to_json<T: serde::Serialize>(v: &T) -> error::Result<Value> {
    Ok(serde_json::to_value(v)?)
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
pub fn migrate<'env>(
    env: &'env Env,
    #[napi(ts_arg_type = "string")] db_path: Value,
    #[napi(ts_arg_type = "{ busyTimeoutMs?: number }")] options: Option<Value>,
) -> napi::Result<PromiseRaw<'env, Value>> {
    spawn_coded(env, async move {
        let path = db_path
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| LcmError::invalid_config("dbPath", "expected a string"))?;
        let busy = opt_int(&options, "busyTimeoutMs", 30_000, 0)?;
        let report = blocking(move || engine::migrate_file(&path, busy)).await?;
        to_json(&report)
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
    pub fn open<'env>(
        env: &'env Env,
        #[napi(ts_arg_type = "LcmConfig")] options: Value,
    ) -> napi::Result<PromiseRaw<'env, LcmEngine>> {
        spawn_coded(env, async move {
            let config = Config::from_options(&options, std::env::var("TZ").ok().as_deref())?;
            let engine = blocking(move || Engine::open(config)).await?;
            Ok(LcmEngine {
                inner: Arc::new(engine),
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
    pub fn ingest<'env>(
        &self,
        env: &'env Env,
        #[napi(ts_arg_type = "ConversationTarget")] target: Value,
        #[napi(ts_arg_type = "IngestMessage[]")] messages: Value,
    ) -> napi::Result<PromiseRaw<'env, Value>> {
        let engine = self.inner.clone();
        spawn_coded(env, async move {
            let target = parse_target(&target)?;
            let Value::Array(messages) = messages else {
                return Err(LcmError::invalid_input("messages must be an array"));
            };
            let out = blocking(move || engine.ingest(&target, &messages)).await?;
            to_json(&out)
        })
    }

    /// Stored messages of a conversation in order, content blocks rebuilt exactly as ingested.
    #[napi(ts_return_type = "Promise<StoredMessage[]>")]
    pub fn messages<'env>(
        &self,
        env: &'env Env,
        #[napi(ts_arg_type = "number")] conversation_id: Value,
        #[napi(ts_arg_type = "{ afterSeq?: number; limit?: number }")] options: Option<Value>,
    ) -> napi::Result<PromiseRaw<'env, Value>> {
        let engine = self.inner.clone();
        spawn_coded(env, async move {
            let id = parse_id(&conversation_id)?;
            let after = opt_int(&options, "afterSeq", 0, 0)?;
            let limit = opt_int(&options, "limit", 1000, 1)?;
            let out = blocking(move || engine.messages(id, after, limit)).await?;
            to_json(&out)
        })
    }

    /// Every conversation, oldest first, with its message, summary and context-item counts.
    #[napi(ts_return_type = "Promise<ConversationInfo[]>")]
    pub fn conversations<'env>(&self, env: &'env Env) -> napi::Result<PromiseRaw<'env, Value>> {
        let engine = self.inner.clone();
        spawn_coded(env, async move {
            let out = blocking(move || engine.conversations()).await?;
            to_json(&out)
        })
    }

    /// Summaries of a conversation in creation order (leaves and condensed nodes), optionally
    /// of one depth only.
    #[napi(ts_return_type = "Promise<SummaryRecord[]>")]
    pub fn summaries<'env>(
        &self,
        env: &'env Env,
        #[napi(ts_arg_type = "number")] conversation_id: Value,
        #[napi(ts_arg_type = "{ depth?: number }")] options: Option<Value>,
    ) -> napi::Result<PromiseRaw<'env, Value>> {
        let engine = self.inner.clone();
        spawn_coded(env, async move {
            let id = parse_id(&conversation_id)?;
            let depth = match options.as_ref().and_then(|o| o.get("depth")) {
                None | Some(Value::Null) => None,
                Some(_) => Some(opt_int(&options, "depth", 0, 0)?),
            };
            let out = blocking(move || engine.summaries(id, depth)).await?;
            to_json(&out)
        })
    }

    /// Closes the database. Later calls reject with E_CLOSED; closing twice is harmless.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn close<'env>(&self, env: &'env Env) -> napi::Result<PromiseRaw<'env, ()>> {
        let engine = self.inner.clone();
        spawn_coded(env, async move {
            blocking(move || {
                engine.close();
                Ok(())
            })
            .await
        })
    }
}
