// @ts-check
// The session of bench/recall.mjs: facts planted early, some changed later, each asked about
// once near the end in other words, with pasted logs, file reads and small talk around them.
// Deterministic; the same generator for every length (everything placed by fraction of the
// session). LongMemEval's kinds: facts the user stated, facts the assistant stated, preferences,
// knowledge updates (the latest value wins), temporal questions, and abstention (the answer is
// not in the history).
//
//   turns 1 … 40 %     24 facts planted (25 plant turns: one temporal question needs two)
//   45 % … 70 %        6 of them changed ("update: …")
//   after 75 %         each fact asked about once (two to a turn when the window has too few
//                      turns), 4 abstention questions, small talk
//   every 10th turn    a file read with the `read` tool (turn 5, 15, …), as bench/cache.mjs
//   other turns        pasted service logs (19 in every 40) or short questions, as cache.mjs
//
// Three fact sets of that shape: A (FACTS, ABSTENTIONS, CHAT here; the default of every function
// that takes a set), B (bench/recall-facts-b.mjs, held out: written after recall at assembly
// was, never tuned on) and C (bench/recall-facts-c.mjs, a second held-out set for the semantic
// bridge, never tuned on). `factSet('a' | 'b' | 'c')` gives any of them.

import { mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

import { pastedLog } from '../__test__/openclaw/e2e-field.mjs'
import * as B from './recall-facts-b.mjs'
import * as C from './recall-facts-c.mjs'

/**
 * @typedef {{ id: number, kind: string, plants: string[], values: string[], says?: string,
 *   update?: { text: string, values: string[] }, question: string }} Fact
 * `plants`: the sentences that plant it (the user's; for an assistant-stated fact the user's
 * ask, and `says` is the assistant's statement); `values`: what must be in a request for the
 * fact to count as visible (all of them); with `update`, its values are the current ones and
 * `values` the stale ones.
 */

/**
 * @typedef {{ FACTS: Fact[], ABSTENTIONS: string[], CHAT: string[], PLANT_ORDER: number[][], ASK_ORDER: number[],
 *   LEADS: string[], CORRECTION: string, LOG_CORRECTION: string }} FactSet
 * A session's facts and wording: `PLANT_ORDER` (fact id, plant index) the order plants are made
 * in, `ASK_ORDER` the order questions are asked in; `CHAT` small talk (2 and 3 among the
 * questions, 2 a follow-up about the previous answer); `LEADS` what plant turns start with, `CORRECTION` what a short turn that changes a
 * fact starts with, `LOG_CORRECTION` what the change starts with after a pasted log's first line.
 */

/** @type {Fact[]} */
export const FACTS = [
  { id: 1, kind: 'user fact (ticket)', plants: ['the flaky checkout test is tracked as INC-40718.'], values: ['INC-40718'], question: 'What was the incident number for that checkout flake again?' },
  {
    id: 2, kind: 'update (host:port)', plants: ['the staging Postgres listens on pg-stage-2.internal:6432, not the default port.'], values: ['pg-stage-2.internal:6432'],
    update: { text: "update: the staging database moved to pg-stage-4.internal:5433 after last night's migration.", values: ['pg-stage-4.internal:5433'] },
    question: 'Where do I point psql for the pre-prod DB now?',
  },
  { id: 3, kind: 'user fact (commit)', plants: ['the last good build before the regression was commit 3f9a1c7e.'], values: ['3f9a1c7e'], question: 'Which revision should I start bisecting from?' },
  {
    id: 4, kind: 'update (person, role)', plants: ['Priya Raman now leads the payments team.'], values: ['Priya Raman'],
    update: { text: 'update: Priya moved over to fraud, and Tomasz Nowak leads payments now.', values: ['Tomasz Nowak'] },
    question: 'Who runs billing these days?',
  },
  { id: 5, kind: 'user fact (number, unit)', plants: ['each ingest worker gets 3.5 GiB of memory in the helm chart.'], values: ['3.5 GiB'], question: 'How much RAM are the ingest workers allowed?' },
  { id: 6, kind: 'preference', plants: ['for code review comments I prefer terse bullet points over long paragraphs.'], values: ['terse bullet points'], question: 'Remind me how I like feedback on pull requests formatted?' },
  { id: 7, kind: 'decision', plants: ['we decided to ship the search rewrite behind a feature flag named search_v2_rollout.'], values: ['search_v2_rollout'], question: "What's the toggle for the new search called?" },
  {
    id: 8, kind: 'update (date)', plants: ['the SOC 2 audit fieldwork starts on 2027-02-15.'], values: ['2027-02-15'],
    update: { text: 'update: the auditors pushed fieldwork back, it now starts 2027-03-08.', values: ['2027-03-08'] },
    question: 'When do the compliance people show up?',
  },
  { id: 9, kind: 'user fact (ticket)', plants: ['the request to raise our API rate limit is filed as OPS-7753.'], values: ['OPS-7753'], question: 'Did I give you a reference for the throttling increase ask?' },
  { id: 10, kind: 'user fact (host:port)', plants: ['Grafana for the EU cluster is at metrics-eu.corp.example:3000.'], values: ['metrics-eu.corp.example:3000'], question: "What's the dashboard address for Europe?" },
  {
    id: 11, kind: 'update (number, unit)', plants: ['our p99 latency budget for the checkout API is 350 ms.'], values: ['350 ms'],
    update: { text: 'update: product tightened the checkout p99 budget to 250 ms.', values: ['250 ms'] },
    question: 'What tail-latency target do we have to hit on checkout?',
  },
  {
    id: 12, kind: 'assistant fact (name)', plants: ["can you suggest a short name for the new Redis cluster we're adding?"], values: ['kestrel-cache'],
    says: 'How about kestrel-cache? Short, and easy to grep for.', question: 'What was that bird name you came up with for the cache?',
  },
  {
    id: 13, kind: 'assistant fact (number, unit)', plants: ['what retry policy would you use for the webhook sender?'], values: ['800 ms'],
    says: "I'd do 5 retries with exponential backoff starting at 800 ms, capped at 30 s.", question: 'Remind me what backoff you recommended for webhooks?',
  },
  { id: 14, kind: 'user fact (person, role)', plants: ['our contact at the CDN vendor is Marguerite Okafor, their solutions engineer.'], values: ['Marguerite Okafor'], question: "Who's our person at the edge provider?" },
  { id: 15, kind: 'preference', plants: ["when you give me commands, write them for the fish shell, I don't use bash."], values: ['fish'], question: 'What terminal flavour should your snippets target?' },
  {
    id: 16, kind: 'update (decision)', plants: ['decision: the mobile app will use GraphQL for its new endpoints.'], values: ['GraphQL'],
    update: { text: 'update: we reversed the GraphQL call, the new mobile endpoints moved to REST with JSON:API.', values: ['JSON:API'] },
    question: 'So what API style did we settle on for the phone app?',
  },
  { id: 17, kind: 'user fact (date)', plants: ['the datacenter move in Frankfurt is scheduled for 2027-01-23.'], values: ['2027-01-23'], question: 'When are we relocating the German racks?' },
  { id: 18, kind: 'user fact (ticket)', plants: ['security flagged the old TLS ciphers in SEC-1188.'], values: ['SEC-1188'], question: 'Which ticket was the crypto finding?' },
  {
    id: 19, kind: 'update (number, unit)', plants: ['the nightly backup is about 1.8 TB compressed.'], values: ['1.8 TB'],
    update: { text: 'update: after the cleanup the nightly backup is down to 740 GB.', values: ['740 GB'] },
    question: 'How big are the snapshots we take every night now?',
  },
  {
    id: 20, kind: 'temporal (which came first)', plants: ['today we turned on the new WAF rules.', 'this morning we rotated all the service account keys.'], values: ['WAF rules', 'service account keys'],
    question: 'Which happened first, the firewall change or the credential rotation?',
  },
  {
    id: 21, kind: 'temporal (on the day of)', plants: ['this is from the day of the big Kafka outage; for the postmortem, the consumer group that lagged was billing-events-v3.'], values: ['billing-events-v3'],
    question: 'On the day the message broker fell over, which consumer group was behind?',
  },
  { id: 22, kind: 'user fact (person, role)', plants: ['Dana Whitfield is the release manager for the 4.x line.'], values: ['Dana Whitfield'], question: 'Who do I need to ask before cutting a 4.x build?' },
  { id: 23, kind: 'user fact (host:port)', plants: ['the feature-flag service runs on flags.internal:7070.'], values: ['flags.internal:7070'], question: 'What host and port do the toggles live on?' },
  { id: 24, kind: 'user fact (commit)', plants: ['the hotfix for the currency rounding bug is commit b7e04d2.'], values: ['b7e04d2'], question: 'Which change fixed the cents being off?' },
]

/** Questions whose answer is nowhere in the history. */
export const ABSTENTIONS = [
  "What's the on-call phone number for the network team?",
  'Which S3 bucket do the audit logs end up in?',
  'What did Priya say about the hiring freeze?',
  'Did I ever tell you the license key for the PDF library?',
]

/** Turns that ask nothing about the past (the last one a follow-up about the previous answer). */
export const CHAT = ['Thanks, that helps.', 'Ok, continue.', 'And what would you check after that?', 'Sounds good, go on.', 'Makes sense, thanks!']

/** The order plants are made in (fact id, plant index). */
const PLANT_ORDER = [[1, 0], [2, 0], [3, 0], [20, 0], [4, 0], [5, 0], [6, 0], [7, 0], [8, 0], [9, 0], [10, 0], [21, 0], [11, 0], [12, 0], [13, 0], [14, 0], [15, 0], [16, 0], [17, 0], [18, 0], [20, 1], [19, 0], [22, 0], [23, 0], [24, 0]]
/** The order questions are asked in (not the plants'). */
const ASK_ORDER = [17, 4, 9, 22, 1, 12, 19, 6, 14, 2, 24, 11, 7, 20, 15, 3, 10, 16, 21, 13, 5, 18, 8, 23]

const LEADS = ['Side note, so it is written down somewhere: ', 'Before I forget, one thing for later on: ', 'Not urgent, but worth keeping in mind here: ']
const CORRECTION = 'One correction to something from earlier. '

/** Set A. @type {FactSet} */
export const A = { FACTS, ABSTENTIONS, CHAT, PLANT_ORDER, ASK_ORDER, LEADS, CORRECTION, LOG_CORRECTION: 'One correction first, ' }
/** The set named `name` ('a', 'b' or 'c'). @param {string} name @returns {FactSet} */
export function factSet(name) {
  if (name === 'a') return A
  if (name === 'b') return B
  if (name === 'c') return C
  throw new Error(`unknown fact set ${name} (a, b or c)`)
}

/** The workspace file the tool turn `t` reads (about 1k tokens). @param {number} t */
export const notesFile = (t) => `notes/run-${t}.md`
/** @param {number} t */
export const notesText = (t) => pastedLog(500 + t, 1_000, `Notes of run ${t}.`)

/** Writes the files the tool turns read into a run's workspace. @param {string} work @param {number} turns */
export function writeNotes(work, turns) {
  mkdirSync(join(work, 'notes'), { recursive: true })
  for (let t = 5; t <= turns; t += 10) writeFileSync(join(work, notesFile(t)), notesText(t))
}

const isTool = (/** @type {number} */ t) => t % 10 === 5
const isLog = (/** @type {number} */ t) => (t * 19) % 40 < 19
const logTokens = (/** @type {number} */ t) => 1_400 + ((t * 2_654_435_761) % 4_601)
/** `n` of `slots`, evenly spread. @template T @param {T[]} slots @param {number} n @returns {T[]} */
const spread = (slots, n) => Array.from({ length: n }, (_, i) => slots[Math.floor((i * slots.length) / n)])
const lowerFirst = (/** @type {string} */ s) => s[0].toLowerCase() + s.slice(1)
const capital = (/** @type {string} */ s) => s[0].toUpperCase() + s.slice(1)

/**
 * @typedef {{ t: number, kind: 'plant' | 'update' | 'question' | 'abstain' | 'chat' | 'log' | 'filler' | 'tool',
 *   message: string, facts: number[] }} Turn
 * `facts`: the facts a question turn asks about, a plant or update turn plants.
 */

/**
 * The session of `turns` turns (index 0 unused) with the facts of `set`.
 * @param {number} turns @param {FactSet} [set] @returns {Turn[]}
 */
export function session(turns, set = A) {
  const { FACTS, ABSTENTIONS, CHAT, PLANT_ORDER, ASK_ORDER, LEADS, CORRECTION, LOG_CORRECTION } = set
  /** @type {Turn[]} */
  const out = [/** @type {any} */ (null)]
  const free = (/** @type {number} */ a, /** @type {number} */ b) => {
    const xs = []
    for (let t = Math.max(1, a); t <= b; t++) if (!isTool(t)) xs.push(t)
    return xs
  }
  /** @type {Map<number, Turn>} */
  const placed = new Map()
  // Plants in the first 40 % (a session too short for all of them, a smoke run, plants the
  // facts whose plants fit, in order).
  const plantSlots = free(1, Math.floor(turns * 0.4))
  const updateSlots = free(Math.ceil(turns * 0.45), Math.floor(turns * 0.7))
  /** @type {Set<number>} */
  const used = new Set()
  let plantCount = 0
  let updateCount = 0
  for (const [id] of PLANT_ORDER) {
    const f = /** @type {Fact} */ (FACTS.find((x) => x.id === id))
    if (used.has(id) || plantCount + f.plants.length > plantSlots.length || (f.update && updateCount >= updateSlots.length)) continue
    used.add(id)
    plantCount += f.plants.length
    if (f.update) updateCount++
  }
  const plantOrder = PLANT_ORDER.filter(([id]) => used.has(id))
  const plantTurns = spread(plantSlots, plantOrder.length)
  plantOrder.forEach(([id, k], i) => {
    const t = plantTurns[i]
    const f = /** @type {Fact} */ (FACTS.find((x) => x.id === id))
    const text = f.plants[k]
    let message
    if (f.says) message = `${LEADS[i % LEADS.length]}${text}`
    else if (isLog(t)) message = pastedLog(t, logTokens(t), `Also, unrelated: ${text}`)
    else message = `${LEADS[i % LEADS.length]}${text} Anyway, what should we look at next for run ${t - 1}?`
    placed.set(t, { t, kind: 'plant', message, facts: [id] })
  })
  // Updates between 45 % and 70 %.
  const updated = FACTS.filter((f) => f.update && used.has(f.id))
  const updateTurns = spread(updateSlots, updated.length)
  updated.forEach((f, i) => {
    const t = updateTurns[i]
    const text = /** @type {NonNullable<Fact['update']>} */ (f.update).text
    const message = isLog(t) ? pastedLog(t, logTokens(t), `${LOG_CORRECTION}${text}`) : `${CORRECTION}${capital(text)}`
    placed.set(t, { t, kind: 'update', message, facts: [f.id] })
  })
  // Questions after 75 %: fact groups, abstentions and small talk, the rest filler.
  const window = free(Math.floor(turns * 0.75) + 1, turns)
  const asks = ASK_ORDER.filter((id) => used.has(id))
  const chatInWindow = window.length >= 10 ? 2 : 0
  const abstentions = ABSTENTIONS.slice(0, window.length >= 8 ? ABSTENTIONS.length : 1)
  const groups = Math.min(asks.length, window.length - abstentions.length - chatInWindow)
  if (groups < 1) throw new Error(`${turns} turns are too few for the questions`)
  const perGroup = Math.ceil(asks.length / groups)
  /** @type {{ kind: 'question' | 'abstain' | 'chat', message: string, facts: number[] }[]} */
  const items = []
  let a = 0
  let c = 0
  for (let g = 0; g * perGroup < asks.length; g++) {
    const ids = asks.slice(g * perGroup, (g + 1) * perGroup)
    const qs = ids.map((id) => /** @type {Fact} */ (FACTS.find((f) => f.id === id)).question)
    items.push({ kind: 'question', message: qs.map((q, i) => (i === 0 ? q : `Also, ${lowerFirst(q)}`)).join(' '), facts: ids })
    if (g % 3 === 1 && a < abstentions.length) items.push({ kind: 'abstain', message: abstentions[a++], facts: [] })
    if (g % 5 === 3 && c < chatInWindow) items.push({ kind: 'chat', message: CHAT[2 + c++], facts: [] })
  }
  while (a < abstentions.length) items.push({ kind: 'abstain', message: abstentions[a++], facts: [] })
  while (c < chatInWindow) items.push({ kind: 'chat', message: CHAT[2 + c++], facts: [] })
  const itemTurns = spread(window, items.length)
  items.forEach((it, i) => placed.set(itemTurns[i], { t: itemTurns[i], ...it }))

  // Every third short turn elsewhere is small talk.
  const smallTalk = [CHAT[0], CHAT[1], CHAT[3], CHAT[4]]
  let short = 0
  for (let t = 1; t <= turns; t++) {
    const p = placed.get(t)
    if (p) out.push(p)
    else if (isTool(t)) out.push({ t, kind: 'tool', message: `TOOLCALL read {"path": "${notesFile(t)}"}`, facts: [] })
    else if (isLog(t)) out.push({ t, kind: 'log', message: pastedLog(t, logTokens(t), ''), facts: [] })
    else if (short++ % 3 === 2) out.push({ t, kind: 'chat', message: smallTalk[Math.floor(short / 3) % smallTalk.length], facts: [] })
    else out.push({ t, kind: 'filler', message: `Question ${t}: what should we check next about the service behind run ${t - 1}?`, facts: [] })
  }
  return out
}

/** The facts a session of `set` plants (all of its FACTS unless it is too short). @param {Turn[]} s @param {FactSet} [set] */
export const sessionFacts = (s, set = A) => set.FACTS.filter((f) => s.slice(1).some((x) => x.kind === 'plant' && x.facts.includes(f.id)))

/** The assistant's own statement for a user text (the fake model's `says`). @param {string} userText @param {FactSet} [set] */
export function says(userText, set = A) {
  for (const f of set.FACTS) if (f.says && f.plants.some((p) => userText.includes(p))) return f.says
  return undefined
}

const STOP = new Set(
  ('a an the and or but of to in on at for with by from as is are was were be been being it its this that these those i me my we our us you your they them ' +
    'he she his her do did does done what which who whom whose where when why how so than then there here again now about over after before into out up down ' +
    'not no yes can could should would will shall may might must have has had just also any all some each every one two first last new old these days')
    .split(' '),
)
/** Content words of a text, a plural's s dropped. @param {string} text */
export function contentWords(text) {
  const words = text.toLowerCase().match(/[a-z0-9][a-z0-9.:_-]*[a-z0-9]|[a-z0-9]/g) ?? []
  return new Set(words.filter((w) => !STOP.has(w)).map((w) => (w.length > 3 && w.endsWith('s') && !w.endsWith('ss') ? w.slice(0, -1) : w)))
}

/** The content words a fact's question shares with the sentences that planted or changed it. @param {Fact} f */
export function sharedWords(f) {
  const planted = contentWords([...f.plants, f.says ?? '', f.update?.text ?? ''].join(' '))
  return [...contentWords(f.question)].filter((w) => planted.has(w))
}

/**
 * Checks the session is fair: no value is in the first 40 characters of a message (the fake
 * model's "ack" echoes them), in a question, a notes file, or any message but its plant and
 * update; every fact is planted before it is asked. Throws on a problem.
 * @param {Turn[]} s @param {FactSet} [set] the set `s` was made with
 */
export function checkSession(s, set = A) {
  const turns = s.length - 1
  const inSession = sessionFacts(s, set)
  const values = inSession.flatMap((f) => [...f.values, ...(f.update?.values ?? [])].map((v) => ({ f, v })))
  for (const { f, v } of values) {
    for (const x of s.slice(1)) {
      if (x.message.slice(0, 40).includes(v)) throw new Error(`turn ${x.t}: ${v} in the first 40 characters`)
      if (x.message.includes(v) && !((x.kind === 'plant' || x.kind === 'update') && x.facts.includes(f.id))) throw new Error(`turn ${x.t} (${x.kind}) holds ${v} of fact ${f.id}`)
    }
    for (let t = 5; t <= turns; t += 10) if (notesText(t).includes(v)) throw new Error(`notes of ${t} hold ${v}`)
  }
  for (const f of inSession) {
    const asked = s.slice(1).filter((x) => x.kind === 'question' && x.facts.includes(f.id))
    if (asked.length !== 1) throw new Error(`fact ${f.id} asked ${asked.length} times`)
    const plants = s.slice(1).filter((x) => x.kind === 'plant' && x.facts.includes(f.id))
    const upd = s.slice(1).filter((x) => x.kind === 'update' && x.facts.includes(f.id))
    if (plants.length !== f.plants.length || upd.length !== (f.update ? 1 : 0)) throw new Error(`fact ${f.id}: ${plants.length} plants, ${upd.length} updates`)
    if (Math.max(...[...plants, ...upd].map((x) => x.t)) >= asked[0].t) throw new Error(`fact ${f.id} asked before it is planted`)
  }
}
