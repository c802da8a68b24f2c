#!/usr/bin/env node
// Two processes writing one SQLite file at once, through one binary: the file locks of the
// platform the binary runs on (Windows' under Wine, say) keep each turn once and in order.
//
//   node scripts/two-processes.cjs [path/to/lcm-native.<platform>.node]
//
// The parent starts a second Node (process.execPath) on the same file; each commits TURNS
// turns to one shared session under its own entry ids; then the parent checks that every
// turn is stored once, seq is dense, each process's turns keep their order, and verify()
// finds the file sound. Exit 1 on the first failure. No pipes between the two (a child's
// pipe is what Wine handles worst): they meet in the file, and the child says how it went by
// its exit code and stderr.
'use strict'
const assert = require('node:assert/strict')
const { spawn } = require('node:child_process')
const { existsSync, mkdtempSync, rmSync, writeFileSync } = require('node:fs')
const { tmpdir } = require('node:os')
const { join, resolve } = require('node:path')

const TURNS = 150
const [, , first, ...rest] = process.argv
const child = first === '--child'
const binary = child ? rest[0] : first
const addon = require(binary && binary !== '-' ? resolve(binary) : join(__dirname, '..', 'index.js'))

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

/** Waits (up to 60 s) for `path` to exist. */
async function until(path) {
  for (let i = 0; i < 6000 && !existsSync(path); i++) await sleep(10)
  if (!existsSync(path)) throw new Error(`${path} never came`)
}

/**
 * Commits TURNS two-message turns as `name` to the shared session of `db`, starting when the
 * file `go` exists (after saying it is open with `name.ready` beside it).
 */
async function write(db, name, go) {
  const engine = await addon.LcmEngine.open({ dbPath: db, busyTimeoutMs: 20000 })
  try {
    writeFileSync(`${db}.${name}.ready`, '')
    await until(go)
    for (let t = 0; t < TURNS; t++) {
      await engine.ingest({ sessionKey: 'agent:main:shared' }, [
        { role: 'user', content: `${name} asks ${t}`, entryId: `${name}-${t}-q` },
        { role: 'assistant', content: `${name} answers ${t}`, entryId: `${name}-${t}-a` },
      ], { advancementKey: `${name}-${t}` })
    }
  } finally {
    await engine.close()
  }
}

async function main() {
  if (child) {
    await write(rest[1], rest[2], rest[3])
    return
  }
  const dir = mkdtempSync(join(tmpdir(), 'lcm-two-'))
  const db = join(dir, 'lcm.db')
  try {
    // The file made first, so that both open an existing database.
    await (await addon.LcmEngine.open({ dbPath: db })).close()
    // Both open the file, then start together.
    const go = join(dir, 'go')
    const other = spawn(process.execPath, [__filename, '--child', binary || '-', db, 'b', go], { stdio: ['ignore', 'ignore', 'inherit'] })
    const exited = new Promise((resolve) => other.on('exit', (code, signal) => resolve(code ?? signal)))
    const mine = write(db, 'a', go)
    await Promise.race([until(`${db}.b.ready`), exited.then((code) => Promise.reject(new Error(`the second process exited (${code}) before it was ready`)))])
    await until(`${db}.a.ready`)
    writeFileSync(go, '')
    await mine
    assert.equal(await exited, 0, 'the second process failed')
    const engine = await addon.LcmEngine.open({ dbPath: db })
    let switches = 0
    try {
      const [conversation, ...more] = await engine.conversations()
      assert.equal(more.length, 0, 'one conversation for the shared session')
      const stored = await engine.messages(conversation.conversationId, { limit: 1000 })
      assert.equal(stored.length, 4 * TURNS, 'every turn once')
      assert.deepEqual(stored.map((m) => m.seq), stored.map((_, i) => stored[0].seq + i), 'seq dense')
      for (const name of ['a', 'b']) {
        const own = stored.map((m) => m.entryId).filter((id) => id.startsWith(`${name}-`))
        const expected = Array.from({ length: TURNS }, (_, t) => [`${name}-${t}-q`, `${name}-${t}-a`]).flat()
        assert.deepEqual(own, expected, `process ${name}'s turns in order`)
      }
      // They wrote at the same time: the file holds their turns interleaved.
      switches = stored.filter((m, i) => i > 0 && m.entryId[0] !== stored[i - 1].entryId[0]).length
      assert.ok(switches > 1, `the two processes' turns interleave (${switches} switches)`)
      const report = await engine.verify()
      assert.deepEqual(report.problems, [])
    } finally {
      await engine.close()
    }
    console.log(`two-processes: ok (${process.platform} ${process.arch}, Node ${process.version}): 2 × ${TURNS} turns on one file at once (${switches} switches between them), each once, in order`)
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

main().catch((e) => {
  console.error(`two-processes: ${e.stack || e}`)
  process.exit(1)
})
