//! Replacing text inside stored values: plain text, and the JSON of tool inputs and part
//! metadata, where only string values change so that the structure a message is rebuilt from
//! stays intact.

use regex::Regex;
use serde_json::Value;

/// The longest pattern accepted, as for `grep`.
pub(crate) const MAX_PATTERN_BYTES: usize = 4096;
/// Compiled size a pattern may reach: a counted repetition of a large class can otherwise
/// take hundreds of megabytes to build.
const MAX_COMPILED_BYTES: usize = 16 << 20;

/// Compiles a redaction pattern, refusing what cannot redact anything sensibly: an empty or
/// oversized pattern, an invalid one, and one that matches the empty string (it would insert
/// the replacement between every two characters).
pub(crate) fn compile(pattern: &str) -> std::result::Result<Regex, String> {
    if pattern.is_empty() || pattern.len() > MAX_PATTERN_BYTES {
        return Err(format!("a pattern must be 1 to {MAX_PATTERN_BYTES} bytes"));
    }
    let re = regex::RegexBuilder::new(pattern)
        .size_limit(MAX_COMPILED_BYTES)
        .build()
        .map_err(|e| format!("not a valid regular expression: {e}"))?;
    if re.is_match("") {
        return Err("the pattern matches the empty string".into());
    }
    Ok(re)
}

/// What to replace: the matches of a pattern, or (without one) every text value.
#[derive(Clone, Debug)]
pub struct Redactor {
    pub pattern: Option<Regex>,
    pub replacement: String,
}

/// Keys whose values say what a block is rather than what it says: a message cannot be rebuilt
/// without them, and a whole-message redaction keeps them.
const STRUCTURAL: &[&str] = &[
    "type",
    "id",
    "name",
    "role",
    "toolCallId",
    "toolName",
    "isError",
    "rawType",
    "originalRole",
];

/// Keys of a host message that identify it rather than say something: kept by
/// [`Redactor::message`] besides the structural ones.
const MESSAGE_IDENTITY: &[&str] = &["timestamp", "createdAt", "entryId", "advancementKey"];

impl Redactor {
    /// `text` with the matches replaced, and how many there were; `None` when nothing matched.
    pub fn text(&self, text: &str) -> Option<(String, usize)> {
        match &self.pattern {
            Some(re) => {
                let n = re.find_iter(text).count();
                (n > 0).then(|| (re.replace_all(text, regex::NoExpand(&self.replacement)).into_owned(), n))
            }
            None => (!text.is_empty() && text != self.replacement).then(|| (self.replacement.clone(), 1)),
        }
    }

    /// A stored column: JSON (an object or array) has its string values redacted, anything
    /// else is text.
    pub fn column(&self, stored: &str) -> Option<(String, usize)> {
        let trimmed = stored.trim_start();
        if trimmed.starts_with('{') || trimmed.starts_with('[') {
            if let Ok(mut value) = serde_json::from_str::<Value>(stored) {
                let n = self.json(&mut value);
                return (n > 0).then(|| (value.to_string(), n));
            }
        }
        self.text(stored)
    }

    /// Redacts the string values of a host message in place, except those that say what a
    /// message or block is, when and which ([`STRUCTURAL`], the time and the entry id): a
    /// pattern must not turn a timestamp or an id into the replacement. Returns how many
    /// matches were replaced.
    pub fn message(&self, value: &mut Value) -> usize {
        self.walk(value, &|key, _| {
            STRUCTURAL.contains(&key) || MESSAGE_IDENTITY.contains(&key)
        })
    }

    /// A stored JSON value: a whole-text redaction keeps the strings of structural keys.
    fn json(&self, value: &mut Value) -> usize {
        let whole = self.pattern.is_none();
        self.walk(value, &|key, v| whole && v.is_string() && STRUCTURAL.contains(&key))
    }

    /// Redacts every string in `value` except the values of the object keys `keep` accepts.
    fn walk(&self, value: &mut Value, keep: &dyn Fn(&str, &Value) -> bool) -> usize {
        match value {
            Value::String(s) => match self.text(s) {
                Some((new, n)) => {
                    *s = new;
                    n
                }
                None => 0,
            },
            Value::Array(items) => items.iter_mut().map(|v| self.walk(v, keep)).sum(),
            Value::Object(map) => map
                .iter_mut()
                .filter(|(k, v)| !keep(k, v))
                .map(|(_, v)| self.walk(v, keep))
                .sum(),
            _ => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(pattern: &str) -> Redactor {
        Redactor {
            pattern: Some(Regex::new(pattern).unwrap()),
            replacement: "[REDACTED]".into(),
        }
    }

    #[test]
    fn text_matches_are_replaced_and_counted() {
        let r = with(r"sk-[a-z0-9]{6}");
        assert_eq!(
            r.text("a sk-abc123 b sk-zzz999"),
            Some(("a [REDACTED] b [REDACTED]".into(), 2))
        );
        assert_eq!(r.text("nothing here"), None);
    }

    #[test]
    fn a_replacement_is_literal() {
        let r = Redactor {
            pattern: Some(Regex::new("k(ey)").unwrap()),
            replacement: "$1 removed".into(),
        };
        assert_eq!(r.text("key").unwrap().0, "$1 removed");
    }

    #[test]
    fn json_keeps_its_structure() {
        let r = with("secret-[0-9]+");
        let (out, n) = r
            .column(r#"{"type":"toolCall","arguments":{"cmd":"echo secret-42","n":1}}"#)
            .unwrap();
        assert_eq!(n, 1);
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["arguments"]["cmd"], "echo [REDACTED]");
        assert_eq!(v["type"], "toolCall");
    }

    #[test]
    fn a_whole_message_redaction_keeps_structural_values() {
        let r = Redactor {
            pattern: None,
            replacement: "[REDACTED]".into(),
        };
        let (out, _) = r
            .column(r#"{"originalRole":"assistant","raw":{"type":"text","text":"my card 4111"}}"#)
            .unwrap();
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["raw"]["type"], "text");
        assert_eq!(v["originalRole"], "assistant");
        assert_eq!(v["raw"]["text"], "[REDACTED]");
    }

    #[test]
    fn text_that_only_looks_like_json_is_text() {
        let r = with("abc");
        assert_eq!(r.column("{abc").unwrap().0, "{[REDACTED]");
    }
}
