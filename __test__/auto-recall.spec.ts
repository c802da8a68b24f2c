// Recall at assembly through the JS surface: a fact whose message is under a summary reaches
// the context as an excerpt when a turn asks for it (newest value first), nothing is added
// when nothing scores, the block is sent again unchanged, and the plugin passes the host's
// prompt and says what the block is in its system-prompt note.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'

import { LcmEngine, type AssembleResult } from '../index.js'
import { freshDb } from './helpers'
import { fakeHost } from './plugin-host'

const { systemPromptAddition } = require('../plugin/context-engine.cjs')

let engine: LcmEngine
let conversationId: number

const at = (t: number) => `2026-03-01 10:${String(t).padStart(2, '0')}:00`

/** 30 turns: a fact at turn 1, its new value at turn 12, a log with one warning at turn 5. */
function session() {
  const out: unknown[] = []
  for (let t = 0; t < 30; t++) {
    let text = `Turn ${t}: let us tidy the wording of the release notes and the docs site again.`
    if (t === 1) text = 'For the record, staging Redis lives at cache-stg.internal:6380 for now.'
    if (t === 12) text = 'Update: staging Redis moved to cache-stg2.internal:6390 this morning.'
    if (t === 5) {
      const lines = Array.from({ length: 1500 }, (_, i) => `2026-03-01T10:05:00 INFO worker ${i} heartbeat ok`)
      lines.splice(900, 0, '2026-03-01T10:05:30 WARN payment-gateway rejected batch 7781 with quota_exceeded')
      text = `Here is the worker log:\n${lines.join('\n')}`
    }
    out.push({ role: 'user', content: text, timestamp: at(t) })
    out.push({ role: 'assistant', content: [{ type: 'text', text: `Understood, noted for turn ${t}.` }], timestamp: at(t) })
  }
  return out
}

const blocks = (r: AssembleResult) =>
  r.messages.map((m) => (typeof m.content === 'string' ? m.content : '')).filter((t) => t.startsWith('<recalled'))

beforeAll(async () => {
  engine = await LcmEngine.open({ dbPath: freshDb('recall.db'), timezone: 'UTC', freshTailCount: 4, leafChunkTokens: 600 })
  ;({ conversationId } = await engine.ingest({ sessionId: 'recall' }, session() as never))
  await engine.compact(conversationId, 'offline', { tokenBudget: 4000, force: true })
})

afterAll(async () => {
  await engine.close()
})

describe('recall at assembly', () => {
  it('brings a fact from under a summary into the context, newest value first, as excerpts', async () => {
    const r = await engine.assemble(conversationId, {
      tokenBudget: 8000,
      recallQuery: 'Which address should the client dial for the staging Redis?',
    })
    const [block] = blocks(r)
    expect(block, JSON.stringify(r.stats.recall)).toBeDefined()
    expect(block.indexOf('cache-stg2.internal:6390')).toBeLessThan(block.indexOf('cache-stg.internal:6380'))
    expect(block).toMatch(/superseded-by="\d+"/)
    expect(r.messages.at(-1)?.content).toBe(block)
    const stats = r.stats.recall!
    expect(stats.tokens).toBeGreaterThan(0)
    expect(stats.hits.length).toBeGreaterThanOrEqual(2)
    expect(stats.hits[0].time > stats.hits[1].time).toBe(true)
    expect(stats.block).toBe(block)
    // Again without the prompt (the turn's second assembly): the same block.
    const again = await engine.assemble(conversationId, { tokenBudget: 8000 })
    expect(blocks(again)).toEqual([block])
    expect(again.stats.recall?.reused).toBe(true)
  })

  it('shows the line of a log, not the log', async () => {
    const r = await engine.assemble(conversationId, { tokenBudget: 8000, recallQuery: 'what did the payment gateway reject?' })
    const [block] = blocks(r)
    expect(block).toContain('rejected batch 7781 with quota_exceeded')
    expect(block.length).toBeLessThan(1500)
  })

  it('adds nothing when nothing scores, and nothing when off', async () => {
    for (const q of ['thanks!', 'ok, continue', 'what is the capital of Mongolia?']) {
      const r = await engine.assemble(conversationId, { tokenBudget: 8000, recallQuery: q })
      expect(blocks(r), q).toEqual([])
      expect(r.stats.recall?.abstained, q).toBeTruthy()
    }
    const off = await engine.assemble(conversationId, { tokenBudget: 8000, recallQuery: 'staging Redis address?', autoRecall: false })
    expect(blocks(off)).toEqual([])
    expect(off.stats.recall).toBeNull()
  })

  it('finds a value of the kind asked for far back in a long session, sharing no word with the question', async () => {
    // 320 messages: the plant is further back than the newest 200 the scan reads unindexed.
    const long = await LcmEngine.open({ dbPath: freshDb('recall-long.db'), timezone: 'UTC', freshTailCount: 4, leafChunkTokens: 600 })
    try {
      const msgs: unknown[] = []
      const time = (t: number, s: number) => `2026-03-01 ${String(8 + Math.floor(t / 60)).padStart(2, '0')}:${String(t % 60).padStart(2, '0')}:${s}`
      for (let t = 0; t < 160; t++) {
        const text = t === 1 ? 'The failing rollout is tracked as OPS-4121, keep it handy.' : `Turn ${t}: let us tidy the wording of the release notes again.`
        msgs.push({ role: 'user', content: text, timestamp: time(t, 0) })
        msgs.push({ role: 'assistant', content: [{ type: 'text', text: `Understood, noted for turn ${t}.` }], timestamp: time(t, 30) })
      }
      const { conversationId: id } = await long.ingest({ sessionId: 'long' }, msgs as never)
      await long.compact(id, 'offline', { tokenBudget: 4000, force: true })
      const r = await long.assemble(id, { tokenBudget: 8000, recallQuery: 'What was the incident reference again?' })
      const [block] = blocks(r)
      expect(block, JSON.stringify(r.stats.recall)).toContain('OPS-4121')
      expect(r.stats.recall?.hits.every((h) => h.valueOfKind)).toBe(true)
    } finally {
      await long.close()
    }
  })

  it('reaches a statement by meaning when the question shares no word with it, and not with autoRecallMeaning off', async () => {
    const msgs: unknown[] = []
    for (let t = 0; t < 30; t++) {
      let text = `Turn ${t}: let us tidy the wording of the release notes and the docs site again.`
      if (t === 2) text = 'Quick aside: we settled on Automerge for resolving conflicts in offline sync.'
      if (t === 4) text = 'The SoC core rail on the sensor board has to sit at 0.85 V, within 3 %.'
      msgs.push({ role: 'user', content: text, timestamp: at(t) })
      msgs.push({ role: 'assistant', content: [{ type: 'text', text: `Understood, noted for turn ${t}.` }], timestamp: at(t) })
    }
    const q = 'Thanks. What did we pick to merge edits made without a connection?'
    for (const meaning of [true, false]) {
      const e = await LcmEngine.open({ dbPath: freshDb(`recall-meaning-${meaning}.db`), timezone: 'UTC', freshTailCount: 4, leafChunkTokens: 600, autoRecallMeaning: meaning })
      try {
        const { conversationId: id } = await e.ingest({ sessionId: 'meaning' }, msgs as never)
        await e.compact(id, 'offline', { tokenBudget: 4000, force: true })
        const r = await e.assemble(id, { tokenBudget: 8000, recallQuery: q })
        const block = blocks(r).join('')
        if (meaning) {
          expect(block, JSON.stringify(r.stats.recall)).toContain('settled on Automerge')
          expect(block).not.toContain('0.85 V')
          const hit = r.stats.recall!.hits.find((h) => h.similarity !== null)
          expect(hit?.matched).toEqual([])
          expect(hit?.similarity).toBeGreaterThan(0.3)
          expect(r.stats.recall?.meaning).toBe('compared')
        } else {
          expect(block).not.toContain('Automerge')
          expect(r.stats.recall?.hits.every((h) => h.similarity === null)).toBe(true)
          expect(r.stats.recall?.meaning).toBeNull()
        }
      } finally {
        await e.close()
      }
    }
  })
})

describe('the plugin', () => {
  it('says what the block is in its system-prompt note, the same on every turn', () => {
    const on = systemPromptAddition(new Set(['lcm_grep']), true)
    expect(on).toContain('<recalled')
    expect(systemPromptAddition(new Set(['lcm_grep']), false)).not.toContain('<recalled')
  })

  it("passes the host's prompt: a planted fact comes back once it is only in the history", async () => {
    // Turns of ~350 tokens within a 2,000-token budget: the plant is evicted from the context.
    const host = fakeHost({ freshTailCount: 2 })
    const e = host.engine()
    const s = { sessionId: 'plug-1', sessionKey: 'agent:main:plug-1' }
    const plant = [
      { role: 'user', content: 'Note: the vault rotation ticket is ZEBRA-4411, owned by platform.', timestamp: Date.now() },
      { role: 'assistant', content: [{ type: 'text', text: 'Noted.' }], timestamp: Date.now() },
    ]
    const filler = (i: number) => [
      { role: 'user', content: `Turn ${i}: more edits to the docs site wording. ${'lorem ipsum dolor sit amet '.repeat(50)}`, timestamp: Date.now() },
      { role: 'assistant', content: [{ type: 'text', text: `ok ${i}` }], timestamp: Date.now() },
    ]
    let history: unknown[] = []
    const commit = async (k: number, messages: unknown[]) => {
      await e.assemble({ ...s, messages: history, tokenBudget: 2000, prompt: 'next' })
      await e.commitTurn({ ...s, advancementKey: `k${k}`, messages })
      history = [...history, ...messages]
    }
    await commit(0, plant)
    for (let i = 1; i <= 6; i++) await commit(i, filler(i))
    const out = await e.assemble({ ...s, messages: history, tokenBudget: 2000, prompt: 'which ticket was the vault rotation?' })
    const texts = out.messages.map((m: { content: unknown }) => (typeof m.content === 'string' ? m.content : JSON.stringify(m.content)))
    const recalled = texts.filter((t: string) => t.startsWith('<recalled'))
    expect(recalled.join('\n')).toContain('ZEBRA-4411')
    expect(out.systemPromptAddition).toContain('<recalled')
  })
})
