// @ts-check
'use strict'
// The plugin's configuration: OpenClaw's `plugins.entries["lcm-native"].config` (validated by
// the host against openclaw.plugin.json's configSchema), then lossless-claw's environment
// variables over it, then defaults. The engine options are checked again by
// `LcmEngine.open`, which names the option it refuses.

const { createHash } = require('node:crypto')
const { homedir } = require('node:os')
const { existsSync } = require('node:fs')
const { basename, dirname, extname, join } = require('node:path')

/**
 * Options handed to `LcmEngine.open` as they are (lossless-claw's names): the ones the addon
 * describes for the plugin (src/config/schema.rs), written beside the manifest by
 * scripts/options.cjs, so that registering the plugin never loads the addon.
 * @returns {string[]}
 */
const engineKeys = () => require('./engine-options.json')

/**
 * @typedef {object} PluginSettings
 * @property {boolean} enabled
 * @property {string} dbPath            the (global) database: a SQLite file, or a PostgreSQL URL (dbUrl, LCM_DATABASE_URL)
 * @property {'global' | 'agent'} databaseScope
 * @property {string[]} ignoreSessionPatterns
 * @property {string[]} statelessSessionPatterns
 * @property {boolean} skipStatelessSessions
 * @property {string} summaryModel      `provider/model`, or '' for the session's model
 * @property {'session' | 'all'} recallScope
 * @property {number} recallMaxTokens
 * @property {number} newSessionRetainDepth  summaries of this depth and deeper stay in the context after /new
 * @property {number} defaultTokenBudget
 * @property {() => Record<string, unknown>} engineOptions  options for `LcmEngine.open` (without
 *   dbPath): the plugin config's, with lossless-claw's LCM_* variables over them, read on first use
 */

/**
 * The candidate nearest `word` (edit distance with transpositions, so `grpe` finds `grep`),
 * when it is near enough to be what was meant: at most a third of its length, at least 1.
 * @param {string} word @param {Iterable<string>} candidates @returns {string | undefined}
 */
function closest(word, candidates) {
  /** @param {string} a @param {string} b */
  const distance = (a, b) => {
    const d = Array.from({ length: a.length + 1 }, (_, i) => Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)))
    for (let i = 1; i <= a.length; i++) {
      for (let j = 1; j <= b.length; j++) {
        const cost = a[i - 1] === b[j - 1] ? 0 : 1
        d[i][j] = Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost)
        if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d[i][j] = Math.min(d[i][j], d[i - 2][j - 2] + 1)
      }
    }
    return d[a.length][b.length]
  }
  let best
  let bestDistance = Infinity
  for (const c of candidates) {
    const n = distance(word, c)
    if (n < bestDistance) [best, bestDistance] = [c, n]
  }
  return bestDistance <= Math.max(1, Math.floor(word.length / 3)) ? best : undefined
}

/** An invalid option: one message naming it. */
class ConfigError extends Error {
  /** @param {string} option @param {string} why */
  constructor(option, why) {
    super(`lcm-native: invalid config option \`${option}\`: ${why}`)
    this.name = 'ConfigError'
    this.code = 'E_INVALID_CONFIG'
    this.option = option
  }
}

/** @param {unknown} v */
function isRecord(v) {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
}

/**
 * A comma-separated environment list (lossless-claw's format), or undefined when unset.
 * @param {string | undefined} raw
 */
function envList(raw) {
  if (raw === undefined || raw.trim() === '') return undefined
  return raw
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
}

/**
 * lossless-claw's boolean variables: exactly "true" is true (LCM_ENABLED: anything but "false").
 * @param {string | undefined} raw @param {boolean} loose
 */
function envBool(raw, loose) {
  if (raw === undefined || raw.trim() === '') return undefined
  return loose ? raw.trim().toLowerCase() !== 'false' : raw.trim().toLowerCase() === 'true'
}

/**
 * @param {Record<string, unknown>} cfg @param {string} key
 * @returns {string[] | undefined}
 */
function stringList(cfg, key) {
  const v = cfg[key]
  if (v === undefined || v === null) return undefined
  if (!Array.isArray(v) || v.some((s) => typeof s !== 'string')) throw new ConfigError(key, 'expected an array of strings')
  return /** @type {string[]} */ (v)
}

/**
 * The manifest's schema of one of the plugin's own options: its bounds, words and default are
 * stated there once (the engine's options come from the addon, src/config/schema.rs).
 * @param {string} key @returns {{ minimum?: number, enum?: string[], default?: unknown }}
 */
const specOf = (key) => /** @type {Record<string, { minimum?: number, enum?: string[], default?: unknown }>} */ (require('../openclaw.plugin.json').configSchema.properties)[key]

/**
 * The option's value, else the manifest's default.
 * @template T @param {T | undefined} value @param {string} key @returns {T}
 */
const orDefault = (value, key) => (value !== undefined ? value : /** @type {T} */ (specOf(key).default))

/** @param {Record<string, unknown>} cfg @param {string} key one of the manifest's `enum` words */
function oneOf(cfg, key) {
  const allowed = specOf(key).enum ?? []
  const v = cfg[key]
  if (v === undefined || v === null) return undefined
  if (typeof v !== 'string' || !allowed.includes(v)) {
    throw new ConfigError(key, `expected one of ${allowed.map((a) => JSON.stringify(a)).join(', ')}, got ${JSON.stringify(v)}`)
  }
  return v
}

/** @param {Record<string, unknown>} cfg @param {string} key */
function text(cfg, key) {
  const v = cfg[key]
  if (v === undefined || v === null) return undefined
  if (typeof v !== 'string') throw new ConfigError(key, `expected a string, got ${typeof v}`)
  return v
}

/** @param {Record<string, unknown>} cfg @param {string} key */
function bool(cfg, key) {
  const v = cfg[key]
  if (v === undefined || v === null) return undefined
  if (typeof v !== 'boolean') throw new ConfigError(key, `expected a boolean, got ${typeof v}`)
  return v
}

/** @param {Record<string, unknown>} cfg @param {string} key an integer at least the manifest's `minimum` */
function int(cfg, key) {
  const min = specOf(key).minimum ?? Number.MIN_SAFE_INTEGER
  const v = cfg[key]
  if (v === undefined || v === null) return undefined
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min) throw new ConfigError(key, `expected an integer >= ${min}, got ${JSON.stringify(v)}`)
  return v
}

/**
 * A non-negative integer environment variable (lossless-claw's), or undefined when unset.
 * @param {string | undefined} raw @param {string} option the option it stands for
 */
function envInt(raw, option) {
  if (raw === undefined || raw.trim() === '') return undefined
  const v = Number(raw.trim())
  if (!Number.isInteger(v) || v < 0) throw new ConfigError(option, `expected an integer >= 0 in the environment, got ${JSON.stringify(raw)}`)
  return v
}

/**
 * OpenClaw's state directory, where lossless-claw keeps `lcm.db`.
 * @param {NodeJS.ProcessEnv} env
 */
function stateDir(env) {
  const dir = env.OPENCLAW_STATE_DIR
  return dir && dir.trim() !== '' ? dir : join(env.HOME || homedir(), '.openclaw')
}

/**
 * Resolves the plugin's settings. Throws ConfigError naming the option (or the variable).
 * @param {unknown} pluginConfig  `api.pluginConfig`
 * @param {NodeJS.ProcessEnv} env
 * @param {((base: Record<string, unknown>) => Record<string, unknown>) | undefined} engineEnv
 *   the addon's `configFromEnv(base)` (the engine options with lossless-claw's LCM_* variables
 *   over them); loaded lazily by the caller
 * @returns {PluginSettings}
 */
function resolveSettings(pluginConfig, env, engineEnv) {
  if (pluginConfig !== undefined && pluginConfig !== null && !isRecord(pluginConfig)) {
    throw new ConfigError('config', 'expected an object')
  }
  const cfg = /** @type {Record<string, unknown>} */ (pluginConfig ?? {})
  const known = Object.keys(require('../openclaw.plugin.json').configSchema.properties)
  for (const key of Object.keys(cfg)) {
    if (!known.includes(key)) {
      const near = closest(key, known)
      throw new ConfigError(key, `unknown option${near ? `; did you mean ${near}?` : ''} (known: ${known.join(', ')})`)
    }
  }

  /** @type {Record<string, unknown>} */
  const engine = {}
  for (const key of engineKeys()) {
    if (cfg[key] !== undefined && cfg[key] !== null) engine[key] = cfg[key]
  }
  // The plugin's recallScope also decides what recall at assembly searches.
  if (cfg.recallScope === 'all') engine.autoRecallScope = 'all'
  // lossless-claw 0.15's name of incrementalMaxDepth.
  if (cfg.sweepMaxDepth !== undefined && cfg.incrementalMaxDepth === undefined) engine.incrementalMaxDepth = cfg.sweepMaxDepth
  /** @type {Record<string, unknown> | undefined} */
  let merged
  // The environment over the configuration, as lossless-claw layers them: the engine's
  // `configFromEnv(base)` applies every rule (each variable's option, LCM_SWEEP_MAX_DEPTH,
  // TZ only when nothing names a zone), so they are written once.
  const engineOptions = () => {
    if (merged) return merged
    try {
      merged = engineEnv ? { ...engineEnv(engine) } : { ...engine }
    } catch (err) {
      const e = /** @type {{ message?: string }} */ (err)
      const why = String(e?.message ?? err)
      const failure = new ConfigError('environment', why)
      // The engine names the option and the variable itself: said once, not nested.
      if (/^invalid config option /.test(why)) failure.message = `lcm-native: ${why}`
      throw failure
    }
    delete merged.dbPath
    delete merged.dbUrl
    return merged
  }

  // The database: a PostgreSQL URL (LCM_DATABASE_URL, dbUrl) or a SQLite file; the
  // environment over the config, a URL over a path at the same level.
  const urlEnv = env.LCM_DATABASE_URL?.trim() || undefined
  if (urlEnv !== undefined && !isDatabaseUrl(urlEnv)) throw new ConfigError('LCM_DATABASE_URL', 'must be a postgres:// or postgresql:// URL')
  const dbUrl = text(cfg, 'dbUrl')
  if (dbUrl !== undefined && !isDatabaseUrl(dbUrl)) throw new ConfigError('dbUrl', 'must be a postgres:// or postgresql:// URL')
  const dbEnv = env.LCM_DATABASE_PATH?.trim() || undefined
  const dbPath = urlEnv ?? dbEnv ?? dbUrl ?? text(cfg, 'dbPath') ?? text(cfg, 'databasePath') ?? join(stateDir(env), 'lcm.db')
  if (dbPath.trim() === '') throw new ConfigError('dbPath', 'must not be empty')

  return {
    enabled: orDefault(envBool(env.LCM_ENABLED, true) ?? bool(cfg, 'enabled'), 'enabled'),
    dbPath,
    databaseScope: /** @type {'global' | 'agent'} */ (orDefault(oneOf(cfg, 'databaseScope'), 'databaseScope')),
    ignoreSessionPatterns: envList(env.LCM_IGNORE_SESSION_PATTERNS) ?? stringList(cfg, 'ignoreSessionPatterns') ?? [],
    statelessSessionPatterns: envList(env.LCM_STATELESS_SESSION_PATTERNS) ?? stringList(cfg, 'statelessSessionPatterns') ?? [],
    skipStatelessSessions: orDefault(envBool(env.LCM_SKIP_STATELESS_SESSIONS, false) ?? bool(cfg, 'skipStatelessSessions'), 'skipStatelessSessions'),
    summaryModel: (env.LCM_SUMMARY_MODEL?.trim() || undefined) ?? text(cfg, 'summaryModel') ?? '',
    recallScope: /** @type {'session' | 'all'} */ (orDefault(oneOf(cfg, 'recallScope'), 'recallScope')),
    recallMaxTokens: orDefault(int(cfg, 'recallMaxTokens'), 'recallMaxTokens'),
    newSessionRetainDepth: orDefault(envInt(env.LCM_NEW_SESSION_RETAIN_DEPTH, 'newSessionRetainDepth') ?? int(cfg, 'newSessionRetainDepth'), 'newSessionRetainDepth'),
    defaultTokenBudget: orDefault(int(cfg, 'defaultTokenBudget'), 'defaultTokenBudget'),
    engineOptions,
  }
}

/**
 * Whether a database location is a PostgreSQL URL rather than a SQLite path: the addon's rule
 * (`isDatabaseUrl`, which `open` applies), stated here too because registering the plugin
 * must not load the addon; plugin.spec checks that the two agree.
 * @param {unknown} db
 */
const isDatabaseUrl = (db) => typeof db === 'string' && /^postgres(ql)?:\/\//i.test(db)

/**
 * A database as it may be shown in a message, a log or a file name: the password replaced by
 * `***` whatever the text (the engine's `redact_password`, tested on the same cases,
 * `src/pg/redact_cases.json`). Everything between the scheme and the last `@` is the user and
 * password; query parameters holding a password, and what follows one up to the next `key=`,
 * are masked. A file path is unchanged.
 * @param {string} db
 */
function shownDatabase(db) {
  const scheme = /^[A-Za-z][A-Za-z0-9+.-]*:\/+/.exec(db)?.[0] ?? ''
  const rest = db.slice(scheme.length)
  let out = scheme
  let after = rest
  const at = rest.lastIndexOf('@')
  if (at >= 0) {
    const userinfo = rest.slice(0, at)
    const colon = userinfo.indexOf(':')
    const user = colon >= 0 ? userinfo.slice(0, colon) : undefined
    out += user === undefined ? userinfo : /[/?#]/.test(user) ? '***' : `${user}:***`
    out += '@'
    after = rest.slice(at + 1)
  } else if (scheme) {
    // No `@`: a user who forgot `@host` wrote `user:password` where the host and port go.
    const end = rest.search(/[/?#]/)
    const authority = end < 0 ? rest : rest.slice(0, end)
    out += portsOnly(authority)
    after = end < 0 ? '' : rest.slice(end)
  }
  const q = after.indexOf('?')
  if (q < 0) return out + after
  let masking = false
  const pairs = after.slice(q + 1).split('&').map((pair) => {
    const eq = pair.indexOf('=')
    if (eq < 0) return masking ? '***' : pair
    const key = pair.slice(0, eq)
    masking = percentDecoded(key).toLowerCase().includes('password')
    return masking ? `${key}=***` : pair
  })
  return `${out}${after.slice(0, q)}?${pairs.join('&')}`
}

/**
 * An authority of hosts (`h1:5432,[::1]:5433`) with what follows a `:` shown only where it is
 * a port: from the first that is not, the rest is `***` (as the engine's `ports_only`).
 * @param {string} authority
 */
function portsOnly(authority) {
  const hosts = authority.split(',')
  for (const [i, host] of hosts.entries()) {
    const nameEnd = host.startsWith('[') ? (host.indexOf(']') < 0 ? host.length : host.indexOf(']') + 1) : 0
    const c = host.indexOf(':', nameEnd)
    if (c >= 0 && !/^\d*$/.test(host.slice(c + 1))) return [...hosts.slice(0, i), `${host.slice(0, c + 1)}***`].join(',')
  }
  return authority
}

/**
 * `text` with every URL in it, and every word shaped `user:password@…`, shown as
 * `shownDatabase` shows one (for errors and logs).
 * @param {string} text
 */
const hideUrlSecrets = (text) => text.replace(/[A-Za-z][A-Za-z0-9+.-]*:\/+[^\s'"`]*|[^\s'"`:@]+:[^\s'"`]*@[^\s'"`]*/g, shownDatabase)

/** `%xx` decoded where it is well formed, the rest as it is. @param {string} s */
const percentDecoded = (s) => s.replace(/%([0-9a-f]{2})/gi, (_, h) => String.fromCharCode(parseInt(h, 16)))

/** lcm-native's schema when a URL names none (as the engine's). */
const DEFAULT_SCHEMA = 'lcm'

/**
 * The database of an agent: the configured file or URL, or with `databaseScope: "agent"` one
 * file per agent beside it (`lcm.db` → `lcm.<agent>.db`), or on PostgreSQL one schema per
 * agent (`lcm` → `lcm_<agent>`), so agents do not share a write lock. Two agent ids never
 * share a file or a schema (see `agentFileName` and `withSchema`).
 * @param {PluginSettings} settings @param {string} agentId
 */
function databaseFor(settings, agentId) {
  if (settings.databaseScope !== 'agent') return settings.dbPath
  if (isDatabaseUrl(settings.dbPath)) return withSchema(settings.dbPath, agentId)
  const ext = extname(settings.dbPath)
  const file = (/** @type {string} */ part) => join(dirname(settings.dbPath), `${basename(settings.dbPath, ext)}.${part}${ext || '.db'}`)
  const named = file(agentFileName(agentId))
  // The file an earlier version named after an id OpenClaw would not use as it is (its
  // characters replaced by `_`), kept while it is there: its history stays the agent's. Not
  // when that name is an id of its own (`a b` → `a_b`, which is another agent's).
  const legacy = agentId.replace(/[^A-Za-z0-9_.-]/g, '_') || 'main'
  if (legacy !== agentFileName(agentId) && !CANONICAL_AGENT.test(legacy) && !existsSync(named) && existsSync(file(legacy))) return file(legacy)
  return named
}

/** OpenClaw's own agent ids (its `normalizeAgentId`): used as they are. */
const CANONICAL_AGENT = /^[a-z0-9][a-z0-9_-]{0,63}$/

/** 16 hex digits of the id's SHA-256: what tells apart ids that had to be changed. @param {string} agentId */
const idHash = (agentId) => createHash('sha256').update(agentId).digest('hex').slice(0, 16)

/** The id in lower case, each run of other characters than `allowed` one `-` or `_`, cut to `max`. */
const readablePart = (/** @type {string} */ agentId, /** @type {RegExp} */ other, /** @type {string} */ sep, /** @type {number} */ max) =>
  agentId.toLowerCase().replace(other, sep).slice(0, max)

/**
 * An agent's part of a file name. OpenClaw's own ids (`[a-z0-9][a-z0-9_-]{0,63}`) are used as
 * they are; any other id (upper case, which a case-insensitive file system would fold, `/`,
 * spaces, dots, 300 characters) becomes a readable part and a hash, joined by a `.` that no
 * id used as it is contains: one id, one file.
 * @param {string} agentId
 */
function agentFileName(agentId) {
  if (CANONICAL_AGENT.test(agentId)) return agentId
  return `${readablePart(agentId, /[^a-z0-9_-]+/g, '-', 40)}.${idHash(agentId)}`
}

/**
 * `url` with the agent's own schema, `<schema>_<agent>` (schema names are lower-case letters,
 * digits and `_`, at most 63 bytes). An id used as it is starts and ends with a letter or
 * digit and holds no `__`; any other (a `-`, upper case, too long for 63 bytes) becomes a
 * readable part, `__` and a hash: one id, one schema.
 * @param {string} url @param {string} agentId
 */
function withSchema(url, agentId) {
  const [base, query = ''] = url.split(/\?(.*)/s, 2)
  const params = new URLSearchParams(query)
  const schema = params.get('schema') || DEFAULT_SCHEMA
  // A changed id: a readable part (at most 40, less after a long schema), `_` and 6 hex digits
  // of its hash, within PostgreSQL's 63 bytes.
  const room = Math.min(40, 63 - schema.length - 1 - 7)
  if (!fitsAsIs(schema, agentId) && room < 1) throw new ConfigError('dbUrl', `schema "${schema}" is too long to hold agent "${agentId}"'s name with databaseScope "agent"`)
  const agent = fitsAsIs(schema, agentId)
    ? agentId
    : `${agentId.toLowerCase().replace(/[^a-z0-9_]/g, '_').slice(0, room) || 'main'}_${createHash('sha256').update(agentId).digest('hex').slice(0, 6)}`
  params.set('schema', `${schema}_${agent}`)
  return `${base}?${params.toString()}`
}

/**
 * Whether an agent id names its schema as it is: lower-case letters, digits and `_`, within
 * 63 bytes, and not ending as a changed id ends (`_` and 6 hex digits of its hash), so that an
 * id never takes the schema another id was given. (The form of a changed id is an earlier
 * version's, kept so that existing schemas stay their agents'.)
 * @param {string} schema @param {string} agentId
 */
const fitsAsIs = (schema, agentId) => /^[a-z0-9_]+$/.test(agentId) && !/_[0-9a-f]{6}$/.test(agentId) && schema.length + 1 + agentId.length <= 63

/**
 * The agent a session key belongs to (`agent:<id>:…`), else `main`.
 * @param {string | undefined} sessionKey
 */
function agentOf(sessionKey) {
  const parts = (sessionKey ?? '').split(':')
  return parts[0] === 'agent' && parts[1] ? parts[1] : 'main'
}

module.exports = { ConfigError, engineKeys, agentOf, closest, databaseFor, hideUrlSecrets, isDatabaseUrl, resolveSettings, shownDatabase, stateDir }
