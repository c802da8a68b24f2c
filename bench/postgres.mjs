// lcm-native on PostgreSQL beside SQLite (issue #32): per-turn commit, assembly, bounded
// sweeps and grep at each size, and throughput with several writer processes on one database.
//
//   node scripts/pg-test-server.cjs node bench/postgres.mjs [--sizes 10000,100000|none] [--writers 1,2,4,8]
//
// Writers: k processes, each on its own session, then k processes on one session (whose
// messages are then checked: each turn once, seq dense).
//
// The server is the one LCM_TEST_DATABASE_URL names (pg-test-server.cjs starts a throwaway
// cluster on a Unix socket, and PgBouncer in transaction mode in front of it: the `pgbouncer`
// rows, when LCM_TEST_POOLER_URL is set). Speed is measured and reported here, never asserted in `npm test`.
import { spawn, spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { cpus, tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

import { conversation } from './synth.mjs'

const require = createRequire(import.meta.url)
const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..')
const { LcmEngine } = require(join(ROOT, 'index.js'))

function arg(name, fallback) {
  const i = process.argv.indexOf(`--${name}`)
  return i > 0 ? process.argv[i + 1] : fallback
}
const sizes = arg('sizes', '10000,100000').split(',').map(Number).filter((n) => n > 0)
const writerCounts = arg('writers', '1,2,4,8').split(',').map(Number)
const PG = process.env.LCM_TEST_DATABASE_URL
if (!PG) {
  console.error('LCM_TEST_DATABASE_URL is not set: run through `node scripts/pg-test-server.cjs node bench/postgres.mjs`')
  process.exit(2)
}
const CHILD = process.argv[2] === '--writer'
// PgBouncer in transaction mode in front of that server (`?pooler=transaction`): a third column.
const POOLER = process.env.LCM_TEST_POOLER_URL

const ms = (ns) => Number(ns) / 1e6
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
const p99 = (xs) => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.floor(s.length * 0.99))]
}
async function timed(fn) {
  const t0 = process.hrtime.bigint()
  const out = await fn()
  return [out, ms(process.hrtime.bigint() - t0)]
}
function table(title, header, rows) {
  console.log(`\n${title}`)
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => String(r[i]).length)))
  const line = (cells) => `| ${cells.map((c, i) => String(c).padStart(widths[i])).join(' | ')} |`
  console.log(line(header))
  console.log(`|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`)
  for (const r of rows) console.log(line(r))
}

let schemas = 0
/** A fresh database of each kind: a SQLite file in a temporary folder, a PostgreSQL schema. */
function places(tag) {
  const dir = mkdtempSync(join(tmpdir(), 'lcm-pgbench-'))
  const schema = `bench_${tag}_${process.pid}_${schemas++}`
  return [
    { engine: 'sqlite', db: join(dir, 'bench.db'), drop: () => rmSync(dir, { recursive: true, force: true }) },
    { engine: 'postgres', db: `${PG}?schema=${schema}`, drop: () => dropSchema(schema) },
    // The same server through PgBouncer in transaction mode, when pg-test-server.cjs started one.
    ...(POOLER ? [{ engine: 'pgbouncer', db: `${POOLER}&schema=${schema}_b`, drop: () => dropSchema(`${schema}_b`) }] : []),
  ]
}
/** What autovacuum does within a minute of a bulk load: the planner's statistics. */
function analyze(place) {
  if (place.engine === 'sqlite') return
  const schema = /[?&]schema=([a-z0-9_]+)/.exec(place.db)[1]
  spawnSync('psql', [PG, '-qc', `ANALYZE "${schema}".messages, "${schema}".summaries, "${schema}".context_items, "${schema}".summary_messages, "${schema}".summary_parents`], { stdio: 'inherit' })
}
async function dropSchema(schema) {
  await new Promise((resolve) => spawn('psql', [PG, '-qc', `DROP SCHEMA IF EXISTS "${schema}" CASCADE`], { stdio: 'ignore' }).on('exit', resolve))
}

const stub = async (_p, r) => `STUB ${r.kind} d${r.depth} summary of ${r.inputCount} inputs about migration and schema.\nExpand for details about: stub.`

async function perSize(n) {
  const rows = { turn: [], assemble: [], bounded: [], grep: [] }
  for (const place of places(n)) {
    const engine = await LcmEngine.open({ dbPath: place.db })
    const messages = conversation(n, 23)
    let conversationId = 0
    const [, loadMs] = await timed(async () => {
      for (let i = 0; i < n; i += 1000) ({ conversationId } = await engine.ingest({ sessionId: 's' }, messages.slice(i, i + 1000)))
    })
    analyze(place)
    // Bounded sweeps (default maxSweepIterations: 12 passes each), the first four.
    let passes = 0
    let bookkeeping = 0
    for (let s = 0; s < 4; s++) {
      const r = await engine.compact(conversationId, stub, { tokenBudget: 128000, force: true })
      passes += r.leafPasses + Object.values(r.condensedPasses).reduce((a, b) => a + b, 0)
      bookkeeping += r.durationMs - r.summarizerMs
    }
    rows.bounded.push([n, place.engine, passes, (bookkeeping / passes).toFixed(2), (loadMs / n).toFixed(3)])
    // The rest compacted (as a long-lived conversation is), then turns and assemblies.
    for (;;) {
      const r = await engine.compact(conversationId, stub, { tokenBudget: 128000, force: true })
      if (!r.actionTaken) break
    }
    analyze(place)
    const turn = conversation(250, 99)
    const commits = []
    const assemblies = []
    for (let t = 0; t < 50; t++) {
      const batch = turn.slice(t * 5, t * 5 + 5).map((m, i) => ({ ...m, entryId: `turn-${t}-${i}` }))
      commits.push((await timed(() => engine.ingest({ sessionId: 's' }, batch, { advancementKey: `t${t}` })))[1])
      assemblies.push((await timed(() => engine.assemble(conversationId, { tokenBudget: 128000 })))[1])
    }
    rows.turn.push([n, place.engine, median(commits).toFixed(2), p99(commits).toFixed(2)])
    const live = (await engine.context(conversationId)).length
    rows.assemble.push([n, place.engine, live, median(assemblies).toFixed(2), p99(assemblies).toFixed(2)])
    const cases = [
      ['fts, common word', { query: 'migration' }],
      ['fts, two words', { query: 'ENOENT timeout' }],
      ['fts, absent word', { query: 'zzzneedle' }],
      ['like, substring', { query: 'src/db/store.rs', mode: 'like' }],
      ['like, absent', { query: 'zzzneedle', mode: 'like' }],
      ['regex, absent (reads up to 200k rows or 3 s)', { query: 'needle\\d{3}', mode: 'regex' }],
    ]
    for (const [name, options] of cases) {
      const times = []
      let last
      for (let i = 0; i < 10; i++) {
        const [r, t] = await timed(() => engine.grep(conversationId, options))
        times.push(t)
        last = r
      }
      rows.grep.push([n, place.engine, name, last.hits.length, last.partial ? 'partial' : '', median(times).toFixed(2)])
    }
    const verify = await engine.verify(conversationId)
    if (!verify.ok) throw new Error(`${place.engine}: ${verify.problems.join('; ')}`)
    await engine.close()
    await place.drop()
  }
  return rows
}

/** k processes, each committing `turns` two-message turns to its own session, or all to one
 * (`shared`, then checked: every turn stored once, seq dense). The clock runs from when every
 * writer has its engine open (they start together) to the last turn's end: turns/s is the
 * writers', not the processes' start-up. */
async function writers(k, turns, shared) {
  const out = []
  for (const place of places(`w${k}${shared ? 's' : ''}`)) {
    await (await LcmEngine.open({ dbPath: place.db })).close()
    const ready = []
    const children = Array.from({ length: k }, (_, w) => {
      const args = [fileURLToPath(import.meta.url), '--writer', place.db, String(w), String(turns), shared ? 'shared' : 'own']
      const child = spawn(process.execPath, args, { stdio: ['pipe', 'pipe', 'inherit'] })
      let text = ''
      ready.push(new Promise((resolve) => child.stdout.once('data', resolve)))
      const done = new Promise((resolve, reject) => {
        child.stdout.on('data', (d) => (text += d))
        child.on('exit', (code) => (code === 0 ? resolve(JSON.parse(text.slice(text.indexOf('\n') + 1))) : reject(new Error(`writer ${w} exited ${code}`))))
      })
      return { child, done }
    })
    await Promise.all(ready)
    const go = process.hrtime.bigint()
    for (const { child } of children) child.stdin.end('go\n')
    const results = await Promise.all(children.map((c) => c.done))
    const wall = ms(BigInt(Math.max(...results.map((r) => r.end))) - go)
    if (shared) await checkShared(place.db, k * turns * 2)
    const all = results.flatMap((r) => r.times)
    out.push([k, place.engine, k * turns, ((k * turns) / (wall / 1000)).toFixed(0), median(all).toFixed(2), p99(all).toFixed(2)])
    await place.drop()
  }
  return out
}

/** The shared session holds `expected` messages, seq 1..expected. */
async function checkShared(db, expected) {
  const engine = await LcmEngine.open({ dbPath: db })
  const list = await engine.conversations()
  if (list.length !== 1) throw new Error(`one session, ${list.length} conversations`)
  const seqs = []
  for (let after = 0; ; ) {
    const page = await engine.messages(list[0].conversationId, { afterSeq: after, limit: 1000 })
    if (page.length === 0) break
    seqs.push(...page.map((m) => m.seq))
    after = page[page.length - 1].seq
  }
  await engine.close()
  if (seqs.length !== expected || seqs.some((s, i) => s !== i + 1)) throw new Error(`shared session: ${seqs.length} of ${expected} messages, seq dense: ${seqs.every((s, i) => s === i + 1)}`)
}

async function writer(db, w, turns, session) {
  const engine = await LcmEngine.open({ dbPath: db, busyTimeoutMs: 60000 })
  // Entry ids of their own: on one session, a writer's message is not another's replayed.
  const messages = conversation(turns * 2, 1000 + Number(w)).map((m) => ({ ...m, entryId: `w${w}-${m.entryId}` }))
  const times = []
  // Open and ready; the turns start when every writer is (the parent says go).
  console.log('ready')
  await new Promise((resolve) => process.stdin.once('data', resolve))
  for (let t = 0; t < turns; t++) {
    const batch = messages.slice(t * 2, t * 2 + 2)
    times.push((await timed(() => engine.ingest({ sessionId: session === 'shared' ? 'writers' : `writer-${w}` }, batch, { advancementKey: `w${w}-t${t}` })))[1])
  }
  const end = process.hrtime.bigint()
  await engine.close()
  console.log(JSON.stringify({ times, end: Number(end) }))
}

if (CHILD) {
  await writer(process.argv[3], process.argv[4], Number(process.argv[5]), process.argv[6])
} else {
  console.log(`machine: ${cpus().length} × ${cpus()[0]?.model}, node ${process.version}; sizes ${sizes.join(', ')}`)
  const all = { turn: [], assemble: [], bounded: [], grep: [] }
  for (const n of sizes) {
    const rows = await perSize(n)
    for (const k of Object.keys(all)) all[k].push(...rows[k])
  }
  table('per-turn commit (5 messages, an advancement key) on a compacted conversation', ['N', 'engine', 'median ms', 'p99 ms'], all.turn)
  table('assemble (128k budget), after each of those turns', ['N', 'engine', 'live items', 'median ms', 'p99 ms'], all.assemble)
  table('bounded sweeps (the first 4 of an uncompacted conversation), stub summarizer', ['N', 'engine', 'passes', 'bookkeeping ms/pass', 'load ms/message'], all.bounded)
  table('grep (one conversation, compacted, scope both, limit 50; median of 10)', ['N', 'engine', 'query', 'hits', '', 'median ms'], all.grep)
  const rows = []
  for (const k of writerCounts) rows.push(...(await writers(k, 200, false)))
  table('writers: k processes, each committing 200 two-message turns to its own session', ['k', 'engine', 'turns', 'turns/s', 'median ms', 'p99 ms'], rows)
  const shared = []
  for (const k of writerCounts.filter((k) => k > 1)) shared.push(...(await writers(k, 200, true)))
  table('writers on one session: k processes, 200 two-message turns each (checked: each turn once, seq dense)', ['k', 'engine', 'turns', 'turns/s', 'median ms', 'p99 ms'], shared)
}
