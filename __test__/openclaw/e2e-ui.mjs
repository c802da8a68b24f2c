// @ts-check
// The LCM panel in a real browser: headless Chromium (Debian's `chromium`, driven by the
// playwright-core that openclaw installs) on the real Control UI of openclaw 2026.9.6 with the
// packed plugin installed and Settings → Labs → Custom plugin UI on, and on `lcm-native ui`
// over a copy of the same file. In each: the panel lists the session's summaries, opens one to
// its raw messages, a search hit opens in the tree, a rewrite applied shows a new version, and
// the keyboard reaches all of it. Screenshots at 1280×800 and 390×844 go to artifacts/ui/.

import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { join } from 'node:path'

import { ROOT, check, cleanUp, lcm, sql } from './e2e-lib.mjs'
import { startFakeModel } from './fake-model.mjs'
import { CACHE, compactSession, gatewayCall, installPlugin, makeRunDir, startGateway, stopGateway, turn, writeConfig } from './harness.mjs'

const require = createRequire(import.meta.url)
const CHROMIUM = process.env.LCM_CHROMIUM ?? '/usr/bin/chromium'
const ARTIFACTS = join(ROOT, 'artifacts', 'ui')
const KEY = 'agent:main:main'
/** A word only one turn holds, for the search. */
const NEEDLE = 'QUOKKA-4471'

/**
 * playwright-core's page, untyped here: the driver comes from openclaw's own dependencies in
 * the machine cache (no second copy in this package), so its types are not installed.
 * @typedef {any} Page
 */

/**
 * The panel's checks, the same in the Control UI and in `lcm-native ui`: `open` shows the
 * panel; `where` names the page in check names and screenshot files.
 * @param {Page} page @param {string} where @param {{ messages: number, open: () => Promise<void> }} o
 */
async function panelChecks(page, where, o) {
  const panel = page.locator('section.lcmn')
  await check(`${where}: the panel shows the session's totals and lists its summaries`, async () => {
    await o.open()
    await panel.locator('[data-total="messages"]').waitFor({ timeout: 30_000 })
    assert.equal(await panel.locator('[data-total="messages"]').textContent(), o.messages.toLocaleString('en-US'))
    await panel.locator('.lcmn-item').first().waitFor({ timeout: 15_000 })
    assert.ok((await panel.locator('.lcmn-item').count()) > 0)
    await page.screenshot({ path: join(ARTIFACTS, `${where}-1280x800.png`) })
  })
  await check(`${where}: a summary opens to its text and its raw messages`, async () => {
    const row = panel.locator('.lcmn-list > .lcmn-item').first()
    await row.locator('.lcmn-row').click()
    await row.locator('.lcmn-md').waitFor({ timeout: 15_000 })
    await row.getByRole('button', { name: /^Raw messages/ }).click()
    await row.locator('article.lcmn-msg').first().waitFor({ timeout: 15_000 })
    assert.ok((await row.locator('article.lcmn-msg').count()) > 0)
  })
  await check(`${where}: a search hit opens in the tree at its message`, async () => {
    await panel.getByRole('tab', { name: 'Search' }).click()
    await panel.getByRole('searchbox').fill(NEEDLE)
    await panel.getByRole('button', { name: 'Search', exact: true }).click()
    const hit = panel.locator('.lcmn-results .lcmn-row').first()
    await hit.waitFor({ timeout: 15_000 })
    await hit.click()
    const marked = panel.locator('.lcmn-focus article.lcmn-hit')
    await marked.waitFor({ timeout: 15_000 })
    assert.match((await marked.textContent()) ?? '', new RegExp(NEEDLE))
  })
  await check(`${where}: the keyboard moves between the tabs and opens a summary`, async () => {
    await panel.locator('.lcmn-close').click()
    const tab = panel.getByRole('tab', { name: 'Summaries' })
    await tab.focus()
    await page.keyboard.press('Enter')
    await page.keyboard.press('ArrowRight')
    assert.equal(await panel.getByRole('tab', { name: 'Last turn' }).getAttribute('aria-selected'), 'true')
    await page.keyboard.press('ArrowLeft')
    assert.equal(await tab.getAttribute('aria-selected'), 'true')
    const row = panel.locator('.lcmn-list > .lcmn-item .lcmn-row').first()
    await row.waitFor({ timeout: 15_000 })
    // Tab from the selected tab reaches the first row; Enter opens it.
    for (let i = 0; i < 5 && !(await row.evaluate((/** @type {Element} */ el) => el === document.activeElement)); i++) await page.keyboard.press('Tab')
    assert.ok(await row.evaluate((/** @type {Element} */ el) => el === document.activeElement), 'Tab did not reach the first summary')
    await page.keyboard.press('Enter')
    assert.equal(await row.getAttribute('aria-expanded'), 'true')
  })
  await check(`${where}: a rewrite reviewed and applied shows a new version`, async () => {
    const item = panel.locator('.lcmn-list > .lcmn-item').first()
    await item.locator('.lcmn-md').waitFor({ timeout: 15_000 })
    await item.getByRole('button', { name: 'Rewrite…' }).click()
    await item.getByRole('button', { name: 'Ask the summarizer for a draft' }).click()
    const edit = item.getByRole('textbox', { name: /New text/ })
    await edit.waitFor({ timeout: 60_000 })
    await edit.fill(`${await edit.inputValue()}\nReviewed in the browser.`)
    page.once('dialog', (/** @type {{ accept(): Promise<void> }} */ d) => d.accept())
    await item.getByRole('button', { name: 'Apply as a new version' }).click()
    const done = item.locator('.lcmn-ok, .lcmn-error').first()
    await done.waitFor({ timeout: 30_000 })
    const said = (await done.textContent()) ?? ''
    const version = /is now version (\d+)\./.exec(said)?.[1]
    assert.ok(version && Number(version) >= 2, said)
    await item.getByRole('button', { name: 'Versions' }).click()
    await item.getByText(new RegExp(`^v${version} \\(current\\) · rewrite`)).waitFor({ timeout: 15_000 })
  })
}

/**
 * Opens the LCM panel in the Control UI's side panel (the Chat pane's side panel menu lists a
 * plugin's panels by label).
 * @param {Page} page
 */
async function openInControlUi(page) {
  const shown = page.locator('section.lcmn')
  const toggle = page.getByRole('button', { name: 'Side panel', exact: true })
  const add = page.getByRole('button', { name: 'Add side panel tab', exact: true })
  // The Control UI keeps the side panel's tabs across reloads: the panel may be open already.
  await page.waitForFunction(
    () => document.querySelector('section.lcmn') || [...document.querySelectorAll('button')].some((b) => ['Side panel', 'Add side panel tab'].includes(b.getAttribute('aria-label') ?? '')),
    undefined,
    { timeout: 30_000 },
  )
  if ((await shown.count()) > 0) return
  if ((await toggle.count()) > 0) await toggle.click()
  else await add.click()
  await page.getByText('LCM', { exact: true }).first().click()
}

/** @param {{ node: string, entry: string }} host @param {string} tgz */
export async function uiScenario(host, tgz) {
  if (!existsSync(CHROMIUM)) throw new Error(`no Chromium at ${CHROMIUM} (apt-get install chromium, or set LCM_CHROMIUM)`)
  /** @type {{ chromium: any }} */
  const { chromium } = require(join(CACHE, 'openclaw', 'node_modules', 'playwright-core'))
  mkdirSync(ARTIFACTS, { recursive: true })
  const run = await makeRunDir(host)
  const fake = await startFakeModel({ logFile: join(run.dir, 'model.jsonl'), contextWindow: 64_000 })
  const db = join(run.state, 'lcm.db')
  await installPlugin(run, tgz, { methods: ['archive'] })
  writeConfig(run, { port: fake.port, slot: 'lcm-native', pluginConfig: { freshTailCount: 4, leafChunkTokens: 1_500 }, contextWindow: 64_000 })
  // Settings → Labs → Custom plugin UI: a plugin's native UI loads only with it on.
  const config = JSON.parse(readFileSync(run.configPath, 'utf8'))
  config.gateway = { ...config.gateway, controlUi: { ...config.gateway?.controlUi, experimental: { customPlugins: true } } }
  writeFileSync(run.configPath, JSON.stringify(config, null, 2))
  const gw = await startGateway(run)
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] })
  /** @type {ReturnType<typeof spawn> | undefined} */
  let ui
  try {
    for (let i = 1; i <= 6; i++) {
      const note = i === 3 ? ` The ticket is ${NEEDLE}.` : ''
      const r = await turn(run, { sessionKey: KEY, message: `Question ${i}: what changed in run ${i}?${note} ${'The log says retry and backoff. '.repeat(120)}` })
      assert.equal(r.code, 0, `turn ${i}: ${r.stderr.slice(-1000)}`)
    }
    const compacted = await compactSession(run, KEY)
    assert.equal(compacted.code, 0, compacted.stderr)
    const messages = sql(db, `SELECT count(*) FROM messages m JOIN conversations c USING (conversation_id) WHERE c.session_key = '${KEY}' AND c.active = 1`)[0][0]

    await check('the Gateway lists the plugin\'s Control UI module, with no diagnostic', async () => {
      const r = await gatewayCall(run, 'plugins.controlUi.list', {})
      assert.equal(r.code, 0, r.stderr)
      const entry = r.json?.plugins?.find((/** @type {{ pluginId: string }} */ p) => p.pluginId === 'lcm-native')
      assert.ok(entry, r.stdout)
      assert.match(entry.entryUrl, /\/lcm-native\/[0-9a-f]{64}\/index\.js$/)
      assert.deepEqual(r.json.diagnostics, [])
    })

    await check('the plugin registered its panel actions once, with no registration error', () => {
      const logs = [gw.stdoutFile, gw.stderrFile, run.logFile].filter((f) => existsSync(f)).map((f) => readFileSync(f, 'utf8')).join('\n')
      assert.doesNotMatch(logs, /session action (already registered|registration requires|requiredScopes|schema)/)
    })

    const page = await browser.newPage({ viewport: { width: 1280, height: 800 } })
    const errors = /** @type {string[]} */ ([])
    page.on('pageerror', (/** @type {Error} */ e) => errors.push(String(e)))
    await page.goto(`http://127.0.0.1:${gw.port}/chat/main#token=${gw.token}`)
    await panelChecks(page, 'control-ui', { messages, open: () => openInControlUi(page) })
    await check('control-ui: the panel raised no error in the page, and at 390 px wide it still opens', async () => {
      assert.deepEqual(errors.filter((e) => /lcmn|lcm-native|control-ui\/lcm/.test(e)), [])
      await page.setViewportSize({ width: 390, height: 844 })
      await page.reload()
      await openInControlUi(page)
      await page.locator('section.lcmn [data-total="messages"]').waitFor({ timeout: 30_000 })
      await page.screenshot({ path: join(ARTIFACTS, 'control-ui-390.png') })
    })
    await page.close()

    // `lcm-native ui --write` on a copy of the file (the Gateway keeps the original).
    const copy = join(run.dir, 'copy.db')
    const engine = await lcm.LcmEngine.open({ dbPath: db, readOnly: true })
    await engine.backup(copy)
    await engine.close()
    ui = spawn(process.execPath, [join(ROOT, 'bin', 'lcm-native.cjs'), 'ui', '--db', copy, '--write'], { stdio: ['ignore', 'pipe', 'pipe'] })
    const url = await new Promise((resolve, reject) => {
      let out = ''
      const timer = setTimeout(() => reject(new Error(`lcm-native ui printed no URL: ${out}`)), 30_000)
      ui?.stdout?.on('data', (b) => {
        out += b
        const m = /open (http:\/\/127\.0\.0\.1:\d+\/\S*)/.exec(out)
        if (m) {
          clearTimeout(timer)
          resolve(m[1])
        }
      })
      ui?.on('exit', (code) => reject(new Error(`lcm-native ui exited with ${code}: ${out}`)))
    })
    const standalone = await browser.newPage({ viewport: { width: 1280, height: 800 } })
    const cid = sql(db, `SELECT conversation_id FROM conversations WHERE session_key = '${KEY}' AND active = 1`)[0][0]
    await standalone.goto(String(url).replace('/#', `/?conversation=${cid}#`))
    await panelChecks(standalone, 'lcm-native-ui', { messages, open: async () => {} })
    await check('lcm-native-ui: at 390 px wide', async () => {
      await standalone.setViewportSize({ width: 390, height: 844 })
      await standalone.reload()
      await standalone.locator('section.lcmn [data-total="messages"]').waitFor({ timeout: 30_000 })
      await standalone.screenshot({ path: join(ARTIFACTS, 'lcm-native-ui-390.png') })
      assert.equal(await standalone.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth + 1), true, 'the page scrolls sideways at 390 px')
    })
  } finally {
    ui?.kill('SIGTERM')
    await browser.close()
    await stopGateway(gw)
    await fake.close()
    cleanUp(run)
  }
}
