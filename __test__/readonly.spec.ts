// readOnly: an engine that reads everything and never writes, for inspecting a database that
// another process owns or that sits on a read-only file (immutable: on a read-only directory).
import { spawnSync } from 'node:child_process'
import { chmodSync, readFileSync } from 'node:fs'
import { join } from 'node:path'

import { describe, expect, it } from 'vitest'

import { LcmEngine, type SummarizeRequest } from '../index.js'
import { ROOT, THEME, copyFixture, hostMessages, rejection, tempDir } from './helpers'

async function compactedFile() {
  const dir = tempDir()
  const dbPath = join(dir, 'lcm.db')
  const engine = await LcmEngine.open({ dbPath, leafChunkTokens: 3000, leafTargetTokens: 300, maxSweepIterations: 500 })
  const { conversationId } = await engine.ingest({ sessionId: 'theme' }, hostMessages(THEME))
  await engine.compact(conversationId, 'offline', { tokenBudget: 8000, force: true })
  const { digest } = await engine.verify()
  await engine.close()
  return { dir, dbPath, conversationId, digest }
}

describe('readOnly', () => {
  it('reads, searches and assembles; every write rejects with E_READ_ONLY before calling the summarizer', async () => {
    const { dbPath, conversationId, digest } = await compactedFile()
    const before = readFileSync(dbPath)
    const engine = await LcmEngine.open({ dbPath, readOnly: true })
    expect(engine.config.readOnly).toBe(true)
    expect(engine.migration.upToDate).toBe(true)
    expect((await engine.messages(conversationId)).length).toBe(914)
    expect((await engine.assemble(conversationId, { tokenBudget: 16000 })).messages.length).toBeGreaterThan(0)
    expect((await engine.grep(conversationId, { query: 'theme' })).hits.length).toBeGreaterThan(0)
    expect((await engine.verify()).digest).toBe(digest)

    let calls = 0
    const summarize = async (_p: string, _r: SummarizeRequest) => {
      calls += 1
      return 'never used'
    }
    const dry = await engine.rewrite(conversationId, summarize, { depth: 1 })
    expect(dry.entries.length).toBeGreaterThan(0)
    const dryCalls = calls
    // Each rejection is caught as soon as the call is made (they all settle at once).
    const writes: [string, Promise<Error & { code?: string }>][] = [
      ['ingest', rejection(engine.ingest({ sessionId: 'theme' }, [{ role: 'user', content: 'not stored' }]))],
      ['compact', rejection(engine.compact(conversationId, summarize, { tokenBudget: 100, force: true }))],
      ['leafPass', rejection(engine.leafPass(conversationId, summarize))],
      ['condensedPass', rejection(engine.condensedPass(conversationId, summarize))],
      ['rewrite --apply', rejection(engine.rewrite(conversationId, summarize, { depth: 1, apply: true }))],
    ]
    for (const [name, p] of writes) {
      const err = await p
      expect(err.code, name).toBe('E_READ_ONLY')
      expect(err.message, name).toMatch(/readOnly.*open it without readOnly/)
    }
    expect(calls).toBe(dryCalls)
    await engine.close()
    expect(readFileSync(dbPath).equals(before)).toBe(true)
  })

  it('opens a read-only file for an unprivileged user, where a read-write open is E_IO', async () => {
    const { dir, dbPath } = await compactedFile()
    chmodSync(dbPath, 0o444)
    chmodSync(dir, 0o755)
    const asRoot = process.getuid?.() === 0
    const open = (options: object) => {
      const child = spawnSync(process.execPath, [join(ROOT, '__test__/child/open.cjs'), dbPath, JSON.stringify(options)], {
        encoding: 'utf8',
        ...(asRoot ? { uid: 65534, gid: 65534 } : {}),
      })
      expect(child.status, child.stderr).toBe(0)
      return JSON.parse(child.stdout)
    }
    expect(open({}).code).toBe('E_IO')
    // SQLite cannot create the -shm a WAL database's readers share in that directory.
    const shared = open({ readOnly: true })
    expect(shared.code).toBe('E_IO')
    expect(shared.message).toMatch(/-shm .*not writable.*immutable: true/)
    expect(open({ readOnly: true, immutable: true })).toEqual({ ok: true, conversations: 1 })
    // The command line: stats says to pass --immutable, and works with it.
    const stats = (...extra: string[]) =>
      spawnSync(process.execPath, [join(ROOT, 'bin/lcm-native.cjs'), 'stats', '--db', dbPath, ...extra], {
        encoding: 'utf8',
        env: { PATH: process.env.PATH ?? '', HOME: dir },
        ...(asRoot ? { uid: 65534, gid: 65534 } : {}),
      })
    const refused = stats()
    expect(refused.status).toBe(1)
    expect(refused.stderr).toMatch(/^lcm-native: E_IO: .*-shm.*; pass --immutable\n$/)
    const ok = stats('--immutable')
    expect(ok.status, ok.stderr).toBe(0)
    expect(ok.stdout).toMatch(/conversation 1 \(session theme\): 914 messages/)
  })

  it('immutable needs readOnly', async () => {
    const err = await rejection(LcmEngine.open({ dbPath: join(tempDir(), 'x.db'), immutable: true }))
    expect(err.code).toBe('E_INVALID_CONFIG')
    expect(err.message).toMatch(/`immutable`: needs readOnly: true/)
  })

  it('refuses a database that needs a migration, and changes nothing', async () => {
    const dbPath = copyFixture('head-theme.db')
    const before = readFileSync(dbPath)
    const err = await rejection(LcmEngine.open({ dbPath, readOnly: true }))
    expect(err.code).toBe('E_SCHEMA')
    expect(err.message).toMatch(/needs a schema upgrade .*open it without readOnly, or run migrate/)
    expect(readFileSync(dbPath).equals(before)).toBe(true)
    expect((await rejection(LcmEngine.open({ dbPath, readOnly: 'yes' as never }))).code).toBe('E_INVALID_CONFIG')
  })
})
