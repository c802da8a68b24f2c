// @ts-check
'use strict'
// The OpenClaw plugin entry (package.json → openclaw.extensions). `register` is synchronous
// and cheap: it reads the configuration and registers the context engine `lcm-native` and the
// recall tools. The addon is loaded and the database opened on first use.

const { ConfigError, resolveSettings } = require('./config.cjs')
const { LcmNativeContextEngine } = require('./context-engine.cjs')
const { oversizedPromptTransform } = require('./oversized-prompt.cjs')
const { registerPanelActions } = require('./panel.cjs')
const { isRecord } = require('./messages.cjs')
const { SessionRules } = require('./sessions.cjs')
const { addon, disposeAll, logOnce, shared } = require('./shared.cjs')
const { TOOL_NAMES, recallTools } = require('./tools.cjs')

const PLUGIN_ID = 'lcm-native'

/**
 * The part of OpenClaw's plugin API this plugin uses (see openclaw/plugin-sdk/plugin-entry).
 * @typedef {object} PluginApi
 * @property {string} [registrationMode]
 * @property {unknown} [pluginConfig]
 * @property {{ info: (m: string) => void, warn: (m: string) => void, error: (m: string) => void, debug?: (m: string) => void }} logger
 * @property {{ llm?: import('./summarizer.cjs').LlmLike }} [runtime]
 * @property {(id: string, factory: (ctx: unknown) => InstanceType<typeof LcmNativeContextEngine>) => void} registerContextEngine
 * @property {(tool: (ctx: ToolContext | undefined) => ReturnType<typeof recallTools>[number], opts?: { name?: string }) => void} [registerTool]
 * @property {(hook: 'before_reset' | 'session_end', handler: (event: unknown, ctx: unknown) => void) => void} [on]  host hooks
 * @property {(t: { input?: { from: string | RegExp, to: string }[] }) => void} [registerTextTransforms]  rewrites of provider-bound text
 * @property {{ controls?: { registerSessionAction?: (a: import('./panel.cjs').SessionAction) => void } }} [session]  the Control UI panel's actions (plugin/panel.cjs)
 * @property {{ onDispose?: (cleanup: () => void | Promise<void>) => unknown }} [lifecycle]  the managed instance's cleanup (a reload, a disable, the Gateway stopping)
 */

/**
 * The tool factory's context (openclaw/plugin-sdk: OpenClawPluginToolContext), the fields read.
 * @typedef {{ sessionKey?: string, sessionId?: string, agentId?: string }} ToolContext
 */

/**
 * The fields of OpenClaw's hook events and contexts this plugin reads (openclaw/plugin-sdk:
 * PluginHookBeforeResetEvent `reason`; PluginHookSessionEndEvent `reason`, `sessionId`,
 * `sessionKey`, `nextSessionKey`; PluginHookAgentContext `sessionId`, `sessionKey`).
 * @typedef {object} HookFields
 * @property {unknown} [reason]          checked by the engine's handler (`new`, `reset`, `deleted`)
 * @property {string} [sessionId]
 * @property {string} [sessionKey]
 * @property {string} [nextSessionKey]
 */

/**
 * `HookFields` of what the host passed a hook handler (an event or a context): a field that is
 * missing or not a string is undefined.
 * @param {unknown} v @returns {HookFields}
 */
function hookFields(v) {
  if (!isRecord(v)) return {}
  /** @param {string} k */
  const text = (k) => (typeof v[k] === 'string' ? v[k] : undefined)
  return { reason: v.reason, sessionId: text('sessionId'), sessionKey: text('sessionKey'), nextSessionKey: text('nextSessionKey') }
}

/** @param {PluginApi} api */
function register(api) {
  const logger = api.logger ?? console
  if (api.registrationMode === 'cli-metadata') return
  /** @type {import('./config.cjs').PluginSettings | undefined} */
  let settings
  /** @type {Error | undefined} */
  let invalid
  try {
    // The addon reads lossless-claw's LCM_* variables of the engine options on first use
    // (loading it is deferred), so only the plugin's own options are checked here.
    settings = resolveSettings(api.pluginConfig, process.env, (base) => /** @type {Record<string, unknown>} */ (addon().configFromEnv(base)))
  } catch (err) {
    invalid = err instanceof Error ? err : new Error(String(err))
    logOnce(logger, `config:${invalid.message}`, 'error', `${invalid.message}. OpenClaw's built-in engine is used until it is fixed.`)
  }

  api.registerContextEngine(PLUGIN_ID, () => {
    // A factory that throws makes the host use its built-in engine for this turn (and says
    // so); the configuration error was logged once at registration.
    if (!settings) throw invalid ?? new ConfigError('config', 'unreadable')
    return new LcmNativeContextEngine({ settings, rules: new SessionRules(settings), logger, llm: api.runtime?.llm })
  })

  if (settings && typeof api.registerTextTransforms === 'function') {
    // A message larger than the model's window reaches the model as an excerpt; a no-op for
    // every other text (oversized-prompt.cjs).
    api.registerTextTransforms({ input: [oversizedPromptTransform()] })
  }

  if (settings && typeof api.on === 'function') {
    // /new, /reset and deleted sessions, as lossless-claw 1.x handles them (its before_reset
    // and session_end hooks).
    const s = settings
    const lifecycle = () => new LcmNativeContextEngine({ settings: s, rules: new SessionRules(s), logger, llm: api.runtime?.llm })
    api.on('before_reset', (event, ctx) => {
      const e = hookFields(event)
      const c = hookFields(ctx)
      return lifecycle().beforeReset({ reason: e.reason, sessionId: c.sessionId, sessionKey: c.sessionKey })
    })
    api.on('session_end', (event) => {
      const e = hookFields(event)
      return lifecycle().sessionEnd({ reason: e.reason, sessionId: e.sessionId, sessionKey: e.sessionKey, nextSessionKey: e.nextSessionKey })
    })
  }

  if (settings) {
    // The LCM panel of the Control UI (openclaw.plugin.json → controlUi) asks these.
    registerPanelActions(api, settings, logger)
  }

  const full = api.registrationMode === undefined || api.registrationMode === 'full'
  if (full && typeof api.lifecycle?.onDispose === 'function') {
    // Retired (its config reloaded, disabled, the Gateway stopping): when no other live
    // instance shares them, stop background work and close the databases within the host's
    // cleanup budget; the successor opens them anew with its own options.
    const state = shared()
    state.liveInstances = (state.liveInstances ?? 0) + 1
    api.lifecycle.onDispose(async () => {
      state.liveInstances = Math.max(0, (state.liveInstances ?? 1) - 1)
      if (state.liveInstances > 0) return
      const d = await disposeAll()
      if (d.engines || d.unfinished) {
        logger.info(`lcm-native: plugin instance disposed: ${d.engines} database(s) closed in ${d.ms} ms${d.unfinished ? `, ${d.unfinished} background task(s) cut off (each pass is atomic)` : ''}`)
      }
    })
  }

  if (settings && typeof api.registerTool === 'function') {
    const s = settings
    for (const [i, name] of TOOL_NAMES.entries()) {
      api.registerTool((ctx) => recallTools(s, ctx ?? {}, api.runtime?.llm)[i], { name })
    }
  }
}

module.exports = {
  id: PLUGIN_ID,
  name: 'Lossless Context Management (lcm-native)',
  description: "Keeps every message in SQLite, summarises old ones into a DAG of summaries, and assembles each turn's context within the model's budget; continues lossless-claw's database.",
  register,
}
