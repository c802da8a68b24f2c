// @ts-check
'use strict'
// `lcm-native ui`: the Control UI's LCM panel outside OpenClaw, for an operator of a
// PostgreSQL store or of a copy of a file. A loopback HTTP server serves the same module the
// Control UI loads (dist/control-ui/) inside a small page that plays the host's part (a
// conversation picker, `host.request` over HTTP), and answers the panel's operations
// (panel/operations.cjs) on one open engine. Every API call carries a random token the
// printed URL holds; the engine is read-only unless `--write`.

const { randomBytes, timingSafeEqual } = require('node:crypto')
const { readFileSync } = require('node:fs')
const http = require('node:http')
const { join } = require('node:path')

const { runOperation } = require('./operations.cjs')

const ASSETS = join(__dirname, '..', 'dist', 'control-ui')
/** The largest request body read (an operation's payload is a few fields). */
const MAX_BODY = 64 * 1024
/** How long `close` leaves a request being answered to finish before it cuts its connection (ms). */
const CLOSE_GRACE_MS = 500

/** The page: the same CSP the Control UI gives plugin modules (no inline script, no eval). */
const PAGE = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>lcm-native</title>
<link rel="stylesheet" href="/assets/index.css"><link rel="stylesheet" href="/shell.css">
<script type="module" src="/shell.js"></script></head>
<body><header class="shell-head"><strong>lcm-native</strong>
<label>Conversation <select id="conversation" aria-label="Conversation"></select></label>
<span id="mode"></span></header><main id="panel"></main></body></html>
`

const SHELL_CSS = `body { font: 15px/1.45 system-ui, sans-serif; margin: 0; color: #1f2937; background: #fff; }
@media (prefers-color-scheme: dark) { body { color: #e5e7eb; background: #111827; } }
.shell-head { display: flex; flex-wrap: wrap; gap: 0.75rem; align-items: center; padding: 0.5rem 0.75rem; border-bottom: 1px solid rgba(127,127,127,.3); }
.shell-head select { font: inherit; color: inherit; background: transparent; max-width: 100%; }
#mode { font-size: 0.8rem; opacity: 0.7; }
main { max-width: 60rem; margin: 0 auto; }
`

/**
 * The page's host: the token from the URL's fragment (then dropped from the address bar), a
 * conversation picker, and `host.request('plugins.sessionAction', …)` as a POST to /api/action.
 */
const SHELL_JS = `import plugin from '/assets/index.js'
const fragment = new URLSearchParams(location.hash.slice(1))
if (fragment.get('token')) { sessionStorage.setItem('lcm-native-token', fragment.get('token')); history.replaceState(null, '', location.pathname + location.search) }
const token = sessionStorage.getItem('lcm-native-token') || ''
const api = async (path, body) => {
  const r = await fetch(path, { method: body ? 'POST' : 'GET', headers: { authorization: 'Bearer ' + token, 'content-type': 'application/json' }, body: body ? JSON.stringify(body) : undefined })
  const data = await r.json().catch(() => ({ ok: false, error: 'HTTP ' + r.status }))
  if (!r.ok && data.ok !== false) return { ok: false, error: data.error || 'HTTP ' + r.status, code: data.code }
  return data
}
const info = await api('/api/info')
if (info.ok === false) { document.getElementById('panel').textContent = (info.code ? info.code + ': ' : '') + info.error + ' (open the URL lcm-native ui printed)'; throw new Error(info.error) }
// Stored text beside the page's own words: its bidi controls shown, not obeyed (an option
// cannot hold an isolating element).
const visible = (t) => String(t).replace(/[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g, (c) => '\u27e8U+' + c.charCodeAt(0).toString(16).toUpperCase().padStart(4, '0') + '\u27e9')
document.getElementById('mode').textContent = visible(info.database) + (info.write ? ' · writes allowed' : ' · read-only')
const host = {
  apiVersion: 1, pluginId: 'lcm-native', basePath: '', locale: navigator.language,
  signal: new AbortController().signal,
  connection: { connected: true, canRead: true, canWrite: info.write, canGrant: false, canAdmin: false, assistantAgentId: null },
  redact: (t) => t,
  request: (method, params) => method === 'plugins.sessionAction' ? api('/api/action', params) : Promise.reject(new Error('not served here: ' + method)),
  onEvent: () => () => {}, subscribe: () => () => {},
  ui: { registerPanel: (p) => { panel = p; return () => {} } },
}
let panel
await plugin.activate(host)
const picker = document.getElementById('conversation')
for (const c of info.conversations) picker.append(new Option('#' + c.conversationId + ' ' + visible(c.sessionKey || c.sessionId) + ' (' + c.messageCount + ' messages)', '#' + c.conversationId))
const container = document.getElementById('panel')
let view
const mount = () => {
  view?.dispose?.()
  container.replaceChildren()
  const ctx = { host, signal: host.signal, props: { sessionKey: picker.value }, presented: true, mountDefault: () => () => {} }
  view = panel.mount(container, ctx)
}
picker.addEventListener('change', mount)
const wanted = new URLSearchParams(location.search).get('conversation')
if (wanted && info.conversations.some((c) => String(c.conversationId) === wanted)) picker.value = '#' + wanted
if (info.conversations.length) mount(); else container.textContent = 'This database holds no conversation.'
`

/**
 * @typedef {object} UiOptions
 * @property {import('../index.js').LcmEngine} engine
 * @property {string} database      shown (a URL without its password)
 * @property {string | null} path   the file, for its size (null: PostgreSQL)
 * @property {string} version
 * @property {boolean} write
 * @property {number} [port]        0: any free port
 * @property {() => { summarize: import('../index.js').Summarize, model?: string }} [summarizer]
 * @property {(text: string) => void} [log]
 * @property {string} [token]       default: 24 random bytes
 */

/** True when `a` equals `b`, in time independent of where they differ. @param {string} a @param {string} b */
function sameSecret(a, b) {
  const x = Buffer.from(a)
  const y = Buffer.from(b)
  return x.length === y.length && timingSafeEqual(x, y)
}

/**
 * Starts the server on 127.0.0.1. Resolves with its URL (the token in the fragment) and a
 * `close`.
 * @param {UiOptions} o
 */
async function startUi(o) {
  const token = o.token ?? randomBytes(24).toString('hex')
  /** @type {Record<string, [string, Buffer]>} */
  const assets = {
    '/assets/index.js': ['text/javascript', readFileSync(join(ASSETS, 'index.js'))],
    '/assets/index.css': ['text/css', readFileSync(join(ASSETS, 'index.css'))],
    '/shell.js': ['text/javascript', Buffer.from(SHELL_JS)],
    '/shell.css': ['text/css', Buffer.from(SHELL_CSS)],
    '/': ['text/html; charset=utf-8', Buffer.from(PAGE)],
  }
  /** @type {Record<string, string>} */
  const security = {
    'content-security-policy': "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'",
    'x-content-type-options': 'nosniff',
    'referrer-policy': 'no-referrer',
    'cache-control': 'no-store',
  }
  /** @param {http.ServerResponse} res @param {number} status @param {unknown} body */
  const json = (res, status, body) => {
    res.writeHead(status, { ...security, 'content-type': 'application/json' })
    res.end(JSON.stringify(body))
  }
  /**
   * The open connections, each with the request it is answering (null between two). `close`
   * needs them: Node's `closeIdleConnections` (which `server.close` calls) closes only a
   * connection between two requests, not one that has sent nothing yet, nor one stopped in the
   * middle of its headers or of its body, and `server.close` waits for those for ever;
   * `closeAllConnections` would also cut an answer half-written.
   * @type {Map<import('node:net').Socket, http.IncomingMessage | null>}
   */
  const connections = new Map()
  let closing = false
  const server = http.createServer(async (req, res) => {
    const socket = req.socket
    connections.set(socket, req)
    res.once('close', () => {
      // (A connection already closed is not put back.)
      if (connections.get(socket) !== req) return
      connections.set(socket, null)
      // Answered while the server stops: the connection goes too, once the answer is out.
      if (closing && !socket.destroyed) socket.end(() => socket.destroy())
    })
    try {
      const url = new URL(req.url ?? '/', 'http://127.0.0.1')
      // A page of another site reaching this port through a name it points at 127.0.0.1
      // (DNS rebinding) sends its own Host: only loopback names are answered.
      const hostName = (req.headers.host ?? '').replace(/:\d+$/, '')
      if (!['127.0.0.1', 'localhost', '[::1]'].includes(hostName)) return json(res, 403, { ok: false, code: 'E_FORBIDDEN', error: 'only loopback host names are served' })
      const asset = Object.hasOwn(assets, url.pathname) ? assets[url.pathname] : undefined
      if (req.method === 'GET' && asset) {
        res.writeHead(200, { ...security, 'content-type': asset[0] })
        return res.end(asset[1])
      }
      if (!url.pathname.startsWith('/api/')) return json(res, 404, { ok: false, code: 'E_NOT_FOUND', error: 'not found' })
      const auth = req.headers.authorization ?? ''
      if (!sameSecret(auth, `Bearer ${token}`)) return json(res, 401, { ok: false, code: 'E_UNAUTHORIZED', error: 'missing or wrong token' })
      if (req.method === 'GET' && url.pathname === '/api/info') {
        const conversations = (await o.engine.conversations()).map((c) => ({ conversationId: c.conversationId, sessionKey: c.sessionKey, sessionId: c.sessionId, messageCount: c.messageCount }))
        return json(res, 200, { ok: true, database: o.database, version: o.version, write: o.write, conversations })
      }
      if (req.method === 'POST' && url.pathname === '/api/action') {
        const body = await readBody(req)
        const params = /** @type {Record<string, unknown>} */ (body && typeof body === 'object' ? body : {})
        const key = typeof params.sessionKey === 'string' ? params.sessionKey : ''
        const id = /^#(\d+)$/.exec(key)
        const conversationId = id ? Number(id[1]) : key ? ((await o.engine.findConversation({ sessionKey: key }))?.conversationId ?? null) : null
        const ctx = { engine: o.engine, conversationId, about: { version: o.version, database: o.database, path: o.path }, summarizer: o.summarizer, log: o.log, lastAssembly: null }
        return json(res, 200, await runOperation(String(params.actionId ?? ''), ctx, params.payload, { canWrite: o.write }))
      }
      return json(res, 404, { ok: false, code: 'E_NOT_FOUND', error: 'not found' })
    } catch (err) {
      const e = /** @type {{ code?: unknown, message?: unknown }} */ (err)
      const code = typeof e?.code === 'string' ? e.code : 'E_INTERNAL'
      const status = code === 'E_TOO_LARGE' ? 413 : code === 'E_INVALID_INPUT' ? 400 : 500
      json(res, status, { ok: false, code, error: String(e?.message ?? err) })
    }
  })
  server.on('connection', (/** @type {import('node:net').Socket} */ socket) => {
    connections.set(socket, null)
    socket.once('close', () => connections.delete(socket))
  })
  await new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen(o.port ?? 0, '127.0.0.1', () => resolve(undefined))
  })
  const address = /** @type {import('node:net').AddressInfo} */ (server.address())
  const base = `http://127.0.0.1:${address.port}/`
  return {
    url: `${base}#token=${token}`,
    base,
    token,
    port: address.port,
    /**
     * Stops the server: no new connection; one idle or stalled (that has sent nothing, or part
     * of its headers or of its body) is closed at once, one whose request has all come is left
     * CLOSE_GRACE_MS to be answered, then closed too. Resolves once every connection is closed.
     * @returns {Promise<void>}
     */
    close: () =>
      new Promise((resolve) => {
        closing = true
        /** @type {NodeJS.Timeout | undefined} */
        let timer
        // Called once every connection is closed (a second close: the same).
        server.close(() => {
          clearTimeout(timer)
          resolve()
        })
        for (const [socket, req] of connections) if (!req?.complete) socket.destroy()
        timer = setTimeout(() => {
          server.closeAllConnections()
          for (const socket of connections.keys()) socket.destroy()
        }, CLOSE_GRACE_MS)
      }),
  }
}

/** The JSON body of a request, at most MAX_BODY bytes. @param {http.IncomingMessage} req */
async function readBody(req) {
  const chunks = []
  let size = 0
  for await (const chunk of req) {
    size += chunk.length
    if (size > MAX_BODY) throw Object.assign(new Error(`the request body is larger than ${MAX_BODY} bytes`), { code: 'E_TOO_LARGE' })
    chunks.push(chunk)
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}')
  } catch {
    throw Object.assign(new Error('the request body is not JSON'), { code: 'E_INVALID_INPUT' })
  }
}

module.exports = { startUi }
