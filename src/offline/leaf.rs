//! A leaf: the span's messages as a log, one section per user turn.

use std::collections::HashMap;

use serde_json::Value;

use super::text::{self, is_decision, is_error, is_narration, is_test_tally};
use super::{Draft, Item};
use crate::fidelity::junk;
use crate::summarizer::entries::{argument, SourceEntry, SourcePart, COMMAND_KEYS, PATH_KEYS};

const SLOT_ASKED: u8 = 0;
const SLOT_DID: u8 = 1;
const SLOT_FOUND: u8 = 2;
const SLOT_SAID: u8 = 3;

/// Longest rendering of a user's request, of one finding and of one statement.
const ASK_CHARS: usize = 240;
const FINDING_CHARS: usize = 180;
const SAID_CHARS: usize = 220;
/// Notable lines taken from one tool result.
const FINDINGS_PER_RESULT: usize = 3;

/// Tools whose calls change things (their actions are kept first).
fn is_change(tool: &str) -> bool {
    let t = tool.to_ascii_lowercase();
    [
        "edit", "write", "create", "delete", "remove", "move", "rename", "patch", "apply", "replace", "insert",
    ]
    .iter()
    .any(|w| t.contains(w))
}

/// A tool call as an action: `read src/a.ts`, `bash: npm test`, `grep "TODO" in src/`.
pub(super) fn action(name: &str, arguments: &Value) -> String {
    let clean = |s: &str, max: usize| text::first_line(s, max);
    if let Some(cmd) = argument(arguments, COMMAND_KEYS) {
        let line = clean(cmd, 120);
        let line = if junk::classify(&line).is_some() {
            // A command written as code: keep its first word only.
            line.split_whitespace().next().unwrap_or("").to_string()
        } else {
            line
        };
        let more = if cmd.trim().lines().count() > 1 { " …" } else { "" };
        return format!("{name}: {line}{more}");
    }
    let path = argument(arguments, PATH_KEYS).map(|p| clean(p, 200));
    let pattern = argument(arguments, &["pattern", "query", "regex", "search", "glob"]).map(|p| clean(p, 60));
    let url = argument(arguments, &["url", "uri", "href"]).map(|p| clean(p, 200));
    match (path, pattern, url) {
        (_, _, Some(u)) => format!("{name} {u}"),
        (Some(p), Some(q), _) => format!("{name} \"{q}\" in {p}"),
        (Some(p), None, _) => format!("{name} {p}"),
        (None, Some(q), _) => format!("{name} \"{q}\""),
        (None, None, _) => {
            // The first short, single-line scalar argument, if any.
            let detail = arguments.as_object().and_then(|o| {
                o.iter().find_map(|(k, v)| {
                    let s = match v {
                        Value::String(s) if s.len() <= 60 && !s.contains('\n') && !s.trim().is_empty() => s.clone(),
                        Value::Number(n) => n.to_string(),
                        Value::Bool(b) => b.to_string(),
                        _ => return None,
                    };
                    Some(format!("{k}={s}"))
                })
            });
            match detail {
                Some(d) if junk::classify(&d).is_none() => format!("{name} {d}"),
                _ => name.to_string(),
            }
        }
    }
}

/// Lines of output that read as markup or code comments (a file body), never findings.
fn is_markup(t: &str) -> bool {
    ["|", "//", "#", "*", "/*", "<", "\"", "'", "-", "+", "@@", ">"]
        .iter()
        .any(|p| t.starts_with(p))
}

/// An error line as tools print them: `Error: …`, `error[E0425]: …`, `FAIL src/a.test.ts`,
/// `npm ERR! …`, `fatal: …`, a located error, a non-zero exit.
fn is_error_line(t: &str) -> bool {
    let lower = t.to_lowercase();
    let starts = [
        "error",
        "fatal",
        "fail",
        "npm err",
        "panicked",
        "thread '",
        "traceback",
        "exception",
        "✗",
        "×",
        "e ",
        "uncaught",
        "syntaxerror",
        "typeerror",
        "referenceerror",
    ]
    .iter()
    .any(|p| lower.starts_with(p));
    let contains = [
        "error:",
        "error[",
        "exception:",
        " failed",
        "exit code",
        "exited with code",
        "exit status",
        "not found",
        "no such file",
        "permission denied",
        "cannot find",
        "command not found",
    ]
    .iter()
    .any(|p| {
        lower.match_indices(p).any(|(i, _)| {
            !p.starts_with(|c: char| c.is_alphabetic()) || !lower[..i].ends_with(|c: char| c.is_alphanumeric())
        })
    });
    (starts || contains || text::has_location(t) && is_error(t))
        && !lower.contains("0 failed")
        && !lower.contains("0 errors")
}

/// The lines of a tool result worth keeping: errors (with their location), test tallies, exit
/// codes. Never a file body: markup, code and JSON lines are skipped, and a successful
/// result of a tool that is not a command (a read) gives nothing.
fn findings(output: &str, is_error_result: bool, call: CallKind) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    if !is_error_result && call == CallKind::Other {
        return out;
    }
    for line in output.lines() {
        let t = text::collapse(line.trim());
        if t.is_empty() || t.len() > 600 || is_markup(&t) || junk::classify(&t).is_some() {
            continue;
        }
        let lower = t.to_lowercase();
        // Of a result whose call is not in this leaf, only tallies and exits: it may be a
        // file body that merely mentions errors.
        let error = if call == CallKind::Unknown && !is_error_result {
            lower.contains("exit code") || lower.contains("exited with code")
        } else {
            is_error_line(&t)
        };
        if (error || is_test_tally(&t)) && !out.contains(&t) {
            out.push(text::shorten(&t, FINDING_CHARS));
            if out.len() >= FINDINGS_PER_RESULT {
                break;
            }
        }
    }
    if out.is_empty() && is_error_result {
        if let Some(first) = text::prose_lines(output).into_iter().next() {
            out.push(text::shorten(&first, FINDING_CHARS));
        }
    }
    out
}

/// What the call behind a result was.
#[derive(Clone, Copy, PartialEq, Eq)]
enum CallKind {
    Command,
    Other,
    /// In an earlier leaf.
    Unknown,
}

/// `3 tool calls`, `1 tool call`.
pub(super) fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The leaf's draft: one section per user turn (section 0 holds what came before the first
/// request of the span).
pub(super) fn draft(entries: &[SourceEntry]) -> Draft {
    let mut d = Draft::default();
    let mut section = 0;
    let mut order = 0;
    let mut next = || {
        order += 1;
        order
    };
    // The call behind each result, by call id.
    let mut calls: HashMap<&str, String> = HashMap::new();
    // (section, action) → index of its item, so repeats are counted instead of repeated.
    let mut actions: HashMap<(usize, String), (usize, usize)> = HashMap::new();
    let mut results = 0;
    let mut last_date: Option<String> = None;
    let last_assistant_text = entries.iter().rposition(|e| {
        e.role == "assistant"
            && e.parts
                .iter()
                .any(|p| matches!(p, SourcePart::Text(t) if !t.trim().is_empty()))
    });
    for (ei, entry) in entries.iter().enumerate() {
        if entry.role == "user" {
            section += 1;
        }
        for part in &entry.parts {
            match part {
                SourcePart::Text(t) if entry.role == "user" => {
                    let prose = text::prose_lines(t).join(" ");
                    if prose.is_empty() {
                        continue;
                    }
                    let time = text::short_time(&entry.stamp, last_date.as_deref());
                    if let Some(date) = entry.stamp.split(' ').next().filter(|d| d.len() == 10) {
                        last_date = Some(date.to_string());
                    }
                    let label = if time.is_empty() {
                        "Asked".to_string()
                    } else {
                        format!("{time} Asked")
                    };
                    let text = text::shorten(&prose, ASK_CHARS);
                    d.items.push(Item::line(section, SLOT_ASKED, next(), 0, label, text));
                }
                SourcePart::Text(t) if entry.role == "assistant" => {
                    // The last thing the assistant said is where the span ended up: its
                    // first sentence is kept with the request, the next two after the changes.
                    let mut conclusion = if Some(ei) == last_assistant_text { 3 } else { 0 };
                    for line in text::prose_lines(t) {
                        for s in text::sentences(&line) {
                            if s.chars().count() < 12 {
                                continue;
                            }
                            let narration = is_narration(&s) || s.ends_with(':');
                            let priority = match (conclusion, is_decision(&s) || is_error(&s), narration) {
                                (3, _, false) => 0,
                                (1..=2, _, false) => 1,
                                (_, true, false) => 3,
                                (_, _, true) => 5,
                                _ => 4,
                            };
                            if !narration && conclusion > 0 {
                                conclusion -= 1;
                            }
                            d.items.push(Item::line(
                                section,
                                SLOT_SAID,
                                next(),
                                priority,
                                "Said",
                                text::shorten(&s, SAID_CHARS),
                            ));
                        }
                    }
                }
                SourcePart::Text(_) => {}
                SourcePart::ToolCall { id, name, arguments } => {
                    let a = action(name, arguments);
                    if let Some(id) = id {
                        calls.insert(id.as_str(), a.clone());
                    }
                    let priority = if is_change(name) {
                        1
                    } else if argument(arguments, COMMAND_KEYS).is_some() {
                        2
                    } else {
                        3
                    };
                    count_action(&mut d, &mut actions, section, a, priority, next());
                }
                SourcePart::Shell { command, .. } => {
                    let a = format!("ran: {}", text::first_line(command, 120));
                    count_action(&mut d, &mut actions, section, a, 2, next());
                }
                SourcePart::ToolResult {
                    call_id,
                    name,
                    text: output,
                    is_error,
                } => {
                    results += 1;
                    let known = call_id.as_deref().and_then(|id| calls.get(id).cloned());
                    let kind = match known.as_deref() {
                        None => CallKind::Unknown,
                        Some(a) if a.contains(": ") => CallKind::Command,
                        Some(_) => CallKind::Other,
                    };
                    let call = known
                        .clone()
                        .or_else(|| name.clone())
                        .unwrap_or_else(|| "a tool call".into());
                    let found = findings(output, *is_error, kind);
                    if found.is_empty() && known.is_none() {
                        // Its call is in an earlier leaf: say what came back, by its first line.
                        let first = text::prose_lines(output)
                            .into_iter()
                            .find(|l| !is_markup(l) && l.chars().filter(|c| c.is_alphabetic()).count() >= 3);
                        if let Some(first) = first {
                            let text = format!("got \"{}\"", text::shorten(&first, 80));
                            d.items.push(Item::joined(section, SLOT_DID, next(), 3, "Did", text));
                        }
                    }
                    for (k, line) in found.into_iter().enumerate() {
                        let text = if k == 0 && *is_error {
                            format!("{} failed: {line}", text::shorten(&call, 80))
                        } else {
                            line
                        };
                        d.items.push(Item::line(section, SLOT_FOUND, next(), 2, "Found", text));
                    }
                }
                SourcePart::Attachment(a) => {
                    d.items
                        .push(Item::joined(section, SLOT_DID, next(), 3, "Did", text::shorten(a, 80)))
                }
            }
        }
    }
    if results > 0 {
        d.notes
            .push(format!("output of {}", plural(results, "tool call", "tool calls")));
    }
    if !entries.is_empty() {
        d.notes
            .push(format!("full text of {}", plural(entries.len(), "message", "messages")));
    }
    d
}

fn count_action(
    d: &mut Draft,
    actions: &mut HashMap<(usize, String), (usize, usize)>,
    section: usize,
    action: String,
    priority: u8,
    order: usize,
) {
    match actions.get_mut(&(section, action.clone())) {
        Some((index, n)) => {
            *n += 1;
            d.items[*index].text = format!("{action} ×{n}");
        }
        None => {
            actions.insert((section, action.clone()), (d.items.len(), 1));
            d.items
                .push(Item::joined(section, SLOT_DID, order, priority, "Did", action));
        }
    }
}

/// Whether an action line (`edit src/a.ts`, `write: …`) is a change.
pub(super) fn is_change_action(action: &str) -> bool {
    is_change(action.split([' ', ':']).next().unwrap_or(""))
}
