// @ts-check
'use strict'
// The LCM panel's operations: what the browser panel asks of a conversation (its totals, its
// summaries a page at a time, a summary's sources, its raw messages, a search, what the last
// assembly held) and the writes behind the host's write scope (a rewrite previewed, drafted
// and applied, a rollback, a check of the summaries with a repair behind a backup, a
// redaction with its match count first). The OpenClaw plugin serves them as session actions
// (plugin/panel.cjs) and `lcm-native ui` over loopback HTTP (panel/server.cjs): both hand
// each call an open engine and the conversation it is about. Every write is an engine
// operation the CLI and the TUI already use; nothing here writes by itself.
//
// Results stay inside OpenClaw's bounds for plugin results (256 KiB of JSON, 4,096 values):
// lists come in pages, long texts folded, and `checkBounds` refuses anything larger. A
// message's texts are cut by the engine as it reads them (`maxChars`: a 20 MB tool result
// costs the server its first characters, not 20 MB several times over and a walk of it on
// Node's thread, which every other request waited for); `text` pages through one.

const { statSync } = require('node:fs')

/** @typedef {import('../index.js').LcmEngine} LcmEngine */
/** @typedef {import('../index.js').Summarize} Summarize */
/** @typedef {import('../index.js').SummaryRecord} SummaryRecord */
/** @typedef {import('../index.js').StoredMessage} StoredMessage */

/** OpenClaw's bounds for a plugin action's result (openclaw dist host-hook-json). */
const RESULT_MAX_BYTES = 256 * 1024
const RESULT_MAX_NODES = 4096
const STRING_MAX_CHARS = 65_536

/** Characters of a summary shown in a list row, and of a message block on a page. */
const PREVIEW_CHARS = 360
const FOLD_CHARS = 2_000
/** Characters of one text returned whole (a summary, a message block opened in full). */
const FULL_CHARS = 60_000
/** Blocks of one message listed on a page (an assistant turn may call dozens of tools). */
const BLOCKS_PER_MESSAGE = 12

/**
 * A JSON value: what a result is once it went through JSON (the host's `PluginJsonValue`).
 * @typedef {null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue }} JsonValue
 */

/** An error the panel shows with its code (the engine's codes, and these). */
class PanelError extends Error {
  /** @param {string} code @param {string} message */
  constructor(code, message) {
    super(message)
    this.code = code
  }
}

/**
 * The context an operation runs in, resolved by the host adapter for each call.
 * @typedef {object} OperationContext
 * @property {LcmEngine} engine
 * @property {number | null} conversationId  the session's conversation (null: LCM has none yet)
 * @property {{ version: string, database: string, path: string | null }} about  shown in the footer
 * @property {() => { summarize: Summarize, model?: string }} [summarizer]  for rewrites and redactions
 * @property {(text: string) => void} [log]  what a write did, for the host's log
 * @property {LastAssembly | null} [lastAssembly]  the newest assembly of the session, when the host saw one
 */

/**
 * What the plugin recorded of a session's newest assembly (the engine's stats; the items it
 * left out are the oldest `evictedItems` of the context it read).
 * @typedef {object} LastAssembly
 * @property {string} at  ISO-8601
 * @property {number} tokenBudget
 * @property {number} estimatedTokens
 * @property {import('../index.js').AssembleStats} stats
 */

/**
 * A text cut to `max` characters (code points, never half of one), with its length in code
 * points. Walks the string's code units in place: spreading it into an array of characters
 * took 190 MB and half a second of Node's thread for a 20 MB text (the engine cuts long texts
 * before they reach JavaScript, `maxChars`; this bounds what is left, a block drawn as JSON).
 * @param {string} text @param {number} max
 * @returns {{ text: string, chars: number, folded: boolean }}
 */
function fold(text, max) {
  // At most `max` code units: at most `max` code points.
  if (text.length <= max) return { text, chars: codePoints(text, 0), folded: false }
  let end = 0
  let n = 0
  while (n < max && end < text.length) {
    end += pairAt(text, end) ? 2 : 1
    n++
  }
  if (end >= text.length) return { text, chars: n, folded: false }
  return { text: text.slice(0, end), chars: n + codePoints(text, end), folded: true }
}

/** Whether a surrogate pair (one code point in two code units) starts at `i`. @param {string} text @param {number} i */
function pairAt(text, i) {
  const c = text.charCodeAt(i)
  if (c < 0xd800 || c > 0xdbff || i + 1 >= text.length) return false
  const d = text.charCodeAt(i + 1)
  return d >= 0xdc00 && d <= 0xdfff
}

/** Code points of `text` from code unit `from`, counted without making anything. @param {string} text @param {number} from */
function codePoints(text, from) {
  let n = 0
  for (let i = from; i < text.length; i++) {
    if (pairAt(text, i)) i++
    n++
  }
  return n
}

/** A whole number from a payload field, within bounds. @param {unknown} v @param {number} dflt @param {number} min @param {number} max @param {string} name */
function int(v, dflt, min, max, name) {
  if (v === undefined || v === null) return dflt
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) {
    throw new PanelError('E_INVALID_INPUT', `${name} must be a whole number from ${min} to ${max}`)
  }
  return v
}

/** A non-empty string from a payload field. @param {unknown} v @param {string} name */
function str(v, name) {
  if (typeof v !== 'string' || v.trim() === '') throw new PanelError('E_INVALID_INPUT', `${name} must be a non-empty string`)
  return v
}

/** The payload as an object. @param {unknown} p @returns {Record<string, unknown>} */
function payloadOf(p) {
  if (p === undefined || p === null) return {}
  if (typeof p !== 'object' || Array.isArray(p)) throw new PanelError('E_INVALID_INPUT', 'the payload must be an object')
  return /** @type {Record<string, unknown>} */ (p)
}

/** The session's conversation id, or E_NOT_FOUND. @param {OperationContext} ctx */
function conversationOf(ctx) {
  if (ctx.conversationId === null) throw new PanelError('E_NOT_FOUND', 'LCM has stored nothing for this session yet')
  return ctx.conversationId
}

/** A summary as a list row: its fields, its text as a preview. @param {SummaryRecord} s */
function summaryRow(s) {
  const preview = fold(s.content, PREVIEW_CHARS)
  return {
    summaryId: s.summaryId,
    kind: s.kind,
    depth: s.depth,
    tokenCount: s.tokenCount,
    earliestAt: s.earliestAt,
    latestAt: s.latestAt,
    createdAt: s.createdAt,
    descendantCount: s.descendantCount,
    sourceTokens: s.sourceMessageTokenCount,
    model: s.model,
    fallback: s.fallback,
    truncated: /\[Truncated from \d+ tokens\]/.test(s.content),
    fidelity: s.fidelity,
    lowFidelity: s.lowFidelity,
    preview: preview.text,
    previewFolded: preview.folded,
  }
}

/**
 * The engine's lengths of the texts it cut in a message (`StoredMessage.folded`), by
 * `block:path` (`-:` for a string content).
 * @param {StoredMessage} m @returns {Map<string, number>}
 */
function cutTexts(m) {
  return new Map((m.folded ?? []).map((f) => [`${f.block ?? '-'}:${f.path}`, f.chars]))
}

/**
 * A content block as the panel draws it: its kind, its text folded to `max`, the tool it
 * names. A text that is one stored string (a text, a thinking, a tool call's arguments as a
 * string, a string content) names it (`block`, `path`) for the `text` operation's pages; a
 * block drawn as JSON names the strings the engine cut inside it (`foldedFields`), each paged
 * on its own. `cut` is `cutTexts` of the message: the engine read its texts cut at `max`
 * (`maxChars`), so what is here is already short.
 * @param {Record<string, unknown>} b @param {number} max @param {number | null} index
 * @param {Map<string, number>} cut
 */
function blockView(b, max, index, cut) {
  const type = typeof b.type === 'string' ? b.type : 'unknown'
  /** @type {string} */
  let text
  /** @type {string | null} */
  let path = null
  if (index === null && typeof b.text === 'string') [text, path] = [b.text, '']
  else if (type === 'text' && typeof b.text === 'string') [text, path] = [b.text, '/text']
  else if (type === 'thinking' && typeof b.thinking === 'string') [text, path] = [b.thinking, '/thinking']
  else if (type === 'toolCall' && typeof b.arguments === 'string') [text, path] = [b.arguments, '/arguments']
  else if (type === 'toolCall') text = JSON.stringify(b.arguments ?? {}, null, 2)
  else if (type === 'image') text = `[image${typeof b.mimeType === 'string' ? ` ${b.mimeType}` : ''}]`
  else text = JSON.stringify(b, null, 2)
  const base = {
    type,
    ...(typeof b.name === 'string' ? { toolName: b.name } : {}),
    ...(typeof b.id === 'string' ? { toolCallId: b.id } : {}),
    block: index,
    path,
  }
  const key = `${index ?? '-'}:`
  if (path !== null) {
    const f = fold(text, max)
    const chars = cut.get(key + path)
    // Cut by the engine (at `max`, or further than this view shows): the length it counted.
    if (chars !== undefined) return { ...base, text: f.text, chars, shown: f.folded ? max : f.chars, folded: true }
    return { ...base, text: f.text, chars: f.chars, shown: f.folded ? max : f.chars, folded: f.folded }
  }
  // Drawn as JSON (an image is drawn as its kind only): the strings cut inside it.
  const within = type === 'toolCall' ? `${key}/arguments/` : `${key}/`
  const fields = type === 'image' ? [] : [...cut].filter(([k]) => k.startsWith(within)).map(([k, chars]) => ({ path: k.slice(key.length), chars }))
  const f = fold(text, max)
  return {
    ...base,
    text: f.text,
    // The length of the JSON whole is not known once strings in it were cut.
    chars: fields.length ? null : f.chars,
    shown: f.folded ? max : f.chars,
    folded: f.folded || fields.length > 0,
    foldedFields: fields.slice(0, 20),
  }
}

/**
 * A stored message as the panel draws it: its blocks (a plain text is one text block), each
 * folded to `max` characters, at most `maxBlocks` of them. Read with `maxChars: max`.
 * @param {StoredMessage} m @param {number} max @param {number} maxBlocks
 */
function messageView(m, max, maxBlocks) {
  const cut = cutTexts(m)
  const blocks = typeof m.content === 'string' ? [{ type: 'text', text: m.content }] : m.content
  const shown = blocks.slice(0, maxBlocks).map((b, i) => blockView(/** @type {Record<string, unknown>} */ (b), max, typeof m.content === 'string' ? null : i, cut))
  return {
    messageId: m.messageId,
    seq: m.seq,
    role: m.role,
    createdAt: m.createdAt,
    tokenCount: m.tokenCount,
    ...(m.toolCallId ? { toolCallId: m.toolCallId } : {}),
    blocks: shown,
    moreBlocks: blocks.length - shown.length,
  }
}

/** Bytes of the database file and its write-ahead log (null for PostgreSQL). @param {string | null} path */
function databaseBytes(path) {
  if (!path) return null
  let total = 0
  for (const p of [path, `${path}-wal`]) {
    try {
      total += statSync(p).size
    } catch {
      // no WAL beside it (or a file that went away): counted as empty
    }
  }
  return total
}

/**
 * The messages a summary stands for, a page at a time (by their `seq`, from the first it covers).
 * @param {LcmEngine} engine @param {number} cid @param {import('../index.js').SummaryDescription} d
 * @param {number} offset @param {number} limit
 */
async function coveredPage(engine, cid, d, offset, limit) {
  const span = d.coveredMessages
  if (span.firstMessageId === null || span.lastMessageId === null) return { total: 0, offset, messages: [] }
  // Only their `seq` is read: their texts are cut to one character as they are read.
  const [first, last] = await Promise.all([engine.describe(span.firstMessageId, { maxChars: 1 }), engine.describe(span.lastMessageId, { maxChars: 1 })])
  const firstSeq = /** @type {{ seq: number }} */ (first).seq
  const lastSeq = /** @type {{ seq: number }} */ (last).seq
  const rows = await engine.messages(cid, { afterSeq: firstSeq - 1 + offset, limit, maxChars: FOLD_CHARS })
  const inSpan = rows.filter((m) => m.seq <= lastSeq)
  return {
    total: lastSeq - firstSeq + 1,
    offset,
    messages: inSpan.map((m) => messageView(m, FOLD_CHARS, BLOCKS_PER_MESSAGE)),
  }
}

/**
 * The operations by id: `write` ones run only for a connection with the host's write scope
 * (and `lcm-native ui --write`); `run` returns the result (bounded JSON).
 * @type {Record<string, { write: boolean, description: string, run: (ctx: OperationContext, payload: Record<string, unknown>) => Promise<unknown> }>}
 */
const OPERATIONS = {
  overview: {
    write: false,
    description: "The session's totals: messages, summaries by depth, tokens stored and in context, fidelity, prompt-cache reuse, database and version.",
    async run(ctx) {
      const about = { version: ctx.about.version, database: ctx.about.database, databaseBytes: databaseBytes(ctx.about.path) }
      if (ctx.conversationId === null) return { about, conversation: null }
      const cid = ctx.conversationId
      const [all, fidelity, context] = await Promise.all([ctx.engine.conversations(), ctx.engine.fidelity(cid), ctx.engine.context(cid)])
      const c = all.find((x) => x.conversationId === cid)
      if (!c) throw new PanelError('E_NOT_FOUND', `conversation ${cid} is gone`)
      const contextTokens = context.reduce((n, e) => n + e.tokens, 0)
      return {
        about,
        conversation: {
          conversationId: c.conversationId,
          sessionId: c.sessionId,
          sessionKey: c.sessionKey,
          messageCount: c.messageCount,
          messageTokens: c.messageTokens,
          summaryCount: c.summaryCount,
          summariesByDepth: c.summariesByDepth,
          contextItems: context.length,
          contextTokens,
          // How many times smaller the context is than what it stands for.
          compression: contextTokens > 0 ? c.messageTokens / contextTokens : null,
          createdAt: c.createdAt,
          updatedAt: c.updatedAt,
          promptCache: c.promptCache,
        },
        fidelity,
      }
    },
  },

  summaries: {
    write: false,
    description: 'A page of the summaries, newest first (optionally one depth).',
    async run(ctx, p) {
      const cid = conversationOf(ctx)
      const limit = int(p.limit, 50, 1, 100, 'limit')
      const offset = int(p.offset, 0, 0, Number.MAX_SAFE_INTEGER, 'offset')
      const depth = p.depth === undefined || p.depth === null ? undefined : int(p.depth, 0, 0, 1000, 'depth')
      const rows = await ctx.engine.summaries(cid, { newestFirst: true, offset, limit, ...(depth !== undefined ? { depth } : {}) })
      return { offset, limit, summaries: rows.map(summaryRow) }
    },
  },

  summary: {
    write: false,
    description: 'One summary whole: its text, inputs, the messages it covers, its chain up to the context, fidelity and versions.',
    async run(ctx, p) {
      const { cid, d } = await summaryIn(ctx, p)
      const text = fold(d.content, FULL_CHARS)
      return {
        ...summaryRow(d),
        content: text.text,
        contentFolded: text.folded,
        range: d.range,
        // Its inputs as list rows (the first 100), so that opening it needs no second call.
        inputs: await inputRows(ctx, cid, d),
        inputCount: d.inputs.length,
        coveredMessages: d.coveredMessages,
        live: d.live,
        consumedBy: d.consumedBy,
        liveSummary: d.liveSummary,
        chain: d.chain,
        fidelityDetail: d.fidelityDetail,
        versions: d.versions.map((v) => ({ version: v.version, reason: v.reason, model: v.model, createdAt: v.createdAt, tokenCount: v.tokenCount, current: v.current })),
      }
    },
  },

  children: {
    write: false,
    description: "A summary's inputs (condensed) and a page of the raw messages it stands for.",
    async run(ctx, p) {
      const limit = int(p.limit, 20, 1, 40, 'limit')
      const offset = int(p.offset, 0, 0, Number.MAX_SAFE_INTEGER, 'offset')
      const { cid, summaryId, d } = await summaryIn(ctx, p)
      // The inputs in one read, in their order in the node.
      const inputs = await inputRows(ctx, cid, d)
      const page = await coveredPage(ctx.engine, cid, d, offset, limit)
      return { summaryId, inputs, inputsNotListed: d.inputs.length - inputs.length, ...page }
    },
  },

  message: {
    write: false,
    description: 'One raw message whole (each block up to 60,000 characters), with the summaries that cover it.',
    async run(ctx, p) {
      const cid = conversationOf(ctx)
      const id = int(p.messageId, 0, 1, Number.MAX_SAFE_INTEGER, 'messageId')
      // Its parts first (each text cut to one character): how many blocks share the answer.
      const d = await ownMessage(ctx, cid, id)
      // Each block whole up to 60,000 characters, less when the message has many, so that the
      // whole answer stays within the host's 256 KiB; longer ones cut as the engine reads
      // them, the rest a `text` page at a time.
      const blocks = Math.min(40, Math.max(1, d.parts.length))
      const each = Math.max(2_000, Math.min(FULL_CHARS, Math.floor(160_000 / blocks)))
      const m = await ctx.engine.describe(id, { maxChars: each })
      if (m.type !== 'message') throw new PanelError('E_NOT_FOUND', `message ${id} is gone`)
      return { ...messageView(m, each, 40), live: m.live, liveSummary: m.liveSummary, chain: m.chain }
    },
  },

  text: {
    write: false,
    description: "A page of one of a message's long texts (a block's text, or a string inside it, as the message's view names it): up to 60,000 characters from an offset.",
    async run(ctx, p) {
      const cid = conversationOf(ctx)
      const id = int(p.messageId, 0, 1, Number.MAX_SAFE_INTEGER, 'messageId')
      const block = p.block === undefined || p.block === null ? undefined : int(p.block, 0, 0, 100_000, 'block')
      if (p.path !== undefined && p.path !== null && typeof p.path !== 'string') throw new PanelError('E_INVALID_INPUT', 'path must be a string (a JSON Pointer such as /text)')
      const path = typeof p.path === 'string' ? p.path : undefined
      const offset = int(p.offset, 0, 0, Number.MAX_SAFE_INTEGER, 'offset')
      const limit = int(p.limit, FULL_CHARS, 1, FULL_CHARS, 'limit')
      // A message of another conversation is E_NOT_FOUND before anything of it is read.
      const r = await ctx.engine.messageText(id, { ...(block !== undefined ? { block } : {}), ...(path !== undefined ? { path } : {}), offset, limit, conversationId: cid })
      return { messageId: r.messageId, block: r.block, path: r.path, offset: r.offset, text: r.text, chars: r.chars, nextOffset: r.nextOffset }
    },
  },

  grep: {
    write: false,
    description: 'Searches the stored messages and summaries: words (fts), a substring (like) or a regular expression (regex).',
    async run(ctx, p) {
      const cid = conversationOf(ctx)
      const query = str(p.query, 'query')
      const mode = p.mode ?? 'fts'
      if (mode !== 'fts' && mode !== 'like' && mode !== 'regex') throw new PanelError('E_INVALID_INPUT', 'mode must be fts, like or regex')
      const scope = p.scope ?? 'both'
      if (scope !== 'messages' && scope !== 'summaries' && scope !== 'both') throw new PanelError('E_INVALID_INPUT', 'scope must be messages, summaries or both')
      const limit = int(p.limit, 50, 1, 100, 'limit')
      const r = await ctx.engine.grep(cid, { query, mode, scope, limit })
      return {
        truncated: r.truncated,
        partial: r.partial ?? null,
        hits: r.hits.map((h) => ({
          type: h.type,
          messageId: h.messageId ?? null,
          summaryId: h.summaryId ?? null,
          role: h.role ?? null,
          depth: h.depth ?? null,
          time: h.time,
          snippet: fold(h.snippet, 400).text,
          live: h.live,
          coveredBy: h.coveredBy,
        })),
      }
    },
  },

  context: {
    write: false,
    description: 'What the model sees: the live context items with their tokens, and what the newest assembly kept and left out.',
    async run(ctx) {
      const cid = conversationOf(ctx)
      const entries = await ctx.engine.context(cid)
      const last = ctx.lastAssembly ?? null
      // The newest assembly left out the oldest `evictedItems`, of the context it read; when
      // the context changed since (a compaction), which ones is no longer known.
      const sameContext = last !== null && last.stats.totalContextItems === entries.length
      const evicted = sameContext ? last.stats.evictedItems : 0
      const shown = entries.slice(-300)
      const skipped = entries.length - shown.length
      return {
        totalItems: entries.length,
        totalTokens: entries.reduce((n, e) => n + e.tokens, 0),
        lastAssembly: last && { at: last.at, tokenBudget: last.tokenBudget, estimatedTokens: last.estimatedTokens, stats: last.stats, sameContext },
        itemsNotListed: skipped,
        items: shown.map((e, i) => ({
          ordinal: e.ordinal,
          kind: e.kind,
          summaryId: e.summaryId ?? null,
          messageId: e.messageId ?? null,
          role: e.role ?? null,
          depth: e.depth ?? null,
          tokens: e.tokens,
          leftOut: i + skipped < evicted,
        })),
      }
    },
  },

  history: {
    write: false,
    description: "Every version of a summary's text, oldest first.",
    async run(ctx, p) {
      const { summaryId } = await summaryIn(ctx, p)
      const versions = await ctx.engine.history(summaryId)
      // Each text is folded so that a summary with many versions stays one result.
      const max = Math.max(2_000, Math.floor(150_000 / Math.max(1, versions.length)))
      return {
        summaryId,
        versions: versions.map((v) => {
          const t = fold(v.content, max)
          return { version: v.version, reason: v.reason, model: v.model, createdAt: v.createdAt, tokenCount: v.tokenCount, current: v.current, stored: v.stored, content: t.text, contentFolded: t.folded }
        }),
      }
    },
  },

  rewritePreview: {
    write: false,
    description: 'The prompt a rewrite of one summary would send, before anything is sent.',
    async run(ctx, p) {
      const cid = conversationOf(ctx)
      const r = await ctx.engine.rewritePreview(cid, str(p.summaryId, 'summaryId'))
      const prompt = fold(r.prompt, FULL_CHARS)
      return { ...r, prompt: prompt.text, promptFolded: prompt.folded }
    },
  },

  rewriteDraft: {
    write: true,
    description: 'Asks the summarizer for a new text of one summary and writes nothing: the diff to review.',
    async run(ctx, p) {
      const cid = conversationOf(ctx)
      const summaryId = str(p.summaryId, 'summaryId')
      const { summarize } = summarizerOf(ctx)
      const r = await ctx.engine.rewrite(cid, summarize, { summaryId })
      const e = r.entries[0]
      if (!e) throw new PanelError('E_NOT_FOUND', `summary ${summaryId} was not found`)
      return draftView(e)
    },
  },

  rewriteApply: {
    write: true,
    description: "Writes a reviewed text as a summary's new version (rewrite's path: version, search rows, fidelity).",
    async run(ctx, p) {
      const cid = conversationOf(ctx)
      const summaryId = str(p.summaryId, 'summaryId')
      const text = str(p.content, 'content')
      const { model } = summarizerOf(ctx)
      const r = await ctx.engine.rewrite(cid, async () => text, { summaryId, apply: true, ...(model ? { model } : {}) })
      const e = r.entries[0]
      if (!e || !e.applied) throw new PanelError('E_SUMMARIZER', `${summaryId} was not written: the text was refused (${e ? e.level : 'not found'})`)
      ctx.log?.(`rewrote summary ${summaryId} from the Control UI (${e.oldTokens} → ${e.newTokens} tokens)`)
      const versions = await ctx.engine.history(summaryId)
      return { ...draftView(e), version: versions[versions.length - 1]?.version ?? null }
    },
  },

  rollback: {
    write: true,
    description: 'Restores an earlier version of a summary as its newest version.',
    async run(ctx, p) {
      const { summaryId } = await summaryIn(ctx, p)
      const v = await ctx.engine.rollback(summaryId, int(p.version, 0, 1, Number.MAX_SAFE_INTEGER, 'version'))
      ctx.log?.(`rolled summary ${summaryId} back to version ${p.version} from the Control UI (now version ${v.version})`)
      return { summaryId, version: v.version, tokenCount: v.tokenCount }
    },
  },

  checkSummaries: {
    write: true,
    description: 'Scores the summaries not scored yet and lists the fallback and low-fidelity ones.',
    async run(ctx) {
      const cid = conversationOf(ctx)
      const report = await ctx.engine.scoreFidelity(cid)
      const all = await ctx.engine.summaries(cid)
      const weak = all.filter((s) => s.fallback || s.lowFidelity)
      return {
        scored: report.scored,
        byDepth: report.byDepth,
        fallbacks: all.filter((s) => s.fallback).length,
        lowFidelity: all.filter((s) => s.lowFidelity).length,
        weak: weak.slice(0, 100).map(summaryRow),
        weakNotListed: Math.max(0, weak.length - 100),
      }
    },
  },

  repairSummaries: {
    write: true,
    description: 'Backs the database up, then regenerates the fallback (or low-fidelity) summaries with the summarizer.',
    async run(ctx, p) {
      const cid = conversationOf(ctx)
      const which = p.which ?? 'fallbacks'
      if (which !== 'fallbacks' && which !== 'lowFidelity') throw new PanelError('E_INVALID_INPUT', 'which must be fallbacks or lowFidelity')
      const { summarize, model } = summarizerOf(ctx)
      if (summarize === 'offline') throw new PanelError('E_INVALID_INPUT', 'repairing needs a model: the offline summarizer would only swap one extractive text for another')
      const backup = ctx.about.path ? `${ctx.about.path}.before-repair-${stamp()}.db` : null
      if (backup) await ctx.engine.backup(backup)
      const r = await ctx.engine.rewrite(cid, summarize, { [which]: true, apply: true, ...(model ? { model } : {}) })
      const applied = r.entries.filter((e) => e.applied).length
      ctx.log?.(`repaired ${applied} of ${r.entries.length} ${which === 'fallbacks' ? 'fallback' : 'low-fidelity'} summaries from the Control UI${backup ? ` (backup ${backup})` : ''}`)
      return { backup, candidates: r.entries.length, applied, stillWeak: r.entries.filter((e) => !e.applied || e.needsRepair).map((e) => e.summaryId).slice(0, 100) }
    },
  },

  redactCount: {
    write: false,
    description: 'Counts the messages and summaries a redaction pattern matches, writing nothing.',
    async run(ctx, p) {
      const cid = conversationOf(ctx)
      const pattern = str(p.pattern, 'pattern')
      const r = await ctx.engine.grep(cid, { query: pattern, mode: 'regex', scope: 'both', limit: 500 })
      return {
        pattern,
        messages: r.hits.filter((h) => h.type === 'message').length,
        summaries: r.hits.filter((h) => h.type === 'summary').length,
        atLeast: r.truncated || r.partial !== undefined,
        examples: r.hits.slice(0, 10).map((h) => ({ type: h.type, messageId: h.messageId ?? null, summaryId: h.summaryId ?? null, snippet: fold(h.snippet, 240).text })),
      }
    },
  },

  redact: {
    write: true,
    description: "Replaces every match of a pattern in this session's messages and regenerates the summaries it reached.",
    async run(ctx, p) {
      const cid = conversationOf(ctx)
      const pattern = str(p.pattern, 'pattern')
      const replacement = p.replacement === undefined ? undefined : str(p.replacement, 'replacement')
      const { summarize } = summarizerOf(ctx)
      const r = await ctx.engine.redact({ conversationId: cid, pattern, reason: 'Control UI', ...(replacement !== undefined ? { replacement } : {}) }, summarize)
      ctx.log?.(`redacted ${r.matches} match(es) in ${r.messages} message(s) of conversation ${cid} from the Control UI`)
      return {
        matches: r.matches,
        messages: r.messages,
        summaries: r.summaries,
        regenerated: r.regenerated,
        pending: r.pending,
        scrubPending: r.scrubPending,
        spoolBusy: r.spoolBusy,
      }
    },
  },
}

/** The summarizer of a write that needs one, or E_INVALID_CONFIG. @param {OperationContext} ctx */
function summarizerOf(ctx) {
  if (!ctx.summarizer) throw new PanelError('E_INVALID_CONFIG', 'no summarizer is configured for the panel')
  return ctx.summarizer()
}

/**
 * The payload's `summaryId`, a summary of the session's conversation, with its `describe`.
 * @param {OperationContext} ctx @param {Record<string, unknown>} p
 */
async function summaryIn(ctx, p) {
  const cid = conversationOf(ctx)
  const summaryId = str(p.summaryId, 'summaryId')
  return { cid, summaryId, d: await ownSummary(ctx, cid, summaryId) }
}

/**
 * A condensed summary's inputs (the first 100) as list rows, in their order, in one read.
 * @param {OperationContext} ctx @param {number} cid @param {import('../index.js').SummaryDescription} d
 */
async function inputRows(ctx, cid, d) {
  const ids = d.inputs.slice(0, 100).map((i) => i.summaryId)
  if (ids.length === 0) return []
  const byId = new Map((await ctx.engine.summaries(cid, { summaryIds: ids })).map((r) => [r.summaryId, r]))
  return ids.flatMap((id) => {
    const r = byId.get(id)
    return r ? [summaryRow(r)] : []
  })
}

/**
 * `describe` of a summary of the session's conversation, else E_NOT_FOUND.
 * @param {OperationContext} ctx @param {number} cid @param {string} summaryId
 * @returns {Promise<import('../index.js').SummaryDescription>}
 */
async function ownSummary(ctx, cid, summaryId) {
  const d = await ctx.engine.describe(summaryId)
  if (d.type !== 'summary' || d.conversationId !== cid) throw new PanelError('E_NOT_FOUND', `summary ${summaryId} is not in this session's conversation`)
  return d
}

/**
 * `describe` of a message of the session's conversation, each text cut to one character (its
 * facts and parts, not its texts), else E_NOT_FOUND.
 * @param {OperationContext} ctx @param {number} cid @param {number} id
 * @returns {Promise<import('../index.js').MessageDescription>}
 */
async function ownMessage(ctx, cid, id) {
  const d = await ctx.engine.describe(id, { maxChars: 1 })
  if (d.type !== 'message') throw new PanelError('E_INVALID_INPUT', 'messageId names a summary')
  if (d.conversationId !== cid) throw new PanelError('E_NOT_FOUND', `message ${id} is not in this session's conversation`)
  return d
}

/** A rewrite entry as the panel reviews it. @param {import('../index.js').RewriteEntry} e */
function draftView(e) {
  return {
    summaryId: e.summaryId,
    depth: e.depth,
    oldTokens: e.oldTokens,
    newTokens: e.newTokens,
    oldContent: fold(e.oldContent, FULL_CHARS).text,
    newContent: fold(e.newContent, FULL_CHARS).text,
    diff: fold(e.diff, FULL_CHARS).text,
    level: e.level,
    fidelity: e.fidelity,
    applied: e.applied,
  }
}

/** A time stamp for a backup's name. */
const stamp = () => new Date().toISOString().replace(/[:.]/g, '-')

/**
 * Checks a result against OpenClaw's bounds for plugin results; E_RESULT_TOO_LARGE names the
 * bound it passed (an operation's pages are sized to stay within them).
 * @template T
 * @param {T} value
 * @returns {T}
 */
function checkBounds(value) {
  let nodes = 0
  /** @param {unknown} v @param {number} depth */
  const walk = (v, depth) => {
    nodes++
    if (depth > 32) throw new PanelError('E_RESULT_TOO_LARGE', 'the result is nested deeper than 32 levels')
    if (typeof v === 'string' && v.length > STRING_MAX_CHARS) throw new PanelError('E_RESULT_TOO_LARGE', `a string of the result has ${v.length} characters (at most ${STRING_MAX_CHARS})`)
    if (Array.isArray(v)) for (const x of v) walk(x, depth + 1)
    else if (v && typeof v === 'object') for (const x of Object.values(v)) walk(x, depth + 1)
  }
  walk(value, 0)
  if (nodes > RESULT_MAX_NODES) throw new PanelError('E_RESULT_TOO_LARGE', `the result has ${nodes} values (at most ${RESULT_MAX_NODES})`)
  const bytes = Buffer.byteLength(JSON.stringify(value ?? null))
  if (bytes > RESULT_MAX_BYTES) throw new PanelError('E_RESULT_TOO_LARGE', `the result is ${bytes} bytes (at most ${RESULT_MAX_BYTES})`)
  return value
}

/**
 * Runs one operation: `{ ok: true, result }`, or `{ ok: false, error, code }` for a refused or
 * failed call (the shape of an OpenClaw session action's result).
 * @param {string} id @param {OperationContext} ctx @param {unknown} payload @param {{ canWrite: boolean }} access
 * @returns {Promise<{ ok: true, result: JsonValue } | { ok: false, error: string, code: string }>}
 */
async function runOperation(id, ctx, payload, access) {
  const op = Object.hasOwn(OPERATIONS, id) ? OPERATIONS[id] : undefined
  try {
    if (!op) throw new PanelError('E_NOT_FOUND', `no panel operation ${id}`)
    // A damaged file is not read for the panel (as not for a turn), in OpenClaw and in
    // `lcm-native ui` alike: its code and message say why.
    const damage = ctx.engine.damage
    if (damage) throw new PanelError(damage.code, damage.message)
    if (op.write && !access.canWrite) throw new PanelError('E_READ_ONLY', `${id} writes: it needs the write scope`)
    /** @type {JsonValue} */
    const result = checkBounds(JSON.parse(JSON.stringify((await op.run(ctx, payloadOf(payload))) ?? null)))
    return { ok: true, result }
  } catch (err) {
    const e = /** @type {{ code?: unknown, message?: unknown }} */ (err)
    const code = typeof e?.code === 'string' ? e.code : 'E_INTERNAL'
    return { ok: false, error: typeof e?.message === 'string' ? e.message : String(err), code }
  }
}

module.exports = { OPERATIONS, PanelError, checkBounds, fold, runOperation }
