#!/usr/bin/env node
// The lcm-native command line: demo, stats, the read commands of inspect.cjs (conversations,
// messages, show, grep, describe, expand, verify, doctor), fidelity, migrate, backup, copy, rewrite,
// history, rollback, redact, tui and prompts. Plain Node; only `tui` loads more than the addon
// (Ink and React, imported when it runs). Exit codes: 0 done, 1 failed (one line on stderr) or
// a check found problems (verify, doctor), 2 bad arguments (usage).
'use strict'

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')

const { copyDatabase, exportPrompts, listPrompts, migrate: migrateFile, renderPrompt, showPrompt, snapshot } = require('../index.js')
const { END_SIGNALS, LcmEngine, UsageError, checkDbFile, closest, existingDb, failureCode, failureMessage, fieldOf, fmt, oneLine, openForReading, openReadOnly, parseArgs, plural, printJson, promptCacheLine, reportMigration, settingsOf, signed } = require('./cli-common.cjs')
const inspect = require('./inspect.cjs')
const { resolveLlm } = require('./llm.cjs')
const { hideUrlSecrets, isDatabaseUrl, shownDatabase } = require('../plugin/config.cjs')

/**
 * @typedef {import('../index.js').LcmEngine} Engine
 * @typedef {import('../index.js').LcmConfig} LcmConfig
 * @typedef {import('../index.js').IngestMessage} IngestMessage
 * @typedef {import('./cli-common.cjs').OptionSpec} OptionSpec
 */
/**
 * @template {OptionSpec} S
 * @typedef {import('./cli-common.cjs').Args<S>} Args
 */

const DEFAULT_TRANSCRIPT = path.join(__dirname, '..', 'data', 'transcripts', 'pi-coding-agent-theme-session.jsonl')

const HELP = {
  demo: `lcm-native demo [--transcript FILE] [--db PATH] [--budget N]
    Ingest a real agent transcript into a SQLite file, compact it with the offline
    summarizer, and show the DAG, the assembled context and the first summaries. No network.
    Default transcript: the bundled pi-coding-agent theme session; default budget 16000.`,
  stats: `lcm-native stats [--db PATH] [--config FILE] [--json] [--immutable]
    Conversations, messages, summaries per depth, fallback summaries, the fidelity scores
    per depth and the file's size.
    Reads only: the file is never changed (one that needs a schema upgrade is refused).
    --immutable: read a file nobody writes where its directory is not writable (a read-only
    mount, a backup) as a snapshot.`,
  ...inspect.HELP,
  fidelity: `lcm-native fidelity [--db PATH] [--config FILE] [--conversation N] [--all]
    Score the summaries that have no fidelity score yet (written before scores existed, or
    by lossless-claw; --all: every summary again) and show the scores per depth. The score
    is the share of a summary's source identifiers it keeps (README: Summary fidelity).`,
  migrate: `lcm-native migrate [--db PATH] [--config FILE]
    Upgrade a lossless-claw (or older lcm-native) database in place, in one transaction, and
    say what was done. A second run does nothing.`,
  backup: `lcm-native backup [--db PATH] [--config FILE] OUT
    Write a consistent copy of the database to OUT (a new file), with every turn committed so
    far, including those still in the -wal log, while OpenClaw keeps running (SQLite's
    VACUUM INTO from one read snapshot). Reads only: the database is never changed.`,
  copy: `lcm-native copy --from (PATH | postgres://…) --to (PATH | postgres://…) [--from-schema S] [--to-schema S]
                  [--batch-rows N] [--json]
    Copy a database between SQLite and PostgreSQL, either way: every row of every table
    (lossless-claw's own included), ids, lineage and counters, verified by a per-table digest
    on both sides. The target must be new: a file that does not exist, or a PostgreSQL schema
    that is missing or empty (default schema lcm, or the URL's ?schema=). The source is read
    in one snapshot while OpenClaw keeps running; nothing is written to it. Interrupted (a
    kill, a lost connection), the same command finishes the copy; until then lcm-native
    refuses to open the target. The password in a URL is never printed.`,
  rewrite: `lcm-native rewrite <conversation_id> (--summary ID | --depth N | --all | --fallbacks | --low-fidelity) [--dry-run | --apply] [--diff]
                     [--prompt-dir DIR] [--provider ID] [--model M] [--base-url URL] [--db PATH] [--config FILE]
                     [--leaf-chunk-tokens N] [--leaf-target-tokens N] [--condensed-target-tokens N] [--custom-instructions TEXT]
                     [--timestamps[=true|false]] [--no-timestamps] [--tz ZONE] [--immutable]
    Re-summarise summaries bottom-up with the current prompts (--fallbacks: the deterministic
    fallbacks a failed summarizer left, lcm-native's or lossless-claw's; --low-fidelity: the
    summaries that stayed under minFidelity). A dry run (which
    reads only) unless --apply. The LLM, as lcm-tui chooses it: --provider / --model (also
    provider/model) / --base-url, else LCM_TUI_SUMMARY_* or LCM_SUMMARY_* (PROVIDER, MODEL,
    BASE_URL), else LCM_LLM_BASE_URL (+ LCM_LLM_API_KEY, LCM_LLM_MODEL) for an
    OpenAI-compatible endpoint, else ANTHROPIC_API_KEY; with none, the offline summarizer.
    Keys: <PROVIDER>_API_KEY (LCM_LLM_API_KEY for LCM_LLM_BASE_URL). Details: README.
    --tz: the zone of the source text's times. The target lengths and instructions are the
    configuration's (OpenClaw's plugin entry, LCM_* variables), as compaction used them,
    unless a flag gives them.`,
  history: `lcm-native history <summary_id> [--content] [--json] [--immutable] [--db PATH] [--config FILE]
    Every version of a summary's text, oldest first: version, reason, model, template and
    tokens (--content: the texts too). Reads only.`,
  'fold-copies': `lcm-native fold-copies [--conversation N] [--apply] [--backup FILE] [--db PATH] [--config FILE]
    Fold the turns lossless-claw 1.0 stored twice (verify and doctor name the copies) into
    the rows they copy: each copy's host entry id and anchor trust move to its original, its
    context row or summary link goes, and its row is deleted. What the model is sent does not
    change (it is sent each turn once already). A dry run (which reads only) unless --apply,
    which first writes a backup (--backup FILE, default DB.before-fold-copies-TIME.db).`,
  rollback: `lcm-native rollback <summary_id> <version> [--db PATH] [--config FILE]
    Make an earlier version of a summary its text again, as a new version.`,
  redact: `lcm-native redact (--pattern REGEX | --messages ID,ID… | --finish) [--conversation N] [--replacement TEXT]
                     [--reason TEXT] [--mark-only] [--provider ID] [--model M] [--base-url URL] [--db PATH] [--config FILE]
    Remove text from messages, their parts and full-text rows, and every summary built over
    them (regenerated bottom-up, with the LLM chosen as for rewrite, else offline; --mark-only:
    replaced by a notice, left for repair); old versions holding it are purged and the file is
    rebuilt so its bytes no longer hold it. The log keeps ids and counts, never the text.
    --finish: finish what earlier redactions left (summaries awaiting regeneration, a scrub of
    the file cut short by a kill or a full disk).`,
  tui: `lcm-native tui [--db PATH] [--config FILE] [--conversation N] [--prompt-dir DIR] [--provider ID] [--model M] [--base-url URL] [--tz ZONE]
    A full-screen terminal UI: the conversations, a conversation's summary DAG with each
    summary's text, inputs and what covers it, and rewrites of one summary (w: preview the
    prompt, send, review old/new or the diff, apply or discard) or of a summary and everything
    beneath it (W), fallbacks listed by f. The LLM is chosen as for rewrite (else offline).
    The file is opened read-only until you apply something. Keys: README (Interactive TUI).`,
  ui: `lcm-native ui [--db PATH|URL] [--config FILE] [--port N] [--write] [--conversation N]
                [--provider ID] [--model M] [--base-url URL] [--tz ZONE]
    Serve the LCM panel of OpenClaw's Control UI on 127.0.0.1 for a database outside OpenClaw
    (a PostgreSQL store, a copy of a file): totals, the summary DAG page by page with each
    summary's sources and raw messages, search, the live context. Open the printed URL (it
    holds a random token). Read-only unless --write, which allows rewrites (with the LLM
    chosen as for rewrite, else offline), rollbacks, checks and redaction. Ctrl-C (SIGINT),
    SIGTERM or SIGHUP stops it within 2 s: open connections are closed, then the database.`,
  prompts: `lcm-native prompts (--list | --export [DIR] [--force] | --show NAME | --diff NAME | --render NAME)
                     [--prompt-dir DIR] [--target-tokens N] [--previous-context TEXT]
                     [--child-count N] [--time-range TEXT] [--source-text TEXT] [--config FILE]
    The four templates (leaf, condensed-d1, condensed-d2, condensed-d3): where each comes
    from, write the defaults out to edit (an edited file is kept unless --force), show one,
    diff an override, render one (with the configured target length unless --target-tokens).`,
}

/** One line a command: its name and the first sentence of what it does. */
const COMMAND_LIST = Object.entries(HELP)
  .map(([name, help]) => {
    const description = help.split('\n').slice(1).filter((line) => !line.trim().startsWith('['))
    const what = description.join(' ').replace(/\s+/g, ' ').trim()
    const sentence = what.split(/(?<=\.)\s/)[0].replace(/\.$/, '')
    // Cut to the terminal's width (80 columns when it is not a terminal), never mid-word.
    const room = Math.max(40, (process.stdout.columns || 80) - 17)
    return `  ${name.padEnd(14)}${sentence.length > room ? `${sentence.slice(0, room - 1).replace(/\s+\S*$/, '')}…` : sentence}`
  })
  .join('\n')

const USAGE = `usage: lcm-native <command> [options]

commands:
${COMMAND_LIST}

The database is --db, else LCM_DATABASE_PATH, else the lcm-native plugin's dbPath in OpenClaw's
config (--config FILE, else $OPENCLAW_STATE_DIR/openclaw.json), else $OPENCLAW_STATE_DIR/lcm.db,
else ~/.openclaw/lcm.db. Engine options come from the same places (README: Command line).
Read commands take --json. Exit codes: 0 done, 1 failed or problems found, 2 bad arguments.
Run 'lcm-native <command> --help' for one command.`

/** @typedef {keyof typeof HELP} Command */

/** @param {string | undefined} name @returns {name is Command} */
function isCommand(name) {
  return name !== undefined && Object.hasOwn(HELP, name)
}


/**
 * The messages of a JSONL transcript (host messages, one a line) as `ingest` takes them: role,
 * content, time, id and tool call id. Their shapes are the engine's to check, as it checks
 * every message it stores (E_INVALID_INPUT naming what is wrong).
 * @param {string} file @returns {IngestMessage[]}
 */
function readTranscript(file) {
  const lines = fs.readFileSync(file, 'utf8').split('\n').filter((l) => l.trim() !== '')
  return lines.map((line, i) => {
    /** @type {unknown} */
    let parsed
    try {
      parsed = JSON.parse(line)
    } catch (e) {
      throw Object.assign(new Error(`${file}:${i + 1}: not JSON (${fieldOf(e, 'message')})`), { code: 'E_INVALID_INPUT' })
    }
    if (typeof parsed !== 'object' || parsed === null) throw Object.assign(new Error(`${file}:${i + 1}: not a message (a JSON object)`), { code: 'E_INVALID_INPUT' })
    const m = /** @type {Record<string, unknown>} */ (parsed)
    /** @type {Record<string, unknown>} */
    const msg = {
      role: m.role === 'tool' ? 'toolResult' : m.role,
      content: m.content,
      timestamp: m.timestamp ?? m.createdAt,
      entryId: m.entryId ?? `line-${i + 1}`,
    }
    if (m.toolCallId) msg.toolCallId = m.toolCallId
    return /** @type {IngestMessage} */ (msg)
  })
}


/**
 * The live context as a small tree: each live summary with the nodes beneath it.
 * @param {Engine} engine @param {number} conversationId @param {number} [maxChildren]
 */
async function printTree(engine, conversationId, maxChildren = 3) {
  const context = await engine.context(conversationId)
  const summaries = await engine.summaries(conversationId)
  const byId = new Map(summaries.map((s) => [s.summaryId, s]))
  const raw = context.filter((e) => e.kind === 'message').length
  console.log(`live context: ${fmt(context.length)} items (${fmt(context.length - raw)} summaries, ${fmt(raw)} raw messages)`)
  /** @type {string[]} */
  const lines = []
  /** @param {string} id @param {string} prefix @param {boolean} last @param {number} level @returns {Promise<void>} */
  const walk = async (id, prefix, last, level) => {
    const s = byId.get(id)
    const d = await engine.describe(id)
    if (!s || d.type !== 'summary') throw Object.assign(new Error(`${id} is not a summary of conversation ${conversationId}`), { code: 'E_INTERNAL' })
    const range = d.range ? `, ${d.range}` : ''
    const below = s.kind === 'leaf' ? plural(d.coveredMessages.count, 'message') : plural(d.inputs.length, 'input')
    lines.push(`${prefix}${last ? '└─' : '├─'} ${id} d${s.depth} (${below}${range}, ${fmt(s.tokenCount)}t)`)
    if (level >= 2 || s.kind === 'leaf') return
    const childPrefix = prefix + (last ? '   ' : '│  ')
    const shown = d.inputs.slice(0, maxChildren)
    for (const [i, input] of shown.entries()) {
      await walk(input.summaryId, childPrefix, i === shown.length - 1 && d.inputs.length <= maxChildren, level + 1)
    }
    if (d.inputs.length > maxChildren) lines.push(`${childPrefix}└─ … ${d.inputs.length - maxChildren} more`)
  }
  const live = context.filter((e) => e.kind === 'summary')
  for (const [i, e] of live.entries()) await walk(e.summaryId ?? '', '', i === live.length - 1 && raw === 0, 0)
  if (raw) lines.push(`└─ ${fmt(raw)} raw messages (the newest, including the fresh tail)`)
  for (const l of lines) console.log(`  ${l}`)
}

/** @param {string[]} argv */
async function demo(argv) {
  const args = parseArgs(argv, { transcript: 'string', db: 'string', budget: 'int', help: 'switch' }, 'demo')
  if (args.help) return console.log(`usage: ${HELP.demo}`)
  if (args._.length) throw new UsageError(`unexpected argument ${args._[0]}`, 'demo')
  const transcript = args.transcript ?? DEFAULT_TRANSCRIPT
  const budget = args.budget ?? 16_000
  if (budget < 1) throw new UsageError('--budget must be at least 1', 'demo')
  if (args.db !== undefined) checkDbFile(args.db)
  if (!fs.existsSync(transcript)) throw Object.assign(new Error(`transcript not found: ${transcript}`), { code: 'E_NOT_FOUND' })
  const dbPath = args.db ?? path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'lcm-demo-')), 'lcm.db')

  const messages = readTranscript(transcript)
  // Small chunks, so that a one-session transcript shows a DAG several levels deep; the other
  // sizes are the defaults, so a later `rewrite` asks for the lengths compaction asked for.
  const engine = await LcmEngine.open({ dbPath, leafChunkTokens: 3000, maxSweepIterations: 1000 })
  try {
    console.log(`database   ${dbPath} (${engine.migration.summary})`)
    console.log(`transcript ${transcript} (${fmt(messages.length)} messages)`)
    console.log('summarizer offline (the built-in extractive summarizer; no network)')
    const sessionId = path.basename(transcript, path.extname(transcript))
    let inserted = 0
    let skipped = 0
    let conversationId = 0
    let started = process.hrtime.bigint()
    // One call per turn, the way a host ingests.
    /** @type {IngestMessage[]} */
    let turn = []
    const flush = async () => {
      if (!turn.length) return
      const out = await engine.ingest({ sessionId }, turn)
      inserted += out.inserted
      skipped += out.skipped
      conversationId = out.conversationId
      turn = []
    }
    for (const m of messages) {
      if (m.role === 'user') await flush()
      turn.push(m)
    }
    await flush()
    const ms = () => (Number(process.hrtime.bigint() - started) / 1e6).toFixed(1)
    console.log(`ingested   ${fmt(inserted)} new, ${fmt(skipped)} already stored, in ${ms()} ms (conversation ${conversationId})`)

    started = process.hrtime.bigint()
    const sweep = await engine.compact(conversationId, 'offline', { tokenBudget: budget, force: true })
    const condensed = Object.values(sweep.condensedPasses).reduce((a, b) => a + b, 0)
    console.log(
      `compacted  ${sweep.leafPasses} leaf + ${condensed} condensed passes in ${ms()} ms: ` +
        `${fmt(sweep.tokensBefore)} → ${fmt(sweep.tokensAfter)} stored tokens (${sweep.stopReason})`,
    )
    const summaries = await engine.summaries(conversationId)
    printFidelity(await engine.fidelity(conversationId), '')
    /** @type {Record<number, number>} */
    const perDepth = {}
    for (const s of summaries) perDepth[s.depth] = (perDepth[s.depth] ?? 0) + 1
    console.log(`\nDAG: ${Object.entries(perDepth).map(([d, n]) => `depth ${d}: ${n}`).join(', ')}`)
    await printTree(engine, conversationId)

    const a = await engine.assemble(conversationId, { tokenBudget: budget })
    const s = a.stats
    console.log(
      `\nassembled for a ${fmt(budget)}-token budget: ${fmt(a.messages.length)} messages, ${fmt(a.estimatedTokens)} tokens ` +
        `(${fmt(s.keptItems)} of ${fmt(s.totalContextItems)} live items kept, ${fmt(s.evictedItems)} evicted; ` +
        `fresh tail ${fmt(s.freshTailItems)} messages)`,
    )
    const repairs = s.orphanResultsDropped + s.syntheticResults + s.duplicateCallsRemoved + s.emptyMessagesDropped
    if (repairs) {
      console.log(
        `pairing repair: ${s.syntheticResults} synthetic results, ${s.orphanResultsDropped} orphan results dropped, ` +
          `${s.emptyMessagesDropped} empty messages dropped, ${s.duplicateCallsRemoved} duplicate calls removed`,
      )
    }
    const shown = a.messages.filter((m) => typeof m.content === 'string' && m.content.startsWith('<summary ')).slice(0, 2)
    if (shown.length) console.log(`\nfirst summaries, as the model sees them:`)
    for (const m of shown) {
      const text = m.content.length > 700 ? `${m.content.slice(0, 700)}…\n</summary>` : m.content
      console.log(`\n${text}`)
    }
    console.log(`\nnext: lcm-native stats --db ${dbPath}`)
    console.log(`      lcm-native rewrite ${conversationId} --all --db ${dbPath}  (a dry run with the current prompts)`)
  } finally {
    await engine.close()
  }
}

/** @param {string[]} argv */
async function backup(argv) {
  const args = parseArgs(argv, { db: 'string', config: 'string', help: 'switch' }, 'backup')
  if (args.help) return console.log(`usage: ${HELP.backup}`)
  if (args._.length !== 1) throw new UsageError(args._.length ? `unexpected argument ${args._[1]}` : 'the backup file OUT is missing', 'backup')
  const { db } = existingDb(args)
  const out = path.resolve(args._[0])
  checkDbFile(out, 'the backup file')
  if (isDatabaseUrl(db)) {
    // A PostgreSQL schema is backed up as a SQLite file: a copy, checked table by table.
    const report = await copyDatabase({ from: db, to: out })
    const rows = report.tables.reduce((n, t) => n + t.rows, 0)
    return console.log(`backed up ${report.from} to ${out} (${fmt(rows)} rows in ${report.tables.length} tables, each checked by its SHA-256)`)
  }
  const bytes = await snapshot(db, out)
  console.log(`backed up ${db} to ${out} (${fmt(bytes)} bytes)`)
}

/** @param {string[]} argv */
async function copy(argv) {
  const spec = /** @type {const} */ ({ from: 'string', to: 'string', 'from-schema': 'string', 'to-schema': 'string', 'batch-rows': 'int', json: 'switch', help: 'switch' })
  const args = parseArgs(argv, spec, 'copy')
  if (args.help) return console.log(`usage: ${HELP.copy}`)
  if (args._.length) throw new UsageError(`unexpected argument ${args._[0]}`, 'copy')
  if (!args.from || !args.to) throw new UsageError(`--${args.from ? 'to' : 'from'} is missing`, 'copy')
  /** @param {string} where */
  const resolved = (where) => (isDatabaseUrl(where) ? where : path.resolve(where))
  checkDbFile(resolved(args.from), '--from')
  checkDbFile(resolved(args.to), '--to')
  const report = await copyDatabase({
    from: resolved(args.from),
    to: resolved(args.to),
    ...(args['from-schema'] ? { fromSchema: args['from-schema'] } : {}),
    ...(args['to-schema'] ? { toSchema: args['to-schema'] } : {}),
    ...(args['batch-rows'] !== undefined ? { batchRows: args['batch-rows'] } : {}),
  })
  if (args.json) return printJson(report)
  console.log(report.summary)
  for (const t of report.tables) console.log(`  ${t.table.padEnd(36)} ${fmt(t.rows).padStart(10)} rows  ${t.sha256.slice(0, 16)}`)
  for (const s of report.sequences) console.log(`  counter ${s.table}: ${s.value}`)
  if (report.resumed) console.log(`  (resumed: this run wrote ${plural(report.rowsCopied, 'row')})`)
}

/** @param {string[]} argv */
async function stats(argv) {
  const args = parseArgs(argv, { db: 'string', config: 'string', immutable: 'switch', json: 'switch', help: 'switch' }, 'stats')
  if (args.help) return console.log(`usage: ${HELP.stats}`)
  if (args._.length) throw new UsageError(`unexpected argument ${args._[0]}`, 'stats')
  const { db, engineOptions } = existingDb(args)
  const reader = await openForReading(db, { ...engineOptions, ...(args.immutable ? { immutable: true } : {}) })
  const { engine } = reader
  try {
    const size = ['', '-wal'].map((s) => (!isDatabaseUrl(db) && fs.existsSync(db + s) ? fs.statSync(db + s).size : 0))
    const shown = engine.migration.dbPath
    if (args.json) {
      const conversations = []
      for (const c of await engine.conversations()) {
        const summaries = await engine.summaries(c.conversationId)
        conversations.push({ ...c, fallbackSummaries: summaries.filter((s) => s.fallback).length, fidelity: summaries.length ? await engine.fidelity(c.conversationId) : [] })
      }
      return await printJson({ database: shown, bytes: size[0], walBytes: size[1], upgradeNeeded: reader.upgradeNeeded, conversations })
    }
    console.log(isDatabaseUrl(db) ? `database ${shown}` : `database ${db}: ${fmt(size[0])} bytes${size[1] ? ` (+ ${fmt(size[1])} bytes of WAL)` : ''}`)
    const conversations = await engine.conversations()
    if (!conversations.length) console.log('no conversations')
    /** @type {{ messages: number, summaries: number, fallback: number, depths: Record<number, number> }} */
    const total = { messages: 0, summaries: 0, fallback: 0, depths: {} }
    for (const c of conversations) {
      const sums = await engine.summaries(c.conversationId)
      /** @type {Record<number, number>} */
      const depths = {}
      for (const s of sums) {
        depths[s.depth] = (depths[s.depth] ?? 0) + 1
        total.depths[s.depth] = (total.depths[s.depth] ?? 0) + 1
      }
      const fallback = sums.filter((s) => s.fallback).length
      total.messages += c.messageCount
      total.summaries += sums.length
      total.fallback += fallback
      const dtext = Object.entries(depths).map(([d, n]) => `d${d}: ${n}`).join(', ') || 'none'
      console.log(
        `conversation ${c.conversationId} (session ${c.sessionId}): ${fmt(c.messageCount)} messages, ` +
          `${fmt(c.contextItemCount)} live items, summaries ${dtext}, ${fallback} fallback`,
      )
      if (sums.length) printFidelity(await engine.fidelity(c.conversationId), '  ')
      if (c.promptCache) console.log(`  ${promptCacheLine(c.promptCache)}`)
    }
    if (conversations.length > 1) {
      const dtext = Object.entries(total.depths).map(([d, n]) => `d${d}: ${n}`).join(', ') || 'none'
      console.log(`total: ${conversations.length} conversations, ${fmt(total.messages)} messages, summaries ${dtext}, ${total.fallback} fallback`)
    }
  } finally {
    await reader.close()
  }
}

/**
 * The fidelity distribution, one line per depth.
 * @param {import('../index.js').DepthFidelity[]} byDepth @param {string} indent
 */
function printFidelity(byDepth, indent) {
  const f = (/** @type {number | null} */ x) => (x === null ? '–' : x.toFixed(2))
  for (const d of byDepth) {
    const unscored = d.summaries - d.scored
    const figures = d.mean === null ? 'no score' : `mean ${f(d.mean)}, median ${f(d.median)}, p10 ${f(d.p10)}, min ${f(d.min)}`
    const notes = [
      unscored ? `${fmt(unscored)} not scored (lcm-native fidelity)` : '',
      d.withoutIdentifiers ? `${fmt(d.withoutIdentifiers)} with no identifiers to keep` : '',
      d.lowFidelity ? `${fmt(d.lowFidelity)} under minFidelity (rewrite --low-fidelity)` : '',
    ].filter(Boolean)
    console.log(`${indent}fidelity d${d.depth}: ${figures} over ${fmt(d.scored - d.withoutIdentifiers)} of ${fmt(d.summaries)}${notes.length ? `; ${notes.join('; ')}` : ''}`)
  }
}

/** @param {string[]} argv */
async function fidelity(argv) {
  const args = parseArgs(argv, { db: 'string', config: 'string', conversation: 'int', all: 'switch', help: 'switch' }, 'fidelity')
  if (args.help) return console.log(`usage: ${HELP.fidelity}`)
  if (args._.length) throw new UsageError(`unexpected argument ${args._[0]}`, 'fidelity')
  const { db, engineOptions } = existingDb(args)
  const engine = await LcmEngine.open({ ...engineOptions, dbPath: db })
  try {
    reportMigration(engine, db)
    const ids = args.conversation !== undefined ? [args.conversation] : (await engine.conversations()).map((c) => c.conversationId)
    if (!ids.length) console.log('no conversations')
    for (const id of ids) {
      const r = await engine.scoreFidelity(id, { all: Boolean(args.all) })
      console.log(`conversation ${id}: ${fmt(r.scored)} ${r.scored === 1 ? 'summary' : 'summaries'} scored`)
      printFidelity(r.byDepth, '  ')
    }
  } finally {
    await engine.close()
  }
}

/** @param {string[]} argv */
async function migrate(argv) {
  const args = parseArgs(argv, { db: 'string', config: 'string', help: 'switch' }, 'migrate')
  if (args.help) return console.log(`usage: ${HELP.migrate}`)
  if (args._.length) throw new UsageError(`unexpected argument ${args._[0]}`, 'migrate')
  const { db } = settingsOf(args)
  if (isDatabaseUrl(db)) {
    // A PostgreSQL schema is made (or checked) as an engine opens it: nothing to upgrade.
    const engine = await LcmEngine.open({ dbUrl: db })
    const { dbPath, summary } = engine.migration
    await engine.close()
    return console.log(`${dbPath}: ${summary}`)
  }
  if (!fs.existsSync(db)) {
    throw Object.assign(new Error(`database not found: ${db} (migrate upgrades an existing file; LcmEngine.open and OpenClaw create new ones)`), { code: 'E_NOT_FOUND' })
  }
  checkDbFile(db)
  const report = await migrateFile(db)
  console.log(`${db} (${report.era}): ${report.summary}`)
  /** @type {[string, string[]][]} */
  const lines = [
    ['tables created', report.tablesCreated],
    ['columns added', report.columnsAdded],
    ['indexes created', report.indexesCreated],
    ['backfills', report.backfills.map((b) => `${b.step} v${b.version}: ${plural(b.rows, 'row')}`)],
    ['full-text tables rebuilt', report.ftsRebuilt],
  ]
  for (const [label, items] of lines) if (items.length) console.log(`  ${label}: ${items.join(', ')}`)
  if (report.liveTotalsRebuilt) console.log('  live-context totals recomputed')
}

/**
 * The options that choose the model the rewrite, redact and tui commands call.
 * @satisfies {OptionSpec}
 */
const LLM_OPTIONS = { provider: 'string', model: 'string', 'base-url': 'string' }

/** @satisfies {OptionSpec} The lengths and instructions a summarizer is asked for (over the configuration's). */
const TARGET_OPTIONS = { 'leaf-chunk-tokens': 'int', 'leaf-target-tokens': 'int', 'condensed-target-tokens': 'int', 'custom-instructions': 'string' }

/** @param {Args<typeof TARGET_OPTIONS>} args @returns {Omit<LcmConfig, 'dbPath'>} */
function targetsOf(args) {
  return {
    ...(args['leaf-chunk-tokens'] !== undefined ? { leafChunkTokens: args['leaf-chunk-tokens'] } : {}),
    ...(args['leaf-target-tokens'] !== undefined ? { leafTargetTokens: args['leaf-target-tokens'] } : {}),
    ...(args['condensed-target-tokens'] !== undefined ? { condensedTargetTokens: args['condensed-target-tokens'] } : {}),
    ...(args['custom-instructions'] !== undefined ? { customInstructions: args['custom-instructions'] } : {}),
  }
}

/** The model those options (and the environment) name. @param {Args<typeof LLM_OPTIONS> & { config?: string }} args */
function llmFromArgs(args) {
  // The providers of the same OpenClaw config the engine options come from.
  const env = args.config === undefined ? process.env : { ...process.env, OPENCLAW_CONFIG_PATH: args.config }
  return resolveLlm({ env, provider: args.provider, model: args.model, baseUrl: args['base-url'] })
}

/** Set when stdout or stderr was closed by its reader (EPIPE). */
let outputClosed = false
/**
 * What a running command does when its output is closed; unset: exit at once.
 * @type {(() => void) | undefined}
 */
let onOutputClosed

/** @param {string[]} argv */
async function rewrite(argv) {
  /** @satisfies {OptionSpec} */
  const spec = {
    summary: 'string',
    depth: 'int',
    all: 'switch',
    fallbacks: 'switch',
    'low-fidelity': 'switch',
    apply: 'switch',
    'dry-run': 'switch',
    diff: 'switch',
    'prompt-dir': 'string',
    ...LLM_OPTIONS,
    ...TARGET_OPTIONS,
    db: 'string',
    config: 'string',
    timestamps: 'bool',
    'no-timestamps': 'switch',
    tz: 'string',
    immutable: 'switch',
    help: 'switch',
  }
  const args = parseArgs(argv, spec, 'rewrite')
  if (args.help) return console.log(`usage: ${HELP.rewrite}`)
  if (args._.length !== 1 || !/^\d+$/.test(args._[0]) || Number(args._[0]) < 1) {
    throw new UsageError('rewrite needs one conversation id (a positive integer)', 'rewrite')
  }
  const chosen = /** @type {const} */ (['summary', 'depth', 'all', 'fallbacks', 'low-fidelity']).filter((k) => args[k] !== undefined)
  if (chosen.length !== 1) {
    throw new UsageError('choose exactly one of --summary ID, --depth N, --all, --fallbacks and --low-fidelity', 'rewrite')
  }
  if (args.apply && args['dry-run']) throw new UsageError('--dry-run and --apply contradict each other; choose one', 'rewrite')
  if (args.apply && args.immutable) throw new UsageError('--immutable reads only; it cannot go with --apply', 'rewrite')
  if (args['no-timestamps'] && args.timestamps !== undefined) throw new UsageError('give --timestamps or --no-timestamps, not both', 'rewrite')
  const conversationId = Number(args._[0])
  const { db, engineOptions, configFile } = existingDb(args)
  const llm = llmFromArgs(args)
  if (configFile) console.error(`config: ${configFile}`)
  console.log(
    llm
      ? `summarizer: ${llm.describe}`
      : 'summarizer: offline (no LLM configured: pass --provider/--model, or set LCM_SUMMARY_PROVIDER and LCM_SUMMARY_MODEL, LCM_LLM_BASE_URL, or ANTHROPIC_API_KEY)',
  )
  // A dry run reads only; --apply opens read-write, which upgrades an old file first.
  const options = { ...engineOptions, ...(args.tz === undefined ? {} : { timezone: args.tz }), ...targetsOf(args) }
  const reader = args.apply ? undefined : await openForReading(db, { ...options, ...(args.immutable ? { immutable: true } : {}) })
  const engine = reader ? reader.engine : await LcmEngine.open({ ...options, dbPath: db })
  if (args.apply) reportMigration(engine, db)
  const controller = new AbortController()
  const onSigint = () => controller.abort()
  process.once('SIGINT', onSigint)
  const tty = process.stderr.isTTY
  // Each summary is printed when it is done, so `rewrite … | head` shows the first at once; a
  // reader that stops early cancels the rest (nothing more is summarised, or written).
  let shown = 0
  /** @param {import('../index').RewriteEntry} e */
  const show = (e) => {
    if (tty) process.stderr.write('\r\x1b[K')
    shown += 1
    console.log(
      `\n${e.summaryId} (d${e.depth}, ${plural(e.childCount, e.depth === 0 ? 'message' : 'input')}, ${e.timeRange}): ` +
        `${fmt(e.oldTokens)}t → ${fmt(e.newTokens)}t (${signed(e.delta)})` +
        (e.fidelity !== null ? `, fidelity ${e.fidelity.toFixed(2)}` : '') +
        (e.needsRepair ? ' [still under minFidelity; stays marked]' : '') +
        (e.level === 'fallback' ? ' [the summarizer gave nothing usable; kept as it was]' : '') +
        (args.apply && !e.applied && e.level !== 'fallback' ? ' [unchanged; not written]' : ''),
    )
    if (args.diff) console.log(e.diff || '(no change)')
    else console.log(`--- before\n${e.oldContent}\n--- after\n${e.newContent}`)
  }
  onOutputClosed = () => controller.abort()
  try {
    const result = await engine.rewrite(conversationId, llm ? llm.summarize : 'offline', {
      summaryId: args.summary,
      depth: args.depth,
      all: args.all,
      fallbacks: args.fallbacks,
      lowFidelity: args['low-fidelity'],
      apply: Boolean(args.apply),
      promptDir: args['prompt-dir'],
      timestamps: args.timestamps ?? !args['no-timestamps'],
      model: llm?.model,
      signal: controller.signal,
      onProgress: (p) => {
        if (p.finished) show(p.finished)
        const line = `Rewriting ${p.done + 1}/${p.total}: ${p.summaryId} (d${p.depth})…`
        if (tty) process.stderr.write(`\r\x1b[K${line}`)
        else process.stderr.write(`${line}\n`)
      },
    }).catch((/** @type {unknown} */ err) => {
      // Cancelled because the reader went away: what was shown is all anyone reads.
      if (outputClosed && /** @type {{ code?: string }} */ (err).code === 'E_ABORTED') return null
      throw err
    })
    if (!result) return
    if (tty) process.stderr.write('\r\x1b[K')
    if (!result.entries.length) {
      console.log('No summaries matched rewrite selection.')
      return
    }
    for (const e of result.entries.slice(shown)) show(e)
    const n = `${fmt(result.entries.length)} summar${result.entries.length === 1 ? 'y' : 'ies'}`
    const total = `Total: ${fmt(result.tokensBefore)}t → ${fmt(result.tokensAfter)}t (${signed(result.tokensAfter - result.tokensBefore)})`
    // A dry run says so first: it rewrote nothing.
    const written = result.entries.filter((e) => e.applied).length
    const why = '(the same text by the same model, or nothing usable from the summarizer)'
    const some = written < result.entries.length
    if (result.apply && written === 0) console.log(`\nNo summary was changed: ${result.entries.length === 1 ? 'it came out as it was' : `all ${n} came out as they were`} ${why}.`)
    else if (result.apply) console.log(`\nRewrote ${some ? `${fmt(written)} of ` : ''}${n}${some ? `; the others came out as they were ${why}` : ''}. ${total}`)
    else console.log(`\nDry run: no summary was changed (${n} previewed; ${total.replace('Total', 'would be')}). Add --apply to write the new summaries.`)
  } finally {
    onOutputClosed = undefined
    process.removeListener('SIGINT', onSigint)
    if (tty) process.stderr.write('\r\x1b[K')
    await (reader ?? engine).close()
  }
}

/** @param {string[]} argv */
async function history(argv) {
  const args = parseArgs(argv, { db: 'string', config: 'string', content: 'switch', json: 'switch', immutable: 'switch', help: 'switch' }, 'history')
  if (args.help) return console.log(`usage: ${HELP.history}`)
  if (args._.length !== 1) throw new UsageError('history needs one summary id', 'history')
  const { db, engineOptions } = existingDb(args)
  const reader = await openForReading(db, { ...engineOptions, ...(args.immutable ? { immutable: true } : {}) })
  const { engine } = reader
  try {
    const versions = await engine.history(args._[0])
    if (args.json) return await printJson(versions)
    for (const v of versions) {
      const template = v.template ? `${v.template.name}${v.template.overridden ? ' (override)' : ''} ${v.template.sha256.slice(0, 12)}` : 'no template'
      console.log(
        `v${v.version}${v.current ? ' (current)' : ''}  ${v.createdAt}  ${v.reason}  ${v.model}  ${template}  ${fmt(v.tokenCount)}t` +
          (v.stored ? '' : '  [from the summary row; not stored yet]'),
      )
      if (args.content) console.log(`${v.content}\n`)
    }
  } finally {
    await reader.close()
  }
}

/** @param {string[]} argv */
async function rollback(argv) {
  const args = parseArgs(argv, { db: 'string', config: 'string', help: 'switch' }, 'rollback')
  if (args.help) return console.log(`usage: ${HELP.rollback}`)
  if (args._.length !== 2 || !/^\d+$/.test(args._[1])) throw new UsageError('rollback needs a summary id and a version number', 'rollback')
  const { db, engineOptions } = existingDb(args)
  const engine = await LcmEngine.open({ ...engineOptions, dbPath: db })
  try {
    reportMigration(engine, db)
    const v = await engine.rollback(args._[0], Number(args._[1]))
    if (v.version === Number(args._[1])) console.log(`${v.summaryId}: version ${v.version} is the current text already; nothing was changed`)
    else console.log(`${v.summaryId}: version ${args._[1]} restored as version ${v.version} (${fmt(v.tokenCount)}t)`)
  } finally {
    await engine.close()
  }
}

/** @param {string[]} argv */
async function foldCopies(argv) {
  /** @satisfies {OptionSpec} */
  const spec = { conversation: 'int', apply: 'switch', backup: 'string', db: 'string', config: 'string', help: 'switch' }
  const args = parseArgs(argv, spec, 'fold-copies')
  if (args.help) return console.log(`usage: ${HELP['fold-copies']}`)
  if (args._.length) throw new UsageError(`unexpected argument ${args._[0]}`, 'fold-copies')
  if (args.backup !== undefined && !args.apply) throw new UsageError('--backup goes with --apply (a dry run writes nothing)', 'fold-copies')
  const { db, engineOptions } = existingDb(args)
  const backup = args.apply ? (args.backup ?? `${db}.before-fold-copies-${new Date().toISOString().replace(/[:.]/g, '-')}.db`) : undefined
  if (backup !== undefined) checkDbFile(backup, 'the backup file')
  const engine = await LcmEngine.open({ ...engineOptions, dbPath: db })
  try {
    reportMigration(engine, db)
    const r = await engine.foldCopies({ conversationId: args.conversation, apply: Boolean(args.apply), ...(backup ? { backup } : {}) })
    if (!r.copies.length) return console.log('no copies: lossless-claw stored no turn twice here')
    const byConversation = new Map()
    for (const c of r.copies) byConversation.set(c.conversationId, [...(byConversation.get(c.conversationId) ?? []), `${c.copyId} of ${c.originalId}`])
    for (const [cid, pairs] of byConversation) console.log(`conversation ${cid}: ${plural(pairs.length, 'copy')} (copy of original: ${pairs.join(', ')})`)
    for (const k of r.kept) console.log(`  kept ${k.copyId}: ${k.reason}`)
    const what = `${plural(r.folded.length, 'copy')} (${plural(r.contextItemsRemoved, 'live context row')}, ${plural(r.summaryLinksRemoved, 'summary link')})`
    if (r.applied) console.log(`folded ${what} into their originals; backup ${r.backup}`)
    else if (r.folded.length) console.log(`would fold ${what}; nothing was written. To fold them (a backup is written first): lcm-native fold-copies --apply --db ${db}${args.conversation ? ` --conversation ${args.conversation}` : ''}`)
    else console.log('nothing to fold: every copy is kept')
  } finally {
    await engine.close()
  }
}

/** @param {string[]} argv */
async function redact(argv) {
  /** @satisfies {OptionSpec} */
  const spec = {
    pattern: 'string',
    messages: 'string',
    conversation: 'int',
    replacement: 'string',
    reason: 'string',
    'mark-only': 'switch',
    finish: 'switch',
    ...LLM_OPTIONS,
    ...TARGET_OPTIONS,
    db: 'string',
    config: 'string',
    help: 'switch',
  }
  const args = parseArgs(argv, spec, 'redact')
  if (args.help) return console.log(`usage: ${HELP.redact}`)
  if (args._.length) throw new UsageError(`unexpected argument ${args._[0]}`, 'redact')
  const chosen = [args.pattern, args.messages, args.finish].filter((v) => v !== undefined).length
  if (chosen !== 1) throw new UsageError('give one of --pattern, --messages and --finish', 'redact')
  const messageIds = args.messages === undefined ? undefined : args.messages.split(',').map((s) => Number(s.trim()))
  if (messageIds && messageIds.some((n) => !Number.isInteger(n) || n < 1)) throw new UsageError('--messages takes message ids separated by commas', 'redact')
  const { db, engineOptions } = existingDb(args)
  const llm = llmFromArgs(args)
  const engine = await LcmEngine.open({ ...engineOptions, ...targetsOf(args), dbPath: db })
  const controller = new AbortController()
  const onSigint = () => controller.abort()
  process.once('SIGINT', onSigint)
  try {
    reportMigration(engine, db)
    const r = await engine.redact(
      {
        conversationId: args.conversation,
        messageIds,
        pattern: args.pattern,
        replacement: args.replacement,
        reason: args.reason,
        markOnly: Boolean(args['mark-only']),
        ...(args.finish ? { finish: true } : {}),
        signal: controller.signal,
        onProgress: (p) => process.stderr.write(`Regenerating ${p.done + 1}/${p.total}: ${p.summaryId} (d${p.depth})…\n`),
      },
      llm ? llm.summarize : 'offline',
    )
    if (args.finish) {
      console.log(`finished: ${fmt(r.regenerated)} summar${r.regenerated === 1 ? 'y' : 'ies'} regenerated, ${fmt(r.pending)} still marked; ${r.scrubPending ? 'the scrub is still pending' : 'the file is scrubbed'}`)
    } else {
      console.log(
        `redacted ${fmt(r.matches)} match${r.matches === 1 ? '' : 'es'} in ${plural(r.messages, 'message')} (${plural(r.parts, 'part')}); ` +
          `${fmt(r.summaries)} summar${r.summaries === 1 ? 'y' : 'ies'} reached${r.summariesFound ? ` (${fmt(r.summariesFound)} found holding a match outside the messages' lineage)` : ''}, ${fmt(r.regenerated)} regenerated, ${fmt(r.pending)} still marked; ` +
          `${plural(r.versionsPurged, 'old version')} purged` + (r.redactionId ? `; log entry ${r.redactionId}` : '') +
          (r.spooledMatches ? `; ${fmt(r.spooledMatches)} in turns spooled beside the file` : ''),
      )
    }
    if (r.spoolBusy) console.log('warning: a drain of the spooled turns beside the file was running; they were not redacted: run the same redact again')
    if (r.scrubError) {
      console.log(`warning: the text is replaced, but the scrub of the file failed (${r.scrubError}); its free pages may still hold the old text. Free space, then run: lcm-native redact --finish --db ${db}`)
      process.exitCode = 1
    } else if (!r.checkpointed) {
      console.log('warning: another process holds the file open; the write-ahead log still holds old pages until its next checkpoint (lcm-native redact --finish scrubs it then)')
    }
  } finally {
    process.removeListener('SIGINT', onSigint)
    await engine.close()
  }
}

/** @param {string[]} argv */
async function prompts(argv) {
  /** @satisfies {OptionSpec} */
  const spec = { list: 'switch', export: 'optional', force: 'switch', config: 'string', show: 'string', diff: 'string', render: 'string', 'prompt-dir': 'string', 'target-tokens': 'int', 'previous-context': 'string', 'child-count': 'int', 'time-range': 'string', 'source-text': 'string', help: 'switch' }
  const args = parseArgs(argv, spec, 'prompts')
  if (args.help) return console.log(`usage: ${HELP.prompts}`)
  if (args._.length) throw new UsageError(`unexpected argument ${args._[0]}`, 'prompts')
  const actions = /** @type {const} */ (['list', 'export', 'show', 'diff', 'render']).filter((k) => args[k] !== undefined)
  if (actions.length !== 1) throw new UsageError('choose exactly one of --list, --export, --show, --diff and --render', 'prompts')
  const options = { promptDir: args['prompt-dir'] }
  // Exactly one of them is given.
  if (args.list) {
    for (const p of await listPrompts(options)) console.log(`${p.name.padEnd(20)} ${p.overridden ? p.source : 'embedded (default)'}`)
  } else if (args.export !== undefined) {
    const paths = await exportPrompts(args.export === true ? null : args.export, { overwrite: Boolean(args.force) })
    for (const p of paths) console.log(`wrote ${p}`)
  } else if (args.show !== undefined) {
    const p = await showPrompt(args.show, options)
    console.error(`# ${p.name}: ${p.overridden ? p.source : 'embedded (default)'}`)
    process.stdout.write(p.text.endsWith('\n') ? p.text : `${p.text}\n`)
  } else if (args.diff !== undefined) {
    const p = await showPrompt(args.diff, options)
    if (!p.overridden) throw Object.assign(new Error(`${p.name} is not overridden (no file in --prompt-dir or ~/.config/lcm-tui/prompts)`), { code: 'E_NOT_FOUND' })
    console.log(p.diff || `${p.source} is identical to the default`)
  } else if (args.render !== undefined) {
    /** @type {Partial<import('../index.js').PromptVars>} */
    const vars = {}
    // Without --target-tokens, the addon fills in the length compaction asks for with the
    // engine's options as settingsOf reads them.
    if (args['target-tokens'] !== undefined) vars.targetTokens = args['target-tokens']
    if (args['previous-context'] !== undefined) vars.previousContext = args['previous-context']
    if (args['child-count'] !== undefined) vars.childCount = args['child-count']
    if (args['time-range'] !== undefined) vars.timeRange = args['time-range']
    if (args['source-text'] !== undefined) vars.sourceText = args['source-text']
    const { engineOptions } = settingsOf(args)
    process.stdout.write(`${await renderPrompt(args.render, vars, { ...options, engine: engineOptions })}\n`)
  }
}

/** How long `ui` takes at most to stop on a signal (ms). */
const STOP_MS = 1800

/** @param {string[]} argv */
async function ui(argv) {
  /** @satisfies {OptionSpec} */
  const spec = { db: 'string', config: 'string', port: 'int', write: 'switch', conversation: 'int', ...LLM_OPTIONS, tz: 'string', help: 'switch' }
  const args = parseArgs(argv, spec, 'ui')
  if (args.help) return console.log(`usage: ${HELP.ui}`)
  if (args._.length > 0) throw new UsageError(`unexpected argument ${args._[0]}`, 'ui')
  if (args.port !== undefined && (args.port < 0 || args.port > 65535)) throw new UsageError('--port takes 0 to 65535 (0: any free port)', 'ui')
  const { db, engineOptions: configured } = existingDb(args)
  const engineOptions = { ...configured, ...(args.tz === undefined ? {} : { timezone: args.tz }) }
  const engine = args.write ? await LcmEngine.open({ dbPath: db, ...engineOptions }) : await openReadOnly(db, engineOptions)
  const llm = args.write ? llmFromArgs(args) : null
  const { startUi } = require('../panel/server.cjs')
  const server = await startUi({
    engine,
    database: shownDatabase(db),
    path: isDatabaseUrl(db) ? null : path.resolve(db),
    version: String(require('../package.json').version),
    write: Boolean(args.write),
    port: args.port ?? 0,
    summarizer: () => (llm ? { summarize: llm.summarizerFor(undefined), model: llm.model } : { summarize: 'offline', model: 'lcm-native/offline' }),
    log: (text) => console.log(text),
  })
  const query = args.conversation === undefined ? '' : `?conversation=${args.conversation}`
  console.log(`lcm-native ui: ${shownDatabase(db)} (${args.write ? `writes allowed; summarizer ${llm ? llm.describe : 'offline'}` : 'read-only'})`)
  console.log(`open ${server.base}${query}#token=${server.token}`)
  // Served until a terminal or a supervisor ends it (SIGINT, SIGTERM, SIGHUP): then the
  // connections are closed (one answering a request gets a moment to finish it), then the
  // engine, and the command ends as one that is done (0). A second signal meanwhile has its
  // default action: the process ends at once.
  await new Promise((resolve) => {
    const stop = () => {
      for (const signal of END_SIGNALS) process.removeListener(signal, stop)
      resolve(undefined)
    }
    for (const signal of END_SIGNALS) process.on(signal, stop)
  })
  let closed = false
  // Whatever still runs after the close (an answer nobody reads any more, the LLM call it
  // waited on) is not waited for; nor is a close that does not come (exit 1, said).
  setTimeout(() => {
    if (!closed) {
      console.error(`lcm-native: E_TIMEOUT: ${shownDatabase(db)} did not close within ${STOP_MS / 1000} s of the signal; the process ends without waiting for it`)
      process.exitCode = 1
    }
    process.exit()
  }, STOP_MS).unref()
  try {
    await server.close()
  } finally {
    await engine.close()
    closed = true
  }
}

/**
 * The engine of a `Reader` whose `close` also removes the upgraded copy it may read.
 * @param {InstanceType<typeof import('./cli-common.cjs').Reader>} reader @returns {Engine}
 */
function readerEngine(reader) {
  return new Proxy(reader.engine, {
    get(target, key) {
      if (key === 'close') return () => reader.close()
      const value = Reflect.get(target, key, target)
      return typeof value === 'function' ? value.bind(target) : value
    },
  })
}

/** @param {string[]} argv */
async function tui(argv) {
  /** @satisfies {OptionSpec} */
  const spec = {
    db: 'string',
    conversation: 'int',
    'prompt-dir': 'string',
    ...LLM_OPTIONS,
    ...TARGET_OPTIONS,
    config: 'string',
    tz: 'string',
    help: 'switch',
  }
  const args = parseArgs(argv, spec, 'tui')
  if (args.help) return console.log(`usage: ${HELP.tui}`)
  if (args._.length > 0) throw new UsageError(`unexpected argument ${args._[0]}`, 'tui')
  if (!process.stdin.isTTY || !process.stdout.isTTY) throw Object.assign(new Error('tui needs a terminal (stdin and stdout must be a TTY)'), { code: 'E_INVALID_INPUT' })
  const { db, engineOptions: configured } = existingDb(args)
  const llm = llmFromArgs(args)
  const engineOptions = { ...configured, ...(args.tz === undefined ? {} : { timezone: args.tz }), ...targetsOf(args) }
  // Read as every read command reads: a file that needs an upgrade (lossless-claw's) through an
  // upgraded copy, said before the screen is taken over. The first apply opens the file itself
  // for writing, which upgrades it, as `rewrite --apply` does.
  const reader = await openForReading(db, engineOptions)
  const Engine = {
    /** @param {LcmConfig & { readOnly?: boolean }} config */
    open: (config) => (config.readOnly ? Promise.resolve(readerEngine(reader)) : LcmEngine.open(config)),
  }
  let runTui
  try {
    ;({ runTui } = await import('../tui/main.mjs'))
  } catch (err) {
    // Ink and React are optional peers: the OpenClaw plugin and the library never need them.
    await reader.close()
    const message = fieldOf(err, 'message')
    if (fieldOf(err, 'code') === 'ERR_MODULE_NOT_FOUND' && typeof message === 'string' && /['"](ink|react)['"]/.test(message)) {
      throw Object.assign(new Error('the tui needs Ink and React, which lcm-native does not install for the library or the plugin: run npm install ink@6 react@19 where lcm-native is installed'), { code: 'E_MISSING_DEPENDENCY' })
    }
    throw err
  }
  await runTui({
    Engine,
    dbPath: db,
    promptDir: args['prompt-dir'],
    llm,
    engineOptions,
    conversationId: args.conversation,
  })
}

/** @param {string[]} argv */
async function main(argv) {
  const [command, ...rest] = argv
  /** @type {Record<Command, (argv: string[]) => Promise<void>>} */
  const commands = { demo, stats, ...inspect.commands, fidelity, migrate, backup, copy, rewrite, history, rollback, 'fold-copies': foldCopies, redact, tui, ui, prompts }
  if (isCommand(command)) {
    // `-h` and `--help` anywhere after a command show its usage, whatever else is given.
    if (rest.some((a) => a === '-h' || a === '--help')) return console.log(`usage: ${HELP[command]}`)
    return commands[command](rest)
  }
  if (command === '--version' || command === '-V' || command === 'version') {
    return console.log(`lcm-native ${require('../package.json').version}`)
  }
  if (command === undefined || command === '--help' || command === '-h' || command === 'help') {
    console.log(USAGE)
    if (command === undefined) process.exitCode = 2
    return
  }
  const near = closest(command, Object.keys(HELP)) ?? Object.keys(HELP).find((name) => command.startsWith(name))
  console.error(`lcm-native: unknown command ${command}${near ? `; did you mean ${near}?` : ''} (lcm-native --help lists the commands)`)
  process.exitCode = 2
}

// Output piped into a reader that stops early (`| head`) is not an error: stop quietly, the way
// Unix tools do, instead of an unhandled EPIPE stack. A long run (rewrite) is cancelled instead,
// so that it stops between two summaries and closes its database.
for (const stream of [process.stdout, process.stderr]) {
  stream.on('error', (/** @type {NodeJS.ErrnoException} */ err) => {
    if (err.code !== 'EPIPE') throw err
    outputClosed = true
    if (onOutputClosed) onOutputClosed()
    else process.exit(0)
  })
}

main(process.argv.slice(2)).catch((/** @type {unknown} */ err) => {
  if (err instanceof UsageError) {
    console.error(`lcm-native: ${hideUrlSecrets(err.message)}\n\n${isCommand(err.command) ? `usage: ${HELP[err.command]}` : USAGE}`)
    process.exitCode = 2
  } else {
    // Always with a code (failureCode): scripts tell failures apart by it.
    console.error(`lcm-native: ${failureCode(err)}: ${hideUrlSecrets(oneLine(failureMessage(err), 2000))}`)
    process.exitCode = 1
  }
})
