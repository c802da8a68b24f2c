//! Reading call arguments and options (JSON values) into core types, with E_INVALID_INPUT
//! naming what is wrong.

use serde_json::Value;

use super::bridge::JsonArg;
use crate::compaction::PassOptions;
use crate::error::{self, LcmError};
use crate::store;
use crate::store::conversations::Target;

pub(crate) fn pass_options(options: &Option<Value>) -> error::Result<PassOptions> {
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
        token_budget: maybe_int(options, "tokenBudget", 1)?,
    })
}

pub(crate) fn parse_target(v: &Value) -> error::Result<Target> {
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
pub(crate) fn ingest_options(options: &Option<Value>) -> error::Result<store::messages::IngestOptions> {
    let advancement_key = match options.as_ref().and_then(|o| o.get("advancementKey")) {
        None | Some(Value::Null) => None,
        Some(Value::String(k)) if !k.is_empty() => Some(k.clone()),
        Some(v) => {
            return Err(LcmError::invalid_input(format!(
                "`advancementKey` must be a non-empty string, got {v}"
            )))
        }
    };
    let turn = match options.as_ref().and_then(|o| o.get("turn")) {
        None | Some(Value::Null) => None,
        Some(v) => Some(
            serde_json::from_value::<store::messages::TurnRecord>(v.clone())
                .map_err(|e| LcmError::invalid_input(format!("`turn`: {e}")))?,
        ),
    };
    if turn.is_some() && advancement_key.is_none() {
        return Err(LcmError::invalid_input("`turn` needs the `advancementKey` it records"));
    }
    Ok(store::messages::IngestOptions {
        advancement_key,
        bootstrap: opt_bool(options, "bootstrap")?,
        turn,
    })
}

pub(crate) fn parse_id(v: &Value) -> error::Result<i64> {
    v.as_i64()
        .filter(|id| *id > 0)
        .ok_or_else(|| LcmError::invalid_input(format!("conversationId must be a positive integer, got {v}")))
}

/// A required argument.
pub(crate) fn required(arg: JsonArg, what: &str) -> error::Result<Value> {
    arg.parse(what)?
        .ok_or_else(|| LcmError::invalid_input(format!("{what} is required")))
}

/// An optional options object.
pub(crate) fn optional(arg: Option<JsonArg>, what: &str) -> error::Result<Option<Value>> {
    match arg {
        Some(a) => a.parse(what),
        None => Ok(None),
    }
}

/// An optional boolean option: false when absent or null.
pub(crate) fn opt_bool(options: &Option<Value>, key: &str) -> error::Result<bool> {
    match options.as_ref().and_then(|o| o.get(key)) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(v) => Err(LcmError::invalid_input(format!("`{key}` must be a boolean, got {v}"))),
    }
}

pub(crate) fn opt_int(options: &Option<Value>, key: &str, default: i64, min: i64) -> error::Result<i64> {
    match options.as_ref().and_then(|o| o.get(key)) {
        None | Some(Value::Null) => Ok(default),
        Some(v) => v
            .as_i64()
            .filter(|n| *n >= min)
            .ok_or_else(|| LcmError::invalid_input(format!("`{key}` must be an integer ≥ {min}, got {v}"))),
    }
}

/// An optional integer option ≥ `min`: `None` when absent or null.
pub(crate) fn maybe_int(options: &Option<Value>, key: &str, min: i64) -> error::Result<Option<i64>> {
    match options.as_ref().and_then(|o| o.get(key)) {
        None | Some(Value::Null) => Ok(None),
        Some(_) => opt_int(options, key, 0, min).map(Some),
    }
}

/// The required `tokenBudget` option (a positive integer).
/// A sweep's `target`: `"threshold"` (default) or `"budget"`.
pub(crate) fn sweep_target(options: &Option<Value>) -> error::Result<crate::compaction::SweepTarget> {
    use crate::compaction::SweepTarget;
    match options.as_ref().and_then(|o| o.get("target")) {
        None | Some(Value::Null) => Ok(SweepTarget::Threshold),
        Some(Value::String(t)) if t == "threshold" => Ok(SweepTarget::Threshold),
        Some(Value::String(t)) if t == "budget" => Ok(SweepTarget::Budget),
        Some(v) => Err(LcmError::invalid_input(format!(
            "`target` must be \"threshold\" or \"budget\", got {v}"
        ))),
    }
}

pub(crate) fn token_budget(options: &Option<Value>) -> error::Result<i64> {
    maybe_int(options, "tokenBudget", 1)?
        .ok_or_else(|| LcmError::invalid_input("`tokenBudget` is required (a positive integer)"))
}

/// A required non-empty string argument.
pub(crate) fn required_string(arg: JsonArg, what: &str) -> error::Result<String> {
    match required(arg, what)? {
        Value::String(s) if !s.is_empty() => Ok(s),
        v => Err(LcmError::invalid_input(format!(
            "{what} must be a non-empty string, got {v}"
        ))),
    }
}
