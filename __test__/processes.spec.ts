// Other processes: a process killed mid-pass, and two processes on one file.
import { spawn } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'

import { describe, expect, it } from 'vitest'

import { LcmEngine } from '../index.js'
import { ROOT, THEME, TRANSCRIPTS, holdWriteLock, tempDir } from './helpers'

function run(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (d) => (stdout += d))
    child.stderr.on('data', (d) => (stderr += d))
    child.on('exit', (code) => resolve({ code, stdout, stderr }))
  })
}

describe('processes', () => {
  it.each([120, 260, 500])('a process killed (SIGKILL) %i ms into compaction leaves a consistent database', async (delay) => {
    const dbPath = join(tempDir(), 'kill.db')
    const child = spawn(process.execPath, [join(ROOT, '__test__/child/compact-loop.cjs'), dbPath, join(TRANSCRIPTS, THEME)], {
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let stderr = ''
    child.stderr.on('data', (d) => (stderr += d))
    await new Promise<void>((resolve, reject) => {
      child.stdout.on('data', (d) => {
        if (String(d).includes('ready')) resolve()
      })
      child.on('exit', () => reject(new Error(`child exited early: ${stderr}`)))
    })
    await new Promise((r) => setTimeout(r, delay))
    const exited = new Promise((r) => child.on('exit', r))
    child.kill('SIGKILL')
    await exited
    const engine = await LcmEngine.open({ dbPath })
    const report = await engine.verify()
    expect(report.problems).toEqual([])
    expect(report.ok).toBe(true)
    const [conv] = await engine.conversations()
    expect(conv.messageCount).toBeGreaterThanOrEqual(914)
    expect(conv.summaryCount).toBeGreaterThan(0)
    await engine.close()
  })

  it("writes waiting for another process's lock keep Node's thread pool free, and each fails after one busyTimeoutMs, whatever its place in line", async () => {
    const dir = tempDir()
    const dbPath = join(dir, 'locked.db')
    const setup = await LcmEngine.open({ dbPath })
    await setup.ingest({ sessionId: 'seed' }, [{ role: 'user', content: 'seed' }])
    await setup.close()
    writeFileSync(join(dir, 'other.txt'), 'unrelated')
    const holder = await holdWriteLock(dbPath, 4)
    const engine = await LcmEngine.open({ dbPath, busyTimeoutMs: 800 })
    const started = Date.now()
    // Six writes: more than libuv's four threads.
    const writes = Array.from({ length: 6 }, (_, i) =>
      engine.ingest({ sessionId: `w${i}` }, [{ role: 'user', content: `w${i}` }]).then(
        () => ({ code: 'stored', ms: Date.now() - started }),
        (e) => ({ code: e.code as string, ms: Date.now() - started }),
      ),
    )
    await new Promise((r) => setTimeout(r, 100))
    const t = Date.now()
    expect(await readFile(join(dir, 'other.txt'), 'utf8')).toBe('unrelated')
    // Before: it waited for a pool thread, about one busyTimeoutMs.
    expect(Date.now() - t).toBeLessThan(400)
    const settled = await Promise.all(writes)
    expect(settled.every((w) => w.code === 'E_BUSY')).toBe(true)
    // Before: the k-th in line waited k busyTimeoutMs (up to 3 here).
    expect(Math.max(...settled.map((w) => w.ms))).toBeLessThan(1600)
    const t2 = Date.now()
    await engine.close()
    expect(Date.now() - t2).toBeLessThan(1500)
    holder.kill()
  })

  it('two processes ingesting and compacting one file lose no writes', async () => {
    const dbPath = join(tempDir(), 'shared.db')
    // Create the schema first so both start from a migrated file.
    await (await LcmEngine.open({ dbPath })).close()
    const count = 400
    const [writer, compactor] = await Promise.all([
      run([join(ROOT, '__test__/child/worker.cjs'), dbPath, 'ingest', String(count)]),
      run([join(ROOT, '__test__/child/worker.cjs'), dbPath, 'compact', String(count)]),
    ])
    expect(writer.code, writer.stderr).toBe(0)
    expect(compactor.code, compactor.stderr).toBe(0)
    expect(JSON.parse(compactor.stdout).passes).toBeGreaterThan(0)
    const engine = await LcmEngine.open({ dbPath })
    const [conv] = await engine.conversations()
    expect(conv.messageCount).toBe(count)
    const stored = await engine.messages(conv.conversationId, { limit: 1000 })
    expect(stored.map((m) => m.entryId)).toEqual(Array.from({ length: count }, (_, i) => `w${i}`))
    const report = await engine.verify()
    expect(report.problems).toEqual([])
    expect(conv.summaryCount).toBeGreaterThan(0)
    await engine.close()
  })

  it('a never-settling summarizer promise collected by the GC still ends in E_TIMEOUT', async () => {
    const r = await run(['--expose-gc', join(ROOT, '__test__/child/gc-timeout.cjs')])
    expect(r.code, r.stderr).toBe(0)
    expect(r.stdout.trim()).toBe('E_TIMEOUT')
  })

  it('loads in worker threads: a worker that loaded it first and exited, then more, some at once, then the main thread', async () => {
    // mimalloc 3.3's per-thread state crashed the second worker to load the addon (SIGSEGV in
    // napi_register_module_v1): the allocator must survive its first thread's exit.
    const r = await run([join(ROOT, '__test__/child/worker-threads.cjs'), tempDir()])
    expect(r.stderr).toBe('')
    expect(r.code).toBe(0)
    expect(r.stdout.match(/^(worker \d+|main): 3 messages, 7 summaries$/gm)).toHaveLength(8)
    expect(r.stdout).toContain('done')
  })
})
