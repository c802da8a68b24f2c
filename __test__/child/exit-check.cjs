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
    const msgs = Array.from({ length: 30 }, (_, i) => ({ role: i % 2 ? 'assistant' : 'user', content: `m${i} ${'w '.repeat(200)}` }))
    const { conversationId } = await engine.ingest({ sessionId: 's' }, msgs)
    const summarize = {
      leafPass: async () => 'short\nExpand for details about: x',
      timeout: () => new Promise(() => {}),
      auth: async () => Promise.reject(Object.assign(new Error('no'), { code: 'LCM_AUTH' })),
      offline: 'offline',
    }[mode]
    await engine.leafPass(conversationId, summarize).catch(() => {})
    await engine.compact(conversationId, summarize, { tokenBudget: 100, force: true }).catch(() => {})
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
