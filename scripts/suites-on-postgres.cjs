#!/usr/bin/env node
// The engine-level vitest suites a second time, on PostgreSQL (LCM_TEST_ENGINE=postgres: each
// test's database is a schema of its own on the server in LCM_TEST_DATABASE_URL, see
// __test__/helpers.ts `freshDb`). One line and nothing else where no server is given (the
// README's two commands work without PostgreSQL), except where it is required (CI=true,
// LCM_REQUIRE_POSTGRES=1).
'use strict'
const { spawnSync } = require('node:child_process')
const path = require('node:path')

const SUITES = ['ingest', 'compaction', 'recall', 'auto-recall', 'rewrite'].map((s) => `__test__/${s}.spec.ts`)

if (!process.env.LCM_TEST_DATABASE_URL) {
  if (process.env.CI === 'true' || process.env.LCM_REQUIRE_POSTGRES === '1') {
    console.error('postgres: the engine suites must run on PostgreSQL here, and LCM_TEST_DATABASE_URL is not set')
    process.exit(1)
  }
  console.log('postgres: skipped the engine suites on PostgreSQL (LCM_TEST_DATABASE_URL is not set; npm test sets it)')
  process.exit(0)
}
const vitest = path.join(__dirname, '..', 'node_modules', 'vitest', 'vitest.mjs')
const r = spawnSync(process.execPath, [vitest, 'run', ...SUITES], {
  stdio: 'inherit',
  env: { ...process.env, LCM_TEST_ENGINE: 'postgres' },
})
process.exit(r.status ?? 1)
