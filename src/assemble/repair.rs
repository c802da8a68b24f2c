//! Tool-call / tool-result pairing repair, so the assembled sequence is one a strict provider
//! accepts: every tool result comes right after the assistant message that calls it, orphan
//! results are dropped, a call without a result gets a synthetic error result, a call id is
//! used once, and empty messages are dropped. Interrupted turns and aborted (empty) assistant
//! messages in real transcripts are exactly these cases.

use std::collections::{HashMap, HashSet};

use serde::Serialize;
#[cfg(test)]
use serde_json::Value;

#[cfg(test)]
use super::content::CALL_TYPES;
use super::content::{Block, BlockKind, Content};
use super::render::Msg;
use crate::store::normalize::Role;

pub(crate) const SYNTHETIC_TEXT: &str =
    "[lcm-native] missing tool result in session history; inserted synthetic error result for transcript repair.";

/// The id of a tool call in a block of a message's JSON (the validator's reading of what
/// `BlockKind::Call` is).
#[cfg(test)]
fn call_id(block: &Value) -> Option<&str> {
    let t = block.get("type")?.as_str()?;
    if !CALL_TYPES.contains(&t) {
        return None;
    }
    block
        .get("id")
        .or_else(|| block.get("call_id"))
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

/// True when nothing in the content would reach the model: no blocks, blank text, or (for an
/// assistant) only reasoning.
fn is_empty(m: &Msg) -> bool {
    match &m.content {
        Content::Text(s) => s.trim().is_empty(),
        Content::Blocks(blocks) => blocks.iter().all(|b| match b.kind() {
            BlockKind::Text { blank } => *blank,
            BlockKind::Reasoning => m.role == Role::Assistant,
            BlockKind::Call { .. } | BlockKind::Other => false,
        }),
    }
}

/// Repairs `msgs` in order.
pub(crate) fn repair(msgs: Vec<Msg>) -> (Vec<Msg>, RepairStats) {
    let mut stats = RepairStats::default();
    let mut out: Vec<Msg> = Vec::with_capacity(msgs.len() + 4);
    let mut seen_calls: HashSet<String> = HashSet::new();
    let mut msgs: Vec<Option<Msg>> = msgs.into_iter().map(Some).collect();
    let mut i = 0;
    while i < msgs.len() {
        let Some(mut m) = msgs[i].take() else {
            i += 1;
            continue;
        };
        match m.role {
            Role::ToolResult => {
                // Not claimed by the assistant message before it.
                stats.orphan_results_dropped += 1;
                i += 1;
            }
            Role::User | Role::System => {
                if is_empty(&m) {
                    stats.empty_messages_dropped += 1;
                } else {
                    out.push(m);
                }
                i += 1;
            }
            Role::Assistant => {
                let mut calls: Vec<(String, Option<String>)> = Vec::new();
                if let Content::Blocks(blocks) = &mut m.content {
                    blocks.retain(|b| match b.kind() {
                        BlockKind::Call { id, .. } if seen_calls.contains(id) || calls.iter().any(|(c, _)| c == id) => {
                            stats.duplicate_calls_removed += 1;
                            false
                        }
                        BlockKind::Call { id, name } => {
                            calls.push((id.clone(), name.clone()));
                            true
                        }
                        _ => true,
                    });
                }
                i += 1;
                if is_empty(&m) {
                    stats.empty_messages_dropped += 1;
                    continue;
                }
                if calls.is_empty() {
                    out.push(m);
                    continue;
                }
                // The results of these calls, up to the next assistant message; anything else
                // in between follows the results.
                let mut results: HashMap<String, Msg> = HashMap::new();
                let mut rest: Vec<Msg> = Vec::new();
                while i < msgs.len() && msgs[i].as_ref().is_some_and(|n| n.role != Role::Assistant) {
                    let n = msgs[i].take().expect("checked");
                    i += 1;
                    if n.role == Role::ToolResult {
                        match n.tool_call_id.as_deref() {
                            Some(id) if calls.iter().any(|(c, _)| c == id) && !results.contains_key(id) => {
                                results.insert(id.to_string(), n);
                            }
                            _ => stats.orphan_results_dropped += 1,
                        }
                    } else {
                        rest.push(n);
                    }
                }
                out.push(m);
                for (id, name) in calls {
                    seen_calls.insert(id.clone());
                    match results.remove(&id) {
                        Some(r) => out.push(r),
                        None => {
                            stats.synthetic_results += 1;
                            out.push(Msg {
                                role: Role::ToolResult,
                                content: Content::Blocks(vec![Block::text(SYNTHETIC_TEXT)]),
                                tool_call_id: Some(id),
                                tool_name: name,
                                is_error: Some(true),
                                echo: None,
                                item: None,
                                recall: None,
                            });
                        }
                    }
                }
                for r in rest {
                    if r.role != Role::ToolResult && is_empty(&r) {
                        stats.empty_messages_dropped += 1;
                    } else {
                        out.push(r);
                    }
                }
            }
        }
    }
    (out, stats)
}

/// Checks a sequence the way a strict provider does; returns the first violation. Used by the
/// tests and available to hosts through the assemble tests' helper.
#[cfg(test)]
pub(crate) fn validate(messages: &[Value]) -> Result<(), String> {
    let role = |m: &Value| m.get("role").and_then(Value::as_str).unwrap_or("").to_string();
    if let Some(first) = messages.first() {
        if role(first) != "user" {
            return Err(format!("the first message is {}, not user", role(first)));
        }
    }
    let mut all_calls: HashSet<String> = HashSet::new();
    let mut i = 0;
    while i < messages.len() {
        let m = &messages[i];
        let r = role(m);
        let content = m.get("content").cloned().unwrap_or(Value::Null);
        let empty = match &content {
            Value::String(s) => s.trim().is_empty(),
            Value::Array(a) => a.is_empty(),
            _ => true,
        };
        if empty {
            return Err(format!("message {i} ({r}) has empty content"));
        }
        match r.as_str() {
            "user" => i += 1,
            "toolResult" => return Err(format!("message {i}: a tool result that does not follow its call")),
            "assistant" => {
                let calls: Vec<String> = content
                    .as_array()
                    .map(|a| a.iter().filter_map(|b| call_id(b).map(str::to_string)).collect())
                    .unwrap_or_default();
                for c in &calls {
                    if !all_calls.insert(c.clone()) {
                        return Err(format!("message {i}: tool call id {c} used twice"));
                    }
                }
                i += 1;
                let mut answered: HashSet<String> = HashSet::new();
                while i < messages.len() && role(&messages[i]) == "toolResult" {
                    let id = messages[i].get("toolCallId").and_then(Value::as_str).unwrap_or("");
                    if !calls.iter().any(|c| c == id) {
                        return Err(format!(
                            "message {i}: result for {id}, which the assistant before it did not call"
                        ));
                    }
                    if !answered.insert(id.to_string()) {
                        return Err(format!("message {i}: second result for {id}"));
                    }
                    i += 1;
                }
                if let Some(missing) = calls.iter().find(|c| !answered.contains(*c)) {
                    return Err(format!("tool call {missing} has no result right after it"));
                }
            }
            other => return Err(format!("message {i} has role {other:?}")),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn blocks(v: Value) -> Content {
        Content::Blocks(v.as_array().unwrap().iter().map(Block::from_value).collect())
    }
    fn user(t: &str) -> Msg {
        Msg::user(t.into(), Some(0))
    }
    fn assistant(content: Value) -> Msg {
        Msg {
            role: Role::Assistant,
            content: blocks(content),
            tool_call_id: None,
            tool_name: None,
            is_error: None,
            echo: None,
            item: Some(0),
            recall: None,
        }
    }
    fn result(id: &str) -> Msg {
        Msg {
            role: Role::ToolResult,
            content: blocks(json!([{"type": "text", "text": format!("out {id}")}])),
            tool_call_id: Some(id.into()),
            tool_name: Some("read".into()),
            is_error: None,
            echo: None,
            item: Some(0),
            recall: None,
        }
    }
    fn call(id: &str) -> Value {
        json!({"type": "toolCall", "id": id, "name": "read", "arguments": {}})
    }
    fn json_of(msgs: &[Msg]) -> Vec<Value> {
        msgs.iter().map(Msg::to_json).collect()
    }

    #[test]
    fn results_move_right_after_their_call_and_the_rest_follows() {
        let (out, stats) = repair(vec![
            user("go"),
            assistant(json!([{"type": "text", "text": "two calls"}, call("a"), call("b")])),
            user("interrupting"),
            result("b"),
            result("a"),
        ]);
        let roles: Vec<_> = out.iter().map(|m| (m.role, m.tool_call_id.clone())).collect();
        assert_eq!(
            roles,
            [
                (Role::User, None),
                (Role::Assistant, None),
                (Role::ToolResult, Some("a".into())),
                (Role::ToolResult, Some("b".into())),
                (Role::User, None)
            ]
        );
        assert_eq!(stats, RepairStats::default());
        validate(&json_of(&out)).unwrap();
    }

    #[test]
    fn interrupted_calls_get_a_synthetic_error_result() {
        let (out, stats) = repair(vec![user("go"), assistant(json!([call("a")])), user("stop!")]);
        assert_eq!(stats.synthetic_results, 1);
        assert_eq!(out[2].tool_call_id.as_deref(), Some("a"));
        assert_eq!(out[2].is_error, Some(true));
        assert_eq!(out[2].tool_name.as_deref(), Some("read"));
        validate(&json_of(&out)).unwrap();
    }

    #[test]
    fn orphans_duplicates_and_empty_messages_are_dropped() {
        let (out, stats) = repair(vec![
            result("x"),
            user("go"),
            assistant(json!([])),
            assistant(json!([{"type": "text", "text": "   "}])),
            assistant(json!([{"type": "thinking", "thinking": "hmm"}])),
            assistant(json!([call("a")])),
            result("a"),
            result("a"),
            assistant(json!([call("a"), {"type": "text", "text": "again"}])),
            result("a"),
            user(""),
        ]);
        assert_eq!(stats.orphan_results_dropped, 3);
        assert_eq!(stats.duplicate_calls_removed, 1);
        assert_eq!(stats.empty_messages_dropped, 4);
        assert_eq!(stats.synthetic_results, 0);
        assert_eq!(out.len(), 4);
        validate(&json_of(&out)).unwrap();
    }

    #[test]
    fn the_validator_rejects_what_a_strict_provider_rejects() {
        let bad = [
            vec![json!({"role": "assistant", "content": [{"type": "text", "text": "hi"}]})],
            vec![json!({"role": "user", "content": ""})],
            vec![
                json!({"role": "user", "content": "x"}),
                json!({"role": "toolResult", "toolCallId": "a", "content": [{"type": "text", "text": "r"}]}),
            ],
            vec![
                json!({"role": "user", "content": "x"}),
                json!({"role": "assistant", "content": [call("a")]}),
            ],
            vec![
                json!({"role": "user", "content": "x"}),
                json!({"role": "assistant", "content": [call("a")]}),
                json!({"role": "user", "content": "y"}),
                json!({"role": "toolResult", "toolCallId": "a", "content": [{"type": "text", "text": "r"}]}),
            ],
        ];
        for seq in bad {
            assert!(validate(&seq).is_err(), "{seq:?}");
        }
    }
}

/// What the pairing repair of tool calls and results changed.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct RepairStats {
    pub orphan_results_dropped: i64,
    pub synthetic_results: i64,
    pub duplicate_calls_removed: i64,
    pub empty_messages_dropped: i64,
}
