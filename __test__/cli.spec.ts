// The command line: demo, stats, prompts, rewrite against a local OpenAI-shaped server, and
// its exit codes (0 done, 1 one-line error, 2 usage).
import { spawn, spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, watch, writeFileSync } from 'node:fs'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { dirname, join } from 'node:path'

import { afterAll, beforeAll, describe, expect, it } from 'vitest'

import { LcmEngine } from '../index.js'
import { ROOT, copyFixture, tempDir } from './helpers'

const BIN = join(ROOT, 'bin', 'lcm-native.cjs')

interface Run {
  code: number | null
  stdout: string
  stderr: string
}

/** Runs the CLI in a child process (asynchronously: the test's own server must keep answering). */
function cli(args: string[], env: Record<string, string> = {}): Promise<Run> {
  const clean = Object.fromEntries(
    Object.entries(process.env).filter(
      ([k]) => !k.startsWith('LCM_') && !k.startsWith('ANTHROPIC_') && !k.endsWith('_API_KEY') && k !== 'OPENCLAW_STATE_DIR' && k !== 'TZ',
    ),
  )
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], { env: { ...clean, HOME: tempDir(), ...env } })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (d) => (stdout += d))
    child.stderr.on('data', (d) => (stderr += d))
    const timer = setTimeout(() => {
      child.kill('SIGKILL')
      reject(new Error(`lcm-native ${args.join(' ')} did not exit within 60 s\n${stdout}\n${stderr}`))
    }, 60_000)
    child.on('close', (code) => {
      clearTimeout(timer)
      resolve({ code, stdout, stderr })
    })
  })
}

let demoDb: string
let demo: Run

beforeAll(async () => {
  demoDb = join(tempDir(), 'demo.db')
  demo = await cli(['demo', '--db', demoDb])
}, 120_000)

describe('demo and stats', () => {
  it('demo ingests the bundled transcript, compacts it offline and shows the DAG, the context and summaries', () => {
    expect(demo.code, demo.stderr).toBe(0)
    expect(demo.stdout).toMatch(/transcript .*pi-coding-agent-theme-session\.jsonl \(914 messages\)/)
    expect(demo.stdout).toContain('summarizer offline')
    expect(demo.stdout).toMatch(/ingested +914 new, 0 already stored/)
    expect(demo.stdout).toMatch(/compacted +\d+ leaf \+ \d+ condensed passes/)
    expect(demo.stdout).toMatch(/DAG: depth 0: \d+, depth 1: \d+/)
    expect(demo.stdout).toMatch(/├─ sum_[0-9a-f]{16} d1 \(\d+ inputs/)
    expect(demo.stdout).toMatch(/assembled for a 16,000-token budget: \d+ messages/)
    expect(demo.stdout).toMatch(/<summary id="sum_[0-9a-f]{16}" range="[^"]+" depth="[1-9]" descendants="\d+">/)
  })

  it('stats never changes a lossless-claw database; migrate upgrades it, once', async () => {
    const db = copyFixture('head-theme.db')
    const original = readFileSync(db)
    // Read commands read an un-upgraded file through an upgraded copy, leaving it as it is.
    const read = await cli(['stats', '--db', db])
    expect(read.code, read.stderr).toBe(0)
    expect(read.stdout).toMatch(/conversation 1 .*914 messages/)
    expect(read.stderr).toMatch(/^note: .*head-theme\.db is a lossless-claw database; read through an upgraded copy \(the file is not changed/)
    expect(readFileSync(db).equals(original)).toBe(true)
    const dry = await cli(['rewrite', '1', '--depth', '1', '--db', db])
    expect(dry.code, dry.stderr).toBe(0)
    expect(dry.stdout).toMatch(/Dry run: no summary was changed/)
    expect(readFileSync(db).equals(original)).toBe(true)
    const empty = join(tempDir(), 'empty.db')
    writeFileSync(empty, '')
    const none = await cli(['stats', '--db', empty])
    expect(none.code).toBe(1)
    expect(none.stderr).toMatch(/empty\.db is empty: not an lcm-native or lossless-claw database/)

    const first = await cli(['migrate', '--db', db])
    expect(first.code, first.stderr).toBe(0)
    expect(first.stdout).toMatch(/head-theme\.db \(lossless-claw\): /)
    expect(first.stdout).toMatch(/indexes created: .*\n  backfills: lcmNativeFtsBackfill v1/)
    const again = await cli(['migrate', '--db', db])
    expect(again.stdout).toMatch(/schema is up to date; nothing was done/)
    const stats = await cli(['stats', '--db', db])
    expect(stats.code, stats.stderr).toBe(0)
    expect(stats.stderr).toBe('')
    expect(stats.stdout).toMatch(/conversation 1 /)
  })

  it('rewrite --apply upgrades an old database first, and says so', async () => {
    const db = copyFixture('head-theme.db')
    const r = await cli(['rewrite', '1', '--depth', '1', '--apply', '--db', db])
    expect(r.code, r.stderr).toBe(0)
    expect(r.stderr).toMatch(/^note: .*head-theme\.db was upgraded in place for lcm-native: /m)
  })

  it('stats shows conversations, messages, summaries per depth, fallbacks and the size', async () => {
    const r = await cli(['stats', '--db', demoDb])
    expect(r.code, r.stderr).toBe(0)
    expect(r.stdout).toMatch(/^database .*demo\.db: [\d,]+ bytes/)
    expect(r.stdout).toMatch(/conversation 1 \(session pi-coding-agent-theme-session\): 914 messages, \d+ live items, summaries d0: \d+, d1: \d+(, d\d+: \d+)*, 0 fallback/)
    // The demo compacts, then assembles once: nothing before it to keep.
    expect(r.stdout).toMatch(/prompt cache: 1 assembly, [\d,]+ tokens sent, 0\.0 % of them the previous request's prefix; 0 breaks, 1 compaction/)
    const json = JSON.parse((await cli(['stats', '--db', demoDb, '--json'])).stdout)
    expect(json).toMatchObject({ upgradeNeeded: false, conversations: [{ conversationId: 1, messageCount: 914, fallbackSummaries: 0 }] })
    expect(json.bytes).toBeGreaterThan(0)
    expect(json.conversations[0].fidelity[0]).toMatchObject({ depth: 0 })
  })
})

describe('the prompt-cache report', () => {
  it('stats and doctor show, per conversation, what was sent, the share that was the previous request\'s prefix, breaks and compactions', async () => {
    const db = join(tempDir(), 'lcm.db')
    const engine = await LcmEngine.open({ dbPath: db })
    const target = { sessionKey: 'agent:main:explicit:costly' }
    const say = (i: number) => engine.ingest(target, [{ role: 'user', content: `turn ${i} ${'words '.repeat(30)}` }, { role: 'assistant', content: `reply ${i}` }])
    const { conversationId } = await say(1)
    for (let i = 2; i <= 4; i++) {
      await engine.assemble(conversationId, { tokenBudget: 50_000 })
      await say(i)
    }
    await engine.close()
    const stats = await cli(['stats', '--db', db])
    expect(stats.code, stats.stderr).toBe(0)
    expect(stats.stdout).toMatch(/prompt cache: 3 assemblies, [\d,]+ tokens sent, \d+\.\d % of them the previous request's prefix; 0 breaks, 0 compactions/)
    const json = JSON.parse((await cli(['stats', '--db', db, '--json'])).stdout)
    expect(json.conversations[0].promptCache).toMatchObject({ assemblies: 3, breaks: 0, compactions: 0 })
    expect(json.conversations[0].promptCache.tokensKept).toBeGreaterThan(0)
    const doctor = await cli(['doctor', '--db', db])
    expect(doctor.code, doctor.stderr).toBe(0)
    expect(doctor.stdout).toMatch(/conversation 1 \(agent:main:explicit:costly\): prompt cache: 3 assemblies/)
  })
})

describe('README', () => {
  it('the Quick start runs as it is written, pasted into a file', async () => {
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8')
    const block = /## Quick start\n\n```js\n([\s\S]*?)```/.exec(readme)?.[1]
    expect(block).toBeDefined()
    // Inside the checkout, unchanged: `require('lcm-native')` is the package requiring itself
    // by name (package.json's `exports`), as an installed package would be found.
    const dir = mkdtempSync(join(ROOT, '.quick-start-'))
    try {
      writeFileSync(join(dir, 'quick-start.cjs'), block ?? '')
      const r = spawnSync(process.execPath, ['quick-start.cjs'], { cwd: dir, encoding: 'utf8', env: { ...process.env, HOME: tempDir() } })
      expect(r.status, r.stderr).toBe(0)
      expect(r.stdout.split('\n')[0]).toBe('3')
      expect(existsSync(join(dir, 'lcm.db'))).toBe(true)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})

describe('read commands', () => {
  it('conversations, messages, show, grep, describe, expand and verify answer in text and --json', async () => {
    const conversations = await cli(['conversations', '--db', demoDb, '--json'])
    expect(conversations.code, conversations.stderr).toBe(0)
    const list = JSON.parse(conversations.stdout)
    expect(list).toHaveLength(1)
    expect(list[0]).toMatchObject({ conversationId: 1, messageCount: 914 })
    expect((await cli(['conversations', '--db', demoDb])).stdout).toMatch(/^1 {2}pi-coding-agent-theme-session {2}914 messages/)

    const page = JSON.parse((await cli(['messages', '1', '--limit', '3', '--after', '2', '--db', demoDb, '--json'])).stdout)
    expect(page.map((m: { seq: number }) => m.seq)).toEqual([3, 4, 5])
    const text = await cli(['messages', '1', '--limit', '3', '--db', demoDb])
    expect(text.stdout.trim().split('\n')).toHaveLength(4)
    expect(text.stdout).toMatch(/\(more: lcm-native messages 1 --after 3\)/)

    // A message with a tool call shows its name and arguments.
    const withCall = page.find((m: { content: unknown }) => Array.isArray(m.content) && m.content.some((b: { type: string }) => b.type === 'toolCall'))
    expect(withCall).toBeDefined()
    const show = await cli(['show', String(withCall.messageId), '--db', demoDb])
    expect(show.code, show.stderr).toBe(0)
    expect(show.stdout).toMatch(/\[tool call: \w+\] \{/)

    const grep = JSON.parse((await cli(['grep', 'theme', '--limit', '2', '--db', demoDb, '--json'])).stdout)
    expect(grep.hits).toHaveLength(2)
    const regex = await cli(['grep', 'them[e]s?\\.ts', '--mode', 'regex', '--scope', 'messages', '--db', demoDb])
    expect(regex.code, regex.stderr).toBe(0)
    expect(regex.stdout).toMatch(/^#\d+ /m)

    const summaryHit = JSON.parse((await cli(['grep', 'theme', '--scope', 'summaries', '--limit', '1', '--db', demoDb, '--json'])).stdout).hits[0]
    const leaf = JSON.parse((await cli(['describe', summaryHit.summaryId, '--db', demoDb, '--json'])).stdout)
    expect(leaf.type).toBe('summary')
    const described = await cli(['describe', leaf.summaryId, '--db', demoDb])
    expect(described.stdout).toMatch(new RegExp(`^${leaf.summaryId}: (leaf|condensed) d\\d`))
    const expanded = await cli(['expand', leaf.summaryId, '--tokens', '2000', '--db', demoDb, '--json'])
    expect(JSON.parse(expanded.stdout).entries.length).toBeGreaterThan(0)

    // A condensed node's expansion as text is a tree: every entry right under the one it was
    // reached from (the engine's list is breadth first).
    const root = JSON.parse((await cli(['conversations', '--db', demoDb, '--json'])).stdout)[0]
    expect(root.summariesByDepth.length).toBeGreaterThan(1)
    const reader = await LcmEngine.open({ dbPath: demoDb, readOnly: true })
    const top = (await reader.summaries(1, { depth: 1, limit: 1 }))[0]?.summaryId
    await reader.close()
    expect(top).toBeTruthy()
    const tree = JSON.parse((await cli(['expand', top, '--tokens', '200000', '--db', demoDb, '--json'])).stdout)
    const drawn = (await cli(['expand', top, '--tokens', '200000', '--db', demoDb])).stdout
    const ids = [...drawn.matchAll(/^ *(sum_[0-9a-f]+|#\d+) /gm)].map((m) => m[1])
    const parentOf = new Map(tree.entries.map((e: { type: string; summaryId?: string; messageId?: number; parentId: string }) => [e.type === 'summary' ? e.summaryId : `#${e.messageId}`, e.parentId]))
    const open = [top]
    for (const id of ids) {
      while (open.length && open.at(-1) !== parentOf.get(id)) open.pop()
      expect(open.at(-1), `${id} drawn away from its parent ${parentOf.get(id)}`).toBe(parentOf.get(id))
      if (id.startsWith('sum_')) open.push(id)
    }
    expect(ids.length).toBe(tree.entries.length)

    const verify = await cli(['verify', '--db', demoDb])
    expect(verify.code).toBe(0)
    expect(verify.stdout).toMatch(/^ok: 1 conversation, 914 messages, \d+ summaries checked/)
    const missing = await cli(['show', '999999', '--db', demoDb])
    expect(missing.code).toBe(1)
    expect(missing.stderr).toMatch(/^lcm-native: E_NOT_FOUND: /)
  })

  it('verify and doctor name the turns lossless-claw 1.0 stored twice, and change nothing', async () => {
    const db = copyFixture('lossless-claw-doubled.db')
    const original = readFileSync(db)
    const verify = await cli(['verify', '--db', db, '--json'])
    expect(verify.code, verify.stderr).toBe(0)
    const report = JSON.parse(verify.stdout)
    expect(report.ok).toBe(true)
    expect(report.copies).toHaveLength(11)
    expect(report.copies[0]).toEqual({ conversationId: 1, originalId: 15, copyId: 17, role: 'user' })
    const doctor = await cli(['doctor', '--db', db])
    expect(doctor.code, doctor.stderr).toBe(0)
    expect(doctor.stdout).toMatch(/conversation 1: 11 messages stored twice by lossless-claw 1\.0/)
    expect(doctor.stdout).toMatch(/copy of original: 17 of 15, 22 of 18/)
    expect(readFileSync(db).equals(original)).toBe(true)
  })

  it('fold-copies lists the copies on a dry run, and with --apply writes a backup first and folds them', async () => {
    const db = copyFixture('lossless-claw-doubled.db')
    const dry = await cli(['fold-copies', '--db', db])
    expect(dry.code, dry.stderr).toBe(0)
    expect(dry.stdout).toMatch(/conversation 1: 11 copies \(copy of original: 17 of 15, 22 of 18/)
    expect(dry.stdout).toMatch(/would fold 11 copies \(11 live context rows, 0 summary links\); nothing was written/)
    expect(await cli(['fold-copies', '--db', db, '--backup', `${db}.b`])).toMatchObject({ code: 2 })
    const backup = `${db}.before.db`
    const applied = await cli(['fold-copies', '--db', db, '--apply', '--backup', backup])
    expect(applied.code, applied.stderr).toBe(0)
    expect(applied.stdout).toContain(`folded 11 copies (11 live context rows, 0 summary links) into their originals; backup ${backup}`)
    const before = JSON.parse((await cli(['verify', '--db', backup, '--json'])).stdout)
    expect(before.messages).toBe(49)
    expect(before.copies).toHaveLength(11)
    const after = JSON.parse((await cli(['verify', '--db', db, '--json'])).stdout)
    expect(after.ok).toBe(true)
    expect(after.messages).toBe(38)
    expect(after.copies).toEqual([])
    const again = await cli(['fold-copies', '--db', db, '--apply'])
    expect(again.stdout).toMatch(/^no copies/)
    expect(readdirSync(dirname(db)).filter((f) => f.includes('before-fold-copies'))).toEqual([])
  })

  it('doctor says what to run next, and read commands never change a lossless-claw file', async () => {
    const db = copyFixture('head-theme.db')
    const original = readFileSync(db)
    const doctor = await cli(['doctor', '--db', db, '--json'])
    expect(doctor.code, doctor.stderr).toBe(0)
    const report = JSON.parse(doctor.stdout)
    expect(report.ok).toBe(true)
    expect(report.upgradeNeeded).toBe(true)
    const fixes = report.advice.map((a: { fix: string }) => a.fix).join('\n')
    expect(fixes).toMatch(/lcm-native migrate --db /)
    expect(fixes).toMatch(/lcm-native rewrite 1 --fallbacks --apply/)
    expect(fixes).toMatch(/lcm-native fidelity --conversation 1/)
    for (const args of [['conversations'], ['messages', '1'], ['grep', 'theme'], ['verify'], ['history', 'sum_x'], ['backup', join(tempDir(), 'copy.db')]]) {
      await cli([...args, '--db', db])
    }
    expect(readFileSync(db).equals(original)).toBe(true)
    expect(existsSync(`${db}-wal`) && statSync(`${db}-wal`).size > 0).toBe(false)
  })

  it('takes the engine options from OpenClaw\'s config entry and LCM_* as the plugin does, flags over both', async () => {
    const dir = tempDir()
    const db = join(dir, 'lcm.db')
    const made = await cli(['demo', '--db', db])
    expect(made.code, made.stderr).toBe(0)
    const total = (r: Run) => {
      const m = /(?:Total|would be): ([\d,]+)t → ([\d,]+)t/.exec(r.stdout)
      expect(m, r.stdout + r.stderr).not.toBeNull()
      return [Number(m![1].replace(/,/g, '')), Number(m![2].replace(/,/g, ''))]
    }
    const elsewhere = { OPENCLAW_STATE_DIR: join(dir, 'elsewhere') }
    // The demo's sizes are the defaults but its chunks: a rewrite asks for what compaction did.
    const plain = await cli(['rewrite', '1', '--all', '--db', db], elsewhere)
    expect(plain.code, plain.stderr).toBe(0)
    const [before, after] = total(plain)
    expect(Math.abs(after - before) / before).toBeLessThan(0.05)
    // The plugin entry's sizes apply (and its dbPath: no --db), as compaction in OpenClaw used them.
    const config = join(dir, 'openclaw.json')
    writeFileSync(config, JSON.stringify({ plugins: { entries: { 'lcm-native': { enabled: true, config: { dbPath: db, leafTargetTokens: 400 } } } } }))
    const configured = await cli(['rewrite', '1', '--all', '--config', config], elsewhere)
    expect(configured.code, configured.stderr).toBe(0)
    const [, smaller] = total(configured)
    expect(smaller).toBeLessThan(after * 0.9)
    // The default config file in OpenClaw's state directory is read too; LCM_* and flags give the same.
    expect(total(await cli(['rewrite', '1', '--all'], { OPENCLAW_STATE_DIR: dir }))).toEqual([before, smaller])
    expect(total(await cli(['rewrite', '1', '--all', '--db', db], { ...elsewhere, LCM_LEAF_TARGET_TOKENS: '400' }))).toEqual([before, smaller])
    expect(total(await cli(['rewrite', '1', '--all', '--db', db, '--leaf-target-tokens', '400'], elsewhere))).toEqual([before, smaller])
    const bad = await cli(['stats', '--config', join(dir, 'nope.json')])
    expect(bad.code).toBe(1)
    expect(bad.stderr).toMatch(/E_INVALID_CONFIG: config file not found/)
  })
})

describe('exit codes', () => {
  const usage: string[][] = [
    [],
    ['rewrite'],
    ['rewrite', '1'],
    ['rewrite', 'one', '--all'],
    ['rewrite', '1', '--all', '--depth', '1'],
    ['rewrite', '1', '--depth', 'x'],
    ['prompts'],
    ['prompts', '--list', '--show', 'leaf'],
    ['messages'],
    ['show', 'x'],
    ['grep'],
    ['grep', 'x', '--mode', 'fuzzy'],
    ['verify', 'extra'],
    ['stats', '--colour'],
    ['demo', '--budget'],
    ['rewrite', '1', '--all', '--apply=false'],
    ['rewrite', '1', '--all', '--dry-run', '--apply'],
    ['rewrite', '1', '--all', '--timestamps=maybe'],
    ['rewrite', '1', '--all', '--timestamps', '--no-timestamps'],
    ['rewrite', '1', '--all', '--timestamps', 'false'],
    ['rewrite', '1', '--all', '--fallbacks'],
  ]
  it.each(usage)('bad arguments %j print usage and exit 2', async (...args) => {
    const r = await cli(args)
    expect(r.code).toBe(2)
    expect(r.stdout + r.stderr).toMatch(/usage: lcm-native/)
  })

  it('-h and --help after any command print its usage and exit 0; --version prints the version', async () => {
    for (const args of [['stats', '-h'], ['rewrite', '1', '--all', '--help'], ['prompts', '-h'], ['history', '--help']]) {
      const r = await cli(args)
      expect(r.code, args.join(' ')).toBe(0)
      expect(r.stdout, args.join(' ')).toMatch(new RegExp(`^usage: lcm-native ${args[0]}`))
    }
    for (const flag of ['--version', '-V']) {
      const r = await cli([flag])
      expect(r.code).toBe(0)
      expect(r.stdout.trim()).toBe(`lcm-native ${JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).version}`)
    }
  })

  it('output into a pipe closed early ends quietly (no EPIPE stack)', async () => {
    const r = spawnSync('sh', ['-c', `"${process.execPath}" "${BIN}" --help | head -c 20 > /dev/null`], { encoding: 'utf8', env: { ...process.env, HOME: tempDir() } })
    expect(r.stderr).not.toMatch(/EPIPE|Error/)
    const cut = join(tempDir(), 'p.db')
    const big = spawnSync('sh', ['-c', `"${process.execPath}" "${BIN}" demo --db "${cut}" | head -n 1; echo "exit $?"`], { encoding: 'utf8', env: { ...process.env, HOME: tempDir() } })
    expect(big.stderr).not.toMatch(/EPIPE|Unhandled|Error:/)
    expect(big.stdout).toMatch(/exit 0/)
    // The engine was closed on the way out: its log is checkpointed, not left behind.
    expect(existsSync(`${cut}-wal`) ? statSync(`${cut}-wal`).size : 0).toBe(0)
  })

  it('a missing database or conversation is a one-line error and exit 1', async () => {
    for (const args of [
      ['stats', '--db', join(tempDir(), 'missing.db')],
      ['rewrite', '1', '--all', '--db', join(tempDir(), 'missing.db')],
      ['rewrite', '42', '--all', '--db', demoDb],
    ]) {
      const r = await cli(args)
      expect(r.code, args.join(' ')).toBe(1)
      const lines = r.stderr.trim().split('\n')
      expect(lines).toHaveLength(1)
      expect(lines[0]).toMatch(/^lcm-native: E_NOT_FOUND: (database not found: |conversation 42 not found)/)
    }
  })

  it('a provider\'s public API without its key fails before sending; migrate of a missing file says why', async () => {
    const r = await cli(['rewrite', '1', '--all', '--provider', 'openai', '--db', demoDb])
    expect(r.code).toBe(1)
    expect(r.stderr).toMatch(/^lcm-native: E_INVALID_CONFIG: no API key for openai: set OPENAI_API_KEY .*nothing was sent/)
    const text = join(tempDir(), 'notes.txt')
    writeFileSync(text, 'not a database, just some notes that are long enough to have a header page\n'.repeat(20))
    const notDb = await cli(['stats', '--db', text])
    expect(notDb.code).toBe(1)
    expect(notDb.stderr).toMatch(/not a SQLite database .*check the database path \(dbPath, the CLI's --db\)/)
    // It names the file.
    expect(notDb.stderr.startsWith(`lcm-native: E_SCHEMA: ${text}: the file is not a SQLite database`)).toBe(true)
    const m = await cli(['migrate', '--db', join(tempDir(), 'new.db')])
    expect(m.code).toBe(1)
    expect(m.stderr).toMatch(/database not found: .*new\.db \(migrate upgrades an existing file; LcmEngine\.open and OpenClaw create new ones\)/)
  })

  it('an unknown command is one line with the closest command, and exit 2', async () => {
    const r = await cli(['grepp', 'x'])
    expect(r.code).toBe(2)
    expect(r.stderr.trim().split('\n')).toEqual(['lcm-native: unknown command grepp; did you mean grep? (lcm-native --help lists the commands)'])
    expect((await cli(['frobnicate'])).stderr).toMatch(/^lcm-native: unknown command frobnicate \(lcm-native --help/)
    expect((await cli(['grpe', 'x'])).stderr).toMatch(/unknown command grpe; did you mean grep\?/)
    const flag = await cli(['messages', '1', '--limt', '3'])
    expect(flag.code).toBe(2)
    expect(flag.stderr).toMatch(/unknown option --limt; did you mean --limit\?/)
    expect((await cli(['messages', '1', '--frobnicate'])).stderr).not.toMatch(/did you mean/)
  })

  it('a bad option in the config or the environment is one line with one prefix, and a near name is suggested', async () => {
    const dir = tempDir()
    writeFileSync(join(dir, 'openclaw.json'), JSON.stringify({ plugins: { entries: { 'lcm-native': { config: { freshTailCont: 3 } } } } }))
    const typo = await cli(['stats', '--db', demoDb, '--config', join(dir, 'openclaw.json')])
    expect(typo.code).toBe(1)
    expect(typo.stderr).toMatch(/^lcm-native: E_INVALID_CONFIG: invalid config option `freshTailCont`: unknown option; did you mean freshTailCount\?/)
    const env = await cli(['stats', '--db', demoDb], { LCM_FRESH_TAIL_COUNT: 'abc' })
    expect(env.stderr.trim()).toBe('lcm-native: E_INVALID_CONFIG: invalid config option `freshTailCount (from LCM_FRESH_TAIL_COUNT)`: "abc" is not a number')
  })
})

describe('what --db names', () => {
  it('a FIFO, a directory or a device is refused before anything opens it (E_INVALID_INPUT), and nothing is created beside it', async () => {
    const dir = tempDir()
    const fifo = join(dir, 'fifo')
    expect(spawnSync('mkfifo', [fifo]).status).toBe(0)
    mkdirSync(join(dir, 'folder'))
    const runs: [string[], RegExp][] = [
      [['stats', '--db', fifo], /the database .*fifo is a FIFO \(named pipe\), not a database file/],
      [['verify', '--db', fifo], /the database .*fifo is a FIFO/],
      [['migrate', '--db', fifo], /the database .*fifo is a FIFO/],
      [['fidelity', '--db', fifo], /the database .*fifo is a FIFO/],
      [['redact', '--finish', '--db', fifo], /the database .*fifo is a FIFO/],
      [['demo', '--db', fifo], /the database .*fifo is a FIFO/],
      [['copy', '--from', fifo, '--to', join(dir, 'copy.db')], /--from .*fifo is a FIFO/],
      [['backup', '--db', demoDb, fifo], /the backup file .*fifo is a FIFO/],
      [['stats', '--db', join(dir, 'folder')], /the database .*folder is a directory/],
      [['migrate', '--db', join(dir, 'folder')], /the database .*folder is a directory/],
    ]
    for (const [args, message] of runs) {
      const r = await cli(args)
      expect(r.code, args.join(' ')).toBe(1)
      expect(r.stderr.trim().split('\n'), args.join(' ')).toHaveLength(1)
      expect(r.stderr, args.join(' ')).toMatch(/^lcm-native: E_INVALID_INPUT: /)
      expect(r.stderr, args.join(' ')).toMatch(message)
    }
    expect(readdirSync(dir).sort()).toEqual(['fifo', 'folder'])
    expect(readdirSync(join(dir, 'folder'))).toEqual([])
  })

  it('/dev/zero is a character device, not a database: refused, and no /dev/zero-journal is made', async () => {
    const journal = existsSync('/dev/zero-journal')
    for (const command of ['stats', 'verify', 'migrate', 'fidelity']) {
      const r = await cli([command, '--db', '/dev/zero'])
      expect(r.code, command).toBe(1)
      expect(r.stderr, command).toMatch(/^lcm-native: E_INVALID_INPUT: the database \/dev\/zero is a character device, not a database file/)
    }
    // (Where one was left before this run, by an older lcm-native, it is not this run's.)
    if (!journal) expect(existsSync('/dev/zero-journal')).toBe(false)
  })

  it('verify --conversation of a conversation that does not exist is E_NOT_FOUND and exit 1, not a clean bill', async () => {
    const r = await cli(['verify', '--conversation', '999', '--db', demoDb])
    expect(r.code).toBe(1)
    expect(r.stderr.trim().split('\n')).toEqual(['lcm-native: E_NOT_FOUND: conversation 999 not found'])
    expect(r.stdout).toBe('')
    const json = await cli(['verify', '--conversation', '999', '--json', '--db', demoDb])
    expect(json.code).toBe(1)
    expect(json.stdout).toBe('')
    const one = await cli(['verify', '--conversation', '1', '--db', demoDb])
    expect(one.code, one.stderr).toBe(0)
    expect(one.stdout).toMatch(/^ok: 1 conversation, 914 messages/)
  })
})

describe('an interrupted read of a lossless-claw file', () => {
  /**
   * Runs `verify` on a copy of a lossless-claw file with a TMPDIR of its own, stops it (SIGSTOP)
   * as soon as its upgraded copy's folder exists (`stage` 'folder'), or once the copy is being
   * written in it ('copy'), sends `signal` and lets it go on.
   */
  async function interrupted(signal: NodeJS.Signals, stage: 'folder' | 'copy') {
    const db = copyFixture('head-theme.db')
    const original = readFileSync(db)
    const tmp = tempDir()
    const child = spawn(process.execPath, [BIN, 'verify', '--db', db], { env: { ...process.env, HOME: tempDir(), TMPDIR: tmp } })
    let stderr = ''
    child.stderr.on('data', (d) => (stderr += d))
    const watchers: ReturnType<typeof watch>[] = []
    let sent = false
    let copied = false
    const send = () => {
      // Stopped, the signal waits until SIGCONT: the process meets it where it was stopped.
      sent = true
      child.kill(signal)
      child.kill('SIGCONT')
    }
    watchers.push(
      watch(tmp, (_, name) => {
        if (sent || watchers.length > 1 || !String(name).startsWith('lcm-read-')) return
        child.kill('SIGSTOP')
        const folder = join(tmp, String(name))
        if (stage === 'folder') return send()
        watchers.push(
          watch(folder, (__, file) => {
            if (sent || file !== 'lcm.db') return
            child.kill('SIGSTOP')
            copied = existsSync(join(folder, 'lcm.db'))
            send()
          }),
        )
        child.kill('SIGCONT')
      }),
    )
    const [code, how] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve) => child.on('close', (c, s) => resolve([c, s])))
    for (const w of watchers) w.close()
    return { sent, copied, code, how, stderr, left: readdirSync(tmp), unchanged: readFileSync(db).equals(original) }
  }

  it.each([
    ['SIGTERM', 'folder'],
    ['SIGINT', 'folder'],
    ['SIGHUP', 'folder'],
    ['SIGTERM', 'copy'],
    ['SIGINT', 'copy'],
    ['SIGHUP', 'copy'],
  ] as const)('%s once its upgraded copy\'s %s exists: the copy is removed, and the process ends by the signal', async (signal, stage) => {
    const r = await interrupted(signal, stage)
    expect(r.sent, `the read ended before it was stopped: ${r.stderr}`).toBe(true)
    if (stage === 'copy') expect(r.copied).toBe(true)
    expect(r.left).toEqual([])
    expect([r.code, r.how]).toEqual([null, signal])
    expect(r.unchanged).toBe(true)
  })

  it('a read that ends (in success or failure) leaves no copy either', async () => {
    const tmp = tempDir()
    const db = copyFixture('head-theme.db')
    const ok = await cli(['verify', '--db', db], { TMPDIR: tmp })
    expect(ok.code, ok.stderr).toBe(0)
    const missing = await cli(['describe', 'sum_missing', '--db', db], { TMPDIR: tmp })
    expect(missing.code).toBe(1)
    expect(missing.stderr).toMatch(/E_NOT_FOUND/)
    // A reader that stops early (`| head`): the process ends through exit(0), the copy with it.
    const head = spawnSync('sh', ['-c', `"${process.execPath}" "${BIN}" messages 1 --limit 1000 --db "${db}" | head -n 1; echo "exit $?"`], {
      encoding: 'utf8',
      env: { ...process.env, HOME: tempDir(), TMPDIR: tmp },
    })
    expect(head.stdout).toMatch(/exit 0/)
    expect(readdirSync(tmp)).toEqual([])
  })
})

describe('large output, and failures without a code', () => {
  /** A preload that makes the addon's answers fail the way napi-rs reports a string V8 refuses. */
  function preload(body: string): Record<string, string> {
    const file = join(tempDir(), 'preload.cjs')
    writeFileSync(
      file,
      `const { LcmEngine } = require(${JSON.stringify(join(ROOT, 'index.js'))})
       const tooLarge = () => Promise.reject(Object.assign(new Error(''), { code: 'GenericFailure' }))
       ${body}`,
    )
    return { NODE_OPTIONS: `--require ${file}` }
  }

  it('messages is read a page at a time and printed as it comes: --json is what JSON.stringify prints; a page too large for one answer is asked for in halves', async () => {
    const plain = await cli(['messages', '1', '--limit', '300', '--json', '--db', demoDb])
    expect(plain.code, plain.stderr).toBe(0)
    const list = JSON.parse(plain.stdout)
    expect(list).toHaveLength(300)
    expect(plain.stdout).toBe(`${JSON.stringify(list, null, 2)}\n`)
    // Every answer of more than 7 messages is "too large": the same output, from pages of at most 7.
    const asked: string[] = []
    const halves = preload(`
      const messages = LcmEngine.prototype.messages
      LcmEngine.prototype.messages = function (id, o) {
        process.stderr.write('asked ' + o.limit + ' after ' + o.afterSeq + '\\n')
        return o.limit > 7 ? tooLarge() : messages.call(this, id, o)
      }`)
    const paged = await cli(['messages', '1', '--limit', '300', '--json', '--db', demoDb], halves)
    expect(paged.code, paged.stderr).toBe(0)
    expect(paged.stdout).toBe(plain.stdout)
    asked.push(...paged.stderr.trim().split('\n'))
    expect(asked.slice(0, 6)).toEqual(['asked 100 after undefined', 'asked 50 after undefined', 'asked 25 after undefined', 'asked 13 after undefined', 'asked 7 after undefined', 'asked 7 after 7'])
    const text = await cli(['messages', '1', '--limit', '20', '--db', demoDb])
    expect((await cli(['messages', '1', '--limit', '20', '--db', demoDb], halves)).stdout).toBe(text.stdout)
    expect(text.stdout).toMatch(/\(more: lcm-native messages 1 --after 20\)\n$/)
    // One message too large alone: a coded one-line error.
    const never = await cli(['messages', '1', '--after', '5', '--db', demoDb], preload('LcmEngine.prototype.messages = tooLarge'))
    expect(never.code).toBe(1)
    expect(never.stderr.trim().split('\n')).toEqual([
      "lcm-native: E_TOO_LARGE: the message after seq 5 of conversation 1 is larger than one JavaScript string can hold (about 512 MB as JSON); read it with 'lcm-native show' or lcm_describe's pages",
    ])
  })

  it('every failure is printed with a code: the addon\'s GenericFailure, a plain Error, a system error', async () => {
    const cases: [string, RegExp][] = [
      ['LcmEngine.prototype.conversations = tooLarge', /^lcm-native: E_TOO_LARGE: the answer is larger than one JavaScript string can hold/],
      ["LcmEngine.prototype.conversations = () => Promise.reject(new Error('boom'))", /^lcm-native: E_INTERNAL: boom$/],
      ["LcmEngine.prototype.conversations = () => { throw new TypeError('not a function') }", /^lcm-native: E_INTERNAL: not a function$/],
      ["LcmEngine.prototype.conversations = () => Promise.reject(Object.assign(new Error(''), { code: 'InvalidArg' }))", /^lcm-native: E_INTERNAL: InvalidArg without a message$/],
      ["LcmEngine.prototype.conversations = () => require('node:fs').promises.readFile('/nonexistent/x')", /^lcm-native: E_IO: ENOENT: no such file or directory/],
    ]
    for (const [body, line] of cases) {
      const r = await cli(['conversations', '--db', demoDb], preload(body))
      expect(r.code, body).toBe(1)
      expect(r.stderr.trim().split('\n'), body).toHaveLength(1)
      expect(r.stderr.trim(), body).toMatch(line)
    }
    const transcript = await cli(['demo', '--transcript', join(tempDir(), 'none.jsonl'), '--db', join(tempDir(), 'd.db')])
    expect(transcript.stderr).toMatch(/^lcm-native: E_NOT_FOUND: transcript not found/)
  })

  it('JSON output larger than one JavaScript string can be (~512 MB) is written whole, in pieces', () => {
    // 520 strings of 1 MiB (one string, 520 times): 545,262,643 bytes of JSON.
    const script = `
      const { printJson } = require(${JSON.stringify(join(ROOT, 'bin/cli-common.cjs'))})
      const mib = 'x'.repeat(1 << 20)
      printJson(Array.from({ length: 520 }, () => mib)).catch((e) => { console.error(e); process.exit(1) })`
    const r = spawnSync('sh', ['-c', `"${process.execPath}" -e "$SCRIPT" | wc -c`], { encoding: 'utf8', env: { ...process.env, SCRIPT: script }, timeout: 60_000 })
    expect(r.stderr).toBe('')
    expect(Number(r.stdout.trim())).toBe(520 * ((1 << 20) + 6) + 3)
  }, 90_000)
})

describe('prompts', () => {
  it('lists, exports, diffs an override and renders', async () => {
    const list = await cli(['prompts', '--list'])
    expect(list.code).toBe(0)
    expect(list.stdout.trim().split('\n')).toHaveLength(4)
    expect(list.stdout).toMatch(/^leaf\.tmpl +embedded \(default\)/)
    const dir = tempDir()
    const exported = await cli(['prompts', '--export', dir])
    expect(exported.stdout).toContain(`wrote ${join(dir, 'condensed-d2.tmpl')}`)
    const leaf = join(dir, 'leaf.tmpl')
    writeFileSync(leaf, readFileSync(leaf, 'utf8').replace('conversation_segment', 'my_segment'))
    const diff = await cli(['prompts', '--diff', 'leaf', '--prompt-dir', dir])
    expect(diff.code).toBe(0)
    expect(diff.stdout).toContain(`--- leaf.tmpl (embedded)\n+++ ${leaf}`)
    expect(diff.stdout).toContain('+<my_segment>')
    const notOverridden = await cli(['prompts', '--diff', 'leaf'])
    expect(notOverridden.code).toBe(1)
    const render = await cli(['prompts', '--render', 'leaf', '--target-tokens', '321', '--prompt-dir', dir])
    expect(render.stdout).toContain('about 321 tokens')
    expect(render.stdout).toContain('<my_segment>')
    const show = await cli(['prompts', '--show', 'd1'])
    expect(show.stdout).toMatch(/^You are compacting/)
    // Without --target-tokens, the configured target: leafTargetTokens (1200 by default).
    expect((await cli(['prompts', '--render', 'leaf'])).stdout).toContain('about 1200 tokens')
    expect((await cli(['prompts', '--render', 'leaf'], { LCM_LEAF_TARGET_TOKENS: '700' })).stdout).toContain('about 700 tokens')
    expect((await cli(['prompts', '--render', 'd1'], { LCM_CONDENSED_TARGET_TOKENS: '100' })).stdout).toContain('about 512 tokens')
    // The edited leaf.tmpl is not replaced by a second export unless --force.
    const again = await cli(['prompts', '--export', dir])
    expect(again.code).toBe(1)
    expect(again.stderr).toMatch(/E_INVALID_INPUT: .*leaf\.tmpl differs from the default \(edited\?\); nothing was written/)
    expect(readFileSync(leaf, 'utf8')).toContain('my_segment')
    const forced = await cli(['prompts', '--export', dir, '--force'])
    expect(forced.code, forced.stderr).toBe(0)
    expect(readFileSync(leaf, 'utf8')).not.toContain('my_segment')
  })

  it('history takes --immutable and --json; rolling back to the current version changes nothing', async () => {
    const db = join(tempDir(), 'history.db')
    expect((await cli(['demo', '--db', db])).code).toBe(0)
    const id = JSON.parse((await cli(['grep', 'theme', '--scope', 'summaries', '--limit', '1', '--db', db, '--json'])).stdout).hits[0].summaryId
    const versions = JSON.parse((await cli(['history', id, '--json', '--db', db])).stdout)
    expect(versions).toHaveLength(1)
    const same = await cli(['rollback', id, '1', '--db', db])
    expect(same.code, same.stderr).toBe(0)
    expect(same.stdout).toMatch(/version 1 is the current text already; nothing was changed/)
    const immutable = await cli(['history', id, '--immutable', '--json', '--db', db])
    expect(immutable.code, immutable.stderr).toBe(0)
    expect(JSON.parse(immutable.stdout)).toHaveLength(1)
  })
})

describe('rewrite against an OpenAI-compatible server', () => {
  const requests: { auth?: string; body: { model: string; messages: { role: string; content: string }[]; max_tokens: number } }[] = []
  const anthropic: { key: string; version: string; body: { model: string; max_tokens: number } }[] = []
  let refuse = false
  let slowMs = 0
  let base = ''
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    let body = ''
    req.on('data', (d) => (body += d))
    req.on('end', () => {
      if (req.method === 'POST' && req.url === '/v1/messages') {
        // Anthropic's Messages API shape.
        anthropic.push({ key: req.headers['x-api-key'] as string, version: req.headers['anthropic-version'] as string, body: JSON.parse(body) })
        res.writeHead(200, { 'content-type': 'application/json' }).end(
          JSON.stringify({ content: [{ type: 'text', text: 'ANTHROPIC SUMMARY' }, { type: 'text', text: ' qxyanthropic\nExpand for details about: a.' }] }),
        )
        return
      }
      if (req.method !== 'POST' || req.url !== '/v1/chat/completions') {
        res.writeHead(404).end('not found')
        return
      }
      if (refuse) {
        res.writeHead(401, { 'content-type': 'application/json' }).end('{"error":"bad key"}')
        return
      }
      requests.push({ auth: req.headers.authorization, body: JSON.parse(body) })
      const n = requests.length
      setTimeout(() => {
        res.writeHead(200, { 'content-type': 'application/json' }).end(
          JSON.stringify({ choices: [{ message: { role: 'assistant', content: `SERVER SUMMARY ${n} qxyserverword${n}\nExpand for details about: server.` } }] }),
        )
      }, slowMs)
    })
  })
  beforeAll(async () => {
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`
  })
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())))
  const env = () => ({ LCM_LLM_BASE_URL: base, LCM_LLM_API_KEY: 'test-key', LCM_LLM_MODEL: 'test-model' })

  it('a dry run previews every depth-0 summary and writes nothing', async () => {
    const before = await LcmEngine.open({ dbPath: demoDb }).then(async (e) => {
      const v = await e.verify()
      await e.close()
      return v.digest
    })
    const r = await cli(['rewrite', '1', '--depth', '0', '--db', demoDb], env())
    expect(r.code, r.stderr).toBe(0)
    expect(r.stdout).toContain(`summarizer: test-model at ${base} (OpenAI-compatible)`)
    expect(r.stderr).toMatch(/Rewriting 1\/\d+: sum_[0-9a-f]{16} \(d0\)…/)
    expect(r.stdout).toMatch(/\nsum_[0-9a-f]{16} \(d0, \d+ messages?, [^)]+\): [\d,]+t → [\d,]+t \([+-]?[\d,]+\)(, fidelity \d\.\d\d)?\n--- before\n/)
    expect(r.stdout).toMatch(/\nDry run: no summary was changed \(\d+ summaries previewed; would be: [\d,]+t → [\d,]+t \([+-]?[\d,]+\)\)\. Add --apply/)
    expect(r.stdout).not.toContain('Rewrote')
    expect(requests.length).toBeGreaterThan(0)
    expect(requests.every((q) => q.auth === 'Bearer test-key' && q.body.model === 'test-model')).toBe(true)
    expect(requests[0].body.messages[0].content).toMatch(/\[\d{4}-\d\d-\d\d \d\d:\d\d [A-Z]+ \| (user|assistant|toolResult)\]\n/)
    const after = await LcmEngine.open({ dbPath: demoDb })
    expect((await after.verify()).digest).toBe(before)
    await after.close()
  })

  it('--apply writes the new texts, and grep finds a word only they have', async () => {
    requests.length = 0
    const r = await cli(['rewrite', '1', '--depth', '0', '--apply', '--diff', '--db', demoDb], env())
    expect(r.code, r.stderr).toBe(0)
    expect(r.stdout).toMatch(/\n\+SERVER SUMMARY 1 qxyserverword1\n/)
    expect(r.stdout).not.toContain('Dry run')
    const engine = await LcmEngine.open({ dbPath: demoDb })
    const hits = await engine.grep(1, { query: 'qxyserverword1', scope: 'summaries' })
    expect(hits.hits).toHaveLength(1)
    const leaves = await engine.summaries(1, { depth: 0 })
    expect(leaves.every((s) => s.content.startsWith('SERVER SUMMARY') && s.model === 'test-model')).toBe(true)
    expect((await engine.verify()).ok).toBe(true)
    await engine.close()
  })

  it('a reader that stops early (| head) sees the first summary at once and stops the run', async () => {
    requests.length = 0
    slowMs = 150
    try {
      const child = spawn(process.execPath, [BIN, 'rewrite', '1', '--all', '--db', demoDb], { env: { ...process.env, ...env(), HOME: tempDir() } })
      let seen = ''
      const exited = new Promise<number | null>((resolve) => child.on('close', resolve))
      // Like `head`: read until the first summary's text, then close the pipe.
      await new Promise<void>((resolve) => {
        child.stdout.on('data', (d) => {
          seen += d
          if (seen.includes('--- after\n')) {
            child.stdout.destroy()
            resolve()
          }
        })
      })
      const atClose = requests.length
      expect(await exited).toBe(0)
      // 63 summaries at 150 ms each would take ~10 s; it stops within a few more calls.
      expect(requests.length).toBeLessThanOrEqual(atClose + 3)
      expect(requests.length).toBeLessThan(10)
    } finally {
      slowMs = 0
    }
  })

  it('a refused key is a one-line E_SUMMARIZER error and exit 1', async () => {
    refuse = true
    try {
      const r = await cli(['rewrite', '1', '--all', '--db', demoDb], env())
      expect(r.code).toBe(1)
      const last = r.stderr.trim().split('\n').pop()!
      expect(last).toMatch(/^lcm-native: E_SUMMARIZER: .*refused the credentials/)
      // Said once: the run's own "nothing was written (dry run)" does not repeat the call's.
      expect(last.match(/nothing was written/g) ?? []).toHaveLength(1)
    } finally {
      refuse = false
    }
  })

  it('Anthropic is used when ANTHROPIC_API_KEY is set', async () => {
    const origin = base.replace(/\/v1$/, '')
    const r = await cli(['rewrite', '1', '--depth', '1', '--db', demoDb], { ANTHROPIC_API_KEY: 'ak-test', ANTHROPIC_BASE_URL: origin })
    expect(r.code, r.stderr).toBe(0)
    expect(r.stdout).toContain('summarizer: claude-sonnet-4-20250514 (Anthropic)')
    expect(r.stdout).toContain('--- after\nANTHROPIC SUMMARY qxyanthropic')
    expect(anthropic.length).toBeGreaterThan(0)
    expect(anthropic.every((q) => q.key === 'ak-test' && q.version === '2023-06-01' && q.body.model === 'claude-sonnet-4-20250514')).toBe(true)
    expect(anthropic[0].body.max_tokens).toBeGreaterThanOrEqual(256)
  })

  it("chooses the LLM lcm-tui's way: flags, provider/model, LCM_SUMMARY_*, openclaw.json, <PROVIDER>_API_KEY", async () => {
    const origin = base.replace(/\/v1$/, '')
    requests.length = 0
    anthropic.length = 0
    const flags = await cli(['rewrite', '1', '--depth', '1', '--provider', 'openai', '--base-url', base, '--model', 'm-flag', '--db', demoDb], {
      OPENAI_API_KEY: 'ok-openai',
    })
    expect(flags.code, flags.stderr).toBe(0)
    expect(flags.stdout).toContain(`summarizer: m-flag at ${base} (OpenAI-compatible)`)
    expect(requests.length).toBeGreaterThan(0)
    expect(requests.every((q) => q.auth === 'Bearer ok-openai' && q.body.model === 'm-flag')).toBe(true)

    const slash = await cli(['rewrite', '1', '--depth', '1', '--model', 'anthropic/claude-test', '--db', demoDb], {
      ANTHROPIC_API_KEY: 'ak-2',
      ANTHROPIC_BASE_URL: origin,
    })
    expect(slash.code, slash.stderr).toBe(0)
    expect(anthropic.length).toBeGreaterThan(0)
    expect(anthropic.every((q) => q.key === 'ak-2' && q.body.model === 'claude-test')).toBe(true)

    requests.length = 0
    const fromEnv = await cli(['rewrite', '1', '--depth', '1', '--db', demoDb], {
      LCM_SUMMARY_PROVIDER: 'openai',
      LCM_SUMMARY_MODEL: 'm-env',
      LCM_SUMMARY_BASE_URL: base,
    })
    expect(fromEnv.code, fromEnv.stderr).toBe(0)
    expect(requests.every((q) => q.auth === undefined && q.body.model === 'm-env')).toBe(true)

    // An OpenClaw provider id: its baseUrl from openclaw.json, its key from <PROVIDER>_API_KEY.
    const state = tempDir()
    writeFileSync(join(state, 'openclaw.json'), JSON.stringify({ models: { providers: { 'My-Local': { baseUrl: base } } } }))
    requests.length = 0
    const openclaw = await cli(['rewrite', '1', '--depth', '1', '--provider', 'my-local', '--model', 'm-local', '--db', demoDb], {
      OPENCLAW_STATE_DIR: state,
      MY_LOCAL_API_KEY: 'k-local',
    })
    expect(openclaw.code, openclaw.stderr).toBe(0)
    expect(requests.length).toBeGreaterThan(0)
    expect(requests.every((q) => q.auth === 'Bearer k-local' && q.body.model === 'm-local')).toBe(true)

    for (const [args, message, env] of [
      [['--provider', 'anthropic'], /no API key for anthropic: set ANTHROPIC_API_KEY/, {}],
      [['--provider', 'nowhere', '--model', 'x'], /no base URL for provider nowhere/, {}],
      [['--base-url', base], /cannot tell which provider/, {}],
      [[], /cannot tell which provider serves model llama3/, { LCM_SUMMARY_MODEL: 'llama3' }],
    ] as [string[], RegExp, Record<string, string>][]) {
      const r = await cli(['rewrite', '1', '--depth', '1', ...args, '--db', demoDb], env)
      expect(r.code, args.join(' ')).toBe(1)
      expect(r.stderr.trim()).toMatch(message)
      expect(r.stderr.trim()).toMatch(/^lcm-native: E_INVALID_CONFIG: /)
    }
  })

  it('keeps model ids with slashes whole for OpenAI-compatible routers, and keys with their endpoints', async () => {
    const origin = base.replace(/\/v1$/, '')
    // An OpenRouter-style setup: the model id is `vendor/model`, the key is the router's.
    requests.length = 0
    anthropic.length = 0
    const router = await cli(['rewrite', '1', '--depth', '1', '--db', demoDb], {
      LCM_LLM_BASE_URL: base,
      LCM_LLM_MODEL: 'anthropic/claude-3.5-sonnet',
      LCM_LLM_API_KEY: 'router-key',
      ANTHROPIC_API_KEY: 'vendor-key',
    })
    expect(router.code, router.stderr).toBe(0)
    expect(anthropic).toHaveLength(0)
    expect(requests.every((q) => q.auth === 'Bearer router-key' && q.body.model === 'anthropic/claude-3.5-sonnet')).toBe(true)
    requests.length = 0
    const named = await cli(['rewrite', '1', '--depth', '1', '--provider', 'router', '--base-url', base, '--model', 'meta/llama-3', '--db', demoDb], {
      ROUTER_API_KEY: 'rk',
    })
    expect(named.code, named.stderr).toBe(0)
    expect(requests.every((q) => q.auth === 'Bearer rk' && q.body.model === 'meta/llama-3')).toBe(true)
    // The router's key never goes to Anthropic.
    const vendor = await cli(['rewrite', '1', '--depth', '1', '--provider', 'anthropic', '--db', demoDb], {
      LCM_LLM_API_KEY: 'router-key',
      ANTHROPIC_API_KEY: 'vendor-key',
      ANTHROPIC_BASE_URL: origin,
    })
    expect(vendor.code, vendor.stderr).toBe(0)
    expect(anthropic.length).toBeGreaterThan(0)
    expect(anthropic.every((q) => q.key === 'vendor-key')).toBe(true)
  })

  it('reads openclaw.json from OPENCLAW_CONFIG_PATH, honours api: anthropic-messages, and skips a JSON5 file', async () => {
    const origin = base.replace(/\/v1$/, '')
    const dir = tempDir()
    const config = join(dir, 'custom.json')
    writeFileSync(config, JSON.stringify({ models: { providers: { gateway: { baseUrl: origin, api: 'anthropic-messages' } } } }))
    anthropic.length = 0
    const messages = await cli(['rewrite', '1', '--depth', '1', '--model', 'gateway/claude-gw', '--db', demoDb], {
      OPENCLAW_CONFIG_PATH: config,
      GATEWAY_API_KEY: 'gw-key',
    })
    expect(messages.code, messages.stderr).toBe(0)
    expect(anthropic.length).toBeGreaterThan(0)
    expect(anthropic.every((q) => q.key === 'gw-key' && q.body.model === 'claude-gw')).toBe(true)

    writeFileSync(join(dir, 'openclaw.json'), '{\n  // OpenClaw allows comments\n  models: { providers: {} },\n}\n')
    const json5 = await cli(['rewrite', '1', '--depth', '1', '--model', 'claude-x', '--db', demoDb], {
      OPENCLAW_STATE_DIR: dir,
      ANTHROPIC_API_KEY: 'ak',
      ANTHROPIC_BASE_URL: origin,
    })
    expect(json5.code, json5.stderr).toBe(0)
    expect(json5.stderr).toMatch(/note: .*openclaw\.json is not plain JSON/)
  })

  it('--tz sets the zone of the source times; --timestamps=false drops them', async () => {
    const env = { LCM_LLM_BASE_URL: base, LCM_LLM_MODEL: 'm' }
    requests.length = 0
    const tokyo = await cli(['rewrite', '1', '--depth', '1', '--tz', 'Asia/Tokyo', '--db', demoDb], env)
    expect(tokyo.code, tokyo.stderr).toBe(0)
    expect(requests[0].body.messages[0].content).toMatch(/\[\d{4}-\d\d-\d\d \d\d:\d\d JST/)
    requests.length = 0
    const plain = await cli(['rewrite', '1', '--depth', '1', '--timestamps=false', '--db', demoDb], env)
    expect(plain.code, plain.stderr).toBe(0)
    expect(requests[0].body.messages[0].content).not.toMatch(/\[\d{4}-\d\d-\d\d \d\d:\d\d/)
    const bad = await cli(['rewrite', '1', '--depth', '1', '--tz', 'Moon/Crater', '--db', demoDb], env)
    expect(bad.code).toBe(1)
    expect(bad.stderr).toMatch(/E_INVALID_CONFIG: .*timezone/)
  })

  it('without an LLM configured the offline summarizer is used, and the output says so', async () => {
    const r = await cli(['rewrite', '1', '--depth', '1', '--db', demoDb])
    expect(r.code, r.stderr).toBe(0)
    expect(r.stdout).toMatch(/^summarizer: offline \(no LLM configured/)
    // The offline demo left no fallbacks to redo.
    const none = await cli(['rewrite', '1', '--fallbacks', '--db', demoDb])
    expect(none.code, none.stderr).toBe(0)
    expect(none.stdout).toContain('No summaries matched rewrite selection.')
  })
})
