//! Summary fidelity: how many of the identifiers of a summary's source the summary keeps.
//! Any summarizer's output is scored the same way, at write time and on demand. The salient
//! identifiers (named by the user, used by a tool call; recurring across a condensed node's
//! inputs) count twice.

pub(crate) mod extract;
pub(crate) mod junk;
#[cfg(test)]
mod report_tests;
#[cfg(test)]
mod retry_tests;
pub(crate) mod survey;

use serde_json::Value;

/// The score and its rows live in the store (`store::fidelity_scores`); this module computes it.
pub(crate) use crate::store::fidelity_scores::{Fidelity, EXTRACTOR_VERSION};

use crate::summarizer::entries::{SourceEntry, SourcePart, COMMAND_KEYS};
use extract::{Haystack, IdentifierSet};

/// Missing salient identifiers kept with a score (and listed in a retry prompt).
pub(crate) const MAX_MISSING_LISTED: usize = 40;
/// A tool-call argument longer than this, or on several lines, is a body (a file's content,
/// an edit's text): its identifiers count, but not as salient.
const SHORT_ARGUMENT_CHARS: usize = 200;

/// The identifiers of a source, salient ones marked.
pub(crate) fn source_identifiers(entries: &[SourceEntry]) -> IdentifierSet {
    let mut set = IdentifierSet::default();
    if !entries.is_empty() && entries.iter().all(|e| e.role == "summary") {
        return condensed_identifiers(entries);
    }
    for entry in entries {
        for part in &entry.parts {
            match part {
                SourcePart::Text(t) if entry.role == "user" => extract_user_text(t, &mut set),
                SourcePart::Text(t) => extract::extract(t, false, &mut set),
                SourcePart::ToolCall { arguments, .. } => extract_arguments(arguments, None, &mut set, 0),
                SourcePart::ToolResult { text, .. } => extract::extract(text, false, &mut set),
                SourcePart::Shell { command, output } => {
                    extract::extract_command(command, true, &mut set);
                    extract::extract(output, false, &mut set);
                }
                SourcePart::Attachment(a) => extract::extract(a, false, &mut set),
            }
        }
    }
    set
}

/// A user's words are salient; a code block they pasted is source, not salient.
fn extract_user_text(text: &str, set: &mut IdentifierSet) {
    let mut in_code = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            continue;
        }
        extract::extract(line, !in_code, set);
    }
}

fn extract_arguments(value: &Value, key: Option<&str>, set: &mut IdentifierSet, depth: usize) {
    match value {
        Value::String(s) if key.is_some_and(|k| COMMAND_KEYS.contains(&k)) => {
            extract::extract_command(s, true, set);
            // The rest of a multi-line command (a heredoc body) is source, not salient.
            if let Some((_, rest)) = s.trim_start().split_once('\n') {
                extract::extract(rest, false, set);
            }
        }
        Value::String(s) => {
            let short = s.chars().count() <= SHORT_ARGUMENT_CHARS && !s.contains('\n');
            extract::extract(s, short, set);
        }
        Value::Array(items) if depth < 8 => {
            for v in items {
                extract_arguments(v, key, set, depth + 1);
            }
        }
        Value::Object(map) if depth < 8 => {
            for (k, v) in map {
                extract_arguments(v, Some(k), set, depth + 1);
            }
        }
        _ => {}
    }
}

/// A condensed node's source: the identifiers of its inputs; those two or more inputs name
/// are salient (what the span kept coming back to).
fn condensed_identifiers(entries: &[SourceEntry]) -> IdentifierSet {
    let per_input: Vec<IdentifierSet> = entries
        .iter()
        .map(|e| {
            let mut s = IdentifierSet::default();
            for part in &e.parts {
                if let SourcePart::Text(t) = part {
                    extract::extract(&without_footer_notes(t), false, &mut s);
                }
            }
            s
        })
        .collect();
    let mut set = IdentifierSet::default();
    for input in &per_input {
        for ident in input.items() {
            let named_by = per_input.iter().filter(|other| other.contains(&ident.text)).count();
            set.add(&ident.text, ident.kind, named_by >= 2);
        }
    }
    set
}

/// An input's text without the counts its footer gives of what it left out (`full text of 9
/// messages`, `output of 5 tool calls`, `12 more lines`): they describe the input, they are
/// not identifiers of the conversation.
fn without_footer_notes(text: &str) -> String {
    const FOOTER: &str = "Expand for details about:";
    text.lines()
        .map(|line| match line.trim_start().strip_prefix(FOOTER) {
            Some(rest) => {
                let topics: Vec<&str> = rest
                    .split(", ")
                    .map(str::trim)
                    .filter(|t| {
                        !(t.starts_with("full text of ") || t.starts_with("output of ") || t.ends_with(" more lines"))
                    })
                    .collect();
                format!("{FOOTER} {}", topics.join(", "))
            }
            None => line.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Scores `summary` against the identifiers of its source.
pub(crate) fn score(identifiers: &IdentifierSet, summary: &str) -> Fidelity {
    let hay = Haystack::new(summary);
    let (mut kept, mut salient, mut salient_kept) = (0u32, 0u32, 0u32);
    let mut missing_salient = Vec::new();
    for ident in identifiers.items() {
        let is_kept = extract::kept_in(&hay, ident);
        kept += is_kept as u32;
        if ident.salient {
            salient += 1;
            salient_kept += is_kept as u32;
            if !is_kept && missing_salient.len() < MAX_MISSING_LISTED {
                missing_salient.push(ident.text.clone());
            }
        }
    }
    let total = identifiers.len() as u32;
    let ratio = |a: u32, b: u32| (b > 0).then(|| round4(a as f64 / b as f64));
    Fidelity {
        score: ratio(kept + salient_kept, total + salient),
        salient_score: ratio(salient_kept, salient),
        identifiers: total,
        kept,
        salient,
        salient_kept,
        missing_salient,
    }
}

pub(crate) fn round4(x: f64) -> f64 {
    (x * 10_000.0).round() / 10_000.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn leaf() -> Vec<SourceEntry> {
        vec![
            SourceEntry::text(
                "user",
                "",
                "Fix the crash in src/auth/login.ts please\n```\nlet tmp_value = 1\n```",
            ),
            SourceEntry {
                role: "assistant".into(),
                stamp: String::new(),
                parts: vec![
                    SourcePart::Text("Looking at validateUser first.".into()),
                    SourcePart::ToolCall {
                        id: None,
                        name: "bash".into(),
                        arguments: json!({"command": "npm test -- src/auth\ncat <<EOF\nbody_only_name\nEOF"}),
                    },
                    SourcePart::ToolCall {
                        id: None,
                        name: "write".into(),
                        arguments: json!({"path": "src/auth/guard.ts", "content": "export const guardFn = 1\n"}),
                    },
                ],
            },
            SourceEntry {
                role: "tool".into(),
                stamp: String::new(),
                parts: vec![SourcePart::ToolResult {
                    call_id: None,
                    name: None,
                    text: "TypeError at src/auth/login.ts:42 in 128 ms".into(),
                    is_error: true,
                }],
            },
        ]
    }

    #[test]
    fn salient_are_what_the_user_named_and_tool_calls_used() {
        let set = source_identifiers(&leaf());
        let salient: Vec<&str> = set
            .items()
            .iter()
            .filter(|i| i.salient)
            .map(|i| i.text.as_str())
            .collect();
        let other: Vec<&str> = set
            .items()
            .iter()
            .filter(|i| !i.salient)
            .map(|i| i.text.as_str())
            .collect();
        assert_eq!(salient, ["src/auth/login.ts", "npm test", "src/auth/guard.ts"]);
        assert_eq!(
            other,
            [
                "tmp_value",
                "validateUser",
                "body_only_name",
                "guardFn",
                "TypeError",
                "128 ms"
            ]
        );
    }

    #[test]
    fn score_weights_salient_twice_and_lists_what_is_missing() {
        let set = source_identifiers(&leaf());
        let f = score(&set, "Fixed src/auth/login.ts (TypeError); ran npm test.");
        assert_eq!((f.identifiers, f.kept, f.salient, f.salient_kept), (9, 3, 3, 2));
        assert_eq!(f.score, Some(round4(5.0 / 12.0)));
        assert_eq!(f.salient_score, Some(round4(2.0 / 3.0)));
        assert_eq!(f.missing_salient, ["src/auth/guard.ts"]);
        assert!(f.is_under(Some(0.5)) && !f.is_under(Some(0.4)) && !f.is_under(None));
        let empty = score(&IdentifierSet::default(), "anything");
        assert_eq!((empty.score, empty.salient_score), (None, None));
        assert!(!empty.is_under(Some(0.99)));
    }

    #[test]
    fn condensed_salient_are_named_by_two_inputs() {
        let inputs = [
            SourceEntry::text("summary", "", "Edited src/a.ts and src/b.ts."),
            SourceEntry::text("summary", "", "Tested src/a.ts; fixed E_STALE."),
        ];
        let set = source_identifiers(&inputs);
        let marks: Vec<(&str, bool)> = set.items().iter().map(|i| (i.text.as_str(), i.salient)).collect();
        assert_eq!(marks, [("src/a.ts", true), ("src/b.ts", false), ("E_STALE", false)]);
    }
}
