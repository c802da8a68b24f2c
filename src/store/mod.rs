//! Rows in, rows out: conversations, messages and their parts, summaries, their versions and
//! fidelity scores, the redaction log, the live-context totals, the prompt-cache report; and the check of the invariants over them (`verify`). The ground floor above `db`: it imports nothing else of
//! the crate but the error type, time formatting and the summary kinds.

pub(crate) mod context;
pub(crate) mod conversations;
pub(crate) mod dag;
pub(crate) mod fidelity_scores;
pub(crate) mod lifecycle;
pub(crate) mod messages;
pub(crate) mod normalize;
pub(crate) mod pending;
pub(crate) mod prompt_cache;
pub(crate) mod redactions;
pub(crate) mod summaries;
pub(crate) mod totals;
pub(crate) mod verify;
#[cfg(test)]
mod verify_tests;
pub(crate) mod versions;
