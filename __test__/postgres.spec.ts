// LcmEngine on PostgreSQL (`dbPath: 'postgres://…'`), from JavaScript: a real session's
// turns stored, compacted and assembled as on a SQLite file; what is not ported yet answers
// E_UNSUPPORTED. Runs against the throwaway cluster `npm test` starts
// (scripts/pg-test-server.cjs); skipped with one line without it, except in CI.
import { spawnSync } from 'node:child_process'
import { join } from 'node:path'

import { afterAll, describe, expect, it } from 'vitest'

import { LcmEngine } from '../index.js'
import { THEME, hostMessages, rejection, tempDir, turns } from './helpers'

const PG_URL = process.env.LCM_TEST_DATABASE_URL
const REQUIRED = process.env.CI === 'true' || process.env.LCM_REQUIRE_POSTGRES === '1'
if (!PG_URL) {
  if (REQUIRED) throw new Error('LCM_TEST_DATABASE_URL is not set and PostgreSQL is required here (CI=true)')
  console.log('postgres: skipped postgres.spec (LCM_TEST_DATABASE_URL is not set; npm test sets it)')
}

const schemas: string[] = []
afterAll(() => {
  for (const s of schemas) spawnSync('psql', [PG_URL!, '-qc', `DROP SCHEMA IF EXISTS "${s}" CASCADE`])
})

describe.skipIf(!PG_URL)('LcmEngine on PostgreSQL', () => {
  it('stores, compacts and assembles a real session as on SQLite', async () => {
    const schema = `v_engine_${process.pid}`
    schemas.push(schema)
    const pg = await LcmEngine.open({ dbPath: `${PG_URL}?schema=${schema}` })
    const file = await LcmEngine.open({ dbPath: join(tempDir(), 'lcm.db') })
    try {
      expect(pg.migration.summary).toMatch(/created lcm-native's tables/)
      const target = { sessionKey: 'agent:main:main', sessionId: 'theme' }
      const session = turns(hostMessages(THEME)).slice(0, 30)
      for (const [i, turn] of session.entries()) {
        const options = { advancementKey: `turn-${i}` }
        const [a, b] = [await file.ingest(target, turn, options), await pg.ingest(target, turn, options)]
        expect(b).toEqual(a)
      }
      // A replayed turn stores nothing twice.
      expect((await pg.ingest(target, session[0], { advancementKey: 'turn-0' })).duplicate).toBe(true)
      expect(await pg.messages(1)).toEqual(await file.messages(1))
      expect(await pg.context(1)).toEqual(await file.context(1))
      for (const tokenBudget of [3_000, 50_000]) {
        const [a, b] = [await file.assemble(1, { tokenBudget }), await pg.assemble(1, { tokenBudget })]
        expect(b.messages).toEqual(a.messages)
        expect(b.estimatedTokens).toBe(a.estimatedTokens)
      }
      // Compaction with the same summarizer gives the same summaries.
      const summarize = async (_prompt: string, req: { kind: string; depth: number }) => `${req.kind} d${req.depth} summary`
      const [sa, sb] = [
        await file.compact(1, summarize, { tokenBudget: 3_000, force: true }),
        await pg.compact(1, summarize, { tokenBudget: 3_000, force: true }),
      ]
      expect(sb.leafPasses).toBeGreaterThan(0)
      const timeless = (r: typeof sa) => ({ ...r, createdSummaryIds: r.createdSummaryIds.length, durationMs: 0, summarizerMs: 0 })
      expect(timeless(sb)).toEqual(timeless(sa))
      const shape = (list: { depth: number; content: string; tokenCount: number }[]) => list.map((s) => [s.depth, s.content, s.tokenCount])
      expect(shape(await pg.summaries(1))).toEqual(shape(await file.summaries(1)))
      // grep finds the same hits on both (summary ids carry their time: compared by kind).
      for (const options of [{ query: 'theme' }, { query: 'theme', mode: 'like' as const }, { query: 'them?e', mode: 'regex' as const }]) {
        const hits = async (e: typeof pg) =>
          (await e.grep(1, { ...options, limit: 500 })).hits.map((h) => [h.type, h.messageId ?? h.depth, h.time, h.snippet, h.live])
        const [ha, hb] = [await hits(file), await hits(pg)]
        expect(ha.length).toBeGreaterThan(0)
        expect(hb).toEqual(ha)
      }
      // What is not ported yet says so.
      const e = await rejection(pg.verify(1))
      expect(e.code).toBe('E_UNSUPPORTED')
      expect(e.message).toMatch(/issue #32/)
    } finally {
      await pg.close()
      await file.close()
    }
  })

  it('says what is wrong with a server it cannot reach', async () => {
    const e = await rejection(LcmEngine.open({ dbPath: `postgres://lcm:hunter2@${encodeURIComponent(tempDir())}/none` }))
    expect(e.code).toBe('E_CONNECTION')
    expect(e.message).not.toMatch(/hunter2/)
  })
})
