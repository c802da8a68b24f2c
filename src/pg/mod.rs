//! PostgreSQL, the second place the rows can live (issue #32): where a `postgres://` URL
//! points (server, database, schema), one connection to it, and PostgreSQL's errors as
//! lcm-native's codes.
//!
//! The client is tokio-postgres (asynchronous; the addon already runs tokio), not the
//! synchronous `postgres` crate, which starts a runtime per call and panics on a thread of
//! another runtime, nor sqlx, whose SQLite driver would link a second libsqlite3 beside
//! rusqlite's. The callers are synchronous (the store's code runs on blocking threads, as with
//! SQLite): each connection's socket is driven by one small runtime of our own, and a call
//! waits for its answer with a plain executor, so it works from any thread that may block.

pub(crate) mod ddl;
pub(crate) mod leases;
pub(crate) mod locks;
pub(crate) mod pool;
pub(crate) mod rewrites;
pub(crate) mod search;
pub(crate) mod tls;
pub(crate) mod totals;

pub(crate) mod value;

use std::future::Future;
use std::sync::OnceLock;
use std::time::Duration;

use tokio_postgres::config::Host;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::{ToSql, Type};

use crate::error::{LcmError, Result};

/// The schema lcm-native's tables go in when the URL names none: its own, so that a database
/// shared with other applications keeps them apart.
pub(crate) const DEFAULT_SCHEMA: &str = "lcm";

pub(crate) use crate::shown_location::{is_secret_param, percent_decode, redact_password};

/// Whether `location` names a PostgreSQL database rather than a SQLite file: a
/// `postgres://` or `postgresql://` URL (the scheme in any case, as URLs allow). The addon
/// exports it (`isDatabaseUrl`); the plugin keeps a one-line copy (its registration must not
/// load the addon) that plugin.spec holds to the same answers.
pub(crate) fn is_url(location: &str) -> bool {
    scheme_len(location).is_some()
}

/// The length of `location`'s PostgreSQL scheme with its `://`, if it has one.
fn scheme_len(location: &str) -> Option<usize> {
    ["postgres://", "postgresql://"]
        .into_iter()
        .find(|scheme| {
            location
                .get(..scheme.len())
                .is_some_and(|head| head.eq_ignore_ascii_case(scheme))
        })
        .map(str::len)
}

/// A parsed `postgres://` URL: the server and database (libpq's URL syntax, which
/// tokio-postgres reads) and the schema lcm-native's tables live in (`?schema=`, ours).
#[derive(Clone)]
pub(crate) struct Location {
    config: tokio_postgres::Config,
    pub schema: String,
    /// The URL's libpq parameters but the secret ones (`sslmode=…`), kept for `describe`.
    shown_params: Vec<String>,
    /// The TLS connector for a server reached over TCP (`tls`); `None`: a Unix socket, or
    /// `sslmode=disable`.
    tls: Option<tokio_postgres_rustls::MakeRustlsConnect>,
    /// What sits between lcm-native and the server (`?pooler=`, ours).
    pub pooler: Pooler,
}

/// What the URL's connections reach: the server itself (or a pooler that keeps each client's
/// session), or a pooler that hands a server session to a client for one transaction only
/// (PgBouncer's `pool_mode = transaction`: `?pooler=transaction`). Through the latter nothing
/// may outlive a transaction: no session setting (the schema's search path and the call's
/// timeouts are set for each transaction), no prepared statement kept (a statement is sent
/// whole each time, with the parameter types the server gave it once), no session-level
/// advisory lock (the setup's and a copy's lock is held by a transaction left open on a
/// connection of its own, an operation's is a lease: `leases`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Pooler {
    None,
    Transaction,
}

impl Pooler {
    fn read(value: &str) -> Result<Pooler> {
        match value {
            "none" | "session" => Ok(Pooler::None),
            "transaction" => Ok(Pooler::Transaction),
            other => Err(LcmError::invalid_input(format!(
                "pooler={other}: expected transaction (PgBouncer's pool_mode = transaction, or another pooler that hands out a server session per transaction) or none"
            ))),
        }
    }
}

impl Location {
    /// Reads `url`; `schema` (the caller's option) wins over the URL's `?schema=`.
    pub(crate) fn parse(url: &str, schema: Option<&str>) -> Result<Location> {
        if !is_url(url) {
            return Err(LcmError::invalid_input(format!(
                "`{}` is not a PostgreSQL URL (postgres://user@host:port/database)",
                redact_password(url)
            )));
        }
        // tokio-postgres reads the scheme in lower case only.
        let lowered = scheme_len(url).map(|n| format!("{}{}", url[..n].to_ascii_lowercase(), &url[n..]));
        let url = lowered.as_deref().unwrap_or(url);
        let (base, query) = url.split_once('?').unwrap_or((url, ""));
        let after_scheme = base.split_once("://").map_or(base, |(_, rest)| rest);
        if after_scheme.matches('@').count() > 1
            || after_scheme
                .find('/')
                .is_some_and(|slash| after_scheme[slash..].contains('@'))
        {
            // `user:pa@ss@host`, `user:pa/ss@host`: libpq would read part of the password as
            // the host or the database, and show it in every message.
            return Err(LcmError::invalid_input(format!(
                "`{}`: a `@` after the host; percent-encode `@`, `/`, `?` and `#` in the user name and password (%40, %2F, %3F, %23)",
                redact_password(url)
            )));
        }
        let mut url_schema = None;
        let mut pooler = Pooler::None;
        let mut rest = Vec::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            match pair.split_once('=') {
                Some(("schema", value)) => url_schema = Some(percent_decode(value)),
                Some(("pooler", value)) => pooler = Pooler::read(&percent_decode(value))?,
                _ => rest.push(pair),
            }
        }
        // The TLS parameters are read here (tokio-postgres knows neither `verify-*` nor the
        // certificate files), the rest by tokio-postgres.
        // Every libpq TLS parameter is read here, also those not implemented (refused by
        // name rather than passed on), and one without `=`.
        let (tls_pairs, libpq_pairs): (Vec<&str>, Vec<&str>) = rest
            .iter()
            .partition(|p| tls::is_tls_param(p.split_once('=').map_or(**p, |(k, _)| k)));
        let tls_params: Vec<(String, Option<String>)> = tls_pairs
            .iter()
            .map(|p| match p.split_once('=') {
                Some((k, v)) => (k.to_string(), Some(percent_decode(v))),
                None => (p.to_string(), None),
            })
            .collect();
        let tls_settings = tls::TlsSettings::read(&tls_params)?;
        let libpq_url = if libpq_pairs.is_empty() {
            base.to_string()
        } else {
            format!("{base}?{}", libpq_pairs.join("&"))
        };
        let mut config: tokio_postgres::Config = libpq_url.parse().map_err(|e| {
            LcmError::invalid_input(format!(
                "`{}` is not a usable PostgreSQL URL: {e}",
                redact_password(url)
            ))
        })?;
        password_from_env(&mut config, std::env::var("PGPASSWORD").ok());
        let shown_params = rest
            .iter()
            .filter(|p| !is_secret_param(p.split_once('=').map_or(p, |(k, _)| k)))
            .map(|p| p.to_string())
            .collect();
        if config.get_hosts().is_empty() {
            return Err(LcmError::invalid_input(format!(
                "`{}` names no host (postgres://user@host/database, or a socket directory as %2Fpath)",
                redact_password(url)
            )));
        }
        // libpq never encrypts a Unix socket; over TCP, rustls does what `sslmode` asks.
        let tcp = config
            .get_hosts()
            .iter()
            .any(|h| matches!(h, tokio_postgres::config::Host::Tcp(_)));
        let tls = match tcp && tls_settings.mode != tls::SslMode::Disable {
            true => {
                config.ssl_mode(tls_settings.tokio_mode());
                Some(tokio_postgres_rustls::MakeRustlsConnect::new(
                    tls_settings.client_config()?,
                ))
            }
            false => {
                config.ssl_mode(tokio_postgres::config::SslMode::Disable);
                None
            }
        };
        config.application_name("lcm-native");
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(Duration::from_secs(10));
        }
        // A peer that vanished without closing (a gateway's network dropped) is noticed.
        config.keepalives(true).keepalives_idle(Duration::from_secs(30));
        let schema = schema
            .map(str::to_string)
            .or(url_schema)
            .unwrap_or_else(|| DEFAULT_SCHEMA.into());
        check_schema_name(&schema)?;
        Ok(Location {
            config,
            schema,
            shown_params,
            tls,
            pooler,
        })
    }

    /// The location for messages and logs, as a URL that can be given back to `--db`: user,
    /// host, port, database, the parameters and the schema, never the password (which then
    /// comes from `PGPASSWORD`).
    pub(crate) fn describe(&self) -> String {
        let hosts: Vec<String> = self
            .config
            .get_hosts()
            .iter()
            .map(|h| match h {
                // (A socket directory where there are none, as Windows: a name, encoded alike.)
                Host::Tcp(name) => name.replace('/', "%2F"),
                // A socket directory, percent-encoded as libpq reads it in a URL.
                #[cfg(unix)]
                Host::Unix(path) => path.display().to_string().replace('/', "%2F"),
            })
            .collect();
        let port = self
            .config
            .get_ports()
            .first()
            .map(|p| format!(":{p}"))
            .unwrap_or_default();
        let mut params: Vec<&str> = self.shown_params.iter().map(String::as_str).collect();
        if self.pooler == Pooler::Transaction {
            params.push("pooler=transaction");
        }
        format!(
            "postgres://{}{}{}/{}?{}schema={}",
            self.config.get_user().map(|u| format!("{u}@")).unwrap_or_default(),
            hosts.join(","),
            port,
            self.config.get_dbname().unwrap_or(""),
            params.iter().map(|p| format!("{p}&")).collect::<String>(),
            self.schema
        )
    }

    /// Opens a connection whose search path is the schema (which need not exist yet).
    pub(crate) fn connect(&self) -> Result<Conn> {
        self.connect_within(None)
    }

    /// `connect`, the whole handshake (not only the socket's, which is all libpq's
    /// `connect_timeout` bounds: a stopped server's kernel still accepts the socket) bounded
    /// by `limit` or the connect timeout, whichever is shorter.
    pub(crate) fn connect_within(&self, limit: Option<Duration>) -> Result<Conn> {
        self.handshake(limit)?.configured()
    }

    /// A connection as the handshake leaves it, before `Conn::configured`.
    pub(crate) fn handshake(&self, limit: Option<Duration>) -> Result<Conn> {
        let config = self.config.clone();
        let tls = self.tls.clone();
        let described = self.describe();
        let bound = config
            .get_connect_timeout()
            .copied()
            .into_iter()
            .chain(limit)
            .min()
            .unwrap_or(Duration::from_secs(10));
        let connected = wait(runtime().spawn(async move {
            // The socket's driver runs on its own; it ends when the client is dropped or the
            // server goes.
            let handshake = async {
                match tls {
                    Some(tls) => config.connect(tls).await.map(|(client, connection)| {
                        tokio::spawn(connection);
                        client
                    }),
                    None => config.connect(tokio_postgres::NoTls).await.map(|(client, connection)| {
                        tokio::spawn(connection);
                        client
                    }),
                }
            };
            let client = tokio::time::timeout(bound, handshake)
                .await
                .map_err(|_| None)?
                .map_err(Some)?;
            Ok::<_, Option<tokio_postgres::Error>>(client)
        }))
        .map_err(|e| LcmError::Internal(format!("the PostgreSQL connection task failed: {e}")))?;
        let client = connected.map_err(|e| match e {
            Some(e) => connection_error(&described, &e),
            None => LcmError::Connection {
                message: format!(
                    "cannot connect to {described}: no answer within {} ms",
                    bound.as_millis()
                ),
            },
        })?;
        let conn = Conn {
            client,
            tls: self.tls.clone(),
            schema: self.schema.clone(),
            described,
            statements: Default::default(),
            deferred: Default::default(),
            search: Default::default(),
            limit_ms: Default::default(),
            broken: Default::default(),
            write_lock: std::sync::Mutex::new((locks::Held::Nothing, false)),
            pooler: self.pooler,
            in_transaction: Default::default(),
            local: Default::default(),
        };
        Ok(conn)
    }
}

impl Conn {
    /// The connection with the schema as its search path (the session's, or through a
    /// transaction pooler each transaction's), on a UTF8 database.
    pub(crate) fn configured(self) -> Result<Conn> {
        if self.pooler == Pooler::None {
            self.batch(&format!(
                "SET search_path TO {}; SET client_min_messages TO warning",
                quote_ident(&self.schema)
            ))?;
        }
        let encoding: String = self.query_one_value("SHOW server_encoding", &[])?;
        if encoding != "UTF8" {
            return Err(LcmError::schema(
                &self.described,
                format!(
                    "{} uses the {encoding} encoding; lcm-native needs a UTF8 database (CREATE DATABASE … ENCODING 'UTF8')",
                    self.described
                ),
            ));
        }
        Ok(self)
    }
}

/// The password libpq would take from `PGPASSWORD` when the URL gives none (tokio-postgres
/// reads no environment), so that a URL printed without its password can be used as it is.
fn password_from_env(config: &mut tokio_postgres::Config, env: Option<String>) {
    if let (None, Some(password)) = (config.get_password(), env.filter(|p| !p.is_empty())) {
        config.password(password);
    }
}

/// One open connection. Calls block the calling thread until the server answers (callers
/// run on threads that may block, as for SQLite).
pub(crate) struct Conn {
    client: tokio_postgres::Client,
    /// The connector a cancel request goes through (the server may take only TLS).
    tls: Option<tokio_postgres_rustls::MakeRustlsConnect>,
    pub schema: String,
    described: String,
    /// Prepared statements by their SQL (as rusqlite's `prepare_cached`): a statement is
    /// parsed and planned by the server once per connection.
    statements: std::sync::Mutex<std::collections::HashMap<String, tokio_postgres::Statement>>,
    /// Statements whose answer nobody reads (`execute_deferred`), sent ahead of the next round
    /// trip in the same pipeline.
    deferred: std::sync::Mutex<Vec<(Prepared, Vec<rusqlite::types::Value>)>>,
    /// What the schema has for grep, once found complete (`search::probe`).
    pub(crate) search: std::sync::OnceLock<search::Support>,
    /// How long one round trip may take before the server counts as gone (ms; 0: no bound).
    /// The pool sets it a little past the server's own `lock_timeout` and
    /// `statement_timeout`, which answer first when the server is alive.
    limit_ms: std::sync::atomic::AtomicU64,
    /// A round trip went unanswered: the connection's state is unknown, and it is dropped.
    broken: std::sync::atomic::AtomicBool,
    /// How the write this connection is in holds the schema's write lock, and whether its work
    /// asked for the whole schema (`locks`).
    write_lock: std::sync::Mutex<(locks::Held, bool)>,
    /// What the connection goes through (`Pooler`).
    pooler: Pooler,
    /// Inside a transaction begun by `transaction_as` or `begin_open`.
    in_transaction: std::sync::atomic::AtomicBool,
    /// Through a pooler: what each transaction sets for itself (`Pooler::Transaction`), with
    /// the parameter types each cached statement's SQL was given by the server.
    local: std::sync::Mutex<Local>,
}

/// The settings a connection through a transaction pooler gives each of its transactions
/// (directly connected, they are the session's, set once), and the parameter types of the
/// statements it sends whole.
#[derive(Default)]
struct Local {
    /// `lock_timeout`, ms (0: none).
    lock_ms: u64,
    /// `statement_timeout`, ms (0: none).
    statement_ms: u64,
    types: std::collections::HashMap<String, std::sync::Arc<[Type]>>,
}

/// A statement as a connection runs it again and again.
#[derive(Clone)]
enum Prepared {
    /// Parsed once by the server and kept for the connection's life.
    Named(tokio_postgres::Statement),
    /// Sent whole each time as the unnamed statement, with the parameter types the server gave
    /// it once (through a transaction pooler, where a kept statement would be on another
    /// server session by the next transaction).
    Typed(std::sync::Arc<str>, std::sync::Arc<[Type]>),
}

/// What a transaction through a transaction pooler sets first: the schema's search path, the
/// call's bounds and the level of notices, for that transaction only.
const SET_LOCAL: &str = "SELECT set_config('search_path', $1, true), set_config('lock_timeout', $2, true), set_config('statement_timeout', $3, true), set_config('client_min_messages', 'warning', true)";

impl Conn {
    /// Where this connection goes, without the password.
    pub(crate) fn describe(&self) -> &str {
        &self.described
    }

    /// What the connection goes through.
    pub(crate) fn pooler(&self) -> Pooler {
        self.pooler
    }

    /// Whether a transaction is open on this connection (`transaction_as`, `begin_open`).
    pub(crate) fn in_transaction(&self) -> bool {
        self.in_transaction.load(std::sync::atomic::Ordering::SeqCst)
    }

    fn local(&self) -> std::sync::MutexGuard<'_, Local> {
        self.local.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Bounds every round trip of this connection to `limit` (None: unbounded).
    pub(crate) fn set_limit(&self, limit: Option<Duration>) {
        let ms = limit.map_or(0, |d| d.as_millis().max(1) as u64);
        self.limit_ms.store(ms, std::sync::atomic::Ordering::SeqCst);
    }

    /// The server's `lock_timeout` and `statement_timeout` (ms; 0: none): the session's,
    /// or, through a transaction pooler, each later transaction's.
    pub(crate) fn set_bounds(&self, lock_ms: u64, statement_ms: u64) -> Result<()> {
        match self.pooler {
            Pooler::None => self.batch(&format!(
                "SET lock_timeout = {lock_ms}; SET statement_timeout = {statement_ms}"
            )),
            Pooler::Transaction => {
                let mut local = self.local();
                local.lock_ms = lock_ms;
                local.statement_ms = statement_ms;
                Ok(())
            }
        }
    }

    /// Whether a round trip went unanswered (the pool drops the connection).
    pub(crate) fn is_broken(&self) -> bool {
        self.broken.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// `f`, through a transaction pooler in a transaction of its own when none is open (so that
    /// its statements reach one server session, with the schema's search path and the call's
    /// bounds); directly, `f` as it is.
    fn in_a_transaction<T>(&self, f: impl FnOnce(&Conn) -> Result<T>) -> Result<T> {
        if self.pooler == Pooler::Transaction && !self.in_transaction() {
            self.transaction(f)
        } else {
            f(self)
        }
    }

    /// The server's answer to `f`, within the connection's limit. Past it the server counts
    /// as gone (stopped, frozen, a network that dropped the packets): E_CONNECTION, the
    /// connection is marked broken, and the query is cancelled in the background (so a server
    /// that was only slow frees its locks).
    fn answer<T>(&self, f: impl Future<Output = std::result::Result<T, tokio_postgres::Error>>) -> Result<T> {
        let deferred = std::mem::take(&mut *self.deferred.lock().unwrap_or_else(|p| p.into_inner()));
        if deferred.is_empty() {
            return self.answer_alone(f);
        }
        // The deferred statements first, then `f`, polled together: tokio-postgres sends each
        // request when its future is first polled, in this order, so they go out in one
        // pipeline and the server answers them in order (a failing one aborts the
        // transaction, and its error comes first).
        let params: Vec<Vec<value::Param>> = deferred
            .iter()
            .map(|(_, values)| values.iter().map(value::Param).collect())
            .collect();
        let refs: Vec<Vec<&(dyn ToSql + Sync)>> = params.iter().map(|p| value::refs(p)).collect();
        let sent = deferred
            .iter()
            .zip(&refs)
            .map(|((statement, _), refs)| self.run_execute(statement, refs));
        let all = futures::future::try_join(futures::future::try_join_all(sent), f);
        self.answer_alone(async move { all.await.map(|(_, out)| out) })
    }

    /// Executes a cached statement.
    async fn run_execute(
        &self,
        statement: &Prepared,
        params: &[&(dyn ToSql + Sync)],
    ) -> std::result::Result<u64, tokio_postgres::Error> {
        match statement {
            Prepared::Named(s) => self.client.execute(s, params).await,
            Prepared::Typed(sql, types) => {
                let typed: Vec<_> = params.iter().copied().zip(types.iter().cloned()).collect();
                self.client.execute_typed(sql, &typed).await
            }
        }
    }

    /// Queries a cached statement.
    async fn run_query(
        &self,
        statement: &Prepared,
        params: &[&(dyn ToSql + Sync)],
    ) -> std::result::Result<Vec<tokio_postgres::Row>, tokio_postgres::Error> {
        match statement {
            Prepared::Named(s) => self.client.query(s, params).await,
            Prepared::Typed(sql, types) => {
                let typed: Vec<_> = params.iter().copied().zip(types.iter().cloned()).collect();
                self.client.query_typed(sql, &typed).await
            }
        }
    }

    /// Sends `execute_cached`'s statement with the next round trip instead of waiting for its
    /// answer now: for writes whose row count nobody reads, inside a transaction (its commit
    /// is such a round trip). An error shows at that round trip.
    pub(crate) fn execute_deferred(&self, sql: &str, params: &[rusqlite::types::Value]) -> Result<()> {
        let statement = self.cached(sql, params.len())?;
        self.defer(statement, params.to_vec());
        Ok(())
    }

    fn defer(&self, statement: Prepared, params: Vec<rusqlite::types::Value>) {
        self.deferred
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((statement, params));
    }

    /// `answer` without the deferred statements.
    fn answer_alone<T>(&self, f: impl Future<Output = std::result::Result<T, tokio_postgres::Error>>) -> Result<T> {
        use std::sync::atomic::Ordering;
        if self.is_broken() {
            return Err(LcmError::Connection {
                message: format!(
                    "the connection to {} was dropped after a call went unanswered",
                    self.described
                ),
            });
        }
        let ms = self.limit_ms.load(Ordering::SeqCst);
        if ms == 0 {
            return wait(f).map_err(|e| self.error(&e));
        }
        // Made inside the runtime: a timer needs its clock where it is created.
        let timer = runtime().spawn(async move { tokio::time::sleep(Duration::from_millis(ms)).await });
        let f = std::pin::pin!(f);
        match wait(futures::future::select(f, timer)) {
            futures::future::Either::Left((out, _)) => out.map_err(|e| self.error(&e)),
            futures::future::Either::Right(_) => {
                self.broken.store(true, Ordering::SeqCst);
                let cancel = self.client.cancel_token();
                let tls = self.tls.clone();
                runtime().spawn(async move {
                    let within = Duration::from_secs(10);
                    let _ = match tls {
                        Some(tls) => tokio::time::timeout(within, cancel.cancel_query(tls)).await,
                        None => tokio::time::timeout(within, cancel.cancel_query(tokio_postgres::NoTls)).await,
                    };
                });
                Err(LcmError::Connection {
                    message: format!(
                        "{} did not answer within {ms} ms (a server stopped or frozen, or a network that drops packets); the connection is dropped",
                        self.described
                    ),
                })
            }
        }
    }

    /// Runs statements with no parameters (DDL, `BEGIN`, `COMMIT`).
    pub(crate) fn batch(&self, sql: &str) -> Result<()> {
        self.in_a_transaction(|c| c.answer(c.client.batch_execute(sql)))
    }

    /// `batch` for what PostgreSQL runs only outside a transaction (`VACUUM`). Through a
    /// transaction pooler it runs without the schema's search path (name tables with their
    /// schema) and without the connection's bounds.
    pub(crate) fn batch_outside_transaction(&self, sql: &str) -> Result<()> {
        self.answer(self.client.batch_execute(sql))
    }

    /// The server process this connection's statements reach now (a transaction pooler may
    /// hand the next statement another's).
    pub(crate) fn backend_pid(&self) -> Result<i32> {
        self.simple_value("SELECT pg_backend_pid()")?
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| LcmError::Internal("pg_backend_pid() returned no row".into()))
    }

    /// The first column of the first row of `sql`, as text, asked without a prepared statement
    /// and as it is (no transaction around it, whatever the pooler).
    pub(crate) fn simple_value(&self, sql: &str) -> Result<Option<String>> {
        let messages = self.answer(self.client.simple_query(sql))?;
        Ok(messages.iter().find_map(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(row) => row.get(0).map(str::to_string),
            _ => None,
        }))
    }

    pub(crate) fn execute(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<u64> {
        self.in_a_transaction(|c| match c.pooler {
            Pooler::None => c.answer(c.client.execute(sql, params)),
            Pooler::Transaction => {
                let typed = c.typed_once(sql, params)?;
                c.answer(c.client.execute_typed(sql, &typed))
            }
        })
    }

    pub(crate) fn query(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Vec<tokio_postgres::Row>> {
        self.in_a_transaction(|c| match c.pooler {
            Pooler::None => c.answer(c.client.query(sql, params)),
            Pooler::Transaction => {
                let typed = c.typed_once(sql, params)?;
                c.answer(c.client.query_typed(sql, &typed))
            }
        })
    }

    /// `params` with the types the server gives `sql`'s parameters, for a statement sent once
    /// through a transaction pooler as the unnamed statement. The rows a named statement
    /// answers keep it alive, and its closing would go out after the transaction, to whatever
    /// server session the pooler picks then: the statement that learns the types is closed
    /// here, in the transaction.
    fn typed_once<'p>(
        &self,
        sql: &str,
        params: &[&'p (dyn ToSql + Sync)],
    ) -> Result<Vec<(&'p (dyn ToSql + Sync), Type)>> {
        let types: Vec<Type> = match params.len() {
            0 => Vec::new(),
            _ => self.prepare(sql)?.params().to_vec(),
        };
        Ok(params.iter().copied().zip(types).collect())
    }

    /// `sql` as run again and again: prepared once per connection, or, through a transaction
    /// pooler, sent whole each time with the parameter types the server gave it once (asked
    /// inside a transaction, the statement closed in it). `params`: how many it takes.
    fn cached(&self, sql: &str, params: usize) -> Result<Prepared> {
        if self.pooler == Pooler::None {
            let mut cache = self.statements.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(s) = cache.get(sql) {
                return Ok(Prepared::Named(s.clone()));
            }
            let statement = self.prepare(sql)?;
            cache.insert(sql.to_string(), statement.clone());
            return Ok(Prepared::Named(statement));
        }
        if let Some(types) = self.local().types.get(sql) {
            return Ok(Prepared::Typed(sql.into(), types.clone()));
        }
        let types: std::sync::Arc<[Type]> = match params {
            0 => std::sync::Arc::new([]),
            _ => self.in_a_transaction(|c| c.prepare(sql).map(|s| s.params().into()))?,
        };
        self.local().types.insert(sql.to_string(), types.clone());
        Ok(Prepared::Typed(sql.into(), types))
    }

    /// Runs `sql` (prepared once) with SQLite-typed values as parameters.
    pub(crate) fn execute_cached(&self, sql: &str, params: &[rusqlite::types::Value]) -> Result<u64> {
        self.in_a_transaction(|c| {
            let statement = c.cached(sql, params.len())?;
            let params: Vec<value::Param> = params.iter().map(value::Param).collect();
            c.answer(c.run_execute(&statement, &value::refs(&params)))
        })
    }

    /// Queries `sql` (prepared once) with SQLite-typed values as parameters.
    pub(crate) fn query_cached(
        &self,
        sql: &str,
        params: &[rusqlite::types::Value],
    ) -> Result<Vec<tokio_postgres::Row>> {
        self.in_a_transaction(|c| {
            let statement = c.cached(sql, params.len())?;
            let params: Vec<value::Param> = params.iter().map(value::Param).collect();
            c.answer(c.run_query(&statement, &value::refs(&params)))
        })
    }

    /// `query_cached` for a statement built for one call (a search's SQL varies with its
    /// options): parsed each time, not kept.
    pub(crate) fn query_once(&self, sql: &str, params: &[rusqlite::types::Value]) -> Result<Vec<tokio_postgres::Row>> {
        let params: Vec<value::Param> = params.iter().map(value::Param).collect();
        self.query(sql, &value::refs(&params))
    }

    /// Parses `sql` for executions in this connection's life (a statement through a
    /// transaction pooler must be closed in the transaction that parsed it).
    fn prepare(&self, sql: &str) -> Result<tokio_postgres::Statement> {
        self.answer(self.client.prepare(sql))
    }

    /// The first column of the one row `sql` returns.
    pub(crate) fn query_one_value<T>(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<T>
    where
        T: for<'a> tokio_postgres::types::FromSql<'a>,
    {
        self.in_a_transaction(|c| {
            let row = match c.pooler {
                Pooler::None => c.answer(c.client.query_one(sql, params))?,
                Pooler::Transaction => {
                    let typed = c.typed_once(sql, params)?;
                    c.answer(c.client.query_typed_one(sql, &typed))?
                }
            };
            row.try_get(0).map_err(|e| c.error(&e))
        })
    }

    /// `BEGIN`, `f`, `COMMIT`; `ROLLBACK` when `f` fails (nothing of it stays).
    pub(crate) fn transaction<T>(&self, f: impl FnOnce(&Conn) -> Result<T>) -> Result<T> {
        self.transaction_as("BEGIN", f)
    }

    /// `transaction`, begun by `begin` (an isolation level, read only), which goes out with
    /// the transaction's first round trip rather than in one of its own.
    pub(crate) fn transaction_as<T>(&self, begin: &str, f: impl FnOnce(&Conn) -> Result<T>) -> Result<T> {
        self.begin_open(begin)?;
        let out = match f(self) {
            Ok(v) => match self.batch("COMMIT") {
                Ok(()) => Ok(v),
                Err(e) => {
                    // A deferred statement that failed before the COMMIT was sent (its
                    // parameters would not encode) leaves the transaction open: never hand
                    // the connection back inside it. (After a sent COMMIT this is a no-op.)
                    let _ = self.batch("ROLLBACK");
                    Err(e)
                }
            },
            Err(e) => {
                // Nothing of the transaction is to be written: not what still waits either.
                self.deferred.lock().unwrap_or_else(|p| p.into_inner()).clear();
                // A lost connection rolls back by itself; its error is the one that matters.
                let _ = self.batch("ROLLBACK");
                Err(e)
            }
        };
        self.in_transaction.store(false, std::sync::atomic::Ordering::SeqCst);
        out
    }

    /// Begins a transaction with `begin`, sent with the next round trip, that the caller ends
    /// (`transaction_as` does; a lock's holder leaves it open until its connection goes).
    /// Through a transaction pooler the transaction first sets the schema's search path and
    /// the connection's bounds for itself.
    pub(crate) fn begin_open(&self, begin: &str) -> Result<()> {
        self.execute_deferred(begin, &[])?;
        self.in_transaction.store(true, std::sync::atomic::Ordering::SeqCst);
        if self.pooler == Pooler::Transaction {
            use rusqlite::types::Value;
            let (lock_ms, statement_ms) = {
                let local = self.local();
                (local.lock_ms, local.statement_ms)
            };
            self.defer(
                Prepared::Typed(
                    SET_LOCAL.into(),
                    std::sync::Arc::new([Type::TEXT, Type::TEXT, Type::TEXT]),
                ),
                vec![
                    Value::Text(quote_ident(&self.schema)),
                    Value::Text(lock_ms.to_string()),
                    Value::Text(statement_ms.to_string()),
                ],
            );
        }
        Ok(())
    }

    /// Rolls back the transaction `begin_open` began (a lock not got).
    pub(crate) fn rollback_open(&self) -> Result<()> {
        self.deferred.lock().unwrap_or_else(|p| p.into_inner()).clear();
        let out = self.batch("ROLLBACK");
        self.in_transaction.store(false, std::sync::atomic::Ordering::SeqCst);
        out
    }

    /// Whether a table of this name is in the schema.
    pub(crate) fn has_table(&self, name: &str) -> Result<bool> {
        self.query_one_value(
            "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_tables WHERE schemaname = $1 AND tablename = $2)",
            &[&self.schema, &name],
        )
    }

    pub(crate) fn error(&self, e: &tokio_postgres::Error) -> LcmError {
        map_error(&self.described, e)
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        // Through a transaction pooler a transaction left open (a copy's snapshot, a lock's) is
        // ended here, so the server session goes back to the pooler clean rather than being
        // closed by it.
        if self.pooler == Pooler::Transaction && self.in_transaction() && !self.is_broken() {
            let _ = self.rollback_open();
        }
    }
}

/// Double-quotes an identifier for SQL.
pub(crate) fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// Schema names are kept simple (they also name a per-agent scope): lower-case letters, digits
/// and `_`, starting with a letter or `_`, at most 63 bytes (PostgreSQL's limit).
fn check_schema_name(schema: &str) -> Result<()> {
    let ok = !schema.is_empty()
        && schema.len() <= 63
        && schema
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        && !schema.as_bytes()[0].is_ascii_digit()
        && !schema.starts_with("pg_");
    if ok {
        Ok(())
    } else {
        Err(LcmError::invalid_input(format!(
            "schema `{schema}`: use lower-case letters, digits and `_` (at most 63, not starting with a digit or pg_)"
        )))
    }
}

/// The runtime that drives every connection's socket: one worker, started on first use.
fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("lcm-pg")
            .enable_all()
            .build()
            .expect("the PostgreSQL runtime starts")
    })
}

/// Waits for `f` on the calling thread. The futures of a tokio-postgres client only wait on
/// channels to the connection's task, so no tokio context is needed here, and this works on
/// any thread (a napi blocking thread, `block_in_place`, a test's thread) without the
/// "runtime within a runtime" panic of `Handle::block_on`.
fn wait<F: Future>(f: F) -> F::Output {
    futures::executor::block_on(f)
}

/// A failure to reach the server at all (refused, unknown host, authentication).
fn connection_error(described: &str, e: &tokio_postgres::Error) -> LcmError {
    match map_error(described, e) {
        LcmError::Postgres { .. } | LcmError::Connection { .. } => LcmError::Connection {
            message: format!("cannot connect to {described}: {}", error_text(e)),
        },
        other => other,
    }
}

/// The server's message (with its detail), or the client's and its cause.
fn error_text(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => match db.detail() {
            Some(detail) => format!("{}: {detail}", db.message()),
            None => db.message().to_string(),
        },
        None => match std::error::Error::source(e) {
            Some(source) => format!("{e}: {source}"),
            None => e.to_string(),
        },
    }
}

/// PostgreSQL's SQLSTATE classes as lcm-native's codes; the rest is `E_POSTGRES`.
pub(crate) fn map_error(described: &str, e: &tokio_postgres::Error) -> LcmError {
    let message = error_text(e);
    let Some(state) = e.code() else {
        // No SQLSTATE: the socket (closed, reset, refused, timed out), or this side (a value
        // that does not serialize, a row that does not convert).
        let io = std::error::Error::source(e).is_some_and(|s| s.is::<std::io::Error>());
        return if e.is_closed() || io || message.starts_with("error connecting") || message.contains("timeout") {
            LcmError::Connection {
                message: format!("{message} ({described})"),
            }
        } else {
            LcmError::Postgres {
                sqlstate: None,
                message: format!("{message} ({described})"),
            }
        };
    };
    let code = state.code();
    let class = &code[..2];
    if class == "08" || *state == SqlState::ADMIN_SHUTDOWN || *state == SqlState::CRASH_SHUTDOWN || class == "28" {
        LcmError::Connection {
            message: format!("{message} ({described})"),
        }
    } else if *state == SqlState::LOCK_NOT_AVAILABLE
        || *state == SqlState::T_R_SERIALIZATION_FAILURE
        || *state == SqlState::T_R_DEADLOCK_DETECTED
    {
        LcmError::Busy {
            sqlite: None,
            conversation_id: None,
            message: format!("{message} ({described})"),
        }
    } else if *state == SqlState::QUERY_CANCELED {
        LcmError::Timeout {
            ms: 0,
            message: format!("{message} ({described})"),
        }
    } else if class == "53" {
        LcmError::io(described, message)
    } else if *state == SqlState::READ_ONLY_SQL_TRANSACTION {
        LcmError::ReadOnly {
            path: described.to_string(),
            message,
        }
    } else if *state == SqlState::INVALID_SQL_STATEMENT_NAME || *state == SqlState::DUPLICATE_PSTATEMENT {
        // A prepared statement another client made, or one of ours gone: the server sessions
        // are shared by a transaction pooler the URL does not name.
        LcmError::invalid_config(
            "pooler",
            format!(
                "{message} ({described}): the connection goes through a pooler in transaction mode (PgBouncer's pool_mode = transaction), which keeps no prepared statement between transactions; add pooler=transaction to the URL"
            ),
        )
    } else if class == "3D" || class == "3F" || *state == SqlState::UNDEFINED_TABLE {
        LcmError::schema(described, format!("{message} ({described})"))
    } else {
        LcmError::Postgres {
            sqlstate: Some(code.to_string()),
            message: format!("{message} ({described})"),
        }
    }
}

#[cfg(test)]
mod tests;
