// The prompt-cache ledger that bench/cache.mjs and the e2e field scenario price requests with:
// what a provider's cache would serve, and where the rest of a request goes.
import { describe, expect, it } from 'vitest'

import { commonPrefix, ledger, tokensOf, totals, uncachedSplit } from './openclaw/cache-ledger.mjs'

const tools = [{ type: 'function', function: { name: 'read' } }]
const runtime = '\nRuntime: agent=main | session=s1 | model=fake'
const sys = { role: 'system', content: 'S'.repeat(4000) }
const user = (text: string) => ({ role: 'user', content: text })
const assistant = (text: string) => ({ role: 'assistant', content: text })
const req = (seq: number, messages: object[]) => ({ seq, body: { tools, messages: [...messages, user(`now${runtime}`)] } })
/** The characters a message takes in a request's text (its JSON and a newline). */
const charsOf = (m: object) => JSON.stringify(m).length + 1

describe('cache ledger', () => {
  const log1 = user('L'.repeat(3000))
  const q2 = user('question two')
  const a1 = assistant('A'.repeat(600))
  const a2 = assistant('B'.repeat(600))
  const summary = user('<summary id="sum_1" depth="0">what was said</summary>')
  const requests = [
    req(1, [sys, log1]),
    // continues: the previous request's messages, then the turn's new ones
    req(2, [sys, log1, a1, q2]),
    // a sweep: the log is summarised, the newest turn (q2) kept and sent again after the summary
    req(3, [sys, summary, q2, a2, user('question three')]),
  ]

  it('splits a break into new summaries, messages sent again and new messages', () => {
    const entries = ledger(requests)
    const split = uncachedSplit(entries)
    expect(split.breakCount).toBe(1)
    // the cache serves the summary's message up to where it first differs from the log's
    const summaryUncached = charsOf(summary) - commonPrefix(JSON.stringify(summary), JSON.stringify(log1))
    expect(split.breakSummaries).toBe(tokensOf(summaryUncached))
    expect(split.breakResent).toBe(tokensOf(charsOf(q2)))
    // the rest of the break is the turn's own new messages and the closing per-turn message
    const fresh = [a2, user('question three'), user(`now${runtime}`)].reduce((n, m) => n + charsOf(m), 0)
    expect(split.breaks).toBe(tokensOf(summaryUncached + charsOf(q2) + fresh))
    // the continuing request's uncached part is what it adds after the first one's messages
    expect(entries[1].uncachedResentChars).toBe(0)
    expect(entries[1].uncachedSummaryChars).toBe(0)
  })

  it('prices cached input at a tenth', () => {
    const t = totals(ledger(requests))
    expect(t.requests).toBe(3)
    expect(t.cached).toBeGreaterThan(0)
    expect(t.effective).toBe(Math.round(t.sent - t.cached + t.cached * 0.1))
    expect(t.cacheable).toBeCloseTo(t.cached / t.sent, 10)
  })
})
