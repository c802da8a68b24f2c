// @ts-check
// The interop scenario (c): lossless-claw 1.x, from its own packed plugin
// (../shared/vendor/lossless-claw, an oracle only), and lcm-native take turns on one lcm.db in
// the same OpenClaw: lossless-claw writes it, lcm-native continues it, lossless-claw continues
// what lcm-native wrote, then lcm-native again. One session grows through all four phases.
// Afterwards: every turn stored once (no duplicate rows), one active conversation for the
// session, no orphaned pending rows, turn records for every committed turn, SQLite's
// integrity_check and lcm-native's verify pass; the recall tools were called in lossless-claw's
// argument forms on both plugins' data.

import assert from 'node:assert/strict'
import { existsSync, mkdtempSync, readdirSync, renameSync, rmSync } from 'node:fs'
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
   * @param {'lossless-claw' | 'lcm-native'} slot @param {number} n @param {(say: (m: string) => Promise<string>) => Promise<void>} [extra]
   */
  const phase = async (slot, n, extra) => {
    // As the README's switching section says: the other plugin disabled (the same tool names).
    for (const pluginId of ['lossless-claw', 'lcm-native']) {
      writeConfig(run, { port: fake.port, slot, pluginId, enabled: pluginId === slot, pluginConfig: { ...shared }, contextWindow: 64_000 })
    }
    const gw = await startGateway(run)
    logs.push(gw.stdoutFile, gw.stderrFile)
    const say = async (/** @type {string} */ message) => {
      const r = await turn(run, { sessionId: 'swap', message })
      turns++
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
  /** Rows of the session's active conversation. */
  const conv = () => sql(db, `SELECT conversation_id FROM conversations WHERE session_key = '${key}' AND active = 1`)
  /** How many stored user messages carry each marker so far. */
  const markerCounts = () => {
    const cid = conv()[0]?.[0]
    /** @type {number[]} */
    const counts = []
    for (let i = 1; i < next; i++) counts.push(sql(db, `SELECT count(*) FROM messages WHERE conversation_id = ${cid} AND role = 'user' AND instr(content, 'marker kiwi-${i},') > 0`)[0][0])
    return counts
  }

  await check('(c) lossless-claw 1.x writes the file: turns stored with its turn records', async () => {
    await phase('lossless-claw', 6)
    assert.equal(conv().length, 1)
    assert.deepEqual(markerCounts(), [1, 1, 1, 1, 1, 1])
    assert.ok(sql(db, 'SELECT count(*) FROM turn_advancements')[0][0] >= 6, 'lossless-claw wrote no turn records')
  })
  await check("(c) lcm-native continues it: no duplicates, no unpublished pending batch left, recall tools in lossless-claw's argument forms", async () => {
    await phase('lcm-native', 4, async (say) => {
      assert.match(await say('TOOLCALL lcm_grep {"pattern": "kiwi-2,"}'), /kiwi-2/)
      assert.match(await say('TOOLCALL lcm_grep {"pattern": "kiwi-9", "mode": "full_text"}'), /kiwi-9/)
      assert.match(await say('TOOLCALL lcm_expand_query {"query": "kiwi-3", "prompt": "Which port did turn 3 use?"}'), /^tool said: (?!.*(error|must have))/is)
    })
    assert.equal(conv().length, 1)
    assert.deepEqual(markerCounts(), Array(10).fill(1))
    assert.equal(sql(db, "SELECT count(*) FROM pending_compaction_batches WHERE status <> 'published'")[0][0], 0)
  })
  await check("(c) lossless-claw continues the file lcm-native wrote, and its /new is no damage to lcm-native's verify", async () => {
    await phase('lossless-claw', 3, async (say) => {
      assert.match(await say('TOOLCALL lcm_grep {"pattern": "kiwi-8,"}'), /kiwi-8/)
      // lossless-claw's own /new: it takes the context's raw messages and shallow summaries
      // out and records nothing; verify must not call that damage (#45).
      const fresh = await gatewayCall(run, 'sessions.reset', { key, reason: 'new' })
      assert.equal(fresh.code, 0, `sessions.reset new: ${fresh.stdout}${fresh.stderr}`)
      await say(said(next++))
    })
    assert.equal(conv().length, 1)
    assert.deepEqual(markerCounts(), Array(14).fill(1))
    await assertSound(db)
  })
  await check('(c) lcm-native again: still one copy of every turn', async () => {
    await phase('lcm-native', 2, async (say) => {
      assert.match(await say('TOOLCALL lcm_grep {"pattern": "kiwi-12,"}'), /kiwi-12/)
    })
    assert.equal(conv().length, 1)
    assert.deepEqual(markerCounts(), Array(16).fill(1))
  })
  await fake.close()

  await check('(c) after four switches: no duplicate rows, no orphaned pending rows, every turn recorded, the file is sound', async () => {
    const cid = conv()[0][0]
    // Each turn is one user and one assistant message (the tool turns have their calls too).
    const dup = sql(db, `SELECT role, content, count(*) FROM messages WHERE conversation_id = ${cid} AND role = 'user' GROUP BY role, content HAVING count(*) > 1`)
    assert.deepEqual(dup, [])
    assert.equal(sql(db, `SELECT count(*) FROM messages WHERE conversation_id = ${cid} AND role = 'user'`)[0][0], turns)
    const orphans = [
      'SELECT count(*) FROM pending_summary_nodes WHERE batch_id NOT IN (SELECT batch_id FROM pending_compaction_batches)',
      'SELECT count(*) FROM pending_summary_node_messages WHERE node_id NOT IN (SELECT node_id FROM pending_summary_nodes)',
      'SELECT count(*) FROM pending_summary_node_children WHERE node_id NOT IN (SELECT node_id FROM pending_summary_nodes)',
    ].map((q) => sql(db, q)[0][0])
    assert.deepEqual(orphans, [0, 0, 0])
    assert.equal(sql(db, `SELECT count(*) FROM turn_advancements WHERE session_key = '${key}'`)[0][0], turns)
    assert.deepEqual(legacyFallbacks([...logs, run.logFile]), [])
    await assertSound(db)
  })
  cleanUp(run)
}
