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
 * The hash lossless-claw 1.x stores in `turn_advancements.payload_hash` for a commitTurn call.
 * @param {Record<string, any>} p the host's commitTurn parameters
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
 * @param {Record<string, any>} p
 * @returns {import('../index.js').TurnRecord | undefined}
 */
function turnRecord(p) {
  const admission = p?.admission
  const terminal = p?.terminal
  const sessionId = admission?.sessionId ?? p?.sessionId
  if (typeof admission?.entryId !== 'string' || typeof terminal?.entryId !== 'string' || typeof sessionId !== 'string') return undefined
  const sessionKey = admission?.sessionKey ?? p?.sessionKey
  return {
    payloadHash: payloadHash(p),
    sessionId,
    ...(typeof sessionKey === 'string' ? { sessionKey } : {}),
    admissionEntryId: admission.entryId,
    terminalEntryId: terminal.entryId,
  }
}

module.exports = { canonical, payloadHash, turnRecord }
