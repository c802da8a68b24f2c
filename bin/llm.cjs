// The command line's summarizer: an OpenAI-compatible chat-completions endpoint or Anthropic's
// Messages API, reached with Node's fetch, chosen from the environment. The library itself
// never talks to a network: hosts pass their own callback.
'use strict'

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

/**
 * The summarizer the environment configures:
 * - `LCM_LLM_BASE_URL` (+ `LCM_LLM_API_KEY`, `LCM_LLM_MODEL`): an OpenAI-compatible endpoint,
 *   the base URL as OpenAI's clients take it (`https://api.openai.com/v1`);
 * - else `ANTHROPIC_API_KEY` (+ `ANTHROPIC_BASE_URL`, model `LCM_LLM_MODEL` or Claude Sonnet 4);
 * - else null: use the offline summarizer.
 * `model` (the `--model` flag) wins over the environment's.
 */
function llmFromEnv(env = process.env, model) {
  if (env.LCM_LLM_BASE_URL) {
    const base = env.LCM_LLM_BASE_URL.replace(/\/+$/, '')
    const chosen = model ?? env.LCM_LLM_MODEL
    if (!chosen) throw new Error('LCM_LLM_BASE_URL is set but no model is: set LCM_LLM_MODEL or pass --model')
    const headers = env.LCM_LLM_API_KEY ? { authorization: `Bearer ${env.LCM_LLM_API_KEY}` } : {}
    return {
      model: chosen,
      describe: `${chosen} at ${base} (OpenAI-compatible)`,
      summarize: async (prompt, request) => {
        const out = await post(`${base}/chat/completions`, headers, {
          model: chosen,
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
  if (env.ANTHROPIC_API_KEY) {
    const base = (env.ANTHROPIC_BASE_URL ?? 'https://api.anthropic.com').replace(/\/+$/, '')
    const chosen = model ?? env.LCM_LLM_MODEL ?? ANTHROPIC_DEFAULT_MODEL
    const headers = { 'x-api-key': env.ANTHROPIC_API_KEY, 'anthropic-version': '2023-06-01' }
    return {
      model: chosen,
      describe: `${chosen} (Anthropic)`,
      summarize: async (prompt, request) => {
        const out = await post(`${base}/v1/messages`, headers, {
          model: chosen,
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
  return null
}

module.exports = { llmFromEnv, ANTHROPIC_DEFAULT_MODEL }
