// Recall through the JS surface: grep, describe and expand on a real transcript, hostile
// queries, and the failure codes.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'

import { LcmEngine, type GrepOptions } from '../index.js'
import { THEME, freshDb, hostMessages, rejection } from './helpers'

let engine: LcmEngine
let conversationId: number

beforeAll(async () => {
  engine = await LcmEngine.open({
    dbPath: freshDb('lcm.db'),
    timezone: 'UTC',
    leafChunkTokens: 3000,
    leafTargetTokens: 300,
    maxSweepIterations: 500,
  })
  ;({ conversationId } = await engine.ingest({ sessionId: 'theme' }, hostMessages(THEME)))
  const sweep = await engine.compact(conversationId, 'offline', { tokenBudget: 8000, force: true })
  expect(sweep.condensedPasses['1']).toBeGreaterThan(0)
})

afterAll(async () => {
  await engine.close()
})

describe('grep', () => {
  it('finds messages and summaries, newest first, each with the live summary covering it', async () => {
    const r = await engine.grep(conversationId, { query: 'debugger', limit: 200 })
    expect(r.searchedBy).toEqual({ messages: 'fts', summaries: 'fts' })
    expect(r.hits.length).toBeGreaterThan(20)
    const times = r.hits.map((h) => h.time)
    expect([...times].sort().reverse()).toEqual(times)
    const covered = r.hits.filter((h) => !h.live)
    expect(covered.length).toBeGreaterThan(0)
    for (const h of r.hits) {
      expect(h.snippet.toLowerCase()).toContain('debugger')
      expect(h.live).toBe(h.coveredBy === null)
    }
    // The cover is live, and describing the message shows the same chain.
    const hit = covered.find((h) => h.type === 'message')!
    const cover = await engine.describe(hit.coveredBy!)
    expect(cover).toMatchObject({ type: 'summary', live: true })
    const message = await engine.describe(hit.messageId!)
    expect(message).toMatchObject({ type: 'message', messageId: hit.messageId, live: false, liveSummary: hit.coveredBy })
  })

  it('orders by relevance or by hybrid (rank discounted by age); an unknown order is E_INVALID_INPUT', async () => {
    const query = { query: 'debugger', scope: 'messages', limit: 1000 } as const
    const relevance = await engine.grep(conversationId, { ...query, sort: 'relevance' })
    const hybrid = await engine.grep(conversationId, { ...query, sort: 'hybrid' })
    const ranks = relevance.hits.map((h) => h.rank!)
    expect([...ranks].sort((a, b) => a - b)).toEqual(ranks)
    // The same matches; hybrid's order is rank / (1 + 0.001 × age in hours), recomputed here.
    const ids = (r: typeof hybrid) => r.hits.map((h) => h.messageId).sort()
    expect(ids(hybrid)).toEqual(ids(relevance))
    const now = Date.now()
    const score = (h: (typeof hybrid.hits)[number]) => h.rank! / (1 + Math.max(0, now - Date.parse(h.time)) / 3.6e6 * 0.001)
    const scores = hybrid.hits.map(score)
    for (let i = 1; i < scores.length; i++) expect(scores[i]).toBeGreaterThanOrEqual(scores[i - 1] - 1e-9)
    expect((await rejection(engine.grep(conversationId, { query: 'x', sort: 'best' as never }))).code).toBe('E_INVALID_INPUT')
  })

  it('searches every conversation with null, and substrings and regular expressions on request', async () => {
    const all = await engine.grep(null, { query: 'theme', scope: 'summaries' })
    expect(all.hits.every((h) => h.type === 'summary' && typeof h.depth === 'number')).toBe(true)
    const like = await engine.grep(conversationId, { query: 'ebugge', mode: 'like' })
    expect(like.searchedBy.messages).toBe('like')
    expect(like.hits.length).toBeGreaterThan(0)
    const re = await engine.grep(conversationId, { query: 'dim[A-Z]\\w+', mode: 'regex', scope: 'messages' })
    expect(re.rowsScanned).toBeGreaterThan(0)
    expect(re.hits.every((h) => /dim[A-Z]\w+/.test(h.snippet))).toBe(true)
  })

  const huge = 'theme '.repeat(Math.ceil((100 * 1024) / 6))
  const hostile = ['"unbalanced', 'NEAR(', 'NEAR(theme renderer, 2)', 'content:theme', '*', 'theme*', "'; DROP TABLE messages; --", '" OR 1=1 --', ') (', '\u0000', huge]
  it.each(['fts', 'like', 'regex'] as const)('hostile %s queries resolve or reject with E_INVALID_INPUT, and change nothing', async (mode) => {
    const before = await engine.verify()
    for (const query of hostile) {
      try {
        const r = await engine.grep(conversationId, { query, mode })
        expect(Array.isArray(r.hits)).toBe(true)
      } catch (err) {
        expect((err as { code?: string }).code, `${mode} ${query.slice(0, 30)}`).toBe('E_INVALID_INPUT')
      }
    }
    expect((await rejection(engine.grep(conversationId, { query: huge, mode }))).code).toBe('E_INVALID_INPUT')
    const after = await engine.verify()
    expect(after.ok).toBe(true)
    expect(after.digest).toBe(before.digest)
  })

  it('rejects bad options and unknown conversations with stable codes', async () => {
    const bad: unknown[] = [{}, { query: 1 }, { query: 'x', mode: 'glob' }, { query: 'x', limit: 0 }, { query: 'x', since: 'soon' }, { query: 'x', extra: true }]
    for (const options of bad) {
      expect((await rejection(engine.grep(conversationId, options as GrepOptions))).code).toBe('E_INVALID_INPUT')
    }
    expect((await rejection(engine.grep(conversationId, { query: '(unclosed', mode: 'regex' }))).code).toBe('E_INVALID_INPUT')
    expect((await rejection(engine.grep(424242, { query: 'x' }))).code).toBe('E_NOT_FOUND')
  })
})

describe('describe and expand', () => {
  it('walk from a live condensed summary down to its messages', async () => {
    const context = await engine.context(conversationId)
    const node = context.find((e) => e.kind === 'summary' && (e.depth ?? 0) >= 1)!
    const d = await engine.describe(node.summaryId!)
    if (d.type !== 'summary') throw new Error('expected a summary')
    expect(d).toMatchObject({ depth: node.depth, kind: 'condensed', live: true, liveSummary: null, consumedBy: null, chain: [] })
    // Each input counts itself and its own descendants.
    const below = await Promise.all(d.inputs.map(async (i) => ((await engine.describe(i.summaryId)) as { descendantCount: number }).descendantCount + 1))
    expect(below.reduce((a, b) => a + b, 0)).toBe(d.descendantCount)
    expect(d.inputs.every((i) => i.depth === d.depth - 1)).toBe(true)
    expect(d.coveredMessages.count).toBeGreaterThan(0)

    const x = await engine.expand(node.summaryId!, { tokenBudget: 1_000_000 })
    expect(x.truncated).toBe(false)
    expect(x.entries.filter((e) => e.type === 'summary' && e.level === 1).map((e) => (e as { summaryId: string }).summaryId)).toEqual(
      d.inputs.map((i) => i.summaryId),
    )
    const messages = x.entries.filter((e) => e.type === 'message')
    expect(messages).toHaveLength(d.coveredMessages.count)
    expect(messages[0]).toMatchObject({ messageId: d.coveredMessages.firstMessageId })
    for (const m of messages) expect(['user', 'assistant', 'toolResult']).toContain((m as { message: { role: string } }).message.role)

    const small = await engine.expand(node.summaryId!, { tokenBudget: 300 })
    expect(small.truncated).toBe(true)
    expect(small.estimatedTokens).toBeLessThanOrEqual(300)
    expect(x.entries.slice(0, small.entries.length)).toEqual(small.entries)
  })

  it('unknown ids are E_NOT_FOUND and malformed ones E_INVALID_INPUT', async () => {
    expect((await rejection(engine.describe('sum_doesnotexist'))).code).toBe('E_NOT_FOUND')
    expect((await rejection(engine.describe(99_999_999))).code).toBe('E_NOT_FOUND')
    expect((await rejection(engine.expand('sum_doesnotexist'))).code).toBe('E_NOT_FOUND')
    expect((await rejection(engine.describe({} as never))).code).toBe('E_INVALID_INPUT')
    expect((await rejection(engine.expand(42 as never))).code).toBe('E_INVALID_INPUT')
    expect((await rejection(engine.expand('sum_x', { tokenBudget: -1 }))).code).toBe('E_INVALID_INPUT')
  })
})
