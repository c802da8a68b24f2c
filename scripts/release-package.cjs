#!/usr/bin/env node
// Turns this checkout's package.json into the one users install: no build or test scripts (a
// user's npm never runs cargo, and nothing warns about an install script), no binary in the
// main package, and every platform package of `napi.targets` as an optionalDependency at this
// version, so that npm fetches the one for the user's platform. The release workflow runs it
// before `npm publish`; with --pack DIR it also packs the main package and every platform
// package that holds its binary into DIR, leaving package.json as it was.
//
//   node scripts/release-package.cjs              # rewrite package.json in place (CI)
//   node scripts/release-package.cjs --pack DIR [--platform linux-x64-gnu]
//                                                 # tarballs in DIR, package.json unchanged
//
// A platform whose npm/<platform>/ holds no binary takes the one `npm run build` left in the
// checkout (lcm-native.<platform>.node), so a contributor's build packs as a release would.
'use strict'
const { execFileSync } = require('node:child_process')
const { copyFileSync, existsSync, mkdirSync, readFileSync, readdirSync, statSync, writeFileSync } = require('node:fs')
const { join, resolve } = require('node:path')

const ROOT = join(__dirname, '..')
const packAt = process.argv.indexOf('--pack')
const packDir = packAt >= 0 ? resolve(process.argv[packAt + 1] ?? '') : null
const platformAt = process.argv.indexOf('--platform')
const onlyPlatform = platformAt >= 0 ? process.argv[platformAt + 1] : null

const original = readFileSync(join(ROOT, 'package.json'), 'utf8')
const pkg = JSON.parse(original)
const platforms = readdirSync(join(ROOT, 'npm')).filter((d) => existsSync(join(ROOT, 'npm', d, 'package.json')))

const release = { ...pkg }
// What a user's install runs: nothing. Contributors build from source with the checkout's
// own package.json (`npm install` runs `prepare` there).
delete release.scripts
delete release.devDependencies
release.files = pkg.files.filter((f) => !f.endsWith('.node'))
release.optionalDependencies = Object.fromEntries(
  platforms.map((p) => [JSON.parse(readFileSync(join(ROOT, 'npm', p, 'package.json'), 'utf8')).name, pkg.version]),
)
// Every binary carries the word-piece vectors of recall by meaning, licensed apart (NOTICE):
// each platform package ships the notice beside its binary.
for (const p of platforms) {
  const file = join(ROOT, 'npm', p, 'package.json')
  const sub = JSON.parse(readFileSync(file, 'utf8'))
  const files = sub.files.includes('NOTICE') ? sub.files : [...sub.files, 'NOTICE']
  if (sub.version !== pkg.version || files !== sub.files) {
    writeFileSync(file, `${JSON.stringify({ ...sub, version: pkg.version, files }, null, 2)}\n`)
  }
  copyFileSync(join(ROOT, 'NOTICE'), join(ROOT, 'npm', p, 'NOTICE'))
}

if (!packDir) {
  writeFileSync(join(ROOT, 'package.json'), `${JSON.stringify(release, null, 2)}\n`)
  console.log(`package.json ready to publish: ${platforms.length} platform packages as optionalDependencies`)
} else {
  mkdirSync(packDir, { recursive: true })
  try {
    writeFileSync(join(ROOT, 'package.json'), `${JSON.stringify(release, null, 2)}\n`)
    const main = execFileSync('npm', ['pack', '--ignore-scripts', '--pack-destination', packDir], { cwd: ROOT, encoding: 'utf8' }).trim().split('\n').pop()
    console.log(join(packDir, main))
  } finally {
    writeFileSync(join(ROOT, 'package.json'), original)
  }
  for (const p of platforms) {
    if (onlyPlatform && p !== onlyPlatform) continue
    const dir = join(ROOT, 'npm', p)
    const built = join(ROOT, `lcm-native.${p}.node`)
    const packed = join(dir, `lcm-native.${p}.node`)
    // The root build when the package has none, or an older one (a build:all left it there
    // before the sources changed): a pack must never ship a stale binary.
    if (existsSync(built) && (!existsSync(packed) || statSync(built).mtimeMs > statSync(packed).mtimeMs)) copyFileSync(built, packed)
    if (!readdirSync(dir).some((f) => f.endsWith('.node'))) continue
    const tgz = execFileSync('npm', ['pack', '--pack-destination', packDir], { cwd: dir, encoding: 'utf8' }).trim().split('\n').pop()
    console.log(join(packDir, tgz))
  }
}
