// Runs one kind of call, then lets the event loop drain: the process must exit by itself.
const { LcmEngine, migrate } = require('../../index.js')

const [, , mode, dbPath] = process.argv

async function main() {
  if (mode === 'migrate') {
    await migrate(dbPath)
    return
  }
  const engine = await LcmEngine.open({ dbPath, leafChunkTokens: 300, freshTailCount: 4, summaryTimeoutMs: 300 })
  if (mode === 'ingest') {
    await engine.ingest({ sessionId: 's' }, [{ role: 'user', content: 'hello' }])
    await engine.messages(1)
  }
  if (mode === 'leafPass' || mode === 'timeout' || mode === 'auth' || mode === 'offline') {
    const msgs = Array.from({ length: 30 }, (_, i) => ({ role: /** @type {'assistant' | 'user'} */ (i % 2 ? 'assistant' : 'user'), content: `m${i} ${'w '.repeat(200)}` }))
    const { conversationId } = await engine.ingest({ sessionId: 's' }, msgs)
    /** @type {any} a hostile or hanging summarizer, by mode */
    const summarize = {
      leafPass: async () => 'short\nExpand for details about: x',
      timeout: () => new Promise(() => {}),
      auth: async () => Promise.reject(Object.assign(new Error('no'), { code: 'LCM_AUTH' })),
      offline: 'offline',
    }[mode]
    await engine.leafPass(conversationId, summarize).catch(() => {})
    await engine.compact(conversationId, summarize, { tokenBudget: 100, force: true }).catch(() => {})
  }
  if (mode === 'close-in-flight') {
    // A summarizer that never answers, a second operation waiting for the conversation's
    // lock: close() ends both with E_CLOSED, at once, and nothing keeps Node alive.
    const msgs = Array.from({ length: 30 }, (_, i) => ({ role: /** @type {'assistant' | 'user'} */ (i % 2 ? 'assistant' : 'user'), content: `m${i} ${'w '.repeat(200)}` }))
    const slow = await LcmEngine.open({ dbPath, freshTailCount: 4, summaryTimeoutMs: 600000, lockTimeoutMs: 600000 })
    const { conversationId } = await slow.ingest({ sessionId: 's' }, msgs)
    const hang = () => new Promise(() => {})
    const started = Date.now()
    const first = slow.leafPass(conversationId, hang).then(() => 'resolved', (e) => e.code)
    await new Promise((r) => setTimeout(r, 100))
    const second = slow.compact(conversationId, hang, { tokenBudget: 100, force: true }).then(() => 'resolved', (e) => e.code)
    await new Promise((r) => setTimeout(r, 100))
    await slow.close()
    const codes = await Promise.all([first, second])
    if (codes.join() !== 'E_CLOSED,E_CLOSED' || Date.now() - started > 3000) throw new Error(`in-flight calls: ${codes} after ${Date.now() - started} ms`)
    const summaries = await (await LcmEngine.open({ dbPath, readOnly: true })).summaries(conversationId)
    if (summaries.length !== 0) throw new Error('a pass ended by close() wrote a summary')
  }
  if (mode === 'exit-during-reads') {
    // process.exit() while a verify and a regex scan over ~20,000 messages are running on the
    // thread pool: the process ends at once.
    for (let b = 0; b < 40; b++) {
      const batch = Array.from({ length: 500 }, (_, i) => ({ role: /** @type {'assistant' | 'user'} */ (i % 2 ? 'assistant' : 'user'), content: `m${i} ${'w '.repeat(150)}` }))
      await engine.ingest({ sessionId: `s${b % 4}` }, batch)
    }
    engine.verify()
    engine.grep(null, { query: 'w.*w.*x', mode: 'regex' })
    const asked = Date.now()
    setTimeout(() => {
      console.log('done')
      process.on('exit', () => process.stderr.write(''))
      process.exitCode = Date.now() - asked > 1000 ? 1 : 0
      process.exit()
    }, 5)
    await new Promise(() => {})
  }
  if (mode === 'error') {
    await engine.ingest({ conversationId: 999 }, [{ role: 'user', content: 'x' }]).catch(() => {})
  }
  if (mode !== 'no-close') await engine.close()
}

main().then(
  () => console.log('done'),
  (err) => {
    console.error(err)
    process.exitCode = 1
  },
)
