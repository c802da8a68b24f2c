// What every lcm-native command shares: the argument parser, number formatting, which
// database and which options a command uses (one configuration with the OpenClaw plugin's:
// its entry in OpenClaw's config, lossless-claw's LCM_* variables, then flags), and opening a
// database for reading, an un-upgraded lossless-claw file included.
'use strict'

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')

const { LcmEngine: Addon, configFromEnv, snapshot } = require('../index.js')
const { closest, isDatabaseUrl, resolveSettings, shownDatabase, stateDir } = require('../plugin/config.cjs')

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

/**
 * The temporary folders of this process (upgraded copies of a lossless-claw file: a copy of the
 * user's data, which a later `redact` would not reach), removed on every way out: a reader's
 * close, `exit` (after the engines above are closed), and the signals that end a command.
 * @type {Set<string>}
 */
const TEMP_DIRS = new Set()
/** The signals a terminal or a supervisor ends a command with. */
const END_SIGNALS = /** @type {const} */ (['SIGINT', 'SIGTERM', 'SIGHUP'])

/** @param {string} dir */
function removeTempDir(dir) {
  TEMP_DIRS.delete(dir)
  try {
    // Retried: a copy still being written (a signal during `snapshot`) can add a file meanwhile.
    fs.rmSync(dir, { recursive: true, force: true, maxRetries: 5, retryDelay: 20 })
  } catch {
    // Best effort on the way out; what is left is in the system's temporary folder.
  }
  if (TEMP_DIRS.size === 0) stopListening()
}

/** Listens for the ending signals (once), first in line: a command's own handler must still see that it has one. */
function listenForEnd() {
  for (const signal of END_SIGNALS) if (!process.listeners(signal).includes(onEndSignal)) process.prependListener(signal, onEndSignal)
}

/** Gives the ending signals their default action back. */
function stopListening() {
  for (const signal of END_SIGNALS) process.removeListener(signal, onEndSignal)
}

/**
 * A signal that ends the process while a temporary copy exists: the copy is removed, then the
 * signal is raised again, so that the process ends as the signal would have ended it (a shell
 * sees 128 + its number). A command that stops on the signal itself (rewrite and redact on
 * Ctrl-C) closes its reader on the way out: left to it, unless the signal comes again.
 * @param {NodeJS.Signals} signal
 */
function onEndSignal(signal) {
  if (process.listenerCount(signal) > 1) return
  for (const dir of [...TEMP_DIRS]) removeTempDir(dir)
  stopListening()
  // With no listener left, the signal's default action applies again: it ends the process.
  // Where it cannot be raised (Windows knows no SIGHUP), the exit code says which it was.
  try {
    process.kill(process.pid, signal)
  } catch {
    // exit below
  }
  process.exit(128 + (os.constants.signals[signal] ?? 0))
}

/** A new temporary folder, removed on every way out (`removeTempDir`, `exit`, signals). @param {string} prefix */
function makeTempDir(prefix) {
  // Listening before the folder exists: a signal that comes meanwhile is handled once this
  // synchronous code has registered the folder (with no listener yet, it would end the process
  // at once and leave the folder behind).
  listenForEnd()
  /** @type {string} */
  let dir
  try {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix))
  } catch (err) {
    if (TEMP_DIRS.size === 0) stopListening()
    throw err
  }
  TEMP_DIRS.add(dir)
  return dir
}

process.on('exit', () => {
  for (const dir of [...TEMP_DIRS]) removeTempDir(dir)
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
    if (!kind) {
      const near = closest(name, Object.keys(spec))
      throw new UsageError(`unknown option --${name}${near ? `; did you mean --${near}?` : ''}`, command)
    }
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
  checkDbFile(settings.db)
  return settings
}

/** What a file that is not a regular one is, for the error that refuses it. @param {fs.Stats} st */
function kindOf(st) {
  if (st.isDirectory()) return 'a directory'
  if (st.isCharacterDevice()) return 'a character device'
  if (st.isBlockDevice()) return 'a block device'
  if (st.isFIFO()) return 'a FIFO (named pipe)'
  if (st.isSocket()) return 'a socket'
  return 'not a regular file'
}

/**
 * Refuses a database path that names anything but a regular file (a symbolic link is followed)
 * before SQLite opens it: on `/dev/zero` it would create `/dev/zero-journal` beside it, a FIFO
 * it reports as missing (or waits on), a directory it cannot read. A path that names nothing
 * passes (the caller says whether it must exist); so does a PostgreSQL URL.
 * @param {string} db @param {string} [what] how the error names it
 */
function checkDbFile(db, what = 'the database') {
  if (isDatabaseUrl(db)) return
  /** @type {fs.Stats | undefined} */
  let st
  try {
    st = fs.statSync(db, { throwIfNoEntry: false })
  } catch (err) {
    throw Object.assign(new Error(`cannot read ${what} ${db}: ${fieldOf(err, 'message')}`), { code: 'E_IO' })
  }
  if (st && !st.isFile()) {
    throw Object.assign(new Error(`${what} ${db} is ${kindOf(st)}, not a database file; nothing was opened or created (give the path of a SQLite file)`), { code: 'E_INVALID_INPUT' })
  }
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
  const settings = resolveSettings(entry ?? {}, process.env, (base) => /** @type {Record<string, unknown>} */ (configFromEnv(base)))
  const engineOptions = /** @type {Omit<LcmConfig, 'dbPath'>} */ (settings.engineOptions())
  const db = args.db ?? settings.dbPath
  // Named by an error that does not say which file it is about (failureMessage).
  commandDb = db
  return { db, configFile: entry === undefined ? undefined : configFile, engineOptions }
}

/** Output is handed to stdout in pieces of about this many characters. */
const PIECE = 1 << 16

/**
 * Text for stdout, written in pieces as it is made, and only as fast as the reader takes it
 * (`write` waits while the stream's buffer is full). No output is ever one string: JavaScript
 * caps a string at about 512 MB, and the first lines reach a reader such as `head` at once.
 */
class Output {
  constructor(stream = process.stdout) {
    this.stream = stream
    /** @type {string[]} */
    this.parts = []
    this.chars = 0
  }

  /** @param {string} text */
  async write(text) {
    if (text.length >= PIECE) {
      // Written alone: joined with what waits, it could pass the string cap.
      await this.flush()
      return this.send(text)
    }
    this.parts.push(text)
    this.chars += text.length
    if (this.chars >= PIECE) await this.flush()
  }

  /** @param {Iterable<string>} pieces */
  async writeAll(pieces) {
    for (const piece of pieces) await this.write(piece)
  }

  async flush() {
    if (this.parts.length === 0) return
    const text = this.parts.join('')
    this.parts = []
    this.chars = 0
    await this.send(text)
  }

  /** @param {string} text */
  async send(text) {
    if (!this.stream.write(text)) await new Promise((resolve) => this.stream.once('drain', resolve))
  }
}

/** @param {unknown} v a value JSON.stringify leaves out of an object (and writes as null in an array) */
const unwritten = (v) => v === undefined || typeof v === 'function' || typeof v === 'symbol'

/**
 * The text of `JSON.stringify(value, null, 2)`, in pieces: arrays and objects are walked here,
 * every other value is JSON.stringify's own text, and a long string is escaped in slices. For
 * results of any size (the engine's answers are plain JSON data).
 * @param {unknown} value @param {string} [pad] the indentation of the value's line
 * @returns {Generator<string>}
 */
function* jsonPieces(value, pad = '') {
  const toJson = fieldOf(value, 'toJSON')
  if (typeof toJson === 'function') value = toJson.call(value, '')
  if (typeof value === 'string' && value.length > PIECE) return yield* stringPieces(value)
  if (value === null || typeof value !== 'object') return yield JSON.stringify(value) ?? 'null'
  const inner = `${pad}  `
  if (Array.isArray(value)) {
    if (value.length === 0) return yield '[]'
    for (let i = 0; i < value.length; i++) {
      yield `${i === 0 ? '[' : ','}\n${inner}`
      if (unwritten(value[i])) yield 'null'
      else yield* jsonPieces(value[i], inner)
    }
    return yield `\n${pad}]`
  }
  const record = /** @type {Record<string, unknown>} */ (value)
  const keys = Object.keys(record).filter((k) => !unwritten(record[k]))
  if (keys.length === 0) return yield '{}'
  for (const [i, k] of keys.entries()) {
    yield `${i === 0 ? '{' : ','}\n${inner}${JSON.stringify(k)}: `
    yield* jsonPieces(record[k], inner)
  }
  yield `\n${pad}}`
}

/**
 * A string's JSON text in slices of about `PIECE` characters, never between the two halves of
 * a surrogate pair (JSON.stringify would escape each half alone).
 * @param {string} s
 */
function* stringPieces(s) {
  yield '"'
  for (let at = 0; at < s.length; ) {
    let end = Math.min(s.length, at + PIECE)
    const last = s.charCodeAt(end - 1)
    if (end < s.length && last >= 0xd800 && last <= 0xdbff) end--
    yield JSON.stringify(s.slice(at, end)).slice(1, -1)
    at = end
  }
  yield '"'
}

/**
 * Prints `value` as `console.log(JSON.stringify(value, null, 2))` would, streamed (`Output`).
 * @param {unknown} value @param {Output} [out]
 */
async function printJson(value, out = new Output()) {
  await out.writeAll(jsonPieces(value))
  await out.write('\n')
  await out.flush()
}

/**
 * Whether the addon failed to hand its answer to JavaScript: V8 refuses a string longer than
 * about 512 MB, and napi-rs reports that as `GenericFailure` with no message (the engine's own
 * failures always have an E_ code).
 * @param {unknown} err
 */
function answerTooLarge(err) {
  const code = fieldOf(err, 'code')
  return code === 'E_TOO_LARGE' || (code === 'GenericFailure' && !fieldOf(err, 'message'))
}

/**
 * The code a failure is shown with: its own when it is one of lcm-native's (E_…); E_IO for a
 * system error of a file or stream (ENOENT, EACCES, …); E_TOO_LARGE for an answer or a text
 * larger than a JavaScript string can be; else E_INTERNAL (a failure nobody foresaw: the
 * message says what it was).
 * @param {unknown} err
 */
function failureCode(err) {
  const code = fieldOf(err, 'code')
  if (typeof code === 'string' && /^E_[A-Z_]+$/.test(code)) return code
  if (typeof code === 'string' && /^E[A-Z]+$/.test(code) && typeof fieldOf(err, 'syscall') === 'string') return 'E_IO'
  if (answerTooLarge(err) || (err instanceof RangeError && /Invalid string length/.test(err.message))) return 'E_TOO_LARGE'
  return 'E_INTERNAL'
}

/** The database the running command resolved (`settingsOf`), for failureMessage. @type {string | undefined} */
let commandDb

/**
 * The message a failure is shown with: its own (with a code that is not lcm-native's, such as
 * napi-rs's statuses, kept in it), else what is known of it.
 * @param {unknown} err
 */
function failureMessage(err) {
  const message = fieldOf(err, 'message')
  if (answerTooLarge(err) && !message) return 'the answer is larger than one JavaScript string can hold (about 512 MB as JSON); ask for less (--limit, --tokens)'
  const code = fieldOf(err, 'code')
  const foreign = typeof code === 'string' && !/^E_[A-Z_]+$/.test(code) ? code : undefined
  if (typeof message !== 'string') return String(err)
  if (message === '') return `${foreign ?? 'a failure'} without a message`
  // The CLI puts its own `lcm-native:` first (the plugin's messages carry one for the host's log).
  let text = message.replace(/^lcm-native: /, '')
  // The engine's error about a file that is not SQLite does not name it: the command's does.
  if (commandDb !== undefined && /^the file is not a SQLite database/.test(text)) text = `${shownDatabase(commandDb)}: ${text}`
  return foreign && !text.includes(foreign) ? `${foreign}: ${text}` : text
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
    try {
      await this.engine.close()
    } finally {
      if (this.copyDir) removeTempDir(this.copyDir)
    }
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
  const dir = makeTempDir('lcm-read-')
  try {
    const copy = path.join(dir, 'lcm.db')
    await snapshot(db, copy)
    const { immutable: _immutable, ...rest } = options
    const engine = await LcmEngine.open({ ...rest, dbPath: copy })
    console.error(`note: ${db} is a ${engine.migration.era} database; read through an upgraded copy (the file is not changed; 'lcm-native migrate' upgrades it)`)
    return new Reader(engine, dir)
  } catch (err) {
    removeTempDir(dir)
    throw err
  }
}

module.exports = {
  END_SIGNALS,
  LcmEngine,
  closest,
  Output,
  Reader,
  UsageError,
  answerTooLarge,
  checkDbFile,
  existingDb,
  configFileOf,
  failureCode,
  failureMessage,
  fieldOf,
  fmt,
  jsonPieces,
  oneLine,
  openForReading,
  openReadOnly,
  parseArgs,
  printJson,
  plural,
  promptCacheLine,
  reportMigration,
  settingsOf,
  signed,
}
