// @ts-check
'use strict'
// Process-wide state. OpenClaw evaluates a plugin module several times per process (tools and
// engines in different module instances, a new engine object per turn), so everything that
// must exist once lives on globalThis: the loaded addon, one open engine per database file,
// work in flight, and notes of what was already logged.

const { appendFileSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync } = require('node:fs')
const { dirname } = require('node:path')

const KEY = Symbol.for('lcm-native.openclaw.shared')

/**
 * @typedef {import('../index.js').LcmEngine} LcmEngine
 * @typedef {typeof import('../index.js')} Addon
 * @typedef {{ info: (m: string) => void, warn: (m: string) => void, error: (m: string) => void, debug?: (m: string) => void }} Logger
 * @typedef {object} Shared
 * @property {Addon | undefined} addon
 * @property {Map<string, Promise<LcmEngine>>} engines     by database path
 * @property {Set<string>} logged                          keys of messages logged once
 * @property {Set<Promise<unknown>>} inflight               background work (maintenance)
 * @property {Map<string, number>} budgets                  last token budget seen per session
 * @property {{ modelOverrideRefused?: boolean }} memory
 * @property {boolean} exitHook
 */

/** @returns {Shared} */
function shared() {
  const g = /** @type {Record<symbol, Shared>} */ (/** @type {unknown} */ (globalThis))
  g[KEY] ??= {
    addon: undefined,
    engines: new Map(),
    logged: new Set(),
    inflight: new Set(),
    budgets: new Map(),
    memory: {},
    exitHook: false,
  }
  return g[KEY]
}

/** The addon, loaded on first use (registration stays instant) and once per process. */
function addon() {
  const s = shared()
  s.addon ??= /** @type {Addon} */ (require('../index.js'))
  return s.addon
}

/**
 * Logs a message once per process under `key`.
 * @param {Logger} logger @param {string} key @param {'info' | 'warn' | 'error'} level @param {string} message
 */
function logOnce(logger, key, level, message) {
  const s = shared()
  if (s.logged.has(key)) return
  s.logged.add(key)
  logger[level](message)
}

/**
 * The open engine of a database file, opened (and migrated) on first use. A failed open is
 * not cached: the next call tries again (a busy or briefly unavailable file).
 * @param {string} dbPath @param {Record<string, unknown>} options
 * @returns {Promise<LcmEngine>}
 */
function engineFor(dbPath, options) {
  const s = shared()
  let open = s.engines.get(dbPath)
  if (!open) {
    open = (async () => {
      mkdirSync(dirname(dbPath), { recursive: true })
      return addon().LcmEngine.open({ ...options, dbPath })
    })()
    s.engines.set(dbPath, open)
    open.catch(() => {
      if (s.engines.get(dbPath) === open) s.engines.delete(dbPath)
    })
    if (!s.exitHook) {
      s.exitHook = true
      // Close (checkpointing the log) when Node runs out of work; nothing keeps it alive.
      process.once('beforeExit', () => void closeAll())
    }
  }
  return open
}

/** Closes every open engine (tests; process end). */
async function closeAll() {
  const s = shared()
  const engines = [...s.engines.values()]
  s.engines.clear()
  await Promise.allSettled(engines.map(async (p) => (await p).close()))
}

/**
 * Tracks background work so that `dispose` can wait for it.
 * @template T @param {Promise<T>} work @returns {Promise<T>}
 */
function track(work) {
  const s = shared()
  s.inflight.add(work)
  const done = () => s.inflight.delete(work)
  work.then(done, done)
  return work
}

/** Waits for tracked work, at most `ms`. @param {number} ms */
async function settleInflight(ms) {
  const s = shared()
  if (s.inflight.size === 0) return
  /** @type {ReturnType<typeof setTimeout> | undefined} */
  let timer
  const limit = new Promise((resolve) => {
    timer = setTimeout(resolve, ms)
    timer.unref?.()
  })
  await Promise.race([Promise.allSettled([...s.inflight]), limit])
  clearTimeout(timer)
}

// A turn the database could not take (busy past every retry, disk full) is written to a spool
// file beside it and stored at the next opportunity, so that commitTurn never has to fail the
// host's turn and no turn is lost. Entries carry their advancement key: storing is idempotent.

/** @param {string} dbPath */
const spoolPath = (dbPath) => `${dbPath}.lcm-native-pending.jsonl`

/**
 * @typedef {{ target: { sessionKey?: string, sessionId?: string }, messages: unknown[], advancementKey?: string }} SpooledTurn
 * @param {string} dbPath @param {SpooledTurn} turn
 */
function spool(dbPath, turn) {
  appendFileSync(spoolPath(dbPath), `${JSON.stringify(turn)}\n`, { mode: 0o600 })
}

/**
 * Stores spooled turns; the ones that still fail stay spooled. Returns how many were stored.
 * @param {string} dbPath @param {LcmEngine} engine
 */
async function drainSpool(dbPath, engine) {
  const file = spoolPath(dbPath)
  if (!existsSync(file)) return 0
  // Take the file first: turns spooled meanwhile go to a new one.
  const taken = `${file}.${process.pid}.draining`
  renameSync(file, taken)
  /** @type {SpooledTurn[]} */
  const turns = []
  for (const line of readFileSync(taken, 'utf8').split('\n')) {
    if (line.trim() === '') continue
    try {
      turns.push(JSON.parse(line))
    } catch {
      // A torn last line (a crash while appending) holds no complete turn.
    }
  }
  let stored = 0
  for (const t of turns) {
    try {
      await engine.ingest(/** @type {any} */ (t.target), /** @type {any} */ (t.messages), t.advancementKey ? { advancementKey: t.advancementKey } : undefined)
      stored++
    } catch {
      spool(dbPath, t)
    }
  }
  rmSync(taken, { force: true })
  return stored
}

module.exports = { addon, closeAll, drainSpool, engineFor, logOnce, settleInflight, shared, spool, spoolPath, track }
