// Seeded, bounded fuzz tests (the summarizer's results, ingest payloads). Each runs its cases in
// a child process, since a value the addon mishandles could end Node, and checks what the child
// printed: one JSON line per case. The seed is printed; replay a run with
//   LCM_FUZZ_SEED=<seed> npx vitest run __test__/fuzz.spec.ts
// or one case alone (in a fresh database) with
//   node --expose-gc __test__/child/fuzz-summarizer.cjs <seed> <cases> <case>
//   node __test__/child/fuzz-ingest.cjs <seed> <rounds> /tmp/x.db <round>
// LCM_FUZZ_SUMMARIZER_CASES and LCM_FUZZ_INGEST_ROUNDS change how many cases run.
import { spawnSync } from 'node:child_process'
import { join } from 'node:path'

import { describe, expect, it } from 'vitest'

import { ROOT, tempDir } from './helpers'

const SEED = Number(process.env.LCM_FUZZ_SEED ?? 20260217) >>> 0
const SUMMARIZER_CASES = Number(process.env.LCM_FUZZ_SUMMARIZER_CASES ?? 300)
const INGEST_ROUNDS = Number(process.env.LCM_FUZZ_INGEST_ROUNDS ?? 1000)

type Outcome = 'ok' | 'null' | 'auth' | 'rejected'

/** A line of fuzz-summarizer.cjs: one leaf pass or sweep. */
interface SummarizerCase {
  i: number
  op: 'leafPass' | 'compact'
  how: string
  value: string
  /** The outcome classes this case allows: 'ok', 'auth', or an error code. */
  expect: string[]
  outcome: Outcome
  isError?: boolean
  code?: string | null
  message?: string
  created?: number
  calls: number
  written: number
  contextSame: boolean
  ms: number
}

interface Verify {
  ok: boolean
  problems: string[]
}

interface SummarizerDone {
  done: true
  finalPass: string | null
  verify: Verify
  ms: number
}

/** One `ingest` call of a round of fuzz-ingest.cjs. */
interface IngestCall {
  session: string
  kind: 'valid' | 'malformed'
  mustFail: boolean
  mustPass: boolean
  mutations: string[]
  n: number | null
  outcome: 'ok' | 'rejected'
  isError?: boolean
  code?: string | null
  message?: string
  inserted?: number
  skipped?: number
  replaced?: number
}

interface IngestRound {
  i: number
  calls: IngestCall[]
  problems: string[]
  roundTrip: string[]
  ms: number
}

interface IngestDone {
  done: true
  cases: number
  verify: Verify
  ends: { conversationId: number; messages: number; assembleError?: string; sweepError?: string }[]
  verifyAfterSweeps: Verify
  ms: number
}

interface Run<L, D> {
  lines: L[]
  done: D
  ms: number
}

// A child that has not finished by then has hung: the limit detects hangs, it does not time the
// run (the ingest child took 40-55 s on a 2-core machine, half of it in the kernel).
const CHILD_TIMEOUT = 120_000
const CHILD_TEST_TIMEOUT = CHILD_TIMEOUT + 30_000

/** Runs a fuzz child; asserts that it ended on its own, exit 0, with nothing on stderr. */
function runChild<L, D>(args: string[], timeout: number): Run<L, D> {
  const started = Date.now()
  const out = spawnSync(process.execPath, args, { encoding: 'utf8', timeout, maxBuffer: 256 * 1024 * 1024 })
  const ms = Date.now() - started
  expect(out.error, `the child did not finish within ${timeout} ms (a hang?), seed ${SEED}`).toBeUndefined()
  expect(out.stderr, `seed ${SEED}`).toBe('')
  expect(out.status, `the child died (signal ${out.signal}), seed ${SEED}`).toBe(0)
  const all = out.stdout.trim().split('\n').map((l) => JSON.parse(l))
  const done = all.pop() as D & { done?: boolean }
  expect(done.done, 'the child stopped before its end checks').toBe(true)
  return { lines: all as L[], done, ms }
}

const tally = (keys: string[]) => Object.entries(keys.reduce<Record<string, number>>((t, k) => ({ ...t, [k]: (t[k] ?? 0) + 1 }), {})).map(([k, n]) => `${k} ${n}`).join(', ')

describe('fuzz', () => {
  it('summarizer results: whatever the callback returns, throws, resolves or rejects, a pass succeeds or fails coded, writing nothing', () => {
    const run = runChild<SummarizerCase, SummarizerDone>(
      ['--expose-gc', join(ROOT, '__test__/child/fuzz-summarizer.cjs'), String(SEED), String(SUMMARIZER_CASES)],
      CHILD_TIMEOUT,
    )
    const cls = (c: SummarizerCase) => (c.outcome === 'rejected' ? String(c.code) : c.outcome)
    console.log(
      `fuzz summarizer: seed ${SEED}, ${run.lines.length} cases in ${run.ms} ms (${tally(run.lines.map(cls))}; ` +
        `${run.lines.filter((c) => c.op === 'compact').length} of them sweeps)`,
    )
    expect(run.lines.length).toBe(SUMMARIZER_CASES)
    const violations: string[] = []
    for (const c of run.lines) {
      const what = `case ${c.i} (${c.op}, ${c.how} ${c.value}): ${c.outcome}${c.code ? ` ${c.code}` : ''}${c.message ? ` "${c.message}"` : ''}`
      if (c.outcome === 'rejected' && !(c.isError && (c.code === 'E_SUMMARIZER' || c.code === 'E_TIMEOUT')))
        violations.push(`${what}: rejected with something other than an Error coded E_SUMMARIZER or E_TIMEOUT`)
      if ((c.outcome === 'rejected' || c.outcome === 'auth') && (c.written !== 0 || !c.contextSame))
        violations.push(`${what}: the pass failed, yet ${c.written} summaries were written (context ${c.contextSame ? 'unchanged' : 'changed'})`)
      if (c.outcome === 'ok' && (c.written < 1 || c.written !== c.created))
        violations.push(`${what}: resolved having created ${c.created}, ${c.written} summaries written`)
      // What the value and the way it came back allow (a string answer must succeed, a
      // rejection coded LCM_AUTH must be an auth failure, a late answer a timeout, …); a pass
      // with nothing to do ('null') cannot happen: every case ingests first.
      if (!c.expect.includes(cls(c))) violations.push(`${what}: expected ${c.expect.join(' or ')}`)
    }
    expect(violations, `seed ${SEED}`).toEqual([])
    expect(run.done.verify).toEqual({ ok: true, problems: [] })
    expect(run.done.finalPass, 'a pass after the fuzzing').toBe('normal')
  }, CHILD_TEST_TIMEOUT)

  // One run of the ingest child serves both ingest tests.
  let ingest: (Run<IngestRound, IngestDone> & { dbPath: string }) | undefined
  const ingestRun = () => {
    if (!ingest) {
      const dbPath = join(tempDir(), 'fuzz-ingest.db')
      const run = runChild<IngestRound, IngestDone>([join(ROOT, '__test__/child/fuzz-ingest.cjs'), String(SEED), String(INGEST_ROUNDS), dbPath], CHILD_TIMEOUT)
      ingest = { ...run, dbPath }
    }
    return ingest
  }

  it('ingest payloads: each call resolves or rejects E_INVALID_INPUT writing nothing, and the file stays sound', () => {
    const run = ingestRun()
    const calls = run.lines.flatMap((r) => r.calls)
    console.log(
      `fuzz ingest: seed ${SEED}, ${run.lines.length} rounds (${run.lines.filter((r) => r.i < 0).length} pinned), ${calls.length} calls in ${run.ms} ms ` +
        `(${tally(calls.map((c) => `${c.kind} ${c.outcome}`))}; ${run.lines.filter((r) => r.calls.length > 1).length} rounds concurrent)`,
    )
    expect(run.lines.filter((r) => r.i >= 0).length).toBe(INGEST_ROUNDS)
    expect(run.done.cases).toBe(calls.length)
    const violations: string[] = []
    for (const r of run.lines) {
      r.calls.forEach((c, j) => {
        const what = `round ${r.i} call ${j} (${c.kind}, ${c.n} messages${c.mutations.length ? `: ${c.mutations.join('; ')}` : ''}): ${c.outcome}${c.code ? ` ${c.code} "${c.message}"` : ''}`
        if (c.outcome === 'rejected' && !(c.isError && c.code === 'E_INVALID_INPUT'))
          violations.push(`${what}: rejected with something other than an Error coded E_INVALID_INPUT`)
        if (c.mustFail && c.outcome !== 'rejected') violations.push(`${what}: a malformed message was accepted`)
        if (c.mustPass && c.outcome !== 'ok') violations.push(`${what}: valid messages were refused`)
      })
      // Stored counts against what each call reported: a failed call wrote nothing, nor created
      // a conversation; inserted + skipped = messages; replacedSurrogates as counted here.
      for (const p of r.problems) violations.push(`round ${r.i}: ${p}`)
    }
    expect(violations, `seed ${SEED}`).toEqual([])
    expect(run.done.verify).toMatchObject({ ok: true, problems: [] })
    // Whatever was stored can be assembled and compacted (offline), and the invariants hold.
    for (const e of run.done.ends) {
      expect(e.assembleError, `assemble of conversation ${e.conversationId}`).toBeUndefined()
      expect(e.sweepError, `offline sweep of conversation ${e.conversationId}`).toBeUndefined()
    }
    expect(run.done.verifyAfterSweeps).toMatchObject({ ok: true, problems: [] })
    const check = spawnSync(
      'python3',
      ['-c', 'import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute("PRAGMA integrity_check").fetchone()[0])', run.dbPath],
      { encoding: 'utf8' },
    )
    expect(check.stderr).toBe('')
    expect(check.stdout.trim()).toBe('ok')
  }, CHILD_TEST_TIMEOUT)

  // This fuzz found that a user message (or a host kind such as `custom`, stored as a user
  // message) ingested with `content: []` came back from `messages()` as `content: ""`; fixed in
  // `stored_content` (src/store/messages.rs), and pinned as round -1 of fuzz-ingest.cjs.
  it('ingest payloads: the messages of a lone valid call come back from messages() as they were ingested', () => {
    const run = ingestRun()
    const mismatches = run.lines.flatMap((r) => r.roundTrip.map((p) => `round ${r.i}: ${p}`))
    console.log(`fuzz ingest round trips: ${run.lines.filter((r) => r.calls.length === 1 && r.calls[0].kind === 'valid' && r.calls[0].outcome === 'ok' && r.calls[0].skipped === 0).length} lone valid calls compared`)
    expect(mismatches, `seed ${SEED}`).toEqual([])
  }, CHILD_TEST_TIMEOUT)
})
