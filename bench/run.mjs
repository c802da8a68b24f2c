// lcm-native benchmarks (plain node). Prints a table per section and writes JSON.
//
//   node bench/run.mjs [--only ingest,migrate,compact,assemble,grep,bounded,wide,loop] [--sizes 1000,10000,50000]
//                      [--legacy-sizes 10000,100000,1000000] [--out bench/out/results.json]
//
// Speed targets are measured here and reported, never asserted in `npm test`.
import { execFileSync, spawn, spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir, cpus } from 'node:os'
import { dirname, join } from 'node:path'
import { monitorEventLoopDelay } from 'node:perf_hooks'
import { fileURLToPath } from 'node:url'

import { conversation } from './synth.mjs'

const require = createRequire(import.meta.url)
const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..')
const { LcmEngine, migrate } = require(join(ROOT, 'index.js'))

function arg(name, fallback) {
  const i = process.argv.indexOf(`--${name}`)
  return i > 0 ? process.argv[i + 1] : fallback
}
const only = arg('only', 'ingest,migrate,compact,assemble,grep,bounded,wide,loop').split(',')
const sizes = arg('sizes', '1000,10000,50000').split(',').map(Number)
const legacySizes = arg('legacy-sizes', '10000,100000,1000000').split(',').map(Number)
const outFile = arg('out', join(ROOT, 'bench', 'out', 'results.json'))

const results = { machine: { cpus: cpus().length, cpu: cpus()[0]?.model, node: process.version }, startedAt: new Date().toISOString() }

function tmp() {
  return mkdtempSync(join(tmpdir(), 'lcm-bench-'))
}

function ms(ns) {
  return Number(ns) / 1e6
}

/** Runs `fn` while measuring Node's event-loop delay; returns [result, maxDelayMs]. */
async function withLoopDelay(fn) {
  const h = monitorEventLoopDelay({ resolution: 1 })
  h.enable()
  const out = await fn()
  h.disable()
  return [out, h.max / 1e6]
}

function table(title, header, rows) {
  console.log(`\n${title}`)
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => String(r[i]).length)))
  const line = (cells) => `| ${cells.map((c, i) => String(c).padStart(widths[i])).join(' | ')} |`
  console.log(line(header))
  console.log(`|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`)
  for (const r of rows) console.log(line(r))
}

async function benchIngest() {
  const rows = []
  results.ingest = []
  for (const n of sizes) {
    const messages = conversation(n, 7)
    const chars = messages.reduce((a, m) => a + JSON.stringify(m.content).length, 0)
    // `concurrent`: one message per call, eight sessions with a call each in flight at once
    // (a gateway serving many agents); calls that meet share a commit.
    // `turn`: five messages per call, what a host sends after each turn.
    for (const mode of ['batched', 'turn', 'single', 'concurrent']) {
      const dir = tmp()
      const engine = await LcmEngine.open({ dbPath: join(dir, 'ingest.db') })
      const batch = mode === 'batched' ? 500 : mode === 'concurrent' ? 8 : mode === 'turn' ? 5 : 1
      // The synchronous part of each call (JSON.stringify of its messages on Node's thread).
      const onThread = []
      const t0 = process.hrtime.bigint()
      const [, maxDelay] = await withLoopDelay(async () => {
        for (let i = 0; i < n; i += batch) {
          const chunk = messages.slice(i, i + batch)
          const s0 = process.hrtime.bigint()
          const done =
            mode === 'concurrent'
              ? Promise.all(chunk.map((m, k) => engine.ingest({ sessionId: `bench-${k}` }, [m])))
              : engine.ingest({ sessionId: 'bench' }, chunk)
          onThread.push(ms(process.hrtime.bigint() - s0))
          await done
        }
      })
      const total = ms(process.hrtime.bigint() - t0)
      await engine.close()
      rmSync(dir, { recursive: true, force: true })
      const perMsg = total / n
      onThread.sort((a, b) => a - b)
      const syncP50 = onThread[Math.floor((onThread.length - 1) / 2)]
      const syncMax = onThread[onThread.length - 1]
      results.ingest.push({ n, mode, batch, totalMs: total, perMessageMs: perMsg, maxEventLoopDelayMs: maxDelay, syncPartP50Ms: syncP50, syncPartMaxMs: syncMax, avgChars: Math.round(chars / n) })
      rows.push([n.toLocaleString('en-US'), mode, mode === 'concurrent' ? '1 (8 at once)' : batch, total.toFixed(0), perMsg.toFixed(4), maxDelay.toFixed(1), `${syncP50.toFixed(2)} / ${syncMax.toFixed(1)}`])
    }
  }
  table('ingest (synthetic agent conversation, avg ~1.3k chars/message)', ['N', 'mode', 'msgs/call', 'total ms', 'ms/message', 'max loop delay ms', 'on Node thread ms p50 / max'], rows)
}

function ensureSynthBinary() {
  // Same target dir as the addon build, so the dependencies are already compiled.
  const host = execFileSync('rustc', ['-vV'], { encoding: 'utf8' }).match(/^host: (.*)$/m)[1]
  const bin = join(ROOT, 'target', host, 'release', 'examples', 'synth_legacy')
  if (!existsSync(bin)) {
    execFileSync('cargo', ['build', '--release', '--target', host, '--example', 'synth_legacy'], { cwd: ROOT, stdio: 'inherit' })
  }
  return bin
}

async function benchMigrate() {
  results.migrate = []
  const rows = []
  // 1) An up-to-date lcm-native database with the largest N: the check every open does.
  {
    const n = Math.max(...sizes)
    const dir = tmp()
    const dbPath = join(dir, 'populated.db')
    const engine = await LcmEngine.open({ dbPath })
    const messages = conversation(n, 11)
    for (let i = 0; i < n; i += 1000) await engine.ingest({ sessionId: 'm' }, messages.slice(i, i + 1000))
    await engine.close()
    const times = []
    for (let i = 0; i < 20; i++) {
      const t0 = process.hrtime.bigint()
      const r = await migrate(dbPath)
      times.push(ms(process.hrtime.bigint() - t0))
      if (!r.upToDate) throw new Error('expected an up-to-date database')
    }
    times.sort((a, b) => a - b)
    const median = times[10]
    results.migrate.push({ case: 'up-to-date lcm-native', messages: n, medianMs: median })
    rows.push(['up-to-date lcm-native db (2nd run)', n.toLocaleString('en-US'), median.toFixed(2), '-', 'no work'])
    rmSync(dir, { recursive: true, force: true })
  }
  // 2) Legacy pre-depth databases (no depth/time columns, no FTS): the worst upgrade.
  const bin = ensureSynthBinary()
  for (const n of legacySizes) {
    const dir = tmp()
    const dbPath = join(dir, 'legacy.db')
    execFileSync(bin, [dbPath, String(n), '300'], { stdio: 'ignore' })
    // Run in a child so its peak RSS is the migration's alone.
    const child = spawnSync(
      process.execPath,
      [
        '-e',
        `const {migrate}=require(${JSON.stringify(join(ROOT, 'index.js'))});
         const t0=process.hrtime.bigint();
         migrate(${JSON.stringify(dbPath)}).then(r=>{
           const t=Number(process.hrtime.bigint()-t0)/1e6;
           console.log(JSON.stringify({ms:t,rssMiB:process.resourceUsage().maxRSS/1024,report:r}))
         },e=>{console.error(e);process.exit(1)})`,
      ],
      { encoding: 'utf8', maxBuffer: 64 << 20 },
    )
    if (child.status !== 0) throw new Error(child.stderr)
    const out = JSON.parse(child.stdout)
    const summaries = out.report.backfills.find((b) => b.step === 'backfillSummaryMetadata')?.rows ?? 0
    results.migrate.push({ case: 'legacy upgrade', messages: n, totalMs: out.ms, peakRssMiB: out.rssMiB, summariesBackfilled: summaries, report: out.report.summary })
    rows.push(['legacy pre-depth upgrade (no FTS)', n.toLocaleString('en-US'), out.ms.toFixed(0), out.rssMiB.toFixed(0), `${summaries.toLocaleString('en-US')} summaries backfilled, FTS built`])
    rmSync(dir, { recursive: true, force: true })
  }
  table('migrate', ['case', 'messages', 'ms', 'peak RSS MiB', 'work'], rows)
}

async function benchCompact() {
  results.compact = []
  const rows = []
  // A stub summarizer, as in the plugin's fixtures: it answers at once with a fixed-size text.
  const stub = async (_prompt, r) =>
    `STUB ${r.kind} d${r.depth} summary of ${r.inputCount} inputs and ${r.inputTokens} tokens.\nExpand for details about: stub.`
  for (const n of sizes) {
    const dir = tmp()
    const engine = await LcmEngine.open({ dbPath: join(dir, 'compact.db'), maxSweepIterations: 1_000_000, sweepDeadlineMs: 3_600_000 })
    const messages = conversation(n, 23)
    let conversationId = 0
    for (let i = 0; i < n; i += 1000) ({ conversationId } = await engine.ingest({ sessionId: 'c' }, messages.slice(i, i + 1000)))
    const t0 = process.hrtime.bigint()
    const [r, maxDelay] = await withLoopDelay(() => engine.compact(conversationId, stub, { tokenBudget: 128000, force: true }))
    const wall = ms(process.hrtime.bigint() - t0)
    const passes = r.leafPasses + Object.values(r.condensedPasses).reduce((a, b) => a + b, 0)
    const bookkeeping = r.durationMs - r.summarizerMs
    const verify = await engine.verify(conversationId)
    if (!verify.ok) throw new Error(`invariants violated: ${verify.problems.join('; ')}`)
    await engine.close()
    rmSync(dir, { recursive: true, force: true })
    const depths = Object.entries(r.condensedPasses).map(([d, c]) => `d${d}:${c}`).join(' ')
    results.compact.push({ n, passes, leafPasses: r.leafPasses, condensedPasses: r.condensedPasses, wallMs: wall, sweepMs: r.durationMs, summarizerMs: r.summarizerMs, bookkeepingMs: bookkeeping, bookkeepingMsPerPass: bookkeeping / passes, maxEventLoopDelayMs: maxDelay, tokensBefore: r.tokensBefore, tokensAfter: r.tokensAfter })
    rows.push([n.toLocaleString('en-US'), `${r.leafPasses} + ${depths}`, wall.toFixed(0), r.summarizerMs.toFixed(0), bookkeeping.toFixed(0), (bookkeeping / passes).toFixed(2), maxDelay.toFixed(1), `${r.tokensBefore.toLocaleString('en-US')} → ${r.tokensAfter.toLocaleString('en-US')}`])
  }
  table('compact (full sweep, stub summarizer, default config)', ['N', 'passes (leaf + condensed)', 'wall ms', 'summarizer ms', 'bookkeeping ms', 'bookkeeping ms/pass', 'max loop delay ms', 'tokens'], rows)
}

function percentile(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]
}

/** Times `runs` assemblies; `before(i)`, when given, runs (untimed) before each one. */
async function timeAssemble(engine, conversationId, runs, before) {
  const times = []
  let last
  const [, maxDelay] = await withLoopDelay(async () => {
    for (let i = 0; i < runs; i++) {
      if (before) await before(i)
      const t0 = process.hrtime.bigint()
      last = await engine.assemble(conversationId, { tokenBudget: 128000 })
      times.push(ms(process.hrtime.bigint() - t0))
    }
  })
  times.sort((a, b) => a - b)
  return { median: percentile(times, 50), p99: percentile(times, 99), maxDelay, result: last }
}

async function benchAssemble() {
  results.assemble = []
  const rows = []
  const stub = async (_p, r) => `STUB ${r.kind} d${r.depth} of ${r.inputCount} inputs.\nExpand for details about: stub.`
  for (const n of sizes) {
    const dir = tmp()
    const engine = await LcmEngine.open({ dbPath: join(dir, 'assemble.db'), maxSweepIterations: 1_000_000, sweepDeadlineMs: 3_600_000 })
    const messages = conversation(n, 31)
    let conversationId = 0
    for (let i = 0; i < n; i += 1000) ({ conversationId } = await engine.ingest({ sessionId: 'a' }, messages.slice(i, i + 1000)))
    const record = (state, t) => {
      const s = t.result.stats
      results.assemble.push({ n, state, medianMs: t.median, p99Ms: t.p99, maxEventLoopDelayMs: t.maxDelay, liveItems: s.totalContextItems, emitted: t.result.messages.length, estimatedTokens: t.result.estimatedTokens })
      rows.push([n.toLocaleString('en-US'), state, s.totalContextItems.toLocaleString('en-US'), t.result.messages.length, t.result.estimatedTokens.toLocaleString('en-US'), t.median.toFixed(3), t.p99.toFixed(3), t.maxDelay.toFixed(1)])
    }
    if (n === Math.max(...sizes)) record('uncompacted', await timeAssemble(engine, conversationId, 50))
    await engine.compact(conversationId, stub, { tokenBudget: 128000, force: true })
    record('compacted', await timeAssemble(engine, conversationId, 300))
    await engine.close()
    rmSync(dir, { recursive: true, force: true })
  }
  table('assemble (128k budget)', ['N', 'state', 'live items', 'messages out', 'tokens out', 'median ms', 'p99 ms', 'max loop delay ms'], rows)
}

async function benchGrep() {
  results.grep = []
  const rows = []
  const n = Math.max(...sizes)
  const dir = tmp()
  const engine = await LcmEngine.open({ dbPath: join(dir, 'grep.db'), maxSweepIterations: 1_000_000, sweepDeadlineMs: 3_600_000 })
  const messages = conversation(n, 47)
  let conversationId = 0
  for (let i = 0; i < n; i += 1000) ({ conversationId } = await engine.ingest({ sessionId: 'g' }, messages.slice(i, i + 1000)))
  const stub = async (_p, r) => `STUB ${r.kind} d${r.depth} of ${r.inputCount} inputs about migration and schema.\nExpand for details about: stub.`
  await engine.compact(conversationId, stub, { tokenBudget: 128000, force: true })
  /** @type {[string, import('../index.js').GrepOptions, null?][]} */
  const cases = [
    ['fts, common word', { query: 'migration' }],
    ['fts, common word, relevance', { query: 'migration', sort: 'relevance' }],
    ['fts, two words', { query: 'ENOENT timeout' }],
    ['fts, phrase', { query: '"database index"' }],
    ['fts, absent word', { query: 'zzzneedle' }],
    ['fts, all conversations', { query: 'migration' }, null],
    ['like, substring', { query: 'src/db/store.rs', mode: 'like' }],
    ['like, absent (full scan)', { query: 'zzzneedle', mode: 'like' }],
    ['CJK (like, full scan)', { query: '検索機能' }],
    ['regex, frequent', { query: 'v\\d+\\.\\d+\\.\\d+', mode: 'regex' }],
    ['regex, absent (full scan)', { query: 'needle\\d{3}', mode: 'regex' }],
  ]
  for (const [name, options, scope] of cases) {
    const times = []
    let last
    const runs = /full scan/.test(name) ? 10 : 30
    const [, maxDelay] = await withLoopDelay(async () => {
      for (let i = 0; i < runs; i++) {
        const t0 = process.hrtime.bigint()
        last = await engine.grep(scope === null ? null : conversationId, options)
        times.push(ms(process.hrtime.bigint() - t0))
      }
    })
    times.sort((a, b) => a - b)
    const by = Object.values(last.searchedBy).join('/')
    results.grep.push({ n, name, options, medianMs: percentile(times, 50), p99Ms: percentile(times, 99), maxEventLoopDelayMs: maxDelay, hits: last.hits.length, searchedBy: last.searchedBy })
    rows.push([name, by, last.hits.length, percentile(times, 50).toFixed(2), percentile(times, 99).toFixed(2), maxDelay.toFixed(1)])
  }
  await engine.close()
  rmSync(dir, { recursive: true, force: true })
  table(`grep (${n.toLocaleString('en-US')} messages, compacted, scope both, limit 50)`, ['query', 'searched by', 'hits', 'median ms', 'p99 ms', 'max loop delay ms'], rows)
}

/**
 * Bounded sweeps, as a host runs them (a turn's maintenance, a preflight compaction): the
 * default `maxSweepIterations` (12 passes a sweep) over an uncompacted conversation, the
 * first sweeps only. The fixed cost of each sweep is spread over 12 passes.
 */
async function benchBoundedSweeps() {
  results.bounded = []
  const rows = []
  const stub = async (_prompt, r) => `STUB ${r.kind} d${r.depth} summary of ${r.inputCount} inputs.\nExpand for details about: stub.`
  for (const n of sizes) {
    const dir = tmp()
    const engine = await LcmEngine.open({ dbPath: join(dir, 'bounded.db') })
    const messages = conversation(n, 29)
    let conversationId = 0
    for (let i = 0; i < n; i += 1000) ({ conversationId } = await engine.ingest({ sessionId: 'b' }, messages.slice(i, i + 1000)))
    const sweeps = 8
    let passes = 0
    let bookkeeping = 0
    let maxDelay = 0
    for (let s = 0; s < sweeps; s++) {
      const [r, delay] = await withLoopDelay(() => engine.compact(conversationId, stub, { tokenBudget: 128000, force: true }))
      passes += r.leafPasses + Object.values(r.condensedPasses).reduce((a, b) => a + b, 0)
      bookkeeping += r.durationMs - r.summarizerMs
      maxDelay = Math.max(maxDelay, delay)
    }
    await engine.close()
    rmSync(dir, { recursive: true, force: true })
    results.bounded.push({ n, sweeps, passes, bookkeepingMs: bookkeeping, bookkeepingMsPerPass: bookkeeping / passes, maxEventLoopDelayMs: maxDelay })
    rows.push([n.toLocaleString('en-US'), sweeps, passes, bookkeeping.toFixed(0), (bookkeeping / passes).toFixed(2), maxDelay.toFixed(1)])
  }
  table('compact, bounded sweeps (default maxSweepIterations 12, first sweeps of an uncompacted conversation, stub summarizer)', ['N', 'sweeps', 'passes', 'bookkeeping ms', 'bookkeeping ms/pass', 'max loop delay ms'], rows)
}

/**
 * Assemble over wide live contexts: 250 and 1,000 live items, as raw messages (a long fresh
 * history) and as leaves that were never condensed (a condensation fanout nothing reaches).
 * Timed back to back; right after an ingest into another conversation (the context stays the
 * same); right after another engine's commit on the file (nothing rendered earlier is reused);
 * and as in a host's turn, right after one new message of its own.
 */
async function benchWideAssemble() {
  results.wide = []
  const rows = []
  const stub = async (_p, r) => `STUB ${r.kind} d${r.depth} of ${r.inputCount} inputs.\nExpand for details about: stub.`
  for (const items of [250, 1000]) {
    for (const shape of ['raw messages', 'leaves + tail']) {
      const dir = tmp()
      const leaves = shape !== 'raw messages'
      const engine = await LcmEngine.open({
        dbPath: join(dir, 'wide.db'),
        maxSweepIterations: 1_000_000,
        sweepDeadlineMs: 3_600_000,
        // Leaves of about 4 messages each, never condensed.
        leafChunkTokens: 1500,
        leafMinFanout: 1_000_000,
        condensedMinFanout: 1_000_000,
        freshTailCount: 32,
      })
      const n = leaves ? items * 4 : items
      const messages = conversation(n, 37)
      let conversationId = 0
      for (let i = 0; i < n; i += 1000) ({ conversationId } = await engine.ingest({ sessionId: 'w' }, messages.slice(i, i + 1000)))
      if (leaves) await engine.compact(conversationId, stub, { tokenBudget: 1_000_000_000, force: true })
      const t = await timeAssemble(engine, conversationId, 200)
      const turn = (i) => engine.ingest({ sessionId: 'w-other' }, [{ role: 'user', content: `turn ${i}` }])
      const w = await timeAssemble(engine, conversationId, 200, turn)
      // Another engine on the file commits before each call: nothing rendered earlier may be
      // reused (the cost of an assembly that renders every message).
      const other = await LcmEngine.open({ dbPath: join(dir, 'wide.db') })
      const elsewhere = (i) => other.ingest({ sessionId: 'w-elsewhere' }, [{ role: 'user', content: `elsewhere ${i}` }])
      const u = await timeAssemble(engine, conversationId, 200, elsewhere)
      await other.close()
      // A host's turn: one new message in this conversation before each call (last: it grows).
      const own = (i) => engine.ingest({ sessionId: 'w' }, [{ role: 'user', content: `next question ${i}` }])
      const h = await timeAssemble(engine, conversationId, 200, own)
      await engine.close()
      rmSync(dir, { recursive: true, force: true })
      const s = t.result.stats
      results.wide.push({
        target: items, shape, messages: n, liveItems: s.totalContextItems, medianMs: t.median, p99Ms: t.p99, maxEventLoopDelayMs: t.maxDelay,
        afterWriteMedianMs: w.median, afterWriteP99Ms: w.p99, afterOwnMessageMedianMs: h.median, afterOtherEngineMedianMs: u.median,
      })
      rows.push([items, shape, n.toLocaleString('en-US'), s.totalContextItems.toLocaleString('en-US'), t.median.toFixed(3), t.p99.toFixed(3), t.maxDelay.toFixed(1), w.median.toFixed(3), w.p99.toFixed(3), h.median.toFixed(3), u.median.toFixed(3)])
    }
  }
  table('assemble over wide live contexts (128k budget)', ['target items', 'shape', 'messages', 'live items', 'median ms', 'p99 ms', 'max loop delay ms', 'after a write: median ms', 'p99 ms', 'after a message of its own: median ms', 'after another engine\'s write: median ms'], rows)
}

/**
 * The event loop during lcm-native calls against a plain-JS baseline doing the same timers and
 * JSON work in the same process: single-message ingest (one call per message) and a
 * compaction whose summarizer answers after 30 ms.
 */
async function benchLoopBaseline(load) {
  results.loop ??= []
  const rows = []
  const n = 2000
  // `loaded`: one child process per core spinning a CPU-bound loop the whole time, so that
  // Node's thread, libuv's pool and the engine's threads compete for the cores.
  const burners = load === 'loaded' ? cpus().map(() => spawn(process.execPath, ['-e', 'for (;;) Math.sqrt(Math.random())'], { stdio: 'ignore' })) : []
  const messages = conversation(n, 41)
  // Baseline: what a JS store would do per message on Node's thread (serialise it, hand it to
  // an async write, wait), with no native work at all.
  const store = new Map()
  const [, baseline] = await withLoopDelay(async () => {
    for (let i = 0; i < n; i++) {
      const body = JSON.stringify(messages[i])
      await new Promise((r) => setImmediate(r))
      store.set(i, JSON.parse(body))
    }
  })
  rows.push(['JS baseline: serialise + async hop per message', n, baseline.toFixed(1)])
  results.loop.push({ load, case: 'baseline-ingest', n, maxEventLoopDelayMs: baseline })
  const dir = tmp()
  const engine = await LcmEngine.open({ dbPath: join(dir, 'loop.db') })
  let conversationId = 0
  const [, ingestDelay] = await withLoopDelay(async () => {
    for (let i = 0; i < n; i++) ({ conversationId } = await engine.ingest({ sessionId: 'l' }, [messages[i]]))
  })
  rows.push(['lcm-native ingest, one message per call', n, ingestDelay.toFixed(1)])
  results.loop.push({ load, case: 'ingest-single', n, maxEventLoopDelayMs: ingestDelay })
  const slow = async (_p, r) => {
    await new Promise((res) => setTimeout(res, 30))
    return `STUB ${r.kind} d${r.depth} of ${r.inputCount} inputs.\nExpand for details about: stub.`
  }
  const [, compactDelay] = await withLoopDelay(() => engine.compact(conversationId, slow, { tokenBudget: 16000, force: true }))
  rows.push(['lcm-native compact, summarizer answering after 30 ms', n, compactDelay.toFixed(1)])
  results.loop.push({ load, case: 'compact-30ms-summarizer', n, maxEventLoopDelayMs: compactDelay })
  const slowBaseline = async () => {
    for (let i = 0; i < 12; i++) {
      await new Promise((res) => setTimeout(res, 30))
      JSON.parse(JSON.stringify(messages.slice(i * 20, i * 20 + 20)))
    }
  }
  const [, slowDelay] = await withLoopDelay(slowBaseline)
  rows.push(['JS baseline: 12 × (30 ms timer + JSON of 20 messages)', 240, slowDelay.toFixed(1)])
  results.loop.push({ load, case: 'baseline-timers', n: 240, maxEventLoopDelayMs: slowDelay })
  await engine.close()
  for (const b of burners) b.kill()
  rmSync(dir, { recursive: true, force: true })
  table(`event-loop delay (${load}): lcm-native calls and a plain-JS baseline in the same process`, ['case', 'messages', 'max loop delay ms'], rows)
}

if (only.includes('ingest')) await benchIngest()
if (only.includes('migrate')) await benchMigrate()
if (only.includes('compact')) await benchCompact()
if (only.includes('assemble')) await benchAssemble()
if (only.includes('grep')) await benchGrep()
if (only.includes('bounded')) await benchBoundedSweeps()
if (only.includes('wide')) await benchWideAssemble()
if (only.includes('loop')) {
  await benchLoopBaseline('quiet')
  await benchLoopBaseline('loaded')
}

results.finishedAt = new Date().toISOString()
mkdirSync(dirname(outFile), { recursive: true })
writeFileSync(outFile, JSON.stringify(results, null, 2))
console.log(`\nwrote ${outFile}`)
