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

async function post(url, headers, body) {
  let res
  try {
    res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
    })
  } catch (err) {
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

/** `models.providers[provider].baseUrl` of OpenClaw's config, if the file has one. */
function openclawBaseUrl(env, home, provider) {
  const file = path.join(env.OPENCLAW_STATE_DIR || path.join(home, '.openclaw'), 'openclaw.json')
  let config
  try {
    config = JSON.parse(fs.readFileSync(file, 'utf8'))
  } catch (err) {
    if (err.code === 'ENOENT') return undefined
    throw new Error(`cannot read ${file}: ${err.message}`)
  }
  const providers = config?.models?.providers ?? {}
  const key = Object.keys(providers).find((k) => k.toLowerCase() === provider.toLowerCase())
  const url = key === undefined ? undefined : providers[key]?.baseUrl
  return typeof url === 'string' && url.trim() ? url.trim() : undefined
}

/** The provider a bare model name implies, as lcm-tui infers it. */
function providerOfModel(model) {
  if (/^claude/i.test(model)) return 'anthropic'
  if (/^(gpt|o\d|chatgpt|codex)/i.test(model)) return 'openai'
  return undefined
}

/**
 * The summarizer the flags and the environment choose, lcm-tui's way, or null for offline:
 * - provider: `--provider`, else the `provider/` of a `provider/model` model, else
 *   LCM_TUI_SUMMARY_PROVIDER, LCM_SUMMARY_PROVIDER, else
 *   `openai` when LCM_LLM_BASE_URL is set, else what a bare model name implies (claude… is
 *   anthropic, gpt… openai), else `anthropic` when ANTHROPIC_API_KEY is set;
 * - model: `--model`, else LCM_TUI_SUMMARY_MODEL, LCM_SUMMARY_MODEL, LCM_LLM_MODEL, else the
 *   provider's default (Claude Sonnet 4 for anthropic);
 * - base URL: `--base-url`, else LCM_TUI_SUMMARY_BASE_URL, LCM_SUMMARY_BASE_URL,
 *   LCM_LLM_BASE_URL (ANTHROPIC_BASE_URL for anthropic), else the provider's `baseUrl` in
 *   openclaw.json, else the provider's default;
 * - key: LCM_LLM_API_KEY, else `<PROVIDER>_API_KEY` (ANTHROPIC_API_KEY, OPENAI_API_KEY, …).
 * `anthropic` speaks Anthropic's Messages API; every other provider an OpenAI-compatible
 * chat-completions endpoint (the base URL as OpenAI's clients take it, ending in `/v1`).
 */
function resolveLlm({ env = process.env, home = os.homedir(), provider: flagProvider, model: flagModel, baseUrl: flagBaseUrl } = {}) {
  let model = flagModel ?? env.LCM_TUI_SUMMARY_MODEL ?? env.LCM_SUMMARY_MODEL ?? env.LCM_LLM_MODEL
  let provider = flagProvider
  const slash = model?.indexOf('/') ?? -1
  if (slash > 0) {
    provider ??= model.slice(0, slash)
    model = model.slice(slash + 1)
  }
  provider ??= env.LCM_TUI_SUMMARY_PROVIDER ?? env.LCM_SUMMARY_PROVIDER
  if (!provider && env.LCM_LLM_BASE_URL) provider = 'openai'
  if (!provider && model) provider = providerOfModel(model)
  if (!provider && env.ANTHROPIC_API_KEY) provider = 'anthropic'
  if (!provider) {
    if (flagModel || flagBaseUrl) throw new Error('cannot tell which provider to use: pass --provider (anthropic, openai, or an OpenClaw provider id)')
    return null
  }
  provider = provider.toLowerCase()
  model ??= DEFAULT_MODELS[provider]
  if (!model) throw new Error(`no model for provider ${provider}: pass --model or set LCM_SUMMARY_MODEL`)
  const envBase = env.LCM_TUI_SUMMARY_BASE_URL ?? env.LCM_SUMMARY_BASE_URL ?? (provider === 'anthropic' ? env.ANTHROPIC_BASE_URL : env.LCM_LLM_BASE_URL)
  const base = (flagBaseUrl ?? envBase ?? openclawBaseUrl(env, home, provider) ?? DEFAULT_BASE_URLS[provider])?.replace(/\/+$/, '')
  if (!base) throw new Error(`no base URL for provider ${provider}: pass --base-url, or set its baseUrl in openclaw.json`)
  const keyVar = `${provider.toUpperCase().replace(/[^A-Z0-9]/g, '_')}_API_KEY`
  const key = env.LCM_LLM_API_KEY ?? env[keyVar]
  if (provider === 'anthropic') {
    if (!key) throw new Error('no API key for anthropic: set ANTHROPIC_API_KEY (or LCM_LLM_API_KEY)')
    return anthropicLlm(base.replace(/\/v1$/, ''), model, key)
  }
  return openAiCompatibleLlm(base, model, key)
}

function openAiCompatibleLlm(base, model, key) {
  const headers = key ? { authorization: `Bearer ${key}` } : {}
  return {
    model,
    describe: `${model} at ${base} (OpenAI-compatible)`,
    summarize: async (prompt, request) => {
      const out = await post(`${base}/chat/completions`, headers, {
        model,
        messages: [{ role: 'user', content: prompt }],
        max_tokens: maxTokens(request),
        temperature: request.aggressive ? 0.1 : 0.2,
      })
      const content = out?.choices?.[0]?.message?.content
      if (typeof content !== 'string') throw new Error('the endpoint answered without choices[0].message.content')
      return content
    },
  }
}

function anthropicLlm(base, model, key) {
  const headers = { 'x-api-key': key, 'anthropic-version': '2023-06-01' }
  return {
    model,
    describe: `${model} (Anthropic)`,
    summarize: async (prompt, request) => {
      const out = await post(`${base}/v1/messages`, headers, {
        model,
        max_tokens: maxTokens(request),
        temperature: request.aggressive ? 0.1 : 0.2,
        messages: [{ role: 'user', content: prompt }],
      })
      if (!Array.isArray(out?.content)) throw new Error('Anthropic answered without content blocks')
      return out.content
        .filter((b) => b.type === 'text')
        .map((b) => b.text)
        .join('')
    },
  }
}

module.exports = { resolveLlm, ANTHROPIC_DEFAULT_MODEL }
