//! Turning the host's message shapes into rows. Validation happens here, before any write, so
//! a malformed message rejects the whole call with its index and nothing is stored.
//!
//! Storage follows lossless-claw: `messages.content` is the plain-text projection (text blocks
//! joined by a newline), and every content block becomes one `message_parts` row whose
//! metadata keeps the original block under `raw`, so it can be rebuilt exactly.

use serde::Serialize;
use serde_json::Value;

use crate::error::{LcmError, Result};
use crate::time;
use crate::tokens;

/// Roles a host message can have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    User,
    Assistant,
    ToolResult,
    System,
}

impl Role {
    /// The host's name (`toolResult`); `tool` is accepted as an alias.
    pub fn parse(s: &str) -> Option<Role> {
        match s {
            "user" => Some(Role::User),
            "assistant" => Some(Role::Assistant),
            "toolResult" | "tool" => Some(Role::ToolResult),
            "system" => Some(Role::System),
            _ => None,
        }
    }

    /// The value of `messages.role` (the plugin's CHECK constraint uses `tool`).
    pub fn db(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::ToolResult => "tool",
            Role::System => "system",
        }
    }

    pub fn host(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::ToolResult => "toolResult",
            Role::System => "system",
        }
    }

    pub fn from_db(s: &str) -> Role {
        match s {
            "user" => Role::User,
            "tool" => Role::ToolResult,
            "system" => Role::System,
            _ => Role::Assistant,
        }
    }
}

/// One `message_parts` row, ready to insert.
#[derive(Debug, Clone, PartialEq)]
pub struct PartRow {
    pub part_type: &'static str,
    pub text_content: Option<String>,
    pub tool_call_id: Option<String>,
    pub tool_name: Option<String>,
    pub tool_input: Option<String>,
    pub tool_output: Option<String>,
    pub metadata: String,
}

/// A validated message, with everything its rows need.
#[derive(Debug, Clone)]
pub struct NewMessage {
    pub role: Role,
    /// `messages.content`: the plain-text projection.
    pub content: String,
    pub token_count: i64,
    /// `YYYY-MM-DD HH:MM:SS` UTC, when the host supplied a time.
    pub created_at: Option<String>,
    pub entry_id: Option<String>,
    /// lossless-claw 1.x's `stable_event_key`: `assistant-response:<id>` for an assistant
    /// message with the provider's response id, `tool-result:<id>` for a tool result whose
    /// call id is a provider's (`toolu_…`, `call_…`). A message whose key the conversation
    /// holds already is a replay and is skipped.
    pub stable_event_key: Option<String>,
    pub parts: Vec<PartRow>,
    /// What `redactPatterns` replaced in the host's message before it was normalised.
    pub redacted: super::redactions::IngestRedaction,
}

#[derive(Serialize)]
struct PartMeta<'a> {
    #[serde(rename = "originalRole")]
    original_role: &'a str,
    #[serde(rename = "toolCallId", skip_serializing_if = "Option::is_none")]
    tool_call_id: Option<&'a str>,
    #[serde(rename = "toolName", skip_serializing_if = "Option::is_none")]
    tool_name: Option<&'a str>,
    #[serde(rename = "isError", skip_serializing_if = "Option::is_none")]
    is_error: Option<bool>,
    #[serde(rename = "rawType", skip_serializing_if = "Option::is_none")]
    raw_type: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    raw: Option<&'a Value>,
    #[serde(rename = "rawMessage", skip_serializing_if = "Option::is_none")]
    raw_message: Option<&'a Value>,
    /// The message's own fields beyond its content, on its first part (`HostFields`).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    host: Option<&'a HostFields<'a>>,
}

/// The fields of a host message that change what the host sends to the provider when the
/// message comes back as history, kept so that assembly hands them back as they came: its time
/// (OpenClaw stamps each user message `[Fri 2026-11-27 05:39 UTC] …` from it on every request),
/// OpenClaw's sender metadata (`__openclaw`, shown to the model as a sender block), the model
/// that wrote an assistant message (a message from another model is converted) and why it
/// stopped (a failed one is not sent). The model's names are lossless-claw 1.x's metadata keys,
/// so either plugin reads the other's rows.
#[derive(Serialize, Default, PartialEq)]
pub(crate) struct HostFields<'a> {
    #[serde(rename = "messageTimestamp", skip_serializing_if = "Option::is_none")]
    timestamp: Option<&'a Value>,
    #[serde(rename = "openclawMeta", skip_serializing_if = "Option::is_none")]
    openclaw: Option<&'a Value>,
    #[serde(rename = "modelProvider", skip_serializing_if = "Option::is_none")]
    provider: Option<&'a str>,
    #[serde(rename = "modelApi", skip_serializing_if = "Option::is_none")]
    api: Option<&'a str>,
    #[serde(rename = "modelId", skip_serializing_if = "Option::is_none")]
    model: Option<&'a str>,
    #[serde(rename = "responseModelId", skip_serializing_if = "Option::is_none")]
    response_model: Option<&'a str>,
    #[serde(rename = "stopReason", skip_serializing_if = "Option::is_none")]
    stop_reason: Option<&'a str>,
}

impl<'a> HostFields<'a> {
    /// The fields of `obj` worth keeping (`None` when it has none).
    fn of(obj: &'a serde_json::Map<String, Value>, role: Role) -> Option<HostFields<'a>> {
        let assistant = role == Role::Assistant;
        let text = |k: &str| assistant.then(|| str_field(obj, &[k])).flatten();
        let fields = HostFields {
            timestamp: obj.get("timestamp").filter(|v| v.is_number() || v.is_string()),
            openclaw: obj.get("__openclaw").filter(|v| v.is_object()),
            provider: text("provider"),
            api: text("api"),
            model: text("model"),
            response_model: text("responseModel"),
            stop_reason: text("stopReason"),
        };
        (fields != HostFields::default()).then_some(fields)
    }
}

/// Message kinds of OpenClaw's transcript that are not model roles (a plugin's custom message,
/// a `!command` run by the user, summaries of branches and of the host's own compactions).
/// They are stored, and shown to the model as user messages.
pub(crate) const HOST_KINDS: &[&str] = &["custom", "bashExecution", "branchSummary", "compactionSummary"];

/// The text of a host message kind that has no `content`.
fn host_kind_text(kind: &str, obj: &serde_json::Map<String, Value>) -> String {
    let field = |k: &str| obj.get(k).and_then(Value::as_str).unwrap_or("");
    match kind {
        "bashExecution" => {
            let exit = match obj.get("exitCode").and_then(Value::as_i64) {
                Some(code) => format!("\n[exit code {code}]"),
                None => String::new(),
            };
            format!("$ {}\n{}{exit}", field("command"), field("output"))
        }
        _ => field("summary").to_string(),
    }
}

/// `message_parts.part_type` of a content block type (the plugin's mapping).
pub(crate) fn part_type_of(block_type: &str) -> &'static str {
    match block_type {
        "text" => "text",
        "thinking" | "reasoning" | "redacted_thinking" => "reasoning",
        "toolCall"
        | "tool_use"
        | "toolUse"
        | "tool-use"
        | "functionCall"
        | "function_call"
        | "tool_result"
        | "toolResult"
        | "tool"
        | "function_call_output" => "tool",
        "image" | "file" => "file",
        "step-start" | "step_start" => "step_start",
        "step-finish" | "step_finish" => "step_finish",
        "patch" => "patch",
        "snapshot" => "snapshot",
        "subtask" => "subtask",
        "retry" => "retry",
        "compaction" => "compaction",
        _ => "agent",
    }
}

fn str_field<'a>(obj: &'a serde_json::Map<String, Value>, keys: &[&str]) -> Option<&'a str> {
    keys.iter()
        .find_map(|k| obj.get(*k).and_then(Value::as_str))
        .filter(|s| !s.is_empty())
}

fn json_field(obj: &serde_json::Map<String, Value>, keys: &[&str]) -> Option<String> {
    keys.iter()
        .find_map(|k| obj.get(*k))
        .filter(|v| !v.is_null())
        .map(|v| v.to_string())
}

/// Validates and converts one host message. `index` is its position in the call, for errors.
pub fn normalize(index: usize, msg: &Value) -> Result<NewMessage> {
    let bad = |what: String| LcmError::invalid_input(format!("message {index}: {what}"));
    let obj = msg
        .as_object()
        .ok_or_else(|| bad(format!("expected an object, got {}", kind_of(msg))))?;
    let role_value = obj.get("role").ok_or_else(|| bad("`role` is missing".into()))?;
    let role_name = role_value.as_str().unwrap_or("");
    // The host's own message kinds beyond the model's roles are stored as user messages (the
    // schema's roles), their role and fields kept in the parts' metadata.
    let host_kind = HOST_KINDS.contains(&role_name);
    let role = Role::parse(role_name)
        .or(host_kind.then_some(Role::User))
        .ok_or_else(|| {
            bad(format!(
                "`role` must be \"user\", \"assistant\", \"toolResult\", \"system\" or one of the host's \
                 message kinds ({}), got {role_value}",
                HOST_KINDS.join(", ")
            ))
        })?;

    let message_call_id = str_field(obj, &["toolCallId", "tool_call_id"]);
    if role == Role::ToolResult && message_call_id.is_none() {
        return Err(bad("a toolResult message needs a non-empty string `toolCallId`".into()));
    }

    let created_at = match obj.get("timestamp").or_else(|| obj.get("createdAt")) {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) => Some(
            n.as_f64()
                .and_then(time::from_epoch_ms)
                .ok_or_else(|| bad(format!("`timestamp` {n} is not a valid epoch-milliseconds time")))?,
        ),
        Some(Value::String(s)) => {
            Some(time::parse_timestamp(s).ok_or_else(|| bad(format!("`timestamp` {s:?} is not an ISO-8601 time")))?)
        }
        Some(other) => {
            return Err(bad(format!(
                "`timestamp` must be epoch milliseconds or an ISO string, got {}",
                kind_of(other)
            )))
        }
    }
    .map(|dt| time::to_sqlite(&dt));

    let entry_id = match obj.get("entryId") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if !s.is_empty() => Some(s.clone()),
        Some(Value::Number(n)) => Some(n.to_string()),
        Some(other) => {
            return Err(bad(format!(
                "`entryId` must be a non-empty string, got {}",
                kind_of(other)
            )))
        }
    };

    let host_role = if host_kind { role_name } else { role.host() };
    let meta_call_id = (role == Role::ToolResult).then_some(message_call_id).flatten();
    // A tool result's name and error flag, kept so assembly can hand them back.
    let result_name = (role == Role::ToolResult)
        .then(|| str_field(obj, &["toolName", "tool_name"]))
        .flatten();
    let is_error = match obj.get("isError") {
        None | Some(Value::Null) => None,
        Some(Value::Bool(b)) if role == Role::ToolResult => Some(*b),
        Some(Value::Bool(_)) => None,
        Some(other) => return Err(bad(format!("`isError` must be a boolean, got {}", kind_of(other)))),
    };
    let synthesized = if host_kind && obj.get("content").is_none_or(Value::is_null) {
        Some(Value::from(host_kind_text(role_name, obj)))
    } else {
        None
    };
    let content = synthesized
        .as_ref()
        .or_else(|| obj.get("content"))
        .ok_or_else(|| bad("`content` is missing".into()))?;
    // The whole host message, for kinds whose fields the parts do not hold; for the others,
    // the fields the host needs back (on the first part).
    let raw_message = host_kind.then_some(msg);
    let host_fields = if host_kind { None } else { HostFields::of(obj, role) };
    let (text, token_count, parts) = match content {
        Value::String(s) => {
            let meta = PartMeta {
                original_role: host_role,
                tool_call_id: meta_call_id,
                tool_name: result_name,
                is_error,
                raw_type: None,
                raw: None,
                raw_message,
                host: host_fields.as_ref(),
            };
            let part = PartRow {
                part_type: "text",
                text_content: Some(s.clone()),
                tool_call_id: meta_call_id.map(str::to_string),
                tool_name: result_name.map(str::to_string),
                tool_input: None,
                tool_output: None,
                metadata: serde_json::to_string(&meta)?,
            };
            (s.clone(), tokens::estimate(s), vec![part])
        }
        Value::Array(blocks) => {
            let mut parts = Vec::with_capacity(blocks.len());
            let mut texts: Vec<&str> = Vec::new();
            for (bi, block) in blocks.iter().enumerate() {
                let b = block
                    .as_object()
                    .ok_or_else(|| bad(format!("content block {bi} must be an object, got {}", kind_of(block))))?;
                let btype = b
                    .get("type")
                    .and_then(Value::as_str)
                    .filter(|t| !t.is_empty())
                    .ok_or_else(|| bad(format!("content block {bi} needs a string `type`")))?;
                check_block(btype, b).map_err(|why| bad(format!("content block {bi} ({btype}): {why}")))?;
                let text_content = match btype {
                    "text" => b.get("text").and_then(Value::as_str),
                    "thinking" => b.get("thinking").and_then(Value::as_str),
                    _ => b.get("text").and_then(Value::as_str),
                };
                if btype == "text" {
                    texts.push(text_content.unwrap_or(""));
                }
                let part_type = part_type_of(btype);
                let tool_call_id = match part_type {
                    "tool" => str_field(b, &["id", "toolCallId", "tool_call_id", "tool_use_id", "call_id"]),
                    _ => str_field(b, &["toolCallId", "tool_call_id", "tool_use_id"]),
                }
                .or(meta_call_id);
                // A plain `{type: "text", text}` block is rebuilt exactly from `text_content`, so
                // its text is not stored a second time under `raw`.
                let plain_text = btype == "text" && b.len() == 2 && b.keys().eq(["type", "text"]);
                let meta = PartMeta {
                    original_role: host_role,
                    tool_call_id: meta_call_id,
                    tool_name: result_name,
                    is_error,
                    raw_type: Some(btype),
                    raw: (!plain_text).then_some(block),
                    raw_message: raw_message.filter(|_| bi == 0),
                    host: host_fields.as_ref().filter(|_| bi == 0),
                };
                parts.push(PartRow {
                    part_type,
                    text_content: text_content.map(str::to_string),
                    tool_call_id: tool_call_id.map(str::to_string),
                    tool_name: str_field(b, &["name", "toolName", "tool_name"])
                        .or(result_name)
                        .map(str::to_string),
                    tool_input: json_field(b, &["arguments", "input"]),
                    tool_output: json_field(b, &["output"]),
                    metadata: serde_json::to_string(&meta)?,
                });
            }
            let text = texts.join("\n");
            // Tokens of what assembly will emit: a lone user text block becomes a string;
            // other arrays are charged as their JSON.
            let lone_user_text = role == Role::User && blocks.len() == 1 && blocks[0]["type"] == "text";
            let token_count = if blocks.is_empty() || lone_user_text {
                tokens::estimate(&text)
            } else {
                tokens::estimate_json(content)
            };
            (text, token_count, parts)
        }
        other => {
            return Err(bad(format!(
                "`content` must be a string or an array of content blocks, got {}",
                kind_of(other)
            )))
        }
    };
    let stable_event_key = match role {
        Role::Assistant => str_field(obj, &["responseId", "response_id"]).map(|id| format!("assistant-response:{id}")),
        Role::ToolResult => message_call_id
            .filter(|id| is_provider_call_id(id))
            .map(|id| format!("tool-result:{id}")),
        _ => None,
    };
    Ok(NewMessage {
        role,
        content: text,
        token_count,
        created_at,
        entry_id,
        stable_event_key,
        parts,
        redacted: Default::default(),
    })
}

/// A provider's tool-call id (`toolu_` or `call_` and at least 12 letters or digits), the ids
/// lossless-claw 1.x trusts to name one tool result.
fn is_provider_call_id(id: &str) -> bool {
    let rest = id.strip_prefix("toolu_").or_else(|| id.strip_prefix("call_"));
    rest.is_some_and(|r| r.len() >= 12 && r.bytes().all(|b| b.is_ascii_alphanumeric()))
}

/// lossless-claw 1.x's `identity_hash` of a stored message: SHA-256 (hex) of the stored role,
/// a zero byte and the stored content. A user message that starts with OpenClaw's
/// untrusted-metadata block is hashed by lossless-claw after rewriting that block; those get
/// None, which lossless-claw fills in itself when it next starts (never a wrong hash).
pub(crate) fn identity_hash(db_role: &str, content: &str) -> Option<String> {
    use sha2::{Digest, Sha256};
    // lossless-claw rewrites such a block (after an optional `Delivery:` prelude) before
    // hashing; any user message that mentions one is left to it rather than hashed wrongly.
    if db_role == "user" && content.contains("(untrusted metadata)") {
        return None;
    }
    let mut h = Sha256::new();
    h.update(db_role.as_bytes());
    h.update([0u8]);
    h.update(content.as_bytes());
    Some(format!("{:x}", h.finalize()))
}

/// Field checks for the block types lcm-native interprets; other types are kept as they are.
fn check_block(btype: &str, b: &serde_json::Map<String, Value>) -> std::result::Result<(), String> {
    let need_str = |k: &str| match b.get(k) {
        Some(Value::String(_)) => Ok(()),
        Some(v) => Err(format!("`{k}` must be a string, got {}", kind_of(v))),
        None => Err(format!("`{k}` is missing")),
    };
    match btype {
        "text" => need_str("text"),
        "thinking" => need_str("thinking"),
        "toolCall" => {
            need_str("id")?;
            need_str("name")
        }
        _ => Ok(()),
    }
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn string_content_is_one_text_part_without_raw() {
        let m = normalize(
            0,
            &json!({"role": "user", "content": "hello there", "timestamp": 1_763_681_581_550i64}),
        )
        .unwrap();
        assert_eq!(m.role, Role::User);
        assert_eq!(m.content, "hello there");
        assert_eq!(m.token_count, 3);
        assert_eq!(m.created_at.as_deref(), Some("2025-11-20 23:33:01"));
        assert_eq!(m.parts.len(), 1);
        // The host's time is kept as it came (assembly hands it back).
        assert_eq!(
            m.parts[0].metadata,
            r#"{"originalRole":"user","messageTimestamp":1763681581550}"#
        );
        let plain = normalize(0, &json!({"role": "user", "content": "hello there"})).unwrap();
        assert_eq!(plain.parts[0].metadata, r#"{"originalRole":"user"}"#);
    }

    #[test]
    fn blocks_keep_their_raw_form_and_tool_columns() {
        let msg = json!({"role": "assistant", "content": [
            {"type": "text", "text": "Reading."},
            {"type": "toolCall", "id": "toolu_1", "name": "read", "arguments": {"path": "a.ts"}},
            {"type": "thinking", "thinking": "hmm", "thinkingSignature": "sig"},
            {"type": "weird", "payload": [1, 2]}
        ]});
        let m = normalize(3, &msg).unwrap();
        assert_eq!(m.content, "Reading.");
        let types: Vec<_> = m.parts.iter().map(|p| p.part_type).collect();
        assert_eq!(types, ["text", "tool", "reasoning", "agent"]);
        let call = &m.parts[1];
        assert_eq!(call.tool_call_id.as_deref(), Some("toolu_1"));
        assert_eq!(call.tool_name.as_deref(), Some("read"));
        assert_eq!(call.tool_input.as_deref(), Some(r#"{"path":"a.ts"}"#));
        assert_eq!(
            call.metadata,
            r#"{"originalRole":"assistant","rawType":"toolCall","raw":{"type":"toolCall","id":"toolu_1","name":"read","arguments":{"path":"a.ts"}}}"#
        );
        assert_eq!(m.parts[2].text_content.as_deref(), Some("hmm"));
        assert_eq!(
            m.token_count,
            tokens::estimate(&serde_json::to_string(&msg["content"]).unwrap())
        );
    }

    #[test]
    fn tool_results_carry_the_call_id_on_every_part() {
        let m = normalize(
            0,
            &json!({"role": "tool", "toolCallId": "toolu_9", "content": [{"type": "text", "text": "ok"}]}),
        )
        .unwrap();
        assert_eq!(m.role, Role::ToolResult);
        assert_eq!(m.parts[0].tool_call_id.as_deref(), Some("toolu_9"));
        assert!(m.parts[0]
            .metadata
            .starts_with(r#"{"originalRole":"toolResult","toolCallId":"toolu_9","rawType":"text""#));
    }

    #[test]
    fn lone_user_text_block_is_charged_as_text() {
        let m = normalize(
            0,
            &json!({"role": "user", "content": [{"type": "text", "text": "/mode"}]}),
        )
        .unwrap();
        assert_eq!(m.token_count, 2);
        let empty = normalize(0, &json!({"role": "assistant", "content": []})).unwrap();
        assert_eq!(
            (empty.token_count, empty.parts.len(), empty.content.as_str()),
            (0, 0, "")
        );
    }

    #[test]
    fn malformed_messages_name_their_index_and_problem() {
        let cases = [
            (json!("hi"), "expected an object"),
            (json!({"content": "x"}), "`role` is missing"),
            (json!({"role": "robot", "content": "x"}), "`role` must be"),
            (json!({"role": "user"}), "`content` is missing"),
            (json!({"role": "user", "content": 5}), "`content` must be"),
            (
                json!({"role": "user", "content": [1]}),
                "content block 0 must be an object",
            ),
            (
                json!({"role": "user", "content": [{"text": "x"}]}),
                "needs a string `type`",
            ),
            (
                json!({"role": "user", "content": [{"type": "text"}]}),
                "`text` is missing",
            ),
            (
                json!({"role": "assistant", "content": [{"type": "toolCall", "name": "x"}]}),
                "`id` is missing",
            ),
            (json!({"role": "toolResult", "content": "x"}), "toolCallId"),
            (
                json!({"role": "user", "content": "x", "timestamp": "soon"}),
                "not an ISO-8601",
            ),
            (
                json!({"role": "user", "content": "x", "timestamp": true}),
                "`timestamp` must be",
            ),
            (json!({"role": "user", "content": "x", "entryId": ""}), "`entryId`"),
        ];
        for (msg, needle) in cases {
            let err = normalize(7, &msg).unwrap_err();
            assert_eq!(err.code(), "E_INVALID_INPUT");
            let text = err.to_string();
            assert!(text.starts_with("message 7:"), "{text}");
            assert!(text.contains(needle), "{msg}: {text}");
        }
    }

    #[test]
    fn iso_timestamps_and_created_at_alias() {
        let m = normalize(
            0,
            &json!({"role": "user", "content": "x", "createdAt": "2025-11-20T23:33:01.550Z"}),
        )
        .unwrap();
        assert_eq!(m.created_at.as_deref(), Some("2025-11-20 23:33:01"));
        let m = normalize(0, &json!({"role": "system", "content": "x", "entryId": 42})).unwrap();
        assert_eq!(m.entry_id.as_deref(), Some("42"));
        assert_eq!(m.role.db(), "system");
    }
}
