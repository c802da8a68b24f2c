// Versions and redaction through the JS surface: history, rollback, describe, redact with its
// coded errors, and a redaction killed (SIGKILL) mid-run that a second run finishes.
import { spawn } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'

import { describe, expect, it } from 'vitest'

import { LcmEngine, redactMessages } from '../index.js'
import { ROOT, THEME, hostMessages, rejection, tempDir } from './helpers'

const SECRET = 'sk-live-Jq4Rm8Tz2Wx6Yp0Lc5'

/** The theme transcript with the secret in its first user message, compacted offline. */
async function planted(dbPath: string) {
  const engine = await LcmEngine.open({ dbPath, leafChunkTokens: 1500, leafTargetTokens: 200, freshTailCount: 16, condensedMinFanout: 2 })
  const messages = hostMessages(THEME)
  const first = messages.findIndex((m) => m.role === 'user')
  messages[first] = { ...messages[first], content: `please use ${SECRET} for the deploy` }
  const { conversationId } = await engine.ingest({ sessionId: 'secret' }, messages)
  await engine.compact(conversationId, 'offline', { tokenBudget: 4000, force: true })
  return { engine, conversationId }
}

function fileHolds(path: string, needle: string): string[] {
  return ['', '-wal', '-shm'].filter((s) => {
    try {
      return readFileSync(path + s).includes(needle)
    } catch {
      return false
    }
  })
}

describe('versions', () => {
  it('history, rollback and describe show and restore a summary\'s versions', async () => {
    const { engine, conversationId } = await planted(join(tempDir(), 'v.db'))
    const [leaf] = await engine.summaries(conversationId, { depth: 0 })
    const first = await engine.history(leaf.summaryId)
    expect(first.map((v) => [v.version, v.reason, v.current])).toEqual([[1, 'compaction', true]])
    await engine.rewrite(conversationId, async () => 'A new text zqxnewtext.\nExpand for details about: x', { summaryId: leaf.summaryId, apply: true })
    const restored = await engine.rollback(leaf.summaryId, 1)
    expect(restored).toMatchObject({ version: 3, reason: 'rollback', current: true, content: first[0].content })
    const d = await engine.describe(leaf.summaryId)
    expect(d.type === 'summary' && d.versions.map((v) => v.reason)).toEqual(['compaction', 'rewrite', 'rollback'])
    expect((await engine.grep(conversationId, { query: 'zqxnewtext', scope: 'summaries' })).hits).toHaveLength(0)
    expect((await rejection(engine.rollback(leaf.summaryId, 99))).code).toBe('E_NOT_FOUND')
    expect((await rejection(engine.history('sum_missing'))).code).toBe('E_NOT_FOUND')
    await engine.close()
  })
})

describe('redact', () => {
  it('refuses bad patterns and unknown ids with coded errors', async () => {
    const { engine, conversationId } = await planted(join(tempDir(), 'e.db'))
    expect((await rejection(engine.redact({ pattern: '(' }))).code).toBe('E_INVALID_INPUT')
    expect((await rejection(engine.redact({ conversationId, pattern: 'nothing-matches-this-zz' }))).code).toBe('E_INVALID_INPUT')
    expect((await rejection(engine.redact({ messageIds: [123456] }))).code).toBe('E_NOT_FOUND')
    expect((await rejection(engine.redact({ pattern: 'x', signal: 'no' as unknown as AbortSignal }))).code).toBe('E_INVALID_INPUT')
    await engine.close()
  })

  it('a redaction killed (SIGKILL) while regenerating is finished by the next one', async () => {
    const dbPath = join(tempDir(), 'k.db')
    const { engine } = await planted(dbPath)
    await engine.close()
    const child = spawn(process.execPath, [join(ROOT, '__test__/child/redact-slow.cjs'), dbPath, 'sk-live-[A-Za-z0-9]+'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let stderr = ''
    child.stderr.on('data', (d) => (stderr += d))
    await new Promise<void>((resolve, reject) => {
      child.stdout.on('data', (d) => {
        if (String(d).includes('progress')) resolve()
        if (String(d).includes('done')) reject(new Error('the redaction finished before it could be killed'))
      })
      child.on('exit', (code) => reject(new Error(`child exited (${code}): ${stderr}`)))
    })
    child.kill('SIGKILL')
    await new Promise((r) => child.once('exit', r))

    const again = await LcmEngine.open({ dbPath })
    // The messages were redacted in the first run's first transaction; the file says its
    // scrub is pending, and the open says so.
    expect(again.migration.scrubsPending).toBe(1)
    expect(again.migration.summary).toMatch(/lcm-native redact --finish/)
    const messages = await again.messages(1, { limit: 100000 })
    expect(JSON.stringify(messages)).not.toContain(SECRET)
    // With no pattern: finishes what the killed run left.
    const r = await again.redact({})
    expect(r).toMatchObject({ redactionId: null, messages: 0, pending: 0, scrubPending: false })
    expect(r.regenerated).toBeGreaterThan(0)
    const report = await again.verify()
    expect(report.problems).toEqual([])
    const summaries = await again.summaries(1)
    expect(summaries.some((s) => s.content.startsWith('[Redacted]'))).toBe(false)
    await again.close()
    expect(fileHolds(dbPath, SECRET)).toEqual([])
  })

  it('the assembly right after a redaction shows the redacted text, and so does one after another engine\'s edit', async () => {
    // Assemblies on an idle engine reuse the messages the previous one rendered; a redaction
    // (this engine) or any commit by another connection must make them render again.
    const dbPath = join(tempDir(), 'a.db')
    const engine = await LcmEngine.open({ dbPath })
    const { conversationId } = await engine.ingest({ sessionId: 'recent' }, [
      { role: 'user', content: `deploy with ${SECRET} now` },
      { role: 'assistant', content: [{ type: 'text', text: `using ${SECRET} as asked` }] },
      { role: 'user', content: 'thanks' },
    ])
    const shown = async () => JSON.stringify((await engine.assemble(conversationId, { tokenBudget: 100000 })).messages)
    expect(await shown()).toContain(SECRET)
    expect(await shown()).toContain(SECRET)
    const r = await engine.redact({ conversationId, pattern: 'sk-live-[A-Za-z0-9]+' })
    expect(r.messages).toBe(2)
    const after = await shown()
    expect(after).not.toContain(SECRET)
    expect(after).toContain('[REDACTED]')
    // Another engine on the same file (another connection) redacts a word this engine's last
    // assembly showed.
    const other = await LcmEngine.open({ dbPath })
    await other.redact({ conversationId, pattern: 'thanks' })
    expect(await shown()).not.toContain('thanks')
    await other.close()
    await engine.close()
  })

  it('redactPatterns keeps a pasted key out of the file from the start', async () => {
    const dbPath = join(tempDir(), 'i.db')
    const key = 'ghp_16C7e42F292c6912E7710c838347Ae178B4a'
    const engine = await LcmEngine.open({ dbPath, redactPatterns: true })
    expect(engine.config.redactPatterns).toBe(true)
    const r = await engine.ingest({ sessionId: 'paste' }, [
      { role: 'user', content: `token ${key} please` },
      { role: 'assistant', content: [{ type: 'toolCall', id: 't1', name: 'bash', arguments: { command: `gh auth login --with-token ${key}` } }] },
    ])
    expect(r).toMatchObject({ inserted: 2, redacted: 2 })
    const stored = await engine.messages(r.conversationId)
    expect(JSON.stringify(stored)).toContain('gh auth login --with-token [REDACTED]')
    expect((await engine.grep(r.conversationId, { query: 'ghp_16C7e42F292c6912E7710c838347Ae178B4a' })).hits).toHaveLength(0)
    await engine.close()
    expect(fileHolds(dbPath, key)).toEqual([])
    const bad = await rejection(LcmEngine.open({ dbPath, redactPatterns: ['(oops'] }))
    expect(bad.code).toBe('E_INVALID_CONFIG')
    expect(bad.message).toContain('redactPatterns')
  })
})

describe('redactMessages', () => {
  it('applies redactPatterns to host messages as ingest does, keeping times, ids and structure', async () => {
    const messages = [
      { role: 'user', content: 'refund CUST-40417733 and CUST-40417734', timestamp: 1764000000000 },
      { role: 'assistant', content: [{ type: 'toolCall', id: 'CUST-00000001', name: 'bash', arguments: { command: 'echo CUST-12345678' } }], timestamp: 1764000000001 },
    ]
    const r = redactMessages(messages, ['CUST-[0-9]{8}'])
    expect(r.replaced).toBe(3)
    expect(r.messages).toEqual([
      { role: 'user', content: 'refund [REDACTED] and [REDACTED]', timestamp: 1764000000000 },
      { role: 'assistant', content: [{ type: 'toolCall', id: 'CUST-00000001', name: 'bash', arguments: { command: 'echo [REDACTED]' } }], timestamp: 1764000000001 },
    ])
    // What ingest stores with the same option is the same text.
    const engine = await LcmEngine.open({ dbPath: join(tempDir(), 'lcm.db'), redactPatterns: ['CUST-[0-9]{8}'] })
    const { conversationId } = await engine.ingest({ sessionId: 's' }, messages as never)
    expect((await engine.messages(conversationId))[0].content).toBe('refund [REDACTED] and [REDACTED]')
    await engine.close()
    expect(redactMessages(messages, false)).toEqual({ messages, replaced: 0 })
    const builtin = redactMessages([{ role: 'user', content: 'key sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGH' }], true)
    expect(builtin.replaced).toBe(1)
    expect(JSON.stringify(builtin.messages)).not.toContain('sk-ant-api03')
    for (const bad of ['CUST', 5, ['(']]) {
      let code = ''
      try {
        redactMessages(messages, bad as never)
      } catch (e) {
        code = (e as { code?: string }).code ?? ''
      }
      expect(code).toBe('E_INVALID_CONFIG')
    }
  })
})
