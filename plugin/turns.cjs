// @ts-check
'use strict'
// lossless-claw 1.x's record of a committed turn (`turn_advancements`): the hash of the
// host's commit parameters, computed exactly as lossless-claw computes it, so that a turn
// either plugin committed is `duplicate` for the other after a switch.

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

module.exports = { canonical, payloadHash, turnRecord }
