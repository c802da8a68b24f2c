//! The schema lcm-native writes: lossless-claw's seed schema plus the additive columns and
//! tables of the current plugin that the core uses. Column types, CHECK constraints and
//! defaults match the plugin's byte for byte, so either implementation can open the other's
//! database. Columns are always addressed by name: upgraded databases have a different
//! physical column order than fresh ones.

/// Version of lcm-native's own schema, recorded as `lcmNativeSchema` in `lcm_migration_state`.
/// A database that records a higher version was written by a newer lcm-native and is refused.
pub(crate) const NATIVE_SCHEMA_VERSION: i64 = 1;
pub(crate) const NATIVE_SCHEMA_STEP: &str = "lcmNativeSchema";

/// lcm-native's tables that other modules name (the store's readers check they exist).
pub(crate) const FIDELITY_TABLE: &str = "lcm_native_summary_fidelity";
pub(crate) const VERSIONS_TABLE: &str = "lcm_native_summary_versions";
pub(crate) const PROMPT_CACHE_TABLE: &str = "lcm_native_prompt_cache";
pub(crate) const RECALLS_TABLE: &str = "lcm_native_recalls";
pub(crate) const SUMMARY_CONTEXT_TABLE: &str = "lcm_native_summary_context";
pub(crate) const REDACTION_PENDING_TABLE: &str = "lcm_native_redaction_pending";
pub(crate) const TURN_POSITIONS_TABLE: &str = "lcm_native_turn_positions";
pub(crate) const MESSAGE_KINDS_TABLE: &str = "lcm_native_message_kinds";
/// lossless-claw 1.x's trust in each stored transcript entry id.
pub(crate) const TRUST_TABLE: &str = "message_transcript_anchor_trust";
/// The text columns of `message_parts` that can hold what a user or a tool wrote (what a
/// redaction edits).
pub(crate) const PART_TEXT_COLUMNS: &[&str] = &[
    "text_content",
    "tool_input",
    "tool_output",
    "tool_error",
    "tool_title",
    "metadata",
    "subtask_prompt",
    "subtask_desc",
    "file_url",
    "patch_files",
];

/// Every column that holds what a user or a tool wrote, or a summary of it, by table: what a
/// redaction must reach, and what PostgreSQL must not copy into its planner statistics
/// (`pg::search::install`).
pub(crate) const TEXT_COLUMNS: &[(&str, &[&str])] = &[
    ("messages", &["content"]),
    ("message_parts", PART_TEXT_COLUMNS),
    ("summaries", &["content"]),
    ("lcm_native_summary_versions", &["content"]),
];

/// Where `lcm-native copy` keeps its progress in the target until the copy is complete; a
/// file that has it is an unfinished copy, which lcm-native refuses to open.
pub(crate) const COPY_STATE_TABLE: &str = "lcm_native_copy";

/// Tables and their `CREATE` statements, in creation order (parents before children).
pub(crate) const TABLES: &[(&str, &str)] = &[
    (
        "conversations",
        "CREATE TABLE IF NOT EXISTS conversations (
      conversation_id INTEGER PRIMARY KEY AUTOINCREMENT,
      session_id TEXT NOT NULL,
      session_key TEXT,
      active INTEGER NOT NULL DEFAULT 1,
      archived_at TEXT,
      archive_cause TEXT,
      title TEXT,
      bootstrapped_at TEXT,
      created_at TEXT NOT NULL DEFAULT (datetime('now')),
      updated_at TEXT NOT NULL DEFAULT (datetime('now'))
    )",
    ),
    (
        "messages",
        "CREATE TABLE IF NOT EXISTS messages (
      message_id INTEGER PRIMARY KEY AUTOINCREMENT,
      conversation_id INTEGER NOT NULL REFERENCES conversations(conversation_id) ON DELETE CASCADE,
      seq INTEGER NOT NULL,
      role TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant', 'tool')),
      content TEXT NOT NULL,
      token_count INTEGER NOT NULL,
      identity_hash TEXT,
      transcript_entry_id TEXT,
      stable_event_key TEXT,
      created_at TEXT NOT NULL DEFAULT (datetime('now')),
      UNIQUE (conversation_id, seq)
    )",
    ),
    (
        "summaries",
        "CREATE TABLE IF NOT EXISTS summaries (
      summary_id TEXT PRIMARY KEY,
      conversation_id INTEGER NOT NULL REFERENCES conversations(conversation_id) ON DELETE CASCADE,
      kind TEXT NOT NULL CHECK (kind IN ('leaf', 'condensed')),
      depth INTEGER NOT NULL DEFAULT 0,
      content TEXT NOT NULL,
      token_count INTEGER NOT NULL,
      earliest_at TEXT,
      latest_at TEXT,
      descendant_count INTEGER NOT NULL DEFAULT 0,
      descendant_token_count INTEGER NOT NULL DEFAULT 0,
      source_message_token_count INTEGER NOT NULL DEFAULT 0,
      created_at TEXT NOT NULL DEFAULT (datetime('now')),
      file_ids TEXT NOT NULL DEFAULT '[]',
      model TEXT NOT NULL DEFAULT 'unknown'
    )",
    ),
    (
        "message_parts",
        "CREATE TABLE IF NOT EXISTS message_parts (
      part_id TEXT PRIMARY KEY,
      message_id INTEGER NOT NULL REFERENCES messages(message_id) ON DELETE CASCADE,
      session_id TEXT NOT NULL,
      part_type TEXT NOT NULL CHECK (part_type IN (
        'text', 'reasoning', 'tool', 'patch', 'file',
        'subtask', 'compaction', 'step_start', 'step_finish',
        'snapshot', 'agent', 'retry'
      )),
      ordinal INTEGER NOT NULL,
      text_content TEXT,
      is_ignored INTEGER,
      is_synthetic INTEGER,
      tool_call_id TEXT,
      tool_name TEXT,
      tool_status TEXT,
      tool_input TEXT,
      tool_output TEXT,
      tool_error TEXT,
      tool_title TEXT,
      patch_hash TEXT,
      patch_files TEXT,
      file_mime TEXT,
      file_name TEXT,
      file_url TEXT,
      subtask_prompt TEXT,
      subtask_desc TEXT,
      subtask_agent TEXT,
      step_reason TEXT,
      step_cost REAL,
      step_tokens_in INTEGER,
      step_tokens_out INTEGER,
      snapshot_hash TEXT,
      compaction_auto INTEGER,
      metadata TEXT,
      UNIQUE (message_id, ordinal)
    )",
    ),
    (
        "summary_messages",
        "CREATE TABLE IF NOT EXISTS summary_messages (
      summary_id TEXT NOT NULL REFERENCES summaries(summary_id) ON DELETE CASCADE,
      message_id INTEGER NOT NULL REFERENCES messages(message_id) ON DELETE RESTRICT,
      ordinal INTEGER NOT NULL,
      PRIMARY KEY (summary_id, message_id)
    )",
    ),
    (
        "summary_parents",
        "CREATE TABLE IF NOT EXISTS summary_parents (
      summary_id TEXT NOT NULL REFERENCES summaries(summary_id) ON DELETE CASCADE,
      parent_summary_id TEXT NOT NULL REFERENCES summaries(summary_id) ON DELETE RESTRICT,
      ordinal INTEGER NOT NULL,
      PRIMARY KEY (summary_id, parent_summary_id)
    )",
    ),
    (
        "context_items",
        "CREATE TABLE IF NOT EXISTS context_items (
      conversation_id INTEGER NOT NULL REFERENCES conversations(conversation_id) ON DELETE CASCADE,
      ordinal INTEGER NOT NULL,
      item_type TEXT NOT NULL CHECK (item_type IN ('message', 'summary')),
      message_id INTEGER REFERENCES messages(message_id) ON DELETE RESTRICT,
      summary_id TEXT REFERENCES summaries(summary_id) ON DELETE RESTRICT,
      created_at TEXT NOT NULL DEFAULT (datetime('now')),
      PRIMARY KEY (conversation_id, ordinal),
      CHECK (
        (item_type = 'message' AND message_id IS NOT NULL AND summary_id IS NULL) OR
        (item_type = 'summary' AND summary_id IS NOT NULL AND message_id IS NULL)
      )
    )",
    ),
    (
        "large_files",
        "CREATE TABLE IF NOT EXISTS large_files (
      file_id TEXT PRIMARY KEY,
      conversation_id INTEGER NOT NULL REFERENCES conversations(conversation_id) ON DELETE CASCADE,
      file_name TEXT,
      mime_type TEXT,
      byte_size INTEGER,
      storage_uri TEXT NOT NULL,
      exploration_summary TEXT,
      created_at TEXT NOT NULL DEFAULT (datetime('now'))
    )",
    ),
    (
        // lossless-claw 1.x's (same DDL): host turns committed, by advancement key (global),
        // with the hash of the turn's payload. Either plugin answers `duplicate` for a turn the
        // other committed.
        "turn_advancements",
        "CREATE TABLE IF NOT EXISTS turn_advancements (
      advancement_key TEXT PRIMARY KEY,
      payload_hash TEXT NOT NULL,
      session_id TEXT NOT NULL,
      session_key TEXT,
      admission_entry_id TEXT NOT NULL,
      terminal_entry_id TEXT NOT NULL,
      message_count INTEGER NOT NULL,
      committed_at TEXT NOT NULL DEFAULT (datetime('now'))
    )",
    ),
    (
        // lcm-native's own: the host turns already stored, so that committing a turn twice
        // (a replay after a crash, a retry) stores it once. lossless-claw ignores the table.
        "lcm_native_turns",
        "CREATE TABLE IF NOT EXISTS lcm_native_turns (
      conversation_id INTEGER NOT NULL REFERENCES conversations(conversation_id) ON DELETE CASCADE,
      advancement_key TEXT NOT NULL,
      message_count INTEGER NOT NULL,
      committed_at TEXT NOT NULL DEFAULT (datetime('now')),
      PRIMARY KEY (conversation_id, advancement_key)
    )",
    ),
    (
        // lcm-native's own: where each committed turn began in the host's transcript (the
        // active message position of its first message), so that a turn replayed after later
        // turns were stored is recognised and marked `late` (stored at the end, reported by
        // `verify`), never silently taken for one in order. lossless-claw ignores the table.
        TURN_POSITIONS_TABLE,
        "CREATE TABLE IF NOT EXISTS lcm_native_turn_positions (
      conversation_id INTEGER NOT NULL REFERENCES conversations(conversation_id) ON DELETE CASCADE,
      advancement_key TEXT NOT NULL,
      transcript_position INTEGER NOT NULL,
      late INTEGER NOT NULL DEFAULT 0,
      PRIMARY KEY (conversation_id, advancement_key)
    )",
    ),
    (
        // lossless-claw 1.x's (same DDL): how far each message's `transcript_entry_id` is
        // trusted. Its transcript reconcile ties a stored row to a transcript entry only when
        // the row's id has a `verified` or `repaired` row here, and stores everything after
        // the last tie again; lcm-native writes `verified` for the ids the host gave it.
        TRUST_TABLE,
        "CREATE TABLE IF NOT EXISTS message_transcript_anchor_trust (
      message_id INTEGER PRIMARY KEY REFERENCES messages(message_id) ON DELETE CASCADE,
      conversation_id INTEGER NOT NULL REFERENCES conversations(conversation_id) ON DELETE CASCADE,
      transcript_entry_id TEXT,
      trust_state TEXT NOT NULL CHECK (trust_state IN (
        'verified', 'repaired', 'suspect', 'legacy_prefix', 'unproven'
      )),
      source TEXT NOT NULL,
      reason TEXT,
      verified_at TEXT,
      created_at TEXT NOT NULL DEFAULT (datetime('now')),
      updated_at TEXT NOT NULL DEFAULT (datetime('now'))
    )",
    ),
    (
        // lcm-native's own: what a provider's prompt cache could reuse of each conversation's
        // assemblies (`store::prompt_cache`): how many, their tokens, how many of those began
        // the assembly before them (its prefix), the breaks and the compactions, and the last
        // assembly's outline to compare the next one with. lossless-claw ignores the table.
        PROMPT_CACHE_TABLE,
        "CREATE TABLE IF NOT EXISTS lcm_native_prompt_cache (
      conversation_id INTEGER PRIMARY KEY REFERENCES conversations(conversation_id) ON DELETE CASCADE,
      assemblies INTEGER NOT NULL DEFAULT 0,
      tokens_sent INTEGER NOT NULL DEFAULT 0,
      tokens_kept INTEGER NOT NULL DEFAULT 0,
      breaks INTEGER NOT NULL DEFAULT 0,
      compactions INTEGER NOT NULL DEFAULT 0,
      last_outline TEXT,
      updated_at TEXT NOT NULL
    )",
    ),
    (
        // lcm-native's own: the `<recalled>` block each turn's context was sent with
        // (`store::recalls`), kept so that later assemblies send it again where it was, right
        // after the message that was the conversation's last then: the provider's prompt cache
        // keeps serving that prefix. Derived text (excerpts of stored messages): a redaction
        // deletes a conversation's rows. lossless-claw ignores the table.
        RECALLS_TABLE,
        "CREATE TABLE IF NOT EXISTS lcm_native_recalls (
      conversation_id INTEGER NOT NULL REFERENCES conversations(conversation_id) ON DELETE CASCADE,
      after_message_id INTEGER NOT NULL REFERENCES messages(message_id) ON DELETE CASCADE,
      query TEXT NOT NULL,
      content TEXT NOT NULL,
      tokens INTEGER NOT NULL,
      places TEXT NOT NULL,
      created_at TEXT NOT NULL,
      PRIMARY KEY (conversation_id, after_message_id)
    )",
    ),
    (
        // lcm-native's own: the kinds of value each message stored by lcm-native holds
        // (`value_kinds`: a person, a date, an address, …, as bits) under the patterns'
        // `version`, written at ingest, so that recall's scan for a value of the kind a
        // question asks for reads only messages that hold one, at any age. Derived from the
        // text (no text of its own); a message without a row (stored by lossless-claw or
        // before the table) is read as before. lossless-claw ignores the table.
        MESSAGE_KINDS_TABLE,
        "CREATE TABLE IF NOT EXISTS lcm_native_message_kinds (
      message_id INTEGER PRIMARY KEY REFERENCES messages(message_id) ON DELETE CASCADE,
      conversation_id INTEGER NOT NULL REFERENCES conversations(conversation_id) ON DELETE CASCADE,
      kinds INTEGER NOT NULL,
      version INTEGER NOT NULL
    )",
    ),
    (
        // lcm-native's own: each `/new` (store::lifecycle) that took a conversation's raw
        // messages and shallow summaries out of its context, up to which message. `verify`
        // reads it: those messages are neither live nor covered on purpose. lossless-claw
        // ignores the table.
        "lcm_native_context_resets",
        "CREATE TABLE IF NOT EXISTS lcm_native_context_resets (
      conversation_id INTEGER NOT NULL REFERENCES conversations(conversation_id) ON DELETE CASCADE,
      reason TEXT NOT NULL,
      through_seq INTEGER NOT NULL,
      retain_depth INTEGER NOT NULL,
      items_removed INTEGER NOT NULL,
      reset_at TEXT NOT NULL
    )",
    ),
    (
        // lcm-native's own: the fidelity score of each summary (see `fidelity`), and whether a
        // summary is marked for repair because it stayed under `minFidelity`. lossless-claw
        // ignores the table; deleting a summary deletes its row.
        FIDELITY_TABLE,
        "CREATE TABLE IF NOT EXISTS lcm_native_summary_fidelity (
      summary_id TEXT PRIMARY KEY REFERENCES summaries(summary_id) ON DELETE CASCADE,
      score REAL,
      salient_score REAL,
      identifiers INTEGER NOT NULL,
      kept INTEGER NOT NULL,
      salient INTEGER NOT NULL,
      salient_kept INTEGER NOT NULL,
      missing_salient TEXT NOT NULL DEFAULT '[]',
      needs_repair INTEGER NOT NULL DEFAULT 0,
      extractor_version INTEGER NOT NULL,
      computed_at TEXT NOT NULL DEFAULT (datetime('now'))
    )",
    ),
    (
        // lcm-native's own: every version of a summary's text, the current one included (the
        // row in `summaries` stays what lossless-claw reads). Compaction writes version 1;
        // rewrite, rollback and redaction add one each; a summary from before the table gets
        // its version 1 from its row when it first changes. Bounded per summary by
        // `maxSummaryVersions`; a redaction purges the versions that held the redacted text.
        VERSIONS_TABLE,
        "CREATE TABLE IF NOT EXISTS lcm_native_summary_versions (
      summary_id TEXT NOT NULL REFERENCES summaries(summary_id) ON DELETE CASCADE,
      version INTEGER NOT NULL,
      content TEXT NOT NULL,
      token_count INTEGER NOT NULL,
      model TEXT NOT NULL,
      template_name TEXT,
      template_sha256 TEXT,
      template_overridden INTEGER NOT NULL DEFAULT 0,
      reason TEXT NOT NULL CHECK (reason IN ('compaction', 'rewrite', 'fallback-repair', 'redaction', 'rollback')),
      created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
      PRIMARY KEY (summary_id, version)
    )",
    ),
    (
        // lcm-native's own: the summaries a summary's prompt showed as its previous context
        // (`<previous_context>`), besides its inputs. Text flows along these too: a redaction
        // regenerates every summary that was shown one it regenerates.
        SUMMARY_CONTEXT_TABLE,
        "CREATE TABLE IF NOT EXISTS lcm_native_summary_context (
      previous_summary_id TEXT NOT NULL REFERENCES summaries(summary_id) ON DELETE CASCADE,
      summary_id TEXT NOT NULL REFERENCES summaries(summary_id) ON DELETE CASCADE,
      PRIMARY KEY (previous_summary_id, summary_id)
    )",
    ),
    (
        // lcm-native's own: what each redaction did (ids and counts, never the text).
        "lcm_native_redactions",
        "CREATE TABLE IF NOT EXISTS lcm_native_redactions (
      redaction_id INTEGER PRIMARY KEY AUTOINCREMENT,
      conversation_ids TEXT NOT NULL,
      message_ids TEXT NOT NULL,
      messages INTEGER NOT NULL,
      parts INTEGER NOT NULL,
      matches INTEGER NOT NULL,
      summaries INTEGER NOT NULL,
      versions_purged INTEGER NOT NULL,
      mark_only INTEGER NOT NULL DEFAULT 0,
      reason TEXT,
      created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
      completed_at TEXT
    )",
    ),
    (
        // lcm-native's own: summaries a redaction replaced with a notice and that still await
        // regeneration (a mark-only redaction, or one that was stopped); the row goes in the
        // transaction that writes the new text.
        REDACTION_PENDING_TABLE,
        "CREATE TABLE IF NOT EXISTS lcm_native_redaction_pending (
      summary_id TEXT PRIMARY KEY REFERENCES summaries(summary_id) ON DELETE CASCADE,
      redaction_id INTEGER NOT NULL REFERENCES lcm_native_redactions(redaction_id),
      next_version INTEGER NOT NULL
    )",
    ),
    (
        // lcm-native's own: redactions whose replaced text may still be in the file's free
        // pages, old full-text segments or the WAL. The row goes in the transaction that
        // replaces the text and leaves when the scrub (VACUUM, WAL emptied) is done, so a scrub
        // cut short (a kill, a full disk) is known to the next open and finished by `redact`
        // with no pattern.
        "lcm_native_scrub_pending",
        "CREATE TABLE IF NOT EXISTS lcm_native_scrub_pending (
      redaction_id INTEGER PRIMARY KEY REFERENCES lcm_native_redactions(redaction_id),
      marked_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
    )",
    ),
    (
        "lcm_migration_state",
        "CREATE TABLE IF NOT EXISTS lcm_migration_state (
      step_name TEXT NOT NULL,
      algorithm_version INTEGER NOT NULL,
      completed_at TEXT NOT NULL DEFAULT (datetime('now')),
      PRIMARY KEY (step_name, algorithm_version)
    )",
    ),
];

/// lcm-native tables a read-only open does without (their readers treat a missing table as
/// empty), so a file migrated by an earlier lcm-native still opens read-only.
pub(crate) const READ_OPTIONAL_TABLES: &[&str] = &[
    "lcm_native_context_resets",
    PROMPT_CACHE_TABLE,
    RECALLS_TABLE,
    SUMMARY_CONTEXT_TABLE,
    FIDELITY_TABLE,
    VERSIONS_TABLE,
    "lcm_native_redactions",
    REDACTION_PENDING_TABLE,
    "lcm_native_scrub_pending",
    TURN_POSITIONS_TABLE,
    TRUST_TABLE,
    MESSAGE_KINDS_TABLE,
];

/// Columns that older eras lack, added with `ALTER TABLE … ADD COLUMN` (same declarations as
/// the plugin uses, so a later plugin start finds them as it expects).
pub(crate) const ADDED_COLUMNS: &[(&str, &str, &str)] = &[
    ("conversations", "bootstrapped_at", "TEXT"),
    ("conversations", "session_key", "TEXT"),
    ("conversations", "active", "INTEGER NOT NULL DEFAULT 1"),
    ("conversations", "archived_at", "TEXT"),
    ("conversations", "archive_cause", "TEXT"),
    ("summaries", "depth", "INTEGER NOT NULL DEFAULT 0"),
    ("summaries", "earliest_at", "TEXT"),
    ("summaries", "latest_at", "TEXT"),
    ("summaries", "descendant_count", "INTEGER NOT NULL DEFAULT 0"),
    ("summaries", "descendant_token_count", "INTEGER NOT NULL DEFAULT 0"),
    ("summaries", "source_message_token_count", "INTEGER NOT NULL DEFAULT 0"),
    ("summaries", "model", "TEXT NOT NULL DEFAULT 'unknown'"),
    ("messages", "transcript_entry_id", "TEXT"),
    // lossless-claw 1.x's message identity: filled on ingest so that it finds lcm-native's rows
    // as its own (dedup of replays, transcript anchoring).
    ("messages", "identity_hash", "TEXT"),
    ("messages", "stable_event_key", "TEXT"),
];

/// The index of `lcm_native_message_kinds` rows holding the kind whose bit is `$bit`, named
/// after it: partial, so a kind few messages hold is found without reading the others.
macro_rules! kind_index {
    ($name:literal, $bit:literal) => {
        (
            concat!("lcm_native_message_kinds_", $name, "_idx"),
            concat!(
                "CREATE INDEX IF NOT EXISTS lcm_native_message_kinds_",
                $name,
                "_idx ON lcm_native_message_kinds (conversation_id, message_id, version) WHERE (kinds & ",
                $bit,
                ") <> 0"
            ),
        )
    };
}

/// Indexes lcm-native needs, by name. The depth index is created after the depth backfill.
///
/// The plugin also creates `messages_conv_seq_idx`, `context_items_conv_idx` and
/// `message_parts_message_idx` (each a prefix of a UNIQUE/PRIMARY KEY index that already
/// exists) and `message_parts_type_idx` (no core query filters on part type). lcm-native does
/// not create them on new files: each would be one more page written per ingest commit.
/// Where the plugin made them they stay, and the plugin recreates them if it opens the file.
pub(crate) const INDEXES: &[(&str, &str)] = &[
    (
        // lossless-claw 1.x's: one message per stable event (a provider response, a tool result).
        "messages_stable_event_key_unique",
        "CREATE UNIQUE INDEX IF NOT EXISTS messages_stable_event_key_unique
         ON messages (conversation_id, stable_event_key) WHERE stable_event_key IS NOT NULL",
    ),
    (
        "turn_advancements_session_idx",
        "CREATE INDEX IF NOT EXISTS turn_advancements_session_idx ON turn_advancements (session_id, committed_at)",
    ),
    (
        // lossless-claw 0.15's: at most one active conversation per session key.
        "conversations_active_session_key_idx",
        "CREATE UNIQUE INDEX IF NOT EXISTS conversations_active_session_key_idx
         ON conversations (session_key)
         WHERE session_key IS NOT NULL AND active = 1",
    ),
    (
        "conversations_session_id_active_created_idx",
        "CREATE INDEX IF NOT EXISTS conversations_session_id_active_created_idx
         ON conversations (session_id, active, created_at)",
    ),
    (
        "conversations_session_key_active_created_idx",
        "CREATE INDEX IF NOT EXISTS conversations_session_key_active_created_idx
         ON conversations (session_key, active, created_at)",
    ),
    (
        "summaries_conv_created_idx",
        "CREATE INDEX IF NOT EXISTS summaries_conv_created_idx ON summaries (conversation_id, created_at)",
    ),
    (
        "large_files_conv_idx",
        "CREATE INDEX IF NOT EXISTS large_files_conv_idx ON large_files (conversation_id, created_at)",
    ),
    (
        // Partial: only summary items. "Is this summary live?" (recall, describe) without
        // scanning the context; messages are live exactly when nothing covers them.
        "context_items_summary_idx",
        "CREATE INDEX IF NOT EXISTS context_items_summary_idx ON context_items (summary_id)
         WHERE summary_id IS NOT NULL",
    ),
    (
        "summary_messages_message_idx",
        "CREATE INDEX IF NOT EXISTS summary_messages_message_idx ON summary_messages (message_id)",
    ),
    (
        "summary_parents_parent_summary_idx",
        "CREATE INDEX IF NOT EXISTS summary_parents_parent_summary_idx ON summary_parents (parent_summary_id)",
    ),
    (
        "summaries_conv_depth_kind_idx",
        "CREATE INDEX IF NOT EXISTS summaries_conv_depth_kind_idx ON summaries (conversation_id, depth, kind)",
    ),
    (
        // A turn replayed late: is any turn of the conversation later in the transcript?
        "lcm_native_turn_positions_position_idx",
        "CREATE INDEX IF NOT EXISTS lcm_native_turn_positions_position_idx
         ON lcm_native_turn_positions (conversation_id, transcript_position)",
    ),
    // Recall's scan for a value of one kind: a conversation's messages holding one, newest
    // first, with nothing else in the index (one per kind; the bits are `value_kinds::Want`'s).
    kind_index!("person", 1),
    kind_index!("date", 2),
    kind_index!("address", 4),
    kind_index!("ticket", 8),
    kind_index!("commit", 16),
    kind_index!("quantity", 32),
    kind_index!("preference", 64),
    kind_index!("decision", 128),
    (
        // lossless-claw 1.x's (same DDL): its trust lookups by conversation and entry id.
        "message_anchor_trust_conv_entry_idx",
        "CREATE INDEX IF NOT EXISTS message_anchor_trust_conv_entry_idx
         ON message_transcript_anchor_trust (conversation_id, transcript_entry_id)
         WHERE transcript_entry_id IS NOT NULL",
    ),
    (
        "messages_conv_entry_unique_idx",
        "CREATE UNIQUE INDEX IF NOT EXISTS messages_conv_entry_unique_idx
         ON messages (conversation_id, transcript_entry_id)
         WHERE transcript_entry_id IS NOT NULL",
    ),
];

/// A full-text table lcm-native keeps: its name, the columns it must have, and its DDL.
pub(crate) struct FtsTable {
    pub name: &'static str,
    pub columns: &'static [&'static str],
    pub create: &'static str,
    /// Fills the table from its base table (used when it is created or rebuilt).
    pub seed: &'static str,
    /// A substring of the stored SQL that marks an old, broken definition.
    pub stale_markers: &'static [&'static str],
    /// Needs the trigram tokenizer.
    pub trigram: bool,
}

pub(crate) const FTS_TABLES: &[FtsTable] = &[
    FtsTable {
        name: "messages_fts",
        columns: &["content"],
        create: "CREATE VIRTUAL TABLE messages_fts USING fts5(
              content,
              tokenize='porter unicode61'
            )",
        seed: "INSERT INTO messages_fts(rowid, content) SELECT message_id, content FROM messages WHERE content <> ''",
        stale_markers: &["content_rowid"],
        trigram: false,
    },
    FtsTable {
        name: "summaries_fts",
        columns: &["summary_id", "content"],
        create: "CREATE VIRTUAL TABLE summaries_fts USING fts5(
              summary_id UNINDEXED,
              content,
              tokenize='porter unicode61'
            )",
        seed: "INSERT INTO summaries_fts(summary_id, content) SELECT summary_id, content FROM summaries",
        stale_markers: &["content_rowid='summary_id'", "content_rowid=\"summary_id\""],
        trigram: false,
    },
    FtsTable {
        name: "summaries_fts_cjk",
        columns: &["summary_id", "content"],
        create: "CREATE VIRTUAL TABLE summaries_fts_cjk USING fts5(
                summary_id UNINDEXED,
                content,
                tokenize='trigram'
              )",
        seed: "INSERT INTO summaries_fts_cjk(summary_id, content) SELECT summary_id, content FROM summaries",
        stale_markers: &[],
        trigram: true,
    },
];

/// The shadow tables FTS5 keeps for each virtual table.
pub(crate) const FTS_SHADOW_SUFFIXES: &[&str] = &["_data", "_idx", "_content", "_docsize", "_config"];

/// Whether the file has table `name` (a read-only open of an older file may lack lcm-native's).
pub(crate) fn has_table(conn: &rusqlite::Connection, name: &str) -> crate::error::Result<bool> {
    let n: i64 = conn
        .prepare_cached("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?1")?
        .query_row([name], |r| r.get(0))?;
    Ok(n > 0)
}
