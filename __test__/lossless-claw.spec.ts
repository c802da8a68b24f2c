// lossless-claw itself on a file lcm-native wrote (summaries, fidelity scores, its own
// tables): its migration must accept the file, its stores must read it, and lcm-native must
// find everything as it left it. Runs where a lossless-claw checkout exists (see
// __test__/lossless-claw/README.md); lossless-claw is not on the npm registry.
import { spawnSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { homedir } from 'node:os'
import { join } from 'node:path'

import { describe, expect, it } from 'vitest'

import { LcmEngine } from '../index.js'
import { ROOT, THEME, hostMessages, tempDir, turns } from './helpers'

const SRC = process.env.LCM_LOSSLESS_CLAW_SRC ?? join(homedir(), '.cache/lcm-native/lossless-claw/src-4214b480')
const NODE = process.env.LCM_NODE24 ?? join(homedir(), '.cache/lcm-native/node24/package/bin/node')
const available = existsSync(join(SRC, 'src/db/migration.ts')) && existsSync(NODE)
if (!available) {
  // Said once, so that a skipped file is never a silent one.
  console.warn(`lossless-claw.spec.ts skipped: no lossless-claw checkout at ${SRC} or no Node 24 at ${NODE} (see __test__/lossless-claw/README.md)`)
}

describe.skipIf(!available)(`lossless-claw (${SRC}) on an lcm-native file`, () => {
  it('migrates it, reads it, and leaves lcm-native its summaries and scores', async () => {
    const dbPath = join(tempDir(), 'lcm.db')
    const engine = await LcmEngine.open({ dbPath, leafChunkTokens: 3000, leafTargetTokens: 400, maxSweepIterations: 1000 })
    let conversationId = 0
    for (const turn of turns(hostMessages(THEME))) conversationId = (await engine.ingest({ sessionId: 'theme' }, turn)).conversationId
    await engine.compact(conversationId, 'offline', { tokenBudget: 16_000, force: true })
    const summaries = await engine.summaries(conversationId)
    const scores = await engine.fidelity(conversationId)
    const context = await engine.context(conversationId)
    const messages = await engine.messages(conversationId, { limit: 100_000 })
    expect(summaries.every((s) => s.fidelity !== null)).toBe(true)
    await engine.close()

    const run = spawnSync(
      NODE,
      ['--experimental-transform-types', join(ROOT, '__test__/lossless-claw/run-migration.mjs'), dbPath, '--src', SRC, '--keep-wal'],
      { encoding: 'utf8', timeout: 60_000 },
    )
    expect(run.status, run.stderr + run.stdout).toBe(0)
    const report = JSON.parse(run.stdout)
    expect(report.ok).toBe(true)
    expect(report.logs.errors).toEqual([])
    expect(report.schemaChanges.removed).toEqual([])
    expect(report.schemaChanges.altered.filter((t: string) => /summaries|lcm_native/.test(t))).toEqual([])
    expect(report.tables).toContain('lcm_native_summary_fidelity')
    expect(report.storeRead.conversations[0].summaries).toBe(summaries.length)

    const after = await LcmEngine.open({ dbPath })
    try {
      // lossless-claw adds its columns (identity hashes, …), so the digest of whole rows
      // changes; what lcm-native stored must not.
      expect((await after.verify()).ok).toBe(true)
      expect(await after.context(conversationId)).toEqual(context)
      expect(await after.messages(conversationId, { limit: 100_000 })).toEqual(messages)
      expect((await after.summaries(conversationId)).map((s) => s.content)).toEqual(summaries.map((s) => s.content))
      expect(await after.fidelity(conversationId)).toEqual(scores)
      expect((await after.summaries(conversationId)).map((s) => s.fidelity)).toEqual(summaries.map((s) => s.fidelity))
    } finally {
      await after.close()
    }
  })

  it('reads a long history whose ordinals lcm-native moved up, and renumbers it from 0 when it writes', async () => {
    const dbPath = join(tempDir(), 'long.db')
    const engine = await LcmEngine.open({ dbPath, leafChunkTokens: 2000, maxSweepIterations: 4 })
    const words = 'alpha beta gamma delta epsilon zeta eta theta iota kappa '.repeat(12)
    const messages = Array.from({ length: 1_600 }, (_, i) =>
      i % 2 === 0 ? { role: 'user' as const, content: `question ${i}: ${words}` } : { role: 'assistant' as const, content: [{ type: 'text' as const, text: `answer ${i}: ${words}` }] },
    )
    const { conversationId } = await engine.ingest({ sessionId: 'long' }, messages)
    for (let i = 0; i < 2; i++) await engine.compact(conversationId, 'offline', { tokenBudget: 1_000, force: true })
    const context = await engine.context(conversationId)
    // More than 1,000 rows followed every write: the front moved up, the newest row stayed.
    expect(context[0].ordinal).toBeGreaterThan(0)
    expect(context.at(-1)?.ordinal).toBe(1_599)
    await engine.close()

    const run = spawnSync(
      NODE,
      ['--experimental-transform-types', join(ROOT, '__test__/lossless-claw/run-migration.mjs'), dbPath, '--src', SRC, '--keep-wal', '--replace-first'],
      { encoding: 'utf8', timeout: 60_000 },
    )
    expect(run.status, run.stderr + run.stdout).toBe(0)
    const read = JSON.parse(run.stdout).storeRead.conversations[0]
    expect(read.contextItems).toBe(context.length)
    expect(read.firstOrdinal).toBe(context[0].ordinal)
    expect(read.afterReplace).toEqual({ firstOrdinal: 0, lastOrdinal: context.length - 1, contextItems: context.length })

    const after = await LcmEngine.open({ dbPath })
    try {
      expect((await after.verify()).ok).toBe(true)
      const now = await after.context(conversationId)
      expect(now.map((e) => e.ordinal)).toEqual(context.map((_, i) => i))
      expect(now.map(({ ordinal: _, ...rest }) => rest)).toEqual(context.map(({ ordinal: _, ...rest }) => rest))
      // And lcm-native goes on compacting the renumbered file.
      const r = await after.compact(conversationId, 'offline', { tokenBudget: 1_000, force: true })
      expect(r.leafPasses).toBeGreaterThan(0)
      expect((await after.verify(conversationId)).ok).toBe(true)
    } finally {
      await after.close()
    }
  })
})
