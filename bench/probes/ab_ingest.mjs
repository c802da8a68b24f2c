// Two builds of the addon in one Node process, alternating: per-message ingest cost at the
// per-turn shapes of issue #17 (5 messages per call, and 1), on the benchmark's messages.
//
//   A=/path/before.node B=/path/after.node node bench/probes/ab_ingest.mjs [messages per round]
//
// Each build writes its own fresh file; rounds of 500 messages (by default) alternate which
// build goes first. Prints the median of the rounds' ms per message.
import { mkdtempSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

import { conversation } from '../synth.mjs'

const require = createRequire(import.meta.url)
if (!process.env.A || !process.env.B) {
  console.error('usage: A=<before.node> B=<after.node> node bench/probes/ab_ingest.mjs [messages per round]')
  process.exit(2)
}
const builds = { A: require(process.env.A), B: require(process.env.B) }
const perRound = Number(process.argv[2] ?? 500)
const rounds = 12
const messages = conversation(perRound * rounds, 7)
const median = (ts) => ts.sort((a, b) => a - b)[ts.length >> 1].toFixed(4)
const dir = mkdtempSync(join(tmpdir(), 'lcm-ab-'))
try {
  for (const batch of [5, 1]) {
    const times = { A: [], B: [] }
    const engines = {}
    for (const k of ['A', 'B']) engines[k] = await builds[k].LcmEngine.open({ dbPath: join(dir, `${k}-${batch}.db`) })
    for (let round = 0; round < rounds; round++) {
      const slice = messages.slice(round * perRound, (round + 1) * perRound)
      for (const k of round % 2 ? ['A', 'B'] : ['B', 'A']) {
        const t = process.hrtime.bigint()
        for (let i = 0; i < slice.length; i += batch) await engines[k].ingest({ sessionId: 'ab' }, slice.slice(i, i + batch))
        times[k].push(Number(process.hrtime.bigint() - t) / 1e6 / slice.length)
      }
    }
    for (const k of ['A', 'B']) await engines[k].close()
    console.log(`${batch} per call: A ${median(times.A)} ms/message, B ${median(times.B)} ms/message`)
  }
} finally {
  rmSync(dir, { recursive: true, force: true })
}
