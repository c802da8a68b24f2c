// The spool through the JavaScript surface: `spoolTurn`, `spoolStatus`, `spoolWaiting`,
// `LcmEngine.drainSpool`, and what `lcm-native doctor` says of it. The drain's rules (order,
// poison turns, two drainers, every stale lock) are tested in src/spool/.
import { spawn, spawnSync } from 'node:child_process'
import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs'
import { hostname, tmpdir } from 'node:os'
import { join } from 'node:path'

import { afterAll, describe, expect, it } from 'vitest'

import { LcmEngine, spoolStatus, spoolTurn, spoolWaiting } from '../index.js'
import { ROOT } from './helpers'

const dirs: string[] = []
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true })
})

function fresh(): string {
  const dir = mkdtempSync(join(tmpdir(), 'lcm-spool-'))
  dirs.push(dir)
  return join(dir, 'lcm.db')
}

const turn = (n: number) => ({
  target: { sessionKey: 'agent:main:main', sessionId: 's1' },
  advancementKey: `k${n}`,
  messages: [
    { role: 'user' as const, content: `question ${n}` },
    { role: 'assistant' as const, content: [{ type: 'text' as const, text: `answer ${n}` }] },
  ],
})

describe('the spool', () => {
  it('keeps turns until a drain stores them in order, each once, and says what waits', async () => {
    const db = fresh()
    const before = Date.now()
    for (const n of [1, 2, 3]) spoolTurn(db, turn(n))
    expect(spoolWaiting(db)).toBe(true)
    const status = spoolStatus(db)
    expect(status).toMatchObject({ turns: 3, held: 0 })
    expect(status.oldestAt).toBeGreaterThanOrEqual(before)
    const engine = await LcmEngine.open({ dbPath: db })
    try {
      expect(await engine.drainSpool(db)).toMatchObject({ stored: 3, remaining: 0, busy: false, held: [] })
      const conv = await engine.findConversation({ sessionKey: 'agent:main:main' })
      const texts = (await engine.messages(conv!.conversationId)).filter((m) => m.role === 'user').map((m) => m.content)
      expect(texts).toEqual(['question 1', 'question 2', 'question 3'])
      spoolTurn(db, turn(2))
      expect((await engine.drainSpool(db)).stored).toBe(1)
      expect(await engine.messages(conv!.conversationId)).toHaveLength(6)
    } finally {
      await engine.close()
    }
    expect(spoolWaiting(db)).toBe(false)
    expect(spoolStatus(db)).toEqual({ turns: 0, held: 0 })
  })

  it('two gateways starting at once on one spool store each turn once, in order', async () => {
    const db = fresh()
    const engine = await LcmEngine.open({ dbPath: db })
    await engine.close()
    for (let n = 0; n < 30; n++) spoolTurn(db, turn(n))
    const script = `
      const { LcmEngine } = require(${JSON.stringify(join(ROOT, 'index.js'))})
      ;(async () => {
        const e = await LcmEngine.open({ dbPath: process.argv[1] })
        const r = await e.drainSpool(process.argv[1])
        await e.close()
        console.log(JSON.stringify(r))
      })()`
    const gateway = () =>
      new Promise<{ stored: number; busy: boolean }>((resolve, reject) => {
        const child = spawn(process.execPath, ['-e', script, db], { stdio: ['ignore', 'pipe', 'inherit'] })
        let out = ''
        child.stdout.on('data', (d) => (out += d))
        child.on('exit', (code) => (code === 0 ? resolve(JSON.parse(out)) : reject(new Error(`exit ${code}`))))
      })
    const reports = await Promise.all([gateway(), gateway()])
    // One drainer at a time: each turn stored by exactly one of them (a second drain of the
    // same turns would count them again, as duplicates).
    expect(reports.reduce((n, r) => n + r.stored, 0), JSON.stringify(reports)).toBe(30)
    const reader = await LcmEngine.open({ dbPath: db })
    try {
      expect(spoolWaiting(db)).toBe(false)
      const conv = await reader.findConversation({ sessionKey: 'agent:main:main' })
      const texts = (await reader.messages(conv!.conversationId, { limit: 1000 })).filter((m) => m.role === 'user').map((m) => m.content)
      expect(texts).toEqual(Array.from({ length: 30 }, (_, n) => `question ${n}`))
    } finally {
      await reader.close()
    }
  })

  it('refuses what is no turn, and names a location it cannot write', () => {
    const db = fresh()
    expect(() => spoolTurn(db, { messages: [] } as never)).toThrow(expect.objectContaining({ code: 'E_INVALID_INPUT' }))
    const blocker = join(db, '..', 'blocker')
    writeFileSync(blocker, '')
    const where = join(blocker, 'lcm.db')
    expect(() => spoolTurn(where, turn(1))).toThrow(expect.objectContaining({ code: 'E_IO', message: expect.stringContaining('blocker') }))
    expect(spoolStatus(where).problem).toMatch(/blocker/)
  })

  it('a lock it cannot read ages by its file time: shown, named by doctor, then taken over', async () => {
    const db = fresh()
    const lock = `${db}.lcm-native-pending.jsonl.lock`
    spoolTurn(db, turn(1))
    // A directory at the lock path (before: no lock shown, and every drain busy for ever).
    mkdirSync(lock)
    expect(spoolStatus(db).lock).toMatchObject({ pid: null, stale: null, unreadable: expect.stringContaining('directory') })
    const engine = await LcmEngine.open({ dbPath: db })
    try {
      const run = (...args: string[]) => spawnSync(process.execPath, [join(ROOT, 'bin/lcm-native.cjs'), ...args], { encoding: 'utf8' })
      const doctor = run('doctor', '--db', db)
      expect(doctor.stdout, doctor.stderr).toMatch(/drain lock that this process cannot read \(it is a directory/)
      expect(doctor.stdout).toMatch(/cannot be read: it is a directory/)
      expect(await engine.drainSpool(db)).toMatchObject({ stored: 0, busy: true })
      const twoHoursAgo = new Date(Date.now() - 2 * 3600_000)
      utimesSync(lock, twoHoursAgo, twoHoursAgo)
      expect(spoolStatus(db).lock?.stale).toMatch(/directory.*not renewed for \d+ s/)
      const drained = await engine.drainSpool(db)
      expect(drained).toMatchObject({ stored: 1, busy: false, tookOver: expect.stringContaining('directory') })
    } finally {
      await engine.close()
    }
    expect(existsSync(lock)).toBe(false)
  })

  it('doctor reports spooled turns, their age, turns set aside and a stale lock', async () => {
    const db = fresh()
    const engine = await LcmEngine.open({ dbPath: db })
    await engine.close()
    spoolTurn(db, turn(1))
    spoolTurn(db, turn(2))
    writeFileSync(`${db}.lcm-native-held.jsonl`, `${JSON.stringify({ ...turn(9), attempts: 3, error: 'E_INVALID_INPUT: no' })}\n`)
    // A lock that names no process (before, it kept every gateway from draining, for ever).
    writeFileSync(`${db}.lcm-native-pending.jsonl.lock`, JSON.stringify({ pid: 0, host: hostname() }))
    const run = (...args: string[]) => spawnSync(process.execPath, [join(ROOT, 'bin/lcm-native.cjs'), ...args], { encoding: 'utf8' })
    const json = run('doctor', '--db', db, '--json')
    expect(json.status, json.stderr).toBe(0)
    const report = JSON.parse(json.stdout)
    expect(report.spool).toMatchObject({ turns: 2, held: 1, lock: { pid: 0, stale: expect.stringContaining('names no process') } })
    expect(report.advice.map((a: { problem: string }) => a.problem).join('\n')).toMatch(/2 turns spooled[\s\S]*1 spooled turn failed every try[\s\S]*drain lock is stale/)
    const text = run('doctor', '--db', db)
    expect(text.stdout).toMatch(/spool: 2 turns waiting \(the oldest for \d+ min\), 1 set aside, drain lock held by pid 0 on .* \(stale: it names no process/)
    // An unwritable spool directory is named (root writes anyway, and Windows has no modes for
    // a directory: checked only where it binds).
    const ro = join(db, '..')
    chmodSync(ro, 0o500)
    try {
      const status = spoolStatus(db)
      if (typeof process.getuid === 'function' && process.getuid() !== 0) expect(status.problem).toMatch(/cannot be written/)
    } finally {
      chmodSync(ro, 0o700)
    }
  })
})
