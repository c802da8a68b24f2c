#!/usr/bin/env node
// The lcm-native command line: demo, stats (and, as they land, rewrite and prompts).
'use strict'

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')

const { LcmEngine } = require('../index.js')

const DEFAULT_TRANSCRIPT = path.join(__dirname, '..', 'data', 'transcripts', 'pi-coding-agent-theme-session.jsonl')

const USAGE = `usage: lcm-native <command> [options]

commands:
  demo [--transcript FILE] [--db PATH] [--budget N]
      Ingest a real agent transcript into a SQLite file and show what was stored.
      Default transcript: the bundled pi-coding-agent theme session. No network.
  stats --db PATH
      Conversations, messages and summaries per depth of a database.

Run 'lcm-native <command> --help' for details.`

class UsageError extends Error {}

/** Parses `--flag value` / `--flag=value` / `--switch` arguments against a spec. */
function parseArgs(argv, spec) {
  const out = { _: [] }
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]
    if (!arg.startsWith('--')) {
      out._.push(arg)
      continue
    }
    const [name, inline] = arg.slice(2).split(/=(.*)/s)
    const kind = spec[name]
    if (!kind) throw new UsageError(`unknown option --${name}`)
    if (kind === 'switch') {
      out[name] = true
    } else {
      const value = inline ?? argv[++i]
      if (value === undefined) throw new UsageError(`--${name} needs a value`)
      if (kind === 'int') {
        if (!/^-?\d+$/.test(value)) throw new UsageError(`--${name} must be an integer, got ${value}`)
        out[name] = Number(value)
      } else {
        out[name] = value
      }
    }
  }
  return out
}

function readTranscript(file) {
  const lines = fs.readFileSync(file, 'utf8').split('\n').filter((l) => l.trim() !== '')
  return lines.map((line, i) => {
    let m
    try {
      m = JSON.parse(line)
    } catch (e) {
      throw new Error(`${file}:${i + 1}: not JSON (${e.message})`)
    }
    const msg = {
      role: m.role === 'tool' ? 'toolResult' : m.role,
      content: m.content,
      timestamp: m.timestamp ?? m.createdAt,
      entryId: m.entryId ?? `line-${i + 1}`,
    }
    if (m.toolCallId) msg.toolCallId = m.toolCallId
    return msg
  })
}

function fmt(n) {
  return n.toLocaleString('en-US')
}

async function demo(argv) {
  const args = parseArgs(argv, { transcript: 'string', db: 'string', budget: 'int', help: 'switch' })
  if (args.help) return console.log('usage: lcm-native demo [--transcript FILE] [--db PATH] [--budget N]')
  if (args._.length) throw new UsageError(`unexpected argument ${args._[0]}`)
  const transcript = args.transcript ?? DEFAULT_TRANSCRIPT
  const dbPath = args.db ?? path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'lcm-demo-')), 'lcm.db')
  if (!fs.existsSync(transcript)) throw new Error(`transcript not found: ${transcript}`)

  const messages = readTranscript(transcript)
  const engine = await LcmEngine.open({ dbPath })
  try {
    console.log(`database   ${dbPath} (${engine.migration.summary})`)
    console.log(`transcript ${transcript} (${fmt(messages.length)} messages)`)
    const sessionId = path.basename(transcript, path.extname(transcript))
    let inserted = 0
    let skipped = 0
    let conversationId = 0
    const started = process.hrtime.bigint()
    // One call per turn, the way a host ingests.
    let turn = []
    const flush = async () => {
      if (!turn.length) return
      const out = await engine.ingest({ sessionId }, turn)
      inserted += out.inserted
      skipped += out.skipped
      conversationId = out.conversationId
      turn = []
    }
    for (const m of messages) {
      if (m.role === 'user') await flush()
      turn.push(m)
    }
    await flush()
    const ms = Number(process.hrtime.bigint() - started) / 1e6
    console.log(`ingested   ${fmt(inserted)} new, ${fmt(skipped)} already stored, in ${ms.toFixed(1)} ms (conversation ${conversationId})`)
    const stored = await engine.messages(conversationId, { limit: 100000 })
    const byRole = {}
    let tokens = 0
    for (const m of stored) {
      byRole[m.role] = (byRole[m.role] ?? 0) + 1
      tokens += m.tokenCount
    }
    console.log(`stored     ${Object.entries(byRole).map(([r, n]) => `${fmt(n)} ${r}`).join(', ')}; ${fmt(tokens)} tokens`)
  } finally {
    await engine.close()
  }
}

async function stats(argv) {
  const args = parseArgs(argv, { db: 'string', help: 'switch' })
  if (args.help) return console.log('usage: lcm-native stats --db PATH')
  if (!args.db) throw new UsageError('stats needs --db PATH')
  if (!fs.existsSync(args.db)) throw new Error(`database not found: ${args.db}`)
  const engine = await LcmEngine.open({ dbPath: args.db })
  try {
    console.log(`database ${args.db} (${fmt(fs.statSync(args.db).size)} bytes)`)
    const conversations = await engine.conversations()
    if (!conversations.length) console.log('no conversations')
    for (const c of conversations) {
      const sums = await engine.summaries(c.conversationId)
      const depths = {}
      for (const s of sums) depths[s.depth] = (depths[s.depth] ?? 0) + 1
      const fallback = sums.filter((s) => s.model === 'lcm-native/fallback').length
      const dtext = Object.entries(depths).map(([d, n]) => `d${d}: ${n}`).join(', ') || 'none'
      console.log(
        `conversation ${c.conversationId} (session ${c.sessionId}): ${fmt(c.messageCount)} messages, ` +
          `${fmt(c.contextItemCount)} live items, summaries ${dtext}${fallback ? `, ${fallback} fallback` : ''}`,
      )
    }
  } finally {
    await engine.close()
  }
}

async function main(argv) {
  const [command, ...rest] = argv
  switch (command) {
    case 'demo':
      return demo(rest)
    case 'stats':
      return stats(rest)
    case undefined:
    case '--help':
    case '-h':
    case 'help':
      console.log(USAGE)
      if (command === undefined) process.exitCode = 2
      return
    default:
      throw new UsageError(`unknown command ${command}`)
  }
}

main(process.argv.slice(2)).catch((err) => {
  if (err instanceof UsageError) {
    console.error(`lcm-native: ${err.message}\n\n${USAGE}`)
    process.exitCode = 2
  } else {
    console.error(`lcm-native: ${err.code ? `${err.code}: ` : ''}${err.message}`)
    process.exitCode = 1
  }
})
