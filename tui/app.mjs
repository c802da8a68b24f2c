// @ts-check
// The screens of `lcm-native tui` (Ink): the conversation list, a conversation's DAG with a
// detail pane, the one-summary rewrite (`w`: preview → inflight → review → apply/discard),
// the subtree rewrite (`W`: plan → progress → summary) and the fallback list (`f`). The
// component only draws `state.mjs`'s state and runs its effects; every read and write goes
// through the session (the library's engine API).

import { Box, Text, useApp, useInput, useStdout } from 'ink'
import { createElement as h, Fragment, useCallback, useEffect, useMemo, useRef, useState } from 'react'

import { errorText, initialState, keysOf, reduce, shownConversations } from './state.mjs'
import { count, deltaText, indexDag, planText, rowLabel, timeRange, variant, visibleRows } from './tree.mjs'

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

/** The lines `text` shows in a window of `height` lines from `scroll`. @param {string} text @param {number} scroll @param {number} height */
function windowLines(text, scroll, height) {
  const lines = text.split('\n')
  const start = Math.max(0, Math.min(scroll, Math.max(0, lines.length - height)))
  return { lines: lines.slice(start, start + height), start, total: lines.length }
}

/** @param {{ lines: string[], color?: (line: string) => string | undefined }} props */
function Lines({ lines, color }) {
  return h(
    Fragment,
    null,
    lines.map((line, i) => h(Text, { key: i, wrap: 'truncate-end', color: color?.(line) }, line === '' ? ' ' : line)),
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
  const columns = Math.max(60, stdout?.columns ?? 100)
  const bodyHeight = rows - 5

  const [state, setState] = useState(() => initialState({ mode: session.mode, initialConversation }))
  const [tick, setTick] = useState(0)
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
    Box,
    null,
    h(Text, { bold: true }, 'lcm-native tui'),
    h(Text, { dimColor: true }, `  ·  ${dbPath}  ·  ${mode}  ·  summarizer: ${summarizer}`),
  )

  let body
  let keys
  if (dialog?.type === 'rewrite') {
    ;({ body, keys } = rewriteDialog(dialog, bodyHeight, tick))
  } else if (dialog?.type === 'subtree') {
    ;({ body, keys } = subtreeDialog(dialog, tick))
  } else if (dialog?.type === 'versions') {
    ;({ body, keys } = versionsDialog(dialog, bodyHeight))
  } else if (screen === 'conversations') {
    body = conversationList(shown, convCursor, bodyHeight, conversations === null)
    keys = filtering ? `filter: ${filter}▏  enter keep · esc clear` : `j/k move · enter open · / filter${filter ? ` (${filter})` : ''} · q quit`
  } else {
    body = dagView({ rows: treeRows, cursor, selected, byId, detailScroll, height: bodyHeight, columns, fallbacksOnly })
    keys = 'j/k move · enter/l expand · h collapse · J/K scroll · w rewrite · W subtree · v versions · f fallbacks · esc back · q quit'
  }
  return h(
    Box,
    { flexDirection: 'column' },
    header,
    h(Box, { flexDirection: 'column', height: bodyHeight }, body),
    h(Text, { dimColor: true, wrap: 'truncate-end' }, keys),
    h(Text, { color: status.kind === 'error' ? 'red' : 'green', wrap: 'truncate-end' }, status.text || ' '),
  )
}

/** @param {ConversationInfo[]} list @param {number} cursor @param {number} height @param {boolean} loading */
function conversationList(list, cursor, height, loading) {
  if (loading) return h(Text, null, 'Loading conversations…')
  if (list.length === 0) return h(Text, null, 'No conversations.')
  const room = height - 1
  const start = Math.max(0, Math.min(cursor - Math.floor(room / 2), list.length - room))
  const header = `  ${'id'.padStart(5)}  ${'session'.padEnd(34)}  ${'msgs'.padStart(6)}  ${'summaries (d0/d1/…)'.padEnd(22)}  ${'tokens'.padStart(9)}  last activity`
  return h(
    Fragment,
    null,
    h(Text, { bold: true, wrap: 'truncate-end' }, header),
    list.slice(start, start + room).map((c, i) => {
      const at = start + i
      const session = (c.sessionKey ?? c.sessionId).slice(0, 34).padEnd(34)
      const depths = c.summariesByDepth.length ? c.summariesByDepth.join('/') : '—'
      const line = `${at === cursor ? '›' : ' '} ${String(c.conversationId).padStart(5)}  ${session}  ${String(c.messageCount).padStart(6)}  ${`${c.summaryCount} (${depths})`.padEnd(22)}  ${count(c.messageTokens).padStart(9)}  ${c.updatedAt}`
      return h(Text, { key: c.conversationId, inverse: at === cursor, wrap: 'truncate-end' }, line)
    }),
  )
}

/**
 * @param {{ rows: import('./tree.mjs').Row[], cursor: number, selected: DagNode | undefined, byId: Map<string, DagNode>,
 *           detailScroll: number, height: number, columns: number, fallbacksOnly: boolean }} p
 */
function dagView({ rows, cursor, selected, byId, detailScroll, height, columns, fallbacksOnly }) {
  const treeWidth = Math.min(columns - 30, Math.max(70, Math.floor(columns * 0.5)))
  const room = height - 1
  const start = Math.max(0, Math.min(cursor - Math.floor(room / 2), rows.length - room))
  const title = fallbacksOnly ? `Fallback summaries (${rows.length})` : `DAG (${byId.size} summaries)`
  const tree = h(
    Box,
    { flexDirection: 'column', width: treeWidth, flexShrink: 0, paddingRight: 1 },
    h(Text, { bold: true }, title),
    rows.length === 0
      ? h(Text, null, fallbacksOnly ? 'No fallback summaries.' : 'No summaries yet.')
      : rows.slice(start, start + room).map((r, i) =>
          h(
            Text,
            { key: r.key, inverse: start + i === cursor, wrap: 'truncate-end', color: r.node.fallback && r.type === 'summary' ? 'yellow' : undefined },
            `${'  '.repeat(r.level)}${rowLabel(r)}`,
          ),
        ),
  )
  let detail = h(Text, null, ' ')
  if (selected) {
    const meta = [
      `${selected.summaryId}  ${selected.kind} d${selected.depth}  ${count(selected.tokenCount)} tokens`,
      `${timeRange(selected.earliestAt, selected.latestAt)}  ·  messages #${selected.messages.firstSeq ?? '?'}–#${selected.messages.lastSeq ?? '?'} (${selected.messages.count})`,
      `model: ${selected.model}${selected.fallback ? '  [fallback]' : ''}${selected.live ? '  live' : ''}`,
      `inputs: ${selected.inputs.length ? selected.inputs.join(', ') : '— (a leaf)'}`,
      `covered by: ${selected.consumedBy ?? '— (a root)'}`,
      '',
    ]
    const win = windowLines(selected.content, detailScroll, Math.max(3, height - meta.length - 1))
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

/** @param {Dialog & { type: 'rewrite' }} d @param {number} height @param {number} tick */
function rewriteDialog(d, height, tick) {
  const spin = SPINNER[tick % SPINNER.length]
  const p = d.preview
  const which = p ? `${variant(p.depth)} prompt` : 'prompt'
  if (d.phase === 'loading') return { body: h(Text, null, `${spin} Rendering the prompt of ${d.summaryId}…`), keys: '' }
  if (d.phase === 'inflight' || d.phase === 'applying') {
    const text = d.phase === 'inflight' ? `${spin} Rewriting ${d.summaryId} with ${which}…` : `${spin} Applying ${d.summaryId}…`
    return { body: h(Text, { color: 'cyan' }, text), keys: d.phase === 'inflight' ? 'esc cancel' : '' }
  }
  if (d.phase === 'preview' && p) {
    const meta = [
      `Rewrite ${p.summaryId} (${p.kind} d${p.depth}) with the ${variant(p.depth)} prompt`,
      `template: ${p.template.name} from ${p.template.overridden ? p.template.source : 'embedded'}`,
      `source: ${p.childCount} ${p.kind === 'leaf' ? 'messages' : 'summaries'}, ~${count(p.sourceTokens)} tokens, ${p.timeRange}`,
      `prompt: ~${count(p.promptTokens)} tokens · target ${count(p.targetTokens)} tokens · now ${count(p.oldTokens)} tokens`,
      '─'.repeat(40),
    ]
    const win = windowLines(p.prompt, d.scroll, Math.max(3, height - meta.length - 1))
    return {
      body: h(Fragment, null, h(Lines, { lines: meta }), h(Lines, { lines: win.lines }), h(Text, { dimColor: true }, `prompt lines ${win.start + 1}–${win.start + win.lines.length} of ${win.total}`)),
      keys: 'enter send · J/K scroll · esc cancel',
    }
  }
  if (d.phase === 'review' && d.entry) {
    const e = d.entry
    const top = [`Review ${e.summaryId}: ${deltaText(e.oldTokens, e.newTokens)}${e.fidelity === null ? '' : `  ·  fidelity ${e.fidelity.toFixed(2)}`}`]
    let lines
    if (d.showDiff) {
      lines = (e.diff || '(no change)').split('\n')
    } else {
      lines = [`OLD (${e.oldTokens} tokens)`, ...e.oldContent.split('\n'), '', `NEW (${e.newTokens} tokens)`, ...e.newContent.split('\n')]
    }
    const win = windowLines(lines.join('\n'), d.scroll, Math.max(3, height - 2))
    const color = d.showDiff ? (/** @type {string} */ l) => (l.startsWith('+') ? 'green' : l.startsWith('-') ? 'red' : undefined) : undefined
    return {
      body: h(Fragment, null, h(Lines, { lines: top }), h(Lines, { lines: win.lines, color })),
      keys: `y/enter apply · n/esc discard · d ${d.showDiff ? 'old/new' : 'diff'} · J/K scroll`,
    }
  }
  return { body: h(Text, null, ' '), keys: '' }
}

/** Every version of a summary's text, newest last, each with its text. @param {Dialog & { type: 'versions' }} d @param {number} height */
function versionsDialog(d, height) {
  const lines = [`Versions of ${d.summaryId} (${d.versions.length})`, '']
  for (const v of d.versions) {
    const template = v.template ? `${v.template.name}${v.template.overridden ? ' (override)' : ''}` : '—'
    lines.push(`v${v.version}${v.current ? ' (current)' : ''}  ${v.reason}  ${v.createdAt}  ${v.model ?? '—'}  ${template}  ${v.tokenCount} tokens`)
    for (const l of v.content.split('\n').slice(0, 3)) lines.push(`    ${l}`)
  }
  const win = windowLines(lines.join('\n'), d.scroll, Math.max(3, height))
  return { body: h(Lines, { lines: win.lines }), keys: 'J/K scroll · esc close' }
}

/** @param {Dialog & { type: 'subtree' }} d @param {number} tick */
function subtreeDialog(d, tick) {
  const spin = SPINNER[tick % SPINNER.length]
  if (d.phase === 'plan') {
    return { body: h(Text, null, `${planText(d.plan)} [y/n]  (${d.summaryId} and everything beneath it, bottom-up)`), keys: 'y run · n/esc cancel' }
  }
  if (d.phase === 'running' || d.phase === 'stopping') {
    const p = d.progress
    const line = p ? `Rewriting ${p.done + 1}/${p.total}: ${p.summaryId} (${variant(p.depth)})…` : 'Starting…'
    return {
      body: h(Text, { color: 'cyan' }, `${spin} ${line}${d.phase === 'stopping' ? '  (stopping after this one)' : ''}`),
      keys: d.phase === 'running' ? 'esc stop after the current one' : '',
    }
  }
  return { body: h(Text, null, d.line ?? ''), keys: 'enter close' }
}
