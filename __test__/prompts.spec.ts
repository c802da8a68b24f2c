// Prompt templates through the JS surface: resolution order, partial overrides, E_PROMPT.
import { spawnSync } from 'node:child_process'
import { mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

import { describe, expect, it } from 'vitest'

import { LcmEngine, isDatabaseUrl, listPrompts, renderPrompt } from '../index.js'
import { ROOT, rejection, tempDir } from './helpers'

describe('prompts', () => {
  it('lists the four embedded templates by default', async () => {
    const list = await listPrompts({ promptDir: join(tempDir(), 'empty') })
    expect(list.map((p) => p.name)).toEqual(['leaf.tmpl', 'condensed-d1.tmpl', 'condensed-d2.tmpl', 'condensed-d3.tmpl'])
    expect(list.every((p) => p.source === 'embedded' && !p.overridden)).toBe(true)
  })

  it('a prompt override in a temp directory overrides exactly one depth', async () => {
    const dir = tempDir()
    writeFileSync(join(dir, 'condensed-d2.tmpl'), 'CUSTOM d{{.Depth}} for {{.ChildCount}} inputs, {{.TargetTokens}} tokens\n{{.SourceText}}')
    const list = await listPrompts({ promptDir: dir })
    expect(list.filter((p) => p.overridden).map((p) => p.name)).toEqual(['condensed-d2.tmpl'])
    expect(list[2].source).toBe(join(dir, 'condensed-d2.tmpl'))
    expect(await renderPrompt('condensed-d2', { childCount: 4, targetTokens: 900, sourceText: 'SRC' }, { promptDir: dir })).toBe(
      'CUSTOM d2 for 4 inputs, 900 tokens\nSRC',
    )
    const d1 = await renderPrompt('d1', { sourceText: 'SRC' }, { promptDir: dir })
    expect(d1).toContain('<conversation_to_condense>\nSRC\n</conversation_to_condense>')
    // The engine uses it for depth-2 outputs only.
    const engine = await LcmEngine.open({ dbPath: join(tempDir(), 'p.db'), promptDir: dir, leafChunkTokens: 200, leafMinFanout: 2, condensedMinFanout: 2, condensedTargetTokens: 10, freshTailCount: 2, maxSweepIterations: 1000 })
    const msgs = Array.from({ length: 40 }, (_, i) => ({ role: (i % 2 ? 'assistant' : 'user') as 'user', content: `m${i} ${'word '.repeat(60)}` }))
    const { conversationId } = await engine.ingest({ sessionId: 's' }, msgs)
    const prompts: [number, string][] = []
    await engine.compact(conversationId, async (prompt, r) => {
      prompts.push([r.depth, prompt])
      return `d${r.depth} ${"summary words ".repeat(12)}\nExpand for details about: x`
    }, { tokenBudget: 50, force: true })
    const byDepth = (d: number) => prompts.filter(([depth]) => depth === d).map(([, p]) => p)
    expect(byDepth(2).length).toBeGreaterThan(0)
    expect(byDepth(2).every((p) => p.startsWith('CUSTOM d2'))).toBe(true)
    expect([...byDepth(0), ...byDepth(1)].some((p) => p.startsWith('CUSTOM'))).toBe(false)
    await engine.close()
  })

  it('renders with the seed variables and rejects unknown ones', async () => {
    const leaf = await renderPrompt('leaf', { previousContext: 'PREV', aggressive: true, targetTokens: 321, customInstructions: 'Be kind.' })
    expect(leaf).toContain('<previous_context>\nPREV\n</previous_context>')
    expect(leaf).toContain('about 321 tokens')
    expect(leaf).toContain('Operator instructions:\nBe kind.')
    expect((await rejection(renderPrompt('leaf', { nope: 1 } as never))).code).toBe('E_INVALID_INPUT')
    expect((await rejection(renderPrompt('d9'))).code).toBe('E_INVALID_INPUT')
  })

  it('renders the length compaction asks for with the engine options it is given', async () => {
    expect(await renderPrompt('leaf')).toContain('about 1200 tokens')
    expect(await renderPrompt('leaf', {}, { engine: { leafTargetTokens: 700 } })).toContain('about 700 tokens')
    expect(await renderPrompt('d1', {}, { engine: {} })).toContain('about 2000 tokens')
    // A condensed summary is asked for at least 512 tokens, as compaction asks.
    expect(await renderPrompt('d2', {}, { engine: { condensedTargetTokens: 100 } })).toContain('about 512 tokens')
    // The variables win; the options are checked as `open` checks them.
    expect(await renderPrompt('leaf', { targetTokens: 321 }, { engine: { leafTargetTokens: 700 } })).toContain('about 321 tokens')
    const bad = await rejection(renderPrompt('leaf', {}, { engine: { leafTargetTokns: 700 } as never }))
    expect(bad.code).toBe('E_INVALID_CONFIG')
  })

  it('tells a PostgreSQL URL from a file path as open does, the scheme in any case', () => {
    for (const url of ['postgres://u@h/db', 'postgresql://u@h/db', 'POSTGRES://u@h/db']) expect(isDatabaseUrl(url)).toBe(true)
    for (const path of ['/tmp/lcm.db', 'postgres', './postgres://x', '']) expect(isDatabaseUrl(path)).toBe(false)
  })

  it('a template that does not parse fails open with E_PROMPT naming the file', async () => {
    const dir = tempDir()
    writeFileSync(join(dir, 'leaf.tmpl'), 'Summarize {{if .SourceText}} without end')
    const err = await rejection(LcmEngine.open({ dbPath: join(tempDir(), 'x.db'), promptDir: dir }))
    expect(err.code).toBe('E_PROMPT')
    expect(err.message).toContain(join(dir, 'leaf.tmpl'))
    expect((await rejection(listPrompts({ promptDir: dir }))).code).toBe('E_PROMPT')
  })

  it('a hostile override renders within bounds or fails with E_PROMPT naming the file, never taking the process down', () => {
    const cases: Record<string, (dir: string) => void> = {
      recursion: (d) => writeFileSync(join(d, 'leaf.tmpl'), '{{define "r"}}{{template "r" .}}{{end}}{{template "r" .}}'),
      'mutual recursion': (d) => writeFileSync(join(d, 'leaf.tmpl'), '{{define "a"}}{{template "b" .}}{{end}}{{define "b"}}{{template "a" .}}{{end}}{{template "a" .}}'),
      'huge printf width': (d) => writeFileSync(join(d, 'leaf.tmpl'), '{{printf "%999999999d" 1}}'),
      'output past the cap': (d) => writeFileSync(join(d, 'leaf.tmpl'), `{{$a := printf "%1000000d" 1}}${'{{$a}}'.repeat(200)}`),
      'a directory': (d) => mkdirSync(join(d, 'leaf.tmpl')),
      'a FIFO': (d) => spawnSync('mkfifo', [join(d, 'leaf.tmpl')]),
      'a huge file': (d) => writeFileSync(join(d, 'leaf.tmpl'), 'x'.repeat(300 * 1024)),
    }
    for (const [name, make] of Object.entries(cases)) {
      const dir = tempDir()
      make(dir)
      const script = `
        const { renderPrompt, LcmEngine } = require(${JSON.stringify(join(ROOT, 'index.js'))})
        const out = {}
        renderPrompt('leaf', {}, { promptDir: ${JSON.stringify(dir)} })
          .then((t) => (out.text = t.length), (e) => { out.code = e.code; out.message = e.message })
          .then(() => LcmEngine.open({ dbPath: ${JSON.stringify(join(dir, 'x.db'))}, promptDir: ${JSON.stringify(dir)} }))
          .then(() => (out.open = 'opened'), (e) => (out.open = e.code))
          .then(() => console.log(JSON.stringify(out)))`
      const started = Date.now()
      const r = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 20_000 })
      expect(r.status, `${name}: ${r.stderr}`).toBe(0)
      expect(Date.now() - started, name).toBeLessThan(15_000)
      const out = JSON.parse(r.stdout)
      if (name === 'huge printf width') {
        expect(out.text, name).toBe('%!(BADWIDTH)1'.length)
        expect(out.open, name).toBe('opened')
        continue
      }
      expect(out.code, name).toBe('E_PROMPT')
      expect(out.message, name).toContain(join(dir, 'leaf.tmpl'))
      expect(out.open, name).toBe('E_PROMPT')
    }
  })

  it('honours ~/.config/lcm-tui/prompts after promptDir', () => {
    const home = tempDir()
    const user = join(home, '.config', 'lcm-tui', 'prompts')
    mkdirSync(user, { recursive: true })
    writeFileSync(join(user, 'condensed-d3.tmpl'), 'FROM HOME {{.Depth}}')
    writeFileSync(join(user, 'leaf.tmpl'), 'HOME LEAF')
    const explicit = tempDir()
    writeFileSync(join(explicit, 'leaf.tmpl'), 'EXPLICIT LEAF')
    const script = `const { listPrompts, renderPrompt } = require(${JSON.stringify(join(ROOT, 'index.js'))});
      (async () => {
        const list = await listPrompts({ promptDir: ${JSON.stringify(explicit)} });
        console.log(JSON.stringify({ list, d3: await renderPrompt('d3'), leaf: await renderPrompt('leaf', {}, { promptDir: ${JSON.stringify(explicit)} }) }));
      })()`
    const child = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', env: { ...process.env, HOME: home } })
    expect(child.status, child.stderr).toBe(0)
    const out = JSON.parse(child.stdout)
    expect(out.d3).toBe('FROM HOME 3')
    expect(out.leaf).toBe('EXPLICIT LEAF')
    expect(out.list.map((p: { source: string }) => p.source)).toEqual([join(explicit, 'leaf.tmpl'), 'embedded', 'embedded', join(user, 'condensed-d3.tmpl')])
  })
})
