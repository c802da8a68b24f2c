// The panel's server holds a window of a conversation's biggest text, not the text (#64 item
// 4). One conversation of 50,000 short messages and one 20 MB tool result, opened as the panel
// opens it (`children` under the summary that covers it, `message` from a search hit, `text`
// for more of it): the engine cuts the texts as it reads them (`maxChars`) and pages the rest
// (`messageText`), so `lcm-native ui` (and the Control UI's session actions, which run the same
// operations) stays near its idle size, and other requests are answered meanwhile.
import { spawn, type ChildProcess } from 'node:child_process'
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { request } from 'node:http'
import { createRequire } from 'node:module'
import { homedir } from 'node:os'
import { join } from 'node:path'
import { monitorEventLoopDelay } from 'node:perf_hooks'

import { afterAll, beforeAll, describe, expect, it } from 'vitest'

import { LcmEngine } from '../index.js'
import { runOperation } from '../panel/operations.cjs'
import { ROOT, tempDir } from './helpers'
import { fakeHost } from './plugin-host'

const { closeAll } = require('../plugin/shared.cjs')

const BIN = join(ROOT, 'bin', 'lcm-native.cjs')
const SESSION_KEY = 'agent:main:explicit:big'

/** Bounds of the issue, for the server process (its resident set at its peak). */
const ONE_CALL_MB = 256
const SIXTEEN_CALLS_MB = 512
/**
 * How long any other request may wait while the heavy calls run. The issue asks 250 ms; on two
 * cores the slowest answer measured 80–160 ms (190 ms with two other processes spinning on
 * both): twice the bound leaves a shared CI machine its noise, and still fails the code
 * before (0.9 s for one call, 15 s for sixteen).
 */
const OTHER_REQUEST_MS = 500

/** About 20 MB of log, one- to four-byte characters (so that characters and bytes differ). */
function bigLog(): string {
  const lines: string[] = []
  let n = 0
  for (let i = 0; n < 20_000_000; i++) {
    const line = `${String(i).padStart(8, '0')} 2026-11-25T10:00:00Z INFO request served in 12 ms (ok) — ünïcödé 日本 🚀\n`
    lines.push(line)
    n += line.length
  }
  return lines.join('')
}

const codePoints = (s: string) => {
  let n = 0
  for (const _ of s) n++
  return n
}

/** The code unit where code point `k` of `s` starts. */
function unitOf(s: string, k: number): number {
  let i = 0
  for (let n = 0; n < k && i < s.length; n++) i += s.codePointAt(i)! > 0xffff ? 2 : 1
  return i
}

let dbPath: string
let cid: number
let bigId: number
let longId: number
let leafId: string
let big: string
let bigChars: number
/** A user's text of about 300,000 characters, to page through whole. */
let long: string

beforeAll(async () => {
  dbPath = join(tempDir(), 'big.db')
  const engine = await LcmEngine.open({ dbPath, freshTailCount: 8 })
  const target = { sessionId: 'sid-big', sessionKey: SESSION_KEY }
  const short = (i: number) =>
    i % 2 ? { role: 'assistant' as const, content: [{ type: 'text' as const, text: `answer ${i}` }], timestamp: 1_764_000_000_000 + i * 1000 } : { role: 'user' as const, content: `question ${i}`, timestamp: 1_764_000_000_000 + i * 1000 }
  big = bigLog()
  bigChars = codePoints(big)
  long = Array.from({ length: 6_000 }, (_, i) => `line ${i}: a user's pasted text, é 日 🚀 "quoted"\n`).join('')
  await engine.ingest(target, Array.from({ length: 10 }, (_, i) => short(i)))
  await engine.ingest(target, [
    { role: 'assistant', content: [{ type: 'toolCall', id: 'call_big0000000001', name: 'read', arguments: { path: 'big.log' } }], timestamp: 1_764_100_000_000 },
    { role: 'toolResult', toolCallId: 'call_big0000000001', toolName: 'read', content: [{ type: 'text', text: big }], timestamp: 1_764_100_000_001 },
  ])
  for (let b = 0; b < 25; b++) await engine.ingest(target, Array.from({ length: 2_000 }, (_, i) => short(10 + b * 2_000 + i)))
  const r = await engine.ingest(target, [{ role: 'user', content: long, timestamp: 1_764_300_000_000 }])
  cid = r.conversationId
  // The first leaf covers the big result (as a compaction would have summarised it).
  const leaf = await engine.leafPass(cid, 'offline')
  expect(leaf?.summaryId).toBeDefined()
  leafId = leaf!.summaryId!
  const [call, result] = await engine.messages(cid, { afterSeq: 10, limit: 2, maxChars: 10 })
  expect(call.role).toBe('assistant')
  bigId = result.messageId
  longId = (await engine.messages(cid, { afterSeq: 50_012, limit: 1, maxChars: 10 }))[0].messageId
  await engine.close()
}, 180_000)

describe('a conversation with a 20 MB tool result, opened through the panel', () => {
  let engine: LcmEngine
  const run = async (id: string, payload: unknown) => {
    const ctx = { engine, conversationId: cid, about: { version: '9.9.9', database: dbPath, path: dbPath } }
    const r = await runOperation(id, ctx, payload, { canWrite: false })
    if (!r.ok) throw Object.assign(new Error(`${id}: ${r.code}: ${r.error}`), { code: r.code })
    return r.result as any
  }

  beforeAll(async () => {
    engine = await LcmEngine.open({ dbPath, readOnly: true })
  })
  afterAll(async () => {
    await engine?.close()
  })

  it('shows the result as its first characters with its length, under its summary and opened alone', async () => {
    const page = await run('children', { summaryId: leafId, limit: 20 })
    const m = page.messages.find((x: { messageId: number }) => x.messageId === bigId)
    expect(m, 'the big result is under the first leaf').toBeDefined()
    expect(m.blocks[0]).toMatchObject({ type: 'text', block: 0, path: '/text', folded: true, chars: bigChars, shown: 2_000 })
    expect(codePoints(m.blocks[0].text)).toBe(2_000)
    expect(big.startsWith(m.blocks[0].text)).toBe(true)
    const whole = await run('message', { messageId: bigId })
    expect(whole.blocks[0]).toMatchObject({ folded: true, chars: bigChars, shown: 60_000 })
    expect(codePoints(whole.blocks[0].text)).toBe(60_000)
    expect(big.startsWith(whole.blocks[0].text)).toBe(true)
    expect(whole.chain[0].summaryId).toBe(leafId)
    // The engine's own answer: cut as it read it, the length counted there.
    const [read] = await engine.messages(cid, { afterSeq: 11, limit: 1, maxChars: 100 })
    expect(read.folded).toEqual([{ block: 0, path: '/text', chars: bigChars }])
    expect(JSON.stringify(read).length).toBeLessThan(2_000)
  })

  it('pages through a long text: the pages put end to end are the text', async () => {
    const m = await run('message', { messageId: longId })
    expect(m.blocks[0]).toMatchObject({ block: null, path: '', folded: true, chars: codePoints(long) })
    let got = m.blocks[0].text
    let offset: number | null = m.blocks[0].shown
    let pages = 0
    while (offset !== null) {
      const p = await run('text', { messageId: longId, path: '', offset })
      expect(p.offset).toBe(offset)
      expect(p.chars).toBe(codePoints(long))
      got += p.text
      offset = p.nextOffset
      pages++
    }
    expect(got).toBe(long)
    expect(pages).toBe(Math.ceil((codePoints(long) - 60_000) / 60_000))
    // The big one: any page, the last, and past its end.
    const p = await run('text', { messageId: bigId, block: 0, path: '/text', offset: 10_000_000, limit: 5_000 })
    expect(p.text).toBe(big.slice(unitOf(big, 10_000_000), unitOf(big, 10_005_000)))
    const end = await run('text', { messageId: bigId, block: 0, offset: bigChars - 100 })
    expect(end).toMatchObject({ nextOffset: null, chars: bigChars })
    expect(big.endsWith(end.text) && codePoints(end.text) === 100).toBe(true)
    await expect(run('text', { messageId: bigId, block: 0, offset: bigChars + 1 })).rejects.toMatchObject({ code: 'E_INVALID_INPUT' })
    await expect(run('text', { messageId: bigId, block: 3 })).rejects.toMatchObject({ code: 'E_INVALID_INPUT' })
    await expect(run('text', { messageId: bigId, block: 0, limit: 60_001 })).rejects.toMatchObject({ code: 'E_INVALID_INPUT' })
    await expect(run('text', { messageId: 99_999_999 })).rejects.toMatchObject({ code: 'E_NOT_FOUND' })
  })
})

/** `lcm-native ui` on the database, as a process of its own: its URL, token and pid. */
async function serve(): Promise<{ child: ChildProcess; base: string; token: string }> {
  const child = spawn(process.execPath, [BIN, 'ui', '--db', dbPath], { stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  const url = await new Promise<RegExpExecArray>((resolve, reject) => {
    child.stdout!.on('data', (d) => {
      out += d
      const m = /open (http:\S+)#token=(\w+)/.exec(out)
      if (m) resolve(m)
    })
    child.once('exit', (code) => reject(new Error(`lcm-native ui exited (${code}) before it served: ${out}`)))
  })
  return { child, base: url[1], token: url[2] }
}

/** The server's resident set now and at its peak (MB), from /proc. */
function memory(pid: number): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8')
  const kb = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(status)![1])
  return { rss: kb('VmRSS') / 1024, peak: kb('VmHWM') / 1024 }
}

/** One HTTP call on a connection of its own: its JSON and how long it took (ms). */
function call(base: string, token: string, path: string, body?: unknown): Promise<{ ms: number; body: any }> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now()
    const req = request(new URL(path, base), { method: body ? 'POST' : 'GET', agent: false, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' } }, (res) => {
      const chunks: Buffer[] = []
      res.on('data', (c) => chunks.push(c))
      res.on('end', () => resolve({ ms: performance.now() - t0, body: JSON.parse(Buffer.concat(chunks).toString('utf8')) }))
    })
    req.on('error', reject)
    req.end(body ? JSON.stringify(body) : undefined)
  })
}

/** Runs `work` while another client asks for /api/info every 20 ms; the slowest answer (ms). */
async function whileAsking(base: string, token: string, work: () => Promise<void>): Promise<number> {
  let done = false
  let slowest = 0
  const asking = (async () => {
    while (!done) {
      const r = await call(base, token, '/api/info')
      expect(r.body.ok).toBe(true)
      slowest = Math.max(slowest, r.ms)
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
  })()
  try {
    await work()
  } finally {
    done = true
    await asking
  }
  return slowest
}

describe('lcm-native ui opening it, in a process of its own', () => {
  const servers: ChildProcess[] = []
  afterAll(() => {
    for (const s of servers) s.kill('SIGKILL')
  })

  /** A fresh server, warmed up (its page, the totals, the list of summaries). */
  async function warm() {
    const s = await serve()
    servers.push(s.child)
    const action = (actionId: string, payload?: unknown) => call(s.base, s.token, '/api/action', { sessionKey: `#${cid}`, actionId, payload })
    expect((await call(s.base, s.token, '/api/info')).body.ok).toBe(true)
    expect((await action('overview')).body.ok).toBe(true)
    expect((await action('summaries', { limit: 30 })).body.ok).toBe(true)
    return { ...s, action, idle: memory(s.child.pid!) }
  }

  it(`one call at a time: the server stays under ${ONE_CALL_MB} MB and answers others meanwhile`, async () => {
    const s = await warm()
    const failed: string[] = []
    const slowest = await whileAsking(s.base, s.token, async () => {
      for (const [id, payload] of [
        ['children', { summaryId: leafId, limit: 20 }],
        ['message', { messageId: bigId }],
        ['text', { messageId: bigId, block: 0, offset: 60_000 }],
        ['text', { messageId: bigId, block: 0, offset: bigChars - 60_000 }],
        ['message', { messageId: longId }],
      ] as const) {
        const r = await s.action(id, payload)
        if (!r.body.ok) failed.push(`${id}: ${r.body.code}: ${r.body.error}`)
      }
    })
    const m = memory(s.child.pid!)
    console.log(`one call at a time: idle ${s.idle.rss.toFixed(0)} MB, peak ${m.peak.toFixed(0)} MB, after ${m.rss.toFixed(0)} MB; slowest /api/info ${slowest.toFixed(0)} ms`)
    expect(failed).toEqual([])
    expect(m.peak).toBeLessThan(ONE_CALL_MB)
    expect(slowest).toBeLessThan(OTHER_REQUEST_MS)
  }, 120_000)

  it(`16 calls at once: the server stays under ${SIXTEEN_CALLS_MB} MB (${ONE_CALL_MB} MB after) and answers others meanwhile`, async () => {
    const s = await warm()
    let answers: { ms: number; body: any }[] = []
    const started = performance.now()
    const slowest = await whileAsking(s.base, s.token, async () => {
      answers = await Promise.all(
        Array.from({ length: 16 }, (_, i) => (i % 2 ? s.action('message', { messageId: bigId }) : s.action('children', { summaryId: leafId, limit: 20 }))),
      )
    })
    const elapsed = performance.now() - started
    await new Promise((resolve) => setTimeout(resolve, 500))
    const m = memory(s.child.pid!)
    console.log(`16 at once: ${elapsed.toFixed(0)} ms; idle ${s.idle.rss.toFixed(0)} MB, peak ${m.peak.toFixed(0)} MB, after ${m.rss.toFixed(0)} MB; slowest /api/info ${slowest.toFixed(0)} ms`)
    for (const a of answers) expect(a.body.ok, `${a.body.code}: ${a.body.error}`).toBe(true)
    expect(answers[1].body.result.blocks[0].chars).toBe(bigChars)
    expect(m.peak).toBeLessThan(SIXTEEN_CALLS_MB)
    expect(m.rss).toBeLessThan(ONE_CALL_MB)
    expect(slowest).toBeLessThan(OTHER_REQUEST_MS)
  }, 180_000)
})

describe("the Control UI's session actions (the plugin, in the gateway's process) opening it", () => {
  afterAll(async () => {
    await closeAll()
  })

  it("16 at once: the gateway's event loop is never held, and its memory grows by far less than the text", async () => {
    const host = fakeHost({ dbPath })
    const action = (id: string, payload: unknown) => host.action(id, { sessionKey: SESSION_KEY, agentId: 'main', payload, scopes: ['operator.read'] })
    expect((await action('children', { summaryId: leafId, limit: 20 })).ok).toBe(true)
    // This process's peak from here (Linux: 5 in clear_refs resets VmHWM to the resident set).
    const status = () => readFileSync('/proc/self/status', 'utf8')
    const kb = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(status())![1]) / 1024
    writeFileSync('/proc/self/clear_refs', '5')
    const before = kb('VmRSS')
    const loop = monitorEventLoopDelay({ resolution: 10 })
    loop.enable()
    const answers = await Promise.all(Array.from({ length: 16 }, (_, i) => (i % 2 ? action('message', { messageId: bigId }) : action('children', { summaryId: leafId, limit: 20 }))))
    loop.disable()
    const grown = kb('VmHWM') - before
    const held = loop.max / 1e6
    console.log(`session actions, 16 at once: the process grew ${grown.toFixed(0)} MB at its peak; the event loop was held ${held.toFixed(0)} ms at most`)
    for (const a of answers) expect(a.ok, `${a.code}: ${a.error}`).toBe(true)
    expect(answers[1].result.blocks[0]).toMatchObject({ folded: true, chars: bigChars })
    expect(grown).toBeLessThan(SIXTEEN_CALLS_MB - 128)
    expect(held).toBeLessThan(OTHER_REQUEST_MS)
  }, 120_000)
})

const CHROMIUM = process.env.LCM_CHROMIUM ?? '/usr/bin/chromium'
const PLAYWRIGHT = join(process.env.LCM_NATIVE_CACHE ?? join(homedir(), '.cache', 'lcm-native'), 'openclaw', 'node_modules', 'playwright-core')
const browserAvailable = existsSync(CHROMIUM) && existsSync(join(PLAYWRIGHT, 'package.json'))

/** The panel module mounted for the session, its host's requests sent to `lcmAction` (as in panel-bidi.spec.ts). */
const PAGE = `<!doctype html><html lang="en"><head><meta charset="utf-8"><link rel="stylesheet" href="/index.css"></head>
<body><main id="panel"></main><script type="module">
import plugin from '/index.js'
let mount
plugin.activate({ ui: { registerPanel: (p) => { mount = p.mount } } })
const host = { connection: { canWrite: false }, request: (method, params) => window.lcmAction(params.actionId, params.payload ?? null) }
mount(document.getElementById('panel'), { host, props: { sessionKey: '${SESSION_KEY}', agentId: 'main' }, signal: new AbortController().signal })
window.mounted = true
</script></body></html>`

describe.skipIf(!browserAvailable)('the panel in Chromium: the 20 MB result a page at a time', () => {
  let browser: any
  afterAll(async () => {
    await browser?.close()
    await closeAll()
  })

  it('shows its first 2,000 characters, then 60,000 more a click, and says how many are left', async () => {
    const host = fakeHost({ dbPath })
    const { chromium } = createRequire(join(ROOT, 'package.json'))(PLAYWRIGHT)
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] })
    const page = await browser.newPage({ viewport: { width: 1280, height: 800 } })
    const errors: string[] = []
    page.on('pageerror', (e: Error) => errors.push(String(e)))
    const asked: string[] = []
    await page.exposeFunction('lcmAction', (actionId: string, payload: unknown) => {
      asked.push(actionId)
      return host.action(actionId, { sessionKey: SESSION_KEY, agentId: 'main', payload: payload ?? undefined, scopes: ['operator.read'] })
    })
    const assets: Record<string, [string, string]> = {
      '/': ['text/html; charset=utf-8', PAGE],
      '/index.js': ['text/javascript', readFileSync(join(ROOT, 'dist', 'control-ui', 'index.js'), 'utf8')],
      '/index.css': ['text/css', readFileSync(join(ROOT, 'dist', 'control-ui', 'index.css'), 'utf8')],
    }
    await page.route('http://panel.test/**', (route: any) => {
      const asset = assets[new URL(route.request().url()).pathname]
      return asset ? route.fulfill({ status: 200, contentType: asset[0], body: asset[1] }) : route.fulfill({ status: 404, body: '' })
    })
    await page.goto('http://panel.test/')
    await page.waitForFunction(() => (window as any).mounted === true)
    const panel = page.locator('section.lcmn')
    await panel.locator(`li[data-summary="${leafId}"] button.lcmn-row`).click()
    await panel.getByRole('button', { name: /^Raw messages/ }).click()
    const result = panel.locator(`article[data-message="${bigId}"]`)
    await result.locator('details summary').click()
    const text = result.locator('pre.lcmn-text')
    const shown = async () => codePoints((await text.textContent()) ?? '')
    expect(await shown()).toBe(2_000)
    const more = result.getByRole('button', { name: /^Show more/ })
    expect(await more.textContent()).toBe(`Show more (${(bigChars - 2_000).toLocaleString('en-US')} of ${bigChars.toLocaleString('en-US')} characters left)`)
    await more.click()
    await page.waitForFunction((id: number) => (document.querySelector(`article[data-message="${id}"] pre.lcmn-text`)?.textContent?.length ?? 0) > 60_000, bigId)
    expect(await shown()).toBe(62_000)
    expect(big.startsWith((await text.textContent()) ?? '')).toBe(true)
    expect(await more.textContent()).toBe(`Show more (${(bigChars - 62_000).toLocaleString('en-US')} of ${bigChars.toLocaleString('en-US')} characters left)`)
    expect(asked.filter((a) => a === 'text')).toHaveLength(1)
    expect(errors).toEqual([])
  }, 120_000)
})
