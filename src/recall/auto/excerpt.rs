//! The excerpt of a message that answers a query: the line or sentence where the most (and
//! the rarest) of its terms occur, or where a value of the kind asked for stands, with the
//! line before it when it is short, cut to a few hundred characters. Never the whole message:
//! one fact from a pasted log is a line of it.

use std::ops::Range;

use super::terms::{self, Query};

/// Longest excerpt, in characters (about 100 tokens).
pub(crate) const MAX_EXCERPT_CHARS: usize = 400;

/// A segment this short also takes the one before it (a heading, the start of a sentence).
const SHORT_SEGMENT_CHARS: usize = 80;

/// What a value of the kind asked for counts: as much as an identifier, so that a question
/// sharing no word with the fact's sentence still reaches the minimum score.
pub(crate) const TYPED_VALUE_WEIGHT: f64 = 2.0;

/// A line longer than this is split into sentences.
const LONG_LINE_CHARS: usize = 240;

/// A long line's sentence holds at least this many bytes (a shorter one joins the next).
const MIN_SENTENCE_CHARS: usize = 20;

/// The best place of one message.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Excerpt {
    /// Byte range in the message's text.
    pub range: Range<usize>,
    /// The terms (indexes into the query's) found in it.
    pub matched: Vec<usize>,
    /// Whether a value of the kind asked for stands in it.
    pub typed: bool,
    /// Σ of the matched terms' weights, plus the typed value's.
    pub score: f64,
}

/// The lines of `text`, long ones split into sentences: byte ranges, without their ends.
fn segments(text: &str) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        let start = at;
        at += line.len();
        let body = line.trim_end();
        if body.trim().is_empty() {
            continue;
        }
        if body.len() <= LONG_LINE_CHARS {
            out.push(start..start + body.len());
            continue;
        }
        out.extend(
            crate::semantic::split_line(body, MIN_SENTENCE_CHARS)
                .into_iter()
                .map(|r| start + r.start..start + r.end),
        );
    }
    out
}

/// The weight of a matched term (its rarity in the history, `terms::Term::weight`).
fn weight(term: &terms::Term) -> f64 {
    term.weight
}

/// The terms of `query` found in `segment`.
fn matched_in(query: &Query, segment: &str) -> Vec<usize> {
    let lower = segment.to_lowercase();
    // A stem begins as its word does (four letters of it are there when the word is): a
    // segment without any such beginning matches nothing, and is not stemmed.
    let near = |t: &terms::Term| {
        let key = if t.strong { t.text.as_str() } else { t.stem.as_str() };
        let mut end = key.len().min(4);
        while !key.is_char_boundary(end) {
            end -= 1;
        }
        lower.contains(&key[..end])
    };
    if !query.terms.iter().any(near) {
        return Vec::new();
    }
    // Each token's stem, and its parts' (`payment-gateway` is `payment` and `gateway` too).
    let stems: std::collections::HashSet<String> = terms::tokens(&lower)
        .flat_map(|w| std::iter::once(w).chain(w.split(|c: char| !c.is_alphanumeric()).filter(|p| !p.is_empty())))
        .map(|w| terms::stem(w.trim_end_matches("'s")))
        .collect();
    // An identifier as a whole token (`6380` is not in `16380`), or its parts in a row.
    let parts: Vec<&str> = lower
        .split(|c: char| !c.is_alphanumeric())
        .filter(|p| !p.is_empty())
        .collect();
    query
        .terms
        .iter()
        .enumerate()
        .filter(|(_, t)| {
            if t.strong {
                terms::tokens(&lower).any(|w| w == t.text)
                    || parts
                        .windows(t.parts.len().max(1))
                        .any(|w| w.iter().zip(&t.parts).all(|(a, b)| a == b))
            } else {
                stems.contains(&t.stem)
            }
        })
        .map(|(i, _)| i)
        .collect()
}

/// The best excerpt of `text` for `query`, if any segment matches a term or holds a value of
/// the kind asked for.
pub(crate) fn best(text: &str, query: &Query) -> Option<Excerpt> {
    best_where(text, query, |_| true)
}

/// `best` among the segments `keep` accepts (a reply's, without the lines that repeat the
/// message it answers).
pub(crate) fn best_where(text: &str, query: &Query, keep: impl Fn(&str) -> bool) -> Option<Excerpt> {
    let segments = segments(text);
    let mut best: Option<(usize, Excerpt)> = None;
    for (i, seg) in segments.iter().enumerate() {
        let s = &text[seg.clone()];
        if !keep(s) {
            continue;
        }
        let matched = matched_in(query, s);
        let typed = query.holds_value(s);
        if matched.is_empty() && !typed {
            continue;
        }
        let value = match (typed, terms::is_log_line(s)) {
            (false, _) => 0.0,
            (true, false) => TYPED_VALUE_WEIGHT,
            (true, true) => TYPED_VALUE_WEIGHT / 4.0,
        };
        // A question asked before is not an answer: its words count half.
        let asked = if asks(s, query) { 0.5 } else { 1.0 };
        let score = asked * matched.iter().map(|&t| weight(&query.terms[t])).sum::<f64>() + value;
        if best.as_ref().is_none_or(|(_, b)| score > b.score) {
            best = Some((
                i,
                Excerpt {
                    range: seg.clone(),
                    matched,
                    typed,
                    score,
                },
            ));
        }
    }
    let (i, mut e) = best?;
    // A short line takes the one before it, when the two fit.
    if e.range.len() < SHORT_SEGMENT_CHARS && i > 0 {
        let before = &segments[i - 1];
        if e.range.end - before.start <= MAX_EXCERPT_CHARS {
            e.range.start = before.start;
        }
    }
    e.range = bounded(text, e.range, query);
    Some(e)
}

/// The start of `text` (its first segment `keep` accepts, with the next when it is short), as
/// the excerpt of a reply that answers a recalled question without repeating its words ("Maybe
/// Betelgeuse?" to "can you think of a name for the branch?"). None when no segment is kept.
pub(crate) fn head_where(text: &str, query: &Query, keep: impl Fn(&str) -> bool) -> Option<Excerpt> {
    let segments = segments(text);
    let mut kept = segments.iter().filter(|seg| keep(&text[(*seg).clone()]));
    let first = kept.next()?.clone();
    let mut range = first.clone();
    if first.len() < SHORT_SEGMENT_CHARS {
        if let Some(next) = kept.next() {
            if next.end - first.start <= MAX_EXCERPT_CHARS {
                range.end = next.end;
            }
        }
    }
    let s = &text[range.clone()];
    Some(Excerpt {
        range: bounded(text, range.clone(), query),
        matched: matched_in(query, s),
        typed: query.holds_value(s),
        score: 0.0,
    })
}

/// Whether what `segment` holds of `query` is asked, not said: each of its sentences that
/// holds a term or a value of the kind asked for (or its last, when none does) ends with '?'.
/// "Noting this: the fleet answers on amr-fleet:9443. Anyway, what next?" says its fact; "How
/// quickly must the app launch?" asks.
pub(crate) fn asks(segment: &str, query: &Query) -> bool {
    let asked = |s: &str| s.trim_end().ends_with('?');
    let holding: Vec<&str> = crate::semantic::split_line(segment, 1)
        .into_iter()
        .map(|r| &segment[r])
        .filter(|s| !matched_in(query, s).is_empty() || query.holds_value(s))
        .collect();
    match holding.is_empty() {
        true => asked(segment),
        false => holding.into_iter().all(asked),
    }
}

/// Whether `segment` repeats `source` (five words in a row of it, as a reply that begins "You
/// asked how quickly the app …" does): a restatement of a message is no answer to it.
pub(crate) fn repeats(segment: &str, source: &str) -> bool {
    const RUN: usize = 5;
    let words = |t: &str| -> Vec<String> { terms::tokens(&t.to_lowercase()).map(String::from).collect() };
    let (seg, src) = (words(segment), words(source));
    if seg.len() < RUN || src.len() < RUN {
        return false;
    }
    let runs: std::collections::HashSet<&[String]> = src.windows(RUN).collect();
    seg.windows(RUN).any(|w| runs.contains(w))
}

/// `range` cut to `MAX_EXCERPT_CHARS`, around the first matched term (or its start).
fn bounded(text: &str, range: Range<usize>, query: &Query) -> Range<usize> {
    let s = &text[range.clone()];
    if s.chars().count() <= MAX_EXCERPT_CHARS {
        return range;
    }
    let lower = s.to_lowercase();
    // Where the first term occurs (lowercasing keeps byte offsets for ASCII; elsewhere the
    // start is used).
    let hit = if lower.len() == s.len() {
        query
            .terms
            .iter()
            .filter_map(|t| lower.find(t.parts.first().map(String::as_str).unwrap_or("")))
            .min()
            .unwrap_or(0)
    } else {
        0
    };
    let mut start = hit.saturating_sub(MAX_EXCERPT_CHARS / 3);
    while !s.is_char_boundary(start) {
        start -= 1;
    }
    let mut end = start;
    for (n, (i, c)) in s[start..].char_indices().enumerate() {
        if n >= MAX_EXCERPT_CHARS {
            break;
        }
        end = start + i + c.len_utf8();
    }
    range.start + start..range.start + end
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value_kinds::Want;

    #[test]
    fn a_line_of_a_long_log_not_the_log() {
        let mut log: String = (0..2_000)
            .map(|i| format!("2026-11-02T10:{i:04} INFO worker {i} ok\n"))
            .collect();
        log.push_str("2026-11-02T11:00 WARN cache-stg.internal:6380 refused the connection\n");
        log.push_str(&(0..500).map(|i| format!("INFO tail {i}\n")).collect::<String>());
        let q = terms::parse("which host refused the connection?");
        let e = best(&log, &q).expect("found");
        let shown = &log[e.range.clone()];
        assert!(shown.contains("cache-stg.internal:6380 refused"), "{shown}");
        assert!(shown.len() <= MAX_EXCERPT_CHARS * 4, "{}", shown.len());
        assert!(shown.lines().count() <= 2);
    }

    #[test]
    fn a_sentence_of_a_long_paragraph() {
        let para = format!(
            "{} Priya Raman now leads the payments team since the reorg. {}",
            "Lorem ipsum dolor sit amet consectetur. ".repeat(20),
            "Sed do eiusmod tempor incididunt. ".repeat(20)
        );
        let q = terms::parse("who leads payments now?");
        assert!(!crate::value_kinds::has_value(
            &[Want::Person],
            None,
            "Staging Redis moved to a new host."
        ));
        let e = best(&para, &q).expect("found");
        let shown = &para[e.range.clone()];
        assert!(shown.contains("Priya Raman now leads the payments team"), "{shown}");
        assert!(shown.chars().count() <= MAX_EXCERPT_CHARS);
        assert!(e.typed);
    }

    #[test]
    fn a_value_of_the_kind_asked_for_is_found_without_a_shared_word() {
        let text = "Morning notes.\nStaging Redis lives at cache-stg.internal:6380 for now.\nLunch at noon.";
        let q = terms::parse("what address should the client dial for the staging store?");
        let e = best(text, &q).expect("found");
        assert!(text[e.range.clone()].contains("6380"));
        assert!(e.typed);
        // Nothing matches and nothing of the kind: no excerpt.
        assert!(best("nothing here at all", &terms::parse("which port?")).is_none());
        // A log line's value weighs less than a sentence's.
        let log = "2026-11-25T10:00:01Z INFO svc req=1 latency=120ms\nThe ingest workers get 3.5 GiB each.";
        let e = best(log, &terms::parse("how much memory do they get?")).expect("found");
        assert!(log[e.range.clone()].contains("3.5 GiB"), "{:?}", &log[e.range.clone()]);
    }

    #[test]
    fn a_long_line_without_sentences_is_cut_around_the_term() {
        let text = format!("{}ZEBRA-991{}", "x ".repeat(2_000), " y".repeat(2_000));
        let q = terms::parse("status of ZEBRA-991?");
        let e = best(&text, &q).expect("found");
        let shown = &text[e.range.clone()];
        assert!(shown.contains("ZEBRA-991"));
        assert!(shown.chars().count() <= MAX_EXCERPT_CHARS);
    }

    #[test]
    fn a_line_that_ends_asking_something_else_says_its_fact() {
        let q = terms::parse("where does the fleet manager answer?");
        let plant =
            "Noting this: the fleet manager answers on amr-fleet.dc3.lan:9443. Anyway, what should we look at next?";
        assert!(!asks(plant, &q));
        assert!(asks("Does the fleet manager answer on the new host?", &q));
        // Said in full: the plant's words are not halved as a question's are.
        let said = best(plant, &q).expect("found");
        let asked = best("Where does the fleet manager answer these days?", &q).expect("found");
        assert!(said.score > asked.score, "{said:?} {asked:?}");
    }

    #[test]
    fn a_restatement_repeats_five_words_in_a_row() {
        let asked = "How many pallets does the night shift at the loading dock move?";
        assert!(repeats("ack: How many pallets does the night shift", asked));
        assert!(!repeats("The night shift moves about 140 pallets.", asked));
        assert!(!repeats("How many?", asked));
        // A reply's start without its restatement: the answer after it.
        let reply = "You asked: how many pallets does the night shift move.\nAbout 140 a night.";
        let e = head_where(reply, &terms::parse(asked), |s| !repeats(s, asked)).expect("a line left");
        assert_eq!(&reply[e.range.clone()], "About 140 a night.");
        assert!(head_where(
            "ack: how many pallets does the night shift",
            &terms::parse(asked),
            |s| !repeats(s, asked)
        )
        .is_none());
    }
}
