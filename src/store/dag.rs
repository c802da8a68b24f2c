//! A conversation's summary DAG in one read, for browsing it (the TUI's DAG view): every
//! summary with its inputs, the node that consumed it, whether it is live, and the messages it
//! stands for (through its inputs, for a condensed node).

use std::collections::HashMap;

use rusqlite::params;
use serde::Serialize;

use super::summaries::{self, SummaryRecord};
use crate::error::Result;
use crate::sql::Db;

/// The messages a summary stands for, by their `seq` in the conversation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct MessageSpan {
    pub count: i64,
    /// Null when the summary covers no stored message.
    pub first_seq: Option<i64>,
    pub last_seq: Option<i64>,
}

impl MessageSpan {
    fn join(self, other: MessageSpan) -> MessageSpan {
        let pick = |a: Option<i64>, b: Option<i64>, f: fn(i64, i64) -> i64| match (a, b) {
            (Some(a), Some(b)) => Some(f(a, b)),
            (a, b) => a.or(b),
        };
        MessageSpan {
            count: self.count + other.count,
            first_seq: pick(self.first_seq, other.first_seq, i64::min),
            last_seq: pick(self.last_seq, other.last_seq, i64::max),
        }
    }
}

/// One summary of the DAG with its links.
#[derive(Clone, Debug, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct DagNode {
    #[serde(flatten)]
    pub record: SummaryRecord,
    /// Condensed: its inputs, in order (empty for a leaf).
    pub inputs: Vec<String>,
    /// The condensed node that took it as an input; null for a root.
    pub consumed_by: Option<String>,
    /// It is itself one of the conversation's live context items.
    pub live: bool,
    pub messages: MessageSpan,
}

/// Every summary of `conversation_id`, deepest first, then oldest first within a depth: the
/// order the DAG's roots are shown in.
pub(crate) fn read<'a>(db: impl Into<Db<'a>>, conversation_id: i64) -> Result<Vec<DagNode>> {
    let db = db.into();
    let records = summaries::list(db, conversation_id, summaries::Listing::default())?;
    let mut inputs: HashMap<String, Vec<String>> = HashMap::new();
    let mut consumed_by: HashMap<String, String> = HashMap::new();
    let edges = db.query_map(
        "SELECT p.summary_id, p.parent_summary_id FROM summary_parents p
         JOIN summaries s ON s.summary_id = p.summary_id
         WHERE s.conversation_id = ?1 ORDER BY p.summary_id, p.ordinal",
        params![conversation_id],
        |r| Ok((r.get::<String>(0)?, r.get::<String>(1)?)),
    )?;
    for (node, input) in edges {
        consumed_by.insert(input.clone(), node.clone());
        inputs.entry(node).or_default().push(input);
    }
    let mut spans: HashMap<String, MessageSpan> = db
        .query_map(
            "SELECT sm.summary_id, count(*), min(m.seq), max(m.seq) FROM summary_messages sm
             JOIN summaries s ON s.summary_id = sm.summary_id
             JOIN messages m ON m.message_id = sm.message_id
             WHERE s.conversation_id = ?1 GROUP BY sm.summary_id",
            params![conversation_id],
            |r| {
                Ok((
                    r.get::<String>(0)?,
                    MessageSpan {
                        count: r.get(1)?,
                        first_seq: r.get(2)?,
                        last_seq: r.get(3)?,
                    },
                ))
            },
        )?
        .into_iter()
        .collect();
    let live: std::collections::HashSet<String> = db
        .query_map(
            "SELECT summary_id FROM context_items WHERE conversation_id = ?1 AND item_type = 'summary'",
            params![conversation_id],
            |r| r.get(0),
        )?
        .into_iter()
        .collect();
    // A condensed node's span is its inputs' together: shallower nodes first.
    let mut order: Vec<usize> = (0..records.len()).collect();
    order.sort_by_key(|&i| records[i].fields.depth);
    for i in order {
        let id = &records[i].fields.summary_id;
        if let Some(ins) = inputs.get(id) {
            let joined = ins
                .iter()
                .filter_map(|input| spans.get(input).copied())
                .fold(spans.get(id).copied().unwrap_or_default(), MessageSpan::join);
            spans.insert(id.clone(), joined);
        }
    }
    let mut nodes: Vec<DagNode> = records
        .into_iter()
        .map(|record| {
            let id = record.fields.summary_id.clone();
            DagNode {
                inputs: inputs.remove(&id).unwrap_or_default(),
                consumed_by: consumed_by.remove(&id),
                live: live.contains(&id),
                messages: spans.get(&id).copied().unwrap_or_default(),
                record,
            }
        })
        .collect();
    nodes.sort_by(|a, b| {
        b.record.fields.depth.cmp(&a.record.fields.depth).then_with(|| {
            let key = |n: &DagNode| (n.messages.first_seq.unwrap_or(i64::MAX), n.record.created_at.clone());
            key(a).cmp(&key(b))
        })
    });
    Ok(nodes)
}

/// Whether `summary_id` is a live context item.
pub(crate) fn is_live<'a>(db: impl Into<Db<'a>>, summary_id: &str) -> Result<bool> {
    Ok(db
        .into()
        .query_row(
            "SELECT 1 FROM context_items WHERE summary_id = ?1 LIMIT 1",
            params![summary_id],
            |_| Ok(()),
        )?
        .is_some())
}

/// A summary's kind and depth, if it exists.
pub(crate) fn kind_and_depth<'a>(db: impl Into<Db<'a>>, summary_id: &str) -> Result<Option<(String, i64)>> {
    db.into().query_row(
        "SELECT kind, depth FROM summaries WHERE summary_id = ?1",
        params![summary_id],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
}

/// The condensed node that took `summary_id` as an input, if any (the first, in a damaged file
/// that links it twice).
pub(crate) fn consumer_of<'a>(db: impl Into<Db<'a>>, summary_id: &str) -> Result<Option<String>> {
    db.into().query_row(
        "SELECT summary_id FROM summary_parents WHERE parent_summary_id = ?1 ORDER BY rowid LIMIT 1",
        params![summary_id],
        |r| r.get(0),
    )
}

/// The leaf that covers each of `message_ids` that one covers (its first, should a damaged
/// file hold two), in one query.
pub(crate) fn leaves_of<'a>(
    db: impl Into<Db<'a>>,
    message_ids: &[i64],
) -> Result<std::collections::HashMap<i64, String>> {
    let mut out = std::collections::HashMap::new();
    if message_ids.is_empty() {
        return Ok(out);
    }
    let db = db.into();
    let rows: Vec<(i64, String)> = db.query_map(
        &format!(
            "SELECT message_id, summary_id FROM summary_messages
             WHERE message_id {} ORDER BY rowid",
            db.in_ids("?1")
        ),
        params![serde_json::to_string(message_ids)?],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    for (message_id, summary_id) in rows {
        out.entry(message_id).or_insert(summary_id);
    }
    Ok(out)
}

/// Which of `message_ids` are live context items (one scan of the live items of the
/// conversations involved).
pub(crate) fn live_messages_among<'a>(
    db: impl Into<Db<'a>>,
    message_ids: &[i64],
) -> Result<std::collections::HashSet<i64>> {
    if message_ids.is_empty() {
        return Ok(Default::default());
    }
    let db = db.into();
    let ids = match db {
        Db::Sqlite(_) => "SELECT value FROM json_each(?1)",
        Db::Pg(_) => "SELECT CAST(value AS BIGINT) FROM json_array_elements_text(CAST(CAST(?1 AS TEXT) AS json))",
    };
    let live = db.query_map(
        &format!(
            "SELECT ci.message_id FROM context_items ci
             WHERE ci.conversation_id IN (SELECT DISTINCT m.conversation_id FROM messages m
                                          WHERE m.message_id IN ({ids}))
               AND ci.message_id IN ({ids})"
        ),
        params![serde_json::to_string(message_ids)?],
        |r| r.get(0),
    )?;
    Ok(live.into_iter().collect())
}

/// The messages under a summary (its own, and those of every summary below it): how many,
/// and the first and the last by `seq`.
pub(crate) fn covered_span<'a>(db: impl Into<Db<'a>>, summary_id: &str) -> Result<(i64, Option<i64>, Option<i64>)> {
    db.into().query_one(
        "WITH RECURSIVE below(id, steps) AS (
           SELECT CAST(?1 AS TEXT), 0
           UNION
           SELECT p.parent_summary_id, b.steps + 1 FROM summary_parents p JOIN below b ON p.summary_id = b.id
           WHERE b.steps < 64
         ),
         -- From the summaries below to their messages, never the other way: without the IN,
         -- SQLite's planner read every message of the file and probed each (80 ms for a leaf
         -- at 100,000 messages, 1 ms with it).
         covered AS (
           SELECT DISTINCT m.message_id, m.seq FROM summary_messages sm
           JOIN messages m ON m.message_id = sm.message_id
           WHERE sm.summary_id IN (SELECT id FROM below)
         )
         SELECT (SELECT count(*) FROM covered),
                (SELECT message_id FROM covered ORDER BY seq LIMIT 1),
                (SELECT message_id FROM covered ORDER BY seq DESC LIMIT 1)",
        params![summary_id],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
    )
}

#[cfg(test)]
mod tests {
    use rusqlite::params;
    use serde_json::json;

    use crate::store::conversations::Target;
    use crate::test_support::{compact_offline, engine_with};
    use crate::test_support::{transcript, THEME};

    /// On the theme transcript compacted to depth 2: links agree both ways, a condensed node's
    /// span is its inputs' together, the live nodes are the context's, roots come first.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_dag_agrees_with_the_lineage_tables() {
        let dir = tempfile::tempdir().unwrap();
        let engine = engine_with(
            &dir,
            json!({"leafChunkTokens": 1200, "leafTargetTokens": 200, "freshTailCount": 16,
                   "leafMinFanout": 2, "condensedMinFanout": 2}),
        );
        let cid = engine
            .ingest(&Target::Session("t".into()), &transcript(THEME))
            .unwrap()
            .conversation_id;
        compact_offline(&engine, cid, 3000).await;
        let dag = engine.dag(cid).unwrap();
        assert!(dag[0].record.fields.depth >= 2, "deepest first");
        assert!(dag
            .windows(2)
            .all(|w| w[0].record.fields.depth >= w[1].record.fields.depth));
        let by_id: std::collections::HashMap<&str, &super::DagNode> =
            dag.iter().map(|n| (n.record.fields.summary_id.as_str(), n)).collect();
        for n in &dag {
            let id = n.record.fields.summary_id.as_str();
            for input in &n.inputs {
                assert_eq!(by_id[input.as_str()].consumed_by.as_deref(), Some(id));
            }
            if n.inputs.is_empty() {
                assert_eq!(n.record.fields.depth, 0);
                assert!(n.messages.count > 0 && n.messages.first_seq <= n.messages.last_seq);
            } else {
                let count: i64 = n.inputs.iter().map(|i| by_id[i.as_str()].messages.count).sum();
                let first = n
                    .inputs
                    .iter()
                    .filter_map(|i| by_id[i.as_str()].messages.first_seq)
                    .min();
                assert_eq!((n.messages.count, n.messages.first_seq), (count, first));
            }
        }
        let live: Vec<String> = engine
            .context(cid)
            .unwrap()
            .into_iter()
            .filter_map(|e| e.summary_id)
            .collect();
        let mut marked: Vec<String> = dag
            .iter()
            .filter(|n| n.live)
            .map(|n| n.record.fields.summary_id.clone())
            .collect();
        let mut live_sorted = live.clone();
        live_sorted.sort();
        marked.sort();
        assert_eq!(marked, live_sorted);
        assert!(dag.iter().filter(|n| n.live).all(|n| n.consumed_by.is_none()));
        assert_eq!(engine.dag(987).unwrap_err().code(), "E_NOT_FOUND");
        // The conversation list counts the same summaries per depth.
        let info = engine.conversations().unwrap().remove(0);
        let mut by_depth = vec![0i64; info.summaries_by_depth.len()];
        for n in &dag {
            by_depth[n.record.fields.depth as usize] += 1;
        }
        assert_eq!(info.summaries_by_depth, by_depth);
        assert_eq!(info.summary_count, dag.len() as i64);
        assert_eq!(info.session_key.as_deref(), None, "a session id target records no key");
        assert!(info.message_tokens > 0);
    }

    /// A hand-made DAG (two leaves, one condensed node over them, one leaf a fallback) reads
    /// the same on SQLite and on PostgreSQL: lists, lineage, spans, liveness.
    #[test]
    fn the_dag_reads_alike_on_both_engines() {
        use super::*;
        use crate::store::summaries;
        crate::test_support::on_both_engines("dag", |db, _, engine| {
            crate::test_support::seed_conversation(db, 5);
            for (id, kind, depth, content) in [
                ("sum_b", "leaf", 0, "b text\n[Truncated from 12 tokens]"),
                ("sum_a", "leaf", 0, "a text"),
                ("sum_c", "condensed", 1, "c text"),
            ] {
                db.execute(
                    "INSERT INTO summaries (summary_id, conversation_id, kind, depth, content, token_count) VALUES (?1, 1, ?2, ?3, ?4, 5)",
                    params![id, kind, depth, content.replace("\\n", "\n")],
                )
                .unwrap();
            }
            for (sid, mid, ord) in [("sum_a", 1, 0), ("sum_a", 2, 1), ("sum_b", 3, 0), ("sum_b", 4, 1)] {
                db.execute(
                    "INSERT INTO summary_messages (summary_id, message_id, ordinal) VALUES (?1, ?2, ?3)",
                    params![sid, mid, ord],
                )
                .unwrap();
            }
            for (parent, ord) in [("sum_a", 0), ("sum_b", 1)] {
                db.execute(
                    "INSERT INTO summary_parents (summary_id, parent_summary_id, ordinal) VALUES ('sum_c', ?1, ?2)",
                    params![parent, ord],
                )
                .unwrap();
            }
            db.execute(
                "INSERT INTO context_items (conversation_id, ordinal, item_type, summary_id) VALUES (1, 0, 'summary', 'sum_c')",
                params![],
            )
            .unwrap();
            db.execute(
                "INSERT INTO context_items (conversation_id, ordinal, item_type, message_id) VALUES (1, 1, 'message', 5)",
                params![],
            )
            .unwrap();

            // Creation order (sum_b was written first), the fallback recognised, a depth filter.
            let listed = summaries::list(db, 1, summaries::Listing::default()).unwrap();
            let ids: Vec<&str> = listed.iter().map(|s| s.fields.summary_id.as_str()).collect();
            assert_eq!(ids, ["sum_b", "sum_a", "sum_c"], "{engine}");
            assert_eq!(
                listed.iter().map(|s| s.fallback).collect::<Vec<_>>(),
                [true, false, false],
                "{engine}"
            );
            assert_eq!(
                summaries::list(db, 1, summaries::Listing::at_depth(1)).unwrap().len(),
                1,
                "{engine}"
            );
            assert!(summaries::get(db, "sum_b").unwrap().fallback, "{engine}");
            assert_eq!(
                summaries::get(db, "nope").unwrap_err().code(),
                "E_NOT_FOUND",
                "{engine}"
            );

            let dag = read(db, 1).unwrap();
            assert_eq!(dag[0].record.fields.summary_id, "sum_c", "{engine}: deepest first");
            assert_eq!(dag[0].inputs, ["sum_a", "sum_b"], "{engine}");
            assert!(dag[0].live, "{engine}");
            assert_eq!(
                dag[0].messages,
                MessageSpan {
                    count: 4,
                    first_seq: Some(0),
                    last_seq: Some(3)
                },
                "{engine}"
            );
            assert_eq!(dag[1].record.fields.summary_id, "sum_a", "{engine}: by first seq");
            assert_eq!(dag[1].consumed_by.as_deref(), Some("sum_c"), "{engine}");
            assert!(
                is_live(db, "sum_c").unwrap() && !is_live(db, "sum_a").unwrap(),
                "{engine}"
            );
            assert_eq!(
                kind_and_depth(db, "sum_c").unwrap(),
                Some(("condensed".into(), 1)),
                "{engine}"
            );
            assert_eq!(kind_and_depth(db, "nope").unwrap(), None, "{engine}");
            assert_eq!(consumer_of(db, "sum_b").unwrap().as_deref(), Some("sum_c"), "{engine}");
            let leaves = leaves_of(db, &[3, 5]).unwrap();
            assert_eq!(leaves.get(&3).map(String::as_str), Some("sum_b"), "{engine}");
            assert!(!leaves.contains_key(&5), "{engine}");
            let live = live_messages_among(db, &[1, 5]).unwrap();
            assert_eq!(live.into_iter().collect::<Vec<_>>(), [5], "{engine}");
            assert_eq!(covered_span(db, "sum_c").unwrap(), (4, Some(1), Some(4)), "{engine}");
        });
    }
}
