// The TUI's screens and keys (ink-testing-library) on a real engine over the theme transcript,
// with a stub summarizer the test releases: conversations and filter, the DAG view, `w`
// (preview → inflight → review → apply / discard, cancel, errors), `W` (plan, progress, stop,
// completion) and the fallback list. The pure tree helpers are tested first.
import { mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

import { render } from 'ink-testing-library'
import { createElement as h } from 'react'
import { afterEach, describe, expect, it } from 'vitest'

import { type DagNode, LcmEngine, type Summarize } from '../index.js'
import { App } from '../tui/app.mjs'
import { TuiSession } from '../tui/session.mjs'
import { deltaText, planText, subtreePlan, indexDag, timeRange, visibleRows } from '../tui/tree.mjs'
import { THEME, hostMessages, tempDir } from './helpers'

const ENTER = '\r'
const ESC = '\u001B'

/** The theme transcript compacted offline to depth 2 (its first root is a d2 node). */
async function compactedDb(summarize: Summarize = 'offline'): Promise<string> {
  const dbPath = join(tempDir(), 'tui.db')
  const engine = await LcmEngine.open({
    dbPath,
    leafChunkTokens: 3000,
    leafTargetTokens: 300,
    condensedTargetTokens: 80,
    freshTailCount: 16,
    leafMinFanout: 4,
    condensedMinFanout: 4,
    maxSweepIterations: 200,
  })
  const { conversationId } = await engine.ingest({ sessionId: 'tui-session' }, hostMessages(THEME))
  await engine.ingest({ sessionKey: 'agent:main:other' }, [{ role: 'user', content: 'another conversation' }])
  await engine.compact(conversationId, summarize, { tokenBudget: 4000, force: true })
  await engine.close()
  return dbPath
}

/** A summarizer whose calls wait until the test answers them. */
function gate() {
  const waiting: { resolve: (s: string) => void; reject: (e: Error) => void; signal?: AbortSignal; prompt: string }[] = []
  let signal: AbortSignal | undefined
  const summarizerFor = (s?: AbortSignal): Summarize => {
    signal = s
    return (prompt) =>
      new Promise<string>((resolve, reject) => {
        waiting.push({ resolve, reject, signal: s, prompt })
      })
  }
  return { waiting, summarizerFor, lastSignal: () => signal }
}

const sessions: TuiSession[] = []
const apps: { unmount(): void }[] = []
afterEach(async () => {
  for (const a of apps.splice(0)) a.unmount()
  for (const s of sessions.splice(0)) await s.close().catch(() => {})
})

async function start(dbPath: string, summarizerFor: (s?: AbortSignal) => Summarize, Engine: { open(config: object): Promise<LcmEngine> } = LcmEngine) {
  const session = await TuiSession.open({ Engine, dbPath, summarizerFor, model: 'stub-model', describe: 'stub' })
  sessions.push(session)
  const app = render(h(App, { session, dbPath, summarizer: 'stub' }))
  apps.push(app)
  const frame = () => app.lastFrame() ?? ''
  const until = async (pred: (f: string) => boolean, what: string) => {
    const deadline = Date.now() + 10_000
    while (!pred(frame())) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; screen:\n${frame()}`)
      await new Promise((r) => setTimeout(r, 20))
    }
    return frame()
  }
  // Ink re-subscribes the key handler after each render: a key written in the same tick as
  // the frame it reacts to would reach the previous render's handler.
  const press = async (...keys: string[]) => {
    for (const k of keys) {
      await new Promise((r) => setTimeout(r, 40))
      app.stdin.write(k)
    }
    await new Promise((r) => setTimeout(r, 40))
  }
  return { session, app, frame, until, press }
}

/** Opens conversation 1 and moves to its first depth-1 node (the first root). */
async function openDag(t: Awaited<ReturnType<typeof start>>) {
  await t.until((f) => f.includes('tui-session'), 'the conversation list')
  await t.press(ENTER)
  return t.until((f) => f.includes('DAG ('), 'the DAG view')
}

/** Opens the DAG and `w` on its first root; returns the summary's id and text before. */
async function openPreview(t: Awaited<ReturnType<typeof start>>, dbPath: string) {
  await openDag(t)
  await t.press('w')
  const f = await t.until((f) => f.includes('template:'), 'the preview')
  const id = /Rewrite (sum_[0-9a-f]+)/.exec(f)![1]
  return { id, before: (await readSummary(dbPath, id)).content }
}

async function readSummary(dbPath: string, summaryId: string) {
  const engine = await LcmEngine.open({ dbPath, readOnly: true })
  try {
    const d = await engine.describe(summaryId)
    if (d.type !== 'summary') throw new Error('not a summary')
    return d
  } finally {
    await engine.close()
  }
}

describe('tree helpers', () => {
  const node = (id: string, depth: number, inputs: string[], consumedBy: string | null, extra: Partial<DagNode> = {}): DagNode =>
    ({
      summaryId: id,
      kind: depth === 0 ? 'leaf' : 'condensed',
      depth,
      content: id,
      tokenCount: 10 * (depth + 1),
      earliestAt: '2026-02-17T15:37:00.000Z',
      latestAt: '2026-02-17T16:02:00.000Z',
      descendantCount: inputs.length,
      descendantTokenCount: 0,
      sourceMessageTokenCount: 0,
      model: 'm',
      conversationId: 1,
      createdAt: '',
      fallback: false,
      fidelity: null,
      lowFidelity: false,
      inputs,
      consumedBy,
      live: consumedBy === null,
      messages: { count: depth === 0 ? 3 : 6, firstSeq: 1, lastSeq: depth === 0 ? 3 : 6 },
      ...extra,
    }) as DagNode
  const nodes = [node('c', 1, ['a', 'b'], null), node('a', 0, [], 'c'), node('b', 0, [], 'c', { fallback: true })]

  it('roots first, inputs beneath an expanded node, a leaf\'s messages beneath it', () => {
    expect(visibleRows(nodes, new Set()).map((r) => r.key)).toEqual(['c'])
    expect(visibleRows(nodes, new Set(['c'])).map((r) => [r.key, r.level])).toEqual([
      ['c', 0],
      ['a', 1],
      ['b', 1],
    ])
    expect(visibleRows(nodes, new Set(['c', 'a'])).map((r) => r.key)).toEqual(['c', 'a', 'a/messages', 'b'])
    expect(visibleRows(nodes, new Set(), true).map((r) => r.key)).toEqual(['b'])
    // A damaged file's cycle is drawn once.
    const cyclic = [node('x', 1, ['y'], null), node('y', 1, ['x'], 'x')]
    expect(visibleRows(cyclic, new Set(['x', 'y'])).map((r) => r.key)).toEqual(['x', 'y'])
  })

  it('plans a subtree and says it as the seed does', () => {
    const plan = subtreePlan(indexDag(nodes), 'c')
    expect(plan.ids.sort()).toEqual(['a', 'b', 'c'])
    expect(planText(plan)).toBe('Rewrite 3 summaries (2 leaves, 1 d1)?')
    expect(planText(subtreePlan(indexDag(nodes), 'a'))).toBe('Rewrite 1 summary (1 leaf)?')
    expect(deltaText(1523, 1401)).toBe('Δ tokens: -122 (1,523 → 1,401)')
    expect(deltaText(1878, 11878)).toBe('Δ tokens: +10,000 (1,878 → 11,878)')
    expect(timeRange('2026-02-17T15:37:00Z', '2026-02-17T16:02:00Z')).toBe('2026-02-17 15:37–16:02')
    expect(timeRange(null, null)).toBe('—')
  })
})

describe('tui', () => {
  it('lists conversations, filters them by typing, and opens one', async () => {
    const t = await start(await compactedDb(), gate().summarizerFor)
    let f = await t.until((f) => f.includes('tui-session'), 'the list')
    expect(f).toContain('agent:main:other')
    expect(f).toMatch(/summaries \(d0\/d1\/…\)/)
    expect(f).toContain('read-only')
    await t.press('/', 'o', 't', 'h')
    f = await t.until((f) => !f.includes('tui-session'), 'the filter')
    expect(f).toContain('agent:main:other')
    await t.press(ESC)
    await t.until((f) => f.includes('tui-session'), 'the filter cleared')
    await t.press(ENTER)
    f = await t.until((f) => f.includes('DAG ('), 'the DAG')
    expect(f).toMatch(/▸ sum_[0-9a-f]+ d2/)
    await t.press(ESC)
    await t.until((f) => f.includes('agent:main:other'), 'back to the list')
    // A resize is drawn at once, without a key: a narrow list shortens its header.
    Object.defineProperty(t.app.stdout, 'columns', { value: 80, configurable: true })
    t.app.stdout.emit('resize')
    f = await t.until((f) => !/summaries \(d0\/d1\/…\)/.test(f), 'the narrow layout after a resize')
    expect(f).toContain('summaries')
  })

  it('moves, expands and collapses the DAG, and scrolls the detail pane', async () => {
    const t = await start(await compactedDb(), gate().summarizerFor)
    let f = await openDag(t)
    expect(f).toContain('covered by: — (a root)')
    // d2 → its first d1 input → that one's first leaf → the leaf's messages.
    await t.press('l')
    f = await t.until((f) => /\n\s+▸ sum_[0-9a-f]+ d1/.test(f), 'the d2 node expanded')
    await t.press('j', 'l')
    f = await t.until((f) => /\n\s+▸ sum_[0-9a-f]+ d0/.test(f), 'the d1 node expanded')
    await t.press('j')
    f = await t.until((f) => f.includes('inputs: — (a leaf)'), 'a leaf selected')
    expect(f).toMatch(/covered by: sum_[0-9a-f]+/)
    await t.press('l')
    f = await t.until((f) => /messages #\d+–#\d+ \(\d+\)/.test(f), 'the leaf\'s messages')
    const lines = Number(/lines 1–\d+ of (\d+)/.exec(f)?.[1])
    // h on a collapsed child goes to the node above it; h on an expanded node collapses it.
    await t.press('h', 'h', 'h', 'h')
    f = await t.until((f) => f.includes('covered by: — (a root)'), 'back on the root')
    await t.press('h')
    f = await t.until((f) => !f.includes('▾ sum_'), 'collapsed')
    // J/K scroll the selected summary's text when it is longer than the pane: a short
    // terminal makes the root's text longer than its pane.
    expect(lines).toBeGreaterThan(0)
    expect(/lines (\d+)–/.exec(f)?.[1]).toBe('1')
    Object.defineProperty(t.app.stdout, 'rows', { value: 14, configurable: true })
    await t.press('J')
    f = await t.until((f) => Number(/lines (\d+)–\d+ of \d+/.exec(f)?.[1]) > 1, 'the text scrolled')
    await t.press('K')
    await t.until((f) => /lines 1–\d+ of \d+/.test(f), 'the text scrolled back')
  })

  it('w: preview, inflight, review with a diff, apply — written as rewrite --apply writes it', async () => {
    const dbPath = await compactedDb()
    const g = gate()
    const t = await start(dbPath, g.summarizerFor)
    await openDag(t)
    await t.press('w')
    let f = await t.until((f) => f.includes('template:'), 'the preview')
    const id = /Rewrite (sum_[0-9a-f]+) \(condensed d2\) with the d2 prompt/.exec(f)?.[1]
    expect(id).toBeTruthy()
    expect(f).toContain('template: condensed-d2.tmpl from embedded')
    expect(f).toMatch(/source: \d+ summaries, ~[\d,]+ tokens/)
    expect(f).toMatch(/prompt: ~[\d,]+ tokens · target [\d,]+ tokens/)
    const preview = await (await LcmEngine.open({ dbPath, readOnly: true })).rewritePreview(1, id!)
    await t.press(ENTER)
    f = await t.until((f) => f.includes(`Rewriting ${id} with d2 prompt…`), 'the inflight phase')
    await t.until(() => g.waiting.length === 1, 'the call')
    expect(g.waiting[0].prompt).toBe(preview.prompt)
    g.waiting[0].resolve('The new condensed text zqxtuinew.\nExpand for details about: tui')
    f = await t.until((f) => f.includes('Δ tokens:'), 'the review')
    expect(f).toContain('OLD (')
    expect(f).toContain('NEW (')
    expect(f).toContain('zqxtuinew')
    await t.press('d')
    // The diff wraps its long lines (each keeping its marker): page down to the new text.
    f = await t.until((f) => f.includes('--- sum_'), 'the diff')
    for (let i = 0; i < 40 && !f.includes('+The new condensed text zqxtuinew.'); i++) {
      await t.press('J')
      f = t.frame()
    }
    expect(f).toContain('+The new condensed text zqxtuinew.')
    expect(f.split('\n').filter((l) => /^[+-]/.test(l)).length).toBeGreaterThan(0)
    expect(t.session.mode).toBe('read-only')
    await t.press('y')
    f = await t.until((f) => f.includes(`applied ${id}`), 'the apply')
    expect(f).toContain('writable')
    // v lists the summary's versions: what compaction wrote, then this rewrite.
    await t.press('v')
    f = await t.until((f) => f.includes(`Versions of ${id} (2)`), 'the versions')
    expect(f).toMatch(/v1 {2}compaction .* lcm-native\/offline/)
    expect(f).toMatch(/v2 \(current\) {2}rewrite .* stub-model {2}condensed-d2\.tmpl/)
    expect(f).toContain('    The new condensed text zqxtuinew.')
    await t.press(ESC)
    await t.until((f) => f.includes('DAG ('), 'the DAG again')
    const d = await readSummary(dbPath, id!)
    expect(d.content).toContain('zqxtuinew')
    expect(d.model).toBe('stub-model')
    expect(d.versions.map((v) => v.reason)).toEqual(['compaction', 'rewrite'])
    const engine = await LcmEngine.open({ dbPath, readOnly: true })
    expect((await engine.grep(1, { query: 'zqxtuinew', scope: 'summaries' })).hits.map((hit) => hit.summaryId)).toEqual([id])
    expect((await engine.verify()).ok).toBe(true)
    await engine.close()
  })

  it('w: discard leaves the summary and the file as they were', async () => {
    const dbPath = await compactedDb()
    const g = gate()
    const t = await start(dbPath, g.summarizerFor)
    const { id, before } = await openPreview(t, dbPath)
    // J/K scroll the rendered prompt.
    expect(t.frame()).toMatch(/prompt lines 1–\d+ of \d+/)
    await t.press('J', 'J')
    await t.until((f) => /prompt lines 11–\d+ of \d+/.test(f), 'the prompt scrolled')
    await t.press('K')
    await t.until((f) => /prompt lines 6–\d+ of \d+/.test(f), 'the prompt scrolled back')
    await t.press(ENTER)
    await t.until(() => g.waiting.length === 1, 'the call')
    g.waiting[0].resolve('Discard me zqxdiscard.\nExpand for details about: x')
    await t.until((f) => f.includes('Δ tokens:'), 'the review')
    await t.press('n')
    await t.until((f) => f.includes(`discarded: ${id} was left as it was`), 'the discard')
    expect(t.session.mode).toBe('read-only')
    expect((await readSummary(dbPath, id)).content).toBe(before)
    // esc in the preview closes it too.
    await t.press('w')
    await t.until((f) => f.includes('template:'), 'the preview again')
    await t.press(ESC)
    await t.until((f) => f.includes('DAG ('), 'the DAG again')
  })

  it('w: esc during the call cancels it through its signal and writes nothing', async () => {
    const dbPath = await compactedDb()
    const g = gate()
    const t = await start(dbPath, g.summarizerFor)
    const { id, before } = await openPreview(t, dbPath)
    await t.press(ENTER)
    await t.until(() => g.waiting.length === 1, 'the call')
    expect(g.lastSignal()?.aborted).toBe(false)
    await t.press(ESC)
    await t.until((f) => f.includes(`cancelled: ${id} was left as it was`), 'the cancel')
    expect(g.lastSignal()?.aborted).toBe(true)
    // The stub answers late: nothing is shown or written.
    g.waiting[0].resolve('Too late zqxlate.\nExpand for details about: x')
    await new Promise((r) => setTimeout(r, 200))
    expect(t.frame()).not.toContain('Δ tokens:')
    expect((await readSummary(dbPath, id)).content).toBe(before)
    expect(t.session.mode).toBe('read-only')
  })

  it('w: an apply that cannot open the file for writing shows the coded error and stays read-only', async () => {
    const dbPath = await compactedDb()
    const g = gate()
    // The file opens read-only, but another writer holds it when the apply reopens it.
    const Engine = {
      open: (config: { readOnly?: boolean }) =>
        config.readOnly ? LcmEngine.open(config as Parameters<typeof LcmEngine.open>[0]) : Promise.reject<LcmEngine>(Object.assign(new Error('database is locked'), { code: 'E_BUSY' })),
    }
    const t = await start(dbPath, g.summarizerFor, Engine)
    const { id, before } = await openPreview(t, dbPath)
    await t.press(ENTER)
    await t.until(() => g.waiting.length === 1, 'the call')
    g.waiting[0].resolve('Never written zqxlocked.\nExpand for details about: x')
    await t.until((f) => f.includes('Δ tokens:'), 'the review')
    await t.press('y')
    await t.until((f) => f.includes('E_BUSY: database is locked'), 'the error')
    expect(t.frame()).toContain('read-only')
    expect(t.session.mode).toBe('read-only')
    expect((await readSummary(dbPath, id)).content).toBe(before)
  })

  it('w: a failing summarizer or a broken template shows the coded error and changes nothing', async () => {
    const dbPath = await compactedDb()
    const g = gate()
    const t = await start(dbPath, g.summarizerFor)
    const { id, before } = await openPreview(t, dbPath)
    await t.press(ENTER)
    await t.until(() => g.waiting.length === 1, 'the call')
    g.waiting[0].reject(new Error('provider exploded'))
    await t.until((f) => /E_SUMMARIZER: .*provider exploded/.test(f), 'the error')
    expect((await readSummary(dbPath, id)).content).toBe(before)

    const prompts = join(tempDir(), 'prompts')
    mkdirSync(prompts)
    writeFileSync(join(prompts, 'condensed-d1.tmpl'), 'broken {{.NoSuchVariable}}')
    const broken = await TuiSession.open({ Engine: LcmEngine, dbPath, promptDir: prompts, summarizerFor: g.summarizerFor, model: 'm', describe: 'stub' })
    sessions.push(broken)
    await expect(broken.preview(1, id)).rejects.toMatchObject({ code: 'E_PROMPT' })
  })

  it('W: plan, progress bottom-up with each result written, and completion', async () => {
    const dbPath = await compactedDb()
    const answered: string[] = []
    const summarizerFor = (): Summarize => async (_prompt, request) => {
      answered.push(`d${request.depth}`)
      return `Subtree rewrite d${request.depth} zqxsubtree.\nExpand for details about: x`
    }
    const t = await start(dbPath, summarizerFor)
    await openDag(t)
    await t.press('W')
    let f = await t.until((f) => f.includes('[y/n]'), 'the plan')
    const m = /Rewrite (\d+) summaries \((\d+) leaves, (\d+) d1, 1 d2\)\? \[y\/n\]  \((sum_[0-9a-f]+) and everything/.exec(f)
    expect(m).toBeTruthy()
    const [total, leaves, d1, root] = [Number(m![1]), Number(m![2]), Number(m![3]), m![4]]
    expect(total).toBe(leaves + d1 + 1)
    await t.press('y')
    f = await t.until((f) => f.includes('Rewrote '), 'the end')
    expect(f).toContain(`Rewrote ${total} of ${total} summaries`)
    expect(f).toMatch(/subtree [\d,]+ → [\d,]+ tokens/)
    // Bottom-up: every leaf, then every d1 node, then the root.
    expect(answered).toEqual([...Array(leaves).fill('d0'), ...Array(d1).fill('d1'), 'd2'])
    const d = await readSummary(dbPath, root)
    expect(d.content).toContain('Subtree rewrite d2')
    for (const input of d.inputs) expect((await readSummary(dbPath, input.summaryId)).content).toContain('Subtree rewrite d1')
    await t.press(ENTER)
    await t.until((f) => f.includes('DAG ('), 'the DAG again')
  })

  it('W: esc stops after the current summary; what was written stays', async () => {
    const dbPath = await compactedDb()
    const g = gate()
    const t = await start(dbPath, g.summarizerFor)
    await openDag(t)
    await t.press('W')
    const f = await t.until((f) => f.includes('[y/n]'), 'the plan')
    const total = Number(/Rewrite (\d+) summaries/.exec(f)![1])
    await t.press('n')
    await t.until((f) => f.includes('DAG ('), 'the plan declined')
    await t.press('W')
    await t.until((f) => f.includes('[y/n]'), 'the plan again')
    await t.press('y')
    await t.until(() => g.waiting.length === 1, 'the first call')
    await t.until((f) => f.includes(`Rewriting 1/${total}:`), 'the progress')
    g.waiting[0].resolve('First of the subtree zqxfirst.\nExpand for details about: x')
    await t.until(() => g.waiting.length === 2, 'the second call')
    await t.until((f) => f.includes(`Rewriting 2/${total}:`), 'the progress')
    await t.press(ESC)
    await t.until((f) => f.includes('stopping after this one'), 'stopping')
    g.waiting[1].resolve('Second of the subtree zqxsecond.\nExpand for details about: x')
    const done = await t.until((f) => f.includes('Stopped after'), 'the stop')
    expect(done).toContain(`Stopped after 2 of ${total}`)
    expect(g.waiting).toHaveLength(2)
    const engine = await LcmEngine.open({ dbPath, readOnly: true })
    expect((await engine.grep(1, { query: 'zqxfirst', scope: 'summaries' })).hits).toHaveLength(1)
    expect((await engine.grep(1, { query: 'zqxsecond', scope: 'summaries' })).hits).toHaveLength(1)
    expect((await engine.verify()).ok).toBe(true)
    await engine.close()
  })

  it('f lists the fallback summaries to repair', async () => {
    // A summarizer that answers nothing leaves deterministic fallbacks in the DAG.
    const dbPath = await compactedDb(async () => '')
    const t = await start(dbPath, gate().summarizerFor)
    await openDag(t)
    await t.press('f')
    const f = await t.until((f) => f.includes('Fallback summaries ('), 'the fallback list')
    const n = Number(/Fallback summaries \((\d+)\)/.exec(f)![1])
    expect(n).toBeGreaterThan(0)
    expect(f).toContain('[fallback]')
    expect(f).toMatch(/\d+ fallback summar(y|ies): w or W repairs one/)
    await t.press('f')
    await t.until((f) => f.includes('DAG ('), 'the DAG again')
  })
})

describe('stored text with bidi controls', () => {
  const RLO = '\u202E'
  const SHOWN = '⟨U+202E⟩'
  /** SHOWN in a regular expression. */
  const SHOWN_RE = '⟨U\\+202E⟩'
  const ID = `call_${RLO}7`
  const NAME = `read${RLO}file`

  /**
   * The embeddings, overrides and isolates a line leaves open at its end (a terminal has no
   * element to end them at: whatever follows on the line would be drawn inside them).
   */
  function leftOpen(line: string): string[] {
    const open: string[] = []
    for (const c of line) {
      if (c >= '\u202A' && c <= '\u202E' && c !== '\u202C') open.push(c)
      else if (c === '\u202C' && open.length > 0 && open[open.length - 1] < '\u2066') open.pop()
      else if (c >= '\u2066' && c <= '\u2068') open.push(c)
      else if (c === '\u2069') {
        let at = open.length - 1
        while (at >= 0 && open[at] < '\u2066') at--
        if (at >= 0) open.length = at
      }
    }
    return open
  }

  it("a tool call's id and name, the session key and the texts: controls shown, none left open on a line", async () => {
    const dbPath = join(tempDir(), 'bidi.db')
    const engine = await LcmEngine.open({ dbPath, leafChunkTokens: 400, leafTargetTokens: 120, freshTailCount: 2, leafMinFanout: 2 })
    const filler = Array.from({ length: 6 }, (_, i) => [
      { role: 'user' as const, content: `question ${i}: ${'lorem ipsum dolor '.repeat(30)}` },
      { role: 'assistant' as const, content: [{ type: 'text' as const, text: `answer ${i} ${'sit amet '.repeat(30)}` }] },
    ]).flat()
    const { conversationId } = await engine.ingest({ sessionKey: `agent:main:${RLO}bidi` }, [
      { role: 'user', content: `look at the notes ${RLO}please` },
      { role: 'assistant', content: [{ type: 'text', text: `Reading it ${RLO}from the left` }, { type: 'toolCall', id: ID, name: NAME, arguments: { path: `notes${RLO}.md` } }] },
      { role: 'toolResult', toolCallId: ID, toolName: NAME, content: [{ type: 'text', text: `result ${RLO}reversed inside` }] },
      ...filler,
    ])
    await engine.compact(conversationId, 'offline', { tokenBudget: 600, force: true })
    await engine.close()

    const t = await start(dbPath, gate().summarizerFor)
    // On every screen, the text after a field on its line is drawn outside any override the
    // field began.
    const seen = (f: string) => {
      expect(f.split('\n').filter((l) => leftOpen(l).length > 0)).toEqual([])
      return f
    }
    let f = seen(await t.until((f) => f.includes('agent:main:'), 'the conversation list'))
    expect(f).toContain(`agent:main:${SHOWN}bidi`)
    await t.press(ENTER)
    seen(await t.until((f) => f.includes('DAG ('), 'the DAG view'))
    // Down the first inputs to the oldest leaf's messages row, and open it.
    for (let i = 0; i < 8 && !t.frame().includes('enter messages'); i++) {
      await t.press('l')
      seen(t.frame())
      await t.press('j')
      seen(t.frame())
    }
    await t.press(ENTER)
    f = seen(await t.until((f) => f.includes('[tool call:'), "the leaf's messages"))
    const lines = f.split('\n')
    expect(lines.find((l) => l.includes('[tool call:'))).toMatch(new RegExp(`\\[tool call: read${SHOWN_RE}file\\] \\{"path":"notes${SHOWN_RE}\\.md"\\}`))
    expect(lines.find((l) => l.includes('toolResult'))).toMatch(new RegExp(`── #3 toolResult \\(call_${SHOWN_RE}7\\) · \\S+ · \\d+ tokens$`))
    expect(lines.find((l) => l.includes('Reading it'))).toBe(`Reading it ${SHOWN}from the left`)
  })
})
