// Failure paths: every error is a JS Error with a stable code, and nothing is changed.
import { spawnSync } from 'node:child_process'
import { chmodSync, copyFileSync, existsSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

import { describe, expect, it } from 'vitest'

import { LcmEngine, configFromEnv, migrate } from '../index.js'
import { FIXTURES, ROOT, rejection, tempDir } from './helpers'

describe('errors', () => {
  it('a missing directory is E_IO and creates nothing', async () => {
    const dir = join(tempDir(), 'missing', 'deeper')
    const err = await rejection(LcmEngine.open({ dbPath: join(dir, 'lcm.db') }))
    expect(err).toBeInstanceOf(Error)
    expect(err.code).toBe('E_IO')
    expect(err.message).toMatch(/does not exist; create it/)
    expect(existsSync(dir)).toBe(false)
    expect((await rejection(migrate(join(dir, 'lcm.db')))).code).toBe('E_IO')
  })

  it('a file that is not SQLite is E_SCHEMA and stays untouched', async () => {
    const path = join(tempDir(), 'notes.db')
    const text = 'These are my notes, not a database. '.repeat(20)
    writeFileSync(path, text)
    const err = await rejection(LcmEngine.open({ dbPath: path }))
    expect(err.code).toBe('E_SCHEMA')
    expect(err.message).toMatch(/not a SQLite database/)
    expect(readFileSync(path, 'utf8')).toBe(text)
    expect(existsSync(`${path}-wal`)).toBe(false)
  })

  it('a read-only database file is E_IO', () => {
    const dir = tempDir()
    const path = join(dir, 'ro.db')
    copyFileSync(join(FIXTURES, 'newer-lcm-native.db'), path)
    chmodSync(path, 0o444)
    chmodSync(dir, 0o755)
    // root ignores file permissions, so run the check as an unprivileged user then.
    const asRoot = process.getuid?.() === 0
    const child = spawnSync(process.execPath, [join(ROOT, '__test__/child/open.cjs'), path], {
      encoding: 'utf8',
      ...(asRoot ? { uid: 65534, gid: 65534 } : {}),
    })
    expect(child.status, child.stderr).toBe(0)
    const out = JSON.parse(child.stdout)
    expect(out.code).toBe('E_IO')
    expect(out.message).toMatch(/read-only/)
  })

  it('a database migrated by a newer lcm-native is refused, byte for byte unchanged', async () => {
    const path = join(tempDir(), 'newer.db')
    copyFileSync(join(FIXTURES, 'newer-lcm-native.db'), path)
    const before = readFileSync(path)
    const err = await rejection(LcmEngine.open({ dbPath: path }))
    expect(err.code).toBe('E_SCHEMA')
    expect(err.message).toMatch(/newer lcm-native.*upgrade lcm-native/)
    expect((await rejection(migrate(path))).code).toBe('E_SCHEMA')
    expect(readFileSync(path).equals(before)).toBe(true)
    expect(existsSync(`${path}-wal`)).toBe(false)
  })

  it('invalid options are E_INVALID_CONFIG naming the option', async () => {
    const dbPath = join(tempDir(), 'x.db')
    const cases: [Record<string, unknown>, string][] = [
      [{ dbPath, freshTailCount: -3 }, 'freshTailCount'],
      [{ dbPath, contextThreshold: 1.5 }, 'contextThreshold'],
      [{ dbPath, leafChunkTokens: 'many' }, 'leafChunkTokens'],
      [{ dbPath, timezone: 'Moon/Crater' }, 'timezone'],
      [{ dbPath, presentation: 'html' }, 'presentation'],
      [{ dbPath, leafMinFanot: 8 }, 'leafMinFanot'],
      [{}, 'dbPath'],
    ]
    for (const [options, name] of cases) {
      const err = await rejection(LcmEngine.open(options as never))
      expect(err.code, name).toBe('E_INVALID_CONFIG')
      expect(err.message).toContain(`\`${name}\``)
    }
    const typo = await rejection(LcmEngine.open({ dbPath, leafMinFanot: 8 } as never))
    expect(typo.message).toMatch(/did you mean `leafMinFanout`/)
    expect(existsSync(dbPath)).toBe(false)
  })

  it('call options are read as typed inputs: an unknown or malformed field is E_INVALID_INPUT naming its path', async () => {
    const engine = await LcmEngine.open({ dbPath: join(tempDir(), 'x.db') })
    const { conversationId } = await engine.ingest({ sessionId: 's' }, [{ role: 'user', content: 'hello there' }])
    const cases: [() => Promise<unknown>, RegExp][] = [
      [() => engine.grep(conversationId, { qurey: 'x' } as never), /^options\.qurey: unknown field; did you mean `query`\?/],
      [() => engine.grep(conversationId, { query: 'x', limit: 0 }), /^options\.limit: must be from 1 to 1000, got 0/],
      [() => engine.assemble(conversationId, { tokenBudget: 1000, freshTail: 3 } as never), /^options\.freshTail: unknown field; did you mean `freshTailCount`\?/],
      [() => engine.assemble(conversationId, { tokenBudget: '1000' } as never), /^options\.tokenBudget: invalid type: string "1000"/],
      [() => engine.evaluate(conversationId, { tokenBudget: 1000, observed: 5 } as never), /^options\.observed: unknown field; did you mean `observedTokens`\?/],
      [() => engine.messages(conversationId, { afterSeq: -1 }), /^options\.afterSeq: must be an integer ≥ 0, got -1/],
      [() => engine.expand('sum_x', { tokenBudget: 10, depth: 1 } as never), /^options\.depth: unknown field; did you mean `maxDepth`\?/],
      [() => engine.ingest({ sessionId: 's' }, [], { turn: { payloadHash: 'h' } } as never), /^options\.turn: missing field `sessionId`/],
      [() => engine.resetSession({ sessionId: 's' }, { reason: 'wipe' } as never), /^options\.reason: unknown variant `wipe`/],
      [() => engine.rewrite(conversationId, 'offline', { all: true, dryRun: true } as never), /^options\.dryRun: unknown field/],
      [() => engine.messages(0), /^conversationId: must be an integer ≥ 1, got 0/],
      [() => engine.grep(conversationId, [{ query: 'x' }] as never), /^options: expected an object or a value, got an array/],
    ]
    for (const [call, message] of cases) {
      const err = await rejection(call())
      expect(err.code, String(message)).toBe('E_INVALID_INPUT')
      expect(err.message).toMatch(message)
    }
    // null is "not given", as undefined is.
    expect((await engine.messages(conversationId, { afterSeq: null, limit: null } as never)).length).toBe(1)
    expect((await engine.messages(conversationId)).length).toBe(1)
    await engine.close()
  })

  it('a summarizer that rejects with anything (a Symbol, a Proxy, throwing getters, 5) fails the pass, never the process', () => {
    const out = spawnSync(process.execPath, [join(ROOT, '__test__/child/hostile-summarizer.cjs')], { encoding: 'utf8', timeout: 60_000 })
    expect(out.stderr).toBe('')
    expect(out.status).toBe(0)
    const lines: any[] = out.stdout.trim().split('\n').map((l) => JSON.parse(l))
    expect(lines.at(-1)).toEqual({ done: true })
    const byCase: Record<string, any> = Object.fromEntries(lines.slice(0, -1).map((l) => [l.case, l]))
    // A thrown Error is sorted like a rejection: an auth error aborts the pass, reported.
    expect(byCase['throws an auth error']).toMatchObject({ code: null, authFailure: true, summaries: 0 })
    delete byCase['throws an auth error']
    for (const l of Object.values(byCase)) {
      expect(l.code, l.case).toBe('E_SUMMARIZER')
      expect(l.summaries, l.case).toBe(0)
    }
    expect(byCase['rejects with a Symbol'].message).toMatch(/a Symbol/)
    expect(byCase['throws a Symbol'].message).toMatch(/a Symbol/)
    expect(byCase['rejects with 5'].message).toMatch(/number 5/)
    expect(byCase['resolves with 42'].message).toMatch(/resolved with number 42/)
    expect(byCase['rejects with an object whose getters throw'].message).toMatch(/no readable message/)
  })

  it('a cycle in the summary DAG: verify reports it and every other walk stays bounded', () => {
    const out = spawnSync(process.execPath, [join(ROOT, '__test__/child/cyclic-dag.cjs'), join(FIXTURES, 'head-theme.db')], {
      encoding: 'utf8',
      timeout: 30_000,
    })
    expect(out.error, 'an operation did not finish').toBeUndefined()
    expect(out.status, out.stderr).toBe(0)
    const lines: any[] = out.stdout.trim().split('\n').map((l) => JSON.parse(l))
    expect(lines.map((l) => l.op)).toEqual(['open', 'verify', 'describe', 'describeInput', 'expand', 'rewriteAll', 'rewriteOne', 'assemble', 'grep', 'condensedPass', 'compact'])
    for (const l of lines) {
      expect(l.ms, l.op).toBeLessThan(5000)
      // Either an answer or a coded error, never an uncoded one.
      if (!l.ok) expect(l.code, l.op).toMatch(/^E_[A-Z_]+$/)
    }
    const verify = lines.find((l) => l.op === 'verify')
    expect(verify.problems.some((p: string) => p.startsWith('summary_parents has a cycle'))).toBe(true)
  })

  it('engine.integrityCheck says what the check came to: passed when checked at open, skipped when opened read-only', async () => {
    const dbPath = join(tempDir(), 'checked.db')
    const engine = await LcmEngine.open({ dbPath })
    expect(engine.integrityCheck).toEqual({ state: 'passed', error: null })
    expect(engine.damage).toBeNull()
    await engine.close()
    const reader = await LcmEngine.open({ dbPath, readOnly: true })
    expect(reader.integrityCheck).toEqual({ state: 'skipped', error: null })
    await reader.close()
  })

  it('calls on a closed engine are E_CLOSED', async () => {
    const engine = await LcmEngine.open({ dbPath: join(tempDir(), 'c.db') })
    await engine.close()
    await engine.close()
    expect((await rejection(engine.messages(1))).code).toBe('E_CLOSED')
    expect((await rejection(engine.ingest({ sessionId: 's' }, [{ role: 'user', content: 'x' }]))).code).toBe('E_CLOSED')
  })
})

describe('configuration', () => {
  it('open applies every default and reports the resolved config', async () => {
    const engine = await LcmEngine.open({ dbPath: join(tempDir(), 'd.db'), timezone: 'Europe/Berlin' })
    expect(engine.config).toMatchObject({
      contextThreshold: 0.75,
      freshTailCount: 32,
      leafMinFanout: 8,
      condensedMinFanout: 4,
      condensedMinFanoutHard: 2,
      incrementalMaxDepth: 0,
      leafChunkTokens: 20000,
      leafTargetTokens: 1200,
      condensedTargetTokens: 2000,
      timezone: 'Europe/Berlin',
      maxSweepIterations: 12,
      sweepDeadlineMs: 120000,
      summaryTimeoutMs: 60000,
      presentation: 'xml',
    })
    expect(engine.migration.era).toBe('new')
    await engine.close()
  })

  it('configFromEnv reads lossless-claw variable names', () => {
    const saved = { ...process.env }
    try {
      for (const k of Object.keys(process.env)) if (k.startsWith('LCM_')) delete process.env[k]
      Object.assign(process.env, {
        LCM_DATABASE_PATH: '/srv/lcm.db',
        LCM_CONTEXT_THRESHOLD: '0.6',
        LCM_FRESH_TAIL_COUNT: '48',
        LCM_LEAF_MIN_FANOUT: '6',
        LCM_CONDENSED_MIN_FANOUT: '3',
        LCM_CONDENSED_MIN_FANOUT_HARD: '2',
        LCM_INCREMENTAL_MAX_DEPTH: '1',
        LCM_LEAF_CHUNK_TOKENS: '8000',
        LCM_LEAF_TARGET_TOKENS: '900',
        LCM_CONDENSED_TARGET_TOKENS: '1500',
        TZ: 'America/Chicago',
      })
      expect(configFromEnv()).toEqual({
        dbPath: '/srv/lcm.db',
        contextThreshold: 0.6,
        freshTailCount: 48,
        leafMinFanout: 6,
        condensedMinFanout: 3,
        condensedMinFanoutHard: 2,
        incrementalMaxDepth: 1,
        leafChunkTokens: 8000,
        leafTargetTokens: 900,
        condensedTargetTokens: 1500,
        timezone: 'America/Chicago',
      })
      // Over a configuration: each variable replaces its option, the rest stays; TZ does not
      // replace a configured zone.
      expect(configFromEnv({ freshTailCount: 16, leafMinFanout: 9, summaryTimeoutMs: 5000, timezone: 'Europe/Berlin' })).toMatchObject({
        freshTailCount: 48,
        leafMinFanout: 6,
        summaryTimeoutMs: 5000,
        timezone: 'Europe/Berlin',
      })
      expect(() => configFromEnv(42 as never)).toThrow(/base must be an options object/)
      process.env.LCM_TIMEZONE = 'Asia/Tokyo'
      expect(configFromEnv().timezone).toBe('Asia/Tokyo')
      expect(configFromEnv({ timezone: 'Europe/Berlin' }).timezone).toBe('Asia/Tokyo')
      process.env.LCM_FRESH_TAIL_COUNT = 'lots'
      let thrown: (Error & { code?: string }) | undefined
      try {
        configFromEnv()
      } catch (e) {
        thrown = e as Error & { code?: string }
      }
      expect(thrown?.code).toBe('E_INVALID_CONFIG')
      expect(thrown?.message).toContain('LCM_FRESH_TAIL_COUNT')
    } finally {
      for (const k of Object.keys(process.env)) if (!(k in saved)) delete process.env[k]
      Object.assign(process.env, saved)
    }
  })
})
