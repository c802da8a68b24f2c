// @ts-check
// What a session costs its user under each context engine, inside the real OpenClaw 2026.9.6:
// the same messages through lcm-native, OpenClaw's built-in engine ("legacy") and lossless-claw
// 1.0, each in a fresh run directory with a Gateway and a fake OpenAI-compatible model that logs
// every request. From the log (__test__/openclaw/cache-ledger.mjs): input tokens sent, the share
// a provider's prompt cache would serve (an exact prefix of an earlier request), the summarizer's
// input, and effective tokens = uncached + cached × 0.1 (summarizer calls priced the same way).
// Tokens are characters / 4.
//
//   node bench/cache.mjs [--turns 100] [--at 40,100] [--engines lcm-native,legacy,lossless-claw]
//                        [--window 64000] [--lcm-config '{"…": …}'] [--keep] [--breaks]
//
// The session: short questions, pasted service logs of 1.4k–6k tokens (19 in every 40 turns),
// a file read with the `read` tool every 10 turns (a tool call and its ~1k-token result), facts
// planted early (found afterwards with lcm_grep, outside the measured turns), the
// model's replies ~150 tokens. Every turn must exit 0. `--breaks` prints, per engine, where each
// request stopped matching the one before it. About 5 s a turn on this machine: 100 turns of
// three engines take ~25 minutes.

import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'

import { CACHED_PRICE, earlyBreaks, ledger, totals, uncachedSplit } from '../__test__/openclaw/cache-ledger.mjs'
import { ROOT, cleanUp, readTimings, sql } from '../__test__/openclaw/e2e-lib.mjs'
import { pastedLog } from '../__test__/openclaw/e2e-field.mjs'
import { installLosslessClaw, losslessClawTarball } from '../__test__/openclaw/e2e-interop.mjs'
import { settle, startFakeModel } from '../__test__/openclaw/fake-model.mjs'
import { ensureHost, installPlugin, makeRunDir, packPlugin, startGateway, stopGateway, turn, writeConfig } from '../__test__/openclaw/harness.mjs'

const arg = (/** @type {string} */ name, /** @type {string} */ dflt) => {
  const i = process.argv.indexOf(name)
  return i > 0 ? process.argv[i + 1] : dflt
}
const TURNS = Number(arg('--turns', '100'))
const AT = [...new Set(arg('--at', `40,${TURNS}`).split(',').map(Number))].filter((n) => n > 0 && n <= TURNS)
const ENGINES = arg('--engines', 'lcm-native,legacy,lossless-claw').split(',')
const WINDOW = Number(arg('--window', '64000'))
const LCM_CONFIG = JSON.parse(arg('--lcm-config', '{}'))
/** lossless-claw 1.0 with its defaults slides and fails turns (#43): a tail it can keep. */
const LOSSLESS_CLAW_CONFIG = { freshTailCount: 32, freshTailMaxTokens: 14_000 }

/** Facts planted in the session, and the turn that plants each. */
export const FACTS = [
  { turn: 1, text: 'ORION-DEPLOY-7731' },
  { turn: 7, text: 'LYNX-ROLLBACK-2208' },
  { turn: 23, text: 'TAPIR-QUOTA-5190' },
]

/**
 * The user's message of turn `t` (1-based): a pasted log on 19 of every 40 turns (1.4k–6k
 * tokens), else a short question. The same for every engine.
 * @param {number} t
 */
export function messageOf(t) {
  if (t % 10 === 5) return `TOOLCALL read {"path": "${notesFile(t)}"}`
  const fact = FACTS.find((f) => f.turn === t)
  const note = fact ? `Keep in mind: the key for this is ${fact.text}.` : ''
  if ((t * 19) % 40 < 19) {
    const tokens = 1_400 + ((t * 2_654_435_761) % 4_601)
    return pastedLog(t, tokens, note)
  }
  return `Question ${t}: what should we check next about the service behind run ${t - 1}? ${note}`.trim()
}

/** The workspace file the tool turn `t` reads (about 1k tokens). @param {number} t */
const notesFile = (t) => `notes/run-${t}.md`

/** Writes the files the tool turns read into a run's workspace. @param {string} work */
function writeNotes(work) {
  mkdirSync(join(work, 'notes'), { recursive: true })
  for (let t = 5; t <= TURNS; t += 10) writeFileSync(join(work, notesFile(t)), pastedLog(500 + t, 1_000, `Notes of run ${t}.`))
}

/**
 * One engine through the whole session. Returns the logged requests, the index of the first
 * request of each turn, the turns that failed and the recall checks.
 * @param {string} engine @param {import('../__test__/openclaw/harness.mjs').Host} host @param {string} tgz
 */
async function runEngine(engine, host, tgz) {
  const run = await makeRunDir(host)
  const fake = await startFakeModel({ logFile: join(run.dir, 'model.jsonl'), contextWindow: WINDOW, replyTokens: 150 })
  const timings = join(run.dir, 'timings.jsonl')
  run.env.LCM_NATIVE_TIMINGS = timings
  if (engine === 'lossless-claw') {
    const lc = losslessClawTarball()
    if (!lc) throw new Error('lossless-claw tarball not found (../shared/vendor/lossless-claw or LCM_LOSSLESS_CLAW_TGZ)')
    await installLosslessClaw(run, lc)
    writeConfig(run, { port: fake.port, slot: 'lossless-claw', pluginId: 'lossless-claw', pluginConfig: LOSSLESS_CLAW_CONFIG, contextWindow: WINDOW })
  } else if (engine === 'lcm-native') {
    await installPlugin(run, tgz)
    writeConfig(run, { port: fake.port, slot: engine, pluginConfig: LCM_CONFIG, contextWindow: WINDOW })
  } else {
    writeConfig(run, { port: fake.port, slot: engine, pluginId: 'none', enabled: false, contextWindow: WINDOW })
  }
  if (engine === 'legacy') {
    // The built-in engine's safeguard compaction audits a summary's sections and identifiers,
    // which the fake model's summaries do not have; with the audit on, every compaction fails
    // and so does every turn after it. Off, legacy does its cheapest compaction (no retries).
    const config = JSON.parse(readFileSync(run.configPath, 'utf8'))
    config.agents.defaults.compaction = { qualityGuard: { enabled: false } }
    writeFileSync(run.configPath, JSON.stringify(config, null, 2))
  }
  writeNotes(run.work)
  const gw = await startGateway(run)
  /** @type {number[]} index into the request log where each turn's requests begin (1-based turns) */
  const turnStart = [0]
  const failed = []
  const sessionId = 'cost'
  try {
    for (let t = 1; t <= TURNS; t++) {
      turnStart[t] = fake.requests().length
      const r = await turn(run, { sessionId, message: messageOf(t) })
      if (r.code !== 0) failed.push({ turn: t, code: r.code, stderr: r.stderr.slice(-400) })
      await settle(fake)
      process.stdout.write(`\r${engine}: turn ${t}/${TURNS}${failed.length ? ` (${failed.length} failed)` : ''}   `)
    }
    turnStart[TURNS + 1] = fake.requests().length
    process.stdout.write('\n')
    // Recall, after the measured turns: lcm_grep finds each planted fact (not for legacy).
    /** @type {{ fact: string, found: boolean }[]} */
    const recall = []
    if (engine !== 'legacy') {
      for (const f of FACTS) {
        const args = engine === 'lossless-claw' ? JSON.stringify({ pattern: f.text }) : f.text
        const r = await turn(run, { sessionId, message: `TOOLCALL lcm_grep ${args}` })
        recall.push({ fact: f.text, found: r.code === 0 && r.reply.includes(f.text) })
      }
    }
    await settle(fake)
    const summaries = engine === 'legacy' ? null : sql(join(run.state, 'lcm.db'), 'SELECT depth, count(*) FROM summaries GROUP BY depth ORDER BY depth')
    const maintained = readTimings(timings).filter((x) => x.op === 'maintain' && /sweep/.test(x.reason ?? '') && !/^leaf sweep: 0 /.test(x.reason ?? ''))
    return { requests: fake.requests(), turnStart, failed, recall, summaries, compactions: maintained.length, dir: run.dir, run }
  } finally {
    await stopGateway(gw)
    await fake.close()
  }
}

const fmt = (/** @type {number} */ n) => n.toLocaleString('en-US')
const pct = (/** @type {number} */ x) => `${(x * 100).toFixed(1)} %`

async function main() {
  const host = await ensureHost()
  // The packed plugin in a folder of its own, removed once every engine has run.
  const packDir = mkdtempSync(join(tmpdir(), 'lcm-pack-'))
  /** @type {Record<string, Awaited<ReturnType<typeof runEngine>>>} */
  const runs = {}
  try {
    const tgz = ENGINES.includes('lcm-native') ? await packPlugin(ROOT, packDir) : ''
    for (const engine of ENGINES) runs[engine] = await runEngine(engine, host, tgz)
  } finally {
    rmSync(packDir, { recursive: true, force: true })
  }

  const rows = []
  for (const at of AT) {
    for (const engine of ENGINES) {
      const r = runs[engine]
      const upTo = r.turnStart[at + 1] ?? r.requests.length
      const entries = ledger(r.requests.slice(0, upTo))
      const t = totals(entries)
      const breaks = earlyBreaks(entries)
      const failed = r.failed.filter((f) => f.turn <= at).length
      rows.push(`| ${engine}, ${at} turns | ${fmt(t.sent)} | ${pct(t.cacheable)} | ${fmt(t.summaryInput)} (${t.summaryCalls} calls) | **${fmt(t.effective)}** | ${breaks.length} | ${failed} |`)
    }
  }
  console.log(`\n${TURNS} turns, ${WINDOW / 1000}k window; effective = uncached + cached × ${CACHED_PRICE} (summarizer calls alike); tokens = characters / 4`)
  console.log('\n| engine | input tokens sent | cacheable | summarizer input | effective tokens | early breaks (< 50 % kept) | failed turns |')
  console.log('|---|--:|--:|--:|--:|--:|--:|')
  for (const row of rows) console.log(row)
  for (const engine of ENGINES) {
    const r = runs[engine]
    const recall = r.recall.length ? r.recall.map((x) => `${x.fact} ${x.found ? 'found' : 'NOT FOUND'}`).join(', ') : 'not checked'
    console.log(`\n${engine}: recall ${recall}; summaries by depth ${JSON.stringify(r.summaries)}; maintenance compactions ${r.compactions}; run ${r.dir}`)
    const split = uncachedSplit(ledger(r.requests.slice(0, r.turnStart[TURNS + 1])))
    console.log(`  uncached input of its ${TURNS} turns: ${fmt(split.continuing)} tokens in requests that continue the previous one (each turn's new messages), ${fmt(split.first)} in first requests, ${fmt(split.breaks)} in ${split.breakCount} requests after a break (${fmt(split.breakSummaries)} of them new summaries, ${fmt(split.breakResent)} messages sent again, the rest those turns' own new messages)`)
    // What the share would be if no break sent anything again: the part a sweep's placement
    // can win back. The rest is new text (the turns' own and the summaries').
    const t = totals(ledger(r.requests.slice(0, r.turnStart[TURNS + 1])))
    console.log(`  cacheable with nothing sent again after a break: ${((t.cached + split.breakResent) / t.sent * 100).toFixed(2)} % (now ${(t.cacheable * 100).toFixed(2)} %)`)
    for (const f of r.failed) console.log(`  turn ${f.turn} failed (${f.code}): ${f.stderr.replace(/\s+/g, ' ')}`)
    if (process.argv.includes('--breaks')) {
      const entries = ledger(r.requests)
      const turnOf = (/** @type {number} */ seq) => r.turnStart.findLastIndex((s) => s < seq)
      for (const e of entries) {
        if (e.kind !== 'agent' || e.keptFromPrevious === null || e.previousChars === null) continue
        const kept = e.keptFromPrevious / e.previousChars
        if (kept < 0.97) console.log(`  turn ${turnOf(e.seq)} request ${e.seq}: kept ${pct(kept)} of the previous request (${fmt(Math.round(e.keptFromPrevious / 4))} tokens), first change in message ${e.firstChange} of ${e.messages}`)
      }
    }
    if (!process.argv.includes('--keep')) cleanUp(r.run)
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  main().catch((err) => {
    console.error(err)
    process.exit(1)
  })
}
