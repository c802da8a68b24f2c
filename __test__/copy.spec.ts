// copyDatabase and `lcm-native copy`: SQLite ↔ PostgreSQL, lossless and resumable. The
// PostgreSQL cases run against the throwaway cluster `npm test` starts
// (scripts/pg-test-server.cjs sets LCM_TEST_DATABASE_URL); without one they are skipped with
// one line, except in CI, where they must run.
import { spawn, spawnSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { join } from 'node:path'

import { afterAll, describe, expect, it } from 'vitest'

import { copyDatabase, LcmEngine, migrate, type CopyReport } from '../index.js'
import { ROOT, copyFixture, rejection, tempDir } from './helpers'

const BIN = join(ROOT, 'bin', 'lcm-native.cjs')
const PG_URL = process.env.LCM_TEST_DATABASE_URL
const REQUIRED = process.env.CI === 'true' || process.env.LCM_REQUIRE_POSTGRES === '1'
if (!PG_URL) {
  if (REQUIRED) throw new Error('LCM_TEST_DATABASE_URL is not set and PostgreSQL is required here (CI=true)')
  console.log('postgres: skipped copy.spec PostgreSQL cases (LCM_TEST_DATABASE_URL is not set; npm test sets it)')
}

const schemas: string[] = []
function freshSchema(tag: string): string {
  const name = `v_${tag}_${process.pid}_${schemas.length}`
  schemas.push(name)
  return name
}
function psql(sql: string): string {
  const r = spawnSync('psql', [PG_URL!, '-v', 'ON_ERROR_STOP=1', '-tAc', sql], { encoding: 'utf8' })
  if (r.status !== 0) throw new Error(`psql: ${r.stderr}`)
  return r.stdout.trim()
}
afterAll(() => {
  if (PG_URL) for (const s of schemas) psql(`DROP SCHEMA IF EXISTS "${s}" CASCADE`)
})

/** lossless-claw's own file, upgraded in place (a copy's source must be current). */
async function upgradedFixture(): Promise<string> {
  const db = copyFixture('head-theme.db')
  await migrate(db)
  return db
}

function cli(...args: string[]) {
  return spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8', env: { ...process.env, HOME: tempDir() } })
}

async function listed(dbPath: string) {
  const engine = await LcmEngine.open({ dbPath, readOnly: true })
  try {
    const conversations = await engine.conversations()
    const summaries = await engine.summaries(conversations[0].conversationId)
    const context = await engine.context(conversations[0].conversationId)
    return { conversations, summaries, context }
  } finally {
    await engine.close()
  }
}

describe('copyDatabase between SQLite files', () => {
  it('makes the same database, and refuses a target that holds one', async () => {
    const from = await upgradedFixture()
    const to = join(tempDir(), 'copy.db')
    const report: CopyReport = await copyDatabase({ from, to })
    expect(report.resumed).toBe(false)
    expect(report.tables.find((t) => t.table === 'messages')?.rows).toBe(914)
    // lossless-claw's own tables travel with the rest.
    expect(report.tables.map((t) => t.table)).toContain('focus_briefs')
    expect(await listed(to)).toEqual(await listed(from))
    const again = await rejection(copyDatabase({ from, to }))
    expect(again.code).toBe('E_INVALID_INPUT')
    expect(again.message).toMatch(/already holds/)
  })

  it('reads its options as typed input', async () => {
    const bad = await rejection(copyDatabase({ from: 'a.db', to: 'b.db', batchRows: 0 }))
    expect(bad.code).toBe('E_INVALID_INPUT')
    expect(bad.message).toMatch(/batchRows/)
    const unknown = await rejection(copyDatabase({ from: 'a.db', to: 'b.db', batchSize: 5 } as never))
    expect(unknown.message).toMatch(/options.batchSize: unknown field.*`batchRows`/)
    const missing = await rejection(copyDatabase({ from: join(tempDir(), 'none.db'), to: join(tempDir(), 'b.db') }))
    expect(missing.code).toBe('E_IO')
  })

  it('refuses a source that needs a schema upgrade, naming the command', async () => {
    const from = copyFixture('head-theme.db')
    const e = await rejection(copyDatabase({ from, to: join(tempDir(), 'b.db') }))
    expect(e.code).toBe('E_SCHEMA')
    expect(e.message).toMatch(/lcm-native migrate --db/)
  })
})

describe.skipIf(!PG_URL)('copy through PostgreSQL', () => {
  it('goes there and back without losing or changing a row', async () => {
    const from = await upgradedFixture()
    const schema = freshSchema('there_back')
    const url = `${PG_URL}?schema=${schema}`
    const there = cli('copy', '--from', from, '--to', url, '--json')
    expect(there.status, there.stderr).toBe(0)
    const report = JSON.parse(there.stdout) as CopyReport
    expect(report.to).not.toMatch(/:[^@/]*@/) // no password, even an empty one
    expect(Number(psql(`SELECT count(*) FROM "${schema}".messages`))).toBe(914)
    const back = join(tempDir(), 'back.db')
    const r = cli('copy', '--from', url, '--to', back, '--json')
    expect(r.status, r.stderr).toBe(0)
    const backReport = JSON.parse(r.stdout) as CopyReport
    expect(backReport.tables).toEqual(report.tables)
    expect(backReport.sequences).toEqual(report.sequences)
    expect(await listed(back)).toEqual(await listed(from))
    const verify = cli('verify', '--db', back)
    expect(verify.status, verify.stdout + verify.stderr).toBe(0)
  })

  it('killed mid-copy, finishes when run again', async () => {
    const from = await upgradedFixture()
    const schema = freshSchema('killed')
    const url = `${PG_URL}?schema=${schema}`
    // One row a batch: thousands of commits, so the kill lands inside the copy.
    const child = spawn(process.execPath, [BIN, 'copy', '--from', from, '--to', url, '--batch-rows', '1'], { stdio: 'ignore' })
    const exited = new Promise((resolve) => child.on('exit', resolve))
    let committed = 0
    for (let i = 0; i < 500 && committed < 50; i++) {
      await new Promise((r) => setTimeout(r, 20))
      try {
        committed = Number(psql(`SELECT coalesce(sum((value::json->>'rows')::int), 0) FROM "${schema}".lcm_native_copy WHERE item LIKE 'table:%'`))
      } catch {
        // Not created yet.
      }
    }
    child.kill('SIGKILL')
    await exited
    expect(committed).toBeGreaterThanOrEqual(50)
    // The unfinished copy is not a source.
    const early = cli('copy', '--from', url, '--to', join(tempDir(), 'x.db'))
    expect(early.status).toBe(1)
    expect(early.stderr).toMatch(/unfinished copy/)
    const second = cli('copy', '--from', from, '--to', url, '--json')
    expect(second.status, second.stderr).toBe(0)
    const report = JSON.parse(second.stdout) as CopyReport
    expect(report.resumed).toBe(true)
    const total = report.tables.reduce((n, t) => n + t.rows, 0)
    expect(report.rowsCopied).toBeLessThan(total)
    expect(Number(psql(`SELECT count(*) FROM "${schema}".messages`))).toBe(914)
    expect(psql(`SELECT count(*) FROM pg_tables WHERE schemaname = '${schema}' AND tablename = 'lcm_native_copy'`)).toBe('0')
  })

  it('says what is wrong with a server it cannot reach, without the password', async () => {
    const from = await upgradedFixture()
    const r = cli('copy', '--from', from, '--to', `postgres://lcm:hunter2@${encodeURIComponent(tempDir())}/none`)
    expect(r.status).toBe(1)
    expect(r.stderr).toMatch(/E_CONNECTION: cannot connect to postgres:\/\/lcm@/)
    expect(r.stderr).not.toMatch(/hunter2/)
    expect(existsSync(from)).toBe(true)
  })
})
