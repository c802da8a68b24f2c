//! Versions of summary texts as an operation: rolling a summary back to an earlier text, which
//! rescores it against its source. The rows themselves are `store::versions`.

#[cfg(test)]
mod tests;

use crate::error::{LcmError, Result};
pub(crate) use crate::store::versions::*;

/// Makes version `version` of `summary_id` its text again, as a new version (reason
/// `rollback`, with the restored version's model and template), in the caller's write
/// transaction (`Backend::write`): content, token count, fidelity score and full-text rows
/// follow. Returns the new version.
pub(crate) fn rollback(
    tx: crate::sql::Db,
    flags: crate::db::SchemaFlags,
    zone: crate::time::DisplayZone,
    keep: i64,
    summary_id: &str,
    version: i64,
) -> Result<SummaryVersion> {
    if !flags.has_versions {
        return Err(LcmError::invalid_input(
            "this file has no version table (open it writable once to migrate it)",
        ));
    }
    let old = get(tx, summary_id, version)?;
    // The current text already: a new identical version would only push an old one out.
    if old.current {
        return Ok(old);
    }
    let score = crate::fidelity::survey::score_text(tx, summary_id, &old.content, zone)?;
    let change = Change {
        reason: Reason::Rollback,
        template: old.template.as_ref(),
        keep,
    };
    let replacement = crate::store::summaries::Replacement {
        content: &old.content,
        token_count: old.token_count,
        model: &old.model,
        fidelity: (&score, false),
        change: Some(change),
    };
    let new = crate::store::summaries::replace_content(tx, flags, summary_id, &replacement)?;
    get(tx, summary_id, new.expect("the version table exists"))
}
