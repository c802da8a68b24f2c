//! Meaning without shared words: static word-piece vectors (distilled from the sentence model
//! all-MiniLM-L6-v2 by `scripts/distill-word-vectors.py`, shipped inside the addon, nothing
//! downloaded at run time) and the sentence vectors made from them. Recall uses them as its
//! bridge from a question to a statement that shares no word with it ("which tool carries
//! usage data out of the apps?" to "analytics events will go through Segment").
//!
//! A sentence's vector is the weighted mean of its content pieces' vectors. Two weights: a
//! fixed one (`fixed_weight`, the piece's place in the model's vocabulary, which runs from
//! common to rare), for vectors kept in memory across a whole history; and the rarity of the
//! piece in the history it is compared within (`Rarity`), for the final comparison of a few.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::LazyLock;

/// Dimensions of a stored piece vector (the model's principal axes, largest first).
pub(crate) const DIMS: usize = 256;

/// Dimensions of the coarse vectors a whole history is kept in: a prefix of the full vector,
/// its best short form.
pub(crate) const COARSE_DIMS: usize = 64;

/// The shipped vectors.
static FILE: &[u8] = include_bytes!("vectors.bin");

/// Word pieces and their vectors.
struct Table {
    /// Pieces that begin a word.
    index: HashMap<&'static str, u32>,
    /// Pieces that continue one (`##loader`), by what follows the mark.
    continuing: HashMap<&'static str, u32>,
    /// `count × DIMS` int8 (stored as bytes), each row a unit vector × 127.
    vectors: &'static [u8],
}

static TABLE: LazyLock<Table> = LazyLock::new(|| parse(FILE).expect("the shipped vectors are well formed"));

/// Reads the file `scripts/distill-word-vectors.py` writes.
fn parse(bytes: &'static [u8]) -> Option<Table> {
    let rest = bytes.strip_prefix(b"LCMWVEC1")?;
    let word = |at: usize| -> Option<u32> { Some(u32::from_le_bytes(rest.get(at..at + 4)?.try_into().ok()?)) };
    let (dims, count) = (word(0)? as usize, word(4)? as usize);
    if dims != DIMS {
        return None;
    }
    let mut at = 8;
    let (mut index, mut continuing) = (HashMap::with_capacity(count), HashMap::new());
    for i in 0..count {
        let len = *rest.get(at)? as usize;
        let piece = std::str::from_utf8(rest.get(at + 1..at + 1 + len)?).ok()?;
        match piece.strip_prefix("##") {
            Some(body) => continuing.insert(body, i as u32),
            None => index.insert(piece, i as u32),
        };
        at += 1 + len;
    }
    let vectors = rest.get(at..at + count * DIMS)?;
    Some(Table {
        index,
        continuing,
        vectors,
    })
}

/// A piece's vector, its int8 components as bytes (`as i8` reads one).
fn vector(piece: u32) -> &'static [u8] {
    let at = piece as usize * DIMS;
    &TABLE.vectors[at..at + DIMS]
}

/// Words that carry no meaning of their own here (a question's frame, pronouns, auxiliaries).
const STOP: &str = "a an the of to in on for and or is are was were be been being it its this that these those \
    what which who whom whose when where how why do does did i you we our my your me us they them he she his her \
    at by with from as but not no so if then than there here up out about into over after before again any some \
    all can could should would will must may might just also anyway one s t let lets ok okay";

static STOPS: LazyLock<std::collections::HashSet<&'static str>> = LazyLock::new(|| STOP.split_whitespace().collect());

/// Longest word split into pieces (a longer one is not a word).
const MAX_WORD: usize = 40;

/// The content pieces of `text`: its words (ASCII letters and digits, lowercased; stop words
/// and bare numbers left out), each split into the vocabulary's pieces, longest first.
pub(crate) fn pieces(text: &str) -> Vec<u32> {
    let table = &*TABLE;
    let mut out = Vec::new();
    let lower = text.to_ascii_lowercase();
    for word in lower.split(|c: char| !c.is_ascii_alphanumeric()) {
        if word.is_empty() || word.len() > MAX_WORD || word.bytes().all(|b| b.is_ascii_digit()) || STOPS.contains(word)
        {
            continue;
        }
        let mut start = 0;
        let mut split = Vec::new();
        while start < word.len() {
            let mut end = word.len();
            let found = loop {
                if end <= start {
                    break None;
                }
                let key = if start == 0 {
                    table.index.get(&word[start..end])
                } else {
                    table.continuing.get(&word[start..end])
                };
                if let Some(&id) = key {
                    break Some(id);
                }
                end -= 1;
            };
            let Some(id) = found else {
                split.clear();
                break;
            };
            split.push(id);
            start = end;
        }
        out.extend(split);
    }
    out
}

/// The fixed weight of a piece: the model's vocabulary runs roughly from common to rare.
fn fixed_weight(piece: u32) -> f32 {
    (2.0 + piece as f32).ln()
}

/// How rare each piece is among the sentences of one history (in how many it stands).
#[derive(Default, Clone)]
pub(crate) struct Rarity {
    held: HashMap<u32, u32>,
    statements: u32,
}

impl Rarity {
    /// Counts one sentence's pieces.
    pub(crate) fn add(&mut self, pieces: &[u32]) {
        self.statements += 1;
        let mut seen: Vec<u32> = pieces.to_vec();
        seen.sort_unstable();
        seen.dedup();
        for p in seen {
            *self.held.entry(p).or_default() += 1;
        }
    }

    /// Whether one of `pieces` stands in at most `share` of the history's sentences (or in
    /// none): a question of only common pieces ("what should we check next?") has nothing
    /// to find by meaning.
    pub(crate) fn has_rare(&self, pieces: &[u32], share: f32) -> bool {
        pieces
            .iter()
            .any(|p| self.held.get(p).copied().unwrap_or(0) as f32 <= share * self.statements as f32)
    }

    fn weight(&self, piece: u32) -> f32 {
        let held = self.held.get(&piece).copied().unwrap_or(0) as f32;
        ((self.statements as f32 + 1.0) / (held + 1.0)).ln() + 0.5
    }
}

/// The unit vector of `pieces` weighted by `weight`, over the first `dims` dimensions (None
/// when there are no pieces).
fn mean(pieces: &[u32], dims: usize, weight: impl Fn(u32) -> f32) -> Option<Vec<f32>> {
    if pieces.is_empty() {
        return None;
    }
    let mut sum = vec![0f32; dims];
    for &p in pieces {
        let w = weight(p);
        for (s, &v) in sum.iter_mut().zip(&vector(p)[..dims]) {
            *s += w * f32::from(v as i8);
        }
    }
    let norm = sum.iter().map(|v| v * v).sum::<f32>().sqrt();
    (norm > 0.0).then(|| sum.into_iter().map(|v| v / norm).collect())
}

/// A sentence's coarse vector, int8 (× 127), for a history's index.
pub(crate) fn coarse(pieces: &[u32]) -> Option<[i8; COARSE_DIMS]> {
    let v = mean(pieces, COARSE_DIMS, fixed_weight)?;
    let mut out = [0i8; COARSE_DIMS];
    for (o, x) in out.iter_mut().zip(v) {
        *o = (x * 127.0).round().clamp(-127.0, 127.0) as i8;
    }
    Some(out)
}

/// The dot product of two coarse vectors: their cosine × 127² (what ranks, as one pass over
/// a whole history compares them).
fn coarse_dot(a: &[i8; COARSE_DIMS], b: &[i8; COARSE_DIMS]) -> i32 {
    // In i16 lanes (127² fits), summed in i32: the form the compiler turns into SIMD.
    a.iter()
        .zip(b)
        .map(|(&x, &y)| i32::from(i16::from(x) * i16::from(y)))
        .sum()
}

/// The dot products of `q` with each of `vectors`, in `out` (cleared first).
pub(crate) fn coarse_dots(q: &[i8; COARSE_DIMS], vectors: &[[i8; COARSE_DIMS]], out: &mut Vec<i32>) {
    out.clear();
    out.extend(vectors.iter().map(|v| coarse_dot(q, v)));
}

/// The cosine of two coarse vectors (each × 127), about −1 … 1.
#[cfg(test)]
pub(crate) fn coarse_similarity(a: &[i8; COARSE_DIMS], b: &[i8; COARSE_DIMS]) -> f32 {
    coarse_dot(a, b) as f32 / (127.0 * 127.0)
}

/// A sentence's full vector, its pieces weighed by their rarity in the history (`rarity`):
/// what the final comparison compares (None when it has no pieces).
pub(crate) fn full(pieces: &[u32], rarity: &Rarity) -> Option<Vec<f32>> {
    mean(pieces, DIMS, |p| rarity.weight(p))
}

/// The cosine of two full vectors.
pub(crate) fn cosine(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(a, b)| a * b).sum()
}

/// The cosine of two sentences' full vectors (`full`): the final comparison.
#[cfg(test)]
pub(crate) fn similarity(a: &[u32], b: &[u32], rarity: &Rarity) -> f32 {
    match (full(a, rarity), full(b, rarity)) {
        (Some(x), Some(y)) => cosine(&x, &y),
        _ => 0.0,
    }
}

/// Pieces a statement needs at least to be compared (fewer say too little to mean anything).
pub(crate) const MIN_PIECES: usize = 3;

/// Longest statement, in bytes (a longer line is a log line or a paste, not a sentence).
const MAX_STATEMENT: usize = 400;

/// Statements of a message kept for the index at most.
pub(crate) const MAX_STATEMENTS: usize = 16;

/// A line that is a record, not a sentence: it starts with a timestamp, or holds two
/// `key=value` pairs.
static RECORD: LazyLock<regex::Regex> =
    LazyLock::new(|| regex::Regex::new(r"^\s*\[?\d{4}-\d{2}-\d{2}[T ]|\w=\S+.*\s\w+=\S+").expect("a valid pattern"));

/// The sentences of `text` worth comparing (byte ranges, at most `MAX_STATEMENTS`; not its
/// records or long lines), each with whether it is a statement (not a question).
pub(crate) fn sentences_kept(text: &str) -> Vec<(Range<usize>, bool)> {
    let mut out = Vec::new();
    for line in sentences(text) {
        let s = &text[line.clone()];
        if s.len() > MAX_STATEMENT || RECORD.is_match(s) {
            continue;
        }
        let statement = !s.trim_end().ends_with('?');
        out.push((line, statement));
        if out.len() >= MAX_STATEMENTS {
            break;
        }
    }
    out
}

/// The statements of `text` (byte ranges): its sentences worth comparing, not its questions.
pub(crate) fn statements(text: &str) -> Vec<Range<usize>> {
    sentences_kept(text).into_iter().filter(|s| s.1).map(|s| s.0).collect()
}

/// Titles a name follows ("Dr. Halima Oyelaran"): their period ends no sentence.
const TITLES: [&str; 6] = ["dr", "mr", "mrs", "ms", "prof", "st"];

/// Whether `before` (the text up to a period) ends with a title.
fn after_title(before: &str) -> bool {
    let word = before.rsplit(|c: char| !c.is_ascii_alphabetic()).next().unwrap_or("");
    TITLES.iter().any(|t| word.eq_ignore_ascii_case(t))
}

/// The sentences of `text`: its lines, each split into sentences (`split_line`).
pub(crate) fn sentences(text: &str) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        let start = at;
        at += line.len();
        out.extend(
            split_line(line.trim_end(), 1)
                .into_iter()
                .map(|r| start + r.start..start + r.end),
        );
    }
    out.retain(|r| !text[r.clone()].trim().is_empty());
    out
}

/// One line's sentences (byte ranges in it): split after '.', '!' or '?' followed by white
/// space, where the sentence so ended holds `min_chars` bytes or more and the period follows
/// no title.
pub(crate) fn split_line(line: &str, min_chars: usize) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut from = 0;
    for (i, _) in line.match_indices(['.', '?', '!']) {
        let rest = &line[i + 1..];
        if rest.starts_with(char::is_whitespace) && i + 1 - from >= min_chars && !after_title(&line[..i]) {
            out.push(from..i + 1);
            from = i + 1 + rest.len() - rest.trim_start().len();
        }
    }
    if from < line.len() {
        out.push(from..line.len());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_vectors_load_and_hold_the_common_words() {
        for w in ["analytics", "usage", "boot", "nautical", "the"] {
            assert!(TABLE.index.contains_key(w), "{w}");
        }
        assert!(TABLE.continuing.contains_key("load") && TABLE.continuing.contains_key("er"));
        assert_eq!(TABLE.vectors.len() % DIMS, 0);
        // Each row is a unit vector (× 127, rounded).
        let v = vector(TABLE.index["usage"]);
        let norm = v
            .iter()
            .map(|&x| (f32::from(x as i8) / 127.0).powi(2))
            .sum::<f32>()
            .sqrt();
        assert!((norm - 1.0).abs() < 0.02, "{norm}");
    }

    #[test]
    fn a_word_outside_the_vocabulary_is_split_into_its_pieces_and_stop_words_and_numbers_go() {
        let p = pieces("What is the bootloader on port 8883?");
        let name = |id: u32| {
            let find = |m: &HashMap<&'static str, u32>| m.iter().find(|(_, &v)| v == id).map(|(k, _)| *k);
            find(&TABLE.index)
                .map(String::from)
                .or_else(|| find(&TABLE.continuing).map(|k| format!("##{k}")))
        };
        let names: Vec<String> = p.iter().map(|&id| name(id).unwrap()).collect();
        assert_eq!(names, ["boot", "##load", "##er", "port"]);
    }

    #[test]
    fn a_statement_is_nearer_a_question_of_its_meaning_than_one_of_another() {
        let mut rarity = Rarity::default();
        let said = [
            "decision: in-app analytics events will go through Segment.",
            "the SoC core rail on the sensor board has to sit at 0.85 V, within 3 %.",
            "we just moved the iOS CI builds over to Xcode 17.",
            "Thanks, that helps.",
        ];
        for s in said {
            rarity.add(&pieces(s));
        }
        let q = pieces("So which tool ended up carrying usage data out of the apps?");
        let sims: Vec<f32> = said.iter().map(|s| similarity(&q, &pieces(s), &rarity)).collect();
        assert!(sims[0] > sims[1] && sims[0] > sims[2] && sims[0] > sims[3], "{sims:?}");
        // The coarse vectors agree on the order of the first two.
        let cq = coarse(&q).unwrap();
        let c: Vec<f32> = said[..2]
            .iter()
            .map(|s| coarse_similarity(&cq, &coarse(&pieces(s)).unwrap()))
            .collect();
        assert!(c[0] > c[1], "{c:?}");
    }

    #[test]
    fn statements_leave_out_questions_records_and_long_lines() {
        let text = "Here is the log of run 3, what went wrong?\n2026-11-25T10:00:58Z INFO svc req=a latency=1ms\nAlso, unrelated: the broker is mqtt-lab-1:8883. Anyway, what next?\n"
            .to_string()
            + &"x".repeat(500);
        let got: Vec<&str> = statements(&text).into_iter().map(|r| &text[r]).collect();
        assert_eq!(got, ["Also, unrelated: the broker is mqtt-lab-1:8883."]);
        // A title's period ends no sentence.
        let text = "The lead who signs off is Dr. Halima Oyelaran. Ask her first.";
        let got: Vec<&str> = statements(text).into_iter().map(|r| &text[r]).collect();
        assert_eq!(
            got,
            ["The lead who signs off is Dr. Halima Oyelaran.", "Ask her first."]
        );
    }
}
