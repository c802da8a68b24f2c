//! JSON text as V8 writes it, made readable by serde_json.
//!
//! JavaScript strings are UTF-16 and may hold a lone surrogate (half an emoji, where a stream
//! or a truncation cut between two code units). `JSON.stringify` writes one as an escape
//! (`"\ud83d"`), which is valid JSON but not valid Unicode, so serde_json refuses the whole
//! document. Every UTF-8 store replaces such a code unit with U+FFFD; so does this, before
//! parsing, and says how many it replaced.
//!
//! The other way, results are written as ASCII-only JSON (`to_ascii_json`): V8 makes a string
//! of ASCII bytes by copying them, where UTF-8 text holding even one non-ASCII character has
//! to be decoded into a two-byte string first (three times as long for a 227 KB result,
//! bench/RESULTS.md).

use std::borrow::Cow;
use std::io::{self, Write};

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
pub(crate) fn replace_lone_surrogates(json: &str) -> (Cow<'_, str>, usize) {
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

/// serde_json's compact output with every non-ASCII character written as a `\uXXXX` escape
/// (a UTF-16 pair above U+FFFF), in strings and in raw values alike: outside strings JSON
/// text is ASCII already, so the escaped text means the same.
struct AsciiFormatter;

impl serde_json::ser::Formatter for AsciiFormatter {
    fn write_string_fragment<W: ?Sized + Write>(&mut self, writer: &mut W, fragment: &str) -> io::Result<()> {
        write_ascii(writer, fragment)
    }

    fn write_raw_fragment<W: ?Sized + Write>(&mut self, writer: &mut W, fragment: &str) -> io::Result<()> {
        write_ascii(writer, fragment)
    }
}

/// Writes `text` with its non-ASCII characters as `\uXXXX` escapes.
fn write_ascii<W: ?Sized + Write>(writer: &mut W, text: &str) -> io::Result<()> {
    if text.is_ascii() {
        return writer.write_all(text.as_bytes());
    }
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut copied = 0;
    for (at, c) in text.char_indices() {
        if c.is_ascii() {
            continue;
        }
        writer.write_all(&text.as_bytes()[copied..at])?;
        copied = at + c.len_utf8();
        let mut units = [0u16; 2];
        for unit in c.encode_utf16(&mut units) {
            let u = *unit as usize;
            writer.write_all(&[
                b'\\',
                b'u',
                HEX[u >> 12],
                HEX[(u >> 8) & 0xf],
                HEX[(u >> 4) & 0xf],
                HEX[u & 0xf],
            ])?;
        }
    }
    writer.write_all(&text.as_bytes()[copied..])
}

/// `value` as compact JSON text that is ASCII only, written into a buffer of `capacity`
/// bytes (a large result is then written once, not copied each time its buffer doubles).
pub(crate) fn to_ascii_json<T: serde::Serialize + ?Sized>(value: &T, capacity: usize) -> serde_json::Result<String> {
    let mut buf = Vec::with_capacity(capacity);
    value.serialize(&mut serde_json::Serializer::with_formatter(&mut buf, AsciiFormatter))?;
    // Every byte written is ASCII (the formatter escapes the rest).
    Ok(String::from_utf8(buf).expect("ASCII-only JSON is UTF-8"))
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

    #[test]
    fn ascii_json_escapes_every_non_ascii_character_and_means_the_same() {
        let raw = serde_json::value::RawValue::from_string(r#"{"t":"raw é 😀","n":1}"#.into()).unwrap();
        let value = serde_json::json!({ "é": "café — 日本 😀 \u{7f}\u{80}", "q": "\"\\\n" });
        let text = to_ascii_json(&(&value, &raw), 0).unwrap();
        assert!(text.is_ascii(), "{text}");
        assert_eq!(
            text,
            r#"[{"\u00e9":"caf\u00e9 \u2014 \u65e5\u672c \ud83d\ude00 "#.to_string()
                + "\u{7f}"
                + r#"\u0080","q":"\"\\\n"},{"t":"raw \u00e9 \ud83d\ude00","n":1}]"#
        );
        let back: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(back, serde_json::json!([value, { "t": "raw é 😀", "n": 1 }]));
    }

    proptest::proptest! {
        #[test]
        fn ascii_json_round_trips_any_text(s in "\\PC*", key in ".*") {
            let value = serde_json::json!({ key: [s] });
            let text = to_ascii_json(&value, 16).unwrap();
            proptest::prop_assert!(text.is_ascii());
            proptest::prop_assert_eq!(serde_json::from_str::<serde_json::Value>(&text).unwrap(), value);
        }
    }
}
