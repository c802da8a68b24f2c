//! The module-level functions: migrate, configFromEnv, estimateTokens and the prompt tools.

use napi::bindgen_prelude::*;
use napi_derive::napi;
use serde_json::Value;

use super::args::{opt_int, optional, required};
use super::bridge::{blocking, js_error, to_json, JsonArg, JsonText};
use crate::config::{self};
use crate::error::{self, LcmError};
use crate::{engine, prompts, tokens};

/// Creates the lcm-native schema in `dbPath`, or upgrades a lossless-claw database in place
/// (one transaction). A second run does nothing and says so (`upToDate`).
#[napi(ts_return_type = "Promise<MigrationReport>")]
pub fn migrate<'env>(
    env: &'env Env,
    #[napi(ts_arg_type = "string")] db_path: JsonArg,
    #[napi(ts_arg_type = "{ busyTimeoutMs?: number }")] options: Option<JsonArg>,
) -> napi::Result<PromiseRaw<'env, JsonText>> {
    blocking(env, move || {
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

/// `messages` (host messages) with the `redactPatterns` value's patterns applied as ingest
/// applies them (times, ids and structure kept), and how many matches were replaced: what the
/// engine would store, for a copy kept outside the database (the OpenClaw plugin's spool).
/// E_INVALID_CONFIG for a value `redactPatterns` does not take.
#[napi(ts_return_type = "{ messages: unknown[]; replaced: number }")]
pub fn redact_messages(
    env: Env,
    #[napi(ts_arg_type = "unknown[]")] messages: JsonArg,
    #[napi(ts_arg_type = "boolean | string[]")] redact_patterns: JsonArg,
) -> napi::Result<Value> {
    let run = || -> error::Result<Value> {
        let mut messages = required(messages, "messages")?;
        let patterns = required(redact_patterns, "redactPatterns")?;
        let Value::Array(list) = &mut messages else {
            return Err(LcmError::invalid_input("`messages` must be an array"));
        };
        let replaced = match config::redactor_of(&patterns)? {
            Some(redactor) => list.iter_mut().map(|m| redactor.message(m)).sum(),
            None => 0,
        };
        Ok(serde_json::json!({ "messages": messages, "replaced": replaced }))
    };
    run().map_err(|e| js_error(&env, e))
}

/// The token estimate lcm-native stores and budgets with (CJK 1.5, astral 2, other 0.25 per
/// code point, rounded up).
#[napi]
pub fn estimate_tokens(text: String) -> i64 {
    tokens::estimate(&text)
}
/// `text` cut to about `maxTokens` (marker included): its beginning and its end with `marker`
/// between them, as assembly shortens a message larger than its share of the budget; `text`
/// itself when it fits. For text that is not stored yet (the OpenClaw plugin's pending prompt).
#[napi]
pub fn excerpt_text(text: String, max_tokens: i64, marker: String) -> String {
    let room = (max_tokens - tokens::estimate(&marker)).max(1);
    crate::assemble::excerpt::shorten(&text, room, &marker)
}

/// Renders prompt template `name` (`leaf`, `condensed-d1`, `condensed-d2`, `condensed-d3`)
/// with `vars`, resolving it as the engine does (`promptDir`, then
/// `~/.config/lcm-tui/prompts`, then the built-in default).
#[napi(ts_return_type = "Promise<string>")]
pub fn render_prompt<'env>(
    env: &'env Env,
    #[napi(ts_arg_type = "string")] name: JsonArg,
    #[napi(ts_arg_type = "Partial<PromptVars>")] vars: Option<JsonArg>,
    #[napi(ts_arg_type = "{ promptDir?: string }")] options: Option<JsonArg>,
) -> napi::Result<PromiseRaw<'env, JsonText>> {
    blocking(env, move || {
        let name = template_name(name)?;
        let vars = optional(vars, "vars")?;
        to_json(&prompt_set(options)?.render_with(&name, vars.as_ref())?)
    })
}

/// Where each of the four templates comes from (`embedded` or the override's path).
#[napi(ts_return_type = "Promise<PromptSource[]>")]
pub fn list_prompts<'env>(
    env: &'env Env,
    #[napi(ts_arg_type = "{ promptDir?: string }")] options: Option<JsonArg>,
) -> napi::Result<PromiseRaw<'env, JsonText>> {
    blocking(env, move || to_json(&prompt_set(options)?.sources()))
}

/// One template in effect (override or default), with the default text and the unified diff
/// from the default to the override.
#[napi(ts_return_type = "Promise<PromptText>")]
pub fn show_prompt<'env>(
    env: &'env Env,
    #[napi(ts_arg_type = "string")] name: JsonArg,
    #[napi(ts_arg_type = "{ promptDir?: string }")] options: Option<JsonArg>,
) -> napi::Result<PromiseRaw<'env, JsonText>> {
    blocking(env, move || {
        let name = template_name(name)?;
        to_json(&prompt_set(options)?.show(&name)?)
    })
}

/// Writes the four default templates into `dir` (default `~/.config/lcm-tui/prompts`, where
/// lcm-native and lcm-tui both look), to edit there; resolves with the paths written.
#[napi(ts_return_type = "Promise<string[]>")]
pub fn export_prompts<'env>(
    env: &'env Env,
    #[napi(ts_arg_type = "string")] dir: Option<JsonArg>,
) -> napi::Result<PromiseRaw<'env, JsonText>> {
    blocking(env, move || {
        let dir = match optional(dir, "dir")? {
            Some(Value::String(d)) if !d.trim().is_empty() => Some(std::path::PathBuf::from(d)),
            None => None,
            Some(v) => return Err(LcmError::invalid_input(format!("dir must be a string, got {v}"))),
        };
        let paths: Vec<String> = prompts::export(dir.as_deref())?
            .into_iter()
            .map(|p| p.display().to_string())
            .collect();
        to_json(&paths)
    })
}

/// A template name argument.
pub(crate) fn template_name(name: JsonArg) -> error::Result<String> {
    match required(name, "name")? {
        Value::String(s) => Ok(s),
        other => Err(LcmError::invalid_input(format!("name must be a string, got {other}"))),
    }
}

/// The templates as `{ promptDir }` resolves them.
pub(crate) fn prompt_set(options: Option<JsonArg>) -> error::Result<prompts::PromptSet> {
    let dir = prompt_dir_option(optional(options, "options")?)?;
    prompts::PromptSet::load(&prompts::PromptDirs::new(dir.as_deref()))
}

pub(crate) fn prompt_dir_option(options: Option<Value>) -> error::Result<Option<String>> {
    match options.as_ref().and_then(|o| o.get("promptDir")) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(v) => Err(LcmError::invalid_config(
            "promptDir",
            format!("expected a string, got {v}"),
        )),
    }
}
