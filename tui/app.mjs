// @ts-check
// The screens of `lcm-native tui` (Ink): the conversation list, a conversation's DAG with a
// detail pane, the one-summary rewrite (`w`: preview → inflight → review → apply/discard),
// the subtree rewrite (`W`: plan → progress → summary) and the fallback list (`f`). Every
// read and write goes through the session (the library's engine API).

import { Box, Text, useApp, useInput, useStdout } from 'ink'
import { createElement as h, Fragment, useCallback, useEffect, useMemo, useRef, useState } from 'react'

import { count, deltaText, indexDag, planText, rowLabel, subtreePlan, timeRange, variant, visibleRows } from './tree.mjs'

/** @typedef {import('./session.mjs').TuiSession} TuiSession */
/** @typedef {import('../index.js').ConversationInfo} ConversationInfo */
/** @typedef {import('../index.js').DagNode} DagNode */
/** @typedef {import('../index.js').RewritePreview} RewritePreview */
/** @typedef {import('../index.js').RewriteEntry} RewriteEntry */
/** @typedef {import('../index.js').RewriteProgress} RewriteProgress */
/** @typedef {import('../index.js').SummaryVersion} SummaryVersion */

/**
 * @typedef {{ type: 'rewrite', phase: 'loading' | 'preview' | 'inflight' | 'review' | 'applying', summaryId: string,
 *             preview?: RewritePreview, entry?: RewriteEntry, showDiff: boolean, scroll: number }
 *   | { type: 'subtree', phase: 'plan' | 'running' | 'stopping' | 'done', summaryId: string,
 *       plan: ReturnType<typeof subtreePlan>, progress?: RewriteProgress, line?: string }
 *   | { type: 'versions', phase: 'shown', summaryId: string, versions: SummaryVersion[], scroll: number }} Dialog
 */

const SPINNER = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏']

/** "E_CODE: message" of a rejection. @param {unknown} err */
export function errorText(err) {
  const e = /** @type {{ code?: string, message?: string }} */ (err)
  const message = String(e?.message ?? err).split('\n')[0].slice(0, 300)
  return e?.code ? `${e.code}: ${message}` : message
}

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
 * @param {{ session: TuiSession, dbPath: string, summarizer: string, initialConversation?: number }} props
 */
export function App({ session, dbPath, summarizer, initialConversation }) {
  const { exit } = useApp()
  const { stdout } = useStdout()
  const rows = Math.max(12, stdout?.rows ?? 30)
  const columns = Math.max(60, stdout?.columns ?? 100)
  const bodyHeight = rows - 5

  const [screen, setScreen] = useState(/** @type {'conversations' | 'dag'} */ ('conversations'))
  const [conversations, setConversations] = useState(/** @type {ConversationInfo[] | null} */ (null))
  const [convCursor, setConvCursor] = useState(0)
  const [filter, setFilter] = useState('')
  const [filtering, setFiltering] = useState(false)
  const [conversationId, setConversationId] = useState(/** @type {number | null} */ (null))
  const [dag, setDag] = useState(/** @type {DagNode[]} */ ([]))
  const [expanded, setExpanded] = useState(/** @type {Set<string>} */ (new Set()))
  const [cursor, setCursor] = useState(0)
  const [detailScroll, setDetailScroll] = useState(0)
  const [fallbacksOnly, setFallbacksOnly] = useState(false)
  const [dialog, setDialog] = useState(/** @type {Dialog | null} */ (null))
  const [status, setStatus] = useState(/** @type {{ kind: 'info' | 'error', text: string }} */ ({ kind: 'info', text: '' }))
  const [mode, setMode] = useState(session.mode)
  const [tick, setTick] = useState(0)
  /** The controller of the call or run in flight (esc aborts it). */
  const inflight = useRef(/** @type {AbortController | null} */ (null))

  const fail = useCallback((/** @type {unknown} */ err) => setStatus({ kind: 'error', text: errorText(err) }), [])

  useEffect(() => {
    session.conversations().then(setConversations, fail)
  }, [session, fail])

  const shown = useMemo(() => {
    const all = conversations ?? []
    const f = filter.trim().toLowerCase()
    if (!f) return all
    return all.filter((c) => `${c.conversationId} ${c.sessionId} ${c.sessionKey ?? ''}`.toLowerCase().includes(f))
  }, [conversations, filter])

  const byId = useMemo(() => indexDag(dag), [dag])
  const treeRows = useMemo(() => visibleRows(dag, expanded, fallbacksOnly), [dag, expanded, fallbacksOnly])
  const selected = treeRows[Math.min(cursor, treeRows.length - 1)]?.node

  const openConversation = useCallback(
    async (/** @type {number} */ id) => {
      try {
        const nodes = await session.dag(id)
        setConversationId(id)
        setDag(nodes)
        setExpanded(new Set())
        setCursor(0)
        setDetailScroll(0)
        setFallbacksOnly(false)
        setScreen('dag')
        setStatus({ kind: 'info', text: `conversation ${id}: ${nodes.length} summaries` })
      } catch (err) {
        fail(err)
      }
    },
    [session, fail],
  )

  useEffect(() => {
    if (initialConversation !== undefined && conversations) void openConversation(initialConversation)
  }, [initialConversation, conversations !== null])

  /** Reads the conversation's DAG (and the list's counts) again; returns the new DAG. */
  const reloadDag = useCallback(async () => {
    if (conversationId === null) return []
    const nodes = await session.dag(conversationId)
    setDag(nodes)
    setConversations(await session.conversations())
    return nodes
  }, [session, conversationId])

  // The spinner turns while a call or a run is in flight.
  const spinning = dialog !== null && ['loading', 'inflight', 'applying', 'running', 'stopping'].includes(dialog.phase)
  useEffect(() => {
    if (!spinning) return
    const t = setInterval(() => setTick((n) => n + 1), 100)
    return () => clearInterval(t)
  }, [spinning])

  const startRewrite = useCallback(
    async (/** @type {DagNode} */ node) => {
      if (conversationId === null) return
      setDialog({ type: 'rewrite', phase: 'loading', summaryId: node.summaryId, showDiff: false, scroll: 0 })
      try {
        const preview = await session.preview(conversationId, node.summaryId)
        setDialog({ type: 'rewrite', phase: 'preview', summaryId: node.summaryId, preview, showDiff: false, scroll: 0 })
      } catch (err) {
        setDialog(null)
        fail(err)
      }
    },
    [session, conversationId, fail],
  )

  const send = useCallback(
    async (/** @type {Dialog & { type: 'rewrite' }} */ d) => {
      if (conversationId === null) return
      const controller = new AbortController()
      inflight.current = controller
      setDialog({ ...d, phase: 'inflight', scroll: 0 })
      try {
        const entry = await session.rewriteOne(conversationId, d.summaryId, controller.signal)
        if (controller.signal.aborted) return
        if (entry.level === 'fallback') {
          setDialog(null)
          setStatus({ kind: 'error', text: `E_SUMMARIZER: the summarizer gave nothing usable for ${d.summaryId}; it was left as it was` })
          return
        }
        setDialog({ ...d, phase: 'review', entry, scroll: 0 })
      } catch (err) {
        if (controller.signal.aborted) return
        setDialog(null)
        fail(err)
      } finally {
        if (inflight.current === controller) inflight.current = null
      }
    },
    [session, conversationId, fail],
  )

  const applyReviewed = useCallback(
    async (/** @type {Dialog & { type: 'rewrite' }} */ d) => {
      if (conversationId === null || !d.entry) return
      setDialog({ ...d, phase: 'applying' })
      try {
        const entry = await session.apply(conversationId, d.entry)
        setMode(session.mode)
        await reloadDag()
        setDialog(null)
        setStatus({ kind: 'info', text: `applied ${entry.summaryId}: ${deltaText(entry.oldTokens, entry.newTokens)}` })
      } catch (err) {
        setMode(session.mode)
        setDialog(null)
        fail(err)
      }
    },
    [session, conversationId, reloadDag, fail],
  )

  const runSubtree = useCallback(
    async (/** @type {Dialog & { type: 'subtree' }} */ d) => {
      if (conversationId === null) return
      const controller = new AbortController()
      inflight.current = controller
      setDialog({ ...d, phase: 'running' })
      const before = d.plan.tokens
      let done = 0
      let line
      try {
        const result = await session.rewriteSubtree(conversationId, d.summaryId, controller.signal, (p) => {
          done = p.done
          setDialog((cur) => (cur && cur.type === 'subtree' && cur.phase !== 'done' ? { ...cur, progress: p } : cur))
        })
        const written = result.entries.filter((e) => e.applied).length
        line = `Rewrote ${written} of ${result.entries.length} summaries: ${count(result.tokensBefore)} → ${count(result.tokensAfter)} tokens`
      } catch (err) {
        const e = /** @type {{ code?: string }} */ (err)
        line = e?.code === 'E_ABORTED' ? `Stopped after ${done} of ${d.plan.ids.length}` : errorText(err)
        if (e?.code !== 'E_ABORTED') setStatus({ kind: 'error', text: errorText(err) })
      } finally {
        if (inflight.current === controller) inflight.current = null
      }
      setMode(session.mode)
      /** @type {DagNode[]} */
      let nodes = []
      try {
        nodes = await reloadDag()
      } catch (err) {
        fail(err)
      }
      const after = subtreeTokens(nodes, d.plan.ids)
      setDialog({ ...d, phase: 'done', line: `${line} (subtree ${count(before)} → ${count(after)} tokens)` })
    },
    [session, conversationId, reloadDag, fail],
  )

  useInput((input, key) => {
    if (key.ctrl && input === 'c') {
      inflight.current?.abort()
      exit()
      return
    }
    // Dialogs take every key while open.
    if (dialog?.type === 'rewrite') {
      const scroll = (/** @type {number} */ by) => setDialog({ ...dialog, scroll: Math.max(0, dialog.scroll + by) })
      if (input === 'J') return scroll(5)
      if (input === 'K') return scroll(-5)
      if (dialog.phase === 'preview') {
        if (key.return) void send(dialog)
        else if (key.escape || input === 'n') setDialog(null)
      } else if (dialog.phase === 'inflight') {
        if (key.escape) {
          inflight.current?.abort()
          setDialog(null)
          setStatus({ kind: 'info', text: `cancelled: ${dialog.summaryId} was left as it was` })
        }
      } else if (dialog.phase === 'review') {
        if (input === 'd') setDialog({ ...dialog, showDiff: !dialog.showDiff, scroll: 0 })
        else if (input === 'y' || key.return) void applyReviewed(dialog)
        else if (input === 'n' || key.escape) {
          setDialog(null)
          setStatus({ kind: 'info', text: `discarded: ${dialog.summaryId} was left as it was` })
        }
      }
      return
    }
    if (dialog?.type === 'versions') {
      if (input === 'J') setDialog({ ...dialog, scroll: dialog.scroll + 5 })
      else if (input === 'K') setDialog({ ...dialog, scroll: Math.max(0, dialog.scroll - 5) })
      else if (key.escape || key.return || input === 'v' || input === 'q') setDialog(null)
      return
    }
    if (dialog?.type === 'subtree') {
      if (dialog.phase === 'plan') {
        if (input === 'y' || key.return) void runSubtree(dialog)
        else if (input === 'n' || key.escape) setDialog(null)
      } else if (dialog.phase === 'running') {
        if (key.escape) {
          inflight.current?.abort()
          setDialog({ ...dialog, phase: 'stopping' })
        }
      } else if (dialog.phase === 'done') {
        if (key.return || key.escape || input === 'q') setDialog(null)
      }
      return
    }

    if (screen === 'conversations') {
      if (filtering) {
        if (key.return) setFiltering(false)
        else if (key.escape) {
          setFilter('')
          setFiltering(false)
        } else if (key.backspace || key.delete) setFilter((f) => f.slice(0, -1))
        else if (input && !key.ctrl && !key.meta) {
          setFilter((f) => f + input)
          setConvCursor(0)
        }
        return
      }
      if (input === 'q') return exit()
      if (input === '/') return setFiltering(true)
      if (input === 'j' || key.downArrow) return setConvCursor((c) => Math.min(c + 1, Math.max(0, shown.length - 1)))
      if (input === 'k' || key.upArrow) return setConvCursor((c) => Math.max(0, c - 1))
      if (key.return && shown[convCursor]) return void openConversation(shown[convCursor].conversationId)
      return
    }

    // The DAG view.
    if (input === 'q') return exit()
    if (key.escape || key.backspace) {
      setScreen('conversations')
      setStatus({ kind: 'info', text: '' })
      return
    }
    const move = (/** @type {number} */ by) => {
      setCursor((c) => Math.max(0, Math.min(c + by, treeRows.length - 1)))
      setDetailScroll(0)
    }
    if (input === 'j' || key.downArrow) return move(1)
    if (input === 'k' || key.upArrow) return move(-1)
    if (input === 'J') return setDetailScroll((s) => s + 5)
    if (input === 'K') return setDetailScroll((s) => Math.max(0, s - 5))
    const row = treeRows[cursor]
    if ((key.return || input === 'l' || key.rightArrow) && row?.expandable && !row.expanded) {
      return setExpanded((e) => new Set(e).add(row.node.summaryId))
    }
    if (input === 'h' || key.leftArrow) {
      if (row?.expanded) {
        return setExpanded((e) => {
          const next = new Set(e)
          next.delete(row.node.summaryId)
          return next
        })
      }
      // On a child: go to the node above it.
      if (row && row.level > 0) {
        let parent = cursor - 1
        while (parent > 0 && treeRows[parent].level >= row.level) parent--
        setCursor(parent)
      }
      return
    }
    if (input === 'f') {
      setFallbacksOnly((f) => !f)
      setCursor(0)
      const n = dag.filter((d) => d.fallback).length
      setStatus({ kind: 'info', text: fallbacksOnly ? '' : `${n} fallback ${n === 1 ? 'summary' : 'summaries'}: w or W repairs one` })
      return
    }
    if (input === 'v' && selected) {
      const summaryId = selected.summaryId
      session.history(summaryId).then((versions) => setDialog({ type: 'versions', phase: 'shown', summaryId, versions, scroll: 0 }), fail)
      return
    }
    if (input === 'w' && selected && row?.type === 'summary') return void startRewrite(selected)
    if (input === 'W' && selected && row?.type === 'summary') {
      const plan = subtreePlan(byId, selected.summaryId)
      setDialog({ type: 'subtree', phase: 'plan', summaryId: selected.summaryId, plan })
    }
  })

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

/** @param {DagNode[]} nodes @param {string[]} ids */
function subtreeTokens(nodes, ids) {
  const wanted = new Set(ids)
  return nodes.filter((n) => wanted.has(n.summaryId)).reduce((sum, n) => sum + n.tokenCount, 0)
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
