//! Recall at assembly: what the turn's message needs from the history that the context does
//! not show verbatim, found without the model asking.
//!
//! The message's terms (`terms`) are searched in the full-text index of the messages outside
//! the kept context (those under summaries and those evicted), ranked by the index's BM25 with
//! a little weight for recency; a question that names the kind of answer it wants ("who …",
//! "which port …") also reads the messages outside the context that hold a value of that
//! kind (`value_kinds`, indexed at ingest; the newest of them), which reaches a fact whose
//! sentence shares no word with the question. Each message
//! gives one excerpt (`excerpt`: its best line or sentence, never the whole message). When two
//! excerpts speak of the same thing with other values, the newer comes first and the older
//! says which one superseded it. What is left after the budget is one `<recalled>` block
//! (`block`), or nothing at all when nothing scores.

pub(crate) mod block;
pub(crate) mod excerpt;
pub(crate) mod meaning;
pub(crate) mod terms;

use std::sync::LazyLock;

use rusqlite::params;

use crate::api::{RecallHit, RecallScope, RecallStats};
use crate::db::schema::MESSAGE_KINDS_TABLE;
use crate::error::Result;
use crate::sql::Db;
use crate::time::{self, DisplayZone};
use crate::tokens;
use crate::value_kinds::{self, Want};
use excerpt::Excerpt;
use terms::Query;

/// Messages the full-text search hands over at most.
const MAX_CANDIDATES: i64 = 48;

/// Newest messages outside the context read for a value of the kind asked for when they are not
/// indexed (stored by lossless-claw, or before the index).
const TYPED_SCAN_MESSAGES: i64 = 200;

/// Messages indexed as holding a value of the kind asked for read at most (the newest): each
/// holds one, so fewer than unindexed ones are needed.
const TYPED_INDEXED_MESSAGES: i64 = 48;

/// Bytes of one message read for its excerpt (a larger one is read up to here).
const MAX_TEXT_BYTES: i64 = 256 * 1024;

/// Excerpts in one block at most.
pub(crate) const MAX_EXCERPTS: usize = 10;

/// What the index's relevance counts beside the excerpt's own score (the index ranks whole
/// messages: a long log that holds the words somewhere ranks low, a short note high).
const RELEVANCE_WEIGHT: f64 = 0.5;

/// Messages counted for a term's rarity at most: past it the term is common.
const DF_CAP: i64 = 500;

/// A term weighing this much is rare in the history (for 160 messages, in about 9 of them;
/// for 100,000, in about 220).
const RARE_WEIGHT: f64 = 1.0;

/// Excerpts found by the kind of value alone, at most.
const MAX_BY_KIND: usize = 5;

/// Excerpts scoring under this share of the best one are left out.
const RELATIVE_FLOOR: f64 = 0.4;

/// Characters of a message the scan for a kind of value reads: as many as its kinds were
/// indexed from.
const TYPED_SCAN_CHARS: i64 = value_kinds::SCANNED_CHARS as i64;

/// Weight of recency: the newest candidate's score is this much larger than the oldest's.
const RECENCY_WEIGHT: f64 = 0.25;

/// A statement found by meaning alone is an answer from this cosine with the question on
/// (then it scores as a value of the kind asked for does; more when nearer).
const MEANING_FLOOR: f32 = 0.30;

/// Statements found by meaning alone within this much of the nearest one are shown; farther
/// ones are noise beside it.
const MEANING_MARGIN: f32 = 0.04;

/// Excerpts found by meaning alone for each sentence of the message, at most.
const MAX_BY_MEANING: usize = 1;

/// Sentences of a message searched by meaning, at most.
const MAX_QUESTIONS: usize = 3;

/// What one recall searches.
pub(crate) struct Request<'a> {
    pub conversation_id: i64,
    /// The turn's message.
    pub message: &'a str,
    pub scope: RecallScope,
    /// Messages from this id on are in the kept context (or newer): not searched.
    pub before_message_id: i64,
    /// Kept messages the context shows only in part: searched all the same.
    pub shortened: &'a [i64],
    /// Most tokens the block may take.
    pub room: i64,
    /// Least score an excerpt needs.
    pub min_score: f64,
    /// Excerpts earlier blocks still in the context show (message id, byte start).
    pub shown: &'a [(i64, usize)],
    pub zone: DisplayZone,
    /// Terms already found common in this database.
    pub common: &'a CommonTerms,
    /// The conversations' statements compared by meaning, and what reads a long history for
    /// them (None: recall by words and kinds only).
    pub meanings: Option<(&'a meaning::Meanings, &'a std::sync::Arc<crate::sql::Backend>)>,
}

/// Terms found common in a database (held by `DF_CAP` messages or more): counting one reads
/// `DF_CAP` rows, the dearest count of all (on PostgreSQL each is a heap row), and a common
/// word stays common as the history grows, so it is counted once per engine. (A redaction or a
/// deleted conversation may make one rare again; it is then weighed as common, the weight it
/// had, until the engine is opened again.) Bounded: past `MAX_COMMON_TERMS` it starts over.
#[derive(Default)]
pub(crate) struct CommonTerms(std::sync::Mutex<std::collections::HashSet<String>>);

/// Common terms remembered at most.
const MAX_COMMON_TERMS: usize = 4096;

impl CommonTerms {
    fn contains(&self, phrase: &str) -> bool {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).contains(phrase)
    }

    fn insert(&self, phrase: String) {
        let mut set = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if set.len() >= MAX_COMMON_TERMS {
            set.clear();
        }
        set.insert(phrase);
    }
}

/// A block and what it holds.
pub(crate) struct Recalled {
    pub text: String,
    pub tokens: i64,
    /// The excerpts' places (message id, byte start), stored with the block.
    pub places: Vec<(i64, usize)>,
}

/// A message the search found.
struct Candidate {
    message_id: i64,
    conversation_id: i64,
    role: String,
    created_at: String,
    text: String,
    /// The index's relevance (higher is better; 0 for a value found by the typed scan).
    relevance: f64,
    /// Its statement nearest in meaning to the question, when the bridge of meaning found it.
    near: Option<meaning::Near>,
}

impl Scored {
    /// The excerpt's text.
    fn text(&self) -> &str {
        &self.c.text[self.e.range.clone()]
    }
}

impl Candidate {
    /// A row of id, conversation, role, time and text (the first five columns).
    fn read(row: &crate::sql::Row, relevance: f64) -> Result<Candidate> {
        Ok(Candidate {
            message_id: row.get(0)?,
            conversation_id: row.get(1)?,
            role: row.get(2)?,
            created_at: row.get(3)?,
            text: row.get(4)?,
            relevance,
            near: None,
        })
    }
}

/// A candidate's excerpt and its score.
struct Scored {
    c: Candidate,
    e: Excerpt,
    score: f64,
    superseded_by: Option<i64>,
    /// The cosine of the excerpt and the question it is near (the message's sentence), when
    /// the excerpt is the statement found by meaning and holds none of the words or kinds
    /// asked for.
    meaning: Option<(f32, usize)>,
}

/// The recall of `r`: the block (None when nothing scores) and what it found, for the stats.
pub(crate) fn recall(db: Db, r: &Request<'_>) -> Result<(Option<Recalled>, RecallStats)> {
    let query = terms::parse(r.message);
    let mut stats = RecallStats {
        terms: query.terms.iter().map(|t| t.text.clone()).collect(),
        wants: (!query.wants.is_empty()).then(|| query.wants.iter().map(|w| w.name()).collect::<Vec<_>>().join(", ")),
        ..RecallStats::default()
    };
    if query.is_empty() {
        stats.abstained = Some("the message has no words to search the history for".into());
        return Ok((None, stats));
    }
    let mut query = query;
    weigh_terms(db, &mut query, r.common)?;
    let mut candidates = if query.searched().next().is_none() {
        Vec::new()
    } else {
        search(db, r, &query)?
    };
    if !query.wants.is_empty() {
        let seen: std::collections::HashSet<i64> = candidates.iter().map(|c| c.message_id).collect();
        for c in typed_scan(db, r, &query.wants)? {
            if !seen.contains(&c.message_id) && query.holds_value(&c.text) {
                candidates.push(c);
            }
        }
    }
    if query.asks() {
        if let Some((meanings, backend)) = r.meanings {
            let outcome = by_meaning(db, backend, r, &query, meanings, &mut candidates)?;
            stats.meaning = Some(outcome.name().to_string());
        }
    }
    stats.candidates = candidates.len() as i64;
    let scored = replies_for_questions(db, r, &query, score(candidates, &query, r))?;
    let chosen = choose(scored, r, &query);
    if chosen.is_empty() {
        stats.abstained = Some(format!("nothing outside the context scored {} or more", r.min_score));
        return Ok((None, stats));
    }
    let covers =
        crate::recall::coverage::live_summaries_over(db, &chosen.iter().map(|s| s.c.message_id).collect::<Vec<_>>())?;
    let times: Vec<String> = chosen
        .iter()
        .map(|s| {
            time::parse_timestamp(&s.c.created_at)
                .map(|t| time::format_timestamp(&t, r.zone))
                .unwrap_or_default()
        })
        .collect();
    let shown: Vec<block::Shown<'_>> = chosen
        .iter()
        .zip(&times)
        .map(|(s, t)| block::Shown {
            message_id: s.c.message_id,
            role: crate::store::normalize::Role::from_db(&s.c.role).host(),
            time: t,
            summary_id: covers.get(&s.c.message_id).map(String::as_str),
            superseded_by: s.superseded_by,
            conversation_id: (s.c.conversation_id != r.conversation_id).then_some(s.c.conversation_id),
            text: s.text(),
        })
        .collect();
    let text = block::render(&stats.terms.join(" "), &shown);
    let tokens = tokens::estimate(&text);
    stats.hits = chosen
        .iter()
        .zip(&shown)
        .map(|(s, e)| RecallHit {
            message_id: s.c.message_id,
            conversation_id: s.c.conversation_id,
            role: e.role.to_string(),
            time: time::iso_or_raw(s.c.created_at.clone()),
            score: (s.score * 100.0).round() / 100.0,
            matched: s.e.matched.iter().map(|&i| query.terms[i].text.clone()).collect(),
            value_of_kind: s.e.typed,
            similarity: s.meaning.map(|(m, _)| (f64::from(m) * 100.0).round() / 100.0),
            superseded_by: s.superseded_by,
            tokens: tokens::estimate(e.text),
        })
        .collect();
    stats.tokens = tokens;
    let places = chosen.iter().map(|s| (s.c.message_id, s.e.range.start)).collect();
    Ok((Some(Recalled { text, tokens, places }), stats))
}

/// Adds the messages of this conversation outside the context whose statements are nearest
/// in meaning to each of the message's sentences that ask (`meaning`: "…? Also, …?" asks two
/// things), each with its nearest statement.
fn by_meaning(
    db: Db,
    backend: &std::sync::Arc<crate::sql::Backend>,
    r: &Request<'_>,
    query: &Query,
    meanings: &meaning::Meanings,
    candidates: &mut Vec<Candidate>,
) -> Result<meaning::Outcome> {
    let outside = |id: i64| id < r.before_message_id || r.shortened.contains(&id);
    let asked: Vec<&str> = query.asking.iter().map(String::as_str).take(MAX_QUESTIONS).collect();
    let (outcome, found) = meanings.nearest(db, backend, r.conversation_id, &asked, outside)?;
    let have: std::collections::HashSet<i64> = candidates.iter().map(|c| c.message_id).collect();
    let mut missing: Vec<i64> = found
        .iter()
        .flat_map(|f| f.ids.iter().copied())
        .filter(|id| !have.contains(id))
        .collect();
    missing.sort_unstable();
    missing.dedup();
    if !missing.is_empty() {
        candidates.extend(db.query_map(
            &format!(
                "SELECT message_id, conversation_id, role, created_at, substr(content, 1, CAST(?1 AS INTEGER))
                 FROM messages WHERE message_id {}",
                db.in_ids("?2")
            ),
            params![TYPED_SCAN_CHARS, serde_json::to_string(&missing)?],
            |row| Candidate::read(row, 0.0),
        )?);
    }
    for c in candidates.iter_mut() {
        for (question, f) in found.iter().enumerate() {
            if !f.ids.contains(&c.message_id) {
                continue;
            }
            if let Some(n) = f.best(&c.text) {
                if c.near.as_ref().is_none_or(|o| n.similarity > o.similarity) {
                    c.near = Some(meaning::Near { question, ..n });
                }
            }
        }
    }
    Ok(outcome)
}

/// Weighs each term by how many stored messages hold it (counted up to `DF_CAP`; a term known
/// to be common is not counted again).
fn weigh_terms(db: Db, query: &mut Query, common: &CommonTerms) -> Result<()> {
    if query.terms.is_empty() {
        return Ok(());
    }
    let n = crate::store::totals::all_message_count(db)?;
    for t in &mut query.terms {
        let phrase = t.parts.join(" ");
        let df: i64 = match db {
            _ if common.contains(&phrase) => DF_CAP,
            Db::Sqlite(_) => db.query_one(
                "SELECT count(*) FROM (SELECT 1 FROM messages_fts WHERE messages_fts MATCH ?1 LIMIT ?2)",
                params![format!("\"{phrase}\""), DF_CAP],
                |r| r.get(0),
            )?,
            Db::Pg(_) => db.query_one(
                &format!(
                    "SELECT count(*) FROM (SELECT 1 FROM messages m WHERE m.{} @@ lcm_search_query(CAST(?1 AS TEXT)) LIMIT ?2) x",
                    crate::pg::search::SEARCH_COLUMN
                ),
                params![phrase, DF_CAP],
                |r| r.get(0),
            )?,
        };
        if df >= DF_CAP {
            common.insert(phrase);
        }
        t.weight = terms::weigh(t, df, n);
        t.common = df >= DF_CAP && !t.strong;
    }
    Ok(())
}

/// The full-text search: messages outside the context matching any term, best first.
fn search(db: Db, r: &Request<'_>, query: &Query) -> Result<Vec<Candidate>> {
    let outside = format!("(m.message_id < ?3 OR m.message_id {})", db.in_ids("?6"));
    let scope = match r.scope {
        RecallScope::Conversation => format!("m.conversation_id = ?2 AND {outside}"),
        RecallScope::All => format!("(m.conversation_id <> ?2 OR {outside})"),
    };
    let shortened = serde_json::to_string(r.shortened)?;
    // The rank as FTS5's (lower is better): its negation is the relevance.
    let read = |row: &crate::sql::Row| Candidate::read(row, -row.get::<f64>(5)?);
    match db {
        Db::Sqlite(_) => db.query_map(
            &format!(
                // The best ids first, then the text of those only (a sort would carry every
                // match's text).
                "SELECT m.message_id, m.conversation_id, m.role, m.created_at, substr(m.content, 1, ?5), best.rank
                 FROM (SELECT m.message_id, f.rank AS rank
                       FROM messages_fts f JOIN messages m ON m.message_id = f.rowid
                       WHERE messages_fts MATCH ?1 AND {scope}
                       ORDER BY f.rank LIMIT ?4) best
                 JOIN messages m ON m.message_id = best.message_id
                 ORDER BY best.rank"
            ),
            params![
                query.fts_match(),
                r.conversation_id,
                r.before_message_id,
                MAX_CANDIDATES,
                MAX_TEXT_BYTES,
                shortened
            ],
            read,
        ),
        Db::Pg(_) => {
            // Each term's words as a query of the schema's own (`pg::search`), any of them.
            // (Not a common one: ranking most of the history would be for next to nothing.)
            let phrases: Vec<String> = query.searched().map(|t| t.parts.join(" ")).collect();
            let any = (0..phrases.len())
                .map(|i| format!("lcm_search_query(CAST(?{} AS TEXT))", i + 7))
                .collect::<Vec<_>>()
                .join(" || ");
            let mut values: Vec<Box<dyn rusqlite::ToSql>> = vec![
                Box::new(String::new()),
                Box::new(r.conversation_id),
                Box::new(r.before_message_id),
                Box::new(MAX_CANDIDATES),
                Box::new(MAX_TEXT_BYTES),
                Box::new(shortened),
            ];
            values.extend(phrases.into_iter().map(|p| Box::new(p) as Box<dyn rusqlite::ToSql>));
            let refs: Vec<&dyn rusqlite::ToSql> = values.iter().map(|v| v.as_ref()).collect();
            let words = crate::pg::search::SEARCH_COLUMN;
            // The best ids first, then the text of those only: PostgreSQL computes a select
            // list before it sorts, and would read the text of every match (240 ms at 10,000
            // messages).
            db.query_map(
                &format!(
                    "SELECT m.message_id, m.conversation_id, m.role, m.created_at, substr(m.content, 1, CAST(?5 AS INTEGER)), best.rank
                     FROM (SELECT m.message_id, CAST(-ts_rank(m.{words}, q.q) AS DOUBLE PRECISION) AS rank
                           FROM messages m, (SELECT {any} AS q, CAST(?1 AS TEXT) AS unused) q
                           WHERE m.{words} @@ q.q AND {scope}
                           ORDER BY rank LIMIT ?4) best
                     JOIN messages m ON m.message_id = best.message_id
                     ORDER BY best.rank"
                ),
                &refs,
                read,
            )
        }
    }
}

/// Messages outside the context (of this conversation) that may hold a value of a kind
/// `wants`: the newest of those whose kinds, indexed at ingest (`value_kinds`), say they do,
/// at any age; and among the newest messages, those not indexed (stored by lossless-claw, or
/// before the index), whose text decides.
fn typed_scan(db: Db, r: &Request<'_>, wants: &[Want]) -> Result<Vec<Candidate>> {
    let shortened = serde_json::to_string(r.shortened)?;
    let indexed = db.has_table(MESSAGE_KINDS_TABLE)?;
    let read = |row: &crate::sql::Row| Candidate::read(row, 0.0);
    let mut found = Vec::new();
    if indexed {
        // For each kind, the newest ids from its partial index (whose condition the query
        // repeats word for word, so the planner takes it), then the text of those only.
        let per_kind: Vec<String> = wants
            .iter()
            .map(|w| {
                format!(
                    "SELECT message_id FROM (SELECT k.message_id FROM lcm_native_message_kinds k
                     WHERE k.conversation_id = ?1 AND (kinds & {}) <> 0 AND k.version = ?6
                       AND (k.message_id < ?2 OR k.message_id {})
                     ORDER BY k.message_id DESC LIMIT ?3) of_kind",
                    w.bit(),
                    db.in_ids("?5")
                )
            })
            .collect();
        found = db.query_map(
            &format!(
                "SELECT m.message_id, m.conversation_id, m.role, m.created_at, substr(m.content, 1, CAST(?4 AS INTEGER))
                 FROM (SELECT message_id FROM ({}) ids ORDER BY message_id DESC LIMIT ?3) newest
                 JOIN messages m ON m.message_id = newest.message_id
                 ORDER BY m.message_id DESC",
                per_kind.join(" UNION ")
            ),
            params![
                r.conversation_id,
                r.before_message_id,
                TYPED_INDEXED_MESSAGES,
                TYPED_SCAN_CHARS,
                shortened,
                value_kinds::VERSION
            ],
            read,
        )?;
    }
    // The newest ids first, then the text of those not indexed (as in `search`).
    let newest = format!(
        "SELECT m.message_id, m.conversation_id, m.role, m.created_at, substr(m.content, 1, CAST(?4 AS INTEGER))
         FROM (SELECT message_id, seq FROM messages
               WHERE conversation_id = ?1 AND (message_id < ?2 OR message_id {})
               ORDER BY seq DESC LIMIT ?3) newest
         JOIN messages m ON m.message_id = newest.message_id",
        db.in_ids("?5")
    );
    let (c, before, n, chars) = (
        r.conversation_id,
        r.before_message_id,
        TYPED_SCAN_MESSAGES,
        TYPED_SCAN_CHARS,
    );
    found.extend(if indexed {
        db.query_map(
            &format!(
                "{newest} WHERE NOT EXISTS (SELECT 1 FROM lcm_native_message_kinds k
                                            WHERE k.message_id = newest.message_id AND k.version = ?6)
                 ORDER BY newest.seq DESC"
            ),
            params![c, before, n, chars, shortened, value_kinds::VERSION],
            read,
        )?
    } else {
        db.query_map(
            &format!("{newest} ORDER BY newest.seq DESC"),
            params![c, before, n, chars, shortened],
            read,
        )?
    });
    Ok(found)
}

/// Each candidate's excerpt and score: the index's relevance, the excerpt's own (its terms and
/// a value of the kind asked for), and recency.
fn score(candidates: Vec<Candidate>, query: &Query, r: &Request<'_>) -> Vec<Scored> {
    let (lo, hi) = candidates.iter().fold((i64::MAX, i64::MIN), |(lo, hi), c| {
        (lo.min(c.message_id), hi.max(c.message_id))
    });
    let mut out: Vec<Scored> = candidates
        .into_iter()
        .filter_map(|c| {
            let (e, meaning) = match (excerpt::best(&c.text, query), &c.near) {
                (Some(e), _) if !e.matched.is_empty() || e.typed => (e, None),
                (_, Some(n)) if n.similarity >= MEANING_FLOOR => (
                    Excerpt {
                        range: n.range.clone(),
                        matched: Vec::new(),
                        typed: false,
                        score: excerpt::TYPED_VALUE_WEIGHT * f64::from(n.similarity / MEANING_FLOOR),
                    },
                    Some((n.similarity, n.question)),
                ),
                (found, _) => (found?, None),
            };
            if r.shown
                .iter()
                .any(|&(id, at)| id == c.message_id && at == e.range.start)
            {
                return None;
            }
            let recency = if hi > lo {
                (c.message_id - lo) as f64 / (hi - lo) as f64
            } else {
                1.0
            };
            let score = (RELEVANCE_WEIGHT * c.relevance + e.score) * (1.0 + RECENCY_WEIGHT * recency);
            Some(Scored {
                c,
                e,
                score,
                superseded_by: None,
                meaning,
            })
        })
        .collect();
    out.sort_by(|a, b| b.score.total_cmp(&a.score).then(b.c.message_id.cmp(&a.c.message_id)));
    out
}

/// A question asked before is no answer, and neither is a reply's restatement of it. A user's
/// excerpt that asks gives way to the reply after it, when that is outside the context: the
/// reply's best line, or its start, without the lines that repeat the question, with the
/// question's terms and score ("Maybe Betelgeuse?" for "which star did you suggest …?", found
/// through "can you think of a name for the branch?"). An assistant's excerpt that repeats the
/// message it answers is taken again from its other lines, and left out when none matches.
fn replies_for_questions(db: Db, r: &Request<'_>, query: &Query, scored: Vec<Scored>) -> Result<Vec<Scored>> {
    let ids = |pick: &dyn Fn(&Scored) -> bool| -> Vec<i64> {
        scored.iter().filter(|s| pick(s)).map(|s| s.c.message_id).collect()
    };
    let questions = ids(&|s| s.c.role == "user" && excerpt::asks(s.text(), query));
    let mut replies = neighbours(db, &questions, 1)?;
    let answered = neighbours(db, &ids(&|s| s.c.role == "assistant"), -1)?;
    let outside = |c: &Candidate| {
        c.conversation_id != r.conversation_id
            || c.message_id < r.before_message_id
            || r.shortened.contains(&c.message_id)
    };
    let found = |e: &Excerpt| !e.matched.is_empty() || e.typed;
    let mut out = Vec::with_capacity(scored.len());
    for s in scored {
        if questions.contains(&s.c.message_id) {
            let Some(c) = replies
                .remove(&s.c.message_id)
                .filter(|c| c.role == "assistant" && outside(c))
            else {
                continue;
            };
            let keep = |seg: &str| !excerpt::repeats(seg, &s.c.text);
            let Some(mut e) = excerpt::best_where(&c.text, query, keep)
                .filter(found)
                .or_else(|| excerpt::head_where(&c.text, query, keep))
            else {
                continue;
            };
            for t in &s.e.matched {
                if !e.matched.contains(t) {
                    e.matched.push(*t);
                }
            }
            out.push(Scored { c, e, ..s });
            continue;
        }
        let asked = answered.get(&s.c.message_id).filter(|c| c.role == "user");
        match asked {
            Some(asked) if excerpt::repeats(s.text(), &asked.text) => {
                if s.meaning.is_some() {
                    continue;
                }
                let keep = |seg: &str| !excerpt::repeats(seg, &asked.text);
                let Some(e) = excerpt::best_where(&s.c.text, query, keep).filter(found) else {
                    continue;
                };
                let score = if s.e.score > 0.0 {
                    s.score * e.score / s.e.score
                } else {
                    s.score
                };
                out.push(Scored { e, score, ..s });
            }
            _ => out.push(s),
        }
    }
    out.retain(|s| {
        !r.shown
            .iter()
            .any(|&(id, at)| id == s.c.message_id && at == s.e.range.start)
    });
    out.sort_by(|a, b| b.score.total_cmp(&a.score).then(b.c.message_id.cmp(&a.c.message_id)));
    let mut seen = std::collections::HashSet::new();
    out.retain(|s| seen.insert(s.c.message_id));
    Ok(out)
}

/// The message `step` places after (1) or before (-1) each of `ids` in its conversation, by
/// the id it neighbours.
fn neighbours(db: Db, ids: &[i64], step: i64) -> Result<std::collections::HashMap<i64, Candidate>> {
    if ids.is_empty() {
        return Ok(Default::default());
    }
    let rows = db.query_map(
        &format!(
            "SELECT m.message_id, m.conversation_id, m.role, m.created_at, substr(m.content, 1, CAST(?1 AS INTEGER)), q.message_id
             FROM messages q JOIN messages m ON m.conversation_id = q.conversation_id AND m.seq = q.seq + CAST(?3 AS BIGINT)
             WHERE q.message_id {}",
            db.in_ids("?2")
        ),
        params![MAX_TEXT_BYTES, serde_json::to_string(ids)?, step],
        |row| Ok((row.get::<i64>(5)?, Candidate::read(row, 0.0)?)),
    )?;
    Ok(rows.into_iter().collect())
}

/// Values in a text that a newer excerpt can change: numbers and identifiers.
fn values(text: &str) -> Vec<String> {
    terms::tokens(text)
        .filter(|t| t.chars().any(|c| c.is_ascii_digit()))
        .map(str::to_lowercase)
        .collect()
}

/// Whether two excerpts say something of the same thing, so the newer one's values supersede
/// the older one's: they match two terms of the query together, or the newer says it changes
/// something ("update", "moved", "now", …) and they share a term or a word of their own.
fn same_subject(a: &Scored, b: &Scored) -> bool {
    static CHANGE: LazyLock<regex::Regex> = LazyLock::new(|| {
        regex::Regex::new(r"(?i)\b(?:update[ds]?|moved|now|changed?|instead|correction|no longer|switched|reversed|replaced|pushed|down to|up to|tightened|raised|lowered|renamed)\b")
            .expect("a valid pattern")
    });
    let shared_terms = a.e.matched.iter().filter(|t| b.e.matched.contains(t)).count();
    if shared_terms >= 2 {
        return true;
    }
    let (older, newer) = if a.c.message_id < b.c.message_id {
        (a, b)
    } else {
        (b, a)
    };
    let (older_text, newer_text) = (older.text(), newer.text());
    if !CHANGE.is_match(newer_text) {
        return false;
    }
    let words = |t: &str| -> std::collections::HashSet<String> {
        terms::tokens(&t.to_lowercase())
            .filter(|w| w.len() >= 4 && !w.chars().any(|c| c.is_ascii_digit()) && !terms::is_stop(w))
            .map(terms::stem)
            .collect()
    };
    shared_terms >= 1
        || words(older_text)
            .intersection(&words(newer_text))
            .any(|w| !CHANGE.is_match(w))
}

/// The excerpts shown, within the room: best first, each with the newer excerpts of the same
/// subject before it (the same terms matched, other values), which supersede it.
fn choose(scored: Vec<Scored>, r: &Request<'_>, query: &Query) -> Vec<Scored> {
    let overhead = tokens::estimate(&block::render(
        &query
            .terms
            .iter()
            .map(|t| t.text.as_str())
            .collect::<Vec<_>>()
            .join(" "),
        &[],
    )) + 4;
    let mut room = r.room - overhead;
    let mut taken: Vec<Scored> = Vec::new();
    // Far weaker than the best is noise beside it: a question naming three things is
    // answered by the excerpts that hold most of them.
    let floor = r
        .min_score
        .max(scored.first().map_or(0.0, |s| s.score * RELATIVE_FLOOR));
    // An excerpt that can be shown as an answer: over the floor (a value of the kind asked for
    // with none of the words, the minimum only: how a question that shares no word with its
    // fact reaches it), with evidence. Common words alone are no answer: a rare word of what
    // is asked (not a bare number: `102` of "run 102" is in log lines of every kind), an
    // identifier or a value of the kind asked for is; a statement (nothing asked) recalls what
    // its identifiers name only.
    // A statement found by meaning alone is an answer when it is among the nearest.
    let mut nearest = [f32::MIN; MAX_QUESTIONS];
    for &(m, q) in scored.iter().filter_map(|s| s.meaning.as_ref()) {
        nearest[q] = nearest[q].max(m);
    }
    let answers = |s: &Scored| {
        if let Some((m, q)) = s.meaning {
            return s.score >= r.min_score && m >= nearest[q] - MEANING_MARGIN;
        }
        let by_kind = s.e.matched.is_empty() && s.e.typed;
        let matched = |pick: fn(&terms::Term) -> bool| s.e.matched.iter().any(|&t| pick(&query.terms[t]));
        let evidence = match query.asks() {
            true => {
                s.e.typed
                    || matched(|t| t.asked && t.weight >= RARE_WEIGHT && !t.is_bare_number())
                    || matched(terms::Term::is_identifier)
            }
            false => matched(terms::Term::is_identifier),
        };
        s.score >= r.min_score && (by_kind || s.score >= floor) && evidence
    };
    let mut pool: Vec<Option<Scored>> = scored.into_iter().map(Some).collect();
    let (mut typed_only, mut meaning_only) = (0, [0; MAX_QUESTIONS]);
    for i in 0..pool.len() {
        let Some(best) = pool[i].take() else { continue };
        if taken.len() >= MAX_EXCERPTS {
            break;
        }
        let by_kind = best.e.matched.is_empty() && best.e.typed;
        let by_meaning = best.meaning.map(|(_, q)| q);
        if !answers(&best)
            || by_kind && typed_only >= MAX_BY_KIND
            || by_meaning.is_some_and(|q| meaning_only[q] >= MAX_BY_MEANING)
        {
            continue;
        }
        typed_only += by_kind as usize;
        if let Some(q) = by_meaning {
            meaning_only[q] += 1;
        }
        // Newer excerpts of the same subject with other values, answers themselves: shown first.
        let mut group = vec![best];
        for slot in pool.iter_mut().skip(i + 1) {
            let Some(other) = slot.as_ref() else { continue };
            if answers(other) && same_subject(&group[0], other) && values(group[0].text()) != values(other.text()) {
                group.push(slot.take().expect("checked above"));
            }
        }
        group.sort_by_key(|g| std::cmp::Reverse(g.c.message_id));
        let newest = group[0].c.message_id;
        let cost: i64 = group.iter().map(|g| tokens::estimate(g.text()) + 24).sum();
        if cost > room {
            // The newest alone, rather than an older value without it.
            let alone = tokens::estimate(group[0].text()) + 24;
            if alone > room {
                continue;
            }
            group.truncate(1);
            room -= alone;
        } else {
            room -= cost;
        }
        for (n, mut g) in group.into_iter().enumerate() {
            if n > 0 {
                g.superseded_by = Some(newest);
            }
            taken.push(g);
        }
    }
    taken.truncate(MAX_EXCERPTS);
    taken
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Statements counting a term's messages, run on the traced connection.
    static COUNTS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

    #[test]
    fn a_common_term_is_counted_once_per_engine_and_weighed_the_same_after() {
        let dir = tempfile::tempdir().unwrap();
        let engine = crate::test_support::engine_with(&dir, serde_json::json!({}));
        let msgs: Vec<serde_json::Value> = (0..DF_CAP + 20)
            .map(|i| serde_json::json!({"role": "user", "content": format!("staging deploy {i} went fine")}))
            .collect();
        engine
            .ingest(&crate::store::conversations::Target::Session("common".into()), &msgs)
            .unwrap();
        let mut conn = crate::db::open_configured(&engine.config().db_path, 1000).unwrap();
        conn.trace_v2(
            rusqlite::trace::TraceEventCodes::SQLITE_TRACE_STMT,
            Some(|e: rusqlite::trace::TraceEvent<'_>| {
                if let rusqlite::trace::TraceEvent::Stmt(_, sql) = e {
                    if sql.contains("count(*)") && sql.contains("messages_fts MATCH") {
                        COUNTS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    }
                }
            }),
        )
        .unwrap();
        let common = CommonTerms::default();
        let weigh = |text: &str| {
            let mut q = terms::parse(text);
            weigh_terms(Db::Sqlite(&conn), &mut q, &common).unwrap();
            COUNTS.swap(0, std::sync::atomic::Ordering::SeqCst);
            q.terms
                .iter()
                .map(|t| (t.text.clone(), t.weight, t.common))
                .collect::<Vec<_>>()
        };
        let first = weigh("what broke the staging canary?");
        assert!(
            first.iter().any(|(t, _, common)| t == "staging" && *common),
            "{first:?}"
        );
        assert!(
            first.iter().any(|(t, _, common)| t == "canary" && !*common),
            "{first:?}"
        );
        // Again: the rare term is counted again, the common one is not, and both weigh the same.
        let mut q = terms::parse("what broke the staging canary?");
        weigh_terms(Db::Sqlite(&conn), &mut q, &common).unwrap();
        let counted = COUNTS.swap(0, std::sync::atomic::Ordering::SeqCst);
        let again: Vec<_> = q.terms.iter().map(|t| (t.text.clone(), t.weight, t.common)).collect();
        assert_eq!(again, first);
        assert_eq!(counted, first.len() - 1, "{first:?}");
    }

    fn scored(message_id: i64, text: &str, matched: Vec<usize>) -> Scored {
        Scored {
            c: Candidate {
                message_id,
                conversation_id: 1,
                role: "user".into(),
                created_at: String::new(),
                text: text.into(),
                relevance: 0.0,
                near: None,
            },
            e: Excerpt {
                range: 0..text.len(),
                matched,
                typed: false,
                score: 1.0,
            },
            score: 1.0,
            superseded_by: None,
            meaning: None,
        }
    }

    #[test]
    fn a_change_is_of_the_same_subject_only_when_the_two_share_a_word_that_says_something() {
        let older = scored(
            10,
            "Not urgent, but worth keeping in mind here: this morning we rotated all the service account keys. Anyway, what should we look at next?",
            vec![0],
        );
        // "here", "what", "first" are no subject.
        let unrelated = scored(
            20,
            "Here is the log of run 49, what went wrong? One correction first, update: we reversed the GraphQL call.",
            vec![1],
        );
        assert!(!same_subject(&older, &unrelated));
        let related = scored(
            30,
            "Update: the service account keys are rotated every 90 days now.",
            vec![2],
        );
        assert!(same_subject(&older, &related));
        // Two query terms matched together are one subject, change word or not.
        assert!(same_subject(&scored(1, "a", vec![3, 4]), &scored(2, "b", vec![3, 4])));
    }
}
