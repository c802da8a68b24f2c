//! describe and expand: where a summary sits and what it covers, walking down within a budget,
//! and seed-era compaction events.

use super::*;
use crate::api::{Description, Entry, ExpandOptions, GrepOptions};

/// A condensed summary of conversation 1 that is live, and one of its inputs.
fn condensed_and_input(engine: &Engine) -> (String, String) {
    let c = conn(engine);
    let node: String = c
        .query_row(
            "SELECT s.summary_id FROM summaries s JOIN context_items ci ON ci.summary_id = s.summary_id
             WHERE s.conversation_id = 1 AND s.depth = 1 ORDER BY ci.ordinal LIMIT 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let input: String = c
        .query_row(
            "SELECT parent_summary_id FROM summary_parents WHERE summary_id = ?1 ORDER BY ordinal LIMIT 1",
            [&node],
            |r| r.get(0),
        )
        .unwrap();
    (node, input)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_tells_what_a_summary_covers_and_where_it_sits() {
    let (_d, engine) = compacted().await;
    let (node, input) = condensed_and_input(&engine);
    let Description::Summary(d) = engine.describe(&ItemId::Summary(node.clone())).unwrap() else {
        panic!()
    };
    assert_eq!(d.summary.fields.depth, 1);
    assert!(d.live && d.live_summary.is_none() && d.consumed_by.is_none() && d.chain.is_empty());
    assert_eq!(d.inputs.len() as i64, d.summary.fields.descendant_count);
    assert_eq!(d.inputs[0].summary_id, input);
    assert!(d.range.ends_with("UTC"), "{}", d.range);
    // The covered messages are the inputs' messages, first to last.
    let c = conn(&engine);
    let ids: Vec<i64> = d
        .inputs
        .iter()
        .flat_map(|i| {
            c.prepare("SELECT message_id FROM summary_messages WHERE summary_id = ?1 ORDER BY ordinal")
                .unwrap()
                .query_map([&i.summary_id], |r| r.get(0))
                .unwrap()
                .map(|r| r.unwrap())
                .collect::<Vec<i64>>()
        })
        .collect();
    assert_eq!(d.covered_messages.count, ids.len() as i64);
    assert_eq!(d.covered_messages.first_message_id, ids.first().copied());
    assert_eq!(d.covered_messages.last_message_id, ids.last().copied());

    let Description::Summary(leaf) = engine.describe(&ItemId::Summary(input.clone())).unwrap() else {
        panic!()
    };
    assert!(!leaf.live && leaf.inputs.is_empty());
    assert_eq!(leaf.consumed_by.as_deref(), Some(node.as_str()));
    assert_eq!(leaf.live_summary.as_deref(), Some(node.as_str()));
    assert_eq!(leaf.chain.len(), 1);
    assert_eq!(leaf.covered_messages.first_message_id, ids.first().copied());

    // A message under that leaf: its parts and the chain leaf → node.
    let Description::Message(m) = engine.describe(&ItemId::Message(ids[0])).unwrap() else {
        panic!()
    };
    assert!(!m.live && m.conversation_id == 1);
    let chain: Vec<&str> = m.chain.iter().map(|l| l.summary_id.as_str()).collect();
    assert_eq!(chain, [input.as_str(), node.as_str()]);
    assert!(!m.parts.is_empty());
    // The newest message is live: no chain.
    let newest: i64 = c
        .query_row(
            "SELECT max(message_id) FROM messages WHERE conversation_id = 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let Description::Message(live) = engine.describe(&ItemId::Message(newest)).unwrap() else {
        panic!()
    };
    assert!(live.live && live.chain.is_empty() && live.live_summary.is_none());
    assert_eq!(serde_json::to_value(&*live).unwrap()["messageId"], json!(newest));

    for missing in [ItemId::Summary("sum_nope".into()), ItemId::Message(9_999_999)] {
        assert_eq!(engine.describe(&missing).unwrap_err().code(), "E_NOT_FOUND");
    }
    assert_eq!(ItemId::from_json(&json!("42")).unwrap(), ItemId::Message(42));
    assert_eq!(ItemId::from_json(&json!(-1)).unwrap_err().code(), "E_INVALID_INPUT");
    assert_eq!(ItemId::from_json(&json!({})).unwrap_err().code(), "E_INVALID_INPUT");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expand_walks_down_breadth_first_within_the_budget() {
    let (_d, engine) = compacted().await;
    let (node, _) = condensed_and_input(&engine);
    let all = engine
        .expand(
            &node,
            &ExpandOptions {
                token_budget: 10_000_000,
                max_depth: None,
            },
        )
        .unwrap();
    assert!(!all.truncated);
    let Description::Summary(d) = engine.describe(&ItemId::Summary(node.clone())).unwrap() else {
        panic!()
    };
    let levels: Vec<i64> = all
        .entries
        .iter()
        .map(|e| match e {
            Entry::Summary { level, .. } | Entry::Message { level, .. } => *level,
        })
        .collect();
    assert!(levels.windows(2).all(|w| w[0] <= w[1]), "not breadth first: {levels:?}");
    let inputs: Vec<&str> = all
        .entries
        .iter()
        .filter_map(|e| match e {
            Entry::Summary {
                summary_id, level: 1, ..
            } => Some(summary_id.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        inputs,
        d.inputs.iter().map(|i| i.summary_id.as_str()).collect::<Vec<_>>()
    );
    let messages: Vec<i64> = all
        .entries
        .iter()
        .filter_map(|e| match e {
            Entry::Message { message_id, .. } => Some(*message_id),
            _ => None,
        })
        .collect();
    assert_eq!(messages.len() as i64, d.covered_messages.count);
    assert_eq!(messages.first().copied(), d.covered_messages.first_message_id);
    // Messages come back as assemble presents them.
    let stored = engine.messages(1, 0, 100_000).unwrap();
    for e in &all.entries {
        if let Entry::Message {
            message_id, message, ..
        } = e
        {
            let s = stored.iter().find(|s| s.message_id == *message_id).unwrap();
            if s.role != "user" {
                assert_eq!(message["content"], s.content, "message {message_id}");
            }
            assert!(["user", "assistant", "toolResult"].contains(&message["role"].as_str().unwrap()));
        }
    }
    // A small budget: a prefix of the same walk, within the budget, marked truncated.
    let small = engine
        .expand(
            &node,
            &ExpandOptions {
                token_budget: 500,
                max_depth: None,
            },
        )
        .unwrap();
    assert!(small.truncated && small.estimated_tokens <= 500);
    assert_eq!(
        serde_json::to_value(&small.entries).unwrap(),
        serde_json::to_value(&all.entries[..small.entries.len()]).unwrap()
    );
    // maxDepth 1: only the inputs.
    let top = engine
        .expand(
            &node,
            &ExpandOptions {
                token_budget: 10_000_000,
                max_depth: Some(1),
            },
        )
        .unwrap();
    assert_eq!(top.entries.len(), d.inputs.len());
    // Never up: expanding an input does not reach its consumer.
    let (_, input) = condensed_and_input(&engine);
    let down = engine
        .expand(
            &input,
            &ExpandOptions {
                token_budget: 10_000_000,
                max_depth: None,
            },
        )
        .unwrap();
    assert!(down.entries.iter().all(|e| matches!(e, Entry::Message { .. })));
    assert_eq!(
        engine.expand("sum_nope", &ExpandOptions::default()).unwrap_err().code(),
        "E_NOT_FOUND"
    );
    assert_eq!(
        crate::input::decode::<ExpandOptions>(json!({"tokenBudget": 0}), "options")
            .unwrap_err()
            .code(),
        "E_INVALID_INPUT"
    );
    assert_eq!(
        crate::input::decode::<ExpandOptions>(json!({"depth": 2}), "options")
            .unwrap_err()
            .code(),
        "E_INVALID_INPUT"
    );
}

#[test]
fn seed_era_compaction_events_are_neither_live_nor_covered() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seed.db");
    std::fs::copy(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/seed-theme.db"),
        &path,
    )
    .unwrap();
    let mut perms = std::fs::metadata(&path).unwrap().permissions();
    #[allow(clippy::permissions_set_readonly_false)]
    perms.set_readonly(false);
    std::fs::set_permissions(&path, perms).unwrap();
    let config = crate::config::Config::from_options(&json!({"dbPath": path.to_str().unwrap()}), None).unwrap();
    let engine = Engine::open(config).unwrap();
    let r = engine
        .grep(
            Some(1),
            &GrepOptions {
                scope: Scope::Messages,
                ..opts("\"LCM compaction leaf pass\"")
            },
        )
        .unwrap();
    assert!(!r.hits.is_empty());
    for h in &r.hits {
        assert!(!h.live && h.covered_by.is_none(), "{h:?}");
    }
    let Description::Message(d) = engine
        .describe(&ItemId::Message(r.hits[0].message_id.unwrap()))
        .unwrap()
    else {
        panic!()
    };
    assert!(!d.live && d.chain.is_empty());
    // A covered message of the same database still has its chain.
    let covered = engine
        .grep(
            Some(1),
            &GrepOptions {
                scope: Scope::Messages,
                ..opts("renderer")
            },
        )
        .unwrap();
    assert!(covered.hits.iter().any(|h| h.covered_by.is_some()));
}
