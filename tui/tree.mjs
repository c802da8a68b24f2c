// @ts-check
// The DAG as the TUI draws it: rows of the tree (roots deepest first, a node's inputs beneath
// it when expanded, a leaf's messages beneath it), the plan of a subtree rewrite, and the
// short texts the screens show. Pure functions of `engine.dag()`'s nodes, tested without a
// terminal.

import messageTextModule from './message-text.cjs'

/** A stored message's content as text (tool calls with their arguments): `message-text.cjs`. */
export const messageText = messageTextModule.messageText
/** An id, a name, a key or a file name with its bidi controls shown (`⟨U+202E⟩`): `message-text.cjs`. */
export const visibleControls = messageTextModule.visibleControls
/** A stored text with its embeddings, overrides and isolates shown: `message-text.cjs`. */
export const terminalText = messageTextModule.terminalText

/** @typedef {import('../index.js').DagNode} DagNode */

/**
 * @typedef {object} Row
 * @property {string} key           unique within the rows
 * @property {'summary' | 'messages'} type
 * @property {DagNode} node         the summary (for a messages row: the leaf it belongs to)
 * @property {number} level         indentation
 * @property {boolean} expandable
 * @property {boolean} expanded
 */

/** @param {DagNode[]} nodes */
export function indexDag(nodes) {
  return new Map(nodes.map((n) => [n.summaryId, n]))
}

/**
 * The rows shown: every root (a summary nothing consumed, or whose consumer is missing), and
 * beneath each expanded node its inputs (or, for a leaf, its message range). With
 * `fallbacksOnly`, the conversation's fallback summaries as a flat list.
 * @param {DagNode[]} nodes  in `engine.dag()` order (deepest first, then oldest first)
 * @param {Set<string>} expanded
 * @param {boolean} [fallbacksOnly]
 * @returns {Row[]}
 */
export function visibleRows(nodes, expanded, fallbacksOnly = false) {
  if (fallbacksOnly) {
    return nodes
      .filter((n) => n.fallback)
      .map((node) => ({ key: node.summaryId, type: 'summary', node, level: 0, expandable: false, expanded: false }))
  }
  const byId = indexDag(nodes)
  /** @type {Row[]} */
  const rows = []
  const seen = new Set()
  /** @param {DagNode} node @param {number} level */
  const visit = (node, level) => {
    // A damaged file may link a node twice or in a cycle: each node is drawn once.
    if (seen.has(node.summaryId)) return
    seen.add(node.summaryId)
    const inputs = node.inputs.map((id) => byId.get(id)).filter((n) => n !== undefined)
    const isOpen = expanded.has(node.summaryId)
    const expandable = inputs.length > 0 || node.messages.count > 0
    rows.push({ key: node.summaryId, type: 'summary', node, level, expandable, expanded: isOpen && expandable })
    if (!isOpen) return
    if (inputs.length > 0) {
      for (const input of inputs) visit(/** @type {DagNode} */ (input), level + 1)
    } else if (node.messages.count > 0) {
      rows.push({ key: `${node.summaryId}/messages`, type: 'messages', node, level: level + 1, expandable: false, expanded: false })
    }
  }
  for (const node of nodes) {
    if (node.consumedBy === null || !byId.has(node.consumedBy)) visit(node, 0)
  }
  return rows
}

/**
 * A summary and everything beneath it, and how many there are per depth (the `W` plan).
 * @param {Map<string, DagNode>} byId
 * @param {string} id
 */
export function subtreePlan(byId, id) {
  /** @type {DagNode[]} */
  const members = []
  const seen = new Set()
  const stack = [id]
  while (stack.length > 0) {
    const next = /** @type {string} */ (stack.pop())
    const node = byId.get(next)
    if (!node || seen.has(next)) continue
    seen.add(next)
    members.push(node)
    stack.push(...node.inputs)
  }
  /** @type {Map<number, number>} */
  const byDepth = new Map()
  for (const m of members) byDepth.set(m.depth, (byDepth.get(m.depth) ?? 0) + 1)
  const tokens = members.reduce((sum, m) => sum + m.tokenCount, 0)
  return { ids: members.map((m) => m.summaryId), byDepth, tokens }
}

/** "Rewrite 38 summaries (25 leaves, 10 d1, 2 d2, 1 d3)?" @param {ReturnType<typeof subtreePlan>} plan */
export function planText(plan) {
  const parts = [...plan.byDepth.entries()]
    .sort(([a], [b]) => a - b)
    .map(([depth, n]) => (depth === 0 ? `${n} ${n === 1 ? 'leaf' : 'leaves'}` : `${n} d${depth}`))
  const n = plan.ids.length
  return `Rewrite ${n} ${n === 1 ? 'summary' : 'summaries'} (${parts.join(', ')})?`
}

/** The prompt variant of a depth: leaf, d1, d2 or d3 (d3 serves every deeper node). @param {number} depth */
export function variant(depth) {
  return depth <= 0 ? 'leaf' : `d${Math.min(depth, 3)}`
}

/** `YYYY-MM-DD HH:MM` of an ISO time, in UTC. @param {string | null} iso */
function minute(iso) {
  if (!iso) return null
  const d = new Date(iso)
  if (Number.isNaN(d.getTime())) return null
  return d.toISOString().slice(0, 16).replace('T', ' ')
}

/** "2026-02-17 15:37–16:02" (the end's date when it differs), or "—". @param {string | null} earliest @param {string | null} latest */
export function timeRange(earliest, latest) {
  const a = minute(earliest)
  const b = minute(latest)
  if (!a && !b) return '—'
  if (!a || !b) return /** @type {string} */ (a ?? b)
  if (a === b) return a
  return a.slice(0, 10) === b.slice(0, 10) ? `${a}–${b.slice(11)}` : `${a}–${b}`
}

/** The range without its year ("11-20 23:31–23:33"), for the tree's narrow rows. @param {string | null} earliest @param {string | null} latest */
export function shortRange(earliest, latest) {
  return timeRange(earliest, latest).replace(/(^|–)\d{4}-/g, '$1')
}

/** "Δ tokens: -122 (1,523 → 1,401)" @param {number} before @param {number} after */
export function deltaText(before, after) {
  const d = after - before
  return `Δ tokens: ${d > 0 ? '+' : ''}${count(d)} (${count(before)} → ${count(after)})`
}

/** 12,345 @param {number} n */
export function count(n) {
  return n.toLocaleString('en-US')
}

/** The forms of a tree row's label, widest first (`treeForm` picks one for a whole tree). */
const FORMS = /** @type {const} */ (['full', 'medium', 'short'])

/** @typedef {typeof FORMS[number]} RowForm */

/**
 * The one-line label of a tree row in one form: `full`; `medium`, compact (`*` live, `!` a
 * fallback, the start time only); `short`, the id shortened too. The sizes come before the
 * time, so a narrow pane cuts the time, not the numbers. Without a form, the widest that fits
 * `width` (indentation included).
 * @param {Row} row @param {number} [width] @param {RowForm} [form]
 */
export function rowLabel(row, width = Infinity, form) {
  const n = row.node
  if (row.type === 'messages') {
    const m = n.messages
    return `messages #${m.firstSeq}–#${m.lastSeq} (${m.count})`
  }
  const marker = row.expandable ? (row.expanded ? '▾' : '▸') : ' '
  const flags = [n.fallback ? '[fallback]' : '', n.live ? 'live' : ''].filter(Boolean).join(' ')
  const id = visibleControls(n.summaryId)
  const full = `${marker} ${id} d${n.depth} ${count(n.tokenCount)} tok ${n.descendantCount} desc${flags ? ` ${flags}` : ''} ${shortRange(n.earliestAt, n.latestAt)}`
  const mark = n.fallback ? ' !' : n.live ? ' *' : ''
  const start = shortRange(n.earliestAt, null)
  const medium = `${marker} ${id} d${n.depth} ${count(n.tokenCount)}t${mark} ${start}`
  const short = `${marker} ${visibleControls(n.summaryId.slice(0, 10))}… d${n.depth} ${count(n.tokenCount)}t${mark} ${start}`
  if (form) return { full, medium, short }[form]
  if (row.level * 2 + full.length <= width) return full
  return row.level * 2 + medium.length <= width ? medium : short
}

/**
 * The one form every row of a tree fits in `width` (the widest such), so that a list never
 * mixes two formats.
 * @param {Row[]} rows @param {number} width @returns {RowForm}
 */
export function treeForm(rows, width) {
  return FORMS.find((f) => rows.every((r) => r.type === 'messages' || r.level * 2 + rowLabel(r, width, f).length <= width)) ?? 'short'
}

/**
 * `text` as lines of at most `width` characters, for a pane that wraps instead of cutting:
 * each line broken at its last space that fits (a word longer than the width is cut).
 * @param {string} text @param {number} width
 */
export function wrapLines(text, width) {
  const w = Math.max(8, Math.floor(width))
  /** @type {string[]} */
  const out = []
  for (const line of text.split('\n')) {
    let rest = line
    while (rest.length > w) {
      const space = rest.lastIndexOf(' ', w)
      const at = space > w / 3 ? space : w
      out.push(rest.slice(0, at))
      rest = rest.slice(at).replace(/^ /, '')
    }
    out.push(rest)
  }
  return out
}

/**
 * The text of the messages dialog: each message under a header line (a tool result's names
 * the call it answers), stored controls shown.
 * @param {import('../index.js').StoredMessage[]} messages
 */
export function messagesText(messages) {
  return messages
    .map((m) => {
      const call = m.toolCallId ? ` (${visibleControls(m.toolCallId)})` : ''
      return `── #${m.seq} ${visibleControls(m.role)}${call} · ${visibleControls(m.createdAt)} · ${count(m.tokenCount)} tokens\n${terminalText(messageText(m.content))}`
    })
    .join('\n\n')
}

/**
 * A unified diff wrapped to `width`: a long line's continuations keep its `+`/`-`/` ` marker,
 * so each wrapped line still says (and is coloured by) what it is.
 * @param {string} diff @param {number} width
 */
export function wrapDiff(diff, width) {
  return diff.split('\n').flatMap((line) => {
    const marker = /^[+\- ]/.test(line) && !/^(\+\+\+|---) /.test(line) ? line[0] : ''
    const [first, ...rest] = wrapLines(marker ? line.slice(1) : line, width - marker.length)
    return [marker + first, ...rest.map((l) => marker + l)]
  })
}
