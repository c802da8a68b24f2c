// End to end: `lcm-native tui` in a real pseudo-terminal (@lydell/node-pty) on the theme
// transcript: open the conversation, rewrite its first root with the offline summarizer,
// apply, quit; then the database has the new text, FTS finds it, and `verify` is ok.
import { spawnSync } from 'node:child_process'
import { cpSync, readFileSync, readdirSync } from 'node:fs'
import { join } from 'node:path'

import { spawn } from '@lydell/node-pty'
import { describe, expect, it } from 'vitest'

import { LcmEngine } from '../index.js'
import { ROOT, THEME, copyFixture, hostMessages, tempDir } from './helpers'

// eslint-disable-next-line no-control-regex
const ANSI = /\u001B(?:\[[0-?]*[ -/]*[@-~]|\][^\u0007]*\u0007|[@-Z\\-_])/g

/**
 * `lcm-native tui` on `dbPath` in a pseudo-terminal of `cols`×`rows`, with no LLM in the
 * environment (the offline summarizer) and not as CI (Ink draws only the last frame in CI).
 * `waitFor` waits for `pattern` in what was drawn since the last wait; `write` sends keys after
 * a pause (Ink re-subscribes its input handler after each frame).
 */
function tuiInPty(dbPath: string, cols: number, rows: number) {
  const env: Record<string, string> = {}
  for (const [k, v] of Object.entries(process.env)) {
    if (v !== undefined && k !== 'CI' && !/^(LCM_|ANTHROPIC_|OPENAI_)/.test(k)) env[k] = v
  }
  env.HOME = tempDir()
  env.TERM = 'xterm-256color'
  const term = spawn(process.execPath, [join(ROOT, 'bin', 'lcm-native.cjs'), 'tui', '--db', dbPath], { cols, rows, env, cwd: ROOT })
  let raw = ''
  term.onData((d) => (raw += d))
  const exited = new Promise<number>((resolve) => term.onExit((e) => resolve(e.exitCode)))
  const screen = () => raw.replace(ANSI, '')
  let mark = 0
  const waitFor = async (pattern: RegExp, what: string) => {
    const deadline = Date.now() + 20_000
    for (;;) {
      const m = pattern.exec(screen().slice(mark))
      if (m) {
        mark += m.index + m[0].length
        return m
      }
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; screen:\n${screen().slice(-3000)}`)
      await new Promise((r) => setTimeout(r, 50))
    }
  }
  const write = async (keys: string, pauseMs = 150) => {
    await new Promise((r) => setTimeout(r, pauseMs))
    term.write(keys)
  }
  return { term, exited, waitFor, write, unread: () => screen().slice(mark) }
}

describe('tui in a pseudo-terminal', () => {
  it('rewrites one summary with the offline summarizer, applies it and quits', async () => {
    const dbPath = join(tempDir(), 'pty.db')
    const engine = await LcmEngine.open({ dbPath, leafChunkTokens: 3000, leafTargetTokens: 300, condensedTargetTokens: 80, freshTailCount: 16, leafMinFanout: 4, condensedMinFanout: 4, maxSweepIterations: 200 })
    const { conversationId } = await engine.ingest({ sessionId: 'pty-session' }, hostMessages(THEME))
    // A model whose summaries differ from the offline summarizer's, so the rewrite changes them.
    await engine.compact(conversationId, async (_p, r) => `Model summary of ${r.inputCount} inputs at depth ${r.depth}.`, { tokenBudget: 4000, force: true })
    await engine.close()

    const { term, exited, waitFor, write: press } = tuiInPty(dbPath, 140, 40)
    try {
      await waitFor(/summarizer: offline/, 'the header')
      await waitFor(/pty-session/, 'the conversation list')
      await press('\r')
      await waitFor(/DAG \(\d+ summaries\)/, 'the DAG view')
      await press('w')
      const id = (await waitFor(/Rewrite (sum_[0-9a-f]+) \(condensed d(\d)\)/, 'the preview'))[1]
      await waitFor(/template: condensed-d\d\.tmpl from embedded/, 'the template line')
      await press('\r')
      await waitFor(/Δ tokens: [+-]?\d+/, 'the review')
      await press('y')
      await waitFor(new RegExp(`applied ${id}`), 'the apply')
      await press('q')
      expect(await exited).toBe(0)

      const after = await LcmEngine.open({ dbPath, readOnly: true })
      const d = await after.describe(id)
      if (d.type !== 'summary') throw new Error('not a summary')
      expect(d.content).not.toMatch(/^Model summary of/)
      expect(d.model).toBe('lcm-native/offline')
      expect(d.versions.map((v) => v.reason)).toEqual(['compaction', 'rewrite'])
      const old = d.versions[0].content
      const word = d.content.match(/[A-Za-z][A-Za-z0-9]{5,}/g)?.find((w) => !old.includes(w))
      expect(word).toBeTruthy()
      const hits = await after.grep(conversationId, { query: word!, scope: 'summaries' })
      expect(hits.hits.map((hit) => hit.summaryId)).toContain(id)
      expect((await after.verify()).ok).toBe(true)
      await after.close()
    } finally {
      term.kill()
    }
  })

  it("reads lossless-claw's un-upgraded file through an upgraded copy, as the read commands do, and leaves it as it was", async () => {
    const dbPath = copyFixture('head-theme.db')
    const before = readFileSync(dbPath)
    const { term, exited, waitFor, write: press } = tuiInPty(dbPath, 140, 30)
    try {
      await waitFor(/read through an upgraded copy/, 'the note')
      await waitFor(/read-only/, 'the header')
      await waitFor(/›\s+1\s/, 'the conversation list')
      await press('q')
      expect(await exited).toBe(0)
      expect(readFileSync(dbPath).equals(before)).toBe(true)
    } finally {
      term.kill()
    }
  })

  it('takes every key of one write: jjj moves the cursor three rows', async () => {
    const dbPath = join(tempDir(), 'burst.db')
    const engine = await LcmEngine.open({ dbPath })
    for (let i = 1; i <= 5; i++) await engine.ingest({ sessionId: `burst-${i}` }, [{ role: 'user', content: `conversation ${i}` }])
    await engine.close()

    const { term, exited, waitFor } = tuiInPty(dbPath, 140, 30)
    try {
      // The list drawn with the cursor (›) on the first of the five.
      await waitFor(/›\s+1\s+burst-1\b[\s\S]*burst-5/, 'the conversation list')
      await new Promise((r) => setTimeout(r, 150))
      // Three keys in one write reach the app as one input of three characters.
      term.write('jjj')
      await waitFor(/›\s+4\s+burst-4\b/, 'the cursor on the fourth conversation')
      await new Promise((r) => setTimeout(r, 150))
      term.write('\r')
      await waitFor(/conversation 4: 0 summaries/, 'the fourth conversation opened')
      await new Promise((r) => setTimeout(r, 150))
      term.write('q')
      expect(await exited).toBe(0)
    } finally {
      term.kill()
    }
  })

  it('at 80×24 the keys and the text fit, and a leaf\'s raw messages open from the DAG', async () => {
    const dbPath = join(tempDir(), 'small.db')
    const engine = await LcmEngine.open({ dbPath, leafChunkTokens: 3000, leafTargetTokens: 300, freshTailCount: 16, maxSweepIterations: 200 })
    const { conversationId } = await engine.ingest({ sessionId: 'small-terminal' }, hostMessages(THEME))
    await engine.compact(conversationId, 'offline', { tokenBudget: 6000, force: true })
    await engine.close()

    const { term, exited, waitFor, unread } = tuiInPty(dbPath, 80, 24)
    const pause = () => new Promise((r) => setTimeout(r, 200))
    try {
      // The session column gives way; the numbers and the time stay.
      await waitFor(/small-term\S* +\d+ +\d+ \(\d+(\/\d+)*\) +[\d,]+ +\d{4}-\d\d-\d\d \d\d:\d\d:\d\d/, 'the conversation list')
      await pause()
      term.write('\r')
      // The whole key legend is shown (wrapped), not cut at the edge.
      await waitFor(/DAG \(\d+ summaries\)[\s\S]*esc back · q quit/, 'the DAG view with its whole legend')
      // Down the first root to a leaf's messages row, then open it: `l` expands, `j` steps in.
      for (let i = 0; i < 6 && !/Messages #\d+–#\d+ of sum_/.test(unread()); i++) {
        await pause()
        term.write('lj')
        await pause()
        term.write('l')
        await new Promise((r) => setTimeout(r, 400))
      }
      await waitFor(/Messages #\d+–#\d+ of sum_[0-9a-f]+ \(\d+\)/, "a leaf's raw messages")
      await waitFor(/── #\d+ (user|assistant|toolResult)/, 'a message header')
      await pause()
      term.write('J')
      await waitFor(/lines 11–/, 'a page down')
      await pause()
      term.write('\x1b')
      await waitFor(/esc back · q quit/, 'the DAG again')
      await pause()
      term.write('q')
      expect(await exited).toBe(0)
    } finally {
      term.kill()
    }
  })

  it('needs a terminal, and require(\'lcm-native\') never loads Ink or React', () => {
    const dbPath = join(tempDir(), 'none.db')
    const noTty = spawnSync(process.execPath, [join(ROOT, 'bin', 'lcm-native.cjs'), 'tui', '--db', dbPath], { encoding: 'utf8', stdio: ['pipe', 'pipe', 'pipe'] })
    expect(noTty.status).toBe(1)
    expect(noTty.stderr).toContain('tui needs a terminal')
    const probe = "require('./index.js'); const loaded = Object.keys(require.cache).filter((k) => /node_modules[\\/](ink|react)[\\/]/.test(k)); console.log(loaded.length)"
    const r = spawnSync(process.execPath, ['-e', probe], { cwd: ROOT, encoding: 'utf8' })
    expect(r.stdout.trim()).toBe('0')
  })

  it('without Ink and React installed, says how to add them', async () => {
    // The package as npm installs it for the library or the plugin: no optional peers.
    const pkg = tempDir()
    for (const f of ['index.js', 'package.json', 'openclaw.plugin.json', ...readdirSync(ROOT).filter((f) => f.endsWith('.node'))]) cpSync(join(ROOT, f), join(pkg, f))
    for (const d of ['bin', 'tui', 'plugin']) cpSync(join(ROOT, d), join(pkg, d), { recursive: true })
    const dbPath = join(tempDir(), 'peers.db')
    await (await LcmEngine.open({ dbPath })).close()
    const env: Record<string, string> = { PATH: process.env.PATH ?? '', HOME: tempDir(), TERM: 'xterm-256color' }
    const term = spawn(process.execPath, [join(pkg, 'bin', 'lcm-native.cjs'), 'tui', '--db', dbPath], { cols: 200, rows: 20, env, cwd: pkg })
    let out = ''
    term.onData((d) => (out += d))
    const code = await new Promise<number>((resolve) => term.onExit((e) => resolve(e.exitCode)))
    expect(code).toBe(1)
    expect(out.replace(ANSI, '').replace(/\s+/g, ' ')).toContain('the tui needs Ink and React')
    expect(out).toContain('npm install ink@6 react@19')
    expect(out).toContain('E_MISSING_DEPENDENCY')
  })
})
