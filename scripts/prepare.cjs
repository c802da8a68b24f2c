#!/usr/bin/env node
// `npm install` in a checkout builds the addon from source (napi build, release profile).
// `npm pack` and `npm publish` run this script too; they take the binary already built
// instead of rebuilding from scratch, and build only when there is none.
'use strict'
const { execFileSync } = require('node:child_process')
const { readdirSync } = require('node:fs')
const { join } = require('node:path')

const ROOT = join(__dirname, '..')
const packing = ['pack', 'publish'].includes(process.env.npm_command ?? '')
const built = readdirSync(ROOT).filter((f) => /^lcm-native\..+\.node$/.test(f))
if (packing && built.length > 0) {
  console.error(`prepare: packing the binary already built (${built.join(', ')}); \`npm run build\` rebuilds it`)
  process.exit(0)
}
// The CLI's own entry run by this Node, so the same call works where `npx` is `npx.cmd`.
const cli = require.resolve('@napi-rs/cli/package.json')
const bin = require('@napi-rs/cli/package.json').bin
execFileSync(process.execPath, [join(cli, '..', typeof bin === 'string' ? bin : bin.napi), 'build', '--platform', '--release'], {
  cwd: ROOT,
  stdio: 'inherit',
})
