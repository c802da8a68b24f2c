//! Message content on its way to the host, held as the JSON text it will be emitted as.
//!
//! A stored block usually kept its original JSON (`metadata.raw`); the assembler copies that
//! text through instead of parsing it into a tree and serialising the tree again, and reads
//! only the few fields the pairing repair and the emptiness check need (its type, a call's id
//! and name, whether a text is blank). The JSON text is also what the token estimate counts.

use serde::ser::{Serialize, SerializeSeq, Serializer};
use serde_json::value::RawValue;
use serde_json::Value;

use crate::store::messages::json_str;
use crate::tokens;

/// Block types that call a tool.
pub(crate) const CALL_TYPES: &[&str] = &[
    "toolCall",
    "toolUse",
    "tool_use",
    "tool-use",
    "functionCall",
    "function_call",
];

/// What the repair and the emptiness check know of a block.
#[derive(Clone, Debug, PartialEq)]
pub enum BlockKind {
    /// A text block; `blank` when its text is missing, not a string, or only whitespace.
    Text {
        blank: bool,
    },
    /// Reasoning: `thinking`, `redacted_thinking`, `reasoning`.
    Reasoning,
    /// A tool call with a non-empty id.
    Call {
        id: String,
        name: Option<String>,
    },
    Other,
}

/// One content block: its JSON text, its weight in quarter tokens and its kind.
#[derive(Clone, Debug)]
pub struct Block {
    json: Box<RawValue>,
    quarters: u64,
    kind: BlockKind,
}

/// The fields of a block that classify it, borrowed from its text.
#[derive(Default, serde::Deserialize)]
struct Head<'a> {
    #[serde(borrow, default, rename = "type")]
    kind: Option<&'a RawValue>,
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    call_id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    name: Option<&'a RawValue>,
    #[serde(borrow, default)]
    text: Option<&'a RawValue>,
}

impl Block {
    /// A block from JSON text already known to be valid (a stored block's original text).
    pub fn from_raw(json: &RawValue) -> Block {
        Block::classified(json.to_owned())
    }

    /// A block built as a value (rebuilt from a part's columns, or synthetic).
    pub fn from_value(value: &Value) -> Block {
        // A `Value` always serializes.
        Block::classified(serde_json::value::to_raw_value(value).expect("a Value serializes"))
    }

    /// A `{"type":"text","text":…}` block, written straight from the text.
    pub fn text(text: &str) -> Block {
        #[derive(serde::Serialize)]
        struct TextBlock<'a> {
            #[serde(rename = "type")]
            kind: &'static str,
            text: &'a str,
        }
        let json = serde_json::value::to_raw_value(&TextBlock { kind: "text", text }).expect("a string serializes");
        Block {
            quarters: tokens::quarter_tokens(json.get()),
            json,
            kind: BlockKind::Text {
                blank: text.trim().is_empty(),
            },
        }
    }

    fn classified(json: Box<RawValue>) -> Block {
        // A block that is not an object, or repeats a key, classifies as `Other`: kept as it is.
        let head: Head<'_> = serde_json::from_str(json.get()).unwrap_or_default();
        let kind = match json_str(head.kind).as_deref() {
            Some("text") => BlockKind::Text {
                blank: json_str(head.text).is_none_or(|t| t.trim().is_empty()),
            },
            Some("thinking" | "redacted_thinking" | "reasoning") => BlockKind::Reasoning,
            Some(t) if CALL_TYPES.contains(&t) => {
                // `id` when present (whatever it holds), else `call_id`.
                match json_str(head.id.or(head.call_id)).filter(|id| !id.is_empty()) {
                    Some(id) => BlockKind::Call {
                        id: id.into_owned(),
                        name: json_str(head.name).map(|n| n.into_owned()),
                    },
                    None => BlockKind::Other,
                }
            }
            _ => BlockKind::Other,
        };
        Block {
            quarters: tokens::quarter_tokens(json.get()),
            json,
            kind,
        }
    }

    pub fn kind(&self) -> &BlockKind {
        &self.kind
    }

    pub fn json(&self) -> &RawValue {
        &self.json
    }
}

/// A message's content: a string, or an array of blocks.
#[derive(Clone, Debug)]
pub enum Content {
    Text(String),
    Blocks(Vec<Block>),
}

impl Content {
    /// Estimated tokens: the text of a string, else the JSON text of the array (as the ingest
    /// estimated block content).
    pub fn tokens(&self) -> i64 {
        match self {
            Content::Text(s) => tokens::estimate(s),
            // `[`, `]` and a comma between blocks.
            Content::Blocks(blocks) => {
                let q: u64 = blocks.iter().map(|b| b.quarters).sum::<u64>() + blocks.len().max(1) as u64 + 1;
                q.div_ceil(4) as i64
            }
        }
    }

    /// About how long its JSON text is: escapes in a string may add a little.
    pub fn json_size_hint(&self) -> usize {
        match self {
            Content::Text(s) => s.len() + s.len() / 16 + 2,
            Content::Blocks(blocks) => blocks.iter().map(|b| b.json.get().len() + 1).sum::<usize>() + 2,
        }
    }
}

impl Serialize for Content {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Content::Text(s) => serializer.serialize_str(s),
            Content::Blocks(blocks) => {
                let mut seq = serializer.serialize_seq(Some(blocks.len()))?;
                for b in blocks {
                    seq.serialize_element(&b.json)?;
                }
                seq.end()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn kind(v: Value) -> BlockKind {
        Block::from_value(&v).kind
    }

    #[test]
    fn blocks_are_classified_as_the_repair_needs() {
        assert_eq!(
            kind(json!({"type": "text", "text": " \n"})),
            BlockKind::Text { blank: true }
        );
        assert_eq!(
            kind(json!({"type": "text", "text": 3})),
            BlockKind::Text { blank: true }
        );
        assert_eq!(
            kind(json!({"type": "text", "text": "\\u0041 x"})),
            BlockKind::Text { blank: false }
        );
        assert_eq!(
            kind(json!({"type": "thinking", "thinking": "hm"})),
            BlockKind::Reasoning
        );
        assert_eq!(
            kind(json!({"type": "tool_use", "id": "c\"1", "name": "read", "input": {}})),
            BlockKind::Call {
                id: "c\"1".into(),
                name: Some("read".into())
            }
        );
        assert_eq!(
            kind(json!({"type": "function_call", "call_id": "c2"})),
            BlockKind::Call {
                id: "c2".into(),
                name: None
            }
        );
        // An id that is present but not a usable string: not a call the repair can pair.
        assert_eq!(
            kind(json!({"type": "toolCall", "id": "", "name": "x"})),
            BlockKind::Other
        );
        assert_eq!(
            kind(json!({"type": "toolCall", "id": 7, "call_id": "c"})),
            BlockKind::Other
        );
        assert_eq!(kind(json!({"type": "image", "data": "…"})), BlockKind::Other);
        assert_eq!(kind(json!("just a string")), BlockKind::Other);
        let dup: Box<RawValue> = serde_json::from_str(r#"{"type":"text","type":"text","text":"x"}"#).unwrap();
        assert_eq!(Block::from_raw(&dup).kind, BlockKind::Other);
    }

    #[test]
    fn raw_text_is_emitted_verbatim_and_counted_as_its_json() {
        let raw: Box<RawValue> = serde_json::from_str(r#"{"type":"text","text":"caf\u00e9 \"q\""}"#).unwrap();
        let content = Content::Blocks(vec![Block::from_raw(&raw), Block::text("ok")]);
        let text = serde_json::to_string(&content).unwrap();
        assert_eq!(
            text,
            r#"[{"type":"text","text":"caf\u00e9 \"q\""},{"type":"text","text":"ok"}]"#
        );
        assert_eq!(content.tokens(), tokens::estimate(&text));
        let value = serde_json::to_value(&content).unwrap();
        assert_eq!(value[0]["text"], "café \"q\"");
        assert_eq!(Content::Blocks(vec![]).tokens(), tokens::estimate("[]"));
        // The direct text block is the block its value would give.
        for t in ["", "  \n", "line\n\"quoted\" \u{1}é"] {
            let direct = Block::text(t);
            let built = Block::from_value(&json!({"type": "text", "text": t}));
            assert_eq!((direct.json.get(), direct.quarters), (built.json.get(), built.quarters));
            assert_eq!(direct.kind, built.kind);
        }
        assert_eq!(Content::Text("héllo".into()).tokens(), tokens::estimate("héllo"));
    }
}
