// One of two processes sharing a database: `ingest` writes COUNT single-message calls,
// `compact` compacts the same session's conversation until the ingester is done.
const { LcmEngine } = require('../../index.js')

const [, , dbPath, mode, countArg] = process.argv
const count = Number(countArg)

async function main() {
  const engine = await LcmEngine.open({ dbPath, leafChunkTokens: 300, leafTargetTokens: 100, condensedTargetTokens: 40, freshTailCount: 4, busyTimeoutMs: 20000 })
  if (mode === 'ingest') {
    for (let i = 0; i < count; i++) {
      await engine.ingest({ sessionId: 'shared' }, [{ role: i % 2 ? 'assistant' : 'user', content: `message ${i} ${'text '.repeat(40)}`, entryId: `w${i}` }])
    }
  } else {
    let stale = 0
    let passes = 0
    const deadline = Date.now() + 20000
    while (Date.now() < deadline) {
      const [conv] = await engine.conversations()
      if (!conv) {
        await new Promise((r) => setTimeout(r, 5))
        continue
      }
      try {
        const r = await engine.compact(conv.conversationId, 'offline', { tokenBudget: 400, force: true })
        passes += r.leafPasses
      } catch (e) {
        if (e.code !== 'E_STALE' && e.code !== 'E_BUSY') throw e
        stale++
      }
      if (conv.messageCount >= count && passes > 0) break
      await new Promise((r) => setTimeout(r, 2))
    }
    console.log(JSON.stringify({ passes, stale }))
  }
  await engine.close()
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
