//! Opening an engine's database: a PostgreSQL schema made or upgraded (`postgres`), a SQLite
//! file opened for reading, or a SQLite file checked for damage, migrated, lossless-claw's
//! unpublished summaries taken over, and its pool of connections made.

use super::postgres;
use crate::config::Config;
use crate::db::{self, migrate::MigrationReport, pool::Pool, SchemaFlags};
use crate::error::Result;
use crate::sql::Backend;

/// The database `config` names, opened and current: what the migration did, the schema's
/// flags, and the backend to read and write through.
pub(super) fn backend(config: &Config) -> Result<(MigrationReport, SchemaFlags, Backend)> {
    if crate::pg::is_url(&config.db_path) {
        let location = crate::pg::Location::parse(&config.db_path, None)?;
        let pool = crate::pg::pool::PgPool::open(&location, config.read_only, config.busy_timeout_ms)?;
        let migration = postgres::prepare(&pool, config)?;
        return Ok((migration, postgres::FLAGS, Backend::Postgres(pool)));
    }
    match config.read_only {
        true => sqlite_read_only(config),
        false => sqlite(config),
    }
}

/// A file opened for reading only: its schema must be current already.
fn sqlite_read_only(config: &Config) -> Result<(MigrationReport, SchemaFlags, Backend)> {
    let (path, busy) = (&config.db_path, config.busy_timeout_ms);
    let conn = db::open_read_only(path, busy, config.immutable)?;
    let mut migration = db::migrate::check_current(&conn, path)?;
    let flags = SchemaFlags::read(&conn)?;
    note_scrubs_pending(&mut migration, &conn)?;
    let pool = Pool::read_only(path, busy, config.immutable, conn);
    Ok((migration, flags, Backend::Sqlite(pool)))
}

/// A file opened for writing. A damaged file gets no write, the migration's included: it
/// opens for reading when its schema is current (what can be read is still served), and every
/// write is refused with E_CORRUPT. A file that needs a migration is checked first whatever
/// its size: a migration never runs on a damaged file; a large current one is checked in the
/// background.
fn sqlite(config: &Config) -> Result<(MigrationReport, SchemaFlags, Backend)> {
    let (path, busy) = (&config.db_path, config.busy_timeout_ms);
    let mut conn = db::open_connection_with(path, busy, config.wal_runs)?;
    let checked = db::damage::file_bytes(path) <= db::damage::CHECK_AT_OPEN_BYTES
        || !db::migrate::up_to_date(&conn).unwrap_or(false);
    let damage = match checked {
        true => db::damage::integrity_check(&conn).map_err(|e| e.with_path(path))?,
        false => None,
    };
    let mut migration = match &damage {
        Some(found) => db::migrate::check_current(&conn, path).map_err(|_| found.clone().with_path(path))?,
        None => db::migrate::migrate(&mut conn, path)?,
    };
    let flags = SchemaFlags::read(&conn)?;
    if damage.is_none() {
        let taken = crate::store::pending::take_over(&conn, flags)?;
        migration.pending_batches_taken_over = taken.batches;
        migration.pending_summaries_published = taken.published;
        if taken.batches > 0 {
            migration.summary.push_str(&format!(
                "; took over {} unpublished summary batch(es) of lossless-claw, publishing {} finished summary(ies)",
                taken.batches, taken.published
            ));
        }
    }
    note_scrubs_pending(&mut migration, &conn)?;
    let pool = Pool::new(path, busy, conn, config.wal_runs)?;
    match checked {
        true => pool.checked_at_open(damage),
        false => pool.check_damage_in_background(),
    }
    Ok((migration, flags, Backend::Sqlite(pool)))
}

/// Records in the open's report the redactions whose scrub of the file did not complete, and
/// says so in its summary line (which the host logs).
fn note_scrubs_pending(migration: &mut MigrationReport, conn: &rusqlite::Connection) -> Result<()> {
    migration.scrubs_pending = crate::redact::scrubs_pending(conn)?;
    if migration.scrubs_pending > 0 {
        migration.summary.push_str(&format!(
            "; {} redaction(s) not yet scrubbed from the file (replaced text may remain in its free pages or WAL): run `lcm-native redact --finish`",
            migration.scrubs_pending
        ));
    }
    Ok(())
}
