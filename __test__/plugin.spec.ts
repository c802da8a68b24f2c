// Contract tests of the OpenClaw plugin (plugin/) against a recording fake host: the calls
// OpenClaw 2026.9 makes, in its order and shapes, and what the plugin answers.
import { spawn, spawnSync } from 'node:child_process'
import { existsSync, readFileSync, readdirSync, utimesSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

import { afterAll, describe, expect, it, vi } from 'vitest'

import { LcmEngine, spoolStatus } from '../index.js'
import { ROOT, copyFixture, holdWriteLock, tempDir } from './helpers'
import { fakeHost, hostGoesOn, turn, type FakeHost } from './plugin-host'

// The plugin keeps one engine per file on globalThis; closed when the suite ends.
afterAll(async () => {
  await require('../plugin/shared.cjs').closeAll()
})

const session = (name: string) => ({ sessionId: `sid-${name}`, sessionKey: `agent:main:explicit:${name}`, sessionFile: `agent:main:explicit:${name}` })

async function readDb<T>(host: FakeHost, fn: (engine: LcmEngine) => Promise<T>): Promise<T> {
  const engine = await LcmEngine.open({ dbPath: host.dbPath, readOnly: true })
  try {
    return await fn(engine)
  } finally {
    await engine.close()
  }
}

describe('registration', () => {
  it('registers the engine and the recall tools without loading the addon or opening the database', () => {
    const script = `
      const plugin = require(${JSON.stringify(join(ROOT, 'plugin/index.cjs'))})
      const seen = { engines: [], tools: [] }
      plugin.register({ registrationMode: 'full', pluginConfig: { dbPath: '/nonexistent/dir/lcm.db' },
        logger: { info() {}, warn() {}, error(m) { seen.error = m } },
        registerContextEngine: (id) => seen.engines.push(id), registerTool: (t, o) => seen.tools.push(o.name) })
      seen.addonLoaded = Object.keys(require.cache).some((k) => k.endsWith('.node'))
      seen.id = plugin.id
      console.log(JSON.stringify(seen))`
    const out = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8' })
    expect(out.status, out.stderr).toBe(0)
    const seen = JSON.parse(out.stdout)
    expect(seen).toEqual({ engines: ['lcm-native'], tools: ['lcm_grep', 'lcm_describe', 'lcm_expand', 'lcm_expand_query'], addonLoaded: false, id: 'lcm-native' })
    expect(existsSync('/nonexistent/dir')).toBe(false)
  })

  it('declares what OpenClaw requires of an engine that owns its turns and compaction', () => {
    const engine = fakeHost().engine()
    expect(engine.info).toMatchObject({
      id: 'lcm-native',
      ownsCompaction: true,
      turnMaintenanceMode: 'background',
      transcriptSemantics: { currentTurnFence: 'before-current-turn-entry-v1', turnAdvancementIdempotency: 'atomic-idempotent-v1' },
    })
    for (const m of ['bootstrap', 'maintain', 'ingest', 'ingestBatch', 'afterTurn', 'commitTurn', 'assemble', 'compact', 'dispose'] as const) {
      expect(typeof engine[m]).toBe('function')
    }
  })

  it('the manifest lists every registered tool and the config schema every option the plugin reads', () => {
    const manifest = JSON.parse(readFileSync(join(ROOT, 'openclaw.plugin.json'), 'utf8'))
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'))
    expect(manifest).toMatchObject({ id: 'lcm-native', kind: 'context-engine', contracts: { tools: ['lcm_grep', 'lcm_describe', 'lcm_expand', 'lcm_expand_query'] } })
    // OpenClaw's tool profiles offer the recall tools to coding and messaging agents; the ones
    // that only read are safe to repeat after an interrupted turn (restart-safe turns keep them).
    for (const tool of manifest.contracts.tools) {
      expect(manifest.toolMetadata[tool].profiles).toEqual(['coding', 'messaging'])
      expect(manifest.toolMetadata[tool].replaySafe === true).toBe(tool !== 'lcm_expand_query')
    }
    expect(pkg.openclaw.extensions).toEqual(['./plugin/index.cjs'])
    expect(pkg.files).toEqual(expect.arrayContaining(['plugin/', 'openclaw.plugin.json']))
    const props = Object.keys(manifest.configSchema.properties)
    for (const key of ['dbPath', 'contextThreshold', 'freshTailCount', 'leafChunkTokens', 'leafMinFanout', 'condensedMinFanout', 'summaryModel', 'customInstructions', 'ignoreSessionPatterns', 'statelessSessionPatterns', 'databaseScope']) {
      expect(props).toContain(key)
    }
    // Every engine option the plugin passes on is in the schema, and the README lists them all.
    const { engineKeys } = require('../plugin/config.cjs')
    expect(engineKeys()).toContain('contextLowWater')
    for (const key of engineKeys()) expect(props).toContain(key)
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8')
    const table = readme.slice(readme.indexOf('### Plugin configuration'), readme.indexOf('### Switching from lossless-claw'))
    for (const key of props) expect(table).toContain(`| \`${key}\` |`)
  })

  it('the manifest and the README table are what scripts/options.cjs writes from the engine options', () => {
    const run = spawnSync(process.execPath, [join(ROOT, 'scripts/options.cjs'), '--check'], { encoding: 'utf8' })
    expect(run.stderr).toBe('')
    expect(run.status).toBe(0)
    // The check notices a default the manifest restates differently.
    const { withEngineOptions, withTable } = require('../scripts/options.cjs')
    const manifest = JSON.parse(readFileSync(join(ROOT, 'openclaw.plugin.json'), 'utf8'))
    const schema = { ...require('../index.js').engineOptionSchema() }
    schema.leafTargetTokens = { ...schema.leafTargetTokens, default: 999 }
    const drifted = withEngineOptions(manifest, schema)
    expect(drifted.configSchema.properties.leafTargetTokens.default).toBe(999)
    expect(JSON.stringify(drifted)).not.toBe(JSON.stringify(manifest))
    // The engine's own values: the default Config resolves, the description naming the variable.
    const leaf = manifest.configSchema.properties.leafTargetTokens
    expect(leaf).toMatchObject({ type: 'integer', minimum: 1, default: 1200 })
    expect(leaf.description).toContain('LCM_LEAF_TARGET_TOKENS')
    expect(manifest.uiHints.leafTargetTokens.help).toBe(leaf.description)
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8')
    expect(withTable(readme, manifest)).toBe(readme)
    // The plugin's test of a database URL (registration does not load the addon) is the addon's.
    const { isDatabaseUrl } = require('../plugin/config.cjs')
    const addon = require('../index.js')
    for (const db of ['postgres://u@h/db', 'postgresql://u@h/db', 'POSTGRES://u@h/db', 'PostgreSQL://x', 'postgres:/x', 'postgres', '/tmp/lcm.db', './postgres://x', '', ' postgres://x']) {
      expect([db, isDatabaseUrl(db)]).toEqual([db, addon.isDatabaseUrl(db)])
    }
  })

  it("the plugin's own options take their defaults and bounds from the manifest", () => {
    const { resolveSettings } = require('../plugin/config.cjs')
    const settings = resolveSettings({ dbPath: '/x/lcm.db' }, {})
    expect(settings).toMatchObject({
      enabled: true,
      databaseScope: 'global',
      skipStatelessSessions: true,
      recallScope: 'session',
      recallMaxTokens: 4000,
      newSessionRetainDepth: 2,
      defaultTokenBudget: 128000,
    })
    for (const [key, value] of Object.entries(settings)) expect([key, value]).not.toEqual([key, undefined])
    // The bound is the manifest's minimum; the words its enum.
    expect(() => resolveSettings({ recallMaxTokens: 199 }, {})).toThrow(/recallMaxTokens.*>= 200/)
    expect(resolveSettings({ recallMaxTokens: 200 }, {}).recallMaxTokens).toBe(200)
    expect(() => resolveSettings({ recallScope: 'everything' }, {})).toThrow(/"session", "all"/)
  })

  it('an invalid option is one clear message naming it, and turns go to the built-in engine', () => {
    for (const [config, option] of [
      [{ databaseScope: 'planet' }, 'databaseScope'],
      [{ freshTailCunt: 3 }, 'freshTailCunt'],
      [{ ignoreSessionPatterns: 'agent:*' }, 'ignoreSessionPatterns'],
    ] as const) {
      const host = fakeHost(config)
      const errors = host.logs.filter((l) => l.level === 'error')
      expect(errors).toHaveLength(1)
      expect(errors[0].message).toContain(`\`${option}\``)
      expect(() => host.engine()).toThrow(option)
    }
  })

  it('an engine option the addon refuses is reported once, and no lifecycle method throws', async () => {
    const host = fakeHost({ freshTailCount: -5 })
    const engine = host.engine()
    const s = session('bad-option')
    const one = turn(1)
    const assembled = await engine.assemble({ ...s, messages: one })
    expect(assembled.messages).toBe(one)
    const maintained = await engine.maintain(s)
    expect(maintained.changed).toBe(false)
    const compacted = await engine.compact({ ...s, tokenBudget: 1000 })
    expect(compacted).toMatchObject({ ok: true, compacted: false })
    expect(compacted.reason).toMatch(/^nothing to compact: lcm-native compaction failed/)
    expect(hostGoesOn(compacted)).toBe(true)
    const errors = host.logs.filter((l) => l.level === 'error' && l.message.includes('freshTailCount'))
    expect(errors).toHaveLength(1)
  })
})

describe('turns', () => {
  it('commitTurn stores a turn once per advancement key, also across engine instances and restarts', async () => {
    const host = fakeHost()
    const s = session('commit')
    expect(await host.engine().commitTurn({ ...s, advancementKey: 'turn-1', messages: turn(1) })).toEqual({ status: 'committed' })
    // A replay after a restart: a new engine instance, the same key.
    expect(await host.engine().commitTurn({ ...s, advancementKey: 'turn-1', messages: turn(1) })).toEqual({ status: 'duplicate' })
    expect(await host.engine().commitTurn({ ...s, advancementKey: 'turn-2', messages: turn(2) })).toEqual({ status: 'committed' })
    const stored = await readDb(host, async (e) => {
      const conv = await e.findConversation({ sessionKey: s.sessionKey })
      return { conv, messages: await e.messages(conv!.conversationId) }
    })
    expect(stored.conv).toMatchObject({ sessionId: s.sessionId, sessionKey: s.sessionKey, messageCount: 4 })
    expect(stored.messages.map((m) => m.role)).toEqual(['user', 'assistant', 'user', 'assistant'])
    expect(stored.messages[1].content).toEqual([{ type: 'text', text: 'answer 1 mentions zebra-1' }])
  })

  it('stores every reply of a provider whose response ids restart (a local server after a restart), and a replayed turn once', async () => {
    const host = fakeHost()
    const s = session('reused-ids')
    // The provider's ids start over at 1 every third turn; texts differ, then repeat exactly.
    const texts = ['sure', 'done', 'ok', 'sure', 'done', 'ok', 'fixed it']
    for (const [i, text] of texts.entries()) {
      const messages = [
        { role: 'user', content: `step ${i}`, timestamp: 1_700_000_000_000 + i },
        { role: 'assistant', responseId: `chatcmpl-${(i % 3) + 1}`, content: [{ type: 'text', text }], timestamp: 1_700_000_000_000 + i },
      ]
      expect(await host.engine().commitTurn({ ...s, advancementKey: `t${i}`, messages })).toEqual({ status: 'committed' })
      if (i === 4) expect(await host.engine().commitTurn({ ...s, advancementKey: `t${i}`, messages })).toEqual({ status: 'duplicate' })
    }
    const stored = await readDb(host, async (e) => {
      const conv = await e.findConversation({ sessionKey: s.sessionKey })
      return e.messages(conv!.conversationId)
    })
    expect(stored.filter((m) => m.role === 'assistant').map((m) => (m.content as Array<{ text: string }>)[0].text)).toEqual(texts)
    expect(stored).toHaveLength(texts.length * 2)
  })

  it("keeps whatever a turn holds for the model: unknown kinds, half an emoji; leaves out the host's custom entries as lossless-claw 1.x does", async () => {
    const host = fakeHost()
    const s = session('odd')
    const messages = [
      { role: 'user', content: 'half an emoji \uD83D here', timestamp: Date.now() },
      { role: 'custom', customType: 'openclaw.runtime-context', content: 'Runtime: agent=main', display: false, timestamp: Date.now() },
      { role: 'custom', customType: 'memory-note', content: 'remember port 8080', display: true, timestamp: Date.now() },
      { role: 'hologram', beams: 3, timestamp: Date.now() },
      { role: 'assistant', content: [{ type: 'text', text: 'done' }], timestamp: Date.now() },
    ]
    expect(await host.engine().commitTurn({ ...s, advancementKey: 'odd-1', messages })).toEqual({ status: 'committed' })
    const stored = await readDb(host, async (e) => e.messages((await e.findConversation({ sessionKey: s.sessionKey }))!.conversationId))
    expect(stored.map((m) => m.content)).toEqual([
      'half an emoji \uFFFD here',
      '{"role":"hologram","beams":3,"timestamp":' + (messages[3] as { timestamp: number }).timestamp + '}',
      [{ type: 'text', text: 'done' }],
    ])
  })

  it('heartbeat turns and ignored sessions are not stored; stateless sessions read but never write', async () => {
    const host = fakeHost({ ignoreSessionPatterns: ['agent:*:cron:**'], statelessSessionPatterns: ['agent:*:peek:*'] })
    const engine = host.engine()
    const beat = [
      { role: 'user', content: 'Read heartbeat.md and reply HEARTBEAT_OK if nothing needs attention', timestamp: Date.now() },
      { role: 'assistant', content: [{ type: 'text', text: 'HEARTBEAT_OK' }], timestamp: Date.now() },
    ]
    const s = session('beats')
    await engine.commitTurn({ ...s, advancementKey: 'b1', messages: beat })
    await engine.commitTurn({ ...s, advancementKey: 'b2', messages: turn(1), isHeartbeat: true })
    const cron = { sessionId: 'c', sessionKey: 'agent:main:cron:nightly:run-7' }
    expect(await engine.commitTurn({ ...cron, advancementKey: 'c1', messages: turn(1) })).toEqual({ status: 'committed' })
    const five = turn(5)
    const passed = await engine.assemble({ ...cron, messages: five })
    expect(passed.messages).toBe(five)
    const peek = { sessionId: 'p', sessionKey: 'agent:main:peek:x' }
    await engine.commitTurn({ ...peek, advancementKey: 'p1', messages: turn(1) })
    await engine.assemble({ ...peek, messages: turn(2) })
    const conversations = await readDb(host, (e) => e.conversations())
    expect(conversations).toEqual([])
  })
})

describe("OpenClaw's internal runs", () => {
  it('the hidden fork of a memory flush is never stored, and gets the newest of its messages within the budget', async () => {
    const host = fakeHost()
    const engine = host.engine()
    const flush = { sessionId: 'f', sessionKey: 'agent:main:internal-session-effects:0865cebf-33df-4f3a-86ba-8c06bbca8098-771d0645dcca8635' }
    // The forked transcript: 30 turns, one of them with a tool call and its result.
    const history = Array.from({ length: 30 }, (_, i) => turn(i, 60)).flat()
    history.splice(40, 0,
      { role: 'assistant', content: [{ type: 'toolCall', id: 't1', name: 'bash', arguments: { command: 'ls' } }], timestamp: Date.now() },
      { role: 'toolResult', toolCallId: 't1', toolName: 'bash', content: [{ type: 'text', text: 'a b c' }], timestamp: Date.now() })
    const r = await engine.assemble({ ...flush, messages: history, tokenBudget: 1500 })
    expect(r.estimatedTokens).toBeLessThanOrEqual(1500)
    expect(r.messages.length).toBeGreaterThan(2)
    expect(r.messages.length).toBeLessThan(history.length)
    expect(r.messages).toEqual(history.slice(history.length - r.messages.length))
    expect((r.messages[0] as { role: string }).role).not.toBe('toolResult')
    // Within a larger budget, all of it.
    const all = await engine.assemble({ ...flush, messages: history, tokenBudget: 1_000_000 })
    expect(all.messages).toEqual(history)
    await engine.commitTurn({ ...flush, advancementKey: 'f1', messages: turn(99) })
    expect(await engine.compact({ ...flush, tokenBudget: 1000, force: true, compactionTarget: 'budget' })).toMatchObject({ ok: true, compacted: false })
    expect(await readDb(host, (e) => e.conversations())).toEqual([])
  })

  it('the newest messages within a budget never begin with a result whose call was left out', () => {
    const { newestWithin } = require('../plugin/messages.cjs')
    const size = () => 10
    const m = [{ role: 'user' }, { role: 'assistant' }, { role: 'toolResult' }, { role: 'toolResult' }, { role: 'assistant' }]
    expect(newestWithin(m, 30, size)).toEqual({ messages: m.slice(4), estimatedTokens: 10 })
    expect(newestWithin(m, 40, size)).toEqual({ messages: m.slice(1), estimatedTokens: 40 })
    // The newest message always, even over the budget.
    expect(newestWithin(m, 5, size)).toEqual({ messages: m.slice(4), estimatedTokens: 10 })
    expect(newestWithin([], 5, size)).toEqual({ messages: [], estimatedTokens: 0 })
  })
})

describe('hosts that hand over messages with ingest, ingestBatch or afterTurn', () => {
  it('stores them, imports the history before the turn once, and skips heartbeats', async () => {
    const host = fakeHost()
    const engine = host.engine()
    const a = session('ingest-one')
    const [q, r] = turn(1)
    expect(await engine.ingest({ ...a, message: q })).toEqual({ ingested: true })
    expect(await engine.ingest({ ...a, message: r, isHeartbeat: true })).toEqual({ ingested: false })
    expect(await engine.ingestBatch({ ...a, messages: turn(2) })).toEqual({ ingestedCount: 2 })
    const b = session('after-turn')
    const history = [...turn(1), ...turn(2)]
    await engine.afterTurn({ ...b, messages: [...history, ...turn(3)], prePromptMessageCount: 4, tokenBudget: 50_000 })
    await engine.afterTurn({ ...b, messages: [...history, ...turn(3), ...turn(4)], prePromptMessageCount: 6, tokenBudget: 50_000 })
    const counts = await readDb(host, async (e) => {
      const one = await e.findConversation({ sessionKey: a.sessionKey })
      const two = await e.findConversation({ sessionKey: b.sessionKey })
      return [one?.messageCount, two?.messageCount]
    })
    expect(counts).toEqual([3, 8])
  })
})

describe('a plugin instance retired (config reload, disable, stop)', () => {
  const shared = () => require('../plugin/shared.cjs').shared()
  const orderIdStored = async (dbPath: string) => {
    const e = await LcmEngine.open({ dbPath, readOnly: true })
    try {
      const conv = await e.findConversation({ sessionKey: 'agent:main:explicit:reload' })
      const texts = (await e.messages(conv!.conversationId)).map((m) => JSON.stringify(m.content))
      return { raw: texts.some((t) => t.includes('ORDER-123456')), redacted: texts.some((t) => t.includes('[REDACTED]')) }
    } finally {
      await e.close()
    }
  }
  const s = session('reload')

  it('dispose stops background maintenance and closes the databases within the host budget; the next registration opens them with its own options', async () => {
    // A model that never answers: the pass waits on it when the instance is retired.
    const a = fakeHost({ freshTailCount: 4, summaryTimeoutMs: 120_000 }, () => new Promise(() => {}), { lifecycle: true })
    for (let i = 1; i <= 16; i++) await a.engine().commitTurn({ ...s, advancementKey: `r${i}`, messages: turn(i) })
    const maintenance = a.engine().maintain({ ...s, runtimeContext: { tokenBudget: 1500 } })
    await vi.waitFor(() => expect(a.llmCalls.length).toBeGreaterThan(0), { timeout: 10_000 })
    const started = Date.now()
    await a.dispose()
    // OpenClaw's cleanup budget for a plugin instance is 5 s.
    expect(Date.now() - started).toBeLessThan(5000)
    expect(shared().engines.size).toBe(0)
    expect(a.logs.some((l) => /plugin instance disposed: \d+ database\(s\) closed/.test(l.message))).toBe(true)
    // The cut-off pass wrote nothing; maintenance reports instead of throwing.
    expect((await maintenance).reason).toMatch(/maintenance failed|stopped|nothing/)
    expect(await readDb(a, async (e) => (await e.summaries(1)).length)).toBe(0)
    // The successor, with another config: it applies from its first call.
    const b = fakeHost({ dbPath: a.dbPath, freshTailCount: 4, redactPatterns: ['ORDER-[0-9]{6}'] })
    await b.engine().commitTurn({ ...s, advancementKey: 'r17', messages: [{ role: 'user', content: 'ship ORDER-123456 today', timestamp: Date.now() }] })
    expect(await orderIdStored(a.dbPath)).toEqual({ raw: false, redacted: true })
    expect(await readDb(a, async (e) => (await e.verify()).ok)).toBe(true)
  }, 30_000)

  it('without a dispose (an older host), changed options still open the database anew', async () => {
    const a = fakeHost({ freshTailCount: 4 })
    await a.engine().commitTurn({ ...s, advancementKey: 'o1', messages: turn(1) })
    const b = fakeHost({ dbPath: a.dbPath, freshTailCount: 4, redactPatterns: ['ORDER-[0-9]{6}'] })
    await b.engine().commitTurn({ ...s, advancementKey: 'o2', messages: [{ role: 'user', content: 'ship ORDER-123456 today', timestamp: Date.now() }] })
    expect(await orderIdStored(a.dbPath)).toEqual({ raw: false, redacted: true })
  })
})

describe('the summary model', () => {
  it('summaryModel is asked for; when the host refuses the override, the session model is used (logged once)', async () => {
    const seen: (string | undefined)[] = []
    const host = fakeHost({ summaryModel: 'other/model', freshTailCount: 4 }, async (p) => {
      seen.push(p.model)
      if (p.model) throw Object.assign(new Error('model override is not allowed for this plugin'), { name: 'LlmCompleteError', code: 'LLM_COMPLETION_NOT_AUTHORIZED' })
      return { text: 'summary by the session model' }
    })
    const s = session('model')
    for (let i = 1; i <= 12; i++) await host.engine().commitTurn({ ...s, advancementKey: `m${i}`, messages: turn(i) })
    const r = await host.engine().compact({ ...s, tokenBudget: 1500, force: true })
    expect(r.compacted).toBe(true)
    expect(seen[0]).toBe('other/model')
    expect(seen.slice(2).every((m) => m === undefined)).toBe(true)
    expect(host.logs.filter((l) => l.message.includes('allowModelOverride'))).toHaveLength(1)
  })

  it('with no llm.complete at all, the offline summarizer writes summaries (logged once)', async () => {
    const plugin = require('../plugin/index.cjs')
    const dbPath = join(tempDir('lcm-plugin-'), 'lcm.db')
    let factory: ((ctx: unknown) => any) | undefined
    const logs: string[] = []
    plugin.register({
      // A toy budget (1,500): at the default low-water mark (225 tokens) the sweep reaches a
      // message too short to summarise, whose summary is then its deterministic copy.
      pluginConfig: { dbPath, freshTailCount: 4, contextLowWater: 0.3 },
      logger: { info: () => {}, warn: (m: string) => logs.push(m), error: (m: string) => logs.push(m) },
      registerContextEngine: (_id: string, f: (ctx: unknown) => any) => (factory = f),
    })
    const s = session('offline')
    for (let i = 1; i <= 12; i++) await factory!({}).commitTurn({ ...s, advancementKey: `o${i}`, messages: turn(i) })
    const first = await factory!({}).compact({ ...s, tokenBudget: 1500, force: true })
    expect(first.compacted, JSON.stringify(first)).toBe(true)
    expect((await factory!({}).compact({ ...s, tokenBudget: 1000, force: true })).ok).toBe(true)
    expect(logs.filter((m) => m.includes('offline summarizer'))).toHaveLength(1)
    const engine = await LcmEngine.open({ dbPath, readOnly: true })
    const summaries = await engine.summaries(1)
    await engine.close()
    expect(summaries.length).toBeGreaterThan(0)
    expect(summaries.every((x) => x.model !== 'lcm-native/fallback'), JSON.stringify(summaries.map((x) => [x.depth, x.model, x.tokenCount, x.kind]))).toBe(true)
  })
})

describe('assemble', () => {
  it('returns the host messages unchanged for a session LCM does not know, and imports a history once', async () => {
    const host = fakeHost()
    const s = session('imported')
    const engine = host.engine()
    expect(await engine.assemble({ ...s, messages: [] })).toEqual({ messages: [], estimatedTokens: expect.any(Number), systemPromptAddition: expect.stringMatching(/^## Conversation memory/) })
    // A session that began on OpenClaw's built-in engine: its history arrives with assemble.
    const history = [...turn(1), ...turn(2)]
    const first = await engine.assemble({ ...s, messages: history, tokenBudget: 50_000 })
    expect(first.messages.map((m) => m.role)).toEqual(['user', 'assistant', 'user', 'assistant'])
    await host.engine().assemble({ ...s, messages: history, tokenBudget: 50_000 })
    await host.engine().commitTurn({ ...s, advancementKey: 't3', messages: turn(3) })
    const stored = await readDb(host, async (e) => e.messages((await e.findConversation({ sessionKey: s.sessionKey }))!.conversationId))
    expect(stored.map((m) => (typeof m.content === 'string' ? m.content.slice(0, 10) : m.role))).toEqual([
      'question 1',
      'assistant',
      'question 2',
      'assistant',
      'question 3',
      'assistant',
    ])
  })

  it('presents summaries within the budget, with a system prompt addition that explains them and the tools', async () => {
    const host = fakeHost({ freshTailCount: 4, leafChunkTokens: 600, contextThreshold: 0.5 })
    const s = session('summaries')
    for (let i = 1; i <= 12; i++) {
      await host.engine().commitTurn({ ...s, advancementKey: `k${i}`, messages: turn(i) })
      await host.engine().maintain({ ...s, runtimeContext: { tokenBudget: 3000 } })
    }
    expect(host.llmCalls.length).toBeGreaterThan(0)
    // The summarizer is told the transcript is data, not instructions.
    expect(host.llmCalls[0].systemPrompt).toMatch(/UNTRUSTED DATA/)
    expect(host.llmCalls[0].purpose).toBe('lcm-native compaction summary')
    const out = await host.engine().assemble({ ...s, messages: [], tokenBudget: 3000, availableTools: new Set(['lcm_grep', 'read']) })
    expect(out.estimatedTokens).toBeLessThanOrEqual(3000)
    expect(out.messages[0].content).toMatch(/^<summary id="sum_[0-9a-f]{16}"/)
    expect(out.systemPromptAddition).toMatch(/<summary/)
    expect(out.systemPromptAddition).toMatch(/lcm_grep/)
    const noTools = await host.engine().assemble({ ...s, messages: [], tokenBudget: 3000, availableTools: new Set(['read']) })
    expect(noTools.systemPromptAddition).not.toMatch(/lcm_grep/)
    const summaries = await readDb(host, async (e) => e.summaries((await e.findConversation({ sessionKey: s.sessionKey }))!.conversationId))
    expect(summaries[0].content).toMatch(/^FAKE summary/)
  })
})

describe('the prompt cache', () => {
  it("hands the previous turn back as OpenClaw gave it: the user's time (which the host stamps), the sender, the reply's model", async () => {
    const host = fakeHost()
    const s = session('stamped')
    const sender = { senderIsOwner: true, senderName: 'Ada' }
    const user = { role: 'user', content: 'what changed in the deploy?', timestamp: 1_795_762_366_837, idempotencyKey: 'k:user', __openclaw: sender }
    const reply = { ...(turn(1)[1] as Record<string, unknown>), timestamp: 1_795_762_367_001 }
    await host.engine().commitTurn({ ...s, advancementKey: 't1', messages: [user, reply] })
    const out = await host.engine().assemble({ ...s, messages: [], tokenBudget: 50_000 })
    // OpenClaw stamps a user message "[Fri 2026-11-27 06:52 UTC] …" from its timestamp on every
    // request: the same number gives the same stamp, so the provider's cache prefix holds.
    expect(out.messages[0]).toEqual({ role: 'user', content: user.content, timestamp: user.timestamp, __openclaw: sender })
    expect(out.messages[1]).toMatchObject({ role: 'assistant', provider: 'fake', api: 'openai-completions', model: 'fake-model', stopReason: 'stop', timestamp: 1_795_762_367_001 })
  })

  it('between compactions each assembly begins with the previous one, and the system prompt stays the same from the first turn', async () => {
    const host = fakeHost({ freshTailCount: 4, leafChunkTokens: 600 })
    const s = session('prefix')
    const tools = new Set(['lcm_grep', 'read'])
    const assemble = () => host.engine().assemble({ ...s, messages: [], tokenBudget: 3_000, availableTools: tools })
    const first = await host.engine().assemble({ ...s, messages: [], tokenBudget: 3_000, availableTools: tools })
    let previous = first
    let compacted = 0
    for (let i = 1; i <= 24; i++) {
      await host.engine().commitTurn({ ...s, advancementKey: `k${i}`, messages: turn(i) })
      const summariesBefore = host.llmCalls.length
      await host.engine().maintain({ ...s, runtimeContext: { tokenBudget: 3_000 } })
      const next = await assemble()
      // The same system-prompt addition before and after the first summaries.
      expect(next.systemPromptAddition).toBe(first.systemPromptAddition)
      if (host.llmCalls.length > summariesBefore) {
        compacted++
      } else {
        expect(next.messages.slice(0, previous.messages.length)).toEqual(previous.messages)
        expect(next.messages.length).toBeGreaterThan(previous.messages.length)
      }
      previous = next
    }
    expect(compacted).toBeGreaterThan(0)
    expect(previous.messages[0].content).toMatch(/^<summary/)
  })

  it('maintenance compacts only past contextThreshold, and then down to contextLowWater in one sweep', async () => {
    const host = fakeHost({ freshTailCount: 32, contextThreshold: 0.75, contextLowWater: 0.25 })
    const s = session('lowwater')
    const budget = 6_000
    const stored = async () => readDb(host, async (e) => {
      const conv = (await e.findConversation({ sessionKey: s.sessionKey }))!
      return (await e.evaluate(conv.conversationId, { tokenBudget: budget })).storedTokens
    })
    const sweeps: number[] = []
    for (let i = 1; i <= 40; i++) {
      await host.engine().commitTurn({ ...s, advancementKey: `k${i}`, messages: turn(i) })
      const before = await stored()
      const calls = host.llmCalls.length
      await host.engine().maintain({ ...s, runtimeContext: { tokenBudget: budget } })
      if (host.llmCalls.length === calls) {
        // No sweep below the threshold, however many raw messages have gathered.
        expect(before).toBeLessThanOrEqual(0.75 * budget)
        continue
      }
      expect(before).toBeGreaterThan(0.75 * budget)
      sweeps.push(i)
      expect(await stored()).toBeLessThanOrEqual(0.25 * budget)
    }
    // Each sweep made room for several turns before the next one.
    expect(sweeps.length).toBeGreaterThan(1)
    for (let k = 1; k < sweeps.length; k++) expect(sweeps[k] - sweeps[k - 1]).toBeGreaterThan(3)
  })
})

describe('compaction', () => {
  async function grown(config: Record<string, unknown> = {}, complete?: Parameters<typeof fakeHost>[1]) {
    const host = fakeHost({ freshTailCount: 4, ...config }, complete)
    const s = session('grown')
    for (let i = 1; i <= 16; i++) await host.engine().commitTurn({ ...s, advancementKey: `k${i}`, messages: turn(i) })
    return { host, s }
  }

  it("maintenance keeps the context within the smallest budget the host gave assemble in the last turn, not the window", async () => {
    // As OpenClaw does: assemble first with the window less its reserve and the pending
    // prompt (small), then with nearly the window; commitTurn and maintain carry the window.
    const host = fakeHost()
    const s = session('history-budget')
    const engine = host.engine()
    for (let i = 1; i <= 8; i++) {
      await engine.assemble({ ...s, messages: [], tokenBudget: 2500 })
      await engine.assemble({ ...s, messages: [], tokenBudget: 40_000 })
      await engine.commitTurn({ ...s, advancementKey: `k${i}`, messages: turn(i, 150), runtimeContext: { tokenBudget: 40_000 } })
      await engine.maintain({ ...s, runtimeContext: { tokenBudget: 40_000 } })
    }
    expect(host.llmCalls.length).toBeGreaterThan(0)
    const out = await readDb(host, async (e) => (await e.assemble(1, { tokenBudget: 40_000 })).estimatedTokens)
    expect(out).toBeLessThanOrEqual(2500)
    // Without the small assembly, the same turns stay raw under the window's threshold.
    const other = fakeHost()
    const t = session('window-budget')
    for (let i = 1; i <= 8; i++) {
      await other.engine().commitTurn({ ...t, advancementKey: `k${i}`, messages: turn(i, 150), runtimeContext: { tokenBudget: 40_000 } })
      await other.engine().maintain({ ...t, runtimeContext: { tokenBudget: 40_000 } })
    }
    expect(other.llmCalls).toHaveLength(0)
  })

  it('a preflight reports compacted when LCM context fits, even though the host counted more', async () => {
    const { host, s } = await grown()
    const r = await host.engine().compact({ ...s, tokenBudget: 100_000, compactionTarget: 'budget', currentTokenCount: 250_000 })
    expect(r).toMatchObject({ ok: true, compacted: true, result: { tokensBefore: 250_000 } })
    expect(host.llmCalls).toHaveLength(0)
  })

  it('overflow recovery compacts until the context fits and says so; a budget it cannot reach is reported', async () => {
    const { host, s } = await grown()
    const r = await host.engine().compact({ ...s, tokenBudget: 1500, force: true, compactionTarget: 'budget', currentTokenCount: 999_999 })
    expect(r.ok).toBe(true)
    expect(r.compacted).toBe(true)
    expect(r.result!.tokensAfter).toBeLessThanOrEqual(1500)
    expect(host.llmCalls.length).toBeGreaterThan(0)
    const tiny = await host.engine().compact({ ...s, tokenBudget: 10, force: true, compactionTarget: 'budget' })
    expect(tiny.ok).toBe(true)
    expect(tiny.reason).toMatch(/still over budget: \d+ of 10 tokens/)
    // Compacted as far as it goes, or nothing left to do: either way the host tries the turn.
    expect(tiny.reason).toMatch(tiny.compacted ? /^compacted, context still over budget/ : /^nothing to compact: /)
    expect(hostGoesOn(tiny)).toBe(true)
    const again = await host.engine().compact({ ...s, tokenBudget: 10, force: true, compactionTarget: 'budget' })
    expect(again).toMatchObject({ ok: true, compacted: false })
    expect(again.reason).toMatch(/^nothing to compact: context still over budget/)
    expect(hostGoesOn(again)).toBe(true)
  })

  it('a preflight before the first commit (a first message larger than the window) is a skip the host goes on from', async () => {
    const host = fakeHost()
    const r = await host.engine().compact({ sessionId: 'first', sessionKey: 'agent:main:explicit:first', tokenBudget: 1000, force: true, compactionTarget: 'budget', currentTokenCount: 60_000 })
    expect(r).toMatchObject({ ok: true, compacted: false })
    expect(r.reason).toMatch(/^nothing to compact: no lcm-native history for this session yet/)
    expect(hostGoesOn(r)).toBe(true)
  })

  it("/new and /reset through OpenClaw's before_reset hook, as lossless-claw 1.x handles them", async () => {
    const { host, s } = await grown({ condensedTargetTokens: 10, leafMinFanout: 2, condensedMinFanout: 2, leafChunkTokens: 200, maxSweepIterations: 100 })
    const engine = host.engine()
    await engine.compact({ ...s, tokenBudget: 300, force: true, compactionTarget: 'budget' })
    const depths = await readDb(host, async (e) => (await e.context(1)).map((c: any) => c.depth ?? -1))
    expect(Math.max(...depths)).toBeGreaterThanOrEqual(2)
    const stored = await readDb(host, async (e) => (await e.messages(1)).length)
    const [pruned] = (await host.fire('before_reset', { reason: 'new' }, { sessionId: s.sessionId, sessionKey: s.sessionKey })) as any[]
    expect(pruned).toMatchObject({ action: 'pruned', conversationId: 1 })
    const after = await readDb(host, async (e) => ({
      depths: (await e.context(1)).map((c: any) => c.depth ?? -1),
      messages: (await e.messages(1)).length,
      verify: (await e.verify(1)).ok,
    }))
    expect(after.depths.every((d: number) => d >= 2)).toBe(true)
    expect(after.messages).toBe(stored)
    expect(after.verify).toBe(true)
    // The next turn continues the same conversation from the deep summaries.
    await engine.commitTurn({ ...s, advancementKey: 'after-new', messages: turn(100) })
    expect((await readDb(host, (e) => e.findConversation({ sessionKey: s.sessionKey })))?.conversationId).toBe(1)

    const [archived] = (await host.fire('before_reset', { reason: 'reset' }, { sessionId: s.sessionId, sessionKey: s.sessionKey })) as any[]
    expect(archived).toMatchObject({ action: 'archived', conversationId: 1 })
    await engine.commitTurn({ ...s, advancementKey: 'after-reset', messages: turn(101) })
    const fresh = await readDb(host, (e) => e.findConversation({ sessionKey: s.sessionKey }))
    expect(fresh?.conversationId).toBe(archived.replacementId)
    expect(fresh?.messageCount).toBe(2)
    // Other reasons, and sessions lcm-native does not keep, are left alone.
    expect(await host.fire('before_reset', { reason: 'compact' }, { sessionKey: s.sessionKey })).toEqual([undefined])
    // session_end: a reset after /reset finds the empty conversation and leaves it; idle and
    // restart change nothing; a deleted session is archived with none after it.
    expect(await host.fire('session_end', { reason: 'idle', sessionKey: s.sessionKey }, {})).toEqual([undefined])
    const [deleted] = (await host.fire('session_end', { reason: 'deleted', sessionId: s.sessionId, sessionKey: s.sessionKey }, {})) as any[]
    expect(deleted).toMatchObject({ action: 'archived', conversationId: fresh?.conversationId, replacementId: null })
    expect(await readDb(host, (e) => e.findConversation({ sessionKey: s.sessionKey }))).toBeNull()
  })

  it('session_end moving a session to a new id or a new key does what lossless-claw 1.x does', async () => {
    // OpenClaw 2026.9.6: idle, daily and compaction rotations keep the key and give the session a
    // new id (lossless-claw rebinds its conversation to the new id); a child session made by
    // /new in the TUI or the Control UI (`sessions.create` with a parent) ends the parent with
    // reason `new` and a new key (lossless-claw leaves the parent's conversation alone; the
    // parent's context was pruned by before_reset `new`; the child key starts its own).
    const host = fakeHost()
    const key = 'agent:main:explicit:rotating'
    await host.engine().commitTurn({ sessionId: 'sid-a', sessionKey: key, advancementKey: 'r1', messages: turn(1) })
    const first = await readDb(host, (e) => e.findConversation({ sessionKey: key }))
    expect(await host.fire('session_end', { reason: 'idle', sessionId: 'sid-a', sessionKey: key, nextSessionId: 'sid-b', nextSessionKey: key }, {})).toEqual([undefined])
    await host.engine().commitTurn({ sessionId: 'sid-b', sessionKey: key, advancementKey: 'r2', messages: turn(2) })
    const rebound = await readDb(host, (e) => e.findConversation({ sessionKey: key }))
    expect(rebound).toMatchObject({ conversationId: first!.conversationId, messageCount: 4 })
    // The row carries the new id, as lossless-claw's lookup writes it.
    expect(await readDb(host, (e) => e.findConversation({ sessionId: 'sid-b' }))).toMatchObject({ conversationId: first!.conversationId })

    const child = 'agent:main:tui-child'
    expect(await host.fire('session_end', { reason: 'new', sessionId: 'sid-b', sessionKey: key, nextSessionId: 'sid-c', nextSessionKey: child }, {})).toEqual([undefined])
    await host.engine().commitTurn({ sessionId: 'sid-c', sessionKey: child, advancementKey: 'c1', messages: turn(3) })
    const parent = await readDb(host, (e) => e.findConversation({ sessionKey: key }))
    const own = await readDb(host, (e) => e.findConversation({ sessionKey: child }))
    expect(parent).toMatchObject({ conversationId: first!.conversationId, messageCount: 4 })
    expect(own?.conversationId).not.toBe(first!.conversationId)
    expect(own?.messageCount).toBe(2)
  })

  it('manual compaction passes the operator instructions to the summarizer', async () => {
    const { host, s } = await grown()
    const r = await host.engine().compact({ ...s, tokenBudget: 4000, force: true, compactionTarget: 'threshold', customInstructions: 'Keep every port number.' })
    expect(r).toMatchObject({ ok: true, compacted: true })
    expect(host.llmCalls.every((c) => c.messages[0].content.includes('Keep every port number.'))).toBe(true)
  })

  it('an auth failure aborts the pass with nothing written', async () => {
    const { host, s } = await grown({}, async () => {
      throw Object.assign(new Error('401 Unauthorized: invalid api key'), { status: 401 })
    })
    const r = await host.engine().compact({ ...s, tokenBudget: 1500, force: true })
    expect(r).toMatchObject({ ok: true, compacted: false })
    expect(r.reason).toMatch(/^nothing to compact: the summary model refused the credentials/)
    expect(await readDb(host, async (e) => (await e.summaries(1)).length)).toBe(0)
  })

  it('a closed host scope (Async work scope is closed) stops the sweep: no retry, no fallback summary, nothing written', async () => {
    let calls = 0
    const { host, s } = await grown({}, async () => {
      calls += 1
      // What OpenClaw's AsyncWorkScope throws for work begun after maintain/compact returned.
      throw new Error('Async work scope is closed')
    })
    const r = await host.engine().compact({ ...s, tokenBudget: 1500, force: true })
    expect(r).toMatchObject({ ok: true, compacted: false })
    expect(r.reason).toMatch(/^nothing to compact: the host closed the operation before its summaries were made/)
    expect(calls).toBe(1)
    expect(await readDb(host, async (e) => (await e.summaries(1)).length)).toBe(0)
    // Maintenance says so as well, and writes nothing either.
    const m = await host.engine().maintain({ ...s, runtimeContext: { tokenBudget: 1500 } })
    expect(m.reason).toMatch(/^stopped: the host closed the operation/)
    expect(await readDb(host, async (e) => (await e.summaries(1)).length)).toBe(0)
  })

  it('a closed scope in the wrapping of a summaryModel call stops too, and says nothing against the model', async () => {
    let calls = 0
    const { host, s } = await grown({ summaryModel: 'scoped/model' }, async () => {
      calls += 1
      throw new Error('Plugin LLM completion failed: Async work scope is closed')
    })
    const r = await host.engine().compact({ ...s, tokenBudget: 1500, force: true })
    expect(r.reason).toMatch(/^nothing to compact: the host closed the operation/)
    expect(calls).toBe(1)
    expect(host.logs.some((l) => l.message.includes('"scoped/model"'))).toBe(false)
    expect(await readDb(host, async (e) => (await e.summaries(1)).length)).toBe(0)
  })

  it('a summaryModel the host cannot prepare (unknown, no credentials) gives way to the session model, not the fallback', async () => {
    const seen: (string | undefined)[] = []
    const { host, s } = await grown({ summaryModel: 'nowhere/unknown-model' }, async (p) => {
      seen.push(p.model)
      // What OpenClaw throws when it cannot prepare the requested model (no code).
      if (p.model) throw new Error('Plugin LLM completion failed: Unknown model: nowhere/unknown-model')
      return { text: 'summary by the session model qxysession' }
    })
    const r = await host.engine().compact({ ...s, tokenBudget: 1500, force: true })
    expect(r).toMatchObject({ ok: true, compacted: true })
    const summaries = await readDb(host, (e) => e.summaries(1))
    expect(summaries.length).toBeGreaterThan(0)
    expect(summaries.every((x) => !x.fallback && x.content.includes('qxysession'))).toBe(true)
    // Asked once; every later call goes to the session's model, and the log says why once.
    expect(seen.filter((m) => m === 'nowhere/unknown-model')).toHaveLength(1)
    expect(host.logs.filter((l) => l.message.includes('"nowhere/unknown-model" cannot be used here'))).toHaveLength(1)
  })

  it('a model that never answers gets the fallback summary after summaryTimeoutMs, marked for repair; its call is aborted', async () => {
    const signals: AbortSignal[] = []
    const { host, s } = await grown({ summaryTimeoutMs: 1000, maxSweepIterations: 1 }, (p) => {
      if (p.signal) signals.push(p.signal)
      return new Promise(() => {})
    })
    const started = Date.now()
    const r = await host.engine().compact({ ...s, tokenBudget: 1500, force: true })
    expect(Date.now() - started).toBeLessThan(10_000)
    expect(r.ok).toBe(true)
    const summaries = await readDb(host, (e) => e.summaries(1))
    expect(summaries.length).toBe(1)
    expect(summaries[0].fallback).toBe(true)
    expect(signals.length).toBeGreaterThan(0)
    // The host's request is aborted a moment after the engine gave up on it.
    await vi.waitFor(() => expect(signals.every((x) => x.aborted)).toBe(true), { timeout: 3000 })
  })

  it('a summarizer that rejects with a Symbol, a Proxy or throwing getters fails the pass, not the host', async () => {
    const hostile: unknown[] = [
      Symbol('nope'),
      new Proxy({}, { get() { throw new Error('trap') } }),
      Object.defineProperty({}, 'message', { get() { throw new Error('getter') } }),
      5,
    ]
    for (const value of hostile) {
      const { host, s } = await grown({}, () => Promise.reject(value))
      const maintained = await host.engine().maintain({ ...s, runtimeContext: { tokenBudget: 1500 } })
      expect(maintained.changed).toBe(false)
      const compacted = await host.engine().compact({ ...s, tokenBudget: 1500, force: true })
      expect(compacted).toMatchObject({ ok: true, compacted: false })
      expect(compacted.reason).toMatch(/llm.complete failed/)
      expect(await readDb(host, async (e) => (await e.summaries(1)).length)).toBe(0)
    }
  })

  it("a compaction the host asks for stops the session's background maintenance instead of waiting behind it", async () => {
    const { host, s } = await grown({ lockTimeoutMs: 1500 }, async (p) => {
      await new Promise((r) => setTimeout(r, 400))
      return { text: `slow summary ${p.messages[0].content.length}` }
    })
    // Over its threshold: maintenance runs a whole sweep, holding the conversation.
    const background = host.engine().maintain({ ...s, runtimeContext: { tokenBudget: 1500 } })
    await new Promise((r) => setTimeout(r, 100))
    const r = await host.engine().compact({ ...s, tokenBudget: 1500, force: true, compactionTarget: 'budget' })
    expect(r.ok, r.reason).toBe(true)
    expect((await background).reason).toMatch(/aborted/)
  })

  it('maintain stops between passes when its abort signal fires, and dispose waits for it', async () => {
    let release!: () => void
    const gate = new Promise<void>((r) => (release = r))
    let calls = 0
    const { host, s } = await grown({ leafChunkTokens: 300 }, async (p) => {
      calls++
      if (calls === 1) await gate
      return { text: `summary ${p.messages[0].content.length}` }
    })
    const controller = new AbortController()
    const engine = host.engine()
    // Over the threshold: a sweep of several passes (small leaf chunks).
    const work = engine.maintain({ ...s, runtimeContext: { tokenBudget: 1_500 }, abortSignal: controller.signal })
    await new Promise((r) => setTimeout(r, 100))
    controller.abort()
    let disposed = false
    const disposing = engine.dispose().then(() => (disposed = true))
    await new Promise((r) => setTimeout(r, 50))
    expect(disposed).toBe(false)
    release()
    const r = await work
    await disposing
    expect(r.reason).toMatch(/aborted/)
    expect(calls).toBe(1)
    expect(await readDb(host, async (e) => (await e.summaries(1)).length)).toBe(1)
  })
})

describe('long turns in a small window', () => {
  it('user turns of ~6k tokens in a 40k budget: maintenance summarises before the host asks, and every preflight fits', async () => {
    const host = fakeHost({ freshTailCount: 32 })
    const s = session('long-turns')
    const budget = 40_000
    const log = (i: number) => `turn ${i}: here is the log\n${`2026-11-25 ERROR worker-${i} failed at step ${i}\n`.repeat(520)}`
    for (let i = 1; i <= 16; i++) {
      const messages = [
        { role: 'user', content: i === 1 ? `${log(i)}\nthe deploy password hint is walnut-42` : log(i), timestamp: Date.now() },
        { role: 'assistant', content: [{ type: 'text', text: `looked at log ${i}` }], timestamp: Date.now() },
      ]
      expect(await host.engine().commitTurn({ ...s, advancementKey: `long-${i}`, messages })).toEqual({ status: 'committed' })
      await host.engine().maintain({ ...s, runtimeContext: { tokenBudget: budget } })
      const pre = await host.engine().compact({ ...s, tokenBudget: budget, compactionTarget: 'budget', currentTokenCount: 6_500 * i })
      expect(pre, `turn ${i}: ${pre.reason}`).toMatchObject({ ok: true, compacted: true })
      const out = await host.engine().assemble({ ...s, messages: [], tokenBudget: budget })
      expect(out.estimatedTokens, `turn ${i}`).toBeLessThanOrEqual(budget)
    }
    expect(host.llmCalls.length).toBeGreaterThan(0)
    const grep = await host.tool('lcm_grep', s).execute('g', { query: 'walnut-42' })
    expect(grep.content[0].text).toMatch(/1 hit\(s\)/)
  })

  it('one message larger than the whole window is stored whole, shown as an excerpt, and read back in pages', async () => {
    const host = fakeHost({ recallMaxTokens: 2000 })
    const s = session('huge')
    const huge = Array.from({ length: 30_000 }, (_, i) => (i === 15_000 ? 'the-middle-word-quokka' : `row ${i} ok`)).join('\n')
    await host.engine().commitTurn({ ...s, advancementKey: 'h1', messages: [{ role: 'user', content: huge, timestamp: Date.now() }, { role: 'assistant', content: [{ type: 'text', text: 'seen' }], timestamp: Date.now() }] })
    await host.engine().commitTurn({ ...s, advancementKey: 'h2', messages: turn(2) })
    const out = await host.engine().assemble({ ...s, messages: [], tokenBudget: 16_000 })
    expect(out.estimatedTokens).toBeLessThanOrEqual(16_000)
    const shown = JSON.stringify(out.messages)
    expect(shown).toContain('row 0 ok')
    expect(shown).toContain('row 29999 ok')
    expect(shown).not.toContain('quokka')
    const id = /message (\d+) has \d+ tokens/.exec(shown)![1]
    const stored = await readDb(host, async (e) => e.messages((await e.findConversation({ sessionKey: s.sessionKey }))!.conversationId))
    expect(stored[0].content).toBe(huge)
    const grep = await host.tool('lcm_grep', s).execute('g', { query: 'the-middle-word-quokka', mode: 'like' })
    expect(grep.content[0].text).toMatch(/1 hit\(s\)/)
    const first = await host.tool('lcm_describe', s).execute('d', { id })
    const pages = Number(/page 1 of (\d+)/.exec(first.content[0].text)![1])
    expect(pages).toBeGreaterThan(10)
    let found = false
    for (let page = 1; page <= pages && !found; page++) {
      found = (await host.tool('lcm_describe', s).execute('d', { id, page })).content[0].text.includes('quokka')
    }
    expect(found).toBe(true)
  })
})

describe('a message larger than the whole window', () => {
  // OpenClaw appends the pending prompt to the assembled context and applies the plugins' text
  // transforms to every provider-bound text; its first assembly of a turn carries `prompt` and
  // the history budget left beside it (1 when the prompt alone fills the window).
  const window = 40_000
  const paste = (rows: number, word: string) => Array.from({ length: rows }, (_, i) => (i === rows >> 1 ? word : `2026-11-25 INFO row ${i} ok`)).join('\n')

  it('reaches the model as an excerpt (the transcript and the store keep it whole); a prompt that fits is left alone', async () => {
    const host = fakeHost()
    const s = session('huge-prompt')
    await host.engine().commitTurn({ ...s, advancementKey: 'p1', messages: turn(1) })
    // An ordinary turn: the host gives the history what the prompt leaves.
    await host.engine().assemble({ ...s, messages: [], tokenBudget: window - 30, prompt: 'hello' })
    const huge = paste(16_000, 'the-middle-word-ibis') // ~100k tokens
    const out = await host.engine().assemble({ ...s, messages: [], tokenBudget: 1, prompt: huge })
    expect(out.estimatedTokens).toBeLessThan(window)
    const wrapped = `[Wed 2026-11-25 10:00 UTC] ${huge}`
    const shown = host.transformText(wrapped)
    expect(shown.length).toBeLessThan(window * 2)
    expect(shown).toMatch(/^\[Wed 2026-11-25 10:00 UTC\] 2026-11-25 INFO row 0 ok/)
    expect(shown).toContain('row 15999 ok')
    expect(shown).not.toContain('the-middle-word-ibis')
    expect(shown).toMatch(/this message has \d+ tokens, more than the model's context window holds/)
    expect(host.transformText('some other text')).toBe('some other text')
    // Committed whole; the turn is over and the text is shown as it is again.
    await host.engine().commitTurn({ ...s, advancementKey: 'p2', messages: [{ role: 'user', content: wrapped, timestamp: Date.now() }, { role: 'assistant', content: [{ type: 'text', text: 'seen' }], timestamp: Date.now() }] })
    expect(host.transformText(wrapped)).toBe(wrapped)
    const stored = await readDb(host, async (e) => e.messages((await e.findConversation({ sessionKey: s.sessionKey }))!.conversationId))
    expect(stored.some((m) => m.content === wrapped)).toBe(true)
    const grep = await host.tool('lcm_grep', s).execute('g', { query: 'the-middle-word-ibis' })
    expect(grep.content[0].text).toMatch(/1 hit\(s\)/)
    // ~26k tokens beside almost no history: it fits the window, so the model sees all of it.
    const large = paste(4_000, 'the-middle-word-crane')
    await host.engine().assemble({ ...s, messages: [], tokenBudget: 1, prompt: large })
    expect(host.transformText(large)).toBe(large)
  })

  it('with no budget known yet (a first turn in a new process) the excerpt is 8,000 tokens; a retry of the same turn keeps it without a second note', () => {
    const { notePendingPrompt, forgetPendingPrompt, excerptOversized } = require('../plugin/oversized-prompt.cjs')
    const state = require('../plugin/shared.cjs').shared()
    const saved = { last: state.lastPromptBudget, budgets: state.promptBudgets }
    try {
      state.lastPromptBudget = undefined
      state.promptBudgets = new Map()
      const huge = paste(16_000, 'the-middle-word-heron')
      expect(notePendingPrompt('agent:main:explicit:cold', huge, 1)).toBe(8000)
      const shown = excerptOversized(huge)
      expect(shown).not.toContain('the-middle-word-heron')
      expect(require('../index.js').estimateTokens(shown)).toBeLessThanOrEqual(8000)
      // The host assembles the same turn again (a retry after an overflow): kept, not noted again.
      expect(notePendingPrompt('agent:main:explicit:cold', huge, 1)).toBeUndefined()
      expect(excerptOversized(huge)).toBe(shown)
      forgetPendingPrompt('agent:main:explicit:cold')
      expect(excerptOversized(huge)).toBe(huge)
    } finally {
      state.lastPromptBudget = saved.last
      state.promptBudgets = saved.budgets
    }
  })
})

describe('hostile message shapes', () => {
  it('a turn nested 20,000 levels deep is stored whole as its JSON text, not as "[object Object]"', async () => {
    const host = fakeHost()
    const s = session('deep')
    let deep: unknown = { type: 'text', text: 'the-deepest-leaf-word' }
    for (let i = 0; i < 20_000; i++) deep = { wrap: [deep] }
    const messages = [{ role: 'user', content: [deep], timestamp: Date.now() }, turn(1)[1]]
    expect(await host.engine().commitTurn({ ...s, advancementKey: 'deep', messages })).toEqual({ status: 'committed' })
    const stored = await readDb(host, async (e) => e.messages((await e.findConversation({ sessionKey: s.sessionKey }))!.conversationId))
    const text = JSON.stringify(stored[0].content)
    expect(text).not.toContain('[object Object]')
    expect(text).toContain('the-deepest-leaf-word')
    expect(text.split('wrap').length - 1).toBe(20_000)
  })

  it('the JSON written without recursion is what JSON.stringify writes', () => {
    const { flatJson } = require('../plugin/messages.cjs')
    const values: unknown[] = [
      null, 0, -1.5, 'a "quoted" line\n', true, [], {}, [1, [2, [3, {}]], 'x'],
      { a: 1, b: undefined, c: () => 1, d: [undefined, () => 1, null], e: { f: new Date(0) } },
      { '': 'empty key', 'ünïcode': '😀', nested: { deeper: { deepest: [[[]]] } } },
    ]
    for (const v of values) expect(flatJson(v)).toBe(JSON.stringify(v))
  })
})

describe('recall tools', () => {
  it("take lossless-claw's argument forms, and lcm_expand_query answers through the session's model", async () => {
    const host = fakeHost({ freshTailCount: 2 }, async (p) => (p.purpose === 'lcm-native expand query' ? 'It was zebra-3, see the summary.' : 'summary of earlier turns: zebra-1 zebra-2 zebra-3'))
    const a = session('lc-forms')
    for (let i = 1; i <= 8; i++) await host.engine().commitTurn({ ...a, advancementKey: `f${i}`, messages: turn(i, 120) })
    await host.engine().compact({ ...a, tokenBudget: 2000, force: true })
    const grep = await host.tool('lcm_grep', a).execute('g', { pattern: 'zebra-[3]', scope: 'messages', before: '2999-01-01T00:00:00Z' })
    expect(grep.content[0].text).toMatch(/1 hit\(s\) for "zebra-\[3\]"/)
    const words = await host.tool('lcm_grep', a).execute('g', { pattern: 'zebra-3', mode: 'full_text' })
    expect(words.content[0].text).toMatch(/hit\(s\)/)
    const sumId = /covered by (sum_[0-9a-f]+)/.exec(grep.content[0].text)![1]
    const expanded = await host.tool('lcm_expand', a).execute('e', { summaryIds: [sumId], tokenCap: 500 })
    expect(expanded.content[0].text).toContain(`${sumId} expanded`)
    const described = await host.tool('lcm_describe', a).execute('d', { id: sumId, conversationId: 1, allConversations: false })
    expect(described.content[0].text).toContain(sumId)
    const answer = await host.tool('lcm_expand_query', a).execute('q', { prompt: 'Which zebra was in turn 3?', query: 'zebra-3' })
    const parsed = JSON.parse(answer.content[0].text)
    expect(parsed).toMatchObject({ answer: 'It was zebra-3, see the summary.', expandedSummaryCount: 1 })
    expect(parsed.citedIds).toEqual([sumId])
    const asked = host.llmCalls.find((c) => c.purpose === 'lcm-native expand query')!
    expect(asked.messages[0].content).toContain('Which zebra was in turn 3?')
    expect(asked.messages[0].content).toContain('zebra-3')
    const other = await host.tool('lcm_expand_query', session('lc-other')).execute('q', { prompt: 'x', summaryIds: [sumId] })
    expect(JSON.parse(other.content[0].text).answer).toMatch(/No stored history|No matching/)
    await expect(host.tool('lcm_expand_query', a).execute('q', { query: 'zebra' })).rejects.toThrow(/prompt/)
  })


  it('lcm_grep, lcm_describe and lcm_expand read the calling session only, with bounded output', async () => {
    const host = fakeHost({ freshTailCount: 2, recallMaxTokens: 300 })
    const a = session('tools-a')
    const b = session('tools-b')
    for (let i = 1; i <= 8; i++) await host.engine().commitTurn({ ...a, advancementKey: `a${i}`, messages: turn(i, 120) })
    await host.engine().commitTurn({ ...b, advancementKey: 'b1', messages: turn(99) })
    await host.engine().compact({ ...a, tokenBudget: 2000, force: true })

    const grep = await host.tool('lcm_grep', a).execute('call-1', { query: 'zebra-3' })
    expect(grep.content[0].text).toMatch(/1 hit\(s\)/)
    expect(grep.content[0].text).toMatch(/covered by sum_/)
    const other = await host.tool('lcm_grep', b).execute('call-2', { query: 'zebra-3' })
    expect(other.content[0].text).toMatch(/^0 hit/)

    const sumId = /covered by (sum_[0-9a-f]+)/.exec(grep.content[0].text)![1]
    const described = await host.tool('lcm_describe', a).execute('call-3', { id: sumId })
    expect(described.content[0].text).toContain(sumId)
    // It says what the summary kept of its source, so the model knows what to expand for.
    expect(described.content[0].text).toMatch(/\nfidelity( \d\.\d\d: keeps \d+ of \d+ identifiers of its source \(\d+ of \d+ salient\)|: its source names no identifiers)/)
    expect((await host.tool('lcm_describe', b).execute('call-4', { id: sumId })).content[0].text).toMatch(/not found/)

    const expanded = await host.tool('lcm_expand', a).execute('call-5', { summaryId: sumId })
    expect(expanded.content[0].text).toMatch(/\[message \d+ user\] question/)
    const { estimateTokens } = require('../index.js')
    expect(estimateTokens(expanded.content[0].text)).toBeLessThanOrEqual(330)
    expect((await host.tool('lcm_expand', b).execute('call-6', { summaryId: sumId })).content[0].text).toMatch(/not found/)
    await expect(host.tool('lcm_grep', a).execute('call-7', { query: '' })).rejects.toThrow(/query/)
    const none = await host.tool('lcm_grep', session('tools-none')).execute('call-8', { query: 'zebra' })
    expect(none.content[0].text).toMatch(/No stored history/)
  })
})

describe('switching with lossless-claw 1.x', () => {
  const commit = (s: ReturnType<typeof session>, key: string, messages: unknown[], extra: Record<string, unknown> = {}) => ({
    ...s,
    advancementKey: key,
    messages,
    admission: { sessionId: s.sessionId, sessionKey: s.sessionKey, entryId: `${key}-a`, logicalTurnId: key, activeMessagePosition: 0 },
    terminal: { sessionId: s.sessionId, sessionKey: s.sessionKey, entryId: `${key}-t`, activeMessagePosition: messages.length - 1 },
    ...extra,
  })

  it("records each turn in turn_advancements with lossless-claw's payload hash, and answers duplicate for its turns", async () => {
    const { payloadHash } = require('../plugin/turns.cjs')
    const host = fakeHost()
    const s = session('switch')
    const p = commit(s, 'mine-1', turn(1))
    expect(await host.engine().commitTurn(p)).toEqual({ status: 'committed' })
    // The same payload with its keys in another order hashes the same (lossless-claw sorts them).
    const reordered = Object.fromEntries(Object.entries(p).reverse())
    expect(payloadHash(reordered)).toBe(payloadHash(p))
    expect(payloadHash({ ...p, messages: turn(2) })).not.toBe(payloadHash(p))
    // Another SQLite client, as lossless-claw is (Python's, as in the fuzz tests: Node 20 has none).
    const sql = (q: string, ...args: unknown[]) =>
      JSON.parse(
        spawnSync('python3', ['-c', 'import sqlite3,sys,json; c=sqlite3.connect(sys.argv[1]); r=c.execute(sys.argv[2], json.loads(sys.argv[3])).fetchall(); c.commit(); print(json.dumps(r))', host.dbPath, q, JSON.stringify(args)], { encoding: 'utf8' }).stdout,
      )
    const row = sql('SELECT payload_hash, session_id, session_key, admission_entry_id, terminal_entry_id, message_count FROM turn_advancements WHERE advancement_key = ?', 'mine-1')
    expect(row).toEqual([[payloadHash(p), s.sessionId, s.sessionKey, 'mine-1-a', 'mine-1-t', 2]])
    // A turn lossless-claw committed before the switch.
    sql("INSERT INTO turn_advancements (advancement_key, payload_hash, session_id, admission_entry_id, terminal_entry_id, message_count) VALUES ('theirs-1', 'x', ?, 'a', 't', 2)", s.sessionId)
    expect(await host.engine().commitTurn(commit(s, 'theirs-1', turn(1)))).toEqual({ status: 'duplicate' })
    const stored = await readDb(host, async (e) => e.messages((await e.findConversation({ sessionKey: s.sessionKey }))!.conversationId))
    expect(stored).toHaveLength(2)
  })

  it("stores the host's entry ids on a turn's first and last messages, trusted as lossless-claw trusts its own, and marks a late replay", async () => {
    const host = fakeHost()
    const s = session('anchors')
    /** A commit whose messages sit at `position` … of the host's transcript. */
    const at = (key: string, i: number, position: number) => {
      const messages = turn(i)
      return commit(s, key, messages, {
        admission: { sessionId: s.sessionId, sessionKey: s.sessionKey, entryId: `${key}-a`, logicalTurnId: key, activeMessagePosition: position },
        terminal: { sessionId: s.sessionId, sessionKey: s.sessionKey, entryId: `${key}-t`, activeMessagePosition: position + messages.length - 1 },
      })
    }
    expect(await host.engine().commitTurn(at('k1', 1, 0))).toEqual({ status: 'committed' })
    expect(await host.engine().commitTurn(at('k3', 3, 4))).toEqual({ status: 'committed' })
    expect(host.logs.filter((l) => l.level === 'warn')).toEqual([])
    // Turn 2 (positions 2–3) replayed only now, after turn 3: stored after it, said so.
    expect(await host.engine().commitTurn(at('k2', 2, 2))).toEqual({ status: 'committed' })
    expect(host.logs.filter((l) => l.level === 'warn').map((l) => l.message).join('\n')).toMatch(/replayed a turn after later turns/)
    // A commit whose anchors do not fit its messages (positions 9–9 for two): no ids taken from them.
    const misfit = commit(s, 'k4', turn(4), {
      admission: { sessionId: s.sessionId, sessionKey: s.sessionKey, entryId: 'k4-a', logicalTurnId: 'k4', activeMessagePosition: 9 },
      terminal: { sessionId: s.sessionId, sessionKey: s.sessionKey, entryId: 'k4-t', activeMessagePosition: 9 },
    })
    expect(await host.engine().commitTurn(misfit)).toEqual({ status: 'committed' })
    const sql = (q: string) =>
      JSON.parse(spawnSync('python3', ['-c', 'import sqlite3,sys,json; c=sqlite3.connect(sys.argv[1]); print(json.dumps(c.execute(sys.argv[2]).fetchall()))', host.dbPath, q], { encoding: 'utf8' }).stdout)
    const rows = sql(`SELECT m.transcript_entry_id, t.trust_state FROM messages m
                      LEFT JOIN message_transcript_anchor_trust t USING (message_id) ORDER BY m.seq`)
    expect(rows).toEqual([
      ['k1-a', 'verified'], ['k1-t', 'verified'],
      ['k3-a', 'verified'], ['k3-t', 'verified'],
      ['k2-a', 'verified'], ['k2-t', 'verified'],
      [null, null], [null, null],
    ])
    const report = await readDb(host, (e) => e.verify())
    expect(report.ok).toBe(true)
    expect(report.notes.join('\n')).toMatch(/turn k2 was replayed by the host after later turns/)
    // A turn the engine refuses as sent (a time it cannot read) is stored as text, still under
    // the host's entry ids.
    const odd = at('k5', 5, 20)
    const [user, reply] = odd.messages as Record<string, unknown>[]
    expect(await host.engine().commitTurn({ ...odd, messages: [{ ...user, timestamp: 'not a time' }, reply] })).toEqual({ status: 'committed' })
    expect(sql('SELECT transcript_entry_id, content LIKE \'%not a time%\' FROM messages ORDER BY seq DESC LIMIT 2')).toEqual([['k5-t', 0], ['k5-a', 1]])
  })

  it('backup copies every committed turn while the engine is open; closing at exit leaves no log behind', async () => {
    const host = fakeHost()
    const s = session('backup')
    for (let i = 1; i <= 5; i++) await host.engine().commitTurn({ ...s, advancementKey: `bk${i}`, messages: turn(i) })
    const engine = await require('../plugin/shared.cjs').engineFor(host.dbPath, {})
    const out = join(host.dir, 'copy.db')
    expect(await engine.backup(out)).toBeGreaterThan(0)
    await expect(engine.backup(out)).rejects.toMatchObject({ code: 'E_INVALID_INPUT' })
    const copied = await LcmEngine.open({ dbPath: out, readOnly: true })
    try {
      const conv = await copied.findConversation({ sessionKey: s.sessionKey })
      expect(conv!.messageCount).toBe(10)
    } finally {
      await copied.close()
    }
    // `process.exit()` runs only synchronous code: the engines close there.
    // The host holds Node's default ten exit listeners already (OpenClaw does): the
    // plugin's own adds no MaxListenersExceededWarning.
    const script = `
      for (let i = 0; i < 10; i++) process.on('exit', () => {})
      const shared = require(${JSON.stringify(join(ROOT, 'plugin/shared.cjs'))})
      shared.engineFor(${JSON.stringify(join(host.dir, 'exit.db'))}, {}).then(async (e) => {
        await e.ingest({ sessionId: 'x' }, [{ role: 'user', content: 'kept' }])
        process.exit(0)
      })`
    const run = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8' })
    expect(run.status, run.stderr).toBe(0)
    expect(run.stderr).not.toContain('MaxListenersExceededWarning')
    expect(existsSync(join(host.dir, 'exit.db'))).toBe(true)
    expect(existsSync(join(host.dir, 'exit.db-wal'))).toBe(false)
  })
})

describe('the database', () => {
  it('continues a lossless-claw database: the session key finds its conversation', async () => {
    const dbPath = copyFixture('head-theme.db')
    const host = fakeHost({ dbPath })
    const s = { sessionId: 'new-session-id', sessionKey: 'agent:main:main' }
    const out = await host.engine().assemble({ ...s, messages: [], tokenBudget: 20_000 })
    expect(out.messages.some((m) => typeof m.content === 'string' && m.content.startsWith('<summary id="sum_'))).toBe(true)
    expect(await host.engine().commitTurn({ ...s, advancementKey: 'after-switch', messages: turn(1) })).toEqual({ status: 'committed' })
    const conv = await readDb(host, (e) => e.findConversation({ sessionKey: 'agent:main:main' }))
    expect(conv).toMatchObject({ conversationId: 1, messageCount: 916, sessionId: 'new-session-id' })
  })

  it("the environment goes over the plugin's entry as lossless-claw layers them: TZ only when nothing names a zone, LCM_SWEEP_MAX_DEPTH first", () => {
    const { resolveSettings } = require('../plugin/config.cjs')
    const { configFromEnv } = require('../index.js')
    const optionsWith = (env: Record<string, string>, config: Record<string, unknown>) => {
      const saved = { ...process.env }
      for (const k of Object.keys(process.env)) if (k.startsWith('LCM_') || k === 'TZ') delete process.env[k]
      Object.assign(process.env, env)
      try {
        return resolveSettings(config, process.env, (base: Record<string, unknown>) => configFromEnv(base)).engineOptions()
      } finally {
        for (const k of Object.keys(process.env)) if (!(k in saved)) delete process.env[k]
        Object.assign(process.env, saved)
      }
    }
    const zoneWith = (env: Record<string, string>, config: Record<string, unknown>) => optionsWith(env, config).timezone
    expect(zoneWith({ TZ: 'America/New_York' }, { timezone: 'Europe/Berlin' })).toBe('Europe/Berlin')
    expect(zoneWith({ TZ: 'America/New_York' }, {})).toBe('America/New_York')
    expect(zoneWith({ TZ: 'America/New_York', LCM_TIMEZONE: 'Asia/Tokyo' }, { timezone: 'Europe/Berlin' })).toBe('Asia/Tokyo')
    // A variable over the entry's option; lossless-claw 0.15's depth variable over both names.
    expect(optionsWith({ LCM_FRESH_TAIL_COUNT: '48' }, { freshTailCount: 16, leafMinFanout: 6 })).toMatchObject({ freshTailCount: 48, leafMinFanout: 6 })
    expect(optionsWith({ LCM_INCREMENTAL_MAX_DEPTH: '1' }, { sweepMaxDepth: 3 }).incrementalMaxDepth).toBe(1)
    expect(optionsWith({ LCM_SWEEP_MAX_DEPTH: '2', LCM_INCREMENTAL_MAX_DEPTH: '1' }, { incrementalMaxDepth: 0 }).incrementalMaxDepth).toBe(2)
    expect(() => optionsWith({ LCM_SWEEP_MAX_DEPTH: '-2' }, {})).toThrow(/incrementalMaxDepth \(from LCM_SWEEP_MAX_DEPTH\).*integer >= -1/)
    expect(() => optionsWith({ LCM_FRESH_TAIL_COUNT: 'lots' }, {})).toThrow(/freshTailCount \(from LCM_FRESH_TAIL_COUNT\)/)
  })

  it('databaseScope "agent" names files beside the configured one, whatever the path', () => {
    const { databaseFor } = require('../plugin/config.cjs')
    const agent = (dbPath: string) => databaseFor({ databaseScope: 'agent', dbPath }, 'work')
    expect([agent('lcm.db'), agent('/lcm.db'), agent('/a/b/lcm.db'), agent('/a/b/memory')]).toEqual([
      'lcm.work.db',
      '/lcm.work.db',
      '/a/b/lcm.work.db',
      '/a/b/memory.work.db',
    ])
    expect(databaseFor({ databaseScope: 'global', dbPath: '/a/lcm.db' }, 'work')).toBe('/a/lcm.db')
    // One id, one file: ids a changed character, a cut or case folding would merge get a hash;
    // a 300-character id still makes a name the file system takes.
    const ids = ['work', 'a b', 'a_b', 'a/b', 'a\\b', 'A_B', 'a.b', 'x'.repeat(300), 'x'.repeat(64), 'x'.repeat(65), '..', 'work.0123456789abcdef']
    const files = ids.map((id) => databaseFor({ databaseScope: 'agent', dbPath: '/d/lcm.db' }, id) as string)
    expect(new Set(files.map((f) => f.toLowerCase())).size).toBe(ids.length)
    for (const f of files) {
      expect(f.startsWith('/d/lcm.') && f.endsWith('.db'), f).toBe(true)
      expect(f.slice('/d/'.length), f).not.toMatch(/[/\\ ]/)
      expect(Buffer.byteLength(f.slice(3)), f).toBeLessThan(100)
    }
    expect(files[2]).toBe('/d/lcm.a_b.db')
    // A file an earlier version named after a changed id stays that agent's.
    const dir = tempDir('lcm-agent-files-')
    {
      writeFileSync(join(dir, 'lcm.Work_Bot.db'), '')
      expect(databaseFor({ databaseScope: 'agent', dbPath: join(dir, 'lcm.db') }, 'Work Bot')).toBe(join(dir, 'lcm.Work_Bot.db'))
      // Not when that name is an id of its own: `a b` never takes `a_b`'s file.
      writeFileSync(join(dir, 'lcm.a_b.db'), '')
      expect(databaseFor({ databaseScope: 'agent', dbPath: join(dir, 'lcm.db') }, 'a b')).not.toBe(join(dir, 'lcm.a_b.db'))
    }
  })

  it('turns left in a spool file a crashed drain had taken are stored at the next call, once', async () => {
    const host = fakeHost()
    const s = session('stale-spool')
    // Left by an earlier process that crashed while draining (the same entry twice: a turn
    // spooled again after a failed attempt), with a torn last line.
    const stale = `${host.dbPath}.lcm-native-pending.jsonl.99999.1.draining`
    const entry = { target: { sessionKey: s.sessionKey, sessionId: 'an-old-session-id' }, messages: turn(1), advancementKey: 'spooled' }
    writeFileSync(stale, `${JSON.stringify(entry)}\n${JSON.stringify(entry)}\n{"torn`)
    await host.engine().commitTurn({ ...s, advancementKey: 'second', messages: turn(2) })
    await host.engine().commitTurn({ ...s, advancementKey: 'third', messages: turn(3) })
    expect(existsSync(stale)).toBe(false)
    const stored = await readDb(host, async (e) => e.messages((await e.findConversation({ sessionKey: s.sessionKey }))!.conversationId))
    expect(stored).toHaveLength(6)
    // The replayed turn did not set the conversation back to the session id it was spooled with.
    const conv = await readDb(host, (e) => e.findConversation({ sessionKey: s.sessionKey }))
    expect(conv!.sessionId).toBe(s.sessionId)
  })

  it('spooled turns are stored in their order, and new turns wait behind them', async () => {
    // The drain itself (order, a turn that cannot be stored yet, poison turns, two drainers)
    // is the engine's: src/spool/tests.rs.
    const host = fakeHost()
    // Through the plugin: while a spooled turn cannot be stored, a new turn is kept after it.
    const s = session('order')
    const stale = `${host.dbPath}.lcm-native-pending.jsonl.1700000000000-1-1.draining`
    writeFileSync(stale, `${JSON.stringify({ target: { sessionKey: s.sessionKey }, messages: turn(1), advancementKey: 'first' })}\n`)
    await host.engine().commitTurn({ ...s, advancementKey: 'second', messages: turn(2) })
    const texts = await readDb(host, async (e) => (await e.messages((await e.findConversation({ sessionKey: s.sessionKey }))!.conversationId)).map((m) => JSON.stringify(m.content)))
    expect(texts.map((t) => /question \d|answer \d/.exec(t)?.[0])).toEqual(['question 1', 'answer 1', 'question 2', 'answer 2'])
  })

  it('one drainer at a time across processes: a live holder of the drain lock keeps others out, a stale one is taken over and said', async () => {
    const { drainSpool, spool, spoolPath, spoolPending } = require('../plugin/shared.cjs')
    const host = fakeHost()
    const s = session('lock')
    spool(host.dbPath, { target: { sessionKey: s.sessionKey }, messages: turn(1), advancementKey: 'k0' })
    const lock = `${spoolPath(host.dbPath)}.lock`
    const engine = await LcmEngine.open({ dbPath: host.dbPath })
    try {
      // Another process drains (a live process holds the lock): this one leaves the spool to it.
      const other = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60000)'])
      try {
        writeFileSync(lock, JSON.stringify({ pid: other.pid, host: require('node:os').hostname(), at: Date.now() }))
        expect(await drainSpool(host.dbPath, engine)).toBe(0)
        expect(spoolPending(host.dbPath)).toBe(true)
      } finally {
        other.kill('SIGKILL')
        await new Promise((r) => other.once('exit', r))
      }
      // Locks that kept every later gateway from draining, for ever: each is taken over.
      const mine = { host: require('node:os').hostname() }
      for (const [holder, why] of [
        [{ ...mine, pid: other.pid }, /is gone/],
        [{ ...mine, pid: process.pid }, /names this process/],
        [{ ...mine, pid: 0 }, /names no process/],
        [{ ...mine, pid: -1 }, /names no process/],
      ] as const) {
        spool(host.dbPath, { target: { sessionKey: s.sessionKey }, messages: turn(1), advancementKey: 'k0' })
        writeFileSync(lock, JSON.stringify(holder))
        const said: string[] = []
        expect(await drainSpool(host.dbPath, engine, undefined, (w: string) => said.push(w))).toBeGreaterThan(0)
        expect(said.join(), JSON.stringify(holder)).toMatch(why)
        expect(existsSync(lock)).toBe(false)
        expect(spoolPending(host.dbPath)).toBe(false)
      }
      // Another host that stopped renewing its lock a minute ago.
      spool(host.dbPath, { target: { sessionKey: s.sessionKey }, messages: turn(1), advancementKey: 'k0' })
      writeFileSync(lock, JSON.stringify({ host: 'elsewhere', pid: 42 }))
      expect(await drainSpool(host.dbPath, engine)).toBe(0)
      const old = new Date(Date.now() - 61_000)
      utimesSync(lock, old, old)
      expect(await drainSpool(host.dbPath, engine)).toBe(1)
      const conv = await engine.findConversation({ sessionKey: s.sessionKey })
      expect(await engine.messages(conv!.conversationId)).toHaveLength(2)
    } finally {
      await engine.close()
    }
  })

  it('a spooled turn that fails for a lasting reason drain after drain is set aside, reported, and stops holding later turns back', async () => {
    const { drainSpool, spool, spoolPending } = require('../plugin/shared.cjs')
    const host = fakeHost()
    const s = session('poison')
    spool(host.dbPath, { target: { sessionKey: s.sessionKey }, messages: turn(1), advancementKey: 't0' })
    // A target no engine takes: it fails the same way on every try.
    spool(host.dbPath, { target: { conversationId: 'not a number' }, messages: turn(2), advancementKey: 'poison' })
    spool(host.dbPath, { target: { sessionKey: s.sessionKey }, messages: turn(3), advancementKey: 't2' })
    const engine = await LcmEngine.open({ dbPath: host.dbPath })
    try {
      const held: string[] = []
      const onHeld = (t: { advancementKey?: string }, error: string) => held.push(`${t.advancementKey} ${error}`)
      expect(await drainSpool(host.dbPath, engine, onHeld)).toBe(1)
      expect(await drainSpool(host.dbPath, engine, onHeld)).toBe(0)
      expect(held).toEqual([])
      expect(await drainSpool(host.dbPath, engine, onHeld)).toBe(1)
      expect(held).toHaveLength(1)
      expect(held[0]).toMatch(/^poison E_INVALID_INPUT: /)
      expect(spoolPending(host.dbPath)).toBe(false)
      const conv = await engine.findConversation({ sessionKey: s.sessionKey })
      expect(await engine.messages(conv!.conversationId)).toHaveLength(4)
    } finally {
      await engine.close()
    }
    const aside = readFileSync(`${host.dbPath}.lcm-native-held.jsonl`, 'utf8').trim().split('\n').map((l) => JSON.parse(l))
    expect(aside).toMatchObject([{ advancementKey: 'poison', attempts: 3 }])
    expect(spoolStatus(host.dbPath)).toMatchObject({ turns: 0, held: 1 })
  })

  it('databaseScope "agent" gives each agent its own file', async () => {
    const host = fakeHost({ databaseScope: 'agent' })
    await host.engine().commitTurn({ sessionId: 'x', sessionKey: 'agent:ops:main', advancementKey: 'o1', messages: turn(1) })
    await host.engine().commitTurn({ sessionId: 'y', sessionKey: 'agent:main:main', advancementKey: 'm1', messages: turn(1) })
    expect(existsSync(join(host.dir, 'lcm.ops.db'))).toBe(true)
    expect(existsSync(join(host.dir, 'lcm.main.db'))).toBe(true)
  })

  it('a damaged file is reported once; turns are spooled beside it and stored once it is readable again', async () => {
    const host = fakeHost()
    writeFileSync(host.dbPath, 'this is not a database'.repeat(300))
    const s = session('damaged')
    const engine = host.engine()
    expect(await engine.commitTurn({ ...s, advancementKey: 'd1', messages: turn(1) })).toEqual({ status: 'committed' })
    const one = turn(1)
    expect((await engine.assemble({ ...s, messages: one })).messages).toBe(one)
    expect(host.logs.filter((l) => l.level === 'error' && l.message.includes('E_SCHEMA')).length).toBe(1)
    expect(existsSync(`${host.dbPath}.lcm-native-pending.jsonl`)).toBe(true)
    // /new on the damaged file: reported, not thrown at the host's command; the file untouched.
    const damaged = readFileSync(host.dbPath)
    expect(await host.fire('before_reset', { reason: 'new' }, { sessionId: s.sessionId, sessionKey: s.sessionKey })).toEqual([undefined])
    expect(readFileSync(host.dbPath).equals(damaged)).toBe(true)
    // Repaired (here: replaced); the next call stores the spooled turn, once.
    writeFileSync(host.dbPath, '')
    expect(await host.engine().commitTurn({ ...s, advancementKey: 'd2', messages: turn(2) })).toEqual({ status: 'committed' })
    expect(await host.engine().commitTurn({ ...s, advancementKey: 'd1', messages: turn(1) })).toEqual({ status: 'duplicate' })
    const stored = await readDb(host, async (e) => e.messages((await e.findConversation({ sessionKey: s.sessionKey }))!.conversationId))
    expect(stored).toHaveLength(4)
    expect(existsSync(`${host.dbPath}.lcm-native-pending.jsonl`)).toBe(false)
  })

  it('a SQLite file damaged where no write goes is found at open: nothing written into it, one E_CORRUPT report, host messages passed through, turns spooled', async () => {
    const dir = fakeHost().dir
    const dbPath = join(dir, 'damaged.db')
    const setup = await LcmEngine.open({ dbPath })
    for (let i = 0; i < 40; i++) await setup.ingest({ sessionKey: 'agent:main:explicit:old' }, [{ role: 'user', content: `old message ${i} ${'x'.repeat(400)}` }])
    await setup.close()
    const bytes = readFileSync(dbPath)
    bytes.fill(0xa5, 2 * 4096, 6 * 4096) // pages 3–6: b-tree pages of the tables written at first
    writeFileSync(dbPath, bytes)
    const host = fakeHost({ dbPath })
    const s = session('after-damage')
    expect(await host.engine().commitTurn({ ...s, advancementKey: 'c1', messages: turn(1) })).toEqual({ status: 'committed' })
    expect(await host.engine().commitTurn({ ...s, advancementKey: 'c2', messages: turn(2) })).toEqual({ status: 'committed' })
    const one = turn(3)
    expect((await host.engine().assemble({ ...s, messages: one })).messages).toBe(one)
    const reports = host.logs.filter((l) => l.level === 'error' && l.message.includes('damaged'))
    expect(reports).toHaveLength(1)
    expect(reports[0].message).toContain(dbPath)
    expect(readFileSync(dbPath).equals(bytes)).toBe(true)
    expect(readFileSync(`${dbPath}.lcm-native-pending.jsonl`, 'utf8').trim().split('\n')).toHaveLength(2)
  })

  it('a database written by a newer lcm-native is reported once and left unchanged', async () => {
    const dbPath = copyFixture('newer-lcm-native.db')
    const before = readFileSync(dbPath)
    const host = fakeHost({ dbPath })
    const s = session('newer')
    const one = turn(1)
    expect((await host.engine().assemble({ ...s, messages: one })).messages).toBe(one)
    expect((await host.engine().assemble({ ...s, messages: one })).messages).toBe(one)
    const reports = host.logs.filter((l) => l.level === 'error' && l.message.includes('E_SCHEMA'))
    expect(reports).toHaveLength(1)
    expect(reports[0].message).toMatch(/newer lcm-native/)
    expect(readFileSync(dbPath).equals(before)).toBe(true)
  })

  it('a second module instance of the plugin shares the addon and the open databases', () => {
    const first = require('../plugin/shared.cjs')
    for (const k of Object.keys(require.cache)) if (k.startsWith(join(ROOT, 'plugin'))) delete require.cache[k]
    const second = require('../plugin/shared.cjs')
    expect(second).not.toBe(first)
    expect(second.shared()).toBe(first.shared())
    expect(second.addon()).toBe(first.addon())
  })

  it('a busy database: the turn waits, then is spooled, and nothing is lost', async () => {
    const host = fakeHost({ busyTimeoutMs: 100 })
    const s = session('busy')
    await host.engine().commitTurn({ ...s, advancementKey: 'first', messages: turn(1) })
    const holder = await holdWriteLock(host.dbPath, 2.5)
    expect(await host.engine().commitTurn({ ...s, advancementKey: 'busy-1', messages: turn(2) })).toEqual({ status: 'committed' })
    await new Promise((r) => holder.once('exit', r))
    await host.engine().commitTurn({ ...s, advancementKey: 'after', messages: turn(3) })
    const stored = await readDb(host, async (e) => e.messages((await e.findConversation({ sessionKey: s.sessionKey }))!.conversationId))
    expect(stored).toHaveLength(6)
  })

  it('a locked file costs a turn one bounded wait: the store tries once, a read does not wait for the drain', async () => {
    const host = fakeHost({ busyTimeoutMs: 1500 })
    const s = session('locked')
    await host.engine().commitTurn({ ...s, advancementKey: 'first', messages: turn(1) })
    const holder = await holdWriteLock(host.dbPath, 4.5)
    // Before: three attempts of busyTimeoutMs each (with pauses between), over 5 s.
    let t = Date.now()
    expect(await host.engine().commitTurn({ ...s, advancementKey: 'locked-1', messages: turn(2) })).toEqual({ status: 'committed' })
    const storeMs = Date.now() - t
    expect(storeMs).toBeLessThan(3000)
    // Before: the read waited for the drain of the spooled turn (busyTimeoutMs); now it goes
    // on, with the host's messages (they hold the spooled turn, lcm-native does not yet).
    const mine = [...turn(1), ...turn(2), { role: 'user', content: 'and now?', timestamp: Date.now() }]
    t = Date.now()
    const out = await host.engine().assemble({ ...s, messages: mine, tokenBudget: 100_000 })
    const readMs = Date.now() - t
    expect(out.messages).toBe(mine)
    expect(readMs).toBeLessThan(1000)
    await new Promise((r) => holder.once('exit', r))
    await host.engine().commitTurn({ ...s, advancementKey: 'after', messages: turn(3) })
    const stored = await readDb(host, async (e) => e.messages((await e.findConversation({ sessionKey: s.sessionKey }))!.conversationId))
    expect(stored).toHaveLength(6)
  })

  it('with redactPatterns, a turn spooled while the database is busy is redacted in the spool file too', async () => {
    const { spoolPath } = require('../plugin/shared.cjs')
    const host = fakeHost({ busyTimeoutMs: 100, redactPatterns: ['CUST-[0-9]{8}'] })
    const s = session('spool-secret')
    await host.engine().commitTurn({ ...s, advancementKey: 'first', messages: turn(1) })
    const holder = await holdWriteLock(host.dbPath, 2.5)
    const secret = [{ role: 'user', content: 'refund CUST-40417733 today', timestamp: Date.now() }, turn(2)[1]]
    expect(await host.engine().commitTurn({ ...s, advancementKey: 'secret', messages: secret })).toEqual({ status: 'committed' })
    const spooled = readFileSync(spoolPath(host.dbPath), 'utf8')
    expect(spooled).toContain('refund [REDACTED] today')
    expect(spooled).not.toContain('CUST-40417733')
    await new Promise((r) => holder.once('exit', r))
    await host.engine().commitTurn({ ...s, advancementKey: 'after', messages: turn(3) })
    const texts = await readDb(host, async (e) => (await e.messages((await e.findConversation({ sessionKey: s.sessionKey }))!.conversationId)).map((m) => JSON.stringify(m.content)))
    expect(texts).toHaveLength(6)
    expect(texts.join(' ')).toContain('refund [REDACTED] today')
    expect(texts.join(' ')).not.toContain('CUST-40417733')
  })

  it("the operator's redact reaches a turn spooled while the database was locked: the next drain does not bring the secret back", async () => {
    const { spoolPath } = require('../plugin/shared.cjs')
    const host = fakeHost({ busyTimeoutMs: 100 })
    const s = session('spooled-secret')
    await host.engine().commitTurn({ ...s, advancementKey: 'first', messages: turn(1) })
    const holder = await holdWriteLock(host.dbPath, 2.5)
    const secret = [{ role: 'user', content: 'deploy with sk-live-Pq7Rs2Tu9Vw4 now', timestamp: Date.now() }, turn(2)[1]]
    expect(await host.engine().commitTurn({ ...s, advancementKey: 'secret', messages: secret })).toEqual({ status: 'committed' })
    expect(readFileSync(spoolPath(host.dbPath), 'utf8')).toContain('sk-live-Pq7Rs2Tu9Vw4')
    await new Promise((r) => holder.once('exit', r))
    // The operator redacts before the next turn (before: "the pattern matches nothing").
    const operator = await LcmEngine.open({ dbPath: host.dbPath })
    const r = await operator.redact({ pattern: 'sk-live-[A-Za-z0-9]+' })
    await operator.close()
    expect(r).toMatchObject({ spooledMatches: 1, spoolBusy: false })
    const spoolFiles = readdirSync(host.dir).filter((n) => n.includes('lcm-native-pending'))
    expect(spoolFiles.length).toBeGreaterThan(0)
    for (const n of spoolFiles) expect(readFileSync(join(host.dir, n), 'utf8')).not.toContain('sk-live-Pq7Rs2Tu9Vw4')
    await host.engine().commitTurn({ ...s, advancementKey: 'after', messages: turn(3) })
    const texts = await readDb(host, async (e) => (await e.messages((await e.findConversation({ sessionKey: s.sessionKey }))!.conversationId)).map((m) => JSON.stringify(m.content)))
    expect(texts).toHaveLength(6)
    expect(texts.join(' ')).toContain('deploy with [REDACTED] now')
    expect(texts.join(' ')).not.toContain('sk-live-Pq7Rs2Tu9Vw4')
  })

  it('a keyless turn whose store was answered as failed after it committed is stored once by the drain', async () => {
    const { drainSpool, spoolPath } = require('../plugin/shared.cjs')
    const host = fakeHost()
    const s = session('late-commit')
    await host.engine().ingestBatch({ ...s, messages: turn(1) })
    // PostgreSQL's COMMIT answered after the client's bound: stored, reported E_CONNECTION.
    const proto = LcmEngine.prototype as unknown as { ingest: (...a: unknown[]) => Promise<unknown> }
    const real = proto.ingest
    proto.ingest = async function (this: unknown, ...a: unknown[]) {
      proto.ingest = real
      await real.apply(this, a)
      throw Object.assign(new Error('connection lost while committing'), { code: 'E_CONNECTION' })
    }
    try {
      expect(await host.engine().ingestBatch({ ...s, messages: turn(2) })).toEqual({ ingestedCount: 2 })
    } finally {
      proto.ingest = real
    }
    const line = JSON.parse(readFileSync(spoolPath(host.dbPath), 'utf8').trim())
    expect(line.advancementKey).toMatch(/^lcm-native-spool:/)
    const engine = await LcmEngine.open({ dbPath: host.dbPath })
    try {
      await drainSpool(host.dbPath, engine)
      const conv = await engine.findConversation({ sessionKey: s.sessionKey })
      expect((await engine.messages(conv!.conversationId)).length).toBe(4)
    } finally {
      await engine.close()
    }
  })

  it('a turn spooled without a host key (ingestBatch) gets one, so a drain replayed after a kill stores it once', async () => {
    const { drainSpool, spoolPath } = require('../plugin/shared.cjs')
    const host = fakeHost({ busyTimeoutMs: 100 })
    const s = session('keyless')
    await host.engine().ingestBatch({ ...s, messages: turn(1) })
    const holder = await holdWriteLock(host.dbPath, 2.5)
    expect(await host.engine().ingestBatch({ ...s, messages: turn(2) })).toEqual({ ingestedCount: 2 })
    await new Promise((r) => holder.once('exit', r))
    const line = JSON.parse(readFileSync(spoolPath(host.dbPath), 'utf8').trim())
    expect(line.advancementKey).toMatch(/^lcm-native-spool:[0-9a-f-]{36}$/)
    // A copy of the spool, as a drain killed before it removed its file would leave it.
    const copy = readFileSync(spoolPath(host.dbPath))
    const engine = await LcmEngine.open({ dbPath: host.dbPath })
    try {
      expect(await drainSpool(host.dbPath, engine)).toBe(1)
      writeFileSync(spoolPath(host.dbPath), copy)
      expect(await drainSpool(host.dbPath, engine)).toBe(1)
      const conv = await engine.findConversation({ sessionKey: s.sessionKey })
      expect((await engine.messages(conv!.conversationId)).length).toBe(4)
    } finally {
      await engine.close()
    }
  })
})
