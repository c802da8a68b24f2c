// @ts-check
// End to end: the packed lcm-native package installed into the real OpenClaw (2026.9.6, Node 24,
// from the machine cache) and selected as its context engine, a local fake model, and the
// Gateway. Run by .ci/run after `npm test`: `node __test__/openclaw/e2e.mjs`.
//
// Scenarios, each in its own run directory, two at a time (E2E_ONLY=host,field,interop picks
// some; E2E_LANES=1 runs them one after another):
//   host     lossless-claw 0.15's file continued, the built-in engine switched out and back,
//            compaction with the host model, recall tools, redaction, a restart (e2e-host.mjs)
//   field    sessions unlike the unit tests': turns that fill a 40k window several times, and a
//            message larger than the whole window (e2e-field.mjs)
//   interop  lossless-claw 1.x from its packed plugin and lcm-native taking turns on one file
//            (e2e-interop.mjs)
//   postgres the plugin on PostgreSQL (dbUrl, a schema per agent): long turns, lcm_grep, the
//            server stopped and started again mid-run (e2e-postgres.mjs)
//   ui       the LCM panel in headless Chromium: the Control UI with the plugin's native UI
//            on, and `lcm-native ui` (e2e-ui.mjs; screenshots in artifacts/ui/)
// Also: the plugin type-checks against the installed openclaw/plugin-sdk.

import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

import { ROOT, check, results } from './e2e-lib.mjs'
import { fieldScenario } from './e2e-field.mjs'
import { hostScenario } from './e2e-host.mjs'
import { interopScenario } from './e2e-interop.mjs'
import { postgresScenario } from './e2e-postgres.mjs'
import { uiScenario } from './e2e-ui.mjs'
import { CACHE, ensureHost, killAll, packPlugin } from './harness.mjs'

const SCENARIOS = { host: hostScenario, field: fieldScenario, interop: interopScenario, postgres: postgresScenario, ui: uiScenario }
/** @type {(keyof typeof SCENARIOS)[]} by how long each takes (~230, 140, 120, 65, 65 s alone) */
const LONGEST_FIRST = ['interop', 'host', 'field', 'postgres', 'ui']

async function main() {
  const started = Date.now()
  const only = (process.env.E2E_ONLY ?? '').split(',').filter(Boolean)
  const unknown = only.filter((n) => !(n in SCENARIOS))
  if (unknown.length > 0) throw new Error(`E2E_ONLY: no scenario ${unknown.join(', ')} (have ${Object.keys(SCENARIOS).join(', ')})`)
  const host = await ensureHost()
  console.log(`openclaw e2e: host ready (${Date.now() - started} ms), cache ${CACHE}`)

  await check('the plugin type-checks against the installed openclaw/plugin-sdk', () => {
    const dir = join(ROOT, '__test__', 'openclaw', '.sdk-check')
    rmSync(dir, { recursive: true, force: true })
    mkdirSync(dir)
    symlinkSync(join(CACHE, 'openclaw', 'node_modules'), join(dir, 'node_modules'))
    writeFileSync(
      join(dir, 'check.ts'),
      [
        "import type { HarnessContextEngine } from 'openclaw/plugin-sdk/agent-harness-runtime'",
        "import type { OpenClawPluginApi } from 'openclaw/plugin-sdk/plugin-entry'",
        "import plugin from '../../../plugin/index.cjs'",
        "import { LcmNativeContextEngine } from '../../../plugin/context-engine.cjs'",
        'declare const engine: InstanceType<typeof LcmNativeContextEngine>',
        '// The host accepts the engine as its ContextEngine, and the plugin accepts the host API.',
        'export const asHost: HarnessContextEngine = engine',
        'declare const api: OpenClawPluginApi',
        'plugin.register(api)',
        '',
      ].join('\n'),
    )
    writeFileSync(
      join(dir, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext', strict: true, noEmit: true,
          skipLibCheck: true, allowJs: true, resolveJsonModule: true, types: ['node'], typeRoots: [join(ROOT, 'node_modules', '@types')],
        },
        files: ['check.ts'],
      }),
    )
    const r = spawnSync(process.execPath, [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', dir], { encoding: 'utf8', timeout: 120_000 })
    rmSync(dir, { recursive: true, force: true })
    assert.equal(r.status, 0, `tsc:\n${r.stdout}${r.stderr}`)
  })

  const packDir = mkdtempSync(join(tmpdir(), 'lcm-pack-'))
  try {
    const tgz = await packPlugin(ROOT, packDir)
    // Scenarios run in E2E_LANES lanes at once (default 2: each run dir, port, fake model and
    // database is its own; a turn mostly waits on processes, so two fit two cores), the longest
    // first; each lane takes the next when it is free.
    const lanes = Math.max(1, Number(process.env.E2E_LANES ?? 2) || 1)
    const queue = LONGEST_FIRST.filter((name) => only.length === 0 || only.includes(name))
    const lane = async () => {
      for (let name = queue.shift(); name !== undefined; name = queue.shift()) {
        const t = Date.now()
        console.log(`openclaw e2e: scenario ${name}`)
        try {
          await SCENARIOS[name](host, tgz)
        } catch (err) {
          // A scenario that cannot go on (a Gateway that does not start) is one failed check.
          await check(`scenario ${name} ran to its end`, () => {
            throw err
          })
        }
        console.log(`openclaw e2e: scenario ${name} took ${Math.round((Date.now() - t) / 1000)} s`)
      }
    }
    await Promise.all(Array.from({ length: Math.min(lanes, queue.length) }, lane))
  } finally {
    rmSync(packDir, { recursive: true, force: true })
  }

  const failed = results.filter((r) => !r.ok).length
  console.log(`openclaw e2e: ${Math.round((Date.now() - started) / 1000)} s`)
  console.log(`${results.length - failed} passed, ${failed} failed`)
  return failed
}

main()
  .then((failed) => process.exit(failed ? 1 : 0))
  .catch((err) => {
    console.error(err)
    killAll()
    process.exit(1)
  })
