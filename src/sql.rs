//! One connection to either engine, for the store: SQL is written once, in SQLite's dialect
//! with `?N` parameters, run on SQLite as it is and translated for PostgreSQL (`$N`, `INSERT
//! OR IGNORE` → `ON CONFLICT DO NOTHING`, a generated id through `RETURNING`). Parameters are
//! rusqlite's (`params![…]`) and columns are read with rusqlite's `FromSql` on both engines (a
//! PostgreSQL value is first turned into the SQLite value it stands for), so a store function
//! reads the same whatever holds the rows. On SQLite this is rusqlite's cached statements
//! and nothing more.
//!
//! What differs beyond that (a function only one engine has) the store says itself, matching
//! on the variant.

use rusqlite::types::{FromSql, ToSqlOutput, Value, ValueRef};
use rusqlite::{Connection, ToSql};

use crate::db::pool::Pool;
use crate::error::{LcmError, Result};
use crate::pg;
use crate::pg::pool::PgPool;

pub(crate) use crate::pg::locks::WriteScope;

/// Where an engine's rows live: a SQLite file (its pool of connections) or a PostgreSQL
/// schema. What runs on both takes a `Db` from `read`/`write`; what runs on SQLite only so far
/// asks for `sqlite()`, which on PostgreSQL says so with E_UNSUPPORTED.
pub(crate) enum Backend {
    Sqlite(Pool),
    Postgres(PgPool),
}

impl Backend {
    /// The SQLite pool, for what only a SQLite file has (its cache of rendered messages, group
    /// commit, checkpoints); E_UNSUPPORTED on PostgreSQL, which no documented operation reaches.
    pub(crate) fn sqlite(&self) -> Result<&Pool> {
        match self {
            Backend::Sqlite(p) => Ok(p),
            Backend::Postgres(p) => Err(LcmError::Unsupported(format!(
                "this operation needs a SQLite file, and the database is on PostgreSQL ({}); every documented operation runs on both, so this is a bug to report",
                p.describe()
            ))),
        }
    }

    /// `f` on a reader (SQLite) or in a read snapshot (PostgreSQL).
    pub(crate) fn read<T>(&self, f: impl FnOnce(Db) -> Result<T>) -> Result<T> {
        match self {
            Backend::Sqlite(p) => p.read(|c| f(Db::Sqlite(c))),
            Backend::Postgres(p) => p.read(|c| f(Db::Pg(c))),
        }
    }

    /// `read`, seeing every write this engine committed (SQLite: on the writer).
    pub(crate) fn read_current<T>(&self, f: impl FnOnce(Db) -> Result<T>) -> Result<T> {
        match self {
            Backend::Sqlite(p) => p.read_current(|c| f(Db::Sqlite(c))),
            Backend::Postgres(p) => p.read(|c| f(Db::Pg(c))),
        }
    }

    /// `f` in one read snapshot, with the stamp of stored messages' rewrites as that snapshot
    /// sees them where one is kept: on SQLite's writer, the pool's count of message-changing
    /// writes and the file's data version (which another connection's commit moves); on
    /// PostgreSQL, the schema's count kept by triggers (`pg::rewrites`). `None` on a SQLite
    /// reader (`on_reader`: a long read must not hold the writer) and on a PostgreSQL schema
    /// without the count (opened read-only before an upgrade). What was rendered from stored
    /// messages stays right while the stamp stays the same.
    pub(crate) fn read_stamped<T>(
        &self,
        on_reader: bool,
        f: impl FnOnce(Db, Option<(u64, i64)>) -> Result<T>,
    ) -> Result<T> {
        match self {
            Backend::Sqlite(p) if on_reader => p.read(|c| {
                let snapshot = c.unchecked_transaction()?;
                f(Db::Sqlite(&snapshot), None)
            }),
            Backend::Sqlite(p) => p.read_current_counted(|c, rewrites| {
                let snapshot = c.unchecked_transaction()?;
                // A read begins the snapshot, so the data version read next is the snapshot's
                // (not an earlier one, which a commit in between would leave behind).
                snapshot
                    .prepare_cached("SELECT 1 FROM sqlite_schema LIMIT 1")?
                    .exists([])?;
                let stamp = match rewrites {
                    Some(n) => Some((n, crate::db::data_version(&snapshot)?)),
                    None => None,
                };
                f(Db::Sqlite(&snapshot), stamp)
            }),
            Backend::Postgres(p) => {
                let counted = p.counts_rewrites()?;
                p.read(|c| {
                    let stamp = match counted {
                        true => Some((pg::rewrites::count(c)?, 0)),
                        false => None,
                    };
                    f(Db::Pg(c), stamp)
                })
            }
        }
    }

    /// The write door: `f` in one write transaction, committed when it returns `Ok` and rolled
    /// back otherwise. SQLite: an immediate transaction on the writer (serialised in-process,
    /// waiting for another process's lock up to the busy timeout); PostgreSQL: a transaction
    /// holding the write locks of what `scope` says it changes, so that writes to other
    /// conversations go on meanwhile. `f` may run twice on PostgreSQL (`WriteScope::Found`, rolled
    /// back in between). Counted as a write that may change stored messages.
    pub(crate) fn write<T>(&self, scope: WriteScope<'_>, f: impl FnMut(Db) -> Result<T>) -> Result<T> {
        match self {
            Backend::Sqlite(p) => p.write(|c| in_transaction(c, f)),
            Backend::Postgres(p) => p.write(scope, pg_work(f)),
        }
    }

    /// `write` for work that never changes or deletes a stored message or its parts (ingest,
    /// compaction, resets): SQLite's messages rendered earlier stay valid across it
    /// (`Pool::write_preserving_messages`).
    pub(crate) fn write_preserving_messages<T>(
        &self,
        scope: WriteScope<'_>,
        f: impl FnMut(Db) -> Result<T>,
    ) -> Result<T> {
        match self {
            Backend::Sqlite(p) => p.write_preserving_messages(|c| in_transaction(c, f)),
            Backend::Postgres(p) => p.write(scope, pg_work(f)),
        }
    }

    /// `write_preserving_messages` that gives up on SQLite's writer at `deadline` (PostgreSQL
    /// waits for its write locks as every write does).
    pub(crate) fn write_preserving_messages_by<T>(
        &self,
        deadline: std::time::Instant,
        scope: WriteScope<'_>,
        f: impl FnMut(Db) -> Result<T>,
    ) -> Result<T> {
        match self {
            Backend::Sqlite(p) => p.write_preserving_messages_by(deadline, |c| in_transaction(c, f)),
            Backend::Postgres(p) => p.write(scope, pg_work(f)),
        }
    }

    /// `f` in one read snapshot on a connection of its own (SQLite: a fresh connection, as
    /// FTS5's integrity check reports a false checksum mismatch on a connection whose cached
    /// index structure predates another connection's write; PostgreSQL: a REPEATABLE READ
    /// snapshot): every read sees the same state, whatever writers do meanwhile.
    pub(crate) fn read_fresh<T>(&self, f: impl FnOnce(Db) -> Result<T>) -> Result<T> {
        match self {
            Backend::Sqlite(p) => {
                let conn = p.fresh_connection()?;
                let snapshot = conn.unchecked_transaction()?;
                f(Db::Sqlite(&snapshot))
            }
            Backend::Postgres(p) => p.read(|c| f(Db::Pg(c))),
        }
    }

    /// When a write starting now must have had its turn (`busyTimeoutMs` from now): a group
    /// commit's queued calls are answered E_BUSY past it.
    pub(crate) fn deadline(&self) -> std::time::Instant {
        match self {
            Backend::Sqlite(p) => p.deadline(),
            Backend::Postgres(p) => p.deadline(),
        }
    }

    /// The error of a call that waited in line (a group commit's queue) past its deadline.
    pub(crate) fn waited_too_long(&self) -> LcmError {
        match self {
            Backend::Sqlite(p) => p.waited_too_long(),
            Backend::Postgres(p) => p.waited_too_long(),
        }
    }

    /// The conversation's operation lock across processes, waited for up to `wait`, where the
    /// database needs one: on PostgreSQL other machines' operations (`PgPool::operation_lock`);
    /// a SQLite file's writers meet at its write lock, and `None` is returned.
    pub(crate) fn operation_lock(
        &self,
        conversation_id: i64,
        wait: std::time::Duration,
    ) -> Result<Option<pg::pool::HeldLock>> {
        match self {
            Backend::Sqlite(_) => Ok(None),
            Backend::Postgres(p) => p.operation_lock(conversation_id, wait).map(Some),
        }
    }

    pub(crate) fn check_writable(&self) -> Result<()> {
        match self {
            Backend::Sqlite(p) => p.check_writable(),
            Backend::Postgres(p) => p.check_writable(),
        }
    }

    /// The damage found in a SQLite file (PostgreSQL checks its own pages).
    pub(crate) fn damage(&self) -> Option<LcmError> {
        match self {
            Backend::Sqlite(p) => p.damage(),
            Backend::Postgres(_) => None,
        }
    }

    /// What the integrity check of a SQLite file came to (PostgreSQL: skipped).
    pub(crate) fn integrity(&self) -> crate::db::damage::Integrity {
        match self {
            Backend::Sqlite(p) => p.integrity(),
            Backend::Postgres(_) => crate::db::damage::Integrity {
                state: crate::db::damage::IntegrityState::Skipped,
                error: None,
            },
        }
    }

    pub(crate) fn close(&self) -> bool {
        match self {
            Backend::Sqlite(p) => p.close(),
            Backend::Postgres(p) => p.close(),
        }
    }

    pub(crate) fn is_closed(&self) -> bool {
        match self {
            Backend::Sqlite(p) => p.is_closed(),
            Backend::Postgres(p) => p.is_closed(),
        }
    }
}

/// A write's work as PostgreSQL's pool runs it.
fn pg_work<T>(mut f: impl FnMut(Db) -> Result<T>) -> impl FnMut(&pg::Conn) -> Result<T> {
    move |c| f(Db::Pg(c))
}

/// `f` in an immediate transaction on SQLite's writer, committed when it returns `Ok`.
pub(crate) fn in_transaction<T>(conn: &mut Connection, f: impl FnOnce(Db) -> Result<T>) -> Result<T> {
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    let out = f(Db::Sqlite(&tx))?;
    tx.commit()?;
    Ok(out)
}

/// A connection the store reads and writes through.
#[derive(Clone, Copy)]
pub(crate) enum Db<'a> {
    Sqlite(&'a Connection),
    Pg(&'a pg::Conn),
}

impl<'a> From<&'a Connection> for Db<'a> {
    fn from(conn: &'a Connection) -> Self {
        Db::Sqlite(conn)
    }
}

impl<'a> From<&'a rusqlite::Transaction<'_>> for Db<'a> {
    fn from(tx: &'a rusqlite::Transaction<'_>) -> Self {
        Db::Sqlite(tx)
    }
}

impl<'a> From<&'a pg::Conn> for Db<'a> {
    fn from(conn: &'a pg::Conn) -> Self {
        Db::Pg(conn)
    }
}

thread_local! {
    /// Text values this thread read with U+FFFD because they were not UTF-8.
    static LOSSY_READS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// How many text values this thread has read with U+FFFD in place of bytes that were not
/// UTF-8: compared before and after reading a row, it tells whether the row was damaged.
pub(crate) fn lossy_reads() -> u64 {
    LOSSY_READS.with(std::cell::Cell::get)
}

/// One row of a result, from either engine.
pub(crate) enum Row<'r> {
    Sqlite(&'r rusqlite::Row<'r>),
    Pg(&'r tokio_postgres::Row),
}

impl Row<'_> {
    /// Column `i`, converted as rusqlite converts a SQLite value.
    pub(crate) fn get<T: FromSql>(&self, i: usize) -> Result<T> {
        match self {
            Row::Sqlite(r) => match r.get(i) {
                // Text that is not UTF-8 (a flipped byte in the file): read with U+FFFD where it
                // cannot be decoded, so one damaged message does not make the rest unreadable
                // (`verify` names it).
                Err(rusqlite::Error::Utf8Error(..)) => match r.get_ref(i)? {
                    ValueRef::Text(bytes) => {
                        LOSSY_READS.with(|n| n.set(n.get() + 1));
                        T::column_result(ValueRef::Text(String::from_utf8_lossy(bytes).as_bytes()))
                            .map_err(|e| LcmError::Internal(format!("column {i}: {e}")))
                    }
                    other => Ok(T::column_result(other).map_err(|e| LcmError::Internal(format!("column {i}: {e}")))?),
                },
                other => Ok(other?),
            },
            Row::Pg(r) => {
                let value = pg::value::read(r, i)?;
                T::column_result(ValueRef::from(&value))
                    .map_err(|e| LcmError::Internal(format!("column {} ({}): {e}", i, r.columns()[i].name())))
            }
        }
    }
}

impl Db<'_> {
    /// Runs a statement; the number of rows it changed.
    pub(crate) fn execute(&self, sql: &str, params: &[&dyn ToSql]) -> Result<usize> {
        match self {
            Db::Sqlite(c) => Ok(c.prepare_cached(sql)?.execute(params)?),
            Db::Pg(c) => {
                let values = values(params)?;
                let n = c.execute_cached(&translate(sql), &values)?;
                Ok(n as usize)
            }
        }
    }

    /// `execute` for a write whose row count nobody reads, inside a transaction: on
    /// PostgreSQL it is sent with the next round trip (a query, the commit) instead of
    /// waiting for its own answer; an error then shows there. SQLite runs it at once.
    pub(crate) fn execute_deferred(&self, sql: &str, params: &[&dyn ToSql]) -> Result<()> {
        match self {
            Db::Sqlite(_) => self.execute(sql, params).map(drop),
            Db::Pg(c) => c.execute_deferred(&translate(sql), &values(params)?),
        }
    }

    /// The first row `sql` returns, if any, through `f`.
    pub(crate) fn query_row<T>(
        &self,
        sql: &str,
        params: &[&dyn ToSql],
        f: impl FnOnce(&Row) -> Result<T>,
    ) -> Result<Option<T>> {
        let (mut f, mut out) = (Some(f), None);
        self.query_each(sql, params, |r| {
            out = f.take().map(|f| f(r)).transpose()?;
            Ok(false)
        })?;
        Ok(out)
    }

    /// Every row `sql` returns, through `f`.
    pub(crate) fn query_map<T>(
        &self,
        sql: &str,
        params: &[&dyn ToSql],
        mut f: impl FnMut(&Row) -> Result<T>,
    ) -> Result<Vec<T>> {
        let mut out = Vec::new();
        self.query_each(sql, params, |r| {
            out.push(f(r)?);
            Ok(true)
        })?;
        Ok(out)
    }

    /// A table of the ids in the JSON array bound to `param` (`value`, and `key`: its index),
    /// to join against: SQLite's `json_each`, PostgreSQL's `json_array_elements_text`.
    pub(crate) fn id_list(&self, param: &str) -> String {
        self.json_list(param, "CAST(e.value AS BIGINT)")
    }

    /// `id_list` for text ids (summary ids): `value` is the text itself.
    pub(crate) fn text_list(&self, param: &str) -> String {
        self.json_list(param, "e.value")
    }

    /// `IN` the ids of the JSON array bound to `param`, to follow a column: on PostgreSQL
    /// `= ANY` of an array, which the planner looks up in the column's index (an `IN` over
    /// the array's rows it takes for 100 rows, and for a conversation's few thousand
    /// messages it hashed them all: each turn's duplicate check read the whole conversation).
    pub(crate) fn in_ids(&self, param: &str) -> String {
        self.json_in(param, "CAST(e AS BIGINT)")
    }

    /// `in_ids` for text ids.
    pub(crate) fn in_texts(&self, param: &str) -> String {
        self.json_in(param, "e")
    }

    fn json_in(&self, param: &str, value: &str) -> String {
        match self {
            Db::Sqlite(_) => format!("IN (SELECT value FROM json_each({param}))"),
            Db::Pg(_) => format!(
                "= ANY(ARRAY(SELECT {value} FROM json_array_elements_text(CAST(CAST({param} AS TEXT) AS json)) e))"
            ),
        }
    }

    fn json_list(&self, param: &str, value: &str) -> String {
        match self {
            Db::Sqlite(_) => format!("json_each({param})"),
            Db::Pg(_) => format!(
                "(SELECT {value} AS value, e.ordinality - 1 AS key
                  FROM json_array_elements_text(CAST(CAST({param} AS TEXT) AS json)) WITH ORDINALITY AS e(value, ordinality))"
            ),
        }
    }

    /// On SQLite, a read transaction on the connection for as long as the returned guard
    /// lives, so several statements see one snapshot; on PostgreSQL the pool's read already is
    /// one (nothing to do).
    pub(crate) fn snapshot(&self) -> Result<Option<rusqlite::Transaction<'_>>> {
        match self {
            Db::Sqlite(c) => Ok(Some(c.unchecked_transaction()?)),
            Db::Pg(_) => Ok(None),
        }
    }

    /// Whether the database has table `name` (a read-only open of an older file may lack
    /// lcm-native's own; PostgreSQL: in the connection's schema).
    pub(crate) fn has_table(&self, name: &str) -> Result<bool> {
        match self {
            Db::Sqlite(c) => crate::db::schema::has_table(c, name),
            Db::Pg(c) => c.has_table(name),
        }
    }

    /// Locks the conversations a `WriteScope::Found` write is about to change, before it changes
    /// them (PostgreSQL, when the write shares the schema; otherwise nothing to do).
    pub(crate) fn lock_conversations(&self, ids: &[i64]) -> Result<()> {
        match self {
            Db::Sqlite(_) => Ok(()),
            Db::Pg(c) => c.lock_conversations(ids),
        }
    }

    /// Whether a write must lock the conversations it changes (`lock_conversations`): a
    /// `WriteScope::Found` write on PostgreSQL sharing the schema.
    pub(crate) fn locks_by_conversation(&self) -> bool {
        matches!(self, Db::Pg(c) if c.shares_schema())
    }

    /// Says that a `WriteScope::Found` write must change which conversation a session names: where
    /// it shares the schema (`locks_by_conversation`) this fails, and the write runs again
    /// holding the whole schema.
    pub(crate) fn lock_whole_schema(&self) -> Result<()> {
        match self {
            Db::Sqlite(_) => Ok(()),
            Db::Pg(c) => c.lock_whole_schema(),
        }
    }

    /// Hands the rows `sql` returns to `f`, in order, until it returns false (on SQLite the
    /// rest is never read: an assembly newest-first stops when its budget is full).
    pub(crate) fn query_each(
        &self,
        sql: &str,
        params: &[&dyn ToSql],
        mut f: impl FnMut(&Row) -> Result<bool>,
    ) -> Result<()> {
        match self {
            Db::Sqlite(c) => {
                let mut stmt = c.prepare_cached(sql)?;
                let mut rows = stmt.query(params)?;
                while let Some(r) = rows.next()? {
                    if !f(&Row::Sqlite(r))? {
                        break;
                    }
                }
                Ok(())
            }
            Db::Pg(c) => {
                let values = values(params)?;
                for r in &c.query_cached(&translate(sql), &values)? {
                    if !f(&Row::Pg(r))? {
                        break;
                    }
                }
                Ok(())
            }
        }
    }

    /// Runs an `INSERT` and returns the id the database gave the row (`id_column`, the table's
    /// INTEGER PRIMARY KEY: SQLite's last rowid, PostgreSQL's `RETURNING`).
    pub(crate) fn insert_returning(&self, sql: &str, params: &[&dyn ToSql], id_column: &str) -> Result<i64> {
        match self {
            Db::Sqlite(c) => {
                c.prepare_cached(sql)?.execute(params)?;
                Ok(c.last_insert_rowid())
            }
            Db::Pg(_) => {
                let returning = format!("{sql} RETURNING {id_column}");
                self.query_row(&returning, params, |r| r.get(0))?
                    .ok_or_else(|| LcmError::Internal(format!("no id came back from: {sql}")))
            }
        }
    }

    /// `query_row`, for callers that expect a row (a missing one is an internal error).
    pub(crate) fn query_one<T>(
        &self,
        sql: &str,
        params: &[&dyn ToSql],
        f: impl FnOnce(&Row) -> Result<T>,
    ) -> Result<T> {
        self.query_row(sql, params, f)?
            .ok_or_else(|| LcmError::Internal(format!("no row from: {sql}")))
    }
}

/// rusqlite's parameters as the values they stand for, for PostgreSQL: a text holding NUL
/// (U+0000), which PostgreSQL's text cannot store, is refused here with a code rather than by
/// the server.
fn values(params: &[&dyn ToSql]) -> Result<Vec<Value>> {
    let values = to_values(params)?;
    if values.iter().any(|v| matches!(v, Value::Text(t) if t.contains('\0'))) {
        return Err(LcmError::invalid_input(
            "a text holds a NUL character (U+0000), which PostgreSQL cannot store; nothing was written",
        ));
    }
    Ok(values)
}

fn to_values(params: &[&dyn ToSql]) -> Result<Vec<Value>> {
    params
        .iter()
        .map(|p| {
            Ok(match p.to_sql()? {
                ToSqlOutput::Borrowed(v) => Value::try_from(v)
                    .map_err(|e| LcmError::invalid_input(format!("a parameter is not valid text: {e}")))?,
                ToSqlOutput::Owned(v) => v,
                other => {
                    return Err(LcmError::Internal(format!(
                        "a parameter PostgreSQL cannot take: {other:?}"
                    )))
                }
            })
        })
        .collect()
}

/// Rows of one `INSERT`, written in as few statements as may be: on PostgreSQL they wait
/// until `flush` and go as one statement of up to `ROWS_PER_STATEMENT` rows each, with the
/// next round trip (a turn's messages, parts and context rows were a statement each: each
/// parsed, planned and answered by the server alone); SQLite runs each row at once (its
/// statements cost no round trip), so nothing waits there.
pub(crate) struct Rows {
    /// `INSERT INTO t (columns) VALUES`.
    head: String,
    /// One row's values, `?1`…`?width` (literals may sit among them).
    tuple: &'static str,
    /// What follows the rows (`ON CONFLICT …`), or nothing.
    tail: &'static str,
    width: usize,
    /// The statement for one row (SQLite's, made once).
    single: String,
    waiting: Vec<Vec<Value>>,
}

/// At most this many rows in one statement on PostgreSQL (a statement's text and prepared
/// plan are kept per row count, so the count of shapes stays small too).
const ROWS_PER_STATEMENT: usize = 64;

impl Rows {
    pub(crate) fn new(head: impl Into<String>, tuple: &'static str, tail: &'static str, width: usize) -> Rows {
        let head = head.into();
        let single = format!("{head} {tuple}{tail}");
        Rows {
            head,
            tuple,
            tail,
            width,
            single,
            waiting: Vec::new(),
        }
    }

    /// Adds a row (`width` values): written now on SQLite, at `flush` on PostgreSQL.
    pub(crate) fn push(&mut self, db: Db, params: &[&dyn ToSql]) -> Result<()> {
        debug_assert_eq!(params.len(), self.width);
        match db {
            Db::Sqlite(_) => db.execute_deferred(&self.single, params),
            Db::Pg(_) => {
                self.waiting.push(values(params)?);
                Ok(())
            }
        }
    }

    /// Sends the rows waiting (PostgreSQL), with the next round trip.
    pub(crate) fn flush(&mut self, db: Db) -> Result<()> {
        let Db::Pg(c) = db else { return Ok(()) };
        let waiting = std::mem::take(&mut self.waiting);
        for chunk in waiting.chunks(ROWS_PER_STATEMENT) {
            let params: Vec<Value> = chunk.iter().flatten().cloned().collect();
            c.execute_deferred(&translate(&self.statement(chunk.len())), &params)?;
        }
        Ok(())
    }

    /// The statement for `n` rows: the tuple once per row, its placeholders moved on by
    /// `width` each time.
    fn statement(&self, n: usize) -> String {
        let tuples: Vec<String> = (0..n).map(|i| shift_placeholders(self.tuple, i * self.width)).collect();
        format!("{} {}{}", self.head, tuples.join(", "), self.tail)
    }
}

/// `?N` → `?(N + by)` outside quotes.
fn shift_placeholders(sql: &str, by: usize) -> String {
    if by == 0 {
        return sql.to_string();
    }
    let mut out = String::with_capacity(sql.len() + 8);
    let mut quote: Option<char> = None;
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        out.push(c);
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '\'' || c == '"' => quote = Some(c),
            None if c == '?' && chars.peek().is_some_and(|d| d.is_ascii_digit()) => {
                let mut n = 0usize;
                while let Some(d) = chars.peek().and_then(|d| d.to_digit(10)) {
                    n = n * 10 + d as usize;
                    chars.next();
                }
                out.push_str(&(n + by).to_string());
            }
            None => {}
        }
    }
    out
}

/// SQLite's dialect as PostgreSQL's: `?N` → `$N` (outside quotes), `INSERT OR IGNORE` →
/// `INSERT … ON CONFLICT DO NOTHING`. `INSERT OR REPLACE` is not translated (PostgreSQL
/// rejects it; what it means needs the conflict target): the store writes an upsert instead.
pub(crate) fn translate(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len() + 16);
    let mut quote: Option<char> = None;
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        match quote {
            Some(q) => {
                if c == q {
                    quote = None;
                }
                out.push(c);
            }
            None if c == '\'' || c == '"' => {
                quote = Some(c);
                out.push(c);
            }
            None if c == '?' && chars.peek().is_some_and(|d| d.is_ascii_digit()) => out.push('$'),
            None => out.push(c),
        }
    }
    let trimmed = out.trim_start();
    if trimmed.len() >= 16 && trimmed[..16].eq_ignore_ascii_case("INSERT OR IGNORE") {
        let rest = &trimmed[16..];
        let (body, returning) = match rest.to_ascii_uppercase().rfind(" RETURNING ") {
            Some(at) => (&rest[..at], &rest[at..]),
            None => (rest, ""),
        };
        return format!("INSERT{body} ON CONFLICT DO NOTHING{returning}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_and_insert_or_ignore_translate() {
        assert_eq!(
            translate("SELECT a FROM t WHERE b = ?1 AND c = '?2' AND d = ?12"),
            "SELECT a FROM t WHERE b = $1 AND c = '?2' AND d = $12"
        );
        assert_eq!(
            translate("INSERT OR IGNORE INTO t (a) VALUES (?1)"),
            "INSERT INTO t (a) VALUES ($1) ON CONFLICT DO NOTHING"
        );
        assert_eq!(
            translate("insert or ignore into t (a) values (?1) RETURNING a"),
            "INSERT into t (a) values ($1) ON CONFLICT DO NOTHING RETURNING a"
        );
    }

    #[test]
    fn rows_go_in_one_statement_with_their_placeholders_moved_on() {
        let rows = Rows::new(
            "INSERT INTO t (a, b, c) VALUES",
            "(?1, '?1', ?2)",
            " ON CONFLICT (a) DO NOTHING",
            2,
        );
        assert_eq!(
            rows.statement(1),
            "INSERT INTO t (a, b, c) VALUES (?1, '?1', ?2) ON CONFLICT (a) DO NOTHING"
        );
        assert_eq!(rows.single, rows.statement(1), "SQLite's statement is the one-row one");
        assert_eq!(
            translate(&rows.statement(3)),
            "INSERT INTO t (a, b, c) VALUES ($1, '?1', $2), ($3, '?1', $4), ($5, '?1', $6) ON CONFLICT (a) DO NOTHING"
        );
        assert_eq!(shift_placeholders("(?9, ?10)", 10), "(?19, ?20)");
    }

    /// On SQLite each row is written when it is pushed (nothing waits for a flush).
    #[test]
    fn rows_on_sqlite_are_written_at_once() {
        let c = Connection::open_in_memory().unwrap();
        c.execute_batch("CREATE TABLE t (a INTEGER, b TEXT)").unwrap();
        let mut rows = Rows::new("INSERT INTO t (a, b) VALUES", "(?1, ?2)", "", 2);
        for i in 0..3i64 {
            rows.push(Db::Sqlite(&c), rusqlite::params![i, format!("r{i}")])
                .unwrap();
        }
        let n: i64 = c.query_row("SELECT count(*) FROM t", [], |r| r.get(0)).unwrap();
        assert_eq!(n, 3);
        rows.flush(Db::Sqlite(&c)).unwrap();
        let n: i64 = c.query_row("SELECT count(*) FROM t", [], |r| r.get(0)).unwrap();
        assert_eq!(n, 3);
    }
}
