//! Checks of DESIGN.md's invariants on a database, and a digest of its contents.
//!
//! - Coverage: every message of a conversation is either a live item or covered by exactly one
//!   live summary (through `summary_messages` / `summary_parents`), and the live items cover
//!   the conversation in order with contiguous ordinals k..k+n-1 (k is 0 until a write moves
//!   the rows before its span up: `compaction::write`).
//! - DAG facts: a condensed node's inputs share one depth, its depth is that + 1,
//!   `descendant_count` = Σ(input + 1), and its range spans its inputs'.
//! - The stored live totals equal the sums over the live items.
//! - SQLite's own `integrity_check` and foreign keys.

use std::collections::{HashMap, HashSet};

use rusqlite::params;
use rusqlite::types::Value;
use serde::Serialize;
use sha2::{Digest, Sha256};

use super::totals;
use crate::error::Result;
use crate::sql::Db;

/// The invariant check of `verify`.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct VerifyReport {
    pub ok: bool,
    pub conversations: i64,
    pub messages: i64,
    pub summaries: i64,
    /// Every violation found, in words; empty when `ok`.
    pub problems: Vec<String>,
    /// What looks unusual but is a state another writer makes on purpose (lossless-claw's
    /// `/new`), in words; not counted against `ok`.
    pub notes: Vec<String>,
    /// Rows lossless-claw 1.0 stored twice (`store::copies`): each copy with the row it
    /// copies. Assembly sends each once; named in `notes` too, not counted against `ok`.
    pub copies: Vec<super::copies::StoredCopy>,
    /// SHA-256 over every row of the core tables: equal digests mean equal contents. Empty (and the
    /// counts 0) when SQLite's integrity check finds the file damaged; `problems` says how.
    pub digest: String,
}

/// The tables the digest covers, each in one order: its key columns (`t` after a text
/// column, which PostgreSQL must order byte by byte as SQLite does, whatever its collation).
const DIGEST_TABLES: &[(&str, &[&str])] = &[
    ("conversations", &["conversation_id"]),
    ("messages", &["message_id"]),
    ("message_parts", &["part_id t"]),
    ("summaries", &["summary_id t"]),
    ("summary_messages", &["summary_id t", "message_id"]),
    ("summary_parents", &["summary_id t", "parent_summary_id t"]),
    ("context_items", &["conversation_id", "ordinal"]),
];

/// A SHA-256 over the tables' rows in key order, every value with its storage class: the same
/// on a SQLite file and on its copy in PostgreSQL (whose own `rowid` and `lcm_search` columns
/// are not read).
fn digest(db: Db) -> Result<String> {
    let mut h = Sha256::new();
    for (table, keys) in DIGEST_TABLES {
        h.update(table.as_bytes());
        let columns = match db {
            Db::Sqlite(_) => db.query_map(
                &format!("SELECT name FROM pragma_table_info('{table}') ORDER BY cid"),
                params![],
                |r| r.get::<String>(0),
            )?,
            Db::Pg(c) => db.query_map(
                "SELECT column_name FROM information_schema.columns
                 WHERE table_schema = ?1 AND table_name = ?2 AND column_name NOT IN ('rowid', ?3) ORDER BY ordinal_position",
                params![c.schema, table, crate::pg::search::SEARCH_COLUMN],
                |r| r.get::<String>(0),
            )?,
        };
        let order: Vec<String> = keys
            .iter()
            .map(|k| match (k.strip_suffix(" t"), db) {
                (Some(text), Db::Pg(_)) => format!("{text} COLLATE \"C\""),
                (Some(text), Db::Sqlite(_)) => text.to_string(),
                (None, _) => k.to_string(),
            })
            .collect();
        let sql = format!(
            "SELECT {} FROM {table} ORDER BY {}",
            columns.join(", "),
            order.join(", ")
        );
        db.query_each(&sql, params![], |r| {
            for i in 0..columns.len() {
                match r.get::<Value>(i)? {
                    Value::Null => h.update(b"\x00N"),
                    Value::Integer(v) => h.update(format!("\x00I{v}").as_bytes()),
                    Value::Real(v) => h.update(format!("\x00R{v}").as_bytes()),
                    Value::Text(t) => {
                        h.update(b"\x00T");
                        h.update(t.as_bytes());
                    }
                    Value::Blob(b) => {
                        h.update(b"\x00B");
                        h.update(&b);
                    }
                }
            }
            h.update(b"\n");
            Ok(true)
        })?;
    }
    Ok(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

struct SummaryRow {
    conversation_id: i64,
    kind: String,
    depth: i64,
    earliest: Option<String>,
    latest: Option<String>,
    descendant_count: i64,
}

/// Checks the invariants of one conversation (or all) and digests the database.
/// Every cycle of the input graph (`summary` → its inputs), each as the path that closes it
/// (`[a, b, a]`), found by one iterative depth-first search: linear in the edges, no recursion.
pub(super) fn cycles(parents: &HashMap<String, Vec<String>>) -> Vec<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        OnPath,
        Done,
    }
    let mut mark: HashMap<&str, Mark> = HashMap::new();
    let mut found = Vec::new();
    let mut roots: Vec<&String> = parents.keys().collect();
    roots.sort();
    for root in roots {
        if mark.contains_key(root.as_str()) {
            continue;
        }
        // The path from `root`, each node with the index of its next input to visit.
        let mut path: Vec<(&str, usize)> = vec![(root.as_str(), 0)];
        mark.insert(root.as_str(), Mark::OnPath);
        while let Some((node, next)) = path.last_mut() {
            let inputs = parents.get(*node).map(Vec::as_slice).unwrap_or(&[]);
            if let Some(child) = inputs.get(*next) {
                *next += 1;
                match mark.get(child.as_str()) {
                    None => {
                        mark.insert(child.as_str(), Mark::OnPath);
                        path.push((child.as_str(), 0));
                    }
                    Some(Mark::OnPath) => {
                        let start = path.iter().position(|(n, _)| *n == child.as_str()).unwrap_or(0);
                        let mut cycle: Vec<String> = path[start..].iter().map(|(n, _)| n.to_string()).collect();
                        cycle.push(child.clone());
                        found.push(cycle);
                    }
                    Some(Mark::Done) => {}
                }
            } else {
                mark.insert(*node, Mark::Done);
                path.pop();
            }
        }
    }
    found
}

pub(crate) fn verify<'a>(db: impl Into<Db<'a>>, only: Option<i64>) -> Result<VerifyReport> {
    let db = db.into();
    let mut problems = Vec::new();
    let mut notes = Vec::new();
    let mut copies = Vec::new();
    // PostgreSQL checks its own pages and enforces its constraints as rows are written.
    if let Db::Sqlite(conn) = db {
        if let Some(damage) = sqlite_damage(conn, &mut problems)? {
            return Ok(damage);
        }
        not_utf8(conn, only, &mut problems)?;
    }
    // A conversation that does not exist would check as an empty one: that is no check.
    if let Some(id) = only {
        if db
            .query_row(
                "SELECT 1 FROM conversations WHERE conversation_id = ?1",
                params![id],
                |_| Ok(()),
            )?
            .is_none()
        {
            return Err(crate::error::LcmError::not_found("conversation", id));
        }
    }

    let mut summaries: HashMap<String, SummaryRow> = HashMap::new();
    db.query_each(
        "SELECT summary_id, conversation_id, kind, depth, earliest_at, latest_at, descendant_count FROM summaries",
        params![],
        |r| {
            summaries.insert(
                r.get(0)?,
                SummaryRow {
                    conversation_id: r.get(1)?,
                    kind: r.get(2)?,
                    depth: r.get(3)?,
                    earliest: r.get(4)?,
                    latest: r.get(5)?,
                    descendant_count: r.get(6)?,
                },
            );
            Ok(true)
        },
    )?;
    let mut parents: HashMap<String, Vec<String>> = HashMap::new();
    db.query_each(
        "SELECT summary_id, parent_summary_id FROM summary_parents ORDER BY summary_id, ordinal",
        params![],
        |r| {
            parents.entry(r.get(0)?).or_default().push(r.get(1)?);
            Ok(true)
        },
    )?;
    let mut leaf_messages: HashMap<String, Vec<i64>> = HashMap::new();
    db.query_each(
        "SELECT summary_id, message_id FROM summary_messages ORDER BY summary_id, ordinal",
        params![],
        |r| {
            leaf_messages.entry(r.get(0)?).or_default().push(r.get(1)?);
            Ok(true)
        },
    )?;

    // A cycle in summary_parents (a damaged or hand-edited file) would make every walk below
    // endless; it is reported, and the walks below never enter a node twice.
    for cycle in cycles(&parents) {
        let in_scope = only.is_none_or(|c| {
            cycle
                .iter()
                .any(|id| summaries.get(id).is_some_and(|s| s.conversation_id == c))
        });
        if in_scope {
            problems.push(format!("summary_parents has a cycle: {}", cycle.join(" → ")));
        }
    }

    // DAG facts of every condensed node.
    for (id, s) in &summaries {
        if only.is_some_and(|c| c != s.conversation_id) {
            continue;
        }
        let Some(inputs) = parents.get(id) else {
            if s.kind == "condensed" && s.depth > 0 && s.descendant_count > 0 {
                problems.push(format!("{id}: condensed with descendants but no inputs"));
            }
            continue;
        };
        let depths: HashSet<i64> = inputs
            .iter()
            .filter_map(|p| summaries.get(p).map(|x| x.depth))
            .collect();
        if depths.len() > 1 {
            problems.push(format!("{id}: inputs of mixed depths {depths:?}"));
        }
        if let Some(d) = depths.iter().next() {
            if s.depth != d + 1 {
                problems.push(format!("{id}: depth {} but inputs at depth {d}", s.depth));
            }
        }
        let expected: i64 = inputs
            .iter()
            .filter_map(|p| summaries.get(p))
            .map(|x| x.descendant_count.max(0) + 1)
            .sum();
        if s.descendant_count != expected {
            problems.push(format!(
                "{id}: descendant_count {} but inputs give {expected}",
                s.descendant_count
            ));
        }
        let lo = inputs.iter().filter_map(|p| summaries.get(p)?.earliest.clone()).min();
        let hi = inputs.iter().filter_map(|p| summaries.get(p)?.latest.clone()).max();
        if lo.is_some() && s.earliest != lo {
            problems.push(format!("{id}: earliest_at {:?} but inputs start at {lo:?}", s.earliest));
        }
        if hi.is_some() && s.latest != hi {
            problems.push(format!("{id}: latest_at {:?} but inputs end at {hi:?}", s.latest));
        }
    }

    // Coverage, per conversation.
    let conversation_ids: Vec<i64> = match only {
        Some(c) => vec![c],
        None => db.query_map(
            "SELECT conversation_id FROM conversations ORDER BY conversation_id",
            params![],
            |r| r.get(0),
        )?,
    };
    let mut message_total = 0;
    for cid in &conversation_ids {
        let seq_of: HashMap<i64, i64> = db
            .query_map(
                "SELECT message_id, seq FROM messages WHERE conversation_id = ?1",
                params![cid],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )?
            .into_iter()
            .collect();
        message_total += seq_of.len() as i64;
        // The seed plugin logged each pass as a system message with a `compaction` part, never
        // part of the live context: those rows are not conversation content.
        let events: HashSet<i64> = db
            .query_map(
                "SELECT DISTINCT p.message_id FROM message_parts p JOIN messages m ON m.message_id = p.message_id
                 WHERE m.conversation_id = ?1 AND p.part_type = 'compaction'",
                params![cid],
                |r| r.get(0),
            )?
            .into_iter()
            .collect();
        let items: Vec<(i64, String, Option<i64>, Option<String>)> = db.query_map(
            "SELECT ordinal, item_type, message_id, summary_id FROM context_items WHERE conversation_id = ?1 ORDER BY ordinal",
            params![cid],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )?;
        let mut covered: Vec<i64> = Vec::new();
        let mut spans: Vec<Span> = Vec::with_capacity(items.len());
        let seq_range = |msgs: &[i64]| {
            let seqs = msgs.iter().filter_map(|m| seq_of.get(m).copied());
            seqs.clone().min().zip(seqs.max())
        };
        let first = items.first().map_or(0, |i| i.0);
        for (i, (ordinal, kind, mid, sid)) in items.iter().enumerate() {
            if *ordinal != first + i as i64 {
                problems.push(format!(
                    "conversation {cid}: ordinal {ordinal} at position {i} after {first} (not contiguous)"
                ));
                break;
            }
            if kind == "message" {
                covered.extend(mid.iter().copied());
                spans.push((None, seq_range(mid.as_slice())));
            } else if let Some(sid) = sid {
                // Walk down to the messages, inputs in order, entering each node once.
                let mut stack = vec![sid.clone()];
                let mut seen: HashSet<String> = HashSet::new();
                let mut msgs = Vec::new();
                while let Some(s) = stack.pop() {
                    if !seen.insert(s.clone()) {
                        problems.push(format!("conversation {cid}: {s} is reached twice below {sid}"));
                        continue;
                    }
                    if let Some(ms) = leaf_messages.get(&s) {
                        msgs.extend(ms.iter().copied());
                    }
                    if let Some(ps) = parents.get(&s) {
                        stack.extend(ps.iter().rev().cloned());
                    }
                }
                spans.push((summaries.get(sid).map(|s| s.depth), seq_range(&msgs)));
                covered.extend(msgs);
            }
        }
        let seqs: Vec<i64> = covered.iter().filter_map(|m| seq_of.get(m).copied()).collect();
        if seqs.len() != covered.len() {
            problems.push(format!(
                "conversation {cid}: live items cover messages of another conversation"
            ));
        }
        let unique: HashSet<i64> = covered.iter().copied().collect();
        if unique.len() != covered.len() {
            problems.push(format!(
                "conversation {cid}: {} message(s) covered more than once",
                covered.len() - unique.len()
            ));
        }
        // Messages a `/new` took out of the context are neither, on purpose.
        let reset_through = crate::store::lifecycle::reset_through(db, *cid)?.unwrap_or(i64::MIN);
        let missing: Vec<i64> = seq_of
            .iter()
            .filter(|(m, seq)| !unique.contains(m) && !events.contains(m) && **seq > reset_through)
            .map(|(_, seq)| *seq)
            .collect();
        if !missing.is_empty() {
            match new_block(&missing, &seq_of, &events, &spans) {
                Some((lo, hi)) => notes.push(format!(
                    "conversation {cid}: {} message(s) (seq {lo}–{hi}) are out of the context in one block after \
                     summaries of depth 2 or more only, as lossless-claw's /new leaves a conversation (it \
                     records no marker): not counted as damage",
                    missing.len()
                )),
                None => problems.push(format!(
                    "conversation {cid}: {} message(s) neither live nor covered",
                    missing.len()
                )),
            }
        }
        if seqs.windows(2).any(|w| w[0] >= w[1]) {
            problems.push(format!("conversation {cid}: live items are not in chronological order"));
        }
        problems.extend(totals::drift(db, *cid)?);
        let found = super::copies::find(db, *cid)?;
        if !found.is_empty() {
            let pairs: Vec<String> = found
                .iter()
                .map(|c| format!("{} of {}", c.copy_id, c.original_id))
                .collect();
            notes.push(format!(
                "conversation {cid}: {} message(s) are copies lossless-claw 1.0 imported again of messages stored \
                 before them (copy of original: {}); each is sent to the model once; `lcm-native fold-copies` folds them (a dry run first)",
                found.len(),
                pairs.join(", ")
            ));
            copies.extend(found);
        }
    }
    problems.extend(super::versions::problems(db, only)?);
    notes.extend(late_turns(db, only)?);

    Ok(VerifyReport {
        ok: problems.is_empty(),
        conversations: conversation_ids.len() as i64,
        messages: message_total,
        summaries: summaries
            .values()
            .filter(|s| only.is_none_or(|c| c == s.conversation_id))
            .count() as i64,
        problems,
        notes,
        copies,
        digest: digest(db)?,
    })
}

/// A live item as `new_block` sees it: a summary's depth (None for a message) and the lowest
/// and highest seq of the messages it covers.
type Span = (Option<i64>, Option<(i64, i64)>);

/// The seq range of `missing` when it has the shape lossless-claw's `/new` leaves: it takes
/// every raw message and every summary shallower than depth 2 out of the context and records
/// nothing. So the missing messages are one unbroken run of the conversation's messages, and
/// what is still in the context before them is only summaries of depth 2 or more (none at all
/// when there were none); later turns follow them. A context item lost to damage in the middle
/// of the context does not look like that; one lost at its very start, or a whole context lost,
/// cannot be told from it by the rows alone.
/// Turns the host replayed after later turns had been stored (`IngestOutcome::late`): stored
/// at the end, out of the transcript's order, which lcm-native reports rather than hides.
fn late_turns(db: Db, only: Option<i64>) -> Result<Vec<String>> {
    if !db.has_table(crate::db::schema::TURN_POSITIONS_TABLE)? {
        return Ok(Vec::new());
    }
    let mut notes = Vec::new();
    let note = |r: &crate::sql::Row| -> Result<bool> {
        let (cid, key): (i64, String) = (r.get(0)?, r.get(1)?);
        notes.push(format!(
            "conversation {cid}: turn {key} was replayed by the host after later turns and is stored after \
             them (a late replay, not in the transcript's order)"
        ));
        Ok(true)
    };
    let select = "SELECT conversation_id, advancement_key FROM lcm_native_turn_positions WHERE late = 1";
    let order = "ORDER BY conversation_id, transcript_position";
    match only {
        Some(cid) => db.query_each(
            &format!("{select} AND conversation_id = ?1 {order}"),
            params![cid],
            note,
        )?,
        None => db.query_each(&format!("{select} {order}"), params![], note)?,
    }
    Ok(notes)
}

fn new_block(missing: &[i64], seq_of: &HashMap<i64, i64>, events: &HashSet<i64>, spans: &[Span]) -> Option<(i64, i64)> {
    let lo = *missing.iter().min()?;
    let hi = *missing.iter().max()?;
    let in_block = seq_of
        .iter()
        .filter(|(m, seq)| (lo..=hi).contains(*seq) && !events.contains(m))
        .count();
    if in_block != missing.len() {
        return None;
    }
    let shaped = spans.iter().all(|(depth, range)| {
        let (before, after) = range.map_or((false, false), |(first, last)| (first < lo, last > hi));
        match (before, after) {
            (true, true) => false,
            (true, false) => depth.is_some_and(|d| d >= 2),
            _ => true,
        }
    });
    shaped.then_some((lo, hi))
}

/// Stored text that is not UTF-8 (SQLite stores whatever bytes it is given; a flipped bit
/// leaves it so): each message, part and summary named. Reads return it with U+FFFD in place
/// of what cannot be decoded; PostgreSQL refuses such text when it is written.
fn not_utf8(conn: &rusqlite::Connection, only: Option<i64>, problems: &mut Vec<String>) -> Result<()> {
    let parts: Vec<String> = crate::db::schema::PART_TEXT_COLUMNS
        .iter()
        .map(|c| format!("CAST(p.{c} AS BLOB)"))
        .collect();
    let queries = [
        (
            "message".to_string(),
            "SELECT message_id, 'text', CAST(content AS BLOB) FROM messages WHERE ?1 IS NULL OR conversation_id = ?1"
                .to_string(),
        ),
        (
            "message".to_string(),
            format!(
                "SELECT p.message_id, 'part ' || p.ordinal, {} FROM message_parts p JOIN messages m USING (message_id)
                  WHERE ?1 IS NULL OR m.conversation_id = ?1",
                parts.join(", ")
            ),
        ),
        (
            "summary".to_string(),
            "SELECT summary_id, 'text', CAST(content AS BLOB) FROM summaries WHERE ?1 IS NULL OR conversation_id = ?1"
                .to_string(),
        ),
    ];
    for (kind, sql) in queries {
        let mut stmt = conn.prepare(&sql)?;
        let mut rows = stmt.query(params![only])?;
        while let Some(r) = rows.next()? {
            let id: Value = r.get(0)?;
            let what: String = r.get(1)?;
            for i in 2..r.as_ref().column_count() {
                if let rusqlite::types::ValueRef::Blob(bytes) = r.get_ref(i)? {
                    if std::str::from_utf8(bytes).is_err() {
                        let id = match id {
                            Value::Integer(n) => n.to_string(),
                            Value::Text(ref t) => t.clone(),
                            _ => "?".into(),
                        };
                        problems.push(format!(
                            "{kind} {id}: its {what} is not valid UTF-8 (a damaged byte); it is read with U+FFFD in its place"
                        ));
                        break;
                    }
                }
            }
        }
    }
    Ok(())
}

/// SQLite's own checks: `integrity_check` (a report of the damage alone when it fails: the
/// other checks would read the damaged pages, and no digest of them means anything) and the
/// foreign keys (a problem).
fn sqlite_damage(conn: &rusqlite::Connection, problems: &mut Vec<String>) -> Result<Option<VerifyReport>> {
    let integrity: String = conn.query_row("PRAGMA integrity_check", [], |r| r.get(0))?;
    if integrity != "ok" {
        return Ok(Some(VerifyReport {
            ok: false,
            conversations: 0,
            messages: 0,
            summaries: 0,
            problems: vec![format!("integrity_check: {integrity}")],
            notes: Vec::new(),
            copies: Vec::new(),
            digest: String::new(),
        }));
    }
    let fk: i64 = conn.query_row("SELECT count(*) FROM pragma_foreign_key_check", [], |r| r.get(0))?;
    if fk > 0 {
        problems.push(format!("{fk} foreign key violations"));
    }
    Ok(None)
}
