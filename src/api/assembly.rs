//! What `assemble` takes (what it answers is `assemble::Assembled`, the renderer's own).

use serde::{Deserialize, Serialize};

/// Options of `assemble`.
#[derive(Clone, Debug, serde::Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AssembleOptions {
    /// The model's context budget for these messages.
    #[serde(deserialize_with = "crate::input::positive")]
    pub token_budget: i64,
    /// Overrides the configured fresh tail for this call.
    #[serde(default, skip_serializing, deserialize_with = "crate::input::opt_non_negative")]
    pub fresh_tail_count: Option<i64>,
    /// Overrides the configured presentation of summaries.
    #[serde(default, skip_serializing)]
    pub presentation: Option<Presentation>,
}

/// How live summaries are presented to the model by `assemble`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "lowercase")]
pub enum Presentation {
    /// `<summary id=… range=… depth=… descendants=…>` … `</summary>` per summary.
    Xml,
    /// One `## Earlier in this conversation` section (rolling-summary seed).
    Markdown,
}
