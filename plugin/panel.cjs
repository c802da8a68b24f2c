// @ts-check
'use strict'
// The backend of the LCM panel in OpenClaw's Control UI: each panel operation
// (panel/operations.cjs) registered as a session action (`plugins.sessionAction`), read ones
// with the operator's read scope, writes with the write scope. The host resolves the session
// key the panel names to its stored key and agent; the action reads that agent's database and
// the session's conversation, as the engine and the recall tools do.

const { readFileSync } = require('node:fs')
const { join } = require('node:path')

const { OPERATIONS, runOperation } = require('../panel/operations.cjs')
const { agentOf, databaseFor, isDatabaseUrl, shownDatabase } = require('./config.cjs')
const { targetOf } = require('./context-engine.cjs')
const { engineFor, lastAssemblies, logOnce, shared } = require('./shared.cjs')
const { makeSummarizer } = require('./summarizer.cjs')

/** The package's version, read once. */
let version = ''
const packageVersion = () => (version ||= String(JSON.parse(readFileSync(join(__dirname, '..', 'package.json'), 'utf8')).version))

/**
 * The session action registration of OpenClaw 2026.9 (`PluginSessionActionRegistration`), the
 * fields used.
 * @typedef {object} SessionAction
 * @property {string} id
 * @property {string} description
 * @property {('operator.read' | 'operator.write')[]} requiredScopes
 * @property {(ctx: ActionContext) => Promise<{ ok: true, result: import('../panel/operations.cjs').JsonValue } | { ok: false, error: string, code: string }>} handler
 *
 * @typedef {{ sessionKey?: string, agentId?: string, payload?: unknown, client?: { scopes?: string[] } }} ActionContext
 */

/**
 * Where the host lets a plugin register session actions: `api.session.controls` (2026.9), else
 * the older flat `api.registerSessionAction`; undefined on a host without either.
 * @param {any} api @returns {((action: SessionAction) => void) | undefined}
 */
function registrar(api) {
  const controls = api?.session?.controls
  if (controls && typeof controls.registerSessionAction === 'function') return (a) => controls.registerSessionAction(a)
  if (typeof api?.registerSessionAction === 'function') return (a) => api.registerSessionAction(a)
  return undefined
}

/**
 * Registers the panel's operations as session actions. Returns how many were registered (0 on
 * a host without session actions).
 * @param {any} api
 * @param {import('./config.cjs').PluginSettings} settings
 * @param {import('./shared.cjs').Logger} logger
 */
function registerPanelActions(api, settings, logger) {
  const register = registrar(api)
  if (!register) return 0
  for (const [id, op] of Object.entries(OPERATIONS)) {
    register({
      id,
      description: op.description,
      requiredScopes: [op.write ? 'operator.write' : 'operator.read'],
      handler: async (ctx) => {
        const scopes = ctx?.client?.scopes ?? []
        // The host checked the registered scope; a write is refused again here so that a
        // host that skipped the check cannot write through a read-only connection.
        const canWrite = scopes.includes('operator.write') || scopes.includes('operator.admin')
        const context = await contextOf(ctx ?? {}, settings, logger, api?.runtime?.llm).catch((err) => err)
        if (context instanceof Error) {
          const code = typeof (/** @type {{ code?: unknown }} */ (context).code) === 'string' ? String(/** @type {{ code?: unknown }} */ (context).code) : 'E_INTERNAL'
          return { ok: /** @type {const} */ (false), error: context.message, code }
        }
        return runOperation(id, context, ctx?.payload, { canWrite })
      },
    })
  }
  return Object.keys(OPERATIONS).length
}

/**
 * The operation context of one action call: the agent's database, the session's conversation.
 * @param {ActionContext} ctx @param {import('./config.cjs').PluginSettings} settings
 * @param {import('./shared.cjs').Logger} logger @param {unknown} llm
 * @returns {Promise<import('../panel/operations.cjs').OperationContext>}
 */
async function contextOf(ctx, settings, logger, llm) {
  const sessionKey = typeof ctx.sessionKey === 'string' && ctx.sessionKey !== '' ? ctx.sessionKey : undefined
  const agentId = typeof ctx.agentId === 'string' && ctx.agentId !== '' ? ctx.agentId : agentOf(sessionKey)
  const db = databaseFor(settings, agentId)
  const engine = await engineFor(db, settings.engineOptions())
  const conv = sessionKey ? await engine.findConversation(targetOf({ sessionKey })) : null
  return {
    engine,
    conversationId: conv ? conv.conversationId : null,
    about: { version: packageVersion(), database: shownDatabase(db), path: isDatabaseUrl(db) ? null : db },
    lastAssembly: sessionKey ? (lastAssemblies().get(sessionKey) ?? null) : null,
    log: (text) => logger.info(`lcm-native: ${text}`),
    summarizer: () => {
      const made = makeSummarizer({
        llm: typeof (/** @type {{ complete?: unknown }} */ (llm)?.complete) === 'function' ? /** @type {import('./summarizer.cjs').LlmLike} */ (llm) : undefined,
        summaryModel: settings.summaryModel,
        signal: undefined,
        memory: shared().memory,
        logOnce: (k, level, m) => logOnce(logger, k, level, m),
        logger,
      })
      // Recorded in the new version's `model`, as compaction records it.
      const model = made.model ?? (made.summarize === 'offline' ? 'lcm-native/offline' : 'openclaw/session-model')
      return { summarize: made.summarize, model }
    },
  }
}

module.exports = { registerPanelActions }
