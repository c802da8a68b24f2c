// The OpenClaw plugin on PostgreSQL (dbUrl): a schema per agent, and a server that goes away
// mid-run — turns are spooled (never failing the host's turn), a compaction that loses its
// connection leaves nothing half-written, and once the server is back every turn is stored
// once. The test runs its own throwaway cluster (it stops it on purpose), where `npm test`
// has one (LCM_TEST_DATABASE_URL says PostgreSQL can be started here).
import { spawnSync } from 'node:child_process'
import { existsSync, readFileSync, readdirSync } from 'node:fs'
import { join } from 'node:path'

import { afterAll, beforeAll, describe, expect, it } from 'vitest'

import { LcmEngine } from '../index.js'
import { tempDir } from './helpers'
import { fakeHost, turn } from './plugin-host'

// eslint-disable-next-line @typescript-eslint/no-require-imports
const { startCluster } = require('../scripts/pg-test-server.cjs') as {
  startCluster: () => { url: string; stop: () => void; halt: () => void; resume: () => void }
}

const available = Boolean(process.env.LCM_TEST_DATABASE_URL)

describe.skipIf(!available)('the plugin on PostgreSQL', () => {
  let cluster: ReturnType<typeof startCluster>
  const stateDir = tempDir('lcm-pg-state-')
  const previousState = process.env.OPENCLAW_STATE_DIR
  beforeAll(() => {
    cluster = startCluster()
    process.env.OPENCLAW_STATE_DIR = stateDir
  })
  afterAll(() => {
    cluster?.stop()
    if (previousState === undefined) delete process.env.OPENCLAW_STATE_DIR
    else process.env.OPENCLAW_STATE_DIR = previousState
  })

  /** The cluster's URL with a password (the server trusts the socket; it must never be shown). */
  const url = (schema: string) => `${cluster.url.replace('postgres://lcm@', 'postgres://lcm:s3cret-pw@')}?schema=${schema}`

  async function stored(schema: string, sessionKey: string) {
    const engine = await LcmEngine.open({ dbUrl: url(schema), readOnly: true })
    try {
      const c = await engine.findConversation({ sessionKey })
      return c ? await engine.messages(c.conversationId, { limit: 1000 }) : []
    } finally {
      await engine.close()
    }
  }

  it('keeps each agent in its own schema, spools while the server is down and stores every turn once when it is back', async () => {
    let haltDuringSummary = false
    const host = fakeHost({ dbUrl: url('team'), databaseScope: 'agent', freshTailCount: 2, leafChunkTokens: 600 }, async (p) => {
      if (haltDuringSummary) {
        haltDuringSummary = false
        cluster.halt()
      }
      return { text: `summary of ${p.messages[0].content.length} chars\nExpand for details about: the turns`, stopReason: 'stop', provider: 'fake', model: 'fake-model' }
    })
    const main = { sessionId: 'm', sessionKey: 'agent:main:main' }
    const ops = { sessionId: 'o', sessionKey: 'agent:ops:main' }
    for (let i = 1; i <= 6; i++) {
      expect(await host.engine().commitTurn({ ...main, advancementKey: `m${i}`, messages: turn(i, 60) })).toEqual({ status: 'committed' })
    }
    expect(await host.engine().commitTurn({ ...ops, advancementKey: 'o1', messages: turn(1) })).toEqual({ status: 'committed' })
    expect(await stored('team_main', main.sessionKey)).toHaveLength(12)
    expect(await stored('team_ops', ops.sessionKey)).toHaveLength(2)
    expect(await stored('team_main', ops.sessionKey)).toHaveLength(0)

    // A compaction whose server goes away while the summarizer runs: reported, nothing of it
    // written.
    haltDuringSummary = true
    const r = await host.engine().compact({ ...main, tokenBudget: 1000, force: true })
    expect(haltDuringSummary).toBe(false)
    // The host goes on with its turn (the plugin never fails one); the reason says why.
    expect(r).toMatchObject({ ok: true, compacted: false })
    expect(r.reason).toMatch(/compaction failed \(cannot connect/)
    expect(host.logs.some((l) => l.level === 'warn' && l.message.includes('compact failed (E_CONNECTION)'))).toBe(true)

    // The server is gone: turns are taken (spooled), the host's own messages are assembled.
    expect(await host.engine().commitTurn({ ...main, advancementKey: 'm7', messages: turn(7) })).toEqual({ status: 'committed' })
    expect(await host.engine().commitTurn({ ...main, advancementKey: 'm8', messages: turn(8) })).toEqual({ status: 'committed' })
    const own = turn(9)
    expect((await host.engine().assemble({ ...main, messages: own, tokenBudget: 50_000 })).messages).toBe(own)
    // A long session's own messages are more than the window: the newest that fit (found in
    // the real host, where passing them all made the model refuse the turn).
    const long = Array.from({ length: 30 }, (_, i) => turn(100 + i, 400)).flat()
    const fitted = await host.engine().assemble({ ...main, messages: long, tokenBudget: 5_000 })
    expect(fitted.messages.length).toBeGreaterThan(0)
    expect(fitted.messages.length).toBeLessThan(long.length)
    expect(fitted.estimatedTokens).toBeLessThanOrEqual(5_000)
    expect(fitted.messages.at(-1)).toBe(long.at(-1))
    const spoolDir = join(stateDir, 'lcm-native-spool')
    const spooled = readdirSync(spoolDir).filter((n) => n.includes('lcm-native-pending'))
    // (A drain that could not finish keeps its taken file, `.draining`, in line.)
    expect(spooled.length).toBeGreaterThan(0)
    for (const name of spooled) {
      expect(name).toMatch(/team_main/)
      expect(name).not.toMatch(/s3cret/)
    }
    expect(host.logs.some((l) => l.level === 'warn' && l.message.includes('kept in the spool file') && l.message.includes('E_CONNECTION'))).toBe(true)

    // Back: the next turn drains the spool first; replays are duplicates; nothing twice.
    cluster.resume()
    expect(await host.engine().commitTurn({ ...main, advancementKey: 'm9', messages: own })).toEqual({ status: 'committed' })
    expect(await host.engine().commitTurn({ ...main, advancementKey: 'm7', messages: turn(7) })).toEqual({ status: 'duplicate' })
    const messages = await stored('team_main', main.sessionKey)
    expect(messages).toHaveLength(18)
    const questions = messages.filter((m) => m.role === 'user').map((m) => /question (\d+)/.exec(JSON.stringify(m.content))?.[1])
    expect(questions).toEqual(['1', '2', '3', '4', '5', '6', '7', '8', '9'])
    expect(readdirSync(spoolDir).filter((n) => n.includes('lcm-native-pending'))).toHaveLength(0)

    // The compaction runs now, on every stored turn.
    const again = await host.engine().compact({ ...main, tokenBudget: 1000, force: true })
    expect(again).toMatchObject({ ok: true, compacted: true })

    // A NUL character, which PostgreSQL's text cannot hold: the turn is stored all the same
    // (as the JSON text of its messages, where the NUL is an escape).
    const nul = [{ role: 'user', content: 'binary\u0000output', timestamp: Date.now() }]
    expect(await host.engine().commitTurn({ ...main, advancementKey: 'm10', messages: nul })).toEqual({ status: 'committed' })
    const last = (await stored('team_main', main.sessionKey)).at(-1)
    expect(JSON.stringify(last?.content)).toContain('binary\\\\u0000output')
    expect(existsSync(join(spoolDir))).toBe(true)
    expect(readdirSync(spoolDir).filter((n) => n.includes('lcm-native-pending'))).toHaveLength(0)

    // The password never reaches a log line.
    expect(host.logs.filter((l) => l.message.includes('s3cret'))).toEqual([])
  })
})

describe('the plugin’s PostgreSQL settings', () => {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { databaseFor, resolveSettings, shownDatabase } = require('../plugin/config.cjs') as {
    shownDatabase: (db: string) => string
    databaseFor: (s: unknown, agent: string) => string
    resolveSettings: (cfg: Record<string, unknown>, env: Record<string, string>) => { dbPath: string }
  }
  const base = 'postgres://lcm:pw@db.example:5433/agents'

  it('takes dbUrl or LCM_DATABASE_URL over a file, and refuses what is no PostgreSQL URL', () => {
    expect(resolveSettings({ dbUrl: base, dbPath: '/x/lcm.db' }, {}).dbPath).toBe(base)
    expect(resolveSettings({ dbPath: '/x/lcm.db' }, { LCM_DATABASE_URL: `${base}?schema=s` }).dbPath).toBe(`${base}?schema=s`)
    expect(resolveSettings({ dbPath: '/x/lcm.db' }, {}).dbPath).toBe('/x/lcm.db')
    expect(() => resolveSettings({ dbUrl: 'mysql://x/y' }, {})).toThrow(/dbUrl/)
    expect(() => resolveSettings({}, { LCM_DATABASE_URL: '/a/file.db' })).toThrow(/LCM_DATABASE_URL/)
  })

  it('shows a URL without any piece of its password, whatever the text (the engine’s cases)', () => {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const { hideUrlSecrets } = require('../plugin/config.cjs') as { hideUrlSecrets: (text: string) => string }
    const cases = JSON.parse(readFileSync(join(__dirname, '../src/pg/redact_cases.json'), 'utf8')) as Array<[string, string]>
    expect(cases.length).toBeGreaterThan(10)
    for (const [url, want] of cases) {
      expect(shownDatabase(url), url).toBe(want)
      expect(hideUrlSecrets(`cannot open ${url} (refused)`), url).toBe(`cannot open ${want} (refused)`)
    }
    expect(shownDatabase(`${base}?schema=s`)).toBe('postgres://lcm:***@db.example:5433/agents?schema=s')
  })

  it('never shows a password in a log line, a spool file name or the CLI, for malformed URLs either', async () => {
    const stateDir = tempDir('lcm-secret-state-')
    const previous = process.env.OPENCLAW_STATE_DIR
    process.env.OPENCLAW_STATE_DIR = stateDir
    try {
      const urls = [
        'postgres://u:hun@ter2@127.0.0.1:1/db',
        'postgres://u:hun/ter2@127.0.0.1:1/db',
        'postgres://127.0.0.1:1/db?password=hunter2',
        'postgres://u:hunter2@/db',
        'postgres://u:hunter2@127.0.0.1:1/db?password=hun&ter2',
        // No `@host` at all: what follows `user:` is no port, so it is the password.
        'postgres://lcm:hunter2',
        'postgres://lcm:hunter2/db',
      ]
      for (const [i, dbUrl] of urls.entries()) {
        const host = fakeHost({ dbUrl })
        const s = { sessionId: `sid-secret-${i}`, sessionKey: `agent:main:explicit:secret-${i}` }
        // The database cannot be opened: the turn is spooled, and the host goes on.
        expect(await host.engine().commitTurn({ ...s, advancementKey: 'k', messages: turn(1) })).toEqual({ status: 'committed' })
        const seen = host.logs.map((l) => l.message).join('\n')
        expect(seen, dbUrl).toMatch(/lcm-native/)
        expect(seen, dbUrl).not.toMatch(/hunter2|ter2/)
        const cli = spawnSync(process.execPath, [join(__dirname, '../bin/lcm-native.cjs'), 'stats', '--db', dbUrl], { encoding: 'utf8' })
        expect(cli.status, dbUrl).toBe(1)
        expect(cli.stderr, dbUrl).toMatch(/^lcm-native: E_/)
        expect(`${cli.stdout}${cli.stderr}`, dbUrl).not.toMatch(/hunter2|ter2/)
      }
      const names = readdirSync(join(stateDir, 'lcm-native-spool'))
      expect(names.length).toBeGreaterThan(0)
      expect(names.join('\n')).not.toMatch(/hunter2|ter2/)
      for (const n of names) expect(readFileSync(join(stateDir, 'lcm-native-spool', n), 'utf8')).not.toMatch(/hunter2|ter2/)
    } finally {
      if (previous === undefined) delete process.env.OPENCLAW_STATE_DIR
      else process.env.OPENCLAW_STATE_DIR = previous
    }
  })

  it('names the spool of each database apart, also when a query value holds an @', () => {
    const stateDir = tempDir('lcm-spool-names-')
    const previous = process.env.OPENCLAW_STATE_DIR
    process.env.OPENCLAW_STATE_DIR = stateDir
    try {
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      const { spoolBase } = require('../plugin/shared.cjs') as { spoolBase: (db: string) => string }
      const a = spoolBase('postgres://u:hunter2@host-a/db1?application_name=gw@b')
      const b = spoolBase('postgres://u:hunter2@host-b/db2?application_name=gw@b')
      expect(a).not.toBe(b)
      for (const n of [a, b]) expect(n).not.toMatch(/hunter2/)
      expect(a).toMatch(/host-a/)
      // A well-formed URL keeps the name an earlier version gave it (its spooled turns are found).
      expect(spoolBase('postgres://u:hunter2@host-a/db1?schema=s')).toBe(spoolBase('postgres://u:other@host-a/db1?schema=s'))
    } finally {
      if (previous === undefined) delete process.env.OPENCLAW_STATE_DIR
      else process.env.OPENCLAW_STATE_DIR = previous
    }
  })

  it('gives each agent a schema of its own with databaseScope "agent": one id, one schema', () => {
    const settings = (dbPath: string) => ({ ...resolveSettings({ dbPath, databaseScope: 'agent' }, {}) })
    expect(databaseFor(settings(base), 'main')).toBe(`${base}?schema=lcm_main`)
    expect(databaseFor(settings(`${base}?schema=team&application_name=gw`), 'ops')).toBe(`${base}?schema=team_ops&application_name=gw`)
    // An id that is no schema name is made one, with a hash so that two ids never meet (the
    // form an earlier version gave it, so that its schema stays its own).
    const [a, b] = [databaseFor(settings(base), 'Work-Bot'), databaseFor(settings(base), 'work_bot')]
    expect(a).toMatch(/\?schema=lcm_work_bot_[0-9a-f]{6}$/)
    expect(b).toBe(`${base}?schema=lcm_work_bot`)
    const schemaOf = (id: string) => new URL(databaseFor(settings(base), id)).searchParams.get('schema')!
    // Ids that a cut at 63 bytes, a crafted hash-like name or a changed character would merge.
    const long = (n: number) => 'a'.repeat(n)
    const crafted = schemaOf('Main').slice('lcm_'.length)
    const ids = [long(59), long(60), long(70), long(71), long(300), 'main', 'Main', crafted, 'main_0', 'a b', 'a_b', 'a/b', 'a\\b', 'a-b', 'A_B', 'x__y', 'x_', '_x']
    const schemas = ids.map(schemaOf)
    expect(new Set(schemas).size).toBe(ids.length)
    for (const s of schemas) expect(s).toMatch(/^[a-z_][a-z0-9_]{0,62}$/)
    expect(() => databaseFor(settings(`${base}?schema=${'s'.repeat(56)}`), 'Work-Bot')).toThrow(/too long/)
    expect(databaseFor({ ...settings(base), databaseScope: 'global' }, 'ops')).toBe(base)
  })
})
