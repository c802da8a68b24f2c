// @ts-check
// What the end-to-end scenarios share: named checks with a summary, SQL on the run's files,
// the gateway logs' fallback lines, the plugin's timing lines, and bounded waits.

import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { existsSync, readFileSync, readdirSync, realpathSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..')
const require = createRequire(import.meta.url)
/** @type {typeof import('../../index.js')} */
export const lcm = require(join(ROOT, 'index.js'))

/** @type {{ name: string, ok: boolean, ms: number, error?: string }[]} */
export const results = []

/** Runs one named check and records its outcome; a failure does not stop the run. @param {string} name @param {() => Promise<void> | void} fn */
export async function check(name, fn) {
  const t = Date.now()
  try {
    await fn()
    results.push({ name, ok: true, ms: Date.now() - t })
    console.log(`  ok   ${name} (${Date.now() - t} ms)`)
  } catch (err) {
    const e = /** @type {Error} */ (err)
    results.push({ name, ok: false, ms: Date.now() - t, error: e.stack ?? String(e) })
    console.log(`  FAIL ${name}\n${String(e.stack ?? e).split('\n').slice(0, 12).map((l) => `       ${l}`).join('\n')}`)
  }
}

/**
 * Rows of a query on an SQLite file (Python's sqlite3: the check reads the file as any other
 * SQLite client would).
 * @param {string} db @param {string} query @returns {any[][]}
 */
export function sql(db, query) {
  const py = 'import json,sqlite3,sys; c=sqlite3.connect("file:"+sys.argv[1]+"?mode=ro", uri=True); print(json.dumps(c.execute(sys.argv[2]).fetchall()))'
  const r = spawnSync('python3', ['-c', py, db, query], { encoding: 'utf8', timeout: 30_000 })
  if (r.status !== 0) throw new Error(`sql failed: ${r.stderr}`)
  return JSON.parse(r.stdout)
}

/** Lines of the given logs that say a turn fell back to the built-in engine. @param {string[]} files */
export const legacyFallbacks = (files) =>
  files
    .filter((f) => existsSync(f))
    .flatMap((f) => readFileSync(f, 'utf8').split('\n'))
    .filter((l) => /degraded to "legacy"|degraded to legacy|quarantin/i.test(l))

/**
 * The plugin's lines in an `LCM_NATIVE_TIMINGS` file (`{ op, sessionKey, ms, … }`).
 * @param {string} file @returns {{ op: string, sessionKey?: string, ms: number, [k: string]: any }[]}
 */
export const readTimings = (file) =>
  existsSync(file) ? readFileSync(file, 'utf8').trim().split('\n').filter(Boolean).map((l) => JSON.parse(l)) : []

/**
 * The turns lcm-native committed, by its timings (each turn's advancement key once): a commit
 * OpenClaw offers again after it was stored answers `duplicate`; one offered again while the first
 * waits in the spool (the database out of reach) is spooled again and stored once by the drain.
 * @param {string} file
 */
export const committedTurns = (file) => {
  const committed = readTimings(file).filter((t) => t.op === 'commitTurn' && t.status === 'committed')
  // A turn the host handed over again (its own retry of a slow commit, while the first sat in
  // the spool) counts once: what each turn stored is checked against the database elsewhere.
  const again = committed.length - new Set(committed.map((t, i) => t.key ?? `#${i}`)).size
  if (again > 0) console.log(`       note: ${again} turn(s) handed over again and committed again (stored once)`)
  return committed.length - again
}

/**
 * Polls `probe` every 500 ms until it returns a truthy value or `ms` pass; returns the last value.
 * @template T @param {() => T} probe @param {number} ms @returns {Promise<T>}
 */
export async function waitFor(probe, ms) {
  const deadline = Date.now() + ms
  let v = probe()
  while (!v && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 500))
    v = probe()
  }
  return v
}

/** The median of numbers. @param {number[]} xs */
export const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]

/**
 * SQLite's `integrity_check` and lcm-native's `verify` of every conversation pass on `db`
 * (opened read-only).
 * @param {string} db
 */
export async function assertSound(db) {
  assert.deepEqual(sql(db, 'PRAGMA integrity_check'), [['ok']])
  const engine = await lcm.LcmEngine.open({ dbPath: db, readOnly: true })
  try {
    for (const c of await engine.conversations()) {
      const report = await engine.verify(c.conversationId)
      assert.ok(report.ok, `conversation ${c.conversationId}: ${JSON.stringify(report).slice(0, 500)}`)
    }
  } finally {
    await engine.close()
  }
}

/** Removes a run directory, or keeps it (and says where) with `E2E_KEEP=1`. @param {{ dir: string }} run */
export function cleanUp(run) {
  if (process.env.E2E_KEEP === '1') {
    console.log(`openclaw e2e: kept ${run.dir}`)
    return
  }
  removeHostLocks(run.dir)
  rmSync(run.dir, { recursive: true, force: true })
}

/**
 * OpenClaw 2026.9 coordinates its SQLite databases through lock files in
 * `/tmp/openclaw-state-locks-<uid>` whatever TMPDIR says, one per database and family
 * (`<family>.<first 8 hex of sha256(the database's real path)>.lock.sqlite`), and leaves them
 * there. Those of a run's databases go with the run.
 * @param {string} dir
 */
function removeHostLocks(dir) {
  const locks = `/tmp/openclaw-state-locks${typeof process.getuid === 'function' ? `-${process.getuid()}` : ''}`
  if (!existsSync(locks)) return
  const hashes = new Set()
  for (const entry of readdirSync(dir, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile() || !/\.(sqlite|db)$/.test(entry.name)) continue
    const real = realpathSync(join(entry.parentPath, entry.name))
    hashes.add(createHash('sha256').update(real).digest('hex').slice(0, 8))
  }
  for (const name of readdirSync(locks)) {
    const hash = /\.([0-9a-f]{8})\.lock\.sqlite(-wal|-shm|-journal)?$/.exec(name)?.[1]
    if (hash && hashes.has(hash)) rmSync(join(locks, name), { force: true })
  }
}
