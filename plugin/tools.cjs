// @ts-check
'use strict'
// The recall tools: the data side of every summary's "Expand for details about: …". Each tool
// is made per session (OpenClaw's tool factory context names it) and reads only that session's
// conversation unless `recallScope: "all"` lets it search every conversation. Outputs are
// bounded in tokens (`recallMaxTokens`).

const { agentOf, databaseFor } = require('./config.cjs')
const { targetOf } = require('./context-engine.cjs')
const { addon, engineFor } = require('./shared.cjs')

/**
 * What a summary kept of its source's identifiers, and the salient ones it left out (what to
 * expand for).
 * @param {import('../index.js').FidelityScore} f
 */
function fidelityLine(f) {
  if (f.score === null) return 'fidelity: its source names no identifiers'
  const missing = f.missingSalient.length ? `; left out: ${f.missingSalient.slice(0, 10).join(', ')}` : ''
  return `fidelity ${f.score.toFixed(2)}: keeps ${f.kept} of ${f.identifiers} identifiers of its source (${f.salientKept} of ${f.salient} salient)${missing}`
}

const TOOL_NAMES = ['lcm_grep', 'lcm_describe', 'lcm_expand']

/**
 * Lines joined until the token budget is spent, then a note of what was left out.
 * @param {string[]} lines @param {number} maxTokens
 */
function bounded(lines, maxTokens) {
  const cost = (/** @type {string} */ line) => addon().estimateTokens(line) + 1
  const out = []
  let used = 0
  for (let i = 0; i < lines.length; i++) {
    const left = maxTokens - used
    if (cost(lines[i]) <= left) {
      out.push(lines[i])
      used += cost(lines[i])
      continue
    }
    // The line that does not fit is cut to what is left (code points, never half of one).
    let cut = [...lines[i]].slice(0, Math.max(0, left * 4))
    while (cut.length > 0 && cost(`${cut.join('')}…`) > left) cut = cut.slice(0, Math.floor(cut.length * 0.8))
    if (cut.length > 0) out.push(`${cut.join('')}…`)
    out.push(`… output limited to ${maxTokens} tokens; ${lines.length - i - (cut.length > 0 ? 1 : 0)} more line(s) not shown`)
    break
  }
  return out.join('\n')
}

/** @param {string} text @param {Record<string, unknown>} details */
const result = (text, details) => ({ content: [{ type: /** @type {const} */ ('text'), text }], details })

/** @param {string} s */
const oneLine = (s) => s.replace(/\s+/g, ' ').trim()

/**
 * @param {import('./config.cjs').PluginSettings} settings
 * @param {{ sessionKey?: string, sessionId?: string }} ctx
 */
function sessionScope(settings, ctx) {
  const session = { sessionKey: ctx.sessionKey, sessionId: ctx.sessionId }
  // The same file the engine writes for this session (the agent of its key).
  const dbPath = databaseFor(settings, agentOf(ctx.sessionKey))
  return {
    /** The engine and this session's conversation id (null when LCM has none yet). */
    async open() {
      const engine = await engineFor(dbPath, settings.engineOptions())
      if (!session.sessionKey && !session.sessionId) return { engine, conversationId: null }
      const conv = await engine.findConversation(/** @type {any} */ (targetOf(session)))
      return { engine, conversationId: conv ? conv.conversationId : null }
    },
  }
}

/**
 * @param {unknown} params @param {string} name
 * @returns {Record<string, any>}
 */
function paramsOf(params, name) {
  if (typeof params !== 'object' || params === null || Array.isArray(params)) throw new Error(`${name}: parameters must be an object`)
  return /** @type {Record<string, any>} */ (params)
}

/**
 * The three tools for one session.
 * @param {import('./config.cjs').PluginSettings} settings
 * @param {{ sessionKey?: string, sessionId?: string, agentId?: string }} ctx
 */
function recallTools(settings, ctx) {
  const scope = sessionScope(settings, ctx ?? {})
  const max = settings.recallMaxTokens
  const everywhere = settings.recallScope === 'all'
  /** @param {number} cid @param {number | null} mine */
  const visible = (cid, mine) => everywhere || cid === mine

  const grep = {
    name: 'lcm_grep',
    label: 'Search conversation memory',
    description:
      'Search the full stored history of this conversation (messages and summaries, including everything compacted away) ' +
      'for words, a substring or a regular expression. Each hit says which summary covers it; pass that id to lcm_describe or lcm_expand.',
    parameters: {
      type: 'object',
      additionalProperties: false,
      required: ['query'],
      properties: {
        query: { type: 'string', minLength: 1, maxLength: 8192, description: 'Words to find (all required; "quoted phrases" stay together), or a pattern with mode.' },
        mode: { type: 'string', enum: ['fts', 'like', 'regex'], description: 'fts (default): words; like: substring; regex: regular expression.' },
        scope: { type: 'string', enum: ['messages', 'summaries', 'both'], description: 'Where to search (default both).' },
        sort: { type: 'string', enum: ['recency', 'relevance', 'hybrid'], description: 'Order of hits (default recency).' },
        since: { type: 'string', description: 'ISO-8601 time: only hits at or after it.' },
        until: { type: 'string', description: 'ISO-8601 time: only hits before it.' },
        limit: { type: 'integer', minimum: 1, maximum: 50, description: 'Most hits to return (default 20).' },
        ...(everywhere ? { allConversations: { type: 'boolean', description: 'Search every conversation, not only this one.' } } : {}),
      },
    },
    /** @param {string} _id @param {unknown} raw */
    async execute(_id, raw) {
      const p = paramsOf(raw, 'lcm_grep')
      if (typeof p.query !== 'string' || p.query.trim() === '') throw new Error('lcm_grep: `query` must be a non-empty string')
      const { engine, conversationId } = await scope.open()
      const all = everywhere && p.allConversations === true
      if (conversationId === null && !all) return result('No stored history for this session yet.', { hits: 0 })
      const found = await engine.grep(all ? null : conversationId, {
        query: p.query,
        ...(p.mode ? { mode: p.mode } : {}),
        ...(p.scope ? { scope: p.scope } : {}),
        ...(p.sort ? { sort: p.sort } : {}),
        ...(p.since ? { since: p.since } : {}),
        ...(p.until ? { until: p.until } : {}),
        limit: Math.min(50, Math.max(1, Number(p.limit) || 20)),
      })
      const lines = [`${found.hits.length} hit(s) for ${JSON.stringify(p.query)}${found.truncated ? ' (more exist)' : ''}:`]
      for (const h of found.hits) {
        const where = h.type === 'summary' ? `${h.summaryId} d${h.depth}` : `message ${h.messageId} ${h.role}`
        const cover = h.live ? 'live' : h.coveredBy ? `covered by ${h.coveredBy}` : 'not live'
        lines.push(`- [${where}, ${h.time}, ${cover}${all ? `, conversation ${h.conversationId}` : ''}] ${oneLine(h.snippet)}`)
      }
      return result(bounded(lines, max), { hits: found.hits.length, truncated: found.truncated })
    },
  }

  const describe = {
    name: 'lcm_describe',
    label: 'Describe a summary',
    description: 'Show a summary (sum_…) of this conversation with what it was made from and what covers it, or a stored message by its id.',
    parameters: {
      type: 'object',
      additionalProperties: false,
      required: ['id'],
      properties: { id: { type: 'string', minLength: 1, maxLength: 200, description: 'A summary id (sum_…) or a message id.' } },
    },
    /** @param {string} _id @param {unknown} raw */
    async execute(_id, raw) {
      const p = paramsOf(raw, 'lcm_describe')
      const id = typeof p.id === 'string' ? p.id.trim() : typeof p.id === 'number' ? String(p.id) : ''
      if (id === '') throw new Error('lcm_describe: `id` must be a summary id (sum_…) or a message id')
      const { engine, conversationId } = await scope.open()
      /** @type {any} */
      let d
      try {
        d = await engine.describe(/^\d+$/.test(id) ? Number(id) : id)
      } catch (err) {
        if (/** @type {{ code?: string }} */ (err)?.code === 'E_NOT_FOUND') return result(`${id}: not found in this conversation's history.`, { found: false })
        throw err
      }
      if (!visible(d.conversationId, conversationId)) return result(`${id}: not found in this conversation's history.`, { found: false })
      const lines =
        d.type === 'summary'
          ? [
              `${d.summaryId}: ${d.kind} summary, depth ${d.depth}, ${d.tokenCount} tokens, ${d.range || 'time unknown'}${d.fallback ? ', deterministic fallback' : ''}`,
              `covers ${d.coveredMessages.count} message(s)${d.inputs.length ? `; inputs: ${d.inputs.map((/** @type {any} */ i) => `${i.summaryId} (d${i.depth})`).join(', ')}` : ''}`,
              fidelityLine(d.fidelityDetail),
              d.live ? 'live in the context' : `not live; covered by ${d.liveSummary ?? d.consumedBy ?? 'nothing'}`,
              '',
              d.content,
            ]
          : [
              `message ${d.messageId} (${d.role}, ${d.createdAt}), ${d.tokenCount} tokens, ${d.live ? 'live' : `covered by ${d.liveSummary}`}`,
              '',
              typeof d.content === 'string' ? d.content : JSON.stringify(d.content),
            ]
      return result(bounded(lines, max), { found: true, type: d.type })
    },
  }

  const expand = {
    name: 'lcm_expand',
    label: 'Expand a summary',
    description:
      'Open a summary of this conversation: its inputs breadth first, down to the original messages, within a token budget. ' +
      'Use it to recover exact commands, paths, numbers and wording a summary only mentions.',
    parameters: {
      type: 'object',
      additionalProperties: false,
      required: ['summaryId'],
      properties: {
        summaryId: { type: 'string', pattern: '^sum_', description: 'The summary to open (sum_…).' },
        tokenBudget: { type: 'integer', minimum: 100, description: `Tokens to spend (at most ${max}).` },
        maxDepth: { type: 'integer', minimum: 1, maximum: 16, description: 'Levels to descend (default: all).' },
      },
    },
    /** @param {string} _id @param {unknown} raw */
    async execute(_id, raw) {
      const p = paramsOf(raw, 'lcm_expand')
      if (typeof p.summaryId !== 'string' || !p.summaryId.startsWith('sum_')) throw new Error('lcm_expand: `summaryId` must be a summary id (sum_…)')
      const { engine, conversationId } = await scope.open()
      /** @type {any} */
      let d
      try {
        d = await engine.describe(p.summaryId)
      } catch (err) {
        if (/** @type {{ code?: string }} */ (err)?.code === 'E_NOT_FOUND') return result(`${p.summaryId}: not found in this conversation's history.`, { found: false })
        throw err
      }
      if (!visible(d.conversationId, conversationId)) return result(`${p.summaryId}: not found in this conversation's history.`, { found: false })
      const budget = Math.min(max, Math.max(100, Number(p.tokenBudget) || max))
      // The engine skips an entry larger than what is left of its budget; asking for more
      // than is shown keeps a small budget from showing nothing. The text is bounded below.
      const x = await engine.expand(p.summaryId, { tokenBudget: Math.max(budget, 4 * max), ...(p.maxDepth ? { maxDepth: Number(p.maxDepth) } : {}) })
      const lines = [`${p.summaryId} expanded (${x.entries.length} entries, ${x.estimatedTokens} tokens${x.truncated ? ', more below the budget' : ''}):`]
      for (const e of x.entries) {
        if (e.type === 'summary') {
          lines.push(`${'  '.repeat(e.level - 1)}[${e.summaryId} d${e.depth}] ${oneLine(e.content)}`)
        } else {
          const m = /** @type {any} */ (e.message)
          const body = typeof m.content === 'string' ? m.content : JSON.stringify(m.content)
          lines.push(`${'  '.repeat(e.level - 1)}[message ${e.messageId} ${m.role}] ${oneLine(body)}`)
        }
      }
      return result(bounded(lines, max), { entries: x.entries.length, truncated: x.truncated })
    },
  }

  return [grep, describe, expand]
}

module.exports = { TOOL_NAMES, bounded, recallTools }
