//! Rows in, rows out: conversations, messages and their parts, summaries, their versions and
//! fidelity scores, the redaction log. The ground floor above `db`: it imports nothing else of
//! the crate but the error type, time formatting and the summary kinds.

pub mod conversations;
pub mod dag;
pub mod fidelity_scores;
pub mod lifecycle;
pub mod messages;
pub mod normalize;
pub mod pending;
pub mod redactions;
pub mod summaries;
pub mod versions;
