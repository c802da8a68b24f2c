//! The module-level functions: migrate, configFromEnv, estimateTokens and the prompt tools.

use napi::bindgen_prelude::*;
use napi_derive::napi;
use serde_json::Value;

use super::bridge::{blocking, decode_or_default, js_error, to_json, JsonArg, JsonText};
use crate::api::{CopyOptions, ExportOptions, MigrateOptions, PromptOptions};
use crate::config::{self};
use crate::error::{self, LcmError};
use crate::input::NonEmpty;
use crate::{engine, prompts, tokens};

/// Creates the lcm-native schema in `dbPath`, or upgrades a lossless-claw database in place
/// (one transaction). A second run does nothing and says so (`upToDate`).
#[napi(ts_return_type = "Promise<MigrationReport>")]
pub fn migrate<'env>(
    env: &'env Env,
    #[napi(ts_arg_type = "string")] db_path: JsonArg,
    #[napi(ts_arg_type = "MigrateOptions")] options: Option<JsonArg>,
) -> napi::Result<PromiseRaw<'env, JsonText>> {
    blocking(env, move || {
        let db_path = db_path.parse("dbPath")?;
        let path = db_path
            .as_ref()
            .and_then(Value::as_str)
            .ok_or_else(|| LcmError::invalid_config("dbPath", "expected a string"))?;
        let options: MigrateOptions = decode_or_default(options, "options")?;
        to_json(&engine::migrate_file(path, options.busy_timeout_ms)?)
    })
}

/// Writes a consistent copy of the database at `dbPath` to `outPath` (a new file; SQLite's
/// `VACUUM INTO`) without writing to `dbPath` or reading its schema, so a lossless-claw
/// database that `LcmEngine.open` with `readOnly` refuses (it needs an upgrade) can be copied
/// and the copy opened (and upgraded) instead. Resolves to the copy's size in bytes.
#[napi(ts_return_type = "Promise<number>")]
pub fn snapshot<'env>(
    env: &'env Env,
    #[napi(ts_arg_type = "string")] db_path: JsonArg,
    #[napi(ts_arg_type = "string")] out_path: JsonArg,
    #[napi(ts_arg_type = "MigrateOptions")] options: Option<JsonArg>,
) -> napi::Result<PromiseRaw<'env, JsonText>> {
    blocking(env, move || {
        let db_path: NonEmpty = db_path.decode("dbPath")?;
        let out_path: NonEmpty = out_path.decode("outPath")?;
        let options: MigrateOptions = decode_or_default(options, "options")?;
        to_json(&engine::snapshot_file(
            &db_path.0,
            &out_path.0,
            options.busy_timeout_ms,
        )?)
    })
}

/// Copies a database between SQLite and PostgreSQL (either way): every row of every table,
/// ids, lineage and counters, verified by a per-table digest on both sides. The target must be
/// new (a file that does not exist, a missing or empty schema); a copy that was interrupted is
/// finished by running it again. See `CopyOptions`.
#[napi(ts_return_type = "Promise<CopyReport>")]
pub fn copy_database<'env>(
    env: &'env Env,
    #[napi(ts_arg_type = "CopyOptions")] options: JsonArg,
) -> napi::Result<PromiseRaw<'env, JsonText>> {
    blocking(env, move || {
        let options: CopyOptions = options.decode("options")?;
        to_json(&crate::copy::run(options)?)
    })
}

/// Whether `location` (a `dbPath`) names a PostgreSQL database (a `postgres://` or
/// `postgresql://` URL, the scheme in any case) rather than a SQLite file: the test `open`
/// itself makes.
#[napi]
pub fn is_database_url(location: String) -> bool {
    crate::pg::is_url(&location)
}

/// The options the OpenClaw plugin passes to `open` from its config, each as a JSON Schema with
/// its default and a description naming its environment variable: what the plugin's manifest
/// (`openclaw.plugin.json`) is generated from (`scripts/options.cjs`).
#[napi(ts_return_type = "Record<string, Record<string, unknown>>")]
pub fn engine_option_schema() -> Value {
    Value::Object(crate::config::schema::plugin_schema())
}

/// Options for `LcmEngine.open` from lossless-claw's environment variables
/// (`LCM_DATABASE_PATH`, `LCM_FRESH_TAIL_COUNT`, …, `LCM_TIMEZONE`, then `TZ`): only variables
/// that are set appear. With `base` (options from a configuration file), `base` with the
/// environment over it, as lossless-claw layers them: each variable replaces its option,
/// `LCM_SWEEP_MAX_DEPTH` replaces `incrementalMaxDepth` ahead of `LCM_INCREMENTAL_MAX_DEPTH`,
/// and `TZ` names the zone only when neither `base` nor `LCM_TIMEZONE` does. A malformed
/// value throws E_INVALID_CONFIG naming the variable.
#[napi(ts_return_type = "Partial<LcmConfig>")]
pub fn config_from_env(
    env: Env,
    #[napi(ts_arg_type = "Partial<LcmConfig>")] base: Option<JsonArg>,
) -> napi::Result<Value> {
    let run = || -> error::Result<Value> {
        let get = |k: &str| std::env::var(k).ok();
        let out = match base.map(|b| b.parse("base")).transpose()?.flatten() {
            None => config::config_from_env(get)?,
            Some(Value::Object(base)) => config::layer_env(base, get)?,
            Some(_) => return Err(LcmError::invalid_input("base must be an options object")),
        };
        Ok(Value::Object(out))
    };
    run().map_err(|e| js_error(&env, e))
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
        let mut messages = messages
            .parse("messages")?
            .ok_or_else(|| LcmError::invalid_input("messages is required"))?;
        let patterns = redact_patterns
            .parse("redactPatterns")?
            .ok_or_else(|| LcmError::invalid_input("redactPatterns is required"))?;
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

/// Appends a turn the database could not take to the spool named after `base` (the database
/// file, or a name the caller chooses for a PostgreSQL database): one JSON line, stamped with
/// the time, in a file only its owner can read. `LcmEngine.drainSpool` stores it later.
/// E_IO naming the location when it cannot be written.
#[napi(ts_args_type = "base: string, turn: SpooledTurn")]
pub fn spool_turn(env: Env, base: String, turn: JsonArg) -> napi::Result<()> {
    let run = || -> error::Result<()> {
        let turn = turn
            .parse("turn")?
            .ok_or_else(|| LcmError::invalid_input("turn is required"))?;
        crate::spool::append(&base, &turn)
    };
    run().map_err(|e| js_error(&env, e))
}

/// Whether turns wait in the spool named after `base` (a look at its directory: cheap).
#[napi]
pub fn spool_waiting(base: String) -> bool {
    crate::spool::waiting(&base)
}

/// What the spool named after `base` holds: turns waiting and since when, turns set aside,
/// the drain lock and whether it is stale, a location that cannot be written. Reads only.
#[napi(ts_return_type = "SpoolStatus")]
pub fn spool_status(base: String) -> napi::Result<JsonText> {
    to_json(&crate::spool::status(&base)).map_err(|e| napi::Error::new(napi::Status::GenericFailure, e.to_string()))
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
    #[napi(ts_arg_type = "PromptOptions")] options: Option<JsonArg>,
) -> napi::Result<PromiseRaw<'env, JsonText>> {
    blocking(env, move || {
        let name = template_name(name)?;
        let vars: Option<Value> = decode_or_default(vars, "vars")?;
        let options: PromptOptions = decode_or_default(options, "options")?;
        let config = crate::config::Config::without_database(options.engine.as_ref())?;
        let kind = match crate::prompts::depth_of(crate::prompts::canonical_name(&name)?) {
            0 => crate::summarizer::SummaryKind::Leaf,
            _ => crate::summarizer::SummaryKind::Condensed,
        };
        let target = crate::compaction::escalation::configured_target(&config, kind);
        to_json(&templates_of(&options)?.render_with(&name, vars.as_ref(), Some(target))?)
    })
}

/// Where each of the four templates comes from (`embedded` or the override's path).
#[napi(ts_return_type = "Promise<PromptSource[]>")]
pub fn list_prompts<'env>(
    env: &'env Env,
    #[napi(ts_arg_type = "PromptOptions")] options: Option<JsonArg>,
) -> napi::Result<PromiseRaw<'env, JsonText>> {
    blocking(env, move || to_json(&prompt_set(options)?.sources()))
}

/// One template in effect (override or default), with the default text and the unified diff
/// from the default to the override.
#[napi(ts_return_type = "Promise<PromptText>")]
pub fn show_prompt<'env>(
    env: &'env Env,
    #[napi(ts_arg_type = "string")] name: JsonArg,
    #[napi(ts_arg_type = "PromptOptions")] options: Option<JsonArg>,
) -> napi::Result<PromiseRaw<'env, JsonText>> {
    blocking(env, move || {
        let name = template_name(name)?;
        to_json(&prompt_set(options)?.show(&name)?)
    })
}

/// Writes the four default templates into `dir` (default `~/.config/lcm-tui/prompts`, where
/// lcm-native and lcm-tui both look), to edit there; resolves with the paths written. A file
/// there that differs from the default (an edited template) is never replaced unless
/// `overwrite` is true: E_INVALID_INPUT naming it, and nothing written.
#[napi(ts_return_type = "Promise<string[]>")]
pub fn export_prompts<'env>(
    env: &'env Env,
    #[napi(ts_arg_type = "string | null")] dir: Option<JsonArg>,
    #[napi(ts_arg_type = "ExportPromptsOptions")] options: Option<JsonArg>,
) -> napi::Result<PromiseRaw<'env, JsonText>> {
    blocking(env, move || {
        let dir: Option<NonEmpty> = decode_or_default(dir, "dir")?;
        let dir = dir.map(|d| std::path::PathBuf::from(d.0));
        let options: ExportOptions = decode_or_default(options, "options")?;
        let paths: Vec<String> = prompts::export(dir.as_deref(), options.overwrite)?
            .into_iter()
            .map(|p| p.display().to_string())
            .collect();
        to_json(&paths)
    })
}

/// A template name argument.
pub(crate) fn template_name(name: JsonArg) -> error::Result<String> {
    name.decode("name")
}

/// The templates as `{ promptDir }` resolves them.
pub(crate) fn prompt_set(options: Option<JsonArg>) -> error::Result<prompts::PromptSet> {
    templates_of(&decode_or_default(options, "options")?)
}

/// The templates `options.promptDir` resolves.
fn templates_of(options: &PromptOptions) -> error::Result<prompts::PromptSet> {
    prompts::PromptSet::load(&prompts::PromptDirs::new(options.prompt_dir.as_deref()))
}
