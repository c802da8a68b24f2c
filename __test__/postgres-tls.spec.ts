// TLS to a real PostgreSQL server: a throwaway cluster listening on 127.0.0.1 with ssl=on, its
// certificate made here by a certificate authority of the test's own (openssl), and a
// pg_hba.conf that takes TLS connections only (one user by client certificate). Skipped with one
// line where no server can be started, except in CI.
import { execFileSync, spawnSync } from 'node:child_process'
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { homedir } from 'node:os'
import { join } from 'node:path'
import { createSecureContext, TLSSocket } from 'node:tls'

import { afterAll, beforeAll, describe, expect, it } from 'vitest'

import { LcmEngine } from '../index.js'
import { rejection, tempDir } from './helpers'

const { findBinaries, startCluster } = require('../scripts/pg-test-server.cjs')

const REQUIRED = process.env.CI === 'true' || process.env.LCM_REQUIRE_POSTGRES === '1'
const bin: string | null = findBinaries()
const openssl = spawnSync('sh', ['-c', 'command -v openssl']).status === 0
const usable = Boolean(bin) && openssl
if (!usable) {
  if (REQUIRED) throw new Error('postgres-tls.spec needs initdb and openssl here (CI=true)')
  console.log(`postgres: skipped postgres-tls.spec (${bin ? 'no openssl' : 'no initdb'})`)
}

/** A certificate authority, and certificates it signs. */
function makeCertificates(dir: string) {
  const ssl = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' })
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes']
  const authority = (name: string) => {
    ssl('req', '-x509', ...ec, '-keyout', `${name}.key`, '-out', `${name}.crt`, '-days', '2', '-subj', `/CN=lcm-native test ${name}`,
      '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign')
  }
  const issue = (name: string, cn: string, ext: string, by = 'ca') => {
    ssl('req', ...ec, '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${cn}`)
    writeFileSync(join(dir, `${name}.ext`), ext)
    ssl('x509', '-req', '-in', `${name}.csr`, '-CA', `${by}.crt`, '-CAkey', `${by}.key`, '-CAcreateserial', '-out', `${name}.crt`, '-days', '2', '-extfile', `${name}.ext`)
  }
  authority('ca')
  authority('other-ca')
  // The server's certificate names localhost only (not 127.0.0.1).
  issue('server', 'localhost', 'subjectAltName=DNS:localhost\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n')
  issue('client', 'certuser', 'basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n')
  // A man in the middle's: the right name, from another authority.
  issue('mitm', 'localhost', 'subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n', 'other-ca')
  return (name: string) => join(dir, name)
}

/**
 * A toy PostgreSQL server on loopback that takes TLS with the certificate given (of another
 * authority than the real server's), asks for a clear-text password and records it.
 */
async function manInTheMiddle(cert: string, key: string): Promise<{ port: number; passwords: string[]; close(): void }> {
  const passwords: string[] = []
  const context = createSecureContext({ cert: readFileSync(cert), key: readFileSync(key) })
  const server = createServer((plain) => {
    plain.once('data', (first: Buffer) => {
      // An SSLRequest (8 bytes: length 8, code 80877103): yes, then TLS.
      if (first.length < 8 || first.readInt32BE(4) !== 80877103) return plain.destroy()
      plain.write('S')
      const secure = new TLSSocket(plain, { isServer: true, secureContext: context })
      secure.on('error', () => plain.destroy())
      let buffered = Buffer.alloc(0)
      let startup = true
      secure.on('data', (chunk: Buffer) => {
        buffered = Buffer.concat([buffered, chunk])
        if (startup && buffered.length >= 4 && buffered.length >= buffered.readInt32BE(0)) {
          buffered = buffered.subarray(buffered.readInt32BE(0))
          startup = false
          // AuthenticationCleartextPassword.
          secure.write(Buffer.from([0x52, 0, 0, 0, 8, 0, 0, 0, 3]))
        }
        if (!startup && buffered.length >= 5 && buffered[0] === 0x70 && buffered.length >= 1 + buffered.readInt32BE(1)) {
          passwords.push(buffered.subarray(5, 1 + buffered.readInt32BE(1)).toString('utf8').replace(/\0$/, ''))
          secure.destroy()
        }
      })
    })
    plain.on('error', () => {})
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return { port: (server.address() as { port: number }).port, passwords, close: () => server.close() }
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number }
      server.close(() => resolve(port))
    })
  })
}

describe.skipIf(!usable)('PostgreSQL over TLS (rustls)', () => {
  let cluster: { stop(): void; dir: string; bin: string } | undefined
  let file: (name: string) => string
  let port = 0

  beforeAll(async () => {
    file = makeCertificates(tempDir())
    port = await freePort()
    cluster = startCluster({
      tls: {
        port,
        cert: file('server.crt'),
        key: file('server.key'),
        ca: file('ca.crt'),
        // TLS only: no `host` line, so a plain TCP connection finds no entry.
        hba: ['local all all trust', 'hostssl all lcm 127.0.0.1/32 trust', 'hostssl all certuser 127.0.0.1/32 cert', ''].join('\n'),
      },
    })
    execFileSync(join(cluster!.bin, 'psql'), ['-h', cluster!.dir, '-p', String(port), '-U', 'lcm', '-d', 'postgres', '-qc', 'CREATE ROLE certuser LOGIN SUPERUSER'])
  }, 60_000)
  afterAll(() => cluster?.stop())

  const url = (user: string, host: string, params: Record<string, string>) =>
    `postgres://${user}@${host}:${port}/postgres?${new URLSearchParams(params).toString()}`

  /** Opens, stores a turn and reads it back. */
  async function works(dbPath: string) {
    const engine = await LcmEngine.open({ dbPath })
    try {
      const stored = await engine.ingest({ sessionKey: 'agent:main:tls' }, [{ role: 'user', content: 'over TLS' }])
      expect(stored.inserted).toBe(1)
      const found = await engine.findConversation({ sessionKey: 'agent:main:tls' })
      expect(found).not.toBeNull()
    } finally {
      await engine.close()
    }
  }

  it('verify-full: the server whose certificate names the host, from the authority given', async () => {
    await works(url('lcm', 'localhost', { sslmode: 'verify-full', sslrootcert: file('ca.crt') }))
  })

  it('verify-full refuses a host the certificate does not name; the password is never shown', async () => {
    const e = await rejection(LcmEngine.open({ dbPath: url('lcm:s3cret', '127.0.0.1', { sslmode: 'verify-full', sslrootcert: file('ca.crt') }) }))
    expect(e.code).toBe('E_CONNECTION')
    expect(e.message).toMatch(/certificate not valid for name|NotValidForName/i)
    expect(e.message).not.toContain('s3cret')
  })

  it('verify-ca checks the chain, not the name; another authority is refused', async () => {
    await works(url('lcm', '127.0.0.1', { sslmode: 'verify-ca', sslrootcert: file('ca.crt') }))
    const e = await rejection(LcmEngine.open({ dbPath: url('lcm', 'localhost', { sslmode: 'verify-ca', sslrootcert: file('other-ca.crt') }) }))
    expect(e.code).toBe('E_CONNECTION')
    expect(e.message).toMatch(/UnknownIssuer|unknown issuer/i)
  })

  it('require and the default (prefer) encrypt; disable is refused by a TLS-only server', async () => {
    await works(url('lcm', '127.0.0.1', { sslmode: 'require' }))
    await works(`postgres://lcm@127.0.0.1:${port}/postgres`)
    const e = await rejection(LcmEngine.open({ dbPath: url('lcm', '127.0.0.1', { sslmode: 'disable' }) }))
    expect(e.code).toBe('E_CONNECTION')
    expect(e.message).toMatch(/no encryption|pg_hba/)
  })

  it('a client certificate logs in the user it names; without it the server refuses', async () => {
    await works(url('certuser', 'localhost', { sslmode: 'verify-full', sslrootcert: file('ca.crt'), sslcert: file('client.crt'), sslkey: file('client.key'), schema: 'cert' }))
    const e = await rejection(LcmEngine.open({ dbPath: url('certuser', 'localhost', { sslmode: 'verify-full', sslrootcert: file('ca.crt'), schema: 'cert' }) }))
    expect(e.code).toBe('E_CONNECTION')
    expect(e.message).toMatch(/certificate/i)
  })

  it('require with an authority given checks the chain, as libpq does', async () => {
    await works(url('lcm', '127.0.0.1', { sslmode: 'require', sslrootcert: file('ca.crt') }))
    const e = await rejection(LcmEngine.open({ dbPath: url('lcm', '127.0.0.1', { sslmode: 'require', sslrootcert: file('other-ca.crt') }) }))
    expect(e.code).toBe('E_CONNECTION')
    expect(e.message).toMatch(/UnknownIssuer|unknown issuer/i)
  })

  it('a man in the middle on loopback gets no password from a URL that asks for a checked server, nor from a malformed one', async () => {
    const mitm = await manInTheMiddle(file('mitm.crt'), file('mitm.key'))
    try {
      const at = (params: string) => `postgres://lcm:s3cret@127.0.0.1:${mitm.port}/postgres?${params}`
      const root = `sslrootcert=${encodeURIComponent(file('ca.crt'))}`
      for (const [params, code] of [
        [`sslmode=require&${root}`, 'E_CONNECTION'],
        [`sslmode=verify-ca&${root}`, 'E_CONNECTION'],
        [`sslmode=verify-full&${root}`, 'E_CONNECTION'],
        ['sslmode', 'E_INVALID_CONFIG'],
        ['sslmode=', 'E_INVALID_CONFIG'],
        ['sslmode=disable&sslmode=verify-full', 'E_INVALID_CONFIG'],
        [`sslmode=verify-full&${root}&sslcrl=/x.crl`, 'E_INVALID_CONFIG'],
      ] as const) {
        const e = await rejection(LcmEngine.open({ dbPath: at(params) }))
        expect(e.code, params).toBe(code)
        expect(e.message, params).not.toContain('s3cret')
        if (code === 'E_INVALID_CONFIG') expect(e.message, params).toMatch(/sslmode|sslcrl/)
      }
      expect(mitm.passwords).toEqual([])
      // What it is there to catch: require without an authority checks nobody (libpq's
      // meaning), so the password reaches whoever answers. (Only where libpq's default root
      // file is absent: with one, require checks the chain too.)
      if (!existsSync(join(homedir(), '.postgresql', 'root.crt'))) {
        await rejection(LcmEngine.open({ dbPath: at('sslmode=require') }))
        expect(mitm.passwords).toEqual(['s3cret'])
      }
    } finally {
      mitm.close()
    }
  })

  it('a certificate file that is not there is named at open', async () => {
    const e = await rejection(LcmEngine.open({ dbPath: url('lcm', 'localhost', { sslmode: 'verify-full', sslrootcert: '/nonexistent/ca.crt' }) }))
    expect(e.code).toBe('E_INVALID_INPUT')
    expect(e.message).toContain('/nonexistent/ca.crt')
  })
})
