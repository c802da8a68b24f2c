// The TUI's reducer without Ink: Ink's input as key events (a burst of printable keys is
// one key each), cursor movement and its bounds, expand/collapse, the filter, the dialogs,
// the effects of the keys that load, rewrite, apply and quit, and the events their results
// come back as.
import { describe, expect, it } from 'vitest'

import type { ConversationInfo, DagNode, RewriteEntry, RewritePreview, RewriteProgress, SummaryVersion } from '../index.js'
import { type Effect, type Event, type InkKey, type State, initialState, keysOf, reduce, shownConversations, treeRows } from '../tui/state.mjs'

const ENTER: InkKey = { return: true }
const ESC: InkKey = { escape: true, meta: true }
const DOWN: InkKey = { downArrow: true }
const UP: InkKey = { upArrow: true }
const LEFT: InkKey = { leftArrow: true }
const RIGHT: InkKey = { rightArrow: true }
const BACKSPACE: InkKey = { delete: true }
const CTRL_C: InkKey = { ctrl: true }

/**
 * Reduces what Ink hands the input handler, in order: a string is one write of printable keys
 * (Ink's `input`), an object a named key. Returns the last state and every effect.
 */
function press(state: State, ...inputs: (string | InkKey)[]) {
  const effects: Effect[] = []
  for (const input of inputs) {
    const keys = typeof input === 'string' ? keysOf(input, {}) : keysOf(input === CTRL_C ? 'c' : '', input)
    for (const key of keys) {
      const r = reduce(state, { type: 'key', key })
      state = r.state
      effects.push(...r.effects)
    }
  }
  return { state, effects }
}

/** Applies result events; returns the last state and every effect. */
function feed(state: State, ...events: Event[]) {
  const effects: Effect[] = []
  for (const event of events) {
    const r = reduce(state, event)
    state = r.state
    effects.push(...r.effects)
  }
  return { state, effects }
}

const node = (id: string, depth: number, inputs: string[], consumedBy: string | null, extra: Partial<DagNode> = {}): DagNode =>
  ({
    summaryId: id,
    kind: depth === 0 ? 'leaf' : 'condensed',
    depth,
    content: `text of ${id}`,
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
    messages: { count: 3, firstSeq: 1, lastSeq: 3 },
    ...extra,
  }) as DagNode

// c (d2) ← b1 (d1) ← a1, a2 [fallback]; c ← b2 (d1) ← a3; and r, a leaf nothing consumed.
const DAG = [
  node('c', 2, ['b1', 'b2'], null),
  node('b1', 1, ['a1', 'a2'], 'c'),
  node('b2', 1, ['a3'], 'c'),
  node('a1', 0, [], 'b1'),
  node('a2', 0, [], 'b1', { fallback: true }),
  node('a3', 0, [], 'b2'),
  node('r', 0, [], null),
]

const conversation = (id: number, sessionId: string, sessionKey: string | null = null): ConversationInfo => ({
  conversationId: id,
  sessionId,
  sessionKey,
  messageCount: 3,
  messageTokens: 100,
  summaryCount: 0,
  summariesByDepth: [],
  contextItemCount: 3,
  createdAt: '',
  updatedAt: '',
  firstMessageAt: null,
  lastMessageAt: null,
  promptCache: null,
})
const CONVERSATIONS = [conversation(1, 'tui-session'), conversation(2, 'other', 'agent:main:other'), conversation(3, 'third')]

const entry = (summaryId: string, extra: Partial<RewriteEntry> = {}): RewriteEntry =>
  ({ summaryId, oldTokens: 30, newTokens: 18, oldContent: 'old', newContent: 'new', diff: '-old\n+new', level: 'normal', applied: false, fidelity: null, ...extra }) as RewriteEntry
const preview = (summaryId: string) => ({ summaryId, prompt: 'the prompt' }) as RewritePreview

/** The list loaded, conversation 1's DAG open. */
function onDag(): State {
  const s = initialState({ mode: 'read-only' })
  return feed(s, { type: 'conversationsLoaded', conversations: CONVERSATIONS }, { type: 'dagLoaded', conversationId: 1, dag: DAG }).state
}

const rowKeys = (s: State) => treeRows(s).map((r) => r.key)
const selectedId = (s: State) => treeRows(s)[s.cursor]?.node.summaryId

describe('keysOf', () => {
  it('splits a burst of printable keys into one key each', () => {
    expect(keysOf('jjjjj', {}).map((k) => [k.name, k.char])).toEqual(Array(5).fill(['char', 'j']))
    expect(keysOf('oth', {}).map((k) => k.char).join('')).toBe('oth')
    // A return, a DEL and a control character inside a burst keep their meaning.
    expect(keysOf('j\rk\x7f\x03', {}).map((k) => [k.name, k.char, k.ctrl])).toEqual([
      ['char', 'j', false],
      ['return', '', false],
      ['char', 'k', false],
      ['delete', '', false],
      ['char', 'c', true],
    ])
    expect(keysOf('a😀b', {}).map((k) => k.char)).toEqual(['a', '😀', 'b'])
  })

  it('keeps named keys, ctrl and meta as Ink reports them', () => {
    expect(keysOf('', ESC)).toEqual([{ name: 'escape', char: '', ctrl: false, meta: false }])
    expect(keysOf('\r', ENTER)).toEqual([{ name: 'return', char: '', ctrl: false, meta: false }])
    expect(keysOf('', DOWN).map((k) => k.name)).toEqual(['down'])
    expect(keysOf('', { pageUp: true }).map((k) => k.name)).toEqual(['pageup'])
    expect(keysOf('c', { ctrl: true })).toEqual([{ name: 'char', char: 'c', ctrl: true, meta: false }])
    expect(keysOf('j', { meta: true })).toEqual([{ name: 'char', char: 'j', ctrl: false, meta: true }])
    expect(keysOf('', {})).toEqual([])
  })
})

describe('the conversation list', () => {
  it('loads the list first, and opens --conversation once it has', () => {
    let r = reduce(initialState({ mode: 'read-only' }), { type: 'start' })
    expect(r.effects).toEqual([{ type: 'loadConversations' }])
    expect(r.state.conversations).toBeNull()
    r = reduce(r.state, { type: 'conversationsLoaded', conversations: CONVERSATIONS })
    expect(r.state.conversations).toHaveLength(3)
    expect(r.effects).toEqual([])

    r = reduce(initialState({ mode: 'read-only', initialConversation: 2 }), { type: 'conversationsLoaded', conversations: CONVERSATIONS })
    expect(r.effects).toEqual([{ type: 'loadDag', conversationId: 2 }])
    // Only once: a reload of the list does not reopen it.
    expect(reduce(r.state, { type: 'conversationsLoaded', conversations: CONVERSATIONS }).effects).toEqual([])
  })

  it('moves within its bounds, a burst one row per key, and enter opens the row under the cursor', () => {
    const s = feed(initialState({ mode: 'read-only' }), { type: 'conversationsLoaded', conversations: CONVERSATIONS }).state
    expect(press(s, 'k').state.convCursor).toBe(0)
    expect(press(s, 'j').state.convCursor).toBe(1)
    expect(press(s, DOWN, DOWN).state.convCursor).toBe(2)
    expect(press(s, 'jj', UP).state.convCursor).toBe(1)
    expect(press(s, 'jjjjj').state.convCursor).toBe(2)
    const r = press(s, 'jj', ENTER)
    expect(r.effects).toEqual([{ type: 'loadDag', conversationId: 3 }])
    // Nothing to open before the list has loaded.
    expect(press(initialState({ mode: 'read-only' }), ENTER).effects).toEqual([])
  })

  it('types into the filter, which narrows the list; esc clears it', () => {
    const s = feed(initialState({ mode: 'read-only' }), { type: 'conversationsLoaded', conversations: CONVERSATIONS }).state
    let r = press(s, 'jj', '/', 'oth')
    expect(r.state.filtering).toBe(true)
    expect(r.state.filter).toBe('oth')
    expect(r.state.convCursor).toBe(0)
    expect(shownConversations(r.state.conversations, r.state.filter).map((c) => c.conversationId)).toEqual([2])
    // While filtering, q and j are text, not keys.
    r = press(r.state, 'qj')
    expect(r.state.filter).toBe('othqj')
    expect(r.effects).toEqual([])
    r = press(r.state, BACKSPACE, BACKSPACE)
    expect(r.state.filter).toBe('oth')
    // enter keeps the filter and gives the keys back to the list.
    r = press(r.state, ENTER)
    expect(r.state.filtering).toBe(false)
    expect(r.state.filter).toBe('oth')
    expect(press(r.state, 'jjj').state.convCursor).toBe(0)
    expect(press(r.state, ENTER).effects).toEqual([{ type: 'loadDag', conversationId: 2 }])
    r = press(r.state, '/', 'x', ESC)
    expect(r.state.filter).toBe('')
    expect(r.state.filtering).toBe(false)
    // The filter matches session keys and ids too.
    expect(shownConversations(CONVERSATIONS, 'AGENT:main').map((c) => c.conversationId)).toEqual([2])
    expect(shownConversations(CONVERSATIONS, '3').map((c) => c.conversationId)).toEqual([3])
  })

  it('q quits, ctrl+c aborts what is in flight and quits', () => {
    const s = initialState({ mode: 'read-only' })
    expect(press(s, 'q').effects).toEqual([{ type: 'exit' }])
    expect(press(s, CTRL_C).effects).toEqual([{ type: 'abort' }, { type: 'exit' }])
  })
})

describe('the DAG view', () => {
  it('opens on its loaded DAG with the view reset', () => {
    const s = onDag()
    expect(s.screen).toBe('dag')
    expect(s.conversationId).toBe(1)
    expect(s.cursor).toBe(0)
    expect(s.status).toEqual({ kind: 'info', text: 'conversation 1: 7 summaries' })
    expect(rowKeys(s)).toEqual(['c', 'r'])
    // A second open starts over: nothing expanded, the cursor on top.
    const moved = press(s, 'l', 'j', 'f').state
    const again = reduce(moved, { type: 'dagLoaded', conversationId: 2, dag: DAG }).state
    expect([again.conversationId, again.cursor, again.expanded.size, again.fallbacksOnly]).toEqual([2, 0, 0, false])
  })

  it('expands with l, enter or →, collapses with h, and h on a child goes to its parent', () => {
    let s = onDag()
    const before = s.expanded
    s = press(s, 'l').state
    expect(before.size).toBe(0) // the old state is not mutated
    expect(rowKeys(s)).toEqual(['c', 'b1', 'b2', 'r'])
    s = press(s, 'j', ENTER).state
    expect(rowKeys(s)).toEqual(['c', 'b1', 'a1', 'a2', 'b2', 'r'])
    s = press(s, 'jj', RIGHT).state
    expect(selectedId(s)).toBe('a2')
    expect(rowKeys(s)).toEqual(['c', 'b1', 'a1', 'a2', 'a2/messages', 'b2', 'r'])
    // l on an expanded row changes nothing.
    expect(rowKeys(press(s, 'l').state)).toEqual(rowKeys(s))
    // h: collapse a2, then go up to b1, collapse it, up to c, collapse it.
    s = press(s, 'h').state
    expect(rowKeys(s)).toEqual(['c', 'b1', 'a1', 'a2', 'b2', 'r'])
    s = press(s, 'h').state
    expect(selectedId(s)).toBe('b1')
    s = press(s, LEFT, 'h').state
    expect(selectedId(s)).toBe('c')
    expect(rowKeys(s)).toEqual(['c', 'b1', 'b2', 'r'])
    s = press(s, 'h').state
    expect(rowKeys(s)).toEqual(['c', 'r'])
    // h on a collapsed root does nothing.
    expect(press(s, 'h').state).toBe(s)
  })

  it('moves one row per key of a burst, within the rows', () => {
    let s = press(onDag(), 'l', 'j', 'l', 'jjj', 'l').state
    expect(rowKeys(s)).toEqual(['c', 'b1', 'a1', 'a2', 'b2', 'a3', 'r'])
    s = press(s, 'kkkkkkkk').state
    expect(s.cursor).toBe(0)
    s = press(s, 'jjjjj').state
    expect(s.cursor).toBe(5)
    expect(selectedId(s)).toBe('a3')
    s = press(s, 'jjjjj').state
    expect(s.cursor).toBe(6)
    s = press(s, UP, 'k').state
    expect(s.cursor).toBe(4)
  })

  it('scrolls the detail pane with J/K; a move starts the next summary at its top', () => {
    let s = press(onDag(), 'JJJ').state
    expect(s.detailScroll).toBe(15)
    s = press(s, 'K').state
    expect(s.detailScroll).toBe(10)
    expect(press(s, 'KKKK').state.detailScroll).toBe(0)
    expect(press(s, 'j').state.detailScroll).toBe(0)
  })

  it('f lists the fallbacks and says how many; f again goes back', () => {
    let s = press(onDag(), 'j', 'f').state
    expect(s.fallbacksOnly).toBe(true)
    expect(s.cursor).toBe(0)
    expect(rowKeys(s)).toEqual(['a2'])
    expect(s.status.text).toBe('1 fallback summary: w or W repairs one')
    s = press(s, 'f').state
    expect(rowKeys(s)).toEqual(['c', 'r'])
    expect(s.status.text).toBe('')
  })

  it('esc goes back to the list, q quits', () => {
    const s = onDag()
    const back = press(s, ESC).state
    expect(back.screen).toBe('conversations')
    expect(back.status.text).toBe('')
    expect(press(s, 'q').effects).toEqual([{ type: 'exit' }])
  })
})

describe('w: one summary', () => {
  it('preview → inflight → review → apply, with the effects that load, rewrite and apply', () => {
    let r = press(onDag(), 'w')
    expect(r.state.dialog).toMatchObject({ type: 'rewrite', phase: 'loading', summaryId: 'c' })
    expect(r.effects).toEqual([{ type: 'preview', conversationId: 1, summaryId: 'c' }])
    // Another summary's preview is not this dialog's.
    expect(reduce(r.state, { type: 'previewLoaded', summaryId: 'r', preview: preview('r') }).state.dialog?.phase).toBe('loading')
    r = feed(r.state, { type: 'previewLoaded', summaryId: 'c', preview: preview('c') })
    expect(r.state.dialog).toMatchObject({ phase: 'preview', preview: { prompt: 'the prompt' }, scroll: 0 })
    r = press(r.state, 'JJ', 'K')
    expect(r.state.dialog).toMatchObject({ phase: 'preview', scroll: 5 })
    // Keys that mean something elsewhere do nothing in a dialog.
    expect(press(r.state, 'jqf').state).toBe(r.state)

    r = press(r.state, ENTER)
    expect(r.state.dialog).toMatchObject({ phase: 'inflight', scroll: 0 })
    expect(r.effects).toEqual([{ type: 'rewriteOne', conversationId: 1, summaryId: 'c' }])
    r = feed(r.state, { type: 'rewritten', summaryId: 'c', entry: entry('c') })
    expect(r.state.dialog).toMatchObject({ phase: 'review', showDiff: false, entry: { newContent: 'new' } })
    r = press(r.state, 'd')
    expect(r.state.dialog).toMatchObject({ phase: 'review', showDiff: true })

    r = press(r.state, 'y')
    expect(r.state.dialog).toMatchObject({ phase: 'applying' })
    expect(r.effects).toEqual([{ type: 'apply', conversationId: 1, entry: entry('c') }])
    const rewritten = DAG.map((n) => (n.summaryId === 'c' ? { ...n, content: 'new', tokenCount: 18 } : n))
    r = feed(r.state, { type: 'applied', entry: entry('c', { applied: true }), mode: 'writable', dag: rewritten, conversations: CONVERSATIONS })
    expect(r.state.dialog).toBeNull()
    expect(r.state.mode).toBe('writable')
    expect(r.state.dag[0].content).toBe('new')
    expect(r.state.status).toEqual({ kind: 'info', text: 'applied c: Δ tokens: -12 (30 → 18)' })
  })

  it('esc during the call aborts it, and its late answer is dropped', () => {
    let s = feed(press(onDag(), 'w').state, { type: 'previewLoaded', summaryId: 'c', preview: preview('c') }).state
    s = press(s, ENTER).state
    const r = press(s, ESC)
    expect(r.effects).toEqual([{ type: 'abort' }])
    expect(r.state.dialog).toBeNull()
    expect(r.state.status).toEqual({ kind: 'info', text: 'cancelled: c was left as it was' })
    expect(reduce(r.state, { type: 'rewritten', summaryId: 'c', entry: entry('c') }).state.dialog).toBeNull()
    expect(reduce(r.state, { type: 'failed', effect: { type: 'rewriteOne', conversationId: 1, summaryId: 'c' }, error: 'late', mode: 'read-only' }).state.status.kind).toBe('error')
  })

  it('n or esc discards; esc or n closes the preview', () => {
    let s = feed(press(onDag(), 'w').state, { type: 'previewLoaded', summaryId: 'c', preview: preview('c') }).state
    expect(press(s, ESC).state.dialog).toBeNull()
    expect(press(s, 'n').state.dialog).toBeNull()
    s = feed(press(s, ENTER).state, { type: 'rewritten', summaryId: 'c', entry: entry('c') }).state
    for (const key of ['n', ESC]) {
      const r = press(s, key)
      expect(r.state.dialog).toBeNull()
      expect(r.state.status).toEqual({ kind: 'info', text: 'discarded: c was left as it was' })
      expect(r.effects).toEqual([])
    }
  })

  it('a fallback answer and failed calls close the dialog with the error', () => {
    const preview_ = feed(press(onDag(), 'w').state, { type: 'previewLoaded', summaryId: 'c', preview: preview('c') }).state
    const inflight = press(preview_, ENTER).state
    let r = feed(inflight, { type: 'rewritten', summaryId: 'c', entry: entry('c', { level: 'fallback' }) })
    expect(r.state.dialog).toBeNull()
    expect(r.state.status).toEqual({ kind: 'error', text: 'E_SUMMARIZER: the summarizer gave nothing usable for c; it was left as it was' })

    r = feed(inflight, { type: 'failed', effect: { type: 'rewriteOne', conversationId: 1, summaryId: 'c' }, error: 'E_SUMMARIZER: provider exploded', mode: 'read-only' })
    expect(r.state.dialog).toBeNull()
    expect(r.state.status).toEqual({ kind: 'error', text: 'E_SUMMARIZER: provider exploded' })

    const loading = press(onDag(), 'w').state
    r = feed(loading, { type: 'failed', effect: { type: 'preview', conversationId: 1, summaryId: 'c' }, error: 'E_PROMPT: broken', mode: 'read-only' })
    expect(r.state.dialog).toBeNull()
    expect(r.state.status.text).toBe('E_PROMPT: broken')

    const applying = press(feed(inflight, { type: 'rewritten', summaryId: 'c', entry: entry('c') }).state, ENTER).state
    expect(applying.dialog?.phase).toBe('applying')
    r = feed(applying, { type: 'failed', effect: { type: 'apply', conversationId: 1, entry: entry('c') }, error: 'E_BUSY: database is locked', mode: 'read-only' })
    expect(r.state.dialog).toBeNull()
    expect(r.state.mode).toBe('read-only')
    expect(r.state.status).toEqual({ kind: 'error', text: 'E_BUSY: database is locked' })

    // A failed read leaves an open dialog alone.
    r = feed(loading, { type: 'failed', effect: { type: 'loadConversations' }, error: 'E_IO: gone', mode: 'read-only' })
    expect(r.state.dialog?.phase).toBe('loading')
    expect(r.state.status.kind).toBe('error')
  })

  it('w and W are for summary rows only', () => {
    const onMessages = press(onDag(), 'jl', 'j').state
    expect(treeRows(onMessages)[onMessages.cursor].type).toBe('messages')
    expect(press(onMessages, 'w').effects).toEqual([])
    expect(press(onMessages, 'W').state.dialog).toBeNull()
  })
})

describe('W: a subtree', () => {
  const progress = (done: number, summaryId: string): RewriteProgress => ({ done, total: 6, summaryId, depth: 0 })

  it('plans, runs, reports progress, stops on esc and says how far it got', () => {
    let r = press(onDag(), 'W')
    const d = r.state.dialog
    expect(d?.type === 'subtree' && [...d.plan.ids].sort()).toEqual(['a1', 'a2', 'a3', 'b1', 'b2', 'c'])
    expect(d?.type === 'subtree' && d.plan.tokens).toBe(100)
    expect(press(r.state, 'n').state.dialog).toBeNull()
    expect(press(r.state, ESC).state.dialog).toBeNull()

    r = press(r.state, 'y')
    expect(r.state.dialog?.phase).toBe('running')
    expect(r.effects).toEqual([{ type: 'rewriteSubtree', conversationId: 1, summaryId: 'c' }])
    r = feed(r.state, { type: 'subtreeProgress', progress: progress(0, 'a1') }, { type: 'subtreeProgress', progress: progress(1, 'a2') })
    expect(r.state.dialog).toMatchObject({ phase: 'running', progress: { done: 1, summaryId: 'a2' } })
    r = press(r.state, ESC)
    expect(r.effects).toEqual([{ type: 'abort' }])
    expect(r.state.dialog?.phase).toBe('stopping')
    // Only esc while running: stopping takes no key.
    expect(press(r.state, ESC, 'q', ENTER).state).toBe(r.state)
    r = feed(r.state, { type: 'subtreeProgress', progress: progress(2, 'a3') })
    const after = DAG.map((n) => (n.summaryId === 'a1' || n.summaryId === 'a2' ? { ...n, tokenCount: 5 } : n))
    r = feed(r.state, { type: 'subtreeFinished', summaryId: 'c', outcome: { kind: 'stopped' }, mode: 'writable', reload: { dag: after, conversations: CONVERSATIONS } })
    expect(r.state.dialog).toMatchObject({ phase: 'done', line: 'Stopped after 2 of 6 (subtree 100 → 90 tokens)' })
    expect(r.state.mode).toBe('writable')
    expect(r.state.dag).toBe(after)
    expect(r.state.status.kind).toBe('info')
    // Progress after the end does not reopen the run.
    expect(reduce(r.state, { type: 'subtreeProgress', progress: progress(3, 'b1') }).state).toBe(r.state)
    expect(press(r.state, ENTER).state.dialog).toBeNull()
  })

  it('a finished run says what it wrote; a failed one and a failed reload show their error', () => {
    const running = press(onDag(), 'Wy').state
    expect(running.dialog?.phase).toBe('running')
    let r = feed(running, {
      type: 'subtreeFinished',
      summaryId: 'c',
      outcome: { kind: 'done', written: 6, total: 6, tokensBefore: 1234, tokensAfter: 1000 },
      mode: 'writable',
      reload: { dag: DAG, conversations: CONVERSATIONS },
    })
    expect(r.state.dialog).toMatchObject({ line: 'Rewrote 6 of 6 summaries: 1,234 → 1,000 tokens (subtree 100 → 100 tokens)' })
    r = feed(running, { type: 'subtreeFinished', summaryId: 'c', outcome: { kind: 'failed', error: 'E_BUSY: locked' }, mode: 'read-only', reload: { dag: DAG, conversations: CONVERSATIONS } })
    expect(r.state.dialog).toMatchObject({ phase: 'done', line: 'E_BUSY: locked (subtree 100 → 100 tokens)' })
    expect(r.state.status).toEqual({ kind: 'error', text: 'E_BUSY: locked' })
    r = feed(running, { type: 'subtreeFinished', summaryId: 'c', outcome: { kind: 'stopped' }, mode: 'writable', reload: { error: 'E_IO: gone' } })
    expect(r.state.dialog).toMatchObject({ line: 'Stopped after 0 of 6 (subtree 100 → 0 tokens)' })
    expect(r.state.status).toEqual({ kind: 'error', text: 'E_IO: gone' })
    expect(r.state.dag).toBe(DAG)
  })
})

describe('v: versions', () => {
  it('loads the selected summary\'s versions, scrolls them, and closes', () => {
    const s = press(onDag(), 'j')
    const r = press(s.state, 'v')
    expect(r.effects).toEqual([{ type: 'loadVersions', summaryId: 'r' }])
    const versions = [{ version: 1 }, { version: 2 }] as SummaryVersion[]
    let shown = feed(r.state, { type: 'versionsLoaded', summaryId: 'r', versions }).state
    expect(shown.dialog).toMatchObject({ type: 'versions', summaryId: 'r', versions, scroll: 0 })
    shown = press(shown, 'J').state
    expect(shown.dialog).toMatchObject({ scroll: 5 })
    for (const key of ['v', 'q', ESC, ENTER]) expect(press(shown, key).state.dialog).toBeNull()
    // Versions arriving while another dialog is open do not replace it.
    const rewriting = press(r.state, 'w').state
    expect(feed(rewriting, { type: 'versionsLoaded', summaryId: 'r', versions }).state.dialog?.type).toBe('rewrite')
  })

  it('ctrl+c quits from a dialog too, aborting the call in flight', () => {
    const s = press(onDag(), 'Wy').state
    expect(press(s, CTRL_C).effects).toEqual([{ type: 'abort' }, { type: 'exit' }])
  })
})

describe('raw messages from the DAG', () => {
  it('enter on a leaf messages row loads its messages; they scroll and esc closes them', () => {
    // r is a root leaf: expanding it shows its messages row.
    let s = onDag()
    s = press(s, ...Array(rowKeys(s).indexOf('r')).fill('j')).state
    s = press(s, ENTER).state
    expect(rowKeys(s)).toContain('r/messages')
    let r = press(s, 'j', ENTER)
    expect(r.effects).toEqual([{ type: 'loadMessages', conversationId: 1, summaryId: 'r', afterSeq: 0, limit: 3 }])
    expect(r.state.dialog).toMatchObject({ type: 'messages', phase: 'loading', summaryId: 'r' })
    const messages = [1, 2, 3].map((seq) => ({ messageId: seq, seq, role: 'user', content: `m${seq}`, createdAt: '', tokenCount: 1 }))
    s = feed(r.state, { type: 'messagesLoaded', summaryId: 'r', messages } as Event).state
    expect(s.dialog).toMatchObject({ type: 'messages', phase: 'shown', scroll: 0 })
    // One write of several keys: every key counts.
    s = press(s, 'jjJ').state
    expect(s.dialog).toMatchObject({ scroll: 12 })
    s = press(s, 'K').state
    expect(s.dialog).toMatchObject({ scroll: 2 })
    expect(press(s, ESC).state.dialog).toBeNull()
    // A failed read closes the dialog with the error.
    r = press(press(onDag(), ...Array(rowKeys(onDag()).indexOf('r')).fill('j'), ENTER).state, 'j', ENTER)
    const failed = feed(r.state, { type: 'failed', effect: r.effects[0], error: 'E_IO: gone', mode: 'read-only' }).state
    expect(failed.dialog).toBeNull()
    expect(failed.status).toEqual({ kind: 'error', text: 'E_IO: gone' })
  })
})

describe('text for narrow panes', () => {
  it('wrapLines wraps at spaces, cuts a longer word, and keeps every character', async () => {
    const { wrapLines } = await import('../tui/tree.mjs')
    const text = 'alpha beta gamma delta epsilon\n\nzeta ' + 'x'.repeat(25)
    const lines = wrapLines(text, 12)
    expect(lines.every((l) => l.length <= 12)).toBe(true)
    expect(lines.slice(0, 3)).toEqual(['alpha beta', 'gamma delta', 'epsilon'])
    expect(lines.join('').replace(/ /g, '')).toBe(text.replace(/[\n ]/g, ''))
  })

  it('messageText shows tool calls with their arguments; a narrow tree row keeps its numbers', async () => {
    const { messageText, rowLabel, visibleRows } = await import('../tui/tree.mjs')
    expect(messageText([{ type: 'text', text: 'Reading it.' }, { type: 'toolCall', id: 't1', name: 'read', arguments: { path: 'src/mod0.ts' } }])).toBe(
      'Reading it.\n[tool call: read] {"path":"src/mod0.ts"}',
    )
    const row = visibleRows(DAG, new Set())[0]
    const wide = rowLabel(row)
    const medium = rowLabel(row, wide.length - 1)
    const narrow = rowLabel(row, 20)
    expect(wide).toContain('desc')
    expect(medium).toMatch(/^▸ c d2 30t \* 02-17 15:37$/)
    expect(narrow.length).toBeLessThanOrEqual(wide.length)
    expect(narrow).toMatch(/d2 30t \* 02-17 15:37$/)
  })

  it('a tree is drawn in one form: the widest every shown row fits', async () => {
    const { rowLabel, treeForm, visibleRows } = await import('../tui/tree.mjs')
    const rows = visibleRows(DAG, new Set(DAG.map((n) => n.summaryId)))
    // A width some rows fit in full and one does not: every row compact.
    const need = rows.filter((r) => r.type === 'summary').map((r) => r.level * 2 + rowLabel(r, Infinity, 'full').length)
    const width = Math.max(...need) - 1
    expect(need.some((n) => n <= width)).toBe(true)
    const form = treeForm(rows, width)
    expect(form).not.toBe('full')
    for (const r of rows) if (r.type === 'summary') expect(rowLabel(r, width, form)).not.toContain(' desc')
    expect(treeForm(rows, 500)).toBe('full')
  })
})

describe('stored text with bidi controls', () => {
  const RLO = '\u202E'
  const SHOWN = '⟨U+202E⟩'
  /** SHOWN in a regular expression. */
  const SHOWN_RE = '⟨U\\+202E⟩'
  const SCOPED = /[\u202A-\u202E\u2066-\u2069]/

  it("a tool call's name and id, a summary id: their controls shown; text keeps none that could run past its line", async () => {
    const { messageText, messagesText, rowLabel, visibleRows } = await import('../tui/tree.mjs')
    const call = { type: 'toolCall' as const, id: `call_${RLO}7`, name: `read${RLO}file`, arguments: { path: `notes${RLO}.md` } }
    // The CLI's form: the name shown, the text as stored.
    expect(messageText([{ type: 'text', text: `Reading it ${RLO}now` }, call])).toBe(`Reading it ${RLO}now\n[tool call: read${SHOWN}file] {"path":"notes${RLO}.md"}`)
    // The TUI's: every embedding, override and isolate shown, the result's header naming its call.
    const text = messagesText([
      { messageId: 1, seq: 1, role: 'assistant', content: [{ type: 'text', text: `Reading it ${RLO}now` }, call], createdAt: '2026-02-17T15:37:00Z', tokenCount: 5 },
      { messageId: 2, seq: 2, role: 'toolResult', toolCallId: `call_${RLO}7`, content: [{ type: 'text', text: `ok \u2067\u202Bdone` }], createdAt: '2026-02-17T15:37:00Z', tokenCount: 3 },
    ])
    expect(text).not.toMatch(SCOPED)
    expect(text.split('\n')).toEqual([
      '── #1 assistant · 2026-02-17T15:37:00Z · 5 tokens',
      `Reading it ${SHOWN}now`,
      `[tool call: read${SHOWN}file] {"path":"notes${SHOWN}.md"}`,
      '',
      `── #2 toolResult (call_${SHOWN}7) · 2026-02-17T15:37:00Z · 3 tokens`,
      'ok ⟨U+2067⟩⟨U+202B⟩done',
    ])
    // A summary id (an imported file's may hold anything) in every form of a tree row.
    const [row] = visibleRows([{ ...DAG[6], summaryId: `r${RLO}x\u200F` }], new Set())
    for (const form of ['full', 'medium', 'short'] as const) expect(rowLabel(row, Infinity, form)).toMatch(new RegExp(`^▸ r${SHOWN_RE}x⟨U\\+200F⟩(…)? d0 `))
  })
})

describe('wrapped diffs', () => {
  it('each wrapped line of a diff keeps its marker', async () => {
    const { wrapDiff } = await import('../tui/tree.mjs')
    const lines = wrapDiff('--- a (old)\n+++ a (new)\n@@ -1 +1 @@\n-' + 'old words '.repeat(6) + '\n+new', 20)
    expect(lines.slice(0, 2)).toEqual(['--- a (old)', '+++ a (new)'])
    const removed = lines.filter((l) => l.startsWith('-') && !l.startsWith('---'))
    expect(removed.length).toBeGreaterThan(2)
    expect(removed.every((l) => l.length <= 20)).toBe(true)
    expect(lines[lines.length - 1]).toBe('+new')
  })
})
