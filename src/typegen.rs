//! Writes the typed surface of the JavaScript API (the part of `src/types.d.ts` below
//! [`MARKER`]) from the Rust types serde reads and writes: every call's options (the input
//! structs of `input`'s convention) and every result, so the two cannot drift: the test fails
//! when the committed file differs, and `npm run types` rewrites it (then `npm run build`
//! carries it into `index.d.ts`). Above the marker stay the host's shapes the core reads part
//! by part (messages, the conversation target, the summarizer callback).
//!
//! ts-rs renders each type on one line; [`pretty`] lays it out as the rest of the file is.

use std::path::Path;
use std::sync::LazyLock as Lazy;

use regex::Regex;
use ts_rs::{Config, TS};

/// The line that starts the generated part of `src/types.d.ts`.
const MARKER: &str =
    "/* ---- Generated from the Rust types by src/typegen.rs (`npm run types`); do not edit below. ---- */";

/// One exported declaration: its JSDoc and its laid-out declaration. With a `base` (a struct
/// serde flattens into this one), the base's fields, which ts-rs appends, become `extends`.
fn declaration<T: TS + 'static>(cfg: &Config, base: Option<(String, String)>) -> String {
    let docs = T::docs()
        .map(|d| take_docs(d.trim()).0.join("\n") + "\n")
        .unwrap_or_default();
    format!("{docs}export {}", pretty(&T::decl(cfg), base))
}

/// `declarations![cfg; A, B: Base, …]`: each type in order; `B: Base` when B flattens Base.
macro_rules! declarations {
    ($cfg:expr; $($ty:ty $(: $base:ty)?),* $(,)?) => {
        vec![$(declaration::<$ty>($cfg, None $(.or(Some((<$base as TS>::ident($cfg), <$base as TS>::inline($cfg)))))?)),*]
    };
}

/// Every generated input type: what JavaScript passes in, as the core reads it (`input`).
fn generated_inputs(cfg: &Config) -> Vec<String> {
    use crate::api::{
        AssembleOptions, CompactOptions, CopyOptions, DescribeOptions, EvaluateOptions, ExpandOptions, ExportOptions,
        FoldOptions, GrepOptions, IngestOptions, MessagePage, MigrateOptions, Mode, PassOptions, Presentation,
        PreviewOptions, PromptOptions, RecallScope, RedactRequest, ResetKind, ResetRequest, RewriteRequest, Scope,
        ScoreScope, Sort, SummaryFilter, SweepTarget, TextRequest, TurnRecord,
    };
    use crate::config::{Config, LcmOptions, RedactPatterns};
    use crate::summarizer::TimeoutPolicy;
    declarations![cfg;
        Presentation, RecallScope, RedactPatterns, LcmOptions, Config, IngestOptions, TurnRecord, MessagePage, TextRequest, SummaryFilter, ScoreScope, PassOptions, SweepTarget,
        CompactOptions, AssembleOptions, EvaluateOptions, Mode, Scope, Sort, GrepOptions, DescribeOptions, ExpandOptions, RewriteRequest, PreviewOptions, RedactRequest, ResetKind,
        ResetRequest, MigrateOptions, PromptOptions, ExportOptions, TimeoutPolicy, CopyOptions, FoldOptions,
    ]
}

/// Every generated type, in the order a reader meets them.
fn generated() -> String {
    use crate::api::{
        ChainLink, ContextFit, CopyReport, CoveredMessages, DepthFidelity, Description, DrainReport, Entry, Evaluation,
        Expansion, FoldReport, GrepHit, GrepPartial, GrepResult, HeldTurn, IngestResult, InputRef, ItemKind,
        LeafTrigger, Level, LockState, MessageDescription, MessageTextPage, PartInfo, PassFailure, PassResult,
        Progress, PromptSource, PromptText, RecallHit, RecallStats, RedactionResult, RewriteEntry, RewritePreview,
        RewriteResult, RollingTrigger, ScoreReport, SearchedBy, SequenceValue, SpoolStatus, StopReason,
        SummaryDescription, SweepResult, TableDigest,
    };
    use crate::assemble::{repair::RepairStats, AssembleStats, Assembled};
    use crate::db::migrate::{BackfillReport, MigrationReport};
    use crate::fidelity::Fidelity;
    use crate::history::{Reason, SummaryVersion, TemplateRef};
    use crate::live::ContextEntry;
    use crate::prompts::PromptVars;
    use crate::store::fidelity_scores::StoredFidelity;
    use crate::store::{
        conversations::{ConversationInfo, SessionConversation},
        copies::{FoldedCopies, KeptCopy, StoredCopy},
        dag::{DagNode, MessageSpan},
        lifecycle::SessionReset,
        messages::{FoldedText, IngestOutcome, StoredMessage},
        prompt_cache::PromptCacheReport,
        summaries::{SummaryFields, SummaryRecord},
        verify::VerifyReport,
    };
    use crate::summarizer::{SummarizeRequest, SummaryKind};

    let cfg = &Config::new().with_large_int("number");
    let all = declarations![cfg;
        IngestOutcome, IngestResult: IngestOutcome, SessionConversation, FoldedText, StoredMessage, MessageTextPage, BackfillReport,
        MigrationReport, SummaryKind, SummaryFields, SummaryRecord: SummaryFields, Fidelity,
        StoredFidelity: Fidelity, DepthFidelity, ScoreReport, PromptCacheReport, ConversationInfo, SummarizeRequest, Level,
        PassFailure, PassResult, StopReason, ContextFit, SweepResult, LeafTrigger, RollingTrigger, Evaluation,
        StoredCopy, KeptCopy, FoldedCopies, FoldReport: FoldedCopies, VerifyReport, PromptVars, PromptSource, PromptText: PromptSource, ItemKind, ContextEntry, RepairStats,
        RecallHit, RecallStats, AssembleStats: RepairStats, Assembled, SearchedBy, GrepHit, GrepPartial, GrepResult, ChainLink, InputRef,
        CoveredMessages, SummaryDescription: SummaryRecord, PartInfo, MessageDescription: StoredMessage,
        Description, Entry, Expansion, Progress, RewriteEntry, RewriteResult, RewritePreview, Reason,
        TemplateRef, SummaryVersion, RedactionResult, MessageSpan, DagNode: SummaryRecord, SessionReset,
        TableDigest, SequenceValue, CopyReport, LockState, SpoolStatus, HeldTurn, DrainReport,
    ];
    let all: Vec<String> = generated_inputs(cfg).into_iter().chain(all).collect();
    format!("{MARKER}\n\n{}\n", all.join("\n\n"))
}

/// Lays out one ts-rs declaration (`type X = { a: T, /** doc */ b: U, };`): an object type
/// becomes an interface with a field per line (extending `base`, whose fields ts-rs put
/// last); a union long enough takes a line per member; anything else stays one line.
fn pretty(decl: &str, base: Option<(String, String)>) -> String {
    let decl = decl.trim().trim_end_matches(';');
    let (head, body) = decl.split_once(" = ").expect("a ts-rs declaration");
    let name = head.trim_start_matches("type ").trim();
    let body = body.trim();
    if let Some(inner) = whole_object(body) {
        let mut fields = split_top(inner, ',');
        let mut head = format!("interface {name}");
        if let Some((base, base_body)) = base {
            let base_fields = split_top(whole_object(&base_body).expect("an object base"), ',');
            let own = fields
                .len()
                .checked_sub(base_fields.len())
                .filter(|&n| fields[n..] == base_fields[..]);
            let own = own.unwrap_or_else(|| panic!("{name} does not end with the fields of {base}"));
            fields.truncate(own);
            head = format!("{head} extends {base}");
        }
        return format!("{head} {}", object(&fields, ""));
    }
    let members = split_top(body, '|');
    let one_line = format!("type {name} = {}", inline(body));
    if members.len() > 1 && (one_line.len() > 100 || body.contains("/**")) {
        let mut out = format!("type {name} =");
        for m in members {
            match whole_object(&m) {
                Some(inner) if m.contains("/**") => {
                    out.push_str(&format!("\n  | {}", object(&split_top(inner, ','), "    ")))
                }
                _ => out.push_str(&format!("\n  | {}", inline(&m))),
            }
        }
        return out;
    }
    one_line
}

/// `{`, a field per line (its docs above it) indented under `indent`, `}`.
fn object(fields: &[String], indent: &str) -> String {
    let mut out = String::from("{\n");
    for field in fields {
        let (docs, field) = take_docs(field);
        for line in docs {
            out.push_str(&format!("{indent}  {line}\n"));
        }
        out.push_str(&format!("{indent}  {}\n", inline(field)));
    }
    out.push_str(indent);
    out.push('}');
    out
}

/// The inside of `body` when `body` is one `{ … }` and nothing else.
fn whole_object(body: &str) -> Option<&str> {
    let inner = body.strip_prefix('{')?.strip_suffix('}')?;
    // `{ a } & { b }` starts and ends with braces too: the first brace must close at the end.
    let mut depth = 0usize;
    for (i, c) in scan(body) {
        match c {
            '{' | '(' | '[' | '<' => depth += 1,
            '}' | ')' | ']' | '>' => {
                depth -= 1;
                if depth == 0 && i != body.len() - 1 {
                    return None;
                }
            }
            _ => {}
        }
    }
    Some(inner)
}

/// The characters of `s` outside comments and string literals, with their byte offsets.
fn scan(s: &str) -> Vec<(usize, char)> {
    let mut out = Vec::new();
    let mut chars = s.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        match c {
            '/' if s[i..].starts_with("/**") => {
                let end = s[i..].find("*/").map_or(s.len(), |e| i + e + 2);
                while chars.peek().is_some_and(|&(j, _)| j < end) {
                    chars.next();
                }
            }
            '"' => {
                while let Some((_, d)) = chars.next() {
                    if d == '\\' {
                        chars.next();
                    } else if d == '"' {
                        break;
                    }
                }
            }
            // `=>` of a function type is not a closing bracket.
            '>' if i > 0 && s.as_bytes()[i - 1] == b'=' => {}
            _ => out.push((i, c)),
        }
    }
    out
}

/// Splits `s` at `sep` outside brackets, comments and strings; drops empty pieces.
fn split_top(s: &str, sep: char) -> Vec<String> {
    let mut pieces = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (i, c) in scan(s) {
        match c {
            '{' | '(' | '[' | '<' => depth += 1,
            '}' | ')' | ']' | '>' => depth -= 1,
            c if c == sep && depth == 0 => {
                pieces.push(s[start..i].trim().to_string());
                start = i + 1;
            }
            _ => {}
        }
    }
    pieces.push(s[start..].trim().to_string());
    pieces.retain(|p| !p.is_empty());
    pieces
}

/// Splits a leading `/** … */` off a field, as lines (` * ` continuation lines kept aligned).
fn take_docs(field: &str) -> (Vec<String>, &str) {
    let Some(rest) = field.strip_prefix("/**") else {
        return (Vec::new(), field);
    };
    let end = rest.find("*/").expect("a closed doc comment");
    let lines: Vec<String> = rest[..end]
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|l| l.to_string())
        .collect();
    let text: Vec<&str> = lines.iter().map(|l| l.trim_start_matches('*').trim()).collect();
    let docs = if text.len() == 1 {
        vec![format!("/** {} */", text[0])]
    } else {
        let mut out = vec!["/**".to_string()];
        out.extend(text.iter().map(|t| {
            if t.is_empty() {
                " *".to_string()
            } else {
                format!(" * {t}")
            }
        }));
        out.push(" */".to_string());
        out
    };
    (docs, rest[end + 2..].trim())
}

/// One line of a type in the file's style: whitespace collapsed, no trailing comma in nested
/// objects, `T[]` for `Array<T>`, bare keys and single-quoted literals.
fn inline(s: &str) -> String {
    static ARRAY: Lazy<Regex> = Lazy::new(|| Regex::new(r"Array<(\w+)>").unwrap());
    static KEY: Lazy<Regex> = Lazy::new(|| Regex::new(r#""(\w+)":"#).unwrap());
    static LITERAL: Lazy<Regex> = Lazy::new(|| Regex::new(r#""([^"'\\]*)""#).unwrap());
    let collapsed = s.split_whitespace().collect::<Vec<_>>().join(" ");
    let collapsed = collapsed.replace(", }", " }").replace(",}", " }");
    let collapsed = ARRAY.replace_all(&collapsed, "${1}[]");
    let collapsed = KEY.replace_all(&collapsed, "${1}:");
    LITERAL.replace_all(&collapsed, "'${1}'").into_owned()
}

fn types_file() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src/types.d.ts")
}

/// Fails when the generated part of `src/types.d.ts` is not what the Rust types give;
/// `LCM_WRITE_TYPES=1` (what `npm run types` sets) rewrites it instead.
#[test]
fn types_d_ts_matches_the_rust_types() {
    let path = types_file();
    let file = std::fs::read_to_string(&path).expect("src/types.d.ts");
    let written = file.find(MARKER).map_or(file.as_str(), |at| &file[..at]);
    let expected = format!("{}{}", written.trim_end_matches('\n').to_string() + "\n\n", generated());
    if expected == file {
        return;
    }
    if std::env::var_os("LCM_WRITE_TYPES").is_some() {
        std::fs::write(&path, &expected).expect("write src/types.d.ts");
        return;
    }
    let first = expected
        .lines()
        .zip(file.lines())
        .position(|(a, b)| a != b)
        .unwrap_or(0);
    panic!(
        "src/types.d.ts differs from the Rust types from line {}: expected {:?}, found {:?}. \
         Run `npm run types` and then `npm run build`.",
        first + 1,
        expected.lines().nth(first),
        file.lines().nth(first)
    );
}

mod tests {
    use super::pretty;

    #[test]
    fn an_object_type_becomes_an_interface_with_a_field_per_line() {
        let decl = "type A = { x: number, \n/**\n * The y.\n * Second line.\n */\ny: { a: string, b: Array<B>, } | null, z?: \"p\" | \"q\", };";
        assert_eq!(
            pretty(decl, None),
            "interface A {\n  x: number\n  /**\n   * The y.\n   * Second line.\n   */\n  y: { a: string, b: B[] } | null\n  z?: 'p' | 'q'\n}"
        );
    }

    #[test]
    fn intersections_and_short_unions_stay_on_one_line() {
        assert_eq!(
            pretty("type K = \"leaf\" | \"condensed\";", None),
            "type K = 'leaf' | 'condensed'"
        );
        assert_eq!(
            pretty("type D = { a: number, } & B;", None),
            "type D = { a: number } & B"
        );
    }

    #[test]
    fn long_unions_take_a_line_per_member() {
        let members: Vec<String> = (0..8)
            .map(|i| format!("{{ \"type\": \"variant{i}\" }} & Variant{i}"))
            .collect();
        let out = pretty(&format!("type U = {};", members.join(" | ")), None);
        assert_eq!(out.lines().count(), 9, "{out}");
        assert!(
            out.lines().nth(1).unwrap().starts_with("  | { type: 'variant0' }"),
            "{out}"
        );
    }

    #[test]
    fn a_flattened_base_becomes_extends() {
        let base = Some(("Base".to_string(), "{ b: number, }".to_string()));
        assert_eq!(
            pretty("type X = { a: string, b: number, };", base),
            "interface X extends Base {\n  a: string\n}"
        );
    }

    #[test]
    #[should_panic(expected = "does not end with the fields of Base")]
    fn a_base_whose_fields_are_not_the_tail_is_refused() {
        pretty(
            "type X = { b: number, a: string, };",
            Some(("Base".to_string(), "{ b: number, }".to_string())),
        );
    }

    #[test]
    fn a_union_of_documented_objects_lays_each_out() {
        let out = pretty(
            "type E = { \"type\": \"a\", \n/**\n * Doc.\n */\nx: number, } | { \"type\": \"b\", };",
            None,
        );
        assert_eq!(
            out,
            "type E =\n  | {\n      type: 'a'\n      /** Doc. */\n      x: number\n    }\n  | { type: 'b' }"
        );
    }
}
