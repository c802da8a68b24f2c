// @ts-check
// The field scenario: sessions unlike the ones the unit tests make up, with the plugin's default
// settings (what a new user has) and a model whose window is 40k tokens, refused beyond it as a
// real provider would:
//   (a) user turns of ~6k tokens each (pasted logs) until the turns together exceed the window
//       several times: every turn exits 0, the model never gets more than its window,
//       summaries come from the host model after turns, before the host has to ask for them,
//       and a fact from the first turn is still found by lcm_grep;
//   /new and /reset (the Gateway's sessions.reset) as lossless-claw 1.x handles them;
//   (b) a pasted message of ~26k tokens (`--message-file`), more than its share of the budget,
//       then ordinary turns: all exit 0, the message is stored whole and a word from its middle
//       is found by lcm_grep;
//   (b') a message larger than the whole window, then ordinary turns: all exit 0 (the model
//       sees an excerpt of it), it is stored whole and a word from its middle is found;
//   (c) short turns, one a tool call: each request begins with the whole request before it but
//       its last message (a provider's prompt cache serves all of it), user messages stamped.

import assert from 'node:assert/strict'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'

import { assertSound, check, cleanUp, committedTurns, legacyFallbacks, readTimings, sql } from './e2e-lib.mjs'
import { sessionOfRequest } from './cache-ledger.mjs'
import { contentText, startFakeModel } from './fake-model.mjs'
import { gatewayCall, installPlugin, makeRunDir, startGateway, stopGateway, turn, writeConfig } from './harness.mjs'

const WINDOW = 40_000
/** Turns of (a): 20 × ~6k tokens is three times the window. */
const LONG_TURNS = 20
const EARLY_FACT = 'ORION-DEPLOY-7731'
const MIDDLE_WORD = 'PELICAN-5521'

/**
 * A pasted service log of about `tokens` tokens (4 characters a token), different for each
 * `seed`; `fact` goes into its first line.
 * @param {number} seed @param {number} tokens @param {string} [fact]
 */
export function pastedLog(seed, tokens, fact = '') {
  const lines = [`Here is the log of run ${seed}, what went wrong? ${fact}`]
  let x = seed * 7919 + 1
  let chars = lines[0].length
  for (let i = 0; chars < tokens * 4; i++) {
    x = (x * 48271) % 2147483647
    const line = `2026-11-25T10:${String(i % 60).padStart(2, '0')}:${String(x % 60).padStart(2, '0')}Z ${x % 5 === 0 ? 'WARN' : 'INFO'} svc-${seed}-${x % 13} req=${x.toString(36)} path=/api/v${x % 3}/items/${x % 997} latency=${x % 900}ms status=${x % 7 === 0 ? 503 : 200}`
    lines.push(line)
    chars += line.length + 1
  }
  return lines.join('\n')
}

/** @param {import('./harness.mjs').Host} host @param {string} tgz the packed plugin */
export async function fieldScenario(host, tgz) {
  const run = await makeRunDir(host)
  const fake = await startFakeModel({ logFile: join(run.dir, 'model.jsonl'), contextWindow: WINDOW })
  const db = join(run.state, 'lcm.db')
  const timings = join(run.dir, 'timings.jsonl')
  run.env.LCM_NATIVE_TIMINGS = timings
  await installPlugin(run, tgz)
  writeConfig(run, { port: fake.port, slot: 'lcm-native', pluginConfig: {}, contextWindow: WINDOW })
  const gw = await startGateway(run)
  let turns = 0
  /** @param {Parameters<typeof turn>[1]} opts */
  const say = async (opts) => {
    const r = await turn(run, opts)
    turns++
    assert.equal(r.code, 0, `turn failed (${r.code}): ${r.stderr.slice(-2000)}`)
    return r
  }
  /** @param {string} key */
  const convOf = (key) => sql(db, `SELECT conversation_id FROM conversations WHERE session_key = '${key}' AND active = 1`)[0]?.[0] ?? null
  /** Summaries the host model wrote for a conversation. @param {number | null} cid */
  const modelSummaries = (cid) => (cid === null ? 0 : sql(db, `SELECT count(*) FROM summaries WHERE conversation_id = ${cid} AND content LIKE 'FAKE-SUMMARY%'`)[0][0])
  /** The host's compaction requests for a session, with what lcm-native answered. @param {string} key */
  const hostAsked = (key) => readTimings(timings).filter((t) => t.op === 'compact' && t.sessionKey === key)

  const longKey = 'agent:main:explicit:long'
  /** The turn after which summaries first existed, and the host's first compaction request. */
  let firstSummaryAfter = 0
  let firstAskBefore = 0
  await check(`(a) ${LONG_TURNS} pasted logs of ~6k tokens in a ${WINDOW / 1000}k window: every turn exits 0, the model never gets more than its window`, async () => {
    for (let i = 1; i <= LONG_TURNS; i++) {
      const asked = hostAsked(longKey).length
      await say({ sessionId: 'long', message: pastedLog(i, 6_000, i === 1 ? `The deploy key is ${EARLY_FACT}.` : '') })
      if (!firstAskBefore && hostAsked(longKey).length > asked) firstAskBefore = i
      if (!firstSummaryAfter && modelSummaries(convOf(longKey)) > 0) firstSummaryAfter = i
    }
    const stored = sql(db, `SELECT sum(token_count) FROM messages WHERE conversation_id = ${convOf(longKey)}`)[0][0]
    assert.ok(stored > 2.5 * WINDOW, `the turns hold ${stored} tokens, not several windows`)
    assert.deepEqual(fake.overflows(), [], 'a request was over the window')
  })
  await check('(a) summaries come from the host model after turns, before the host has to ask for compaction', () => {
    assert.ok(firstSummaryAfter > 0, 'no summary from the host model')
    const asks = hostAsked(longKey)
    // Every request of the host found a context that already fit, or made it fit.
    assert.deepEqual(asks.filter((a) => !a.compacted), [], JSON.stringify(asks))
    if (firstAskBefore) assert.ok(firstSummaryAfter < firstAskBefore, `summaries after turn ${firstSummaryAfter}, host asked before turn ${firstAskBefore}`)
    const maintained = readTimings(timings).filter((t) => t.op === 'maintain' && t.sessionKey === longKey && /leaf pass|sweep/.test(t.reason ?? ''))
    assert.ok(maintained.some((t) => !/^0 leaf/.test(t.reason)), JSON.stringify(maintained.slice(0, 5)))
  })
  await check('(a) a fact from the first turn is found by lcm_grep', async () => {
    const r = await say({ sessionId: 'long', message: `TOOLCALL lcm_grep ${EARLY_FACT}` })
    assert.match(r.reply, /^tool said: /)
    assert.match(r.reply, new RegExp(EARLY_FACT))
  })

  // /new and /reset, through the Gateway's sessions.reset (what the slash commands do).
  await check('/new keeps the conversation and takes its raw messages out of the context; /reset archives it and the session goes on in a new one', async () => {
    const cid = convOf(longKey)
    const stored = sql(db, `SELECT count(*) FROM messages WHERE conversation_id = ${cid}`)[0][0]
    const fresh = await gatewayCall(run, 'sessions.reset', { key: longKey, reason: 'new' })
    assert.equal(fresh.code, 0, `sessions.reset new: ${fresh.stdout}${fresh.stderr}`)
    assert.equal(sql(db, `SELECT count(*) FROM context_items WHERE conversation_id = ${cid} AND item_type = 'message'`)[0][0], 0)
    assert.equal(sql(db, `SELECT count(*) FROM lcm_native_context_resets WHERE conversation_id = ${cid}`)[0][0], 1)
    await say({ sessionId: 'long', message: 'a question after /new' })
    assert.equal(convOf(longKey), cid)
    assert.equal(sql(db, `SELECT count(*) FROM messages WHERE conversation_id = ${cid}`)[0][0], stored + 2)
    const reset = await gatewayCall(run, 'sessions.reset', { key: longKey, reason: 'reset' })
    assert.equal(reset.code, 0, `sessions.reset reset: ${reset.stdout}${reset.stderr}`)
    assert.deepEqual(sql(db, `SELECT active, archive_cause FROM conversations WHERE conversation_id = ${cid}`), [[0, 'manual-reset']])
    await say({ sessionId: 'long', message: 'a question after /reset' })
    const next = convOf(longKey)
    assert.ok(next !== null && next !== cid, `the session is still on conversation ${next}`)
    assert.equal(sql(db, `SELECT count(*) FROM messages WHERE conversation_id = ${next}`)[0][0], 2)
    assert.equal(sql(db, `SELECT count(*) FROM messages WHERE conversation_id = ${cid}`)[0][0], stored + 2, 'the archived conversation lost messages')
  })

  // (b) A pasted log larger than its share of the budget, within the window.
  const big = join(run.dir, 'big.txt')
  const bigText = `${pastedLog(1000, 13_000)}\n${MIDDLE_WORD} is the word in the middle.\n${pastedLog(1001, 13_000)}`
  writeFileSync(big, bigText)
  await check(`(b) a pasted message of ~${Math.round(bigText.length / 4000)}k tokens, then ordinary turns: all exit 0, the model never gets more than its window`, async () => {
    await say({ sessionId: 'big', message: 'a short first question' })
    await say({ sessionId: 'big', messageFile: big })
    await say({ sessionId: 'big', message: 'thanks, and what next?' })
    await say({ sessionId: 'big', message: 'one more ordinary turn' })
    assert.deepEqual(fake.overflows(), [], 'a request was over the window')
  })
  await check('(b) the message is stored whole, and a word from its middle is found by lcm_grep', async () => {
    const cid = convOf('agent:main:explicit:big')
    const rows = sql(db, `SELECT length(content), instr(content, '${MIDDLE_WORD}') > 0 FROM messages WHERE conversation_id = ${cid} AND role = 'user' AND length(content) >= ${bigText.length}`)
    assert.equal(rows.length, 1, `no stored message as long as the pasted one (${bigText.length} characters)`)
    assert.equal(rows[0][1], 1)
    const r = await say({ sessionId: 'big', message: `TOOLCALL lcm_grep ${MIDDLE_WORD}` })
    assert.match(r.reply, new RegExp(MIDDLE_WORD))
  })
  // (b') A message larger than the whole window. OpenClaw appends a turn's pending message to
  // the engine's context itself; lcm-native shows the model an excerpt of it through the host's
  // text transforms (plugin/oversized-prompt.cjs) and stores it whole.
  const HUGE_WORD = 'HERON-8804'
  const huge = join(run.dir, 'huge.txt')
  const hugeText = `${pastedLog(2000, WINDOW * 0.7)}\n${HUGE_WORD} is the word in the middle.\n${pastedLog(2001, WINDOW * 0.7)}`
  writeFileSync(huge, hugeText)
  await check(`(b') a message of ~${Math.round(hugeText.length / 4000)}k tokens in a ${WINDOW / 1000}k window, then ordinary turns: all exit 0, the model never gets more than its window`, async () => {
    await say({ sessionId: 'huge', messageFile: huge })
    await say({ sessionId: 'huge', message: 'a smaller question instead' })
    await say({ sessionId: 'huge', message: 'and one more' })
    assert.deepEqual(fake.overflows(), [], 'a request was over the window')
  })
  await check("(b') the message is stored whole, and a word from its middle is found by lcm_grep", async () => {
    const cid = convOf('agent:main:explicit:huge')
    const rows = sql(db, `SELECT instr(content, '${HUGE_WORD}') > 0 FROM messages WHERE conversation_id = ${cid} AND role = 'user' AND length(content) >= ${hugeText.length}`)
    assert.deepEqual(rows, [[1]], `no stored message as long as the pasted one (${hugeText.length} characters)`)
    const r = await say({ sessionId: 'huge', message: `TOOLCALL lcm_grep ${HUGE_WORD}` })
    assert.match(r.reply, new RegExp(HUGE_WORD))
  })
  // A session of short turns (no compaction in it), one of them a tool call: every request
  // must begin with the whole request before it but its last message.
  const cacheKey = 'agent:main:explicit:cache'
  await check("(c) without a compaction between them each request begins with the whole request before it but its last message (the host's per-request context): stamped user messages, tool calls and results included", async () => {
    const first = fake.requests().length
    for (let i = 1; i <= 6; i++) {
      await say({ sessionId: 'cache', message: i === 4 ? `TOOLCALL lcm_grep ${EARLY_FACT}` : `short question ${i} about the deploy of service ${i}` })
    }
    /** The logged requests with their bodies as the model server parsed them. */
    const all = /** @type {{ seq: number, body: any }[]} */ (fake.requests().slice(first))
    const names = (/** @type {any} */ body) => JSON.stringify((body.tools ?? []).map((/** @type {any} */ t) => t.function?.name))
    const turns = all.filter((r) => Array.isArray(r.body?.tools) && r.body.tools.length > 0 && sessionOfRequest(r.body) === cacheKey)
    // The session's own requests (the host's internal runs for it have other tools).
    const agent = turns.filter((r) => names(r.body) === names(turns[0].body))
    assert.ok(!all.some((r) => !Array.isArray(r.body?.tools) || r.body.tools.length === 0), 'a summary was made: the session was to stay below its threshold')
    /** @type {string[]} */
    const broken = []
    for (let i = 1; i < agent.length; i++) {
      const [prev, cur] = [agent[i - 1], agent[i]]
      const kept = prev.body.messages.slice(0, -1)
      if (JSON.stringify(cur.body.messages.slice(0, kept.length)) !== JSON.stringify(kept)) {
        const at = kept.findIndex((/** @type {unknown} */ m, /** @type {number} */ k) => JSON.stringify(m) !== JSON.stringify(cur.body.messages[k]))
        broken.push(`request ${cur.seq} differs from request ${prev.seq} at message ${at}: ${JSON.stringify(cur.body.messages[at]).slice(0, 160)} vs ${JSON.stringify(kept[at]).slice(0, 160)}`)
      }
    }
    assert.deepEqual(broken, [])
    // 6 turns, the tool turn making two requests.
    assert.equal(agent.length, 7)
    const last = agent[agent.length - 1].body.messages
    assert.ok(last.some((/** @type {any} */ m) => m.role === 'tool'), 'the tool result is in the history')
    // The earlier user messages reach the model stamped as the host stamped them the first time.
    const earlierUsers = last.slice(1, -2).filter((/** @type {any} */ m) => m.role === 'user')
    assert.ok(earlierUsers.length >= 5 && earlierUsers.every((/** @type {any} */ m) => /^\[[A-Z][a-z]{2} \d{4}-\d{2}-\d{2} \d{2}:\d{2} [^\]]+\] /.test(contentText(m.content))), JSON.stringify(earlierUsers.map((/** @type {any} */ m) => contentText(m.content).slice(0, 60))))
  })
  await stopGateway(gw)
  await fake.close()

  await check('(field) no turn fell back to the built-in engine, every turn was committed, the database is sound', async () => {
    assert.deepEqual(legacyFallbacks([gw.stdoutFile, gw.stderrFile, run.logFile]), [])
    assert.equal(committedTurns(timings), turns)
    await assertSound(db)
  })
  cleanUp(run)
}
