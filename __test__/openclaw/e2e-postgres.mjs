// @ts-check
// The postgres scenario: the real OpenClaw Gateway with lcm-native on PostgreSQL (`dbUrl`, a
// schema per agent), a throwaway cluster of its own (scripts/pg-test-server.cjs) and a model
// whose window is 40k tokens:
//   - pasted logs of ~6k tokens until the turns exceed the window several times: every turn
//     exits 0, the model never gets more than its window, the host model's summaries are
//     stored in the agent's schema, and a fact from the first turn is found by lcm_grep;
//   - the server stopped (as in a crash) while the Gateway runs: turns still exit 0 (spooled in
//     the state directory); started again: the next turn stores them, each once;
//   - the schema is sound (verify) and no turn fell back to the built-in engine.
// Skipped with a line where no PostgreSQL can be started, except where it is required
// (CI=true or LCM_REQUIRE_POSTGRES=1, which .ci/run sets).

import assert from 'node:assert/strict'
import { existsSync, readdirSync } from 'node:fs'
import { createRequire } from 'node:module'
import { join } from 'node:path'

import { pastedLog } from './e2e-field.mjs'
import { ROOT, check, cleanUp, committedTurns, legacyFallbacks, lcm } from './e2e-lib.mjs'
import { startFakeModel } from './fake-model.mjs'
import { installPlugin, makeRunDir, startGateway, stopGateway, turn, writeConfig } from './harness.mjs'

const require = createRequire(import.meta.url)
const WINDOW = 40_000
const TURNS = 10
const FACT = 'LYRA-CUTOVER-4412'

/** @param {import('./harness.mjs').Host} host @param {string} tgz the packed plugin */
export async function postgresScenario(host, tgz) {
  /** @type {{ url: string, stop: () => void, halt: () => void, resume: () => void }} */
  let cluster
  try {
    cluster = require(join(ROOT, 'scripts', 'pg-test-server.cjs')).startCluster()
  } catch (err) {
    const required = process.env.CI === 'true' || process.env.LCM_REQUIRE_POSTGRES === '1'
    if (required) throw err
    console.log(`openclaw e2e: postgres skipped (${String(/** @type {Error} */ (err).message).split('\n')[0]})`)
    return
  }
  const run = await makeRunDir(host)
  const fake = await startFakeModel({ logFile: join(run.dir, 'model.jsonl'), contextWindow: WINDOW })
  const timings = join(run.dir, 'timings.jsonl')
  run.env.LCM_NATIVE_TIMINGS = timings
  // A password the socket does not ask for: it must show nowhere.
  const url = `${cluster.url.replace('postgres://lcm@', 'postgres://lcm:pw-e2e-secret@')}?schema=gw`
  try {
    await installPlugin(run, tgz)
    writeConfig(run, { port: fake.port, slot: 'lcm-native', pluginConfig: { dbUrl: url, databaseScope: 'agent' }, contextWindow: WINDOW })
    const gw = await startGateway(run)
    let turns = 0
    /** @param {Parameters<typeof turn>[1]} opts */
    const say = async (opts) => {
      const r = await turn(run, opts)
      turns++
      assert.equal(r.code, 0, `turn failed (${r.code}): ${r.stderr.slice(-2000)}`)
      return r
    }
    const key = 'agent:main:explicit:pg'
    /** What the agent's schema holds for the session. */
    const stored = async () => {
      const engine = await lcm.LcmEngine.open({ dbUrl: url.replace('schema=gw', 'schema=gw_main'), readOnly: true })
      try {
        const c = await engine.findConversation({ sessionKey: key })
        if (!c) return { messages: [], summaries: [], verify: null }
        return {
          messages: await engine.messages(c.conversationId, { limit: 10_000 }),
          summaries: await engine.summaries(c.conversationId),
          verify: await engine.verify(c.conversationId),
        }
      } finally {
        await engine.close()
      }
    }
    const questions = (/** @type {{ role: string, content: unknown }[]} */ messages) =>
      messages.filter((m) => m.role === 'user').map((m) => /run (\d+),/.exec(JSON.stringify(m.content))?.[1] ?? /after (\w+)/.exec(JSON.stringify(m.content))?.[1])

    await check(`(pg) ${TURNS} pasted logs of ~6k tokens in a ${WINDOW / 1000}k window on PostgreSQL: every turn exits 0, the model never gets more than its window, the host model's summaries are in the agent's schema`, async () => {
      for (let i = 1; i <= TURNS; i++) await say({ sessionId: 'pg', message: pastedLog(i, 6_000, i === 1 ? `The cutover key is ${FACT}.` : '') })
      assert.deepEqual(fake.overflows(), [], 'a request was over the window')
      const s = await stored()
      assert.equal(s.messages.length, 2 * TURNS)
      assert.ok(s.summaries.some((x) => x.content.startsWith('FAKE-SUMMARY')), `no summary from the host model (${s.summaries.length} summaries)`)
      assert.ok(s.verify?.ok, JSON.stringify(s.verify))
    })
    await check('(pg) a fact from the first turn is found by lcm_grep', async () => {
      const r = await say({ sessionId: 'pg', message: `TOOLCALL lcm_grep ${FACT}` })
      assert.match(r.reply, new RegExp(FACT))
    })
    await check('(pg) the server stops mid-run: turns still exit 0 (spooled); back, the next turn stores them, each once', async () => {
      cluster.halt()
      await say({ sessionId: 'pg', message: 'a question after down-1' })
      await say({ sessionId: 'pg', message: 'a question after down-2' })
      const spool = join(run.state, 'lcm-native-spool')
      assert.ok(existsSync(spool) && readdirSync(spool).some((n) => n.includes('lcm-native-pending')), 'nothing was spooled')
      assert.ok(readdirSync(spool).every((n) => !n.includes('pw-e2e-secret')))
      cluster.resume()
      await say({ sessionId: 'pg', message: 'a question after up' })
      const s = await stored()
      const asked = questions(s.messages)
      for (const q of ['down', 'up']) assert.equal(asked.filter((a) => a === q).length, q === 'down' ? 2 : 1, JSON.stringify(asked))
      assert.equal(new Set(s.messages.map((m) => m.seq)).size, s.messages.length)
      assert.ok(readdirSync(spool).every((n) => !n.includes('lcm-native-pending')), `left in the spool: ${readdirSync(spool)}`)
      assert.ok(s.verify?.ok, JSON.stringify(s.verify))
    })
    await stopGateway(gw)
    await check('(pg) no turn fell back to the built-in engine, every turn was committed, no log line shows the password', async () => {
      assert.deepEqual(legacyFallbacks([gw.stdoutFile, gw.stderrFile, run.logFile]), [])
      assert.equal(committedTurns(timings), turns)
      for (const f of [gw.stdoutFile, gw.stderrFile, run.logFile]) {
        if (existsSync(f)) assert.ok(!require('node:fs').readFileSync(f, 'utf8').includes('pw-e2e-secret'), `${f} shows the password`)
      }
    })
  } finally {
    await fake.close()
    cluster.stop()
    cleanUp(run)
  }
}
