// Shared test helpers: temp dirs, fixture copies, transcripts in the host's message shape,
// another process holding a database's write lock.
import { spawn, type ChildProcess } from 'node:child_process'
import { chmodSync, copyFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'

import { afterAll, beforeAll } from 'vitest'

import type { IngestMessage } from '../index.js'

export const ROOT = resolve(__dirname, '..')
export const FIXTURES = join(ROOT, 'fixtures')
export const TRANSCRIPTS = join(ROOT, 'data', 'transcripts')
export const THEME = 'pi-coding-agent-theme-session.jsonl'
export const REFACTOR = 'pi-coding-agent-refactor-compaction-session.jsonl'

/**
 * The temporary folder of this test file: every other one is made inside it, and it is removed
 * when the file ends. TMPDIR names it for this process and every process the tests start (the
 * CLI's upgraded copies, child scripts), so what they leave goes with it too. Made before the
 * file's first test, or at the first `tempDir()` if that comes first (a describe body); a file
 * whose tests are all skipped runs no hooks, and makes none. The hooks are registered when this
 * module is imported, before the file's own: `afterAll` hooks run last first, so the file's own
 * (closing engines) have run when it is removed.
 */
let fileTmp: string | undefined
const outerTmpdir = process.env.TMPDIR

function fileTmpDir(): string {
  if (fileTmp === undefined) {
    fileTmp = mkdtempSync(join(tmpdir(), 'lcm-test-'))
    // Passable, not readable, for other users: run as root, tests open a folder in it to `nobody`.
    chmodSync(fileTmp, 0o711)
    process.env.TMPDIR = fileTmp
  }
  return fileTmp
}

beforeAll(() => void fileTmpDir())
afterAll(() => {
  if (fileTmp === undefined) return
  if (outerTmpdir === undefined) delete process.env.TMPDIR
  else process.env.TMPDIR = outerTmpdir
  try {
    rmSync(fileTmp, { recursive: true, force: true, maxRetries: 5, retryDelay: 50 })
  } catch {
    // A process the tests started may still be writing there: what is left is in /tmp.
  }
  fileTmp = undefined
})

/**
 * Another process (Python's sqlite3) holding `dbPath`'s write lock (BEGIN IMMEDIATE) for
 * `seconds`; resolves once it holds it. Await its `exit` event for the release.
 */
export async function holdWriteLock(dbPath: string, seconds: number): Promise<ChildProcess> {
  const holder = spawn('python3', ['-c', `import sqlite3,sys,time; c=sqlite3.connect(sys.argv[1], isolation_level=None); c.execute("BEGIN IMMEDIATE"); print("locked", flush=True); time.sleep(${seconds})`, dbPath])
  await new Promise<void>((resolve, reject) => {
    holder.stdout!.once('data', () => resolve())
    holder.once('exit', (code) => reject(new Error(`the lock holder exited (${code}) before it held the lock`)))
  })
  return holder
}

/** A new folder inside the test file's temporary folder (removed when the file ends). */
export function tempDir(prefix = 'lcm-native-'): string {
  return mkdtempSync(join(fileTmpDir(), prefix))
}

/**
 * The engine the engine-level suites run on: SQLite, or PostgreSQL when `LCM_TEST_ENGINE` is
 * `postgres` (`npm run test:js` runs them a second time so, on the server in
 * LCM_TEST_DATABASE_URL).
 */
export const ENGINE: 'sqlite' | 'postgres' = process.env.LCM_TEST_ENGINE === 'postgres' ? 'postgres' : 'sqlite'

let schemas = 0

/**
 * A new, empty database for one test: a file in a fresh temp dir, or on PostgreSQL a schema
 * of its own (`?schema=`), made when an engine opens it.
 */
export function freshDb(name = 'lcm.db'): string {
  if (ENGINE === 'sqlite') return join(tempDir(), name)
  const url = process.env.LCM_TEST_DATABASE_URL
  if (!url) throw new Error('LCM_TEST_ENGINE=postgres needs LCM_TEST_DATABASE_URL (scripts/pg-test-server.cjs sets it)')
  return `${url}?schema=js_${process.pid}_${++schemas}`
}

/** A writable copy of a fixture database in a fresh temp dir. */
export function copyFixture(name: string): string {
  const dst = join(tempDir(), name)
  copyFileSync(join(FIXTURES, name), dst)
  chmodSync(dst, 0o644)
  return dst
}

/** A transcript line: `{role, content, createdAt, toolCallId?}` with role `tool` for results. */
export interface TranscriptLine {
  role: string
  content: IngestMessage['content']
  createdAt: string
  toolCallId?: string
}

export function readTranscript(name: string): TranscriptLine[] {
  return readFileSync(join(TRANSCRIPTS, name), 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as TranscriptLine)
}

/** The transcript as host messages, each with a stable entryId. */
export function hostMessages(name: string): IngestMessage[] {
  return readTranscript(name).map((m, i) => ({
    role: m.role === 'tool' ? 'toolResult' : (m.role as IngestMessage['role']),
    content: m.content,
    timestamp: m.createdAt,
    ...(m.toolCallId ? { toolCallId: m.toolCallId } : {}),
    entryId: `line-${i}`,
  }))
}

/** Splits messages into turns: a new turn starts at every user message. */
export function turns<T extends { role: string }>(messages: T[]): T[][] {
  const out: T[][] = []
  for (const m of messages) {
    if (m.role === 'user' || out.length === 0) out.push([])
    out[out.length - 1].push(m)
  }
  return out
}

/** Rejection of `p`, asserting that it does reject. */
export async function rejection(p: Promise<unknown>): Promise<Error & { code?: string }> {
  try {
    await p
  } catch (err) {
    return err as Error & { code?: string }
  }
  throw new Error('expected the promise to reject')
}

interface LooseMessage {
  role: string
  content: unknown
  toolCallId?: string
}

/**
 * Checks a message sequence the way a strict provider (Anthropic's Messages API) does and
 * returns the first violation, or null when it would be accepted: the first message is the
 * user's; no content is empty; every tool result directly follows the assistant message that
 * made the call, once; every call is answered right after it; no call id is used twice.
 * Written independently of the Rust repair so that each checks the other.
 */
export function strictProviderProblem(messages: LooseMessage[]): string | null {
  if (messages.length > 0 && messages[0].role !== 'user') return `the first message is ${messages[0].role}, not user`
  const everyCall = new Set<string>()
  let i = 0
  while (i < messages.length) {
    const m = messages[i]
    const blocks = Array.isArray(m.content) ? (m.content as Record<string, unknown>[]) : null
    const empty = typeof m.content === 'string' ? m.content.trim() === '' : !blocks || blocks.length === 0
    if (empty) return `message ${i} (${m.role}) has empty content`
    if (m.role === 'user') {
      i++
      continue
    }
    if (m.role !== 'assistant') return `message ${i}: a ${m.role} that does not follow an assistant's call`
    const calls = (blocks ?? []).filter((b) => b.type === 'toolCall').map((b) => String(b.id))
    for (const id of calls) {
      if (everyCall.has(id)) return `message ${i}: tool call id ${id} used twice`
      everyCall.add(id)
    }
    i++
    const answered = new Set<string>()
    while (i < messages.length && messages[i].role === 'toolResult') {
      const id = String(messages[i].toolCallId)
      if (!calls.includes(id)) return `message ${i}: result for ${id}, which the assistant before it did not call`
      if (answered.has(id)) return `message ${i}: second result for ${id}`
      answered.add(id)
      i++
    }
    const missing = calls.find((id) => !answered.has(id))
    if (missing) return `tool call ${missing} has no result right after it`
  }
  return null
}
