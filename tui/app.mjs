// @ts-check
// The screens of `lcm-native tui` (Ink): the conversation list, a conversation's DAG with a
// detail pane, the one-summary rewrite (`w`: preview → inflight → review → apply/discard),
// the subtree rewrite (`W`: plan → progress → summary) and the fallback list (`f`). The
// component only draws `state.mjs`'s state and runs its effects; every read and write goes
// through the session (the library's engine API). Stored text reaches the terminal only with
// its bidi controls shown (`⟨U+202E⟩`, tree.mjs's `visibleControls` and `terminalText`): a
// terminal cannot isolate a field, and an unterminated override would reverse the rest of
// the line.

import { Box, Text, useApp, useInput, useStdout } from 'ink'
import { createElement as h, Fragment, useCallback, useEffect, useMemo, useRef, useState } from 'react'

import { errorText, initialState, keysOf, reduce, shownConversations } from './state.mjs'
import { count, deltaText, indexDag, messagesText, planText, rowLabel, terminalText, timeRange, treeForm, variant, visibleControls, visibleRows, wrapDiff, wrapLines } from './tree.mjs'

export { errorText }

/** @typedef {import('./session.mjs').TuiSession} TuiSession */
/** @typedef {import('../index.js').ConversationInfo} ConversationInfo */
/** @typedef {import('../index.js').DagNode} DagNode */
/** @typedef {import('./state.mjs').Dialog} Dialog */
/** @typedef {import('./state.mjs').Effect} Effect */
/** @typedef {import('./state.mjs').Event} Event */
/** @typedef {import('./state.mjs').SubtreeOutcome} SubtreeOutcome */
/** @typedef {import('./state.mjs').Reload} Reload */

const SPINNER = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏']

/**
 * The lines `text` shows, wrapped to `width`, in a window of `height` lines from `scroll`.
 * @param {string} text @param {number} scroll @param {number} height @param {number} width
 */
function windowLines(text, scroll, height, width) {
  const lines = wrapLines(text, width)
  const start = Math.max(0, Math.min(scroll, Math.max(0, lines.length - height)))
  return { lines: lines.slice(start, start + height), start, total: lines.length }
}

/**
 * Lines of text, each cut to the width. Their stored parts come with their controls shown
 * already (before wrapping, which counts the escapes' columns); `terminalText` here is the
 * backstop that no line opens a scope a cut or a missed field could leave open.
 * @param {{ lines: string[], color?: (line: string) => string | undefined }} props
 */
function Lines({ lines, color }) {
  return h(
    Fragment,
    null,
    lines.map((line, i) => h(Text, { key: i, wrap: 'truncate-end', color: color?.(line) }, line === '' ? ' ' : terminalText(line))),
  )
}

/**
 * Runs one of the reducer's effects against the session and dispatches what came of it.
 * @param {Effect} effect
 * @param {{ session: TuiSession, dispatch: (event: Event) => void, exit: () => void, inflight: { current: AbortController | null } }} app
 *   `inflight` holds the controller of the call or run in flight (the `abort` effect aborts it)
 */
async function runEffect(effect, { session, dispatch, exit, inflight }) {
  const failed = (/** @type {unknown} */ err) => dispatch({ type: 'failed', effect, error: errorText(err), mode: session.mode })
  switch (effect.type) {
    case 'exit':
      return exit()
    case 'abort':
      return inflight.current?.abort()
    case 'loadConversations':
      return session.conversations().then((conversations) => dispatch({ type: 'conversationsLoaded', conversations }), failed)
    case 'loadDag': {
      const { conversationId } = effect
      return session.dag(conversationId).then((dag) => dispatch({ type: 'dagLoaded', conversationId, dag }), failed)
    }
    case 'loadMessages': {
      const { summaryId } = effect
      return session.messages(effect.conversationId, effect.afterSeq, effect.limit).then((messages) => dispatch({ type: 'messagesLoaded', summaryId, messages }), failed)
    }
    case 'loadVersions': {
      const { summaryId } = effect
      return session.history(summaryId).then((versions) => dispatch({ type: 'versionsLoaded', summaryId, versions }), failed)
    }
    case 'preview': {
      const { summaryId } = effect
      return session.preview(effect.conversationId, summaryId).then((preview) => dispatch({ type: 'previewLoaded', summaryId, preview }), failed)
    }
    case 'rewriteOne': {
      const controller = new AbortController()
      inflight.current = controller
      try {
        const entry = await session.rewriteOne(effect.conversationId, effect.summaryId, controller.signal)
        // A cancelled call's late answer is dropped: the dialog is gone.
        if (!controller.signal.aborted) dispatch({ type: 'rewritten', summaryId: effect.summaryId, entry })
      } catch (err) {
        if (!controller.signal.aborted) failed(err)
      } finally {
        if (inflight.current === controller) inflight.current = null
      }
      return
    }
    case 'apply':
      try {
        const entry = await session.apply(effect.conversationId, effect.entry)
        const dag = await session.dag(effect.conversationId)
        const conversations = await session.conversations()
        dispatch({ type: 'applied', entry, mode: session.mode, dag, conversations })
      } catch (err) {
        failed(err)
      }
      return
    case 'rewriteSubtree': {
      const controller = new AbortController()
      inflight.current = controller
      /** @type {SubtreeOutcome} */
      let outcome
      try {
        const result = await session.rewriteSubtree(effect.conversationId, effect.summaryId, controller.signal, (progress) =>
          dispatch({ type: 'subtreeProgress', progress }),
        )
        const written = result.entries.filter((e) => e.applied).length
        outcome = { kind: 'done', written, total: result.entries.length, tokensBefore: result.tokensBefore, tokensAfter: result.tokensAfter }
      } catch (err) {
        const stopped = /** @type {{ code?: string }} */ (err)?.code === 'E_ABORTED'
        outcome = stopped ? { kind: 'stopped' } : { kind: 'failed', error: errorText(err) }
      } finally {
        if (inflight.current === controller) inflight.current = null
      }
      // What was written stays written: the DAG is read again however the run ended.
      /** @type {Reload} */
      let reload
      try {
        reload = { dag: await session.dag(effect.conversationId), conversations: await session.conversations() }
      } catch (err) {
        reload = { error: errorText(err) }
      }
      dispatch({ type: 'subtreeFinished', summaryId: effect.summaryId, outcome, mode: session.mode, reload })
      return
    }
  }
}

/**
 * @param {{ session: TuiSession, dbPath: string, summarizer: string, initialConversation?: number }} props
 */
export function App({ session, dbPath, summarizer, initialConversation }) {
  const { exit } = useApp()
  const { stdout } = useStdout()
  const rows = Math.max(12, stdout?.rows ?? 30)
  const columns = Math.max(40, stdout?.columns ?? 100)

  const [state, setState] = useState(() => initialState({ mode: session.mode, initialConversation }))
  const [tick, setTick] = useState(0)
  // A terminal resized is drawn again at once, in its new size (not at the next key).
  const [, setSize] = useState(0)
  useEffect(() => {
    if (!stdout) return undefined
    const resized = () => setSize((n) => n + 1)
    stdout.on('resize', resized)
    return () => {
      stdout.off('resize', resized)
    }
  }, [stdout])
  // The reducer always sees the newest state, even for several events in one tick (the keys
  // of one burst, an answer arriving between two keys), so the state lives in a ref and
  // `setState` only asks for a render.
  const latest = useRef(state)
  const inflight = useRef(/** @type {AbortController | null} */ (null))
  const dispatch = useMemo(() => {
    /** @param {Event} event */
    const dispatch = (event) => {
      const { state: next, effects } = reduce(latest.current, event)
      latest.current = next
      setState(next)
      for (const effect of effects) void runEffect(effect, { session, dispatch, exit, inflight })
    }
    return dispatch
  }, [session, exit])

  useEffect(() => dispatch({ type: 'start' }), [])

  useInput(
    useCallback((input, key) => {
      for (const k of keysOf(input, key)) dispatch({ type: 'key', key: k })
    }, [dispatch]),
  )

  const { screen, conversations, convCursor, filter, filtering, dag, expanded, cursor, detailScroll, fallbacksOnly, dialog, status, mode } = state
  const shown = useMemo(() => shownConversations(conversations, filter), [conversations, filter])
  const byId = useMemo(() => indexDag(dag), [dag])
  const treeRows = useMemo(() => visibleRows(dag, expanded, fallbacksOnly), [dag, expanded, fallbacksOnly])
  const selected = treeRows[Math.min(cursor, treeRows.length - 1)]?.node

  // The spinner turns while a call or a run is in flight.
  const spinning = dialog !== null && ['loading', 'inflight', 'applying', 'running', 'stopping'].includes(dialog.phase)
  useEffect(() => {
    if (!spinning) return
    const t = setInterval(() => setTick((n) => n + 1), 100)
    return () => clearInterval(t)
  }, [spinning])

  const header = h(
    Text,
    { wrap: 'truncate-end' },
    h(Text, { bold: true }, 'lcm-native tui'),
    h(Text, { dimColor: true }, `  ·  ${mode}  ·  summarizer: ${visibleControls(summarizer)}  ·  ${visibleControls(dbPath)}`),
  )

  // The key legend wraps on a narrow terminal; the body takes what is left.
  const keys = legend(state, selected !== undefined && treeRows[Math.min(cursor, treeRows.length - 1)]?.type === 'messages')
  const legendLines = wrapLines(keys, columns)
  const bodyHeight = Math.max(6, rows - 3 - legendLines.length)
  let body
  if (dialog?.type === 'rewrite') {
    body = rewriteDialog(dialog, bodyHeight, tick, columns)
  } else if (dialog?.type === 'subtree') {
    body = subtreeDialog(dialog, tick)
  } else if (dialog?.type === 'versions') {
    body = versionsDialog(dialog, bodyHeight, columns)
  } else if (dialog?.type === 'messages') {
    body = messagesDialog(dialog, bodyHeight, columns, tick)
  } else if (screen === 'conversations') {
    body = conversationList(shown, convCursor, bodyHeight, conversations === null, columns)
  } else {
    body = dagView({ rows: treeRows, cursor, selected, byId, detailScroll, height: bodyHeight, columns, fallbacksOnly })
  }
  return h(
    Box,
    { flexDirection: 'column' },
    header,
    h(Box, { flexDirection: 'column', height: bodyHeight }, body),
    h(Box, { flexDirection: 'column' }, legendLines.map((line, i) => h(Text, { key: i, dimColor: true, wrap: 'truncate-end' }, line))),
    h(Text, { color: status.kind === 'error' ? 'red' : 'green', wrap: 'truncate-end' }, visibleControls(status.text) || ' '),
  )
}

/**
 * The keys of what is on screen.
 * @param {import('./state.mjs').State} state @param {boolean} onMessages the DAG's cursor is on a leaf's messages row
 */
function legend(state, onMessages) {
  const d = state.dialog
  if (d?.type === 'rewrite') {
    if (d.phase === 'preview') return 'enter send · J/K scroll · esc cancel'
    if (d.phase === 'inflight') return 'esc cancel'
    if (d.phase === 'review') return `y/enter apply · n/esc discard · d ${d.showDiff ? 'old/new' : 'diff'} · J/K scroll`
    return ''
  }
  if (d?.type === 'subtree') return d.phase === 'plan' ? 'y run · n/esc cancel' : d.phase === 'running' ? 'esc stop after the current one' : d.phase === 'done' ? 'enter close' : ''
  if (d?.type === 'versions') return 'J/K scroll · esc close'
  if (d?.type === 'messages') return 'j/k line · J/K or space page · esc close'
  if (state.screen === 'conversations') {
    const filter = visibleControls(state.filter)
    return state.filtering ? `filter: ${filter}▏  enter keep · esc clear` : `j/k move · enter open · / filter${filter ? ` (${filter})` : ''} · q quit`
  }
  return `j/k move · ${onMessages ? 'enter messages' : 'enter/l expand'} · h collapse · J/K scroll · w rewrite · W subtree · v versions · f fallbacks · esc back · q quit`
}

/** A time as the list shows it: `2026-11-26 09:07:00` (ISO-8601 or SQLite's shape in). @param {string} t */
const activity = (t) => t.replace('T', ' ').replace(/(\.\d+)?Z$/, '')

/** @param {ConversationInfo[]} list @param {number} cursor @param {number} height @param {boolean} loading @param {number} columns */
function conversationList(list, cursor, height, loading, columns) {
  if (loading) return h(Text, null, 'Loading conversations…')
  if (list.length === 0) return h(Text, null, 'No conversations.')
  const room = height - 1
  const start = Math.max(0, Math.min(cursor - Math.floor(room / 2), list.length - room))
  // The session column gives way on a narrow terminal, the numbers and the time do not.
  const summariesWidth = columns >= 100 ? 19 : 14
  const sessionWidth = Math.max(12, Math.min(34, columns - 52 - summariesWidth))
  const header = `  ${'id'.padStart(5)}  ${'session'.padEnd(sessionWidth)}  ${'msgs'.padStart(6)}  ${(summariesWidth >= 19 ? 'summaries (d0/d1/…)' : 'summaries').padEnd(summariesWidth)}  ${'tokens'.padStart(9)}  last activity`
  return h(
    Fragment,
    null,
    h(Text, { bold: true, wrap: 'truncate-end' }, header),
    list.slice(start, start + room).map((c, i) => {
      const at = start + i
      const name = visibleControls(c.sessionKey ?? c.sessionId)
      const session = (name.length > sessionWidth ? `${name.slice(0, sessionWidth - 1)}…` : name).padEnd(sessionWidth)
      const depths = c.summariesByDepth.length ? c.summariesByDepth.join('/') : '—'
      const line = `${at === cursor ? '›' : ' '} ${String(c.conversationId).padStart(5)}  ${session}  ${String(c.messageCount).padStart(6)}  ${`${c.summaryCount} (${depths})`.padEnd(summariesWidth)}  ${count(c.messageTokens).padStart(9)}  ${activity(c.lastMessageAt ?? c.updatedAt)}`
      return h(Text, { key: c.conversationId, inverse: at === cursor, wrap: 'truncate-end' }, line)
    }),
  )
}

/**
 * @param {{ rows: import('./tree.mjs').Row[], cursor: number, selected: DagNode | undefined, byId: Map<string, DagNode>,
 *           detailScroll: number, height: number, columns: number, fallbacksOnly: boolean }} p
 */
function dagView({ rows, cursor, selected, byId, detailScroll, height, columns, fallbacksOnly }) {
  // The tree takes under half the width (at most 72 columns), the text the rest.
  const treeWidth = Math.max(28, Math.min(72, Math.floor(columns * 0.5)))
  const textWidth = Math.max(20, columns - treeWidth - 2)
  const room = height - 1
  const start = Math.max(0, Math.min(cursor - Math.floor(room / 2), rows.length - room))
  const shown = rows.slice(start, start + room)
  const form = treeForm(shown, treeWidth - 1)
  // The compact forms mark live and fallback summaries with one character: the title says which.
  const marks = form === 'full' ? '' : '  * live · ! fallback'
  const title = `${fallbacksOnly ? `Fallback summaries (${rows.length})` : `DAG (${byId.size} summaries)`}${marks}`
  const tree = h(
    Box,
    { flexDirection: 'column', width: treeWidth, flexShrink: 0, paddingRight: 1 },
    h(Text, { bold: true }, title),
    rows.length === 0
      ? h(Text, null, fallbacksOnly ? 'No fallback summaries.' : 'No summaries yet.')
      : shown.map((r, i) =>
          h(
            Text,
            { key: r.key, inverse: start + i === cursor, wrap: 'truncate-end', color: r.node.fallback && r.type === 'summary' ? 'yellow' : undefined },
            `${'  '.repeat(r.level)}${rowLabel(r, treeWidth - 1, form)}`,
          ),
        ),
  )
  let detail = h(Text, null, ' ')
  if (selected) {
    const meta = wrapLines(
      [
        `${visibleControls(selected.summaryId)}  ${visibleControls(selected.kind)} d${selected.depth}  ${count(selected.tokenCount)} tokens`,
        `${timeRange(selected.earliestAt, selected.latestAt)}  ·  messages #${selected.messages.firstSeq ?? '?'}–#${selected.messages.lastSeq ?? '?'} (${selected.messages.count})`,
        `model: ${visibleControls(selected.model)}${selected.fallback ? '  [fallback]' : ''}${selected.live ? '  live' : ''}`,
        `inputs: ${selected.inputs.length ? selected.inputs.map(visibleControls).join(', ') : '— (a leaf)'}`,
        `covered by: ${selected.consumedBy === null ? '— (a root)' : visibleControls(selected.consumedBy)}`,
        '',
      ].join('\n'),
      textWidth,
    )
    const win = windowLines(terminalText(selected.content), detailScroll, Math.max(3, height - meta.length - 1), textWidth)
    detail = h(
      Box,
      { flexDirection: 'column', flexGrow: 1 },
      h(Lines, { lines: meta }),
      h(Lines, { lines: win.lines }),
      h(Text, { dimColor: true }, `lines ${win.start + 1}–${win.start + win.lines.length} of ${win.total}`),
    )
  }
  return h(Box, { flexDirection: 'row', height }, tree, h(Box, { marginLeft: 1, flexDirection: 'column', flexGrow: 1 }, detail))
}

/** @param {Dialog & { type: 'rewrite' }} d @param {number} height @param {number} tick @param {number} width */
function rewriteDialog(d, height, tick, width) {
  const spin = SPINNER[tick % SPINNER.length]
  const p = d.preview
  const id = visibleControls(d.summaryId)
  const which = p ? `${variant(p.depth)} prompt` : 'prompt'
  if (d.phase === 'loading') return h(Text, null, `${spin} Rendering the prompt of ${id}…`)
  if (d.phase === 'inflight' || d.phase === 'applying') {
    const text = d.phase === 'inflight' ? `${spin} Rewriting ${id} with ${which}…` : `${spin} Applying ${id}…`
    return h(Text, { color: 'cyan' }, text)
  }
  if (d.phase === 'preview' && p) {
    const meta = wrapLines(
      [
        `Rewrite ${visibleControls(p.summaryId)} (${visibleControls(p.kind)} d${p.depth}) with the ${variant(p.depth)} prompt`,
        `template: ${visibleControls(p.template.name)} from ${p.template.overridden ? visibleControls(p.template.source) : 'embedded'}`,
        `source: ${p.childCount} ${p.kind === 'leaf' ? 'messages' : 'summaries'}, ~${count(p.sourceTokens)} tokens, ${visibleControls(p.timeRange)}`,
        `prompt: ~${count(p.promptTokens)} tokens · target ${count(p.targetTokens)} tokens · now ${count(p.oldTokens)} tokens`,
        '─'.repeat(Math.min(40, width)),
      ].join('\n'),
      width,
    )
    const win = windowLines(terminalText(p.prompt), d.scroll, Math.max(3, height - meta.length - 1), width)
    return h(Fragment, null, h(Lines, { lines: meta }), h(Lines, { lines: win.lines }), h(Text, { dimColor: true }, `prompt lines ${win.start + 1}–${win.start + win.lines.length} of ${win.total}`))
  }
  if (d.phase === 'review' && d.entry) {
    const e = d.entry
    const top = [`Review ${visibleControls(e.summaryId)}: ${deltaText(e.oldTokens, e.newTokens)}${e.fidelity === null ? '' : `  ·  fidelity ${e.fidelity.toFixed(2)}`}`]
    // What would be written first, the old text below it; or the diff, each wrapped line
    // keeping its marker.
    const lines = d.showDiff
      ? wrapDiff(terminalText(e.diff || '(no change)'), width)
      : wrapLines([`NEW (${e.newTokens} tokens)`, ...terminalText(e.newContent).split('\n'), '', `OLD (${e.oldTokens} tokens)`, ...terminalText(e.oldContent).split('\n')].join('\n'), width)
    const win = windowLines(lines.join('\n'), d.scroll, Math.max(3, height - 2), Infinity)
    const color = d.showDiff ? (/** @type {string} */ l) => (l.startsWith('+') ? 'green' : l.startsWith('-') ? 'red' : undefined) : undefined
    return h(Fragment, null, h(Lines, { lines: wrapLines(top.join('\n'), width) }), h(Lines, { lines: win.lines, color }))
  }
  return h(Text, null, ' ')
}

/** A leaf's raw messages, wrapped and scrolled. @param {Dialog & { type: 'messages' }} d @param {number} height @param {number} width @param {number} tick */
function messagesDialog(d, height, width, tick) {
  const id = visibleControls(d.summaryId)
  if (d.phase === 'loading') return h(Text, null, `${SPINNER[tick % SPINNER.length]} Reading the messages of ${id}…`)
  const first = d.messages[0]
  const last = d.messages[d.messages.length - 1]
  const title = first ? `Messages #${first.seq}–#${last.seq} of ${id} (${d.messages.length})` : `No stored messages for ${id}`
  const win = windowLines(messagesText(d.messages), d.scroll, Math.max(3, height - 2), width)
  return h(
    Fragment,
    null,
    h(Text, { bold: true, wrap: 'truncate-end' }, title),
    h(Lines, { lines: win.lines }),
    h(Text, { dimColor: true }, `lines ${win.start + 1}–${win.start + win.lines.length} of ${win.total}`),
  )
}

/** Every version of a summary's text, newest last, each with its text. @param {Dialog & { type: 'versions' }} d @param {number} height @param {number} width */
function versionsDialog(d, height, width) {
  const lines = [`Versions of ${visibleControls(d.summaryId)} (${d.versions.length})`, '']
  for (const v of d.versions) {
    const template = v.template ? `${visibleControls(v.template.name)}${v.template.overridden ? ' (override)' : ''}` : '—'
    lines.push(`v${v.version}${v.current ? ' (current)' : ''}  ${visibleControls(v.reason)}  ${visibleControls(v.createdAt)}  ${visibleControls(v.model ?? '—')}  ${template}  ${v.tokenCount} tokens`)
    for (const l of terminalText(v.content).split('\n').slice(0, 3)) lines.push(`    ${l}`)
  }
  const win = windowLines(lines.join('\n'), d.scroll, Math.max(3, height), width)
  return h(Lines, { lines: win.lines })
}

/** @param {Dialog & { type: 'subtree' }} d @param {number} tick */
function subtreeDialog(d, tick) {
  const spin = SPINNER[tick % SPINNER.length]
  if (d.phase === 'plan') {
    return h(Text, { wrap: 'wrap' }, `${planText(d.plan)} [y/n]  (${visibleControls(d.summaryId)} and everything beneath it, bottom-up)`)
  }
  if (d.phase === 'running' || d.phase === 'stopping') {
    const p = d.progress
    const line = p ? `Rewriting ${p.done + 1}/${p.total}: ${visibleControls(p.summaryId)} (${variant(p.depth)})…` : 'Starting…'
    return h(Text, { color: 'cyan', wrap: 'wrap' }, `${spin} ${line}${d.phase === 'stopping' ? '  (stopping after this one)' : ''}`)
  }
  return h(Text, { wrap: 'wrap' }, visibleControls(d.line ?? ''))
}
