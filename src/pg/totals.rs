//! The live-context totals (`lcm_context_totals`) and the stored-message counts
//! (`lcm_message_counts`, see `db::totals`) kept by PostgreSQL triggers, as SQLite's triggers
//! keep them: every writer on any machine keeps them right.
//! The functions live in the schema and pin its search path, so a session with another
//! search path that fires them still updates this schema's totals.

/// Creates (or replaces) the functions and triggers in the connection's schema.
pub(crate) fn install() -> String {
    INSTALL
        .replace(
            "{message_tokens}",
            &follow_tokens("lcm_totals_message_tokens", "message_id", "message_tokens"),
        )
        .replace(
            "{summary_tokens}",
            &follow_tokens("lcm_totals_summary_tokens", "summary_id", "summary_tokens"),
        )
}

/// Follows a change of a message's or summary's `token_count` (keyed by `key`) into `column`
/// of every conversation whose live context references the row, once per reference (a damaged
/// database may reference a row from another conversation, or twice).
fn follow_tokens(name: &str, key: &str, column: &str) -> String {
    format!(
        "CREATE OR REPLACE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
  IF NEW.token_count IS DISTINCT FROM OLD.token_count THEN
    UPDATE lcm_context_totals t SET {column} = t.{column} + (NEW.token_count - OLD.token_count)
      * (SELECT count(*) FROM context_items ci WHERE ci.conversation_id = t.conversation_id AND ci.{key} = NEW.{key})
    WHERE t.conversation_id IN (SELECT conversation_id FROM context_items WHERE {key} = NEW.{key});
  END IF;
  RETURN NULL;
END $$;"
    )
}

/// The statements, with the two token-following functions in their places.
const INSTALL: &str = r#"
CREATE OR REPLACE FUNCTION lcm_totals_items() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
  IF TG_OP IN ('DELETE', 'UPDATE') THEN
    UPDATE lcm_context_totals t SET
      items = t.items - 1,
      summaries = t.summaries - (CASE WHEN OLD.item_type = 'summary' THEN 1 ELSE 0 END),
      message_tokens = t.message_tokens - (CASE WHEN OLD.message_id IS NULL THEN 0
        ELSE COALESCE((SELECT token_count FROM messages WHERE message_id = OLD.message_id), 0) END),
      summary_tokens = t.summary_tokens - (CASE WHEN OLD.summary_id IS NULL THEN 0
        ELSE COALESCE((SELECT token_count FROM summaries WHERE summary_id = OLD.summary_id), 0) END)
    WHERE t.conversation_id = OLD.conversation_id;
  END IF;
  IF TG_OP IN ('INSERT', 'UPDATE') THEN
    INSERT INTO lcm_context_totals AS t (conversation_id, items, summaries, message_tokens, summary_tokens)
    VALUES (NEW.conversation_id, 1,
      CASE WHEN NEW.item_type = 'summary' THEN 1 ELSE 0 END,
      CASE WHEN NEW.message_id IS NULL THEN 0
        ELSE COALESCE((SELECT token_count FROM messages WHERE message_id = NEW.message_id), 0) END,
      CASE WHEN NEW.summary_id IS NULL THEN 0
        ELSE COALESCE((SELECT token_count FROM summaries WHERE summary_id = NEW.summary_id), 0) END)
    ON CONFLICT (conversation_id) DO UPDATE SET
      items = t.items + 1,
      summaries = t.summaries + excluded.summaries,
      message_tokens = t.message_tokens + excluded.message_tokens,
      summary_tokens = t.summary_tokens + excluded.summary_tokens;
  END IF;
  RETURN NULL;
END $$;

{message_tokens}

{summary_tokens}

-- Each conversation's count of stored messages.
CREATE OR REPLACE FUNCTION lcm_totals_message_count() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
  IF TG_OP = 'UPDATE' AND NEW.conversation_id IS NOT DISTINCT FROM OLD.conversation_id THEN
    RETURN NULL;
  END IF;
  IF TG_OP IN ('DELETE', 'UPDATE') THEN
    UPDATE lcm_message_counts SET messages = messages - 1 WHERE conversation_id = OLD.conversation_id;
  END IF;
  IF TG_OP IN ('INSERT', 'UPDATE') THEN
    INSERT INTO lcm_message_counts AS n (conversation_id, messages) VALUES (NEW.conversation_id, 1)
    ON CONFLICT (conversation_id) DO UPDATE SET messages = n.messages + 1;
  END IF;
  RETURN NULL;
END $$;

-- BEFORE, so the rows its cascade deletes find no totals to update.
CREATE OR REPLACE FUNCTION lcm_totals_conversation_gone() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
  DELETE FROM lcm_context_totals WHERE conversation_id = OLD.conversation_id;
  DELETE FROM lcm_message_counts WHERE conversation_id = OLD.conversation_id;
  RETURN OLD;
END $$;

DROP TRIGGER IF EXISTS lcm_context_items_totals ON context_items;
CREATE TRIGGER lcm_context_items_totals
  AFTER INSERT OR DELETE OR UPDATE OF conversation_id, item_type, message_id, summary_id ON context_items
  FOR EACH ROW EXECUTE FUNCTION lcm_totals_items();
DROP TRIGGER IF EXISTS lcm_messages_totals_token_count ON messages;
CREATE TRIGGER lcm_messages_totals_token_count AFTER UPDATE OF token_count ON messages
  FOR EACH ROW EXECUTE FUNCTION lcm_totals_message_tokens();
DROP TRIGGER IF EXISTS lcm_summaries_totals_token_count ON summaries;
CREATE TRIGGER lcm_summaries_totals_token_count AFTER UPDATE OF token_count ON summaries
  FOR EACH ROW EXECUTE FUNCTION lcm_totals_summary_tokens();
DROP TRIGGER IF EXISTS lcm_messages_count ON messages;
CREATE TRIGGER lcm_messages_count AFTER INSERT OR DELETE OR UPDATE OF conversation_id ON messages
  FOR EACH ROW EXECUTE FUNCTION lcm_totals_message_count();
DROP TRIGGER IF EXISTS lcm_conversations_totals_delete ON conversations;
CREATE TRIGGER lcm_conversations_totals_delete BEFORE DELETE ON conversations
  FOR EACH ROW EXECUTE FUNCTION lcm_totals_conversation_gone();
"#;
