//! Compaction tests with scripted summarizers, on synthetic conversations and the real
//! transcripts. Every test ends by checking DESIGN.md's invariants.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use serde_json::{json, Value};

use super::*;
use crate::api::PassResult;
use crate::engine::Engine;
use crate::store::conversations::Target;
use crate::summarizer::SummaryKind;
use crate::summarizer::{FALLBACK_MODEL, OFFLINE_MODEL};
pub(crate) use crate::test_support::*;

fn deps(engine: &Engine) -> Deps {
    // Tests call the compaction functions directly where the engine's lock is not the subject.
    engine.test_deps()
}

async fn leaf(engine: &Engine, cid: i64, s: Arc<dyn Summarizer>) -> Result<Option<PassResult>> {
    engine.pass(cid, SummaryKind::Leaf, s, PassOptions::default()).await
}

mod concurrency;
mod passes;
mod properties;
mod sweeps;
