//! Assembly as the engine runs it, with what it keeps between calls: on SQLite, on the writer
//! with the messages the last assemblies rendered (`assemble::cache`), or on a reader for a
//! very large context; on PostgreSQL in a read snapshot, rendering what it keeps (no cache of
//! rendered messages there yet). Also what compaction measures against its budget (`fit`).

use std::collections::HashSet;
use std::sync::Mutex;

use crate::assemble::{assemble_reusing, cache::RenderCache, cache::Reuse, AssembleOptions, Assembled};
use crate::compaction::{ContextFit, Deps};
use crate::error::Result;
use crate::sql::Backend;
use crate::store::conversations;

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
    pub(super) fn assemble(&self, deps: &Deps, conversation_id: i64, options: &AssembleOptions) -> Result<Assembled> {
        let config = &deps.config;
        let pool = match &*deps.backend {
            Backend::Sqlite(pool) => pool,
            Backend::Postgres(pg) => {
                return pg.read(|c| {
                    conversations::get(c, conversation_id)?;
                    let (out, _) =
                        crate::assemble::assemble_in(c.into(), config, conversation_id, options, Default::default())?;
                    Ok(out)
                })
            }
        };
        let large = || self.large.lock().unwrap_or_else(|e| e.into_inner());
        let out = if large().contains(&conversation_id) {
            pool.read(|conn| assemble_reusing(conn, config, conversation_id, options, None))?
        } else {
            pool.read_current_counted(|conn, rewrites| match rewrites {
                // On the writer: only one such read runs at a time (it holds the writer's lock).
                Some(rewrites) => {
                    // After a panic mid-assembly, start over rather than trust what it left.
                    let mut cache = self.rendered.lock().unwrap_or_else(|e| {
                        self.rendered.clear_poison();
                        let mut cache = e.into_inner();
                        *cache = Default::default();
                        cache
                    });
                    let reuse = Reuse {
                        cache: &mut cache,
                        rewrites,
                    };
                    assemble_reusing(conn, config, conversation_id, options, Some(reuse))
                }
                None => assemble_reusing(conn, config, conversation_id, options, None),
            })?
        };
        if out.stats.total_context_items > LARGE_CONTEXT_ITEMS {
            large().insert(conversation_id);
        } else {
            large().remove(&conversation_id);
        }
        Ok(out)
    }

    /// What `assemble` would send for `token_budget` now, as a `ContextFit` whose before and
    /// after are both now.
    pub(super) fn fit(&self, deps: &Deps, conversation_id: i64, token_budget: i64) -> Result<ContextFit> {
        let options = AssembleOptions {
            token_budget,
            fresh_tail_count: None,
            presentation: None,
        };
        let assembled = self.assemble(deps, conversation_id, &options)?;
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
