// The command line's summarizer: an OpenAI-compatible chat-completions endpoint or Anthropic's
// Messages API, reached with Node's fetch, chosen from the environment. The library itself
// never talks to a network: hosts pass their own callback.
'use strict'

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')

const ANTHROPIC_DEFAULT_MODEL = 'claude-sonnet-4-20250514'
const REQUEST_TIMEOUT_MS = 120_000

/** An Error the engine sorts as an authentication failure. */
function authError(message) {
  return Object.assign(new Error(message), { code: 'LCM_AUTH' })
}

/** POSTs JSON; `signal` (the TUI's esc) cancels the request besides the timeout. */
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
    throw new Error(`cannot reach ${url}: ${err.cause?.message ?? err.message}`)
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

/** Room for the answer: the target, with headroom for models that overshoot a little. */
function maxTokens(request) {
  return Math.max(256, Math.ceil(request.targetTokens * 1.5))
}

/** Default models, as lcm-tui chooses them when only a provider is known. */
const DEFAULT_MODELS = { anthropic: ANTHROPIC_DEFAULT_MODEL, openai: 'gpt-5.3-codex' }
/** Default endpoints; any other provider needs a base URL (flag, environment or openclaw.json). */
const DEFAULT_BASE_URLS = { anthropic: 'https://api.anthropic.com', openai: 'https://api.openai.com/v1' }

/** A variable's value, or undefined when it is unset or blank. */
function setting(env, name) {
  const v = env[name]
  return typeof v === 'string' && v.trim() ? v.trim() : undefined
}

/**
 * `models.providers` of OpenClaw's config (OPENCLAW_CONFIG_PATH, else openclaw.json in the
 * state directory), or {}. OpenClaw accepts JSON5; a file plain JSON cannot read is skipped
 * with a note, so it never stands in the way of a key set in the environment.
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
    const providers = JSON.parse(text)?.models?.providers
    return providers && typeof providers === 'object' ? providers : {}
  } catch (err) {
    warn(`note: ${file} is not plain JSON (${err.message}); its model providers are not used`)
    return {}
  }
}

/** The provider a bare model name implies, as lcm-tui infers it. */
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
 */
function resolveLlm({ env = process.env, home = os.homedir(), provider: flagProvider, model: flagModel, baseUrl: flagBaseUrl, warn = console.error } = {}) {
  let providers
  const openclaw = () => (providers ??= openclawProviders(env, home, warn))
  const entryOf = (p) => {
    const key = Object.keys(openclaw()).find((k) => k.toLowerCase() === p.toLowerCase())
    return key === undefined ? undefined : openclaw()[key]
  }
  let provider = flagProvider ?? setting(env, 'LCM_TUI_SUMMARY_PROVIDER') ?? setting(env, 'LCM_SUMMARY_PROVIDER')
  let model = flagModel ?? setting(env, 'LCM_TUI_SUMMARY_MODEL') ?? setting(env, 'LCM_SUMMARY_MODEL') ?? setting(env, 'LCM_LLM_MODEL')
  if (!provider && setting(env, 'LCM_LLM_BASE_URL')) provider = 'openai'
  const slash = model?.indexOf('/') ?? -1
  if (!provider && slash > 0) {
    const prefix = model.slice(0, slash)
    if (DEFAULT_BASE_URLS[prefix.toLowerCase()] || entryOf(prefix)) {
      provider = prefix
      model = model.slice(slash + 1)
    }
  }
  if (!provider && model) provider = providerOfModel(model)
  if (!provider && setting(env, 'ANTHROPIC_API_KEY')) provider = 'anthropic'
  if (!provider) {
    if (model || flagBaseUrl) {
      throw new Error(`cannot tell which provider serves ${model ? `model ${model}` : flagBaseUrl}: pass --provider or set LCM_SUMMARY_PROVIDER`)
    }
    return null
  }
  provider = provider.toLowerCase()
  model ??= DEFAULT_MODELS[provider]
  if (!model) throw new Error(`no model for provider ${provider}: pass --model or set LCM_SUMMARY_MODEL`)
  const entry = entryOf(provider)
  const messagesApi = provider === 'anthropic' || entry?.api === 'anthropic-messages'
  const legacyBase = messagesApi ? undefined : setting(env, 'LCM_LLM_BASE_URL')
  const chosenBase =
    flagBaseUrl ??
    setting(env, 'LCM_TUI_SUMMARY_BASE_URL') ??
    setting(env, 'LCM_SUMMARY_BASE_URL') ??
    (provider === 'anthropic' ? setting(env, 'ANTHROPIC_BASE_URL') : legacyBase) ??
    (typeof entry?.baseUrl === 'string' && entry.baseUrl.trim() ? entry.baseUrl.trim() : undefined) ??
    DEFAULT_BASE_URLS[provider]
  if (!chosenBase) throw new Error(`no base URL for provider ${provider}: pass --base-url, or set its baseUrl in openclaw.json`)
  const base = chosenBase.replace(/\/+$/, '')
  const keyVar = `${provider.toUpperCase().replace(/[^A-Z0-9]/g, '_')}_API_KEY`
  const ownKey = setting(env, keyVar)
  const key = legacyBase !== undefined && chosenBase === legacyBase ? (setting(env, 'LCM_LLM_API_KEY') ?? ownKey) : ownKey
  if (messagesApi) {
    if (!key) throw new Error(`no API key for ${provider}: set ${keyVar}`)
    return anthropicLlm(base.replace(/\/v1$/, ''), model, key)
  }
  return openAiCompatibleLlm(base, model, key)
}

function openAiCompatibleLlm(base, model, key) {
  const headers = key ? { authorization: `Bearer ${key}` } : {}
  const summarizerFor = (signal) => async (prompt, request) => {
    const out = await post(
      `${base}/chat/completions`,
      headers,
      { model, messages: [{ role: 'user', content: prompt }], max_tokens: maxTokens(request), temperature: request.aggressive ? 0.1 : 0.2 },
      signal,
    )
    const content = out?.choices?.[0]?.message?.content
    if (typeof content !== 'string') throw new Error('the endpoint answered without choices[0].message.content')
    return content
  }
  return { model, describe: `${model} at ${base} (OpenAI-compatible)`, summarize: summarizerFor(undefined), summarizerFor }
}

function anthropicLlm(base, model, key) {
  const headers = { 'x-api-key': key, 'anthropic-version': '2023-06-01' }
  const summarizerFor = (signal) => async (prompt, request) => {
    const out = await post(
      `${base}/v1/messages`,
      headers,
      { model, max_tokens: maxTokens(request), temperature: request.aggressive ? 0.1 : 0.2, messages: [{ role: 'user', content: prompt }] },
      signal,
    )
    if (!Array.isArray(out?.content)) throw new Error('Anthropic answered without content blocks')
    return out.content
      .filter((b) => b.type === 'text')
      .map((b) => b.text)
      .join('')
  }
  return { model, describe: `${model} (Anthropic)`, summarize: summarizerFor(undefined), summarizerFor }
}

module.exports = { resolveLlm, ANTHROPIC_DEFAULT_MODEL }
