// What every lcm-native command shares: the argument parser, number formatting, which
// database and which options a command uses (one configuration with the OpenClaw plugin's:
// its entry in OpenClaw's config, lossless-claw's LCM_* variables, then flags), and opening a
// database for reading, an un-upgraded lossless-claw file included.
'use strict'

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')

const { LcmEngine: Addon, configFromEnv, snapshot } = require('../index.js')
const { isDatabaseUrl, resolveSettings, shownDatabase, stateDir } = require('../plugin/config.cjs')

/**
 * @typedef {import('../index.js').LcmEngine} Engine
 * @typedef {import('../index.js').LcmConfig} LcmConfig
 */

/** The engines this process has open, closed on the calling thread if it exits early. */
const OPEN = new Set()

/**
 * `LcmEngine.open`, remembered until closed: a command cut short (`| head` closing the pipe,
 * an exit) still checkpoints and closes its database instead of leaving a large `-wal`.
 * @param {LcmConfig} options
 */
async function openEngine(options) {
  const engine = await Addon.open(options)
  OPEN.add(engine)
  const close = engine.close.bind(engine)
  engine.close = async () => {
    OPEN.delete(engine)
    return close()
  }
  return engine
}

process.on('exit', () => {
  for (const engine of OPEN) {
    try {
      engine.closeSync()
    } catch {
      // Closing is best effort at exit.
    }
  }
})

/** `openEngine` under the addon's name, for the commands. */
const LcmEngine = { open: openEngine }

class UsageError extends Error {
  /** @param {string} message @param {string} [command] whose usage to show (else the whole usage) */
  constructor(message, command) {
    super(message)
    this.command = command
  }
}

/**
 * The kinds of option: `string`, `int` (a non-negative integer), `bool` (`--flag`,
 * `--flag=true|false`), `switch` (`--flag` alone) and `optional` (`--flag` with or without a
 * value).
 * @typedef {'string' | 'int' | 'bool' | 'switch' | 'optional'} OptionKind
 * @typedef {Readonly<Record<string, OptionKind>>} OptionSpec
 */

/**
 * The value an option of kind `K` parses to.
 * @template {OptionKind} K
 * @typedef {K extends 'string' ? string : K extends 'int' ? number : K extends 'bool' ? boolean : K extends 'switch' ? true : string | true} OptionValue
 */

/**
 * The arguments `parseArgs` returns for a spec: the positional ones, and each option given.
 * @template {OptionSpec} S
 * @typedef {{ _: string[] } & { -readonly [K in keyof S]?: OptionValue<S[K]> }} Args
 */

/**
 * Parses `--flag value` / `--flag=value` / `--switch` arguments against a spec.
 * @template {OptionSpec} S
 * @param {readonly string[]} argv @param {S} spec @param {string} command
 * @returns {Args<S>}
 */
function parseArgs(argv, spec, command) {
  /** @type {{ _: string[], [option: string]: string | number | boolean | string[] }} */
  const out = { _: [] }
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]
    if (!arg.startsWith('--')) {
      out._.push(arg)
      continue
    }
    const [name, inline] = arg.slice(2).split(/=(.*)/s)
    const kind = Object.hasOwn(spec, name) ? spec[name] : undefined
    if (!kind) throw new UsageError(`unknown option --${name}`, command)
    if (kind === 'bool') {
      // `--flag`, `--flag=true` or `--flag=false` (lcm-tui's form).
      if (inline !== undefined && inline !== 'true' && inline !== 'false') {
        throw new UsageError(`--${name} takes true or false (got --${name}=${inline})`, command)
      }
      if (inline === undefined && (argv[i + 1] === 'true' || argv[i + 1] === 'false')) {
        throw new UsageError(`write --${name}=${argv[i + 1]} (with =)`, command)
      }
      out[name] = inline !== 'false'
    } else if (kind === 'switch') {
      if (inline !== undefined) throw new UsageError(`--${name} takes no value (got --${name}=${inline})`, command)
      out[name] = true
    } else if (kind === 'optional') {
      // A value if one follows, else just the switch.
      const next = inline ?? (argv[i + 1] !== undefined && !argv[i + 1].startsWith('--') ? argv[++i] : undefined)
      out[name] = next ?? true
    } else {
      const value = inline ?? argv[++i]
      if (value === undefined) throw new UsageError(`--${name} needs a value`, command)
      if (kind === 'int') {
        if (!/^\d+$/.test(value)) throw new UsageError(`--${name} must be a non-negative integer, got ${value}`, command)
        out[name] = Number(value)
      } else {
        out[name] = value
      }
    }
  }
  // Each option's value has its kind's type (set above by the same spec).
  return /** @type {Args<S>} */ (out)
}

/** @param {number} n */
function fmt(n) {
  return n.toLocaleString('en-US')
}

/** @param {number} n @param {string} word */
function plural(n, word) {
  const many = word.endsWith('y') && !/[aeiou]y$/.test(word) ? `${word.slice(0, -1)}ies` : `${word}s`
  return `${fmt(n)} ${n === 1 ? word : many}`
}

/**
 * A conversation's prompt-cache report in one line: what its assemblies sent, how much of it
 * a provider's cache could serve (each assembly's prefix that was the whole previous one),
 * the breaks and the compactions.
 * @param {import('../index.js').PromptCacheReport} r
 */
function promptCacheLine(r) {
  const share = (r.keptShare * 100).toFixed(1)
  return `prompt cache: ${plural(r.assemblies, 'assembly')}, ${fmt(r.tokensSent)} tokens sent, ${share} % of them the previous request's prefix; ${plural(r.breaks, 'break')}, ${plural(r.compactions, 'compaction')}`
}

/** @param {number} n */
function signed(n) {
  return n > 0 ? `+${fmt(n)}` : fmt(n)
}


/**
 * The value at `key` of a thrown value (or anything else), or undefined when it is not an object.
 * @param {unknown} v @param {string} key @returns {unknown}
 */
function fieldOf(v, key) {
  return typeof v === 'object' && v !== null ? /** @type {Record<string, unknown>} */ (v)[key] : undefined
}

/** Opening migrates a database written by lossless-claw or an older lcm-native: say so. @param {Engine} engine @param {string} db */
function reportMigration(engine, db) {
  if (!engine.migration.upToDate) console.error(`note: ${shownDatabase(db)} was upgraded in place for lcm-native: ${engine.migration.summary}`)
}

/**
 * Opens `db` for reading only; a file that needs a schema upgrade says which command does it.
 * @param {string} db @param {Omit<LcmConfig, 'dbPath' | 'readOnly'>} [options]
 */
async function openReadOnly(db, options = {}) {
  try {
    return await LcmEngine.open({ dbPath: db, readOnly: true, ...options })
  } catch (err) {
    const code = fieldOf(err, 'code')
    const message = fieldOf(err, 'message')
    if (typeof message !== 'string') throw err
    if (code === 'E_IO' && /immutable: true/.test(message)) {
      const hint = `${message.replace(/, open it with readOnly and immutable: true$/, '')}; pass --immutable`
      throw Object.assign(new Error(hint), { code: 'E_IO' })
    }
    if (code === 'E_SCHEMA' && / is empty \(/.test(message)) {
      throw Object.assign(new Error(`${shownDatabase(db)} is empty: not an lcm-native or lossless-claw database`), { code: 'E_SCHEMA' })
    }
    if (code === 'E_SCHEMA' && /readOnly never writes/.test(message)) {
      const upgrade =
        `${shownDatabase(db)} needs a schema upgrade before lcm-native can read it; run 'lcm-native migrate --db ${shownDatabase(db)}' ` +
        '(it upgrades the file in place, in one transaction). Nothing was changed.'
      throw Object.assign(new Error(upgrade), { code: 'E_SCHEMA' })
    }
    throw err
  }
}

/**
 * `settingsOf` for a command that works on an existing database (open would create one).
 * @param {{ db?: string, config?: string }} args
 */
function existingDb(args) {
  const settings = settingsOf(args)
  if (!isDatabaseUrl(settings.db) && !fs.existsSync(settings.db)) {
    throw Object.assign(new Error(`database not found: ${shownDatabase(settings.db)}${args.db === undefined ? ' (give its path with --db)' : ''}`), { code: 'E_NOT_FOUND' })
  }
  return settings
}

/** @param {string} text @param {number} max */
function oneLine(text, max) {
  const t = text.replace(/\s+/g, ' ').trim()
  return t.length > max ? `${t.slice(0, max - 1)}…` : t
}

/**
 * The lcm-native (else lossless-claw) plugin entry's `config` in an OpenClaw config file, or
 * undefined when it has none. Read as plain JSON, as the LLM settings are (bin/llm.cjs).
 * @param {string} file @returns {unknown}
 */
function pluginEntryOf(file) {
  /** @type {unknown} */
  let parsed
  try {
    parsed = JSON.parse(fs.readFileSync(file, 'utf8'))
  } catch (e) {
    throw Object.assign(new Error(`${file} is not plain JSON (${fieldOf(e, 'message')})`), { code: 'E_INVALID_CONFIG' })
  }
  const entries = fieldOf(fieldOf(parsed, 'plugins'), 'entries')
  return fieldOf(fieldOf(entries, 'lcm-native'), 'config') ?? fieldOf(fieldOf(entries, 'lossless-claw'), 'config')
}

/** OpenClaw's config file: `--config`, else OPENCLAW_CONFIG_PATH, else `openclaw.json` in its state directory. @param {{ config?: string }} args */
function configFileOf(args) {
  return args.config ?? (process.env.OPENCLAW_CONFIG_PATH?.trim() || path.join(stateDir(process.env), 'openclaw.json'))
}

/**
 * The settings a command runs with, as the OpenClaw plugin resolves them: the plugin's entry in
 * OpenClaw's config (`configFileOf`), lossless-claw's LCM_* variables over it, and the database
 * (`--db` over LCM_DATABASE_PATH over the entry's `dbPath` over `<state dir>/lcm.db`). A config
 * named by `--config` must be readable; the default one is skipped with a note when it is not.
 * @param {{ db?: string, config?: string }} args
 * @returns {{ db: string, configFile: string | undefined, engineOptions: Omit<LcmConfig, 'dbPath'> }}
 */
function settingsOf(args) {
  const file = configFileOf(args)
  /** @type {string | undefined} */
  let configFile
  /** @type {unknown} */
  let entry
  if (args.config !== undefined && !fs.existsSync(file)) throw Object.assign(new Error(`config file not found: ${file}`), { code: 'E_INVALID_CONFIG' })
  if (fs.existsSync(file)) {
    try {
      entry = pluginEntryOf(file)
      configFile = file
    } catch (err) {
      if (args.config !== undefined) throw err
      console.error(`note: ${fieldOf(err, 'message')}; its plugin entry is not used`)
    }
  }
  const settings = resolveSettings(entry ?? {}, process.env, () => /** @type {Record<string, unknown>} */ (configFromEnv()))
  const engineOptions = /** @type {Omit<LcmConfig, 'dbPath'>} */ (settings.engineOptions())
  return { db: args.db ?? settings.dbPath, configFile: entry === undefined ? undefined : configFile, engineOptions }
}

/** What `openForReading` opened: the engine, and how it was read. */
class Reader {
  /** @param {Engine} engine @param {string | undefined} copyDir a temporary copy's folder, removed at close */
  constructor(engine, copyDir) {
    this.engine = engine
    this.copyDir = copyDir
  }

  /** Whether the file needs `lcm-native migrate` (it was read through an upgraded copy). */
  get upgradeNeeded() {
    return this.copyDir !== undefined
  }

  async close() {
    await this.engine.close()
    if (this.copyDir) fs.rmSync(this.copyDir, { recursive: true, force: true })
  }
}

/**
 * Opens `db` for reading without changing it. A file that needs a schema upgrade (a
 * lossless-claw database) is read through an upgraded copy in a temporary folder, with a note
 * on stderr; the file itself stays as it is.
 * @param {string} db @param {Omit<LcmConfig, 'dbPath' | 'readOnly'>} [options]
 */
async function openForReading(db, options = {}) {
  try {
    return new Reader(await openReadOnly(db, options), undefined)
  } catch (err) {
    // (A PostgreSQL schema is always lcm-native's current one: nothing to upgrade.)
    if (isDatabaseUrl(db) || fieldOf(err, 'code') !== 'E_SCHEMA' || !/needs a schema upgrade/.test(String(fieldOf(err, 'message')))) throw err
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lcm-read-'))
  try {
    const copy = path.join(dir, 'lcm.db')
    await snapshot(db, copy)
    const { immutable: _immutable, ...rest } = options
    const engine = await LcmEngine.open({ ...rest, dbPath: copy })
    console.error(`note: ${db} is a ${engine.migration.era} database; read through an upgraded copy (the file is not changed; 'lcm-native migrate' upgrades it)`)
    return new Reader(engine, dir)
  } catch (err) {
    fs.rmSync(dir, { recursive: true, force: true })
    throw err
  }
}

module.exports = {
  LcmEngine,
  Reader,
  UsageError,
  existingDb,
  configFileOf,
  fieldOf,
  fmt,
  oneLine,
  openForReading,
  openReadOnly,
  parseArgs,
  plural,
  promptCacheLine,
  reportMigration,
  settingsOf,
  signed,
}
