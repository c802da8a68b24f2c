// A recording fake of the OpenClaw plugin API, with the parameter shapes of openclaw@2026.9.6
// (openclaw/plugin-sdk: ContextEngine, OpenClawPluginApi, llm.complete), for contract tests.
import { join } from 'node:path'

import plugin from '../plugin/index.cjs'
import { tempDir } from './helpers'

/** OpenClaw's `llm.complete` parameters (the direct form). */
export interface LlmCompleteParams {
  messages: { role: 'system' | 'user' | 'assistant'; content: string }[]
  systemPrompt?: string
  maxTokens?: number
  model?: string
  purpose?: string
  signal?: AbortSignal
}

export type Complete = (params: LlmCompleteParams) => Promise<unknown>

/** The host's view of a context engine (openclaw/plugin-sdk/agent-harness-runtime `ContextEngine`). */
export interface HostContextEngine {
  readonly info: {
    id: string
    name: string
    version?: string
    ownsCompaction?: boolean
    turnMaintenanceMode?: 'foreground' | 'background'
    transcriptSemantics?: { currentTurnFence?: string; turnAdvancementIdempotency?: string }
  }
  bootstrap(p: { sessionId: string; sessionKey?: string; sessionFile: string; runtimeContext?: Record<string, unknown> }): Promise<{
    bootstrapped: boolean
    importedMessages?: number
    reason?: string
  }>
  maintain(p: {
    sessionId: string
    sessionKey?: string
    sessionFile: string
    runtimeContext?: Record<string, unknown>
    abortSignal?: AbortSignal
  }): Promise<{ changed: boolean; bytesFreed: number; rewrittenEntries: number; reason?: string }>
  ingest(p: { sessionId: string; sessionKey?: string; message: unknown; isHeartbeat?: boolean }): Promise<{ ingested: boolean }>
  ingestBatch(p: { sessionId: string; sessionKey?: string; messages: unknown[]; isHeartbeat?: boolean }): Promise<{ ingestedCount: number }>
  afterTurn(p: {
    sessionId: string
    sessionKey?: string
    sessionFile: string
    messages: unknown[]
    prePromptMessageCount: number
    isHeartbeat?: boolean
    tokenBudget?: number
    runtimeContext?: Record<string, unknown>
  }): Promise<void>
  commitTurn(p: {
    advancementKey: string
    messages: unknown[]
    sessionId: string
    sessionKey?: string
    isHeartbeat?: boolean
    runtimeContext?: Record<string, unknown>
  }): Promise<{ status: 'committed' | 'duplicate' }>
  assemble(p: {
    sessionId: string
    sessionKey?: string
    messages: unknown[]
    tokenBudget?: number
    availableTools?: Set<string>
    prompt?: string
  }): Promise<{ messages: any[]; estimatedTokens: number; systemPromptAddition?: string }>
  compact(p: {
    sessionId: string
    sessionKey: string
    tokenBudget?: number
    force?: boolean
    currentTokenCount?: number
    compactionTarget?: 'budget' | 'threshold'
    customInstructions?: string
    runtimeContext?: Record<string, unknown>
    abortSignal?: AbortSignal
  }): Promise<{
    ok: boolean
    compacted: boolean
    reason?: string
    result?: { tokensBefore: number; tokensAfter?: number; details?: unknown }
  }>
  dispose(): Promise<void>
}

export interface HostTool {
  name: string
  description: string
  parameters: { type: 'object'; properties: Record<string, unknown>; required?: string[] }
  execute(toolCallId: string, params: unknown): Promise<{ content: { type: 'text'; text: string }[]; details: unknown }>
}

export interface FakeHost {
  dir: string
  dbPath: string
  logs: { level: string; message: string }[]
  llmCalls: LlmCompleteParams[]
  engine(): HostContextEngine
  tool(name: string, ctx: { sessionKey?: string; sessionId?: string }): HostTool
  /**
   * A provider-bound text after the plugin's input text transforms, applied as OpenClaw applies
   * them (`text.replace(from, to)` in registration order).
   */
  transformText(text: string): string
  /** Runs the plugin's handlers of a host hook (`api.on`), as OpenClaw does: event, then context. */
  fire(hook: string, event: unknown, ctx: unknown): Promise<unknown[]>
  factoryCount: number
  /** The session actions registered (`api.session.controls.registerSessionAction`), by id. */
  actions: Map<string, HostSessionAction>
  /**
   * Calls a session action as OpenClaw's `plugins.sessionAction` does after its checks: the
   * registered scope against the connection's (`operator.admin` satisfies all), then the handler.
   */
  action(id: string, ctx: { sessionKey?: string; agentId?: string; payload?: unknown; scopes?: string[] }): Promise<{ ok: boolean; result?: any; error?: string; code?: string }>
  /**
   * Retires the plugin instance as OpenClaw does on a reload, a disable or a stop: its
   * `api.lifecycle.onDispose` callbacks, newest first (only with `{ lifecycle: true }`).
   */
  dispose(): Promise<void>
}

/** OpenClaw 2026.9's `PluginSessionActionRegistration`, the fields the plugin sets. */
export interface HostSessionAction {
  id: string
  description?: string
  requiredScopes?: string[]
  handler(ctx: Record<string, unknown>): Promise<{ ok: boolean; result?: unknown; error?: string; code?: string }>
}

/**
 * Registers the plugin with a fake API. `complete` answers the plugin's `llm.complete` calls
 * (default: a short summary naming the prompt's size).
 */
export function fakeHost(config: Record<string, unknown> = {}, complete?: Complete, opts: { lifecycle?: boolean } = {}): FakeHost {
  const dir = tempDir('lcm-plugin-')
  const dbPath = (config.dbPath as string | undefined) ?? join(dir, 'lcm.db')
  const logs: FakeHost['logs'] = []
  const llmCalls: LlmCompleteParams[] = []
  let factory: ((ctx: unknown) => unknown) | undefined
  const tools = new Map<string, (ctx: unknown) => unknown>()
  const hooks = new Map<string, ((event: unknown, ctx: unknown) => unknown)[]>()
  const transforms: { from: string | RegExp; to: string }[] = []
  const answer: Complete =
    complete ??
    (async (p) => ({
      text: `FAKE summary (${p.messages[0].content.length} chars)\nExpand for details about: the fake details`,
      stopReason: 'stop',
      provider: 'fake',
      model: 'fake-model',
    }))
  const actions = new Map<string, HostSessionAction>()
  const disposers: (() => unknown)[] = []
  const host: FakeHost = {
    actions,
    async dispose() {
      for (const d of disposers.splice(0).reverse()) await d()
    },
    async action(id, ctx) {
      const a = actions.get(id)
      if (!a) throw new Error(`no session action ${id} was registered`)
      const scopes = ctx.scopes ?? ['operator.read', 'operator.write']
      const needed = a.requiredScopes ?? ['operator.write']
      if (!scopes.includes('operator.admin') && !needed.every((n) => scopes.includes(n))) {
        return { ok: false, error: `missing scope: ${needed.join(', ')}`, code: 'HOST_SCOPE' }
      }
      const { scopes: _, ...rest } = ctx
      return a.handler({ pluginId: 'lcm-native', actionId: id, ...rest, client: { scopes } })
    },
    dir,
    dbPath,
    logs,
    llmCalls,
    factoryCount: 0,
    engine() {
      if (!factory) throw new Error('no context engine was registered')
      host.factoryCount++
      return factory({ agentDir: dir, workspaceDir: dir }) as HostContextEngine
    },
    tool(name, ctx) {
      const make = tools.get(name)
      if (!make) throw new Error(`no tool ${name} was registered`)
      return make(ctx) as HostTool
    },
    transformText(text) {
      let next = text
      for (const t of transforms) next = next.replace(t.from, t.to)
      return next
    },
    async fire(hook, event, ctx) {
      return Promise.all((hooks.get(hook) ?? []).map((h) => h(event, ctx)))
    },
  }
  const log = (level: string) => (message: string) => void logs.push({ level, message })
  plugin.register({
    registrationMode: 'full',
    pluginConfig: { dbPath, ...config },
    logger: { info: log('info'), warn: log('warn'), error: log('error'), debug: log('debug') },
    runtime: {
      llm: {
        complete: async (p: Record<string, unknown>) => {
          llmCalls.push(p as unknown as LlmCompleteParams)
          return answer(p as unknown as LlmCompleteParams)
        },
      },
    },
    registerContextEngine(id: string, f: (ctx: unknown) => unknown) {
      if (id !== 'lcm-native') throw new Error(`unexpected engine id ${id}`)
      factory = f
    },
    on(hook: string, handler: (event: unknown, ctx: unknown) => unknown) {
      hooks.set(hook, [...(hooks.get(hook) ?? []), handler])
    },
    registerTool(t: unknown, opts?: { name?: string }) {
      if (typeof t !== 'function' || !opts?.name) throw new Error('expected a tool factory with a name')
      tools.set(opts.name, t as (ctx: unknown) => unknown)
    },
    registerTextTransforms(t: { input?: { from: string | RegExp; to: string }[] }) {
      transforms.push(...(t.input ?? []))
    },
    ...(opts.lifecycle ? { lifecycle: { onDispose: (d: () => unknown) => disposers.push(d) } } : {}),
    session: {
      controls: {
        registerSessionAction(a: HostSessionAction) {
          if (actions.has(a.id)) throw new Error(`session action ${a.id} registered twice`)
          actions.set(a.id, a)
        },
      },
    },
  })
  return host
}

/** One user/assistant turn as OpenClaw commits it. */
export function turn(i: number, words = 40): unknown[] {
  const now = Date.now()
  return [
    { role: 'user', content: `question ${i}: ${'lorem ipsum dolor '.repeat(words)}`, timestamp: now },
    {
      role: 'assistant',
      content: [{ type: 'text', text: `answer ${i} mentions zebra-${i}` }],
      api: 'openai-completions',
      provider: 'fake',
      model: 'fake-model',
      usage: { input: 1, output: 1, cacheRead: 0, cacheWrite: 0, totalTokens: 2, cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 } },
      stopReason: 'stop',
      timestamp: now,
    },
  ]
}

/**
 * Whether OpenClaw 2026.9 goes on with a turn after this compaction result: when it compacted,
 * or when it says (ok) that there was nothing to compact, below threshold or already compacted
 * (the host's own classification of a benign skip, in its compact-reasons module).
 */
export function hostGoesOn(r: { ok: boolean; compacted: boolean; reason?: string }): boolean {
  if (r.compacted) return true
  const reason = (r.reason ?? '').toLowerCase()
  if (/below threshold|already under target|already compacted|already_compacted/.test(reason)) return true
  return r.ok && /nothing to compact|no real conversation messages/.test(reason)
}
