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

fn is_cjk(cp: u32) -> bool {
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
pub fn estimate(text: &str) -> i64 {
    // ASCII fast path: every byte is one code point of weight 1/4.
    if text.is_ascii() {
        return text.len().div_ceil(4) as i64;
    }
    let q: u64 = text.chars().map(quarters).sum();
    q.div_ceil(4) as i64
}

/// The longest prefix of `text` (cut at a char boundary) whose estimate is at most `max_tokens`.
pub fn truncate_to_tokens(text: &str, max_tokens: i64) -> &str {
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

#[cfg(test)]
mod tests {
    use super::*;

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
