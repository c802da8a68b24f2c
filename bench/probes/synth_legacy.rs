//! Writes a large legacy-era (pre-depth) lossless-claw database for the migration benchmark:
//! `cargo run --release --example synth_legacy -- <path> <messages> [chars-per-message]`.
//!
//! The schema is the one the oldest plugin wrote (no depth/time-range columns, no
//! `bootstrapped_at`, no migration state) and, as the worst case, no full-text tables, so
//! the migration must backfill every summary and index every message.

use rusqlite::{params, Connection};

fn main() -> rusqlite::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let path = args.get(1).expect("usage: synth_legacy <path> <messages> [chars]");
    let n: i64 = args.get(2).and_then(|s| s.parse().ok()).expect("message count");
    let chars: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(300);
    let _ = std::fs::remove_file(path);
    let mut conn = Connection::open(path)?;
    conn.execute_batch(
        "PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF;
         CREATE TABLE conversations (
           conversation_id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL, title TEXT,
           created_at TEXT NOT NULL DEFAULT (datetime('now')), updated_at TEXT NOT NULL DEFAULT (datetime('now')));
         CREATE TABLE messages (
           message_id INTEGER PRIMARY KEY AUTOINCREMENT,
           conversation_id INTEGER NOT NULL REFERENCES conversations(conversation_id) ON DELETE CASCADE,
           seq INTEGER NOT NULL, role TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant', 'tool')),
           content TEXT NOT NULL, token_count INTEGER NOT NULL,
           created_at TEXT NOT NULL DEFAULT (datetime('now')), UNIQUE (conversation_id, seq));
         CREATE TABLE summaries (
           summary_id TEXT PRIMARY KEY,
           conversation_id INTEGER NOT NULL REFERENCES conversations(conversation_id) ON DELETE CASCADE,
           kind TEXT NOT NULL CHECK (kind IN ('leaf', 'condensed')), content TEXT NOT NULL,
           token_count INTEGER NOT NULL, created_at TEXT NOT NULL DEFAULT (datetime('now')),
           file_ids TEXT NOT NULL DEFAULT '[]');
         CREATE TABLE summary_messages (
           summary_id TEXT NOT NULL REFERENCES summaries(summary_id) ON DELETE CASCADE,
           message_id INTEGER NOT NULL REFERENCES messages(message_id) ON DELETE RESTRICT,
           ordinal INTEGER NOT NULL, PRIMARY KEY (summary_id, message_id));
         CREATE TABLE summary_parents (
           summary_id TEXT NOT NULL REFERENCES summaries(summary_id) ON DELETE CASCADE,
           parent_summary_id TEXT NOT NULL REFERENCES summaries(summary_id) ON DELETE RESTRICT,
           ordinal INTEGER NOT NULL, PRIMARY KEY (summary_id, parent_summary_id));
         CREATE INDEX messages_conv_seq_idx ON messages (conversation_id, seq);",
    )?;
    let tx = conn.transaction()?;
    let body: String = "lorem ipsum dolor sit amet consectetur adipiscing elit "
        .chars()
        .cycle()
        .take(chars)
        .collect();
    let per_conversation = 100_000i64;
    let mut leaf_no = 0i64;
    {
        let mut conv = tx.prepare("INSERT INTO conversations (session_id) VALUES (?1)")?;
        let mut msg = tx.prepare(
            "INSERT INTO messages (conversation_id, seq, role, content, token_count, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        )?;
        let mut sum = tx.prepare(
            "INSERT INTO summaries (summary_id, conversation_id, kind, content, token_count, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        )?;
        let mut link =
            tx.prepare("INSERT INTO summary_messages (summary_id, message_id, ordinal) VALUES (?1, ?2, ?3)")?;
        let mut parent =
            tx.prepare("INSERT INTO summary_parents (summary_id, parent_summary_id, ordinal) VALUES (?1, ?2, ?3)")?;
        let mut written = 0i64;
        let mut conversation = 0i64;
        while written < n {
            conv.execute([format!("session-{conversation}")])?;
            let cid = tx.last_insert_rowid();
            conversation += 1;
            let count = per_conversation.min(n - written);
            // Leaves over 25 messages each, outside a 32-message tail; d1 over 8 leaves,
            // d2 and d3 over 4 nodes each.
            let mut level: Vec<String> = Vec::new();
            let mut pending: Vec<i64> = Vec::new();
            for seq in 1..=count {
                let secs = written + seq;
                let ts = format!(
                    "2026-01-{:02} {:02}:{:02}:{:02}",
                    1 + (secs / 86_400) % 28,
                    (secs / 3600) % 24,
                    (secs / 60) % 60,
                    secs % 60
                );
                let role = ["user", "assistant", "tool", "assistant"][(seq % 4) as usize];
                msg.execute(params![cid, seq, role, body, chars.div_ceil(4) as i64, ts])?;
                pending.push(tx.last_insert_rowid());
                if pending.len() == 25 && seq <= count - 32 {
                    let id = format!("sum_leaf_{leaf_no:012}");
                    leaf_no += 1;
                    sum.execute(params![id, cid, "leaf", "leaf summary", 40, ts])?;
                    for (i, m) in pending.drain(..).enumerate() {
                        link.execute(params![id, m, i as i64])?;
                    }
                    level.push(id);
                }
            }
            for (fanout, depth) in [(8usize, 1), (4, 2), (4, 3)] {
                let mut next = Vec::new();
                for (k, group) in level.chunks(fanout).enumerate() {
                    if group.len() < fanout {
                        break;
                    }
                    let id = format!("sum_c{depth}_{cid}_{k:08}");
                    sum.execute(params![
                        id,
                        cid,
                        "condensed",
                        "condensed summary",
                        60,
                        "2026-02-01 00:00:00"
                    ])?;
                    for (i, p) in group.iter().enumerate() {
                        parent.execute(params![id, p, i as i64])?;
                    }
                    next.push(id);
                }
                level = next;
            }
            written += count;
        }
    }
    tx.commit()?;
    let (m, s): (i64, i64) = conn.query_row(
        "SELECT (SELECT count(*) FROM messages), (SELECT count(*) FROM summaries)",
        [],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    println!("{path}: {m} messages, {s} summaries");
    Ok(())
}
