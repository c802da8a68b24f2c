//! A count of the writes that changed or deleted a stored message or one of its parts, kept by
//! PostgreSQL triggers in the same transaction as the change (as SQLite's writer counts them
//! with its update hook): assembly's cache of rendered messages holds only while it stays the
//! same, and every gateway's change moves it. Inserts do not count: a new message was never
//! rendered.

/// The one-row table holding the count.
pub(crate) const TABLE: &str = "lcm_native_message_rewrites";

/// Creates (or replaces) the table, its function and triggers in the connection's schema.
pub(crate) const INSTALL: &str = r#"
CREATE TABLE IF NOT EXISTS lcm_native_message_rewrites (
  single BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (single),
  rewrites BIGINT NOT NULL DEFAULT 0
);
INSERT INTO lcm_native_message_rewrites (single, rewrites) VALUES (TRUE, 0) ON CONFLICT DO NOTHING;

CREATE OR REPLACE FUNCTION lcm_count_message_rewrites() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
  UPDATE lcm_native_message_rewrites SET rewrites = rewrites + 1;
  RETURN NULL;
END $$;

DROP TRIGGER IF EXISTS lcm_messages_rewritten ON messages;
CREATE TRIGGER lcm_messages_rewritten AFTER UPDATE OR DELETE ON messages
  FOR EACH STATEMENT EXECUTE FUNCTION lcm_count_message_rewrites();
DROP TRIGGER IF EXISTS lcm_message_parts_rewritten ON message_parts;
CREATE TRIGGER lcm_message_parts_rewritten AFTER UPDATE OR DELETE ON message_parts
  FOR EACH STATEMENT EXECUTE FUNCTION lcm_count_message_rewrites();
"#;

/// The count, as the caller's snapshot sees it.
pub(crate) fn count(c: &super::Conn) -> crate::error::Result<u64> {
    let rows = c.query_cached("SELECT rewrites FROM lcm_native_message_rewrites", &[])?;
    let n: i64 = match rows.first() {
        Some(row) => row.try_get(0).map_err(|e| c.error(&e))?,
        None => 0,
    };
    Ok(n.max(0) as u64)
}
