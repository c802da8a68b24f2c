// Two builds of the addon searching one PostgreSQL schema in turn: the grep cases of
// bench/postgres.mjs over a conversation of `messages` stored messages (not compacted: the
// cases search messages and summaries alike, and a long-lived conversation's messages are
// all still there), in one process so that the server's and the machine's drift blur
// neither side.
//
//   A=<before.node> B=<after.node> node scripts/pg-test-server.cjs node bench/probes/ab_postgres_grep.mjs [messages]
import { spawnSync } from 'node:child_process'
import { createRequire } from 'node:module'

import { conversation } from '../synth.mjs'

const require = createRequire(import.meta.url)
const PG = process.env.LCM_TEST_DATABASE_URL
if (!process.env.A || !process.env.B || !PG) {
  console.error('usage: A=<before.node> B=<after.node> node scripts/pg-test-server.cjs node bench/probes/ab_postgres_grep.mjs [messages]')
  process.exit(2)
}
const n = Number(process.argv[2] ?? 100000)
const builds = { A: require(process.env.A), B: require(process.env.B) }
const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1].toFixed(2)
const ms = (t) => Number(process.hrtime.bigint() - t) / 1e6
const psql = (sql) => spawnSync('psql', [PG, '-qc', sql], { stdio: 'ignore' })

const schema = `ab_grep_${process.pid}`
const url = `${PG}?schema=${schema}`
const engines = { A: await builds.A.LcmEngine.open({ dbPath: url }) }
const messages = conversation(n, 23)
let cid = 0
for (let i = 0; i < n; i += 1000) cid = (await engines.A.ingest({ sessionId: 's' }, messages.slice(i, i + 1000))).conversationId
psql(`ANALYZE "${schema}".messages, "${schema}".summaries`)
engines.B = await builds.B.LcmEngine.open({ dbPath: url })

const cases = [
  ['fts, common word', { query: 'migration' }],
  ['fts, common word, messages only', { query: 'migration', scope: 'messages' }],
  ['fts, common word, messages only, limit 5', { query: 'migration', scope: 'messages', limit: 5 }],
  ['fts, two words', { query: 'ENOENT timeout' }],
  ['fts, absent word', { query: 'zzzneedle' }],
  ['fts, common word, relevance', { query: 'migration', sort: 'relevance' }],
  ['like, substring', { query: 'src/db/store.rs', mode: 'like' }],
]
console.log(`${n} messages in one conversation; median of 10 per build (alternating), ms`)
console.log('| query | hits A | hits B | A | B |')
console.log('|---|--:|--:|--:|--:|')
for (const [name, options] of cases) {
  const times = { A: [], B: [] }
  const hits = {}
  for (let i = 0; i < 10; i++) {
    for (const k of i % 2 ? ['B', 'A'] : ['A', 'B']) {
      const t = process.hrtime.bigint()
      const r = await engines[k].grep(cid, options)
      times[k].push(ms(t))
      hits[k] = r.hits.map((h) => h.messageId ?? h.summaryId).join(',')
    }
  }
  if (hits.A !== hits.B) console.log(`  (${name}: the builds found different hits)`)
  console.log(`| ${name} | ${hits.A.split(',').filter(Boolean).length} | ${hits.B.split(',').filter(Boolean).length} | ${median(times.A)} | ${median(times.B)} |`)
}
for (const e of Object.values(engines)) await e.close()
psql(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`)
