// The read commands of the lcm-native CLI: conversations, messages, show, grep, describe,
// expand, verify and doctor. Each opens the database for reading only (an un-upgraded
// lossless-claw file through an upgraded copy, leaving the file as it is) and prints text, or
// with --json the engine's own result for scripts.
'use strict'

const fs = require('node:fs')

const { UsageError, existingDb, fmt, oneLine, openForReading, parseArgs, plural, promptCacheLine } = require('./cli-common.cjs')

/** doctor: a conversation with at least this many assemblies of which the provider's cache
 * could serve less than this share is worth a look. */
const CACHE_ADVICE_MIN_ASSEMBLIES = 20
const CACHE_ADVICE_SHARE = 0.7
const { messageText } = require('../tui/message-text.cjs')

/**
 * @typedef {import('../index.js').LcmEngine} Engine
 * @typedef {import('../index.js').ContentBlock} ContentBlock
 * @typedef {import('./cli-common.cjs').OptionSpec} OptionSpec
 */

const READ = '[--db PATH] [--config FILE] [--json] [--immutable]'

const HELP = {
  conversations: `lcm-native conversations ${READ}
    Every conversation: id, session, messages and their tokens, summaries per depth, live
    items, first and last activity.`,
  messages: `lcm-native messages <conversation_id> [--after SEQ] [--limit N] ${READ}
    A conversation's messages in order, one line each (seq, id, time, role, tokens, text);
    --after: only those after that seq (paging); --limit: at most N (default 50, at most 1000).`,
  show: `lcm-native show <message_id> ${READ}
    One message whole: its content blocks (text, tool calls with their arguments, results),
    where it stands (live, or which summary covers it) and its stored parts.`,
  grep: `lcm-native grep <query> [--conversation N] [--mode fts|regex|like] [--scope messages|summaries|both]
                  [--sort recency|relevance|hybrid] [--limit N] ${READ}
    Search messages and summaries as the agent's recall tool does: full-text (default),
    a regular expression, or a substring (like). Each hit with its id, time and what covers it.`,
  describe: `lcm-native describe <summary_id | message_id> ${READ}
    What one summary or message is: for a summary its kind, depth, range, inputs, the
    messages it covers, what consumed it, its fidelity and versions; then its text.`,
  expand: `lcm-native expand <summary_id> [--tokens N] [--max-depth N] ${READ}
    The summary's inputs, then theirs, down to the raw messages, within --tokens (default
    maxExpandTokens).`,
  verify: `lcm-native verify [--conversation N] ${READ}
    Check the invariants (every message covered or live, the DAG sound, counts consistent)
    and print the problems found; exit code 1 when there are any.`,
  doctor: `lcm-native doctor ${READ}
    A health check: verify, then the summaries a failed summarizer left (fallbacks), those
    under minFidelity, those never scored, whether the file needs an upgrade and the size of
    its write-ahead log, with the command that fixes each. Exit code 1 when verify fails.`,
}

/** @satisfies {OptionSpec} */
const READ_OPTIONS = { db: 'string', config: 'string', json: 'switch', immutable: 'switch', help: 'switch' }

/**
 * Runs `body` on the database the arguments name, opened for reading.
 * @template T
 * @param {{ db?: string, config?: string, immutable?: true }} args
 * @param {(engine: Engine, upgradeNeeded: boolean, db: string) => Promise<T>} body
 */
async function reading(args, body) {
  const { db, engineOptions } = existingDb(args)
  const reader = await openForReading(db, { ...engineOptions, ...(args.immutable ? { immutable: true } : {}) })
  try {
    return await body(reader.engine, reader.upgradeNeeded, db)
  } finally {
    await reader.close()
  }
}

/** @param {unknown} value */
function printJson(value) {
  console.log(JSON.stringify(value, null, 2))
}

/**
 * A positive integer argument.
 * @param {string | undefined} text @param {string} what @param {string} command
 */
function idArg(text, what, command) {
  if (text === undefined || !/^\d+$/.test(text) || Number(text) < 1) throw new UsageError(`${command} needs ${what} (a positive integer)`, command)
  return Number(text)
}

/** @param {string[]} argv */
async function conversations(argv) {
  const args = parseArgs(argv, READ_OPTIONS, 'conversations')
  if (args._.length) throw new UsageError(`unexpected argument ${args._[0]}`, 'conversations')
  await reading(args, async (engine) => {
    const list = await engine.conversations()
    if (args.json) return printJson(list)
    if (!list.length) return console.log('no conversations')
    for (const c of list) {
      const depths = c.summariesByDepth.map((n, d) => `d${d}: ${n}`).join(', ') || 'none'
      console.log(
        `${c.conversationId}  ${c.sessionKey ?? c.sessionId}  ${plural(c.messageCount, 'message')} (${fmt(c.messageTokens)}t), ` +
          `summaries ${depths}, ${plural(c.contextItemCount, 'live item')}, ${c.createdAt} → ${c.updatedAt}`,
      )
    }
  })
}

/** @param {string[]} argv */
async function messages(argv) {
  const args = parseArgs(argv, { ...READ_OPTIONS, after: 'int', limit: 'int' }, 'messages')
  if (args._.length > 1) throw new UsageError(`unexpected argument ${args._[1]}`, 'messages')
  const id = idArg(args._[0], 'a conversation id', 'messages')
  await reading(args, async (engine) => {
    const list = await engine.messages(id, { afterSeq: args.after, limit: args.limit ?? 50 })
    if (args.json) return printJson(list)
    if (!list.length) return console.log(args.after === undefined ? 'no messages' : `no messages after seq ${args.after}`)
    const width = Math.max(60, (process.stdout.columns ?? 160) - 50)
    for (const m of list) {
      console.log(`${String(m.seq).padStart(5)}  #${m.messageId}  ${m.createdAt}  ${m.role.padEnd(10)} ${fmt(m.tokenCount).padStart(6)}t  ${oneLine(messageText(m.content), width)}`)
    }
    const last = list[list.length - 1]
    if (list.length === (args.limit ?? 50)) console.log(`(more: lcm-native messages ${id} --after ${last.seq})`)
  })
}

/** @param {string[]} argv */
async function show(argv) {
  const args = parseArgs(argv, READ_OPTIONS, 'show')
  if (args._.length > 1) throw new UsageError(`unexpected argument ${args._[1]}`, 'show')
  const id = idArg(args._[0], 'a message id', 'show')
  await reading(args, async (engine) => {
    const d = await engine.describe(id)
    if (d.type !== 'message') throw new Error(`${id} is not a message`)
    if (args.json) return printJson(d)
    const where = d.live ? 'live (in the context as it is)' : `covered by ${d.liveSummary ?? d.chain.map((c) => c.summaryId).join(' → ')}`
    console.log(`message #${d.messageId} (conversation ${d.conversationId}, seq ${d.seq}), ${d.role}, ${d.createdAt}, ${fmt(d.tokenCount)}t; ${where}`)
    if (d.toolCallId) console.log(`answers tool call ${d.toolCallId}`)
    console.log(`\n${messageText(d.content)}`)
  })
}

/** @param {string[]} argv */
async function grep(argv) {
  /** @satisfies {OptionSpec} */
  const spec = { ...READ_OPTIONS, conversation: 'int', mode: 'string', scope: 'string', sort: 'string', limit: 'int' }
  const args = parseArgs(argv, spec, 'grep')
  if (args._.length !== 1) throw new UsageError(args._.length ? `unexpected argument ${args._[1]}` : 'grep needs a query', 'grep')
  /** @param {string} name @param {string | undefined} value @param {readonly string[]} choices */
  const choice = (name, value, choices) => {
    if (value !== undefined && !choices.includes(value)) throw new UsageError(`--${name} takes ${choices.join(', ')} (got ${value})`, 'grep')
    return value
  }
  const options = {
    query: args._[0],
    mode: /** @type {import('../index.js').GrepMode | undefined} */ (choice('mode', args.mode, ['fts', 'regex', 'like'])),
    scope: /** @type {import('../index.js').GrepScope | undefined} */ (choice('scope', args.scope, ['messages', 'summaries', 'both'])),
    sort: /** @type {import('../index.js').GrepSort | undefined} */ (choice('sort', args.sort, ['recency', 'relevance', 'hybrid'])),
    limit: args.limit,
  }
  await reading(args, async (engine) => {
    const r = await engine.grep(args.conversation ?? null, options)
    if (args.json) return printJson(r)
    if (!r.hits.length) console.log('no matches')
    for (const h of r.hits) {
      const id = h.type === 'message' ? `#${h.messageId} ${h.role}` : `${h.summaryId} d${h.depth}`
      const where = h.live ? 'live' : `covered by ${h.coveredBy}`
      console.log(`${id}  conv ${h.conversationId}  ${h.time}  (${where})\n    ${oneLine(h.snippet, 200)}`)
    }
    if (r.truncated) console.log(`(more matches: raise --limit)`)
    if (r.partial) console.log(`(partial: ${JSON.stringify(r.partial)})`)
  })
}

/** @param {string[]} argv */
async function describe(argv) {
  const args = parseArgs(argv, READ_OPTIONS, 'describe')
  if (args._.length !== 1) throw new UsageError(args._.length ? `unexpected argument ${args._[1]}` : 'describe needs a summary id or a message id', 'describe')
  const target = /^\d+$/.test(args._[0]) ? Number(args._[0]) : args._[0]
  await reading(args, async (engine) => {
    const d = await engine.describe(target)
    if (args.json) return printJson(d)
    if (d.type === 'message') {
      console.log(`message #${d.messageId} (conversation ${d.conversationId}, seq ${d.seq}), ${d.role}, ${fmt(d.tokenCount)}t, ${d.live ? 'live' : `covered by ${d.liveSummary}`}`)
      console.log(`\n${messageText(d.content)}`)
      return
    }
    const covered = d.coveredMessages
    console.log(`${d.summaryId}: ${d.kind} d${d.depth} of conversation ${d.conversationId}, ${d.range}, ${fmt(d.tokenCount)}t`)
    console.log(`  covers ${plural(covered.count, 'message')}${d.inputs.length ? ` through ${plural(d.inputs.length, 'input')}: ${d.inputs.map((i) => i.summaryId).join(', ')}` : ''}`)
    console.log(`  ${d.live ? 'live' : `consumed by ${d.consumedBy}`}; ${plural(d.versions.length, 'version')}` + (d.fidelity === null ? '' : `; fidelity ${d.fidelity.toFixed(2)}`) + (d.fallback ? '; a fallback (rewrite --fallbacks)' : ''))
    console.log(`\n${d.content}`)
  })
}

/** @param {string[]} argv */
async function expand(argv) {
  const args = parseArgs(argv, { ...READ_OPTIONS, tokens: 'int', 'max-depth': 'int' }, 'expand')
  if (args._.length !== 1) throw new UsageError(args._.length ? `unexpected argument ${args._[1]}` : 'expand needs a summary id', 'expand')
  await reading(args, async (engine) => {
    const x = await engine.expand(args._[0], { tokenBudget: args.tokens, maxDepth: args['max-depth'] })
    if (args.json) return printJson(x)
    for (const e of x.entries) {
      const indent = '  '.repeat(e.level)
      if (e.type === 'summary') {
        console.log(`${indent}${e.summaryId} (${e.kind} d${e.depth}, ${fmt(e.tokenCount)}t)\n${indent}  ${oneLine(e.content, 300)}`)
      } else {
        const text = typeof e.message.content === 'string' ? e.message.content : messageText(/** @type {ContentBlock[]} */ (e.message.content))
        console.log(`${indent}#${e.messageId} ${e.message.role} (${fmt(e.tokenCount)}t)\n${indent}  ${oneLine(text, 300)}`)
      }
    }
    console.log(`\n${fmt(x.estimatedTokens)} tokens${x.truncated ? ' (cut at the budget: raise --tokens)' : ''}`)
  })
}

/** @param {string[]} argv */
async function verify(argv) {
  const args = parseArgs(argv, { ...READ_OPTIONS, conversation: 'int' }, 'verify')
  if (args._.length) throw new UsageError(`unexpected argument ${args._[0]}`, 'verify')
  await reading(args, async (engine) => {
    const r = await engine.verify(args.conversation)
    if (args.json) printJson(r)
    else {
      console.log(`${r.ok ? 'ok' : 'PROBLEMS'}: ${plural(r.conversations, 'conversation')}, ${plural(r.messages, 'message')}, ${plural(r.summaries, 'summary')} checked (digest ${r.digest.slice(0, 16)})`)
      for (const p of r.problems) console.log(`  - ${p}`)
    }
    if (!r.ok) process.exitCode = 1
  })
}

/** @param {string[]} argv */
async function doctor(argv) {
  const args = parseArgs(argv, READ_OPTIONS, 'doctor')
  if (args._.length) throw new UsageError(`unexpected argument ${args._[0]}`, 'doctor')
  await reading(args, async (engine, upgradeNeeded, db) => {
    const report = await engine.verify()
    /** @type {{ conversationId: number, session: string, fallbacks: number, lowFidelity: number, unscored: number, promptCache: import('../index.js').PromptCacheReport | null }[]} */
    const perConversation = []
    for (const c of await engine.conversations()) {
      const summaries = await engine.summaries(c.conversationId)
      const byDepth = summaries.length ? await engine.fidelity(c.conversationId) : []
      perConversation.push({
        conversationId: c.conversationId,
        session: c.sessionKey ?? c.sessionId,
        fallbacks: summaries.filter((s) => s.fallback).length,
        lowFidelity: summaries.filter((s) => s.lowFidelity).length,
        unscored: byDepth.reduce((n, d) => n + d.summaries - d.scored, 0),
        promptCache: c.promptCache ?? null,
      })
    }
    const wal = fs.existsSync(`${db}-wal`) ? fs.statSync(`${db}-wal`).size : 0
    /** @type {{ problem: string, fix: string }[]} */
    const advice = []
    if (!report.ok) advice.push({ problem: `verify found ${plural(report.problems.length, 'problem')}`, fix: `lcm-native backup --db ${db} <copy>, then report the problems (lcm-native verify --db ${db})` })
    if (upgradeNeeded) advice.push({ problem: 'the file has the schema of an older lossless-claw or lcm-native', fix: `lcm-native migrate --db ${db} (OpenClaw with lcm-native also upgrades it when it opens it)` })
    for (const c of perConversation) {
      if (c.fallbacks) advice.push({ problem: `conversation ${c.conversationId}: ${plural(c.fallbacks, 'fallback summary')} (the summarizer failed)`, fix: `lcm-native rewrite ${c.conversationId} --fallbacks --apply --db ${db}` })
      if (c.lowFidelity) advice.push({ problem: `conversation ${c.conversationId}: ${plural(c.lowFidelity, 'summary')} under minFidelity`, fix: `lcm-native rewrite ${c.conversationId} --low-fidelity --apply --db ${db}` })
      if (c.unscored) advice.push({ problem: `conversation ${c.conversationId}: ${plural(c.unscored, 'summary')} without a fidelity score`, fix: `lcm-native fidelity --conversation ${c.conversationId} --db ${db}` })
      const cache = c.promptCache
      if (cache && cache.assemblies >= CACHE_ADVICE_MIN_ASSEMBLIES && cache.keptShare < CACHE_ADVICE_SHARE) {
        advice.push({
          problem: `conversation ${c.conversationId}: only ${(cache.keptShare * 100).toFixed(1)} % of what its ${plural(cache.assemblies, 'assembly')} sent was the previous request's prefix (${plural(cache.breaks, 'break')}, ${plural(cache.compactions, 'compaction')}), so the provider's cache served little of it`,
          fix: 'fewer, larger compactions: a lower contextLowWater, a larger model window, or a smaller freshTailCount (README: Prompt cache)',
        })
      }
    }
    if (wal > 64 * 1024 * 1024) advice.push({ problem: `the write-ahead log is ${fmt(wal)} bytes (a writer was stopped before its checkpoint)`, fix: 'it is folded into the file by the next writer that opens it (OpenClaw, or any lcm-native write command)' })
    if (args.json) {
      printJson({ ok: report.ok, verify: report, upgradeNeeded, walBytes: wal, conversations: perConversation, advice })
    } else {
      console.log(`verify: ${report.ok ? 'ok' : `${plural(report.problems.length, 'problem')}`} (${plural(report.conversations, 'conversation')}, ${plural(report.messages, 'message')}, ${plural(report.summaries, 'summary')})`)
      for (const p of report.problems) console.log(`  - ${p}`)
      for (const c of perConversation) if (c.promptCache) console.log(`conversation ${c.conversationId} (${c.session}): ${promptCacheLine(c.promptCache)}`)
      if (!advice.length) console.log('nothing to do')
      for (const a of advice) console.log(`${a.problem}\n  → ${a.fix}`)
    }
    if (!report.ok) process.exitCode = 1
  })
}

module.exports = { HELP, commands: { conversations, messages, show, grep, describe, expand, verify, doctor } }
