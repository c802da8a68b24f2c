//! A condensed summary: its inputs merged into one timeline. Offline inputs are read by their
//! labels (`Asked`, `Did`, `Found`, `Said`, and a condensed input's own `Changed`, `Ran`,
//! `Looked at`); other inputs (an LLM's prose) by their sentences. Repeated actions are
//! counted (`edit src/a.ts ×4`); what changed over the span comes first.

use std::collections::{HashMap, HashSet};

use super::leaf::{is_change_action, plural};
use super::text::{self, is_decision, is_error, is_narration};
use super::{Draft, Item, FOOTER};
use crate::summarizer::entries::{SourceEntry, SourcePart};

const SLOT_OVERVIEW: u8 = 0;
const SLOT_ASKED: u8 = 1;
const SLOT_CHANGED: u8 = 2;
const SLOT_RAN: u8 = 3;
const SLOT_LOOKED: u8 = 4;
const SLOT_FOUND: u8 = 5;
const SLOT_SAID: u8 = 6;

const ASK_CHARS: usize = 160;
const FINDINGS_PER_INPUT: usize = 2;
const STATEMENTS_PER_INPUT: usize = 2;
const LAST_INPUT_STATEMENTS: usize = 4;
const LINE_CHARS: usize = 200;

/// `edit src/a.ts ×4` → (`edit src/a.ts`, 4).
fn split_count(action: &str) -> (String, usize) {
    if let Some((head, n)) = action.rsplit_once(" ×") {
        if let Ok(n) = n.trim().parse::<usize>() {
            return (head.trim().to_string(), n.max(1));
        }
    }
    (action.trim().to_string(), 1)
}

/// The label of a line written by the offline summarizer, and the rest.
fn labelled(line: &str) -> Option<(&str, &str)> {
    let (head, rest) = line.split_once(": ")?;
    let label = head.rsplit(' ').next().unwrap_or(head);
    let label = if head.ends_with("Looked at") {
        "Looked at"
    } else {
        label
    };
    [
        "Asked",
        "Did",
        "Found",
        "Said",
        "Changed",
        "Ran",
        "Looked at",
        "Overview",
    ]
    .contains(&label)
    .then_some((label, rest.trim()))
}

pub(super) fn draft(entries: &[SourceEntry]) -> Draft {
    let mut d = Draft::default();
    let mut order = 0;
    let mut next = || {
        order += 1;
        order
    };
    // action → (first order, count)
    let mut actions: Vec<(String, usize, usize)> = Vec::new();
    let mut action_index: HashMap<String, usize> = HashMap::new();
    let mut seen_lines: HashSet<String> = HashSet::new();
    let (mut asks, mut errors) = (0, 0);
    let last = entries.len().saturating_sub(1);
    for (ei, entry) in entries.iter().enumerate() {
        let content: String = entry
            .parts
            .iter()
            .filter_map(|p| match p {
                SourcePart::Text(t) => Some(t.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n");
        let from_last = ei == last;
        let mut statements: Vec<(String, usize)> = Vec::new();
        let mut found: Vec<(String, usize)> = Vec::new();
        for raw in content.lines() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with("[Capped from") || line == "(no text content)" {
                continue;
            }
            if let Some(rest) = line.strip_prefix(FOOTER) {
                for topic in rest.split(", ").map(str::trim).filter(|t| !t.is_empty()) {
                    let topic = topic.trim_end_matches('.');
                    // Counts of what the inputs left out are restated, not inherited.
                    let is_note = topic.starts_with("output of ") || topic.starts_with("full text of ");
                    if !is_note && !d.inherited.iter().any(|i| i == topic) {
                        d.inherited.push(topic.to_string());
                    }
                }
                continue;
            }
            match labelled(line) {
                Some(("Asked", rest)) => {
                    asks += 1;
                    d.items.push(Item::line(
                        0,
                        SLOT_ASKED,
                        next(),
                        if asks == 1 { 0 } else { 2 },
                        "Asked",
                        text::shorten(rest, ASK_CHARS),
                    ));
                }
                Some(("Did" | "Changed" | "Ran" | "Looked at", rest)) => {
                    for a in rest.split(" · ").filter(|a| !a.trim().is_empty()) {
                        let (key, n) = split_count(a);
                        match action_index.get(&key) {
                            Some(&i) => actions[i].2 += n,
                            None => {
                                action_index.insert(key.clone(), actions.len());
                                actions.push((key, next(), n));
                            }
                        }
                    }
                }
                Some(("Overview", _)) => {}
                Some(("Found", rest)) => {
                    if seen_lines.insert(rest.to_string()) {
                        errors += is_error(rest) as usize;
                        found.push((rest.to_string(), next()));
                    }
                }
                Some((_, rest)) => statements.push((rest.to_string(), next())),
                None => {
                    // Prose from another summarizer: its sentences.
                    for p in text::prose_lines(line) {
                        for s in text::sentences(&p) {
                            if s.chars().count() >= 12 {
                                statements.push((s, next()));
                            }
                        }
                    }
                }
            }
        }
        keep_findings(&mut d, found);
        keep_statements(&mut d, statements, from_last);
    }
    let mut changed = 0;
    let mut commands = 0;
    for (action, first, n) in &actions {
        let (slot, label, priority) = if is_change_action(action) {
            changed += 1;
            (SLOT_CHANGED, "Changed", 1)
        } else if action.contains(": ") {
            commands += 1;
            (SLOT_RAN, "Ran", 2)
        } else {
            (SLOT_LOOKED, "Looked at", 3)
        };
        let text = if *n > 1 {
            format!("{action} ×{n}")
        } else {
            action.clone()
        };
        d.items.push(Item::joined(0, slot, *first, priority, label, text));
    }
    let mut overview = vec![plural(entries.len(), "summary", "summaries")];
    for (n, one, many) in [
        (asks, "request", "requests"),
        (changed, "change", "changes"),
        (commands, "command", "commands"),
        (errors, "error seen", "errors seen"),
    ] {
        if n > 0 {
            overview.push(plural(n, one, many));
        }
    }
    d.items
        .push(Item::line(0, SLOT_OVERVIEW, 0, 0, "Overview", overview.join(", ")));
    d.notes.push(format!(
        "full text of {}",
        plural(entries.len(), "input summary", "input summaries")
    ));
    d
}

/// At most two findings of an input (errors first) go on: a condensed node keeps what its
/// inputs found that matters, not every line of it.
fn keep_findings(d: &mut Draft, mut found: Vec<(String, usize)>) {
    found.sort_by_key(|(f, order)| (!is_error(f), *order));
    for (f, order) in found.into_iter().take(FINDINGS_PER_INPUT) {
        d.items.push(Item::line(
            0,
            SLOT_FOUND,
            order,
            if is_error(&f) { 2 } else { 3 },
            "Found",
            text::shorten(&f, LINE_CHARS),
        ));
    }
}

/// The last input's first statements say where things stand; of the others, the two that
/// carry a decision or an error (else the first two).
fn keep_statements(d: &mut Draft, mut statements: Vec<(String, usize)>, from_last: bool) {
    let cap = if from_last {
        LAST_INPUT_STATEMENTS
    } else {
        STATEMENTS_PER_INPUT
    };
    statements.retain(|(s, _)| !is_narration(s) && !s.ends_with(':'));
    if !from_last {
        statements.sort_by_key(|(s, order)| (!(is_decision(s) || is_error(s)), *order));
    }
    for (s, order) in statements.into_iter().take(cap) {
        let priority = match (from_last, is_decision(&s) || is_error(&s)) {
            (true, _) => 1,
            (false, true) => 3,
            (false, false) => 4,
        };
        d.items.push(Item::line(
            0,
            SLOT_SAID,
            order,
            priority,
            "Said",
            text::shorten(&s, LINE_CHARS),
        ));
    }
}
