//! The JavaScript API's vocabulary: what each call takes (its options and requests) and what
//! it answers, declared together so that a reader finds the boundary in one folder, one file
//! per area, and `typegen` writes `types.d.ts` from it (with the rows below). Nothing here
//! does work but reading a value in and converting a request.
//!
//! Options the core uses as they come (a pass's, grep's) are read by the core modules from
//! here. A request that means something else to the store is converted here, on the way in,
//! so that the store keeps to its rows and never speaks the API's words: `IngestOptions` →
//! `store::messages::IngestMode` (with lossless-claw's `turn_advancements` row),
//! `ResetRequest` → `store::lifecycle::ResetReason`, `SummaryFilter` →
//! `store::summaries::Listing`. `rewrite` and `redact` read their requests into their own
//! options (`RewriteRequest` → `RewriteOptions`, `RedactRequest` → `RedactOptions`).
//!
//! What the API answers but is not declared here, because it is what its module stores or
//! makes rather than a word of the boundary: the store's rows and the reports the store
//! writes (`StoredMessage`, `SummaryRecord`, `DagNode`, `ConversationInfo`, `IngestOutcome`,
//! `VerifyReport`, `PromptCacheReport`, `SessionReset`, …), a migration's reports (`db`),
//! an assembly (`assemble::Assembled`: the messages as the renderer writes them), the live
//! context's entries (`live`), the prompt templates' vocabulary (`prompts`) and the
//! summarizer callback's request (`summarizer`).
//!
//! Below the core modules that read it; above nothing but `input` (how a value is checked as
//! it is read), `config`, `time`, `summarizer`, `live` and the store.

pub(crate) mod assembly;
pub(crate) mod compaction;
pub(crate) mod database;
pub(crate) mod ingest;
pub(crate) mod recall;
pub(crate) mod summaries;

pub(crate) use assembly::*;
pub(crate) use compaction::*;
pub(crate) use database::*;
pub(crate) use ingest::*;
pub(crate) use recall::*;
pub(crate) use summaries::*;
