//! lossless-claw 1.x's pending compaction: summaries it prepared (`pending_compaction_batches`,
//! `pending_summary_nodes*`) but had not published when the file changed hands. Nothing else
//! refers to them and every message they cover is still in the live context, so lcm-native
//! takes the work over when it opens the file: each summary lossless-claw finished (`ready`)
//! whose inputs still sit together, in order, in the live context (a leaf's messages, a
//! condensed node's summaries one level below it) is published as lossless-claw would publish
//! it (its summary id, its lineage, one context item in place of the inputs), so the model call
//! it cost is not made again. The rest of an unpublished batch (planned, running or failed
//! nodes) is dropped, as lossless-claw's own doctor drops stale batches: those messages stay
//! raw and lcm-native's next pass summarises them, which is the planned work resumed. Published
//! batches are lossless-claw's history and stay.

use rusqlite::{params, Connection, OptionalExtension};
use sha2::{Digest, Sha256};

use crate::db::SchemaFlags;
use crate::error::Result;
use crate::sql::Db;
use crate::store::summaries::{self, NewSummary, SummaryFields};
use crate::summarizer::SummaryKind;
use crate::time;

/// What taking over lossless-claw's pending batches did.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub(crate) struct TakeOver {
    /// Unpublished batches removed.
    pub batches: i64,
    /// Their finished summaries published first.
    pub published: i64,
}

/// Publishes the finished summaries of every unpublished batch that still fit the live context,
/// then drops those batches with their nodes and links, in one transaction. A file
/// without lossless-claw 1.x's tables has none.
pub(crate) fn take_over(conn: &Connection, flags: SchemaFlags) -> Result<TakeOver> {
    let has_tables = conn
        .query_row(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'pending_compaction_batches'",
            [],
            |_| Ok(()),
        )
        .optional()?
        .is_some();
    if !has_tables {
        return Ok(TakeOver::default());
    }
    let tx = conn.unchecked_transaction()?;
    let published = publish_ready(&tx, flags)?;
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
    Ok(TakeOver {
        batches: batches as i64,
        published,
    })
}

/// A finished node of an unpublished batch.
struct ReadyNode {
    batch_id: String,
    node_id: String,
    conversation_id: i64,
    condensed: bool,
    depth: i64,
    source_fingerprint: String,
    content: String,
    token_count: Option<i64>,
    model: String,
}

/// Publishes every ready node whose inputs are live, together and in order (leaves first,
/// then condensed nodes from the shallowest up, so that a condensed node finds its children
/// published); returns how many.
fn publish_ready(tx: &Connection, flags: SchemaFlags) -> Result<i64> {
    // Only what lossless-claw 1.0 can have written: a file of an older era lacks the columns.
    let has_content = tx
        .prepare("SELECT 1 FROM pragma_table_info('pending_summary_nodes') WHERE name = 'content'")?
        .exists([])?;
    if !has_content {
        return Ok(0);
    }
    let nodes: Vec<ReadyNode> = tx
        .prepare(
            "SELECT n.batch_id, n.node_id, n.conversation_id, n.kind, n.depth, n.source_fingerprint, n.content,
                    n.token_count, n.model
             FROM pending_summary_nodes n JOIN pending_compaction_batches b USING (batch_id)
             WHERE b.status IN ('planning', 'ready', 'publishing') AND n.status = 'ready'
               AND n.content IS NOT NULL AND trim(n.content) <> '' AND n.conversation_id = b.conversation_id
             ORDER BY n.depth, n.conversation_id, n.ordinal_start DESC",
        )?
        .query_map([], |r| {
            Ok(ReadyNode {
                batch_id: r.get(0)?,
                node_id: r.get(1)?,
                conversation_id: r.get(2)?,
                condensed: r.get::<_, String>(3)? == "condensed",
                depth: r.get(4)?,
                source_fingerprint: r.get(5)?,
                content: r.get(6)?,
                token_count: r.get(7)?,
                model: r.get(8)?,
            })
        })?
        .collect::<std::result::Result<_, _>>()?;
    let now = time::now_sqlite();
    let mut published = 0;
    // Newest first at each depth: replacing a run by one item moves only the items after it,
    // which are then published already.
    for node in &nodes {
        let summary_id = canonical_id(&node.batch_id, &node.node_id, &node.source_fingerprint);
        let exists = tx
            .query_row("SELECT 1 FROM summaries WHERE summary_id = ?1", [&summary_id], |_| {
                Ok(())
            })
            .optional()?
            .is_some();
        let planned = match (exists, node.condensed) {
            (true, _) => None,
            (false, false) => leaf_of(tx, node, &summary_id)?,
            (false, true) => condensed_of(tx, node, &summary_id)?,
        };
        if let Some((new, first, last)) = planned {
            write(tx, flags, node.conversation_id, &new, first, last, &now)?;
            published += 1;
        }
    }
    Ok(published)
}

/// The summary a ready leaf becomes, and the run of live items it replaces, when its messages
/// are still that run, in its order (else None).
fn leaf_of(tx: &Connection, node: &ReadyNode, summary_id: &str) -> Result<Option<(NewSummary, i64, i64)>> {
    // (message, its live ordinal or None, token count, created_at) in the node's order.
    type Source = (i64, Option<i64>, i64, String);
    let sources: Vec<Source> = tx
        .prepare(
            "SELECT nm.message_id, c.ordinal, m.token_count, m.created_at
             FROM pending_summary_node_messages nm
             JOIN messages m ON m.message_id = nm.message_id AND m.conversation_id = ?2
             LEFT JOIN context_items c ON c.conversation_id = ?2 AND c.item_type = 'message' AND c.message_id = nm.message_id
             WHERE nm.node_id = ?1 ORDER BY nm.ordinal",
        )?
        .query_map(params![node.node_id, node.conversation_id], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
        })?
        .collect::<std::result::Result<_, _>>()?;
    let listed: i64 = tx.query_row(
        "SELECT count(*) FROM pending_summary_node_messages WHERE node_id = ?1",
        [&node.node_id],
        |r| r.get(0),
    )?;
    if sources.len() as i64 != listed {
        return Ok(None);
    }
    let Some((first, last)) = live_run(tx, node.conversation_id, sources.iter().map(|s| s.1))? else {
        return Ok(None);
    };
    let times: Vec<_> = sources.iter().filter_map(|s| time::parse_timestamp(&s.3)).collect();
    let fields = SummaryFields {
        summary_id: summary_id.to_string(),
        kind: SummaryKind::Leaf,
        depth: 0,
        content: node.content.clone(),
        token_count: node
            .token_count
            .unwrap_or_else(|| crate::tokens::estimate(&node.content)),
        earliest_at: times.iter().min().map(time::to_iso_ms),
        latest_at: times.iter().max().map(time::to_iso_ms),
        descendant_count: 0,
        descendant_token_count: 0,
        source_message_token_count: sources.iter().map(|s| s.2).sum(),
        model: node.model.clone(),
    };
    Ok(Some((
        new_summary(fields, sources.iter().map(|s| s.0).collect(), Vec::new()),
        first,
        last,
    )))
}

/// The summary a ready condensed node becomes, and the run of live items it replaces, when its
/// inputs are published summaries one level below it that are still that run, in its order.
fn condensed_of(tx: &Connection, node: &ReadyNode, summary_id: &str) -> Result<Option<(NewSummary, i64, i64)>> {
    let children: Vec<(Option<String>, Option<String>)> = tx
        .prepare("SELECT child_node_id, child_summary_id FROM pending_summary_node_children WHERE node_id = ?1 ORDER BY ordinal")?
        .query_map([&node.node_id], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<std::result::Result<_, _>>()?;
    let mut parents = Vec::with_capacity(children.len());
    for child in children {
        let id = match child {
            (_, Some(summary)) => summary,
            (Some(child_node), None) => {
                // The summary that node was (or has just been) published as.
                let row: Option<(String, String, Option<String>)> = tx
                    .query_row(
                        "SELECT batch_id, source_fingerprint, canonical_summary_id FROM pending_summary_nodes WHERE node_id = ?1",
                        [&child_node],
                        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
                    )
                    .optional()?;
                let Some((batch, fingerprint, canonical)) = row else {
                    return Ok(None);
                };
                canonical.unwrap_or_else(|| canonical_id(&batch, &child_node, &fingerprint))
            }
            (None, None) => return Ok(None),
        };
        parents.push(id);
    }
    // (live ordinal, depth, tokens, descendants, their tokens, source tokens, earliest, latest)
    type Input = (Option<i64>, i64, i64, i64, i64, i64, Option<String>, Option<String>);
    let mut inputs: Vec<Input> = Vec::with_capacity(parents.len());
    for id in &parents {
        let row: Option<Input> = tx
            .query_row(
                "SELECT c.ordinal, s.depth, s.token_count, s.descendant_count, s.descendant_token_count,
                        s.source_message_token_count, s.earliest_at, s.latest_at
                 FROM summaries s
                 LEFT JOIN context_items c ON c.conversation_id = ?2 AND c.item_type = 'summary' AND c.summary_id = s.summary_id
                 WHERE s.summary_id = ?1 AND s.conversation_id = ?2",
                params![id, node.conversation_id],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?, r.get(6)?, r.get(7)?)),
            )
            .optional()?;
        let Some(input) = row else { return Ok(None) };
        inputs.push(input);
    }
    // One level above its deepest input, as every condensed node of the DAG.
    if inputs.iter().map(|i| i.1).max().is_none_or(|d| d + 1 != node.depth) {
        return Ok(None);
    }
    let Some((first, last)) = live_run(tx, node.conversation_id, inputs.iter().map(|i| i.0))? else {
        return Ok(None);
    };
    let times = |pick: fn(&Input) -> &Option<String>| -> Vec<chrono::DateTime<chrono::Utc>> {
        inputs
            .iter()
            .filter_map(|i| pick(i).as_deref().and_then(time::parse_timestamp))
            .collect()
    };
    let fields = SummaryFields {
        summary_id: summary_id.to_string(),
        kind: SummaryKind::Condensed,
        depth: node.depth,
        content: node.content.clone(),
        token_count: node
            .token_count
            .unwrap_or_else(|| crate::tokens::estimate(&node.content)),
        earliest_at: times(|i| &i.6).iter().min().map(time::to_iso_ms),
        latest_at: times(|i| &i.7).iter().max().map(time::to_iso_ms),
        descendant_count: inputs.iter().map(|i| i.3 + 1).sum(),
        descendant_token_count: inputs.iter().map(|i| i.2 + i.4).sum(),
        source_message_token_count: inputs.iter().map(|i| i.5).sum(),
        model: node.model.clone(),
    };
    Ok(Some((new_summary(fields, Vec::new(), parents), first, last)))
}

/// The first and last ordinal of `ordinals` when each input is live (Some) and together they
/// are exactly one run of the context, in order, with nothing else in it.
fn live_run(tx: &Connection, cid: i64, ordinals: impl Iterator<Item = Option<i64>>) -> Result<Option<(i64, i64)>> {
    let Some(ordinals) = ordinals.collect::<Option<Vec<i64>>>() else {
        return Ok(None);
    };
    let (Some(&first), Some(&last)) = (ordinals.first(), ordinals.last()) else {
        return Ok(None);
    };
    if !ordinals.windows(2).all(|w| w[1] == w[0] + 1) {
        return Ok(None);
    }
    let items: i64 = tx.query_row(
        "SELECT count(*) FROM context_items WHERE conversation_id = ?1 AND ordinal BETWEEN ?2 AND ?3",
        params![cid, first, last],
        |r| r.get(0),
    )?;
    Ok((items == ordinals.len() as i64).then_some((first, last)))
}

fn new_summary(fields: SummaryFields, messages: Vec<i64>, parents: Vec<String>) -> NewSummary {
    NewSummary {
        fields,
        file_ids: Vec::new(),
        messages,
        parents,
        previous: Vec::new(),
        fidelity: None,
        needs_repair: false,
        template: None,
    }
}

/// Writes `new` (its row, lineage and full-text row) and puts it in place of the live items
/// `first..=last`; the items after them close the gap.
fn write(
    tx: &Connection,
    flags: SchemaFlags,
    cid: i64,
    new: &NewSummary,
    first: i64,
    last: i64,
    now: &str,
) -> Result<()> {
    summaries::insert(Db::Sqlite(tx), flags, cid, now, std::slice::from_ref(new))?;
    summaries::insert_fts(tx.into(), flags, std::slice::from_ref(new))?;
    // The context rewrite every compaction write uses: the run is consumed, the summary takes
    // its first ordinal, the items after it move up to close the gap.
    let max = crate::store::context::last_ordinal(Db::Sqlite(tx), cid)?;
    let renumbering = crate::store::context::Renumbering {
        moved: (first, max),
        consumed: &[(first, last)],
        survivors: &[(last + 1, max, first - last)],
        after_shift: 0,
        inserted: vec![(first, new.fields.summary_id.as_str())],
    };
    crate::store::context::renumber(Db::Sqlite(tx), cid, &renumbering, now)?;
    Ok(())
}

/// The id lossless-claw gives the summary of a pending node it publishes: `sum_` and the first
/// 16 hex digits of SHA-256(batch id, NUL, node id, NUL, source fingerprint).
fn canonical_id(batch_id: &str, node_id: &str, fingerprint: &str) -> String {
    let mut h = Sha256::new();
    h.update(format!("{batch_id}\0{node_id}\0{fingerprint}").as_bytes());
    let hex: String = h.finalize().iter().take(8).map(|b| format!("{b:02x}")).collect();
    format!("sum_{hex}")
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
        assert_eq!(
            take_over(&conn, SchemaFlags::default()).unwrap().batches,
            0,
            "no tables: nothing to do"
        );
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
        assert_eq!(take_over(&conn, SchemaFlags::default()).unwrap().batches, 2);
        assert_eq!(count(&conn, "pending_compaction_batches"), 1);
        assert_eq!(count(&conn, "pending_summary_nodes"), 2);
        assert_eq!(count(&conn, "pending_summary_node_messages"), 2);
        assert_eq!(count(&conn, "pending_summary_node_children"), 1);
        let left: String = conn
            .query_row("SELECT batch_id FROM pending_compaction_batches", [], |r| r.get(0))
            .unwrap();
        assert_eq!(left, "b2");
        assert_eq!(
            take_over(&conn, SchemaFlags::default()).unwrap().batches,
            0,
            "idempotent"
        );
    }

    /// lossless-claw 1.0's pending tables, as it creates them.
    const FULL_DDL: &str = "
        CREATE TABLE pending_compaction_batches (batch_id TEXT PRIMARY KEY,
          conversation_id INTEGER NOT NULL REFERENCES conversations(conversation_id) ON DELETE CASCADE,
          session_key TEXT, session_target_json TEXT NOT NULL DEFAULT '{}',
          status TEXT NOT NULL DEFAULT 'planning'
            CHECK (status IN ('planning', 'ready', 'publishing', 'published', 'stale', 'failed')),
          source_projection_fingerprint TEXT NOT NULL, compactable_start_ordinal INTEGER NOT NULL,
          compactable_end_ordinal INTEGER NOT NULL, planned_fresh_tail_start_ordinal INTEGER,
          prompt_version TEXT NOT NULL DEFAULT 'unknown', model TEXT NOT NULL DEFAULT 'unknown',
          failure_summary TEXT, created_at TEXT NOT NULL DEFAULT (datetime('now')),
          updated_at TEXT NOT NULL DEFAULT (datetime('now')), published_at TEXT);
        CREATE TABLE pending_summary_nodes (node_id TEXT PRIMARY KEY,
          batch_id TEXT NOT NULL REFERENCES pending_compaction_batches(batch_id) ON DELETE CASCADE,
          conversation_id INTEGER NOT NULL REFERENCES conversations(conversation_id) ON DELETE CASCADE,
          kind TEXT NOT NULL CHECK (kind IN ('leaf', 'condensed')), depth INTEGER NOT NULL DEFAULT 0,
          status TEXT NOT NULL DEFAULT 'planned'
            CHECK (status IN ('planned', 'running', 'ready', 'promoted', 'stale', 'failed')),
          ordinal_start INTEGER NOT NULL, ordinal_end INTEGER NOT NULL, source_fingerprint TEXT NOT NULL,
          source_context_hash TEXT, content TEXT, token_count INTEGER,
          prompt_version TEXT NOT NULL DEFAULT 'unknown', model TEXT NOT NULL DEFAULT 'unknown',
          canonical_summary_id TEXT REFERENCES summaries(summary_id) ON DELETE SET NULL,
          lease_owner TEXT, lease_expires_at TEXT, failure_summary TEXT,
          retry_count INTEGER NOT NULL DEFAULT 0, next_attempt_after TEXT,
          created_at TEXT NOT NULL DEFAULT (datetime('now')), updated_at TEXT NOT NULL DEFAULT (datetime('now')),
          ready_at TEXT, promoted_at TEXT, UNIQUE (batch_id, ordinal_start, ordinal_end, depth, kind));
        CREATE TABLE pending_summary_node_messages (
          node_id TEXT NOT NULL REFERENCES pending_summary_nodes(node_id) ON DELETE CASCADE,
          message_id INTEGER NOT NULL REFERENCES messages(message_id) ON DELETE RESTRICT,
          ordinal INTEGER NOT NULL, transcript_entry_id TEXT, identity_hash TEXT,
          PRIMARY KEY (node_id, message_id));
        CREATE TABLE pending_summary_node_children (
          node_id TEXT NOT NULL REFERENCES pending_summary_nodes(node_id) ON DELETE CASCADE,
          ordinal INTEGER NOT NULL,
          child_node_id TEXT REFERENCES pending_summary_nodes(node_id) ON DELETE CASCADE,
          child_summary_id TEXT REFERENCES summaries(summary_id) ON DELETE RESTRICT,
          PRIMARY KEY (node_id, ordinal));";

    #[test]
    fn finished_summaries_are_published_as_lossless_claw_would_and_the_rest_is_left_to_lcm_native() {
        use crate::engine::Engine;
        use crate::store::conversations::Target;
        let (dir, engine) = crate::test_support::temp_engine();
        let path = engine.config().db_path.clone();
        let target = Target::Session("s1".into());
        let msgs: Vec<_> = (1..=10)
            .map(|i| serde_json::json!({"role": if i % 2 == 1 { "user" } else { "assistant" }, "content": format!("message {i}")}))
            .collect();
        let cid = engine.ingest(&target, &msgs).unwrap().conversation_id;
        drop(engine);
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch(FULL_DDL).unwrap();
        conn.execute(
            "INSERT INTO pending_compaction_batches (batch_id, conversation_id, status, source_projection_fingerprint,
                                                    compactable_start_ordinal, compactable_end_ordinal)
             VALUES ('pcb_1', ?1, 'planning', 'fp', 0, 7)",
            [cid],
        )
        .unwrap();
        // Leaves: messages 2–4 and 5–6 summarised (ready), 7–8 planned, 1 and 9 ready but not
        // together. Condensed: the two ready leaves (ready), the planned one (ready, but its
        // input was never written).
        let node = |id: &str, kind: &str, status: &str, content: Option<&str>, span: (i64, i64)| {
            conn.execute(
                "INSERT INTO pending_summary_nodes (node_id, batch_id, conversation_id, kind, depth, status, ordinal_start,
                                                   ordinal_end, source_fingerprint, content, token_count, model)
                 VALUES (?1, 'pcb_1', ?2, ?3, ?4, ?5, ?6, ?7, 'fp-' || ?1, ?8, 7, 'test/model')",
                params![id, cid, kind, (kind == "condensed") as i64, status, span.0, span.1, content],
            )
            .unwrap();
        };
        let leaf = |id: &str, status: &str, content: Option<&str>, seqs: &[i64]| {
            node(id, "leaf", status, content, (seqs[0] - 1, seqs[seqs.len() - 1] - 1));
            for (i, seq) in seqs.iter().enumerate() {
                conn.execute(
                    "INSERT INTO pending_summary_node_messages (node_id, message_id, ordinal)
                     SELECT ?1, message_id, ?2 FROM messages WHERE conversation_id = ?3 AND seq = ?4",
                    params![id, i as i64, cid, seq],
                )
                .unwrap();
            }
        };
        let condensed = |id: &str, content: &str, span: (i64, i64), children: &[&str]| {
            node(id, "condensed", "ready", Some(content), span);
            for (i, child) in children.iter().enumerate() {
                conn.execute(
                    "INSERT INTO pending_summary_node_children (node_id, ordinal, child_node_id) VALUES (?1, ?2, ?3)",
                    params![id, i as i64, child],
                )
                .unwrap();
            }
        };
        leaf("psn_ready", "ready", Some("Messages 2 to 4 said hello."), &[2, 3, 4]);
        leaf("psn_ready2", "ready", Some("Messages 5 and 6 said goodbye."), &[5, 6]);
        leaf("psn_planned", "planned", None, &[7, 8]);
        leaf("psn_apart", "ready", Some("Messages 1 and 9."), &[1, 9]);
        condensed(
            "psn_cond",
            "Greetings, then farewells.",
            (1, 5),
            &["psn_ready", "psn_ready2"],
        );
        condensed("psn_cond_bad", "Never written below.", (6, 7), &["psn_planned"]);
        drop(conn);

        let engine = Engine::open(crate::config::Config::with_db_path(&path)).unwrap();
        let m = engine.migration();
        assert_eq!((m.pending_batches_taken_over, m.pending_summaries_published), (1, 3));
        assert!(
            m.summary.ends_with("publishing 3 finished summary(ies)"),
            "{}",
            m.summary
        );
        let id = canonical_id("pcb_1", "psn_ready", "fp-psn_ready");
        let conn = Connection::open(&path).unwrap();
        let (content, model, sources, own): (String, String, i64, i64) = conn
            .query_row(
                "SELECT content, model, source_message_token_count,
                        (SELECT sum(token_count) FROM messages WHERE conversation_id = ?2 AND seq BETWEEN 2 AND 4)
                 FROM summaries WHERE summary_id = ?1",
                params![id, cid],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
            )
            .unwrap();
        assert_eq!(
            (content.as_str(), model.as_str(), sources),
            ("Messages 2 to 4 said hello.", "test/model", own)
        );
        let linked: Vec<i64> = conn
            .prepare("SELECT m.seq FROM summary_messages s JOIN messages m USING (message_id) WHERE s.summary_id = ?1 ORDER BY s.ordinal")
            .unwrap()
            .query_map([&id], |r| r.get(0))
            .unwrap()
            .collect::<std::result::Result<_, _>>()
            .unwrap();
        assert_eq!(linked, [2, 3, 4]);
        let leaf2 = canonical_id("pcb_1", "psn_ready2", "fp-psn_ready2");
        let cond = canonical_id("pcb_1", "psn_cond", "fp-psn_cond");
        let parents: Vec<String> = conn
            .prepare("SELECT parent_summary_id FROM summary_parents WHERE summary_id = ?1 ORDER BY ordinal")
            .unwrap()
            .query_map([&cond], |r| r.get(0))
            .unwrap()
            .collect::<std::result::Result<_, _>>()
            .unwrap();
        assert_eq!(parents, [id.clone(), leaf2]);
        let (depth, descendants): (i64, i64) = conn
            .query_row(
                "SELECT depth, descendant_count FROM summaries WHERE summary_id = ?1",
                [&cond],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        assert_eq!((depth, descendants), (1, 2));
        // The context: message 1, the condensed summary, messages 7–10, numbered 0..5 without a gap.
        let items: Vec<(i64, Option<i64>, Option<String>)> = conn
            .prepare(
                "SELECT c.ordinal, m.seq, c.summary_id FROM context_items c LEFT JOIN messages m USING (message_id)
                 WHERE c.conversation_id = ?1 ORDER BY c.ordinal",
            )
            .unwrap()
            .query_map([cid], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .collect::<std::result::Result<_, _>>()
            .unwrap();
        let mut expected = vec![(0, Some(1), None), (1, None, Some(cond.clone()))];
        expected.extend((7..=10).map(|seq| (seq - 5, Some(seq), None)));
        assert_eq!(items, expected);
        for table in [
            "pending_compaction_batches",
            "pending_summary_nodes",
            "pending_summary_node_messages",
        ] {
            assert_eq!(count(&conn, table), 0, "{table}");
        }
        let report = engine.verify(None).unwrap();
        assert!(report.ok, "{:?}", report.problems);
        // Found by recall, as lcm-native's own summaries are.
        for (text, summary) in [("said hello", &id), ("farewells", &cond)] {
            // The options as JavaScript gives them: the store names no type of the API.
            let query = serde_json::from_value(serde_json::json!({ "query": text })).unwrap();
            let hits = engine.grep(Some(cid), &query).unwrap();
            assert!(
                hits.hits
                    .iter()
                    .any(|h| h.summary_id.as_deref() == Some(summary.as_str())),
                "{hits:?}"
            );
        }
        drop(dir);
    }
}
