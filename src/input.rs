//! Reading what JavaScript passes in: a JSON value becomes a typed input struct in one step,
//! with E_INVALID_INPUT naming the field's path (`options.limit`) and, for an unknown field, the
//! closest known name.
//!
//! The input structs live beside the operation that reads them (`GrepOptions` in recall, …)
//! and follow one convention: `rename_all = "camelCase"`, `deny_unknown_fields`, and an
//! optional field with a default written `#[serde(default, skip_serializing)]` (the struct is
//! never serialised; ts-rs reads the pair as "may be left out" and types it `field?: T`). A
//! `null` at the top level of an options object means "not given", as `undefined` does.

use serde::de::{DeserializeOwned, Error as _};
use serde::{Deserialize, Deserializer};
use serde_json::Value;

use crate::error::{LcmError, Result};

/// Reads `value` as a `T`; `what` names it in errors (`options`, `conversationId`). No input
/// is a list at the top (serde would read an array as a struct's fields in order).
pub(crate) fn decode<T: DeserializeOwned>(mut value: Value, what: &str) -> Result<T> {
    match &mut value {
        Value::Object(map) => map.retain(|_, v| !v.is_null()),
        Value::Array(_) => {
            return Err(LcmError::invalid_input(format!(
                "{what}: expected an object or a value, got an array"
            )))
        }
        _ => {}
    }
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let at = if path == "." {
            what.to_string()
        } else {
            format!("{what}.{path}")
        };
        LcmError::invalid_input(format!("{at}: {}", explain(&e.into_inner().to_string())))
    })
}

/// serde's message; for an unknown field (which the path already names), the closest known
/// name or the list of them.
pub(crate) fn explain(message: &str) -> String {
    let Some(rest) = message.strip_prefix("unknown field `") else {
        return message.to_string();
    };
    let Some((field, expected)) = rest.split_once('`') else {
        return message.to_string();
    };
    let known: Vec<&str> = expected.split('`').skip(1).step_by(2).collect();
    match closest(field, known.iter().copied()) {
        Some(name) => format!("unknown field; did you mean `{name}`?"),
        None if known.is_empty() => "unknown field; this object takes none".to_string(),
        None => format!("unknown field; expected one of {}", list(&known)),
    }
}

fn list(names: &[&str]) -> String {
    names.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")
}

/// The candidate closest to `unknown` (case-insensitive edit distance of at most 3, or one
/// name beginning the other: `freshTail` for `freshTailCount`), to suggest on a typo.
pub(crate) fn closest<'a>(unknown: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    fn distance(a: &str, b: &str) -> usize {
        let a: Vec<char> = a.to_lowercase().chars().collect();
        let b: Vec<char> = b.to_lowercase().chars().collect();
        let mut prev: Vec<usize> = (0..=b.len()).collect();
        for (i, ca) in a.iter().enumerate() {
            let mut cur = vec![i + 1; b.len() + 1];
            for (j, cb) in b.iter().enumerate() {
                cur[j + 1] = (prev[j] + usize::from(ca != cb)).min(prev[j + 1] + 1).min(cur[j] + 1);
            }
            prev = cur;
        }
        prev[b.len()]
    }
    let prefix = |a: &str, b: &str| {
        let (a, b) = (a.to_lowercase(), b.to_lowercase());
        a.len().min(b.len()) >= 4 && (a.starts_with(&b) || b.starts_with(&a))
    };
    candidates
        .into_iter()
        .map(|c| (if prefix(unknown, c) { 1 } else { distance(unknown, c) }, c))
        .filter(|(d, _)| *d <= 3)
        .min()
        .map(|(_, c)| c)
}

fn at_least<'de, D: Deserializer<'de>>(d: D, min: i64) -> std::result::Result<i64, D::Error> {
    let n = i64::deserialize(d)?;
    if n < min {
        return Err(D::Error::custom(format!("must be an integer ≥ {min}, got {n}")));
    }
    Ok(n)
}

/// An integer ≥ 1 (ids, budgets, limits).
pub(crate) fn positive<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<i64, D::Error> {
    at_least(d, 1)
}

/// An integer ≥ 0 (depths, counts, offsets).
pub(crate) fn non_negative<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<i64, D::Error> {
    at_least(d, 0)
}

/// `positive` for an optional field (with `#[serde(default)]`).
pub(crate) fn opt_positive<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<i64>, D::Error> {
    positive(d).map(Some)
}

/// `non_negative` for an optional field (with `#[serde(default)]`).
pub(crate) fn opt_non_negative<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<i64>, D::Error> {
    non_negative(d).map(Some)
}

/// A number of characters to show or page: an integer from 1 to `fold::MAX_WINDOW_CHARS`
/// (one window is held whole, so it is bounded).
pub(crate) fn chars<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<usize, D::Error> {
    let n = i64::deserialize(d)?;
    let max = crate::fold::MAX_WINDOW_CHARS;
    if !(1..=max).contains(&n) {
        return Err(D::Error::custom(format!("must be an integer from 1 to {max}, got {n}")));
    }
    Ok(n as usize)
}

/// `chars` for an optional field (with `#[serde(default)]`).
pub(crate) fn opt_chars<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<usize>, D::Error> {
    chars(d).map(Some)
}

/// A string with something besides white space.
pub(crate) fn non_empty<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<String, D::Error> {
    let s = String::deserialize(d)?;
    if s.trim().is_empty() {
        return Err(D::Error::custom("must be a non-empty string"));
    }
    Ok(s)
}

/// `non_empty` for an optional field (with `#[serde(default)]`).
pub(crate) fn opt_non_empty<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<String>, D::Error> {
    non_empty(d).map(Some)
}

/// A conversation id: an integer ≥ 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub(crate) struct ConversationId(#[serde(deserialize_with = "positive")] pub i64);

/// A positive integer (a version number).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub(crate) struct Positive(#[serde(deserialize_with = "positive")] pub i64);

/// A string with something besides white space (a summary id, a path).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub(crate) struct NonEmpty(#[serde(deserialize_with = "non_empty")] pub String);

/// A positional argument the caller may leave out or pass as `null`, or an options object
/// whose every field has a default: `T::default()` then.
pub(crate) fn decode_or_default<T: DeserializeOwned + Default>(value: Option<Value>, what: &str) -> Result<T> {
    match value {
        None | Some(Value::Null) => Ok(T::default()),
        Some(v) => decode(v, what),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[derive(Debug, Default, Deserialize, PartialEq)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    struct Probe {
        #[serde(default, deserialize_with = "opt_positive")]
        token_budget: Option<i64>,
        #[serde(default)]
        inner: Option<Inner>,
    }

    #[derive(Debug, Default, Deserialize, PartialEq)]
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    struct Inner {
        #[serde(deserialize_with = "non_empty")]
        name: String,
    }

    fn message(v: Value) -> String {
        let e = decode::<Probe>(v, "options").unwrap_err();
        assert_eq!(e.code(), "E_INVALID_INPUT");
        e.to_string()
    }

    #[test]
    fn errors_name_the_field_path_and_suggest_a_name() {
        assert!(message(json!({ "tokenBudgt": 3 }))
            .contains("options.tokenBudgt: unknown field; did you mean `tokenBudget`?"));
        assert!(message(json!({ "zzzzzzzzzz": 3 })).contains("expected one of `tokenBudget`, `inner`"));
        assert!(message(json!({ "tokenBudget": 0 })).contains("options.tokenBudget: must be an integer ≥ 1, got 0"));
        assert!(message(json!({ "tokenBudget": "9" })).contains("options.tokenBudget: invalid type: string"));
        assert!(message(json!({ "inner": { "name": " " } })).contains("options.inner.name: must be a non-empty string"));
        assert!(message(json!({ "inner": { "nam": "x" } }))
            .contains("options.inner.nam: unknown field; did you mean `name`?"));
        assert!(message(json!([1])).contains("options: expected an object or a value, got an array"));
        assert!(message(json!("x")).starts_with("options: invalid type"));
    }

    #[test]
    fn null_and_absence_take_the_default() {
        assert_eq!(
            decode::<Probe>(json!({ "tokenBudget": null }), "o").unwrap(),
            Probe::default()
        );
        assert_eq!(decode_or_default::<Probe>(None, "o").unwrap(), Probe::default());
        assert_eq!(
            decode_or_default::<Probe>(Some(Value::Null), "o").unwrap(),
            Probe::default()
        );
        assert_eq!(
            decode::<Probe>(json!({ "tokenBudget": 7 }), "o").unwrap().token_budget,
            Some(7)
        );
        assert_eq!(decode::<ConversationId>(json!(3), "id").unwrap(), ConversationId(3));
        assert!(decode::<ConversationId>(json!(-3), "conversationId").is_err());
    }
}
