//! Ingest-time secret detection (`redactPatterns`): the built-in patterns for common API-key
//! formats, and the one expression new messages are redacted with before they are stored.

use regex::Regex;
use serde_json::Value;

use super::text::{compile, Redactor};

/// The array entry of `redactPatterns` that stands for [`BUILTIN`] (`true` is the same as
/// `[BUILTIN_ENTRY]`).
pub(crate) const BUILTIN_ENTRY: &str = "@builtin";

/// What ingest puts where a secret was (the store's: it recognises the marker in a replay).
pub(crate) use crate::store::redactions::INGEST_REPLACEMENT;

/// Common credential formats, each specific enough that ordinary prose and code do not match:
/// a fixed prefix and a long random tail.
pub(crate) const BUILTIN: &[(&str, &str)] = &[
    // OpenAI (sk-, sk-proj-, sk-svcacct-) and Anthropic (sk-ant-api03-…) keys.
    ("openai-anthropic", r"\bsk-[A-Za-z0-9][A-Za-z0-9_-]{19,}"),
    ("stripe", r"\b[rs]k_(?:live|test)_[A-Za-z0-9]{16,}"),
    ("aws-access-key-id", r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    (
        "github",
        r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})",
    ),
    ("gitlab", r"\bglpat-[A-Za-z0-9_-]{20,}"),
    ("slack", r"\bxox[abposr]-[A-Za-z0-9-]{10,}"),
    ("google-api-key", r"\bAIza[0-9A-Za-z_-]{35}"),
    ("huggingface", r"\bhf_[A-Za-z0-9]{30,}"),
    ("npm", r"\bnpm_[A-Za-z0-9]{36}\b"),
    (
        "jwt",
        r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
    ),
    (
        "private-key",
        r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----",
    ),
];

pub(crate) use crate::store::redactions::IngestRedaction;

/// The host's `messages` checked and normalised for storage (the first malformed one fails
/// the call with its index), each with the matches of `redactor` replaced first when one is
/// configured.
pub(crate) fn normalize_incoming(
    redactor: Option<&Redactor>,
    messages: &[Value],
) -> crate::error::Result<Vec<crate::store::normalize::NewMessage>> {
    use crate::store::normalize::{normalize, NewMessage};
    let one = |(i, m): (usize, &Value)| match redactor.and_then(|r| redact_incoming(r, m)) {
        Some((redacted, counts)) => normalize(i, &redacted).map(|n| NewMessage { redacted: counts, ..n }),
        None => normalize(i, m),
    };
    messages.iter().enumerate().map(one).collect()
}

/// A host message with the matches of `redactor` replaced in every string that says something
/// (text, tool arguments and results, details; not its role, ids, types or time), and what was
/// replaced; `None` when nothing matched.
pub(crate) fn redact_incoming(redactor: &Redactor, message: &Value) -> Option<(Value, IngestRedaction)> {
    let mut copy = message.clone();
    let matches = redactor.message(&mut copy);
    if matches == 0 {
        return None;
    }
    let parts = match (message.get("content"), copy.get("content")) {
        (Some(Value::Array(before)), Some(Value::Array(after))) => {
            before.iter().zip(after).filter(|(b, a)| b != a).count()
        }
        _ => 1,
    };
    Some((copy, IngestRedaction { parts, matches }))
}

/// One redactor for the configured entries: each a regular expression, or [`BUILTIN_ENTRY`].
/// The error names the entry and why it was refused.
pub(crate) fn ingest_redactor(entries: &[String]) -> std::result::Result<Option<Redactor>, String> {
    let mut parts: Vec<String> = Vec::new();
    for entry in entries {
        if entry == BUILTIN_ENTRY {
            parts.extend(BUILTIN.iter().map(|(_, p)| format!("(?:{p})")));
        } else {
            compile(entry).map_err(|e| format!("entry {entry:?}: {e}"))?;
            parts.push(format!("(?:{entry})"));
        }
    }
    if parts.is_empty() {
        return Ok(None);
    }
    let pattern: Regex = compile(&parts.join("|")).map_err(|e| format!("the patterns together: {e}"))?;
    Ok(Some(Redactor {
        pattern: Some(pattern),
        replacement: INGEST_REPLACEMENT.to_string(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn builtin() -> Redactor {
        ingest_redactor(&[BUILTIN_ENTRY.to_string()]).unwrap().unwrap()
    }

    #[test]
    fn each_builtin_format_is_caught() {
        let r = builtin();
        let samples = [
            "sk-proj-4fJ9kL2mN8pQ1rS5tU7vW3xY6zA0bC",
            "sk-ant-api03-Xy7Zq2Lm9Np4Rs8Tu1Vw5-AbCdEf",
            "sk_live_51HqLyjWDarjtT1zdp7dcXyZ",
            "AKIAIOSFODNN7EXAMPLE",
            "ghp_16C7e42F292c6912E7710c838347Ae178B4a",
            "github_pat_11ABCDEFG0123456789_abcdefghijkl",
            "glpat-xR3nP8sVq2LmZk7Yt5Wc",
            "xoxb-1234567890-abcdefghij",
            "AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY",
            "hf_AbCdEfGhIjKlMnOpQrStUvWxYz12345678",
            "npm_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
            "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
            "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7\n-----END RSA PRIVATE KEY-----",
        ];
        for s in samples {
            let (out, n) = r
                .text(&format!("before {s} after"))
                .unwrap_or_else(|| panic!("{s} not caught"));
            assert_eq!((out.as_str(), n), ("before [REDACTED] after", 1), "{s}");
        }
        assert_eq!(BUILTIN.len(), 11, "a sample per built-in pattern above");
    }

    #[test]
    fn ordinary_text_and_code_are_left_alone() {
        let r = builtin();
        for s in [
            "the task-list is sorted by risk-adjusted score",
            "let sk = ask_user(); desk-top; AKIA is a prefix",
            "ghp_short and xoxb- and eyJ alone",
            "sk-learn is a library",
        ] {
            assert_eq!(r.text(s), None, "{s}");
        }
    }

    #[test]
    fn an_incoming_message_is_redacted_everywhere_it_holds_the_secret() {
        let r = builtin();
        let key = "AKIAIOSFODNN7EXAMPLE";
        let m = serde_json::json!({"role": "assistant", "content": [
            {"type": "text", "text": format!("using {key}")},
            {"type": "text", "text": "nothing here"},
            {"type": "toolCall", "id": "c1", "name": "bash", "arguments": {"cmd": format!("export K={key}; echo {key}")}},
        ]});
        let (out, counts) = redact_incoming(&r, &m).unwrap();
        assert_eq!(counts, IngestRedaction { parts: 2, matches: 3 });
        assert!(!out.to_string().contains(key));
        assert_eq!(out["content"][2]["id"], "c1");
        assert_eq!(out["content"][1], m["content"][1]);
        assert!(redact_incoming(&r, &serde_json::json!({"role": "user", "content": "hi"})).is_none());
        // A broad pattern leaves the time, the ids and the types alone.
        let digits = ingest_redactor(&["[0-9]{4}".into()]).unwrap().unwrap();
        let m = serde_json::json!({"role": "toolResult", "timestamp": "2026-02-17T15:37:00Z", "entryId": "e2026",
                                   "toolCallId": "call_1234", "content": [{"type": "text", "text": "pin 4321"}]});
        let (out, counts) = redact_incoming(&digits, &m).unwrap();
        assert_eq!(counts, IngestRedaction { parts: 1, matches: 1 });
        assert_eq!(
            (out["timestamp"].clone(), out["entryId"].clone()),
            (m["timestamp"].clone(), m["entryId"].clone())
        );
        assert_eq!(out["toolCallId"], "call_1234");
        assert_eq!(out["content"][0]["text"], "pin [REDACTED]");
        let (_, c) = redact_incoming(&r, &serde_json::json!({"role": "user", "content": key})).unwrap();
        assert_eq!(c, IngestRedaction { parts: 1, matches: 1 });
    }

    #[test]
    fn entries_combine_and_a_bad_one_is_named() {
        let r = ingest_redactor(&["ACME-[0-9]{6}".into(), BUILTIN_ENTRY.into()])
            .unwrap()
            .unwrap();
        assert_eq!(r.text("ACME-123456 and AKIAIOSFODNN7EXAMPLE").unwrap().1, 2);
        assert!(ingest_redactor(&[]).unwrap().is_none());
        let e = ingest_redactor(&["ok".into(), "(unclosed".into()]).unwrap_err();
        assert!(e.contains("\"(unclosed\""), "{e}");
        let e = ingest_redactor(&["x*".into()]).unwrap_err();
        assert!(e.contains("empty"), "{e}");
    }
}
