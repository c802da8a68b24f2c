//! The source text of a rewrite: what compaction rendered for the first summary (a leaf's
//! messages with their tool calls, arguments and results, `source::leaf_source`; a condensed
//! node's inputs, each under its time range). New texts of summaries already rewritten in the
//! run replace the stored ones.

use std::collections::HashMap;

use crate::sql::Db;

use super::Target;
use crate::error::Result;
use crate::live::SummaryFacts;
use crate::source::{condensed_entries, condensed_source, leaf_source, range_text, summary_range, Stamps};
use crate::store::summaries;
use crate::summarizer::entries::SourceEntry;
use crate::time::DisplayZone;

pub(super) struct Built {
    pub text: String,
    pub child_count: usize,
    pub time_range: String,
    /// The one or two summaries of the same depth just before this one (leaf and depth 1).
    pub previous_context: String,
    /// The source's structure (messages, or the inputs with their new texts).
    pub entries: Vec<SourceEntry>,
}

pub(super) fn build(
    conn: Db,
    target: &Target,
    rewritten: &HashMap<String, String>,
    timestamps: bool,
    zone: DisplayZone,
    leaf_chunk_tokens: i64,
) -> Result<Built> {
    let own = SummaryFacts {
        depth: target.depth,
        earliest_at: target.earliest_at.clone(),
        latest_at: target.latest_at.clone(),
        created_at: target.created_at.clone(),
        descendant_count: 0,
        descendant_token_count: 0,
        source_message_token_count: 0,
    };
    let (a, b) = summary_range(&own);
    let time_range = range_text(a, b, zone);
    let inputs: Vec<(SummaryFacts, String, String)> = summaries::inputs_of(conn, &target.summary_id)?
        .into_iter()
        .map(|i| (SummaryFacts::of_input(&i), i.summary_id, i.content))
        .collect();
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
        let ids = summaries::messages_of(conn, &target.summary_id)?;
        // The text compaction rendered for the first summary: tool calls with their arguments,
        // results, every part.
        let stamps = if timestamps { Stamps::With } else { Stamps::Without };
        let leaf = leaf_source(conn, &ids, zone, leaf_chunk_tokens, stamps)?;
        (leaf.text, ids.len(), leaf.entries)
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
fn previous(conn: Db, target: &Target, rewritten: &HashMap<String, String>) -> Result<String> {
    let rows = summaries::preceding(conn, &target.summary_id)?;
    Ok(rows
        .into_iter()
        .map(|(id, content)| rewritten.get(&id).cloned().unwrap_or(content).trim().to_string())
        .filter(|c| !c.is_empty())
        .collect::<Vec<_>>()
        .join("\n\n"))
}
