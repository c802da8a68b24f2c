//! Engine configuration: every option, its default, its validation, and the lossless-claw
//! environment variables that can set it. One table (`OPTIONS`) drives both the JS options
//! object and `configFromEnv`, so the two cannot drift apart.

use serde_json::{Map, Value};

use crate::error::{LcmError, Result};
use crate::time::DisplayZone;

/// How live summaries are presented to the model by `assemble`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "lowercase")]
pub enum Presentation {
    /// `<summary id=… range=… depth=… descendants=…>` … `</summary>` per summary.
    Xml,
    /// One `## Earlier in this conversation` section (rolling-summary seed).
    Markdown,
}

/// The resolved configuration of one engine.
#[derive(Clone, Debug)]
pub struct Config {
    pub db_path: String,
    pub context_threshold: f64,
    pub fresh_tail_count: i64,
    /// `freshTailMaxTokens`: None takes a share of each call's token budget.
    pub fresh_tail_max_tokens: Option<i64>,
    pub leaf_min_fanout: i64,
    pub condensed_min_fanout: i64,
    pub condensed_min_fanout_hard: i64,
    pub incremental_max_depth: i64,
    pub leaf_chunk_tokens: i64,
    pub leaf_target_tokens: i64,
    pub condensed_target_tokens: i64,
    pub timezone: String,
    pub zone: DisplayZone,
    pub max_sweep_iterations: i64,
    pub sweep_deadline_ms: i64,
    pub summary_timeout_ms: i64,
    pub summary_max_overage_factor: f64,
    /// A host summary whose fidelity score is under this is retried once, then marked.
    pub min_fidelity: Option<f64>,
    /// Versions of a summary's text kept, the current one included.
    pub max_summary_versions: i64,
    /// `redactPatterns`: what new messages are redacted with before they are stored.
    pub ingest_redactor: Option<crate::redact::text::Redactor>,
    pub messages_per_summary: i64,
    pub busy_timeout_ms: i64,
    pub lock_timeout_ms: i64,
    pub max_expand_tokens: i64,
    pub prompt_dir: Option<String>,
    pub custom_instructions: String,
    pub presentation: Presentation,
    /// Open without ever writing: no migration, no checkpoints; writes fail with E_READ_ONLY.
    pub read_only: bool,
    /// With `read_only`: trust that nobody writes the file (SQLite's immutable mode).
    pub immutable: bool,
    /// `walRuns`: read-write connections open through `db::wal_runs` (unless the environment
    /// says `LCM_WAL_RUNS=0`).
    pub wal_runs: bool,
    /// Messages a compaction run reads first after the leading summaries (it reads more, in
    /// doubling windows, when its passes reach further). Not an option: tests set it to 1 to
    /// show that decisions do not depend on it.
    pub head_window: usize,
    /// Rows after a write's changed span it shifts down to keep the first ordinal at 0; past
    /// that it moves the rows before the span up instead (`compaction::write`). Not an option:
    /// tests set it to 0 to make every write take the second way.
    pub shift_down_rows: i64,
    /// Every option with its effective value, as the JS `config` getter shows it.
    resolved: Map<String, Value>,
}

#[derive(Clone, Copy)]
enum Kind {
    /// An integer in `[min, max]`.
    Int {
        min: i64,
        max: i64,
    },
    /// A finite number in `(min_exclusive, max]`.
    Number {
        min_exclusive: f64,
        max: f64,
    },
    Text,
    /// A timezone name.
    Zone,
    /// One of a fixed set of strings.
    Choice(&'static [&'static str]),
    Bool,
    /// `false`, `true` (the built-in secret patterns) or an array of regular expressions.
    Patterns,
}

struct OptionSpec {
    name: &'static str,
    env: Option<&'static str>,
    kind: Kind,
    default: Default,
    /// What the option does: the source's documentation of it (the README says it to users).
    #[allow(dead_code)]
    doc: &'static str,
}

#[derive(Clone, Copy)]
enum Default {
    Int(i64),
    Number(f64),
    Text(&'static str),
    Bool(bool),
    /// No default: absent means "not set".
    Unset,
    /// Required: absence is an error.
    Required,
}

const I32: i64 = i32::MAX as i64;

/// `Config::head_window`'s value: about the messages of a few default leaf chunks.
const HEAD_WINDOW: usize = 512;

/// `Config::shift_down_rows`' value: renumbering this many rows costs about a millisecond.
const SHIFT_DOWN_ROWS: i64 = 1_000;

/// Every option `LcmEngine.open` accepts. The README's option table is written from this.
const OPTIONS: &[OptionSpec] = &[
    OptionSpec {
        name: "dbPath",
        env: Some("LCM_DATABASE_PATH"),
        kind: Kind::Text,
        default: Default::Required,
        doc: "Path of the SQLite database file. Its directory must exist.",
    },
    OptionSpec {
        name: "contextThreshold",
        env: Some("LCM_CONTEXT_THRESHOLD"),
        kind: Kind::Number {
            min_exclusive: 0.0,
            max: 1.0,
        },
        default: Default::Number(0.75),
        doc: "Fraction of the token budget above which a sweep is due.",
    },
    OptionSpec {
        name: "freshTailCount",
        env: Some("LCM_FRESH_TAIL_COUNT"),
        kind: Kind::Int { min: 0, max: I32 },
        default: Default::Int(32),
        doc: "Newest raw messages never compacted (extended back to the newest user message).",
    },
    OptionSpec {
        name: "freshTailMaxTokens",
        env: Some("LCM_FRESH_TAIL_MAX_TOKENS"),
        kind: Kind::Int { min: 0, max: I32 },
        default: Default::Unset,
        doc: "Most tokens the fresh tail protects; it always keeps the newest turn (from the newest user message on). Unset: 40% of the call's `tokenBudget` (without a budget, messages only).",
    },
    OptionSpec {
        name: "leafMinFanout",
        env: Some("LCM_LEAF_MIN_FANOUT"),
        kind: Kind::Int { min: 2, max: I32 },
        default: Default::Int(8),
        doc: "Minimum run of depth-0 summaries condensed into one depth-1 node.",
    },
    OptionSpec {
        name: "condensedMinFanout",
        env: Some("LCM_CONDENSED_MIN_FANOUT"),
        kind: Kind::Int { min: 2, max: I32 },
        default: Default::Int(4),
        doc: "Minimum run of same-depth summaries (depth ≥ 1) condensed into one node.",
    },
    OptionSpec {
        name: "condensedMinFanoutHard",
        env: Some("LCM_CONDENSED_MIN_FANOUT_HARD"),
        kind: Kind::Int { min: 2, max: I32 },
        default: Default::Int(2),
        doc: "Fanout used instead when a pass runs with `hardTrigger`.",
    },
    OptionSpec {
        name: "incrementalMaxDepth",
        env: Some("LCM_INCREMENTAL_MAX_DEPTH"),
        kind: Kind::Int { min: -1, max: I32 },
        default: Default::Int(0),
        doc: "Depths condensed right after a leaf pass (0 none, -1 unlimited).",
    },
    OptionSpec {
        name: "leafChunkTokens",
        env: Some("LCM_LEAF_CHUNK_TOKENS"),
        kind: Kind::Int { min: 1, max: I32 },
        default: Default::Int(20000),
        doc: "Token size of one leaf chunk; also the condensation chunk budget.",
    },
    OptionSpec {
        name: "leafTargetTokens",
        env: Some("LCM_LEAF_TARGET_TOKENS"),
        kind: Kind::Int { min: 1, max: I32 },
        default: Default::Int(1200),
        doc: "Upper bound of a leaf summary's target length.",
    },
    OptionSpec {
        name: "condensedTargetTokens",
        env: Some("LCM_CONDENSED_TARGET_TOKENS"),
        kind: Kind::Int { min: 1, max: I32 },
        default: Default::Int(2000),
        doc: "Target length of a condensed summary (at least 512 is asked for).",
    },
    OptionSpec {
        name: "timezone",
        env: Some("LCM_TIMEZONE"),
        kind: Kind::Zone,
        default: Default::Unset,
        doc: "IANA zone for timestamps shown to the model; default `TZ`, else UTC.",
    },
    OptionSpec {
        name: "maxSweepIterations",
        env: Some("LCM_MAX_SWEEP_ITERATIONS"),
        kind: Kind::Int { min: 1, max: I32 },
        default: Default::Int(12),
        doc: "Most passes one `compact` sweep may run.",
    },
    OptionSpec {
        name: "sweepDeadlineMs",
        env: Some("LCM_SWEEP_DEADLINE_MS"),
        kind: Kind::Int { min: 1, max: I32 },
        default: Default::Int(120_000),
        doc: "Wall-clock bound of one `compact` sweep.",
    },
    OptionSpec {
        name: "summaryTimeoutMs",
        env: Some("LCM_SUMMARY_TIMEOUT_MS"),
        kind: Kind::Int { min: 1, max: I32 },
        default: Default::Int(60_000),
        doc: "How long one summarizer call may take before the pass fails with E_TIMEOUT.",
    },
    OptionSpec {
        name: "summaryMaxOverageFactor",
        env: Some("LCM_SUMMARY_MAX_OVERAGE_FACTOR"),
        kind: Kind::Number {
            min_exclusive: 0.999,
            max: 100.0,
        },
        default: Default::Number(3.0),
        doc: "An accepted summary longer than this × its target is capped.",
    },
    OptionSpec {
        name: "minFidelity",
        env: Some("LCM_MIN_FIDELITY"),
        kind: Kind::Number {
            min_exclusive: 0.0,
            max: 1.0,
        },
        default: Default::Unset,
        doc: "Off unless set: a host summary scoring under it is asked for once more, then marked for repair.",
    },
    OptionSpec {
        name: "maxSummaryVersions",
        env: Some("LCM_MAX_SUMMARY_VERSIONS"),
        kind: Kind::Int { min: 1, max: I32 },
        default: Default::Int(16),
        doc: "Versions of a summary's text kept (the current one included); older ones are dropped.",
    },
    OptionSpec {
        name: "redactPatterns",
        env: Some("LCM_REDACT_PATTERNS"),
        kind: Kind::Patterns,
        default: Default::Bool(false),
        doc: "Off unless set: `true` replaces common API-key formats in new messages with `[REDACTED]` before they are stored; an array gives regular expressions (`\"@builtin\"` adds the built-in ones).",
    },
    OptionSpec {
        name: "messagesPerSummary",
        env: None,
        kind: Kind::Int { min: 0, max: I32 },
        default: Default::Int(20),
        doc: "Rolling trigger: summarise once this many messages arrived since the last summary (0 disables).",
    },
    OptionSpec {
        name: "busyTimeoutMs",
        env: None,
        kind: Kind::Int { min: 0, max: I32 },
        default: Default::Int(30_000),
        doc: "SQLite busy timeout when another connection or process holds the write lock.",
    },
    OptionSpec {
        name: "lockTimeoutMs",
        env: None,
        kind: Kind::Int { min: 0, max: I32 },
        default: Default::Int(30_000),
        doc: "How long a mutating operation waits for another one on the same conversation before E_BUSY.",
    },
    OptionSpec {
        name: "maxExpandTokens",
        env: Some("LCM_MAX_EXPAND_TOKENS"),
        kind: Kind::Int { min: 1, max: I32 },
        default: Default::Int(4000),
        doc: "Default token budget of `expand`.",
    },
    OptionSpec {
        name: "promptDir",
        env: None,
        kind: Kind::Text,
        default: Default::Unset,
        doc: "Directory searched first for prompt templates (then ~/.config/lcm-tui/prompts, then built-in).",
    },
    OptionSpec {
        name: "customInstructions",
        env: Some("LCM_CUSTOM_INSTRUCTIONS"),
        kind: Kind::Text,
        default: Default::Text(""),
        doc: "Operator instructions passed to every prompt as `CustomInstructions`.",
    },
    OptionSpec {
        name: "presentation",
        env: None,
        kind: Kind::Choice(&["xml", "markdown"]),
        default: Default::Text("xml"),
        doc: "How `assemble` presents summaries: XML wrappers or one markdown section.",
    },
    OptionSpec {
        name: "readOnly",
        env: None,
        kind: Kind::Bool,
        default: Default::Bool(false),
        doc: "Open without writing anything: no migration (a file that needs one is refused with E_SCHEMA), and writes reject with E_READ_ONLY.",
    },
    OptionSpec {
        name: "immutable",
        env: None,
        kind: Kind::Bool,
        default: Default::Bool(false),
        doc: "With `readOnly`: read the file as a snapshot nobody writes (SQLite's immutable mode, no locks), which opens even where its directory is not writable. Writes by another process then make reads fail or go stale.",
    },
    OptionSpec {
        name: "walRuns",
        env: None,
        kind: Kind::Bool,
        default: Default::Bool(true),
        doc: "Write each commit's log frames in one write (lcm-native's VFS over SQLite's). `false`, or `LCM_WAL_RUNS=0` in the environment, opens through SQLite's own VFS: the same file, for bisecting a field problem.",
    },
];

/// One row of the option table, for documentation and the binding's type hints.
#[cfg(test)]
pub(crate) struct OptionDoc {
    pub name: &'static str,
    pub env: Option<&'static str>,
    pub default: String,
}

/// The option table as documentation rows.
#[cfg(test)]
pub(crate) fn option_docs() -> Vec<OptionDoc> {
    OPTIONS
        .iter()
        .map(|o| OptionDoc {
            name: o.name,
            env: o.env,
            default: match o.default {
                Default::Int(i) => i.to_string(),
                Default::Number(n) => n.to_string(),
                Default::Text(t) => format!("\"{t}\""),
                Default::Bool(b) => b.to_string(),
                Default::Unset => "unset".into(),
                Default::Required => "required".into(),
            },
        })
        .collect()
}

/// Checks one value against its spec; returns the normalised JSON value.
fn check(spec: &OptionSpec, value: &Value, label: &str) -> Result<Value> {
    let bad = |reason: String| LcmError::invalid_config(label, reason);
    match spec.kind {
        Kind::Int { min, max } => {
            let n = value
                .as_f64()
                .ok_or_else(|| bad(format!("expected an integer, got {}", describe(value))))?;
            if !n.is_finite() || n.fract() != 0.0 {
                return Err(bad(format!("expected an integer, got {n}")));
            }
            if n < min as f64 || n > max as f64 {
                return Err(bad(format!("{n} is out of range; expected {min}..={max}")));
            }
            Ok(Value::from(n as i64))
        }
        Kind::Number { min_exclusive, max } => {
            let n = value
                .as_f64()
                .ok_or_else(|| bad(format!("expected a number, got {}", describe(value))))?;
            if !n.is_finite() || n <= min_exclusive || n > max {
                return Err(bad(format!(
                    "{n} is out of range; expected a number above {min_exclusive} and at most {max}"
                )));
            }
            Ok(Value::from(n))
        }
        Kind::Text => match value {
            Value::String(s) if spec.name == "dbPath" && s.trim().is_empty() => Err(bad("must not be empty".into())),
            Value::String(_) => Ok(value.clone()),
            _ => Err(bad(format!("expected a string, got {}", describe(value)))),
        },
        Kind::Zone => match value {
            Value::String(s) => {
                DisplayZone::parse(s).map_err(|_| {
                    bad(format!(
                        "`{s}` is not an IANA timezone name (for example `Europe/Berlin` or `UTC`)"
                    ))
                })?;
                Ok(value.clone())
            }
            _ => Err(bad(format!("expected a timezone name, got {}", describe(value)))),
        },
        Kind::Bool => match value {
            Value::Bool(_) => Ok(value.clone()),
            _ => Err(bad(format!("expected a boolean, got {}", describe(value)))),
        },
        Kind::Patterns => {
            let entries = pattern_entries(value).ok_or_else(|| {
                bad(format!(
                    "expected a boolean or an array of strings, got {}",
                    describe(value)
                ))
            })?;
            crate::redact::secrets::ingest_redactor(&entries).map_err(bad)?;
            Ok(value.clone())
        }
        Kind::Choice(choices) => match value {
            Value::String(s) if choices.contains(&s.as_str()) => Ok(value.clone()),
            _ => Err(bad(format!(
                "expected one of {}, got {}",
                choices
                    .iter()
                    .map(|c| format!("\"{c}\""))
                    .collect::<Vec<_>>()
                    .join(", "),
                describe(value)
            ))),
        },
    }
}

/// The entries a `redactPatterns` value stands for (`true` is the built-in set); `None` when it
/// is neither a boolean nor an array of strings.
fn pattern_entries(value: &Value) -> Option<Vec<String>> {
    match value {
        Value::Bool(on) => Some(match on {
            true => vec![crate::redact::secrets::BUILTIN_ENTRY.to_string()],
            false => Vec::new(),
        }),
        Value::Array(items) => items.iter().map(|v| v.as_str().map(str::to_string)).collect(),
        _ => None,
    }
}

/// The redactor of a validated `redactPatterns` value.
fn ingest_redactor(value: &Value) -> Option<crate::redact::text::Redactor> {
    redactor_of(value).expect("validated patterns")
}

/// The redactor of a `redactPatterns` value (`None` when it redacts nothing); E_INVALID_CONFIG
/// for a value that is not one.
pub(crate) fn redactor_of(value: &Value) -> crate::error::Result<Option<crate::redact::text::Redactor>> {
    let entries = pattern_entries(value).ok_or_else(|| {
        crate::error::LcmError::invalid_config(
            "redactPatterns",
            format!("expected true, false or an array of strings, got {}", describe(value)),
        )
    })?;
    crate::redact::secrets::ingest_redactor(&entries)
        .map_err(|why| crate::error::LcmError::invalid_config("redactPatterns", why))
}

fn describe(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => format!("boolean {b}"),
        Value::Number(n) => format!("number {n}"),
        Value::String(s) => format!("string {s:?}"),
        Value::Array(_) => "an array".into(),
        Value::Object(_) => "an object".into(),
    }
}

/// The closest known option name, to suggest on a typo.
fn suggest(unknown: &str) -> Option<&'static str> {
    crate::input::closest(unknown, OPTIONS.iter().map(|o| o.name))
}

impl Config {
    /// Builds a config from the JS options object. Unknown keys are rejected (with a
    /// suggestion), so a typo never silently falls back to a default.
    /// `tz_env` is the process's `TZ`, used when `timezone` is not given.
    pub fn from_options(options: &Value, tz_env: Option<&str>) -> Result<Config> {
        let obj = options.as_object().ok_or_else(|| {
            LcmError::invalid_config("options", format!("expected an object, got {}", describe(options)))
        })?;
        for key in obj.keys() {
            if !OPTIONS.iter().any(|o| o.name == key) {
                let hint = suggest(key)
                    .map(|s| format!("; did you mean `{s}`?"))
                    .unwrap_or_default();
                return Err(LcmError::invalid_config(key.clone(), format!("unknown option{hint}")));
            }
        }
        let mut resolved = Map::new();
        for spec in OPTIONS {
            match obj.get(spec.name) {
                Some(v) if !v.is_null() => {
                    resolved.insert(spec.name.into(), check(spec, v, spec.name)?);
                }
                _ => match spec.default {
                    Default::Int(i) => {
                        resolved.insert(spec.name.into(), Value::from(i));
                    }
                    Default::Number(n) => {
                        resolved.insert(spec.name.into(), Value::from(n));
                    }
                    Default::Text(t) => {
                        resolved.insert(spec.name.into(), Value::from(t));
                    }
                    Default::Bool(b) => {
                        resolved.insert(spec.name.into(), Value::from(b));
                    }
                    Default::Unset => {}
                    Default::Required => {
                        return Err(LcmError::invalid_config(spec.name, "is required"));
                    }
                },
            }
        }
        // timezone: explicit option, else TZ (ignored when it is not an IANA name), else UTC.
        let timezone = match resolved.get("timezone").and_then(Value::as_str) {
            Some(tz) => tz.to_string(),
            None => tz_env
                .filter(|tz| DisplayZone::parse(tz).is_ok())
                .map(|tz| tz.trim().trim_start_matches(':').to_string())
                .filter(|tz| !tz.is_empty())
                .unwrap_or_else(|| "UTC".into()),
        };
        let zone = DisplayZone::parse(&timezone)?;
        resolved.insert("timezone".into(), Value::from(timezone.clone()));

        let int = |k: &str| resolved[k].as_i64().expect("validated integer");
        let num = |k: &str| resolved[k].as_f64().expect("validated number");
        let text = |k: &str| resolved.get(k).and_then(|v| v.as_str()).map(str::to_string);
        let read_only = resolved["readOnly"].as_bool().expect("validated boolean");
        let immutable = resolved["immutable"].as_bool().expect("validated boolean");
        let wal_runs = resolved["walRuns"].as_bool().expect("validated boolean");
        if immutable && !read_only {
            return Err(LcmError::invalid_config(
                "immutable",
                "needs readOnly: true (an immutable file cannot be written)",
            ));
        }
        let presentation = match text("presentation").as_deref() {
            Some("markdown") => Presentation::Markdown,
            _ => Presentation::Xml,
        };
        Ok(Config {
            db_path: text("dbPath").expect("required"),
            context_threshold: num("contextThreshold"),
            fresh_tail_count: int("freshTailCount"),
            fresh_tail_max_tokens: resolved.get("freshTailMaxTokens").and_then(Value::as_i64),
            leaf_min_fanout: int("leafMinFanout"),
            condensed_min_fanout: int("condensedMinFanout"),
            condensed_min_fanout_hard: int("condensedMinFanoutHard"),
            incremental_max_depth: int("incrementalMaxDepth"),
            leaf_chunk_tokens: int("leafChunkTokens"),
            leaf_target_tokens: int("leafTargetTokens"),
            condensed_target_tokens: int("condensedTargetTokens"),
            timezone,
            zone,
            max_sweep_iterations: int("maxSweepIterations"),
            sweep_deadline_ms: int("sweepDeadlineMs"),
            summary_timeout_ms: int("summaryTimeoutMs"),
            summary_max_overage_factor: num("summaryMaxOverageFactor"),
            min_fidelity: resolved.get("minFidelity").and_then(Value::as_f64),
            max_summary_versions: int("maxSummaryVersions"),
            ingest_redactor: ingest_redactor(&resolved["redactPatterns"]),
            messages_per_summary: int("messagesPerSummary"),
            busy_timeout_ms: int("busyTimeoutMs"),
            lock_timeout_ms: int("lockTimeoutMs"),
            max_expand_tokens: int("maxExpandTokens"),
            prompt_dir: text("promptDir").filter(|s| !s.is_empty()),
            custom_instructions: text("customInstructions").unwrap_or_default(),
            presentation,
            read_only,
            immutable,
            wal_runs,
            head_window: HEAD_WINDOW,
            shift_down_rows: SHIFT_DOWN_ROWS,
            resolved: resolved.clone(),
        })
    }

    /// The effective options as a JSON object (camelCase names, like the input).
    pub fn to_json(&self) -> Value {
        Value::Object(self.resolved.clone())
    }

    /// A config with every default, for tests and tools.
    pub fn with_db_path(db_path: &str) -> Config {
        Config::from_options(&serde_json::json!({ "dbPath": db_path }), None).expect("defaults are valid")
    }
}

/// Reads lossless-claw's environment variables (`LCM_*`, then `TZ` for the timezone) into an
/// options object. Only variables that are set appear. A malformed value is an
/// E_INVALID_CONFIG error naming the variable.
pub(crate) fn config_from_env(get: impl Fn(&str) -> Option<String>) -> Result<Map<String, Value>> {
    let mut out = Map::new();
    for spec in OPTIONS {
        let Some(var) = spec.env else { continue };
        let Some(raw) = get(var).filter(|v| !v.trim().is_empty()) else {
            continue;
        };
        let label = format!("{} (from {var})", spec.name);
        let raw = raw.trim();
        let value = match spec.kind {
            Kind::Int { .. } | Kind::Number { .. } => {
                let n: f64 = raw
                    .parse()
                    .map_err(|_| LcmError::invalid_config(&label, format!("{raw:?} is not a number")))?;
                Value::from(n)
            }
            Kind::Patterns => match raw {
                "true" | "1" => Value::Bool(true),
                "false" | "0" => Value::Bool(false),
                _ => serde_json::from_str(raw).map_err(|_| {
                    LcmError::invalid_config(&label, "expected true, false or a JSON array of regular expressions")
                })?,
            },
            _ => Value::from(raw),
        };
        out.insert(spec.name.into(), check(spec, &value, &label)?);
    }
    if !out.contains_key("timezone") {
        if let Some(tz) = get("TZ") {
            // TZ is a system variable: use it only when it names an IANA zone.
            let tz = tz.trim().trim_start_matches(':');
            if !tz.is_empty() && DisplayZone::parse(tz).is_ok() {
                out.insert("timezone".into(), Value::from(tz));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::collections::HashMap;

    #[test]
    fn defaults() {
        let c = Config::with_db_path("/tmp/x.db");
        assert_eq!(c.context_threshold, 0.75);
        assert_eq!(c.fresh_tail_count, 32);
        assert_eq!(c.leaf_min_fanout, 8);
        assert_eq!(c.condensed_min_fanout, 4);
        assert_eq!(c.condensed_min_fanout_hard, 2);
        assert_eq!(c.leaf_chunk_tokens, 20000);
        assert_eq!(c.leaf_target_tokens, 1200);
        assert_eq!(c.condensed_target_tokens, 2000);
        assert_eq!(c.timezone, "UTC");
        assert_eq!(c.summary_timeout_ms, 60_000);
        assert_eq!(c.presentation, Presentation::Xml);
    }

    #[test]
    fn bad_options_name_the_option() {
        let cases = [
            (json!({"dbPath": "/x", "freshTailCount": -1}), "freshTailCount"),
            (json!({"dbPath": "/x", "freshTailCount": 1.5}), "freshTailCount"),
            (json!({"dbPath": "/x", "contextThreshold": 0}), "contextThreshold"),
            (json!({"dbPath": "/x", "contextThreshold": "high"}), "contextThreshold"),
            (json!({"dbPath": "/x", "timezone": "Mars/Base"}), "timezone"),
            (json!({"dbPath": "/x", "presentation": "html"}), "presentation"),
            (json!({"dbPath": "/x", "freshTailCont": 3}), "freshTailCont"),
            (json!({"dbPath": ""}), "dbPath"),
            (json!({}), "dbPath"),
            (json!("x.db"), "options"),
        ];
        for (opts, option) in cases {
            match Config::from_options(&opts, None) {
                Err(LcmError::InvalidConfig { option: o, .. }) => assert_eq!(o, option, "{opts}"),
                other => panic!("{opts}: expected InvalidConfig, got {other:?}"),
            }
        }
        let err = Config::from_options(&json!({"dbPath": "/x", "freshTailCont": 3}), None).unwrap_err();
        assert!(err.to_string().contains("did you mean `freshTailCount`"), "{err}");
    }

    #[test]
    fn null_means_default_and_tz_env_is_used() {
        let c = Config::from_options(&json!({"dbPath": "/x", "freshTailCount": null}), Some("Europe/Berlin")).unwrap();
        assert_eq!(c.fresh_tail_count, 32);
        assert_eq!(c.timezone, "Europe/Berlin");
        let c = Config::from_options(&json!({"dbPath": "/x"}), Some("not/a zone")).unwrap();
        assert_eq!(c.timezone, "UTC");
        let c = Config::from_options(
            &json!({"dbPath": "/x", "timezone": "Asia/Tokyo"}),
            Some("Europe/Berlin"),
        )
        .unwrap();
        assert_eq!(c.timezone, "Asia/Tokyo");
    }

    #[test]
    fn env_reading() {
        let env: HashMap<&str, &str> = HashMap::from([
            ("LCM_DATABASE_PATH", "/data/lcm.db"),
            ("LCM_FRESH_TAIL_COUNT", "64"),
            ("LCM_CONTEXT_THRESHOLD", "0.5"),
            ("LCM_INCREMENTAL_MAX_DEPTH", "-1"),
            ("TZ", "America/New_York"),
        ]);
        let m = config_from_env(|k| env.get(k).map(|v| v.to_string())).unwrap();
        assert_eq!(m["dbPath"], "/data/lcm.db");
        assert_eq!(m["freshTailCount"], 64);
        assert_eq!(m["contextThreshold"], 0.5);
        assert_eq!(m["incrementalMaxDepth"], -1);
        assert_eq!(m["timezone"], "America/New_York");
        assert!(!m.contains_key("leafChunkTokens"));
        // LCM_TIMEZONE wins over TZ.
        let env2: HashMap<&str, &str> = HashMap::from([("LCM_TIMEZONE", "Asia/Tokyo"), ("TZ", "Europe/Paris")]);
        let m = config_from_env(|k| env2.get(k).map(|v| v.to_string())).unwrap();
        assert_eq!(m["timezone"], "Asia/Tokyo");
        // The resulting map is accepted by from_options.
        let mut opts = config_from_env(|k| env.get(k).map(|v| v.to_string())).unwrap();
        opts.insert("leafChunkTokens".into(), json!(1000));
        assert_eq!(
            Config::from_options(&Value::Object(opts), None)
                .unwrap()
                .fresh_tail_count,
            64
        );
    }

    #[test]
    fn bad_env_names_the_variable() {
        let err = config_from_env(|k| (k == "LCM_LEAF_CHUNK_TOKENS").then(|| "lots".to_string())).unwrap_err();
        assert_eq!(err.code(), "E_INVALID_CONFIG");
        assert!(err.to_string().contains("LCM_LEAF_CHUNK_TOKENS"), "{err}");
        let err = config_from_env(|k| (k == "LCM_TIMEZONE").then(|| "Nope/Nope".to_string())).unwrap_err();
        assert!(err.to_string().contains("LCM_TIMEZONE"), "{err}");
        // A TZ that is not an IANA name is ignored, not an error.
        let m = config_from_env(|k| (k == "TZ").then(|| "EST+5weird".to_string())).unwrap();
        assert!(!m.contains_key("timezone"));
    }
}

#[cfg(test)]
mod readme_tests {
    use super::*;

    /// The README's option table must list every option with its default and variable.
    #[test]
    fn readme_documents_every_option() {
        let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
        // The engine's table, not the OpenClaw plugin's (which comes earlier).
        let section = readme
            .split_once("\n## Configuration\n")
            .expect("README has a Configuration section")
            .1;
        for o in option_docs() {
            let row = section
                .lines()
                .find(|l| l.starts_with(&format!("| `{}` |", o.name)))
                .unwrap_or_else(|| panic!("README has no row for `{}`", o.name));
            let default = o.default.trim_matches('"');
            assert!(
                row.contains(default),
                "README row of `{}` lacks its default {default}: {row}",
                o.name
            );
            if let Some(env) = o.env {
                assert!(row.contains(env), "README row of `{}` lacks {env}", o.name);
            }
        }
    }
}
