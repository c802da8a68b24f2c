// One agent's turns on PostgreSQL in a schema holding only its conversation, and in one where
// 999 other conversations of 1,000 messages each sit beside it (issue #48, item 6): a
// 5-message turn's commit, then an assembly (128k budget), alternating between the two
// schemas in one process so that the server's and the machine's drift blur neither side.
// The others are written by the server itself (`INSERT … SELECT`, short texts: what matters
// here is how many rows the shared tables and indexes hold), with their parts and context.
//
//   node scripts/pg-test-server.cjs node bench/probes/pg_many_conversations.mjs [others] [messages each]
import { spawnSync } from 'node:child_process'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

import { conversation } from '../synth.mjs'

const require = createRequire(import.meta.url)
const { LcmEngine } = require(join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'index.js'))
const PG = process.env.LCM_TEST_DATABASE_URL
if (!PG) {
  console.error('usage: node scripts/pg-test-server.cjs node bench/probes/pg_many_conversations.mjs [others] [messages each]')
  process.exit(2)
}
const others = Number(process.argv[2] ?? 999)
const each = Number(process.argv[3] ?? 1000)
const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1].toFixed(2)
const ms = (t) => Number(process.hrtime.bigint() - t) / 1e6
const psql = (sql) => {
  const r = spawnSync('psql', [PG, '-v', 'ON_ERROR_STOP=1', '-qc', sql], { stdio: ['ignore', 'ignore', 'inherit'], env: { ...process.env, PGOPTIONS: '-c client_min_messages=warning' } })
  if (r.status !== 0) throw new Error(`psql failed: ${sql.slice(0, 80)}`)
}
const stub = async () => 'STUB summary.\nExpand for details about: stub.'

/** The others, made by the server: conversations, their messages, one text part each, and
 * each message live in its conversation's context. */
function bulk(schema) {
  psql(`SET search_path TO "${schema}";
    INSERT INTO conversations (session_id, created_at, updated_at)
      SELECT 'bulk-' || g, '2026-11-28 00:00:00', '2026-11-28 00:00:00' FROM generate_series(1, ${others}) g;
    INSERT INTO messages (conversation_id, seq, role, content, token_count, created_at)
      SELECT c.conversation_id, s, CASE WHEN s % 2 = 0 THEN 'assistant' ELSE 'user' END,
             'bulk message ' || s || ' of conversation ' || c.conversation_id || ' about migration', 8, '2026-11-28 00:00:00'
      FROM conversations c CROSS JOIN generate_series(1, ${each}) s WHERE c.session_id LIKE 'bulk-%';
    INSERT INTO message_parts (part_id, message_id, session_id, part_type, ordinal, text_content)
      SELECT CAST(gen_random_uuid() AS TEXT), m.message_id, c.session_id, 'text', 0, m.content
      FROM messages m JOIN conversations c USING (conversation_id) WHERE c.session_id LIKE 'bulk-%';
    INSERT INTO context_items (conversation_id, ordinal, item_type, message_id, created_at)
      SELECT m.conversation_id, m.seq - 1, 'message', m.message_id, m.created_at
      FROM messages m JOIN conversations c USING (conversation_id) WHERE c.session_id LIKE 'bulk-%';`)
}

const sides = {}
for (const k of ['one', 'many']) {
  const schema = `many_${k}_${process.pid}`
  const engine = await LcmEngine.open({ dbPath: `${PG}?schema=${schema}` })
  const t = process.hrtime.bigint()
  if (k === 'many') bulk(schema)
  const made = ms(t)
  const messages = conversation(each, 23)
  let cid = 0
  for (let i = 0; i < each; i += 500) cid = (await engine.ingest({ sessionId: 'agent' }, messages.slice(i, i + 500))).conversationId
  for (;;) {
    const r = await engine.compact(cid, stub, { tokenBudget: 32000, force: true })
    if (!r.actionTaken) break
  }
  psql(`ANALYZE "${schema}".conversations, "${schema}".messages, "${schema}".message_parts, "${schema}".context_items, "${schema}".summaries, "${schema}".summary_messages`)
  sides[k] = { engine, schema, cid, commit: [], assemble: [], made }
}
const turns = conversation(1000, 99)
let t = 0
for (let round = 0; round < 10; round++) {
  for (const k of round % 2 ? ['one', 'many'] : ['many', 'one']) {
    const side = sides[k]
    for (let i = 0; i < 10; i++, t++) {
      const batch = turns.slice((t % 200) * 5, (t % 200) * 5 + 5).map((m, j) => ({ ...m, entryId: `${k}-${t}-${j}` }))
      let start = process.hrtime.bigint()
      await side.engine.ingest({ sessionId: 'agent' }, batch, { advancementKey: `${k}-${t}` })
      side.commit.push(ms(start))
      start = process.hrtime.bigint()
      await side.engine.assemble(side.cid, { tokenBudget: 128000 })
      side.assemble.push(ms(start))
    }
  }
}
const { one, many } = sides
console.log(`one agent's conversation (${each} messages, compacted) alone, and beside ${others} others of ${each} messages (written in ${(many.made / 1000).toFixed(0)} s); medians of ${one.commit.length} turns, ms`)
console.log('| | alone | beside the others | ratio |')
console.log('|---|--:|--:|--:|')
for (const [name, key] of [['commit (5 messages)', 'commit'], ['assemble after it', 'assemble']]) {
  const [a, b] = [median(one[key]), median(many[key])]
  console.log(`| ${name} | ${a} | ${b} | ${(b / a).toFixed(2)} |`)
}
for (const side of Object.values(sides)) {
  await side.engine.close()
  psql(`DROP SCHEMA "${side.schema}" CASCADE`)
}
