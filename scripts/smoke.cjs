#!/usr/bin/env node
// The core of the addon exercised through one binary, in plain Node (no test runner, no other
// native module), for binaries built for another platform and run under emulation:
//
//   node scripts/smoke.cjs [path/to/lcm-native.<platform>.node]
//   qemu-aarch64 -L /usr/aarch64-linux-gnu <arm64 node> scripts/smoke.cjs npm/linux-arm64-gnu/lcm-native.linux-arm64-gnu.node
//
// Without a path it loads the package (index.js, which picks the platform's binary). Each check
// prints a line; the first failure exits 1.
'use strict'
const assert = require('node:assert/strict')
const { mkdtempSync, readFileSync, rmSync } = require('node:fs')
const { tmpdir } = require('node:os')
const { join, resolve } = require('node:path')

const binary = process.argv[2]
const started = process.hrtime.bigint()
const addon = require(binary ? resolve(binary) : join(__dirname, '..', 'index.js'))
const loadMs = Number(process.hrtime.bigint() - started) / 1e6
const transcript = join(__dirname, '..', 'data', 'transcripts', 'pi-coding-agent-theme-session.jsonl')

/** The transcript's messages in the host's shape. */
function messages() {
  return readFileSync(transcript, 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l))
    .map((m, i) => ({
      role: m.role === 'tool' ? 'toolResult' : m.role,
      content: m.content,
      timestamp: m.createdAt,
      ...(m.toolCallId ? { toolCallId: m.toolCallId } : {}),
      entryId: `line-${i}`,
    }))
}

async function main() {
  const dir = mkdtempSync(join(tmpdir(), 'lcm-smoke-'))
  const checks = []
  const check = async (what, fn) => {
    const t = process.hrtime.bigint()
    await fn()
    checks.push(what)
    console.log(`ok   ${what} (${(Number(process.hrtime.bigint() - t) / 1e6).toFixed(0)} ms)`)
  }
  try {
    console.log(`lcm-native smoke on ${process.platform}-${process.arch}, Node ${process.version}; loaded in ${loadMs.toFixed(1)} ms`)
    const dbPath = join(dir, 'lcm.db')
    let engine
    await check('open creates and migrates a database', async () => {
      engine = await addon.LcmEngine.open({ dbPath, timezone: 'UTC' })
      assert.equal(engine.migration.era, 'new')
    })
    let conversationId
    const all = messages()
    await check(`ingest stores a real session (${all.length} messages)`, async () => {
      const r = await engine.ingest({ sessionId: 'smoke' }, all)
      conversationId = r.conversationId
      assert.equal(r.inserted, all.length)
    })
    await check('messages come back as stored', async () => {
      const stored = await engine.messages(conversationId, { limit: 100000 })
      assert.equal(stored.length, all.length)
    })
    await check('the offline summarizer compacts into a DAG', async () => {
      const r = await engine.compact(conversationId, 'offline', { tokenBudget: 4000, force: true })
      assert.ok(r.leafPasses > 0, JSON.stringify(r))
      const s = await engine.summaries(conversationId)
      assert.ok(s.length > 0)
    })
    await check('assemble keeps the budget and gives a valid sequence', async () => {
      const a = await engine.assemble(conversationId, { tokenBudget: 8000 })
      assert.ok(a.estimatedTokens <= 8000, String(a.estimatedTokens))
      assert.equal(a.messages[0].role, 'user')
    })
    await check('grep finds by full text, substring and regex', async () => {
      for (const mode of ['fts', 'like', 'regex']) {
        const r = await engine.grep(conversationId, { query: mode === 'regex' ? 'them[a-z]' : 'theme', mode })
        assert.ok(r.hits.length > 0, mode)
      }
    })
    await check('describe and expand a summary', async () => {
      const [top] = await engine.summaries(conversationId)
      const d = await engine.describe(top.summaryId)
      assert.equal(d.type, 'summary')
      const x = await engine.expand(top.summaryId, { tokenBudget: 2000 })
      assert.ok(x.entries.length > 0)
    })
    await check('verify finds the DAG sound', async () => {
      const v = await engine.verify(conversationId)
      assert.deepEqual(v.problems, [])
    })
    await check('a coded error crosses back (E_NOT_FOUND)', async () => {
      await assert.rejects(engine.describe('sum_does_not_exist'), (/** @type {any} */ e) => e.code === 'E_NOT_FOUND')
    })
    await check('redactPatterns and the token estimate', async () => {
      const r = addon.redactMessages([{ role: 'user', content: 'key sk-live-Abc123Def456Ghi789' }], true)
      assert.equal(r.replaced, 1)
      assert.ok(addon.estimateTokens('hello world') > 0)
    })
    await check('backup, close, and a read-only reopen', async () => {
      await engine.backup(join(dir, 'copy.db'))
      await engine.close()
      const ro = await addon.LcmEngine.open({ dbPath: join(dir, 'copy.db'), readOnly: true })
      assert.equal((await ro.messages(conversationId, { limit: 5 })).length, 5)
      await ro.close()
    })
    console.log(`smoke: ${checks.length} checks passed`)
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

main().catch((err) => {
  console.error(`FAIL ${err && err.stack ? err.stack : err}`)
  process.exit(1)
})
