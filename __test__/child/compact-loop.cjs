// Ingests a transcript, compacts one pass, prints "ready" (so a summary exists however slow the
// machine is), then compacts a pass at a time until killed. The summarizer answers after a
// short delay, so a kill can land during a call or during a write.
const { readFileSync } = require('node:fs')
const { LcmEngine } = require('../../index.js')

const [, , dbPath, transcript] = process.argv

async function main() {
  const engine = await LcmEngine.open({ dbPath, leafChunkTokens: 600, leafTargetTokens: 200, condensedTargetTokens: 60, freshTailCount: 8, maxSweepIterations: 1 })
  const lines = readFileSync(transcript, 'utf8').split('\n').filter(Boolean).map((l, i) => {
    const m = JSON.parse(l)
    return { role: m.role === 'tool' ? 'toolResult' : m.role, content: m.content, timestamp: m.createdAt, toolCallId: m.toolCallId, entryId: `l${i}` }
  })
  const { conversationId } = await engine.ingest({ sessionId: 'killme' }, lines)
  let n = 0
  const summarize = async (_p, r) => {
    await new Promise((res) => setTimeout(res, 1 + (n++ % 4)))
    return `pass ${n} over ${r.inputCount}\nExpand for details about: everything`
  }
  for (let sweeps = 0; ; sweeps++) {
    const r = await engine.compact(conversationId, summarize, { tokenBudget: 500, force: true })
    if (sweeps === 0) console.log('ready')
    if (!r.actionTaken) await engine.ingest({ sessionId: 'killme' }, lines.slice(0, 40).map((m, i) => ({ ...m, entryId: `again-${n}-${i}` })))
  }
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
