// The command line's summarizer: an OpenAI-compatible chat-completions endpoint or Anthropic's
// Messages API, reached with Node's fetch, chosen from the environment. The library itself
// never talks to a network: hosts pass their own callback.
'use strict'

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')

const ANTHROPIC_DEFAULT_MODEL = 'claude-sonnet-4-20250514'
const REQUEST_TIMEOUT_MS = 120_000

/**
 * @typedef {import('../index.js').SummarizeRequest} SummarizeRequest
 * @typedef {(prompt: string, request: SummarizeRequest) => Promise<string>} SummarizeFn
 * @typedef {object} Llm  the summarizer the flags and the environment choose
 * @property {string} model
 * @property {string} describe                                 what the CLI and the TUI say about it
 * @property {SummarizeFn} summarize
 * @property {(signal?: AbortSignal) => SummarizeFn} summarizerFor  the same, cancelled by `signal`
 */

/**
 * The value at `keys` inside parsed JSON (or anything else), or undefined where a step is not
 * an object: `v?.a?.[0]?.b` for a value of unknown shape.
 * @param {unknown} v @param {...(string | number)} keys @returns {unknown}
 */
function at(v, ...keys) {
  let x = v
  for (const k of keys) {
    if (typeof x !== 'object' || x === null) return undefined
    x = /** @type {Record<string | number, unknown>} */ (x)[k]
  }
  return x
}

/** An Error the engine sorts as an authentication failure. @param {string} message */
function authError(message) {
  return Object.assign(new Error(message), { code: 'LCM_AUTH' })
}

/**
 * POSTs JSON; `signal` (the TUI's esc) cancels the request besides the timeout. Resolves with
 * the parsed answer.
 * @param {string} url @param {Record<string, string>} headers @param {unknown} body @param {AbortSignal | undefined} signal
 * @returns {Promise<unknown>}
 */
async function post(url, headers, body, signal) {
  let res
  const timeout = AbortSignal.timeout(REQUEST_TIMEOUT_MS)
  try {
    res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify(body),
      signal: signal ? AbortSignal.any([timeout, signal]) : timeout,
    })
  } catch (err) {
    if (signal?.aborted) throw Object.assign(new Error('cancelled'), { code: 'E_ABORTED' })
    throw new Error(`cannot reach ${url}: ${at(err, 'cause', 'message') ?? at(err, 'message')}`)
  }
  const text = await res.text()
  if (res.status === 401 || res.status === 403) throw authError(`${url} refused the credentials (HTTP ${res.status}): ${text.slice(0, 200)}`)
  if (!res.ok) throw new Error(`${url} answered HTTP ${res.status}: ${text.slice(0, 300)}`)
  try {
    return JSON.parse(text)
  } catch {
    throw new Error(`${url} answered something that is not JSON: ${text.slice(0, 200)}`)
  }
}

/** Room for the answer: the target, with headroom for models that overshoot a little. @param {SummarizeRequest} request */
function maxTokens(request) {
  return Math.max(256, Math.ceil(request.targetTokens * 1.5))
}

/**
 * Default models, as lcm-tui chooses them when only a provider is known.
 * @type {Readonly<Record<string, string>>}
 */
const DEFAULT_MODELS = { anthropic: ANTHROPIC_DEFAULT_MODEL, openai: 'gpt-5.3-codex' }
/**
 * Default endpoints; any other provider needs a base URL (flag, environment or openclaw.json).
 * @type {Readonly<Record<string, string>>}
 */
const DEFAULT_BASE_URLS = { anthropic: 'https://api.anthropic.com', openai: 'https://api.openai.com/v1' }

/**
 * A provider's entry of one of those tables (only the table's own: a provider named
 * `constructor` or `toString` has no default).
 * @param {Readonly<Record<string, string>>} table @param {string} provider
 */
function defaultFor(table, provider) {
  return Object.hasOwn(table, provider) ? table[provider] : undefined
}

/** A variable's value, or undefined when it is unset or blank. @param {NodeJS.ProcessEnv} env @param {string} name */
function setting(env, name) {
  const v = env[name]
  return typeof v === 'string' && v.trim() ? v.trim() : undefined
}

/**
 * `models.providers` of OpenClaw's config (OPENCLAW_CONFIG_PATH, else openclaw.json in the
 * state directory), or {}. OpenClaw accepts JSON5; a file plain JSON cannot read is skipped
 * with a note, so it never stands in the way of a key set in the environment.
 * @param {NodeJS.ProcessEnv} env @param {string} home @param {(message: string) => void} warn
 * @returns {Record<string, unknown>}
 */
function openclawProviders(env, home, warn) {
  const file =
    setting(env, 'OPENCLAW_CONFIG_PATH') ?? path.join(setting(env, 'OPENCLAW_STATE_DIR') ?? path.join(home, '.openclaw'), 'openclaw.json')
  let text
  try {
    text = fs.readFileSync(file, 'utf8')
  } catch {
    return {}
  }
  try {
    const providers = at(JSON.parse(text), 'models', 'providers')
    return providers && typeof providers === 'object' ? /** @type {Record<string, unknown>} */ (providers) : {}
  } catch (err) {
    warn(`note: ${file} is not plain JSON (${at(err, 'message')}); its model providers are not used`)
    return {}
  }
}

/** The provider a bare model name implies, as lcm-tui infers it. @param {string} model */
function providerOfModel(model) {
  if (/^claude/i.test(model)) return 'anthropic'
  if (/^(gpt|o\d|chatgpt|codex)/i.test(model)) return 'openai'
  return undefined
}

/**
 * The summarizer the flags and the environment choose, lcm-tui's way, or null for offline:
 * - provider: `--provider`, else LCM_TUI_SUMMARY_PROVIDER, LCM_SUMMARY_PROVIDER; else `openai`
 *   when LCM_LLM_BASE_URL is set; else the prefix of a `provider/model` model when it names a
 *   known provider (anthropic, openai, or one in openclaw.json; other slashes are part of the
 *   model id, as on OpenRouter); else what a bare model name implies (claude… anthropic, gpt…
 *   openai); else `anthropic` when ANTHROPIC_API_KEY is set;
 * - model: `--model`, else LCM_TUI_SUMMARY_MODEL, LCM_SUMMARY_MODEL, LCM_LLM_MODEL, else the
 *   provider's default (Claude Sonnet 4 for anthropic);
 * - base URL: `--base-url`, else LCM_TUI_SUMMARY_BASE_URL, LCM_SUMMARY_BASE_URL, else
 *   ANTHROPIC_BASE_URL (anthropic) or LCM_LLM_BASE_URL (others), else the provider's `baseUrl`
 *   in openclaw.json, else the provider's public API;
 * - key: the provider's own `<PROVIDER>_API_KEY` (ANTHROPIC_API_KEY, OPENAI_API_KEY, …);
 *   LCM_LLM_API_KEY goes only to LCM_LLM_BASE_URL, and first there.
 * `anthropic` (or a provider whose openclaw.json entry has `api: "anthropic-messages"`) speaks
 * Anthropic's Messages API; every other provider an OpenAI-compatible chat-completions endpoint
 * (the base URL as OpenAI's clients take it, ending in `/v1`).
 * @param {{ env?: NodeJS.ProcessEnv, home?: string, provider?: string, model?: string, baseUrl?: string, warn?: (message: string) => void }} [options]
 * @returns {Llm | null}
 */
function resolveLlm({ env = process.env, home = os.homedir(), provider: flagProvider, model: flagModel, baseUrl: flagBaseUrl, warn = console.error } = {}) {
  /** @type {Record<string, unknown> | undefined} */
  let providers
  const openclaw = () => (providers ??= openclawProviders(env, home, warn))
  /** The provider's entry in openclaw.json (its name in any case). @param {string} p @returns {unknown} */
  const entryOf = (p) => {
    const key = Object.keys(openclaw()).find((k) => k.toLowerCase() === p.toLowerCase())
    return key === undefined ? undefined : openclaw()[key]
  }
  let provider = flagProvider ?? setting(env, 'LCM_TUI_SUMMARY_PROVIDER') ?? setting(env, 'LCM_SUMMARY_PROVIDER')
  let model = flagModel ?? setting(env, 'LCM_TUI_SUMMARY_MODEL') ?? setting(env, 'LCM_SUMMARY_MODEL') ?? setting(env, 'LCM_LLM_MODEL')
  if (!provider && setting(env, 'LCM_LLM_BASE_URL')) provider = 'openai'
  const slash = model?.indexOf('/') ?? -1
  if (!provider && model !== undefined && slash > 0) {
    const prefix = model.slice(0, slash)
    if (defaultFor(DEFAULT_BASE_URLS, prefix.toLowerCase()) || entryOf(prefix)) {
      provider = prefix
      model = model.slice(slash + 1)
    }
  }
  if (!provider && model) provider = providerOfModel(model)
  if (!provider && setting(env, 'ANTHROPIC_API_KEY')) provider = 'anthropic'
  if (!provider) {
    if (model || flagBaseUrl) {
      throw Object.assign(new Error(`cannot tell which provider serves ${model ? `model ${model}` : flagBaseUrl}: pass --provider or set LCM_SUMMARY_PROVIDER`), { code: 'E_INVALID_CONFIG' })
    }
    return null
  }
  provider = provider.toLowerCase()
  model ??= defaultFor(DEFAULT_MODELS, provider)
  if (!model) throw Object.assign(new Error(`no model for provider ${provider}: pass --model or set LCM_SUMMARY_MODEL`), { code: 'E_INVALID_CONFIG' })
  const entry = entryOf(provider)
  const messagesApi = provider === 'anthropic' || at(entry, 'api') === 'anthropic-messages'
  const entryBase = at(entry, 'baseUrl')
  const legacyBase = messagesApi ? undefined : setting(env, 'LCM_LLM_BASE_URL')
  const chosenBase =
    flagBaseUrl ??
    setting(env, 'LCM_TUI_SUMMARY_BASE_URL') ??
    setting(env, 'LCM_SUMMARY_BASE_URL') ??
    (provider === 'anthropic' ? setting(env, 'ANTHROPIC_BASE_URL') : legacyBase) ??
    (typeof entryBase === 'string' && entryBase.trim() ? entryBase.trim() : undefined) ??
    defaultFor(DEFAULT_BASE_URLS, provider)
  if (!chosenBase) throw Object.assign(new Error(`no base URL for provider ${provider}: pass --base-url, or set its baseUrl in openclaw.json`), { code: 'E_INVALID_CONFIG' })
  const base = chosenBase.replace(/\/+$/, '')
  const keyVar = `${provider.toUpperCase().replace(/[^A-Z0-9]/g, '_')}_API_KEY`
  const ownKey = setting(env, keyVar)
  const key = legacyBase !== undefined && chosenBase === legacyBase ? (setting(env, 'LCM_LLM_API_KEY') ?? ownKey) : ownKey
  // A provider's public API always needs a key: say so before sending anything.
  if (!key && chosenBase === defaultFor(DEFAULT_BASE_URLS, provider)) {
    throw Object.assign(new Error(`no API key for ${provider}: set ${keyVar} (or pass --base-url for an endpoint that needs none); nothing was sent`), { code: 'E_INVALID_CONFIG' })
  }
  if (messagesApi) {
    if (!key) throw Object.assign(new Error(`no API key for ${provider}: set ${keyVar}`), { code: 'E_INVALID_CONFIG' })
    return anthropicLlm(base.replace(/\/v1$/, ''), model, key)
  }
  return openAiCompatibleLlm(base, model, key)
}

/** @param {string} base @param {string} model @param {string | undefined} key @returns {Llm} */
function openAiCompatibleLlm(base, model, key) {
  /** @type {Record<string, string>} */
  const headers = key ? { authorization: `Bearer ${key}` } : {}
  /** @param {AbortSignal} [signal] @returns {SummarizeFn} */
  const summarizerFor = (signal) => async (prompt, request) => {
    const out = await post(
      `${base}/chat/completions`,
      headers,
      { model, messages: [{ role: 'user', content: prompt }], max_tokens: maxTokens(request), temperature: request.aggressive ? 0.1 : 0.2 },
      signal,
    )
    const content = at(out, 'choices', 0, 'message', 'content')
    if (typeof content !== 'string') throw new Error('the endpoint answered without choices[0].message.content')
    return content
  }
  return { model, describe: `${model} at ${base} (OpenAI-compatible)`, summarize: summarizerFor(undefined), summarizerFor }
}

/** @param {string} base @param {string} model @param {string} key @returns {Llm} */
function anthropicLlm(base, model, key) {
  const headers = { 'x-api-key': key, 'anthropic-version': '2023-06-01' }
  /** @param {AbortSignal} [signal] @returns {SummarizeFn} */
  const summarizerFor = (signal) => async (prompt, request) => {
    const out = await post(
      `${base}/v1/messages`,
      headers,
      { model, max_tokens: maxTokens(request), temperature: request.aggressive ? 0.1 : 0.2, messages: [{ role: 'user', content: prompt }] },
      signal,
    )
    const blocks = at(out, 'content')
    if (!Array.isArray(blocks)) throw new Error('Anthropic answered without content blocks')
    return blocks
      .filter((/** @type {unknown} */ b) => at(b, 'type') === 'text')
      .map((/** @type {unknown} */ b) => at(b, 'text'))
      .join('')
  }
  return { model, describe: `${model} (Anthropic)`, summarize: summarizerFor(undefined), summarizerFor }
}

module.exports = { resolveLlm, ANTHROPIC_DEFAULT_MODEL }
