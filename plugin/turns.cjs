// @ts-check
'use strict'
// What a committed turn tells of itself, for a switch of engines: lossless-claw 1.x's record of
// it (`turn_advancements`; the hash of the host's commit parameters, computed exactly as
// lossless-claw computes it, so that a turn either plugin committed is `duplicate` for the
// other), and where its messages sit in the host's transcript (entry ids and position).

const { createHash } = require('node:crypto')

/**
 * lossless-claw's canonical form of a payload: keys whose value is undefined dropped, object
 * keys sorted with `localeCompare`, arrays in order, a Date as `{}`.
 * @param {unknown} v @returns {unknown}
 */
function canonical(v) {
  if (Array.isArray(v)) return v.map(canonical)
  if (v instanceof Date) return {}
  if (typeof v !== 'object' || v === null) return v
  /** @type {Record<string, unknown>} */
  const out = {}
  const record = /** @type {Record<string, unknown>} */ (v)
  for (const k of Object.keys(record).sort((a, b) => a.localeCompare(b))) {
    if (record[k] !== undefined) out[k] = canonical(record[k])
  }
  return out
}

/**
 * The fields of the host's commitTurn parameters that lossless-claw hashes and records.
 * @typedef {{ admission?: unknown, terminal?: unknown, isHeartbeat?: unknown, messages?: unknown, sessionId?: unknown, sessionKey?: unknown }} CommitParams
 */

/**
 * The value at `key` of `v`, or undefined when `v` is not an object (`v?.[key]`).
 * @param {unknown} v @param {string} key @returns {unknown}
 */
function fieldOf(v, key) {
  return typeof v === 'object' && v !== null ? /** @type {Record<string, unknown>} */ (v)[key] : undefined
}

/**
 * The hash lossless-claw 1.x stores in `turn_advancements.payload_hash` for a commitTurn call.
 * @param {CommitParams} p the host's commitTurn parameters
 */
function payloadHash(p) {
  const payload = {
    admission: p.admission,
    isHeartbeat: p.isHeartbeat === true,
    messages: p.messages,
    sessionId: p.sessionId,
    sessionKey: p.sessionKey,
    terminal: p.terminal,
  }
  return createHash('sha256').update(JSON.stringify(canonical(payload))).digest('hex')
}

/**
 * The `turn` option of `ingest` for a commitTurn call, or undefined when the host gave no
 * admission and terminal entries (an older host): then only lcm-native's own key is kept.
 * @param {CommitParams} p
 * @returns {import('../index.js').TurnRecord | undefined}
 */
function turnRecord(p) {
  const admission = p?.admission
  const admissionEntryId = fieldOf(admission, 'entryId')
  const terminalEntryId = fieldOf(p?.terminal, 'entryId')
  const sessionId = fieldOf(admission, 'sessionId') ?? p?.sessionId
  if (typeof admissionEntryId !== 'string' || typeof terminalEntryId !== 'string' || typeof sessionId !== 'string') return undefined
  const sessionKey = fieldOf(admission, 'sessionKey') ?? p?.sessionKey
  return {
    payloadHash: payloadHash(p),
    sessionId,
    ...(typeof sessionKey === 'string' ? { sessionKey } : {}),
    admissionEntryId,
    terminalEntryId,
  }
}

/**
 * The turn's messages with the transcript entry ids the host names for them (the admitted user
 * message's and the terminal one's: OpenClaw hands over no others), and the transcript position
 * of its first message. lossless-claw's transcript reconcile ties rows with these ids to the
 * transcript, so after a switch it stores none of this turn again; a replay of a turn the
 * other engine already took from the transcript is recognised by them. When the host's anchors
 * do not line up with the messages (an older host, a count that differs), the messages as
 * they came and no position.
 * @param {CommitParams} p @param {unknown[]} messages
 * @returns {{ messages: unknown[], position: number | undefined }}
 */
function anchored(p, messages) {
  const first = fieldOf(p?.admission, 'activeMessagePosition')
  const last = fieldOf(p?.terminal, 'activeMessagePosition')
  const admissionId = fieldOf(p?.admission, 'entryId')
  const terminalId = fieldOf(p?.terminal, 'entryId')
  if (
    messages.length === 0 ||
    typeof first !== 'number' || !Number.isSafeInteger(first) || first < 0 ||
    typeof last !== 'number' || last - first + 1 !== messages.length ||
    typeof admissionId !== 'string' || admissionId === '' ||
    typeof terminalId !== 'string' || terminalId === ''
  ) {
    return { messages, position: undefined }
  }
  const out = messages.slice()
  /** @param {number} i @param {string} id */
  const stamp = (i, id) => {
    const m = out[i]
    if (typeof m === 'object' && m !== null && !Array.isArray(m) && fieldOf(m, 'entryId') === undefined) out[i] = { ...m, entryId: id }
  }
  stamp(0, admissionId)
  stamp(out.length - 1, terminalId)
  return { messages: out, position: first }
}

module.exports = { anchored, canonical, payloadHash, turnRecord }
