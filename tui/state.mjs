// @ts-check
// The TUI's state machine without a terminal: one plain state object, the key events Ink's
// input becomes, and `reduce(state, event) → { state, effects }`. Effects are data the app
// runs against the session (reads, the rewrite calls, aborting one, quitting); their results
// come back as events. Nothing here imports React or Ink, so the unit tests drive it directly.

import { count, deltaText, indexDag, subtreePlan, visibleRows } from './tree.mjs'

/** @typedef {import('../index.js').ConversationInfo} ConversationInfo */
/** @typedef {import('../index.js').DagNode} DagNode */
/** @typedef {import('../index.js').RewritePreview} RewritePreview */
/** @typedef {import('../index.js').RewriteEntry} RewriteEntry */
/** @typedef {import('../index.js').RewriteProgress} RewriteProgress */
/** @typedef {import('../index.js').SummaryVersion} SummaryVersion */
/** @typedef {import('../index.js').StoredMessage} StoredMessage */
/** @typedef {import('./session.mjs').TuiSession['mode']} Mode */
/** @typedef {import('./tree.mjs').Row} Row */

/**
 * @typedef {{ type: 'rewrite', phase: 'loading' | 'preview' | 'inflight' | 'review' | 'applying', summaryId: string,
 *             preview?: RewritePreview, entry?: RewriteEntry, showDiff: boolean, scroll: number }
 *   | { type: 'subtree', phase: 'plan' | 'running' | 'stopping' | 'done', summaryId: string,
 *       plan: ReturnType<typeof subtreePlan>, progress?: RewriteProgress, line?: string }
 *   | { type: 'versions', phase: 'shown', summaryId: string, versions: SummaryVersion[], scroll: number }
 *   | { type: 'messages', phase: 'loading' | 'shown', summaryId: string, messages: StoredMessage[], scroll: number }} Dialog
 */

/** @typedef {{ kind: 'info' | 'error', text: string }} Status */

/**
 * @typedef {object} State
 * @property {'conversations' | 'dag'} screen
 * @property {ConversationInfo[] | null} conversations  null until the first load answers
 * @property {number} convCursor        index into the filtered list
 * @property {string} filter
 * @property {boolean} filtering        keys type into the filter
 * @property {number | null} conversationId  the conversation whose DAG is loaded
 * @property {DagNode[]} dag
 * @property {Set<string>} expanded     summary ids shown with their inputs (replaced, never mutated)
 * @property {number} cursor            index into the DAG's visible rows
 * @property {number} detailScroll
 * @property {boolean} fallbacksOnly
 * @property {Dialog | null} dialog     takes every key while open
 * @property {Status} status
 * @property {Mode} mode                the session's, as the last call left it
 * @property {number | null} openFirst  the conversation to open once the list has loaded
 */

/**
 * A key, normalized from Ink's `(input, key)`: `char` is a printable character (or, with
 * `ctrl`, the letter of a control key); the named keys carry `char: ''`.
 * @typedef {'return' | 'escape' | 'up' | 'down' | 'left' | 'right' | 'backspace' | 'delete' | 'tab'
 *   | 'pageup' | 'pagedown' | 'home' | 'end'} KeyName
 * @typedef {{ name: KeyName | 'char', char: string, ctrl: boolean, meta: boolean }} Key
 */

/**
 * The flags of Ink's key object this module reads (Ink's `Key` fits it).
 * @typedef {{ upArrow?: boolean, downArrow?: boolean, leftArrow?: boolean, rightArrow?: boolean,
 *   pageUp?: boolean, pageDown?: boolean, home?: boolean, end?: boolean, return?: boolean, escape?: boolean,
 *   tab?: boolean, backspace?: boolean, delete?: boolean, ctrl?: boolean, meta?: boolean }} InkKey
 */

/**
 * What the app does for the reducer; each names what its result event needs.
 * @typedef {{ type: 'loadConversations' }
 *   | { type: 'loadDag', conversationId: number }
 *   | { type: 'loadVersions', summaryId: string }
 *   | { type: 'loadMessages', conversationId: number, summaryId: string, afterSeq: number, limit: number }
 *   | { type: 'preview', conversationId: number, summaryId: string }
 *   | { type: 'rewriteOne', conversationId: number, summaryId: string }
 *   | { type: 'apply', conversationId: number, entry: RewriteEntry }
 *   | { type: 'rewriteSubtree', conversationId: number, summaryId: string }
 *   | { type: 'abort' }
 *   | { type: 'exit' }} Effect
 */

/**
 * How a subtree run ended: finished, stopped by esc (E_ABORTED), or failed.
 * @typedef {{ kind: 'done', written: number, total: number, tokensBefore: number, tokensAfter: number }
 *   | { kind: 'stopped' }
 *   | { kind: 'failed', error: string }} SubtreeOutcome
 */

/**
 * The DAG and the list read again after a write, or why they could not be.
 * @typedef {{ dag: DagNode[], conversations: ConversationInfo[] } | { error: string }} Reload
 */

/**
 * A key, or the result of an effect. `failed` carries the effect that failed, so the dialog
 * waiting for it closes; `mode` is the session's after the call.
 * @typedef {{ type: 'start' }
 *   | { type: 'key', key: Key }
 *   | { type: 'conversationsLoaded', conversations: ConversationInfo[] }
 *   | { type: 'dagLoaded', conversationId: number, dag: DagNode[] }
 *   | { type: 'versionsLoaded', summaryId: string, versions: SummaryVersion[] }
 *   | { type: 'messagesLoaded', summaryId: string, messages: StoredMessage[] }
 *   | { type: 'previewLoaded', summaryId: string, preview: RewritePreview }
 *   | { type: 'rewritten', summaryId: string, entry: RewriteEntry }
 *   | { type: 'applied', entry: RewriteEntry, mode: Mode, dag: DagNode[], conversations: ConversationInfo[] }
 *   | { type: 'subtreeProgress', progress: RewriteProgress }
 *   | { type: 'subtreeFinished', summaryId: string, outcome: SubtreeOutcome, mode: Mode, reload: Reload }
 *   | { type: 'failed', effect: Effect, error: string, mode: Mode }} Event
 */

/** @typedef {{ state: State, effects: Effect[] }} Step */

/**
 * @param {{ mode: Mode, initialConversation?: number }} options
 * @returns {State}
 */
export function initialState({ mode, initialConversation }) {
  return {
    screen: 'conversations',
    conversations: null,
    convCursor: 0,
    filter: '',
    filtering: false,
    conversationId: null,
    dag: [],
    expanded: new Set(),
    cursor: 0,
    detailScroll: 0,
    fallbacksOnly: false,
    dialog: null,
    status: { kind: 'info', text: '' },
    mode,
    openFirst: initialConversation ?? null,
  }
}

/** "E_CODE: message" of a rejection. @param {unknown} err */
export function errorText(err) {
  const e = /** @type {{ code?: string, message?: string }} */ (err)
  const message = String(e?.message ?? err).split('\n')[0].slice(0, 300)
  return e?.code ? `${e.code}: ${message}` : message
}

/** The conversations the filter lets through. @param {ConversationInfo[] | null} conversations @param {string} filter */
export function shownConversations(conversations, filter) {
  const all = conversations ?? []
  const f = filter.trim().toLowerCase()
  if (!f) return all
  return all.filter((c) => `${c.conversationId} ${c.sessionId} ${c.sessionKey ?? ''}`.toLowerCase().includes(f))
}

/** The DAG's rows as drawn. @param {State} state */
export function treeRows(state) {
  return visibleRows(state.dag, state.expanded, state.fallbacksOnly)
}

const NAMED = /** @type {const} */ ([
  ['upArrow', 'up'],
  ['downArrow', 'down'],
  ['leftArrow', 'left'],
  ['rightArrow', 'right'],
  ['pageUp', 'pageup'],
  ['pageDown', 'pagedown'],
  ['home', 'home'],
  ['end', 'end'],
  ['return', 'return'],
  ['escape', 'escape'],
  ['tab', 'tab'],
  ['backspace', 'backspace'],
  ['delete', 'delete'],
])

/** @param {KeyName} name @param {boolean} [meta] @returns {Key} */
function named(name, meta = false) {
  return { name, char: '', ctrl: false, meta }
}

/** One character of a burst, read as a terminal sends it. @param {string} c @returns {Key} */
function charKey(c) {
  if (c === '\r' || c === '\n') return named('return')
  if (c === '\t') return named('tab')
  if (c === '\b') return named('backspace')
  if (c === '\x7f') return named('delete')
  // Ctrl+letter, as Ink reads a lone one.
  if (c < ' ') return { name: 'char', char: String.fromCharCode(c.charCodeAt(0) + 96), ctrl: true, meta: false }
  return { name: 'char', char: c, ctrl: false, meta: false }
}

/**
 * Ink's `(input, key)` as the keys typed. Ink splits escape sequences (arrows, esc) into
 * events of their own but hands a run of printable keys written at once ("jjjjj", a paste) to
 * the handler as one string: each of its characters is a key of its own here, so none is lost.
 * @param {string} input @param {InkKey} key @returns {Key[]}
 */
export function keysOf(input, key) {
  for (const [flag, name] of NAMED) {
    if (key[flag]) return [named(name, name !== 'escape' && Boolean(key.meta))]
  }
  if (key.ctrl) return input ? [{ name: 'char', char: input, ctrl: true, meta: Boolean(key.meta) }] : []
  const chars = [...input]
  if (key.meta && chars.length === 1) return [{ name: 'char', char: input, ctrl: false, meta: true }]
  return chars.map(charKey)
}

/** @param {State} state @param {Effect[]} [effects] @returns {Step} */
function step(state, effects = []) {
  return { state, effects }
}

/** @param {Key} key @param {string} char */
function is(key, char) {
  return key.name === 'char' && key.char === char
}

/** @param {string} text @returns {Status} */
const info = (text) => ({ kind: 'info', text })
/** @param {string} text @returns {Status} */
const error = (text) => ({ kind: 'error', text })

/** @param {State} state @param {Event} event @returns {Step} */
export function reduce(state, event) {
  switch (event.type) {
    case 'start':
      return step(state, [{ type: 'loadConversations' }])
    case 'key':
      return onKey(state, event.key)
    case 'conversationsLoaded': {
      const next = { ...state, conversations: event.conversations, openFirst: null }
      return step(next, state.openFirst === null ? [] : [{ type: 'loadDag', conversationId: state.openFirst }])
    }
    case 'dagLoaded':
      return step({
        ...state,
        screen: 'dag',
        conversationId: event.conversationId,
        dag: event.dag,
        expanded: new Set(),
        cursor: 0,
        detailScroll: 0,
        fallbacksOnly: false,
        status: info(`conversation ${event.conversationId}: ${event.dag.length} summaries`),
      })
    case 'versionsLoaded':
      // A dialog opened meanwhile keeps the screen.
      if (state.dialog !== null) return step(state)
      return step({ ...state, dialog: { type: 'versions', phase: 'shown', summaryId: event.summaryId, versions: event.versions, scroll: 0 } })
    case 'messagesLoaded': {
      const d = state.dialog
      if (d?.type !== 'messages' || d.phase !== 'loading' || d.summaryId !== event.summaryId) return step(state)
      return step({ ...state, dialog: { ...d, phase: 'shown', messages: event.messages } })
    }
    case 'previewLoaded': {
      const d = state.dialog
      if (d?.type !== 'rewrite' || d.phase !== 'loading' || d.summaryId !== event.summaryId) return step(state)
      return step({ ...state, dialog: { type: 'rewrite', phase: 'preview', summaryId: d.summaryId, preview: event.preview, showDiff: false, scroll: 0 } })
    }
    case 'rewritten': {
      const d = state.dialog
      if (d?.type !== 'rewrite' || d.phase !== 'inflight' || d.summaryId !== event.summaryId) return step(state)
      if (event.entry.level === 'fallback') {
        return step({ ...state, dialog: null, status: error(`E_SUMMARIZER: the summarizer gave nothing usable for ${d.summaryId}; it was left as it was`) })
      }
      return step({ ...state, dialog: { ...d, phase: 'review', entry: event.entry, scroll: 0 } })
    }
    case 'applied':
      return step({
        ...state,
        mode: event.mode,
        dag: event.dag,
        conversations: event.conversations,
        dialog: null,
        status: info(`applied ${event.entry.summaryId}: ${deltaText(event.entry.oldTokens, event.entry.newTokens)}`),
      })
    case 'subtreeProgress': {
      const d = state.dialog
      if (d?.type !== 'subtree' || d.phase === 'done') return step(state)
      return step({ ...state, dialog: { ...d, progress: event.progress } })
    }
    case 'subtreeFinished':
      return subtreeFinished(state, event)
    case 'failed': {
      const next = { ...state, mode: event.mode, status: error(event.error) }
      if (waitsFor(state.dialog, event.effect)) next.dialog = null
      return step(next)
    }
  }
}

/** Whether `dialog` is the rewrite dialog waiting for `effect`'s answer. @param {Dialog | null} dialog @param {Effect} effect */
function waitsFor(dialog, effect) {
  if (dialog?.type === 'messages') return effect.type === 'loadMessages' && dialog.phase === 'loading' && dialog.summaryId === effect.summaryId
  if (dialog?.type !== 'rewrite') return false
  if (effect.type === 'preview') return dialog.phase === 'loading' && dialog.summaryId === effect.summaryId
  if (effect.type === 'rewriteOne') return dialog.phase === 'inflight' && dialog.summaryId === effect.summaryId
  if (effect.type === 'apply') return dialog.phase === 'applying' && dialog.summaryId === effect.entry.summaryId
  return false
}

/** @param {State} state @param {Event & { type: 'subtreeFinished' }} event @returns {Step} */
function subtreeFinished(state, { outcome, mode, reload }) {
  const d = state.dialog
  if (d?.type !== 'subtree') return step({ ...state, mode })
  let status = state.status
  let line
  if (outcome.kind === 'done') {
    line = `Rewrote ${outcome.written} of ${outcome.total} summaries: ${count(outcome.tokensBefore)} → ${count(outcome.tokensAfter)} tokens`
  } else if (outcome.kind === 'stopped') {
    line = `Stopped after ${d.progress?.done ?? 0} of ${d.plan.ids.length}`
  } else {
    line = outcome.error
    status = error(outcome.error)
  }
  let next = { ...state, mode }
  /** @type {DagNode[]} */
  let nodes = []
  if ('error' in reload) {
    status = error(reload.error)
  } else {
    nodes = reload.dag
    next = { ...next, dag: reload.dag, conversations: reload.conversations }
  }
  const after = subtreeTokens(nodes, d.plan.ids)
  return step({ ...next, status, dialog: { ...d, phase: 'done', line: `${line} (subtree ${count(d.plan.tokens)} → ${count(after)} tokens)` } })
}

/** @param {DagNode[]} nodes @param {string[]} ids */
function subtreeTokens(nodes, ids) {
  const wanted = new Set(ids)
  return nodes.filter((n) => wanted.has(n.summaryId)).reduce((sum, n) => sum + n.tokenCount, 0)
}

/** @param {State} state @param {Key} key @returns {Step} */
function onKey(state, key) {
  if (key.ctrl && key.char === 'c') return step(state, [{ type: 'abort' }, { type: 'exit' }])
  // Dialogs take every key while open.
  const d = state.dialog
  if (d?.type === 'rewrite') return rewriteKey(state, d, key)
  if (d?.type === 'versions') return versionsKey(state, d, key)
  if (d?.type === 'messages') return messagesKey(state, d, key)
  if (d?.type === 'subtree') return subtreeKey(state, d, key)
  return state.screen === 'conversations' ? listKey(state, key) : dagKey(state, key)
}

/** @param {State} state @param {Dialog & { type: 'rewrite' }} d @param {Key} key @returns {Step} */
function rewriteKey(state, d, key) {
  if (is(key, 'J')) return step({ ...state, dialog: { ...d, scroll: d.scroll + 5 } })
  if (is(key, 'K')) return step({ ...state, dialog: { ...d, scroll: Math.max(0, d.scroll - 5) } })
  const closed = { ...state, dialog: null }
  if (d.phase === 'preview') {
    if (key.name === 'return' && state.conversationId !== null) {
      return step({ ...state, dialog: { ...d, phase: 'inflight', scroll: 0 } }, [
        { type: 'rewriteOne', conversationId: state.conversationId, summaryId: d.summaryId },
      ])
    }
    if (key.name === 'escape' || is(key, 'n')) return step(closed)
  } else if (d.phase === 'inflight') {
    if (key.name === 'escape') return step({ ...closed, status: info(`cancelled: ${d.summaryId} was left as it was`) }, [{ type: 'abort' }])
  } else if (d.phase === 'review') {
    if (is(key, 'd')) return step({ ...state, dialog: { ...d, showDiff: !d.showDiff, scroll: 0 } })
    if ((is(key, 'y') || key.name === 'return') && d.entry && state.conversationId !== null) {
      return step({ ...state, dialog: { ...d, phase: 'applying' } }, [{ type: 'apply', conversationId: state.conversationId, entry: d.entry }])
    }
    if (is(key, 'n') || key.name === 'escape') return step({ ...closed, status: info(`discarded: ${d.summaryId} was left as it was`) })
  }
  return step(state)
}

/** @param {State} state @param {Dialog & { type: 'versions' }} d @param {Key} key @returns {Step} */
function versionsKey(state, d, key) {
  if (is(key, 'J')) return step({ ...state, dialog: { ...d, scroll: d.scroll + 5 } })
  if (is(key, 'K')) return step({ ...state, dialog: { ...d, scroll: Math.max(0, d.scroll - 5) } })
  if (key.name === 'escape' || key.name === 'return' || is(key, 'v') || is(key, 'q')) return step({ ...state, dialog: null })
  return step(state)
}

/** The raw messages of a leaf. @param {State} state @param {Dialog & { type: 'messages' }} d @param {Key} key @returns {Step} */
function messagesKey(state, d, key) {
  const by = is(key, 'J') || key.name === 'pagedown' || is(key, ' ') ? 10 : is(key, 'j') || key.name === 'down' ? 1 : 0
  const back = is(key, 'K') || key.name === 'pageup' ? 10 : is(key, 'k') || key.name === 'up' ? 1 : 0
  if (by || back) return step({ ...state, dialog: { ...d, scroll: Math.max(0, d.scroll + by - back) } })
  if (key.name === 'home') return step({ ...state, dialog: { ...d, scroll: 0 } })
  if (key.name === 'escape' || key.name === 'return' || is(key, 'q') || is(key, 'h') || key.name === 'left') return step({ ...state, dialog: null })
  return step(state)
}

/** @param {State} state @param {Dialog & { type: 'subtree' }} d @param {Key} key @returns {Step} */
function subtreeKey(state, d, key) {
  if (d.phase === 'plan') {
    if ((is(key, 'y') || key.name === 'return') && state.conversationId !== null) {
      return step({ ...state, dialog: { ...d, phase: 'running' } }, [
        { type: 'rewriteSubtree', conversationId: state.conversationId, summaryId: d.summaryId },
      ])
    }
    if (is(key, 'n') || key.name === 'escape') return step({ ...state, dialog: null })
  } else if (d.phase === 'running') {
    if (key.name === 'escape') return step({ ...state, dialog: { ...d, phase: 'stopping' } }, [{ type: 'abort' }])
  } else if (d.phase === 'done') {
    if (key.name === 'return' || key.name === 'escape' || is(key, 'q')) return step({ ...state, dialog: null })
  }
  return step(state)
}

/** The conversation list, and its filter while typing. @param {State} state @param {Key} key @returns {Step} */
function listKey(state, key) {
  if (state.filtering) {
    if (key.name === 'return') return step({ ...state, filtering: false })
    if (key.name === 'escape') return step({ ...state, filter: '', filtering: false })
    if (key.name === 'backspace' || key.name === 'delete') return step({ ...state, filter: state.filter.slice(0, -1) })
    if (key.name === 'char' && !key.ctrl && !key.meta) return step({ ...state, filter: state.filter + key.char, convCursor: 0 })
    return step(state)
  }
  if (is(key, 'q')) return step(state, [{ type: 'exit' }])
  if (is(key, '/')) return step({ ...state, filtering: true })
  const shown = shownConversations(state.conversations, state.filter)
  if (is(key, 'j') || key.name === 'down') return step({ ...state, convCursor: Math.min(state.convCursor + 1, Math.max(0, shown.length - 1)) })
  if (is(key, 'k') || key.name === 'up') return step({ ...state, convCursor: Math.max(0, state.convCursor - 1) })
  const at = shown[state.convCursor]
  if (key.name === 'return' && at) return step(state, [{ type: 'loadDag', conversationId: at.conversationId }])
  return step(state)
}

/** The DAG view. @param {State} state @param {Key} key @returns {Step} */
function dagKey(state, key) {
  if (is(key, 'q')) return step(state, [{ type: 'exit' }])
  if (key.name === 'escape' || key.name === 'backspace') return step({ ...state, screen: 'conversations', status: info('') })
  const rows = treeRows(state)
  /** @param {number} by */
  const move = (by) => step({ ...state, cursor: Math.max(0, Math.min(state.cursor + by, rows.length - 1)), detailScroll: 0 })
  if (is(key, 'j') || key.name === 'down') return move(1)
  if (is(key, 'k') || key.name === 'up') return move(-1)
  if (is(key, 'J')) return step({ ...state, detailScroll: state.detailScroll + 5 })
  if (is(key, 'K')) return step({ ...state, detailScroll: Math.max(0, state.detailScroll - 5) })
  const row = rows[state.cursor]
  // A leaf's messages row opens the raw messages.
  if ((key.name === 'return' || is(key, 'l') || key.name === 'right') && row?.type === 'messages' && state.conversationId !== null) {
    const m = row.node.messages
    const afterSeq = Math.max(0, (m.firstSeq ?? 1) - 1)
    const limit = Math.min(1000, Math.max(1, (m.lastSeq ?? afterSeq + m.count) - afterSeq))
    return step({ ...state, dialog: { type: 'messages', phase: 'loading', summaryId: row.node.summaryId, messages: [], scroll: 0 } }, [
      { type: 'loadMessages', conversationId: state.conversationId, summaryId: row.node.summaryId, afterSeq, limit },
    ])
  }
  if ((key.name === 'return' || is(key, 'l') || key.name === 'right') && row?.expandable && !row.expanded) {
    return step({ ...state, expanded: new Set(state.expanded).add(row.node.summaryId) })
  }
  if (is(key, 'h') || key.name === 'left') {
    if (row?.expanded) {
      const expanded = new Set(state.expanded)
      expanded.delete(row.node.summaryId)
      return step({ ...state, expanded })
    }
    // On a child: go to the node above it.
    if (row && row.level > 0) {
      let parent = state.cursor - 1
      while (parent > 0 && rows[parent].level >= row.level) parent--
      return step({ ...state, cursor: parent })
    }
    return step(state)
  }
  if (is(key, 'f')) {
    const n = state.dag.filter((d) => d.fallback).length
    const text = state.fallbacksOnly ? '' : `${n} fallback ${n === 1 ? 'summary' : 'summaries'}: w or W repairs one`
    return step({ ...state, fallbacksOnly: !state.fallbacksOnly, cursor: 0, status: info(text) })
  }
  const selected = rows[Math.min(state.cursor, rows.length - 1)]?.node
  if (is(key, 'v') && selected) return step(state, [{ type: 'loadVersions', summaryId: selected.summaryId }])
  if (state.conversationId === null || !selected || row?.type !== 'summary') return step(state)
  if (is(key, 'w')) {
    return step({ ...state, dialog: { type: 'rewrite', phase: 'loading', summaryId: selected.summaryId, showDiff: false, scroll: 0 } }, [
      { type: 'preview', conversationId: state.conversationId, summaryId: selected.summaryId },
    ])
  }
  if (is(key, 'W')) {
    return step({ ...state, dialog: { type: 'subtree', phase: 'plan', summaryId: selected.summaryId, plan: subtreePlan(indexDag(state.dag), selected.summaryId) } })
  }
  return step(state)
}
