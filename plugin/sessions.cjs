// @ts-check
'use strict'
// Which sessions lcm-native keeps, with lossless-claw's pattern rules: a glob matched against
// the session key (the session id when there is no key), `*` within one `:`-separated part,
// `**` across parts, everything else literal.

/** @param {string} glob */
function globToRegExp(glob) {
  let out = ''
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i]
    if (c === '*') {
      if (glob[i + 1] === '*') {
        out += '.*'
        i++
      } else {
        out += '[^:]*'
      }
    } else {
      out += c.replace(/[.+?^${}()|[\]\\]/g, '\\$&')
    }
  }
  return new RegExp(`^${out}$`)
}

/**
 * @typedef {'keep' | 'ignored' | 'stateless'} SessionPolicy
 *   keep: stored and assembled; ignored: neither (the host's messages pass through);
 *   stateless: assembled from what is stored, never written
 */

/**
 * OpenClaw's hidden sessions for internal runs (the memory flush before a compaction):
 * a fork of a session's transcript that the host removes after the run. Storing one would
 * copy the whole session into a new conversation each time, so they are stateless.
 */
const HOST_INTERNAL_SESSION = /^agent:[^:]+:internal-session-effects:/

class SessionRules {
  /** @param {{ ignoreSessionPatterns: string[], statelessSessionPatterns: string[], skipStatelessSessions: boolean }} s */
  constructor(s) {
    this.ignore = s.ignoreSessionPatterns.map(globToRegExp)
    this.stateless = s.skipStatelessSessions ? s.statelessSessionPatterns.map(globToRegExp) : []
  }

  /**
   * @param {{ sessionKey?: string, sessionId?: string }} session
   * @returns {SessionPolicy}
   */
  policy(session) {
    const key = session.sessionKey || undefined
    const subject = key ?? session.sessionId ?? ''
    if (this.ignore.some((r) => r.test(subject))) return 'ignored'
    if (key !== undefined && (HOST_INTERNAL_SESSION.test(key) || this.stateless.some((r) => r.test(key)))) return 'stateless'
    return 'keep'
  }
}

module.exports = { SessionRules, globToRegExp }
