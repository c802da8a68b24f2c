#!/usr/bin/env node
// @ts-check
// The OpenClaw plugin's options, written from the one description of them: the engine options
// in openclaw.plugin.json (config schema and form hints) and their names in
// plugin/engine-options.json come from the addon's `engineOptionSchema()`
// (src/config/schema.rs), and the README's plugin table from the manifest. The plugin's own options (dbPath's default, session patterns, …) are edited in the
// manifest itself.
//
//   node scripts/options.cjs          rewrite openclaw.plugin.json and README.md
//   node scripts/options.cjs --check  exit 1, naming the file, when either is not what it
//                                     would write (npm test runs this)

const fs = require('node:fs')
const path = require('node:path')

const ROOT = path.join(__dirname, '..')
const MANIFEST = path.join(ROOT, 'openclaw.plugin.json')
const README = path.join(ROOT, 'README.md')
/** The engine options the plugin passes through, for registration (which never loads the addon). */
const ENGINE_KEYS = path.join(ROOT, 'plugin', 'engine-options.json')
/** The README's plugin table lies between these headings. */
const TABLE_FROM = '### Plugin configuration'
const TABLE_TO = '### Switching from lossless-claw'

/**
 * The manifest with the engine options as the addon describes them; an option new to the
 * manifest goes after the last engine option already there.
 * @param {any} manifest @param {Record<string, Record<string, unknown>>} schema
 */
function withEngineOptions(manifest, schema) {
  const props = manifest.configSchema.properties
  const hints = manifest.uiHints
  const keys = Object.keys(props)
  const lastEngine = Math.max(-1, ...keys.map((k, i) => (k in schema ? i : -1)))
  const added = Object.keys(schema).filter((k) => !(k in props))
  const order = [...keys.slice(0, lastEngine + 1), ...added, ...keys.slice(lastEngine + 1)]
  /** @type {Record<string, unknown>} */
  const nextProps = {}
  /** @type {Record<string, unknown>} */
  const nextHints = {}
  for (const k of order) {
    nextProps[k] = schema[k] ?? props[k]
    const help = /** @type {string} */ (/** @type {any} */ (nextProps[k]).description)
    // One text per option: the form's help is the schema's description.
    nextHints[k] = { ...(hints[k] ?? {}), label: hints[k]?.label ?? k, help }
  }
  for (const k of Object.keys(hints)) if (!(k in nextHints)) nextHints[k] = hints[k]
  return { ...manifest, configSchema: { ...manifest.configSchema, properties: nextProps }, uiHints: nextHints }
}

/** The README's type column for a property's schema. @param {any} s */
function typeOf(s) {
  if (Array.isArray(s.enum)) return s.enum.map((/** @type {string} */ v) => `\`"${v}"\``).join(' \\| ')
  const types = Array.isArray(s.type) ? s.type : [s.type]
  return types.map((/** @type {string} */ t) => (t === 'array' ? `${s.items?.type ?? 'unknown'}[]` : t)).join(' or ')
}

/** README.md with its plugin table's rows written from the manifest. @param {string} readme @param {any} manifest */
function withTable(readme, manifest) {
  const from = readme.indexOf(TABLE_FROM)
  const to = readme.indexOf(TABLE_TO)
  if (from < 0 || to < from) throw new Error(`README.md: no "${TABLE_FROM}" section before "${TABLE_TO}"`)
  const section = readme.slice(from, to)
  const header = '|---|---|---|\n'
  const start = section.indexOf(header)
  if (start < 0) throw new Error('README.md: the plugin table has no header row')
  const end = section.indexOf('\n\n', start)
  const rows = Object.entries(manifest.configSchema.properties)
    .map(([k, s]) => `| \`${k}\` | ${typeOf(s)} | ${String(s.description).replace(/\|/g, '\\|')} |`)
    .join('\n')
  const table = `${section.slice(0, start + header.length)}${rows}${section.slice(end)}`
  return readme.slice(0, from) + table + readme.slice(to)
}

function main() {
  const check = process.argv.includes('--check')
  const { engineOptionSchema } = require('../index.js')
  const schema = engineOptionSchema()
  const manifestText = fs.readFileSync(MANIFEST, 'utf8')
  const manifest = withEngineOptions(JSON.parse(manifestText), schema)
  const nextManifest = `${JSON.stringify(manifest, null, 2)}\n`
  const readmeText = fs.readFileSync(README, 'utf8')
  const nextReadme = withTable(readmeText, manifest)
  const keysText = fs.existsSync(ENGINE_KEYS) ? fs.readFileSync(ENGINE_KEYS, 'utf8') : ''
  const stale = [
    [MANIFEST, manifestText, nextManifest],
    [README, readmeText, nextReadme],
    [ENGINE_KEYS, keysText, `${JSON.stringify(Object.keys(schema), null, 2)}\n`],
  ].filter(([, was, now]) => was !== now)
  if (check) {
    for (const [file] of stale) console.error(`${path.relative(ROOT, file)} is not what scripts/options.cjs writes from the engine's options: run \`node scripts/options.cjs\``)
    process.exit(stale.length ? 1 : 0)
  }
  for (const [file, , now] of stale) {
    fs.writeFileSync(file, now)
    console.log(`wrote ${path.relative(ROOT, file)}`)
  }
  if (!stale.length) console.log('openclaw.plugin.json, README.md and plugin/engine-options.json are up to date')
}

if (require.main === module) main()

module.exports = { typeOf, withEngineOptions, withTable }
