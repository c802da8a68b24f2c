// @ts-check
'use strict'
// A user's message larger than the model's window. OpenClaw appends the turn's pending prompt
// to the context the engine assembled, so no context engine can shrink it, and the provider
// refuses the turn. What the host does offer is text transforms, applied to the text of every
// message bound for the provider on every model call. `assemble` sees the pending prompt and
// the budget left beside it; when the prompt leaves no room, it registers an excerpt (its
// beginning and its end with a marker), and the transform puts the excerpt in place of that
// text in what goes to the provider. The transcript and lcm-native's store keep it whole.

const { addon, shared } = require('./shared.cjs')
const { BUDGET_LIMITS, sessionMap, stringBytes } = require('./session-maps.cjs')

/** Below this history budget the host is saying the prompt alone fills the window. */
const MIN_HISTORY_BUDGET = 1000
/** Share of the prompt budget an excerpted prompt may take (the rest: history, system prompt). */
const PROMPT_SHARE = 0.5
/** An excerpt when no budget is known yet: fits any model's window. */
const FALLBACK_EXCERPT_TOKENS = 8000
/** How long an excerpt waits for its turn's model calls (a turn that never ends). */
const TTL_MS = 30 * 60_000
/**
 * The pending prompts kept at once: each holds the whole prompt (it is what the transform looks
 * for) and its excerpt, so sessions whose turn never ends must not pile them up. One evicted
 * is registered again when the host assembles its turn again (a retry after an overflow).
 * @type {import('./session-maps.cjs').SessionLimits}
 */
const PENDING_LIMITS = {
  maxEntries: 32,
  maxBytes: 64 * 1024 * 1024,
  sizeOf: (/** @type {{ text: string, excerpt: string }} */ p) => stringBytes(p.text) + stringBytes(p.excerpt),
}

/**
 * The pending prompts, by session, oldest first (bounded by PENDING_LIMITS).
 * @returns {Map<string, { text: string, excerpt: string, at: number }>}
 */
const pendingPrompts = () => sessionMap(shared(), 'oversizedPrompts', PENDING_LIMITS)

/**
 * Drops the excerpts whose turn has waited longer than TTL_MS. The map is in the order of
 * their `at` (every write makes an entry the newest), so the expired ones come first.
 * @param {Map<string, { at: number }>} prompts @param {number} now
 */
function dropExpired(prompts, now) {
  for (const [key, p] of prompts) {
    if (now - p.at <= TTL_MS) break
    prompts.delete(key)
  }
}

/**
 * Notes the prompt budget of `key` and, when the pending `prompt` is larger than the whole
 * budget of history and prompt, registers an excerpt of it for the provider-bound context (a
 * prompt that fits with little or no history is shown whole). Returns the excerpt's size in
 * tokens when one was newly registered.
 * @param {string} key @param {unknown} prompt @param {number | undefined} historyBudget the budget the host gave assemble
 */
function notePendingPrompt(key, prompt, historyBudget) {
  const state = shared()
  const prompts = pendingPrompts()
  const budgets = sessionMap(state, 'promptBudgets', BUDGET_LIMITS)
  dropExpired(prompts, Date.now())
  const before = prompts.get(key)
  prompts.delete(key)
  if (typeof prompt !== 'string' || prompt === '' || historyBudget === undefined) return undefined
  const promptTokens = addon().estimateTokens(prompt)
  if (historyBudget >= MIN_HISTORY_BUDGET) {
    budgets.set(key, historyBudget + promptTokens)
    state.lastPromptBudget = historyBudget + promptTokens
    return undefined
  }
  // The host left the history (almost) nothing: the prompt alone is about the budget or more.
  const known = budgets.get(key) ?? state.lastPromptBudget
  if (known !== undefined && promptTokens <= known - MIN_HISTORY_BUDGET) return undefined
  const room = known !== undefined ? Math.floor(known * PROMPT_SHARE) : FALLBACK_EXCERPT_TOKENS
  if (before?.text === prompt) {
    // The same turn assembled again (a retry): keep the excerpt, say nothing twice.
    prompts.set(key, { ...before, at: Date.now() })
    return undefined
  }
  const marker =
    `\n\n[lcm-native: this message has ${promptTokens} tokens, more than the model's context window holds; only its beginning and its end are shown here. ` +
    'It is stored whole: lcm_grep finds words from the rest, and lcm_describe with the message id that lcm_grep gives reads it page by page.]\n\n'
  const excerpt = addon().excerptText(prompt, room, marker)
  if (excerpt.length >= prompt.length) return undefined
  prompts.set(key, { text: prompt, excerpt, at: Date.now() })
  return room
}

/** The session's turn ended: its prompt is in the transcript and the store now. @param {string} key */
function forgetPendingPrompt(key) {
  shared().oversizedPrompts?.delete(key)
}

/**
 * `text` with every registered oversized prompt in it replaced by its excerpt.
 * @param {string} text
 */
function excerptOversized(text) {
  const prompts = shared().oversizedPrompts
  if (!prompts || prompts.size === 0 || typeof text !== 'string') return text
  let out = text
  dropExpired(prompts, Date.now())
  for (const p of prompts.values()) {
    if (out.length < p.text.length) continue
    if (out === p.text) return p.excerpt
    const at = out.indexOf(p.text)
    if (at >= 0) out = out.slice(0, at) + p.excerpt + out.slice(at + p.text.length)
  }
  return out
}

/**
 * The host's text-transform entry: a RegExp whose replace is `excerptOversized` (OpenClaw calls
 * `text.replace(from, to)` on each provider-bound text; `to` is unused).
 */
function oversizedPromptTransform() {
  const from = /(?!)/
  Object.defineProperty(from, Symbol.replace, { value: (/** @type {string} */ text) => excerptOversized(String(text)) })
  return { from, to: '' }
}

module.exports = { notePendingPrompt, forgetPendingPrompt, excerptOversized, oversizedPromptTransform, MIN_HISTORY_BUDGET, PENDING_LIMITS, TTL_MS }
