//! Turning user text into safe searches: FTS5 queries that cannot use FTS5's operators or
//! fail to parse, LIKE patterns with their wildcards escaped, CJK detection for the trigram
//! path, and snippets for matches found outside FTS5.

use crate::error::{LcmError, Result};

/// Longest query accepted, in bytes. Longer text is not a search a person or an agent means,
/// and every term costs FTS5 a lookup.
pub(crate) const MAX_QUERY_BYTES: usize = 8 * 1024;
/// Most terms (words or quoted phrases) in one query.
pub(crate) const MAX_TERMS: usize = 64;

/// The terms of a query: whitespace-separated words, with `"quoted phrases"` kept whole.
/// Quotes are removed from the terms; an unbalanced quote runs to the end of the text.
pub(crate) fn terms(query: &str) -> Result<Vec<String>> {
    split_terms(query, false)
}

/// The terms of a `like` search: as `terms`, but control characters (NUL too) are searched for
/// as they are, and a query of quotes alone (`"`) is searched for itself: a substring search
/// has no syntax to protect.
pub(crate) fn like_terms(query: &str) -> Result<Vec<String>> {
    split_terms(query, true).or_else(|e| {
        let quotes = query.trim();
        if !quotes.is_empty() && quotes.len() <= MAX_QUERY_BYTES && quotes.chars().all(|c| c == '"') {
            Ok(vec![quotes.to_string()])
        } else {
            Err(e)
        }
    })
}

fn split_terms(query: &str, keep_controls: bool) -> Result<Vec<String>> {
    if query.len() > MAX_QUERY_BYTES {
        return Err(LcmError::invalid_input(format!(
            "the query is {} bytes; at most {MAX_QUERY_BYTES} are searched (shorten it to the words that matter)",
            query.len()
        )));
    }
    // Control characters (NUL above all: FTS5 ends a string at it) separate words.
    let query: String = query
        .chars()
        .map(|c| if c.is_control() && !keep_controls { ' ' } else { c })
        .collect();
    let mut out = Vec::new();
    let mut rest = query.as_str();
    while let Some(start) = rest.find(|c: char| !c.is_whitespace()) {
        rest = &rest[start..];
        let (term, next) = if let Some(quoted) = rest.strip_prefix('"') {
            match quoted.find('"') {
                Some(end) => (&quoted[..end], &quoted[end + 1..]),
                None => (quoted, ""),
            }
        } else {
            let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
            (&rest[..end], &rest[end..])
        };
        let cleaned: String = term.chars().filter(|c| *c != '"').collect();
        let cleaned = cleaned.split_whitespace().collect::<Vec<_>>().join(" ");
        if !cleaned.is_empty() {
            out.push(cleaned);
        }
        rest = next;
    }
    if out.is_empty() {
        return Err(LcmError::invalid_input("the query has no words to search for"));
    }
    if out.len() > MAX_TERMS {
        return Err(LcmError::invalid_input(format!(
            "the query has {} terms; at most {MAX_TERMS} are searched",
            out.len()
        )));
    }
    Ok(out)
}

/// An FTS5 MATCH expression for `terms`: each term a quoted string (so `AND`, `NEAR(`, `*`,
/// `^`, `col:` and parentheses are plain text), all required.
pub(crate) fn fts_match(terms: &[String]) -> String {
    terms
        .iter()
        .map(|t| format!("\"{}\"", t.replace('"', "")))
        .collect::<Vec<_>>()
        .join(" ")
}

/// `%term%` with LIKE's wildcards and the escape character escaped (use `ESCAPE '\'`).
pub(crate) fn like_pattern(term: &str) -> String {
    let mut p = String::with_capacity(term.len() + 2);
    p.push('%');
    for c in term.chars() {
        if matches!(c, '%' | '_' | '\\') {
            p.push('\\');
        }
        p.push(c);
    }
    p.push('%');
    p
}

/// True when `text` has characters of the scripts written without spaces between words,
/// which the `unicode61` tokenizer cannot split (the estimator's CJK set).
pub(crate) fn has_cjk(text: &str) -> bool {
    text.chars().any(|c| crate::tokens::is_cjk(c as u32))
}

/// The trigram tokenizer matches substrings of at least three characters: a query it can
/// answer has only such terms.
pub(crate) fn trigram_ready(terms: &[String]) -> bool {
    terms.iter().all(|t| t.chars().count() >= 3)
}

/// Characters of context on each side of a match in a snippet.
const SNIPPET_SIDE: usize = 80;

/// A one-line excerpt of `text` around the byte range `at`, cut at character boundaries,
/// with `…` where text was cut.
pub(crate) fn snippet_around(text: &str, at: std::ops::Range<usize>) -> String {
    let before: Vec<(usize, char)> = text[..at.start].char_indices().collect();
    let start = before.len().checked_sub(SNIPPET_SIDE).map_or(0, |i| before[i].0);
    let after_len = text[at.end..].char_indices().nth(SNIPPET_SIDE).map(|(i, _)| i);
    let end = after_len.map_or(text.len(), |i| at.end + i);
    let mut out = String::new();
    if start > 0 {
        out.push('…');
    }
    out.push_str(&one_line(&text[start..end]));
    if end < text.len() {
        out.push('…');
    }
    out
}

/// Whitespace runs (newlines included) as single spaces.
pub(crate) fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Where the first of `terms` occurs in `text`, comparing as SQLite's LIKE does (ASCII letters
/// without case, everything else exactly).
pub(crate) fn find_like(text: &str, terms: &[String]) -> Option<std::ops::Range<usize>> {
    let hay = text.to_ascii_lowercase();
    terms.iter().find_map(|t| {
        let needle = t.to_ascii_lowercase();
        hay.find(&needle).map(|i| i..i + needle.len())
    })
}

/// Whether every term occurs in `text`, compared as SQLite's LIKE compares (what PostgreSQL's
/// `ILIKE`, which also folds letters beyond ASCII, found is re-checked with this).
pub(crate) fn like_all(text: &str, terms: &[String]) -> bool {
    let hay = text.to_ascii_lowercase();
    terms.iter().all(|t| hay.contains(&t.to_ascii_lowercase()))
}

/// Where a full-text match most likely is, for its snippet: the first place a term occurs (as
/// `find_like` compares), else the first place the stem of one of its words does (FTS5's porter
/// stemmer finds "running" for "run" and the reverse). Linear in the text.
pub(crate) fn find_term(text: &str, terms: &[String]) -> Option<std::ops::Range<usize>> {
    find_like(text, terms).or_else(|| {
        let stems: Vec<String> = terms
            .iter()
            .flat_map(|t| t.split_whitespace())
            .filter_map(|w| {
                let n = w.chars().count();
                (n >= 4).then(|| w.chars().take((n * 2 / 3).max(3)).collect())
            })
            .collect();
        find_like(text, &stems)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terms_keep_quoted_phrases_and_drop_stray_quotes() {
        assert_eq!(terms("  foo bar ").unwrap(), ["foo", "bar"]);
        assert_eq!(terms("\"exact phrase\" more").unwrap(), ["exact phrase", "more"]);
        assert_eq!(terms("un\"balanced").unwrap(), ["unbalanced"]);
        assert_eq!(terms("\"open phrase to the end").unwrap(), ["open phrase to the end"]);
        assert_eq!(terms("a \"\" b").unwrap(), ["a", "b"]);
        assert_eq!(terms("\"  spaced   out  \"").unwrap(), ["spaced out"]);
        assert_eq!(terms("nul\u{0}split\u{7}").unwrap(), ["nul", "split"]);
    }

    #[test]
    fn empty_long_and_crowded_queries_are_invalid_input() {
        for q in ["", "   ", "\"\"", "\" \""] {
            assert_eq!(terms(q).unwrap_err().code(), "E_INVALID_INPUT", "{q:?}");
        }
        assert_eq!(
            terms(&"x".repeat(MAX_QUERY_BYTES + 1)).unwrap_err().code(),
            "E_INVALID_INPUT"
        );
        assert_eq!(
            terms(&"w ".repeat(MAX_TERMS + 1)).unwrap_err().code(),
            "E_INVALID_INPUT"
        );
        assert_eq!(terms(&"w ".repeat(MAX_TERMS)).unwrap().len(), MAX_TERMS);
    }

    #[test]
    fn operators_become_quoted_text() {
        let t = terms("NEAR(a b) OR content:x* ^start -not").unwrap();
        assert_eq!(
            fts_match(&t),
            "\"NEAR(a\" \"b)\" \"OR\" \"content:x*\" \"^start\" \"-not\""
        );
    }

    #[test]
    fn like_wildcards_are_escaped() {
        assert_eq!(like_pattern("50%_off\\"), "%50\\%\\_off\\\\%");
    }

    #[test]
    fn cjk_detection_and_trigram_readiness() {
        assert!(has_cjk("検索する"));
        assert!(has_cjk("mixed 한국어"));
        assert!(!has_cjk("plain ascii, é"));
        assert!(trigram_ready(&["検索する".into(), "abc".into()]));
        assert!(!trigram_ready(&["検索".into()]));
    }

    #[test]
    fn snippets_are_one_line_and_cut_at_char_boundaries() {
        let text = format!("{}\nneedle here\n{}", "前".repeat(200), "後".repeat(200));
        let at = find_like(&text, &["NEEDLE".into()]).unwrap();
        let s = snippet_around(&text, at);
        assert!(s.starts_with('…') && s.ends_with('…'), "{s}");
        assert!(s.contains(" needle here "));
        assert_eq!(s.chars().filter(|c| *c == '前').count(), SNIPPET_SIDE - 1);
        assert_eq!(snippet_around("short needle", 6..12), "short needle");
    }

    #[test]
    fn full_text_snippets_find_the_term_or_its_stem() {
        let text = "intro words. The runner was running late; nothing else.";
        assert_eq!(&text[find_term(text, &["RUNNING".into()]).unwrap()], "running");
        // The stemmer's kind of match: "connections" for "connected".
        let t2 = "many open connections here";
        assert_eq!(&t2[find_term(t2, &["connected".into()]).unwrap()], "connec");
        assert_eq!(find_term("nothing at all", &["zebra".into()]), None);
    }
}
