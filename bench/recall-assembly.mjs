// @ts-check
// What recall at assembly adds to one assembly, at a conversation's size: N synthetic messages
// (bench/synth.mjs) ingested into one conversation, then `assemble` at a 128k budget run with
// recall off and with a recall query (a different run number each time, so that no call reuses
// the block of the one before), alternating. Prints the median and p95 of each and the
// difference. With LCM_TEST_DATABASE_URL set (scripts/pg-test-server.cjs sets it), PostgreSQL
// too.
//
// The first call with a query is timed apart: it starts reading the conversation's statement
// vectors (recall by meaning, kept in memory, read on a thread of their own; each later call
// adds only the new messages'), and so is the time until they are all held, when the timed
// calls begin. `--meaning off` runs without them (`autoRecallMeaning: false`).
//
//   node bench/recall-assembly.mjs [--sizes 10000,100000] [--runs 60] [--meaning off]
//   node scripts/pg-test-server.cjs node bench/recall-assembly.mjs --sizes 100000
import { mkdtempSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

import { conversation } from './synth.mjs'

const require = createRequire(import.meta.url)
const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..')
const { LcmEngine } = require(join(ROOT, 'index.js'))

const arg = (/** @type {string} */ name, /** @type {string} */ dflt) => {
  const i = process.argv.indexOf(`--${name}`)
  return i > 0 ? process.argv[i + 1] : dflt
}
const SIZES = arg('sizes', '10000,100000').split(',').map(Number)
const RUNS = Number(arg('runs', '60'))
const MEANING = arg('meaning', 'on') !== 'off'
/** Questions of the kinds the recall benchmark asks (a word, an identifier, a kind of answer). */
const QUESTIONS = [
  'which port did the staging cache listen on?',
  'who was responsible for the quarterly migration plan?',
  'what did we decide about the rollback window for ORION-7731?',
  'how long was the session timeout we settled on?',
]

const pct = (/** @type {number[]} */ v, /** @type {number} */ p) => {
  const s = [...v].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.floor((s.length * p) / 100))]
}

async function measure(/** @type {string} */ where, /** @type {string} */ dbPath, /** @type {number} */ n) {
  const engine = await LcmEngine.open({ dbPath, timezone: 'UTC', autoRecallMeaning: MEANING })
  const messages = conversation(n)
  let cid = 0
  for (let i = 0; i < messages.length; i += 2000) {
    cid = (await engine.ingest({ sessionId: 'bench' }, messages.slice(i, i + 2000))).conversationId
  }
  /** @type {number[]} */
  const off = []
  /** @type {number[]} */
  const on = []
  let tokens = 0
  let hits = 0
  const t0 = process.hrtime.bigint()
  await engine.assemble(cid, { tokenBudget: 128000, recallQuery: 'which port did the staging cache listen on? first' })
  const first = Number(process.hrtime.bigint() - t0) / 1e6
  // A long history's statements are read on a thread of their own: the timed calls begin once
  // they are all held (until then a recall goes by words alone, `stats.recall.meaning`
  // 'reading').
  let read = first
  for (let k = 0; MEANING; k++) {
    const a = await engine.assemble(cid, { tokenBudget: 128000, recallQuery: `which port did the staging cache listen on? wait${k}` })
    if (a.stats.recall?.meaning !== 'reading') break
    await new Promise((done) => setTimeout(done, 50))
  }
  read = Number(process.hrtime.bigint() - t0) / 1e6
  for (let r = 0; r < RUNS; r++) {
    let t = process.hrtime.bigint()
    await engine.assemble(cid, { tokenBudget: 128000, autoRecall: false })
    off.push(Number(process.hrtime.bigint() - t) / 1e6)
    t = process.hrtime.bigint()
    const a = await engine.assemble(cid, { tokenBudget: 128000, recallQuery: `${QUESTIONS[r % QUESTIONS.length]} run${r}` })
    on.push(Number(process.hrtime.bigint() - t) / 1e6)
    tokens += a.stats.recall?.tokens ?? 0
    hits += a.stats.recall?.hits.length ?? 0
  }
  await engine.close()
  const row = {
    where,
    n,
    meaning: MEANING,
    first,
    read,
    offMedian: pct(off, 50),
    offP95: pct(off, 95),
    onMedian: pct(on, 50),
    onP95: pct(on, 95),
    addedP95: pct(on, 95) - pct(off, 95),
    tokensPerCall: Math.round(tokens / RUNS),
    hitsPerCall: hits / RUNS,
  }
  console.log(
    `${where} ${n.toLocaleString('en-US')} messages: recall off median ${row.offMedian.toFixed(2)} / p95 ${row.offP95.toFixed(2)} ms; on median ${row.onMedian.toFixed(2)} / p95 ${row.onP95.toFixed(2)} ms (p95 +${row.addedP95.toFixed(2)} ms); first call with a query ${first.toFixed(0)} ms, statements all read after ${read.toFixed(0)} ms; meaning ${MEANING ? 'on' : 'off'}; ${row.tokensPerCall} tokens, ${row.hitsPerCall.toFixed(1)} excerpts a call`,
  )
  return row
}

for (const n of SIZES) {
  const dir = mkdtempSync(join(tmpdir(), 'lcm-recall-asm-'))
  try {
    await measure('sqlite', join(dir, 'recall.db'), n)
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
  const url = process.env.LCM_TEST_DATABASE_URL
  if (url) {
    const schema = `recall_bench_${n}_${process.pid}`
    const sep = url.includes('?') ? '&' : '?'
    await measure('postgres', `${url}${sep}schema=${schema}`, n)
  }
}
