//! Assembly as the engine runs it, with what it keeps between calls: the messages the last
//! assemblies rendered (`assemble::cache`), reused while the backend's stamp of message
//! rewrites stays (`Backend::read_stamped`: SQLite's writer, any PostgreSQL snapshot), and
//! the conversations so large that they assemble on a SQLite reader, without the cache, so
//! as not to hold the writer. Also what compaction measures against its budget (`fit`).

use crate::api::{AssembleOptions, ContextFit};
use crate::assemble::Assembled;
use std::collections::HashSet;
use std::sync::{Mutex, MutexGuard};

use super::recalls::Recalls;
use crate::assemble::{assemble_reusing, cache::RenderCache};
use crate::compaction::Deps;
use crate::error::Result;

/// Live items above which a conversation assembles on a reader rather than on the writer.
pub(super) const LARGE_CONTEXT_ITEMS: i64 = 10_000;

#[derive(Default)]
pub(super) struct Assemblies {
    /// Messages the last assemblies on the writer rendered.
    pub(super) rendered: Mutex<RenderCache>,
    /// Conversations whose last assembly saw more than `LARGE_CONTEXT_ITEMS` live items: they
    /// assemble on a reader, so that a long assembly does not hold the writer (an ingest to
    /// another session would wait for it).
    pub(super) large: Mutex<HashSet<i64>>,
}

impl Assemblies {
    /// The context for the next turn within `options.token_budget` (not counted in the
    /// prompt-cache report: the engine's `assemble` adds that).
    pub(super) fn assemble(
        &self,
        deps: &Deps,
        conversation_id: i64,
        options: &AssembleOptions,
        recalls: Option<&Recalls>,
    ) -> Result<Assembled> {
        let large = || self.large.lock().unwrap_or_else(|e| e.into_inner());
        let on_reader = large().contains(&conversation_id);
        let out = deps.backend.read_stamped(on_reader, |db, stamp| {
            // The cache is held only to take this conversation's entry out and to put it
            // back: assemblies of other conversations (on PostgreSQL, in parallel) use it too.
            let rendered = match stamp {
                Some(stamp) => self.cache().check_out(stamp, conversation_id),
                None => Default::default(),
            };
            let (mut out, rendered) = assemble_reusing(db, &deps.config, conversation_id, options, rendered)?;
            if let Some(stamp) = stamp {
                self.cache().check_in(stamp, conversation_id, rendered);
            }
            // This turn's block, in the same snapshot.
            if let Some(recalls) = recalls {
                recalls.add_to(db, deps, conversation_id, options, &mut out)?;
            }
            Ok(out)
        })?;
        if out.stats.total_context_items > LARGE_CONTEXT_ITEMS {
            large().insert(conversation_id);
        } else {
            large().remove(&conversation_id);
        }
        Ok(out)
    }

    /// The render cache; after a panic while it was held it starts over rather than trust
    /// what was left.
    fn cache(&self) -> MutexGuard<'_, RenderCache> {
        self.rendered.lock().unwrap_or_else(|e| {
            self.rendered.clear_poison();
            let mut cache = e.into_inner();
            *cache = Default::default();
            cache
        })
    }

    /// What `assemble` would send for `token_budget` now, as a `ContextFit` whose before and
    /// after are both now.
    pub(super) fn fit(&self, deps: &Deps, conversation_id: i64, token_budget: i64) -> Result<ContextFit> {
        let options = AssembleOptions {
            token_budget,
            fresh_tail_count: None,
            presentation: None,
            recall_query: None,
            auto_recall: None,
        };
        let assembled = self.assemble(deps, conversation_id, &options, None)?;
        let s = &assembled.stats;
        Ok(ContextFit {
            tokens_before: assembled.estimated_tokens,
            tokens_after: assembled.estimated_tokens,
            fits: assembled.estimated_tokens <= token_budget && !s.fresh_tail_over_budget,
            fresh_tail_items: s.fresh_tail_items,
            fresh_tail_tokens: s.fresh_tail_tokens,
        })
    }

    /// Lets go of what assemblies rendered (it can be megabytes): at close.
    pub(super) fn forget(&self) {
        *self.rendered.lock().unwrap_or_else(|e| e.into_inner()) = Default::default();
    }
}
