// A spool drain under contention (issue #33 finding 1 and item 7): TURNS turns are spooled
// beside the database, while another process takes the write lock for HOLD ms out of every
// HOLD + GAP. Each drain (as the plugin runs one at a turn) stores what it can and stops at
// the first turn it cannot store; reported: drains needed, each drain's wall time (bounded by
// busyTimeoutMs), the total, and that the turns were stored once and in order.
//
//   node bench/probes/drain_contention.mjs [path/to/addon.node]
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'

const require = createRequire(import.meta.url)
const addon = process.argv[2]
const { LcmEngine } = require(addon ? resolve(addon) : '../../index.js')
const { drainSpool, spool } = require('../../plugin/shared.cjs')
const TURNS = 2000
const HOLD = 300
const GAP = 10
const BUSY = 250
const ms = (t) => Math.round(Number(process.hrtime.bigint() - t) / 1e6)

const dir = mkdtempSync(join(tmpdir(), 'lcm-drain-'))
try {
  const dbPath = join(dir, 'lcm.db')
  const engine = await LcmEngine.open({ dbPath, busyTimeoutMs: BUSY })
  await engine.ingest({ sessionKey: 'agent:main:explicit:d' }, [{ role: 'user', content: 'seed' }])
  for (let i = 0; i < TURNS; i++) {
    spool(dbPath, { target: { sessionKey: 'agent:main:explicit:d' }, messages: [{ role: 'user', content: `turn ${i}` }, { role: 'assistant', content: [{ type: 'text', text: `answer ${i}` }] }], advancementKey: `k${i}` })
  }
  const locker = spawn('python3', ['-c', `import sqlite3,sys,time
c=sqlite3.connect(sys.argv[1], isolation_level=None, timeout=10)
print("ready", flush=True)
while True:
    c.execute("BEGIN IMMEDIATE"); time.sleep(${HOLD / 1000}); c.execute("COMMIT"); time.sleep(${GAP / 1000})`, dbPath])
  await new Promise((r) => locker.stdout.once('data', r))
  const started = process.hrtime.bigint()
  const drains = []
  let stored = 0
  while (stored < TURNS && drains.length < 1000) {
    const t = process.hrtime.bigint()
    stored += await drainSpool(dbPath, engine)
    drains.push(ms(t))
    await new Promise((r) => setTimeout(r, 20)) // the next turn
  }
  const total = ms(started)
  locker.kill()
  const conv = await engine.findConversation({ sessionKey: 'agent:main:explicit:d' })
  const texts = (await engine.messages(conv.conversationId, { limit: 100000 })).filter((m) => m.role === 'user').map((m) => JSON.stringify(m.content))
  const order = texts.slice(1).map((t) => Number(/turn (\d+)/.exec(t)?.[1]))
  const inOrder = order.length === TURNS && order.every((n, i) => n === i)
  await engine.close()
  drains.sort((a, b) => a - b)
  console.log(`${TURNS} spooled turns, the lock held ${HOLD} ms of every ${HOLD + GAP} by another process, busyTimeoutMs ${BUSY}`)
  console.log(`drains: ${drains.length}; each: median ${drains[drains.length >> 1]} ms, max ${drains[drains.length - 1]} ms; all stored in ${total} ms; stored once and in order: ${inOrder}`)
} finally {
  rmSync(dir, { recursive: true, force: true })
}
