// One of two gateways sharing a PostgreSQL schema: commits COUNT one-message turns to a shared
// session under its own entry ids and, as ROLE, assembles the context after each turn
// (`assemble`) or compacts every tenth turn (`compact`). Prints what it did as JSON.
const { LcmEngine } = require('../../index.js')

const [, , dbUrl, name, countArg, role] = process.argv
const count = Number(countArg)
const target = { sessionKey: 'agent:main:shared' }

async function main() {
  const engine = await LcmEngine.open({ dbUrl, leafChunkTokens: 300, leafTargetTokens: 100, condensedTargetTokens: 40, freshTailCount: 4, lockTimeoutMs: 200 })
  const done = { turns: 0, assembled: 0, passes: 0, busy: 0 }
  for (let i = 0; i < count; i++) {
    const r = await engine.ingest(target, [{ role: i % 2 ? 'assistant' : 'user', content: `${name} turn ${i} ${'words '.repeat(30)}`, entryId: `${name}${i}` }], {
      advancementKey: `${name}-turn-${i}`,
    })
    done.turns += r.inserted
    if (role === 'assemble') {
      const a = await engine.assemble(r.conversationId, { tokenBudget: 3000 })
      if (a.messages.length === 0) throw new Error(`turn ${i}: an empty context`)
      done.assembled++
    } else if (i % 10 === 9) {
      try {
        const c = await engine.compact(r.conversationId, 'offline', { tokenBudget: 1500, force: true })
        done.passes += c.leafPasses
      } catch (e) {
        if (e.code !== 'E_BUSY') throw e
        done.busy++
      }
    }
  }
  await engine.close()
  console.log(JSON.stringify(done))
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
