#!/usr/bin/env node
// Runs a command with a throwaway PostgreSQL cluster: `node scripts/pg-test-server.cjs CMD ARGS…`.
// The cluster lives in a temporary folder (initdb + pg_ctl, a Unix socket, no TCP, no system
// service) and is stopped and removed when CMD ends. CMD gets its URL in LCM_TEST_DATABASE_URL;
// the PostgreSQL cases of the Rust and vitest suites run against it and skip without it.
//
// LCM_TEST_DATABASE_URL already set: that server is used and nothing is started.
// No server can be started (no initdb here): one `postgres: skipped (why)` line and CMD runs
// without it, unless CI=true or LCM_REQUIRE_POSTGRES=1, where that is a failure (exit 1).
'use strict'
const { spawn, spawnSync, execFileSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')

const required = process.env.CI === 'true' || process.env.LCM_REQUIRE_POSTGRES === '1'

/** The directory of initdb and pg_ctl: PATH first, then Debian's highest version. */
function findBinaries() {
  const which = spawnSync('sh', ['-c', 'command -v initdb'], { encoding: 'utf8' })
  if (which.status === 0 && which.stdout.trim()) {
    const dir = path.dirname(fs.realpathSync(which.stdout.trim()))
    if (fs.existsSync(path.join(dir, 'pg_ctl'))) return dir
  }
  const root = '/usr/lib/postgresql'
  const versions = fs.existsSync(root)
    ? fs
        .readdirSync(root)
        .filter((v) => fs.existsSync(path.join(root, v, 'bin', 'initdb')))
        .sort((a, b) => Number(b) - Number(a))
    : []
  return versions.length > 0 ? path.join(root, versions[0], 'bin') : null
}

/** initdb refuses to run as root: as root, the server runs as `postgres` (else `nobody`). */
function dropPrivileges() {
  if (typeof process.getuid !== 'function' || process.getuid() !== 0) return { prefix: [], owner: null }
  const has = (user) => spawnSync('id', ['-u', user]).status === 0
  if (has('postgres') && spawnSync('sh', ['-c', 'command -v runuser']).status === 0) {
    return { prefix: ['runuser', '-u', 'postgres', '--'], owner: 'postgres' }
  }
  return {
    prefix: ['setpriv', '--reuid=nobody', '--regid=nogroup', '--clear-groups'],
    owner: 'nobody:nogroup',
  }
}

function run(prefix, argv) {
  const [cmd, ...args] = [...prefix, ...argv]
  return execFileSync(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], encoding: 'utf8' })
}

/**
 * Starts a cluster; returns `{ url, stop }`, or throws saying why it cannot.
 *
 * `tls` (for the TLS tests): the server also listens on 127.0.0.1:`tls.port` with `ssl=on`,
 * its certificate and key (and `ca`, the authority client certificates must come from) copied
 * into the cluster's folder, and `pg_hba.conf` replaced by `tls.hba`.
 * @param {{ tls?: { port: number, cert: string, key: string, ca?: string, hba: string } }} [opts]
 */
function startCluster(opts = {}) {
  const bin = findBinaries()
  if (!bin) throw new Error('no initdb found (install Debian\'s postgresql package)')
  const { prefix, owner } = dropPrivileges()
  // Unix socket paths are limited to ~107 bytes: stay directly under /tmp.
  const dir = fs.mkdtempSync(path.join(fs.existsSync('/tmp') ? '/tmp' : os.tmpdir(), 'lcm-pg-'))
  if (owner) execFileSync('chown', ['-R', owner, dir])
  const data = path.join(dir, 'data')
  const log = path.join(dir, 'log')
  const pgCtl = path.join(bin, 'pg_ctl')
  let started = false
  const stop = () => {
    if (started) {
      try {
        run(prefix, [pgCtl, '-D', data, '-m', 'fast', '-w', 'stop'])
      } catch {
        // Already stopped (a test may stop it on purpose).
      }
      started = false
    }
    fs.rmSync(dir, { recursive: true, force: true })
  }
  const tls = opts.tls
  const options = [
    `-k ${dir}`,
    tls ? `-c listen_addresses=127.0.0.1 -p ${tls.port}` : "-c listen_addresses=''",
    ...(tls ? ['-c ssl=on', `-c ssl_cert_file=${dir}/server.crt`, `-c ssl_key_file=${dir}/server.key`] : []),
    ...(tls?.ca ? [`-c ssl_ca_file=${dir}/ca.crt`] : []),
    '-c fsync=off',
    '-c synchronous_commit=off',
    '-c full_page_writes=off',
    '-c max_connections=200',
  ].join(' ')
  const start = () => {
    run(prefix, [pgCtl, '-D', data, '-l', log, '-w', '-o', options, 'start'])
    started = true
  }
  // For tests of a lost server: stopped at once (clients see their connections drop, as in a
  // crash), and started again on the same data.
  const halt = () => {
    run(prefix, [pgCtl, '-D', data, '-m', 'immediate', '-w', 'stop'])
    started = false
  }
  try {
    run(prefix, [path.join(bin, 'initdb'), '-D', data, '--auth=trust', '-U', 'lcm', '-E', 'UTF8', '--locale=C.UTF-8', '-N'])
    if (tls) {
      fs.copyFileSync(tls.cert, path.join(dir, 'server.crt'))
      fs.copyFileSync(tls.key, path.join(dir, 'server.key'))
      if (tls.ca) fs.copyFileSync(tls.ca, path.join(dir, 'ca.crt'))
      fs.chmodSync(path.join(dir, 'server.key'), 0o600)
      fs.writeFileSync(path.join(data, 'pg_hba.conf'), tls.hba)
      if (owner) execFileSync('chown', ['-R', owner, dir])
    }
    start()
  } catch (err) {
    const detail = [err.stderr, fs.existsSync(log) ? fs.readFileSync(log, 'utf8') : '']
      .filter(Boolean)
      .join('\n')
      .trim()
    stop()
    throw new Error(`${err.message.split('\n')[0]}${detail ? `\n${detail}` : ''}`)
  }
  return { url: `postgres://lcm@${encodeURIComponent(dir)}/postgres`, dir, data, bin, prefix, owner, stop, halt, resume: start }
}

/** Debian's pgbouncer, or null. */
function findPgbouncer() {
  for (const candidate of ['/usr/sbin/pgbouncer', '/usr/bin/pgbouncer']) {
    if (fs.existsSync(candidate)) return candidate
  }
  const which = spawnSync('sh', ['-c', 'command -v pgbouncer'], { encoding: 'utf8' })
  return which.status === 0 && which.stdout.trim() ? which.stdout.trim() : null
}

/**
 * Starts PgBouncer in transaction mode in front of `cluster` (its Unix socket in the
 * cluster's folder, port 6432, no TCP), with few server sessions for many clients so that the
 * clients really share them. Returns `{ url, stop }` (the URL names `pooler=transaction`), or
 * throws saying why it cannot.
 */
function startPooler(cluster, { poolSize = 6 } = {}) {
  const binary = findPgbouncer()
  if (!binary) throw new Error("no pgbouncer found (install Debian's pgbouncer package)")
  const dir = path.join(cluster.dir, 'pgbouncer')
  fs.mkdirSync(dir)
  const port = 6432
  fs.writeFileSync(path.join(dir, 'users.txt'), '"lcm" ""\n')
  fs.writeFileSync(
    path.join(dir, 'pgbouncer.ini'),
    [
      '[databases]',
      `postgres = host=${cluster.dir} port=5432 dbname=postgres user=lcm`,
      '[pgbouncer]',
      `unix_socket_dir = ${cluster.dir}`,
      `listen_port = ${port}`,
      'auth_type = trust',
      `auth_file = ${path.join(dir, 'users.txt')}`,
      'pool_mode = transaction',
      `default_pool_size = ${poolSize}`,
      'max_client_conn = 500',
      `logfile = ${path.join(dir, 'log')}`,
      `pidfile = ${path.join(dir, 'pid')}`,
      '',
    ].join('\n'),
  )
  if (cluster.owner) execFileSync('chown', ['-R', cluster.owner, dir])
  const [cmd, ...args] = [...cluster.prefix, binary, path.join(dir, 'pgbouncer.ini')]
  const child = spawn(cmd, args, { stdio: 'ignore' })
  const socket = path.join(cluster.dir, `.s.PGSQL.${port}`)
  const until = Date.now() + 10_000
  while (!fs.existsSync(socket)) {
    if (child.exitCode !== null || Date.now() > until) {
      const log = fs.existsSync(path.join(dir, 'log')) ? fs.readFileSync(path.join(dir, 'log'), 'utf8') : ''
      child.kill('SIGKILL')
      throw new Error(`pgbouncer did not start${log ? `:\n${log.trim()}` : ''}`)
    }
    spawnSync('sleep', ['0.05'])
  }
  // pgbouncer itself is signalled (by the pid it wrote), not its parent: as root it runs under
  // runuser, which does not pass a signal on, and a pgbouncer left running would outlive every
  // run. Waited for (up to 5 s), so that the cluster's folder is removed after it.
  const stop = () => {
    const pidFile = path.join(dir, 'pid')
    const pid = fs.existsSync(pidFile) ? Number(fs.readFileSync(pidFile, 'utf8').trim()) : 0
    // Gone, or a zombie its parent (this process, when not root) has yet to reap.
    const alive = (p) => {
      try {
        process.kill(p, 0)
      } catch {
        return false
      }
      const stat = fs.existsSync(`/proc/${p}/stat`) ? fs.readFileSync(`/proc/${p}/stat`, 'utf8') : ''
      return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z'
    }
    if (pid > 0 && alive(pid)) {
      process.kill(pid, 'SIGTERM')
      const until = Date.now() + 5000
      while (alive(pid) && Date.now() < until) spawnSync('sleep', ['0.05'])
    }
    if (child.exitCode === null) child.kill('SIGKILL')
  }
  return { url: `postgres://lcm@${encodeURIComponent(cluster.dir)}:${port}/postgres?pooler=transaction`, stop }
}

function main() {
  const argv = process.argv.slice(2)
  if (argv.length === 0) {
    console.error('usage: node scripts/pg-test-server.cjs CMD [ARGS…]')
    process.exit(2)
  }
  let cluster = null
  const env = { ...process.env }
  if (!env.LCM_TEST_DATABASE_URL) {
    try {
      const t0 = Date.now()
      cluster = startCluster()
      env.LCM_TEST_DATABASE_URL = cluster.url
      // The pg_ctl a test needs to stop or restart the server on purpose.
      env.LCM_TEST_PG_CTL = JSON.stringify({ prefix: cluster.prefix, pgCtl: path.join(cluster.bin, 'pg_ctl'), data: cluster.data, dir: cluster.dir })
      console.error(`postgres: throwaway cluster at ${cluster.dir} (${Date.now() - t0} ms)`)
    } catch (err) {
      cluster = null
      console.error(`postgres: skipped (${err.message})`)
      if (required) {
        console.error('postgres: required here (CI=true or LCM_REQUIRE_POSTGRES=1): failing')
        process.exit(1)
      }
    }
  }
  // The pooler tests go through PgBouncer in transaction mode in front of that cluster.
  let pooler = null
  if (cluster && !env.LCM_TEST_POOLER_URL) {
    try {
      pooler = startPooler(cluster)
      env.LCM_TEST_POOLER_URL = pooler.url
    } catch (err) {
      console.error(`pgbouncer: skipped (${err.message})`)
      if (required) {
        console.error('pgbouncer: required here (CI=true or LCM_REQUIRE_POSTGRES=1): failing')
        cluster.stop()
        process.exit(1)
      }
    }
  }
  const child = spawn(argv[0], argv.slice(1), { stdio: 'inherit', env })
  const forward = (signal) => child.kill(signal)
  process.on('SIGINT', forward)
  process.on('SIGTERM', forward)
  child.on('exit', (code, signal) => {
    if (pooler) pooler.stop()
    if (cluster) cluster.stop()
    process.exit(code ?? (signal ? 1 : 0))
  })
}

if (require.main === module) main()

module.exports = { startCluster, startPooler, findBinaries }
