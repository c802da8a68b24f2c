// @ts-check
'use strict'
// Process-wide state. OpenClaw evaluates a plugin module several times per process (tools and
// engines in different module instances, a new engine object per turn), so everything that
// must exist once lives on globalThis: the loaded addon, one open engine per database file,
// work in flight, and notes of what was already logged.

const { mkdirSync } = require('node:fs')
const { createHash } = require('node:crypto')
const { dirname, join } = require('node:path')

const { isDatabaseUrl, shownDatabase, stateDir } = require('./config.cjs')
const { BUDGET_LIMITS, SessionMap, sessionMap } = require('./session-maps.cjs')

const KEY = Symbol.for('lcm-native.openclaw.shared')

/**
 * @typedef {import('../index.js').LcmEngine} LcmEngine
 * @typedef {typeof import('../index.js')} Addon
 * @typedef {{ info: (m: string) => void, warn: (m: string) => void, error: (m: string) => void, debug?: (m: string) => void }} Logger
 * @typedef {object} Shared
 * @property {Addon | undefined} addon
 * @property {Map<string, Promise<LcmEngine>>} engines     by database path
 * @property {Map<string, string>} [engineOptions]        the options each of them was opened with (JSON)
 * @property {number} [liveInstances]                    plugin instances registered in full and not yet disposed
 * @property {Set<string>} logged                          keys of messages logged once
 * @property {Set<Promise<unknown>>} inflight               background work (maintenance)
 * @property {Map<string, number>} budgets                  last token budget seen per session
 * @property {Map<string, number>} turnBudgets              smallest assemble budget of the turn in progress, per session
 * @property {Map<string, number>} historyBudgets           that budget of the last committed turn, per session
 * @property {{ unusableModels?: Map<string, string> }} memory  the summary models the host could not use (plugin/summarizer.cjs)
 * @property {boolean} exitHook
 * @property {Set<LcmEngine>} [open]                     engines whose open finished (closed at exit)
 * @property {Set<string>} [drained]                     database files whose spool was drained once
 * @property {Map<string, AbortController>} [maintaining]  background maintenance in flight, by session
 * @property {Set<string>} [drainingNow]                 database files whose spool this process is draining
 * @property {Map<string, { text: string, excerpt: string, at: number }>} [oversizedPrompts]  pending prompts shown as excerpts, by session
 * @property {Map<string, number>} [promptBudgets]       prompt budget (history and prompt) last seen per session
 * @property {number} [lastPromptBudget]                 that budget last seen in any session
 * @property {Map<string, import('../panel/operations.cjs').LastAssembly>} [lastAssemblies]  newest assembly per session, for the Control UI panel
 */

/** @returns {Shared} */
function shared() {
  const g = /** @type {Record<symbol, Shared>} */ (/** @type {unknown} */ (globalThis))
  g[KEY] ??= {
    addon: undefined,
    engines: new Map(),
    logged: new Set(),
    inflight: new Set(),
    // Per session for as long as the process runs: bounded, so that a gateway's memory does
    // not grow with every session it has seen.
    budgets: new SessionMap(BUDGET_LIMITS),
    turnBudgets: new SessionMap(BUDGET_LIMITS),
    historyBudgets: new SessionMap(BUDGET_LIMITS),
    memory: {},
    exitHook: false,
  }
  return g[KEY]
}

/** The newest assembly's stats per session (a few hundred bytes each), for the Control UI panel. */
const ASSEMBLY_LIMITS = { maxEntries: 1024, maxBytes: 1024 * 1024, sizeOf: () => 512 }

/** @returns {Map<string, import('../panel/operations.cjs').LastAssembly>} */
const lastAssemblies = () => sessionMap(shared(), 'lastAssemblies', ASSEMBLY_LIMITS)

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
 * not cached: the next call tries again (a busy or briefly unavailable file). Options that
 * differ from those it was opened with (a plugin config reloaded by a host that did not dispose
 * the plugin first) open it anew; the old one closes once background work has settled.
 * @param {string} dbPath @param {Record<string, unknown>} options
 * @returns {Promise<LcmEngine>}
 */
function engineFor(dbPath, options) {
  const s = shared()
  const wanted = JSON.stringify(options)
  const opened = (s.engineOptions ??= new Map())
  let open = s.engines.get(dbPath)
  if (open && opened.get(dbPath) !== wanted) {
    const old = open
    s.engines.delete(dbPath)
    open = undefined
    void settleInflight(DISPOSE_BUDGET_MS).then(() => closeEngine(old))
  }
  if (!open) {
    open = (async () => {
      if (!isDatabaseUrl(dbPath)) mkdirSync(dirname(dbPath), { recursive: true })
      const engine = await addon().LcmEngine.open({ ...options, dbPath })
      ;(s.open ??= new Set()).add(engine)
      return engine
    })()
    s.engines.set(dbPath, open)
    opened.set(dbPath, wanted)
    open.catch(() => {
      if (s.engines.get(dbPath) === open) s.engines.delete(dbPath)
    })
    if (!s.exitHook) {
      s.exitHook = true
      // Close (checkpointing the log into the file) when Node runs out of work, and at
      // `process.exit()`, which hosts such as `openclaw agent` end with and which skips
      // `beforeExit`: there only synchronous code runs, so the engines close on this thread.
      // One listener each for the whole process: room is made for it, so that a host that
      // already holds Node's default ten (OpenClaw does) gets no leak warning from this one.
      for (const event of ['beforeExit', 'exit']) {
        const max = process.getMaxListeners()
        if (max !== 0 && process.listenerCount(event) >= max) process.setMaxListeners(max + 1)
      }
      process.once('beforeExit', () => void closeAll())
      process.once('exit', closeAllNow)
    }
  }
  return open
}

/** Closes an engine whose open may still be under way or have failed. @param {Promise<LcmEngine>} open */
async function closeEngine(open) {
  try {
    const engine = await open
    shared().open?.delete(engine)
    await engine.close()
  } catch {
    // An open that failed has nothing to close.
  }
}

/**
 * How long disposal waits for background work (maintenance) after asking it to stop, before
 * it closes the engines: within OpenClaw's shared cleanup budget of 5 s for a plugin instance.
 */
const DISPOSE_BUDGET_MS = 3000

/**
 * The plugin instance is being retired (a config reload, a disable, the Gateway stopping):
 * background maintenance is asked to stop after its current pass, waited for (bounded), and
 * every engine is closed, so that the next registration opens them with its own options and
 * nothing of this one keeps running. Returns what it did, for the log.
 * @returns {Promise<{ engines: number, unfinished: number, ms: number }>}
 */
async function disposeAll() {
  const started = Date.now()
  const s = shared()
  for (const controller of s.maintaining?.values() ?? []) controller.abort()
  await settleInflight(DISPOSE_BUDGET_MS)
  const unfinished = s.inflight.size
  const engines = s.engines.size
  await closeAll()
  s.drained?.clear()
  return { engines, unfinished, ms: Date.now() - started }
}

/** Closes every open engine (tests; process end). */
async function closeAll() {
  const s = shared()
  const engines = [...s.engines.values()]
  s.engines.clear()
  s.engineOptions?.clear()
  await Promise.allSettled(engines.map(closeEngine))
  s.open?.clear()
}

/** Closes every engine whose open has finished, synchronously (the process `exit` event). */
function closeAllNow() {
  const s = shared()
  for (const engine of s.open ?? []) {
    try {
      engine.closeSync()
    } catch {
      // Exiting anyway: the log stays beside the file and SQLite replays it at the next open.
    }
  }
  s.open?.clear()
  s.engines.clear()
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

/**
 * Waits for tracked work (or the given part of it), at most `ms`.
 * @param {number} ms @param {Promise<unknown>[]} [works]
 */
async function settleInflight(ms, works) {
  const s = shared()
  const waiting = works ?? [...s.inflight]
  if (waiting.length === 0) return
  /** @type {ReturnType<typeof setTimeout> | undefined} */
  let timer
  const limit = new Promise((resolve) => {
    timer = setTimeout(resolve, ms)
    timer.unref?.()
  })
  await Promise.race([Promise.allSettled(waiting), limit])
  clearTimeout(timer)
}

// A turn the database could not take (busy past every retry, disk full, a server out of
// reach) is kept in a spool and stored at the next opportunity, so that commitTurn never has to
// fail the host's turn and no turn is lost. The engine owns the spool's format, its drain lock
// and its drain (src/spool/); the plugin only names it after the database.

/** @param {string} dbPath */
const spoolPath = (dbPath) => `${spoolBase(dbPath)}.lcm-native-pending.jsonl`

/** Where a drain sets aside a turn that never stores. @param {string} dbPath */
const heldPath = (dbPath) => `${spoolBase(dbPath)}.lcm-native-held.jsonl`

/** A URL as WHATWG's parser reads it, its password left out (null when it does not parse). @param {string} url */
function withoutUrlPassword(url) {
  try {
    const u = new URL(url)
    u.password = ''
    return u.href
  } catch {
    return null
  }
}

/**
 * What the spool files of a database are named after: the file itself, or for a PostgreSQL
 * database a name in the state directory (`lcm-native-spool/`) made of its server, database
 * and schema and a hash of its URL without the password (which is never written to a name).
 * @param {string} dbPath
 */
function spoolBase(dbPath) {
  if (!isDatabaseUrl(dbPath)) return dbPath
  // Named from what may be shown (no piece of a password, whatever the URL), and for a
  // well-formed URL as before the password was masked, so that turns spooled by an earlier
  // version are found.
  const shown = shownDatabase(dbPath)
  // An `@` in a query value (`application_name=a@b`) ends what the masker hides (it cannot
  // tell that `@` from one in a password), so two databases would share a name: such a URL is
  // named from its parsed form, the password taken out.
  const swallowed = !shown.includes('?') && dbPath.indexOf('?') >= 0 && dbPath.indexOf('@') >= 0 && dbPath.indexOf('@') < dbPath.indexOf('?')
  const [base, query = ''] = (swallowed ? withoutUrlPassword(dbPath) ?? shown : shown).split(/\?(.*)/s, 2)
  const withoutPassword = base.replace(':***@', '@')
  const params = new URLSearchParams(query)
  for (const key of [...params.keys()]) if (key.toLowerCase().includes('password')) params.delete(key)
  const url = `${withoutPassword}?${params.toString()}`
  const where = (withoutPassword.split('@').pop() ?? '').replace(/^[a-z]+:\/\//i, '')
  let decoded = where
  try {
    decoded = decodeURIComponent(where)
  } catch {
    // A stray `%`: the name is only for reading.
  }
  const readable = `${decoded}-${params.get('schema') ?? 'lcm'}`.replace(/[^A-Za-z0-9_.-]+/g, '_').slice(-80)
  const dir = join(stateDir(process.env), 'lcm-native-spool')
  mkdirSync(dir, { recursive: true, mode: 0o700 })
  return join(dir, `${readable}-${createHash('sha256').update(url).digest('hex').slice(0, 12)}`)
}

/**
 * A turn as the spool holds it: what `ingest` takes (the engine checks it again when it is
 * stored).
 * @typedef {import('../index.js').SpooledTurn} SpooledTurn
 * @param {string} dbPath @param {SpooledTurn} turn
 */
function spool(dbPath, turn) {
  addon().spoolTurn(spoolBase(dbPath), turn)
}

/**
 * Whether turns are still spooled for a database (its spool file, or files a drain took and
 * did not finish): a new turn then goes after them, not into the database before them.
 * @param {string} dbPath
 */
function spoolPending(dbPath) {
  return addon().spoolWaiting(spoolBase(dbPath))
}

/**
 * Stores the spooled turns of a database through `engine` (in order, each once, one drainer
 * at a time across processes; see `LcmEngine.drainSpool`). Reports each turn set aside
 * (`onHeld`), a stale lock taken over (`onTakeOver`) and what stopped the drain short
 * (`onStopped`). Returns how many were stored.
 * @param {string} dbPath @param {LcmEngine} engine
 * @param {(turn: { advancementKey?: string }, error: string) => void} [onHeld]
 * @param {(why: string) => void} [onTakeOver]
 * @param {(what: string) => void} [onStopped]
 */
async function drainSpool(dbPath, engine, onHeld, onTakeOver, onStopped) {
  const s = shared()
  s.drainingNow ??= new Set()
  if (s.drainingNow.has(dbPath)) return 0
  s.drainingNow.add(dbPath)
  try {
    const r = await engine.drainSpool(spoolBase(dbPath))
    for (const t of r.held) onHeld?.(t, t.error)
    if (r.tookOver) onTakeOver?.(r.tookOver)
    // The turns stay spooled, in order, for the next call: what stopped them is worth a line.
    if (r.stoppedBy) onStopped?.(`${r.stored} stored, ${r.remaining} still spooled: ${r.stoppedBy}`)
    return r.stored
  } finally {
    s.drainingNow.delete(dbPath)
  }
}

module.exports = { addon, closeAll, closeAllNow, disposeAll, drainSpool, engineFor, lastAssemblies, logOnce, settleInflight, shared, heldPath, spool, spoolBase, spoolPath, spoolPending, track }
