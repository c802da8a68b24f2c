// @ts-check
// Whether a fact from long ago reaches the model when the user asks about it (issue #63 item 8),
// under each context engine inside the real OpenClaw 2026.9.6: lcm-native with recall at
// assembly on (`autoRecall: true`) and off, OpenClaw's built-in engine ("legacy") and
// lossless-claw 1.0, each in a fresh run directory with a Gateway and the request-logging fake
// model of __test__/openclaw/fake-model.mjs, whose summaries here keep none of their source
// (`summaries: 'opaque'`: a hash and filler): whatever the model sees of a fact comes from raw
// messages in the context or from what the engine recalls.
//
//   node bench/recall.mjs [--turns 80] [--engines lcm-native-recall,lcm-native,legacy,lossless-claw]
//                         [--window 64000] [--lcm-config '{"…": …}'] [--keep] [--json FILE]
//                         [--save DIR] [--load] [--blocks] [--set a|b|c]
//
// The session (bench/recall-session.mjs): 24 facts planted in the first 40 % of the turns (ticket
// ids, host:port, commit hashes, people and roles, numbers with units, preferences, decisions,
// dates, two stated by the assistant, two temporal questions), 6 of them changed later, each asked
// about once after 75 % in other words than the plant (15 of the 24 questions share no content
// word with it), 4 abstention questions (the answer is not in the history), small talk, pasted
// service logs and a file read every 10 turns as in bench/cache.mjs. `--set b` runs the same
// session with fact set B (bench/recall-facts-b.mjs) instead: held out, written after recall at
// assembly was and never tuned on, in other domains (a mobile app, a data platform, a hardware
// lab) with other wording; 17 of its 24 questions share no content word with their plant.
//
// For every question turn, the request the model answered from (the turn's last agent request
// of its session) is searched for each asked fact's current value (visible) and its old one
// (stale-only: only the old value there). Tokens (characters / 4) of each such request are
// compared with the same turn's under recall off (`lcm-native`), and the cache ledger of
// __test__/openclaw/cache-ledger.mjs gives effective tokens and early breaks as in cache.mjs.
//
// Each engine's logged requests are saved to DIR (default: <os tmpdir>/lcm-recall-bench) as
// <engine>-<turns>.json (<engine>-<turns>-b.json with `--set b`, so set A's runs stay); with
// `--load` the listed engines are read from there instead of run, so engines run at different
// times are compared in one table. `--blocks` prints where each recalled block
// (`<recalled …>…</recalled>`) sat and whether the next request still had it.
// About 5 s a turn: 80 turns of one engine take ~7 minutes.

import { execFileSync } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'

import { earlyBreaks, ledger, requestText, totals } from '../__test__/openclaw/cache-ledger.mjs'
import { ROOT, cleanUp } from '../__test__/openclaw/e2e-lib.mjs'
import { installLosslessClaw, losslessClawTarball } from '../__test__/openclaw/e2e-interop.mjs'
import { cleanUserText, contentText, settle, startFakeModel } from '../__test__/openclaw/fake-model.mjs'
import { ensureHost, installPlugin, makeRunDir, packPlugin, startGateway, stopGateway, turn, writeConfig } from '../__test__/openclaw/harness.mjs'
import { checkSession, factSet, says, session, sessionFacts, sharedWords, writeNotes } from './recall-session.mjs'

const arg = (/** @type {string} */ name, /** @type {string} */ dflt) => {
  const i = process.argv.indexOf(name)
  return i > 0 ? process.argv[i + 1] : dflt
}
const TURNS = Number(arg('--turns', '80'))
const ENGINES = arg('--engines', 'lcm-native-recall,lcm-native,legacy,lossless-claw').split(',')
const WINDOW = Number(arg('--window', '64000'))
const LCM_CONFIG = JSON.parse(arg('--lcm-config', '{}'))
const SAVE = arg('--save', join(tmpdir(), 'lcm-recall-bench'))
const JSON_OUT = arg('--json', '')
const LOAD = process.argv.includes('--load')
/** The fact set (`--set a|b|c`) and what its saved runs' file names end with. */
const SET = arg('--set', 'a')
const FACT_SET = factSet(SET)
const SUFFIX = SET === 'a' ? '' : `-${SET}`
/** lossless-claw 1.0 with its defaults slides and fails turns (#43): a tail it can keep (as cache.mjs). */
const LOSSLESS_CLAW_CONFIG = { freshTailCount: 32, freshTailMaxTokens: 14_000 }
/** The plugin config of each lcm-native variant. */
const LCM_VARIANTS = /** @type {Record<string, Record<string, unknown>>} */ ({
  'lcm-native-recall': { ...LCM_CONFIG, autoRecall: true },
  'lcm-native': { ...LCM_CONFIG, autoRecall: false },
})
const INTERNAL_CONTEXT = '<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>'
const BLOCK = /<recalled\b[^>]*>[\s\S]*?<\/recalled>/g
/** An excerpt the block says a newer one replaced. */
const SUPERSEDED = /<excerpt\b[^>]*\bsuperseded-by=[^>]*>[\s\S]*?<\/excerpt>/g

/**
 * @typedef {{ seq: number, path: string, body: any, reply?: { kind: string } }} Logged
 * @typedef {{ engine: string, turns: number, set?: string, window: number, config: unknown, startedAt: string,
 *   finishedAt: string, commit: string, dirty: string, requests: Logged[], turnStart: number[],
 *   failed: { turn: number, code: number | null, stderr: string }[], overflows: unknown[], dir: string }} Saved
 */

/** What `packPlugin` packed (set when it does). */
let packed = { commit: '', dirty: '' }

/** The checkout that was packed: its commit and whether src/ or plugin/ differ from it. */
function provenance() {
  const git = (/** @type {string[]} */ args) => {
    try {
      return execFileSync('git', ['-C', ROOT, ...args], { encoding: 'utf8' }).trim()
    } catch {
      return ''
    }
  }
  const addon = readdirSync(ROOT).find((f) => /^lcm-native\..*\.node$/.test(f))
  const built = addon ? ` (addon built ${statSync(join(ROOT, addon)).mtime.toISOString()})` : ''
  return { commit: git(['rev-parse', '--short', 'HEAD']) + built, dirty: git(['diff', '--shortstat', 'HEAD', '--', 'src', 'plugin']) }
}

/**
 * One engine through the whole session.
 * @param {string} engine @param {import('../__test__/openclaw/harness.mjs').Host} host @param {string} tgz
 * @param {import('./recall-session.mjs').Turn[]} turns @returns {Promise<Saved>}
 */
async function runEngine(engine, host, tgz, turns) {
  const startedAt = new Date().toISOString()
  const run = await makeRunDir(host)
  const fake = await startFakeModel({ logFile: join(run.dir, 'model.jsonl'), contextWindow: WINDOW, replyTokens: 150, summaries: 'opaque', says: (text) => says(text, FACT_SET) })
  /** @type {unknown} */
  let config = null
  if (engine === 'lossless-claw') {
    const lc = losslessClawTarball()
    if (!lc) throw new Error('lossless-claw tarball not found (../shared/vendor/lossless-claw or LCM_LOSSLESS_CLAW_TGZ)')
    await installLosslessClaw(run, lc)
    config = LOSSLESS_CLAW_CONFIG
    writeConfig(run, { port: fake.port, slot: 'lossless-claw', pluginId: 'lossless-claw', pluginConfig: LOSSLESS_CLAW_CONFIG, contextWindow: WINDOW })
  } else if (engine in LCM_VARIANTS) {
    await installPlugin(run, tgz)
    config = LCM_VARIANTS[engine]
    writeConfig(run, { port: fake.port, slot: 'lcm-native', pluginConfig: LCM_VARIANTS[engine], contextWindow: WINDOW })
  } else if (engine === 'legacy') {
    writeConfig(run, { port: fake.port, slot: 'legacy', pluginId: 'none', enabled: false, contextWindow: WINDOW })
    // As in cache.mjs: the safeguard compaction's quality audit fails every fake summary.
    const c = JSON.parse(readFileSync(run.configPath, 'utf8'))
    c.agents.defaults.compaction = { qualityGuard: { enabled: false } }
    writeFileSync(run.configPath, JSON.stringify(c, null, 2))
  } else throw new Error(`unknown engine ${engine}`)
  writeNotes(run.work, TURNS)
  const gw = await startGateway(run)
  const turnStart = [0]
  /** @type {Saved['failed']} */
  const failed = []
  try {
    for (let t = 1; t <= TURNS; t++) {
      turnStart[t] = fake.requests().length
      const r = await turn(run, { sessionId: 'recall', message: turns[t].message })
      if (r.code !== 0) failed.push({ turn: t, code: r.code, stderr: r.stderr.slice(-400) })
      await settle(fake)
      process.stdout.write(`\r${engine}: turn ${t}/${TURNS}${failed.length ? ` (${failed.length} failed)` : ''}   `)
    }
    turnStart[TURNS + 1] = fake.requests().length
    process.stdout.write('\n')
  } finally {
    await stopGateway(gw)
    await fake.close()
  }
  const requests = fake.requests().map((r) => ({ seq: r.seq, path: r.path, body: r.body, reply: r.reply && { kind: r.reply.kind } }))
  /** @type {Saved} */
  const saved = { engine, turns: TURNS, set: SET, window: WINDOW, config, startedAt, finishedAt: new Date().toISOString(), ...(engine in LCM_VARIANTS ? packed : { commit: '', dirty: '' }), requests, turnStart, failed, overflows: fake.overflows(), dir: run.dir }
  mkdirSync(SAVE, { recursive: true })
  writeFileSync(join(SAVE, `${engine}-${TURNS}${SUFFIX}.json`), JSON.stringify(saved))
  if (!process.argv.includes('--keep')) cleanUp(run)
  return saved
}

/** The user's text of a request's current turn (as the fake model finds it; a recalled block is not it). @param {any} body */
function currentUserText(body) {
  const messages = Array.isArray(body?.messages) ? body.messages : []
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i]
    const text = contentText(m.content)
    if (m.role === 'user' && !text.includes(INTERNAL_CONTEXT) && !text.trimStart().startsWith('<recalled')) return cleanUserText(text)
  }
  return ''
}

const isAgent = (/** @type {Logged} */ r) => Array.isArray(r.body?.tools) && r.body.tools.length > 0 && Array.isArray(r.body?.messages)

/**
 * The request the model answered turn `t` from: the turn's last agent request whose current
 * user message is the turn's (not the host's own runs, such as its memory flush).
 * @param {Saved} s @param {number} t @param {string} message
 */
function answered(s, t, message) {
  const reqs = s.requests.slice(s.turnStart[t], s.turnStart[t + 1] ?? s.requests.length).filter(isAgent)
  const head = message.slice(0, 60)
  const found = [...reqs].reverse().find((r) => currentUserText(r.body).startsWith(head))
  if (!found && reqs.length) unmatched.push({ engine: s.engine, t })
  return found ?? null
}
/** Turns whose agent requests did not carry the turn's message last (none so far). @type {{ engine: string, t: number }[]} */
const unmatched = []

/** Recalled blocks of a request: where each sits. @param {any} body */
function blocksOf(body) {
  const messages = Array.isArray(body?.messages) ? body.messages : []
  /** @type {{ text: string, message: number, role: string, fromEnd: number }[]} */
  const out = []
  messages.forEach((/** @type {any} */ m, /** @type {number} */ i) => {
    for (const b of contentText(m.content).match(BLOCK) ?? []) out.push({ text: b, message: i, role: m.role, fromEnd: messages.length - 1 - i })
  })
  return out
}

const tokens = (/** @type {any} */ body) => Math.ceil(requestText(body).text.length / 4)
const mean = (/** @type {number[]} */ xs) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : NaN)
const fmt = (/** @type {number} */ n) => (Number.isFinite(n) ? Math.round(n).toLocaleString('en-US') : '—')

/**
 * The figures of one engine's run.
 * @param {Saved} s @param {import('./recall-session.mjs').Turn[]} turns @param {Saved | undefined} off recall off
 */
function analyze(s, turns, off) {
  const facts = sessionFacts(turns, FACT_SET)
  /** @type {any[]} */
  const perTurn = []
  for (let t = 1; t <= TURNS; t++) {
    const x = turns[t]
    const r = answered(s, t, x.message)
    const ro = off ? answered(off, t, x.message) : null
    const text = r ? JSON.stringify(r.body.messages) : ''
    const blocks = r ? blocksOf(r.body) : []
    const blockText = blocks.map((b) => b.text).join('\n')
    const withoutSuperseded = r ? r.body.messages.map((/** @type {any} */ m) => contentText(m.content).replace(SUPERSEDED, ' ')).join('\n') : ''
    const asked = x.facts.map((id) => {
      const f = /** @type {import('./recall-session.mjs').Fact} */ (facts.find((y) => y.id === id))
      const current = f.update ? f.update.values : f.values
      const visible = r !== null && current.every((v) => text.includes(v))
      const stale = f.update ? f.values.some((v) => text.includes(v)) : false
      // Visible, but only inside excerpts the block marks as replaced by a newer one.
      const markedOld = visible && !current.every((v) => withoutSuperseded.includes(v))
      return { id, visible, staleOnly: !visible && stale, staleToo: visible && stale, markedOld, inBlock: current.every((v) => blockText.includes(v)) }
    })
    perTurn.push({
      t, kind: x.kind, answered: r?.seq ?? null, tokens: r ? tokens(r.body) : null,
      added: r && ro ? tokens(r.body) - tokens(ro.body) : null,
      blocks: blocks.map((b) => ({ message: b.message, role: b.role, fromEnd: b.fromEnd, tokens: Math.ceil(b.text.length / 4) })),
      blockTexts: blocks.map((b) => b.text),
      facts: x.kind === 'question' ? asked : undefined,
    })
  }
  // The turn's own block: one the previous turn's answered request did not hold (the others
  // are earlier turns' blocks, kept where they were).
  perTurn.forEach((p, i) => {
    const before = new Set(i > 0 ? perTurn[i - 1].blockTexts : [])
    const own = p.blockTexts.filter((/** @type {string} */ b) => !before.has(b))
    p.newBlockTokens = own.reduce((/** @type {number} */ n, /** @type {string} */ b) => n + Math.ceil(b.length / 4), 0)
    p.keptBlockTokens = p.blocks.reduce((/** @type {number} */ n, /** @type {{ tokens: number }} */ b) => n + b.tokens, 0) - p.newBlockTokens
    p.newBlock = own.length > 0
    const ownText = own.join('\n')
    for (const x of p.facts ?? []) {
      const f = facts.find((y) => y.id === x.id)
      const current = f?.update ? f.update.values : (f?.values ?? [])
      x.inOwnBlock = current.every((v) => ownText.includes(v))
    }
  })
  // A block repeated unchanged: the first agent request of the next turn holds it word for word.
  for (const p of perTurn) {
    if (p.blockTexts.length === 0) continue
    const next = s.requests.slice(s.turnStart[p.t + 1] ?? s.requests.length, s.turnStart[p.t + 2] ?? s.requests.length).find(isAgent)
    const nextText = next ? next.body.messages.map((/** @type {any} */ m) => contentText(m.content)).join('\n') : null
    p.nextHasBlock = nextText === null ? null : p.blockTexts.map((/** @type {string} */ b) => nextText.includes(b))
  }
  const q = perTurn.flatMap((p) => p.facts ?? [])
  const updatedIds = facts.filter((f) => f.update).map((f) => f.id)
  const noOverlap = facts.filter((f) => sharedWords(f).length === 0).map((f) => f.id)
  const entries = ledger(s.requests)
  const tot = totals(entries)
  // Contamination check: a value in the host's own part of the first request (its system
  // prompt and tools), which would count as visible whatever the engine does.
  const first = s.requests.find(isAgent)
  const hostText = first ? JSON.stringify([first.body.tools, first.body.messages.filter((/** @type {any} */ m) => m.role === 'system')]) : ''
  const preexisting = facts.flatMap((f) => [...f.values, ...(f.update?.values ?? [])]).filter((v) => hostText.includes(v))
  const by = (/** @type {(p: any) => boolean} */ f) => perTurn.filter((p) => f(p) && p.added !== null).map((p) => p.added)
  return {
    engine: s.engine, turns: s.turns, commit: s.commit, dirty: s.dirty, startedAt: s.startedAt, config: s.config,
    facts: q.length, visible: q.filter((x) => x.visible).length, staleOnly: q.filter((x) => x.staleOnly).length,
    staleToo: q.filter((x) => x.staleToo).length,
    markedOld: q.filter((x) => x.markedOld).map((x) => x.id),
    updatedVisible: q.filter((x) => updatedIds.includes(x.id) && x.visible).length, updated: updatedIds.length,
    noOverlapVisible: q.filter((x) => noOverlap.includes(x.id) && x.visible).length, noOverlap: noOverlap.length,
    visibleInBlock: q.filter((x) => x.visible && x.inBlock).length,
    missed: q.filter((x) => !x.visible).map((x) => x.id),
    abstentions: perTurn.filter((p) => p.kind === 'abstain').map((p) => ({ t: p.t, added: p.added, blocks: p.blocks.length })),
    meanTokens: { question: mean(perTurn.filter((p) => p.kind === 'question' && p.tokens !== null).map((p) => p.tokens)), other: mean(perTurn.filter((p) => p.kind !== 'question' && p.kind !== 'abstain' && p.tokens !== null).map((p) => p.tokens)) },
    added: off ? { question: mean(by((p) => p.kind === 'question')), abstain: mean(by((p) => p.kind === 'abstain')), other: mean(by((p) => p.kind !== 'question' && p.kind !== 'abstain')), chat: mean(by((p) => p.kind === 'chat')) } : null,
    turnsWithBlock: perTurn.filter((p) => p.blocks.length > 0).length,
    /** Turns that got a block of their own, and its mean tokens, by kind of turn. */
    ownBlocks: Object.fromEntries(
      [['question', (/** @type {any} */ p) => p.kind === 'question'], ['abstain', (/** @type {any} */ p) => p.kind === 'abstain'], ['small talk', (/** @type {any} */ p) => p.kind === 'chat'], ['other', (/** @type {any} */ p) => !['question', 'abstain', 'chat'].includes(p.kind)]].map(([name, f]) => {
        const xs = perTurn.filter(/** @type {any} */ (f))
        return [name, { turns: xs.length, withBlock: xs.filter((p) => p.newBlock).length, meanTokens: mean(xs.map((p) => p.newBlockTokens)) }]
      }),
    ),
    keptBlockTokensAtEnd: perTurn[perTurn.length - 1]?.keptBlockTokens ?? 0,
    maxBlockTokensInARequest: Math.max(0, ...perTurn.map((p) => p.blocks.reduce((/** @type {number} */ n, /** @type {{ tokens: number }} */ b) => n + b.tokens, 0))),
    visibleInOwnBlock: q.filter((x) => x.visible && x.inOwnBlock).length,
    effective: tot.effective, sent: tot.sent, cacheable: tot.cacheable, summaryCalls: tot.summaryCalls, summaryInput: tot.summaryInput,
    earlyBreaks: earlyBreaks(entries).map((e) => e.seq), failed: s.failed, overflows: s.overflows.length, preexisting,
    perTurn: perTurn.map(({ blockTexts, ...p }) => p),
    blockSamples: perTurn.filter((p) => p.blockTexts.length).slice(0, 3).map((p) => ({ t: p.t, text: p.blockTexts[0].slice(0, 3000) })),
  }
}

async function main() {
  const turns = session(TURNS, FACT_SET)
  checkSession(turns, FACT_SET)
  /** @type {Record<string, Saved>} */
  const runs = {}
  const toRun = LOAD ? [] : ENGINES
  for (const engine of ENGINES) {
    if (!LOAD) continue
    const file = join(SAVE, `${engine}-${TURNS}${SUFFIX}.json`)
    if (existsSync(file)) runs[engine] = JSON.parse(readFileSync(file, 'utf8'))
    else console.log(`${engine}: no saved run ${file}`)
  }
  if (toRun.length) {
    const host = await ensureHost()
    const packDir = mkdtempSync(join(tmpdir(), 'lcm-pack-'))
    try {
      packed = provenance()
      const tgz = toRun.some((e) => e in LCM_VARIANTS) ? await packPlugin(ROOT, packDir) : ''
      for (const engine of toRun) {
        try {
          runs[engine] = await runEngine(engine, host, tgz, turns)
        } catch (e) {
          console.log(`\n${engine}: the run failed: ${/** @type {Error} */ (e).stack ?? e}`)
        }
      }
    } finally {
      rmSync(packDir, { recursive: true, force: true })
    }
  }
  // Recall off for the comparison: this invocation's, else a saved one.
  const offFile = join(SAVE, `lcm-native-${TURNS}${SUFFIX}.json`)
  const off = runs['lcm-native'] ?? (existsSync(offFile) ? JSON.parse(readFileSync(offFile, 'utf8')) : undefined)
  const results = Object.values(runs).map((s) => analyze(s, turns, s.engine === 'lcm-native' ? undefined : off))
  const offResult = results.find((r) => r.engine === 'lcm-native') ?? (off ? analyze(off, turns, undefined) : undefined)

  const facts = sessionFacts(turns, FACT_SET)
  console.log(`\n${TURNS} turns, fact set ${SET}, ${WINDOW / 1000}k window, summaries that keep none of their source; ${facts.length} facts (${facts.filter((f) => f.update).length} changed later, ${facts.filter((f) => sharedWords(f).length === 0).length} asked with no content word of their plant), ${turns.filter((x) => x?.kind === 'abstain').length} abstention questions; tokens = characters / 4`)
  console.log('\n| engine | facts visible when asked | stale-only | changed facts, current visible | no-shared-word questions visible | abstentions with a recalled block | tokens added: question turns | other turns | small talk | effective tokens | × lcm-native recall off | early breaks | failed turns |')
  console.log('|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|')
  for (const r of results) {
    const rel = offResult && r.engine !== 'lcm-native' ? `${(r.effective / offResult.effective).toFixed(3)}×` : '—'
    const ab = r.engine.startsWith('lcm-native') ? `${r.abstentions.filter((a) => a.blocks > 0).length} / ${r.abstentions.length}` : '—'
    const add = (/** @type {number | undefined} */ x) => (r.added && r.engine.startsWith('lcm-native') ? fmt(x ?? NaN) : '—')
    console.log(`| ${r.engine} | **${r.visible} / ${r.facts}** | ${r.staleOnly} | ${r.updatedVisible} / ${r.updated} | ${r.noOverlapVisible} / ${r.noOverlap} | ${ab} | ${add(r.added?.question)} | ${add(r.added?.other)} | ${add(r.added?.chat)} | ${fmt(r.effective)} | ${rel} | ${r.earlyBreaks.length} | ${r.failed.length} |`)
  }
  const withBlocks = results.filter((r) => r.turnsWithBlock > 0)
  if (withBlocks.length) {
    console.log("\nRecalled blocks: turns that got one of their own / turns of that kind (mean tokens of the turn's own block, 0 where none), and the blocks of earlier turns still sent")
    console.log('\n| engine | question turns | abstention turns | small talk | other turns | facts in the turn\'s own block | most block tokens in one request | kept blocks at the last turn |')
    console.log('|---|--:|--:|--:|--:|--:|--:|--:|')
    for (const r of withBlocks) {
      const c = (/** @type {string} */ k) => `${r.ownBlocks[k].withBlock} / ${r.ownBlocks[k].turns} (${fmt(r.ownBlocks[k].meanTokens)})`
      console.log(`| ${r.engine} | ${c('question')} | ${c('abstain')} | ${c('small talk')} | ${c('other')} | ${r.visibleInOwnBlock} / ${r.facts} | ${fmt(r.maxBlockTokensInARequest)} | ${fmt(r.keptBlockTokensAtEnd)} |`)
    }
  }
  console.log('\nPer fact (✓ visible, s stale-only, · not there; question turn):')
  console.log(`| fact | kind | turn | ${results.map((r) => r.engine).join(' | ')} |`)
  console.log(`|---|---|--:|${results.map(() => ':-:').join('|')}|`)
  for (const f of facts) {
    const t = turns.find((x) => x?.kind === 'question' && x.facts.includes(f.id))?.t
    const cells = results.map((r) => {
      const x = r.perTurn.find((p) => p.t === t)?.facts?.find((/** @type {any} */ y) => y.id === f.id)
      return x?.visible ? (x.markedOld ? '✓ (marked superseded)' : '✓') : x?.staleOnly ? 's' : '·'
    })
    console.log(`| ${f.id}${sharedWords(f).length === 0 ? " (no shared word)" : ""} | ${f.kind} | ${t} | ${cells.join(' | ')} |`)
  }
  for (const r of results) {
    console.log(`\n${r.engine}: packed ${r.commit}${r.dirty ? ` (+ ${r.dirty})` : ''}, started ${r.startedAt}; mean request tokens ${fmt(r.meanTokens.question)} on question turns, ${fmt(r.meanTokens.other)} on others; ${r.sent.toLocaleString('en-US')} input tokens sent, ${(r.cacheable * 100).toFixed(1)} % cacheable, summarizer ${r.summaryInput.toLocaleString('en-US')} tokens in ${r.summaryCalls} calls; requests over the window ${r.overflows}; turns with a recalled block ${r.turnsWithBlock}${r.visible ? `, facts visible inside one ${r.visibleInBlock}` : ''}`)
    if (r.markedOld.length) console.log(`  visible only in excerpts marked superseded-by a newer one: ${r.markedOld.join(', ')}`)
    if (r.missed.length) console.log(`  missed: ${r.missed.map((/** @type {number} */ id) => `${id} (${facts.find((f) => f.id === id)?.question})`).join('; ')}`)
    if (r.added) console.log(`  abstentions: ${r.abstentions.map((a) => `turn ${a.t} "${FACT_SET.ABSTENTIONS[r.abstentions.indexOf(a)] ?? ''}": ${a.added === null ? '—' : `${a.added >= 0 ? '+' : ''}${a.added}`} tokens, ${a.blocks} block(s)`).join('; ')}; added on abstention turns ${fmt(r.added.abstain)} on average`)
    if (r.preexisting.length) console.log(`  WARNING: values in the first request before any plant: ${r.preexisting.join(', ')}`)
    for (const f of r.failed) console.log(`  turn ${f.turn} failed (${f.code}): ${f.stderr.replace(/\s+/g, ' ')}`)
    if (process.argv.includes('--blocks')) {
      for (const p of r.perTurn.filter((/** @type {any} */ p) => p.blocks.length)) {
        console.log(`  turn ${p.t} (${p.kind}): ${p.blocks.map((/** @type {any} */ b) => `${b.tokens} tokens in message ${b.message} (${b.role}, ${b.fromEnd} from the end)`).join(', ')}; next turn's first request holds it: ${JSON.stringify(p.nextHasBlock)}; added ${p.added}`)
      }
    }
  }
  if (unmatched.length) console.log(`\nWARNING: turns with agent requests but none ending with the turn's message: ${JSON.stringify(unmatched)}`)
  if (JSON_OUT) {
    writeFileSync(JSON_OUT, JSON.stringify({ turns: TURNS, set: SET, window: WINDOW, results }, null, 2))
    console.log(`\nwrote ${JSON_OUT}`)
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  main().catch((err) => {
    console.error(err)
    process.exit(1)
  })
}
