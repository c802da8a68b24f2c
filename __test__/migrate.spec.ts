// migrate(): the three lossless-claw schema eras, value by value against the plugin's output.
import { readFileSync } from 'node:fs'
import { join } from 'node:path'

import { describe, expect, it } from 'vitest'

import { LcmEngine, migrate, type SummaryRecord } from '../index.js'
import { FIXTURES, copyFixture, tempDir } from './helpers'

type Expected = Record<string, {
  depth: number
  earliest_at: string | null
  latest_at: string | null
  descendant_count: number
  descendant_token_count: number | null
  source_message_token_count: number | null
}>

function expected(file: string): Expected {
  return JSON.parse(readFileSync(join(FIXTURES, file), 'utf8')).summaries
}

async function summariesOf(dbPath: string): Promise<SummaryRecord[]> {
  const engine = await LcmEngine.open({ dbPath })
  try {
    return await engine.summaries(1)
  } finally {
    await engine.close()
  }
}

function compare(actual: SummaryRecord[], want: Expected, withTokens: boolean) {
  const ids = Object.keys(want)
  expect(actual.map((s) => s.summaryId)).toEqual(ids)
  for (const s of actual) {
    const e = want[s.summaryId]
    const got: Record<string, unknown> = {
      depth: s.depth,
      earliest_at: s.earliestAt,
      latest_at: s.latestAt,
      descendant_count: s.descendantCount,
    }
    const exp: Record<string, unknown> = {
      depth: e.depth,
      earliest_at: e.earliest_at,
      latest_at: e.latest_at,
      descendant_count: e.descendant_count,
    }
    if (withTokens) {
      got.descendant_token_count = s.descendantTokenCount
      got.source_message_token_count = s.sourceMessageTokenCount
      exp.descendant_token_count = e.descendant_token_count
      exp.source_message_token_count = e.source_message_token_count
    }
    expect(got, s.summaryId).toEqual(exp)
  }
}

describe('migrate', () => {
  it('creates the schema on a new file, and a second run does nothing', async () => {
    const dbPath = join(tempDir(), 'new.db')
    const first = await migrate(dbPath)
    expect(first.era).toBe('new')
    expect(first.upToDate).toBe(false)
    expect(first.tablesCreated).toContain('messages')
    expect(first.tablesCreated).toContain('lcm_migration_state')
    const second = await migrate(dbPath)
    expect(second.upToDate).toBe(true)
    expect(second.era).toBe('lcm-native')
    expect(second.summary).toMatch(/nothing was done/)
    expect(second.backfills).toEqual([])
  })

  it('upgrades a legacy pre-depth database to the plugin values, summary by summary', async () => {
    const dbPath = copyFixture('legacy-pre-depth.db')
    const report = await migrate(dbPath)
    expect(report.era).toBe('legacy')
    expect(report.columnsAdded).toEqual(expect.arrayContaining(['summaries.depth', 'summaries.earliest_at', 'summaries.latest_at', 'summaries.descendant_count']))
    expect(report.backfills.map((b) => `${b.step}@${b.version}`)).toEqual(
      expect.arrayContaining(['backfillSummaryDepths@1', 'backfillSummaryMetadata@1']),
    )
    const summaries = await summariesOf(dbPath)
    expect(summaries).toHaveLength(175)
    compare(summaries, expected('legacy-pre-depth.expected-head.json'), true)
    compare(summaries, expected('legacy-pre-depth.expected-seed.json'), false)
    const again = await migrate(dbPath)
    expect(again.upToDate).toBe(true)
  })

  it('upgrades a seed-era database and keeps the values the seed plugin wrote', async () => {
    const dbPath = copyFixture('seed-theme.db')
    const report = await migrate(dbPath)
    expect(report.era).toBe('seed')
    expect(report.columnsAdded).toContain('summaries.descendant_token_count')
    const summaries = await summariesOf(dbPath)
    compare(summaries, expected('legacy-pre-depth.expected-head.json'), true)
    expect(new Set(summaries.map((s) => s.depth))).toEqual(new Set([0, 1, 2]))
  })

  it('opens a lossless-claw 0.15.3 database without re-running its recorded backfills', async () => {
    const dbPath = copyFixture('head-theme.db')
    const report = await migrate(dbPath)
    expect(report.era).toBe('lossless-claw')
    expect(report.columnsAdded).toEqual([])
    // Only lcm-native's own tables and lossless-claw 1.x's tables of turn records and transcript trust are new.
    expect(report.tablesCreated).toEqual(['turn_advancements', 'lcm_native_turns', 'lcm_native_turn_positions', 'message_transcript_anchor_trust', 'lcm_native_prompt_cache', 'lcm_native_recalls', 'lcm_native_message_kinds', 'lcm_native_context_resets', 'lcm_native_summary_fidelity', 'lcm_native_summary_versions', 'lcm_native_summary_context', 'lcm_native_redactions', 'lcm_native_redaction_pending', 'lcm_native_scrub_pending'])
    expect(report.backfills.map((b) => b.step)).not.toContain('backfillSummaryDepths')
    const summaries = await summariesOf(dbPath)
    expect(summaries).toHaveLength(174)
    expect(summaries.filter((s) => s.depth === 2)).toHaveLength(1)
    expect((await migrate(dbPath)).upToDate).toBe(true)
  })

  it('rejects a path that is not a string', async () => {
    const err = await migrate(42 as unknown as string).then(
      () => null,
      (e: Error & { code?: string }) => e,
    )
    expect(err?.code).toBe('E_INVALID_CONFIG')
  })
})
