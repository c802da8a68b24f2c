//! What `grep` needs in a PostgreSQL schema, made to find what SQLite's FTS5 tables find:
//!
//! - a text-search configuration `lcm_search` that reads text as FTS5's `porter unicode61`
//!   tokenizer does: ASCII punctuation splits words (`foo_bar`, `a.b/c`, `don't`), case and
//!   accents do not count (`unaccent`, when the server has it, for words beyond ASCII), words
//!   are stemmed (Snowball's English, the successor of Porter's) and no word is a stop word;
//! - `lcm_search_vector(text)`, the words of a text, kept in a generated column `lcm_search`
//!   of messages and summaries (computed once, when the row is written: a search, its
//!   re-check and its rank read it instead of parsing the text again) with a GIN index over
//!   it. The column is PostgreSQL's own: a copy back to a file, and `verify`'s digest, leave it
//!   out, so the tables keep SQLite's shape (an expression index: the tables keep SQLite's shape, so a copy back
//!   to a file is unchanged);
//! - trigram indexes (`pg_trgm`, when the server has it) so that substring and CJK searches
//!   (`ILIKE`) do not read every row;
//! - `lcm_epoch(text)`, a stored time as epoch seconds (NULL for text that is no time), as
//!   SQLite's `julianday` reads it, for time bounds and the hybrid order.
//!
//! - no planner statistics of text: `ANALYZE` keeps a sample of each column's most common
//!   values in the catalog (`pg_statistic`), which a redaction cannot reach (only a superuser
//!   may vacuum the catalog): the columns that hold what a user or a tool wrote, and the words
//!   columns, get a statistics target of 0.
//!
//! Extensions are made when the role may (both are "trusted" extensions: a database owner
//! may), in `public`; without them the search still works, slower, and accents count.

use super::{quote_ident, Conn};
use crate::error::Result;

/// The characters FTS5's tokenizer splits words at that PostgreSQL's parser keeps inside
/// words (hosts, paths, e-mail addresses, hyphenated words, numbers with points): every ASCII
/// punctuation mark, each turned into a space.
const PUNCTUATION: &str = r##"!"#$%&'()*+,-./:;<=>?@[\]^_`{|}~"##;

/// The generated column holding a row's words (messages and summaries).
pub(crate) const SEARCH_COLUMN: &str = "lcm_search";

/// Above this many characters a text's word list might pass PostgreSQL's 1 MB limit for one
/// tsvector; such texts are indexed up to what fits (a plpgsql handler catches the error),
/// smaller ones go straight through (no subtransaction per row).
const LARGE_TEXT_CHARS: usize = 100_000;

/// The functions of the words column and of a search, replaced in place (`CREATE OR REPLACE`):
/// what they return for a text never changes, so the words a schema stored stay right.
///
/// The words of a text are one SQL function, inlined into the generated column's expression
/// (a plpgsql one cost ~55 µs a row to call), and the punctuation goes by one regular
/// expression (`translate` compares each character with each of the 32 marks: for a 1.2 kB
/// message that was half of the column's cost; bench/RESULTS.md, #48).
fn functions(schema: &str) -> String {
    let schema = quote_ident(schema);
    let config = format!("{schema}.lcm_search");
    // A bracket expression listing the marks, no ranges (a range would be the collation's):
    // `]` first, `-` last, the backslash escaped for the regular expression, the quote
    // doubled for SQL.
    let marks: String = PUNCTUATION
        .chars()
        .filter(|ch| !matches!(ch, ']' | '-'))
        .map(|ch| match ch {
            '\\' => r"\\".to_string(),
            '\'' => "''".to_string(),
            ch => ch.to_string(),
        })
        .collect();
    format!(
        r#"CREATE OR REPLACE FUNCTION {schema}.lcm_search_text(t text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT regexp_replace(t, '[]{marks}-]', ' ', 'g') $$;

CREATE OR REPLACE FUNCTION {schema}.lcm_search_vector_large(t text) RETURNS tsvector
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
  n integer := length(t);
BEGIN
  LOOP
    BEGIN
      RETURN to_tsvector('{config}'::regconfig, {schema}.lcm_search_text(left(t, n)));
    EXCEPTION WHEN program_limit_exceeded THEN
      n := n / 2;
    END;
  END LOOP;
END $$;

CREATE OR REPLACE FUNCTION {schema}.lcm_search_vector(t text) RETURNS tsvector
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE WHEN length(t) <= {LARGE_TEXT_CHARS} THEN to_tsvector('{config}'::regconfig, {schema}.lcm_search_text(t))
    ELSE {schema}.lcm_search_vector_large(t) END $$;

CREATE OR REPLACE FUNCTION {schema}.lcm_search_query(t text) RETURNS tsquery
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT phraseto_tsquery('{config}'::regconfig, {schema}.lcm_search_text(t)) $$;

CREATE OR REPLACE FUNCTION {schema}.lcm_epoch(t text) RETURNS double precision
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE WHEN t ~ '^\d{{4}}-[01]\d-[0-3]\d([ T][0-2]\d:[0-5]\d(:[0-5]\d(\.\d+)?)?)?(Z|[+-]\d\d(:?\d\d)?)?$'
    THEN extract(epoch FROM CAST(replace(t, 'T', ' ') || CASE WHEN t ~ '(Z|[+-]\d\d(:?\d\d)?)$' THEN '' ELSE '+00' END AS timestamptz))::double precision
  END $$;"#
    )
}

/// Brings the search objects of a schema made by an earlier lcm-native to today's: the
/// functions (the words function was plpgsql, the punctuation went through `translate`) and
/// the indexes' pending-list limit. One catalog read when they are today's already. Best
/// effort: a role that does not own them (another role made the schema) searches as before.
pub(crate) fn upgrade(c: &Conn) -> Result<()> {
    let indexes: Vec<String> = INDEXES.iter().map(|i| i.to_string()).collect();
    let row = c.query(
        "SELECT
           EXISTS (SELECT 1 FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
                    WHERE n.nspname = $1 AND p.proname = 'lcm_search_vector_large'),
           NOT EXISTS (SELECT 1 FROM pg_catalog.pg_class i JOIN pg_catalog.pg_namespace n ON n.oid = i.relnamespace
                        WHERE n.nspname = $1 AND i.relname = ANY($2)
                          AND NOT COALESCE(i.reloptions, '{}') @> ARRAY[$3])",
        &[&c.schema, &indexes, &PENDING_LIMIT.replace(' ', "")],
    )?;
    let (functions_current, limits_current): (bool, bool) = (row[0].get(0), row[0].get(1));
    if !functions_current {
        let _ = c.transaction(|c| c.batch(&functions(&c.schema)));
    }
    if !limits_current {
        let schema = quote_ident(&c.schema);
        let sets: Vec<String> = INDEXES
            .iter()
            .map(|i| format!("ALTER INDEX IF EXISTS {schema}.{i} SET ({PENDING_LIMIT});"))
            .collect();
        let _ = c.transaction(|c| c.batch(&sets.join("\n")));
    }
    Ok(())
}

/// The search indexes' pending lists (GIN's `fastupdate`: new rows' words wait in a list merged
/// into the index by whichever insert finds it full) kept at 512 kB instead of the server's
/// 4 MB: the turn that merges pays ~7 ms instead of ~25 (a turn's p99 on PostgreSQL), and the
/// median is unchanged (bench/RESULTS.md, #48).
const PENDING_LIMIT: &str = "gin_pending_list_limit = 512";

/// The search indexes (those a server without `pg_trgm` lacks are skipped).
const INDEXES: [&str; 4] = [
    "messages_search_idx",
    "summaries_search_idx",
    "messages_trigram_idx",
    "summaries_trigram_idx",
];

/// What a schema has for searching.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Support {
    /// `lcm_search_vector` and the full-text indexes exist.
    pub full_text: bool,
    /// Trigram indexes back `ILIKE`.
    pub trigram: bool,
}

/// Makes the search objects in the connection's schema, if missing (in the caller's
/// transaction). Extensions the role may not make are skipped (a savepoint keeps the
/// transaction usable).
pub(crate) fn install(c: &Conn, text_columns: &[(&str, &[&str])]) -> Result<Support> {
    let unaccent = extension(c, "unaccent")?;
    let trigram = extension(c, "pg_trgm")?;
    let schema = quote_ident(&c.schema);
    let config = format!("{schema}.lcm_search");
    let has_config: bool = c.query_one_value(
        "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_ts_config t JOIN pg_catalog.pg_namespace n ON n.oid = t.cfgnamespace
          WHERE n.nspname = $1 AND t.cfgname = 'lcm_search')",
        &[&c.schema],
    )?;
    if !has_config {
        let filter = match &unaccent {
            Some(ext_schema) => format!("{}.unaccent, ", quote_ident(ext_schema)),
            None => String::new(),
        };
        c.batch(&format!(
            "CREATE TEXT SEARCH DICTIONARY {schema}.lcm_stem (TEMPLATE = snowball, Language = english);
             CREATE TEXT SEARCH CONFIGURATION {config} (PARSER = default);
             ALTER TEXT SEARCH CONFIGURATION {config} ADD MAPPING
               FOR asciiword, asciihword, hword_asciipart WITH {schema}.lcm_stem;
             ALTER TEXT SEARCH CONFIGURATION {config} ADD MAPPING
               FOR word, hword, hword_part WITH {filter}{schema}.lcm_stem;
             ALTER TEXT SEARCH CONFIGURATION {config} ADD MAPPING
               FOR numword, numhword, hword_numpart, int, uint, float, sfloat, version WITH {filter}simple;"
        ))?;
    }
    c.batch(&functions(&c.schema))?;
    c.batch(&format!(
        r#"ALTER TABLE {schema}.messages ADD COLUMN IF NOT EXISTS {SEARCH_COLUMN} tsvector
  GENERATED ALWAYS AS ({schema}.lcm_search_vector(content)) STORED;
ALTER TABLE {schema}.summaries ADD COLUMN IF NOT EXISTS {SEARCH_COLUMN} tsvector
  GENERATED ALWAYS AS ({schema}.lcm_search_vector(content)) STORED;
CREATE INDEX IF NOT EXISTS messages_search_idx ON {schema}.messages USING gin ({SEARCH_COLUMN}) WITH ({PENDING_LIMIT});
CREATE INDEX IF NOT EXISTS summaries_search_idx ON {schema}.summaries USING gin ({SEARCH_COLUMN}) WITH ({PENDING_LIMIT});"#
    ))?;
    for (table, columns) in text_columns {
        if !c.has_table(table)? {
            continue;
        }
        let columns: Vec<&str> = match *table {
            "messages" | "summaries" => columns.iter().copied().chain([SEARCH_COLUMN]).collect(),
            _ => columns.to_vec(),
        };
        let sets: Vec<String> = columns
            .iter()
            .map(|col| format!("ALTER COLUMN {} SET STATISTICS 0", quote_ident(col)))
            .collect();
        c.batch(&format!(
            "ALTER TABLE {schema}.{} {}",
            quote_ident(table),
            sets.join(", ")
        ))?;
    }
    if let Some(ext_schema) = &trigram {
        let ops = format!("{}.gin_trgm_ops", quote_ident(ext_schema));
        c.batch(&format!(
            "CREATE INDEX IF NOT EXISTS messages_trigram_idx ON {schema}.messages USING gin (content {ops}) WITH ({PENDING_LIMIT});
             CREATE INDEX IF NOT EXISTS summaries_trigram_idx ON {schema}.summaries USING gin (content {ops}) WITH ({PENDING_LIMIT});"
        ))?;
    }
    probe(c)
}

/// The tables grep reads, analysed when they never were (a schema just made, or filled by a
/// copy): the planner chooses between the word, trigram and newest-first ways from these
/// statistics, and without them takes a small table for an empty one. Afterwards PostgreSQL's
/// autovacuum keeps them.
pub(crate) fn analyze_if_never(c: &Conn) -> Result<()> {
    let never: bool = c.query_one_value(
        "SELECT COALESCE(bool_and(last_analyze IS NULL AND last_autoanalyze IS NULL), true)
         FROM pg_catalog.pg_stat_user_tables WHERE schemaname = $1 AND relname IN ('messages', 'summaries')",
        &[&c.schema],
    )?;
    if never {
        let schema = quote_ident(&c.schema);
        c.batch(&format!(
            "ANALYZE {schema}.messages, {schema}.summaries, {schema}.context_items, {schema}.summary_messages, {schema}.summary_parents"
        ))?;
    }
    Ok(())
}

/// What the connection's schema has (a read-only open cannot make what is missing).
pub(crate) fn probe(c: &Conn) -> Result<Support> {
    let row = c.query(
        "SELECT
           EXISTS (SELECT 1 FROM pg_catalog.pg_indexes WHERE schemaname = $1 AND indexname = 'summaries_search_idx'),
           EXISTS (SELECT 1 FROM pg_catalog.pg_indexes WHERE schemaname = $1 AND indexname = 'summaries_trigram_idx')",
        &[&c.schema],
    )?;
    Ok(Support {
        full_text: row[0].get(0),
        trigram: row[0].get(1),
    })
}

/// The schema extension `name` lives in, made (in `public`, else the connection's schema)
/// when missing and the role may; None when it cannot be had.
fn extension(c: &Conn, name: &str) -> Result<Option<String>> {
    let find = |c: &Conn| -> Result<Option<String>> {
        let rows = c.query(
            "SELECT n.nspname FROM pg_catalog.pg_extension e JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace
             WHERE e.extname = $1",
            &[&name],
        )?;
        Ok(rows.first().map(|r| r.get(0)))
    };
    if let Some(found) = find(c)? {
        return Ok(Some(found));
    }
    let public: bool = c.query_one_value(
        "SELECT CASE WHEN EXISTS (SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = 'public')
           THEN has_schema_privilege('public', 'CREATE') ELSE false END",
        &[],
    )?;
    let target = if public { "public".to_string() } else { c.schema.clone() };
    c.batch("SAVEPOINT lcm_extension")?;
    match c.batch(&format!(
        "CREATE EXTENSION IF NOT EXISTS {name} WITH SCHEMA {}",
        quote_ident(&target)
    )) {
        Ok(()) => {
            c.batch("RELEASE SAVEPOINT lcm_extension")?;
            find(c)
        }
        Err(_) => {
            // Not available or not allowed: the search goes without it.
            c.batch("ROLLBACK TO SAVEPOINT lcm_extension")?;
            Ok(None)
        }
    }
}
