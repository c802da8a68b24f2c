// @ts-check
'use strict'
// OpenClaw's transcript messages → lcm-native's ingest shapes. The engine stores the host's
// shapes as they are (content blocks, tool calls); this leaves out what the host keeps to
// itself (its `custom` entries, which lossless-claw 1.x never stores either, so a database
// reads the same whichever plugin wrote it), and wraps kinds it does not know so that one new
// message kind can never make a turn uncommittable.

/**
 * Roles and message kinds the engine stores as they are (`IngestMessage['role']`).
 * @type {ReadonlySet<string>}
 */
const STORED_ROLES = new Set([
  'user',
  'assistant',
  'toolResult',
  'tool',
  'system',
  'custom',
  'bashExecution',
  'branchSummary',
  'compactionSummary',
])

/** The host's per-turn runtime context: re-injected each turn, and stripped from history by the host itself. */
const RUNTIME_CONTEXT_TYPE = 'openclaw.runtime-context'

/** The host's own entries (`role: "custom"`), which it never sends to the model. */
const HOST_CUSTOM_ROLE = 'custom'

/**
 * @typedef {import('../index.js').IngestMessage} IngestMessage
 */

/** @param {unknown} v @returns {v is Record<string, unknown>} */
function isRecord(v) {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
}

/**
 * A message the engine takes as the host sent it: an object of a role it stores. The rest of
 * its shape (content blocks, a tool result's call id, times) is the engine's to check, as it
 * checks every message: it refuses a malformed one with E_INVALID_INPUT, and the plugin then
 * stores the batch as text (`asPlainText`).
 * @param {unknown} m @returns {m is IngestMessage}
 */
function isIngestMessage(m) {
  return isRecord(m) && typeof m.role === 'string' && STORED_ROLES.has(m.role)
}

/** @param {readonly unknown[]} list @returns {list is IngestMessage[]} */
function isIngestBatch(list) {
  return list.every(isIngestMessage)
}

/**
 * JSON text of any value, never throwing (cycles, BigInts, throwing getters).
 * @param {unknown} v
 */
function safeJson(v) {
  try {
    const seen = new WeakSet()
    return (
      JSON.stringify(v, (_k, x) => {
        if (typeof x === 'bigint') return x.toString()
        if (typeof x === 'object' && x !== null) {
          if (seen.has(x)) return '[cycle]'
          seen.add(x)
        }
        return x
      }) ?? String(v)
    )
  } catch {
    // Nested deeper than JSON.stringify's stack allows (thousands of levels): the same text,
    // written without recursion, rather than "[object Object]".
    try {
      return flatJson(v)
    } catch {
      return '[unreadable value]'
    }
  }
}

/**
 * JSON text of `v` as `safeJson` writes it (cycles as "[cycle]", BigInts as strings, toJSON
 * honoured), with an explicit stack instead of recursion, so that no depth overflows it.
 * @param {unknown} v
 */
function flatJson(v) {
  /** @param {unknown} x @returns {unknown} */
  const plain = (x) => {
    if (typeof x === 'bigint') return x.toString()
    if (x !== null && typeof x === 'object') {
      const toJSON = /** @type {{ toJSON?: unknown }} */ (x).toJSON
      if (typeof toJSON === 'function') return toJSON.call(x)
    }
    return x
  }
  /** @param {unknown} x */
  const scalar = (x) => (typeof x === 'string' || typeof x === 'number' || typeof x === 'boolean' || x === null ? JSON.stringify(x) : undefined)
  const out = []
  const open = new Set()
  /**
   * The containers open, innermost last: an array, or an object and its keys.
   * @type {({ array: true, value: readonly unknown[], at: number, wrote: boolean } | { array: false, value: Record<string, unknown>, keys: string[], at: number, wrote: boolean })[]}
   */
  const stack = []
  /** Writes a value, or opens a container (pushed). @param {unknown} raw @param {boolean} inArray @returns {boolean} written */
  const start = (raw, inArray) => {
    const x = plain(raw)
    const s = scalar(x)
    if (s !== undefined) return out.push(s) > 0
    // Not a container (null was a scalar above): a function, a symbol, undefined.
    if (typeof x !== 'object' || x === null) {
      if (inArray) out.push('null')
      return inArray
    }
    if (open.has(x)) return out.push('"[cycle]"') > 0
    open.add(x)
    const isArray = Array.isArray(x)
    out.push(isArray ? '[' : '{')
    if (isArray) stack.push({ array: true, value: x, at: 0, wrote: false })
    else stack.push({ array: false, value: /** @type {Record<string, unknown>} */ (x), keys: Object.keys(x), at: 0, wrote: false })
    return true
  }
  if (!start(v, true)) return String(v)
  while (stack.length > 0) {
    const top = stack[stack.length - 1]
    // (`=== true`: the scripts' non-strict check narrows the frame only on a comparison.)
    const length = top.array === true ? top.value.length : top.keys.length
    if (top.at >= length) {
      out.push(top.array ? ']' : '}')
      open.delete(top.value)
      stack.pop()
      continue
    }
    const i = top.at++
    /** @type {string | null} */
    let key = null
    /** @type {unknown} */
    let child
    if (top.array === true) child = top.value[i]
    else {
      key = top.keys[i]
      child = top.value[key]
    }
    // An object's member that JSON leaves out (undefined, a function) writes nothing.
    if (key !== null && (child === undefined || typeof child === 'function' || typeof child === 'symbol')) continue
    const mark = out.length
    if (top.wrote) out.push(',')
    if (key !== null) out.push(`${JSON.stringify(key)}:`)
    if (start(child, key === null)) top.wrote = true
    else out.length = mark
  }
  return out.join('')
}

/**
 * The messages of a turn as the engine takes them. The host's `custom` entries (its runtime
 * context among them) are left out; anything that is not a message object, or of a kind the engine does not know, is kept as a
 * `custom` message holding its JSON.
 * @param {readonly unknown[]} messages
 * @returns {IngestMessage[]}
 */
function toIngest(messages) {
  /** @type {IngestMessage[]} */
  const out = []
  for (const m of Array.isArray(messages) ? messages : []) {
    if (isRecord(m) && m.role === HOST_CUSTOM_ROLE) continue
    if (isIngestMessage(m)) {
      out.push(m)
      continue
    }
    const role = isRecord(m) && typeof m.role === 'string' ? m.role : typeof m
    out.push({
      role: 'custom',
      customType: `lcm-native.unknown:${role}`,
      content: safeJson(m),
      ...(isRecord(m) && (typeof m.timestamp === 'number' || typeof m.timestamp === 'string') ? { timestamp: m.timestamp } : {}),
    })
  }
  return out
}

/**
 * A last resort for a batch the engine refused: every message as a plain text message of a
 * role the engine always takes, so the turn is still stored (verbatim, as JSON).
 * @param {readonly IngestMessage[]} messages
 * @returns {IngestMessage[]}
 */
function asPlainText(messages) {
  return messages.map((m) => ({
    role: m.role === 'assistant' ? 'assistant' : 'user',
    content: [{ type: 'text', text: safeJson(m) }],
    // The host's entry id still names the message: a replay of the turn is recognised by it.
    ...(typeof m.entryId === 'string' && m.entryId !== '' ? { entryId: m.entryId } : {}),
  }))
}

/**
 * lossless-claw's heartbeat rule: a turn whose assistant reply is exactly HEARTBEAT_OK and
 * that mentions heartbeat.md, or a poll message, is noise that is never stored.
 * @param {readonly unknown[]} messages
 */
function isHeartbeatTurn(messages) {
  const text = (/** @type {unknown} */ m) => {
    if (!isRecord(m)) return ''
    if (typeof m.content === 'string') return m.content
    if (Array.isArray(m.content)) return m.content.map((b) => (isRecord(b) && typeof b.text === 'string' ? b.text : '')).join('\n')
    return ''
  }
  const list = Array.isArray(messages) ? messages : []
  if (list.length === 0) return false
  if (list.every((m) => isRecord(m) && m.role === 'user' && text(m).trim().toLowerCase() === '[openclaw heartbeat poll]')) return true
  const ack = list.some((m) => isRecord(m) && m.role === 'assistant' && text(m).trim().toLowerCase() === 'heartbeat_ok')
  return ack && list.some((m) => text(m).toLowerCase().includes('heartbeat.md'))
}

/**
 * The newest of `messages` that fit `tokenBudget` (the newest one always), never starting
 * with a tool result whose call was left out. Walks back only as far as it keeps.
 * @template T
 * @param {readonly T[]} messages @param {number} tokenBudget @param {(m: T) => number} estimate
 */
function newestWithin(messages, tokenBudget, estimate) {
  /** @param {T} m */
  const isToolResult = (m) => isRecord(m) && m.role === 'toolResult'
  let total = 0
  let start = messages.length
  /** @type {number[]} */
  const sizes = []
  for (let i = messages.length - 1; i >= 0; i--) {
    const t = estimate(messages[i])
    if (start < messages.length && total + t > tokenBudget) break
    total += t
    sizes.unshift(t)
    start = i
  }
  while (start < messages.length - 1 && isToolResult(messages[start])) {
    total -= /** @type {number} */ (sizes.shift())
    start++
  }
  return { messages: messages.slice(start), estimatedTokens: total }
}

module.exports = { asPlainText, flatJson, isHeartbeatTurn, isIngestBatch, isRecord, newestWithin, safeJson, toIngest, RUNTIME_CONTEXT_TYPE }
