// Summary fidelity through the JS surface: scores in summaries/describe, scoring old
// summaries on demand, the per-depth distribution, minFidelity's retry with a JS summarizer,
// and the command line.
import { spawnSync } from 'node:child_process'
import { join } from 'node:path'

import { describe, expect, it } from 'vitest'

import { LcmEngine, type IngestMessage, type SummarizeRequest } from '../index.js'
import { ROOT, copyFixture, tempDir } from './helpers'

const BIN = join(ROOT, 'bin', 'lcm-native.cjs')

function conversation(): IngestMessage[] {
  return [
    { role: 'user', content: 'Please fix the crash in src/auth/login.ts and make sure npm test passes.' },
    {
      role: 'assistant',
      content: [
        { type: 'text', text: 'Reading it first.' },
        { type: 'toolCall', id: 'c1', name: 'read', arguments: { path: 'src/auth/login.ts' } },
        { type: 'toolCall', id: 'c2', name: 'bash', arguments: { command: 'npm test' } },
      ],
    },
    { role: 'toolResult', toolCallId: 'c1', content: 'export function validateUser() {}' },
    { role: 'toolResult', toolCallId: 'c2', content: 'Tests 3 failed | 9 passed (12)' },
    { role: 'assistant', content: 'The session guard was missing; fixed it in validateUser.' },
    { role: 'user', content: 'thanks' },
  ]
}

async function code(p: Promise<unknown>): Promise<string | undefined> {
  try {
    await p
  } catch (e) {
    return (e as { code?: string }).code
  }
  return undefined
}

describe('fidelity scores', () => {
  it('are computed on demand for summaries lossless-claw wrote, then stored', async () => {
    const dbPath = copyFixture('head-theme.db')
    const engine = await LcmEngine.open({ dbPath })
    try {
      const [conv] = await engine.conversations()
      const before = await engine.summaries(conv.conversationId)
      expect(before.length).toBeGreaterThan(100)
      expect(before.every((s) => s.fidelity === null && s.lowFidelity === false)).toBe(true)

      const d = await engine.describe(before[0].summaryId)
      if (d.type !== 'summary') throw new Error('a summary')
      expect(d.fidelityDetail.stored).toBe(false)
      expect(d.fidelityDetail.identifiers).toBeGreaterThan(0)
      expect(d.fidelityDetail.score).toBeGreaterThanOrEqual(0)
      expect(d.fidelityDetail.score).toBeLessThanOrEqual(1)

      const report = await engine.scoreFidelity(conv.conversationId)
      expect(report.scored).toBe(before.length)
      const total = report.byDepth.reduce((n, x) => n + x.summaries, 0)
      expect(total).toBe(before.length)
      for (const depth of report.byDepth) {
        expect(depth.scored).toBe(depth.summaries)
        if (depth.mean !== null) expect(depth.min!).toBeLessThanOrEqual(depth.median!)
      }
      const after = await engine.summaries(conv.conversationId)
      expect(after.filter((s) => s.fidelity === null).length).toBe(report.byDepth.reduce((n, x) => n + x.withoutIdentifiers, 0))
      const again = await engine.describe(before[0].summaryId)
      if (again.type !== 'summary') throw new Error('a summary')
      expect(again.fidelityDetail.stored).toBe(true)
      expect(again.fidelityDetail.score).toBe(d.fidelityDetail.score)
      expect(again.fidelity).toBe(d.fidelityDetail.score)
      expect((await engine.scoreFidelity(conv.conversationId)).scored).toBe(0)
      expect(await engine.fidelity(conv.conversationId)).toEqual(report.byDepth)
      // The fixture's stub summaries were never marked.
      expect(await engine.rewrite(conv.conversationId, 'offline', { lowFidelity: true })).toMatchObject({ entries: [] })
    } finally {
      await engine.close()
    }
  })

  it('minFidelity asks a JS summarizer once more, naming what it left out', async () => {
    const engine = await LcmEngine.open({ dbPath: join(tempDir(), 'lcm.db'), freshTailCount: 0, minFidelity: 0.5 })
    try {
      const { conversationId } = await engine.ingest({ sessionId: 's' }, conversation())
      const prompts: string[] = []
      const summarizer = async (prompt: string, _r: SummarizeRequest) => {
        prompts.push(prompt)
        return prompts.length === 1
          ? 'Worked on the login code.'
          : 'Fixed the session guard in validateUser (src/auth/login.ts); npm test had 3 failed.'
      }
      const pass = await engine.leafPass(conversationId, summarizer)
      expect(prompts).toHaveLength(2)
      expect(prompts[1]).toMatch(/verbatim[^]*src\/auth\/login\.ts/)
      const d = await engine.describe(pass!.summaryId!)
      if (d.type !== 'summary') throw new Error('a summary')
      expect(d.fidelityDetail.stored).toBe(true)
      expect(d.fidelityDetail.score!).toBeGreaterThanOrEqual(0.5)
      expect(d.fidelityDetail.needsRepair).toBe(false)
      expect(d.lowFidelity).toBe(false)
    } finally {
      await engine.close()
    }
  })

  it('a summary still under minFidelity is marked, and only a model may repair it', async () => {
    const engine = await LcmEngine.open({ dbPath: join(tempDir(), 'lcm.db'), freshTailCount: 0, minFidelity: 0.9 })
    try {
      const { conversationId } = await engine.ingest({ sessionId: 's' }, conversation())
      await engine.leafPass(conversationId, async () => 'Worked on it.')
      const [s] = await engine.summaries(conversationId)
      expect(s.lowFidelity).toBe(true)
      expect(s.content).toBe('Worked on it.')
      expect(await code(engine.rewrite(conversationId, 'offline', { lowFidelity: true, apply: true }))).toBe('E_INVALID_INPUT')
      const precise = 'Fixed the session guard in validateUser (src/auth/login.ts) after npm test had 3 failed, 9 passed.'
      const r = await engine.rewrite(conversationId, async () => precise, { lowFidelity: true, apply: true })
      expect(r.entries).toHaveLength(1)
      expect(r.entries[0].needsRepair).toBe(false)
      expect(r.entries[0].fidelity!).toBeGreaterThanOrEqual(0.9)
      const [fixed] = await engine.summaries(conversationId)
      expect(fixed.lowFidelity).toBe(false)
      expect(fixed.fidelity).toBe(r.entries[0].fidelity)
    } finally {
      await engine.close()
    }
  })

  it('minFidelity is a number in (0, 1]', async () => {
    for (const minFidelity of [0, 1.5, -1, 'high', true]) {
      const err = await LcmEngine.open({ dbPath: join(tempDir(), 'lcm.db'), minFidelity: minFidelity as number }).catch((e) => e)
      expect(err.code, String(minFidelity)).toBe('E_INVALID_CONFIG')
      expect(err.message).toMatch(/minFidelity/)
    }
    const engine = await LcmEngine.open({ dbPath: join(tempDir(), 'lcm.db'), minFidelity: 1 })
    expect(engine.config.minFidelity).toBe(1)
    await engine.close()
  })

  it('the command line scores a file and shows the scores per depth', () => {
    const db = copyFixture('head-theme.db')
    const env = { ...process.env, HOME: tempDir(), LCM_DATABASE_PATH: '' }
    const stats = (args: string[]) => spawnSync(process.execPath, [BIN, ...args], { env, encoding: 'utf8' })
    const before = stats(['stats', '--db', db])
    // The fixture needs a schema upgrade: stats reads it through an upgraded copy, unscored.
    expect(before.status, before.stderr).toBe(0)
    expect(before.stdout).toMatch(/fidelity d0: no score over 0 of 164; 164 not scored/)
    const scored = stats(['fidelity', '--db', db])
    expect(scored.status, scored.stderr).toBe(0)
    expect(scored.stdout).toMatch(/conversation 1: 174 summaries scored/)
    expect(scored.stdout).toMatch(/fidelity d0: mean \d\.\d\d, median \d\.\d\d, p10 \d\.\d\d, min \d\.\d\d over \d+ of \d+/)
    const after = stats(['stats', '--db', db])
    expect(after.status, after.stderr).toBe(0)
    expect(after.stdout).toMatch(/ {2}fidelity d1: mean \d\.\d\d/)
    expect(after.stdout).not.toMatch(/not scored/)
  })
})
