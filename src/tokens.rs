//! The token estimator shared with lossless-claw (HEAD): a code-point weighted count.
//! CJK code points weigh 1.5, other astral code points 2, everything else 0.25; the sum is
//! rounded up. Stored `token_count` columns hold this estimate, so thresholds agree across
//! both implementations. Weights are kept in quarters to stay in integer arithmetic.

/// Weight of one code point, in quarter tokens.
fn quarters(c: char) -> u64 {
    let cp = c as u32;
    if is_cjk(cp) {
        6
    } else if cp > 0xFFFF {
        8
    } else {
        1
    }
}

/// Code points the estimator (and recall's CJK search path) treats as CJK: Han, kana, Hangul
/// and their punctuation and full-width forms.
pub(crate) fn is_cjk(cp: u32) -> bool {
    matches!(cp,
        0x4E00..=0x9FFF
        | 0x3400..=0x4DBF
        | 0x20000..=0x2A6DF
        | 0x2A700..=0x2B73F
        | 0x2B740..=0x2B81F
        | 0x2B820..=0x2CEAF
        | 0x2CEB0..=0x2EBEF
        | 0x3000..=0x303F
        | 0x3040..=0x30FF
        | 0xAC00..=0xD7AF
        | 0xFF00..=0xFFEF)
}

/// Estimated tokens of `text`.
pub(crate) fn estimate(text: &str) -> i64 {
    quarter_tokens(text).div_ceil(4) as i64
}

/// The weight of `text` in quarter tokens: additive, so the estimate of a text built piece
/// by piece is `sum.div_ceil(4)` without re-reading what came before.
pub(crate) fn quarter_tokens(text: &str) -> u64 {
    // ASCII: every byte is one code point of weight 1/4.
    if text.is_ascii() {
        return text.len() as u64;
    }
    let bytes = text.as_bytes();
    // One quarter per code point: every byte that does not continue a UTF-8 sequence.
    let code_points = bytes.iter().filter(|&&b| (b as i8) >= -0x40).count() as u64;
    // Only code points of three or four bytes (U+0800 and up) can weigh more: CJK and astral.
    // Most text has none, or a few (a dash, a quote), so those are decoded one by one.
    let heavier: u64 = bytes
        .iter()
        .enumerate()
        .filter(|(_, &b)| b >= 0xE0)
        .map(|(i, _)| text[i..].chars().next().map_or(0, |c| quarters(c) - 1))
        .sum();
    code_points + heavier
}

/// Estimated tokens of the JSON text of `value` (what the plugin estimates for block content),
/// counted as it is serialized instead of materializing the string.
pub(crate) fn estimate_json(value: &serde_json::Value) -> i64 {
    use std::io::Write;
    let mut counter = QuarterCounter::default();
    {
        // serde_json writes token by token; the buffer hands the counter large chunks.
        let mut buffered = std::io::BufWriter::with_capacity(4096, &mut counter);
        // Writing to the counter cannot fail, and a `Value` always serializes.
        let _ = serde_json::to_writer(&mut buffered, value);
        let _ = buffered.flush();
    }
    counter.quarters.div_ceil(4) as i64
}

/// An `io::Write` that sums code-point weights of the UTF-8 written to it.
#[derive(Default)]
struct QuarterCounter {
    quarters: u64,
    /// The start of a code point split across two writes.
    pending: Vec<u8>,
}

impl QuarterCounter {
    fn count(&mut self, bytes: &[u8]) -> usize {
        if bytes.is_ascii() {
            self.quarters += bytes.len() as u64;
            return bytes.len();
        }
        match std::str::from_utf8(bytes) {
            Ok(text) => {
                self.quarters += if text.is_ascii() {
                    text.len() as u64
                } else {
                    text.chars().map(quarters).sum()
                };
                bytes.len()
            }
            Err(e) => {
                let valid = e.valid_up_to();
                self.count(&bytes[..valid]);
                valid
            }
        }
    }
}

impl std::io::Write for QuarterCounter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.pending.is_empty() {
            let used = self.count(buf);
            self.pending.extend_from_slice(&buf[used..]);
        } else {
            let mut joined = std::mem::take(&mut self.pending);
            joined.extend_from_slice(buf);
            let used = self.count(&joined);
            self.pending.extend_from_slice(&joined[used..]);
        }
        // A stray invalid byte (never produced by serde_json) must not grow `pending` forever.
        if self.pending.len() > 3 {
            self.quarters += self.pending.len() as u64;
            self.pending.clear();
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The longest prefix of `text` (cut at a char boundary) whose estimate is at most `max_tokens`.
pub(crate) fn truncate_to_tokens(text: &str, max_tokens: i64) -> &str {
    if max_tokens <= 0 {
        return "";
    }
    let budget = (max_tokens as u64) * 4;
    let mut used = 0u64;
    for (i, c) in text.char_indices() {
        used += quarters(c);
        if used > budget {
            return &text[..i];
        }
    }
    text
}

/// The longest suffix of `text` (cut at a char boundary) whose estimate is at most `max_tokens`.
pub(crate) fn truncate_start_to_tokens(text: &str, max_tokens: i64) -> &str {
    if max_tokens <= 0 {
        return "";
    }
    let budget = (max_tokens as u64) * 4;
    let mut used = 0u64;
    for (i, c) in text.char_indices().rev() {
        used += quarters(c);
        if used > budget {
            return &text[i + c.len_utf8()..];
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncation_keeps_whole_code_points_within_the_estimate() {
        let text = "ab漢字cd😀ef";
        for max in 0..8 {
            let head = truncate_to_tokens(text, max);
            let tail = truncate_start_to_tokens(text, max);
            assert!(
                estimate(head) <= max && estimate(tail) <= max,
                "{max}: {head:?} {tail:?}"
            );
            assert!(text.starts_with(head) && text.ends_with(tail));
        }
        assert_eq!(truncate_start_to_tokens(text, 1), "ef");
        assert_eq!(truncate_start_to_tokens(text, 3), "cd😀ef");
        assert_eq!(truncate_start_to_tokens(text, 100), text);
    }

    #[test]
    fn ascii_is_quarter_weight_rounded_up() {
        assert_eq!(estimate(""), 0);
        assert_eq!(estimate("a"), 1);
        assert_eq!(estimate("abcd"), 1);
        assert_eq!(estimate("abcde"), 2);
        assert_eq!(estimate("/mode"), 2);
    }

    #[test]
    fn cjk_and_astral_weights() {
        assert_eq!(estimate("中"), 2); // 1.5 -> 2
        assert_eq!(estimate("中文"), 3);
        assert_eq!(estimate("한국어"), 5); // 4.5 -> 5
        assert_eq!(estimate("😀"), 2);
        assert_eq!(estimate("é"), 1);
        assert_eq!(estimate("a中😀"), 4); // 0.25 + 1.5 + 2 = 3.75
    }

    proptest::proptest! {
        #[test]
        fn the_weight_is_the_sum_of_the_code_points_weights(text in "(\\PC|[中한😀é–\u{20000}\u{FF01}]){0,64}") {
            let each: u64 = text.chars().map(quarters).sum();
            proptest::prop_assert_eq!(quarter_tokens(&text), each);
        }
    }

    #[test]
    fn the_json_estimate_equals_the_estimate_of_the_serialized_text() {
        let values = [
            serde_json::json!([{"type": "text", "text": "plain"}]),
            serde_json::json!([{"type": "toolCall", "id": "c1", "name": "bash", "arguments": {"cmd": "echo \"中文\"\n😀\t\u{1}"}}]),
            serde_json::json!({"nested": [1, 2.5, null, true, "한국어 é"]}),
            // Longer than the 4 KiB buffer, so code points straddle its flushes.
            serde_json::json!([{"type": "text", "text": "ab中😀é\"".repeat(2000)}]),
        ];
        for v in &values {
            assert_eq!(estimate_json(v), estimate(&v.to_string()), "{v}");
        }
        // Code points split across writes are counted once, whole.
        use std::io::Write;
        let text = "a中😀é".repeat(7);
        let mut counter = QuarterCounter::default();
        for b in text.as_bytes() {
            counter.write_all(std::slice::from_ref(b)).unwrap();
        }
        assert_eq!(counter.quarters.div_ceil(4) as i64, estimate(&text));
    }

    #[test]
    fn truncation_respects_the_budget_and_char_boundaries() {
        assert_eq!(truncate_to_tokens("abcdefgh", 1), "abcd");
        assert_eq!(truncate_to_tokens("中中中", 2), "中");
        assert_eq!(truncate_to_tokens("abc", 0), "");
        let t = "x😀y中z".repeat(50);
        for max in 0..60 {
            let cut = truncate_to_tokens(&t, max);
            assert!(estimate(cut) <= max);
            assert!(t.starts_with(cut));
        }
    }
}
