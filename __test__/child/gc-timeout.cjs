// A summarizer promise that can never settle, collected by the GC while the pass waits: the
// pass must still end with E_TIMEOUT (run with --expose-gc).
const { mkdtempSync, rmSync } = require('node:fs')
const { tmpdir } = require('node:os')
const { join } = require('node:path')
const { LcmEngine } = require('../../index.js')

async function main() {
  const dir = mkdtempSync(join(tmpdir(), 'lcm-gc-'))
  process.on('exit', () => rmSync(dir, { recursive: true, force: true }))
  const dbPath = join(dir, 'gc.db')
  const engine = await LcmEngine.open({ dbPath, leafChunkTokens: 300, freshTailCount: 4, summaryTimeoutMs: 400 })
  const msgs = Array.from({ length: 30 }, (_, i) => ({ role: /** @type {'assistant' | 'user'} */ (i % 2 ? 'assistant' : 'user'), content: `m${i} ${'w '.repeat(200)}` }))
  const { conversationId } = await engine.ingest({ sessionId: 's' }, msgs)
  const timer = setInterval(() => global.gc(), 10)
  const outcome = await engine.leafPass(conversationId, () => new Promise(() => {})).then(
    () => 'resolved',
    (e) => e.code,
  )
  clearInterval(timer)
  await engine.close()
  console.log(outcome)
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
