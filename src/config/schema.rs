//! Every option `LcmEngine.open` takes, described once: its environment variable, the values it
//! accepts, its default and what it does. The OpenClaw plugin's manifest (its config schema and
//! form hints) and the README's plugin table are generated from this table
//! (`scripts/options.cjs`, through `engineOptionSchema()`), `configFromEnv` reads the variables
//! named here, and the tests below hold the table to what `LcmOptions` accepts and `Config`
//! fills in.

use serde_json::{json, Map, Value};

/// The values an option accepts (as `LcmOptions`' deserializers check them).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Kind {
    /// An integer from `min` to `i32::MAX`.
    Integer {
        min: i64,
    },
    /// A number above 0 and at most 1.
    Fraction,
    /// A number from 1 to 100 (`summaryMaxOverageFactor`).
    Factor,
    /// Text (a path, a URL, instructions).
    Text,
    /// An IANA zone name.
    Zone,
    /// One of these words.
    Word(&'static [&'static str]),
    Boolean,
    /// `true`/`false`, or a list of regular expressions (`redactPatterns`).
    Patterns,
}

/// An option's default, as the README and the manifest state it.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Stated {
    /// This value (JSON), which `Config` resolves to.
    Value(&'static str),
    /// Worked out when it is used (`freshTailMaxTokens`), or nothing at all.
    Derived(&'static str),
    /// Off unless set.
    Off,
    /// Nothing unless set (a directory, instructions).
    Unset,
}

/// One option.
#[derive(Clone, Copy, Debug)]
pub(crate) struct OptionDoc {
    pub name: &'static str,
    /// lossless-claw's environment variable for it, read by `configFromEnv`.
    pub env: Option<&'static str>,
    pub kind: Kind,
    pub default: Stated,
    /// What it does, in a sentence or two (the manifest's description, before its variable
    /// and default).
    pub about: &'static str,
    /// Said after the default (a bound that depends on another option).
    pub note: Option<&'static str>,
    /// The OpenClaw plugin passes it through from its config as it is.
    pub plugin: bool,
}

const fn opt(
    name: &'static str,
    env: Option<&'static str>,
    kind: Kind,
    default: Stated,
    about: &'static str,
) -> OptionDoc {
    OptionDoc {
        name,
        env,
        kind,
        default,
        about,
        note: None,
        plugin: true,
    }
}

const fn engine_only(o: OptionDoc) -> OptionDoc {
    OptionDoc { plugin: false, ..o }
}

const fn noted(o: OptionDoc, note: &'static str) -> OptionDoc {
    OptionDoc { note: Some(note), ..o }
}

use Kind::*;
use Stated::{Derived, Off, Unset, Value as Is};

/// Every option, in the order `LcmOptions` declares them.
pub(crate) const OPTIONS: &[OptionDoc] = &[
    engine_only(opt("dbPath", Some("LCM_DATABASE_PATH"), Text, Derived("required"), "Path of the SQLite file (its directory must exist), or a postgres:// URL.")),
    engine_only(opt("dbUrl", Some("LCM_DATABASE_URL"), Text, Unset, "A PostgreSQL database instead of a file (postgres://user:password@host:port/db?schema=lcm; over a network add sslmode=verify-full&sslrootcert=/path/to/ca.pem, through PgBouncer in transaction mode pooler=transaction).")),
    opt("contextThreshold", Some("LCM_CONTEXT_THRESHOLD"), Fraction, Is("0.75"), "Fraction of the token budget above which maintenance compacts."),
    noted(
        opt("contextLowWater", Some("LCM_CONTEXT_LOW_WATER"), Fraction, Is("0.1"), "Fraction of the token budget maintenance compacts down to, in one go, once past contextThreshold."),
        "at most contextThreshold",
    ),
    opt("freshTailCount", Some("LCM_FRESH_TAIL_COUNT"), Integer { min: 0 }, Is("32"), "Newest raw messages kept out of leaf passes; a sweep down to contextLowWater may take the older of them, never the newest turn."),
    opt("freshTailMaxTokens", Some("LCM_FRESH_TAIL_MAX_TOKENS"), Integer { min: 0 }, Derived("40% of the token budget"), "Most tokens the fresh tail holds; it always keeps the newest turn."),
    opt("leafMinFanout", Some("LCM_LEAF_MIN_FANOUT"), Integer { min: 2 }, Is("8"), "Leaf summaries condensed into one depth-1 summary."),
    opt("condensedMinFanout", Some("LCM_CONDENSED_MIN_FANOUT"), Integer { min: 2 }, Is("4"), "Summaries of depth >= 1 condensed into one."),
    opt("condensedMinFanoutHard", Some("LCM_CONDENSED_MIN_FANOUT_HARD"), Integer { min: 2 }, Is("2"), "Fanout under pressure."),
    opt("incrementalMaxDepth", Some("LCM_INCREMENTAL_MAX_DEPTH"), Integer { min: -1 }, Is("0"), "Depths condensed right after a leaf pass; -1 unlimited."),
    opt("leafChunkTokens", Some("LCM_LEAF_CHUNK_TOKENS"), Integer { min: 1 }, Is("20000"), "Raw tokens outside the fresh tail that make one leaf chunk."),
    opt("leafTargetTokens", Some("LCM_LEAF_TARGET_TOKENS"), Integer { min: 1 }, Is("1200"), "Upper bound of a leaf summary's length."),
    noted(
        opt("condensedTargetTokens", Some("LCM_CONDENSED_TARGET_TOKENS"), Integer { min: 1 }, Is("2000"), "Target length of a condensed summary."),
        "at least 512 is asked for",
    ),
    opt("timezone", Some("LCM_TIMEZONE"), Zone, Derived("TZ when it names a zone, else UTC"), "IANA zone of the times shown to the model."),
    opt("maxSweepIterations", Some("LCM_MAX_SWEEP_ITERATIONS"), Integer { min: 1 }, Is("12"), "Most passes in one compaction."),
    opt("sweepDeadlineMs", Some("LCM_SWEEP_DEADLINE_MS"), Integer { min: 1 }, Is("120000"), "Wall-clock bound of one compaction."),
    opt("summaryTimeoutMs", Some("LCM_SUMMARY_TIMEOUT_MS"), Integer { min: 1 }, Is("60000"), "How long one summary call may take; past it the plugin writes its deterministic fallback."),
    opt("summaryMaxOverageFactor", Some("LCM_SUMMARY_MAX_OVERAGE_FACTOR"), Factor, Is("3"), "A summary longer than this x its target is capped."),
    opt("minFidelity", Some("LCM_MIN_FIDELITY"), Fraction, Off, "A summary keeping less of its source's identifiers is asked for again, then marked for repair."),
    opt("maxSummaryVersions", Some("LCM_MAX_SUMMARY_VERSIONS"), Integer { min: 1 }, Is("16"), "Versions of a summary's text kept, the current one included."),
    opt("redactPatterns", Some("LCM_REDACT_PATTERNS"), Patterns, Off, "true: common API-key formats in new messages are replaced with [REDACTED] before they are stored; an array: your regular expressions (\"@builtin\" adds the built-in ones)."),
    engine_only(opt("messagesPerSummary", None, Integer { min: 0 }, Is("20"), "Rolling trigger: summarise once this many messages arrived since the last summary (0 disables).")),
    opt("busyTimeoutMs", None, Integer { min: 0 }, Is("30000"), "How long one call waits for the database: for this engine's other writes and for another process's lock together."),
    opt("lockTimeoutMs", None, Integer { min: 0 }, Is("30000"), "How long an operation waits for another on the same conversation."),
    opt("maxExpandTokens", Some("LCM_MAX_EXPAND_TOKENS"), Integer { min: 1 }, Is("4000"), "Default budget of lcm_expand."),
    opt("promptDir", None, Text, Unset, "Directory of prompt template overrides (then ~/.config/lcm-tui/prompts, then the built-in ones)."),
    opt("customInstructions", Some("LCM_CUSTOM_INSTRUCTIONS"), Text, Unset, "Instructions added to every summary prompt."),
    opt("presentation", None, Word(&["xml", "markdown"]), Is("\"xml\""), "How summaries are shown to the model: xml (<summary> blocks) or markdown."),
    opt("autoRecall", None, Boolean, Is("true"), "Recall at assembly: each turn's context gets excerpts of the history outside it that match the turn's message, as one <recalled> block (nothing when nothing matches)."),
    opt("autoRecallMaxTokens", None, Integer { min: 0 }, Is("2000"), "Most tokens of one turn's <recalled> block."),
    opt("autoRecallShare", None, Fraction, Is("0.05"), "Most of the token budget one turn's <recalled> block may take."),
    opt("autoRecallMinScore", None, Factor, Is("2"), "Least score an excerpt needs: a matched word counts up to 2 by its rarity in the history, an identifier or number 1 more, a value of the kind asked for 2 (in a log line 0.5), plus half the index's relevance."),
    opt("autoRecallMeaning", None, Boolean, Is("true"), "Recall also by meaning: a question that shares no word with a statement of the history reaches it through word vectors shipped in the addon (at most one excerpt per sentence of the message)."),
    engine_only(opt("autoRecallScope", None, Word(&["conversation", "all"]), Is("\"conversation\""), "Which conversations recall at assembly searches: the one assembled, or all of them (the plugin sets it from its recallScope).")),
    engine_only(opt("readOnly", None, Boolean, Is("false"), "Open without writing anything.")),
    engine_only(opt("immutable", None, Boolean, Is("false"), "With readOnly: read the file as a snapshot nobody writes.")),
    engine_only(opt("walRuns", None, Boolean, Is("true"), "Write each commit's log frames in one write (LCM_WAL_RUNS=0 turns it off).")),
];

/// Integers are bounded by what every host handles as a 32-bit integer.
pub(crate) const INTEGER_MAX: i64 = i32::MAX as i64;

impl OptionDoc {
    /// The sentence the manifest and the README's plugin table show: what it does, then its
    /// variable and default.
    pub(crate) fn description(&self) -> String {
        let default = match self.default {
            Is(v) => Some(format!("default {}", v.trim_matches('"'))),
            Derived(text) => Some(format!("default {text}")),
            Off | Unset => None,
        };
        let tail: Vec<String> = self.env.map(str::to_string).into_iter().chain(default).collect();
        let mut tail = tail.join(", ");
        if matches!(self.default, Off) {
            tail = if tail.is_empty() {
                "off unless set".into()
            } else {
                format!("{tail}; off unless set")
            };
        }
        if let Some(note) = self.note {
            tail = format!("{tail}; {note}");
        }
        let about = self.about.trim_end_matches('.');
        match tail.is_empty() {
            true => format!("{about}."),
            false => format!("{about} ({tail})."),
        }
    }

    /// Its JSON Schema, as the manifest's `configSchema` holds it.
    pub(crate) fn schema(&self) -> Value {
        let mut s = match self.kind {
            Integer { min } => json!({ "type": "integer", "minimum": min, "maximum": INTEGER_MAX }),
            Fraction => json!({ "type": "number", "exclusiveMinimum": 0, "maximum": 1 }),
            Factor => json!({ "type": "number", "minimum": 1, "maximum": 100 }),
            Text | Zone => json!({ "type": "string" }),
            Word(words) => json!({ "type": "string", "enum": words }),
            Boolean => json!({ "type": "boolean" }),
            Patterns => json!({ "type": ["boolean", "array"], "items": { "type": "string", "minLength": 1 } }),
        };
        if let Is(v) = self.default {
            s["default"] = serde_json::from_str(v).expect("a default is JSON");
        }
        s["description"] = self.description().into();
        s
    }
}

/// The options the OpenClaw plugin passes through, each with its JSON Schema
/// (`engineOptionSchema()`), in the table's order.
pub(crate) fn plugin_schema() -> Map<String, Value> {
    OPTIONS
        .iter()
        .filter(|o| o.plugin)
        .map(|o| (o.name.to_string(), o.schema()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Config, LcmOptions};

    fn read(options: Value) -> crate::error::Result<LcmOptions> {
        LcmOptions::read(options)
    }

    /// The table names every option `LcmOptions` takes, in its order, and nothing else.
    #[test]
    fn the_table_names_every_option() {
        let err = serde_json::from_value::<LcmOptions>(json!({ "-": 1 }))
            .unwrap_err()
            .to_string();
        let fields: Vec<&str> = err.split('`').skip(3).step_by(2).collect();
        let names: Vec<&str> = OPTIONS.iter().map(|o| o.name).collect();
        assert_eq!(names, fields);
    }

    /// The bounds the table states are the ones `open` enforces.
    #[test]
    fn the_stated_bounds_are_enforced() {
        for o in OPTIONS {
            let ok = |v: Value| {
                read(json!({ o.name: v.clone() }))
                    .map(|_| ())
                    .map_err(|e| format!("{} = {v}: {e}", o.name))
            };
            let refused = |v: Value| {
                let e = read(json!({ o.name: v.clone() })).err();
                assert!(
                    e.is_some_and(|e| e.code() == "E_INVALID_CONFIG"),
                    "{} = {v} was accepted",
                    o.name
                );
            };
            match o.kind {
                Integer { min } => {
                    ok(json!(min)).unwrap();
                    ok(json!(INTEGER_MAX)).unwrap();
                    refused(json!(min - 1));
                    refused(json!(INTEGER_MAX + 1));
                    refused(json!(min as f64 + 0.5));
                }
                Fraction => {
                    ok(json!(1)).unwrap();
                    ok(json!(0.001)).unwrap();
                    refused(json!(0));
                    refused(json!(1.001));
                }
                Factor => {
                    ok(json!(1)).unwrap();
                    ok(json!(100)).unwrap();
                    refused(json!(0.5));
                    refused(json!(100.5));
                }
                Text => ok(json!("some text")).unwrap(),
                Zone => {
                    ok(json!("Europe/Berlin")).unwrap();
                    refused(json!("Nowhere/Special"));
                }
                Word(words) => {
                    for w in words {
                        ok(json!(w)).unwrap();
                    }
                    refused(json!("none-of-them"));
                }
                Boolean => {
                    ok(json!(true)).unwrap();
                    refused(json!("yes"));
                }
                Patterns => {
                    ok(json!(true)).unwrap();
                    ok(json!(["sk-[a-z]+"])).unwrap();
                    refused(json!([""]));
                }
            }
        }
    }

    /// A default the table states is the one `Config` fills in.
    #[test]
    fn the_stated_defaults_are_the_resolved_ones() {
        let resolved = Config::from_options(&json!({ "dbPath": "x.db" }), None)
            .unwrap()
            .to_json();
        for o in OPTIONS {
            let shown = &resolved[o.name];
            match o.default {
                Is(v) => {
                    let v: Value = serde_json::from_str(v).unwrap();
                    let same = match (shown.as_f64(), v.as_f64()) {
                        (Some(a), Some(b)) => a == b,
                        _ => *shown == v,
                    };
                    assert!(same, "{}: the table says {v}, Config resolves {shown}", o.name);
                }
                Off => assert!(
                    shown.is_null() || *shown == json!(false),
                    "{}: the table says off, Config resolves {shown}",
                    o.name
                ),
                Unset => assert!(
                    shown.is_null() || shown == "" || o.name == "dbUrl",
                    "{}: the table says unset, Config resolves {shown}",
                    o.name
                ),
                Derived(_) => {}
            }
        }
    }

    #[test]
    fn a_description_says_the_variable_and_the_default() {
        let by = |name: &str| OPTIONS.iter().find(|o| o.name == name).unwrap().description();
        assert_eq!(
            by("contextLowWater"),
            "Fraction of the token budget maintenance compacts down to, in one go, once past contextThreshold (LCM_CONTEXT_LOW_WATER, default 0.1; at most contextThreshold)."
        );
        assert_eq!(
            by("lockTimeoutMs"),
            "How long an operation waits for another on the same conversation (default 30000)."
        );
        assert_eq!(
            by("promptDir"),
            "Directory of prompt template overrides (then ~/.config/lcm-tui/prompts, then the built-in ones)."
        );
        assert_eq!(by("minFidelity"), "A summary keeping less of its source's identifiers is asked for again, then marked for repair (LCM_MIN_FIDELITY; off unless set).");
        let schema = plugin_schema();
        assert_eq!(schema["presentation"]["default"], "xml");
        assert!(schema.get("dbPath").is_none() && schema.get("readOnly").is_none());
    }
}
