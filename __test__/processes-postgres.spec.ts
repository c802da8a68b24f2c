// Separate processes on one PostgreSQL schema, as gateways on several machines: two commit
// turns to one conversation while one compacts and the other assembles; a process killed
// mid-compaction leaves nothing half-written and its lock behind it. Runs against the cluster
// `npm test` starts (scripts/pg-test-server.cjs); skipped without it, except in CI.
import { spawn, spawnSync } from 'node:child_process'
import { join } from 'node:path'

import { afterAll, describe, expect, it } from 'vitest'

import { LcmEngine } from '../index.js'
import { ROOT, THEME, TRANSCRIPTS } from './helpers'

const PG_URL = process.env.LCM_TEST_DATABASE_URL
// The same server through PgBouncer in transaction mode (`?pooler=transaction`), when
// scripts/pg-test-server.cjs could start one (CI installs it).
const POOLER_URL = process.env.LCM_TEST_POOLER_URL
const schemas: string[] = []
afterAll(() => {
  for (const s of schemas) spawnSync('psql', [PG_URL!, '-qc', `DROP SCHEMA IF EXISTS "${s}" CASCADE`])
})

function schemaUrl(base: string, tag: string): string {
  const schema = `p_${tag}_${process.pid}`
  schemas.push(schema)
  return `${base}${base.includes('?') ? '&' : '?'}schema=${schema}`
}

const ways = [
  { way: 'directly', base: PG_URL, pooled: false },
  ...(POOLER_URL ? [{ way: 'through PgBouncer in transaction mode', base: POOLER_URL, pooled: true }] : []),
]

function run(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (d) => (stdout += d))
    child.stderr.on('data', (d) => (stderr += d))
    child.on('exit', (code) => resolve({ code, stdout, stderr }))
  })
}

describe.skipIf(!PG_URL).each(ways)('processes on one PostgreSQL schema, $way', ({ base, pooled }) => {
  const tag = (t: string) => `${t}${pooled ? '_pooled' : ''}`
  it('two gateways commit turns to one conversation while one compacts and the other assembles: nothing lost, nothing twice', async () => {
    const url = schemaUrl(base!, tag('gateways'))
    // The schema made once, before both start.
    await (await LcmEngine.open({ dbUrl: url })).close()
    const count = 150
    const [a, b] = await Promise.all([
      run([join(ROOT, '__test__/child/gateway.cjs'), url, 'a', String(count), 'assemble']),
      run([join(ROOT, '__test__/child/gateway.cjs'), url, 'b', String(count), 'compact']),
    ])
    expect(a.code, a.stderr).toBe(0)
    expect(b.code, b.stderr).toBe(0)
    const [ra, rb] = [JSON.parse(a.stdout), JSON.parse(b.stdout)]
    expect(ra).toMatchObject({ turns: count, assembled: count })
    expect(rb.turns).toBe(count)
    expect(rb.passes).toBeGreaterThan(0)
    const engine = await LcmEngine.open({ dbUrl: url })
    try {
      const [conv] = await engine.conversations()
      expect(conv.messageCount).toBe(2 * count)
      const stored = await engine.messages(conv.conversationId, { limit: 1000 })
      // Every turn once, seq dense, each gateway's turns in its own order.
      expect(stored.map((m) => m.seq - stored[0].seq)).toEqual(Array.from({ length: 2 * count }, (_, i) => i))
      const ids = stored.map((m) => m.entryId ?? '')
      expect(new Set(ids).size).toBe(2 * count)
      for (const g of ['a', 'b']) {
        expect(ids.filter((id) => id.startsWith(g))).toEqual(Array.from({ length: count }, (_, i) => `${g}${i}`))
      }
      const report = await engine.verify()
      expect(report.problems).toEqual([])
      expect(report.ok).toBe(true)
      expect(conv.summaryCount).toBeGreaterThan(0)
    } finally {
      await engine.close()
    }
  })

  // Through the pooler the operation lock is a lease, which a killed holder leaves to run
  // out (30 s): one kill there, waited for that long.
  it.each(pooled ? [450] : [150, 450])('a process killed (SIGKILL) %i ms into compaction leaves a sound schema, and its lock goes with it', async (delay) => {
    const url = schemaUrl(base!, tag(`kill_${delay}`))
    const child = spawn(process.execPath, [join(ROOT, '__test__/child/compact-loop.cjs'), url, join(TRANSCRIPTS, THEME)], {
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let stderr = ''
    child.stderr.on('data', (d) => (stderr += d))
    await new Promise<void>((resolve, reject) => {
      child.stdout.on('data', (d) => {
        if (String(d).includes('ready')) resolve()
      })
      child.on('exit', () => reject(new Error(`child exited early: ${stderr}`)))
    })
    await new Promise((r) => setTimeout(r, delay))
    const exited = new Promise((r) => child.on('exit', r))
    child.kill('SIGKILL')
    await exited
    const engine = await LcmEngine.open({ dbUrl: url, lockTimeoutMs: pooled ? 35_000 : 5000 })
    try {
      const report = await engine.verify()
      expect(report.problems).toEqual([])
      expect(report.ok).toBe(true)
      const [conv] = await engine.conversations()
      expect(conv.messageCount).toBeGreaterThanOrEqual(914)
      expect(conv.summaryCount).toBeGreaterThan(0)
      // The killed process's session ended with it, and its operation lock with the session
      // (through the pooler, its lease ran out): a compaction here is not turned away (E_BUSY).
      await expect(engine.compact(conv.conversationId, 'offline', { tokenBudget: 500, force: true })).resolves.toHaveProperty('leafPasses')
      expect((await engine.verify()).ok).toBe(true)
    } finally {
      await engine.close()
    }
  }, 60_000)
})
