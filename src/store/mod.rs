//! Rows in, rows out: conversations, messages and their parts, summaries, their versions and
//! fidelity scores, the redaction log, the live-context totals, the prompt-cache report, the recalled blocks; and the
//! check of the invariants over them (`verify`). The ground floor above `db` and `sql` (the
//! connection and its dialect): besides them it imports only the error type, time formatting,
//! token estimates, the summary kinds, `input`'s checks of the options it reads, the name of
//! PostgreSQL's search column (`pg::search`), and `fold`'s windows of long texts (messages read
//! for display, `folded`).

pub(crate) mod context;
pub(crate) mod conversations;
pub(crate) mod copies;
pub(crate) mod dag;
pub(crate) mod fidelity_scores;
pub(crate) mod folded;
pub(crate) mod lifecycle;
pub(crate) mod messages;
pub(crate) mod normalize;
pub(crate) mod pending;
pub(crate) mod prompt_cache;
pub(crate) mod recalls;
pub(crate) mod redactions;
pub(crate) mod summaries;
pub(crate) mod totals;
pub(crate) mod verify;
#[cfg(test)]
mod verify_tests;
pub(crate) mod versions;
