//! lcm-native: Lossless Context Management for AI agents, as a Node.js addon.
//!
//! The core modules below know nothing of Node. `binding` is the only module that uses napi:
//! it converts JS values in, runs the core off Node's main thread, and turns core errors into
//! JS errors with a stable `code`.

pub mod assemble;
pub mod compaction;
pub mod config;
pub mod db;
pub mod diff;
pub mod engine;
pub mod error;
pub mod fidelity;
pub mod history;
pub mod input;
pub mod json_text;
pub mod offline;
pub mod prompts;
pub mod recall;
pub mod redact;
pub mod rewrite;
pub mod source;
pub mod store;
pub mod summarizer;
pub mod time;
pub mod tokens;

pub mod binding;
#[cfg(test)]
mod typegen;

/// mimalloc instead of glibc's malloc: assembly and ingest allocate many small strings and
/// JSON values on tokio's worker threads, where glibc's per-thread arenas spent a
/// quarter of an assembly in malloc/free (measured in bench/RESULTS.md, issue #17).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
