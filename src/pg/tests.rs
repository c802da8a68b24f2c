use super::*;
use crate::test_support::pg_test_location;

#[test]
fn a_url_is_read_with_its_schema_and_described_without_its_password() {
    let l = Location::parse(
        "postgres://gw:s3cret@db.example:6543/agents?schema=team_a&sslmode=disable",
        None,
    )
    .unwrap();
    assert_eq!(l.schema, "team_a");
    let d = l.describe();
    assert_eq!(d, "postgres://gw@db.example:6543/agents?sslmode=disable&schema=team_a");
    assert!(!d.contains("s3cret"));
    // What is shown can be given back: the same place, the password aside.
    let again = Location::parse(&d, None).unwrap();
    assert_eq!(again.describe(), d);
    assert_eq!(again.config.get_password(), None);
    // A password parameter is not shown, nor kept as a parameter.
    let l = Location::parse("postgres://gw@h/db?password=s3cret&application_name=x", None).unwrap();
    assert_eq!(l.describe(), "postgres://gw@h:5432/db?application_name=x&schema=lcm");
    // The caller's schema wins; the default is lcm's own.
    assert_eq!(
        Location::parse("postgresql://gw@h/db?schema=a", Some("b"))
            .unwrap()
            .schema,
        "b"
    );
    assert_eq!(
        Location::parse("postgres://gw@h/db", None).unwrap().schema,
        DEFAULT_SCHEMA
    );
    // The pooler in between, ours as the schema is: shown, and read back; a mode it does not
    // know is refused.
    let l = Location::parse("postgres://gw@h/db?pooler=transaction", None).unwrap();
    assert_eq!(l.pooler, Pooler::Transaction);
    assert_eq!(l.describe(), "postgres://gw@h:5432/db?pooler=transaction&schema=lcm");
    assert_eq!(
        Location::parse(&l.describe(), None).unwrap().pooler,
        Pooler::Transaction
    );
    let e = Location::parse("postgres://gw@h/db?pooler=statement", None)
        .err()
        .unwrap();
    assert_eq!(e.code(), "E_INVALID_INPUT");
    assert!(e.to_string().contains("pooler=statement"), "{e}");
    // A socket directory, percent-encoded as libpq reads it.
    let l = Location::parse("postgres://lcm@%2Ftmp%2Fsock/db", None).unwrap();
    assert_eq!(l.describe(), "postgres://lcm@%2Ftmp%2Fsock:5432/db?schema=lcm");
    assert_eq!(Location::parse(&l.describe(), None).unwrap().describe(), l.describe());
}

/// A URL's scheme is read in any case (the plugin once took `POSTGRES://…` for a URL while
/// the engine took it for a file name); anything else is a SQLite path.
#[test]
fn a_database_url_is_told_from_a_path_whatever_the_schemes_case() {
    for url in [
        "postgres://gw@h/db",
        "postgresql://gw@h/db",
        "POSTGRES://gw@h/db",
        "PostgreSQL://gw@h/db",
    ] {
        assert!(is_url(url), "{url}");
        let l = Location::parse(url, None).unwrap();
        assert_eq!(l.describe(), "postgres://gw@h:5432/db?schema=lcm", "{url}");
    }
    for path in [
        "postgres",
        "postgres:/x",
        "./postgres://x",
        "/tmp/lcm.db",
        "",
        "pöstgres://x",
    ] {
        assert!(!is_url(path), "{path}");
    }
}

/// `PGPASSWORD` gives the password a URL leaves out (as libpq does); the URL's own wins.
#[test]
fn the_password_comes_from_pgpassword_when_the_url_has_none() {
    let parsed = |url: &str| -> tokio_postgres::Config { url.parse().unwrap() };
    let mut c = parsed("postgres://gw@h/db");
    password_from_env(&mut c, Some("fromenv".into()));
    assert_eq!(c.get_password(), Some(&b"fromenv"[..]));
    let mut c = parsed("postgres://gw:inurl@h/db");
    password_from_env(&mut c, Some("fromenv".into()));
    assert_eq!(c.get_password(), Some(&b"inurl"[..]));
    let mut c = parsed("postgres://gw@h/db");
    password_from_env(&mut c, Some(String::new()));
    assert_eq!(c.get_password(), None);
}

#[test]
fn a_bad_url_or_schema_is_refused_without_echoing_the_password() {
    for (url, want) in [
        ("/var/lib/lcm.db", "not a PostgreSQL URL"),
        ("postgres://u:hunter2@h/db?schema=Bad-Name", "schema `Bad-Name`"),
        ("postgres://u:hunter2@h/db?schema=pg_x", "schema `pg_x`"),
        ("postgres://u:hunter2@h/db?nonsense=1", "not a usable PostgreSQL URL"),
    ] {
        let e = Location::parse(url, None)
            .err()
            .unwrap_or_else(|| panic!("{url} parsed"));
        assert_eq!(e.code(), "E_INVALID_INPUT", "{url}");
        let text = e.to_string();
        assert!(text.contains(want), "{url}: {text}");
        assert!(!text.contains("hunter2"), "{url}: {text}");
    }
}

/// The cases the plugin's `shownDatabase` is tested on as well (`redact_cases.json`): no piece
/// of the password survives, whatever the text.
#[test]
fn a_password_is_hidden_in_any_text_that_names_a_database() {
    let cases: Vec<(String, String)> = serde_json::from_str(include_str!("redact_cases.json")).unwrap();
    for (url, want) in &cases {
        let shown = redact_password(url);
        assert_eq!(&shown, want, "{url}");
        assert!(!shown.contains("hunter2") && !shown.contains("ter2"), "{url}: {shown}");
    }
    // A URL libpq would misread (part of the password taken for the host or the database) is
    // refused, and errors name a file without its password.
    for url in [
        "postgres://u:hun/ter2@h/db",
        "postgres://u:pass/x@h/db?schema=a",
        "postgres://u:hun@ter2@h/db",
    ] {
        let e = Location::parse(url, None).err().expect(url);
        assert_eq!(e.code(), "E_INVALID_INPUT");
        assert!(e.to_string().contains("percent-encode"), "{e}");
        assert!(
            !e.to_string().contains("ter2") && !e.to_string().contains("pass/x"),
            "{e}"
        );
    }
    for url in [
        "postgres://h/db?password=hunter2&nonsense=1",
        "postgres://u:hunter2@/db?password=hunter2",
    ] {
        let e = Location::parse(url, None).err().expect(url);
        assert!(!e.to_string().contains("hunter2"), "{e}");
    }
    let e = crate::error::LcmError::io("postgres:/u:hunter2@h/db", "no such file");
    assert!(!e.to_string().contains("hunter2"), "{e}");
}

/// (A socket directory: Unix only.)
#[cfg(unix)]
#[test]
fn no_server_is_a_connection_error() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!(
        "postgres://lcm@{}/db",
        dir.path().display().to_string().replace('/', "%2F")
    );
    let e = Location::parse(&url, None)
        .unwrap()
        .connect()
        .err()
        .expect("nothing listens there");
    assert_eq!(e.code(), "E_CONNECTION", "{e}");
    assert!(e.to_string().contains("cannot connect to postgres://lcm@"), "{e}");
}

#[test]
fn errors_map_to_codes() {
    let Some(location) = pg_test_location("errors") else {
        return;
    };
    let a = location.connect().unwrap();
    a.batch("CREATE SCHEMA IF NOT EXISTS \"t_errors_x\"").unwrap();
    a.batch(&format!(
        "CREATE SCHEMA {}; CREATE TABLE t (id bigint PRIMARY KEY)",
        quote_ident(&a.schema)
    ))
    .unwrap();
    a.batch("DROP SCHEMA \"t_errors_x\"").unwrap();
    assert!(a.has_table("t").unwrap());
    assert!(!a.has_table("u").unwrap());
    assert_eq!(a.query("SELECT * FROM u", &[]).unwrap_err().code(), "E_SCHEMA");
    assert_eq!(a.batch("SELEC 1").unwrap_err().code(), "E_POSTGRES");
    // A value that does not fit its parameter fails here, not as a lost connection.
    let e = a
        .query_cached("SELECT CAST($1 AS BIGINT)", &[rusqlite::types::Value::Text("x".into())])
        .unwrap_err();
    assert_eq!(e.code(), "E_POSTGRES", "{e}");
    assert!(e.to_string().contains("does not fit"), "{e}");
    assert_eq!(a.query_one_value::<i32>("SELECT 1", &[]).unwrap(), 1, "still connected");
    // A row another connection holds: NOWAIT answers at once, as E_BUSY.
    a.batch("INSERT INTO t VALUES (1)").unwrap();
    a.batch("BEGIN; SELECT * FROM t FOR UPDATE").unwrap();
    let b = location.connect().unwrap();
    let e = b.query("SELECT * FROM t FOR UPDATE NOWAIT", &[]).unwrap_err();
    assert_eq!(e.code(), "E_BUSY", "{e}");
    a.batch("ROLLBACK").unwrap();
    // A statement cut short by its timeout.
    let e = b.batch("SET statement_timeout = 50; SELECT pg_sleep(5)").unwrap_err();
    assert_eq!(e.code(), "E_TIMEOUT", "{e}");
    // A prepared statement that is not there (or is there twice): a pooler in transaction mode
    // the URL does not name, which the error names.
    for sql in [
        "EXECUTE lcm_absent",
        "PREPARE lcm_twice AS SELECT 1; PREPARE lcm_twice AS SELECT 1",
    ] {
        let e = b.batch(sql).unwrap_err();
        assert_eq!(e.code(), "E_INVALID_CONFIG", "{e}");
        assert!(e.to_string().contains("pooler=transaction"), "{e}");
    }
    // The server ends the session: the next call says the connection is gone.
    let pid: i32 = b.query_one_value("SELECT pg_backend_pid()", &[]).unwrap();
    a.query("SELECT pg_terminate_backend($1)", &[&pid]).unwrap();
    let e = b.query("SELECT 1", &[]).unwrap_err();
    assert_eq!(e.code(), "E_CONNECTION", "{e}");
    a.batch(&format!("DROP SCHEMA {} CASCADE", quote_ident(&a.schema)))
        .unwrap();
}

#[test]
fn a_transaction_that_fails_leaves_nothing() {
    let Some(location) = pg_test_location("tx") else { return };
    let c = location.connect().unwrap();
    c.batch(&format!(
        "CREATE SCHEMA {}; CREATE TABLE t (id bigint PRIMARY KEY)",
        quote_ident(&c.schema)
    ))
    .unwrap();
    let e = c
        .transaction(|c| {
            c.execute("INSERT INTO t VALUES ($1)", &[&1i64])?;
            c.execute("INSERT INTO t VALUES ($1)", &[&1i64])
        })
        .unwrap_err();
    assert_eq!(e.code(), "E_POSTGRES", "{e}");
    assert_eq!(c.query_one_value::<i64>("SELECT count(*) FROM t", &[]).unwrap(), 0);
    c.transaction(|c| c.execute("INSERT INTO t VALUES ($1)", &[&2i64]))
        .unwrap();
    assert_eq!(c.query_one_value::<i64>("SELECT count(*) FROM t", &[]).unwrap(), 1);
    c.batch(&format!("DROP SCHEMA {} CASCADE", quote_ident(&c.schema)))
        .unwrap();
}

/// Deferred statements go out ahead of the next round trip, in order (a query sees their
/// rows, the commit writes them); one that fails fails that round trip and the whole
/// transaction; and a transaction that fails for a reason of its own says that reason and
/// leaves nothing of what waited, and a connection that works.
#[test]
fn deferred_statements_ride_with_the_next_round_trip() {
    use rusqlite::types::Value;
    let Some(location) = pg_test_location("deferred") else {
        return;
    };
    let c = location.connect().unwrap();
    c.batch(&format!(
        "CREATE SCHEMA {}; CREATE TABLE t (id bigint PRIMARY KEY)",
        quote_ident(&c.schema)
    ))
    .unwrap();
    let insert = "INSERT INTO t VALUES ($1)";
    let count = |c: &Conn| c.query_one_value::<i64>("SELECT count(*) FROM t", &[]).unwrap();
    let seen = c
        .transaction(|c| {
            for id in 1..=3 {
                c.execute_deferred(insert, &[Value::Integer(id)])?;
            }
            c.query_one_value::<i64>("SELECT max(id) FROM t", &[])
        })
        .unwrap();
    assert_eq!(seen, 3);
    c.transaction(|c| c.execute_deferred(insert, &[Value::Integer(4)]))
        .unwrap();
    assert_eq!(count(&c), 4, "the commit sent the last one");
    // A duplicate key among them: the next round trip fails, nothing of the transaction stays.
    let e = c
        .transaction(|c| {
            c.execute_deferred(insert, &[Value::Integer(5)])?;
            c.execute_deferred(insert, &[Value::Integer(1)])?;
            c.query_one_value::<i64>("SELECT count(*) FROM t", &[])
        })
        .unwrap_err();
    assert_eq!(e.code(), "E_POSTGRES", "{e}");
    assert_eq!(count(&c), 4);
    // Failing for a reason of its own (with a duplicate still waiting), the transaction says
    // its own reason; what waited is dropped, not sent ahead of the rollback.
    let e = c
        .transaction(|c| {
            c.execute_deferred(insert, &[Value::Integer(1)])?;
            Err::<(), _>(crate::error::LcmError::invalid_input("stop here"))
        })
        .unwrap_err();
    assert_eq!(e.code(), "E_INVALID_INPUT", "{e}");
    c.transaction(|c| c.execute_deferred(insert, &[Value::Integer(6)]))
        .unwrap();
    assert_eq!(count(&c), 5);
    // A parameter that does not encode fails its round trip before the COMMIT is sent: the
    // transaction is rolled back, not left open on the connection (what went ahead of it,
    // 7, is not written; the next transaction is one of its own).
    let e = c
        .transaction(|c| {
            c.execute_deferred(insert, &[Value::Integer(7)])?;
            c.execute_deferred(insert, &[Value::Text("eight".into())])
        })
        .unwrap_err();
    assert_eq!(e.code(), "E_POSTGRES", "{e}");
    assert_eq!(count(&c), 5);
    c.transaction(|c| c.execute_deferred(insert, &[Value::Integer(9)]))
        .unwrap();
    assert_eq!(count(&c), 6);
    c.batch(&format!("DROP SCHEMA {} CASCADE", quote_ident(&c.schema)))
        .unwrap();
}

/// The store's code is synchronous and runs on napi's blocking threads, or inside
/// `block_in_place` on a worker: a connection answers from both, and from a thread of no
/// runtime, without the "runtime within a runtime" panic.
#[test]
fn a_connection_works_from_every_kind_of_thread() {
    let Some(location) = pg_test_location("threads") else {
        return;
    };
    let conn = std::sync::Arc::new(location.connect().unwrap());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let c = conn.clone();
    let on_blocking: i32 = rt
        .block_on(rt.spawn_blocking(move || c.query_one_value("SELECT 1", &[])))
        .unwrap()
        .unwrap();
    let c = conn.clone();
    let in_place: i32 = rt
        .block_on(rt.spawn(async move { tokio::task::block_in_place(|| c.query_one_value("SELECT 2", &[])) }))
        .unwrap()
        .unwrap();
    let c = conn.clone();
    let plain: i32 = std::thread::spawn(move || c.query_one_value("SELECT 3", &[]))
        .join()
        .unwrap()
        .unwrap();
    assert_eq!((on_blocking, in_place, plain), (1, 2, 3));
}

/// Every table lcm-native declares, and lossless-claw's own that a real file brings, is
/// created in PostgreSQL with the same columns in the same order.
#[test]
fn translated_tables_create_with_the_same_columns() {
    let Some(location) = pg_test_location("ddl") else {
        return;
    };
    let c = location.connect().unwrap();
    c.batch(&format!("CREATE SCHEMA {}", quote_ident(&c.schema))).unwrap();
    let fixture = rusqlite::Connection::open_with_flags(
        concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/head-theme.db"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    );
    let mut statements: Vec<(String, String)> = crate::db::schema::TABLES
        .iter()
        .map(|(n, s)| (n.to_string(), s.to_string()))
        .collect();
    {
        let fixture = fixture.expect("the lossless-claw fixture opens");
        let mut stmt = fixture
            .prepare("SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name IN ('focus_briefs', 'focus_brief_sources', 'conversation_bootstrap_state', 'conversation_compaction_telemetry', 'conversation_compaction_maintenance')")
            .unwrap();
        let found: Vec<(String, String)> = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .map(|r| r.unwrap())
            .collect();
        assert_eq!(found.len(), 5);
        statements.extend(found);
    }
    for (name, sql) in &statements {
        let t = ddl::table(sql).unwrap_or_else(|e| panic!("{name}: {e}"));
        c.batch(&t.create)
            .unwrap_or_else(|e| panic!("{name}: {e}\n{}", t.create));
        let rows = c
            .query(
                "SELECT column_name::text, data_type::text FROM information_schema.columns WHERE table_schema = $1 AND table_name = $2 ORDER BY ordinal_position",
                &[&c.schema, name],
            )
            .unwrap();
        let got: Vec<(String, String)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
        let mut want: Vec<(String, String)> = t
            .columns
            .iter()
            .map(|(n, ty)| (n.clone(), ty.to_ascii_lowercase()))
            .collect();
        if t.hidden_rowid {
            want.push(("rowid".into(), "bigint".into()));
        }
        assert_eq!(got, want, "{name}");
    }
    for (_, sql) in crate::db::schema::INDEXES {
        c.batch(&ddl::index(sql).unwrap())
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    // The defaults give SQLite's text.
    c.batch("INSERT INTO conversations (session_id) VALUES ('s')").unwrap();
    let created: String = c.query_one_value("SELECT created_at FROM conversations", &[]).unwrap();
    assert!(
        regex::Regex::new(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$")
            .unwrap()
            .is_match(&created),
        "{created}"
    );
    c.batch("INSERT INTO lcm_native_redactions (conversation_ids, message_ids, messages, parts, matches, summaries, versions_purged) VALUES ('[]', '[]', 0, 0, 0, 0, 0)").unwrap();
    let created: String = c
        .query_one_value("SELECT created_at FROM lcm_native_redactions", &[])
        .unwrap();
    assert!(
        regex::Regex::new(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
            .unwrap()
            .is_match(&created),
        "{created}"
    );
    c.batch(&format!("DROP SCHEMA {} CASCADE", quote_ident(&c.schema)))
        .unwrap();
}

/// Through PgBouncer in transaction mode (few server sessions for many clients): connections
/// that share the server sessions write and read in turn with nothing of theirs left on a
/// session between transactions (no prepared statement, no search path), locks that last
/// across transactions hold and end, and a URL that does not name the pooler is refused at
/// open, naming the setting.
#[test]
fn through_a_transaction_pooler_nothing_outlives_a_transaction() {
    use rusqlite::types::Value;
    let Some((direct, url)) = crate::test_support::pooler_test_url("pooled") else {
        return;
    };
    let pooled = Location::parse(&url, None).unwrap();
    assert_eq!(pooled.pooler, Pooler::Transaction);
    assert!(
        pooled.describe().contains("pooler=transaction&schema="),
        "{}",
        pooled.describe()
    );
    let setup = pooled.connect().unwrap();
    setup
        .batch(&format!(
            "CREATE SCHEMA {}; CREATE TABLE t (id bigint PRIMARY KEY, writer bigint NOT NULL)",
            quote_ident(&pooled.schema)
        ))
        .unwrap();
    // More clients than the pooler has server sessions (6), each its own transactions.
    let writers: Vec<_> = (0..10i64)
        .map(|w| {
            let pooled = pooled.clone();
            std::thread::spawn(move || {
                let c = pooled.connect().unwrap();
                for t in 0..20i64 {
                    let id = w * 1000 + t;
                    let seen = c
                        .transaction(|c| {
                            c.execute_deferred(
                                "INSERT INTO t (id, writer) VALUES ($1, $2)",
                                &[Value::Integer(id), Value::Integer(w)],
                            )?;
                            c.query_cached("SELECT count(*) FROM t WHERE writer = $1", &[Value::Integer(w)])
                        })
                        .unwrap();
                    assert_eq!(seen[0].get::<_, i64>(0), t + 1, "writer {w} turn {t}");
                    // A statement outside a transaction reaches the schema too.
                    let rows = c
                        .query_cached("SELECT id FROM t WHERE id = $1", &[Value::Integer(id)])
                        .unwrap();
                    assert_eq!(rows.len(), 1);
                }
                c
            })
        })
        .collect();
    let conns: Vec<Conn> = writers.into_iter().map(|w| w.join().unwrap()).collect();
    assert_eq!(
        setup.query_one_value::<i64>("SELECT count(*) FROM t", &[]).unwrap(),
        200
    );
    // Whatever server session each client reaches now holds none of lcm-native's statements,
    // and its own search path (lcm-native's is set in each transaction, for it alone).
    for c in &conns {
        let kept = c
            .transaction(|c| {
                c.simple_value(
                    "SELECT count(*) || ' ' || coalesce(string_agg(statement, ' | '), '') FROM pg_prepared_statements",
                )
            })
            .unwrap();
        assert_eq!(kept.as_deref(), Some("0 "));
        let path = c.simple_value("SHOW search_path").unwrap().unwrap();
        assert!(!path.contains(&pooled.schema), "{path}");
    }
    // A lock that lasts across transactions (the setup's): another waits, then gets it.
    let pool_a = pool::PgPool::open(&pooled, false, 2_000).unwrap();
    let pool_b = pool::PgPool::open(&pooled, false, 2_000).unwrap();
    let held = pool_a.hold("setup", 0, Duration::ZERO, "setup").unwrap();
    conns[0]
        .transaction(|c| c.execute_cached("DELETE FROM t WHERE id = $1", &[Value::Integer(0)]))
        .unwrap();
    let e = pool_b
        .hold("setup", 0, Duration::from_millis(200), "setup")
        .err()
        .unwrap();
    assert_eq!(e.code(), "E_BUSY", "{e}");
    drop(held);
    drop(pool_b.hold("setup", 0, Duration::from_secs(2), "setup").unwrap());
    // An operation's lock is a lease: renewed past its time to live while held, free when
    // dropped, and, when its holder dies without a word, free once it runs out.
    setup.batch(leases::CREATE).unwrap();
    let held = pool_a.operation_lock(7, Duration::ZERO).unwrap();
    std::thread::sleep(leases::TTL + Duration::from_millis(500));
    let e = pool_b.operation_lock(7, Duration::from_millis(200)).err().unwrap();
    assert_eq!(e.code(), "E_BUSY", "renewed while held: {e}");
    let other = pool_b.operation_lock(8, Duration::ZERO).unwrap();
    drop(held);
    let again = pool_b.operation_lock(7, Duration::ZERO).unwrap();
    let started = std::time::Instant::now();
    again.abandon();
    let after = pool_a.operation_lock(7, leases::TTL * 2).unwrap();
    assert!(started.elapsed() >= leases::TTL / 2, "{:?}", started.elapsed());
    drop((other, after));
    // The same URL without pooler=transaction: two of its connections reach one server
    // session, and the open says what to add.
    let bare = Location::parse(&url.replace("pooler=transaction&", ""), None).unwrap();
    assert_eq!(bare.pooler, Pooler::None);
    let e = pool::PgPool::open(&bare, false, 2_000).err().unwrap();
    assert_eq!(e.code(), "E_INVALID_CONFIG", "{e}");
    assert!(e.to_string().contains("pooler=transaction"), "{e}");
    drop(conns);
    crate::test_support::drop_test_schema(&direct);
}
