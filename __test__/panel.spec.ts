// The LCM panel's backend: the session actions the plugin registers for OpenClaw's Control UI
// (plugin/panel.cjs over panel/operations.cjs), called as the host calls them, and the
// `lcm-native ui` server (panel/server.cjs) over HTTP.
import { spawn } from 'node:child_process'
import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { request } from 'node:http'
import { connect, type Socket } from 'node:net'
import { join } from 'node:path'

import { afterAll, beforeAll, describe, expect, it } from 'vitest'

import { LcmEngine } from '../index.js'
import { checkBounds } from '../panel/operations.cjs'
import { startUi } from '../panel/server.cjs'
import { ROOT, holdWriteLock, tempDir } from './helpers'
import { fakeHost, turn, type FakeHost } from './plugin-host'

const BIN = join(ROOT, 'bin', 'lcm-native.cjs')

const session = (name: string) => ({ sessionId: `sid-${name}`, sessionKey: `agent:main:explicit:${name}`, sessionFile: `agent:main:explicit:${name}` })

/** A session of `turns` turns, compacted into summaries (the fake model writes them). */
async function storedSession(host: FakeHost, name: string, turns: number, extra: (i: number) => unknown[] = () => []) {
  const s = session(name)
  for (let i = 1; i <= turns; i++) {
    await host.engine().commitTurn({ ...s, advancementKey: `${name}-${i}`, messages: [...turn(i), ...extra(i)] })
  }
  const r = await host.engine().compact({ ...s, tokenBudget: 1500, force: true })
  expect(r.compacted).toBe(true)
  return s
}

describe('the panel as session actions', () => {
  let host: FakeHost
  let s: ReturnType<typeof session>
  const call = (id: string, payload?: unknown, scopes?: string[]) => host.action(id, { sessionKey: s.sessionKey, agentId: 'main', payload, scopes })
  const ok = async (id: string, payload?: unknown, scopes?: string[]) => {
    const r = await call(id, payload, scopes)
    if (!r.ok) throw new Error(`${id}: ${r.code}: ${r.error}`)
    return r.result
  }

  beforeAll(async () => {
    host = fakeHost({ freshTailCount: 4, leafChunkTokens: 600 })
    // Turn 7 carries a tool call with a large result (folded on a page, whole on request).
    const big = `BEGIN ${'x'.repeat(9_000)} END-OF-BIG-RESULT`
    s = await storedSession(host, 'panel', 14, (i) =>
      i === 7
        ? [
            { role: 'assistant', content: [{ type: 'toolCall', id: 'call_7', name: 'read', arguments: { path: 'notes.md' } }], timestamp: Date.now() },
            { role: 'toolResult', toolCallId: 'call_7', toolName: 'read', content: [{ type: 'text', text: big }], timestamp: Date.now() },
          ]
        : [],
    )
  })

  it('registers every operation, reads with the read scope and writes with the write scope', () => {
    const scopes = Object.fromEntries([...host.actions.values()].map((a) => [a.id, a.requiredScopes]))
    expect(scopes.overview).toEqual(['operator.read'])
    expect(scopes.summaries).toEqual(['operator.read'])
    expect(scopes.grep).toEqual(['operator.read'])
    expect(scopes.rewriteApply).toEqual(['operator.write'])
    expect(scopes.redact).toEqual(['operator.write'])
    expect(scopes.repairSummaries).toEqual(['operator.write'])
    for (const a of host.actions.values()) expect(a.description?.length).toBeGreaterThan(10)
  })

  it("overview: the session's totals match the engine's own counts", async () => {
    const o = await ok('overview')
    const engine = await LcmEngine.open({ dbPath: host.dbPath, readOnly: true })
    const [c] = (await engine.conversations()).filter((x) => x.sessionKey === s.sessionKey)
    const context = await engine.context(c.conversationId)
    await engine.close()
    expect(o.conversation).toMatchObject({ conversationId: c.conversationId, messageCount: c.messageCount, summaryCount: c.summaryCount, contextItems: context.length })
    expect(o.conversation.summaryCount).toBeGreaterThan(0)
    expect(o.conversation.compression).toBeGreaterThan(1)
    expect(o.about.version).toBe(JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).version)
    expect(o.about.databaseBytes).toBeGreaterThan(0)
  })

  it('summaries come a page at a time, newest first, and a page names its marks', async () => {
    const all = await ok('summaries', { limit: 100 })
    expect(all.summaries.length).toBeGreaterThan(1)
    const created = all.summaries.map((x: { createdAt: string }) => x.createdAt)
    expect([...created].sort().reverse()).toEqual(created)
    const first = await ok('summaries', { limit: 1 })
    const second = await ok('summaries', { limit: 1, offset: 1 })
    expect(first.summaries[0].summaryId).toBe(all.summaries[0].summaryId)
    expect(second.summaries[0].summaryId).toBe(all.summaries[1].summaryId)
    expect(first.summaries[0]).toMatchObject({ fallback: false, truncated: false, lowFidelity: false })
    expect(typeof first.summaries[0].preview).toBe('string')
    const bad = await call('summaries', { limit: 0 })
    expect(bad).toMatchObject({ ok: false, code: 'E_INVALID_INPUT' })
  })

  it('a summary opens to its text and its raw messages, tool results folded and whole on request', async () => {
    const { summaries } = await ok('summaries', { limit: 100, depth: 0 })
    let found: { messageId: number; blocks: { type: string; folded: boolean; chars: number; text: string }[] } | undefined
    for (const leaf of summaries) {
      const d = await ok('summary', { summaryId: leaf.summaryId })
      expect(d.content.length).toBeGreaterThan(0)
      expect(d.coveredMessages.count).toBeGreaterThan(0)
      const page = await ok('children', { summaryId: leaf.summaryId, limit: 40 })
      expect(page.total).toBe(d.coveredMessages.count)
      expect(page.messages.length).toBe(Math.min(40, page.total))
      found ??= page.messages.find((m: { role: string }) => m.role === 'toolResult')
    }
    expect(found, 'the big tool result is under a leaf').toBeDefined()
    const block = found!.blocks[0]
    expect(block).toMatchObject({ folded: true, chars: 9_000 + 'BEGIN  END-OF-BIG-RESULT'.length })
    expect(block.text.length).toBe(2_000)
    const whole = await ok('message', { messageId: found!.messageId })
    expect(whole.blocks[0].text).toMatch(/END-OF-BIG-RESULT$/)
    expect(whole.blocks[0].folded).toBe(false)
    expect(whole.chain.length).toBeGreaterThan(0)
  })

  it('a message of many large blocks opens whole within the host bounds, each block folded to fit', async () => {
    const other = session('blocks')
    const blocks = Array.from({ length: 30 }, (_, i) => ({ type: 'text', text: `BLOCKMARK-${i} ${'y'.repeat(20_000)}` }))
    await host.engine().commitTurn({ ...other, advancementKey: 'blocks-1', messages: [{ role: 'user', content: blocks, timestamp: Date.now() }] })
    const at = (payload: unknown) => host.action('grep', { sessionKey: other.sessionKey, payload })
    const hit = (await at({ query: 'BLOCKMARK-0', mode: 'like', scope: 'messages' })).result.hits[0]
    const r = await host.action('message', { sessionKey: other.sessionKey, payload: { messageId: hit.messageId } })
    expect(r.ok, r.error).toBe(true)
    expect(r.result.blocks).toHaveLength(30)
    expect(r.result.blocks.every((b: { folded: boolean; text: string }) => b.folded && b.text.length >= 2_000)).toBe(true)
  })

  it('search finds a message under its summary and a summary by its text', async () => {
    const r = await ok('grep', { query: 'zebra-2', mode: 'like', scope: 'messages' })
    expect(r.hits.length).toBeGreaterThan(0)
    expect(r.hits[0]).toMatchObject({ type: 'message' })
    expect(r.hits[0].coveredBy).toMatch(/^sum_/)
    expect(await call('grep', { query: 'x', mode: 'glob' })).toMatchObject({ ok: false, code: 'E_INVALID_INPUT' })
    expect(await call('grep', { query: '(', mode: 'regex' })).toMatchObject({ ok: false, code: 'E_INVALID_INPUT' })
  })

  it('what the model saw: the newest assembly with what it left out', async () => {
    const engine = host.engine()
    await engine.assemble({ ...s, messages: [], tokenBudget: 300 })
    const c = await ok('context')
    expect(c.lastAssembly).not.toBeNull()
    expect(c.lastAssembly.tokenBudget).toBe(300)
    expect(c.lastAssembly.sameContext).toBe(true)
    const left = c.items.filter((i: { leftOut: boolean }) => i.leftOut).length
    expect(left).toBe(c.lastAssembly.stats.evictedItems)
    expect(left).toBeGreaterThan(0)
    expect(c.totalItems).toBe(c.items.length)
  })

  it('a write needs the write scope: refused by the host, and by the plugin if the host let it through', async () => {
    const { summaries } = await ok('summaries', { limit: 1 })
    const id = summaries[0].summaryId
    expect(await call('rewriteApply', { summaryId: id, content: 'x' }, ['operator.read'])).toMatchObject({ ok: false, code: 'HOST_SCOPE' })
    const a = host.actions.get('rewriteApply')!
    const r = await a.handler({ sessionKey: s.sessionKey, payload: { summaryId: id, content: 'x' }, client: { scopes: ['operator.read'] } })
    expect(r).toMatchObject({ ok: false, code: 'E_READ_ONLY' })
    expect((await ok('history', { summaryId: id })).versions).toHaveLength(1)
  })

  it('rewrite: preview, draft (nothing written), apply as a new version, roll back', async () => {
    const { summaries } = await ok('summaries', { limit: 1, depth: 0 })
    const id = summaries[0].summaryId
    const preview = await ok('rewritePreview', { summaryId: id })
    expect(preview.prompt.length).toBeGreaterThan(0)
    const calls = host.llmCalls.length
    const draft = await ok('rewriteDraft', { summaryId: id })
    expect(host.llmCalls.length).toBeGreaterThan(calls)
    expect(draft.applied).toBe(false)
    expect((await ok('history', { summaryId: id })).versions).toHaveLength(1)
    const applied = await ok('rewriteApply', { summaryId: id, content: `${draft.newContent}\nReviewed in the panel.` })
    expect(applied).toMatchObject({ applied: true, version: 2 })
    expect((await ok('summary', { summaryId: id })).content).toMatch(/Reviewed in the panel\.$/)
    const back = await ok('rollback', { summaryId: id, version: 1 })
    expect(back.version).toBe(3)
    expect((await ok('summary', { summaryId: id })).content).not.toMatch(/Reviewed in the panel/)
    expect(host.logs.some((l) => l.message.includes(`rewrote summary ${id} from the Control UI`))).toBe(true)
    expect(await call('rollback', { summaryId: 'sum_nope', version: 1 })).toMatchObject({ ok: false, code: 'E_NOT_FOUND' })
  })

  it('check summaries scores them; repair asks for a model', async () => {
    const r = await ok('checkSummaries')
    expect(r.byDepth.length).toBeGreaterThan(0)
    expect(r.fallbacks).toBe(0)
    expect(await call('repairSummaries', { which: 'sideways' })).toMatchObject({ ok: false, code: 'E_INVALID_INPUT' })
  })

  it('redaction: a count first, writing nothing, then the redaction', async () => {
    const count = await ok('redactCount', { pattern: 'zebra-1[0-3]' })
    expect(count.messages).toBe(4)
    expect((await ok('redactCount', { pattern: 'zebra-1[0-3]' })).messages).toBe(4)
    const r = await ok('redact', { pattern: 'zebra-1[0-3]' })
    expect(r.matches).toBeGreaterThanOrEqual(4)
    expect((await ok('redactCount', { pattern: 'zebra-1[0-3]' })).messages).toBe(0)
    expect(await call('redactCount', { pattern: '' })).toMatchObject({ ok: false, code: 'E_INVALID_INPUT' })
  })

  it("a condensed summary opens with its inputs as rows, the ones `children` lists", async () => {
    // A condensed node over the leaves, written by the engine's own pass.
    const cid = (await ok('overview')).conversation.conversationId
    const engine = await LcmEngine.open({ dbPath: host.dbPath, leafMinFanout: 2 })
    const pass = await engine.condensedPass(cid, 'offline', { hardTrigger: true, depth: 0 })
    await engine.close()
    expect(pass).not.toBeNull()
    const { summaries } = await ok('summaries', { limit: 100, depth: 1 })
    expect(summaries.length).toBeGreaterThan(0)
    const d = await ok('summary', { summaryId: summaries[0].summaryId })
    expect(d.inputCount).toBeGreaterThan(1)
    expect(d.inputs.map((i: { summaryId: string }) => i.summaryId)).toEqual((await ok('children', { summaryId: d.summaryId })).inputs.map((i: { summaryId: string }) => i.summaryId))
    expect(d.inputs.every((i: { depth: number; preview: string }) => i.depth === 0 && typeof i.preview === 'string')).toBe(true)
  })

  it('a session LCM holds nothing of, an unknown action, a bad payload', async () => {
    const none = await host.action('overview', { sessionKey: 'agent:main:explicit:never', payload: {} })
    expect(none).toMatchObject({ ok: true, result: { conversation: null } })
    expect(await host.action('summaries', { sessionKey: 'agent:main:explicit:never' })).toMatchObject({ ok: false, code: 'E_NOT_FOUND' })
    expect(await host.action('overview', {})).toMatchObject({ ok: true, result: { conversation: null } })
    expect(await call('summary', 'not an object')).toMatchObject({ ok: false, code: 'E_INVALID_INPUT' })
    expect(await call('summary', { summaryId: '' })).toMatchObject({ ok: false, code: 'E_INVALID_INPUT' })
  })

  it('results stay within the host bounds, and a result past them is refused with a code', () => {
    expect(() => checkBounds({ a: 'x'.repeat(70_000) })).toThrow(/characters/)
    expect(() => checkBounds(Array.from({ length: 5_000 }, (_, i) => i))).toThrow(/values/)
    expect(() => checkBounds(Array.from({ length: 100 }, () => 'y'.repeat(3_000)))).toThrow(/bytes/)
    expect(checkBounds({ fine: [1, 2, 3] })).toEqual({ fine: [1, 2, 3] })
  })

  afterAll(async () => {
    await host.engine().dispose()
  })
})

describe('the panel when things go wrong', () => {
  const call = (host: FakeHost, s: ReturnType<typeof session>, id: string, payload?: unknown) => host.action(id, { sessionKey: s.sessionKey, agentId: 'main', payload })
  const firstLeaf = async (host: FakeHost, s: ReturnType<typeof session>) => {
    const r = await call(host, s, 'summaries', { limit: 1, depth: 0 })
    if (!r.ok) throw new Error(`${r.code}: ${r.error}`)
    return r.result.summaries[0].summaryId as string
  }
  const versions = async (host: FakeHost, s: ReturnType<typeof session>, id: string) => (await call(host, s, 'history', { summaryId: id })).result.versions.length

  it('a summarizer that throws: the draft fails with E_SUMMARIZER saying why, nothing is written', async () => {
    let failing = false
    const host = fakeHost({ freshTailCount: 4, leafChunkTokens: 600 }, async (p) => {
      if (failing) throw new Error('provider exploded')
      return { text: `summary (${p.messages[0].content.length} chars)\nExpand for details about: x` }
    })
    const s = await storedSession(host, 'throws', 10)
    const id = await firstLeaf(host, s)
    failing = true
    const draft = await call(host, s, 'rewriteDraft', { summaryId: id })
    expect(draft).toMatchObject({ ok: false, code: 'E_SUMMARIZER' })
    expect(draft.error).toMatch(/provider exploded.*nothing was written/)
    const applied = await call(host, s, 'rewriteApply', { summaryId: id, content: 'kept by hand' })
    expect(applied.ok).toBe(true)
    expect(await versions(host, s, id)).toBe(2)
  })

  it('a summarizer that never answers: the draft fails with E_TIMEOUT after summaryTimeoutMs, nothing written', async () => {
    let hanging = false
    const host = fakeHost({ freshTailCount: 4, leafChunkTokens: 600, summaryTimeoutMs: 1000 }, async (p) => {
      if (hanging) return new Promise(() => {})
      return { text: `summary (${p.messages[0].content.length} chars)\nExpand for details about: x` }
    })
    const s = await storedSession(host, 'hangs', 10)
    const id = await firstLeaf(host, s)
    hanging = true
    const started = Date.now()
    const draft = await call(host, s, 'rewriteDraft', { summaryId: id })
    expect(draft).toMatchObject({ ok: false, code: 'E_TIMEOUT' })
    expect(Date.now() - started).toBeLessThan(10_000)
    expect(await versions(host, s, id)).toBe(1)
  })

  it('a database another process holds locked: reads go on, a write fails with E_BUSY and writes nothing', async () => {
    const host = fakeHost({ freshTailCount: 4, leafChunkTokens: 600, busyTimeoutMs: 300 })
    const s = await storedSession(host, 'locked', 10)
    const id = await firstLeaf(host, s)
    const holder = await holdWriteLock(host.dbPath, 20)
    try {
      expect((await call(host, s, 'overview')).ok).toBe(true)
      const r = await call(host, s, 'rewriteApply', { summaryId: id, content: 'written while locked' })
      expect(r).toMatchObject({ ok: false, code: 'E_BUSY' })
    } finally {
      holder.kill()
    }
    expect(await versions(host, s, id)).toBe(1)
    expect((await call(host, s, 'summary', { summaryId: id })).result.content).not.toContain('written while locked')
  })

  it('a damaged database: every operation answers E_CORRUPT with the file named, and the file is not written', async () => {
    const dir = tempDir('lcm-panel-')
    const dbPath = join(dir, 'damaged.db')
    const setup = await LcmEngine.open({ dbPath })
    for (let i = 0; i < 40; i++) await setup.ingest({ sessionKey: 'agent:main:explicit:damaged' }, [{ role: 'user', content: `old message ${i} ${'x'.repeat(400)}` }])
    await setup.close()
    const bytes = readFileSync(dbPath)
    bytes.fill(0xa5, 2 * 4096, 6 * 4096)
    writeFileSync(dbPath, bytes)
    const host = fakeHost({ dbPath })
    const s = session('damaged')
    for (const id of ['overview', 'summaries', 'redact']) {
      const r = await call(host, s, id, id === 'redact' ? { pattern: 'old' } : undefined)
      expect(r).toMatchObject({ ok: false, code: 'E_CORRUPT' })
      expect(r.error).toContain(dbPath)
    }
    // The same page outside OpenClaw says the same.
    const engine = await LcmEngine.open({ dbPath, readOnly: true })
    const server = await startUi({ engine, database: dbPath, path: dbPath, version: '9.9.9', write: false, port: 0 })
    try {
      const r = await fetch(new URL('/api/action', server.base), {
        method: 'POST',
        headers: { authorization: `Bearer ${server.token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ actionId: 'overview', sessionKey: '#1' }),
      }).then((x) => x.json())
      expect(r).toMatchObject({ ok: false, code: 'E_CORRUPT' })
    } finally {
      await server.close()
      await engine.close()
    }
    expect(readFileSync(dbPath).equals(bytes)).toBe(true)
  })
})

describe('lcm-native ui (the panel outside OpenClaw)', () => {
  let host: FakeHost
  let engine: LcmEngine
  let server: Awaited<ReturnType<typeof startUi>>
  let conversationId: number

  beforeAll(async () => {
    host = fakeHost({ freshTailCount: 4 })
    await storedSession(host, 'ui', 10)
    await host.engine().dispose()
    engine = await LcmEngine.open({ dbPath: host.dbPath, readOnly: true })
    conversationId = (await engine.conversations())[0].conversationId
    server = await startUi({ engine, database: host.dbPath, path: host.dbPath, version: '9.9.9', write: false, port: 0 })
  })

  afterAll(async () => {
    await server.close()
    await engine.close()
  })

  const api = (path: string, init: RequestInit = {}, token = server.token) =>
    fetch(new URL(path, server.base), { ...init, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', ...(init.headers ?? {}) } })

  it('serves the page and the Control UI module with a CSP that forbids inline script', async () => {
    const page = await fetch(server.base)
    expect(page.status).toBe(200)
    expect(page.headers.get('content-security-policy')).toMatch(/script-src 'self'/)
    expect(await page.text()).toContain('/shell.js')
    const module = await fetch(new URL('/assets/index.js', server.base))
    expect(module.headers.get('content-type')).toBe('text/javascript')
    expect(await module.text()).toBe(readFileSync(join(ROOT, 'dist', 'control-ui', 'index.js'), 'utf8'))
  })

  it('answers the API only with the token, and only on loopback host names', async () => {
    expect((await api('/api/info', {}, 'wrong')).status).toBe(401)
    expect((await fetch(new URL('/api/info', server.base))).status).toBe(401)
    const info = await (await api('/api/info')).json()
    expect(info).toMatchObject({ ok: true, write: false, version: '9.9.9' })
    expect(info.conversations.map((c: { conversationId: number }) => c.conversationId)).toContain(conversationId)
    // fetch sets Host itself: a raw request names another site, as a rebound DNS name would.
    const rebound = await new Promise<number>((resolve, reject) => {
      const req = request({ host: '127.0.0.1', port: server.port, path: '/api/info', headers: { host: 'evil.example', authorization: `Bearer ${server.token}` } }, (res) => {
        res.resume()
        resolve(res.statusCode ?? 0)
      })
      req.on('error', reject)
      req.end()
    })
    expect(rebound).toBe(403)
  })

  it('runs the read operations for a conversation picked by id and refuses writes without --write', async () => {
    const post = (body: unknown) => api('/api/action', { method: 'POST', body: JSON.stringify(body) }).then((r) => r.json())
    const o = await post({ actionId: 'overview', sessionKey: `#${conversationId}` })
    expect(o).toMatchObject({ ok: true, result: { conversation: { conversationId } } })
    const page = await post({ actionId: 'summaries', sessionKey: `#${conversationId}`, payload: { limit: 2 } })
    expect(page.result.summaries.length).toBeGreaterThan(0)
    const write = await post({ actionId: 'rollback', sessionKey: `#${conversationId}`, payload: { summaryId: page.result.summaries[0].summaryId, version: 1 } })
    expect(write).toMatchObject({ ok: false, code: 'E_READ_ONLY' })
    const junk = await api('/api/action', { method: 'POST', body: '{not json' }).then((r) => r.json())
    expect(junk).toMatchObject({ ok: false, code: 'E_INVALID_INPUT' })
  })
})

describe('lcm-native ui as a process', () => {
  it.each(['SIGTERM', 'SIGINT', 'SIGHUP'] as const)('stops on %s within 2 s while clients hold stalled connections, closes the database and exits 0', async (signal) => {
    const dir = tempDir('lcm-ui-stop-')
    const dbPath = join(dir, 'lcm.db')
    const setup = await LcmEngine.open({ dbPath })
    for (let i = 0; i < 5; i++) await setup.ingest({ sessionKey: 'agent:main:explicit:stop' }, [{ role: 'user', content: `message ${i}` }])
    await setup.close()
    // Without the caller's LCM_* or OpenClaw's config, on the file alone; --write: the engine
    // holds the file read-write, so a close that never comes leaves its log behind.
    const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('LCM_') && !k.startsWith('ANTHROPIC_') && !k.endsWith('_API_KEY') && k !== 'OPENCLAW_STATE_DIR'))
    const child = spawn(process.execPath, [BIN, 'ui', '--db', dbPath, '--write'], { env: { ...env, HOME: tempDir() } })
    let stdout = ''
    let stderr = ''
    child.stderr.on('data', (d) => (stderr += d))
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null; at: number }>((resolve) =>
      child.on('exit', (code, how) => resolve({ code, signal: how, at: Date.now() })),
    )
    const sockets: Socket[] = []
    try {
      const [, port, token] = await new Promise<RegExpExecArray>((resolve, reject) => {
        child.stdout.on('data', (d) => {
          stdout += d
          const m = /open http:\/\/127\.0\.0\.1:(\d+)\/#token=([0-9a-f]+)/.exec(stdout)
          if (m) resolve(m)
        })
        child.once('exit', () => reject(new Error(`lcm-native ui exited before it served\n${stdout}\n${stderr}`)))
      })
      const raw = (data: string) =>
        new Promise<Socket>((resolve, reject) => {
          const socket = connect(Number(port), '127.0.0.1', () => {
            if (data) socket.write(data)
            resolve(socket)
          })
          socket.on('error', () => {})
          socket.once('error', reject)
          sockets.push(socket)
        })
      // (a) says nothing; (b) stops in the middle of its headers; (c) sends a POST's headers and
      // 6 of the 1000 bytes of body it announced.
      await raw('')
      await raw('GET /api/info HTTP/1.1\r\nHost: 127.0.0.1')
      await raw(`POST /api/action HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"acti`)
      // Still answering meanwhile (which also gives it time to read what the three sent).
      const info = await fetch(`http://127.0.0.1:${port}/api/info`, { headers: { authorization: `Bearer ${token}` } }).then((r) => r.json())
      expect(info).toMatchObject({ ok: true, write: true })
      await new Promise((r) => setTimeout(r, 100))
      expect(existsSync(`${dbPath}-wal`)).toBe(true)
      const sent = Date.now()
      child.kill(signal)
      const timer = setTimeout(() => child.kill('SIGKILL'), 5_000)
      const end = await exited
      clearTimeout(timer)
      expect({ code: end.code, signal: end.signal, stderr }).toEqual({ code: 0, signal: null, stderr: '' })
      expect(end.at - sent).toBeLessThan(2_000)
    } finally {
      for (const s of sockets) s.destroy()
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
      await exited
    }
    // The engine was closed: its log checkpointed into the file (not left behind), which verifies.
    expect(existsSync(`${dbPath}-wal`) ? statSync(`${dbPath}-wal`).size : 0).toBe(0)
    const engine = await LcmEngine.open({ dbPath, readOnly: true })
    try {
      expect((await engine.verify()).ok).toBe(true)
    } finally {
      await engine.close()
    }
  })
})
