// @ts-check
'use strict'
// Process-wide state. OpenClaw evaluates a plugin module several times per process (tools and
// engines in different module instances, a new engine object per turn), so everything that
// must exist once lives on globalThis: the loaded addon, one open engine per database file,
// work in flight, and notes of what was already logged.

const { appendFileSync, closeSync, existsSync, mkdirSync, openSync, readFileSync, readdirSync, renameSync, rmSync, writeFileSync, writeSync } = require('node:fs')
const { createHash } = require('node:crypto')
const { hostname } = require('node:os')
const { basename, dirname, join } = require('node:path')

const { isDatabaseUrl, shownDatabase, stateDir } = require('./config.cjs')
const { asPlainText } = require('./messages.cjs')

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
 * @property {Map<string, number>} turnBudgets              smallest assemble budget of the turn in progress, per session
 * @property {Map<string, number>} historyBudgets           that budget of the last committed turn, per session
 * @property {{ modelOverrideRefused?: boolean }} memory
 * @property {boolean} exitHook
 * @property {Set<LcmEngine>} [open]                     engines whose open finished (closed at exit)
 * @property {number} [drains]                          drains started (names their files)
 * @property {Set<string>} [drained]                     database files whose spool was drained once
 * @property {Map<string, AbortController>} [maintaining]  background maintenance in flight, by session
 * @property {Set<string>} [drainingNow]                 database files whose spool this process is draining
 * @property {Map<string, { text: string, excerpt: string, at: number }>} [oversizedPrompts]  pending prompts shown as excerpts, by session
 * @property {Map<string, number>} [promptBudgets]       prompt budget (history and prompt) last seen per session
 * @property {number} [lastPromptBudget]                 that budget last seen in any session
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
    turnBudgets: new Map(),
    historyBudgets: new Map(),
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
      if (!isDatabaseUrl(dbPath)) mkdirSync(dirname(dbPath), { recursive: true })
      const engine = await addon().LcmEngine.open({ ...options, dbPath })
      ;(s.open ??= new Set()).add(engine)
      return engine
    })()
    s.engines.set(dbPath, open)
    open.catch(() => {
      if (s.engines.get(dbPath) === open) s.engines.delete(dbPath)
    })
    if (!s.exitHook) {
      s.exitHook = true
      // Close (checkpointing the log into the file) when Node runs out of work, and at
      // `process.exit()`, which hosts such as `openclaw agent` end with and which skips
      // `beforeExit`: there only synchronous code runs, so the engines close on this thread.
      process.once('beforeExit', () => void closeAll())
      process.once('exit', closeAllNow)
    }
  }
  return open
}

/** Closes every open engine (tests; process end). */
async function closeAll() {
  const s = shared()
  const engines = [...s.engines.values()]
  s.engines.clear()
  s.open?.clear()
  await Promise.allSettled(engines.map(async (p) => (await p).close()))
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

// A turn the database could not take (busy past every retry, disk full) is written to a spool
// file beside it and stored at the next opportunity, so that commitTurn never has to fail the
// host's turn and no turn is lost. Entries carry their advancement key: storing is idempotent.

/** @param {string} dbPath */
const spoolPath = (dbPath) => `${spoolBase(dbPath)}.lcm-native-pending.jsonl`

/** Where a drain sets aside a turn that never stores. @param {string} dbPath */
const heldPath = (dbPath) => `${spoolBase(dbPath)}.lcm-native-held.jsonl`

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
  const [base, query = ''] = shownDatabase(dbPath).split(/\?(.*)/s, 2)
  const withoutPassword = base.replace(':***@', '@')
  const params = new URLSearchParams(query)
  for (const key of [...params.keys()]) if (key.toLowerCase().includes('password')) params.delete(key)
  const url = `${withoutPassword}?${params.toString()}`
  const where = (withoutPassword.split('@').pop() ?? '').replace(/^[a-z]+:\/\//i, '')
  const readable = `${decodeURIComponent(where)}-${params.get('schema') ?? 'lcm'}`.replace(/[^A-Za-z0-9_.-]+/g, '_').slice(-80)
  const dir = join(stateDir(process.env), 'lcm-native-spool')
  mkdirSync(dir, { recursive: true, mode: 0o700 })
  return join(dir, `${readable}-${createHash('sha256').update(url).digest('hex').slice(0, 12)}`)
}

/**
 * A turn as the spool file holds it (one JSON line): what `ingest` takes, written by the
 * plugin itself (the engine checks it again when it is stored).
 * @typedef {{ target: import('../index.js').ConversationTarget, messages: import('../index.js').IngestMessage[],
 *   advancementKey?: string, turn?: import('../index.js').TurnRecord }} SpooledTurn
 * @param {string} dbPath @param {SpooledTurn} turn
 */
function spool(dbPath, turn) {
  appendFileSync(spoolPath(dbPath), `${JSON.stringify(turn)}\n`, { mode: 0o600 })
}

/**
 * Whether turns are still spooled for a database (its spool file, or files a drain took and
 * did not finish): a new turn then goes after them, not into the database before them.
 * @param {string} dbPath
 */
function spoolPending(dbPath) {
  const file = spoolPath(dbPath)
  if (existsSync(file)) return true
  try {
    return readdirSync(dirname(file)).some((n) => n.startsWith(`${basename(file)}.`) && n.endsWith('.draining'))
  } catch {
    return false
  }
}

/**
 * The order in which taken spool files were taken: the time stamp in their name (files of
 * earlier versions, named `<pid>.<n>`, count as the oldest).
 * @param {string} path
 */
function takenAt(path) {
  const m = /\.(\d{13})-\d+-\d+\.draining$/.exec(path)
  return m ? Number(m[1]) : 0
}

/** A drain that finds a turn failing this often for a reason that is not transient sets it aside. */
const POISON_ATTEMPTS = 3
/** Failures that say "later", not "never": the turn stays first in line. */
const TRANSIENT = new Set(['E_BUSY', 'E_SQLITE', 'E_IO', 'E_CORRUPT', 'E_CLOSED', 'E_SCHEMA', 'E_READ_ONLY', 'E_CONNECTION', 'E_TIMEOUT'])

/**
 * The drain lock of a database's spool: a file created exclusively, naming the process that
 * holds it. One drainer at a time across processes; a lock whose process is gone (a kill, a
 * crash) is taken over. Returns a release function, or undefined when a live process holds it.
 * @param {string} dbPath
 */
function lockSpool(dbPath) {
  const lock = `${spoolPath(dbPath)}.lock`
  const me = JSON.stringify({ pid: process.pid, host: hostname(), at: Date.now() })
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const fd = openSync(lock, 'wx', 0o600)
      writeSync(fd, me)
      closeSync(fd)
      return () => {
        try {
          if (readFileSync(lock, 'utf8') === me) rmSync(lock, { force: true })
        } catch {
          // Gone already.
        }
      }
    } catch (err) {
      if (/** @type {{ code?: string }} */ (err)?.code !== 'EEXIST') return undefined
    }
    if (holderAlive(lock)) return undefined
    // Its holder is gone: take it over (one of two racing processes wins the create above).
    try {
      renameSync(lock, `${lock}.${process.pid}.stale`)
      rmSync(`${lock}.${process.pid}.stale`, { force: true })
    } catch {
      // Another process took it over first.
    }
  }
  return undefined
}

/** Whether the process named in a lock file still runs (on this host). @param {string} lock */
function holderAlive(lock) {
  /** @type {{ pid?: unknown, host?: unknown }} */
  let holder
  try {
    holder = JSON.parse(readFileSync(lock, 'utf8'))
  } catch {
    // Being written this instant, or torn by a crash while being written: a second look.
    try {
      holder = JSON.parse(readFileSync(lock, 'utf8'))
    } catch {
      return false
    }
  }
  if (typeof holder?.pid !== 'number') return false
  // Another host sharing the directory: it cannot be checked from here, so it is trusted.
  if (holder.host !== hostname()) return true
  try {
    process.kill(holder.pid, 0)
    return true
  } catch (err) {
    return /** @type {{ code?: string }} */ (err)?.code === 'EPERM'
  }
}

/**
 * Stores spooled turns in the order they were spooled, one drainer at a time across processes
 * (`lockSpool`; a drain that finds the lock held by a live process leaves the spool to it). At
 * the first turn that cannot be stored the drain stops: that turn and the ones after it stay
 * where they are, in order, for the next drain (a later turn is never stored before an earlier
 * one). A turn that fails for a reason that is not transient, drain after drain, is set aside
 * in `<db>.lcm-native-held.jsonl` with its error and reported (`onHeld`), so that it cannot
 * hold every later turn back. Returns how many were stored.
 * @param {string} dbPath @param {LcmEngine} engine
 * @param {(turn: SpooledTurn, error: string) => void} [onHeld]
 */
async function drainSpool(dbPath, engine, onHeld) {
  const file = spoolPath(dbPath)
  const s = shared()
  s.drainingNow ??= new Set()
  if (s.drainingNow.has(dbPath)) return 0
  const release = lockSpool(dbPath)
  if (!release) return 0
  s.drainingNow.add(dbPath)
  try {
    return await drainLocked(dbPath, file, engine, onHeld)
  } finally {
    s.drainingNow.delete(dbPath)
    release()
  }
}

/**
 * The target a spooled turn is stored under: by key alone when it has one (the session id it
 * was spooled with may be an old one by now).
 * @param {import('../index.js').ConversationTarget} target @returns {import('../index.js').ConversationTarget}
 */
function byKey(target) {
  return typeof target === 'object' && target !== null && 'sessionKey' in target && target.sessionKey ? { sessionKey: target.sessionKey } : target
}

/** `drainSpool` under the lock. @param {string} dbPath @param {string} file @param {LcmEngine} engine @param {(turn: SpooledTurn, error: string) => void} [onHeld] */
async function drainLocked(dbPath, file, engine, onHeld) {
  // Files taken by a drain that did not finish (a crash, a kill, a turn that failed) are
  // drained again, oldest first: their turns carry advancement keys, so a turn stored before
  // the crash is not stored twice.
  const dir = dirname(file)
  const stale = readdirSync(dir)
    .filter((n) => n.startsWith(`${basename(file)}.`) && n.endsWith('.draining'))
    .map((n) => join(dir, n))
    .sort((x, y) => takenAt(x) - takenAt(y) || (x < y ? -1 : 1))
  if (!existsSync(file) && stale.length === 0) return 0
  const s = shared()
  s.drains = (s.drains ?? 0) + 1
  /** @type {string[]} */
  const taken = [...stale]
  if (existsSync(file)) {
    // Take the file (a name of this drain's own, after every older one): turns spooled
    // meanwhile go to a new one.
    const mine = `${file}.${Date.now()}-${process.pid}-${s.drains}.draining`
    try {
      renameSync(file, mine)
      taken.push(mine)
    } catch {
      // Gone meanwhile.
    }
  }
  let stored = 0
  for (const path of taken) {
    /** @type {(SpooledTurn & { attempts?: number })[]} */
    const turns = []
    let text = ''
    try {
      text = readFileSync(path, 'utf8')
    } catch {
      continue
    }
    for (const line of text.split('\n')) {
      if (line.trim() === '') continue
      try {
        turns.push(JSON.parse(line))
      } catch {
        // A torn last line (a crash while appending) holds no complete turn.
      }
    }
    for (const [i, t] of turns.entries()) {
      const options = t.advancementKey ? { advancementKey: t.advancementKey, ...(t.turn ? { turn: t.turn } : {}) } : undefined
      const target = byKey(t.target)
      try {
        await engine.ingest(target, t.messages, options)
        stored++
      } catch (err) {
        const code = /** @type {{ code?: string }} */ (err)?.code
        try {
          // A batch the engine refuses as input is stored as text rather than kept forever.
          if (code !== 'E_INVALID_INPUT') throw err
          await engine.ingest(target, asPlainText(t.messages), options)
          stored++
        } catch (failed) {
          const failure = /** @type {{ code?: string, message?: string }} */ (failed)
          const attempts = (t.attempts ?? 0) + 1
          if (!TRANSIENT.has(failure?.code ?? '') && attempts >= POISON_ATTEMPTS) {
            const error = `${failure?.code ?? 'E_INTERNAL'}: ${failure?.message ?? String(failed)}`
            appendFileSync(heldPath(dbPath), `${JSON.stringify({ ...t, attempts, error })}\n`, { mode: 0o600 })
            onHeld?.(t, error)
            continue
          }
          // This turn and the rest stay in this file, which keeps its place in the order.
          const rest = [{ ...t, attempts }, ...turns.slice(i + 1)].map((r) => `${JSON.stringify(r)}\n`).join('')
          writeFileSync(`${path}.tmp`, rest, { mode: 0o600 })
          renameSync(`${path}.tmp`, path)
          return stored
        }
      }
    }
    rmSync(path, { force: true })
  }
  return stored
}

module.exports = { addon, closeAll, closeAllNow, drainSpool, engineFor, logOnce, settleInflight, shared, heldPath, spool, spoolPath, spoolPending, track }
