// What grep's indexes cost a turn's commit on PostgreSQL: the same 5-message turns committed to
// a compacted conversation three times over, each in a schema of its own — as lcm-native makes
// it, without the messages' trigram index, and without that and the words column (its function
// made to return nothing). Only for measuring: the last two schemas cannot search.
//
//   node scripts/pg-test-server.cjs node bench/probes/pg_commit_search_cost.mjs [messages] [turns]
import { spawnSync } from 'node:child_process'
import { createRequire } from 'node:module'

import { compactedConversation, conversation } from '../synth.mjs'

const require = createRequire(import.meta.url)
const { LcmEngine } = require('../../index.js')
const PG = process.env.LCM_TEST_DATABASE_URL
if (!PG) {
  console.error('usage: node scripts/pg-test-server.cjs node bench/probes/pg_commit_search_cost.mjs [messages] [turns]')
  process.exit(2)
}
const n = Number(process.argv[2] ?? 2000)
const count = Number(process.argv[3] ?? 200)
const psql = (sql) => {
  const r = spawnSync('psql', [PG, '-qc', sql], { encoding: 'utf8' })
  if (r.status !== 0) throw new Error(r.stderr)
}
const variants = {
  'as made': () => '',
  'no trigram index': (s) => `DROP INDEX "${s}".messages_trigram_idx`,
  'no trigram index, no words': (s) =>
    `DROP INDEX "${s}".messages_trigram_idx;
     CREATE OR REPLACE FUNCTION "${s}".lcm_search_vector(t text) RETURNS tsvector LANGUAGE sql IMMUTABLE AS $$ SELECT NULL::tsvector $$`,
}
const turns = conversation(count * 5, 99)
for (const [name, strip] of Object.entries(variants)) {
  const schema = `commit_cost_${process.pid}`
  const engine = await LcmEngine.open({ dbPath: `${PG}?schema=${schema}` })
  const cid = await compactedConversation(engine, n)
  const sql = strip(schema)
  if (sql) psql(sql)
  const times = []
  for (let t = 0; t < count; t++) {
    const batch = turns.slice(t * 5, t * 5 + 5).map((m, j) => ({ ...m, entryId: `e-${t}-${j}` }))
    const start = process.hrtime.bigint()
    await engine.ingest({ sessionId: 's' }, batch, { advancementKey: `k-${t}` })
    times.push(Number(process.hrtime.bigint() - start) / 1e6)
  }
  await engine.close()
  psql(`DROP SCHEMA "${schema}" CASCADE`)
  times.sort((a, b) => a - b)
  console.log(`${name.padEnd(28)} commit median ${times[times.length >> 1].toFixed(2)} ms, p99 ${times[Math.floor(times.length * 0.99)].toFixed(2)} ms`)
}
