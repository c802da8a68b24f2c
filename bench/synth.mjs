// Seeded synthetic agent conversations: user turns, assistant turns with tool calls, tool
// results. Every message body is 50–4,000 characters. Same seed, same conversation.

/** mulberry32: a small, fast, seedable PRNG. */
export function rng(seed) {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

const WORDS = (
  'the a to of and in is it that for on with as this was be by are at from or an have not we can ' +
  'file function error test build config module type value state result request response cache ' +
  'database index query schema migration token summary context message session agent tool call ' +
  'read write edit bash grep parse render update delete create fix refactor deploy review merge ' +
  'src/app.ts src/db/store.rs lib/index.js packages/core/src/main.ts README.md Cargo.toml ' +
  'TypeError ENOENT timeout 404 500 v1.2.3 0x7f3a 42 128000 2026-02-17 sum_1a2b3c4d5e6f7a8b'
).split(' ')

export function text(rand, minChars, maxChars) {
  const target = minChars + Math.floor(rand() * (maxChars - minChars + 1))
  let out = ''
  while (out.length < target) {
    const w = WORDS[Math.floor(rand() * WORDS.length)]
    out += out.length === 0 ? w[0].toUpperCase() + w.slice(1) : rand() < 0.08 ? `. ${w}` : rand() < 0.03 ? `\n${w}` : ` ${w}`
  }
  return out.slice(0, target)
}

/**
 * `n` messages of one synthetic session: a user message, then an assistant message with
 * one to three tool calls, their results, and a closing assistant text; repeated.
 */
export function conversation(n, seed = 42) {
  const rand = rng(seed)
  const out = []
  let t = Date.UTC(2026, 0, 5, 9, 0, 0)
  let call = 0
  const push = (m) => {
    t += 1000 + Math.floor(rand() * 20000)
    out.push({ ...m, timestamp: t, entryId: `e${out.length}` })
  }
  while (out.length < n) {
    push({ role: 'user', content: text(rand, 50, 1200) })
    const calls = 1 + Math.floor(rand() * 3)
    const ids = []
    /** @type {object[]} */
    const blocks = [{ type: 'text', text: text(rand, 50, 600) }]
    for (let i = 0; i < calls; i++) {
      const id = `toolu_${seed}_${call++}`
      ids.push(id)
      blocks.push({ type: 'toolCall', id, name: rand() < 0.5 ? 'read' : 'bash', arguments: { path: 'src/app.ts', command: text(rand, 20, 200) } })
    }
    push({ role: 'assistant', content: blocks })
    for (const id of ids) push({ role: 'toolResult', toolCallId: id, content: [{ type: 'text', text: text(rand, 50, 4000) }] })
    push({ role: 'assistant', content: [{ type: 'text', text: text(rand, 50, 2000) }] })
  }
  return out.slice(0, n)
}

/**
 * Stores `n` synthetic messages (seed `seed`) in session `s` of `engine`, 1,000 a batch, and
 * compacts them with a stub summarizer until a pass does nothing (a 128k budget): the
 * compacted conversation the turn probes commit to. Returns its id.
 */
export async function compactedConversation(engine, n, seed = 23) {
  const messages = conversation(n, seed)
  let cid = 0
  for (let i = 0; i < n; i += 1000) cid = (await engine.ingest({ sessionId: 's' }, messages.slice(i, i + 1000))).conversationId
  const stub = async () => 'STUB summary.\nExpand for details about: stub.'
  for (;;) {
    const r = await engine.compact(cid, stub, { tokenBudget: 128000, force: true })
    if (!r.actionTaken) return cid
  }
}
