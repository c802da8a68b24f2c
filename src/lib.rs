//! lcm-native: Lossless Context Management for AI agents, as a Node.js addon.
//!
//! The core modules below know nothing of Node. `binding` is the only module that uses napi:
//! it converts JS values in, runs the core off Node's main thread, and turns core errors into
//! JS errors with a stable `code`.
//!
//! The crate is not published: its API is the JavaScript one. Every module is private and
//! items are `pub(crate)` unless `probe` re-exports them for the profiling probes
//! (bench/probes/, run as Cargo examples).

#![warn(unreachable_pub)]
#![warn(clippy::undocumented_unsafe_blocks)]

mod api;
mod assemble;
mod compaction;
mod config;
mod copy;
mod db;
mod diff;
mod engine;
mod error;
mod fidelity;
mod fold;
mod history;
mod input;
mod json_text;
mod live;
mod offline;
mod pg;
mod prompts;
mod recall;
mod redact;
mod rewrite;
mod semantic;
mod shown_location;
mod source;
mod spool;
mod sql;
mod store;
mod summarizer;
mod time;
mod tokens;
mod value_kinds;

pub mod binding;
#[cfg(test)]
mod test_support;
#[cfg(test)]
mod typegen;

/// What the profiling probes (bench/probes/) use of the core, and nothing else.
pub mod probe {
    pub use crate::api::assembly::AssembleOptions;
    pub use crate::api::compaction::{PassOptions, SweepOptions};
    pub use crate::assemble::assemble;
    pub use crate::config::Config;
    pub use crate::db::open_configured;
    pub use crate::engine::Engine;
    pub use crate::store::conversations::Target;
    pub use crate::store::normalize::normalize;
    pub use crate::summarizer::{SummarizeRequest, Summarizer, SummaryFuture};
}

/// mimalloc instead of glibc's malloc: assembly and ingest allocate many small strings and
/// JSON values on tokio's worker threads, where glibc's per-thread arenas spent a
/// quarter of an assembly in malloc/free (measured in bench/RESULTS.md, issue #17).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The README's layout section names every module, so a new one cannot go unlisted.
#[cfg(test)]
mod layout_tests {
    #[test]
    fn the_readme_layout_lists_every_module() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
        let layout = &readme[readme.find("## Layout").expect("a Layout section")..];
        let mut missing = Vec::new();
        for entry in std::fs::read_dir(root.join("src")).unwrap() {
            let name = entry.unwrap().file_name().to_string_lossy().into_owned();
            let is_dir = root.join("src").join(&name).is_dir();
            let listed = if is_dir {
                format!("src/{name}/")
            } else {
                format!("src/{name}")
            };
            if !layout.contains(&listed) {
                missing.push(listed);
            }
        }
        assert!(missing.is_empty(), "README's layout does not list {missing:?}");
    }
}
