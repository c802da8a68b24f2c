//! The text a summarizer sees. Leaf: each message as `[<time> | <role>]` + its content,
//! rebuilt from its parts (tool calls named with their arguments, reasoning left out);
//! condensed: each input summary as `[<time range>]` + its content. Entries are joined by a
//! blank line. Times are shown in the configured zone. Shared by compaction (what a pass
//! summarizes), rewrite, the fidelity score and assembly's time ranges, so each sees the same
//! text.

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::error::Result;
use crate::sql::Db;
use crate::store::messages::{load_parts, StoredPart};
use crate::store::summaries;
use crate::summarizer::entries::{SourceEntry, SourcePart};
use crate::time::{self, DisplayZone};

/// A summary's facts the DAG arithmetic needs.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct SummaryFacts {
    pub depth: i64,
    pub earliest_at: Option<String>,
    pub latest_at: Option<String>,
    pub created_at: String,
    pub descendant_count: i64,
    pub descendant_token_count: i64,
    pub source_message_token_count: i64,
}

impl SummaryFacts {
    /// The facts a source needs of a stored input (its time range and depth).
    pub(crate) fn of_input(i: &summaries::InputText) -> SummaryFacts {
        SummaryFacts {
            depth: i.depth,
            earliest_at: i.earliest_at.clone(),
            latest_at: i.latest_at.clone(),
            created_at: i.created_at.clone(),
            descendant_count: 0,
            descendant_token_count: 0,
            source_message_token_count: 0,
        }
    }
}

/// Whether a leaf source's messages carry their times (`[time | role]`, as compaction renders
/// them) or only their roles (a rewrite with `timestamps: false`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stamps {
    With,
    Without,
}

/// The source of a leaf pass.
pub(crate) struct LeafSource {
    pub text: String,
    pub earliest: Option<DateTime<Utc>>,
    pub latest: Option<DateTime<Utc>>,
    /// `file_…` ids mentioned in the messages, first seen first.
    pub file_ids: Vec<String>,
    /// The messages with their structure, for the offline summarizer and the fidelity score.
    pub entries: Vec<SourceEntry>,
}

/// Longest rendering of one message in a source text; longer content is cut with a marker
/// (the full text stays in the database and is reachable through expand).
fn max_message_chars(leaf_chunk_tokens: i64) -> usize {
    (leaf_chunk_tokens.max(1000) * 4) as usize
}

pub(crate) fn clip(text: &str, max: usize) -> String {
    let n = text.chars().count();
    if n <= max {
        return text.to_string();
    }
    let kept: String = text.chars().take(max).collect();
    format!("{kept}\n[… {} more characters]", n - max)
}

/// One content part as prose for the summarizer.
fn render_part(p: &StoredPart) -> Option<String> {
    let raw_type = p.meta_str("rawType").unwrap_or(p.part_type.as_str());
    match (p.part_type.as_str(), raw_type) {
        ("reasoning", _) => None,
        ("text", _) => p.text_content.clone().filter(|t| !t.trim().is_empty()),
        ("tool", "toolCall" | "tool_use" | "toolUse" | "tool-use" | "functionCall" | "function_call") => {
            let name = p.tool_name.as_deref().unwrap_or("tool");
            let args = p.tool_input.as_deref().unwrap_or("");
            Some(format!("[tool call: {name}] {}", clip(args, 2000)))
        }
        ("tool", _) => p
            .text_content
            .clone()
            .or_else(|| p.tool_output.clone())
            .filter(|t| !t.trim().is_empty()),
        ("file", _) => {
            let raw = p.raw();
            let name = raw
                .and_then(|r| r.get("name").or_else(|| r.get("fileName")))
                .and_then(Value::as_str)
                .map(|n| format!(" {n}"))
                .unwrap_or_default();
            Some(format!("[{raw_type} attachment{name}]"))
        }
        _ => {
            if let Some(t) = p.text_content.clone().filter(|t| !t.trim().is_empty()) {
                return Some(t);
            }
            let raw = p.raw()?;
            // A shell run (`bashExecution`): show it as a terminal would.
            if let Some(cmd) = raw.get("command").and_then(Value::as_str) {
                let output = raw.get("output").and_then(Value::as_str).unwrap_or("");
                return Some(format!("$ {cmd}\n{output}"));
            }
            Some(format!("[{raw_type}] {}", clip(&raw.to_string(), 2000)))
        }
    }
}

/// One content part with its structure. Reasoning is left out, as in the text.
fn entry_part(p: &StoredPart, role: &str) -> Option<SourcePart> {
    let raw_type = p.meta_str("rawType").unwrap_or(p.part_type.as_str());
    if role == "tool" && p.part_type != "reasoning" {
        let text = render_part(p)?;
        return Some(SourcePart::ToolResult {
            call_id: p.tool_call_id.clone(),
            name: p.tool_name.clone(),
            text,
            is_error: p
                .metadata()
                .and_then(|m| m.get("isError"))
                .and_then(Value::as_bool)
                .unwrap_or(false),
        });
    }
    match (p.part_type.as_str(), raw_type) {
        ("reasoning", _) => None,
        ("tool", "toolCall" | "tool_use" | "toolUse" | "tool-use" | "functionCall" | "function_call") => {
            let args = p.tool_input.as_deref().unwrap_or("");
            Some(SourcePart::ToolCall {
                id: p.tool_call_id.clone(),
                name: p.tool_name.clone().unwrap_or_else(|| "tool".into()),
                arguments: serde_json::from_str(args).unwrap_or_else(|_| Value::String(args.to_string())),
            })
        }
        ("file", _) => render_part(p).map(SourcePart::Attachment),
        _ => {
            if let Some(raw) = p
                .raw()
                .filter(|_| p.text_content.as_deref().is_none_or(|t| t.trim().is_empty()))
            {
                if let Some(cmd) = raw.get("command").and_then(Value::as_str) {
                    let output = raw.get("output").and_then(Value::as_str).unwrap_or("");
                    return Some(SourcePart::Shell {
                        command: cmd.to_string(),
                        output: output.to_string(),
                    });
                }
            }
            render_part(p).map(SourcePart::Text)
        }
    }
}

/// Collects `file_<16 hex>` ids from `text`, in order, without repeats.
pub(crate) fn file_ids_in(text: &str, out: &mut Vec<String>) {
    let bytes = text.as_bytes();
    let mut i = 0;
    while let Some(pos) = text[i..].find("file_") {
        let start = i + pos;
        let id_end = start + 5 + 16;
        let boundary_before = start == 0 || !bytes[start - 1].is_ascii_alphanumeric();
        if id_end <= bytes.len()
            && boundary_before
            && bytes[start + 5..id_end].iter().all(|b| b.is_ascii_hexdigit())
            && (id_end == bytes.len() || !bytes[id_end].is_ascii_alphanumeric())
        {
            let id = text[start..id_end].to_ascii_lowercase();
            if !out.contains(&id) {
                out.push(id);
            }
        }
        i = start + 5;
    }
}

/// Builds the source of a leaf pass over `message_ids` (in order).
pub(crate) fn leaf_source<'a>(
    db: impl Into<Db<'a>>,
    message_ids: &[i64],
    zone: DisplayZone,
    leaf_chunk_tokens: i64,
    stamps: Stamps,
) -> Result<LeafSource> {
    let db = db.into();
    let rows = crate::store::messages::texts(db, message_ids)?;
    let parts = load_parts(db, message_ids)?;
    let max_chars = max_message_chars(leaf_chunk_tokens);
    let mut entries = Vec::with_capacity(message_ids.len());
    let (mut earliest, mut latest): (Option<DateTime<Utc>>, Option<DateTime<Utc>>) = (None, None);
    let mut file_ids = Vec::new();
    let mut structured = Vec::with_capacity(message_ids.len());
    for (id, parts) in message_ids.iter().zip(&parts) {
        let Some(crate::store::messages::MessageText {
            role,
            content,
            created_at,
            ..
        }) = rows.get(id)
        else {
            continue;
        };
        let at = time::parse_timestamp(created_at);
        if let Some(at) = at {
            earliest = Some(earliest.map_or(at, |e| e.min(at)));
            latest = Some(latest.map_or(at, |l| l.max(at)));
        }
        file_ids_in(content, &mut file_ids);
        let body = if parts.is_empty() {
            content.trim().to_string()
        } else {
            parts.iter().filter_map(render_part).collect::<Vec<_>>().join("\n")
        };
        if body.trim().is_empty() {
            continue;
        }
        let stamp = at.map(|at| time::format_timestamp(&at, zone)).unwrap_or_default();
        let header = if stamp.is_empty() || stamps == Stamps::Without {
            format!("[{role}]")
        } else {
            format!("[{stamp} | {role}]")
        };
        entries.push(format!("{header}\n{}", clip(body.trim(), max_chars)));
        let parts: Vec<SourcePart> = if parts.is_empty() {
            vec![SourcePart::Text(content.trim().to_string())]
        } else {
            parts.iter().filter_map(|p| entry_part(p, role)).collect()
        };
        structured.push(SourceEntry {
            role: role.clone(),
            stamp,
            parts,
        });
    }
    Ok(LeafSource {
        text: entries.join("\n\n"),
        earliest,
        latest,
        file_ids,
        entries: structured,
    })
}

/// The earliest/latest instants of a summary (its own `created_at` when unknown).
pub(crate) fn summary_range(f: &SummaryFacts) -> (Option<DateTime<Utc>>, Option<DateTime<Utc>>) {
    let created = time::parse_timestamp(&f.created_at);
    (
        f.earliest_at.as_deref().and_then(time::parse_timestamp).or(created),
        f.latest_at.as_deref().and_then(time::parse_timestamp).or(created),
    )
}

/// Renders a time range, or an empty string when unknown.
pub(crate) fn range_text(earliest: Option<DateTime<Utc>>, latest: Option<DateTime<Utc>>, zone: DisplayZone) -> String {
    match (earliest, latest) {
        (Some(a), Some(b)) => time::format_time_range(&a, &b, zone),
        (Some(a), None) | (None, Some(a)) => time::format_timestamp(&a, zone),
        (None, None) => String::new(),
    }
}

/// The structure of a condensed pass's source: one `summary` entry per input.
pub(crate) fn condensed_entries(inputs: &[(&SummaryFacts, &str)], zone: DisplayZone) -> Vec<SourceEntry> {
    inputs
        .iter()
        .map(|(facts, content)| {
            let (a, b) = summary_range(facts);
            SourceEntry::text("summary", &range_text(a, b, zone), content.trim())
        })
        .collect()
}

/// Builds the source of a condensed pass: `[time range]\ncontent` per input.
pub(crate) fn condensed_source(inputs: &[(&SummaryFacts, &str)], zone: DisplayZone) -> String {
    inputs
        .iter()
        .map(|(facts, content)| {
            let (a, b) = summary_range(facts);
            let range = range_text(a, b, zone);
            if range.is_empty() {
                content.trim().to_string()
            } else {
                format!("[{range}]\n{}", content.trim())
            }
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// The structure of a stored summary's source, as its pass saw it: its messages (leaf) or its
/// inputs (condensed). For scoring old summaries.
pub(crate) fn summary_entries<'a>(
    db: impl Into<Db<'a>>,
    summary_id: &str,
    zone: DisplayZone,
    leaf_chunk_tokens: i64,
) -> Result<Vec<SourceEntry>> {
    let db = db.into();
    let inputs: Vec<(SummaryFacts, String)> = summaries::inputs_of(db, summary_id)?
        .into_iter()
        .map(|i| (SummaryFacts::of_input(&i), i.content))
        .collect();
    if !inputs.is_empty() {
        let pairs: Vec<(&SummaryFacts, &str)> = inputs.iter().map(|(f, c)| (f, c.as_str())).collect();
        return Ok(condensed_entries(&pairs, zone));
    }
    let ids = summaries::messages_of(db, summary_id)?;
    Ok(leaf_source(db, &ids, zone, leaf_chunk_tokens, Stamps::With)?.entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_ids_are_found_on_word_boundaries() {
        let mut out = Vec::new();
        file_ids_in("see file_0123456789abcdef and FILE_0123456789ABCDEF, not xfile_0123456789abcdef or file_0123456789abcdefg; file_1111111111111111.", &mut out);
        assert_eq!(out, ["file_0123456789abcdef", "file_1111111111111111"]);
    }

    #[test]
    fn condensed_source_has_range_headers() {
        let facts = SummaryFacts {
            depth: 0,
            earliest_at: Some("2026-02-17T15:37:00.000Z".into()),
            latest_at: Some("2026-02-17T17:21:00.000Z".into()),
            created_at: "2026-02-18 00:00:00".into(),
            descendant_count: 0,
            descendant_token_count: 0,
            source_message_token_count: 0,
        };
        let no_range = SummaryFacts {
            earliest_at: None,
            latest_at: None,
            ..facts.clone()
        };
        let s = condensed_source(&[(&facts, " first \n"), (&no_range, "second")], DisplayZone::Utc);
        assert_eq!(
            s,
            "[2026-02-17 15:37–17:21 UTC]\nfirst\n\n[2026-02-18 00:00 UTC]\nsecond"
        );
    }

    #[test]
    fn long_message_bodies_are_clipped_with_a_marker() {
        let s = clip(&"x".repeat(10), 4);
        assert_eq!(s, "xxxx\n[… 6 more characters]");
    }
}
