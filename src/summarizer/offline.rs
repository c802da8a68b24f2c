//! The offline summarizer: deterministic and extractive, no network. It keeps the lines and
//! sentences that carry decisions, errors, identifiers, paths and numbers, in their original
//! order, within the target, and ends with the "Expand for details about:" footer naming what
//! it left out. It is the escalation's last resort and the summarizer for `'offline'`.

use std::collections::BTreeMap;

use super::{SummarizeRequest, Summarizer, SummaryFuture, OFFLINE_MODEL};
use crate::tokens;

pub struct OfflineSummarizer;

impl Summarizer for OfflineSummarizer {
    fn summarize(&self, _prompt: String, request: &SummarizeRequest) -> SummaryFuture {
        let text = summarize_text(&request.source_text, request.target_tokens);
        Box::pin(async move { Ok(text) })
    }

    fn model(&self) -> String {
        OFFLINE_MODEL.to_string()
    }
}

const FOOTER: &str = "Expand for details about:";
const DECISION_WORDS: &[&str] = &[
    "decid",
    "decision",
    "agree",
    "chose",
    "choose",
    "will ",
    "plan",
    "must",
    "should",
    "need to",
    "going to",
    "switch",
    "instead",
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
];
const ERROR_WORDS: &[&str] = &[
    "error",
    "fail",
    "exception",
    "panic",
    "traceback",
    "denied",
    "not found",
    "timeout",
    "timed out",
    "cannot",
    "can't",
    "bug",
    "broken",
    "warning",
    "invalid",
    "crash",
    "refused",
];

/// One candidate line or sentence.
struct Unit {
    text: String,
    /// A short tag saying where it came from (`user`, `assistant`, a time range).
    tag: String,
    score: i64,
    pos: usize,
}

fn strip_punct(w: &str) -> &str {
    w.trim_matches(|c: char| "()[]{}<>,;:\"'`!?".contains(c) || c == '.' && w.ends_with('.'))
}

fn is_path(w: &str) -> bool {
    (w.starts_with("http://") || w.starts_with("https://"))
        || (w.len() >= 3
            && w.contains('/')
            && (w.starts_with('/') || w.starts_with("./") || w.starts_with("~/") || w.contains('.'))
            && w.chars().any(|c| c.is_alphabetic()))
        || (w.len() >= 4
            && w.rsplit_once('.').is_some_and(|(stem, ext)| {
                !stem.is_empty()
                    && (1..=5).contains(&ext.len())
                    && ext.chars().all(|c| c.is_ascii_alphabetic())
                    && stem.chars().any(|c| c.is_alphabetic())
                    && [
                        "ts", "js", "rs", "py", "md", "json", "toml", "yaml", "yml", "txt", "go", "tsx", "jsx", "sh",
                        "sql", "db", "html", "css", "tmpl", "lock", "mjs", "cjs",
                    ]
                    .contains(&ext.to_ascii_lowercase().as_str())
            }))
}

fn is_identifier(w: &str) -> bool {
    if w.len() < 3 {
        return false;
    }
    let has_alpha = w.chars().any(|c| c.is_alphabetic());
    let has_digit = w.chars().any(|c| c.is_ascii_digit());
    let camel = w
        .chars()
        .zip(w.chars().skip(1))
        .any(|(a, b)| a.is_lowercase() && b.is_uppercase());
    has_alpha && (w.contains('_') || w.contains("::") || w.ends_with("()") || camel || (has_digit && !w.ends_with('%')))
}

fn is_number(w: &str) -> bool {
    w.chars().any(|c| c.is_ascii_digit()) && w.chars().all(|c| c.is_ascii_digit() || ".,:%-+x".contains(c))
}

/// Notable words of a unit: paths and identifiers, in order, without repeats.
fn notable_words(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for raw in text.split_whitespace() {
        let w = strip_punct(raw);
        if (is_path(w) || is_identifier(w)) && w.chars().count() <= 60 && !out.iter().any(|o| o == w) {
            out.push(w.to_string());
        }
    }
    out
}

fn score(text: &str, tag: &str) -> i64 {
    let lower = text.to_lowercase();
    let mut s = 0;
    if DECISION_WORDS.iter().any(|w| lower.contains(w)) {
        s += 3;
    }
    if ERROR_WORDS.iter().any(|w| lower.contains(w)) {
        s += 3;
    }
    let words: Vec<&str> = text.split_whitespace().map(strip_punct).collect();
    if words.iter().any(|w| is_path(w)) {
        s += 2;
    }
    s += words.iter().filter(|w| is_identifier(w)).count().min(3) as i64;
    if words.iter().any(|w| is_number(w)) {
        s += 1;
    }
    if tag == "user" {
        s += 1;
    }
    if text.chars().count() < 20 {
        s -= 1;
    }
    s
}

/// Splits a long line into sentences at ". ", "! ", "? ".
fn sentences(line: &str) -> Vec<String> {
    if line.chars().count() <= 240 {
        return vec![line.to_string()];
    }
    let mut out = Vec::new();
    let mut cur = String::new();
    let chars: Vec<char> = line.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        cur.push(c);
        if matches!(c, '.' | '!' | '?') && chars.get(i + 1).is_some_and(|n| n.is_whitespace()) {
            out.push(cur.trim().to_string());
            cur.clear();
        }
    }
    if !cur.trim().is_empty() {
        out.push(cur.trim().to_string());
    }
    out
}

fn clip(s: &str, max_chars: usize) -> String {
    if s.chars().count() <= max_chars {
        s.to_string()
    } else {
        let cut: String = s.chars().take(max_chars).collect();
        format!("{}…", cut.trim_end())
    }
}

/// The tag of a source header: `[2026-02-17 15:37 UTC | user]` → `user`; a range header
/// keeps its range.
fn header_tag(line: &str) -> Option<String> {
    let inner = line.strip_prefix('[')?.strip_suffix(']')?;
    if inner.contains('\n') || inner.is_empty() {
        return None;
    }
    Some(match inner.rsplit_once(" | ") {
        Some((_, role)) => role.trim().to_string(),
        None => inner.trim().to_string(),
    })
}

/// Summarises `source` extractively within `target_tokens`.
pub fn summarize_text(source: &str, target_tokens: i64) -> String {
    let target = target_tokens.max(24);
    let mut units: Vec<Unit> = Vec::new();
    let mut inherited: Vec<String> = Vec::new();
    let mut tag = String::new();
    let mut entries = 0usize;
    for line in source.lines() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if let Some(t) = header_tag(line) {
            tag = t;
            entries += 1;
            continue;
        }
        if let Some(rest) = line.strip_prefix(FOOTER) {
            for topic in rest.split(',').map(str::trim).filter(|t| !t.is_empty()) {
                if !inherited.iter().any(|i| i == topic) {
                    inherited.push(topic.trim_end_matches('.').to_string());
                }
            }
            continue;
        }
        for sentence in sentences(line) {
            let pos = units.len();
            units.push(Unit {
                score: score(&sentence, &tag),
                text: clip(&sentence, 300),
                tag: tag.clone(),
                pos,
            });
        }
    }

    // Notable words across everything, most frequent first, for the footer.
    let mut freq: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for u in &units {
        for w in notable_words(&u.text) {
            let n = freq.len();
            freq.entry(w).or_insert((0, n)).0 += 1;
        }
    }

    // Pick the best units that fit, leaving room for the footer.
    let footer_budget = (target / 4).clamp(12, 120);
    let body_budget = target - footer_budget;
    let mut order: Vec<usize> = (0..units.len()).collect();
    order.sort_by(|&a, &b| {
        units[b]
            .score
            .cmp(&units[a].score)
            .then(units[a].pos.cmp(&units[b].pos))
    });
    let mut chosen = vec![false; units.len()];
    let mut used = 0i64;
    let mut seen: Vec<String> = Vec::new();
    for i in order {
        let u = &units[i];
        let key = u.text.to_lowercase();
        if seen.contains(&key) {
            continue;
        }
        let line = render_unit(u);
        let cost = tokens::estimate(&line) + 1;
        if used + cost > body_budget {
            continue;
        }
        used += cost;
        chosen[i] = true;
        seen.push(key);
    }
    let mut body: Vec<String> = units.iter().filter(|u| chosen[u.pos]).map(render_unit).collect();
    if body.is_empty() {
        body.push(match units.first() {
            Some(u) => render_unit(u),
            None => "(no text content)".to_string(),
        });
    }
    let body_text = body.join("\n");

    // Footer: what was inherited from the inputs, then notable words that were left out.
    let omitted = units.iter().filter(|u| !chosen[u.pos]).count();
    let mut topics: Vec<String> = inherited.into_iter().take(6).collect();
    let mut by_freq: Vec<(&String, &(usize, usize))> = freq.iter().collect();
    by_freq.sort_by(|a, b| b.1 .0.cmp(&a.1 .0).then(a.1 .1.cmp(&b.1 .1)));
    for (w, _) in by_freq {
        if topics.len() >= 10 {
            break;
        }
        if !body_text.contains(w.as_str()) && !topics.iter().any(|t| t == w) {
            topics.push(w.clone());
        }
    }
    if omitted > 0 {
        topics.push(format!("{omitted} omitted lines"));
    }
    if entries > 0 {
        topics.push(format!("full text of {entries} source entries"));
    }
    let mut footer = format!("{FOOTER} {}", topics.join(", "));
    while tokens::estimate(&footer) > footer_budget && topics.len() > 1 {
        topics.remove(0);
        footer = format!("{FOOTER} {}", topics.join(", "));
    }
    let footer = clip(&footer, (footer_budget * 4) as usize);

    let mut out = format!("{body_text}\n{footer}");
    // Never exceed the target, whatever the rounding above did.
    while tokens::estimate(&out) > target && body.len() > 1 {
        body.pop();
        out = format!("{}\n{footer}", body.join("\n"));
    }
    if tokens::estimate(&out) > target {
        let room = (target - tokens::estimate(&footer) - 1).max(1);
        out = format!("{}\n{footer}", tokens::truncate_to_tokens(&body.join("\n"), room));
    }
    out
}

fn render_unit(u: &Unit) -> String {
    match u.tag.as_str() {
        "" => u.text.clone(),
        t if t.len() <= 12 => format!("{t}: {}", u.text),
        _ => u.text.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SOURCE: &str = "[2026-02-17 15:37 UTC | user]
Please fix the login bug in src/auth/login.ts, users get a 500.

[2026-02-17 15:38 UTC | assistant]
Looking at it now. The weather is nice today and I like this project a lot.
[tool call: read] {\"path\":\"src/auth/login.ts\"}

[2026-02-17 15:38 UTC | tool]
TypeError: cannot read properties of undefined (reading 'sessionToken') at validateUser (src/auth/login.ts:42)

[2026-02-17 15:40 UTC | assistant]
I decided to guard sessionToken before use; fixed in commit 7f3a9c2. Tests pass: 128 of 128.
Some filler sentence with nothing in it at all, just chatter to pad things out.";

    #[test]
    fn keeps_decisions_errors_paths_and_ends_with_the_footer() {
        let out = summarize_text(SOURCE, 110);
        assert!(out.contains("decided to guard sessionToken"), "{out}");
        assert!(out.contains("TypeError"), "{out}");
        assert!(out.contains("src/auth/login.ts"), "{out}");
        assert!(!out.contains("weather is nice"), "filler kept: {out}");
        let last = out.lines().last().unwrap();
        assert!(last.starts_with("Expand for details about: "), "{out}");
        assert!(tokens::estimate(&out) <= 110, "{} tokens", tokens::estimate(&out));
    }

    #[test]
    fn is_deterministic_and_respects_tiny_targets() {
        assert_eq!(summarize_text(SOURCE, 60), summarize_text(SOURCE, 60));
        for target in [1, 10, 30, 50, 200, 2000] {
            let out = summarize_text(SOURCE, target);
            assert!(tokens::estimate(&out) <= target.max(24), "target {target}: {out}");
            assert!(out.contains("Expand for details about:"), "target {target}");
        }
    }

    #[test]
    fn condensed_inputs_pass_their_footers_on() {
        let src = "[2026-02-17 15:37–16:00 UTC]\nMigrated the schema to v3.\nExpand for details about: exact SQL, row counts\n\n[2026-02-17 16:00–17:00 UTC]\nDeployed to staging.\nExpand for details about: deploy logs";
        let out = summarize_text(src, 200);
        assert!(out.contains("Migrated the schema"));
        let footer = out.lines().last().unwrap();
        assert!(
            footer.contains("exact SQL") && footer.contains("deploy logs"),
            "{footer}"
        );
        assert_eq!(out.matches("Expand for details about:").count(), 1);
    }

    #[test]
    fn empty_source_still_yields_a_summary() {
        let out = summarize_text("", 100);
        assert!(out.starts_with("(no text content)"));
        assert!(out.ends_with("Expand for details about: "));
    }
}
