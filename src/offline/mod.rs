//! The offline summarizer: deterministic, no network, and the first summary a new user reads.
//! It reads the structure of its source rather than its text. A leaf is an engineer's log of
//! the span, turn by turn: what the user asked (their words, shortened), what was done (tool
//! actions such as `read src/a.ts`, `bash: npm test`), what came back that matters (errors
//! with their location, test tallies, exit codes; never file bodies), and what the assistant
//! concluded. A condensed summary merges its inputs into one timeline (repeated actions
//! counted: `edit src/a.ts ×4`) and says what changed. No raw JSON, escape sequences or code;
//! identifiers verbatim; within the target; the footer names the identifiers and the output
//! it left out. Same input, same output.

mod condensed;
mod leaf;
#[cfg(test)]
mod tests;
mod text;

use crate::fidelity::{self, extract::Haystack};
use crate::summarizer::entries::SourceEntry;
use crate::summarizer::{SummarizeRequest, Summarizer, SummaryFuture, OFFLINE_MODEL};
use crate::tokens;

pub(crate) struct OfflineSummarizer;

impl Summarizer for OfflineSummarizer {
    fn summarize(&self, _prompt: String, request: &SummarizeRequest) -> SummaryFuture {
        let text = summarize(&request.entries, &request.source_text, request.target_tokens);
        Box::pin(async move { Ok(text) })
    }

    fn model(&self) -> String {
        OFFLINE_MODEL.to_string()
    }

    fn is_offline(&self) -> bool {
        true
    }
}

const FOOTER: &str = "Expand for details about:";

/// Summarises a source within `target_tokens` (at least 24).
pub(crate) fn summarize(entries: &[SourceEntry], source_text: &str, target_tokens: i64) -> String {
    let target = target_tokens.max(24);
    let fallback_entries;
    let entries = if entries.is_empty() && !source_text.trim().is_empty() {
        // A caller with text only: one message of it.
        fallback_entries = vec![SourceEntry::text("assistant", "", source_text)];
        &fallback_entries[..]
    } else {
        entries
    };
    let draft = if !entries.is_empty() && entries.iter().all(|e| e.role == "summary") {
        condensed::draft(entries)
    } else {
        leaf::draft(entries)
    };
    let identifiers = fidelity::source_identifiers(entries);
    fit(draft, &identifiers, target)
}

/// One piece of a summary: a line, or one element of a joined line (`Did: a · b`).
#[derive(Clone, Debug)]
pub(crate) struct Item {
    /// Where it is rendered: items are ordered by (section, slot, order).
    pub section: usize,
    pub slot: u8,
    pub order: usize,
    /// Lower is kept first when the target is tight.
    pub priority: u8,
    /// The line's label (`Asked`, `Did`, `15:37 Asked`).
    pub label: String,
    /// Items of one (section, slot) with `joined` share a line, separated by ` · `.
    pub joined: bool,
    pub text: String,
}

impl Item {
    /// An item on a line of its own (`Found: …`).
    pub(crate) fn line(
        section: usize,
        slot: u8,
        order: usize,
        priority: u8,
        label: impl Into<String>,
        text: String,
    ) -> Item {
        Item {
            section,
            slot,
            order,
            priority,
            label: label.into(),
            joined: false,
            text,
        }
    }

    /// An item that shares its line with the others of its slot (`Did: a · b`).
    pub(crate) fn joined(section: usize, slot: u8, order: usize, priority: u8, label: &str, text: String) -> Item {
        Item {
            joined: true,
            ..Item::line(section, slot, order, priority, label, text)
        }
    }
}

/// A summary before fitting: its items and notes for the footer about what it left out.
#[derive(Default)]
pub(crate) struct Draft {
    pub items: Vec<Item>,
    /// Said in the footer when anything is left out (`output of 12 tool calls`).
    pub notes: Vec<String>,
    /// Topics inherited from the inputs' footers (condensed).
    pub inherited: Vec<String>,
}

fn render(items: &[&Item]) -> String {
    let mut sorted: Vec<&&Item> = items.iter().collect();
    sorted.sort_by_key(|i| (i.section, i.slot, i.order));
    let mut lines: Vec<String> = Vec::new();
    let mut last_key = None;
    for item in sorted {
        let key = (item.section, item.slot);
        if item.joined && last_key == Some(key) {
            let line = lines.last_mut().expect("a joined item follows its line");
            line.push_str(" · ");
            line.push_str(&item.text);
        } else {
            lines.push(format!("{}: {}", item.label, item.text));
        }
        last_key = Some(key);
    }
    lines.join("\n")
}

/// Chooses the items that fit `target` (most important first), renders them in order, and
/// ends with the footer: missing salient identifiers, the notes, then other missing ones.
fn fit(draft: Draft, identifiers: &fidelity::extract::IdentifierSet, target: i64) -> String {
    let footer_floor = (target / 5).clamp(12, 200);
    let body_budget = (target - footer_floor).max(8);
    let mut order: Vec<usize> = (0..draft.items.len()).collect();
    order.sort_by_key(|&i| (draft.items[i].priority, draft.items[i].order, draft.items[i].slot));
    let mut chosen: Vec<usize> = Vec::new();
    let mut used = 0;
    for i in order {
        let item = &draft.items[i];
        let cost = tokens::estimate(&item.text)
            + if item.joined {
                1
            } else {
                tokens::estimate(&item.label) + 2
            };
        if used + cost <= body_budget {
            used += cost;
            chosen.push(i);
        }
    }
    let left_out = draft.items.len() - chosen.len();
    loop {
        let picked: Vec<&Item> = chosen.iter().map(|&i| &draft.items[i]).collect();
        let body = if picked.is_empty() {
            "(no text content)".to_string()
        } else {
            render(&picked)
        };
        let room = target - tokens::estimate(&body) - 1;
        let footer = footer(&draft, identifiers, &body, left_out, room);
        let out = format!("{body}\n{footer}");
        if tokens::estimate(&out) <= target || chosen.is_empty() {
            return if tokens::estimate(&out) <= target {
                out
            } else {
                tokens::truncate_to_tokens(&out, target).to_string()
            };
        }
        // Over (labels and separators cost more than estimated): drop the least important.
        let worst = (0..chosen.len())
            .max_by_key(|&k| {
                let it = &draft.items[chosen[k]];
                (it.priority, it.order)
            })
            .expect("not empty");
        chosen.remove(worst);
    }
}

fn footer(
    draft: &Draft,
    identifiers: &fidelity::extract::IdentifierSet,
    body: &str,
    left_out: usize,
    room: i64,
) -> String {
    let hay = Haystack::new(body);
    let missing = |salient: bool| {
        identifiers
            .items()
            .iter()
            .filter(move |i| i.salient == salient)
            .filter(|i| !fidelity::extract::kept_in(&hay, i))
            .map(|i| i.text.clone())
    };
    let mut topics: Vec<String> = missing(true).collect();
    topics.extend(draft.inherited.iter().cloned());
    if left_out > 0 {
        topics.push(format!("{left_out} more lines"));
    }
    topics.extend(draft.notes.iter().cloned());
    topics.extend(missing(false));
    let mut seen = std::collections::HashSet::new();
    topics.retain(|t| !t.contains(", ") && seen.insert(t.clone()));
    // The topics that fit, weighed piece by piece (quarter tokens add up exactly): linear in
    // the number of topics.
    let mut footer = FOOTER.to_string();
    let mut used = tokens::quarter_tokens(&footer);
    let mut sep = " ";
    for t in topics {
        let cost = tokens::quarter_tokens(sep) + tokens::quarter_tokens(&t);
        if (used + cost).div_ceil(4) as i64 > room {
            continue;
        }
        footer.push_str(sep);
        footer.push_str(&t);
        used += cost;
        sep = ", ";
    }
    footer
}
