//! Engine configuration. `LcmOptions` is what `LcmEngine.open` takes, read by serde in one step
//! (types, ranges and unknown names checked there, E_INVALID_CONFIG naming the option);
//! `Config` is the resolved configuration (defaults filled in, the timezone chosen, the
//! redactor built), which the `config` getter shows. [`schema`] describes every option once
//! (variable, values, default, meaning): `configFromEnv` reads its variables, and the plugin's
//! manifest is generated from it. Both types are written into `src/types.d.ts` (`LcmConfig`,
//! `ResolvedConfig`), so the TypeScript cannot drift from what is read.

pub(crate) mod schema;

use serde::de::{DeserializeOwned, Error as _};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

use crate::api::Presentation;
use crate::error::{LcmError, Result};
use crate::time::DisplayZone;

/// `redactPatterns`: `false` (nothing), `true` (the built-in secret patterns) or regular
/// expressions (`"@builtin"` among them adds the built-in ones). Checked when read: a pattern
/// that does not compile, or matches the empty string, is refused.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(untagged)]
pub enum RedactPatterns {
    Builtin(bool),
    Patterns(Vec<String>),
}

impl Default for RedactPatterns {
    fn default() -> Self {
        RedactPatterns::Builtin(false)
    }
}

impl RedactPatterns {
    fn entries(&self) -> Vec<String> {
        match self {
            RedactPatterns::Builtin(true) => vec![crate::redact::secrets::BUILTIN_ENTRY.to_string()],
            RedactPatterns::Builtin(false) => Vec::new(),
            RedactPatterns::Patterns(list) => list.clone(),
        }
    }

    /// What new messages are redacted with (`None`: nothing).
    pub(crate) fn redactor(&self) -> std::result::Result<Option<crate::redact::text::Redactor>, String> {
        crate::redact::secrets::ingest_redactor(&self.entries())
    }
}

impl<'de> Deserialize<'de> for RedactPatterns {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let patterns = match Value::deserialize(d)? {
            Value::Bool(on) => RedactPatterns::Builtin(on),
            Value::Array(items) => RedactPatterns::Patterns(
                items
                    .iter()
                    .map(|v| v.as_str().map(str::to_string))
                    .collect::<Option<_>>()
                    .ok_or_else(|| {
                        D::Error::custom("expected a boolean or an array of strings, got an array with a non-string")
                    })?,
            ),
            other => {
                return Err(D::Error::custom(format!(
                    "expected a boolean or an array of strings, got {}",
                    describe(&other)
                )))
            }
        };
        patterns.redactor().map_err(D::Error::custom)?;
        Ok(patterns)
    }
}

/// The options of `LcmEngine.open`. Unknown keys are rejected with E_INVALID_CONFIG (with the
/// closest known name), so a typo never silently falls back to a default; `null` means the
/// default.
#[derive(Clone, Debug, Default, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS), ts(rename = "LcmConfig"))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LcmOptions {
    /// Path of the SQLite file (its directory must exist), or a PostgreSQL URL. Give this or
    /// `dbUrl`.
    #[serde(default)]
    #[cfg_attr(test, ts(optional))]
    pub db_path: Option<String>,
    /// A PostgreSQL database instead of a file: `postgres://user:password@host:port/db`, with
    /// `?schema=NAME` (default `lcm`); TLS by `sslmode=verify-full&sslrootcert=PATH`, and
    /// `pooler=transaction` through PgBouncer in transaction mode. Give this or `dbPath`, not
    /// both.
    #[serde(default, skip_serializing)]
    pub db_url: Option<String>,
    /// Fraction of the token budget above which a sweep is due (0 < x ≤ 1). Default 0.75.
    #[serde(default, skip_serializing, deserialize_with = "fraction")]
    pub context_threshold: Option<f64>,
    /// Fraction of the token budget a `budget` or `fit` sweep (maintenance, a host's preflight)
    /// compacts the context down to, in one go (0 < x ≤ 1; at most `contextThreshold`). Default
    /// 0.1: compactions come rarely and in large steps, so a provider's prompt cache keeps
    /// serving the context between them. Maintenance may sweep before the threshold, past two
    /// thirds of the way from this mark to it, at a turn that is cheap to send again.
    #[serde(default, skip_serializing, deserialize_with = "fraction")]
    pub context_low_water: Option<f64>,
    /// Newest raw messages kept out of leaf passes (extended back to the newest user message); a
    /// `budget` or `fit` sweep down to `contextLowWater` may take the older of them, never the
    /// newest turn. Default 32.
    #[serde(default, skip_serializing, deserialize_with = "integer::<0, _>")]
    pub fresh_tail_count: Option<i64>,
    /// Most tokens the fresh tail protects; it always keeps the newest turn (from the newest user
    /// message on). Default: 40% of each call's `tokenBudget` (without one, messages only).
    #[serde(default, skip_serializing, deserialize_with = "integer::<0, _>")]
    pub fresh_tail_max_tokens: Option<i64>,
    /// Minimum run of depth-0 summaries condensed together. Default 8.
    #[serde(default, skip_serializing, deserialize_with = "integer::<2, _>")]
    pub leaf_min_fanout: Option<i64>,
    /// Minimum run of same-depth summaries (depth ≥ 1) condensed together. Default 4.
    #[serde(default, skip_serializing, deserialize_with = "integer::<2, _>")]
    pub condensed_min_fanout: Option<i64>,
    /// Fanout used with `hardTrigger`. Default 2.
    #[serde(default, skip_serializing, deserialize_with = "integer::<2, _>")]
    pub condensed_min_fanout_hard: Option<i64>,
    /// Depths condensed right after a leaf pass (0 none, -1 unlimited). Default 0.
    #[serde(default, skip_serializing, deserialize_with = "integer::<-1, _>")]
    pub incremental_max_depth: Option<i64>,
    /// Token size of a leaf chunk; also the condensation chunk budget. Default 20000.
    #[serde(default, skip_serializing, deserialize_with = "integer::<1, _>")]
    pub leaf_chunk_tokens: Option<i64>,
    /// Upper bound of a leaf summary's target. Default 1200.
    #[serde(default, skip_serializing, deserialize_with = "integer::<1, _>")]
    pub leaf_target_tokens: Option<i64>,
    /// Target of a condensed summary (at least 512 is asked for). Default 2000.
    #[serde(default, skip_serializing, deserialize_with = "integer::<1, _>")]
    pub condensed_target_tokens: Option<i64>,
    /// IANA zone for timestamps shown to the model. Default: `TZ` when it names one, else UTC.
    #[serde(default, skip_serializing, deserialize_with = "zone_name")]
    pub timezone: Option<String>,
    /// Most passes one `compact` sweep may run. Default 12.
    #[serde(default, skip_serializing, deserialize_with = "integer::<1, _>")]
    pub max_sweep_iterations: Option<i64>,
    /// Wall-clock bound of one sweep. Default 120000.
    #[serde(default, skip_serializing, deserialize_with = "integer::<1, _>")]
    pub sweep_deadline_ms: Option<i64>,
    /// Time one summarizer call may take. Default 60000.
    #[serde(default, skip_serializing, deserialize_with = "integer::<1, _>")]
    pub summary_timeout_ms: Option<i64>,
    /// Accepted summaries longer than this × their target are capped (1 ≤ x ≤ 100). Default 3.
    #[serde(default, skip_serializing, deserialize_with = "overage")]
    pub summary_max_overage_factor: Option<f64>,
    /// Off unless set (0 < x ≤ 1). A summary from the host's summarizer whose fidelity score is
    /// under it is asked for once more, with the identifiers it left out listed in the prompt
    /// (`MissingIdentifiers`); if it still scores under, it is kept and marked for repair
    /// (`SummaryRecord.lowFidelity`, `rewrite` with `lowFidelity: true`).
    #[serde(default, skip_serializing, deserialize_with = "fraction")]
    pub min_fidelity: Option<f64>,
    /// Versions of a summary's text kept, the current one included; older ones are dropped. Default 16.
    #[serde(default, skip_serializing, deserialize_with = "integer::<1, _>")]
    pub max_summary_versions: Option<i64>,
    /// Ingest-time secret detection, off by default. `true`: matches of the built-in patterns for
    /// common API-key formats (OpenAI/Anthropic `sk-…`, Stripe, AWS access key ids, GitHub,
    /// GitLab, Slack, Google, Hugging Face and npm tokens, JWTs, PEM private keys) are replaced
    /// with `[REDACTED]` in new messages before they are stored, and logged. An array gives the
    /// regular expressions instead; its entry `'@builtin'` adds the built-in ones. An invalid
    /// pattern, or one matching the empty string, fails `open` with E_INVALID_CONFIG.
    #[serde(default, skip_serializing)]
    pub redact_patterns: Option<RedactPatterns>,
    /// Rolling trigger: summarise once this many messages arrived since the last summary (0 disables). Default 20.
    #[serde(default, skip_serializing, deserialize_with = "integer::<0, _>")]
    pub messages_per_summary: Option<i64>,
    /// How long one call may wait for the database (behind this engine's other writes and for
    /// another process's lock together). Default 30000.
    #[serde(default, skip_serializing, deserialize_with = "integer::<0, _>")]
    pub busy_timeout_ms: Option<i64>,
    /// Wait for another mutating operation on the same conversation before E_BUSY. Default 30000.
    #[serde(default, skip_serializing, deserialize_with = "integer::<0, _>")]
    pub lock_timeout_ms: Option<i64>,
    /// Default budget of `expand`. Default 4000.
    #[serde(default, skip_serializing, deserialize_with = "integer::<1, _>")]
    pub max_expand_tokens: Option<i64>,
    /// Directory searched first for prompt templates (then `~/.config/lcm-tui/prompts`, then built-in).
    #[serde(default, skip_serializing)]
    pub prompt_dir: Option<String>,
    /// Operator instructions given to every prompt as `CustomInstructions`. Default "".
    #[serde(default, skip_serializing)]
    pub custom_instructions: Option<String>,
    /// How `assemble` presents summaries. Default "xml".
    #[serde(default, skip_serializing)]
    pub presentation: Option<Presentation>,
    /// Recall at assembly: an assembly given the turn's message (`recallQuery`) adds excerpts of
    /// the history outside the context that match it, as one `<recalled>` block. Default true.
    #[serde(default, skip_serializing)]
    pub auto_recall: Option<bool>,
    /// Most tokens of one turn's `<recalled>` block. Default 2000.
    #[serde(default, skip_serializing, deserialize_with = "integer::<0, _>")]
    pub auto_recall_max_tokens: Option<i64>,
    /// Most of each assembly's token budget one turn's block may take (0 < x ≤ 1). Default 0.05.
    #[serde(default, skip_serializing, deserialize_with = "fraction")]
    pub auto_recall_share: Option<f64>,
    /// Least score an excerpt needs (1 ≤ x ≤ 100): a matched word counts up to 2 by its rarity
    /// in the history, an identifier or number 1 more, a value of the kind asked for 2 (in a
    /// log line 0.5), plus half the index's relevance. Default 2.
    #[serde(default, skip_serializing, deserialize_with = "overage")]
    pub auto_recall_min_score: Option<f64>,
    /// Recall also by meaning: a question that shares no word with a statement of the history
    /// reaches it through word vectors shipped in the addon. Default true.
    #[serde(default, skip_serializing)]
    pub auto_recall_meaning: Option<bool>,
    /// Which conversations recall at assembly searches: "conversation" (the one assembled) or
    /// "all" (the OpenClaw plugin sets it from its `recallScope`). Default "conversation".
    #[serde(default, skip_serializing)]
    pub auto_recall_scope: Option<crate::api::RecallScope>,
    /// Open without writing anything: no migration (a file that needs one is refused with
    /// E_SCHEMA), no checkpoints; ingest, compaction and an applying rewrite reject with
    /// E_READ_ONLY. For inspecting a database another process owns, or one on a read-only file
    /// or mount. Default false.
    #[serde(default, skip_serializing)]
    pub read_only: Option<bool>,
    /// With `readOnly`: read the file as a snapshot nobody writes (SQLite's immutable mode: no
    /// locks, no `-shm`), which opens even where its directory is not writable (a read-only
    /// mount, a backup). Another process writing the file meanwhile makes reads fail or go stale;
    /// a file with a pending write-ahead log is refused with E_IO. Default false.
    #[serde(default, skip_serializing)]
    pub immutable: Option<bool>,
    /// Write each commit's log frames in one write (lcm-native's VFS over SQLite's). `false`, or
    /// `LCM_WAL_RUNS=0` in the environment, opens the writers through SQLite's own VFS: the same
    /// file, for bisecting a field problem. Default true.
    #[serde(default, skip_serializing)]
    pub wal_runs: Option<bool>,
}

/// An integer ≥ `MIN` (JavaScript numbers arrive as floats when they are written `64.0`).
fn integer<'de, const MIN: i64, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<i64>, D::Error> {
    let value = Value::deserialize(d)?;
    let n = value
        .as_f64()
        .ok_or_else(|| D::Error::custom(format!("expected an integer, got {}", describe(&value))))?;
    if !n.is_finite() || n.fract() != 0.0 {
        return Err(D::Error::custom(format!("expected an integer, got {n}")));
    }
    if n < MIN as f64 || n > I32 as f64 {
        return Err(D::Error::custom(format!(
            "{n} is out of range; expected an integer from {MIN} to {I32}"
        )));
    }
    Ok(Some(n as i64))
}

/// A finite number in `(above, max]`.
fn number_in<'de, D: Deserializer<'de>>(d: D, above: f64, max: f64) -> std::result::Result<Option<f64>, D::Error> {
    let value = Value::deserialize(d)?;
    let n = value
        .as_f64()
        .ok_or_else(|| D::Error::custom(format!("expected a number, got {}", describe(&value))))?;
    if !n.is_finite() || n <= above || n > max {
        return Err(D::Error::custom(format!(
            "{n} is out of range; expected a number above {above} and at most {max}"
        )));
    }
    Ok(Some(n))
}

/// A number in `(0, 1]`.
fn fraction<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<f64>, D::Error> {
    number_in(d, 0.0, 1.0)
}

/// `summaryMaxOverageFactor`: a number in `(0.999, 100]`.
fn overage<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<f64>, D::Error> {
    number_in(d, 0.999, 100.0)
}

/// An IANA timezone name.
fn zone_name<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<String>, D::Error> {
    let name = String::deserialize(d)?;
    DisplayZone::parse(&name).map_err(|_| {
        D::Error::custom(format!(
            "`{name}` is not an IANA timezone name (for example `Europe/Berlin` or `UTC`)"
        ))
    })?;
    Ok(Some(name))
}

const I32: i64 = i32::MAX as i64;

/// `contextLowWater`'s default (see `LcmOptions::context_low_water`).
const DEFAULT_LOW_WATER: f64 = 0.1;

/// `Config::head_window`'s value: about the messages of a few default leaf chunks.
const HEAD_WINDOW: usize = 512;

/// `Config::shift_down_rows`' value: renumbering this many rows costs about a millisecond.
const SHIFT_DOWN_ROWS: i64 = 1_000;

/// The resolved configuration of one engine: every option with its effective value (what the
/// `config` getter shows), and what the engine derives from them.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS), ts(rename = "ResolvedConfig"))]
#[serde(rename_all = "camelCase")]
pub struct Config {
    pub db_path: String,
    pub context_threshold: f64,
    pub context_low_water: f64,
    pub fresh_tail_count: i64,
    /// Absent when unset: the tail takes a share of each call's token budget.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub fresh_tail_max_tokens: Option<i64>,
    pub leaf_min_fanout: i64,
    pub condensed_min_fanout: i64,
    pub condensed_min_fanout_hard: i64,
    pub incremental_max_depth: i64,
    pub leaf_chunk_tokens: i64,
    pub leaf_target_tokens: i64,
    pub condensed_target_tokens: i64,
    pub timezone: String,
    #[serde(skip)]
    pub zone: DisplayZone,
    pub max_sweep_iterations: i64,
    pub sweep_deadline_ms: i64,
    pub summary_timeout_ms: i64,
    pub summary_max_overage_factor: f64,
    /// Absent when unset: a host summary whose fidelity score is under it is retried once, then marked.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub min_fidelity: Option<f64>,
    /// Versions of a summary's text kept, the current one included.
    pub max_summary_versions: i64,
    pub redact_patterns: RedactPatterns,
    /// What new messages are redacted with before they are stored (from `redact_patterns`).
    #[serde(skip)]
    pub ingest_redactor: Option<crate::redact::text::Redactor>,
    pub messages_per_summary: i64,
    pub busy_timeout_ms: i64,
    pub lock_timeout_ms: i64,
    pub max_expand_tokens: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub prompt_dir: Option<String>,
    pub custom_instructions: String,
    pub presentation: Presentation,
    pub auto_recall: bool,
    pub auto_recall_max_tokens: i64,
    pub auto_recall_share: f64,
    pub auto_recall_min_score: f64,
    pub auto_recall_meaning: bool,
    pub auto_recall_scope: crate::api::RecallScope,
    /// Open without ever writing: no migration, no checkpoints; writes fail with E_READ_ONLY.
    pub read_only: bool,
    /// With `readOnly`: trust that nobody writes the file (SQLite's immutable mode).
    pub immutable: bool,
    /// Read-write connections open through lcm-native's VFS (`db::wal_runs`) unless the
    /// environment says `LCM_WAL_RUNS=0`.
    pub wal_runs: bool,
    /// Messages a compaction run reads first after the leading summaries (it reads more, in
    /// doubling windows, when its passes reach further). Not an option: tests set it to 1 to
    /// show that decisions do not depend on it.
    #[serde(skip)]
    pub head_window: usize,
    /// Rows after a write's changed span it shifts down to keep the first ordinal at 0; past
    /// that it moves the rows before the span up instead (`compaction::write`). Not an option:
    /// tests set it to 0 to make every write take the second way.
    #[serde(skip)]
    pub shift_down_rows: i64,
}

/// How an environment variable's text becomes an option's value.
#[derive(Clone, Copy)]
enum EnvText {
    Number,
    Text,
    /// `true`/`1`, `false`/`0`, or a JSON array of regular expressions.
    Patterns,
}

/// lossless-claw's environment variables (`schema::OPTIONS`' `env`): the option each sets and
/// how its text is read. (`TZ` is read after them for `timezone`; `LCM_WAL_RUNS=0` is read when
/// connections open.)
fn env_vars() -> impl Iterator<Item = (&'static str, &'static str, EnvText)> {
    schema::OPTIONS.iter().filter_map(|o| {
        let text = match o.kind {
            schema::Kind::Integer { .. } | schema::Kind::Fraction | schema::Kind::Factor => EnvText::Number,
            schema::Kind::Patterns => EnvText::Patterns,
            schema::Kind::Text | schema::Kind::Zone | schema::Kind::Word(_) | schema::Kind::Boolean => EnvText::Text,
        };
        o.env.map(|var| (o.name, var, text))
    })
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

/// Reads `value` as a `T` whose fields are options: E_INVALID_CONFIG naming the option (through
/// `label`, which `configFromEnv` uses to add the variable), with the closest known name for an
/// unknown one. `null` fields mean "not given".
fn read_options<T: DeserializeOwned>(value: Value, label: impl Fn(&str) -> String) -> Result<T> {
    let Value::Object(mut map) = value else {
        return Err(LcmError::invalid_config(
            "options",
            format!("expected an object, got {}", describe(&value)),
        ));
    };
    map.retain(|_, v| !v.is_null());
    serde_path_to_error::deserialize(Value::Object(map)).map_err(|e| {
        let option = e
            .path()
            .iter()
            .next()
            .map(|seg| seg.to_string())
            .unwrap_or_else(|| "options".into());
        LcmError::invalid_config(label(&option), crate::input::explain(&e.into_inner().to_string()))
    })
}

impl LcmOptions {
    /// Reads the JavaScript options object.
    pub(crate) fn read(value: Value) -> Result<LcmOptions> {
        read_options(value, str::to_string)
    }
}

/// The redactor of a `redactPatterns` value (`None` when it redacts nothing); E_INVALID_CONFIG
/// for a value that is not one.
pub(crate) fn redactor_of(value: &Value) -> Result<Option<crate::redact::text::Redactor>> {
    let patterns = RedactPatterns::deserialize(value).map_err(|e| LcmError::invalid_config("redactPatterns", e))?;
    Ok(patterns.redactor().expect("checked when read"))
}

impl Config {
    /// Resolves the options: defaults filled in, the timezone chosen (`timezone`, else `tz_env`,
    /// the process's `TZ`, when it names an IANA zone, else UTC), the redactor built.
    pub fn resolve(mut o: LcmOptions, tz_env: Option<&str>) -> Result<Config> {
        if let Some(url) = o.db_url.take() {
            if !crate::pg::is_url(&url) {
                return Err(LcmError::invalid_config(
                    "dbUrl",
                    "must be a postgres:// or postgresql:// URL",
                ));
            }
            if o.db_path.as_deref().is_some_and(|p| !p.trim().is_empty()) {
                return Err(LcmError::invalid_config(
                    "dbUrl",
                    "and dbPath both name a database; give one of them",
                ));
            }
            o.db_path = Some(url);
        }
        let db_path = o.db_path.unwrap_or_default();
        if db_path.trim().is_empty() {
            return Err(LcmError::invalid_config(
                "dbPath",
                "is required (a file path or a postgres:// URL in dbUrl, not empty)",
            ));
        }
        let read_only = o.read_only.unwrap_or(false);
        let immutable = o.immutable.unwrap_or(false);
        if immutable && !read_only {
            return Err(LcmError::invalid_config(
                "immutable",
                "needs readOnly: true (an immutable file cannot be written)",
            ));
        }
        let timezone = match o.timezone {
            Some(tz) => tz,
            None => tz_env
                .map(|tz| tz.trim().trim_start_matches(':'))
                .filter(|tz| !tz.is_empty() && DisplayZone::parse(tz).is_ok())
                .unwrap_or("UTC")
                .to_string(),
        };
        let redact_patterns = o.redact_patterns.unwrap_or_default();
        let context_threshold = o.context_threshold.unwrap_or(0.75);
        Ok(Config {
            db_path,
            context_threshold,
            context_low_water: o.context_low_water.unwrap_or(DEFAULT_LOW_WATER).min(context_threshold),
            fresh_tail_count: o.fresh_tail_count.unwrap_or(32),
            fresh_tail_max_tokens: o.fresh_tail_max_tokens,
            leaf_min_fanout: o.leaf_min_fanout.unwrap_or(8),
            condensed_min_fanout: o.condensed_min_fanout.unwrap_or(4),
            condensed_min_fanout_hard: o.condensed_min_fanout_hard.unwrap_or(2),
            incremental_max_depth: o.incremental_max_depth.unwrap_or(0),
            leaf_chunk_tokens: o.leaf_chunk_tokens.unwrap_or(20_000),
            leaf_target_tokens: o.leaf_target_tokens.unwrap_or(1_200),
            condensed_target_tokens: o.condensed_target_tokens.unwrap_or(2_000),
            zone: DisplayZone::parse(&timezone)?,
            timezone,
            max_sweep_iterations: o.max_sweep_iterations.unwrap_or(12),
            sweep_deadline_ms: o.sweep_deadline_ms.unwrap_or(120_000),
            summary_timeout_ms: o.summary_timeout_ms.unwrap_or(60_000),
            summary_max_overage_factor: o.summary_max_overage_factor.unwrap_or(3.0),
            min_fidelity: o.min_fidelity,
            max_summary_versions: o.max_summary_versions.unwrap_or(16),
            ingest_redactor: redact_patterns.redactor().expect("checked when read"),
            redact_patterns,
            messages_per_summary: o.messages_per_summary.unwrap_or(20),
            busy_timeout_ms: o.busy_timeout_ms.unwrap_or(30_000),
            lock_timeout_ms: o.lock_timeout_ms.unwrap_or(30_000),
            max_expand_tokens: o.max_expand_tokens.unwrap_or(4_000),
            prompt_dir: o.prompt_dir.filter(|s| !s.is_empty()),
            custom_instructions: o.custom_instructions.unwrap_or_default(),
            presentation: o.presentation.unwrap_or(Presentation::Xml),
            auto_recall: o.auto_recall.unwrap_or(true),
            auto_recall_max_tokens: o.auto_recall_max_tokens.unwrap_or(2_000),
            auto_recall_share: o.auto_recall_share.unwrap_or(0.05),
            auto_recall_min_score: o.auto_recall_min_score.unwrap_or(2.0),
            auto_recall_meaning: o.auto_recall_meaning.unwrap_or(true),
            auto_recall_scope: o.auto_recall_scope.unwrap_or_default(),
            read_only,
            immutable,
            wal_runs: o.wal_runs.unwrap_or(true),
            head_window: HEAD_WINDOW,
            shift_down_rows: SHIFT_DOWN_ROWS,
        })
    }

    /// The options of a tool that needs no database (`renderPrompt`): `options` resolved as
    /// `open` resolves them, `dbPath` not required.
    pub(crate) fn without_database(options: Option<&Value>) -> Result<Config> {
        let mut o = match options {
            Some(v) => LcmOptions::read(v.clone())?,
            None => LcmOptions::default(),
        };
        if o.db_path.is_none() && o.db_url.is_none() {
            o.db_path = Some(":memory:".into());
        }
        Config::resolve(o, std::env::var("TZ").ok().as_deref())
    }

    /// Reads and resolves an options object (tests and tools).
    pub fn from_options(options: &Value, tz_env: Option<&str>) -> Result<Config> {
        Config::resolve(LcmOptions::read(options.clone())?, tz_env)
    }

    /// The effective options as a JSON object (camelCase names, like the input).
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).expect("a config serialises")
    }

    /// A config with every default, for tests and tools.
    pub fn with_db_path(db_path: &str) -> Config {
        let options = LcmOptions {
            db_path: Some(db_path.to_string()),
            ..LcmOptions::default()
        };
        Config::resolve(options, None).expect("defaults are valid")
    }
}

/// Reads lossless-claw's environment variables (`LCM_*`, then `TZ` for the timezone) into an
/// options object. Only variables that are set appear. A malformed value is an
/// E_INVALID_CONFIG error naming the variable.
pub(crate) fn config_from_env(get: impl Fn(&str) -> Option<String>) -> Result<Map<String, Value>> {
    let mut out = Map::new();
    for (name, var, text) in env_vars() {
        let Some(raw) = get(var).filter(|v| !v.trim().is_empty()) else {
            continue;
        };
        let raw = raw.trim();
        let bad = |why: &str| LcmError::invalid_config(format!("{name} (from {var})"), why);
        let value = match text {
            EnvText::Number => match (raw.parse::<i64>(), raw.parse::<f64>()) {
                (Ok(i), _) => Value::from(i),
                (_, Ok(n)) => Value::from(n),
                _ => return Err(bad(&format!("{raw:?} is not a number"))),
            },
            EnvText::Patterns => match raw {
                "true" | "1" => Value::Bool(true),
                "false" | "0" => Value::Bool(false),
                _ => serde_json::from_str(raw)
                    .map_err(|_| bad("expected true, false or a JSON array of regular expressions"))?,
            },
            EnvText::Text => Value::from(raw),
        };
        out.insert(name.into(), value);
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
    // Checked as `open` checks them, each error naming its variable.
    let var_of = |option: &str| match env_vars().find(|(name, ..)| *name == option) {
        Some((_, var, _)) => format!("{option} (from {var})"),
        None => format!("{option} (from TZ)"),
    };
    read_options::<LcmOptions>(Value::Object(out.clone()), var_of)?;
    Ok(out)
}

/// lossless-claw 0.15's variable for `incrementalMaxDepth`, read before `LCM_INCREMENTAL_MAX_DEPTH`.
const SWEEP_MAX_DEPTH_VAR: &str = "LCM_SWEEP_MAX_DEPTH";

/// `base` (options from a configuration file, as the OpenClaw plugin's entry gives them) with
/// the environment over it, as lossless-claw layers them: every `LCM_*` variable that is set
/// replaces its option; `LCM_SWEEP_MAX_DEPTH` replaces `incrementalMaxDepth` ahead of
/// `LCM_INCREMENTAL_MAX_DEPTH`; `TZ` (the system's zone, not an LCM setting) names the zone
/// only when neither `base` nor `LCM_TIMEZONE` does. Errors name the variable.
pub(crate) fn layer_env(base: Map<String, Value>, get: impl Fn(&str) -> Option<String>) -> Result<Map<String, Value>> {
    let set = |var: &str| get(var).filter(|v| !v.trim().is_empty());
    let mut from_env = config_from_env(&get)?;
    if base.contains_key("timezone") && set("LCM_TIMEZONE").is_none() {
        from_env.remove("timezone");
    }
    if let Some(raw) = set(SWEEP_MAX_DEPTH_VAR) {
        let depth = raw.trim().parse::<i64>().ok().filter(|d| *d >= -1).ok_or_else(|| {
            LcmError::invalid_config(
                format!("incrementalMaxDepth (from {SWEEP_MAX_DEPTH_VAR})"),
                format!("{:?} is not an integer >= -1", raw.trim()),
            )
        })?;
        from_env.insert("incrementalMaxDepth".into(), Value::from(depth));
    }
    let mut out = base;
    out.extend(from_env);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::collections::HashMap;

    /// A configuration with the environment over it: a variable replaces its option, the rest
    /// stays; TZ names the zone only when nothing else does; lossless-claw 0.15's depth
    /// variable goes over LCM_INCREMENTAL_MAX_DEPTH; a bad value names its variable.
    #[test]
    fn the_environment_goes_over_a_configuration_as_lossless_claw_layers_them() {
        let env: HashMap<&str, &str> = HashMap::from([
            ("LCM_FRESH_TAIL_COUNT", "48"),
            ("TZ", "America/Chicago"),
            ("LCM_SWEEP_MAX_DEPTH", "2"),
            ("LCM_INCREMENTAL_MAX_DEPTH", "1"),
        ]);
        let get = |k: &str| env.get(k).map(|v| v.to_string());
        let base = |v: Value| v.as_object().unwrap().clone();
        let m = layer_env(
            base(json!({"freshTailCount": 16, "leafMinFanout": 6, "timezone": "Europe/Berlin"})),
            get,
        )
        .unwrap();
        assert_eq!(m["freshTailCount"], 48);
        assert_eq!(m["leafMinFanout"], 6);
        assert_eq!(m["timezone"], "Europe/Berlin");
        assert_eq!(m["incrementalMaxDepth"], 2);
        assert_eq!(layer_env(base(json!({})), get).unwrap()["timezone"], "America/Chicago");
        let bad = |k: &str| (k == "LCM_SWEEP_MAX_DEPTH").then(|| "-2".to_string());
        let err = layer_env(base(json!({})), bad).unwrap_err();
        assert_eq!(err.code(), "E_INVALID_CONFIG");
        assert!(
            err.to_string()
                .contains("incrementalMaxDepth (from LCM_SWEEP_MAX_DEPTH)"),
            "{err}"
        );
    }

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

    /// `dbUrl` (or `LCM_DATABASE_URL`) is the database when no `dbPath` is given.
    #[test]
    fn a_database_url_is_the_database() {
        let url = "postgres://lcm@db.example/agents?schema=team";
        let c = Config::from_options(&json!({ "dbUrl": url }), None).unwrap();
        assert_eq!(c.db_path, url);
        let env: HashMap<&str, &str> = [("LCM_DATABASE_URL", url)].into();
        let from_env = config_from_env(|k| env.get(k).map(|v| v.to_string())).unwrap();
        assert_eq!(from_env["dbUrl"], json!(url));
        let c = Config::from_options(&Value::Object(from_env), None).unwrap();
        assert_eq!(c.db_path, url);
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
            (json!({"dbUrl": "mysql://x/y"}), "dbUrl"),
            (json!({"dbUrl": "postgres://x/y", "dbPath": "/x"}), "dbUrl"),
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
    use serde_json::json;

    /// Every option's name: from serde's list of the fields `LcmOptions` takes.
    fn option_names() -> Vec<String> {
        let err = serde_json::from_value::<LcmOptions>(json!({ "-": 1 }))
            .unwrap_err()
            .to_string();
        err.split('`').skip(3).step_by(2).map(str::to_string).collect()
    }

    /// The resolved configuration shows every option (the unset ones when set).
    #[test]
    fn resolved_config_shows_every_option() {
        let all = Config::from_options(
            &json!({"dbPath": "x.db", "freshTailMaxTokens": 1, "minFidelity": 0.5, "promptDir": "p"}),
            None,
        )
        .unwrap()
        .to_json();
        let shown: Vec<&String> = all.as_object().unwrap().keys().collect();
        let names = option_names();
        assert_eq!(names.len(), 37, "{names:?}");
        // `dbUrl` is shown as the `dbPath` it becomes.
        assert_eq!(shown, names.iter().filter(|n| *n != "dbUrl").collect::<Vec<_>>());
        for (name, ..) in env_vars() {
            assert!(
                names.iter().any(|n| n == name),
                "schema::OPTIONS names an unknown option {name}"
            );
        }
    }

    /// The README's option table must list every option with its default and variable.
    #[test]
    fn readme_documents_every_option() {
        let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
        // The engine's table, not the OpenClaw plugin's (which comes earlier).
        let section = readme
            .split_once("\n## Configuration\n")
            .expect("README has a Configuration section")
            .1;
        let defaults = Config::with_db_path("x.db").to_json();
        for name in option_names() {
            let row = section
                .lines()
                .find(|l| l.starts_with(&format!("| `{name}` |")))
                .unwrap_or_else(|| panic!("README has no row for `{name}`"));
            let default = match (name.as_str(), &defaults[&name]) {
                ("dbPath", _) => "required".to_string(),
                (_, Value::Null) => "unset".to_string(),
                (_, Value::Number(n)) if n.as_f64().is_some_and(|f| f.fract() == 0.0) => {
                    format!("{}", n.as_f64().unwrap() as i64)
                }
                (_, Value::String(s)) => s.clone(),
                (_, v) => v.to_string(),
            };
            assert!(
                row.contains(&default),
                "README row of `{name}` lacks its default {default}: {row}"
            );
            if let Some((_, env, _)) = env_vars().find(|(n, ..)| *n == name) {
                assert!(row.contains(env), "README row of `{name}` lacks {env}");
            }
        }
    }
}
