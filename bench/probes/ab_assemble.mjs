// Two builds of the addon in one Node process, alternating, on the same database files: the
// before/after comparisons of bench/RESULTS.md that the machine's drifting speed would blur
// across separate runs.
//
//   A=/path/before.node B=/path/after.node node bench/probes/ab_assemble.mjs <db>... [--turn]
//
// Each file is copied twice (one copy per build); conversation 1 is assembled with a 128k
// budget in rounds of 25 calls, the builds taking turns to go first. With --turn each call
// comes right after an ingest of one message into another conversation, as in a host's turn.
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { basename, join } from 'node:path'

const require = createRequire(import.meta.url)
const args = process.argv.slice(2)
const turn = args.includes('--turn')
const files = args.filter((a) => a !== '--turn')
if (!process.env.A || !process.env.B || files.length === 0) {
  console.error('usage: A=<before.node> B=<after.node> node bench/probes/ab_assemble.mjs <db>... [--turn]')
  process.exit(2)
}
const builds = { A: require(process.env.A), B: require(process.env.B) }
const median = (ts) => ts.sort((a, b) => a - b)[ts.length >> 1].toFixed(3)
const dir = mkdtempSync(join(tmpdir(), 'lcm-ab-'))
try {
  for (const file of files) {
    const times = { A: [], B: [] }
    const engines = {}
    for (const k of ['A', 'B']) {
      const copy = join(dir, `${k}-${basename(file)}`)
      copyFileSync(file, copy)
      engines[k] = await builds[k].LcmEngine.open({ dbPath: copy })
    }
    for (let round = 0; round < 16; round++) {
      for (const k of round % 2 ? ['A', 'B'] : ['B', 'A']) {
        for (let i = 0; i < 25; i++) {
          if (turn) await engines[k].ingest({ sessionId: 'ab-other' }, [{ role: 'user', content: `turn ${round}.${i}` }])
          const t = process.hrtime.bigint()
          await engines[k].assemble(1, { tokenBudget: 128000 })
          times[k].push(Number(process.hrtime.bigint() - t) / 1e6)
        }
      }
    }
    console.log(`${basename(file)}${turn ? ' (after a write)' : ''}: A ${median(times.A)} ms, B ${median(times.B)} ms`)
    await engines.A.close()
    await engines.B.close()
  }
} finally {
  rmSync(dir, { recursive: true, force: true })
}
