// The read commands of the lcm-native CLI: conversations, messages, show, grep, describe,
// expand, verify and doctor. Each opens the database for reading only (an un-upgraded
// lossless-claw file through an upgraded copy, leaving the file as it is) and prints text, or
// with --json the engine's own result for scripts.
'use strict'

const fs = require('node:fs')

const { Output, UsageError, answerTooLarge, existingDb, fmt, jsonPieces, oneLine, openForReading, parseArgs, plural, printJson, promptCacheLine } = require('./cli-common.cjs')

/** doctor: a conversation with at least this many assemblies of which the provider's cache
 * could serve less than this share is worth a look. */
const CACHE_ADVICE_MIN_ASSEMBLIES = 20
const CACHE_ADVICE_SHARE = 0.7
const { messageText } = require('../tui/message-text.cjs')
const { spoolStatus } = require('../index.js')
const { heldPath, spoolBase } = require('../plugin/shared.cjs')

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

/** `messages` asks the engine for this many at a time, and prints each page as it comes. */
const MESSAGE_PAGE = 100

/**
 * The messages of conversation `id` after `afterSeq`, at most `limit`, handed to `each` a page
 * at a time: the first are printed before the rest are read, and no answer of the engine has
 * to be one JavaScript string of every message (a page too large for one, ~512 MB as JSON, is
 * asked for again in halves; one message that large alone is E_TOO_LARGE).
 * @param {Engine} engine @param {number} id @param {number | undefined} afterSeq @param {number} limit
 * @param {(page: import('../index.js').StoredMessage[]) => Promise<void>} each
 */
async function eachMessagePage(engine, id, afterSeq, limit, each) {
  // A limit of 0 goes to the engine as it is, which refuses it (E_INVALID_INPUT).
  let page = Math.min(limit, MESSAGE_PAGE)
  let after = afterSeq
  let left = limit
  do {
    const asked = Math.min(page, left)
    /** @type {import('../index.js').StoredMessage[]} */
    let list
    try {
      list = await engine.messages(id, { afterSeq: after, limit: asked })
    } catch (err) {
      if (!answerTooLarge(err)) throw err
      if (asked === 1) {
        const where = after === undefined ? 'the first message' : `the message after seq ${after}`
        throw Object.assign(new Error(`${where} of conversation ${id} is larger than one JavaScript string can hold (about 512 MB as JSON); read it with 'lcm-native show' or lcm_describe's pages`), { code: 'E_TOO_LARGE' })
      }
      page = Math.ceil(asked / 2)
      continue
    }
    await each(list)
    if (list.length < asked) return
    left -= list.length
    after = list[list.length - 1].seq
  } while (left > 0)
}

/**
 * A positive integer argument.
 * @param {string | undefined} text @param {string} what @param {string} command
 */
function idArg(text, what, command) {
  if (text === undefined || !/^\d+$/.test(text) || Number(text) < 1) throw new UsageError(`${command} needs ${what} (a positive integer)`, command)
  return Number(text)
}

/** A time as the list shows it: `2026-11-26 09:07:00` (ISO-8601 or SQLite's shape in). @param {string} t */
const activity = (t) => t.replace('T', ' ').replace(/(\.\d+)?Z$/, '')

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
          `summaries ${depths}, ${plural(c.contextItemCount, 'live item')}, ` +
          // First and last activity: its messages' times (a conversation without any: its row's).
          `${activity(c.firstMessageAt ?? c.createdAt)} → ${activity(c.lastMessageAt ?? c.updatedAt)}`,
      )
    }
  })
}

/** @param {string[]} argv */
async function messages(argv) {
  const args = parseArgs(argv, { ...READ_OPTIONS, after: 'int', limit: 'int' }, 'messages')
  if (args._.length > 1) throw new UsageError(`unexpected argument ${args._[1]}`, 'messages')
  const id = idArg(args._[0], 'a conversation id', 'messages')
  const limit = args.limit ?? 50
  await reading(args, async (engine) => {
    const out = new Output()
    let count = 0
    let lastSeq = 0
    const width = Math.max(60, (process.stdout.columns ?? 160) - 50)
    // --json: the array JSON.stringify(list, null, 2) would print, one message at a time.
    await eachMessagePage(engine, id, args.after, limit, async (page) => {
      for (const m of page) {
        if (args.json) {
          await out.write(`${count === 0 ? '[' : ','}\n  `)
          await out.writeAll(jsonPieces(m, '  '))
        } else {
          await out.write(`${String(m.seq).padStart(5)}  #${m.messageId}  ${m.createdAt}  ${m.role.padEnd(10)} ${fmt(m.tokenCount).padStart(6)}t  ${oneLine(messageText(m.content), width)}\n`)
        }
        count++
        lastSeq = m.seq
      }
    })
    if (args.json) await out.write(count === 0 ? '[]\n' : '\n]\n')
    else if (count === 0) await out.write(args.after === undefined ? 'no messages\n' : `no messages after seq ${args.after}\n`)
    else if (count === limit) await out.write(`(more: lcm-native messages ${id} --after ${lastSeq})\n`)
    await out.flush()
  })
}

/** @param {string[]} argv */
async function show(argv) {
  const args = parseArgs(argv, READ_OPTIONS, 'show')
  if (args._.length > 1) throw new UsageError(`unexpected argument ${args._[1]}`, 'show')
  const id = idArg(args._[0], 'a message id', 'show')
  await reading(args, async (engine) => {
    const d = await engine.describe(id)
    if (d.type !== 'message') throw Object.assign(new Error(`${id} is not a message`), { code: 'E_NOT_FOUND' })
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
    // The engine lists breadth first; drawn as a tree, each entry goes under the one it was
    // reached from.
    /** @type {Map<string, typeof x.entries>} */
    const under = new Map()
    for (const e of x.entries) under.set(e.parentId, [...(under.get(e.parentId) ?? []), e])
    /** @param {string} parent */
    const draw = (parent) => {
      for (const e of under.get(parent) ?? []) {
        const indent = '  '.repeat(e.level)
        if (e.type === 'summary') {
          console.log(`${indent}${e.summaryId} (${e.kind} d${e.depth}, ${fmt(e.tokenCount)}t)\n${indent}  ${oneLine(e.content, 300)}`)
          draw(e.summaryId)
        } else {
          const text = typeof e.message.content === 'string' ? e.message.content : messageText(/** @type {ContentBlock[]} */ (e.message.content))
          console.log(`${indent}#${e.messageId} ${e.message.role} (${fmt(e.tokenCount)}t)\n${indent}  ${oneLine(text, 300)}`)
        }
      }
    }
    draw(x.summaryId)
    console.log(`\n${fmt(x.estimatedTokens)} tokens${x.truncated ? ' (cut at the budget: raise --tokens)' : ''}`)
  })
}

/** @param {string[]} argv */
async function verify(argv) {
  const args = parseArgs(argv, { ...READ_OPTIONS, conversation: 'int' }, 'verify')
  if (args._.length) throw new UsageError(`unexpected argument ${args._[0]}`, 'verify')
  await reading(args, async (engine) => {
    // A conversation that does not exist is the engine's E_NOT_FOUND, not an empty clean bill.
    const r = await engine.verify(args.conversation)
    if (args.json) await printJson(r)
    else {
      console.log(`${r.ok ? 'ok' : 'PROBLEMS'}: ${plural(r.conversations, 'conversation')}, ${plural(r.messages, 'message')}, ${plural(r.summaries, 'summary')} checked (digest ${r.digest.slice(0, 16)})`)
      for (const p of r.problems) console.log(`  - ${p}`)
      for (const n of r.notes) console.log(`  note: ${n}`)
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
    const copied = new Map()
    for (const c of report.copies) copied.set(c.conversationId, (copied.get(c.conversationId) ?? 0) + 1)
    for (const [cid, n] of copied) advice.push({ problem: `conversation ${cid}: ${plural(n, 'message')} stored twice by lossless-claw 1.0 (re-imported copies; the model is sent each once)`, fix: `nothing is needed for the model; to keep each turn once on disk too: lcm-native fold-copies --conversation ${cid} --db ${db} (a dry run; --apply writes a backup first, then folds them)` })
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
    // Turns the OpenClaw plugin could not store yet, beside the file (or named after the URL).
    const spooled = spoolStatus(spoolBase(db))
    const since = (/** @type {number} */ at) => `${fmt(Math.round((Date.now() - at) / 60000))} min`
    if (spooled.turns) advice.push({ problem: `${plural(spooled.turns, 'turn')} spooled by the OpenClaw plugin wait to be stored (the oldest for ${since(spooled.oldestAt ?? Date.now())})`, fix: "the gateway stores them at its next call; if they stay, the plugin's log says why (lcm-native: storing …)" })
    if (spooled.held) advice.push({ problem: `${plural(spooled.held, 'spooled turn')} failed every try and were set aside in ${heldPath(db)}`, fix: "the plugin logged each error; once its cause is fixed, append the file's lines to the spool file (…lcm-native-pending.jsonl) and the next call stores them" })
    if (spooled.lock?.stale) advice.push({ problem: `the spool's drain lock is stale (${spooled.lock.stale})`, fix: 'the next drain takes it over (the gateway\'s next call)' })
    else if (spooled.lock?.unreadable) advice.push({ problem: `the spool's drain lock ${spoolBase(db)}.lcm-native-pending.jsonl.lock cannot be read: ${spooled.lock.unreadable}`, fix: 'if no gateway of another user holds it, remove it as its owner; otherwise it is taken over once it has not been renewed for 60 s (where its directory lets the gateway move it)' })
    if (spooled.problem) advice.push({ problem: `the spool location cannot be used: ${spooled.problem}`, fix: 'make the directory writable for the gateway, or turns it cannot store are lost to the host\'s retry queue' })
    if (wal > 64 * 1024 * 1024) advice.push({ problem: `the write-ahead log is ${fmt(wal)} bytes (a writer was stopped before its checkpoint)`, fix: 'it is folded into the file by the next writer that opens it (OpenClaw, or any lcm-native write command)' })
    if (args.json) {
      await printJson({ ok: report.ok, verify: report, upgradeNeeded, walBytes: wal, spool: spooled, conversations: perConversation, advice })
    } else {
      console.log(`verify: ${report.ok ? 'ok' : `${plural(report.problems.length, 'problem')}`} (${plural(report.conversations, 'conversation')}, ${plural(report.messages, 'message')}, ${plural(report.summaries, 'summary')})`)
      for (const p of report.problems) console.log(`  - ${p}`)
      for (const n of report.notes) console.log(`  note: ${n}`)
      for (const c of perConversation) if (c.promptCache) console.log(`conversation ${c.conversationId} (${c.session}): ${promptCacheLine(c.promptCache)}`)
      console.log(`spool: ${spooled.turns ? `${plural(spooled.turns, 'turn')} waiting (the oldest for ${since(spooled.oldestAt ?? Date.now())})` : 'empty'}${spooled.held ? `, ${fmt(spooled.held)} set aside` : ''}${spooled.lock ? `, drain lock ${spooled.lock.unreadable ? `that this process cannot read (${spooled.lock.unreadable})` : `held by pid ${spooled.lock.pid} on ${spooled.lock.host}`}${spooled.lock.stale ? ` (stale: ${spooled.lock.stale})` : ''}` : ''}`)
      if (!advice.length) console.log('nothing to do')
      for (const a of advice) console.log(`${a.problem}\n  → ${a.fix}`)
    }
    if (!report.ok) process.exitCode = 1
  })
}

module.exports = { HELP, commands: { conversations, messages, show, grep, describe, expand, verify, doctor } }
