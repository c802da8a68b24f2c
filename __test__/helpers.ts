// Shared test helpers: temp dirs, fixture copies, transcripts in the host's message shape.
import { chmodSync, copyFileSync, mkdtempSync, readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'

import type { IngestMessage } from '../index.js'

export const ROOT = resolve(__dirname, '..')
export const FIXTURES = join(ROOT, 'fixtures')
export const TRANSCRIPTS = join(ROOT, 'data', 'transcripts')
export const THEME = 'pi-coding-agent-theme-session.jsonl'
export const REFACTOR = 'pi-coding-agent-refactor-compaction-session.jsonl'

export function tempDir(): string {
  return mkdtempSync(join(tmpdir(), 'lcm-native-'))
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
