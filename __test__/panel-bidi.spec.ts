// The LCM panel (dist/control-ui/index.js) in headless Chromium, over the plugin's session
// actions: text from the database holding bidirectional controls (an unterminated U+202E
// RIGHT-TO-LEFT OVERRIDE in a tool call's id and name, in message and summary text, in the
// model name) stays in its own isolate, so the panel's own text after it reads in logical
// order, and an id or a name shows its control visibly. Chromium is Debian's (LCM_CHROMIUM),
// driven by the playwright-core that the e2e scenarios install with openclaw in the machine
// cache; without them the file is skipped.
import { existsSync, readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { homedir } from 'node:os'
import { join } from 'node:path'

import { afterAll, beforeAll, describe, expect, it } from 'vitest'

import { ROOT } from './helpers'
import { fakeHost, turn, type FakeHost } from './plugin-host'

const require = createRequire(join(ROOT, 'package.json'))
const CHROMIUM = process.env.LCM_CHROMIUM ?? '/usr/bin/chromium'
const PLAYWRIGHT = join(process.env.LCM_NATIVE_CACHE ?? join(homedir(), '.cache', 'lcm-native'), 'openclaw', 'node_modules', 'playwright-core')
const available = existsSync(CHROMIUM) && existsSync(join(PLAYWRIGHT, 'package.json'))

const RLO = '\u202E'
const SHOWN = '⟨U+202E⟩'
/** SHOWN in a regular expression. */
const SHOWN_RE = '⟨U\\+202E⟩'
const ID = `call_${RLO}7`
const NAME = `read${RLO}file`
const NEEDLE = 'WOMBAT-9120'
const ORIGIN = 'http://panel.test'

/** The page: the panel module mounted for one session, its host's requests sent to `lcmAction`. */
const PAGE = `<!doctype html><html lang="en"><head><meta charset="utf-8"><link rel="stylesheet" href="/index.css"></head>
<body><main id="panel"></main><script type="module">
import plugin from '/index.js'
let mount
plugin.activate({ ui: { registerPanel: (p) => { mount = p.mount } } })
const host = { connection: { canWrite: true }, request: (method, params) => window.lcmAction(params.actionId, params.payload ?? null) }
mount(document.getElementById('panel'), { host, props: { sessionKey: 'agent:main:explicit:bidi', agentId: 'main' }, signal: new AbortController().signal })
window.mounted = true
</script></body></html>`

/** What the page runs to judge one element (a function's source: the page has no module of ours). */
const JUDGE = `(() => {
  const ISOLATING = ['isolate', 'isolate-override', 'plaintext']
  /** The left edges of each character of the last \`word\` in el's text, in logical order. */
  window.edges = (el, word) => {
    const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT)
    let found = null
    for (let t; (t = walker.nextNode()); ) if (t.data.includes(word)) found = t
    if (!found) return null
    const at = found.data.lastIndexOf(word)
    return [...word].map((_, k) => {
      const r = document.createRange()
      r.setStart(found, at + k)
      r.setEnd(found, at + k + 1)
      return r.getBoundingClientRect().left
    })
  }
  /**
   * For each text node under root holding one of \`marks\`, the text of the nearest element that
   * isolates it (computed \`unicode-bidi\`), or null when none does.
   */
  window.isolates = (root, marks) => {
    const out = []
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT)
    for (let t; (t = walker.nextNode()); ) {
      if (!marks.some((m) => t.data.includes(m))) continue
      let e = t.parentElement
      while (e && !ISOLATING.includes(getComputedStyle(e).unicodeBidi)) e = e.parentElement
      out.push(e ? e.textContent : null)
    }
    return out
  }
})()`

const increasing = (xs: number[] | null) => xs !== null && xs.every((x, i) => i === 0 || x > xs[i - 1])

/**
 * What may share an isolate with a stored text holding an override: that text alone (an id or
 * a name as shown, a message's or a summary's text, a search snippet), none of the panel's own.
 */
const STORED: (string | RegExp)[] = [
  `call_${SHOWN}7`,
  `read${SHOWN}file`,
  `fake/fake${SHOWN}model`,
  `Reading it ${RLO}from the left`,
  `result ${NEEDLE} ${RLO}reversed inside`,
  `{\n  "path": "notes${RLO}.md"\n}`,
  // A summary's text: a paragraph, a list item, both (the preview, its white space folded).
  /^(FAKE summary \u202Eof \d+ chars)?( ?- ?)?(kept \u202Eas written)?$/,
]

/** The texts of the isolates of `el`'s stored texts that hold more than a stored text. */
async function loose(el: any): Promise<(string | null)[]> {
  const found: (string | null)[] = await el.evaluate((e: Element, marks: string[]) => (window as any).isolates(e, marks), [SHOWN, RLO])
  expect(found.length).toBeGreaterThan(0)
  return found.filter((t) => t === null || !STORED.some((p) => (typeof p === 'string' ? t === p : p.test(t))))
}

describe.skipIf(!available)('the panel in Chromium: stored text with bidi controls', () => {
  let host: FakeHost
  let browser: any
  let page: any
  const s = { sessionId: 'sid-bidi', sessionKey: 'agent:main:explicit:bidi', sessionFile: 'agent:main:explicit:bidi' }

  beforeAll(async () => {
    // The summarizer writes an override into every summary.
    host = fakeHost({ freshTailCount: 4, leafChunkTokens: 600 }, async (p) => ({
      text: `FAKE summary ${RLO}of ${p.messages[0].content.length} chars\n- kept ${RLO}as written`,
      stopReason: 'stop',
      provider: 'fake',
      model: 'fake-model',
    }))
    for (let i = 1; i <= 10; i++) {
      const extra =
        i === 2
          ? [
              { role: 'assistant', content: [{ type: 'text', text: `Reading it ${RLO}from the left` }, { type: 'toolCall', id: ID, name: NAME, arguments: { path: `notes${RLO}.md` } }], timestamp: Date.now() },
              { role: 'toolResult', toolCallId: ID, toolName: NAME, content: [{ type: 'text', text: `result ${NEEDLE} ${RLO}reversed inside` }], timestamp: Date.now() },
            ]
          : []
      await host.engine().commitTurn({ ...s, advancementKey: `bidi-${i}`, messages: [...turn(i), ...extra] })
    }
    // The model a summary records is the session's, as the host names it.
    const runtimeSettings = { model: { provider: 'fake', resolved: `fake${RLO}model` } }
    const r = await host.engine().compact({ ...s, tokenBudget: 1500, force: true, runtimeSettings } as Parameters<ReturnType<FakeHost['engine']>['compact']>[0])
    expect(r.compacted).toBe(true)

    const { chromium } = require(PLAYWRIGHT)
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] })
    page = await browser.newPage({ viewport: { width: 1280, height: 800 } })
    const errors: string[] = []
    page.on('pageerror', (e: Error) => errors.push(String(e)))
    await page.exposeFunction('lcmAction', (actionId: string, payload: unknown) =>
      host.action(actionId, { sessionKey: s.sessionKey, agentId: 'main', payload: payload ?? undefined }),
    )
    const assets: Record<string, [string, string]> = {
      '/': ['text/html; charset=utf-8', PAGE],
      '/index.js': ['text/javascript', readFileSync(join(ROOT, 'dist', 'control-ui', 'index.js'), 'utf8')],
      '/index.css': ['text/css', readFileSync(join(ROOT, 'dist', 'control-ui', 'index.css'), 'utf8')],
    }
    await page.route(`${ORIGIN}/**`, (route: any) => {
      const asset = assets[new URL(route.request().url()).pathname]
      return asset ? route.fulfill({ status: 200, contentType: asset[0], body: asset[1] }) : route.fulfill({ status: 404, body: '' })
    })
    await page.goto(`${ORIGIN}/`)
    await page.waitForFunction(() => (window as any).mounted === true)
    await page.evaluate(JUDGE)
    expect(errors).toEqual([])
  })

  afterAll(async () => {
    await browser?.close()
  })

  /** Opens the message holding NEEDLE from a search hit: its summary's text and raw messages. */
  async function openToolResult() {
    const panel = page.locator('section.lcmn')
    await panel.getByRole('tab', { name: 'Search' }).click()
    await panel.getByRole('searchbox').fill(NEEDLE)
    await panel.getByRole('combobox', { name: 'Search mode' }).selectOption('like')
    await panel.getByRole('button', { name: 'Search', exact: true }).click()
    const hit = panel.locator('.lcmn-results .lcmn-row').first()
    await hit.waitFor({ timeout: 15_000 })
    await hit.click()
    const result = panel.locator('.lcmn-focus article.lcmn-hit')
    await result.waitFor({ timeout: 15_000 })
    await panel.locator('.lcmn-focus details summary', { hasText: 'tool call' }).first().waitFor({ timeout: 15_000 })
    return panel
  }

  it("a tool result's header: the id shows its control and is isolated; the time and tokens after it read left to right", async () => {
    const panel = await openToolResult()
    const header = panel.locator('.lcmn-focus article.lcmn-hit > p.lcmn-sub').first()
    // With the override unterminated, "tok" is drawn right to left: its letters' edges fall.
    expect(await header.evaluate((el: Element) => (window as any).edges(el, ' tok'))).toSatisfy(increasing)
    expect(await header.evaluate((el: Element) => (window as any).edges(el, 'toolResult'))).toSatisfy(increasing)
    expect(await loose(header)).toEqual([])
    const text = await header.textContent()
    expect(text).toContain(`(call_${SHOWN}7)`)
    expect(text).not.toContain(RLO)
    expect(text).toMatch(/ · \d+ tok$/)
  })

  it("a tool call's label: the name shows its control and is isolated; the size after it reads left to right", async () => {
    const panel = await openToolResult()
    const label = panel.locator('.lcmn-focus details summary', { hasText: 'tool call' }).first()
    expect(await label.evaluate((el: Element) => (window as any).edges(el, ' chars'))).toSatisfy(increasing)
    expect(await loose(label)).toEqual([])
    expect(await label.textContent()).toMatch(new RegExp(`^tool call read${SHOWN_RE}file · \\d+ chars$`))
  })

  it("a summary's line: the model shows its control; the version after it reads left to right", async () => {
    const panel = await openToolResult()
    const line = panel.locator('.lcmn-focus .lcmn-detail > p.lcmn-sub', { hasText: 'model' }).first()
    expect(await line.evaluate((el: Element) => (window as any).edges(el, ' version'))).toSatisfy(increasing)
    expect(await loose(line)).toEqual([])
    expect(await line.textContent()).toContain(`model fake/fake${SHOWN}model · version`)
  })

  it('message and summary text keep their characters, each in an isolate; every stored text in the panel is isolated', async () => {
    const panel = await openToolResult()
    // The search hits, the summary and the raw messages opened from one; then the list of
    // summaries with the first one opened.
    expect(await loose(panel)).toEqual([])
    await panel.getByRole('tab', { name: 'Summaries' }).click()
    const row = panel.locator('.lcmn-body .lcmn-list > .lcmn-item').first()
    await row.locator('.lcmn-row').click()
    await row.locator('.lcmn-md').waitFor({ timeout: 15_000 })
    const prose = panel.locator('.lcmn-focus .lcmn-prose', { hasText: 'Reading it' }).first()
    expect(await prose.textContent()).toBe(`Reading it ${RLO}from the left`)
    const result = panel.locator('.lcmn-focus article.lcmn-hit pre').first()
    expect(await result.textContent()).toContain(`${RLO}reversed inside`)
    expect(await row.locator('.lcmn-md').textContent()).toContain(RLO)
    expect(await panel.locator('.lcmn-preview').first().textContent()).toContain(RLO)
    expect(await loose(panel)).toEqual([])
    // Ids and names (lines of the panel's own) never hold a raw control.
    const lines = await panel.locator('p.lcmn-sub, summary, .lcmn-meta').allTextContents()
    expect(lines.filter((l: string) => l.includes(RLO))).toEqual([])
    expect(lines.some((l: string) => l.includes(SHOWN))).toBe(true)
  })
})
