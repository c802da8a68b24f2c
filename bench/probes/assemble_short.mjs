// Assembly of a conversation of many one-word messages at a 128k budget (issue #33 finding 4):
// the messages' stored token counts leave out what each costs once rendered, so the first cut
// keeps more than fits and the rest must be evicted. For each size: one assembly's wall time
// (best of three), and how long an ingest into another session took when it was started
// while that assembly ran.
//
//   node bench/probes/assemble_short.mjs [path/to/addon.node] [--sizes 24000,25000,...]
import { mkdtempSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'

const require = createRequire(import.meta.url)
const args = process.argv.slice(2)
const sizesAt = args.indexOf('--sizes')
const sizes = sizesAt >= 0 ? args[sizesAt + 1].split(',').map(Number) : [24_000, 25_000, 26_000, 28_000, 100_000, 400_000]
const addon = args.find((a, i) => !a.startsWith('--') && args[i - 1] !== '--sizes')
const { LcmEngine } = require(addon ? resolve(addon) : '../../index.js')
const ms = (t) => Number(process.hrtime.bigint() - t) / 1e6

const dir = mkdtempSync(join(tmpdir(), 'lcm-assemble-short-'))
try {
  console.log('| one-word messages | assemble at 128k (ms, best of 3) | kept items | ingest elsewhere meanwhile (ms) |')
  console.log('|---:|---:|---:|---:|')
  for (const n of sizes) {
    const engine = await LcmEngine.open({ dbPath: join(dir, `a${n}.db`), freshTailCount: 32 })
    for (let i = 0; i < n; i += 5000) {
      const batch = []
      for (let j = i; j < Math.min(n, i + 5000); j++) batch.push({ role: j % 2 ? 'assistant' : 'user', content: `w${j}` })
      await engine.ingest({ sessionId: 'short' }, batch)
    }
    const cid = (await engine.findConversation({ sessionId: 'short' })).conversationId
    let best = Infinity
    let kept = 0
    for (let run = 0; run < 3; run++) {
      const t = process.hrtime.bigint()
      const a = await engine.assemble(cid, { tokenBudget: 128_000 })
      best = Math.min(best, ms(t))
      kept = a.stats.keptItems
    }
    // An ingest into another session, started while an assembly runs.
    const running = engine.assemble(cid, { tokenBudget: 128_000 })
    const t = process.hrtime.bigint()
    await engine.ingest({ sessionId: 'other' }, [{ role: 'user', content: 'meanwhile' }])
    const waited = ms(t)
    await running
    console.log(`| ${n.toLocaleString('en-US')} | ${best.toFixed(1)} | ${kept.toLocaleString('en-US')} | ${waited.toFixed(1)} |`)
    await engine.close()
  }
} finally {
  rmSync(dir, { recursive: true, force: true })
}
