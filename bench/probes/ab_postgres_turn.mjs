// Two builds of the addon alternating on PostgreSQL, each on a schema of its own holding the
// same compacted conversation: a 5-message turn's commit, then an assembly (128k budget), as
// bench/postgres.mjs measures them, but in one process so that the server's and the machine's
// drift blur neither side.
//
//   A=<before.node> B=<after.node> node scripts/pg-test-server.cjs node bench/probes/ab_postgres_turn.mjs [messages]
import { spawnSync } from 'node:child_process'
import { createRequire } from 'node:module'

import { compactedConversation, conversation } from '../synth.mjs'

const require = createRequire(import.meta.url)
const PG = process.env.LCM_TEST_DATABASE_URL
if (!process.env.A || !process.env.B || !PG) {
  console.error('usage: A=<before.node> B=<after.node> node scripts/pg-test-server.cjs node bench/probes/ab_postgres_turn.mjs [messages]')
  process.exit(2)
}
const n = Number(process.argv[2] ?? 10000)
const builds = { A: require(process.env.A), B: require(process.env.B) }
const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1].toFixed(2)
const ms = (t) => Number(process.hrtime.bigint() - t) / 1e6
const psql = (sql) => spawnSync('psql', [PG, '-qc', sql], { stdio: 'ignore' })

const sides = {}
for (const k of ['A', 'B']) {
  const schema = `ab_turn_${k.toLowerCase()}_${process.pid}`
  const engine = await builds[k].LcmEngine.open({ dbPath: `${PG}?schema=${schema}` })
  const cid = await compactedConversation(engine, n)
  psql(`ANALYZE "${schema}".messages, "${schema}".message_parts, "${schema}".context_items, "${schema}".summaries`)
  sides[k] = { engine, schema, cid, commit: [], assemble: [] }
}
const turns = conversation(1000, 99)
let t = 0
for (let round = 0; round < 10; round++) {
  for (const k of round % 2 ? ['A', 'B'] : ['B', 'A']) {
    const side = sides[k]
    for (let i = 0; i < 10; i++, t++) {
      const batch = turns.slice((t % 200) * 5, (t % 200) * 5 + 5).map((m, j) => ({ ...m, entryId: `${k}-${t}-${j}` }))
      let start = process.hrtime.bigint()
      await side.engine.ingest({ sessionId: 's' }, batch, { advancementKey: `${k}-${t}` })
      side.commit.push(ms(start))
      start = process.hrtime.bigint()
      await side.engine.assemble(side.cid, { tokenBudget: 128000 })
      side.assemble.push(ms(start))
    }
  }
}
console.log(`PostgreSQL, ${n} messages, medians of ${sides.A.commit.length} turns each:`)
console.log(`  commit (5 messages): A ${median(sides.A.commit)} ms, B ${median(sides.B.commit)} ms`)
console.log(`  assemble after it:   A ${median(sides.A.assemble)} ms, B ${median(sides.B.assemble)} ms`)
for (const side of Object.values(sides)) {
  await side.engine.close()
  psql(`DROP SCHEMA "${side.schema}" CASCADE`)
}
