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
pub mod live;
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
