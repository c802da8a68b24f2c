//! Long texts cut for display: a window of a text's characters (its first ones, or a page
//! further on) and how many characters it has, taken from a string in memory or streamed from
//! a reader, and JSON streamed with each long string inside it stood in for by a placeholder.
//!
//! Why: an operator's view of a conversation (the panel, `lcm-native ui`) shows a few
//! thousand characters of a message, and one stored message may be 20 MB. Read whole, each
//! such call held the text several times over (the row's columns, the rebuilt block, its
//! JSON, JavaScript's string of it) and handed JavaScript a text to walk on Node's thread.
//! Streamed, a call holds the window and a buffer, whatever is stored.
//!
//! A character is a Unicode scalar value (a Rust `char`; a JavaScript code point of
//! well-formed text): a cut never splits one. Bytes that are not UTF-8 (a damaged file) are
//! read as `String::from_utf8_lossy` reads them, one U+FFFD for each invalid sequence.

use std::io::{self, BufRead, BufReader, Read};

/// The most characters one window holds: a page of a text or a display's fold (4 MB of
/// UTF-8 at most, held once per call).
pub(crate) const MAX_WINDOW_CHARS: i64 = 1_000_000;

/// What a read buffers at a time.
const CHUNK: usize = 64 * 1024;

/// A window of a text: the characters from `offset` (at most the number asked), the text's
/// length in characters, and whether bytes that are not UTF-8 were read as U+FFFD.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Window {
    pub text: String,
    pub chars: u64,
    pub lossy: bool,
}

/// The first `max` characters of `text` and its length in characters, when it is longer;
/// `None` when it fits.
pub(crate) fn cut(text: &str, max: usize) -> Option<(&str, u64)> {
    // A text of at most `max` bytes has at most `max` characters: no count needed.
    if text.len() <= max {
        return None;
    }
    let (end, _) = text.char_indices().nth(max)?;
    Some((&text[..end], text.chars().count() as u64))
}

/// Characters `offset .. offset + take` of `text` (fewer at its end) and its length in
/// characters.
pub(crate) fn slice(text: &str, offset: u64, take: usize) -> (&str, u64) {
    let chars = text.chars().count() as u64;
    let lo = offset.min(chars) as usize;
    let hi = offset.saturating_add(take as u64).min(chars) as usize;
    // Byte offsets of characters `lo` and `hi` (the text's end standing for the one after its last).
    let mut at = text.char_indices().map(|(i, _)| i).chain(std::iter::once(text.len()));
    let b_lo = at.nth(lo).unwrap_or(text.len());
    let b_hi = if hi == lo {
        b_lo
    } else {
        at.nth(hi - lo - 1).unwrap_or(text.len())
    };
    (&text[b_lo..b_hi], chars)
}

/// The characters of `s`: std's count for long texts; for the short runs between a JSON
/// string's escapes, the bytes that start one (std's count costs more than that there).
fn count(s: &str) -> u64 {
    if s.len() < 32 {
        s.bytes().filter(|&b| (b as i8) >= -0x40).count() as u64
    } else {
        s.chars().count() as u64
    }
}

/// Characters `from .. to` of `s` (fewer at its end), without counting the rest of it.
pub(crate) fn chars_in(s: &str, from: u64, to: u64) -> &str {
    let mut at = s.char_indices().map(|(i, _)| i).chain(std::iter::once(s.len()));
    let lo = usize::try_from(from).unwrap_or(usize::MAX);
    let b_lo = at.nth(lo).unwrap_or(s.len());
    let n = usize::try_from(to.saturating_sub(from)).unwrap_or(usize::MAX);
    let b_hi = if n == 0 { b_lo } else { at.nth(n - 1).unwrap_or(s.len()) };
    &s[b_lo..b_hi]
}

/// `String::from_utf8_lossy` of bytes that come in pieces, a character possibly split between
/// two: each stretch of text handed on as it is decoded, one U+FFFD for each invalid sequence
/// where `from_utf8_lossy` puts one (`Utf8Error::error_len`'s sequences, the same), so the
/// counts and windows of a damaged text are those of the text the full read gives.
#[derive(Default)]
struct Lossy {
    /// The first bytes of a character the last piece ended inside (at most 3).
    carry: Vec<u8>,
    /// Whether any bytes were not UTF-8.
    bad: bool,
}

impl Lossy {
    fn feed(&mut self, mut bytes: &[u8], out: &mut impl FnMut(&str)) {
        while !self.carry.is_empty() {
            let Some(&b) = bytes.first() else { return };
            self.carry.push(b);
            match std::str::from_utf8(&self.carry) {
                Ok(c) => {
                    out(c);
                    self.carry.clear();
                    bytes = &bytes[1..];
                }
                Err(e) if e.error_len().is_none() => bytes = &bytes[1..],
                // `b` does not go on with the character begun: that is one invalid sequence,
                // and `b` is read afresh.
                Err(_) => {
                    self.carry.clear();
                    self.invalid(out);
                }
            }
        }
        loop {
            match std::str::from_utf8(bytes) {
                Ok(s) => {
                    if !s.is_empty() {
                        out(s);
                    }
                    return;
                }
                Err(e) => {
                    let (good, rest) = bytes.split_at(e.valid_up_to());
                    // UTF-8 up to there, as the error says (checked again, without `unsafe`).
                    if let Ok(s) = std::str::from_utf8(good) {
                        if !s.is_empty() {
                            out(s);
                        }
                    }
                    match e.error_len() {
                        Some(n) => {
                            self.invalid(out);
                            bytes = &rest[n..];
                        }
                        None => {
                            self.carry.extend_from_slice(rest);
                            return;
                        }
                    }
                }
            }
        }
    }

    /// The end of the bytes (or an ASCII byte next, which no character begun goes on with): a
    /// character begun is an invalid sequence.
    fn finish(&mut self, out: &mut impl FnMut(&str)) {
        if !self.carry.is_empty() {
            self.carry.clear();
            self.invalid(out);
        }
    }

    fn invalid(&mut self, out: &mut impl FnMut(&str)) {
        self.bad = true;
        out("\u{FFFD}");
    }
}

/// Characters `offset .. offset + take` of the text `r` yields (UTF-8), and its length in
/// characters: read through once, a buffer at a time, keeping only the window.
///
/// The text is `String::from_utf8_lossy`'s of the bytes (`Lossy`): a damaged text's windows
/// and length are those of the text the full read gives, and `lossy` says whether any of its
/// bytes, in the window or not, were not UTF-8 (the full read's `damaged`).
pub(crate) fn stream(mut r: impl Read, offset: u64, take: usize) -> io::Result<Window> {
    let to = offset.saturating_add(take as u64);
    let mut seen: u64 = 0;
    let mut kept = String::new();
    let mut lossy = Lossy::default();
    let mut buf = vec![0u8; CHUNK];
    let mut add = |s: &str| {
        let n = count(s);
        if seen < to && seen + n > offset {
            kept.push_str(chars_in(s, offset.saturating_sub(seen), to - seen));
        }
        seen += n;
    };
    loop {
        let n = match r.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        lossy.feed(&buf[..n], &mut add);
    }
    lossy.finish(&mut add);
    Ok(Window {
        text: kept,
        chars: seen,
        lossy: lossy.bad,
    })
}

/// JSON read from a stream with every string longer than `long` characters replaced by a
/// placeholder (`placeholder(i)` for the i-th such string), and those strings' windows.
#[derive(Debug)]
pub(crate) struct FoldedJson {
    /// Compact JSON text (serde_json's), small whatever the stream held.
    pub json: String,
    /// The long strings in the order they came: their first `keep` characters (or the window
    /// `fold_json` was asked for) and their length.
    pub long: Vec<Window>,
    /// Each long string's length as serde_json writes it in a JSON text (escapes counted, the
    /// quotes not): what it adds to the text of the value written out.
    pub json_chars: Vec<u64>,
    /// Whether any of the text was not UTF-8 (read as `from_utf8_lossy` reads it).
    pub lossy: bool,
}

/// Which long string of a JSON text a page is of, and the page.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Target {
    /// Its index among the strings longer than `long`, in order.
    pub index: usize,
    pub offset: u64,
    pub take: usize,
    /// The page is of the string as serde_json writes it (escaped, quotes left out; its
    /// `json_chars`), not of its characters.
    pub json: bool,
}

/// The longest object key read (keys are names; one longer is not what these rows hold).
const MAX_KEY_CHARS: usize = 4096;
/// Nesting deeper than this is refused (serde_json's own limit).
const MAX_DEPTH: usize = 128;
/// The longest number read (a longer one is not what any writer of these rows writes).
const MAX_NUMBER_BYTES: usize = 1024;

/// Reads the JSON text `r` yields as `FoldedJson`'s doc says: each string longer than `long`
/// characters a placeholder, its window its first `keep` characters (the long strings
/// `targets` name: their page instead). `Ok(None)` when it is not JSON (or holds an object
/// key longer than `MAX_KEY_CHARS`): the caller then takes it as a plain text.
pub(crate) fn fold_json(
    r: impl Read,
    long: usize,
    keep: usize,
    targets: &[Target],
    placeholder: &dyn Fn(usize) -> String,
) -> io::Result<Option<FoldedJson>> {
    let mut p = Parser {
        input: BufReader::with_capacity(CHUNK, r),
        out: String::new(),
        long: Vec::new(),
        json_chars: Vec::new(),
        lossy: false,
        max: long,
        keep,
        targets,
        placeholder,
    };
    match p.document() {
        Ok(()) => Ok(Some(FoldedJson {
            json: p.out,
            long: p.long,
            json_chars: p.json_chars,
            lossy: p.lossy,
        })),
        Err(Fault::NotJson) => Ok(None),
        Err(Fault::Io(e)) => Err(e),
    }
}

enum Fault {
    NotJson,
    Io(io::Error),
}

impl From<io::Error> for Fault {
    fn from(e: io::Error) -> Fault {
        Fault::Io(e)
    }
}

type Step<T = ()> = std::result::Result<T, Fault>;

struct Parser<'p, R: Read> {
    input: BufReader<R>,
    out: String,
    long: Vec<Window>,
    json_chars: Vec<u64>,
    lossy: bool,
    /// Strings longer than this many characters are stood in for.
    max: usize,
    /// Characters of such a string kept (its window).
    keep: usize,
    targets: &'p [Target],
    placeholder: &'p dyn Fn(usize) -> String,
}

/// A string as it was read: its characters, up to a window's worth.
struct Scanned {
    /// Its first `max` characters (all of it when it is not longer).
    head: String,
    max: u64,
    /// The target's page, when this string may be the target.
    page: Option<(Target, String)>,
    chars: u64,
    /// Its length as serde_json writes it (`FoldedJson::json_chars`).
    json_chars: u64,
    lossy: bool,
}

impl Scanned {
    /// The string's next characters: `text`, `n` of them, which serde_json writes as `json`,
    /// `n_json` characters (counted by the caller, who knows them for an escape).
    #[inline]
    fn add(&mut self, text: &str, json: &str, n: u64, n_json: u64) {
        if self.chars < self.max {
            self.head.push_str(chars_in(text, 0, self.max - self.chars));
        }
        if let Some((t, page)) = &mut self.page {
            let (at, text, n) = if t.json {
                (self.json_chars, json, n_json)
            } else {
                (self.chars, text, n)
            };
            let to = t.offset.saturating_add(t.take as u64);
            if at < to && at + n > t.offset {
                page.push_str(chars_in(text, t.offset.saturating_sub(at), to - at));
            }
        }
        self.chars += n;
        self.json_chars += n_json;
    }
}

impl<R: Read> Parser<'_, R> {
    fn peek(&mut self) -> Step<Option<u8>> {
        loop {
            match self.input.fill_buf() {
                Ok(b) => return Ok(b.first().copied()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(Fault::Io(e)),
            }
        }
    }

    fn next(&mut self) -> Step<u8> {
        let b = self.peek()?.ok_or(Fault::NotJson)?;
        self.input.consume(1);
        Ok(b)
    }

    fn skip_space(&mut self) -> Step<Option<u8>> {
        loop {
            match self.peek()? {
                Some(b' ' | b'\t' | b'\n' | b'\r') => self.input.consume(1),
                other => return Ok(other),
            }
        }
    }

    fn expect(&mut self, word: &[u8]) -> Step {
        for &w in word {
            if self.next()? != w {
                return Err(Fault::NotJson);
            }
        }
        Ok(())
    }

    fn document(&mut self) -> Step {
        self.skip_space()?;
        self.value(0)?;
        match self.skip_space()? {
            None => Ok(()),
            Some(_) => Err(Fault::NotJson),
        }
    }

    fn value(&mut self, depth: usize) -> Step {
        if depth > MAX_DEPTH {
            return Err(Fault::NotJson);
        }
        match self.peek()?.ok_or(Fault::NotJson)? {
            b'{' => {
                self.input.consume(1);
                self.out.push('{');
                if self.skip_space()? == Some(b'}') {
                    self.input.consume(1);
                    self.out.push('}');
                    return Ok(());
                }
                loop {
                    if self.skip_space()? != Some(b'"') {
                        return Err(Fault::NotJson);
                    }
                    self.input.consume(1);
                    let key = self.string(MAX_KEY_CHARS, None)?;
                    if key.chars > MAX_KEY_CHARS as u64 {
                        return Err(Fault::NotJson);
                    }
                    self.lossy |= key.lossy;
                    push_json_str(&mut self.out, &key.head);
                    if self.skip_space()? != Some(b':') {
                        return Err(Fault::NotJson);
                    }
                    self.input.consume(1);
                    self.out.push(':');
                    self.skip_space()?;
                    self.value(depth + 1)?;
                    match self.skip_space()? {
                        Some(b',') => {
                            self.input.consume(1);
                            self.out.push(',');
                        }
                        Some(b'}') => {
                            self.input.consume(1);
                            self.out.push('}');
                            return Ok(());
                        }
                        _ => return Err(Fault::NotJson),
                    }
                }
            }
            b'[' => {
                self.input.consume(1);
                self.out.push('[');
                if self.skip_space()? == Some(b']') {
                    self.input.consume(1);
                    self.out.push(']');
                    return Ok(());
                }
                loop {
                    self.skip_space()?;
                    self.value(depth + 1)?;
                    match self.skip_space()? {
                        Some(b',') => {
                            self.input.consume(1);
                            self.out.push(',');
                        }
                        Some(b']') => {
                            self.input.consume(1);
                            self.out.push(']');
                            return Ok(());
                        }
                        _ => return Err(Fault::NotJson),
                    }
                }
            }
            b'"' => {
                self.input.consume(1);
                let index = self.long.len();
                let target = self.targets.iter().find(|t| t.index == index).copied();
                let s = self.string(self.max.max(self.keep), target)?;
                self.lossy |= s.lossy;
                if s.chars <= self.max as u64 {
                    push_json_str(&mut self.out, &s.head);
                } else {
                    push_json_str(&mut self.out, &(self.placeholder)(index));
                    let text = match s.page {
                        Some((_, page)) => page,
                        None => match cut(&s.head, self.keep) {
                            Some((first, _)) => first.to_string(),
                            None => s.head,
                        },
                    };
                    self.long.push(Window {
                        text,
                        chars: s.chars,
                        lossy: s.lossy,
                    });
                    self.json_chars.push(s.json_chars);
                }
                Ok(())
            }
            b't' => {
                self.expect(b"true")?;
                self.out.push_str("true");
                Ok(())
            }
            b'f' => {
                self.expect(b"false")?;
                self.out.push_str("false");
                Ok(())
            }
            b'n' => {
                self.expect(b"null")?;
                self.out.push_str("null");
                Ok(())
            }
            b'-' | b'0'..=b'9' => {
                let mut number = Vec::new();
                while let Some(b @ (b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')) = self.peek()? {
                    if number.len() == MAX_NUMBER_BYTES {
                        return Err(Fault::NotJson);
                    }
                    number.push(b);
                    self.input.consume(1);
                }
                // serde_json says whether it is a JSON number, and writes it as it will read it.
                let n: serde_json::Number = serde_json::from_slice(&number).map_err(|_| Fault::NotJson)?;
                self.out.push_str(&n.to_string());
                Ok(())
            }
            _ => Err(Fault::NotJson),
        }
    }

    /// The rest of a string whose opening quote was read: decoded (bytes that are not UTF-8
    /// as `from_utf8_lossy` reads them), counted, its first `max` characters kept (and the
    /// page of `target`, when it may be this string).
    fn string(&mut self, max: usize, target: Option<Target>) -> Step<Scanned> {
        let mut s = Scanned {
            head: String::new(),
            max: max as u64,
            page: target.map(|t| (t, String::new())),
            chars: 0,
            json_chars: 0,
            lossy: false,
        };
        let mut lossy = Lossy::default();
        loop {
            let buf = match self.input.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(Fault::Io(e)),
            };
            if buf.is_empty() {
                return Err(Fault::NotJson);
            }
            // A run of plain bytes up to the next quote, backslash or control character (a
            // character split by the buffer's end is finished by the next run).
            let run = buf
                .iter()
                .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
                .unwrap_or(buf.len());
            // A run's text is as serde_json writes it: it holds no quote, backslash or control
            // character.
            if run > 0 {
                lossy.feed(&buf[..run], &mut |text| {
                    let n = count(text);
                    s.add(text, text, n, n);
                });
                self.input.consume(run);
                continue;
            }
            let b = buf[0];
            self.input.consume(1);
            lossy.finish(&mut |text| s.add(text, text, 1, 1));
            match b {
                b'"' => {
                    s.lossy = lossy.bad;
                    return Ok(s);
                }
                b'\\' => {
                    let c = self.escape()?;
                    let (mut utf8, mut json) = ([0u8; 4], [0u8; 6]);
                    let (text, json) = (c.encode_utf8(&mut utf8), json_escape(c, &mut json));
                    // One character, written as itself or as an escape (ASCII).
                    let n_json = if json == text { 1 } else { json.len() as u64 };
                    s.add(text, json, 1, n_json);
                }
                // A control character inside a string is not JSON.
                _ => return Err(Fault::NotJson),
            }
        }
    }

    /// The character of the escape after a backslash (a surrogate pair is one; a lone
    /// surrogate is U+FFFD, as every UTF-8 store keeps it).
    fn escape(&mut self) -> Step<char> {
        Ok(match self.next()? {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let hi = self.hex4()?;
                if (0xD800..0xDC00).contains(&hi) {
                    if self.peek()? == Some(b'\\') {
                        self.input.consume(1);
                        if self.next()? != b'u' {
                            return Err(Fault::NotJson);
                        }
                        let lo = self.hex4()?;
                        if (0xDC00..0xE000).contains(&lo) {
                            let c = 0x10000 + ((u32::from(hi) - 0xD800) << 10) + (u32::from(lo) - 0xDC00);
                            return Ok(char::from_u32(c).unwrap_or('\u{FFFD}'));
                        }
                        // Two escapes, the first a lone surrogate: serde_json refuses those.
                        return Err(Fault::NotJson);
                    }
                    '\u{FFFD}'
                } else {
                    char::from_u32(u32::from(hi)).unwrap_or('\u{FFFD}')
                }
            }
            _ => return Err(Fault::NotJson),
        })
    }

    fn hex4(&mut self) -> Step<u16> {
        let mut v: u16 = 0;
        for _ in 0..4 {
            let d = (self.next()? as char).to_digit(16).ok_or(Fault::NotJson)?;
            v = v * 16 + d as u16;
        }
        Ok(v)
    }
}

/// `c` as serde_json writes it inside a JSON string.
fn json_escape(c: char, buf: &mut [u8; 6]) -> &str {
    match c {
        '"' => "\\\"",
        '\\' => "\\\\",
        '\u{8}' => "\\b",
        '\u{c}' => "\\f",
        '\n' => "\\n",
        '\r' => "\\r",
        '\t' => "\\t",
        c if (c as u32) < 0x20 => {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            *buf = [b'\\', b'u', b'0', b'0', HEX[(c as usize) >> 4], HEX[(c as usize) & 0xF]];
            std::str::from_utf8(&buf[..]).unwrap_or("\u{FFFD}")
        }
        c => c.encode_utf8(&mut buf[..4]),
    }
}

/// `s` as a JSON string, appended.
fn push_json_str(out: &mut String, s: &str) {
    // Writing a &str as JSON cannot fail.
    out.push_str(&serde_json::to_string(s).unwrap_or_default());
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    /// A reader that hands out `step` bytes a call, so that characters and escapes fall across
    /// the buffers' ends.
    struct Trickle<'a> {
        data: &'a [u8],
        step: usize,
    }
    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = self.step.min(buf.len()).min(self.data.len());
            buf[..n].copy_from_slice(&self.data[..n]);
            self.data = &self.data[n..];
            Ok(n)
        }
    }

    fn chars(s: &str) -> u64 {
        s.chars().count() as u64
    }

    #[test]
    fn a_cut_keeps_whole_characters_and_counts_them() {
        assert_eq!(cut("abc", 3), None, "a text exactly the size is not cut");
        assert_eq!(cut("abc", 5), None);
        assert_eq!(cut("abcd", 3), Some(("abc", 4)));
        // Multi-byte: 3 characters in 9 bytes fit in 3; a cut after the second 🚀 of four.
        assert_eq!(cut("日本語", 3), None);
        assert_eq!(cut("🚀🚀🚀🚀", 2), Some(("🚀🚀", 4)));
        assert_eq!(cut("é🚀x", 1), Some(("é", 3)));
        assert_eq!(cut("", 0), None);
        assert_eq!(cut("a", 0), Some(("", 1)));
    }

    #[test]
    fn a_slice_is_a_window_of_characters() {
        let t = "aé🚀b日x";
        assert_eq!(slice(t, 0, 2), ("aé", 6));
        assert_eq!(slice(t, 2, 2), ("🚀b", 6));
        assert_eq!(slice(t, 4, 10), ("日x", 6));
        assert_eq!(slice(t, 6, 10), ("", 6));
        assert_eq!(slice(t, 99, 10), ("", 6));
        assert_eq!(slice("", 0, 5), ("", 0));
        // Pages put end to end give the text back.
        let pages: String = (0..)
            .map(|i| slice(t, i * 4, 4).0)
            .take_while(|p| !p.is_empty())
            .collect();
        assert_eq!(pages, t);
    }

    #[test]
    fn a_stream_gives_the_window_and_the_count_across_buffer_ends() {
        let text: String = (0..5000).map(|i| ["a", "é", "日", "🚀"][i % 4]).collect();
        for step in [1, 2, 3, 5, 7, 64 * 1024] {
            for (offset, take) in [
                (0, 10),
                (0, 0),
                (1, 3),
                (4_997, 10),
                (5_000, 5),
                (6_000, 5),
                (123, 4_000),
            ] {
                let w = stream(
                    Trickle {
                        data: text.as_bytes(),
                        step,
                    },
                    offset,
                    take,
                )
                .unwrap();
                let (want, n) = slice(&text, offset, take);
                assert_eq!(
                    (w.text.as_str(), w.chars, w.lossy),
                    (want, n, false),
                    "step {step} window {offset}+{take}"
                );
            }
        }
        // Larger than one buffer, pages concatenated are the text.
        let big: String = text.repeat(20);
        let mut pages = String::new();
        let mut at = 0;
        loop {
            let w = stream(big.as_bytes(), at, 33_333).unwrap();
            assert_eq!(w.chars, chars(&big));
            if w.text.is_empty() {
                break;
            }
            at += chars(&w.text);
            pages.push_str(&w.text);
        }
        assert_eq!(pages, big);
    }

    #[test]
    fn bytes_that_are_not_utf8_read_as_lossy_reads_them() {
        // Seven bytes start a character (a, b, FF, c, E6, d, F0); the window decodes lossily.
        let bytes = b"ab\xFFc\xE6\x97d\xF0\x9F\x9A";
        let lossy = String::from_utf8_lossy(bytes);
        for step in [1, 2, 3, 100] {
            let w = stream(Trickle { data: bytes, step }, 0, 100).unwrap();
            assert_eq!(
                (w.text.as_str(), w.chars, w.lossy),
                (lossy.as_ref(), 7, true),
                "step {step}"
            );
            // Windows of a damaged text follow each other: put end to end, the whole.
            let pages: Vec<u8> = (0..7)
                .flat_map(|i| {
                    let w = stream(Trickle { data: bytes, step }, i, 1).unwrap();
                    assert_eq!(w.chars, 7);
                    w.text.into_bytes()
                })
                .collect();
            assert_eq!(String::from_utf8(pages).unwrap(), lossy, "step {step}");
        }
        // A sound window of a damaged text says the text is damaged, as the full read does.
        let w = stream(&bytes[..], 0, 2).unwrap();
        assert_eq!((w.text.as_str(), w.lossy), ("ab", true));
    }

    /// Bytes from an alphabet of ASCII, continuation bytes, leads of each length and bytes
    /// never in UTF-8, so that every kind of invalid sequence comes up (no quote, backslash
    /// or control character: they go inside a JSON string as they are).
    fn damaged(n: usize, seed: u64) -> Vec<u8> {
        const ALPHABET: &[u8] = b"ab\x80\x97\x9F\xA0\xBF\xC2\xC3\xE0\xE6\xED\xF0\xF4\xF5\xFF";
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                ALPHABET[(x % ALPHABET.len() as u64) as usize]
            })
            .collect()
    }

    #[test]
    fn a_damaged_text_is_counted_and_cut_as_from_utf8_lossy_reads_it() {
        // A stray continuation byte is a character of its own (U+FFFD), not part of the last.
        let w = stream(&b"a\x80\x80b"[..], 0, 3).unwrap();
        assert_eq!((w.text.as_str(), w.chars, w.lossy), ("a\u{FFFD}\u{FFFD}", 4, true));
        // A character begun and not finished at the end is one.
        let w = stream(&b"ab\xF0\x9F"[..], 2, 5).unwrap();
        assert_eq!((w.text.as_str(), w.chars), ("\u{FFFD}", 3));
        for seed in 0..200 {
            let bytes = damaged(1 + (seed as usize * 7) % 60, seed);
            let whole = String::from_utf8_lossy(&bytes);
            let n = chars(&whole);
            let bad = std::str::from_utf8(&bytes).is_err();
            for step in [1, 2, 3, 5, 64] {
                for (offset, take) in [(0, 3), (1, 4), (n / 2, 5), (n.saturating_sub(2), 9), (0, 1000)] {
                    let w = stream(Trickle { data: &bytes, step }, offset, take).unwrap();
                    let want = slice(&whole, offset, take).0;
                    assert_eq!(
                        (w.text.as_str(), w.chars, w.lossy),
                        (want, n, bad),
                        "{bytes:x?} step {step}"
                    );
                }
                // The same bytes as a JSON string: its window, page and length are the same.
                let mut json = b"[\"".to_vec();
                json.extend_from_slice(&bytes);
                json.extend_from_slice(b"\"]");
                let target = Target {
                    index: 0,
                    offset: n / 3,
                    take: 4,
                    json: false,
                };
                let placeholder = |i: usize| format!("<{i}>");
                let f = fold_json(Trickle { data: &json, step }, 0, 2, &[target], &placeholder)
                    .unwrap()
                    .unwrap();
                let want = Window {
                    text: slice(&whole, n / 3, 4).0.to_string(),
                    chars: n,
                    lossy: bad,
                };
                assert_eq!((&f.long[0], f.lossy), (&want, bad), "{bytes:x?} step {step}");
                let f = fold_json(Trickle { data: &json, step }, 0, 2, &[], &placeholder)
                    .unwrap()
                    .unwrap();
                assert_eq!(f.long[0].text, slice(&whole, 0, 2).0, "{bytes:x?} step {step}");
            }
        }
        // Bad bytes in a string kept whole, or in a key: the document says so.
        let f = fold_all("{\"k\u{FFFD}\":\"ok\"}", 10, None, 1).unwrap();
        assert!(!f.lossy);
        for bad in [&b"{\"k\xFF\":1}"[..], b"[\"a\xE6\"]"] {
            let f = fold_json(bad, 10, 10, &[], &|i| format!("<{i}>")).unwrap().unwrap();
            assert!(f.lossy, "{bad:x?}");
        }
    }

    #[test]
    fn a_json_page_is_of_the_string_as_serde_json_writes_it() {
        // Every escape serde_json writes, and characters it writes as they are.
        let all: String = (0u32..0x80)
            .filter_map(char::from_u32)
            .chain("é🚀\u{7f}".chars())
            .collect();
        for c in all.chars() {
            let mut buf = [0u8; 6];
            let want = serde_json::to_string(&c.to_string()).unwrap();
            assert_eq!(json_escape(c, &mut buf), &want[1..want.len() - 1], "{c:?}");
        }
        let long = all.repeat(30);
        let written = serde_json::to_string(&long).unwrap();
        let written = &written[1..written.len() - 1];
        // Stored with other escapes than serde_json's (\u00e9, \/, \u0022) and spaces.
        let stored = format!(
            "{{ \"t\" : \"{}\" }}",
            written
                .replace('é', "\\u00e9")
                .replace('/', "\\/")
                .replace("\\\"", "\\u0022")
        );
        assert_eq!(serde_json::from_str::<Value>(&stored).unwrap()["t"], long);
        for step in [1, 7, 4096] {
            let f = fold_all(&stored, 10, None, step).unwrap();
            assert_eq!(f.json_chars, vec![chars(written)], "step {step}");
            let mut pages = String::new();
            let mut offset = 0;
            while offset < chars(written) {
                let target = Target {
                    index: 0,
                    offset,
                    take: 333,
                    json: true,
                };
                let f = fold_all(&stored, 10, Some(target), step).unwrap();
                assert_eq!(f.long[0].text, slice(written, offset, 333).0, "step {step} at {offset}");
                offset += 333;
                pages.push_str(&f.long[0].text);
            }
            assert_eq!(pages, written, "step {step}");
        }
    }

    fn fold_all(json: &str, max: usize, target: Option<Target>, step: usize) -> Option<FoldedJson> {
        fold_json(
            Trickle {
                data: json.as_bytes(),
                step,
            },
            max,
            max,
            target.as_slice(),
            &|i| format!("<{i}>"),
        )
        .unwrap()
    }

    #[test]
    fn json_comes_back_the_same_with_long_strings_stood_in_for() {
        let long = "x".repeat(50) + "é🚀";
        let doc = json!({
            "type": "toolCall",
            "n": [1, -2.5, 1e300, 0, true, false, null, {}],
            "arguments": { "command": long, "short": "ok\n\"q\"\\", "empty": [] },
            "more": ["y".repeat(11), "z".repeat(10), "\u{1F600}\u{7}"],
        });
        let text = serde_json::to_string(&doc).unwrap();
        for step in [1, 3, 1000] {
            let f = fold_all(&text, 10, None, step).unwrap();
            let got: Value = serde_json::from_str(&f.json).unwrap();
            let mut want = doc.clone();
            want["arguments"]["command"] = json!("<0>");
            want["more"][0] = json!("<1>");
            assert_eq!(got, want, "step {step}");
            assert_eq!(f.long.len(), 2);
            assert_eq!(
                f.long[0],
                Window {
                    text: "x".repeat(10),
                    chars: 52,
                    lossy: false
                }
            );
            assert_eq!(
                f.long[1],
                Window {
                    text: "y".repeat(10),
                    chars: 11,
                    lossy: false
                }
            );
        }
        // Nothing longer than max: the same document.
        let f = fold_all(&text, 100, None, 7).unwrap();
        assert_eq!(serde_json::from_str::<Value>(&f.json).unwrap(), doc);
        assert!(f.long.is_empty());
    }

    #[test]
    fn strings_up_to_long_are_kept_whole_and_longer_ones_keep_their_first_characters() {
        let text = serde_json::to_string(&json!({"type": "thinking", "t": "é".repeat(30)})).unwrap();
        let f = fold_json(text.as_bytes(), 20, 5, &[], &|i| format!("<{i}>"))
            .unwrap()
            .unwrap();
        assert_eq!(f.json, r#"{"type":"thinking","t":"<0>"}"#);
        assert_eq!(
            f.long,
            vec![Window {
                text: "é".repeat(5),
                chars: 30,
                lossy: false
            }]
        );
        // A window larger than `long`: the first `keep` characters still.
        let f = fold_json(text.as_bytes(), 20, 25, &[], &|i| format!("<{i}>"))
            .unwrap()
            .unwrap();
        assert_eq!(f.long[0].text, "é".repeat(25));
    }

    #[test]
    fn a_window_ending_on_a_character_split_across_buffers_keeps_it_whole() {
        // Step 1: every multi-byte character is split across reads, so a window's last
        // character always ends in the next buffer.
        for step in [1, 2, 3] {
            // A string of exactly `long` characters is kept whole.
            let f = fold_all(r#"["ééééé"]"#, 5, None, step).unwrap();
            assert_eq!(f.json, r#"["ééééé"]"#, "step {step}");
            // A longer one's head and its pages end on whole characters.
            let text = serde_json::to_string(&json!(["日本".repeat(20)])).unwrap();
            let f = fold_all(&text, 5, None, step).unwrap();
            assert_eq!(
                f.long[0],
                Window {
                    text: "日本日本日".into(),
                    chars: 40,
                    lossy: false
                },
                "step {step}"
            );
            let target = Target {
                index: 0,
                offset: 3,
                take: 4,
                json: false,
            };
            let f = fold_all(&text, 5, Some(target), step).unwrap();
            assert_eq!(f.long[0].text, "本日本日", "step {step}");
        }
    }

    #[test]
    fn escapes_count_as_the_characters_they_stand_for() {
        // "\u00e9" is é, "\ud83d\ude80" is 🚀, "\n" a newline: 5 characters.
        let text = r#"{"t":"a\u00e9\ud83d\ude80\nb"}"#;
        let f = fold_all(text, 2, None, 1).unwrap();
        assert_eq!(
            f.long,
            vec![Window {
                text: "aé".into(),
                chars: 5,
                lossy: false
            }]
        );
        let f = fold_all(
            text,
            2,
            Some(Target {
                index: 0,
                offset: 2,
                take: 2,
                json: false,
            }),
            1,
        )
        .unwrap();
        assert_eq!(f.long[0].text, "🚀\n");
        // A lone surrogate is U+FFFD, as every UTF-8 store keeps it.
        let f = fold_all(r#"["\ud83dab"]"#, 1, None, 1).unwrap();
        assert_eq!(
            f.long[0],
            Window {
                text: "\u{FFFD}".into(),
                chars: 3,
                lossy: false
            }
        );
    }

    #[test]
    fn a_page_of_one_long_string_of_a_json_text() {
        let a: String = (0..3000).map(|i| char::from(b'a' + (i % 26) as u8)).collect();
        let b = "日本".repeat(2000);
        let text = serde_json::to_string(&json!({"raw": {"text": a, "other": b}})).unwrap();
        for index in [0, 1] {
            let whole = if index == 0 { &a } else { &b };
            let mut pages = String::new();
            let mut offset = 0;
            loop {
                let f = fold_all(
                    &text,
                    100,
                    Some(Target {
                        index,
                        offset,
                        take: 700,
                        json: false,
                    }),
                    4096,
                )
                .unwrap();
                let w = &f.long[index];
                assert_eq!(w.chars, chars(whole));
                if w.text.is_empty() {
                    break;
                }
                offset += chars(&w.text);
                pages.push_str(&w.text);
            }
            assert_eq!(&pages, whole);
        }
    }

    #[test]
    fn what_is_not_json_is_said_so() {
        for bad in [
            "",
            "{",
            "[1,]",
            "{\"a\" 1}",
            "\"abc",
            "tru",
            "01x",
            "{\"a\":1} x",
            "\"a\u{1}\"",
            "[\"\\x\"]",
            "nul",
        ] {
            assert!(fold_all(bad, 5, None, 2).is_none(), "{bad:?}");
        }
        // A key longer than max is kept whole; one longer than any name is refused.
        assert!(fold_all(r#"{"abcdefgh":1}"#, 3, None, 2).is_some());
        let key = format!(
            "{{{}:1}}",
            serde_json::to_string(&"k".repeat(MAX_KEY_CHARS + 1)).unwrap()
        );
        assert!(fold_all(&key, 3, None, 2).is_none());
        let deep = "[".repeat(200) + &"]".repeat(200);
        assert!(fold_all(&deep, 5, None, 100).is_none());
        // A plain text streamed is a JSON string only when quoted.
        assert!(fold_all("hello", 5, None, 2).is_none());
        assert!(fold_all("  \"hello\"  ", 5, None, 2).is_some());
    }
}
