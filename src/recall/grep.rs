//! `grep`: find messages and summaries by full text, regular expression or substring, newest
//! first or by relevance, in one conversation or all of them.

use std::time::{Duration, Instant};

use rusqlite::types::Value as SqlValue;
use rusqlite::{params_from_iter, Connection};

use super::coverage;
use super::query;
use crate::api::{GrepHit, GrepOptions, GrepPartial, GrepResult, ItemKind, Mode, Scope, SearchedBy, Sort};
use crate::error::{LcmError, Result};
use crate::pg;
use crate::sql::{Db, Row};
use crate::store::conversations;
use crate::store::normalize::Role;
use crate::time;

/// Per-hour age discount of `Sort::Hybrid`.
const HYBRID_AGE_WEIGHT_PER_HOUR: f64 = 0.001;

/// Longest regular expression accepted, in bytes.
pub(crate) const MAX_PATTERN_BYTES: usize = 1024;
/// Compiled-program bound for a regular expression (the `regex` crate's size limit).
const REGEX_SIZE_LIMIT: usize = 1 << 20;
/// Rows a regex search reads per scope at most.
pub(crate) const REGEX_MAX_ROWS: usize = 200_000;
/// How long one `grep` may search, in every mode: a call from a model must not pin a core and
/// hang its turn. What was found by then is returned, marked `partial`.
pub(crate) const DEADLINE: Duration = Duration::from_secs(3);
/// SQLite virtual-machine steps between two looks at the deadline.
const DEADLINE_CHECK_STEPS: i32 = 4_000;

/// A candidate before coverage is looked up: sort keys and what the hit shows.
struct Found {
    hit: GrepHit,
    sort_time: String,
    /// What `relevance` and `hybrid` order by (lower is better); None for rankless matches.
    score: Option<f64>,
}

/// `trigram_table`: the summaries' trigram table exists (the engine's schema flags; SQLite).
pub(crate) fn grep<'a>(
    db: impl Into<Db<'a>>,
    trigram_table: bool,
    conversation_id: Option<i64>,
    o: &GrepOptions,
) -> Result<GrepResult> {
    grep_within(db, trigram_table, conversation_id, o, DEADLINE)
}

/// `grep` with a deadline of the caller's choosing (tests).
pub(crate) fn grep_within<'a>(
    db: impl Into<Db<'a>>,
    trigram_table: bool,
    conversation_id: Option<i64>,
    o: &GrepOptions,
    limit: Duration,
) -> Result<GrepResult> {
    let db = db.into();
    if let Some(cid) = conversation_id {
        conversations::get(db, cid)?;
    }
    // One snapshot for every statement (PostgreSQL's read already is one).
    let _snapshot = db.snapshot()?;
    let support = match db {
        Db::Pg(c) => Some(pg_support(c)?),
        Db::Sqlite(_) => None,
    };
    let mut searched_by = SearchedBy::default();
    let mut found: Vec<Found> = Vec::new();
    let mut truncated = false;
    let mut scanned = None;
    let regex = if o.mode == Mode::Regex {
        Some(compile(&o.query)?)
    } else {
        None
    };
    let terms = match o.mode {
        Mode::Regex => Vec::new(),
        Mode::Like => query::like_terms(&o.query)?,
        Mode::Fts => query::terms(&o.query)?,
    };
    let filter = Filter {
        conversation_id,
        since: o.since.clone(),
        until: o.until.clone(),
    };
    let deadline = Deadline::start(db, limit);
    for table in [Table::Messages, Table::Summaries] {
        let wanted = match table {
            Table::Messages => o.scope != Scope::Summaries,
            Table::Summaries => o.scope != Scope::Messages,
        };
        if !wanted || deadline.passed() {
            continue;
        }
        let (searched, by) = match (&regex, db) {
            (Some(re), db) => {
                let searched = match db {
                    Db::Sqlite(conn) => search_regex(conn, table, &filter, re, o.limit, &deadline)?,
                    Db::Pg(conn) => pg_search_regex(conn, table, &filter, re, o.limit, &deadline)?,
                };
                *scanned.get_or_insert(0) += searched.read;
                (searched, "regex")
            }
            (None, Db::Sqlite(conn)) => search_text(conn, table, &filter, &terms, o, trigram_table, &deadline)?,
            (None, Db::Pg(conn)) => {
                pg_search_text(conn, table, &filter, &terms, o, support.unwrap_or_default(), &deadline)?
            }
        };
        match table {
            Table::Messages => searched_by.messages = Some(by),
            Table::Summaries => searched_by.summaries = Some(by),
        }
        truncated |= searched.more;
        found.extend(searched.rows);
    }
    let partial = deadline.finish().then(|| GrepPartial {
        code: "E_TIMEOUT",
        message: format!(
            "the search stopped at its {} ms deadline; the hits are what it found by then (narrow the query, the time range or the conversation)",
            limit.as_millis()
        ),
    });
    truncated |= partial.is_some();
    // Merge the scopes: newest first, or best score first (rankless matches after, newest first).
    match o.sort {
        Sort::Recency => found.sort_by(|a, b| b.sort_time.cmp(&a.sort_time)),
        Sort::Relevance | Sort::Hybrid => found.sort_by(|a, b| {
            let sa = a.score.unwrap_or(f64::INFINITY);
            let sb = b.score.unwrap_or(f64::INFINITY);
            sa.total_cmp(&sb).then_with(|| b.sort_time.cmp(&a.sort_time))
        }),
    }
    if found.len() > o.limit {
        found.truncate(o.limit);
        truncated = true;
    }
    let message_ids: Vec<i64> = found.iter().filter_map(|f| f.hit.message_id).collect();
    let mut message_covers = coverage::of_messages(db, &message_ids)?;
    let mut hits = Vec::with_capacity(found.len());
    for f in found {
        let mut hit = f.hit;
        let cover = match (hit.message_id, &hit.summary_id) {
            (Some(mid), _) => message_covers.remove(&mid).unwrap_or_default(),
            (None, Some(sid)) => coverage::of_summary(db, sid)?,
            _ => coverage::Cover::default(),
        };
        hit.live = cover.live;
        hit.covered_by = cover.live_summary;
        hits.push(hit);
    }
    Ok(GrepResult {
        hits,
        truncated,
        partial,
        searched_by,
        rows_scanned: scanned,
    })
}

/// The search's deadline: SQLite interrupts a statement that runs past it (a progress handler
/// on the connection, removed on drop), PostgreSQL cancels it (`statement_timeout`, set to
/// what is left before each statement), and the row loops look at it between rows.
struct Deadline<'c> {
    /// The SQLite connection the handler is on.
    sqlite: Option<&'c Connection>,
    /// Boxed: the progress handler reads it through a pointer until it is removed.
    at: Box<Instant>,
    /// Set when a statement was interrupted or a loop stopped for the deadline.
    hit: std::cell::Cell<bool>,
}

/// SQLite's progress callback: non-zero interrupts the running statement.
extern "C" fn past_deadline(at: *mut std::os::raw::c_void) -> std::os::raw::c_int {
    // SAFETY: `at` is the `Box<Instant>` of a live `Deadline`, which removes this handler
    // before the box is freed.
    let at = unsafe { &*(at as *const Instant) };
    (Instant::now() >= *at) as std::os::raw::c_int
}

impl<'c> Deadline<'c> {
    fn start(db: Db<'c>, limit: Duration) -> Self {
        let at = Box::new(Instant::now() + limit);
        let sqlite = match db {
            Db::Sqlite(conn) => Some(conn),
            Db::Pg(_) => None,
        };
        if let Some(conn) = sqlite {
            // rusqlite's own progress_handler needs `&mut Connection`, which a pooled reader
            // borrowed by a transaction cannot give; the C call is the same one it makes.
            // SAFETY: the handle is this open connection's; the argument outlives the handler.
            unsafe {
                rusqlite::ffi::sqlite3_progress_handler(
                    conn.handle(),
                    DEADLINE_CHECK_STEPS,
                    Some(past_deadline),
                    &*at as *const Instant as *mut std::os::raw::c_void,
                );
            }
        }
        Deadline {
            sqlite,
            at,
            hit: std::cell::Cell::new(false),
        }
    }

    /// Milliseconds left (0 once passed).
    fn left_ms(&self) -> u128 {
        self.at.saturating_duration_since(Instant::now()).as_millis()
    }

    /// Runs one PostgreSQL statement within what is left of the deadline; None (and the
    /// deadline marked) when the server cancelled it for that. A savepoint keeps the read
    /// transaction usable after a cancel, for the lookups that follow. `index_first`: the
    /// statement is written to start from the word or trigram index (`pg_found`), and runs
    /// with sequential scans off, so that the planner, which has no statistics of the text
    /// columns, does not read the table through instead.
    fn pg_query(
        &self,
        c: &pg::Conn,
        sql: &str,
        params: &[SqlValue],
        index_first: bool,
    ) -> Result<Option<Vec<tokio_postgres::Row>>> {
        let ms = self.left_ms();
        if ms == 0 {
            self.hit.set(true);
            return Ok(None);
        }
        let seqscan = if index_first { "off" } else { "on" };
        c.batch(&format!(
            "SAVEPOINT lcm_grep; SET LOCAL statement_timeout = {ms}; SET LOCAL enable_seqscan = {seqscan}"
        ))?;
        match c.query_once(&crate::sql::translate(sql), params) {
            Ok(rows) => {
                c.batch("RELEASE SAVEPOINT lcm_grep; SET LOCAL statement_timeout = 0; SET LOCAL enable_seqscan = on")?;
                Ok(Some(rows))
            }
            Err(LcmError::Timeout { .. }) => {
                c.batch("ROLLBACK TO SAVEPOINT lcm_grep")?;
                self.hit.set(true);
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    fn passed(&self) -> bool {
        if Instant::now() >= *self.at {
            self.hit.set(true);
        }
        self.hit.get()
    }

    /// The next row of a search, or None at its end or at the deadline (SQLite interrupted).
    fn next<'r, 's>(&self, rows: &'r mut rusqlite::Rows<'s>) -> Result<Option<&'r rusqlite::Row<'s>>> {
        match rows.next() {
            Ok(row) => Ok(row),
            Err(rusqlite::Error::SqliteFailure(e, _)) if e.code == rusqlite::ErrorCode::OperationInterrupted => {
                self.hit.set(true);
                Ok(None)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Removes the handler (the coverage lookups after the search are bounded by `limit`) and
    /// says whether the deadline stopped the search.
    fn finish(self) -> bool {
        self.hit.get()
    }
}

impl Drop for Deadline<'_> {
    fn drop(&mut self) {
        if let Some(conn) = self.sqlite {
            // SAFETY: as in `start`; no handler is left pointing at `at`.
            unsafe { rusqlite::ffi::sqlite3_progress_handler(conn.handle(), 0, None, std::ptr::null_mut()) };
        }
    }
}

/// One table's search: its matches (at most `limit`), whether more exist or a bound stopped
/// it, and the rows a regex read.
struct Searched {
    rows: Vec<Found>,
    more: bool,
    read: usize,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Table {
    Messages,
    Summaries,
}

struct Filter {
    conversation_id: Option<i64>,
    since: Option<String>,
    until: Option<String>,
}

impl Table {
    /// The columns every search reads: id, conversation, role or kind, depth, time, content.
    fn select(self) -> &'static str {
        match self {
            Table::Messages => "m.message_id, m.conversation_id, m.role, NULL, m.created_at",
            Table::Summaries => "s.summary_id, s.conversation_id, s.kind, s.depth, COALESCE(s.latest_at, s.created_at)",
        }
    }

    fn alias(self) -> &'static str {
        match self {
            Table::Messages => "m",
            Table::Summaries => "s",
        }
    }

    /// The time a row is filtered and ordered by: a summary's newest covered message.
    fn time(self) -> &'static str {
        match self {
            Table::Messages => "m.created_at",
            Table::Summaries => "COALESCE(s.latest_at, s.created_at)",
        }
    }

    /// Conversation and time filters on the table's alias, with their parameters appended.
    /// `to_time` reads a stored time as a number: `julianday` (SQLite), `lcm_epoch`
    /// (PostgreSQL, `pg::search`).
    fn filters(self, f: &Filter, params: &mut Vec<SqlValue>, to_time: &str) -> String {
        let a = self.alias();
        let time = self.time();
        let mut sql = String::new();
        if let Some(cid) = f.conversation_id {
            params.push(SqlValue::Integer(cid));
            sql.push_str(&format!(" AND {a}.conversation_id = ?{}", params.len()));
        }
        if let Some(since) = &f.since {
            params.push(SqlValue::Text(since.clone()));
            sql.push_str(&format!(" AND {to_time}({time}) >= {to_time}(?{})", params.len()));
        }
        if let Some(until) = &f.until {
            params.push(SqlValue::Text(until.clone()));
            sql.push_str(&format!(" AND {to_time}({time}) < {to_time}(?{})", params.len()));
        }
        sql
    }

    /// Newest first, in an order an index gives, so that a scan stops after `limit` matches
    /// instead of sorting every candidate: within one conversation its (conversation, seq) or
    /// (conversation, created_at) index, across all of them the table's rowid.
    fn scan_order(self, f: &Filter) -> &'static str {
        match (self, f.conversation_id.is_some()) {
            (Table::Messages, true) => "m.seq DESC",
            (Table::Summaries, true) => "s.created_at DESC",
            (Table::Messages, false) => "m.message_id DESC",
            (Table::Summaries, false) => "s.rowid DESC",
        }
    }

    /// One row's stored text by its id.
    fn content_by_id(self) -> &'static str {
        match self {
            Table::Messages => "SELECT content FROM messages WHERE message_id = ?1",
            Table::Summaries => "SELECT content FROM summaries WHERE summary_id = ?1",
        }
    }

    fn table_ref(self) -> &'static str {
        match self {
            Table::Messages => "messages m",
            Table::Summaries => "summaries s",
        }
    }
}

/// Reads the common columns of a search row (the snippet and rank come after them).
fn found_from_row(table: Table, r: &Row, snippet: String, rank: Option<f64>, score: Option<f64>) -> Result<Found> {
    let time = time::iso_or_raw(r.get(4)?);
    let hit = match table {
        Table::Messages => GrepHit {
            kind: ItemKind::Message,
            message_id: Some(r.get(0)?),
            summary_id: None,
            conversation_id: r.get(1)?,
            role: Some(Role::from_db(&r.get::<String>(2)?).host()),
            summary_kind: None,
            depth: None,
            time: time.clone(),
            snippet,
            rank,
            live: false,
            covered_by: None,
        },
        Table::Summaries => GrepHit {
            kind: ItemKind::Summary,
            message_id: None,
            summary_id: Some(r.get(0)?),
            conversation_id: r.get(1)?,
            role: None,
            summary_kind: Some(r.get(2)?),
            depth: Some(r.get(3)?),
            time: time.clone(),
            snippet,
            rank,
            live: false,
            covered_by: None,
        },
    };
    Ok(Found {
        hit,
        sort_time: time,
        score,
    })
}

/// Full-text (or, for CJK and `like` mode, trigram / LIKE) search of one table.
fn search_text(
    conn: &Connection,
    table: Table,
    f: &Filter,
    terms: &[String],
    o: &GrepOptions,
    trigram_table: bool,
    deadline: &Deadline<'_>,
) -> Result<(Searched, &'static str)> {
    let cjk = terms.iter().any(|t| query::has_cjk(t));
    let trigram = table == Table::Summaries && cjk && query::trigram_ready(terms) && trigram_table;
    let via = match (o.mode, cjk) {
        (Mode::Fts, false) => "fts",
        (Mode::Fts, true) if trigram => "trigram",
        _ => "like",
    };
    let fetch = o.limit + 1;
    let mut params: Vec<SqlValue> = Vec::new();
    let fts_table = match (table, via) {
        (Table::Messages, "fts") => "messages_fts",
        (Table::Summaries, "fts") => "summaries_fts",
        (Table::Summaries, "trigram") => "summaries_fts_cjk",
        _ => "",
    };
    let sql = if fts_table.is_empty() {
        // LIKE over the stored text: every term required.
        let mut conds = Vec::new();
        for t in terms {
            if t.contains('\0') {
                // LIKE reads its operands as C strings, which end at a NUL; instr compares
                // lengths (exact case).
                params.push(SqlValue::Text(t.clone()));
                conds.push(format!("instr({}.content, ?{}) > 0", table.alias(), params.len()));
            } else {
                params.push(SqlValue::Text(query::like_pattern(t)));
                conds.push(format!("{}.content LIKE ?{} ESCAPE '\\'", table.alias(), params.len()));
            }
        }
        let filters = table.filters(f, &mut params, "julianday");
        params.push(SqlValue::Integer(fetch as i64));
        format!(
            "SELECT {}, {a}.content FROM {} WHERE {}{filters} ORDER BY {} LIMIT ?{}",
            table.select(),
            table.table_ref(),
            conds.join(" AND "),
            table.scan_order(f),
            params.len(),
            a = table.alias(),
        )
    } else {
        params.push(SqlValue::Text(query::fts_match(terms)));
        let matched = params.len();
        let join = match table {
            Table::Messages => "JOIN messages m ON m.message_id = f.rowid",
            Table::Summaries => "JOIN summaries s ON s.summary_id = f.summary_id",
        };
        let filters = table.filters(f, &mut params, "julianday");
        params.push(SqlValue::Integer(fetch as i64));
        let order = match o.sort {
            Sort::Recency => "f.rowid DESC",
            Sort::Relevance | Sort::Hybrid => "score",
        };
        // The score: the rank, discounted by age for `hybrid`. A time in the future, or one
        // SQLite cannot read (stored times can be raw text), counts as now.
        let score = match o.sort {
            Sort::Hybrid => format!(
                "f.rank / (1 + max(0, julianday('now') - COALESCE(julianday({}), julianday('now'))) * 24 * {HYBRID_AGE_WEIGHT_PER_HOUR})",
                table.time()
            ),
            _ => "f.rank".to_string(),
        };
        format!(
            "SELECT {}, f.rank, {score} AS score
             FROM {fts_table} f {join}
             WHERE {fts_table} MATCH ?{matched}{filters}
             ORDER BY {order} LIMIT ?{}",
            table.select(),
            params.len(),
        )
    };
    let mut stmt = conn.prepare(&sql)?;
    let mut rows = stmt.query(params_from_iter(params.iter()))?;
    let mut out = Vec::new();
    while let Some(r) = deadline.next(&mut rows)? {
        let found = if fts_table.is_empty() {
            let content: String = r.get(5)?;
            let at = query::find_like(&content, terms).unwrap_or(0..0);
            found_from_row(table, &Row::Sqlite(r), query::snippet_around(&content, at), None, None)?
        } else {
            let rank: f64 = r.get(5)?;
            let score: Option<f64> = r.get(6)?;
            found_from_row(
                table,
                &Row::Sqlite(r),
                String::new(),
                Some(rank),
                Some(score.unwrap_or(rank)),
            )?
        };
        out.push(found);
        if deadline.passed() {
            break;
        }
    }
    drop(rows);
    let more = out.len() > o.limit;
    out.truncate(o.limit);
    if !fts_table.is_empty() {
        // Snippets of the hits only, cut around the first place a term occurs: linear in the
        // text. FTS5's snippet() scores every window over every occurrence, which takes
        // minutes on a large message full of the term.
        let mut content = conn.prepare_cached(table.content_by_id())?;
        for f in &mut out {
            let text: String = match (&f.hit.message_id, &f.hit.summary_id) {
                (Some(id), _) => content.query_row([id], |r| r.get(0))?,
                (None, Some(id)) => content.query_row([id], |r| r.get(0))?,
                _ => String::new(),
            };
            f.hit.snippet = query::snippet_around(&text, query::find_term(&text, terms).unwrap_or(0..0));
        }
    }
    Ok((
        Searched {
            rows: out,
            more,
            read: 0,
        },
        via,
    ))
}

/// What the schema has for searching: made when the engine opened it writable; a read-only
/// open of a schema made before grep ran on PostgreSQL has no word index and says so.
fn pg_support(c: &pg::Conn) -> Result<pg::search::Support> {
    if let Some(known) = c.search.get() {
        return Ok(*known);
    }
    let support = pg::search::probe(c)?;
    if !support.full_text {
        return Err(LcmError::schema(
            c.describe(),
            format!(
                "{} has no search index yet (it was made before grep ran on PostgreSQL): open it once without readOnly to build it",
                c.describe()
            ),
        ));
    }
    Ok(*c.search.get_or_init(|| support))
}

/// The column PostgreSQL reads a table newest first by, a unique number per row (so a search
/// can go on after the last row it read): a message's `seq` within a conversation, else its
/// id; a summary's insertion order (the `rowid` column `pg::ddl` gives it). SQLite orders the
/// same, except summaries within a conversation (by creation time, which equals insertion
/// order but for imported rows).
fn pg_key(table: Table, f: &Filter) -> &'static str {
    match (table, f.conversation_id.is_some()) {
        (Table::Messages, true) => "m.seq",
        (Table::Messages, false) => "m.message_id",
        (Table::Summaries, _) => "s.rowid",
    }
}

/// Rows read per statement when PostgreSQL's rows are checked in Rust (regex, and the LIKE
/// semantics re-checked after `ILIKE`).
const PG_BATCH_ROWS: usize = 500;

/// How many of the newest rows a substring search reads in order before it asks the trigram
/// index for the older ones: a common substring fills its hits here, from the newest rows, as
/// SQLite's LIMITed scan does; a rare or absent one costs this many row reads and then what
/// the index finds. (The text columns have no planner statistics, see `pg::search`, so the
/// choice is made here rather than by the planner.)
pub(super) const PG_NEWEST_WINDOW: usize = 2_000;

/// A row's own number on PostgreSQL, to join matches found through an index back to their rows.
fn pg_id(table: Table) -> &'static str {
    match table {
        Table::Messages => "message_id",
        Table::Summaries => "rowid",
    }
}

/// The key (`pg_key`) of the oldest of the newest `PG_NEWEST_WINDOW` rows in scope: `None`
/// when the deadline passed, `Some(None)` when the scope holds fewer rows than the window.
fn pg_window_floor(c: &pg::Conn, table: Table, f: &Filter, deadline: &Deadline<'_>) -> Result<Option<Option<i64>>> {
    let key = pg_key(table, f);
    // (Its own parameters: only the filters'.)
    let mut params = Vec::new();
    let sql = format!(
        "SELECT {key} FROM {} WHERE TRUE{} ORDER BY {key} DESC OFFSET {} LIMIT 1",
        table.table_ref(),
        table.filters(f, &mut params, "lcm_epoch"),
        PG_NEWEST_WINDOW - 1
    );
    let Some(rows) = deadline.pg_query(c, &sql, &params, false)? else {
        return Ok(None);
    };
    Ok(Some(rows.first().map(|r| Row::Pg(r).get(0)).transpose()?))
}

/// The rows of `table` that `conds` (with the filters, and `extra`) admit, found first and on
/// their own (`found`), through the word or trigram index: their cost follows the matches, not
/// the table. The conversation is tested on the rows the index gives (`+ 0`: not through the
/// conversation's own index, which would read every row of the conversation).
fn pg_found(table: Table, conds: &str, filters: &str, extra: &str) -> String {
    let a = table.alias();
    let filters = filters.replace(
        &format!("{a}.conversation_id = "),
        &format!("{a}.conversation_id + 0 = "),
    );
    format!(
        "WITH found AS MATERIALIZED (SELECT {a}.{} AS id FROM {} WHERE {conds}{filters}{extra})",
        pg_id(table),
        table.table_ref()
    )
}

/// Reads the rows `conds` (with `params`) admits newest first, in batches, handing each with
/// its content to `keep` until it returns false, the rows end or the deadline passes. With
/// `indexed` (a condition the trigram index answers), the newest `PG_NEWEST_WINDOW` rows are
/// read in order and the older ones through the index.
#[allow(clippy::too_many_arguments)]
fn pg_scan(
    c: &pg::Conn,
    table: Table,
    f: &Filter,
    conds: &str,
    mut params: Vec<SqlValue>,
    first_batch: usize,
    indexed: bool,
    deadline: &Deadline<'_>,
    mut keep: impl FnMut(&Row, &str) -> Result<bool>,
) -> Result<()> {
    let key = pg_key(table, f);
    let filters = table.filters(f, &mut params, "lcm_epoch");
    let a = table.alias();
    let select = format!("SELECT {}, {a}.content, {key}", table.select());
    // The oldest key of the newest rows read in order; None: every row is (regex, or a scope
    // smaller than the window).
    let floor: Option<i64> = match indexed {
        false => None,
        true => match pg_window_floor(c, table, f, deadline)? {
            Some(floor) => floor,
            None => return Ok(()),
        },
    };
    let fixed = params.len();
    let mut after: Option<i64> = None;
    let mut batch = first_batch.max(1);
    // Phase 0: newest first in key order (down to `floor`); phase 1: older rows, indexed.
    let mut phase = 0;
    loop {
        params.truncate(fixed);
        let mut bound = String::new();
        if let Some(last) = after {
            params.push(SqlValue::Integer(last));
            bound.push_str(&format!(" AND {key} < ?{}", params.len()));
        }
        let sql = match (phase, floor) {
            // (`content || ''`: not through the trigram index, which for a common substring
            // would hand every row of the table over to be checked; in key order instead.)
            (0, Some(floor)) => format!(
                "{select} FROM {} WHERE {}{filters} AND {key} >= {floor}{bound} ORDER BY {key} DESC LIMIT {batch}",
                table.table_ref(),
                conds.replace(&format!("{a}.content ILIKE"), &format!("({a}.content || '') ILIKE")),
            ),
            (0, None) => format!(
                "{select} FROM {} WHERE {conds}{filters}{bound} ORDER BY {key} DESC LIMIT {batch}",
                table.table_ref()
            ),
            (_, floor) => format!(
                "{} {select} FROM {} JOIN found ON found.id = {a}.{} WHERE TRUE{bound} ORDER BY {key} DESC LIMIT {batch}",
                pg_found(table, conds, &filters, &format!(" AND {key} < {}", floor.unwrap_or(i64::MAX))),
                table.table_ref(),
                pg_id(table),
            ),
        };
        let Some(rows) = deadline.pg_query(c, &sql, &params, phase == 1)? else {
            return Ok(());
        };
        for r in &rows {
            let row = Row::Pg(r);
            let content: String = row.get(5)?;
            after = Some(row.get(6)?);
            if !keep(&row, &content)? || deadline.passed() {
                return Ok(());
            }
        }
        if rows.len() < batch {
            if phase == 1 || floor.is_none() {
                return Ok(());
            }
            phase = 1;
            after = None;
            continue;
        }
        batch = (batch * 2).min(PG_BATCH_ROWS.max(first_batch));
    }
}

/// `search_text` on PostgreSQL: words through `lcm_search_vector`'s GIN index, substrings and
/// CJK through `ILIKE` (a trigram index when the server has `pg_trgm`), re-checked in Rust
/// with SQLite's LIKE rules (ASCII letters without case, everything else exactly), so both
/// engines find the same rows. A CJK search is `like` on both scopes (SQLite's trigram table
/// for summaries finds the same rows for terms of 3+ characters).
fn pg_search_text(
    c: &pg::Conn,
    table: Table,
    f: &Filter,
    terms: &[String],
    o: &GrepOptions,
    support: pg::search::Support,
    deadline: &Deadline<'_>,
) -> Result<(Searched, &'static str)> {
    let cjk = terms.iter().any(|t| query::has_cjk(t));
    let mut out = Vec::new();
    if o.mode == Mode::Like || cjk {
        // PostgreSQL's text holds no NUL: a term with one matches nothing.
        if terms.iter().any(|t| t.contains('\0')) {
            return Ok((
                Searched {
                    rows: out,
                    more: false,
                    read: 0,
                },
                "like",
            ));
        }
        let mut params = Vec::new();
        let mut conds = Vec::new();
        for t in terms {
            params.push(SqlValue::Text(query::like_pattern(t)));
            conds.push(format!("{}.content ILIKE ?{} ESCAPE '\\'", table.alias(), params.len()));
        }
        pg_scan(
            c,
            table,
            f,
            &conds.join(" AND "),
            params,
            o.limit + 1,
            true,
            deadline,
            |r, content| {
                if query::like_all(content, terms) {
                    let at = query::find_like(content, terms).unwrap_or(0..0);
                    out.push(found_from_row(
                        table,
                        r,
                        query::snippet_around(content, at),
                        None,
                        None,
                    )?);
                }
                Ok(out.len() <= o.limit)
            },
        )?;
        let more = out.len() > o.limit;
        out.truncate(o.limit);
        // A CJK search of 3+ character terms is one the trigram index answers.
        let via = if o.mode == Mode::Fts && support.trigram && query::trigram_ready(terms) {
            "trigram"
        } else {
            "like"
        };
        return Ok((
            Searched {
                rows: out,
                more,
                read: 0,
            },
            via,
        ));
    }
    let mut params: Vec<SqlValue> = terms.iter().map(|t| SqlValue::Text(t.clone())).collect();
    let query = (1..=terms.len())
        .map(|i| format!("lcm_search_query(?{i})"))
        .collect::<Vec<_>>()
        .join(" && ");
    let a = table.alias();
    let filters = table.filters(f, &mut params, "lcm_epoch");
    params.push(SqlValue::Integer(o.limit as i64 + 1));
    let fetch = params.len();
    // Columns: the common five, then content (5), time (6), order key (7), words (8), rank (9),
    // score (10).
    // Full text orders newest first as SQLite's word tables do: by id, in every scope.
    let any_conversation = Filter {
        conversation_id: None,
        since: None,
        until: None,
    };
    let words = pg::search::SEARCH_COLUMN;
    let columns = format!(
        "SELECT {}, {a}.content AS c, {} AS t, {} AS k, {a}.{words} AS w",
        table.select(),
        table.time(),
        pg_key(table, &any_conversation),
    );
    // The rank as FTS5's (lower is better): minus PostgreSQL's ts_rank.
    let rank = format!("CAST(-ts_rank(x.w, {query}) AS DOUBLE PRECISION)");
    // Newest first, a common word's hits come from the newest rows, read in the order of an
    // index until enough are found (`ts_match_vq`, `@@` as a function: not through the word
    // index, which would hand over every row holding the word), as SQLite's LIMITed scan finds
    // them; the older rows only when those held too few, through the word index. Within a
    // conversation its `seq` runs as the ids do, so its own index gives the same order. (The
    // text columns have no planner statistics, see `pg::search`.)
    let mut older = String::new();
    if o.sort == Sort::Recency {
        let Some(floor) = pg_window_floor(c, table, f, deadline)? else {
            return Ok(fts_answer(out, o.limit));
        };
        let window_key = pg_key(table, f);
        let newest = format!(
            "SELECT x.*, {rank} AS rank, {rank} AS score FROM ({columns} FROM {} WHERE ts_match_vq({a}.{words}, {query}){filters}{} ORDER BY {window_key} DESC LIMIT ?{fetch}) x ORDER BY x.k DESC",
            table.table_ref(),
            floor.map(|k| format!(" AND {window_key} >= {k}")).unwrap_or_default(),
        );
        let Some(rows) = deadline.pg_query(c, &newest, &params, false)? else {
            return Ok(fts_answer(out, o.limit));
        };
        pg_fts_rows(&rows, table, terms, &mut out)?;
        match floor {
            Some(k) if out.len() <= o.limit => {
                params[fetch - 1] = SqlValue::Integer((o.limit + 1 - out.len()) as i64);
                older = format!(" AND {window_key} < {k}");
            }
            _ => return Ok(fts_answer(out, o.limit)),
        }
    }
    let matched = format!(
        "{} {columns} FROM {} JOIN found ON found.id = {a}.{}",
        pg_found(table, &format!("{a}.{words} @@ ({query})"), &filters, &older),
        table.table_ref(),
        pg_id(table),
    );
    let sql = match o.sort {
        // Newest first: only the rows kept are ranked.
        Sort::Recency => format!(
            "SELECT x.*, {rank} AS rank, {rank} AS score FROM ({matched} ORDER BY k DESC LIMIT ?{fetch}) x ORDER BY x.k DESC"
        ),
        Sort::Relevance => format!(
            "SELECT y.*, y.rank AS score FROM (SELECT x.*, {rank} AS rank FROM ({matched}) x) y ORDER BY score, y.k DESC LIMIT ?{fetch}"
        ),
        // A time in the future, or one that is no time, counts as now (as on SQLite).
        Sort::Hybrid => format!(
            "SELECT y.*, y.rank / (1 + GREATEST(0, extract(epoch FROM now()) - COALESCE(lcm_epoch(y.t), extract(epoch FROM now()))) / 3600 * {HYBRID_AGE_WEIGHT_PER_HOUR}) AS score
             FROM (SELECT x.*, {rank} AS rank FROM ({matched}) x) y ORDER BY score, y.k DESC LIMIT ?{fetch}"
        ),
    };
    if let Some(rows) = deadline.pg_query(c, &sql, &params, true)? {
        pg_fts_rows(&rows, table, terms, &mut out)?;
    }
    Ok(fts_answer(out, o.limit))
}

/// Full text's answer: at most `limit` hits, and whether there were more.
fn fts_answer(mut rows: Vec<Found>, limit: usize) -> (Searched, &'static str) {
    let more = rows.len() > limit;
    rows.truncate(limit);
    (Searched { rows, more, read: 0 }, "fts")
}

/// Full-text hits from rows of `pg_search_text`'s columns, each with its rank and score.
fn pg_fts_rows(rows: &[tokio_postgres::Row], table: Table, terms: &[String], out: &mut Vec<Found>) -> Result<()> {
    for r in rows {
        let row = Row::Pg(r);
        let content: String = row.get(5)?;
        let rank: f64 = row.get(9)?;
        let score: f64 = row.get(10)?;
        let at = query::find_term(&content, terms).unwrap_or(0..0);
        out.push(found_from_row(
            table,
            &row,
            query::snippet_around(&content, at),
            Some(rank),
            Some(score),
        )?);
    }
    Ok(())
}

/// `search_regex` on PostgreSQL: rows newest first in batches, matched in Rust (the same
/// `regex` crate, so the same matches), within the same row and time bounds.
fn pg_search_regex(
    c: &pg::Conn,
    table: Table,
    f: &Filter,
    re: &regex::Regex,
    limit: usize,
    deadline: &Deadline<'_>,
) -> Result<Searched> {
    let mut out = Vec::new();
    let mut read = 0usize;
    let mut bounded = false;
    pg_scan(
        c,
        table,
        f,
        "TRUE",
        Vec::new(),
        PG_BATCH_ROWS,
        false,
        deadline,
        |r, content| {
            if read >= REGEX_MAX_ROWS {
                bounded = true;
                return Ok(false);
            }
            read += 1;
            if let Some(m) = re.find(content) {
                out.push(found_from_row(
                    table,
                    r,
                    query::snippet_around(content, m.range()),
                    None,
                    None,
                )?);
            }
            Ok(out.len() <= limit)
        },
    )?;
    let more = out.len() > limit || bounded;
    out.truncate(limit);
    Ok(Searched { rows: out, more, read })
}

/// Compiles a user's regular expression with bounds on its size. The `regex` crate matches in
/// time linear in the text, so no pattern can make a search run away.
fn compile(pattern: &str) -> Result<regex::Regex> {
    if pattern.len() > MAX_PATTERN_BYTES {
        return Err(LcmError::invalid_input(format!(
            "the regular expression is {} bytes; at most {MAX_PATTERN_BYTES} are accepted",
            pattern.len()
        )));
    }
    if pattern.is_empty() {
        return Err(LcmError::invalid_input("the regular expression is empty"));
    }
    regex::RegexBuilder::new(pattern)
        .size_limit(REGEX_SIZE_LIMIT)
        .dfa_size_limit(REGEX_SIZE_LIMIT * 4)
        .build()
        .map_err(|e| LcmError::invalid_input(format!("invalid regular expression: {e}")))
}

/// Reads rows newest first and keeps those the expression matches, up to `limit` + 1, within
/// the row and time bounds. Returns (matches, more exist or bound reached, rows read).
fn search_regex(
    conn: &Connection,
    table: Table,
    f: &Filter,
    re: &regex::Regex,
    limit: usize,
    deadline: &Deadline<'_>,
) -> Result<Searched> {
    let mut params: Vec<SqlValue> = Vec::new();
    let filters = table.filters(f, &mut params, "julianday");
    let sql = format!(
        "SELECT {}, {a}.content FROM {} WHERE 1{filters} ORDER BY {}",
        table.select(),
        table.table_ref(),
        table.scan_order(f),
        a = table.alias(),
    );
    let mut stmt = conn.prepare(&sql)?;
    let mut rows = stmt.query(params_from_iter(params.iter()))?;
    let mut out = Vec::new();
    let mut read = 0usize;
    let mut bounded = false;
    while let Some(r) = deadline.next(&mut rows)? {
        read += 1;
        let content: String = r.get(5)?;
        if let Some(m) = re.find(&content) {
            out.push(found_from_row(
                table,
                &Row::Sqlite(r),
                query::snippet_around(&content, m.range()),
                None,
                None,
            )?);
            if out.len() > limit {
                break;
            }
        }
        if deadline.passed() {
            break;
        }
        if read >= REGEX_MAX_ROWS {
            bounded = deadline.next(&mut rows)?.is_some();
            break;
        }
    }
    let more = out.len() > limit || bounded;
    out.truncate(limit);
    Ok(Searched { rows: out, more, read })
}

#[cfg(test)]
mod deadline_tests {
    use super::*;

    /// PostgreSQL: a statement past the deadline is cancelled by the server, the search says
    /// so, and the read transaction it ran in is still usable (the savepoint).
    #[test]
    fn a_postgres_statement_past_the_deadline_is_cancelled_and_the_transaction_lives_on() {
        let Some(location) = crate::test_support::pg_test_location("grep_deadline") else {
            return;
        };
        let conn = location.connect().unwrap();
        conn.transaction_as("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", |c| {
            let deadline = Deadline::start(Db::Pg(c), Duration::from_millis(100));
            let started = Instant::now();
            let rows = deadline.pg_query(c, "SELECT pg_sleep(5)", &[], false).unwrap();
            assert!(rows.is_none());
            assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
            assert!(deadline.finish());
            let after = deadline_free(c);
            assert_eq!(after, 7);
            Ok(())
        })
        .unwrap();
        // Past the deadline before it starts: nothing is sent.
        let deadline = Deadline::start(Db::Pg(&conn), Duration::ZERO);
        assert!(deadline.pg_query(&conn, "SELECT 1", &[], false).unwrap().is_none());
        assert!(deadline.finish());
    }

    /// A statement after the search runs without its timeout.
    fn deadline_free(c: &pg::Conn) -> i32 {
        c.batch("SELECT pg_sleep(0.2)").unwrap();
        c.query_one_value("SELECT 7", &[]).unwrap()
    }

    #[test]
    fn a_statement_past_the_deadline_is_interrupted_and_the_handler_removed() {
        let conn = Connection::open_in_memory().unwrap();
        let started = Instant::now();
        let deadline = Deadline::start(Db::Sqlite(&conn), Duration::from_millis(30));
        let mut stmt = conn
            .prepare("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT sum(x) FROM c")
            .unwrap();
        let mut rows = stmt.query([]).unwrap();
        assert!(deadline.next(&mut rows).unwrap().is_none());
        drop(rows);
        assert!(deadline.finish(), "the interrupt was not seen as the deadline");
        assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
        // Gone with the deadline: a later statement runs to its end.
        let n: i64 = conn
            .query_row(
                "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 200000) SELECT count(*) FROM c",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(n, 200_000);
    }
}
