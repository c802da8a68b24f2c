//! `describe`: everything known about one summary or one message, and where it sits in the DAG.

use crate::api::{CoveredMessages, Description, InputRef, MessageDescription, PartInfo, SummaryDescription};
use serde_json::Value;

use super::coverage::{self};
use crate::error::{LcmError, Result};
use crate::sql::Db;
use crate::store::messages::{self};
use crate::store::summaries::{self, SummaryFields, SummaryRecord};
use crate::time::{self, DisplayZone};

/// What `describe` was asked about: a summary id (`sum_…`) or a message id.
#[derive(Clone, Debug, PartialEq)]
pub enum ItemId {
    Summary(String),
    Message(i64),
}

impl ItemId {
    /// A number is a message id; a string is a summary id, or a message id written as digits.
    pub fn from_json(v: &Value) -> Result<ItemId> {
        match v {
            Value::Number(n) => n
                .as_i64()
                .filter(|id| *id > 0)
                .map(ItemId::Message)
                .ok_or_else(|| LcmError::invalid_input(format!("a message id is a positive integer, got {v}"))),
            Value::String(s) if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) => s
                .parse()
                .map(ItemId::Message)
                .map_err(|_| LcmError::not_found("message", s)),
            Value::String(s) if !s.trim().is_empty() => Ok(ItemId::Summary(s.trim().to_string())),
            _ => Err(LcmError::invalid_input(format!(
                "the id must be a summary id (\"sum_…\") or a message id (a positive integer), got {v}"
            ))),
        }
    }
}

pub(crate) fn describe<'a>(db: impl Into<Db<'a>>, id: &ItemId, zone: DisplayZone) -> Result<Description> {
    let db = db.into();
    let _snapshot = db.snapshot()?;
    let conn = db;
    match id {
        ItemId::Summary(sid) => Ok(Description::Summary(Box::new(describe_summary(conn, sid, zone)?))),
        ItemId::Message(mid) => Ok(Description::Message(Box::new(describe_message(conn, *mid)?))),
    }
}

fn describe_summary(conn: Db, summary_id: &str, zone: DisplayZone) -> Result<SummaryDescription> {
    let summary = summaries::get(conn, summary_id)?;
    let file_ids = summaries::file_ids(conn, summary_id)?;
    let inputs: Vec<InputRef> = summaries::inputs_of(conn, summary_id)?
        .into_iter()
        .map(|i| InputRef {
            summary_id: i.summary_id,
            kind: i.kind,
            depth: i.depth,
            token_count: i.token_count,
        })
        .collect();
    let consumed_by = coverage::consumer_of(conn, summary_id)?;
    let cover = coverage::of_summary(conn, summary_id)?;
    let f = &summary.fields;
    let range = crate::assemble::render::range(f.earliest_at.as_deref(), f.latest_at.as_deref(), zone);
    let summary = SummaryRecord {
        fields: SummaryFields {
            earliest_at: summary.fields.earliest_at.map(time::iso_or_raw),
            latest_at: summary.fields.latest_at.map(time::iso_or_raw),
            ..summary.fields
        },
        created_at: time::iso_or_raw(summary.created_at),
        ..summary
    };
    Ok(SummaryDescription {
        range,
        file_ids,
        inputs,
        covered_messages: covered_messages(conn, summary_id)?,
        live: cover.live,
        consumed_by,
        live_summary: cover.live_summary,
        chain: cover.chain,
        fidelity_detail: crate::fidelity::survey::of_summary(conn, summary_id, zone)?,
        versions: crate::history::list(conn, summary_id)?,
        summary,
    })
}

/// The messages under a summary: its own (leaf) and those of every summary below it.
fn covered_messages(conn: Db, summary_id: &str) -> Result<CoveredMessages> {
    let (count, first_message_id, last_message_id) = crate::store::dag::covered_span(conn, summary_id)?;
    Ok(CoveredMessages {
        count,
        first_message_id,
        last_message_id,
    })
}

fn describe_message(conn: Db, message_id: i64) -> Result<MessageDescription> {
    let (_, conversation_id) = messages::conversations_of(conn, &[message_id])?
        .pop()
        .ok_or_else(|| LcmError::not_found("message", message_id))?;
    let message = messages::by_ids(conn, &[message_id])?
        .pop()
        .ok_or_else(|| LcmError::not_found("message", message_id))?;
    let parts = messages::load_parts(conn, &[message_id])?.pop().unwrap_or_default();
    message_description(conn, message, conversation_id, parts)
}

/// A message's description from the message and its parts as read (whole, or with its long
/// texts cut: `Engine::describe_with`), and where it sits in the DAG.
pub(crate) fn message_description(
    conn: Db,
    message: messages::StoredMessage,
    conversation_id: i64,
    parts: Vec<messages::StoredPart>,
) -> Result<MessageDescription> {
    let parts = parts
        .into_iter()
        .enumerate()
        .map(|(ordinal, p)| PartInfo {
            block_type: p
                .raw()
                .and_then(|r| r.get("type"))
                .and_then(Value::as_str)
                .map(str::to_string),
            part_id: p.part_id,
            part_type: p.part_type,
            ordinal,
            tool_call_id: p.tool_call_id,
            tool_name: p.tool_name,
        })
        .collect();
    let cover = coverage::of_message(conn, message.message_id)?;
    Ok(MessageDescription {
        message,
        conversation_id,
        parts,
        live: cover.live,
        live_summary: cover.live_summary,
        chain: cover.chain,
    })
}
