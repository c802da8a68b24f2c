// Recall at assembly without the host: a fact set's session (bench/recall-session.mjs) ingested
// turn by turn into one engine, compacted as the host does (past 75 % of a 64k window, down to 10 %) with a summarizer that
// keeps none of its source, and
// each question turn assembled with its message. Prints, per question, whether each fact's
// current values are in the turn's own block and how each excerpt was found; and the blocks
// of abstention and other turns. A quick loop for recall's scoring; bench/recall.mjs (through
// the real OpenClaw) gives the figures.
//
//   node bench/probes/recall_direct.mjs [--set a|b|c] [--turns 80] [--quiet] [--cold]
//
// `--cold` compacts everything it can before each question and abstention turn, so the context
// holds no raw message and no earlier block that shows a fact: what is visible is what that
// turn's own block recalls (recall's own reach, whatever the host's compaction timing).
import { mkdtempSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

import { factSet, notesText, says, session } from '../recall-session.mjs'

const require = createRequire(import.meta.url)
const { LcmEngine } = require('../../index.js')
const arg = (name, dflt) => {
  const i = process.argv.indexOf(name)
  return i > 0 ? process.argv[i + 1] : dflt
}
const SET = factSet(arg('--set', 'a'))
const TURNS = Number(arg('--turns', '80'))
const QUIET = process.argv.includes('--quiet')
const COLD = process.argv.includes('--cold')
const BUDGET = 64_000

const dir = mkdtempSync(join(tmpdir(), 'lcm-recall-direct-'))
const engine = await LcmEngine.open({ dbPath: join(dir, 'lcm.db'), autoRecall: true })
const forget = async (prompt) => `Summary ${prompt.length} chars.`
const target = { sessionKey: 'recall-direct' }
const s = session(TURNS, SET)
let cid = 0
const found = { question: 0, facts: 0, visible: 0, blockTokens: { question: [], abstain: [], chat: [], other: [] } }
for (let t = 1; t <= TURNS; t++) {
  const turn = s[t]
  if (cid && COLD && ['question', 'abstain'].includes(turn.kind)) {
    await engine.compact(cid, forget, { tokenBudget: 1, force: true })
  }
  if (cid) {
    const out = await engine.assemble(cid, { tokenBudget: BUDGET, recallQuery: turn.message })
    const r = out.stats.recall
    const kind = ['question', 'abstain', 'chat'].includes(turn.kind) ? turn.kind : 'other'
    found.blockTokens[kind].push(r?.tokens ?? 0)
    if (turn.kind === 'question') {
      for (const id of turn.facts) {
        const f = SET.FACTS.find((x) => x.id === id)
        const want = f.update ? f.update.values : f.values
        const ok = want.every((v) => r?.block?.includes(v))
        const all = JSON.stringify(out.messages)
        const visible = want.every((v) => all.includes(v))
        found.facts += ok ? 1 : 0
        found.visible += visible ? 1 : 0
        found.question++
        if (!QUIET) console.log(`t${t} fact ${id} ${ok ? 'IN BLOCK' : visible ? 'in context' : 'missing'}: ${f.question}`)
      }
    }
    if (!QUIET && r?.hits.length && kind !== 'other') {
      if (turn.kind !== 'question') console.log(`t${t} ${turn.kind}: ${turn.message}`)
      for (const h of r.hits) {
        const text = r.block.split(`message="${h.messageId}"`)[1]?.split('</excerpt>')[0].replace(/^[^>]*>\n?/, '').trim()
        console.log(`   ${h.similarity != null ? `sim ${h.similarity}` : `words ${h.matched.join(',')}${h.valueOfKind ? ' +kind' : ''}`} score ${h.score}: ${text.replace(/\s+/g, ' ').slice(0, 120)}`)
      }
    }
  }
  const reply = turn.kind === 'tool' ? notesText(t) : (says(turn.message, SET) ?? `ack: ${turn.message.slice(0, 40)}`)
  const res = await engine.ingest(target, [
    { role: 'user', content: turn.message },
    { role: 'assistant', content: [{ type: 'text', text: reply }] },
  ])
  cid = res.conversationId
  // As the host does: past 75 % of the window, a sweep down to its low water (10 %).
  const now = await engine.assemble(cid, { tokenBudget: BUDGET, autoRecall: false })
  if (now.estimatedTokens > 0.75 * BUDGET) await engine.compact(cid, forget, { tokenBudget: 0.1 * BUDGET, force: true })
}
const mean = (xs) => (xs.length ? Math.round(xs.reduce((a, b) => a + b, 0) / xs.length) : 0)
console.log(`set ${arg('--set', 'a')}, ${TURNS} turns: ${found.visible} / ${found.question} facts visible, ${found.facts} in the turn's own block; mean block tokens: ` +
  Object.entries(found.blockTokens).map(([k, v]) => `${k} ${mean(v)} (${v.filter((x) => x > 0).length}/${v.length} with one)`).join(', '))
await engine.close()
rmSync(dir, { recursive: true, force: true })
