//! Scores on demand and their distribution: scoring the summaries written before scores
//! existed (or by lossless-claw), and the per-depth figures `stats` shows.

use super::{score, source_identifiers, Fidelity, EXTRACTOR_VERSION};
use crate::api::{DepthFidelity, ScoreReport};
use crate::error::Result;
use crate::source::summary_entries;
use crate::sql::Db;
use crate::store::fidelity_scores::{self as store, StoredFidelity};
use crate::time::DisplayZone;

/// Source texts are clipped per message only in the prompt; the structure is whole, so the
/// chunk size does not change a score.
const CHUNK_TOKENS: i64 = 20_000;

/// The stored score of a summary, else one computed now (`stored: false`).
pub(crate) fn of_summary<'a>(db: impl Into<Db<'a>>, summary_id: &str, zone: DisplayZone) -> Result<StoredFidelity> {
    let conn = db.into();
    if let Some(f) = store::get(conn, summary_id)? {
        return Ok(f);
    }
    Ok(StoredFidelity {
        fidelity: compute(conn, summary_id, zone)?,
        needs_repair: false,
        extractor_version: EXTRACTOR_VERSION,
        computed_at: String::new(),
        stored: false,
    })
}

/// Scores a stored summary against its source, as its pass saw it.
fn compute(conn: Db, summary_id: &str, zone: DisplayZone) -> Result<Fidelity> {
    let content = crate::store::summaries::content(conn, summary_id)?;
    score_text(conn, summary_id, &content, zone)
}

/// Scores `content` as a text of summary `summary_id` (a version it is about to get back).
pub(crate) fn score_text<'a>(
    conn: impl Into<Db<'a>>,
    summary_id: &str,
    content: &str,
    zone: DisplayZone,
) -> Result<Fidelity> {
    let entries = summary_entries(conn, summary_id, zone, CHUNK_TOKENS)?;
    Ok(score(&source_identifiers(&entries), content))
}

/// Scores the summaries of a conversation that have no score from this extractor (every
/// summary with `all`), in the caller's write transaction (`Backend::write`), and returns the
/// distribution.
pub(crate) fn score_conversation(db: Db, conversation_id: i64, all: bool, zone: DisplayZone) -> Result<ScoreReport> {
    crate::store::conversations::get(db, conversation_id)?;
    let ids = store::unscored(db, conversation_id, all)?;
    for id in &ids {
        let keep_mark = store::needs_repair(db, id)?;
        store::put(db, id, &compute(db, id, zone)?, keep_mark)?;
    }
    Ok(ScoreReport {
        conversation_id,
        scored: ids.len(),
        by_depth: distribution(db, conversation_id)?,
    })
}

/// Per-depth distribution of the stored scores.
pub(crate) fn distribution<'a>(db: impl Into<Db<'a>>, conversation_id: i64) -> Result<Vec<DepthFidelity>> {
    let db = db.into();
    let scores = store::for_conversation(db, conversation_id)?;
    let rows = crate::store::summaries::depths(db, conversation_id)?;
    let mut out: Vec<DepthFidelity> = Vec::new();
    let mut values: Vec<Vec<f64>> = Vec::new();
    for (id, depth) in rows {
        if out.last().is_none_or(|d| d.depth != depth) {
            out.push(DepthFidelity {
                depth,
                ..Default::default()
            });
            values.push(Vec::new());
        }
        let d = out.last_mut().expect("pushed");
        d.summaries += 1;
        if let Some(f) = scores.get(&id) {
            d.scored += 1;
            d.low_fidelity += f.needs_repair as usize;
            match f.fidelity.score {
                Some(s) => values.last_mut().expect("pushed").push(s),
                None => d.without_identifiers += 1,
            }
        }
    }
    for (d, mut v) in out.iter_mut().zip(values) {
        if v.is_empty() {
            continue;
        }
        v.sort_by(f64::total_cmp);
        let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
        d.mean = Some(super::round4(v.iter().sum::<f64>() / v.len() as f64));
        d.min = Some(v[0]);
        d.p10 = Some(at(0.1));
        d.median = Some(at(0.5));
    }
    Ok(out)
}
