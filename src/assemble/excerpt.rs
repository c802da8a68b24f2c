//! A message larger than its share of the budget, assembled as a bounded excerpt: the head
//! and the end of its text with a marker between them that names the message and says how to
//! read the rest. The message itself stays stored whole; only what this turn's model sees is
//! shortened, so one pasted log or huge tool result cannot push a turn over the window.

use super::content::{Block, BlockKind, Content};
use super::render::Msg;
use crate::tokens;

/// Share of the budget one message may take before it is excerpted.
pub(crate) const MESSAGE_BUDGET_SHARE: f64 = 0.25;

/// The smallest excerpt: the marker and a few lines on each side of it.
const MIN_EXCERPT_TOKENS: i64 = 256;

/// Tokens of an excerpt of a message, for a budget: what assembly charges such a message
/// before it is rendered (a message at or under it is shown whole).
pub(crate) fn max_message_tokens(budget: i64) -> i64 {
    ((budget.max(0) as f64 * MESSAGE_BUDGET_SHARE) as i64).max(MIN_EXCERPT_TOKENS)
}

/// The marker put where the middle of a message was left out.
pub(crate) fn marker(message_id: i64, total_tokens: i64) -> String {
    format!(
        "\n\n[lcm-native: message {message_id} has {total_tokens} tokens, more than fit this context; only its \
         beginning and its end are shown. It is stored whole: lcm_describe with id \"{message_id}\" reads it page \
         by page (page: 1, 2, …).]\n\n"
    )
}

/// The text cut to its first and last `keep` tokens together, with `marker` between; the text
/// itself when it fits.
pub(crate) fn shorten(text: &str, keep: i64, marker: &str) -> String {
    if tokens::estimate(text) <= keep {
        return text.to_string();
    }
    let head = tokens::truncate_to_tokens(text, keep - keep / 2);
    let tail = tokens::truncate_start_to_tokens(&text[head.len()..], keep / 2);
    format!("{head}{marker}{tail}")
}

/// The text of a text block, if it is one with a string `text`.
fn block_text(b: &Block) -> Option<String> {
    if !matches!(b.kind(), BlockKind::Text { .. }) {
        return None;
    }
    let v: serde_json::Value = serde_json::from_str(b.json().get()).ok()?;
    v.get("text")?.as_str().map(str::to_string)
}

/// `msg` (message `message_id`) shortened to about `max_tokens`, or None when it fits. Text
/// is shortened in proportion to its size; a tool call is kept whole (its result pairs with
/// it); reasoning and any other block too large to keep are replaced by a one-line note.
pub(crate) fn excerpt(msg: &Msg, message_id: i64, max_tokens: i64) -> Option<Msg> {
    let total = msg.tokens();
    if total <= max_tokens {
        return None;
    }
    let marker = marker(message_id, total);
    let room = (max_tokens - tokens::estimate(&marker)).max(MIN_EXCERPT_TOKENS / 2);
    let content = match &msg.content {
        Content::Text(text) => Content::Text(shorten(text, room, &marker)),
        Content::Blocks(blocks) => {
            let texts: Vec<Option<String>> = blocks.iter().map(block_text).collect();
            let kept_whole: i64 = blocks
                .iter()
                .filter(|b| matches!(b.kind(), BlockKind::Call { .. }))
                .map(|b| tokens::estimate(b.json().get()))
                .sum();
            let text_total: i64 = texts.iter().flatten().map(|t| tokens::estimate(t)).sum::<i64>().max(1);
            let text_room = (room - kept_whole).max(MIN_EXCERPT_TOKENS / 2);
            let mut marked = false;
            let mut out = Vec::with_capacity(blocks.len() + 1);
            for (b, text) in blocks.iter().zip(texts) {
                match (b.kind(), text) {
                    (BlockKind::Call { .. }, _) => out.push(b.clone()),
                    (_, Some(text)) => {
                        let share = (text_room as f64 * tokens::estimate(&text) as f64 / text_total as f64) as i64;
                        let short = shorten(&text, share.max(16), &marker);
                        marked |= short.len() != text.len();
                        out.push(Block::text(&short));
                    }
                    (_, None) if tokens::estimate(b.json().get()) <= text_room / 8 => out.push(b.clone()),
                    (_, None) => {
                        let kind = if matches!(b.kind(), BlockKind::Reasoning) {
                            "reasoning"
                        } else {
                            "content"
                        };
                        out.push(Block::text(&format!(
                            "[lcm-native: a {kind} block of {} tokens of message {message_id} is not shown here]",
                            tokens::estimate(b.json().get())
                        )));
                    }
                }
            }
            if !marked {
                // Only whole blocks were left out (no text carries the marker): say where
                // the rest is.
                out.push(Block::text(marker.trim()));
            }
            Content::Blocks(out)
        }
    };
    Some(Msg { content, ..msg.clone() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::normalize::Role;

    fn text_msg(text: &str) -> Msg {
        Msg::user(text.to_string(), Some(0))
    }

    fn blocks_msg(role: Role, blocks: Vec<serde_json::Value>) -> Msg {
        Msg {
            role,
            content: Content::Blocks(blocks.iter().map(Block::from_value).collect()),
            tool_call_id: Some("call_1".into()),
            tool_name: None,
            is_error: None,
            echo: None,
            item: Some(0),
            recall: None,
        }
    }

    fn text_of(m: &Msg) -> String {
        match &m.content {
            Content::Text(t) => t.clone(),
            Content::Blocks(b) => b
                .iter()
                .map(|b| b.json().get().to_string())
                .collect::<Vec<_>>()
                .join("\n"),
        }
    }

    #[test]
    fn a_message_that_fits_is_not_touched() {
        assert!(excerpt(&text_msg("short"), 7, 256).is_none());
    }

    #[test]
    fn a_long_text_keeps_its_head_and_end_within_the_bound() {
        let body: String = (0..20_000).map(|i| format!("line {i}\n")).collect();
        let m = excerpt(&text_msg(&body), 42, 1_000).expect("shortened");
        let t = text_of(&m);
        assert!(m.tokens() <= 1_000, "{} tokens", m.tokens());
        assert!(t.starts_with("line 0\nline 1\n"));
        assert!(t.ends_with("line 19999\n"));
        assert!(
            t.contains("message 42 has") && t.contains("lcm_describe"),
            "{}",
            &t[..400]
        );
        assert_eq!(m.role, Role::User);
    }

    #[test]
    fn a_tool_result_keeps_its_call_id_and_a_call_stays_whole() {
        let big = "x".repeat(40_000);
        let m = blocks_msg(Role::ToolResult, vec![serde_json::json!({"type": "text", "text": big})]);
        let short = excerpt(&m, 9, 500).expect("shortened");
        assert_eq!(short.tool_call_id.as_deref(), Some("call_1"));
        assert!(short.tokens() <= 600, "{}", short.tokens());
        let call =
            serde_json::json!({"type": "toolCall", "id": "call_2", "name": "read", "arguments": {"path": "a.ts"}});
        let m = blocks_msg(
            Role::Assistant,
            vec![serde_json::json!({"type": "text", "text": big}), call.clone()],
        );
        let short = excerpt(&m, 10, 500).expect("shortened");
        let Content::Blocks(blocks) = &short.content else {
            panic!("blocks")
        };
        assert!(blocks
            .iter()
            .any(|b| matches!(b.kind(), BlockKind::Call { id, .. } if id == "call_2")));
        assert!(text_of(&short).contains("message 10 has"));
    }

    #[test]
    fn an_oversized_non_text_block_becomes_a_note() {
        let m = blocks_msg(
            Role::User,
            vec![serde_json::json!({"type": "image", "data": "A".repeat(60_000), "mimeType": "image/png"})],
        );
        let short = excerpt(&m, 3, 400).expect("shortened");
        let t = text_of(&short);
        assert!(short.tokens() <= 400, "{}", short.tokens());
        assert!(t.contains("content block of") && t.contains("lcm_describe"), "{t}");
    }
}
