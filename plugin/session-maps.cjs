// @ts-check
'use strict'
// Per-session state with a ceiling. A gateway sees sessions come and go for as long as it runs,
// and some never finish a turn (cut short, abandoned mid-turn), so state kept by session key
// must not grow with every session ever seen: a `SessionMap` holds at most so many keys and so
// many bytes, and forgets the entry written longest ago first. What it forgets is a hint the
// plugin can do without (a budget falls back to the next one the host gives; an excerpt is
// registered again when the host assembles the turn again).

/** Marks a SessionMap across module instances (OpenClaw evaluates the plugin several times). */
const BRAND = Symbol.for('lcm-native.openclaw.session-map')

/**
 * What a string can take in memory: V8 keeps a string of Latin-1 characters in one byte each,
 * any other in two; counted as two so that a limit holds for every text.
 * @param {string} s
 */
const stringBytes = (s) => 2 * s.length

/** A number kept per session (a budget), with its Map slot. */
const NUMBER_BYTES = 16

/**
 * @typedef {object} SessionLimits
 * @property {number} maxEntries
 * @property {number} maxBytes     keys and values, as `stringBytes` and `sizeOf` count them
 * @property {(value: any) => number} [sizeOf]  a value's bytes (default: a number's)
 */

/** The budgets kept per session: a few numbers each, for many sessions. */
const BUDGET_LIMITS = /** @type {SessionLimits} */ ({ maxEntries: 4096, maxBytes: 4 * 1024 * 1024 })

/**
 * A Map from session key to state that stays within `limits`: each `set` makes its entry the
 * newest and drops the oldest ones while the map holds more entries or bytes than allowed. The
 * entry just written always stays, so a single value larger than `maxBytes` is kept alone.
 * @template V
 * @extends {Map<string, V>}
 */
class SessionMap extends Map {
  /** @param {SessionLimits} limits @param {Iterable<[string, V]>} [entries] */
  constructor(limits, entries) {
    super()
    this.limits = limits
    /** The bytes of every entry, as counted when it was written. */
    this.bytes = 0
    /** @type {Map<string, number>} */
    this.sizes = new Map()
    for (const [k, v] of entries ?? []) this.set(k, v)
  }

  get [BRAND]() {
    return true
  }

  /** @param {string} key @param {V} value */
  set(key, value) {
    this.delete(key)
    const size = stringBytes(key) + (this.limits.sizeOf ? this.limits.sizeOf(value) : NUMBER_BYTES)
    super.set(key, value)
    this.sizes.set(key, size)
    this.bytes += size
    for (const old of super.keys()) {
      if (old === key || (this.size <= this.limits.maxEntries && this.bytes <= this.limits.maxBytes)) break
      this.delete(old)
    }
    return this
  }

  /** @param {string} key */
  delete(key) {
    this.bytes -= this.sizes.get(key) ?? 0
    this.sizes.delete(key)
    return super.delete(key)
  }

  clear() {
    super.clear()
    this.sizes.clear()
    this.bytes = 0
  }
}

/**
 * The map `holder[name]`, made a SessionMap with `limits` (keeping its entries) unless it is
 * one already.
 * @template V
 * @param {object} holder @param {string} name @param {SessionLimits} limits
 * @returns {SessionMap<V>}
 */
function sessionMap(holder, name, limits) {
  const slots = /** @type {Record<string, unknown>} */ (holder)
  const current = slots[name]
  if (current instanceof Map && /** @type {Record<symbol, unknown>} */ (/** @type {unknown} */ (current))[BRAND] === true) {
    return /** @type {SessionMap<V>} */ (current)
  }
  const bounded = new SessionMap(limits, current instanceof Map ? /** @type {Map<string, V>} */ (current) : undefined)
  slots[name] = bounded
  return bounded
}

module.exports = { SessionMap, sessionMap, stringBytes, BUDGET_LIMITS }
