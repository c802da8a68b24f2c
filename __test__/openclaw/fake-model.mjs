// @ts-check
// A deterministic OpenAI-compatible model server for end-to-end runs of the real OpenClaw host.
//
//   POST /v1/chat/completions  streaming SSE (stream:true) or one JSON response
//   GET  /v1/models            one model, "fake-model"
//   anything else              404 {"error":{...}}
//
// How a chat request is answered (see `reply()`):
//   * No `tools` (absent or empty) means a plain completion from a plugin (OpenClaw's
//     `llm.complete` never sends tools, while every agent turn carries at least the Tool Search
//     controls). It is a *summarization* when its text mentions "summar" (any case), a
//     `<conversation…>` tag or "transcript": the reply is "FAKE-SUMMARY: <first words of the
//     source>\nExpand for details about: fake details" (with `replyTokens`, prose of 15 % of the
//     source's length, 100–1,200 tokens, before that line). The source is the text inside the first
//     `<conversation…>…</conversation…>` tag (the LCM prompts wrap it so), else the last user text.
//     A tool-less request without those markers gets "FAKE-COMPLETION: <first words>".
//     With `summaries: 'opaque'` (opt-in) a summary keeps no word of its source: "FAKE-SUMMARY
//     <12 hex digits of the source's sha256>", then (with `replyTokens`, the same length rule)
//     filler words that do not occur in the source, then the same "Expand for details" line.
//   * With tools it is an agent turn. The current turn starts at the last real user message
//     (OpenClaw appends an `<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>` user message after it, and
//     prefixes user texts with "[Mon 2026-11-23 08:38 UTC] "; both are ignored).
//     - a tool result after that message        -> "tool said: <first 200 chars of the result>"
//       (OpenClaw puts the internal-context message *after* the tool result, so "after the last
//       real user message" is the test, not "last message"; a `tool_call` envelope is unwrapped)
//     - user text containing "TOOLCALL <tool> <query|json>" (to the end of that line) -> a call
//       of <tool> with {"query": …} (or the JSON object): directly when <tool> is in `tools`,
//       else through Tool Search's `tool_call` ({"id": <tool>, "args": …}), else through
//       `tool_search_code` ({"code": "return await openclaw.tools.call(…)"})
//     - otherwise                               -> "ack: <first 40 chars of the user text>"
//       (with `replyTokens`, followed by sentences up to about that many tokens); with a `says`
//       function (opt-in) that returns a string for the user text, that string follows the ack
//       line (an answer that states something of its own)
//   * With `contextWindow`, a request whose messages come to more tokens than that (4 characters
//     a token) is refused as a real provider would: 400 `context_length_exceeded`.
//   * Response ids carry a random part per server instance: lossless-claw skips an assistant
//     message whose response id it has stored already, so ids must not repeat across servers.
//     With `idsRepeatEvery: n` they are `chatcmpl-<seq mod n>` instead, as Ollama's (a number
//     below 999) or a local server's after a restart repeat: lcm-native must store every reply.
//
// Standalone: node fake-model.mjs [--port N] [--log FILE]   (prints FAKE_MODEL_URL=…)

import { createHash, randomBytes } from 'node:crypto'
import { appendFileSync } from 'node:fs'
import { createServer } from 'node:http'
import { pathToFileURL } from 'node:url'

const INTERNAL_CONTEXT = '<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>'
const TIMESTAMP_PREFIX = /^\[[A-Z][a-z]{2} \d{4}-\d{2}-\d{2} \d{2}:\d{2}(?::\d{2})?(?: [A-Z][A-Za-z+\-0-9:]*)?\] /
// OpenClaw appends a "Runtime: agent=… | session=…" block to the first user message.
const RUNTIME_BLOCK = /\n+Runtime: agent=[\s\S]*$/

/**
 * @typedef {{ role: string, content?: unknown, tool_calls?: unknown[], tool_call_id?: string }} ChatMessage
 * @typedef {{ type?: string, function?: { name?: string, parameters?: any } }} ChatTool
 * @typedef {{ model?: string, messages?: ChatMessage[], tools?: ChatTool[], stream?: boolean,
 *   stream_options?: { include_usage?: boolean } }} ChatRequest
 * @typedef {{ kind: 'summary' | 'completion' | 'agent' | 'tool-call' | 'tool-result',
 *   text?: string, toolCall?: { id: string, name: string, arguments: string } }} Reply
 * @typedef {{ seq: number, at: string, method: string, path: string, body: unknown, reply?: Reply }} LoggedRequest
 */

/** Waits until the fake model has had no request for `quietMs` (background work after a turn). */
export async function settle(/** @type {{ requests: () => unknown[] }} */ fake, quietMs = 600, maxMs = 20_000) {
  const deadline = Date.now() + maxMs
  let n = fake.requests().length
  let since = Date.now()
  while (Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 100))
    const now = fake.requests().length
    if (now !== n) {
      n = now
      since = Date.now()
    } else if (Date.now() - since >= quietMs) return
  }
}

/** Text of a message content: a string, or the text parts of an array. */
export function contentText(/** @type {unknown} */ content) {
  if (typeof content === 'string') return content
  if (!Array.isArray(content)) return ''
  return content
    .map((p) => (p && typeof p === 'object' && typeof p.text === 'string' ? p.text : ''))
    .join('\n')
}

/** The user's own words: no timestamp prefix, no appended runtime block. */
export function cleanUserText(/** @type {string} */ text) {
  return text.replace(TIMESTAMP_PREFIX, '').replace(RUNTIME_BLOCK, '').trim()
}

/**
 * A tool result's text. Through Tool Search the result is a JSON envelope, from `tool_call`
 * `{"tool":{…},"result":{"content":[{"type":"text","text":…}]}}`, from `tool_search_code`
 * `{"ok":true,"value":{"tool":{…},"result":{…}}}`; the text parts of its result are used.
 * @param {string} text
 */
export function toolResultText(text) {
  try {
    const json = JSON.parse(text)
    const envelope = json?.value?.tool ? json.value : json
    const inner = contentText(envelope?.result?.content)
    if (envelope?.tool && inner) return inner
  } catch {}
  return text
}

/** `{…}` as JSON, anything else as `{"query": text}`. @param {string} text */
function parseArgs(text) {
  try {
    if (text.startsWith('{')) return JSON.parse(text)
  } catch {}
  return { query: text }
}

/** @param {string} text @param {number} n */
const firstWords = (text, n) => text.trim().split(/\s+/).slice(0, n).join(' ')

/**
 * About `tokens` tokens of an answer's prose, different for each `seed`.
 * @param {number} seed @param {number} tokens
 */
function prose(seed, tokens) {
  const words = ['the', 'service', 'latency', 'rises', 'after', 'deploy', 'so', 'check', 'pool', 'size', 'and', 'retry', 'budget', 'first']
  let out = ''
  for (let i = 0; out.length < tokens * 4; i++) out += `${words[(seed * 7 + i * 3) % words.length]}${i % 9 === 8 ? '. ' : ' '}`
  return out.trim()
}

/** Filler for opaque summaries (`summaries: 'opaque'`): none of it an English or log word. */
const OPAQUE_WORDS = ['lorem', 'ipsum', 'dolor', 'amet', 'consectetur', 'adipiscing', 'elit', 'eiusmod', 'tempor', 'incididunt', 'labore', 'dolore', 'magna', 'aliqua', 'veniam', 'nostrud']

/** An opaque summary's text (in the source of a summary of summaries). */
const OPAQUE_SUMMARY = /FAKE-SUMMARY [0-9a-f]{12}[\s\S]*?Expand for details about: fake details/g

/**
 * About `tokens` tokens of filler made of OPAQUE_WORDS that do not occur in `source` (outside
 * earlier opaque summaries, whose filler it would otherwise rule out).
 * @param {number} seed @param {number} tokens @param {string} source
 */
function opaqueProse(seed, tokens, source) {
  const present = new Set(source.replace(OPAQUE_SUMMARY, ' ').toLowerCase().split(/[^a-z]+/))
  const words = OPAQUE_WORDS.filter((w) => !present.has(w))
  if (words.length === 0) words.push('zq')
  let out = ''
  for (let i = 0; out.length < tokens * 4; i++) out += `${words[(seed * 7 + i * 3) % words.length]}${i % 9 === 8 ? '. ' : ' '}`
  return out.trim()
}

/**
 * Decides the reply to one chat completion request. Pure, so tests can call it directly.
 * @param {ChatRequest} body
 * @param {number} seq used to make tool call ids unique
 * @param {number} [replyTokens] length of an agent's plain answer beyond its "ack: …" line
 * @param {{ summaries?: 'opaque', says?: (userText: string) => string | undefined }} [opts]
 *   opt-in: summaries that keep no word of their source; an answer's own statement
 * @returns {Reply}
 */
export function reply(body, seq, replyTokens = 0, opts = {}) {
  const messages = Array.isArray(body.messages) ? body.messages : []
  const tools = Array.isArray(body.tools) ? body.tools : []

  if (tools.length === 0) {
    const all = messages.map((m) => contentText(m.content)).join('\n')
    const lastUser = [...messages].reverse().find((m) => m.role === 'user')
    const tagged = /<(conversation[a-z_]*)>\s*([\s\S]*?)\s*<\/\1>/.exec(all)
    const source = tagged ? tagged[2] : contentText(lastUser?.content)
    if (/summar/i.test(all) || /<conversation/.test(all) || /transcript/i.test(all)) {
      if (opts.summaries === 'opaque') {
        const hash = createHash('sha256').update(source).digest('hex').slice(0, 12)
        const extra = replyTokens > 0 ? `\n${opaqueProse(seq, Math.min(1_200, Math.max(100, Math.round(source.length / 4 * 0.15))), source)}` : ''
        return { kind: 'summary', text: `FAKE-SUMMARY ${hash}${extra}\nExpand for details about: fake details` }
      }
      // With `replyTokens`, as long as a real summary would be: 15 % of the source, 100–1,200.
      const extra = replyTokens > 0 ? `\n${prose(seq, Math.min(1_200, Math.max(100, Math.round(source.length / 4 * 0.15))))}` : ''
      return {
        kind: 'summary',
        text: `FAKE-SUMMARY: ${firstWords(source, 8)}${extra}\nExpand for details about: fake details`,
      }
    }
    return { kind: 'completion', text: `FAKE-COMPLETION: ${firstWords(source, 8)}` }
  }

  // The current turn: from the last user message that is not OpenClaw's internal context.
  let start = -1
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i]
    if (m.role === 'user' && !contentText(m.content).includes(INTERNAL_CONTEXT)) {
      start = i
      break
    }
  }
  const userText = start < 0 ? '' : cleanUserText(contentText(messages[start].content))
  const results = messages.slice(start + 1).filter((m) => m.role === 'tool')
  if (results.length > 0) {
    const last = toolResultText(contentText(results[results.length - 1].content))
    return { kind: 'tool-result', text: `tool said: ${last.slice(0, 200)}` }
  }

  const scripted = /\bTOOLCALL\s+(\S+)[ \t]*([^\n]*)/.exec(userText)
  if (scripted) {
    const [, target, rest] = scripted
    const args = parseArgs(rest.trim())
    const names = tools.map((t) => t.function?.name)
    /** @type {{ name: string, args: unknown }} */
    let call
    if (names.includes(target)) call = { name: target, args }
    else if (names.includes('tool_call')) call = { name: 'tool_call', args: { id: target, args } }
    else if (names.includes('tool_search_code'))
      call = {
        name: 'tool_search_code',
        args: { code: `return await openclaw.tools.call(${JSON.stringify(target)}, ${JSON.stringify(args)});` },
      }
    else return { kind: 'agent', text: `fake-model: no way to call ${target}; tools: ${names.join(',')}` }
    return { kind: 'tool-call', toolCall: { id: `call_${seq}`, name: call.name, arguments: JSON.stringify(call.args) } }
  }
  const said = opts.says?.(userText)
  const ack = said === undefined ? `ack: ${userText.slice(0, 40)}` : `ack: ${userText.slice(0, 40)}\n${said}`
  return { kind: 'agent', text: replyTokens > 0 ? `${ack}\n${prose(seq, replyTokens)}` : ack }
}

/** Roughly 4 characters a token, like the hosts' own estimates. */
const tokens = (/** @type {string} */ s) => Math.max(1, Math.ceil(s.length / 4))

/**
 * The OpenAI response chunks for a reply (the last one carries usage when asked).
 * @param {Reply} r @param {ChatRequest} body @param {string} id
 */
function chunks(r, body, id) {
  const base = { id, object: 'chat.completion.chunk', created: 0, model: body.model ?? 'fake-model' }
  const prompt = tokens(JSON.stringify(body.messages ?? []))
  /** @type {Record<string, unknown>} */
  let delta = { role: 'assistant', content: r.text }
  let finish = 'stop'
  let completion = tokens(r.text ?? '')
  if (r.toolCall) {
    const { id, name, arguments: args } = r.toolCall
    const call = { index: 0, id, type: 'function', function: { name, arguments: args } }
    delta = { role: 'assistant', content: null, tool_calls: [call] }
    finish = 'tool_calls'
    completion = tokens(r.toolCall.arguments)
  }
  const usage = { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion }
  return { base, delta, finish, usage }
}

/**
 * Starts the server on 127.0.0.1 (a free port unless `port` is given). With `contextWindow`,
 * requests over it are refused (see the header); `replyTokens` lengthens plain answers;
 * `idsRepeatEvery` makes response ids repeat (see the header); `summaries: 'opaque'` and
 * `says` are opt-in (see the header and `reply`).
 * @param {{ logFile?: string, port?: number, contextWindow?: number, replyTokens?: number, idsRepeatEvery?: number,
 *   summaries?: 'opaque', says?: (userText: string) => string | undefined }} [opts]
 */
export async function startFakeModel({ logFile, port = 0, contextWindow, replyTokens = 0, idsRepeatEvery, summaries, says } = {}) {
  const instance = randomBytes(4).toString('hex')
  /** Requests refused for their size: `{ seq, tokens }`. */
  const overflows = /** @type {{ seq: number, tokens: number }[]} */ ([])
  /** @type {LoggedRequest[]} */
  const log = []
  /** @param {LoggedRequest} entry */
  const record = (entry) => {
    log.push(entry)
    if (logFile) appendFileSync(logFile, JSON.stringify(entry) + '\n')
  }

  const server = createServer((req, res) => {
    /** @type {Buffer[]} */
    const parts = []
    req.on('data', (b) => parts.push(b))
    req.on('end', () => {
      const seq = log.length + 1
      const path = (req.url ?? '/').split('?')[0]
      const raw = Buffer.concat(parts).toString('utf8')
      /** @type {any} */
      let body = raw
      try {
        body = raw ? JSON.parse(raw) : null
      } catch {}
      /** @type {LoggedRequest} */
      const entry = { seq, at: new Date().toISOString(), method: req.method ?? '', path, body }
      /** @param {number} status @param {unknown} json */
      const send = (status, json) => {
        res.writeHead(status, { 'content-type': 'application/json' })
        res.end(JSON.stringify(json))
      }

      if (req.method === 'GET' && /^\/(v1\/)?models$/.test(path)) {
        record(entry)
        return send(200, { object: 'list', data: [{ id: 'fake-model', object: 'model', created: 0, owned_by: 'fake' }] })
      }
      if (req.method !== 'POST' || !/^\/(v1\/)?chat\/completions$/.test(path)) {
        record(entry)
        const message = `fake-model: no route ${req.method} ${path}`
        return send(404, { error: { message, type: 'invalid_request_error', code: 'not_found' } })
      }
      if (!body || typeof body !== 'object' || !Array.isArray(body.messages)) {
        record(entry)
        return send(400, { error: { message: 'fake-model: body needs a messages array', type: 'invalid_request_error' } })
      }

      const promptTokens = tokens(JSON.stringify(body.messages))
      if (contextWindow !== undefined && promptTokens > contextWindow) {
        overflows.push({ seq, tokens: promptTokens })
        record({ ...entry, reply: { kind: 'completion', text: `overflow: ${promptTokens} tokens` } })
        const message = `This model's maximum context length is ${contextWindow} tokens. However, your messages resulted in ${promptTokens} tokens.`
        return send(400, { error: { message, type: 'invalid_request_error', param: 'messages', code: 'context_length_exceeded' } })
      }
      /** @type {Reply} */
      let r
      try {
        r = reply(body, seq, replyTokens, { summaries, says })
      } catch (e) {
        record(entry)
        return send(500, { error: { message: `fake-model: ${e}`, type: 'server_error' } })
      }
      entry.reply = r
      record(entry)
      const id = idsRepeatEvery ? `chatcmpl-${seq % idsRepeatEvery}` : `chatcmpl-fake-${instance}-${seq}`
      const { base, delta, finish, usage } = chunks(r, body, id)
      if (!body.stream) {
        const message = { ...delta, content: delta.content ?? null }
        return send(200, { ...base, object: 'chat.completion', choices: [{ index: 0, message, finish_reason: finish }], usage })
      }
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' })
      /** @param {unknown} data */
      const event = (data) => res.write(`data: ${JSON.stringify(data)}\n\n`)
      event({ ...base, choices: [{ index: 0, delta, finish_reason: null }] })
      event({ ...base, choices: [{ index: 0, delta: {}, finish_reason: finish }] })
      if (body.stream_options?.include_usage) event({ ...base, choices: [], usage })
      res.end('data: [DONE]\n\n')
    })
  })

  // A host that holds a connection while a plugin works synchronously for seconds (lossless-claw
  // 1.0 bootstrapping a long history) must not find it closed under it: the whole attempt
  // would be retried.
  server.keepAliveTimeout = 120_000
  server.headersTimeout = 121_000
  await new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, '127.0.0.1', () => resolve(undefined))
  })
  const address = server.address()
  const bound = address && typeof address === 'object' ? address.port : port
  return {
    port: bound,
    baseUrl: `http://127.0.0.1:${bound}/v1`,
    /** Every request so far, oldest first. */
    requests: () => [...log],
    /** Requests refused as over `contextWindow`, oldest first. */
    overflows: () => [...overflows],
    /** @returns {Promise<void>} */
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const arg = (/** @type {string} */ name) => {
    const i = process.argv.indexOf(name)
    return i > 0 ? process.argv[i + 1] : undefined
  }
  const fake = await startFakeModel({ port: Number(arg('--port') ?? 0), logFile: arg('--log') })
  console.log(`FAKE_MODEL_URL=${fake.baseUrl}`)
  const stop = () => fake.close().then(() => process.exit(0))
  process.on('SIGINT', stop)
  process.on('SIGTERM', stop)
}
