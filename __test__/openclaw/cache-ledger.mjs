// @ts-check
// What a provider's prompt cache would reuse of each request a fake model logged, and what the
// user would pay for it. Providers bill input found in their cache (an exact prefix of an
// earlier request) at about a tenth; everything after the first differing character is billed
// in full. Tokens are characters / 4, as the hosts' own estimates are.
//
// A request's text is what a provider tokenizes, in that order: its tools, then its messages
// (each as the JSON the host sent). Its cached part is the longest prefix it shares with any
// earlier request (block by block, as OpenAI's cache works, then to the character against the
// request just before it of the same session).

import { createHash } from 'node:crypto'

import { contentText } from './fake-model.mjs'

/** What a cached input token costs against an uncached one. */
export const CACHED_PRICE = 0.1
/** Prefix blocks compared by hash (characters). */
const BLOCK = 256

/**
 * @typedef {{ seq: number, body: any, path?: string }} LoggedRequest
 * @typedef {{ seq: number, kind: 'agent' | 'summary', session: string, chars: number,
 *   cachedChars: number, keptFromPrevious: number | null, previousChars: number | null,
 *   messages: number, previousMessages: number | null, firstChange: number | null,
 *   uncachedSummaryChars: number, uncachedResentChars: number }} LedgerEntry
 *
 * `uncachedSummaryChars`: uncached characters in messages that present a summary
 * (`<summary id=…`); `uncachedResentChars`: uncached characters in other messages the previous
 * request of the lane already held, word for word, before its last message (sent again after
 * a break).
 */

/** @param {number} chars */
export const tokensOf = (chars) => Math.ceil(chars / 4)

/**
 * The request as a provider reads it: tools first, then each message as sent.
 * @param {any} body @returns {{ text: string, starts: number[] }} `starts`: where each message begins
 */
export function requestText(body) {
  const head = `${JSON.stringify(body?.tools ?? [])}\n`
  const starts = []
  let text = head
  for (const m of Array.isArray(body?.messages) ? body.messages : []) {
    starts.push(text.length)
    text += `${JSON.stringify(m)}\n`
  }
  return { text, starts }
}

/** Length of the common prefix of two strings. @param {string} a @param {string} b */
export function commonPrefix(a, b) {
  const n = Math.min(a.length, b.length)
  // Compare in slices first: long equal runs are the common case.
  let i = 0
  const step = 4096
  while (i + step <= n && a.slice(i, i + step) === b.slice(i, i + step)) i += step
  while (i < n && a.charCodeAt(i) === b.charCodeAt(i)) i++
  return i
}

/**
 * The session a logged agent request belongs to: OpenClaw appends a `Runtime: agent=… |
 * session=<key> | …` block to the first user message of every agent request.
 * @param {any} body
 */
export function sessionOfRequest(body) {
  for (const m of Array.isArray(body?.messages) ? body.messages : []) {
    if (m?.role !== 'user') continue
    const found = /\nRuntime: agent=[^|\n]*\| session=([^ |\n]+)/.exec(contentText(m.content))
    if (found) return found[1]
  }
  return ''
}

/**
 * The ledger of a run: every chat request in order, with the characters a cache would have
 * served. Tool-less requests are a plugin's own model calls (summaries).
 * @param {LoggedRequest[]} requests @returns {LedgerEntry[]}
 */
export function ledger(requests) {
  /** Hashes of every block-aligned prefix of every earlier request. */
  const seen = new Set()
  /** @type {Map<string, { text: string, messages: number, sent: Set<string> }>} the previous request per session and tool set */
  const previous = new Map()
  /** @type {LedgerEntry[]} */
  const out = []
  for (const r of requests) {
    if (!r.body || typeof r.body !== 'object' || !Array.isArray(r.body.messages)) continue
    const kind = Array.isArray(r.body.tools) && r.body.tools.length > 0 ? 'agent' : 'summary'
    const session = kind === 'agent' ? sessionOfRequest(r.body) : ''
    // The host's own runs for a session (its memory flush before a compaction) carry the
    // session's runtime line but other tools: a request follows the last one with its tools.
    const lane = `${kind}:${session}:${(r.body.tools ?? []).map((/** @type {any} */ t) => t?.function?.name ?? t?.name).join(',')}`
    const { text, starts } = requestText(r.body)
    // The longest block-aligned prefix some earlier request had.
    const hash = createHash('sha1')
    let blocks = 0
    let matching = true
    /** @type {string[]} */
    const digests = []
    for (let at = 0; at + BLOCK <= text.length; at += BLOCK) {
      hash.update(text.slice(at, at + BLOCK))
      const d = hash.copy().digest('base64')
      digests.push(d)
      if (matching && seen.has(d)) blocks++
      else matching = false
    }
    let cached = blocks * BLOCK
    const prev = previous.get(lane)
    const kept = prev === undefined ? null : commonPrefix(prev.text, text)
    if (kept !== null) cached = Math.max(cached, kept)
    for (const d of digests) seen.add(d)
    /** Each message as sent, to tell a message sent again from a new one. */
    const sent = starts.map((s, i) => text.slice(s, i + 1 < starts.length ? starts[i + 1] : text.length))
    let uncachedSummaryChars = 0
    let uncachedResentChars = 0
    sent.forEach((m, i) => {
      const uncached = Math.max(0, starts[i] + m.length - Math.max(starts[i], cached))
      if (uncached === 0) return
      if (m.includes('<summary id=')) uncachedSummaryChars += uncached
      else if (prev?.sent.has(m)) uncachedResentChars += uncached
    })
    // Not its last message: OpenClaw closes every request with a per-turn block (the internal
    // context) that may read the same from turn to turn without being history sent again.
    previous.set(lane, { text, messages: starts.length, sent: new Set(sent.slice(0, -1)) })
    // The message in which this request first differs from the one before it.
    const firstChange = kept === null ? null : starts.filter((s) => s <= kept).length - 1
    const [previousChars, previousMessages] = prev === undefined ? [null, null] : [prev.text.length, prev.messages]
    out.push({ seq: r.seq, kind, session, chars: text.length, cachedChars: cached, keptFromPrevious: kept, previousChars, messages: starts.length, previousMessages, firstChange, uncachedSummaryChars, uncachedResentChars })
  }
  return out
}

/**
 * Totals of ledger entries: input tokens sent, the share a cache serves, the summarizer's input,
 * and effective tokens (uncached + cached × CACHED_PRICE, every request alike).
 * @param {LedgerEntry[]} entries
 */
export function totals(entries) {
  const sum = (/** @type {LedgerEntry[]} */ xs, /** @type {(e: LedgerEntry) => number} */ f) => xs.reduce((n, e) => n + f(e), 0)
  const agent = entries.filter((e) => e.kind === 'agent')
  const summary = entries.filter((e) => e.kind === 'summary')
  const sent = tokensOf(sum(agent, (e) => e.chars))
  const cached = tokensOf(sum(agent, (e) => e.cachedChars))
  const summaryInput = tokensOf(sum(summary, (e) => e.chars))
  const summaryCached = tokensOf(sum(summary, (e) => e.cachedChars))
  const effective = sent - cached + cached * CACHED_PRICE + (summaryInput - summaryCached) + summaryCached * CACHED_PRICE
  return {
    requests: agent.length,
    sent,
    cached,
    cacheable: sent > 0 ? cached / sent : 0,
    summaryCalls: summary.length,
    summaryInput,
    summaryCached,
    effective: Math.round(effective),
  }
}

/**
 * Requests of which less than `share` was a prefix of the previous request of their session:
 * most of the request billed in full (the first request of a session does not count).
 * @param {LedgerEntry[]} entries @param {number} [share]
 */
export function earlyBreaks(entries, share = 0.5) {
  return entries.filter((e) => e.kind === 'agent' && e.keptFromPrevious !== null && e.keptFromPrevious < share * e.chars)
}

/**
 * Where the uncached tokens of agent requests go: the first request of each session and tool
 * set, requests that begin with the whole previous one but its last message (what is new is the
 * turn's own messages), and breaks (a change before that: a compaction, an eviction, a changed
 * system prompt). A break's tokens split further into new summaries (`breakSummaries`),
 * messages the previous request held and this one sends again (`breakResent`), and the rest:
 * the turn's own new messages.
 * @param {LedgerEntry[]} entries
 */
export function uncachedSplit(entries) {
  const split = { first: 0, continuing: 0, breaks: 0, breakCount: 0, breakSummaries: 0, breakResent: 0 }
  for (const e of entries) {
    if (e.kind !== 'agent') continue
    const uncached = tokensOf(e.chars - e.cachedChars)
    if (e.firstChange === null || e.previousMessages === null) split.first += uncached
    else if (e.firstChange >= e.previousMessages - 1) split.continuing += uncached
    else {
      split.breaks += uncached
      split.breakCount++
      split.breakSummaries += tokensOf(e.uncachedSummaryChars)
      split.breakResent += tokensOf(e.uncachedResentChars)
    }
  }
  return split
}
