// Fuzzes ingest payloads: `node fuzz-ingest.cjs SEED ROUNDS DBPATH [ONLY]` runs the pinned
// rounds (-1, …: inputs that found bugs), then ROUNDS rounds (or only round ONLY) of 1–4
// concurrent `ingest` calls (sometimes beside an offline sweep),
// each a valid generated message array or one with malformed messages mixed in, and prints one
// JSON line per round: {i, calls: [{session, kind, mustFail, mutations, n, outcome, code,
// isError, message, inserted, skipped, duplicate, replaced, lone}], problems, roundTrip, ms}.
// `problems` lists what the child found wrong by comparing the store before and after (a
// failed call that wrote, a resolved call whose counts do not add up); `roundTrip`, the
// messages of a lone valid call that `messages()` did not give back as they were ingested.
// Then the end checks: {done, cases, verify, ends, verifyAfterSweeps, ms}. No
// uncaughtException or unhandledRejection handler is installed.
const { LcmEngine } = require('../../index.js')
const { caseRng, text, words, huge, wellFormed, loneIn, clip, LONE } = require('./fuzz-lib.cjs')

const [, , seedArg, roundsArg, dbPath, onlyArg] = process.argv
const SEED = Number(seedArg) >>> 0
const ROUNDS = Number(roundsArg)
const ONLY = onlyArg === undefined ? null : Number(onlyArg)

const SESSIONS = ['s0', 's1', 's2', 's3']
const HOST_KINDS = ['custom', 'bashExecution', 'branchSummary', 'compactionSummary']
const ROLES = ['user', 'assistant', 'toolResult', 'tool', 'system', ...HOST_KINDS]
const BASE_MS = Date.UTC(2025, 0, 1)

// ---------------------------------------------------------------- valid messages

function timestamp(r) {
  return r.weighted([
    [4, () => BASE_MS + r.int(0, 1e10)],
    [3, () => new Date(BASE_MS + r.int(0, 1e10)).toISOString()],
    [1, () => new Date(BASE_MS + r.int(0, 1e10)).toISOString().replace('T', ' ').replace('Z', '')],
    [1, () => '2026-02-17T10:00:00+05:30'],
    [1, () => BASE_MS + r.next()],
    [1, () => 0],
  ])()
}

function nestedJson(r, depth) {
  if (depth <= 0) return r.pick([1, -0, 1.5e300, 'x', null, true, text(r, 3, true)])
  return r.chance(0.5) ? [nestedJson(r, depth - 1), r.int(0, 9)] : { [text(r, 1)]: nestedJson(r, depth - 1), k: 'v' }
}

/** Message text; `small` (in long batches) leaves out the huge strings. */
function contentText(r, small = false) {
  return r.weighted([
    [10, () => words(r, r.int(0, 60))],
    [6, () => text(r, r.int(1, 40), true)],
    [1, () => ''],
    [small ? 0 : 1, () => huge(r, r.pick([100_000, 400_000]))],
  ])()
}

function block(r, role, small) {
  const kinds = [
    [8, 'text'],
    [3, 'thinking'],
    [role === 'assistant' ? 4 : 1, 'toolCall'],
    [2, 'image'],
    [3, 'unknown'],
  ]
  switch (r.weighted(kinds)) {
    case 'text':
      return r.chance(0.8) ? { type: 'text', text: contentText(r, small) } : { type: 'text', text: contentText(r, small), cache_control: { type: 'ephemeral' } }
    case 'thinking':
      return { type: 'thinking', thinking: contentText(r, small), ...(r.chance(0.5) ? { thinkingSignature: text(r, 3) } : {}) }
    case 'toolCall':
      return { type: 'toolCall', id: `call_${r.int(0, 1e6)}`, name: r.pick(['read', 'bash', 'edit', 'weird name ✨']), arguments: r.chance(0.8) ? nestedJson(r, r.int(0, 5)) : undefined }
    case 'image':
      return { type: 'image', data: 'iVBORw0KGgo=', mimeType: 'image/png' }
    default:
      return { type: r.pick(['bashExecution', 'file', 'reasoning', 'x-custom', 'text\uD83D', '🧪']), payload: nestedJson(r, r.int(0, 8)), text: r.chance(0.3) ? contentText(r, small) : undefined }
  }
}

function validMessage(r, small = false) {
  const role = r.weighted([[10, 'user'], [10, 'assistant'], [5, 'toolResult'], [1, 'tool'], [2, 'system'], [2, r.pick(HOST_KINDS)]])
  const m = { role }
  if (role === 'bashExecution' && r.chance(0.6)) Object.assign(m, { command: 'ls -la', output: text(r, 10, true), exitCode: r.int(0, 2) })
  else if (HOST_KINDS.includes(role) && r.chance(0.4)) m.summary = contentText(r, small)
  else m.content = r.chance(0.5) ? contentText(r, small) : Array.from({ length: r.int(0, 5) }, () => block(r, role, small))
  if (role === 'toolResult' || role === 'tool') {
    m.toolCallId = `call_${r.int(0, 1e6)}`
    if (r.chance(0.5)) m.toolName = 'read'
    if (r.chance(0.3)) m.isError = r.chance(0.5)
  }
  if (r.chance(0.7)) m[r.chance(0.8) ? 'timestamp' : 'createdAt'] = timestamp(r)
  // Mostly fresh ids; a few from a small pool, so that some are skipped as already stored.
  if (r.chance(0.6)) m.entryId = r.chance(0.85) ? `e-${r.int(0, 1e9)}` : r.chance(0.8) ? `e-${r.int(0, 200)}` : r.int(1, 200)
  if (r.chance(0.1)) m.extra = { keep: 'me' }
  return m
}

function validBatch(r) {
  const n = r.weighted([[20, () => r.int(1, 8)], [3, () => 0], [4, () => r.int(20, 200)], [1, () => r.int(500, 1500)]])()
  return Array.from({ length: n }, () => validMessage(r, n > 20))
}

// ---------------------------------------------------------------- malformed messages

function deep(n, leaf) {
  let v = leaf
  for (let i = 0; i < n; i++) v = [v]
  return v
}

function cyclic() {
  const o = { type: 'x' }
  o.self = o
  return o
}

/**
 * Mutations of one message. Each returns `[description, mustFail]`: `mustFail` when the
 * message can no longer be valid (the call must reject), false when it may stay valid.
 */
const MUTATIONS = [
  (r, m) => { delete m.role; return ['role missing', true] },
  (r, m) => { const x = r.pick([5, '', 'USER', 'tool ', null, {}, [], true, 'user\uD83D', 'toolresult']); m.role = x; return [`role ${clip(JSON.stringify(x), 40)}`, true] },
  (r, m) => { m.role = Symbol('user'); return ['role Symbol', true] },
  (r, m) => { m.role = 10n; return ['role BigInt', true] },
  (r, m) => {
    const x = r.pick([5, true, {}, { text: 'x' }, NaN])
    const hostNull = HOST_KINDS.includes(m.role) && (x !== x || x === null)
    m.content = x
    return [`content ${JSON.stringify(x)}`, !hostNull]
  },
  (r, m) => {
    const host = HOST_KINDS.includes(m.role)
    delete m.content
    return ['content missing', !host]
  },
  (r, m) => { const x = r.pick([undefined, '', 5, null]); const tool = m.role === 'toolResult' || m.role === 'tool'; m.toolCallId = x; return [`toolCallId ${String(x)}`, tool] },
  (r, m) => { const x = r.pick(['not a date', '', '2024-02-30T00:00:00Z', {}, true, [], 1e20, -1e20, 8.7e15]); m.timestamp = x; return [`timestamp ${JSON.stringify(x)}`, true] },
  (r, m) => { const x = r.pick([NaN, Infinity, -Infinity, null]); m.timestamp = x; return [`timestamp ${x}`, false] },
  (r, m) => { const x = r.pick([8e15, -8e15, -1, 1.5, '+275760-09-13T00:00:00.000Z', '0001-01-01T00:00:00Z', '9999-12-31T23:59:59.999Z', '2024-01-01T00:00:00.123456789Z']); m.timestamp = x; return [`extreme timestamp ${JSON.stringify(x)}`, false] },
  (r, m) => { m.timestamp = new Date(BASE_MS); return ['timestamp Date object', false] },
  (r, m) => { m.timestamp = 10n ** 15n; return ['timestamp BigInt', true] },
  (r, m) => { const x = r.pick(['', {}, [], true]); m.entryId = x; return [`entryId ${JSON.stringify(x)}`, true] },
  (r, m) => { const x = r.pick([NaN, -0, 1.5, 1e300, 'x'.repeat(100_000), 'e-\uDE00']); m.entryId = x; return [`odd entryId ${clip(String(x), 20)}`, false] },
  (r, m) => { m.isError = 'yes'; return ['isError "yes"', true] },
  (r, m) => { m.content = [r.pick(['text', 5, null, ['nested'], true])]; return ['non-object block', true] },
  (r, m) => { m.content = [{ text: 'no type' }]; return ['block without type', true] },
  (r, m) => { m.content = [{ type: r.pick(['', 5, null]) }]; return ['block type not a non-empty string', true] },
  (r, m) => { m.content = [{ type: 'text', text: r.pick([5, null, {}]) }]; return ['text block with non-string text', true] },
  (r, m) => { m.content = [{ type: 'thinking' }]; return ['thinking block without thinking', true] },
  (r, m) => { m.content = [{ type: 'toolCall', id: r.pick([5, undefined]), name: 'read' }]; return ['toolCall without string id', true] },
  (r, m) => { m.content = [{ type: 'toolCall', id: 'c', name: r.pick([5, undefined, null]) }]; return ['toolCall without string name', true] },
  (r, m) => { m.content = huge(r, r.pick([500_000, 1_000_000])); return ['huge content', false] },
  (r, m) => { m.content = text(r, 50, true) + r.pick(LONE); return ['lone surrogates in content', false] },
  (r, m) => { m[`k\uD83D${r.int(0, 9)}`] = 'v\uDE00'; return ['lone surrogates in a key', false] },
  (r, m) => { const d = r.pick([10, 60]); m.content = [{ type: 'x-deep', payload: deep(d, 1) }]; return [`nesting ${d}`, false] },
  (r, m) => { const d = r.pick([118, 120, 122, 124, 126]); m.content = [{ type: 'x-deep', payload: deep(d, 1) }]; return [`nesting ${d} (near the limit)`, false] },
  (r, m) => { const d = r.pick([200, 5_000, 100_000]); m.content = [{ type: 'x-deep', payload: deep(d, 1) }]; return [`nesting ${d}`, true] },
  (r, m) => { m.content = deep(r.pick([3, 300]), { type: 'text', text: 'x' }); return ['content nested in arrays', true] },
  (r, m) => { m.content = [{ type: 'x', n: 1n }]; return ['BigInt in a block', true] },
  (r, m) => { m.content = [cyclic()]; return ['cyclic block', true] },
  (r, m) => { m.meta = { toJSON() { throw new Error('toJSON') } }; return ['toJSON throws', true] },
  (r, m) => { Object.defineProperty(m, 'boom', { enumerable: true, get() { throw new Error('getter') } }); return ['getter throws', true] },
  (r, m) => { m.content = [new Proxy({ type: 'text', text: 'x' }, { ownKeys() { throw new Error('ownKeys') } })]; return ['Proxy block whose ownKeys throws', true] },
  (r, m) => { m.content = [new Proxy({ type: 'text', text: 'proxied' }, {})]; return ['transparent Proxy block', false] },
  (r, m) => { m.content = [{ type: 'x', f() {}, s: Symbol('s'), u: undefined, map: new Map([[1, 2]]), set: new Set([1]), bytes: new Uint8Array([1, 2]), d: new Date(0), re: /x/ }]; return ['functions, Symbols, Map, Set, typed arrays in a block', false] },
  (r, m) => { m.content = Object.assign([{ type: 'text', text: 'a' }], { length: 3 }); return ['sparse content array', true] },
  (r, m) => { m.content = [{ type: 'x', big: 1e308, tiny: 5e-324, neg: -0, nan: NaN, inf: -Infinity }]; return ['extreme numbers in a block', false] },
  (r, m) => { m.toolCallId = 'x'.repeat(200_000); return ['huge toolCallId', false] },
]

/** A message replaced outright (not an object at all). */
const REPLACEMENTS = [
  () => ['undefined', undefined, true], () => ['null', null, true], () => ['"user"', 'user', true], () => ['5', 5, true],
  () => ['[]', [], true], () => ['Symbol', Symbol('m'), true], () => ['function', () => 1, true], () => ['BigInt', 5n, true],
  () => ['Proxy whose traps throw', new Proxy({}, { get() { throw new Error('trap') }, ownKeys() { throw new Error('trap') }, getOwnPropertyDescriptor() { throw new Error('trap') } }), true],
  () => ['revoked Proxy', (() => { const p = Proxy.revocable({}, {}); p.revoke(); return p.proxy })(), true],
]

/** A whole `messages` argument that is not an array. */
const NOT_ARRAYS = [
  () => ['messages {}', {}], () => ['messages "x"', 'x'], () => ['messages null', null], () => ['messages undefined', undefined],
  () => ['messages 5', 5], () => ['messages {0: msg, length: 1}', { 0: { role: 'user', content: 'x' }, length: 1 }],
  () => ['messages toJSON throws', { toJSON() { throw new Error('toJSON') } }], () => ['messages cyclic array', (() => { const a = /** @type {any[]} */ ([{ role: 'user', content: 'x' }]); a.push(a); return a })()],
]

function malformedBatch(r) {
  if (r.chance(0.06)) {
    const [d, messages] = r.pick(NOT_ARRAYS)()
    return { messages, mutations: [d], mustFail: true }
  }
  const messages = Array.from({ length: r.int(1, 6) }, () => validMessage(r))
  const slots = [...messages.keys()].sort(() => r.next() - 0.5).slice(0, r.int(1, Math.min(3, messages.length)))
  const mutations = []
  let mustFail = false
  for (const at of slots) {
    if (r.chance(0.12)) {
      const [d, x, fail] = r.pick(REPLACEMENTS)()
      messages[at] = x
      mutations.push(`message ${at}: ${d}`)
      mustFail ||= fail
    } else {
      const [d, fail] = r.pick(MUTATIONS)(r, messages[at])
      mutations.push(`message ${at}: ${d}`)
      mustFail ||= fail
    }
  }
  return { messages, mutations, mustFail }
}

// ---------------------------------------------------------------- the run

/**
 * Inputs found by this fuzz, run first (as rounds -1, -2, …) whatever the seed: a user message
 * and a host kind with `content: []`, which `messages()` gave back as `""`.
 */
const PINNED = [
  () => ({ session: 's0', kind: 'valid', messages: [{ role: 'user', content: [] }, { role: 'custom', content: [] }, { role: 'assistant', content: [] }], mutations: [], mustFail: false, mustPass: true }),
]

function jsonOrNull(x) {
  try {
    return JSON.parse(JSON.stringify(x))
  } catch {
    return null
  }
}

/** JSON with object keys sorted: equal texts mean equal values, whatever the key order. */
function canon(v) {
  return JSON.stringify(v, (_, x) => (x && typeof x === 'object' && !Array.isArray(x) ? Object.fromEntries(Object.entries(x).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) : x))
}

/** What `messages()` should give back for an ingested message: its role and content. */
function expectedStored(m) {
  const role = m.role === 'tool' ? 'toolResult' : HOST_KINDS.includes(m.role) ? 'user' : m.role
  return { role, content: wellFormed(m.content) }
}

async function main() {
  const started = Date.now()
  const engine = await LcmEngine.open({ dbPath, freshTailCount: 4, leafChunkTokens: 2000 })
  /** The highest seq seen per conversation: new messages are read after it. */
  const lastSeq = new Map()
  let cases = 0
  // Each session's conversation as findConversation reads it (from the maintained count, so a
  // round costs the same at round 1,000 as at round 1; conversations() sums every row).
  const snapshot = async () => {
    const found = await Promise.all(SESSIONS.map(async (s) => /** @type {const} */ ([s, await engine.findConversation({ sessionId: s })])))
    return new Map(found.filter(([, c]) => c !== null))
  }

  for (let i = -PINNED.length; i < ROUNDS; i++) {
    if (ONLY !== null && i !== ONLY) continue
    const r = caseRng(SEED, i)
    const problems = []
    const roundTrip = []
    const k = i < 0 ? 1 : r.weighted([[10, 1], [3, 2], [2, 3], [1, 4]])
    const calls = i < 0 ? [PINNED[PINNED.length + i]()] : Array.from({ length: k }, () => {
      const session = r.pick(SESSIONS)
      const valid = r.chance(0.5)
      const b = valid ? { messages: validBatch(r), mutations: [], mustFail: false } : malformedBatch(r)
      const options = r.chance(0.1) ? { advancementKey: r.chance(0.9) ? `turn-${r.int(0, 30)}` : r.pick([5, '', {}]) } : undefined
      const badOptions = options !== undefined && typeof options.advancementKey !== 'string' || options?.advancementKey === ''
      return { session, kind: valid ? 'valid' : 'malformed', ...b, options, mustFail: b.mustFail || badOptions, mustPass: valid && !badOptions }
    })
    const sweep = r.chance(0.1) ? r.pick(SESSIONS) : null
    const t0 = Date.now()
    const before = await snapshot()
    const sweepTarget = sweep && before.get(sweep)?.conversationId
    const settled = await Promise.all([
      ...calls.map(async (c) => {
        try {
          const res = await engine.ingest({ sessionId: c.session }, c.messages, c.options)
          return { outcome: 'ok', res }
        } catch (err) {
          return { outcome: 'rejected', isError: err instanceof Error, code: err?.code ?? null, message: clip(err?.message) }
        }
      }),
      sweepTarget
        ? engine.compact(sweepTarget, 'offline', { tokenBudget: 3000 }).then(
            (s) => ({ sweep: s.stopReason }),
            (e) => ({ sweepError: e?.code ?? String(e) }),
          )
        : null,
    ])
    /** @type {any} */
    const sweepOutcome = settled.pop()
    if (sweepOutcome?.sweepError) problems.push(`the offline sweep beside the calls rejected: ${sweepOutcome.sweepError}`)
    const after = await snapshot()

    const out = calls.map((c, j) => {
      const s = /** @type {any} */ (settled[j])
      const line = { session: c.session, kind: c.kind, mustFail: c.mustFail, mustPass: c.mustPass, mutations: c.mutations, n: Array.isArray(c.messages) ? c.messages.length : null, outcome: s.outcome }
      if (s.outcome === 'ok') {
        Object.assign(line, { inserted: s.res.inserted, skipped: s.res.skipped, duplicate: s.res.duplicate, replaced: s.res.replacedSurrogates })
        const json = jsonOrNull(c.messages)
        line.lone = json ? loneIn(json) : null
        if (s.res.inserted + s.res.skipped !== line.n) problems.push(`call ${j}: inserted ${s.res.inserted} + skipped ${s.res.skipped} ≠ ${line.n} messages`)
        if (s.res.duplicate && s.res.inserted !== 0) problems.push(`call ${j}: a duplicate advancementKey, yet ${s.res.inserted} inserted`)
        if (line.lone !== null && s.res.replacedSurrogates !== line.lone) problems.push(`call ${j}: replacedSurrogates ${s.res.replacedSurrogates}, the messages hold ${line.lone} lone surrogates`)
        if (line.n > 0 && s.res.inserted > 0 && after.get(c.session)?.conversationId !== s.res.conversationId) problems.push(`call ${j}: conversationId ${s.res.conversationId} is not the session's`)
      } else {
        Object.assign(line, { isError: s.isError, code: s.code, message: s.message })
      }
      return line
    })

    // Per session: the stored message count grew by exactly what the resolved calls inserted.
    for (const session of SESSIONS) {
      const mine = out.filter((l) => l.session === session)
      const inserted = mine.reduce((sum, l) => sum + (l.outcome === 'ok' ? l.inserted : 0), 0)
      const b = before.get(session)
      const a = after.get(session)
      const delta = (a?.messageCount ?? 0) - (b?.messageCount ?? 0)
      if (delta !== inserted) problems.push(`session ${session}: ${delta} messages stored, the resolved calls inserted ${inserted}`)
      if (!b && a && !mine.some((l) => l.outcome === 'ok')) problems.push(`session ${session}: a conversation was created by calls that all failed`)
      if (a && delta > 0) {
        const fresh = await engine.messages(a.conversationId, { afterSeq: lastSeq.get(a.conversationId) ?? 0, limit: 1_000_000 })
        if (fresh.length !== delta) problems.push(`session ${session}: ${fresh.length} messages after the last seq, expected ${delta}`)
        if (fresh.length) lastSeq.set(a.conversationId, fresh[fresh.length - 1].seq)
        // A lone valid call that stored every message: each comes back as it was ingested.
        const only = mine.length === 1 && k === 1 ? mine[0] : null
        if (only && only.outcome === 'ok' && only.skipped === 0 && calls[0].kind === 'valid') {
          calls[0].messages.forEach((m, x) => {
            const want = expectedStored(m)
            const got = fresh[x]
            if (!got) return roundTrip.push(`message ${x}: not stored`)
            if (got.role !== want.role) roundTrip.push(`message ${x}: role ${got.role}, ingested as ${m.role}`)
            if (m.content !== undefined && canon(got.content) !== canon(want.content))
              roundTrip.push(`message ${x}: content ${clip(canon(got.content), 300)} ≠ ingested ${clip(canon(want.content), 300)}`)
          })
        }
      } else if (a) {
        lastSeq.set(a.conversationId, lastSeq.get(a.conversationId) ?? 0)
      }
    }
    cases += calls.length
    console.log(JSON.stringify({ i, calls: out, sweep: sweepOutcome, problems, roundTrip, ms: Date.now() - t0 }))
  }

  const verify = await engine.verify()
  // Whatever was stored can be assembled and compacted offline; then the invariants still hold.
  const ends = []
  for (const c of await engine.conversations()) {
    const end = { conversationId: c.conversationId, messages: c.messageCount }
    try {
      const a = await engine.assemble(c.conversationId, { tokenBudget: 8000 })
      end.assembled = a.messages.length
    } catch (e) {
      end.assembleError = `${e?.code}: ${clip(e?.message)}`
    }
    try {
      const s = await engine.compact(c.conversationId, 'offline', { tokenBudget: 4000, force: true })
      end.swept = s.stopReason
    } catch (e) {
      end.sweepError = `${e?.code}: ${clip(e?.message)}`
    }
    ends.push(end)
  }
  const verifyAfter = await engine.verify()
  await engine.close()
  const v = (x) => ({ ok: x.ok, problems: x.problems.slice(0, 20), messages: x.messages, conversations: x.conversations })
  console.log(JSON.stringify({ done: true, cases, verify: v(verify), ends, verifyAfterSweeps: v(verifyAfter), ms: Date.now() - started }))
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
