//! Recall over the lossless history: the data side of every summary's "Expand for details
//! about: …". `grep` finds messages and summaries, `describe` tells what one item is and where
//! it sits in the DAG, `expand` walks a summary down to what it stands for; `auto` finds, for
//! each turn's message, what the context does not show and adds it to the assembly.

pub(crate) mod auto;
pub(crate) mod coverage;
pub(crate) mod describe;
pub(crate) mod expand;
pub(crate) mod grep;
pub(crate) mod query;

#[cfg(test)]
mod tests;

pub(crate) use describe::{describe, ItemId};
pub(crate) use expand::expand;
pub(crate) use grep::grep;
