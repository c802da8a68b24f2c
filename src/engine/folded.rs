//! The engine's reads of messages for display (`messages` and `describe` with `maxChars`,
//! `messageText`): `store::folded` within one read snapshot.

use super::Engine;
use crate::api::{DescribeOptions, Description, MessagePage, MessageTextPage, TextRequest};
use crate::error::{LcmError, Result};
use crate::recall::ItemId;
use crate::store::folded::{self, Reader};
use crate::store::messages::{self, StoredMessage};

impl Engine {
    /// A page of a conversation's messages; with `maxChars`, each longer text cut as it is
    /// read (`store::folded`).
    pub fn messages_page(&self, conversation_id: i64, page: &MessagePage) -> Result<Vec<StoredMessage>> {
        let Some(max) = page.max_chars else {
            return self.messages(conversation_id, page.after_seq, page.limit);
        };
        self.deps.backend.read(|db| {
            let _snapshot = db.snapshot()?;
            Reader::new(db, max).list(conversation_id, page.after_seq, page.limit)
        })
    }

    /// `describe`; with `maxChars`, a message's longer texts cut as they are read. What is
    /// known of the message besides its content is `recall::describe`'s, read the same way
    /// (which reads the message whole, so it is not called for one).
    pub fn describe_with(&self, id: &ItemId, options: DescribeOptions) -> Result<Description> {
        let (ItemId::Message(message_id), Some(max)) = (id, options.max_chars) else {
            return self.describe(id);
        };
        let message_id = *message_id;
        self.deps.backend.read(|db| {
            let _snapshot = db.snapshot()?;
            let (_, conversation_id) = messages::conversations_of(db, &[message_id])?
                .pop()
                .ok_or_else(|| LcmError::not_found("message", message_id))?;
            let (message, parts) = Reader::new(db, max)
                .by_ids(&[message_id])?
                .pop()
                .ok_or_else(|| LcmError::not_found("message", message_id))?;
            let description = crate::recall::describe::message_description(db, message, conversation_id, parts)?;
            Ok(Description::Message(Box::new(description)))
        })
    }

    /// A page of one text of a message (`messageText`).
    pub fn message_text(&self, message_id: i64, request: &TextRequest) -> Result<MessageTextPage> {
        let (block, path) = request.at();
        let offset = request.offset.max(0) as u64;
        let page = self.deps.backend.read(|db| {
            let _snapshot = db.snapshot()?;
            let within = request.conversation_id;
            folded::text_page(db, message_id, within, block, &path, offset, request.limit)
        })?;
        // Counted as the page was cut (a damaged text's U+FFFD may stand for several bytes).
        let end = offset.saturating_add(request.limit as u64).min(page.chars);
        Ok(MessageTextPage {
            message_id,
            conversation_id: page.conversation_id,
            block,
            path,
            offset,
            text: page.text,
            chars: page.chars,
            next_offset: (end < page.chars).then_some(end),
        })
    }
}
