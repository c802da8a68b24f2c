// @ts-check
// The host scenario: lcm-native installed into the real OpenClaw, one run directory whose lcm.db
// starts as a copy of lossless-claw 0.15's head-theme.db:
//   A. OpenClaw's built-in engine holds the slot: two turns of session "early".
//   B. The slot switches to lcm-native: "early" keeps its history; the main session continues
//      the lossless-claw conversation; session "e2e" grows until lcm-native compacts it with the
//      fake model, and its summaries reach the model; a scripted tool call runs lcm_grep; a
//      customer id pasted into session "paste" is redacted before it is stored (redactPatterns).
//   C. A Gateway restart, now with agents on the `coding` tool profile and plugin tools listed
//      directly: "e2e" continues the same conversation; the model is offered the recall tools
//      (the manifest's toolMetadata) and calls lcm_grep; the plugin's config is edited while a
//      turn runs (hot reload): the old instance is disposed, the new options apply, turns go on.
// (The plugin's cost per turn over long histories is measured by bench/openclaw-turns.mjs, with
// seedHistory below; bench/RESULTS.md.)

import assert from 'node:assert/strict'
import { copyFileSync, existsSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

import { ROOT, assertSound, check, cleanUp, committedTurns, lcm, legacyFallbacks, sql, waitFor } from './e2e-lib.mjs'
import { startFakeModel } from './fake-model.mjs'
import { installPlugin, makeRunDir, startGateway, stopGateway, turn, writeConfig } from './harness.mjs'

/** Long enough that a few turns fill a leaf chunk. @param {number} i */
const filler = (i) => `Turn ${i} notes: the build of module-${i} uses port ${8000 + i}; marker zebra-${i}. ${'Details follow in prose. '.repeat(60)}`

/** @param {import('./harness.mjs').Host} host @param {string} tgz the packed plugin */
export async function hostScenario(host, tgz) {
  const run = await makeRunDir(host)
  // Response ids that repeat every third request, as Ollama's do: every reply is stored all
  // the same (the counts below).
  const fake = await startFakeModel({ logFile: join(run.dir, 'model.jsonl'), idsRepeatEvery: 3 })
  const db = join(run.state, 'lcm.db')
  copyFileSync(join(ROOT, 'fixtures', 'head-theme.db'), db)
  const headMessages = sql(db, 'SELECT count(*) FROM messages WHERE conversation_id = 1')[0][0]
  const timings = join(run.dir, 'timings.jsonl')
  run.env.LCM_NATIVE_TIMINGS = timings
  const installed = await installPlugin(run, tgz)
  console.log(`openclaw e2e: installed ${tgz} (${installed.method}, ${installed.ms} ms) in ${run.dir}`)
  // Maintenance compacts past contextThreshold of the budget (~35k tokens here): a low one, so
  // that a few turns of filler reach it.
  const pluginConfig = { freshTailCount: 4, leafChunkTokens: 1500, contextThreshold: 0.05, summaryTimeoutMs: 20_000, redactPatterns: ['@builtin', 'CUST-[0-9]{8}'] }
  /** @type {string[]} */
  const gatewayLogs = []
  /** @param {string} slot @param {{ toolsProfile?: string, toolSearch?: boolean }} [tools] */
  const gateway = async (slot, tools = {}) => {
    writeConfig(run, { port: fake.port, slot, pluginConfig, contextWindow: 64_000, ...tools })
    const gw = await startGateway(run)
    for (const f of [gw.stdoutFile, gw.stderrFile]) {
      const kept = `${f}.${gatewayLogs.length}`
      gatewayLogs.push(kept)
      gw.exited.then(() => existsSync(f) && copyFileSync(f, kept))
    }
    console.log(`openclaw e2e: gateway (${slot}) ready in ${gw.readyMs} ms`)
    return gw
  }
  let turnsOnLcm = 0
  /** @param {Parameters<typeof turn>[1]} opts */
  const say = async (opts) => {
    const r = await turn(run, opts)
    if (JSON.parse(readFileSync(run.configPath, 'utf8')).plugins.slots.contextEngine === 'lcm-native') turnsOnLcm++
    assert.equal(r.code, 0, `turn failed (${r.code}): ${r.stderr.slice(-2000)}`)
    return r
  }
  /** The conversation id of a session key in lcm.db (null when none). @param {string} key */
  const convOf = (key) => sql(db, `SELECT conversation_id FROM conversations WHERE session_key = '${key}' AND active = 1`)[0]?.[0] ?? null

  // A. OpenClaw's built-in engine: lcm-native is installed but not selected.
  let gw = await gateway('legacy')
  await check('turns on the built-in engine', async () => {
    assert.match((await say({ sessionId: 'early', message: 'early one: the launch code is ALPHA-7' })).reply, /^ack: early one/)
    assert.match((await say({ sessionId: 'early', message: 'early two: noted' })).reply, /^ack: early two/)
    assert.equal(convOf('agent:main:explicit:early'), null)
  })
  await stopGateway(gw)

  // B. lcm-native selected.
  gw = await gateway('lcm-native')
  await check('a session begun on the built-in engine keeps its history after the switch', async () => {
    await say({ sessionId: 'early', message: 'early three: after the switch' })
    const cid = convOf('agent:main:explicit:early')
    assert.ok(cid, 'no conversation for the session')
    const texts = sql(db, `SELECT content FROM messages WHERE conversation_id = ${cid} ORDER BY seq`).map((r) => r[0])
    assert.ok(texts.some((t) => t.includes('ALPHA-7')), texts.join(' | '))
    assert.ok(texts.some((t) => t.includes('early three')), texts.join(' | '))
    const asked = sql(db, `SELECT count(*) FROM messages WHERE conversation_id = ${cid} AND role = 'user' AND content LIKE '%ALPHA-7%'`)[0][0]
    assert.equal(asked, 1, 'the history was imported more than once')
  })
  await check("lossless-claw's database is continued: the main session's conversation grows, its summaries reach the model", async () => {
    const before = fake.requests().length
    await say({ sessionKey: 'agent:main:main', message: 'hello again after the switch' })
    const n = sql(db, 'SELECT count(*) FROM messages WHERE conversation_id = 1')[0][0]
    assert.equal(n, headMessages + 2)
    const sent = JSON.stringify(fake.requests().slice(before).map((r) => /** @type {any} */ (r.body).messages))
    assert.match(sent, /<summary id=\\"sum_/)
  })
  /** @type {number | null} */
  let e2eConv = null
  await check('turns are stored with their advancement keys; lcm-native compacts with the fake model', async () => {
    for (let i = 1; i <= 8; i++) await say({ sessionId: 'e2e', message: filler(i) })
    e2eConv = convOf('agent:main:explicit:e2e')
    assert.ok(e2eConv)
    assert.equal(sql(db, `SELECT count(*) FROM messages WHERE conversation_id = ${e2eConv}`)[0][0], 16)
    assert.equal(sql(db, `SELECT count(*) FROM lcm_native_turns WHERE conversation_id = ${e2eConv}`)[0][0], 8)
    // Maintenance runs in the background after a turn: wait for its summary (bounded).
    const summaries = await waitFor(() => sql(db, `SELECT count(*) FROM summaries WHERE conversation_id = ${e2eConv} AND content LIKE 'FAKE-SUMMARY%'`)[0][0], 60_000)
    assert.ok(summaries > 0, 'no summary written by the fake model')
  })
  await check('a later model request carries the summary', async () => {
    const before = fake.requests().length
    await say({ sessionId: 'e2e', message: 'what did we do so far?' })
    const sent = fake.requests().slice(before).map((r) => JSON.stringify(/** @type {any} */ (r.body).messages))
    assert.ok(sent.some((s) => s.includes('<summary id=\\"sum_') && s.includes('FAKE-SUMMARY')), 'no <summary id= in the request')
  })
  await check('a fact whose message is under a summary reaches the model when a turn asks for it (recall at assembly)', async () => {
    // filler(1) said "the build of module-1 uses port 8001"; its message is summarized by now.
    const planted = sql(db, `SELECT message_id FROM messages WHERE conversation_id = ${e2eConv} AND content LIKE 'Turn 1 notes:%'`)[0][0]
    const live = sql(db, `SELECT count(*) FROM context_items WHERE conversation_id = ${e2eConv} AND message_id = ${planted}`)[0][0]
    assert.equal(live, 0, 'the planted message is still in the live context')
    const before = fake.requests().length
    await say({ sessionId: 'e2e', message: 'Which port did the build of module-1 need?' })
    const agent = fake.requests().slice(before).filter((r) => (/** @type {any} */ (r.body).tools ?? []).length > 0)
    const sent = JSON.stringify(/** @type {any} */ (agent.at(-1)?.body)?.messages ?? [])
    assert.match(sent, /<recalled query=/, 'no <recalled> block in the request')
    assert.match(sent, /<excerpt message=\\"\d+\\"[^>]*>\\nTurn 1 notes: the build of module-1 uses port 8001/, 'the planted line is not in the block')
    // The next request still carries it, where it was (the provider's cached prefix).
    const next = fake.requests().length
    await say({ sessionId: 'e2e', message: 'thanks' })
    const later = fake.requests().slice(next).filter((r) => (/** @type {any} */ (r.body).tools ?? []).length > 0)
    const block = sent.match(/<recalled[^]*?<\/recalled>/)?.[0]
    assert.ok(block && JSON.stringify(/** @type {any} */ (later.at(-1)?.body)?.messages ?? []).includes(block), 'the block was not sent again unchanged')
    assert.equal(sql(db, `SELECT count(*) FROM lcm_native_recalls WHERE conversation_id = ${e2eConv}`)[0][0], 1)
  })
  await check('with redactPatterns, a customer id pasted into a turn never reaches lcm.db', async () => {
    // OpenClaw masks common token formats itself (ghp_… arrives as `ghp_16…8B4a`); a pattern
    // of the user's own shows that lcm-native's ingest path runs under the real host.
    const id = 'CUST-40417733'
    await say({ sessionId: 'paste', message: `refund ${id} today` })
    const cid = convOf('agent:main:explicit:paste')
    assert.ok(cid, 'no conversation for the session')
    const texts = sql(db, `SELECT content FROM messages WHERE conversation_id = ${cid} ORDER BY seq`).map((r) => r[0])
    assert.ok(texts.some((t) => t.includes('refund [REDACTED] today')), texts.join(' | '))
    assert.ok(!texts.some((t) => t.includes(id)), texts.join(' | '))
    assert.equal(sql(db, `SELECT count(*) FROM message_parts WHERE instr(coalesce(text_content, '') || metadata, '${id}') > 0`)[0][0], 0)
    assert.ok(sql(db, `SELECT count(*) FROM lcm_native_redactions WHERE reason = 'redactPatterns at ingest'`)[0][0] >= 1)
  })
  await check('a scripted tool call to lcm_grep returns hits from the compacted history', async () => {
    const r = await say({ sessionId: 'e2e', message: 'TOOLCALL lcm_grep zebra-2' })
    assert.match(r.reply, /^tool said: /)
    assert.match(r.reply, /1 hit\(s\)/)
    assert.match(r.reply, /zebra-2/)
  })
  await stopGateway(gw)

  // C. Restart, on the coding tool profile with plugin tools listed directly.
  gw = await gateway('lcm-native', { toolsProfile: 'coding', toolSearch: false })
  await check('after a restart the session continues the same conversation', async () => {
    const n = sql(db, `SELECT count(*) FROM messages WHERE conversation_id = ${e2eConv}`)[0][0]
    await say({ sessionId: 'e2e', message: 'after the restart' })
    assert.equal(convOf('agent:main:explicit:e2e'), e2eConv)
    assert.equal(sql(db, `SELECT count(*) FROM messages WHERE conversation_id = ${e2eConv}`)[0][0], n + 2)
  })
  await check('an agent on the coding tool profile is offered the recall tools and calls lcm_grep', async () => {
    const before = fake.requests().length
    const r = await say({ sessionId: 'e2e', message: 'TOOLCALL lcm_grep zebra-3' })
    assert.match(r.reply, /^tool said: .*zebra-3/s)
    const offered = new Set(fake.requests().slice(before).flatMap((q) => (/** @type {any} */ (q.body).tools ?? []).map((/** @type {any} */ t) => t.function?.name)))
    for (const tool of ['lcm_grep', 'lcm_describe', 'lcm_expand', 'lcm_expand_query']) assert.ok(offered.has(tool), `${tool} not offered: ${[...offered].join(', ')}`)
  })
  await check("the plugin's config edited while a turn runs (hot reload): the old instance is disposed, the new options apply, turns go on", async () => {
    const logs = () => [gw.stdoutFile, gw.stderrFile, run.logFile].map((f) => (existsSync(f) ? readFileSync(f, 'utf8') : '')).join('\n')
    const disposedBefore = (logs().match(/plugin instance disposed/g) ?? []).length
    const running = say({ sessionId: 'e2e', message: 'a turn while the config changes' })
    await new Promise((r) => setTimeout(r, 300))
    // As an operator edits openclaw.json: only the plugin's entry changes (a new pattern).
    const config = JSON.parse(readFileSync(run.configPath, 'utf8'))
    config.plugins.entries['lcm-native'].config = { ...pluginConfig, redactPatterns: [...pluginConfig.redactPatterns, 'ORDER-[0-9]{6}'] }
    writeFileSync(run.configPath, JSON.stringify(config, null, 2) + '\n')
    await running
    const disposed = await waitFor(() => (logs().match(/plugin instance disposed/g) ?? []).length > disposedBefore, 60_000)
    assert.ok(disposed, `no disposal logged after the config change:\n${logs().split('\n').filter((l) => /reload|lcm-native/i.test(l)).slice(-20).join('\n')}`)
    // The Gateway did not wedge, and the successor runs with the new options.
    const n = sql(db, `SELECT count(*) FROM messages WHERE conversation_id = ${e2eConv}`)[0][0]
    await say({ sessionId: 'e2e', message: 'ship ORDER-123456 after the reload' })
    await say({ sessionId: 'e2e', message: 'one more turn after the reload' })
    assert.equal(sql(db, `SELECT count(*) FROM messages WHERE conversation_id = ${e2eConv}`)[0][0], n + 4)
    const texts = sql(db, `SELECT content FROM messages WHERE conversation_id = ${e2eConv} ORDER BY seq DESC LIMIT 4`).map((r) => String(r[0]))
    assert.ok(texts.some((t) => t.includes('ship [REDACTED] after the reload')), texts.join(' | '))
    assert.equal(sql(db, `SELECT count(*) FROM messages WHERE instr(content, 'ORDER-123456') > 0`)[0][0], 0)
  })
  await stopGateway(gw)
  await fake.close()

  await check('no turn fell back to the built-in engine: every turn on lcm-native was committed to it', () => {
    assert.deepEqual(legacyFallbacks([...gatewayLogs.slice(2), run.logFile]), [])
    const commits = committedTurns(timings)
    assert.equal(commits, turnsOnLcm)
  })
  await check("the database passes SQLite's and lcm-native's checks, and lossless-claw's tables are intact", async () => {
    await assertSound(db)
    assert.equal(sql(db, 'SELECT count(*) FROM focus_briefs')[0][0], sql(join(ROOT, 'fixtures', 'head-theme.db'), 'SELECT count(*) FROM focus_briefs')[0][0])
  })

  cleanUp(run)
}

/**
 * Stores a 10,000-message conversation under `key` (before the Gateway opens the file), for the
 * per-turn cost figure. @param {string} db @param {string} key @param {number} n
 */
export async function seedHistory(db, key, n) {
  // One sweep compacts it all (however many passes that takes).
  const engine = await lcm.LcmEngine.open({ dbPath: db, maxSweepIterations: 1_000_000, sweepDeadlineMs: 3_600_000 })
  try {
    const start = Date.parse('2026-11-01T00:00:00Z')
    for (let base = 0; base < n; base += 500) {
      const batch = []
      for (let i = base; i < Math.min(n, base + 500); i++) {
        batch.push({ role: i % 2 === 0 ? 'user' : 'assistant', content: i % 2 === 0 ? `question ${i} about module-${i % 97}` : [{ type: 'text', text: `answer ${i}: ${'words '.repeat(40)}` }], timestamp: start + i * 1000 })
      }
      await engine.ingest({ sessionKey: key, sessionId: 'bench' }, /** @type {any} */ (batch))
    }
    const conv = await engine.findConversation({ sessionKey: key })
    // Compacted as a long-lived session would be: summaries and a fresh tail, under the
    // threshold of the budget the host gives it, so that the measured turns compact nothing.
    await engine.compact(/** @type {number} */ (conv?.conversationId), 'offline', { tokenBudget: 30_000, target: 'budget' })
    return n
  } finally {
    await engine.close()
  }
}
