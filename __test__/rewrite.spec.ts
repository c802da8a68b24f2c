// rewrite through the JS surface: dry run, apply with fresh full text, order, AbortSignal,
// onProgress, prompt overrides and failures.
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'

import { describe, expect, it } from 'vitest'

import { LcmEngine, type SummarizeRequest } from '../index.js'
import { THEME, freshDb, hostMessages, rejection, tempDir } from './helpers'

async function compacted() {
  const engine = await LcmEngine.open({
    dbPath: freshDb('lcm.db'),
    timezone: 'UTC',
    leafChunkTokens: 3000,
    leafTargetTokens: 300,
    maxSweepIterations: 500,
  })
  const { conversationId } = await engine.ingest({ sessionId: 'theme' }, hostMessages(THEME))
  await engine.compact(conversationId, 'offline', { tokenBudget: 8000, force: true })
  return { engine, conversationId }
}

function marking() {
  let n = 0
  const calls: [string, SummarizeRequest][] = []
  const summarize = async (prompt: string, r: SummarizeRequest) => {
    calls.push([prompt, r])
    n += 1
    return `REWRITTEN d${r.depth} call${n} qzvword${n}\nExpand for details about: rewrite.`
  }
  return { summarize, calls }
}

describe('rewrite', () => {
  it('a dry run writes nothing; apply writes, keeps the structure, and full text finds the new words', async () => {
    const { engine, conversationId } = await compacted()
    const before = await engine.verify()
    const contextBefore = await engine.context(conversationId)
    const dry = await engine.rewrite(conversationId, marking().summarize, { all: true })
    expect(dry.apply).toBe(false)
    expect((await engine.verify()).digest).toBe(before.digest)
    const summaries = await engine.summaries(conversationId)
    expect(dry.entries).toHaveLength(summaries.length)
    const depths = dry.entries.map((e) => e.depth)
    expect([...depths].sort((a, b) => a - b)).toEqual(depths)
    for (const e of dry.entries) {
      expect(e.diff).toMatch(new RegExp(`^--- ${e.summaryId} \\(old\\)\\n\\+\\+\\+ ${e.summaryId} \\(new\\)\\n@@`))
      expect(e.applied).toBe(false)
    }

    const { summarize } = marking()
    const applied = await engine.rewrite(conversationId, summarize, { all: true, apply: true, model: 'test-model' })
    expect(applied.entries.every((e) => e.applied)).toBe(true)
    const after = await engine.verify()
    expect(after.ok).toBe(true)
    expect(after.digest).not.toBe(before.digest)
    expect(await engine.context(conversationId)).toEqual(
      contextBefore.map((e) => (e.kind === 'summary' ? { ...e, tokens: applied.entries.find((x) => x.summaryId === e.summaryId)!.newTokens } : e)),
    )
    const stored = await engine.summaries(conversationId)
    expect(stored.every((s) => s.content.startsWith('REWRITTEN') && s.model === 'test-model')).toBe(true)
    const hits = await engine.grep(conversationId, { query: 'qzvword1', scope: 'summaries' })
    expect(hits.hits.map((h) => h.summaryId)).toEqual([applied.entries[0].summaryId])
    await engine.close()
  })

  it('an AbortSignal stops the run between summaries; what was applied stays consistent', async () => {
    const { engine, conversationId } = await compacted()
    const controller = new AbortController()
    const progress: number[] = []
    const err = await rejection(
      engine.rewrite(conversationId, marking().summarize, {
        all: true,
        apply: true,
        signal: controller.signal,
        onProgress: (p) => {
          progress.push(p.done)
          if (p.done === 2) controller.abort()
        },
      }),
    )
    expect(err.code).toBe('E_ABORTED')
    // Aborted while told about the third summary: it is not started, two were applied.
    expect(progress).toEqual([0, 1, 2])
    const rewritten = (await engine.summaries(conversationId)).filter((s) => s.content.startsWith('REWRITTEN'))
    expect(rewritten).toHaveLength(2)
    expect(err.message).toMatch(/2 of \d+ summaries/)
    expect((await engine.verify()).ok).toBe(true)
    // An already aborted signal: nothing runs.
    const calls = marking()
    const aborted = AbortSignal.abort()
    expect((await rejection(engine.rewrite(conversationId, calls.summarize, { all: true, signal: aborted }))).code).toBe('E_ABORTED')
    expect(calls.calls).toHaveLength(0)
    await engine.close()
  })

  it('a throwing onProgress does not stop the run; a failing summarizer does, with a coded error', async () => {
    const { engine, conversationId } = await compacted()
    const r = await engine.rewrite(conversationId, marking().summarize, {
      depth: 1,
      onProgress: () => {
        throw new Error('progress display broke')
      },
    })
    expect(r.entries.length).toBeGreaterThan(0)
    const err = await rejection(engine.rewrite(conversationId, async () => Promise.reject(new Error('provider down')), { all: true, apply: true }))
    expect(err.code).toBe('E_SUMMARIZER')
    expect(err.message).toMatch(/provider down/)
    expect(err.message).toMatch(/0 of \d+ summaries/)
    await engine.close()
  })

  it('a prompt override in a temp directory overrides exactly one depth', async () => {
    const { engine, conversationId } = await compacted()
    const dir = tempDir('lcm-prompts-')
    writeFileSync(join(dir, 'condensed-d1.tmpl'), 'OVERRIDDEN D1 ({{.ChildCount}} inputs)\n{{.SourceText}}')
    const { summarize, calls } = marking()
    await engine.rewrite(conversationId, summarize, { all: true, promptDir: dir })
    expect(calls.some(([, r]) => r.depth === 1)).toBe(true)
    for (const [prompt, r] of calls) expect(prompt.startsWith('OVERRIDDEN D1')).toBe(r.depth === 1)
    await engine.close()
  })

  it('a bad signal or onProgress rejects with E_INVALID_INPUT, and a reused signal collects no listeners', async () => {
    const { engine, conversationId } = await compacted()
    const s = marking().summarize
    for (const bad of [{ onProgress: 'x' }, { signal: true }, { signal: {} }]) {
      const p = engine.rewrite(conversationId, s, { depth: 1, ...bad } as never)
      expect(p).toBeInstanceOf(Promise)
      expect((await rejection(p)).code).toBe('E_INVALID_INPUT')
    }
    const warnings: string[] = []
    const onWarning = (w: Error) => warnings.push(w.name)
    process.on('warning', onWarning)
    const shared = new AbortController()
    for (let i = 0; i < 15; i++) await engine.rewrite(conversationId, s, { depth: 1, signal: shared.signal })
    await new Promise((resolve) => setImmediate(resolve))
    process.off('warning', onWarning)
    expect(warnings.filter((w) => w === 'MaxListenersExceededWarning')).toEqual([])
    await engine.close()
  })

  it('rejects bad selections and unknown ids with stable codes', async () => {
    const { engine, conversationId } = await compacted()
    const s = marking().summarize
    for (const options of [{}, { all: true, depth: 1 }, { depth: -1 }, { all: true, apply: 'yes' }, { all: true, extra: 1 }]) {
      expect((await rejection(engine.rewrite(conversationId, s, options as never))).code).toBe('E_INVALID_INPUT')
    }
    expect((await rejection(engine.rewrite(conversationId, s, { summaryId: 'sum_missing' }))).code).toBe('E_NOT_FOUND')
    expect((await rejection(engine.rewrite(777, s, { all: true }))).code).toBe('E_NOT_FOUND')
    expect((await rejection(engine.rewrite(conversationId, 'bogus' as never, { all: true }))).code).toBe('E_INVALID_INPUT')
    await engine.close()
  })

  it('fallbacks: true re-summarises the fallbacks an empty-answering summarizer left, and only those', async () => {
    const engine = await LcmEngine.open({ dbPath: freshDb('lcm.db'), timezone: 'UTC', leafChunkTokens: 3000, leafTargetTokens: 300, maxSweepIterations: 500 })
    const { conversationId } = await engine.ingest({ sessionId: 'theme' }, hostMessages(THEME))
    // Every third call answers nothing: those passes end in the deterministic fallback.
    let n = 0
    const flaky = async (_prompt: string, r: SummarizeRequest) => (++n % 3 === 0 ? '' : `summary ${n} d${r.depth}`)
    await engine.compact(conversationId, flaky, { tokenBudget: 8000, force: true })
    const before = await engine.summaries(conversationId)
    const fallbacks = before.filter((s) => s.fallback)
    expect(fallbacks.length).toBeGreaterThan(0)
    expect(fallbacks.every((s) => s.model === 'lcm-native/fallback')).toBe(true)
    expect(before.filter((s) => !s.fallback).every((s) => s.model !== 'lcm-native/fallback')).toBe(true)

    const dry = await engine.rewrite(conversationId, marking().summarize, { fallbacks: true })
    expect(dry.entries.map((e) => e.summaryId).sort()).toEqual(fallbacks.map((s) => s.summaryId).sort())
    const applied = await engine.rewrite(conversationId, marking().summarize, { fallbacks: true, apply: true, model: 'fixed' })
    expect(applied.entries.every((e) => e.applied)).toBe(true)
    const after = await engine.summaries(conversationId)
    expect(after.filter((s) => s.fallback)).toEqual([])
    expect((await engine.rewrite(conversationId, marking().summarize, { fallbacks: true })).entries).toEqual([])
    expect((await rejection(engine.rewrite(conversationId, flaky, { fallbacks: true, all: true }))).code).toBe('E_INVALID_INPUT')
    expect((await engine.verify()).ok).toBe(true)
    await engine.close()
  })
})
