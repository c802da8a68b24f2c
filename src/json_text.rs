//! JSON text as V8 writes it, made readable by serde_json.
//!
//! JavaScript strings are UTF-16 and may hold a lone surrogate (half an emoji, where a stream
//! or a truncation cut between two code units). `JSON.stringify` writes one as an escape
//! (`"\ud83d"`), which is valid JSON but not valid Unicode, so serde_json refuses the whole
//! document. Every UTF-8 store replaces such a code unit with U+FFFD; so does this, before
//! parsing, and says how many it replaced.

use std::borrow::Cow;

/// The code unit of the `\uXXXX` escape starting at `at` (which holds the backslash).
fn escape_at(bytes: &[u8], at: usize) -> Option<u16> {
    let hex = bytes.get(at + 2..at + 6)?;
    if bytes.get(at + 1) != Some(&b'u') {
        return None;
    }
    u16::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()
}

/// `json` with every lone surrogate escape replaced by `\ufffd`, and how many were replaced.
/// Paired surrogates (`\ud83d\ude00`) and every other escape are left as they are.
pub fn replace_lone_surrogates(json: &str) -> (Cow<'_, str>, usize) {
    let bytes = json.as_bytes();
    // Cheap exit: no `\ud8`–`\udf` escape at all (upper or lower case).
    let maybe = bytes
        .windows(3)
        .any(|w| w[0] == b'\\' && w[1] == b'u' && matches!(w[2], b'd' | b'D'));
    if !maybe {
        return (Cow::Borrowed(json), 0);
    }
    let mut out = String::with_capacity(json.len());
    let mut replaced = 0;
    let mut copied = 0;
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'\\' {
            i += 1;
            continue;
        }
        let Some(unit) = escape_at(bytes, i) else {
            // Any other escape (`\\`, `\"`, `\n`): skip both characters.
            i += 2;
            continue;
        };
        let lone = match unit {
            0xD800..=0xDBFF => match escape_at(bytes, i + 6) {
                Some(0xDC00..=0xDFFF) => {
                    i += 12;
                    continue;
                }
                _ => true,
            },
            0xDC00..=0xDFFF => true,
            _ => false,
        };
        if lone {
            out.push_str(&json[copied..i]);
            out.push_str("\\ufffd");
            copied = i + 6;
            replaced += 1;
        }
        i += 6;
    }
    if replaced == 0 {
        return (Cow::Borrowed(json), 0);
    }
    out.push_str(&json[copied..]);
    (Cow::Owned(out), replaced)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(json: &str) -> (serde_json::Value, usize) {
        let (text, n) = replace_lone_surrogates(json);
        (serde_json::from_str(&text).unwrap(), n)
    }

    #[test]
    fn lone_high_and_low_surrogates_become_replacement_characters() {
        assert!(serde_json::from_str::<serde_json::Value>(r#""half \ud83d here""#).is_err());
        assert_eq!(
            parse(r#""half \ud83d here""#),
            (serde_json::json!("half \u{FFFD} here"), 1)
        );
        assert_eq!(
            parse(r#""\uDE00 end \ud83d""#),
            (serde_json::json!("\u{FFFD} end \u{FFFD}"), 2)
        );
        // A high surrogate followed by another high one: both are lone.
        assert_eq!(parse(r#""\ud83d\ud83d""#), (serde_json::json!("\u{FFFD}\u{FFFD}"), 2));
    }

    #[test]
    fn pairs_other_escapes_and_escaped_backslashes_are_untouched() {
        let json = r#"{"a":"\ud83d\ude00","b":"\\ud83d","c":"\n\"\u00e9"}"#;
        let (text, n) = replace_lone_surrogates(json);
        assert_eq!((text.as_ref(), n), (json, 0));
        assert!(matches!(text, Cow::Borrowed(_)));
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["a"], "😀");
        assert_eq!(v["b"], "\\ud83d");
    }

    #[test]
    fn a_truncated_escape_at_the_end_is_left_for_the_parser_to_report() {
        let (text, n) = replace_lone_surrogates(r#""\ud8"#);
        assert_eq!((text.as_ref(), n), (r#""\ud8"#, 0));
    }
}
