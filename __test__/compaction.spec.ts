// Compaction through the JS surface: the callback contract, failure modes, the rolling-summary
// seed's trigger and async behaviour, and the real transcripts.
import { describe, expect, it } from 'vitest'

import { LcmEngine, type IngestMessage, type SummarizeRequest } from '../index.js'
import { REFACTOR, THEME, freshDb, hostMessages, rejection } from './helpers'

function synthetic(n: number, chars = 300): IngestMessage[] {
  return Array.from({ length: n }, (_, i) => ({
    role: i % 2 === 0 ? 'user' : 'assistant',
    content: i % 2 === 0 ? `question ${i}: ${'lorem ipsum '.repeat(chars / 12)}` : [{ type: 'text', text: `answer ${i}: ${'dolor sit amet '.repeat(chars / 15)}` }],
    timestamp: Date.UTC(2026, 1, 17, 10, 0, i),
    entryId: `m${i}`,
  })) as IngestMessage[]
}

async function setup(options: Record<string, unknown> = {}, n = 60) {
  const engine = await LcmEngine.open({
    dbPath: freshDb('lcm.db'),
    freshTailCount: 6,
    leafChunkTokens: 400,
    condensedTargetTokens: 80,
    timezone: 'UTC',
    ...options,
  })
  const { conversationId } = await engine.ingest({ sessionId: 's' }, synthetic(n))
  return { engine, conversationId }
}

const stub = async (_prompt: string, r: SummarizeRequest) =>
  `STUB ${r.kind} d${r.depth} of ${r.inputCount} inputs\nExpand for details about: stub.`

describe('leafPass and condensedPass', () => {
  it('calls the summarizer with the prompt and request, and writes a leaf summary', async () => {
    const { engine, conversationId } = await setup()
    const calls: [string, SummarizeRequest][] = []
    const r = await engine.leafPass(conversationId, async (prompt, req) => {
      calls.push([prompt, req])
      return stub(prompt, req)
    }, { model: 'test-model' })
    expect(r).not.toBeNull()
    expect(r!.kind).toBe('leaf')
    expect(r!.level).toBe('normal')
    expect(r!.model).toBe('test-model')
    expect(r!.tokensAfter).toBeLessThan(r!.tokensBefore)
    expect(calls).toHaveLength(1)
    const [prompt, req] = calls[0]
    expect(req).toMatchObject({ kind: 'leaf', depth: 0, aggressive: false, conversationId, inputCount: r!.inputCount })
    expect(req.targetTokens).toBeGreaterThanOrEqual(192)
    expect(req.timeRange).toMatch(/^2026-02-17 10:00/)
    expect(prompt).toContain('[2026-02-17 10:00 UTC | user]\nquestion 0:')
    expect(prompt).toContain('Expand for details about:')
    const [summary] = await engine.summaries(conversationId)
    expect(summary).toMatchObject({ summaryId: r!.summaryId, depth: 0, kind: 'leaf', model: 'test-model', descendantCount: 0 })
    expect(summary.earliestAt).toBe('2026-02-17T10:00:00.000Z')
    expect((await engine.verify(conversationId)).ok).toBe(true)
    await engine.close()
  })

  it('compact answers for the host: leaf-only maintenance, fitting a budget with the estimate, per-call instructions, timeout policy', async () => {
    const { engine, conversationId } = await setup({ summaryTimeoutMs: 200, maxSweepIterations: 100 })
    const prompts: string[] = []
    const leaf = await engine.compact(conversationId, async (prompt, req) => {
      prompts.push(prompt)
      expect(req.timeoutMs).toBe(200)
      return stub(prompt, req)
    }, { tokenBudget: 1_000_000, target: 'leaf', customInstructions: 'Keep PORT-4242.' })
    expect(leaf.leafPasses).toBeGreaterThan(0)
    expect(leaf.condensedPasses, JSON.stringify(leaf)).toEqual({})
    expect((await engine.evaluate(conversationId, { tokenBudget: 1_000_000 })).leafTrigger, JSON.stringify(leaf)).toMatchObject({ shouldCompact: false })
    expect(prompts.every((p) => p.includes('Keep PORT-4242.'))).toBe(true)
    const fits = await engine.compact(conversationId, stub, { tokenBudget: 1_000_000, target: 'fit' })
    expect(fits).toMatchObject({ actionTaken: false, stopReason: 'fits', fit: { fits: true } })
    expect(fits.fit!.tokensAfter).toBe((await engine.assemble(conversationId, { tokenBudget: 1_000_000 })).estimatedTokens)
    // A model that never answers: the fallback when asked for, else E_TIMEOUT.
    const never = () => new Promise<string>(() => {})
    expect((await rejection(engine.leafPass(conversationId, never, { tokenBudget: 50 }))).code).toBe('E_TIMEOUT')
    const fallback = await engine.leafPass(conversationId, never, { tokenBudget: 50, onSummaryTimeout: 'fallback' })
    expect(fallback?.level).toBe('fallback')
    expect((await engine.verify(conversationId)).ok).toBe(true)
    await engine.close()
  })

  it('returns null when there is nothing to do', async () => {
    const { engine, conversationId } = await setup({ freshTailCount: 100 })
    expect(await engine.leafPass(conversationId, stub)).toBeNull()
    expect(await engine.condensedPass(conversationId, stub)).toBeNull()
    await engine.close()
  })

  it('condenses a same-depth run into the next depth', async () => {
    const { engine, conversationId } = await setup({ leafMinFanout: 3, condensedTargetTokens: 20 })
    for (let i = 0; i < 4; i++) await engine.leafPass(conversationId, stub)
    const r = await engine.condensedPass(conversationId, stub)
    expect(r).toMatchObject({ kind: 'condensed', depth: 1 })
    const [node] = await engine.summaries(conversationId, { depth: 1 })
    expect(node.descendantCount).toBe(r!.inputCount)
    expect((await engine.verify(conversationId)).ok).toBe(true)
    await engine.close()
  })
})

describe('callback failures', () => {
  const cases: [string, (p: string, r: SummarizeRequest) => Promise<string>, string][] = [
    ['throws synchronously', () => {
      throw new Error('sync boom')
    }, 'E_SUMMARIZER'],
    ['rejects', async () => {
      throw new Error('provider down')
    }, 'E_SUMMARIZER'],
    ['never resolves', () => new Promise<string>(() => {}), 'E_TIMEOUT'],
    ['resolves a number', async () => 42 as unknown as string, 'E_SUMMARIZER'],
    ['resolves an object', async () => ({ text: 'x' }) as unknown as string, 'E_SUMMARIZER'],
  ]
  it.each(cases)('a callback that %s fails the pass and leaves the database byte-for-byte as it was', async (_name, summarize, code) => {
    const { engine, conversationId } = await setup({ summaryTimeoutMs: 200, maxSweepIterations: 100 })
    await engine.leafPass(conversationId, stub)
    const before = await engine.verify()
    const err = await rejection(engine.leafPass(conversationId, summarize))
    expect(err).toBeInstanceOf(Error)
    expect(err.code).toBe(code)
    expect(err.message).toMatch(/nothing was written/)
    const after = await engine.verify()
    expect(after.ok).toBe(true)
    expect(after.digest).toBe(before.digest)
    // A sweep fails the same way.
    const sweepErr = await rejection(engine.compact(conversationId, summarize, { tokenBudget: 100, force: true }))
    expect(sweepErr.code).toBe(code)
    expect((await engine.verify()).digest).toBe(before.digest)
    await engine.close()
  })

  it('an LCM_AUTH rejection aborts the pass, writes nothing and reports authFailure', async () => {
    const { engine, conversationId } = await setup()
    const before = await engine.verify()
    const authError = Object.assign(new Error('invalid api key'), { code: 'LCM_AUTH' })
    const r = await engine.leafPass(conversationId, async () => Promise.reject(authError))
    expect(r).toMatchObject({ authFailure: true, kind: 'leaf' })
    expect(r!.summaryId).toBeUndefined()
    class LcmProviderAuthError extends Error {
      name = 'LcmProviderAuthError'
    }
    const sweep = await engine.compact(conversationId, async () => {
      throw new LcmProviderAuthError('expired')
    }, { tokenBudget: 100, force: true })
    expect(sweep).toMatchObject({ authFailure: true, stopReason: 'auth-failure', leafPasses: 0 })
    expect((await engine.verify()).digest).toBe(before.digest)
    await engine.close()
  })

  it("an empty answer produces the deterministic fallback, marked for re-summarising", async () => {
    const { engine, conversationId } = await setup()
    const r = await engine.leafPass(conversationId, async () => '')
    expect(r).toMatchObject({ level: 'fallback', model: 'lcm-native/fallback', summarizerCalls: 1 })
    const [s] = await engine.summaries(conversationId)
    expect(s.model).toBe('lcm-native/fallback')
    expect(s.content).toMatch(/Expand for details about:/)
    await engine.close()
  })

  it('rejects a summarize argument that is neither a function nor "offline"', async () => {
    const { engine, conversationId } = await setup()
    const p = engine.leafPass(conversationId, 'online' as never)
    expect(p).toBeInstanceOf(Promise)
    expect((await rejection(p)).code).toBe('E_INVALID_INPUT')
    expect((await rejection(engine.compact(conversationId, stub, {} as never))).code).toBe('E_INVALID_INPUT')
    await engine.close()
  })
})

describe('the rolling-summary seed', () => {
  // US-301 with N = 20 messages per summary and a verbatim window of 4.
  it('US-301: triggers at 20 messages, not at 19, and counts from the last summary', async () => {
    const engine = await LcmEngine.open({ dbPath: freshDb('r.db'), freshTailCount: 4, messagesPerSummary: 20, leafChunkTokens: 100000 })
    const msgs = synthetic(45, 40)
    const { conversationId } = await engine.ingest({ sessionId: 'r' }, msgs.slice(0, 19))
    const e19 = await engine.evaluate(conversationId, { tokenBudget: 100000 })
    expect(e19.rolling).toMatchObject({ messagesSinceLastSummary: 19, shouldSummarize: false, coveredMessages: 0 })
    expect(await engine.summaries(conversationId)).toEqual([]) // < 20 messages: no summary exists
    await engine.ingest({ conversationId }, msgs.slice(19, 20))
    expect((await engine.evaluate(conversationId, { tokenBudget: 100000 })).rolling.shouldSummarize).toBe(true)
    await engine.leafPass(conversationId, 'offline')
    const done = await engine.evaluate(conversationId, { tokenBudget: 100000 })
    // messages_covered reflects what was summarised; the verbatim window stays raw.
    expect(done.rolling.coveredMessages).toBe(16)
    expect(done.rolling.messagesSinceLastSummary).toBe(4)
    await engine.ingest({ conversationId }, msgs.slice(20, 25))
    expect((await engine.evaluate(conversationId, { tokenBudget: 100000 })).rolling.shouldSummarize).toBe(false)
    await engine.ingest({ conversationId }, msgs.slice(25, 45))
    const e45 = await engine.evaluate(conversationId, { tokenBudget: 100000 })
    expect(e45.rolling.messagesSinceLastSummary).toBe(29)
    expect(e45.rolling.shouldSummarize).toBe(true)
    await engine.close()
  })

  it('US-305: summarising runs off the main path; ingest and reads return first; one summary job at a time', async () => {
    const { engine, conversationId } = await setup({ lockTimeoutMs: 200 })
    let release!: () => void
    const gate = new Promise<void>((r) => (release = r))
    let inFlight = 0
    let maxInFlight = 0
    const slow = async (p: string, r: SummarizeRequest) => {
      inFlight++
      maxInFlight = Math.max(maxInFlight, inFlight)
      await gate
      inFlight--
      return stub(p, r)
    }
    const pass = engine.leafPass(conversationId, slow)
    let passDone = false
    void pass.then(() => (passDone = true))
    // While the summary is being generated, messages keep flowing and reads answer.
    await new Promise((r) => setTimeout(r, 20))
    const ingested = await engine.ingest({ conversationId }, [{ role: 'user', content: 'still here', entryId: 'late' }])
    expect(ingested.inserted).toBe(1)
    expect((await engine.messages(conversationId, { afterSeq: 60 })).map((m) => m.content)).toEqual(['still here'])
    expect(passDone).toBe(false)
    // A second summary job for the same conversation waits, then gives up with E_BUSY.
    const second = await rejection(engine.leafPass(conversationId, slow))
    expect(second.code).toBe('E_BUSY')
    release()
    const r = await pass
    expect(r!.summaryId).toBeDefined()
    expect(maxInFlight).toBe(1)
    // A failing summary does not affect message processing.
    await rejection(engine.leafPass(conversationId, async () => Promise.reject(new Error('down'))))
    expect((await engine.ingest({ conversationId }, [{ role: 'user', content: 'after failure' }])).inserted).toBe(1)
    const v = await engine.verify(conversationId)
    expect(v.ok).toBe(true)
    await engine.close()
  })
})

describe('compact', () => {
  it.each([THEME, REFACTOR])('compacts %s to a balanced DAG with the offline summarizer', async (name) => {
    const engine = await LcmEngine.open({ dbPath: freshDb('c.db'), leafChunkTokens: 3000, leafTargetTokens: 300, timezone: 'UTC', maxSweepIterations: 1000 })
    const { conversationId } = await engine.ingest({ sessionId: name }, hostMessages(name))
    const r = await engine.compact(conversationId, 'offline', { tokenBudget: 8000 })
    expect(r.actionTaken).toBe(true)
    expect(r.leafPasses).toBeGreaterThan(10)
    expect(r.condensedPasses['1']).toBeGreaterThan(0)
    expect(r.tokensAfter).toBeLessThan(r.tokensBefore / 3)
    expect(['no-candidates', 'no-progress']).toContain(r.stopReason)
    const sums = await engine.summaries(conversationId)
    // Every condensed node's inputs share one depth and it is one deeper (checked by verify),
    // and every node at depth d has only depth d-1 inputs: leaves sit at one depth per root.
    const v = await engine.verify(conversationId)
    expect(v.problems).toEqual([])
    expect(sums.filter((s) => s.depth > 0).every((s) => s.descendantCount >= 8)).toBe(true)
    // Nothing is lost.
    expect(await engine.messages(conversationId, { limit: 5000 })).toHaveLength(hostMessages(name).length)
    await engine.close()
  })

  it('is bounded by maxSweepIterations and does nothing under the threshold', async () => {
    const { engine, conversationId } = await setup({ maxSweepIterations: 2 })
    const idle = await engine.compact(conversationId, stub, { tokenBudget: 10_000_000 })
    expect(idle).toMatchObject({ actionTaken: false, stopReason: 'below-threshold' })
    const r = await engine.compact(conversationId, stub, { tokenBudget: 100 })
    expect(r).toMatchObject({ actionTaken: true, leafPasses: 2, stopReason: 'max-iterations', passesByLevel: { normal: 2 } })
    expect(r.createdSummaryIds).toHaveLength(2)
    await engine.close()
  })
})
