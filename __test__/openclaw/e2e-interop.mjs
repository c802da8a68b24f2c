// @ts-check
// The interop scenario (c): lossless-claw 1.x, from its own packed plugin
// (../shared/vendor/lossless-claw, an oracle only), and lcm-native take turns on one lcm.db in
// the same OpenClaw, five phases and four switches on one session: lossless-claw writes it;
// lcm-native continues it (tool turns, and a commit it fails, which the host keeps queued);
// lossless-claw continues it (its transcript reconcile, its /new); lcm-native again (the host
// replays the failed commit; a /reset); lossless-claw once more. After each phase: every
// message stored once, the turns in order, an early fact recalled through that engine,
// SQLite's integrity_check and lcm-native's verify pass. At the end: no orphaned pending rows
// and a turn record for every turn.

import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { existsSync, mkdtempSync, readdirSync, renameSync, rmSync, symlinkSync } from 'node:fs'
import { basename, dirname, join } from 'node:path'

import { ROOT, assertSound, check, cleanUp, legacyFallbacks, sql } from './e2e-lib.mjs'
import { startFakeModel } from './fake-model.mjs'
import { CACHE, exec, gatewayCall, installPlugin, makeRunDir, openclaw, startGateway, stopGateway, turn, writeConfig } from './harness.mjs'

/**
 * lossless-claw 1.x's packed plugin (an oracle, not in this repository): `$LCM_LOSSLESS_CLAW_TGZ`,
 * else the workspace's `shared/vendor/lossless-claw/*.tgz` beside the checkout or at /work.
 */
export function losslessClawTarball() {
  if (process.env.LCM_LOSSLESS_CLAW_TGZ) return process.env.LCM_LOSSLESS_CLAW_TGZ
  for (const dir of [join(dirname(ROOT), 'shared', 'vendor', 'lossless-claw'), '/work/shared/vendor/lossless-claw']) {
    const tgz = existsSync(dir) ? readdirSync(dir).find((f) => f.endsWith('.tgz')) : undefined
    if (tgz) return join(dir, tgz)
  }
  return undefined
}

/**
 * lossless-claw's plugin unpacked with its one dependency (@sinclair/typebox, from the npm
 * registry) into the machine cache, once: `plugins install <tgz>` would run npm in a fresh HOME
 * on every run (minutes here).
 * @param {import('./harness.mjs').Host} host @param {string} tgz
 */
export async function losslessClawDir(host, tgz) {
  const dir = join(CACHE, basename(tgz, '.tgz'))
  if (existsSync(join(dir, 'node_modules', '@sinclair', 'typebox', 'package.json'))) return dir
  const staging = mkdtempSync(join(CACHE, 'lossless-claw.staging-'))
  try {
    const untar = await exec('tar', ['-xzf', tgz, '-C', staging, '--strip-components=1'])
    if (untar.code !== 0) throw new Error(`extracting ${tgz}: ${untar.stderr}`)
    const env = { ...process.env, PATH: `${dirname(host.node)}:${process.env.PATH ?? '/usr/bin:/bin'}` }
    const npm = await exec('npm', ['install', '--omit=dev', '--ignore-scripts', '--no-audit', '--no-fund'], { cwd: staging, env, timeoutMs: 600_000 })
    if (npm.code !== 0) throw new Error(`npm install in ${staging}: ${npm.stderr.slice(-1500)}`)
    rmSync(dir, { recursive: true, force: true })
    renameSync(staging, dir)
    return dir
  } finally {
    rmSync(staging, { recursive: true, force: true })
  }
}

/**
 * Installs lossless-claw into a run's host from the cached directory (a linked install).
 * @param {import('./harness.mjs').Run} run @param {string} tgz
 */
export async function installLosslessClaw(run, tgz) {
  const dir = await losslessClawDir(run, tgz)
  const r = await openclaw(run, ['plugins', 'install', '-l', dir, '--force', '--accept-capabilities'], { timeoutMs: 180_000 })
  if (r.code !== 0) throw new Error(`installing lossless-claw: ${(r.stdout + r.stderr).slice(-1500)}`)
}

/** A turn with its own marker, long enough that a few turns fill a leaf chunk. @param {number} i */
const said = (i) => `Swap turn ${i}: marker kiwi-${i}, the service listens on port ${9000 + i}. ${'Notes in prose follow here. '.repeat(50)}`

/**
 * Holds SQLite's write lock on `db` from another process (Python's sqlite3) until released:
 * lcm-native's commit then waits its busy timeout and fails.
 * @param {string} db @returns {Promise<{ release: () => Promise<void> }>}
 */
async function holdWriteLock(db) {
  const py = 'import sqlite3,sys,time; c=sqlite3.connect(sys.argv[1], isolation_level=None); c.execute("BEGIN IMMEDIATE"); print("locked", flush=True); sys.stdin.read()'
  const child = spawn('python3', ['-c', py, db], { stdio: ['pipe', 'pipe', 'inherit'] })
  await new Promise((resolve, reject) => {
    child.stdout.once('data', resolve)
    child.once('exit', (code) => reject(new Error(`the lock holder exited (${code})`)))
  })
  return {
    release: () =>
      new Promise((resolve) => {
        child.removeAllListeners('exit')
        child.once('exit', () => resolve(undefined))
        child.stdin.end()
      }),
  }
}

/** @param {import('./harness.mjs').Host} host @param {string} tgz the packed plugin */
export async function interopScenario(host, tgz) {
  const lc = losslessClawTarball()
  if (!lc) {
    // The oracle is not part of the repository: a checkout without the workspace beside it
    // cannot run this scenario, and says so.
    console.log('openclaw e2e: SKIPPED interop: no lossless-claw tarball (set LCM_LOSSLESS_CLAW_TGZ)')
    return
  }
  const run = await makeRunDir(host)
  const fake = await startFakeModel({ logFile: join(run.dir, 'model.jsonl') })
  const db = join(run.state, 'lcm.db')
  await installLosslessClaw(run, lc)
  await installPlugin(run, tgz)
  // The same compaction settings for both (their names are the same).
  const shared = { freshTailCount: 4, leafChunkTokens: 1500, contextThreshold: 0.5 }
  const key = 'agent:main:explicit:swap'
  /** @type {string[]} */
  const logs = []
  let turns = 0
  let next = 1
  /**
   * One phase: the slot set to `slot`, a Gateway, `n` turns of the session, then `extra`.
   * @param {'lossless-claw' | 'lcm-native'} slot @param {number} n
   * @param {(say: (m: string, sessionId?: string) => Promise<string>) => Promise<void>} [extra]
   * @param {Record<string, unknown>} [own] settings of this phase's lcm-native
   */
  const phase = async (slot, n, extra, own = {}) => {
    // As the README's switching section says: the other plugin disabled (the same tool names).
    for (const pluginId of ['lossless-claw', 'lcm-native']) {
      const pluginConfig = pluginId === 'lcm-native' ? { ...shared, ...own } : { ...shared }
      writeConfig(run, { port: fake.port, slot, pluginId, enabled: pluginId === slot, pluginConfig, contextWindow: 64_000 })
    }
    const gw = await startGateway(run)
    logs.push(gw.stdoutFile, gw.stderrFile)
    const say = async (/** @type {string} */ message, sessionId = 'swap') => {
      const r = await turn(run, { sessionId, message })
      if (sessionId === 'swap') turns++
      assert.equal(r.code, 0, `${slot}: turn failed (${r.code}): ${r.stderr.slice(-1500)}`)
      return r.reply
    }
    try {
      for (let i = 0; i < n; i++) await say(said(next++))
      if (extra) await extra(say)
    } finally {
      await stopGateway(gw)
    }
  }
  /** The session's conversations (a /reset archives one and starts another). */
  const inSession = `conversation_id IN (SELECT conversation_id FROM conversations WHERE session_key = '${key}')`
  /** The session's active conversation. */
  const conv = () => sql(db, `SELECT conversation_id FROM conversations WHERE session_key = '${key}' AND active = 1`)
  /** How many stored user messages carry each marker so far (the two sessions share them). */
  const markerCounts = () => {
    /** @type {number[]} */
    const counts = []
    for (let i = 1; i < next; i++) counts.push(sql(db, `SELECT count(*) FROM messages WHERE role = 'user' AND instr(content, 'marker kiwi-${i},') > 0`)[0][0])
    return counts
  }
  /**
   * After each phase: every message in the file stored once per conversation (each prompt,
   * reply, tool call and result of this scenario is unique), the markers in order within each
   * conversation, the file sound (lcm-native's verify only
   * once lcm-native has opened the file: a read-only open does not upgrade lossless-claw's).
   */
  const assertOnceInOrder = async (verify = true) => {
    const twice = sql(db, `SELECT role, substr(content, 1, 60), count(*) FROM messages WHERE content <> '' GROUP BY conversation_id, role, content HAVING count(*) > 1`)
    assert.deepEqual(twice, [], 'messages stored twice')
    const markers = sql(db, `SELECT conversation_id, seq, CAST(substr(content, instr(content, 'marker kiwi-') + 12) AS INTEGER) FROM messages WHERE role = 'user' AND instr(content, 'marker kiwi-') > 0 ORDER BY conversation_id, seq`)
    for (let i = 1; i < markers.length; i++) {
      if (markers[i][0] === markers[i - 1][0]) assert.ok(markers[i][2] > markers[i - 1][2], `turns out of order: ${JSON.stringify(markers.slice(Math.max(0, i - 2), i + 1))}`)
    }
    if (verify) await assertSound(db)
    else assert.deepEqual(sql(db, 'PRAGMA integrity_check'), [['ok']])
  }
  let recalls = 0
  /** A recall of turn 2's fact (each prompt its own: the tool-call line, then a counter). */
  const recall = async (/** @type {(m: string) => Promise<string>} */ say, args = '') =>
    assert.match(await say(`TOOLCALL lcm_grep {"pattern": "kiwi-2,"${args}}\nrecall ${++recalls}`), /kiwi-2/)
  /** The turn whose commit lcm-native fails in phase 2, replayed by the host in phase 4. */
  let failed = 0
  /**
   * A turn whose commit cannot be stored (the file is locked by another process) nor spooled
   * (the spool file's name points into a folder that does not exist): it fails, and OpenClaw
   * keeps the turn queued for lcm-native. With `tool`, the turn calls lcm_grep (its replay then
   * has a tool call and result between the entries the host names). Returns its marker.
   * @param {(m: string) => Promise<string>} say
   */
  const failedCommit = async (say, tool = false) => {
    const spoolFile = `${db}.lcm-native-pending.jsonl`
    symlinkSync(join(run.dir, 'no-such-folder', 'spool.jsonl'), spoolFile)
    const lock = await holdWriteLock(db)
    try {
      const marker = next++
      await say(tool ? `TOOLCALL lcm_grep {"pattern": "kiwi-4,"}\nmarker kiwi-${marker}, a tool turn` : said(marker))
      return marker
    } finally {
      await lock.release()
      rmSync(spoolFile, { force: true })
    }
  }

  await check('(c) lossless-claw 1.x writes the file: turns stored with its turn records', async () => {
    await phase('lossless-claw', 6, recall)
    assert.equal(conv().length, 1)
    assert.deepEqual(markerCounts(), [1, 1, 1, 1, 1, 1])
    assert.ok(sql(db, 'SELECT count(*) FROM turn_advancements')[0][0] >= 6, 'lossless-claw wrote no turn records')
    await assertOnceInOrder(false)
  })
  await check("(c) lcm-native continues it (recall tools in lossless-claw's argument forms); a commit it fails stays the host's", async () => {
    // A short busy timeout, so that the commit held up below fails soon.
    await phase('lcm-native', 1, async (say) => {
      // A second session that begins on lcm-native: lossless-claw has no anchor of its own there
      // when it continues it (phase 3).
      for (let i = 0; i < 2; i++) await say(said(next++), 'solo')
      await recall(say)
      assert.match(await say('TOOLCALL lcm_grep {"pattern": "kiwi-7", "mode": "full_text"}'), /kiwi-7/)
      assert.match(await say('TOOLCALL lcm_expand_query {"query": "kiwi-3", "prompt": "Which port did turn 3 use?"}'), /^tool said: (?!.*(error|must have))/is)
      failed = await failedCommit(say, true)
    }, { busyTimeoutMs: 1500 })
    assert.equal(conv().length, 1)
    assert.deepEqual(markerCounts(), [...Array(failed - 1).fill(1), 0], 'the failed commit was stored after all')
    assert.equal(sql(db, "SELECT count(*) FROM pending_compaction_batches WHERE status <> 'published'")[0][0], 0)
    // The host's entry ids are on lcm-native's rows, each trusted as lossless-claw trusts its own.
    const anchored = sql(db, `SELECT count(*) FROM messages m JOIN message_transcript_anchor_trust t USING (message_id) WHERE m.${inSession} AND t.trust_state = 'verified' AND t.source = 'lcm-native'`)[0][0]
    assert.ok(anchored >= 2 * 4, `only ${anchored} of lcm-native's rows carry a trusted entry id`)
    await assertOnceInOrder()
  })
  await check("(c) lossless-claw continues the file lcm-native wrote: its reconcile stores nothing twice and takes the failed turn from the transcript; its /new is no damage to lcm-native's verify", async () => {
    await phase('lossless-claw', 1, async (say) => {
      await recall(say)
      await say(said(next++), 'solo')
      // lossless-claw's own /new: it takes the context's raw messages and shallow summaries
      // out and records nothing; verify must not call that damage (#45).
      const fresh = await gatewayCall(run, 'sessions.reset', { key, reason: 'new' })
      assert.equal(fresh.code, 0, `sessions.reset new: ${fresh.stdout}${fresh.stderr}`)
      await say(said(next++))
    })
    assert.equal(conv().length, 1)
    assert.deepEqual(markerCounts(), Array(next - 1).fill(1))
    // lossless-claw found lcm-native's anchors sound: none of them became suspect.
    assert.deepEqual(sql(db, `SELECT trust_state, count(*) FROM message_transcript_anchor_trust WHERE ${inSession} AND trust_state NOT IN ('verified', 'repaired') GROUP BY trust_state`), [])
    await assertOnceInOrder()
  })
  await check('(c) lcm-native again: the host replays the failed commit, found stored already; a commit failed before /reset is replayed after it into the archived conversation', async () => {
    let beforeReset = 0
    await phase('lcm-native', 1, async (say) => {
      await recall(say)
      beforeReset = await failedCommit(say)
      const reset = await gatewayCall(run, 'sessions.reset', { key, reason: 'reset' })
      assert.equal(reset.code, 0, `sessions.reset reset: ${reset.stdout}${reset.stderr}`)
      await say(said(next++))
    }, { busyTimeoutMs: 1500 })
    assert.deepEqual(markerCounts(), Array(next - 1).fill(1))
    const home = sql(db, `SELECT m.conversation_id, c.active FROM messages m JOIN conversations c USING (conversation_id) WHERE m.role = 'user' AND instr(m.content, 'marker kiwi-${beforeReset},') > 0`)
    assert.deepEqual(home.map((h) => h[1]), [0], 'the turn from before the reset is not in the archived conversation')
    // The replay reached lcm-native and was recorded as its turn, with nothing stored again.
    assert.deepEqual(legacyFallbacks([...logs, run.logFile]), [])
    // /reset: the conversation archived, a new one holding only what came after it.
    const convs = sql(db, `SELECT conversation_id, active, archive_cause FROM conversations WHERE session_key = '${key}' ORDER BY conversation_id`)
    assert.equal(convs.length, 2, JSON.stringify(convs))
    assert.deepEqual(convs.map((c) => c[1]), [0, 1])
    const after = sql(db, `SELECT count(*) FROM messages WHERE conversation_id = ${conv()[0][0]} AND role = 'user'`)[0][0]
    assert.equal(after, 1)
    await assertOnceInOrder()
  })
  await check('(c) lossless-claw after the /reset: it continues the new conversation, recalls across both, stores nothing twice', async () => {
    await phase('lossless-claw', 1, async (say) => {
      await recall(say, ', "allConversations": true')
    })
    assert.deepEqual(markerCounts(), Array(next - 1).fill(1))
    await assertOnceInOrder()
  })
  await fake.close()

  await check('(c) after four switches: no orphaned pending rows, every turn recorded, the file is sound', async () => {
    const orphans = [
      'SELECT count(*) FROM pending_summary_nodes WHERE batch_id NOT IN (SELECT batch_id FROM pending_compaction_batches)',
      'SELECT count(*) FROM pending_summary_node_messages WHERE node_id NOT IN (SELECT node_id FROM pending_summary_nodes)',
      'SELECT count(*) FROM pending_summary_node_children WHERE node_id NOT IN (SELECT node_id FROM pending_summary_nodes)',
    ].map((q) => sql(db, q)[0][0])
    assert.deepEqual(orphans, [0, 0, 0])
    // Every turn the host accepted has a record (the failed one too, once replayed).
    assert.equal(sql(db, `SELECT count(*) FROM turn_advancements WHERE session_key = '${key}'`)[0][0], turns)
    assert.deepEqual(legacyFallbacks([...logs, run.logFile]), [])
    await assertSound(db)
  })
  cleanUp(run)
}
