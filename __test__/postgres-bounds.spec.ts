// Every PostgreSQL call is bounded by busyTimeoutMs, whatever the server does: a lock another
// session holds (E_BUSY), a killed connection (E_CONNECTION, then the next call works), a
// frozen server (SIGSTOP: E_CONNECTION within the bound, not when it resumes). The plugin
// spools the turn and assembles from the host's messages meanwhile. Runs its own throwaway
// cluster (it freezes it on purpose), where `npm test` has PostgreSQL.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

import { afterAll, beforeAll, describe, expect, it } from 'vitest'

import { type IngestMessage, LcmEngine } from '../index.js'
import { fakeHost, turn } from './plugin-host'

// eslint-disable-next-line @typescript-eslint/no-require-imports
const { startCluster } = require('../scripts/pg-test-server.cjs') as {
  startCluster: () => { url: string; dir: string; data: string; bin: string; stop: () => void }
}

const available = Boolean(process.env.LCM_TEST_DATABASE_URL)
const BUSY = 800
/** A turn as the engine takes it. */
const msgs = (n: number) => turn(n) as IngestMessage[]
/** What "within its deadline" allows: the bound, and a second for the rest. */
const WITHIN = BUSY + 1000

/** How long `p` takes to settle, and how (a value, or the error's code). */
async function timed(p: Promise<unknown>): Promise<{ ms: number; code: string }> {
  const started = performance.now()
  const code = await p.then(
    () => 'ok',
    (e: { code?: string }) => e?.code ?? 'no code',
  )
  return { ms: performance.now() - started, code }
}

describe.skipIf(!available)('PostgreSQL calls are bounded', () => {
  let cluster: ReturnType<typeof startCluster>
  const state = mkdtempSync(join(tmpdir(), 'lcm-pg-bounds-'))
  const previousState = process.env.OPENCLAW_STATE_DIR
  const psql = (sql: string) =>
    execFileSync(join(cluster.bin, 'psql'), ['-h', cluster.dir, '-U', 'lcm', '-d', 'postgres', '-Atc', sql], { encoding: 'utf8' }).trim()
  /** Every process of the cluster (the postmaster and its children), to freeze and thaw. */
  const processes = () => {
    const main = Number(readFileSync(join(cluster.data, 'postmaster.pid'), 'utf8').split('\n')[0])
    const children = execFileSync('pgrep', ['-P', String(main)], { encoding: 'utf8' }).split('\n').filter(Boolean).map(Number)
    return [main, ...children]
  }
  const signal = (sig: NodeJS.Signals) => {
    for (const pid of processes()) process.kill(pid, sig)
  }
  beforeAll(() => {
    cluster = startCluster()
    process.env.OPENCLAW_STATE_DIR = state
  })
  afterAll(async () => {
    try {
      signal('SIGCONT')
    } catch {
      // Not running.
    }
    await require('../plugin/shared.cjs').closeAll()
    cluster?.stop()
    rmSync(state, { recursive: true, force: true })
    if (previousState === undefined) delete process.env.OPENCLAW_STATE_DIR
    else process.env.OPENCLAW_STATE_DIR = previousState
  })

  it('a held write lock, a killed connection and a frozen server each answer within the bound', async () => {
    const url = `${cluster.url}?schema=bounds`
    const engine = await LcmEngine.open({ dbPath: url, busyTimeoutMs: BUSY })
    const target = { sessionKey: 'agent:main:main', sessionId: 's1' }
    const { conversationId } = await engine.ingest(target, msgs(1))
    // Another session holds the schema's write lock (a paused peer gateway).
    let holder: ChildProcess | undefined
    try {
      holder = spawn(join(cluster.bin, 'psql'), ['-h', cluster.dir, '-U', 'lcm', '-d', 'postgres', '-c', "SELECT pg_advisory_lock(hashtext('bounds:write'), 0); SELECT pg_sleep(60)"], { stdio: 'ignore' })
      const until = Date.now() + 10_000
      while (psql("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted") === '0' && Date.now() < until) await new Promise((r) => setTimeout(r, 50))
      const busy = await timed(engine.ingest(target, msgs(2)))
      expect(busy.code).toBe('E_BUSY')
      expect(busy.ms).toBeLessThan(WITHIN)
      // Reads do not wait for it.
      expect((await timed(engine.assemble(conversationId, { tokenBudget: 10_000 }))).code, 'assemble').toBe('ok')
    } finally {
      holder?.kill('SIGKILL')
      // Its backend sleeps on, holding the lock, until it is told the client went.
      psql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'psql' AND pid <> pg_backend_pid()")
    }
    // A killed connection: the call that meets it fails fast, the next one works.
    psql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'lcm-native'")
    const killed = await timed(engine.ingest(target, msgs(3)))
    expect(['ok', 'E_CONNECTION']).toContain(killed.code)
    expect(killed.ms).toBeLessThan(WITHIN)
    expect((await timed(engine.ingest(target, msgs(4)))).code, 'after the kill').toBe('ok')
    // A frozen server: every call gives up within the bound instead of when it resumes.
    signal('SIGSTOP')
    try {
      for (const [what, call] of [
        ['ingest', () => engine.ingest(target, msgs(5))],
        ['assemble', () => engine.assemble(conversationId, { tokenBudget: 10_000 })],
        ['grep', () => engine.grep(conversationId, { query: 'question' })],
        ['findConversation', () => engine.findConversation(target)],
      ] as const) {
        const r = await timed(call())
        expect(r.code, what).toBe('E_CONNECTION')
        expect(r.ms, what).toBeLessThan(WITHIN)
      }
    } finally {
      signal('SIGCONT')
    }
    // Back: the engine goes on.
    expect((await timed(engine.ingest(target, msgs(6)))).code, 'after the freeze').toBe('ok')
    await engine.close()
  })

  it('the plugin spools the turn and assembles from the host’s messages while the server is frozen', async () => {
    const host = fakeHost({ dbUrl: `${cluster.url}?schema=bounds_plugin`, busyTimeoutMs: BUSY })
    const s = { sessionId: 'sid-frozen', sessionKey: 'agent:main:explicit:frozen' }
    expect(await host.engine().commitTurn({ ...s, advancementKey: 'k1', messages: turn(1) })).toEqual({ status: 'committed' })
    signal('SIGSTOP')
    try {
      const started = performance.now()
      expect(await host.engine().commitTurn({ ...s, advancementKey: 'k2', messages: turn(2) })).toEqual({ status: 'committed' })
      const messages = [...turn(1), ...turn(2), ...turn(3)]
      const assembled = await host.engine().assemble({ ...s, messages, tokenBudget: 10_000 })
      expect(assembled.messages).toBe(messages)
      // Two calls, each within a few bounds (a store tries once, then spools).
      expect(performance.now() - started).toBeLessThan(4 * WITHIN)
    } finally {
      signal('SIGCONT')
    }
    // A drain the assemble started while the server was frozen ends; the next turn stores
    // every spooled one first.
    await require('../plugin/shared.cjs').settleInflight(30_000)
    expect(await host.engine().commitTurn({ ...s, advancementKey: 'k3', messages: turn(3) })).toEqual({ status: 'committed' })
    const engine = await LcmEngine.open({ dbPath: `${cluster.url}?schema=bounds_plugin`, readOnly: true })
    try {
      const conv = await engine.findConversation({ sessionKey: s.sessionKey })
      const texts = (await engine.messages(conv!.conversationId)).map((m) => JSON.stringify(m.content))
      expect(texts.map((t) => /question \d/.exec(t)?.[0]).filter(Boolean), host.logs.map((l) => l.message).join('\n')).toEqual(['question 1', 'question 2', 'question 3'])
    } finally {
      await engine.close()
    }
  })
})
