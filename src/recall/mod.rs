//! Recall over the lossless history: the data side of every summary's "Expand for details
//! about: …". `grep` finds messages and summaries, `describe` tells what one item is and where
//! it sits in the DAG, `expand` walks a summary down to what it stands for.

pub mod coverage;
pub mod describe;
pub mod expand;
pub mod grep;
pub mod query;

#[cfg(test)]
mod tests;

pub use describe::{describe, Description, ItemId};
pub use expand::{expand, ExpandOptions, Expansion};
pub use grep::{grep, GrepOptions, GrepResult};
