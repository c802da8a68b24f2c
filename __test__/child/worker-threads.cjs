// The addon in Node worker threads, as a host with a worker pool (Piscina, vitest's threads
// pool) loads it: workers that load it first and exit, then more, some at once, then the main
// thread. Each worker opens its own file, ingests, compacts offline, assembles and closes.
// Prints one line per worker and `done`; a crash ends the process with a signal instead.
const { Worker, isMainThread, parentPort, workerData } = require('node:worker_threads')
const { join } = require('node:path')

async function work(dbPath) {
  const { LcmEngine } = require('../../index.js')
  const engine = await LcmEngine.open({ dbPath, leafChunkTokens: 300, leafTargetTokens: 100, freshTailCount: 2 })
  /** @type {import('../../index.js').IngestMessage[]} */
  const messages = Array.from({ length: 12 }, (_, i) => ({ role: i % 2 ? 'assistant' : 'user', content: `turn ${i} ${'words '.repeat(60)}` }))
  await engine.ingest({ sessionId: 's' }, messages)
  const [conv] = await engine.conversations()
  await engine.compact(conv.conversationId, 'offline', { tokenBudget: 600, force: true })
  const ctx = await engine.assemble(conv.conversationId, { tokenBudget: 2000 })
  await engine.close()
  return `${ctx.messages.length} messages, ${(await stats(dbPath)).summaries} summaries`
}

async function stats(dbPath) {
  const { LcmEngine } = require('../../index.js')
  const engine = await LcmEngine.open({ dbPath, readOnly: true })
  const [conv] = await engine.conversations()
  await engine.close()
  return { summaries: conv.summaryCount }
}

if (!isMainThread) {
  work(workerData).then((line) => parentPort.postMessage(line))
} else {
  const dir = process.argv[2]
  let n = 0
  /** Runs one worker to its end. @returns {Promise<void>} */
  const one = () =>
    new Promise((resolve, reject) => {
      const id = n++
      const w = new Worker(__filename, { workerData: join(dir, `w${id}.db`) })
      w.on('message', (m) => console.log(`worker ${id}: ${m}`))
      w.on('error', reject)
      w.on('exit', (code) => (code === 0 ? resolve(undefined) : reject(new Error(`worker ${id} exited ${code}`))))
    })
  ;(async () => {
    for (let i = 0; i < 3; i++) await one()
    await Promise.all([one(), one(), one()])
    console.log(`main: ${await work(join(dir, 'main.db'))}`)
    await one()
    console.log('done')
  })().catch((e) => {
    console.error(e)
    process.exit(1)
  })
}
