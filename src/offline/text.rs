//! Text helpers of the offline summarizer: prose without code, sentences, shortening that
//! never cuts a word (so paths and names stay whole), and what counts as a decision or an
//! error.

use crate::fidelity::junk;

/// Prose lines of `text`: fenced code blocks, table rows, and lines the junk rules reject are
/// left out; markdown bullets and heading marks are stripped; whitespace is collapsed.
pub(super) fn prose_lines(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_code = false;
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with("```") || t.starts_with("~~~") {
            in_code = !in_code;
            continue;
        }
        if in_code || t.is_empty() || t.starts_with('|') || t.starts_with("    ") || line.starts_with('\t') {
            continue;
        }
        let t = t.trim_start_matches(['#', '>']).trim_start();
        let t = strip_bullet(t);
        let t = collapse(t);
        if t.is_empty() || junk::classify(&t).is_some() {
            continue;
        }
        out.push(t);
    }
    out
}

fn strip_bullet(t: &str) -> &str {
    if let Some(rest) = t
        .strip_prefix("- ")
        .or_else(|| t.strip_prefix("* "))
        .or_else(|| t.strip_prefix("• "))
    {
        return rest.trim_start();
    }
    let digits = t.bytes().take_while(u8::is_ascii_digit).count();
    if digits > 0 && digits <= 3 && (t[digits..].starts_with(". ") || t[digits..].starts_with(") ")) {
        return t[digits + 2..].trim_start();
    }
    t
}

/// Whitespace runs become one space.
pub(super) fn collapse(t: &str) -> String {
    t.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Sentences of a prose line (split after `.`, `!` or `?` followed by a space and a capital
/// or a digit, so `e.g. this` and `src/a.ts is` stay whole).
pub(super) fn sentences(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let chars: Vec<char> = line.chars().collect();
    let mut start = 0;
    for i in 0..chars.len() {
        let end_mark = matches!(chars[i], '.' | '!' | '?' | '。' | '！' | '？');
        let next_starts = chars.get(i + 1) == Some(&' ')
            && chars
                .get(i + 2)
                .is_some_and(|c| c.is_uppercase() || c.is_ascii_digit() || *c == '`');
        let cjk_end = matches!(chars[i], '。' | '！' | '？');
        if end_mark && (next_starts || cjk_end) {
            let s: String = chars[start..=i].iter().collect();
            if !s.trim().is_empty() {
                out.push(s.trim().to_string());
            }
            start = i + 1;
        }
    }
    let rest: String = chars[start..].iter().collect();
    if !rest.trim().is_empty() {
        out.push(rest.trim().to_string());
    }
    out
}

/// At most `max` characters, cut at a space (never inside a word), with `…` when cut.
pub(super) fn shorten(text: &str, max: usize) -> String {
    let text = collapse(text);
    if text.chars().count() <= max {
        return text;
    }
    let cut: String = text.chars().take(max + 1).collect();
    let kept = match cut.rfind(' ') {
        Some(i) if i > 0 => cut[..i].to_string(),
        // One long word (a path): kept whole.
        _ => text.split(' ').next().unwrap_or("").to_string(),
    };
    if kept.len() == text.len() {
        return kept;
    }
    format!("{}…", kept.trim_end_matches([',', ';', ':', ' ']))
}

/// The first line of a text, shortened.
pub(super) fn first_line(text: &str, max: usize) -> String {
    shorten(text.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or(""), max)
}

const DECISION_WORDS: &[&str] = &[
    "decid",
    "agree",
    "chose",
    "choose",
    "plan",
    "must",
    "should",
    "need to",
    "instead",
    "switch",
    "fixed",
    "resolved",
    "done",
    "completed",
    "finished",
    "todo",
    "blocker",
    "next step",
    "conclusion",
    "approved",
    "rejected",
    "merged",
    "deployed",
    "created",
    "deleted",
    "renamed",
    "added",
    "removed",
    "updated",
    "works",
    "pass",
    "because",
    "root cause",
    "the problem",
    "the issue",
    "summary",
    "now ",
    "all ",
];
const ERROR_WORDS: &[&str] = &[
    "error",
    "fail",
    "exception",
    "panic",
    "traceback",
    "denied",
    "not found",
    "no such file",
    "timeout",
    "timed out",
    "cannot",
    "can't",
    "unable",
    "invalid",
    "crash",
    "refused",
    "fatal",
    "abort",
    "segfault",
    "undefined",
    "mismatch",
    "conflict",
    "exit code",
    "exited with",
];

pub(super) fn is_decision(s: &str) -> bool {
    let lower = s.to_lowercase();
    DECISION_WORDS.iter().any(|w| lower.contains(w))
}

pub(super) fn is_error(s: &str) -> bool {
    let lower = s.to_lowercase();
    ERROR_WORDS.iter().any(|w| lower.contains(w))
}

/// Narration that says what is about to happen (`Let me read…`, `Now I'll…`).
pub(super) fn is_narration(s: &str) -> bool {
    let lower = s.trim_start().to_lowercase();
    [
        "let me ",
        "now let me ",
        "i'll ",
        "i will ",
        "now i'll ",
        "let's ",
        "first, let me ",
        "perfect",
        "great",
        "ok",
        "okay",
    ]
    .iter()
    .any(|p| lower.starts_with(p))
}

/// A test tally (`Tests  3 failed | 120 passed`, `test result: ok. 12 passed`, `5 passing`).
pub(super) fn is_test_tally(s: &str) -> bool {
    let lower = s.to_lowercase();
    let words: Vec<&str> = lower
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    words.windows(2).any(|w| {
        w[0].bytes().all(|b| b.is_ascii_digit())
            && matches!(
                w[1],
                "passed" | "failed" | "passing" | "failing" | "tests" | "skipped" | "errors"
            )
    }) || lower.starts_with("test result:")
}

/// `path:line` somewhere in the line.
pub(super) fn has_location(s: &str) -> bool {
    s.split(|c: char| c.is_whitespace() || "()[]'\"".contains(c)).any(|w| {
        let w = w.trim_end_matches([',', '.', ';']);
        match w.split_once(':') {
            Some((path, rest)) => {
                path.contains('.')
                    && rest
                        .split(':')
                        .next()
                        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            }
            None => false,
        }
    })
}

/// `HH:MM` of a source stamp (`2026-02-17 15:37 UTC`), with the date when it differs from
/// `date_before`.
pub(super) fn short_time(stamp: &str, date_before: Option<&str>) -> String {
    let mut it = stamp.split(' ');
    match (it.next(), it.next()) {
        (Some(date), Some(time)) if date.len() == 10 && time.len() == 5 => {
            if date_before.is_some_and(|d| d != date) {
                format!("{} {time}", &date[5..])
            } else {
                time.to_string()
            }
        }
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prose_drops_code_tables_and_json() {
        let text = "Here is the plan:\n\n```ts\nconst x = 1;\n```\n| a | b |\n- Fix `src/a.ts` first\n{\"a\": 1}\n## Next steps";
        assert_eq!(
            prose_lines(text),
            ["Here is the plan:", "Fix `src/a.ts` first", "Next steps"]
        );
    }

    #[test]
    fn sentences_keep_paths_and_abbreviations_whole() {
        assert_eq!(
            sentences("Edited src/a.ts and lib.rs, e.g. the guard. Then ran npm test! 3 passed."),
            [
                "Edited src/a.ts and lib.rs, e.g. the guard.",
                "Then ran npm test!",
                "3 passed."
            ]
        );
    }

    #[test]
    fn shortening_never_cuts_a_word() {
        assert_eq!(
            shorten("read packages/coding-agent/src/theme/theme.ts now", 30),
            "read…"
        );
        assert_eq!(shorten("fix   the\nbug", 40), "fix the bug");
        assert_eq!(shorten("one two three four five", 13), "one two three…");
    }

    #[test]
    fn tallies_locations_and_times() {
        assert!(is_test_tally(" Tests  1 failed | 120 passed (121)"));
        assert!(is_test_tally("test result: ok. 12 passed; 0 failed"));
        assert!(!is_test_tally("passed the test"));
        assert!(has_location("at validateUser (src/auth/login.ts:40:17)"));
        assert!(!has_location("at 10:30 we met"));
        assert_eq!(short_time("2026-02-17 15:37 UTC", None), "15:37");
        assert_eq!(short_time("2026-02-18 09:05 UTC", Some("2026-02-17")), "02-18 09:05");
        assert_eq!(short_time("", None), "");
    }
}
