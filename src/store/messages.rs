//! Messages in and out: the ingest transaction, and reading stored messages back with their
//! content blocks rebuilt from `message_parts`.

use std::collections::HashSet;

use rusqlite::params;
use serde::Serialize;
use serde_json::Value;

use super::conversations::{self, Conversation, Target};
use super::normalize::{NewMessage, Role};
use crate::db::SchemaFlags;
use crate::error::{LcmError, Result};
use crate::sql::{Db, Rows};
use crate::time;

/// What an ingest call did (the core's part of `IngestResult`).
#[derive(Debug, Clone, Serialize, PartialEq)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct IngestOutcome {
    pub conversation_id: i64,
    /// Messages stored by this call.
    pub inserted: i64,
    /// Messages skipped because their `entryId` was already stored (all of them when nothing was
    /// written: a turn already committed, or a bootstrap of a conversation that has messages).
    pub skipped: i64,
    /// The `advancementKey` was already stored: nothing was written.
    pub duplicate: bool,
    /// A `bootstrap` import found the conversation holding messages already: nothing was written.
    pub already_bootstrapped: bool,
    /// Matches of `redactPatterns` replaced in the messages stored by this call (each such
    /// call is also in the redaction log).
    pub redacted: i64,
    /// The turn began in the host's transcript before a turn already stored (`transcriptPosition`):
    /// a replay that came after later turns. Its messages are stored at the end, where they
    /// did not happen, and the turn is marked late (`verify` notes it).
    pub late: bool,
}

/// How one caller's messages are stored: as a turn (its key, kept so that the turn is stored
/// once; lossless-claw 1.x's row for it; where it began in the host's transcript), as a
/// one-time import of a session's earlier history, or as they come.
#[derive(Clone, Debug, Default)]
pub(crate) struct IngestMode {
    pub advancement_key: Option<String>,
    pub bootstrap: bool,
    pub turn: Option<Advancement>,
    pub transcript_position: Option<i64>,
}

/// How a key the OpenClaw plugin makes for a turn without the host's own begins
/// (`lcm-native-spool:<uuid>`): such a key makes the turn stored once (a store answered as
/// failed after it committed, a drain replayed), and nothing more: the batch is recognised as
/// a replay of the transcript and marks no bootstrap, as a batch without a key.
pub(crate) const SPOOL_KEY_PREFIX: &str = "lcm-native-spool:";

/// A row of lossless-claw 1.x's `turn_advancements` (its columns but the key, the message
/// count and the time, which the ingest fills).
#[derive(Clone, Debug, Default)]
pub(crate) struct Advancement {
    pub payload_hash: String,
    pub session_id: String,
    pub session_key: Option<String>,
    pub admission_entry_id: String,
    pub terminal_entry_id: String,
}

/// One caller's share of a group commit: where its messages go, the messages, and how.
pub(crate) struct IngestJob<'a> {
    pub target: &'a Target,
    pub messages: &'a [NewMessage],
    pub mode: &'a IngestMode,
}

/// Stores several callers' messages in one transaction: each job's messages become rows in
/// `messages`, `message_parts` and `messages_fts`, appended to the live context, and messages
/// whose `entry_id` is already in the conversation (or earlier in the same job) are skipped.
/// One result per job, each job atomic on its own: when a job fails for a reason of its own (an
/// unknown conversation), the transaction is rolled back, that job gets its error, and the
/// others are written again without it. A failure of the transaction itself (the database
/// busy, the disk full) is every job's answer. One commit then pays for the log writes of
/// every job. `write` is the write door each attempt goes through (`Backend`'s on both
/// databases); `after` runs in the same transaction once every job is written, and must
/// not fail it (a report rides there: no second transaction per turn).
pub(crate) fn ingest_group<W>(
    mut write: W,
    flags: SchemaFlags,
    jobs: &[IngestJob<'_>],
    after: &dyn Fn(Db, &[IngestOutcome]),
) -> Vec<Result<IngestOutcome>>
where
    W: FnMut(&mut dyn FnMut(Db) -> Result<Vec<IngestOutcome>>) -> Result<Vec<IngestOutcome>>,
{
    let mut results: Vec<Option<Result<IngestOutcome>>> = jobs.iter().map(|_| None).collect();
    let mut pending: Vec<usize> = (0..jobs.len()).collect();
    while !pending.is_empty() {
        let group: Vec<IngestJob<'_>> = pending
            .iter()
            .map(|&i| IngestJob {
                target: jobs[i].target,
                messages: jobs[i].messages,
                mode: jobs[i].mode,
            })
            .collect();
        // A job's own failure rolls the attempt back (its error is the closure's) and is
        // noted here, so that it alone is answered and the others go again.
        let mut failed_job = None;
        let written = write(&mut |db| {
            write_together(db, flags, &group, after).map_err(|failure| match failure {
                GroupFailure::Job(k, e) => {
                    failed_job = Some(k);
                    e
                }
                GroupFailure::Transaction(e) => e,
            })
        });
        match (written, failed_job) {
            (Ok(outcomes), _) => {
                for (&i, outcome) in pending.iter().zip(outcomes) {
                    results[i] = Some(Ok(outcome));
                }
                break;
            }
            (Err(e), Some(k)) => {
                results[pending.remove(k)] = Some(Err(e));
            }
            (Err(e), None) => {
                for &i in &pending {
                    results[i] = Some(Err(e.clone()));
                }
                break;
            }
        }
    }
    results.into_iter().map(|r| r.expect("every job answered")).collect()
}

/// Why a group was not written: one job's own error (its index in the group), or the
/// transaction's.
enum GroupFailure {
    Job(usize, LcmError),
    Transaction(LcmError),
}

impl<E: Into<LcmError>> From<E> for GroupFailure {
    fn from(e: E) -> Self {
        GroupFailure::Transaction(e.into())
    }
}

/// All `jobs` in the transaction `db` is in, then `after`; the caller commits.
fn write_together(
    db: Db,
    flags: SchemaFlags,
    jobs: &[IngestJob<'_>],
    after: &dyn Fn(Db, &[IngestOutcome]),
) -> std::result::Result<Vec<IngestOutcome>, GroupFailure> {
    let now = time::now_sqlite();
    // What a call itself can get wrong; anything else (disk full, I/O, corruption) is the
    // transaction's, not this call's.
    let failure = |k: usize| {
        move |e: LcmError| match e {
            LcmError::NotFound { .. } | LcmError::InvalidInput(_) => GroupFailure::Job(k, e),
            e => GroupFailure::Transaction(e),
        }
    };
    // Sharing the schema with writers of other conversations (PostgreSQL), the conversations
    // are found first and locked before anything is written; a job that must make or re-key
    // one sends the group to the whole schema's lock.
    let mut homes: Vec<Option<Home>> = jobs.iter().map(|_| None).collect();
    if db.locks_by_conversation() {
        for (k, job) in jobs.iter().enumerate() {
            match home(db, flags, job, None).map_err(failure(k))? {
                Some(found) => homes[k] = Some(found),
                None => db.lock_whole_schema()?,
            }
        }
        let ids: Vec<i64> = homes.iter().flatten().map(|h| h.1).collect();
        db.lock_conversations(&ids)?;
    }
    let mut fts_rows: Vec<(i64, &str)> = Vec::new();
    let mut outcomes = Vec::with_capacity(jobs.len());
    for (k, (job, found)) in jobs.iter().zip(homes).enumerate() {
        outcomes.push(ingest_in(db, flags, job, found, &now, &mut fts_rows).map_err(failure(k))?);
    }
    insert_fts(db, &fts_rows)?;
    after(db, &outcomes);
    Ok(outcomes)
}

/// The messages' full-text rows on SQLite, last: a statement that opens a savepoint (one
/// firing the live-totals trigger does) makes FTS5 flush its pending rows to a new segment,
/// so rows inserted between such statements would be written one segment at a time.
/// PostgreSQL's search column is kept by the table itself.
fn insert_fts(db: Db, rows: &[(i64, &str)]) -> Result<()> {
    if let Db::Sqlite(conn) = db {
        let mut insert = conn.prepare_cached("INSERT INTO messages_fts (rowid, content) VALUES (?1, ?2)")?;
        for (message_id, content) in rows {
            insert.execute(params![message_id, content])?;
        }
    }
    Ok(())
}

/// A stored message's row, its columns up to the id (which SQLite makes and PostgreSQL's
/// ingest draws ahead), and their values.
const INSERT_MESSAGE: &str = "INSERT INTO messages (conversation_id, seq, role, content, token_count, identity_hash,
                                   transcript_entry_id, stable_event_key, created_at";
const MESSAGE_VALUES: &str = "?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9";
/// A message's row with the id drawn for it (PostgreSQL).
const MESSAGE_ROW: &str = "(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)";

/// Where a job's messages go: the conversation its target names, and the conversation they
/// are stored in (that one, or the one a `/reset` archived, for a turn from before it).
type Home = (Conversation, i64);

/// A job's `Home`, making or re-keying the target's conversation with `create` (the time);
/// without it, `None` when finding it would write (`conversations::resolve_unchanged`).
fn home(tx: Db, flags: SchemaFlags, job: &IngestJob<'_>, create: Option<&str>) -> Result<Option<Home>> {
    let conv = match create {
        Some(now) => conversations::resolve_or_create(tx, flags, job.target, now)?,
        None => match conversations::resolve_unchanged(tx, flags, job.target)? {
            Some(conv) => conv,
            None => return Ok(None),
        },
    };
    // A host turn from before a `/reset`, replayed by the host after it (a commit that failed
    // then): it belongs to the conversation the reset archived, not to the new one.
    let began = job.messages.first().and_then(|m| m.created_at.as_deref());
    let cid = match (job.mode.transcript_position, began) {
        (Some(_), Some(began)) => archived_home(tx, conv.conversation_id, began)?.unwrap_or(conv.conversation_id),
        _ => conv.conversation_id,
    };
    Ok(Some((conv, cid)))
}

/// Writes one job's rows except its full-text rows, which it appends to `fts_rows` (SQLite's
/// full-text table; PostgreSQL indexes the rows themselves).
pub(crate) fn ingest_in<'a>(
    tx: Db,
    flags: SchemaFlags,
    job: &IngestJob<'a>,
    found: Option<Home>,
    now: &str,
    fts_rows: &mut Vec<(i64, &'a str)>,
) -> Result<IngestOutcome> {
    let (messages, options) = (job.messages, job.mode);
    let (conv, cid) = match found {
        Some(found) => found,
        None => home(tx, flags, job, Some(now))?.expect("made when missing"),
    };
    let nothing = |duplicate: bool| IngestOutcome {
        conversation_id: cid,
        inserted: 0,
        skipped: messages.len() as i64,
        duplicate,
        already_bootstrapped: !duplicate,
        redacted: 0,
        late: false,
    };
    if options.bootstrap {
        let has_messages = tx
            .query_row(
                "SELECT 1 FROM messages WHERE conversation_id = ?1 LIMIT 1",
                params![cid],
                |_| Ok(()),
            )?
            .is_some();
        if has_messages {
            return Ok(nothing(false));
        }
    }
    if let Some(key) = options.advancement_key.as_deref() {
        // A turn stored before, by lcm-native or by lossless-claw (whose keys are global, not
        // per conversation): one statement, one round trip on PostgreSQL.
        let fresh = tx.execute(
            "INSERT OR IGNORE INTO lcm_native_turns (conversation_id, advancement_key, message_count, committed_at)
             SELECT CAST(?1 AS BIGINT), CAST(?2 AS TEXT), CAST(?3 AS BIGINT), CAST(?4 AS TEXT)
             WHERE NOT EXISTS (SELECT 1 FROM turn_advancements WHERE advancement_key = ?2)",
            params![cid, key, messages.len() as i64, now],
        )?;
        if fresh == 0 {
            return Ok(nothing(true));
        }
    }
    // A turn replayed after turns that came later in the transcript (OpenClaw replays a failed
    // commit to the engine that failed it, maybe after a switch of engines and turns stored by
    // the other one).
    let after_later_turns = match (options.advancement_key.as_deref(), options.transcript_position) {
        (Some(_), Some(position)) => tx
            .query_row(
                "SELECT 1 FROM lcm_native_turn_positions WHERE conversation_id = ?1 AND transcript_position > ?2 LIMIT 1",
                params![cid, position],
                |_| Ok(()),
            )?
            .is_some(),
        _ => false,
    };
    // A key the plugin made for a turn the host gave none (`SPOOL_KEY_PREFIX`) makes the turn
    // stored once; it is not the host's turn, so the rest goes as without a key.
    let host_turn = options
        .advancement_key
        .as_deref()
        .is_some_and(|k| !k.starts_with(SPOOL_KEY_PREFIX));
    if options.bootstrap || host_turn {
        // The session's history is in lcm-native from here on: a later bootstrap imports nothing.
        tx.execute_deferred(
            "UPDATE conversations SET bootstrapped_at = ?2 WHERE conversation_id = ?1 AND bootstrapped_at IS NULL",
            params![cid, now],
        )?;
    }
    // Where the conversation ends, and on PostgreSQL the ids of the rows to come, drawn in the
    // same round trip so that the rows go out without waiting for an id each (SQLite hands
    // each one back at once); and where the batch's entry ids are stored already (the batch's
    // own rows never add to it: a repeated id is caught by `seen`), on PostgreSQL in that
    // round trip too.
    const END: &str = "SELECT (SELECT COALESCE(MAX(seq), 0) FROM messages WHERE conversation_id = ?1),
                              (SELECT COALESCE(MAX(ordinal), -1) FROM context_items WHERE conversation_id = ?1)";
    let entry_ids: Vec<&str> = messages.iter().filter_map(|m| m.entry_id.as_deref()).collect();
    let entry_list = serde_json::to_string(&entry_ids)?;
    let (mut seq, mut ordinal, mut reserved, stored_entries) = match tx {
        Db::Sqlite(_) => {
            let (seq, ordinal) = tx.query_one(END, params![cid], |r| Ok((r.get::<i64>(0)?, r.get::<i64>(1)?)))?;
            let stored_entries: Vec<(String, i64)> = if entry_ids.is_empty() {
                Vec::new()
            } else {
                tx.query_map(
                    &format!(
                        "SELECT transcript_entry_id, seq FROM messages WHERE conversation_id = ?1 AND transcript_entry_id {}",
                        tx.in_texts("?2")
                    ),
                    params![cid, entry_list],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )?
            };
            (seq, ordinal, Vec::new(), stored_entries)
        }
        Db::Pg(_) => tx.query_one(
            &format!(
                "{END}, (SELECT string_agg(CAST(nextval(pg_get_serial_sequence('messages', 'message_id')) AS TEXT), ',')
                         FROM generate_series(1, CAST(?2 AS INTEGER))),
                        (SELECT CAST(json_agg(json_build_array(transcript_entry_id, seq)) AS TEXT) FROM messages
                          WHERE conversation_id = ?1 AND transcript_entry_id {})",
                tx.in_texts("?3")
            ),
            params![cid, messages.len() as i64, entry_list],
            |r| {
                let ids: Option<String> = r.get(2)?;
                let ids = ids.unwrap_or_default();
                let ids = ids.split(',').filter(|i| !i.is_empty()).map(|i| {
                    i.parse::<i64>()
                        .map_err(|e| LcmError::Internal(format!("a message id drawn from the sequence ({i}): {e}")))
                });
                let stored: Option<String> = r.get(3)?;
                let stored: Vec<(String, i64)> = match stored {
                    Some(json) => serde_json::from_str(&json)
                        .map_err(|e| LcmError::Internal(format!("the stored entry ids read back: {e}")))?,
                    None => Vec::new(),
                };
                Ok((r.get(0)?, r.get(1)?, ids.collect::<Result<Vec<i64>>>()?, stored))
            },
        )?,
    };
    reserved.reverse();
    let stored_entries: std::collections::HashMap<String, i64> = stored_entries.into_iter().collect();

    // The batch's rows, one statement a table on PostgreSQL (`Rows`).
    let mut rows = BatchRows::new();
    let mut seen: HashSet<&str> = HashSet::new();
    // The seq of the stored row the next message lines up with, after a message found stored
    // under its entry id: a replayed turn's messages the other engine stored already (from
    // the transcript, ids on some rows or none) are recognised, not stored twice.
    let mut next_stored: Option<i64> = None;
    // Provider keys already given to a message of this batch (see `event_key` below).
    let mut keyed: HashSet<&str> = HashSet::new();
    let (mut inserted, mut skipped) = (0i64, 0i64);
    // Stored messages that ingest redacted, with what was replaced in each.
    let mut redacted: Vec<(i64, super::redactions::IngestRedaction)> = Vec::new();
    let turn = host_turn;
    for m in messages {
        if let Some(entry) = m.entry_id.as_deref() {
            if !seen.insert(entry) {
                skipped += 1;
                continue;
            }
            if let Some(&at) = stored_entries.get(entry) {
                skipped += 1;
                next_stored = Some(at + 1);
                continue;
            }
        }
        if let Some(at) = next_stored.take() {
            // The row there may be one of this batch's (a replay with a gap): sent first, so
            // it is read as SQLite reads it.
            rows.flush(tx)?;
            if already_stored_at(tx, cid, at, m, now)? {
                skipped += 1;
                next_stored = Some(at + 1);
                continue;
            }
        }
        let key = match m.stable_event_key.as_deref() {
            Some(key) if !keyed.insert(key) => None,
            Some(key) => match stored_under_key(tx, cid, key)? {
                None => Some(key),
                // A replay of the transcript (no turn key, no entry id) of a message stored
                // before: the same key and the same message.
                Some(stored) if !turn && m.entry_id.is_none() && is_replay(tx, flags, &stored, m)? => {
                    skipped += 1;
                    continue;
                }
                // Another message under a reused provider id: stored, without the key.
                Some(_) => None,
            },
            None => None,
        };
        seq += 1;
        ordinal += 1;
        let row = params![
            cid,
            seq,
            m.role.db(),
            m.content,
            m.token_count,
            super::normalize::identity_hash(m.role.db(), &m.content),
            m.entry_id,
            key,
            m.created_at.as_deref().unwrap_or(now),
        ];
        let message_id = match reserved.pop() {
            Some(id) => {
                let mut with_id = row.to_vec();
                with_id.push(&id);
                rows.messages.push(tx, &with_id)?;
                id
            }
            None => tx.insert_returning(
                &format!("{INSERT_MESSAGE}) VALUES ({MESSAGE_VALUES})"),
                row,
                "message_id",
            )?,
        };
        for (i, p) in m.parts.iter().enumerate() {
            rows.parts.push(
                tx,
                params![
                    uuid::Uuid::now_v7().to_string(),
                    message_id,
                    conv.session_id,
                    p.part_type,
                    i as i64,
                    p.text_content,
                    p.tool_call_id,
                    p.tool_name,
                    p.tool_input,
                    p.tool_output,
                    p.metadata,
                ],
            )?;
        }
        if !m.content.is_empty() {
            fts_rows.push((message_id, m.content.as_str()));
        }
        // Every message gets its row, an empty one too: no row means "not indexed".
        let kinds = crate::value_kinds::kinds_of(&m.content);
        rows.kinds
            .push(tx, params![message_id, cid, kinds, crate::value_kinds::VERSION])?;
        rows.context.push(tx, params![cid, ordinal, message_id, now])?;
        if let Some(entry) = m.entry_id.as_deref() {
            rows.trust.push(tx, params![message_id, cid, entry, now])?;
        }
        inserted += 1;
        if m.redacted.matches > 0 {
            redacted.push((message_id, m.redacted));
        }
    }
    rows.flush(tx)?;
    if inserted > 0 {
        // Only when the second changed: an unchanged row still costs a page write per commit.
        tx.execute_deferred(
            "UPDATE conversations SET updated_at = ?2 WHERE conversation_id = ?1 AND updated_at <> ?2",
            params![cid, now],
        )?;
    }
    if !redacted.is_empty() && flags.has_versions {
        super::redactions::log_ingest(tx, cid, &redacted)?;
    }
    let late = after_later_turns && inserted > 0;
    if let (Some(key), Some(position)) = (options.advancement_key.as_deref(), options.transcript_position) {
        tx.execute_deferred(
            "INSERT INTO lcm_native_turn_positions (conversation_id, advancement_key, transcript_position, late)
             VALUES (?1, ?2, ?3, ?4)",
            params![cid, key, position, late as i64],
        )?;
    }
    if let (Some(key), Some(turn)) = (options.advancement_key.as_deref(), options.turn.as_ref()) {
        tx.execute_deferred(
            "INSERT OR IGNORE INTO turn_advancements (advancement_key, payload_hash, session_id, session_key,
                                                      admission_entry_id, terminal_entry_id, message_count, committed_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            params![
                key,
                turn.payload_hash,
                turn.session_id,
                turn.session_key,
                turn.admission_entry_id,
                turn.terminal_entry_id,
                inserted,
                now
            ],
        )?;
    }
    Ok(IngestOutcome {
        conversation_id: cid,
        inserted,
        skipped,
        duplicate: false,
        already_bootstrapped: false,
        redacted: redacted.iter().map(|(_, r)| r.matches as i64).sum(),
        late,
    })
}

/// The archived conversation of the same session a turn that `began` before conversation `cid`
/// was created belongs to: the first one archived after the turn began (each `/reset` archives
/// one). None when the turn is not older than `cid`.
fn archived_home(tx: Db, cid: i64, began: &str) -> Result<Option<i64>> {
    let Some(began) = time::parse_timestamp(began) else {
        return Ok(None);
    };
    let current: Option<(String, Option<String>)> = tx.query_row(
        "SELECT created_at, session_key FROM conversations WHERE conversation_id = ?1",
        params![cid],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    let Some((created, Some(session_key))) = current else {
        return Ok(None);
    };
    if time::parse_timestamp(&created).is_none_or(|created| began >= created) {
        return Ok(None);
    }
    let mut home: Option<(chrono::DateTime<chrono::Utc>, i64)> = None;
    tx.query_each(
        "SELECT conversation_id, archived_at FROM conversations
         WHERE session_key = ?1 AND conversation_id <> ?2 AND archived_at IS NOT NULL",
        params![session_key, cid],
        |r| {
            let (id, archived): (i64, String) = (r.get(0)?, r.get(1)?);
            if let Some(at) = time::parse_timestamp(&archived).filter(|at| *at >= began) {
                if home.is_none_or(|(first, _)| at < first) {
                    home = Some((at, id));
                }
            }
            Ok(true)
        },
    )?;
    Ok(home.map(|(_, id)| id))
}

/// Whether the conversation's row at `seq` is `m` already: the same role and content, and no
/// other transcript entry's. A row without an entry id takes `m`'s (lossless-claw stores the
/// turns it commits without one and ties them to the transcript later).
fn already_stored_at(tx: Db, cid: i64, seq: i64, m: &NewMessage, now: &str) -> Result<bool> {
    let row: Option<(i64, String, String, Option<String>)> = tx.query_row(
        "SELECT message_id, role, content, transcript_entry_id FROM messages WHERE conversation_id = ?1 AND seq = ?2",
        params![cid, seq],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
    )?;
    let Some((message_id, role, content, entry)) = row else {
        return Ok(false);
    };
    if role != m.role.db() || content != m.content {
        return Ok(false);
    }
    match (entry.as_deref(), m.entry_id.as_deref()) {
        (Some(stored), Some(given)) => Ok(stored == given),
        (None, Some(given)) => {
            tx.execute(
                "UPDATE messages SET transcript_entry_id = ?2 WHERE message_id = ?1",
                params![message_id, given],
            )?;
            trust_entry_id(tx, cid, message_id, given, now)?;
            Ok(true)
        }
        (_, None) => Ok(true),
    }
}

/// Records in lossless-claw 1.x's trust table that `message_id` is the host's transcript entry
/// `entry`, as it records the ids it imports: its reconcile then ties the row to the entry
/// instead of storing the entry again.
fn trust_entry_id(tx: Db, cid: i64, message_id: i64, entry: &str, now: &str) -> Result<()> {
    let mut rows = trust_rows();
    rows.push(tx, params![message_id, cid, entry, now])?;
    rows.flush(tx)
}

/// A batch's rows of each table it writes, waiting on PostgreSQL (`Rows`).
struct BatchRows {
    messages: Rows,
    parts: Rows,
    context: Rows,
    trust: Rows,
    kinds: Rows,
}

impl BatchRows {
    fn new() -> BatchRows {
        BatchRows {
            messages: Rows::new(format!("{INSERT_MESSAGE}, message_id) VALUES"), MESSAGE_ROW, "", 10),
            parts: Rows::new(
                "INSERT INTO message_parts (part_id, message_id, session_id, part_type, ordinal, text_content,
                                            tool_call_id, tool_name, tool_input, tool_output, metadata) VALUES",
                "(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
                "",
                11,
            ),
            context: Rows::new(
                "INSERT INTO context_items (conversation_id, ordinal, item_type, message_id, created_at) VALUES",
                "(?1, ?2, 'message', ?3, ?4)",
                "",
                4,
            ),
            trust: trust_rows(),
            kinds: Rows::new(
                "INSERT INTO lcm_native_message_kinds (message_id, conversation_id, kinds, version) VALUES",
                "(?1, ?2, ?3, ?4)",
                " ON CONFLICT (message_id) DO UPDATE SET conversation_id = excluded.conversation_id,
                   kinds = excluded.kinds, version = excluded.version",
                4,
            ),
        }
    }

    /// Sends what waits, parent rows first: the parts, context items, trust and kinds rows
    /// name their message.
    fn flush(&mut self, tx: Db) -> Result<()> {
        for rows in [
            &mut self.messages,
            &mut self.parts,
            &mut self.context,
            &mut self.trust,
            &mut self.kinds,
        ] {
            rows.flush(tx)?;
        }
        Ok(())
    }
}

/// Rows saying a message's transcript entry id is the host's own (message id, conversation,
/// entry id, time).
fn trust_rows() -> Rows {
    Rows::new(
        "INSERT INTO message_transcript_anchor_trust (message_id, conversation_id, transcript_entry_id, trust_state,
                                                     source, reason, verified_at, created_at, updated_at) VALUES",
        "(?1, ?2, ?3, 'verified', 'lcm-native', 'stored with the entry id the host gave for it', ?4, ?4, ?4)",
        " ON CONFLICT (message_id) DO UPDATE SET transcript_entry_id = excluded.transcript_entry_id,
           trust_state = 'verified', source = excluded.source, reason = excluded.reason,
           verified_at = excluded.verified_at, updated_at = excluded.updated_at",
        4,
    )
}

/// One `message_parts` row as read back. `metadata` is kept as its JSON text: the assembler
/// only needs a few of its fields and the original block's text (`metadata_view`), which it
/// reads without building a tree of the whole; `metadata()` parses it on first use.
#[derive(Debug, Clone, Default)]
pub(crate) struct StoredPart {
    pub part_id: String,
    pub part_type: String,
    pub text_content: Option<String>,
    pub tool_call_id: Option<String>,
    pub tool_name: Option<String>,
    pub tool_input: Option<String>,
    pub tool_output: Option<String>,
    metadata_text: Option<String>,
    metadata: std::cell::OnceCell<Option<Value>>,
    /// A column held bytes that are not UTF-8 (read with U+FFFD).
    pub damaged: bool,
}

/// The fields of a part's metadata that rebuilding a message reads, borrowed from its text.
/// Each is left as JSON text so that a field of an unexpected type reads as absent instead of
/// failing the whole view.
#[derive(Debug, Default, serde::Deserialize)]
pub(crate) struct MetadataView<'a> {
    #[serde(borrow, default)]
    raw: Option<&'a serde_json::value::RawValue>,
    #[serde(borrow, default, rename = "originalRole")]
    original_role: Option<&'a serde_json::value::RawValue>,
    #[serde(borrow, default, rename = "toolName")]
    tool_name: Option<&'a serde_json::value::RawValue>,
    #[serde(borrow, default, rename = "toolCallId")]
    tool_call_id: Option<&'a serde_json::value::RawValue>,
    #[serde(borrow, default, rename = "isError")]
    is_error: Option<&'a serde_json::value::RawValue>,
    #[serde(borrow, default, rename = "rawType")]
    raw_type: Option<&'a serde_json::value::RawValue>,
    /// The host message's own fields (`normalize::HostFields`).
    #[serde(borrow, default, rename = "messageTimestamp")]
    pub(crate) message_timestamp: Option<&'a serde_json::value::RawValue>,
    #[serde(borrow, default, rename = "openclawMeta")]
    pub(crate) openclaw_meta: Option<&'a serde_json::value::RawValue>,
    #[serde(borrow, default, rename = "modelProvider")]
    model_provider: Option<&'a serde_json::value::RawValue>,
    #[serde(borrow, default, rename = "modelApi")]
    model_api: Option<&'a serde_json::value::RawValue>,
    #[serde(borrow, default, rename = "modelId")]
    model_id: Option<&'a serde_json::value::RawValue>,
    #[serde(borrow, default, rename = "responseModelId")]
    response_model_id: Option<&'a serde_json::value::RawValue>,
    #[serde(borrow, default, rename = "stopReason")]
    stop_reason: Option<&'a serde_json::value::RawValue>,
}

/// The message holding a provider key in a conversation.
struct Keyed {
    id: i64,
    role: String,
    content: String,
}

/// The message holding `key` in conversation `cid`. Keys are unique per conversation
/// (lossless-claw's partial unique index), but providers reuse ids (Ollama answers
/// `chatcmpl-<n>` with n below 1000; a restarted local server starts over), so a key never
/// decides alone that a message is a duplicate: the second message with a key already held is
/// stored without it.
fn stored_under_key(tx: Db, cid: i64, key: &str) -> Result<Option<Keyed>> {
    tx.query_row(
        "SELECT message_id, role, content FROM messages WHERE conversation_id = ?1 AND stable_event_key = ?2",
        params![cid, key],
        |r| {
            Ok(Keyed {
                id: r.get(0)?,
                role: r.get(1)?,
                content: r.get(2)?,
            })
        },
    )
}

/// Whether `m`, arriving without a turn key or an entry id, is a replay of `stored`, which
/// holds its provider key: the same role, text and tool calls (ids and arguments: a reply that
/// only calls a tool has no text). A stored message a redaction changed cannot be compared by
/// its text: its key says it.
fn is_replay(tx: Db, flags: SchemaFlags, stored: &Keyed, m: &NewMessage) -> Result<bool> {
    if stored.role != m.role.db() {
        return Ok(false);
    }
    if flags.has_versions && redacted(tx, stored.id)? {
        // Its text had matches replaced: the original fits it with each replacement standing
        // for any text, and a text that does not fit is another message under a reused provider
        // id (stored, not dropped). A replacement the text does not show (another one than
        // lcm-native's marker, or only in tool arguments) cannot be told apart: the message is
        // taken for the original, so that a redacted secret is never stored again in clear.
        let marker = super::redactions::INGEST_REPLACEMENT;
        return Ok(!stored.content.contains(marker) || fits_redacted(&stored.content, &m.content, marker));
    }
    if stored.content != m.content {
        return Ok(false);
    }
    let calls: Vec<(Option<String>, Option<String>)> = tx.query_map(
        "SELECT tool_call_id, tool_input FROM message_parts
          WHERE message_id = ?1 AND (tool_call_id IS NOT NULL OR tool_input IS NOT NULL) ORDER BY ordinal",
        params![stored.id],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    let incoming = m
        .parts
        .iter()
        .filter(|p| p.tool_call_id.is_some() || p.tool_input.is_some())
        .map(|p| (p.tool_call_id.as_deref(), p.tool_input.as_deref()));
    Ok(calls
        .iter()
        .map(|(id, input)| (id.as_deref(), input.as_deref()))
        .eq(incoming))
}

/// Whether `text` is what `redacted` was before each `marker` in it replaced some text: the
/// pieces between the markers appear in `text` in order, the first at its start and the last
/// at its end.
fn fits_redacted(redacted: &str, text: &str, marker: &str) -> bool {
    let pieces: Vec<&str> = redacted.split(marker).collect();
    let (first, last) = (pieces[0], pieces[pieces.len() - 1]);
    if pieces.len() == 1 {
        return redacted == text;
    }
    if text.len() < first.len() + last.len() || !text.starts_with(first) || !text.ends_with(last) {
        return false;
    }
    let mut rest = &text[first.len()..text.len() - last.len()];
    for piece in &pieces[1..pieces.len() - 1] {
        match rest.find(piece) {
            Some(at) => rest = &rest[at + piece.len()..],
            None => return false,
        }
    }
    true
}

/// Whether a redaction (the operator's or at ingest) changed message `id`.
fn redacted(tx: Db, id: i64) -> Result<bool> {
    Ok(tx
        .query_row(
            "SELECT 1 FROM lcm_native_redactions
              WHERE (',' || substr(message_ids, 2, length(message_ids) - 2) || ',') LIKE ?1 LIMIT 1",
            params![format!("%,{id},%")],
            |_| Ok(()),
        )?
        .is_some())
}

/// The string a JSON value holds, `None` for any other value. Borrowed when it has no escape.
pub(crate) fn json_str(raw: Option<&serde_json::value::RawValue>) -> Option<std::borrow::Cow<'_, str>> {
    let text = raw?.get();
    // Valid JSON (a RawValue always is): a string is its quotes around its content.
    let inner = text.strip_prefix('"')?.strip_suffix('"')?;
    if !inner.contains('\\') {
        return Some(std::borrow::Cow::Borrowed(inner));
    }
    serde_json::from_str::<String>(text).ok().map(std::borrow::Cow::Owned)
}

impl<'a> MetadataView<'a> {
    /// The original block's JSON text, when the writer kept it and it is an object.
    pub(crate) fn raw(&self) -> Option<&'a serde_json::value::RawValue> {
        self.raw.filter(|r| r.get().starts_with('{'))
    }
    pub(crate) fn original_role(&self) -> Option<std::borrow::Cow<'a, str>> {
        json_str(self.original_role)
    }
    pub(crate) fn tool_name(&self) -> Option<std::borrow::Cow<'a, str>> {
        json_str(self.tool_name)
    }
    pub(crate) fn tool_call_id(&self) -> Option<std::borrow::Cow<'a, str>> {
        json_str(self.tool_call_id)
    }
    pub(crate) fn raw_type(&self) -> Option<std::borrow::Cow<'a, str>> {
        json_str(self.raw_type)
    }
    pub(crate) fn is_error(&self) -> Option<bool> {
        match self.is_error.map(|r| r.get()) {
            Some("true") => Some(true),
            Some("false") => Some(false),
            _ => None,
        }
    }
    /// The model that wrote an assistant message: provider, api, model and the model the
    /// provider answered with, as lossless-claw 1.x records them.
    pub(crate) fn model_identity(&self) -> [Option<std::borrow::Cow<'a, str>>; 4] {
        [
            self.model_provider,
            self.model_api,
            self.model_id,
            self.response_model_id,
        ]
        .map(json_str)
    }
    pub(crate) fn stop_reason(&self) -> Option<std::borrow::Cow<'a, str>> {
        json_str(self.stop_reason)
    }
}

impl StoredPart {
    /// A part from its columns (`folded` reads them its own way).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        part_id: String,
        part_type: String,
        text_content: Option<String>,
        tool_call_id: Option<String>,
        tool_name: Option<String>,
        tool_input: Option<String>,
        tool_output: Option<String>,
        metadata_text: Option<String>,
        damaged: bool,
    ) -> StoredPart {
        StoredPart {
            part_id,
            part_type,
            text_content,
            tool_call_id,
            tool_name,
            tool_input,
            tool_output,
            metadata_text,
            metadata: Default::default(),
            damaged,
        }
    }

    /// The part's metadata, parsed on first use (`None` when absent or not JSON).
    pub(crate) fn metadata(&self) -> Option<&Value> {
        self.metadata
            .get_or_init(|| self.metadata_text.as_deref().and_then(|m| serde_json::from_str(m).ok()))
            .as_ref()
    }

    /// The fields of the metadata that rebuilding the message reads, without parsing the rest
    /// into values (empty when absent or unreadable).
    pub(crate) fn metadata_view(&self) -> MetadataView<'_> {
        self.metadata_text
            .as_deref()
            .and_then(|m| serde_json::from_str(m).ok())
            .unwrap_or_default()
    }

    /// The original content block, when the writer kept it (`metadata.raw`).
    pub(crate) fn raw(&self) -> Option<&Value> {
        self.metadata().and_then(|m| m.get("raw")).filter(|r| r.is_object())
    }

    pub(crate) fn meta_str(&self, key: &str) -> Option<&str> {
        self.metadata().and_then(|m| m.get(key)).and_then(Value::as_str)
    }
}

/// Content blocks of a message rebuilt from its parts. A part that kept its original block
/// gives it back verbatim; older rows (written without `raw`) are rebuilt from their columns.
pub(crate) fn rebuild_blocks(parts: &[StoredPart]) -> Vec<Value> {
    parts.iter().map(rebuild_block).collect()
}

fn rebuild_block(p: &StoredPart) -> Value {
    match p.raw() {
        Some(raw) => raw.clone(),
        None => block_from_columns(p),
    }
}

/// The block of a part written without its original (`metadata.raw`), from its columns.
pub(crate) fn block_from_columns(p: &StoredPart) -> Value {
    let text = |t: &str| serde_json::json!({ "type": "text", "text": t });
    match p.part_type.as_str() {
        "text" => text(p.text_content.as_deref().unwrap_or("")),
        "reasoning" => serde_json::json!({ "type": "thinking", "thinking": p.text_content.as_deref().unwrap_or("") }),
        "tool" => {
            if let (Some(id), Some(name)) = (&p.tool_call_id, &p.tool_name) {
                if let Some(input) = &p.tool_input {
                    let args = serde_json::from_str::<Value>(input).unwrap_or_else(|_| Value::from(input.as_str()));
                    return serde_json::json!({ "type": "toolCall", "id": id, "name": name, "arguments": args });
                }
            }
            if let Some(out) = &p.tool_output {
                if let Ok(v @ Value::Object(_)) = serde_json::from_str::<Value>(out) {
                    return v;
                }
            }
            match (&p.text_content, &p.tool_output, &p.tool_input) {
                (Some(t), _, _) => text(t),
                (None, Some(o), _) => text(o),
                (None, None, Some(i)) => text(i),
                _ => text(""),
            }
        }
        _ => match (&p.text_content, p.metadata()) {
            (Some(t), _) => text(t),
            (None, Some(m)) => text(&m.to_string()),
            _ => text(""),
        },
    }
}

/// The message's content as the host gave it: a string when it was stored from a string
/// (a single text part without `raw`), otherwise the array of blocks.
pub(crate) fn stored_content(role: Role, content_text: &str, parts: &[StoredPart]) -> Value {
    match parts {
        [] => {
            // String content always has a part, so a message with none was ingested as an
            // empty array (or written without parts by an older plugin, with its text here).
            if content_text.is_empty() {
                Value::Array(vec![])
            } else if role == Role::User || role == Role::System {
                Value::from(content_text)
            } else {
                Value::Array(vec![serde_json::json!({ "type": "text", "text": content_text })])
            }
        }
        // String content: one text part kept without a block type.
        [only] if only.part_type == "text" && only.raw().is_none() && only.meta_str("rawType").is_none() => {
            Value::from(only.text_content.clone().unwrap_or_else(|| content_text.to_string()))
        }
        _ => Value::Array(rebuild_blocks(parts)),
    }
}

/// A text of a message that came back cut (an entry of `StoredMessage.folded`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[cfg_attr(test, ts(rename = "FoldedText"))]
#[serde(rename_all = "camelCase")]
pub struct FoldedText {
    /// The content block it is in (its index in `content`); null when `content` is a string.
    pub block: Option<usize>,
    /// Where in the block (a JSON Pointer: `/text`, `/thinking`, `/arguments/command`); `""`
    /// for a string `content`.
    pub path: String,
    /// Its length in characters (Unicode code points); what is shown is its first `maxChars`.
    pub chars: u64,
}

/// A stored message, its content rebuilt from its parts exactly as it was ingested.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct StoredMessage {
    pub message_id: i64,
    pub seq: i64,
    #[cfg_attr(test, ts(type = "\"user\" | \"assistant\" | \"toolResult\" | \"system\""))]
    pub role: &'static str,
    #[cfg_attr(test, ts(type = "string | ContentBlock[]"))]
    pub content: Value,
    /// ISO-8601 UTC.
    pub created_at: String,
    pub token_count: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub tool_call_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub entry_id: Option<String>,
    /// `true` when its stored text held bytes that are not UTF-8 (a damaged file): shown with
    /// U+FFFD where they could not be decoded (`verify` names the message). Absent when sound.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub damaged: Option<bool>,
    /// Read with `maxChars`: the texts of `content` that were longer, each cut to its first
    /// `maxChars` characters, with its length (`messageText` pages through one). Absent when
    /// nothing was cut.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(test, ts(optional))]
    pub folded: Option<Vec<FoldedText>>,
}

/// The tool call a toolResult answers: the parts' column, else what the metadata kept.
pub(crate) fn tool_call_id_of(parts: &[StoredPart]) -> Option<String> {
    parts
        .iter()
        .find_map(|p| p.tool_call_id.clone())
        .or_else(|| parts.iter().find_map(|p| p.meta_str("toolCallId").map(str::to_string)))
        .or_else(|| {
            parts.iter().find_map(|p| {
                p.raw()
                    .and_then(|r| r.get("toolCallId").or_else(|| r.get("tool_call_id")))
                    .and_then(Value::as_str)
                    .map(str::to_string)
            })
        })
}

/// Parts of the given messages, grouped in `ids` order (one query, not one per message).
pub(crate) fn load_parts<'a>(db: impl Into<Db<'a>>, message_ids: &[i64]) -> Result<Vec<Vec<StoredPart>>> {
    let db = db.into();
    let mut out: Vec<Vec<StoredPart>> = vec![Vec::new(); message_ids.len()];
    if message_ids.is_empty() {
        return Ok(out);
    }
    let index: std::collections::HashMap<i64, usize> = message_ids.iter().enumerate().map(|(i, id)| (*id, i)).collect();
    let ids_json = serde_json::to_string(message_ids)?;
    const COLUMNS: &str = "SELECT p.message_id, p.part_id, p.part_type, p.text_content, p.tool_call_id, p.tool_name,
                                  p.tool_input, p.tool_output, p.metadata, p.ordinal";
    let sql = match db {
        Db::Sqlite(_) => format!(
            "{COLUMNS} FROM {} j JOIN message_parts p ON p.message_id = j.value",
            db.id_list("?1")
        ),
        // Not a join: PostgreSQL guessed a join of a list with parts (many a message) at
        // thousands of rows and hashed every part of the schema (2 ms at 14k parts, growing).
        Db::Pg(_) => format!("{COLUMNS} FROM message_parts p WHERE p.message_id {}", db.in_ids("?1")),
    };
    // No ORDER BY: it made SQLite copy every row through a temporary B-tree. Each message's
    // parts are ordered here instead (the (message_id, ordinal) index usually did it already).
    let mut ordinals: Vec<Vec<i64>> = vec![Vec::new(); message_ids.len()];
    db.query_each(&sql, params![ids_json], |r| {
        let lossy = crate::sql::lossy_reads();
        let mid: i64 = r.get(0)?;
        let metadata: Option<String> = r.get(8)?;
        let ordinal: i64 = r.get(9)?;
        let mut part = StoredPart {
            part_id: r.get(1)?,
            part_type: r.get(2)?,
            text_content: r.get(3)?,
            tool_call_id: r.get(4)?,
            tool_name: r.get(5)?,
            tool_input: r.get(6)?,
            tool_output: r.get(7)?,
            metadata_text: metadata,
            metadata: Default::default(),
            damaged: false,
        };
        part.damaged = crate::sql::lossy_reads() != lossy;
        if let Some(&i) = index.get(&mid) {
            out[i].push(part);
            ordinals[i].push(ordinal);
        }
        Ok(true)
    })?;
    for (parts, ords) in out.iter_mut().zip(&ordinals) {
        if !ords.is_sorted() {
            let mut paired: Vec<(i64, StoredPart)> = ords.iter().copied().zip(parts.drain(..)).collect();
            paired.sort_by_key(|(o, _)| *o);
            parts.extend(paired.into_iter().map(|(_, p)| p));
        }
    }
    Ok(out)
}

/// A `messages` row's columns but its content, first in the SELECT of `stored` and of
/// `store::folded` (which reads the content its own way), in `MessageRow::read`'s order.
pub(crate) const MESSAGE_COLUMNS: &str =
    "m.message_id, m.seq, m.role, m.created_at, m.token_count, m.transcript_entry_id";

/// A `messages` row as read for a `StoredMessage`, but its content.
pub(crate) struct MessageRow {
    id: i64,
    seq: i64,
    role: String,
    created_at: String,
    tokens: i64,
    entry: Option<String>,
    /// Whether any column of the row (the content too) was read with U+FFFD.
    damaged: bool,
}

impl MessageRow {
    /// `MESSAGE_COLUMNS`, then what `rest` reads of the columns after them (from the index it
    /// is given).
    pub(crate) fn read<T>(
        r: &crate::sql::Row,
        rest: impl FnOnce(&crate::sql::Row, usize) -> Result<T>,
    ) -> Result<(MessageRow, T)> {
        let lossy = crate::sql::lossy_reads();
        let mut row = MessageRow {
            id: r.get(0)?,
            seq: r.get(1)?,
            role: r.get(2)?,
            created_at: r.get(3)?,
            tokens: r.get(4)?,
            entry: r.get(5)?,
            damaged: false,
        };
        let rest = rest(r, 6)?;
        row.damaged = crate::sql::lossy_reads() != lossy;
        Ok((row, rest))
    }

    pub(crate) fn id(&self) -> i64 {
        self.id
    }

    /// The message, its content rebuilt from `content` (the column's text) and its parts.
    pub(crate) fn into_stored(self, content: &str, parts: &[StoredPart]) -> StoredMessage {
        let role = Role::from_db(&self.role);
        StoredMessage {
            message_id: self.id,
            seq: self.seq,
            role: role.host(),
            content: stored_content(role, content, parts),
            created_at: time::iso_or_raw(self.created_at),
            token_count: self.tokens,
            tool_call_id: if role == Role::ToolResult {
                tool_call_id_of(parts)
            } else {
                None
            },
            entry_id: self.entry,
            damaged: (self.damaged || parts.iter().any(|p| p.damaged)).then_some(true),
            folded: None,
        }
    }
}

/// Messages of a conversation in order, from `after_seq` (exclusive), at most `limit`.
pub(crate) fn list<'a>(
    db: impl Into<Db<'a>>,
    conversation_id: i64,
    after_seq: i64,
    limit: i64,
) -> Result<Vec<StoredMessage>> {
    let db = db.into();
    conversations::get(db, conversation_id)?;
    let sql = format!(
        "SELECT {MESSAGE_COLUMNS}, m.content FROM messages m WHERE m.conversation_id = ?1 AND m.seq > ?2 ORDER BY m.seq LIMIT ?3"
    );
    stored(db, &sql, params![conversation_id, after_seq, limit])
}

/// The messages with these ids (those that exist), in the order given.
pub(crate) fn by_ids<'a>(db: impl Into<Db<'a>>, ids: &[i64]) -> Result<Vec<StoredMessage>> {
    let db = db.into();
    let sql = format!(
        "SELECT {MESSAGE_COLUMNS}, m.content FROM {} j JOIN messages m ON m.message_id = j.value ORDER BY j.key",
        db.id_list("?1")
    );
    stored(db, &sql, params![serde_json::to_string(ids)?])
}

/// Runs a query selecting `MESSAGE_COLUMNS` and the content, and rebuilds each message with
/// its parts.
fn stored(db: Db, sql: &str, args: &[&dyn rusqlite::ToSql]) -> Result<Vec<StoredMessage>> {
    let rows: Vec<(MessageRow, String)> = db.query_map(sql, args, |r| MessageRow::read(r, |r, at| r.get(at)))?;
    let ids: Vec<i64> = rows.iter().map(|(r, _)| r.id).collect();
    let parts = load_parts(db, &ids)?;
    Ok(rows
        .into_iter()
        .zip(parts)
        .map(|((r, content), parts)| r.into_stored(&content, &parts))
        .collect())
}

/// A message's role, text and time, as a source text shows it.
pub(crate) struct MessageText {
    pub role: String,
    pub content: String,
    pub created_at: String,
    pub token_count: i64,
}

/// Role, text, time and tokens of each of `message_ids` that exists (one query).
pub(crate) fn texts<'a>(
    db: impl Into<Db<'a>>,
    message_ids: &[i64],
) -> Result<std::collections::HashMap<i64, MessageText>> {
    let db = db.into();
    let mut out = std::collections::HashMap::with_capacity(message_ids.len());
    let sql = format!(
        "SELECT m.message_id, m.role, m.content, m.created_at, m.token_count
         FROM {} j JOIN messages m ON m.message_id = j.value",
        db.id_list("?1")
    );
    db.query_each(&sql, params![serde_json::to_string(message_ids)?], |r| {
        let text = MessageText {
            role: r.get(1)?,
            content: r.get(2)?,
            created_at: r.get(3)?,
            token_count: r.get(4)?,
        };
        out.insert(r.get(0)?, text);
        Ok(true)
    })?;
    Ok(out)
}

/// Role and `content` of each of `message_ids` that exists, for rebuilding it from its parts:
/// `content` repeats the text of the parts, so it is read (copied out) only when no part has
/// text (no parts, or one part written without it); else it is empty.
pub(crate) fn roles_for_rebuild<'a>(
    db: impl Into<Db<'a>>,
    message_ids: &[i64],
) -> Result<std::collections::HashMap<i64, (String, String)>> {
    let db = db.into();
    let mut out = std::collections::HashMap::with_capacity(message_ids.len());
    let sql = format!(
        "SELECT m.message_id, m.role,
                CASE WHEN EXISTS (SELECT 1 FROM message_parts p
                                  WHERE p.message_id = m.message_id AND p.text_content IS NOT NULL)
                     THEN '' ELSE m.content END
         FROM {} j JOIN messages m ON m.message_id = j.value",
        db.id_list("?1")
    );
    db.query_each(&sql, params![serde_json::to_string(message_ids)?], |r| {
        out.insert(r.get(0)?, (r.get(1)?, r.get(2)?));
        Ok(true)
    })?;
    Ok(out)
}

/// `(message_id, conversation_id)` of those of `message_ids` that exist.
pub(crate) fn conversations_of<'a>(db: impl Into<Db<'a>>, message_ids: &[i64]) -> Result<Vec<(i64, i64)>> {
    let db = db.into();
    db.query_map(
        &format!(
            "SELECT message_id, conversation_id FROM messages WHERE message_id {}",
            db.in_ids("?1")
        ),
        params![serde_json::to_string(message_ids)?],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
}

/// The text columns of `message_parts` that can hold what a user or a tool wrote.
const PART_TEXT_COLUMNS: &[&str] = crate::db::schema::PART_TEXT_COLUMNS;

/// A stored text `edit_texts` offers for change: a message's `content`, or one text column of
/// one of its parts.
pub(crate) enum StoredText<'a> {
    Content(&'a str),
    PartColumn(&'a str),
}

/// What `edit_texts` changed: the messages (in id order) and how many parts.
pub(crate) struct TextEdits {
    pub messages: Vec<i64>,
    pub parts: usize,
}

/// Offers every stored text of the messages of `conversations` (a JSON array of ids; only the
/// ids of `only` when given) to `edit`, and writes back each text it replaces, with the
/// message's full-text row: the operator's redaction, in the caller's transaction.
pub(crate) fn edit_texts(
    tx: Db,
    conversations: &str,
    only: Option<&str>,
    mut edit: impl FnMut(StoredText<'_>) -> Option<String>,
) -> Result<TextEdits> {
    // Read in batches by id (PostgreSQL's client holds a result whole; a large history must
    // not be held at once), each message's parts with it.
    let select = format!(
        "SELECT message_id, content FROM messages
         WHERE conversation_id {}
           AND (CAST(?2 AS TEXT) IS NULL OR message_id {})
           AND message_id > ?3
         ORDER BY message_id LIMIT {EDIT_BATCH}",
        tx.in_ids("?1"),
        tx.in_ids("?2"),
    );
    let parts_sql = format!(
        "SELECT part_id, {} FROM message_parts WHERE message_id = ?1",
        PART_TEXT_COLUMNS.join(", ")
    );
    let mut edited = Vec::new();
    let mut edited_parts = 0;
    let mut after = 0i64;
    loop {
        let batch: Vec<(i64, String)> = tx.query_map(&select, params![conversations, only, after], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })?;
        let Some((last, _)) = batch.last() else { break };
        after = *last;
        for (id, content) in batch {
            edit_message(tx, id, content, &parts_sql, &mut edit, &mut edited, &mut edited_parts)?;
        }
    }
    Ok(TextEdits {
        messages: edited,
        parts: edited_parts,
    })
}

/// Messages `edit_texts` reads per statement.
const EDIT_BATCH: usize = 500;

/// One message of `edit_texts`: its content and its parts' text columns offered to `edit`,
/// what it replaces written back (with the message's full-text row on SQLite; PostgreSQL's
/// words column follows its content by itself).
fn edit_message(
    tx: Db,
    id: i64,
    content: String,
    parts_sql: &str,
    edit: &mut impl FnMut(StoredText<'_>) -> Option<String>,
    edited: &mut Vec<i64>,
    edited_parts: &mut usize,
) -> Result<()> {
    {
        let new_content = edit(StoredText::Content(&content));
        if let Some(new) = &new_content {
            tx.execute(
                "UPDATE messages SET content = ?2 WHERE message_id = ?1",
                params![id, new],
            )?;
            // Its kinds of value follow its text (a message never indexed stays so).
            tx.execute(
                "UPDATE lcm_native_message_kinds SET kinds = ?2, version = ?3 WHERE message_id = ?1",
                params![id, crate::value_kinds::kinds_of(new), crate::value_kinds::VERSION],
            )?;
        }
        let stored: Vec<(String, Vec<Option<String>>)> = tx.query_map(parts_sql, params![id], |r| {
            let values = (1..=PART_TEXT_COLUMNS.len()).map(|i| r.get(i)).collect::<Result<_>>()?;
            Ok((r.get(0)?, values))
        })?;
        let mut part_changed = false;
        for (part_id, values) in stored {
            let sets: Vec<(&str, String)> = PART_TEXT_COLUMNS
                .iter()
                .zip(values)
                .filter_map(|(column, value)| Some((*column, edit(StoredText::PartColumn(value.as_deref()?))?)))
                .collect();
            if sets.is_empty() {
                continue;
            }
            let assignments: Vec<String> = sets
                .iter()
                .enumerate()
                .map(|(i, (c, _))| format!("{c} = ?{}", i + 2))
                .collect();
            let sql = format!("UPDATE message_parts SET {} WHERE part_id = ?1", assignments.join(", "));
            let mut args: Vec<&dyn rusqlite::ToSql> = vec![&part_id];
            args.extend(sets.iter().map(|(_, v)| v as &dyn rusqlite::ToSql));
            tx.execute(&sql, args.as_slice())?;
            *edited_parts += 1;
            part_changed = true;
        }
        if new_content.is_some() || part_changed {
            let content = new_content.unwrap_or(content);
            if let Db::Sqlite(conn) = tx {
                conn.execute("DELETE FROM messages_fts WHERE rowid = ?1", [id])?;
                if !content.is_empty() {
                    conn.execute(
                        "INSERT INTO messages_fts (rowid, content) VALUES (?1, ?2)",
                        params![id, content],
                    )?;
                }
            }
            edited.push(id);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use rusqlite::Connection;
    use serde_json::json;

    use super::*;
    use crate::store::normalize::normalize;

    #[test]
    fn a_text_fits_its_redacted_form_with_each_marker_standing_for_any_text() {
        let m = "[REDACTED]";
        assert!(fits_redacted("key sk-1 here", "key sk-1 here", m));
        assert!(!fits_redacted("key sk-1 here", "key sk-2 here", m));
        assert!(fits_redacted("[REDACTED]", "anything at all", m));
        assert!(fits_redacted("key [REDACTED] here", "key sk-123 here", m));
        assert!(fits_redacted("key [REDACTED] here", "key  here", m));
        assert!(!fits_redacted("key [REDACTED] here", "another reply", m));
        assert!(fits_redacted("a [REDACTED] b [REDACTED] c", "a 1 b 2 b 3 c", m));
        assert!(!fits_redacted("a [REDACTED] b [REDACTED] c", "a 1 c", m));
        // The start and the end may not share text.
        assert!(!fits_redacted("ab[REDACTED]ba", "aba", m));
        assert!(fits_redacted("é[REDACTED]ü", "éxü", m));
    }

    fn setup() -> (tempfile::TempDir, String, Connection, SchemaFlags) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.db").to_string_lossy().into_owned();
        let mut conn = crate::db::open_connection(&path, 100).unwrap();
        crate::db::migrate::migrate(&mut conn, &path).unwrap();
        let flags = SchemaFlags::read(&conn).unwrap();
        (dir, path, conn, flags)
    }

    fn one(text: &str) -> Vec<NewMessage> {
        vec![normalize(0, &json!({"role": "user", "content": text})).unwrap()]
    }

    #[test]
    fn a_failing_job_fails_alone_and_the_others_commit_together() {
        let (_dir, _path, mut conn, flags) = setup();
        let (a, b, c) = (one("a"), one("b"), one("c"));
        let (s, missing) = (Target::Session("s".into()), Target::Conversation(999));
        let o = IngestMode::default();
        let jobs = [
            IngestJob {
                target: &s,
                messages: &a,
                mode: &o,
            },
            IngestJob {
                target: &missing,
                messages: &b,
                mode: &o,
            },
            IngestJob {
                target: &s,
                messages: &c,
                mode: &o,
            },
        ];
        let results = ingest_group(|f| crate::sql::in_transaction(&mut conn, f), flags, &jobs, &|_, _| {});
        assert!(results[0].is_ok() && results[2].is_ok());
        assert_eq!(results[1].as_ref().unwrap_err().code(), "E_NOT_FOUND");
        let texts: Vec<String> = conn
            .prepare("SELECT content FROM messages ORDER BY seq")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(|r| r.unwrap())
            .collect();
        assert_eq!(texts, ["a", "c"]);
    }

    /// What rides after the jobs runs in their transaction, once, when they are written: after
    /// a job of its own failed, on the attempt that commits.
    #[test]
    fn what_rides_after_the_jobs_commits_with_them_once() {
        let (_dir, _path, mut conn, flags) = setup();
        let (a, b, c) = (one("a"), one("b"), one("c"));
        let (s, missing) = (Target::Session("s".into()), Target::Conversation(999));
        let o = IngestMode::default();
        let jobs = [(&s, &a), (&missing, &b), (&s, &c)].map(|(target, messages)| IngestJob {
            target,
            messages,
            mode: &o,
        });
        let calls = std::cell::Cell::new(0);
        let after = |db: Db, outcomes: &[IngestOutcome]| {
            calls.set(calls.get() + 1);
            let n = outcomes.len() as i64;
            db.execute("CREATE TABLE rode (n INTEGER)", params![]).unwrap();
            db.execute("INSERT INTO rode (n) VALUES (?1)", params![n]).unwrap();
        };
        let results = ingest_group(|f| crate::sql::in_transaction(&mut conn, f), flags, &jobs, &after);
        assert_eq!(results.iter().filter(|r| r.is_ok()).count(), 2);
        assert_eq!(calls.get(), 1);
        let rode: i64 = conn.query_row("SELECT n FROM rode", [], |r| r.get(0)).unwrap();
        assert_eq!(rode, 2);
    }

    /// A database another connection holds: every job gets E_BUSY after one busy wait, not
    /// one wait per job.
    #[test]
    fn a_busy_database_answers_every_job_after_one_wait() {
        let (_dir, path, mut conn, flags) = setup();
        let holder = Connection::open(&path).unwrap();
        holder.execute_batch("BEGIN IMMEDIATE").unwrap();
        let texts: Vec<Vec<NewMessage>> = (0..4).map(|i| one(&format!("m{i}"))).collect();
        let s = Target::Session("s".into());
        let o = IngestMode::default();
        let jobs: Vec<IngestJob<'_>> = texts
            .iter()
            .map(|m| IngestJob {
                target: &s,
                messages: m,
                mode: &o,
            })
            .collect();
        let started = Instant::now();
        let results = ingest_group(|f| crate::sql::in_transaction(&mut conn, f), flags, &jobs, &|_, _| {});
        let waited = started.elapsed();
        assert!(results.iter().all(|r| r.as_ref().unwrap_err().code() == "E_BUSY"));
        // The busy timeout is 100 ms; four waits would take 400.
        assert!(waited < Duration::from_millis(300), "{waited:?}");
        holder.execute_batch("ROLLBACK").unwrap();
    }

    /// A session's turns stored on SQLite and on PostgreSQL read back the same: messages with
    /// their parts and tool calls, the live context, the turn keys (a replay is a duplicate),
    /// entries skipped once stored, and the conversation's bootstrap time.
    #[test]
    fn ingest_and_read_back_alike_on_both_engines() {
        let host = crate::test_support::synthetic(8, 60);
        let messages: Vec<NewMessage> = host
            .iter()
            .enumerate()
            .map(|(i, m)| {
                let mut m = m.clone();
                m["entryId"] = json!(format!("e{i}"));
                normalize(i, &m).unwrap()
            })
            .collect();
        let mut seen: Vec<(String, Vec<StoredMessage>)> = Vec::new();
        crate::test_support::on_both_engines("ingest", |db, flags, engine| {
            let target = Target::Session("s".into());
            let keyed = IngestMode {
                advancement_key: Some("turn-1".into()),
                ..Default::default()
            };
            let ingest = |msgs: &[NewMessage], mode: &IngestMode| {
                let job = IngestJob {
                    target: &target,
                    messages: msgs,
                    mode,
                };
                let mut fts = Vec::new();
                ingest_in(db, flags, &job, None, "2026-11-26 10:00:00", &mut fts).unwrap()
            };
            let first = ingest(&messages[..6], &keyed);
            assert_eq!(
                (first.inserted, first.skipped, first.duplicate),
                (6, 0, false),
                "{engine}"
            );
            let replay = ingest(&messages[..6], &keyed);
            assert!(
                replay.duplicate && replay.inserted == 0,
                "{engine}: the same turn key again"
            );
            // Entries already stored are skipped; the rest appended.
            let rest = ingest(&messages[4..], &IngestMode::default());
            assert_eq!((rest.inserted, rest.skipped), (2, 2), "{engine}");
            // Counted by the triggers as the rows were written.
            assert_eq!(crate::store::totals::message_count(db, 1).unwrap(), 8, "{engine}");
            assert_eq!(crate::store::totals::drift(db, 1).unwrap(), None, "{engine}");
            assert_eq!(crate::store::context::last_ordinal(db, 1).unwrap(), 7, "{engine}");
            let listed = list(db, 1, 0, 100).unwrap();
            assert_eq!(listed.len(), 8, "{engine}");
            assert_eq!(list(db, 1, 6, 100).unwrap().len(), 2, "{engine}: after seq 6");
            let picked = by_ids(db, &[3, 1]).unwrap();
            assert_eq!(
                picked.iter().map(|m| m.message_id).collect::<Vec<_>>(),
                [3, 1],
                "{engine}"
            );
            assert_eq!(texts(db, &[1, 2, 99]).unwrap().len(), 2, "{engine}");
            assert_eq!(roles_for_rebuild(db, &[2]).unwrap()[&2].0, "assistant", "{engine}");
            assert_eq!(conversations_of(db, &[2, 99]).unwrap(), [(2, 1)], "{engine}");
            let bootstrapped = crate::store::conversations::lookup(db, flags, &target)
                .unwrap()
                .unwrap();
            assert!(
                bootstrapped.bootstrapped_at.is_some(),
                "{engine}: a keyed turn marks the session"
            );
            seen.push((engine.to_string(), listed));
        });
        // What PostgreSQL gives back is what SQLite gives back.
        if let [(_, sqlite), (_, pg)] = seen.as_slice() {
            assert_eq!(serde_json::to_value(sqlite).unwrap(), serde_json::to_value(pg).unwrap());
        }
    }

    /// A key the plugin made for a keyless turn stores it once, and nothing more: the session
    /// is not marked bootstrapped, as it is by the host's own keys.
    #[test]
    fn a_spool_key_stores_the_turn_once_and_is_not_the_hosts_turn() {
        let messages: Vec<NewMessage> = crate::test_support::synthetic(2, 40)
            .iter()
            .enumerate()
            .map(|(i, m)| normalize(i, m).unwrap())
            .collect();
        crate::test_support::on_both_engines("spool-key", |db, flags, engine| {
            let target = Target::Session("s".into());
            let mode = IngestMode {
                advancement_key: Some(format!("{SPOOL_KEY_PREFIX}0190c3a1-0000-7000-8000-000000000001")),
                ..Default::default()
            };
            let job = IngestJob {
                target: &target,
                messages: &messages,
                mode: &mode,
            };
            let mut fts = Vec::new();
            let first = ingest_in(db, flags, &job, None, "2026-11-26 10:00:00", &mut fts).unwrap();
            assert_eq!(first.inserted, messages.len() as i64, "{engine}");
            let again = ingest_in(db, flags, &job, None, "2026-11-26 10:01:00", &mut fts).unwrap();
            assert!(
                again.duplicate && again.inserted == 0,
                "{engine}: the same spool key again"
            );
            let found = crate::store::conversations::lookup(db, flags, &target)
                .unwrap()
                .unwrap();
            assert!(
                found.bootstrapped_at.is_none(),
                "{engine}: a spool key is not the host's turn"
            );
        });
    }
}
