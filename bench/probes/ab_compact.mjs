// Two builds of the addon alternating on copies of one file: a bounded sweep (4 offline
// passes, forced) from a freshly opened engine, the median of 3 rounds per build.
//
//   A=<before.node> B=<after.node> node bench/probes/ab_compact.mjs <db>

import { copyFileSync, mkdtempSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
const require = createRequire(import.meta.url)
const builds = { A: require(process.env.A), B: require(process.env.B) }
const file = process.argv[2]
const dir = mkdtempSync(join(tmpdir(), 'lcm-abc-'))
const times = { A: [], B: [] }
for (let round = 0; round < 6; round++) {
  for (const k of round % 2 ? ['A', 'B'] : ['B', 'A']) {
    const copy = join(dir, `${k}-${round}.db`)
    copyFileSync(file, copy)
    const e = await builds[k].LcmEngine.open({ dbPath: copy, maxSweepIterations: 4 })
    const t = process.hrtime.bigint()
    const r = await e.compact(1, 'offline', { tokenBudget: 128000, force: true })
    times[k].push(Number(process.hrtime.bigint() - t) / 1e6)
    await e.close()
  }
}
const med = (ts) => ts.sort((a, b) => a - b)[ts.length >> 1].toFixed(1)
console.log(`bounded sweep (4 passes, offline) on ${file}: A ${med(times.A)} ms, B ${med(times.B)} ms`)
rmSync(dir, { recursive: true, force: true })
