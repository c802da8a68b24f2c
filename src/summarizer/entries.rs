//! The structure of a summarizer's source: the messages of a leaf (roles, tool calls with
//! their arguments, tool results with their error flag) or the input summaries of a condensed
//! node. The prompt gets the rendered text; the offline summarizer and the fidelity score read
//! this, so neither has to parse text back into structure.

use serde_json::Value;

/// One message (leaf) or input summary (condensed).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SourceEntry {
    /// `user`, `assistant`, `tool`, `system`, … for messages; `summary` for a condensed input.
    pub role: String,
    /// When it was written, as shown in the source text (`2026-02-17 15:37 UTC`); a time range
    /// for a condensed input; empty when unknown.
    pub stamp: String,
    pub parts: Vec<SourcePart>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum SourcePart {
    Text(String),
    ToolCall {
        id: Option<String>,
        name: String,
        /// The arguments, parsed when they are JSON (an object, usually).
        arguments: Value,
    },
    ToolResult {
        call_id: Option<String>,
        name: Option<String>,
        text: String,
        is_error: bool,
    },
    /// A shell run the user started (`!cmd`): its command and output.
    Shell {
        command: String,
        output: String,
    },
    /// An attachment, by its description (`[image attachment a.png]`).
    Attachment(String),
}

impl SourceEntry {
    pub fn text(role: &str, stamp: &str, text: &str) -> SourceEntry {
        SourceEntry {
            role: role.to_string(),
            stamp: stamp.to_string(),
            parts: vec![SourcePart::Text(text.to_string())],
        }
    }
}

/// The string value of the first of `keys` in a tool call's arguments.
pub(crate) fn argument<'a>(arguments: &'a Value, keys: &[&str]) -> Option<&'a str> {
    keys.iter()
        .find_map(|k| arguments.get(*k).and_then(Value::as_str))
        .filter(|s| !s.trim().is_empty())
}

/// Argument keys that hold a file path.
pub(crate) const PATH_KEYS: &[&str] = &[
    "path",
    "file_path",
    "filePath",
    "file",
    "filename",
    "target",
    "dir",
    "directory",
];
/// Argument keys that hold a shell command.
pub(crate) const COMMAND_KEYS: &[&str] = &["command", "cmd", "script"];
