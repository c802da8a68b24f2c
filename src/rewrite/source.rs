//! The source text of a rewrite, as lcm-tui builds it: a leaf from its messages, one line each
//! (`[2026-02-17 15:37 UTC] [user] content`); a condensed node from its inputs, each under its
//! time range. New texts of summaries already rewritten in the run replace the stored ones.

use std::collections::HashMap;

use rusqlite::{params, Connection};

use super::Target;
use crate::error::Result;
use crate::live::SummaryFacts;
use crate::source::{clip, condensed_entries, condensed_source, leaf_source, range_text, summary_range};
use crate::store::messages::load_parts;
use crate::summarizer::entries::SourceEntry;
use crate::time::{self, DisplayZone};

pub(super) struct Built {
    pub text: String,
    pub child_count: usize,
    pub time_range: String,
    /// The one or two summaries of the same depth just before this one (leaf and depth 1).
    pub previous_context: String,
    /// The source's structure (messages, or the inputs with their new texts).
    pub entries: Vec<SourceEntry>,
}

/// A message's text for the source: its stored text, else what its parts hold.
fn message_text(content: &str, parts: &[crate::store::messages::StoredPart]) -> String {
    if !content.trim().is_empty() {
        return content.trim().to_string();
    }
    let from_parts: Vec<String> = parts
        .iter()
        .filter_map(|p| {
            let mut s = p.text_content.clone().unwrap_or_default();
            if let Some(i) = p.tool_input.as_deref().filter(|t| !t.is_empty()) {
                s.push_str(&format!("\nTool input: {i}"));
            }
            if let Some(o) = p.tool_output.as_deref().filter(|t| !t.is_empty()) {
                s.push_str(&format!("\nTool output: {o}"));
            }
            let s = s.trim().to_string();
            (!s.is_empty()).then_some(s)
        })
        .collect();
    if from_parts.is_empty() {
        "(empty)".to_string()
    } else {
        from_parts.join("\n\n")
    }
}

pub(super) fn build(
    conn: &Connection,
    target: &Target,
    rewritten: &HashMap<String, String>,
    timestamps: bool,
    zone: DisplayZone,
    leaf_chunk_tokens: i64,
) -> Result<Built> {
    let facts = |depth: i64, earliest_at: Option<String>, latest_at: Option<String>, created_at: String| SummaryFacts {
        depth,
        earliest_at,
        latest_at,
        created_at,
        descendant_count: 0,
        descendant_token_count: 0,
        source_message_token_count: 0,
    };
    let own = facts(
        target.depth,
        target.earliest_at.clone(),
        target.latest_at.clone(),
        target.created_at.clone(),
    );
    let (a, b) = summary_range(&own);
    let time_range = range_text(a, b, zone);
    let inputs: Vec<(SummaryFacts, String, String)> = conn
        .prepare_cached(
            "SELECT s.summary_id, s.depth, s.earliest_at, s.latest_at, s.created_at, s.content
             FROM summary_parents p JOIN summaries s ON s.summary_id = p.parent_summary_id
             WHERE p.summary_id = ?1 ORDER BY p.ordinal",
        )?
        .query_map([&target.summary_id], |r| {
            Ok((
                facts(r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?),
                r.get::<_, String>(0)?,
                r.get::<_, String>(5)?,
            ))
        })?
        .collect::<std::result::Result<_, _>>()?;
    let (text, child_count, entries) = if !inputs.is_empty() {
        let current: Vec<(&SummaryFacts, String)> = inputs
            .iter()
            .map(|(f, id, content)| (f, rewritten.get(id).cloned().unwrap_or_else(|| content.clone())))
            .filter(|(_, c)| !c.trim().is_empty())
            .collect();
        let refs: Vec<(&SummaryFacts, &str)> = current.iter().map(|(f, c)| (*f, c.as_str())).collect();
        let text = if timestamps {
            condensed_source(&refs, zone)
        } else {
            current.iter().map(|(_, c)| c.trim()).collect::<Vec<_>>().join("\n\n")
        };
        (text, inputs.len(), condensed_entries(&refs, zone))
    } else {
        let rows: Vec<(i64, String, String, String)> = conn
            .prepare_cached(
                "SELECT m.message_id, m.role, m.content, m.created_at FROM summary_messages sm
                 JOIN messages m ON m.message_id = sm.message_id
                 WHERE sm.summary_id = ?1 ORDER BY sm.ordinal",
            )?
            .query_map([&target.summary_id], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
            })?
            .collect::<std::result::Result<_, _>>()?;
        let ids: Vec<i64> = rows.iter().map(|r| r.0).collect();
        let parts = load_parts(conn, &ids)?;
        let max_chars = (leaf_chunk_tokens.max(1000) * 4) as usize;
        let lines: Vec<String> = rows
            .iter()
            .zip(&parts)
            .map(|((_, role, content, created_at), parts)| {
                let role = if role.trim().is_empty() {
                    "unknown"
                } else {
                    role.as_str()
                };
                let body = clip(&message_text(content, parts), max_chars);
                match time::parse_timestamp(created_at).filter(|_| timestamps) {
                    Some(at) => format!("[{}] [{role}] {body}", time::format_timestamp(&at, zone)),
                    None => format!("[{role}] {body}"),
                }
            })
            .collect();
        let entries = leaf_source(conn, &ids, zone, leaf_chunk_tokens)?.entries;
        (lines.join("\n"), rows.len(), entries)
    };
    let previous_context = if target.depth <= 1 {
        previous(conn, target, rewritten)?
    } else {
        String::new()
    };
    Ok(Built {
        text,
        child_count,
        time_range,
        previous_context,
        entries,
    })
}

/// The two summaries of the same depth and conversation that precede `target` in time, in
/// time order, with their new text where they were rewritten in this run.
fn previous(conn: &Connection, target: &Target, rewritten: &HashMap<String, String>) -> Result<String> {
    let mut rows: Vec<(String, String)> = conn
        .prepare_cached(
            "SELECT s.summary_id, s.content FROM summaries s, summaries t
             WHERE t.summary_id = ?1 AND s.conversation_id = t.conversation_id AND s.depth = t.depth
               AND s.summary_id <> t.summary_id
               AND (julianday(COALESCE(s.earliest_at, s.created_at)), julianday(s.created_at), s.summary_id)
                 < (julianday(COALESCE(t.earliest_at, t.created_at)), julianday(t.created_at), t.summary_id)
             ORDER BY julianday(COALESCE(s.earliest_at, s.created_at)) DESC, julianday(s.created_at) DESC,
                      s.summary_id DESC
             LIMIT 2",
        )?
        .query_map(params![target.summary_id], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<std::result::Result<_, _>>()?;
    rows.reverse();
    Ok(rows
        .into_iter()
        .map(|(id, content)| rewritten.get(&id).cloned().unwrap_or(content).trim().to_string())
        .filter(|c| !c.is_empty())
        .collect::<Vec<_>>()
        .join("\n\n"))
}
