//! lossless-claw 1.x's pending compaction: summaries it prepared (`pending_compaction_batches`,
//! `pending_summary_nodes*`) but had not published when the file changed hands. Nothing else
//! refers to them and every message they cover is still in the live context, so lcm-native
//! takes the work over: it drops the unpublished batches (lossless-claw's own doctor does the
//! same) and compacts those messages itself. Published batches are lossless-claw's history and
//! stay.

use rusqlite::{Connection, OptionalExtension};

use crate::error::Result;

/// Drops every batch that is not published, with its nodes and their links; returns how many
/// batches. A file without lossless-claw 1.x's tables has none.
pub(crate) fn take_over(conn: &Connection) -> Result<i64> {
    let has_tables = conn
        .query_row(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'pending_compaction_batches'",
            [],
            |_| Ok(()),
        )
        .optional()?
        .is_some();
    if !has_tables {
        return Ok(0);
    }
    let tx = conn.unchecked_transaction()?;
    let open = "SELECT batch_id FROM pending_compaction_batches WHERE status <> 'published'";
    let nodes = format!("SELECT node_id FROM pending_summary_nodes WHERE batch_id IN ({open})");
    // Children first: the links' foreign keys need not be enforced on this connection.
    tx.execute(
        &format!("DELETE FROM pending_summary_node_messages WHERE node_id IN ({nodes})"),
        [],
    )?;
    tx.execute(
        &format!("DELETE FROM pending_summary_node_children WHERE node_id IN ({nodes}) OR child_node_id IN ({nodes})"),
        [],
    )?;
    tx.execute(
        &format!("DELETE FROM pending_summary_nodes WHERE batch_id IN ({open})"),
        [],
    )?;
    let batches = tx.execute("DELETE FROM pending_compaction_batches WHERE status <> 'published'", [])?;
    tx.commit()?;
    Ok(batches as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// lossless-claw 1.x's pending tables (its DDL, abridged to the columns these tests fill).
    const DDL: &str = "
        CREATE TABLE pending_compaction_batches (batch_id TEXT PRIMARY KEY, conversation_id INTEGER NOT NULL,
          status TEXT NOT NULL DEFAULT 'planning', source_projection_fingerprint TEXT NOT NULL,
          compactable_start_ordinal INTEGER NOT NULL, compactable_end_ordinal INTEGER NOT NULL);
        CREATE TABLE pending_summary_nodes (node_id TEXT PRIMARY KEY,
          batch_id TEXT NOT NULL REFERENCES pending_compaction_batches(batch_id) ON DELETE CASCADE,
          conversation_id INTEGER NOT NULL, kind TEXT NOT NULL, ordinal_start INTEGER NOT NULL,
          ordinal_end INTEGER NOT NULL, source_fingerprint TEXT NOT NULL);
        CREATE TABLE pending_summary_node_messages (node_id TEXT NOT NULL REFERENCES pending_summary_nodes(node_id)
          ON DELETE CASCADE, message_id INTEGER NOT NULL, ordinal INTEGER NOT NULL, PRIMARY KEY (node_id, message_id));
        CREATE TABLE pending_summary_node_children (node_id TEXT NOT NULL REFERENCES pending_summary_nodes(node_id)
          ON DELETE CASCADE, ordinal INTEGER NOT NULL, child_node_id TEXT REFERENCES pending_summary_nodes(node_id)
          ON DELETE CASCADE, child_summary_id TEXT, PRIMARY KEY (node_id, ordinal));";

    fn count(conn: &Connection, table: &str) -> i64 {
        conn.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
            .unwrap()
    }

    #[test]
    fn unpublished_batches_go_with_their_nodes_and_published_ones_stay() {
        let conn = Connection::open_in_memory().unwrap();
        assert_eq!(take_over(&conn).unwrap(), 0, "no tables: nothing to do");
        conn.execute_batch(DDL).unwrap();
        for (batch, status) in [("b1", "planning"), ("b2", "published"), ("b3", "stale")] {
            conn.execute(
                "INSERT INTO pending_compaction_batches VALUES (?1, 1, ?2, 'fp', 0, 9)",
                [batch, status],
            )
            .unwrap();
            for n in 0..2 {
                let node = format!("{batch}-n{n}");
                conn.execute(
                    "INSERT INTO pending_summary_nodes VALUES (?1, ?2, 1, 'leaf', 0, 4, 'fp')",
                    [&node, batch],
                )
                .unwrap();
                conn.execute("INSERT INTO pending_summary_node_messages VALUES (?1, 7, 0)", [&node])
                    .unwrap();
            }
            conn.execute(
                "INSERT INTO pending_summary_node_children VALUES (?1, 0, ?2, NULL)",
                [format!("{batch}-n1"), format!("{batch}-n0")],
            )
            .unwrap();
        }
        assert_eq!(take_over(&conn).unwrap(), 2);
        assert_eq!(count(&conn, "pending_compaction_batches"), 1);
        assert_eq!(count(&conn, "pending_summary_nodes"), 2);
        assert_eq!(count(&conn, "pending_summary_node_messages"), 2);
        assert_eq!(count(&conn, "pending_summary_node_children"), 1);
        let left: String = conn
            .query_row("SELECT batch_id FROM pending_compaction_batches", [], |r| r.get(0))
            .unwrap();
        assert_eq!(left, "b2");
        assert_eq!(take_over(&conn).unwrap(), 0, "idempotent");
    }
}
