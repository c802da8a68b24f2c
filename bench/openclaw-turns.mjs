// @ts-check
// Per-turn cost of lcm-native and of lossless-claw 1.x inside the same OpenClaw 2026.9.6 (the
// e2e harness: Node 24, the Gateway, the fake model on 127.0.0.1). One database per history size
// is seeded with that many messages (lcm-native's engine writes the schema both read, then
// compacts it offline as a long-lived session would be); the context-engine slot then alternates
// between the two plugins, one Gateway per phase, the same turns on the same session.
// Reported per turn: the whole turn (the `openclaw agent` command's wall clock), the Gateway
// process's CPU time during the turn (/proc: utime + stime, every thread of the process), and for
// lcm-native its own calls as it times them (LCM_NATIVE_TIMINGS), `maintain` included.
//
//   node bench/openclaw-turns.mjs [--history 2000,10000] [--turns 6] [--rounds 2] [--plugins lcm-native]
//
// Needs ../shared/vendor/lossless-claw (the oracle's tarball). Takes about 6 minutes.

import { readFileSync } from 'node:fs'
import { join } from 'node:path'

import { ROOT, median, readTimings } from '../__test__/openclaw/e2e-lib.mjs'
import { seedHistory } from '../__test__/openclaw/e2e-host.mjs'
import { installLosslessClaw, losslessClawTarball } from '../__test__/openclaw/e2e-interop.mjs'
import { startFakeModel } from '../__test__/openclaw/fake-model.mjs'
import { ensureHost, installPlugin, makeRunDir, packPlugin, startGateway, stopGateway, turn, writeConfig } from '../__test__/openclaw/harness.mjs'

const arg = (/** @type {string} */ name, /** @type {string} */ dflt) => {
  const i = process.argv.indexOf(name)
  return i > 0 ? process.argv[i + 1] : dflt
}
const histories = arg('--history', '2000,10000').split(',').map(Number)
const turnsPerPhase = Number(arg('--turns', '6'))
const rounds = Number(arg('--rounds', '2'))
/** `--plugins lcm-native` measures lcm-native alone. */
const plugins = /** @type {('lossless-claw' | 'lcm-native')[]} */ (arg('--plugins', 'lossless-claw,lcm-native').split(','))

/** CPU seconds (user + system) a process has used so far. @param {number} pid */
function cpuSeconds(pid) {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  return (Number(fields[11]) + Number(fields[12])) / 100
}

const pct = (/** @type {number[]} */ xs, /** @type {number} */ p) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))]
const fmt = (/** @type {number[]} */ xs) => (xs.length ? `${median(xs).toFixed(1)} (p90 ${pct(xs, 0.9).toFixed(1)})` : '–')

async function main() {
  const lc = losslessClawTarball()
  if (!lc) throw new Error('lossless-claw tarball not found beside the project (../shared/vendor/lossless-claw)')
  const host = await ensureHost()
  const run = await makeRunDir(host)
  const fake = await startFakeModel()
  const timings = join(run.dir, 'timings.jsonl')
  run.env.LCM_NATIVE_TIMINGS = timings
  await installLosslessClaw(run, lc)
  await installPlugin(run, await packPlugin(ROOT, join(run.dir, 'pack')))
  const config = { freshTailCount: 4, leafChunkTokens: 1500 }
  /** @type {Record<string, { turnMs: number[], cpuMs: number[], calls: Record<string, number[]> }>} */
  const results = {}
  for (const n of histories) {
    const key = `agent:main:explicit:bench${n}`
    await seedHistory(join(run.state, 'lcm.db'), key, n)
    for (let round = 0; round < rounds; round++) {
      for (const slot of plugins) {
        for (const pluginId of ['lossless-claw', 'lcm-native']) {
          writeConfig(run, { port: fake.port, slot, pluginId, enabled: pluginId === slot, pluginConfig: config, contextWindow: 64_000 })
        }
        const gw = await startGateway(run)
        const pid = /** @type {number} */ (gw.proc.pid)
        const r = (results[`${slot} @ ${n}`] ??= { turnMs: [], cpuMs: [], calls: {} })
        const seen = readTimings(timings).length
        // The first turn of a Gateway warms it (module loads, the database opening): not counted.
        for (let i = 0; i <= turnsPerPhase; i++) {
          const cpu = cpuSeconds(pid)
          const t = await turn(run, { sessionId: `bench${n}`, message: `bench turn ${round}.${i}: what about module-${i}?` })
          if (t.code !== 0) throw new Error(`${slot}: turn failed: ${t.stderr.slice(-800)}`)
          // Let background work (maintenance) finish inside the measured turn's CPU figure.
          await new Promise((done) => setTimeout(done, 300))
          if (i === 0) continue
          r.turnMs.push(t.ms)
          r.cpuMs.push((cpuSeconds(pid) - cpu) * 1000)
        }
        await stopGateway(gw)
        for (const line of readTimings(timings).slice(seen)) {
          if (line.sessionKey !== key) continue
          ;(r.calls[line.op] ??= []).push(line.ms)
        }
        console.log(`${slot} @ ${n}: turn ${fmt(r.turnMs)} ms, gateway CPU ${fmt(r.cpuMs)} ms`)
      }
    }
  }
  await fake.close()
  console.log('\n| plugin @ stored messages | turns | whole turn ms, median (p90) | Gateway CPU ms per turn, median (p90) | lcm-native calls per turn, median ms |')
  console.log('|---|--:|--:|--:|---|')
  for (const [name, r] of Object.entries(results)) {
    const calls = Object.entries(r.calls).map(([op, xs]) => `${op} ${median(xs).toFixed(1)} (n=${xs.length})`).join(', ')
    console.log(`| ${name} | ${r.turnMs.length} | ${fmt(r.turnMs)} | ${fmt(r.cpuMs)} | ${calls || '– (not timed by lossless-claw)'} |`)
  }
  console.log(`\nrun directory: ${run.dir}`)
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
