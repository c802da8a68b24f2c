//! Rows in, rows out: conversations, messages and their parts.

pub mod conversations;
pub mod dag;
pub mod lifecycle;
pub mod messages;
pub mod normalize;
pub mod pending;
pub mod summaries;
