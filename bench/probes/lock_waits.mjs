// Lock waits under contention (issue #33 finding 5): another process holds the database's
// write lock for HOLD ms while this one starts WRITES ingests at once (busyTimeoutMs 1000).
// Reported: when each ingest settled and how (the k-th in line should fail after one
// busyTimeoutMs, not k of them), how long an unrelated fs.promises.readFile and dns.lookup
// started meanwhile took (libuv's pool must stay free), and how long close() took with writes
// still queued.
//
//   node bench/probes/lock_waits.mjs [path/to/addon.node]
import { spawn } from 'node:child_process'
import { lookup } from 'node:dns/promises'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { readFile } from 'node:fs/promises'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'

const require = createRequire(import.meta.url)
const addon = process.argv[2]
const { LcmEngine } = require(addon ? resolve(addon) : '../../index.js')
const HOLD = 6000
const WRITES = 6
const BUSY = 1000
const ms = (t) => Math.round(Number(process.hrtime.bigint() - t) / 1e6)

const dir = mkdtempSync(join(tmpdir(), 'lcm-lock-waits-'))
try {
  const dbPath = join(dir, 'lcm.db')
  const setup = await LcmEngine.open({ dbPath })
  await setup.ingest({ sessionId: 'seed' }, [{ role: 'user', content: 'seed' }])
  await setup.close()
  writeFileSync(join(dir, 'other.txt'), 'x')
  const holder = spawn('python3', ['-c', `import sqlite3,sys,time; c=sqlite3.connect(sys.argv[1], isolation_level=None); c.execute("BEGIN IMMEDIATE"); print("locked", flush=True); time.sleep(${HOLD / 1000})`, dbPath])
  await new Promise((r) => holder.stdout.once('data', r))
  const engine = await LcmEngine.open({ dbPath, busyTimeoutMs: BUSY })
  const t0 = process.hrtime.bigint()
  const writes = Array.from({ length: WRITES }, (_, i) =>
    engine.ingest({ sessionId: `w${i}` }, [{ role: 'user', content: `write ${i}` }]).then(
      () => ({ i, at: ms(t0), outcome: 'stored' }),
      (e) => ({ i, at: ms(t0), outcome: e.code }),
    ),
  )
  await new Promise((r) => setTimeout(r, 100))
  const tf = process.hrtime.bigint()
  await readFile(join(dir, 'other.txt'))
  const readMs = ms(tf)
  const td = process.hrtime.bigint()
  await lookup('localhost').catch(() => {})
  const dnsMs = ms(td)
  const settled = await Promise.all(writes)
  const tc = process.hrtime.bigint()
  const more = engine.ingest({ sessionId: 'late' }, [{ role: 'user', content: 'late' }]).catch((e) => e.code)
  await engine.close()
  const closeMs = ms(tc)
  await more
  holder.kill()
  console.log(`busyTimeoutMs ${BUSY}, ${WRITES} writes while another process holds the lock for ${HOLD} ms`)
  console.log(`settled (ms after start): ${settled.map((s) => `${s.at} ${s.outcome}`).join(', ')}`)
  console.log(`fs.promises.readFile meanwhile: ${readMs} ms; dns.lookup: ${dnsMs} ms; close() with a write queued: ${closeMs} ms`)
} finally {
  rmSync(dir, { recursive: true, force: true })
}
