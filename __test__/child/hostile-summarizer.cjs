// Runs leaf passes whose summarize callback throws, rejects or resolves with hostile values,
// and prints one JSON line per case: {case, code, message, summaries}. With no
// uncaughtException handler, a value that escaped as an uncaught exception ends this process.
const { mkdtempSync, rmSync } = require('node:fs')
const { tmpdir } = require('node:os')
const { join } = require('node:path')
const { LcmEngine } = require('../../index.js')

/** @type {Record<string, any>} summarizers that misbehave on purpose */
const cases = {
  'rejects with a Symbol': () => Promise.reject(Symbol('nope')),
  'throws a Symbol': () => {
    throw Symbol('thrown')
  },
  'rejects with a Proxy whose traps throw': () =>
    Promise.reject(new Proxy({}, { get() { throw new Error('trap') }, getPrototypeOf() { throw new Error('trap') } })),
  'rejects with an object whose getters throw': () =>
    Promise.reject(Object.defineProperty({}, 'message', { get() { throw new Error('getter') } })),
  'rejects with 5': () => Promise.reject(5),
  'throws an auth error': () => {
    throw Object.assign(new Error('401 bad key'), { code: 'LCM_AUTH' })
  },
  'resolves with 42': async () => 42,
  'returns a thenable that throws': () => ({ then() { throw new Error('bad thenable') } }),
  'returns a Proxy': () => new Proxy({}, { get() { throw new Error('trap') } }),
}

;(async () => {
  const dir = mkdtempSync(join(tmpdir(), 'lcm-hostile-'))
  process.on('exit', () => rmSync(dir, { recursive: true, force: true }))
  const engine = await LcmEngine.open({ dbPath: join(dir, 'lcm.db'), freshTailCount: 2, summaryTimeoutMs: 2000 })
  const messages = Array.from({ length: 40 }, (_, i) => ({ role: /** @type {'assistant' | 'user'} */ (i % 2 ? 'assistant' : 'user'), content: `message ${i} `.repeat(150) }))
  const { conversationId } = await engine.ingest({ sessionId: 's' }, messages)
  for (const [name, summarize] of Object.entries(cases)) {
    let out
    try {
      const r = await engine.leafPass(conversationId, summarize)
      out = { case: name, code: null, authFailure: r ? r.authFailure : null }
    } catch (err) {
      out = { case: name, code: err.code, message: err.message }
    }
    out.summaries = (await engine.summaries(conversationId)).length
    console.log(JSON.stringify(out))
  }
  await engine.close()
  console.log(JSON.stringify({ done: true }))
})()
