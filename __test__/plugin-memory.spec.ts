// What the plugin keeps per session stays bounded however many sessions a gateway sees, also
// for sessions whose turn never ends (nothing commits them, so nothing forgets them).
import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'

import { afterAll, afterEach, describe, expect, it, vi } from 'vitest'

import { fakeHost } from './plugin-host'

const { shared, closeAll } = require('../plugin/shared.cjs')
const { PENDING_LIMITS, TTL_MS, notePendingPrompt, excerptOversized } = require('../plugin/oversized-prompt.cjs')
const { BUDGET_LIMITS } = require('../plugin/session-maps.cjs')

afterAll(async () => {
  await closeAll()
})

afterEach(() => {
  vi.restoreAllMocks()
})

const session = (name: string) => ({ sessionId: `sid-${name}`, sessionKey: `agent:main:explicit:${name}` })

/** A pasted log of about 1 MB, its own text for each `n` (so no two share memory). */
const paste = (n: number) => Array.from({ length: 36_000 }, (_, r) => `${n}:${r} 2026-11-25 INFO ok`).join('\n')

/** The heap in use after a full collection (the test's own garbage gone). */
function heapAfterGc(): number {
  setFlagsFromString('--expose-gc')
  const gc = runInNewContext('gc') as () => void
  gc()
  gc()
  return process.memoryUsage().heapUsed
}

type Pending = Map<string, { text: string; excerpt: string; at: number }>

describe('excerpts of oversized prompts', () => {
  it('300 sessions with a 1 MB prompt each, none of them committed: the excerpts kept stay within their entry and byte limits', async () => {
    const host = fakeHost()
    const before = heapAfterGc()
    let last = ''
    for (let i = 0; i < 300; i++) {
      last = paste(i)
      // The host's first assembly of a turn whose prompt alone fills the window.
      await host.engine().assemble({ ...session(`paste-${i}`), messages: [], tokenBudget: 1, prompt: last })
    }
    const pending: Pending = shared().oversizedPrompts
    expect(pending.size).toBeGreaterThan(0)
    expect(pending.size).toBeLessThanOrEqual(PENDING_LIMITS.maxEntries)
    const held = [...pending.values()].reduce((n, p) => n + 2 * (p.text.length + p.excerpt.length), 0)
    expect(held).toBeLessThanOrEqual(PENDING_LIMITS.maxBytes)
    // The newest turns are the ones still shown as excerpts.
    expect(pending.has(session('paste-299').sessionKey)).toBe(true)
    expect(pending.has(session('paste-0').sessionKey)).toBe(false)
    const shown = host.transformText(last)
    expect(shown.length).toBeLessThan(last.length / 10)
    expect(shown).toMatch(/more than the model's context window holds/)
    // What the process holds: 300 prompts kept whole would be over 300 MB.
    const grown = heapAfterGc() - before
    expect(grown).toBeLessThan(PENDING_LIMITS.maxBytes + 32 * 1024 * 1024)
  }, 120_000)

  it('one whose turn never ends is dropped after 30 minutes when another session registers one, with no transform in between', () => {
    const start = Date.now()
    const now = vi.spyOn(Date, 'now').mockReturnValue(start)
    const pending: () => Pending = () => shared().oversizedPrompts
    expect(notePendingPrompt('agent:main:explicit:stale', paste(1), 1)).toBeGreaterThan(0)
    expect(pending().has('agent:main:explicit:stale')).toBe(true)
    now.mockReturnValue(start + TTL_MS - 1000)
    expect(notePendingPrompt('agent:main:explicit:fresh', paste(2), 1)).toBeGreaterThan(0)
    expect(pending().has('agent:main:explicit:stale')).toBe(true)
    now.mockReturnValue(start + TTL_MS + 1000)
    expect(notePendingPrompt('agent:main:explicit:later', 'a short prompt', 50_000)).toBeUndefined()
    expect(pending().has('agent:main:explicit:stale')).toBe(false)
    expect(pending().has('agent:main:explicit:fresh')).toBe(true)
    // A transform still replaces the one left.
    expect(excerptOversized(paste(2))).not.toBe(paste(2))
  })

  it('a prompt larger than the byte limit alone is still excerpted (kept as the only one)', () => {
    const huge = Array.from({ length: 2 }, (_, i) => paste(1000 + i)).join('\n').repeat(18) // ~36 MB, 72 MB counted
    expect(2 * huge.length).toBeGreaterThan(PENDING_LIMITS.maxBytes)
    expect(notePendingPrompt('agent:main:explicit:huge', huge, 1)).toBeGreaterThan(0)
    const pending: Pending = shared().oversizedPrompts
    expect([...pending.keys()]).toEqual(['agent:main:explicit:huge'])
    expect(excerptOversized(huge).length).toBeLessThan(huge.length / 100)
  }, 60_000)
})

describe('budgets kept per session', () => {
  it(`${BUDGET_LIMITS.maxEntries + 200} sessions that never commit: each budget map keeps at most ${BUDGET_LIMITS.maxEntries} of them, the newest`, async () => {
    const host = fakeHost()
    const n = BUDGET_LIMITS.maxEntries + 200
    for (let i = 0; i < n; i++) {
      await host.engine().assemble({ ...session(`many-${i}`), messages: [], tokenBudget: 20_000, prompt: 'hello' })
    }
    const state = shared()
    for (const name of ['budgets', 'turnBudgets', 'promptBudgets'] as const) {
      const map: Map<string, number> = state[name]
      expect(map.size, name).toBeLessThanOrEqual(BUDGET_LIMITS.maxEntries)
      expect(map.has(session(`many-${n - 1}`).sessionKey), name).toBe(true)
      expect(map.has(session('many-0').sessionKey), name).toBe(false)
    }
    // The budget of a committed turn (set by commitTurn) is bounded the same way.
    const history: Map<string, number> = state.historyBudgets
    for (let i = 0; i < n; i++) history.set(`agent:main:explicit:committed-${i}`, 1000 + i)
    expect(history.size).toBeLessThanOrEqual(BUDGET_LIMITS.maxEntries)
    expect(history.get(`agent:main:explicit:committed-${n - 1}`)).toBe(1000 + n - 1)
  }, 120_000)
})
