// @ts-check
// The TUI's one way into the database: the library's own engine API. The file is opened
// read-only and reopened for writing the first time the user applies something; the writes
// are `rewrite`'s (versions, full-text rows and fidelity scores follow), so what the TUI
// writes is what `lcm-native rewrite --apply` would.

/** @typedef {import('../index.js').LcmEngine} LcmEngine */
/** @typedef {import('../index.js').Summarize} Summarize */
/** @typedef {import('../index.js').RewriteEntry} RewriteEntry */
/** @typedef {import('../index.js').RewriteProgress} RewriteProgress */

/** The model recorded for a text the offline summarizer wrote. */
export const OFFLINE_MODEL = 'lcm-native/offline'

/**
 * @typedef {object} SessionOptions
 * @property {{ open(config: object): Promise<LcmEngine> }} Engine  `LcmEngine` (or a test's stand-in)
 * @property {string} dbPath
 * @property {string} [promptDir]
 * @property {(signal: AbortSignal | undefined) => Summarize} summarizerFor  the summarizer,
 *   its network call cancelled by `signal`; `'offline'` for the offline summarizer
 * @property {string} model        recorded in `summaries.model` for applied texts
 * @property {string} describe     what the header says about the summarizer
 * @property {Record<string, unknown>} [engineOptions]  extra options for both opens (timezone)
 */

export class TuiSession {
  /** @param {SessionOptions} options @param {LcmEngine} engine */
  constructor(options, engine) {
    this.options = options
    this.engine = engine
    /** @type {'read-only' | 'writable'} */
    this.mode = 'read-only'
  }

  /** Opens the file read-only. @param {SessionOptions} options */
  static async open(options) {
    const engine = await options.Engine.open({ dbPath: options.dbPath, readOnly: true, ...options.engineOptions })
    return new TuiSession(options, engine)
  }

  conversations() {
    return this.engine.conversations()
  }

  /** @param {number} conversationId */
  dag(conversationId) {
    return this.engine.dag(conversationId)
  }

  /** `limit` messages of a conversation after `afterSeq`. @param {number} conversationId @param {number} afterSeq @param {number} limit */
  messages(conversationId, afterSeq, limit) {
    return this.engine.messages(conversationId, { afterSeq, limit })
  }

  /** Every version of a summary's text, oldest first. @param {string} summaryId */
  history(summaryId) {
    return this.engine.history(summaryId)
  }

  /** @param {number} conversationId @param {string} summaryId */
  preview(conversationId, summaryId) {
    return this.engine.rewritePreview(conversationId, summaryId, this.promptOptions())
  }

  /**
   * Asks the summarizer for a new text of one summary and writes nothing (`w`'s inflight
   * phase). `signal` cancels the call itself, not only the run.
   * @param {number} conversationId @param {string} summaryId @param {AbortSignal} signal
   * @returns {Promise<RewriteEntry>}
   */
  async rewriteOne(conversationId, summaryId, signal) {
    const summarize = this.options.summarizerFor(signal)
    const call =
      summarize === 'offline'
        ? summarize
        : /** @type {Summarize} */ (async (prompt, request) => abortable(summarize(prompt, request), signal))
    const result = await this.engine.rewrite(conversationId, call, { summaryId, ...this.promptOptions(), signal })
    return /** @type {RewriteEntry} */ (result.entries[0])
  }

  /**
   * Writes a reviewed text through `rewrite --apply`'s path: a rewrite of that summary whose
   * summarizer answers the reviewed text.
   * @param {number} conversationId @param {RewriteEntry} reviewed
   * @returns {Promise<RewriteEntry>}
   */
  async apply(conversationId, reviewed) {
    await this.writable()
    const result = await this.engine.rewrite(conversationId, async () => reviewed.newContent, {
      summaryId: reviewed.summaryId,
      apply: true,
      model: this.options.model,
      ...this.promptOptions(),
    })
    const entry = /** @type {RewriteEntry} */ (result.entries[0])
    if (!entry.applied) {
      throw Object.assign(new Error(`${reviewed.summaryId} was not written: the reviewed text was refused (${entry.level})`), { code: 'E_SUMMARIZER' })
    }
    return entry
  }

  /**
   * Rewrites and writes a summary and everything beneath it, bottom-up, each written as it
   * completes (`W`). `signal` stops before the next summary.
   * @param {number} conversationId @param {string} summaryId @param {AbortSignal} signal
   * @param {(p: RewriteProgress) => void} onProgress
   */
  async rewriteSubtree(conversationId, summaryId, signal, onProgress) {
    await this.writable()
    return this.engine.rewrite(conversationId, this.options.summarizerFor(undefined), {
      subtree: summaryId,
      apply: true,
      model: this.options.model,
      ...this.promptOptions(),
      signal,
      onProgress,
    })
  }

  /** Reopens the file for writing (once). */
  async writable() {
    if (this.mode === 'writable') return
    const engine = await this.options.Engine.open({ dbPath: this.options.dbPath, ...this.options.engineOptions })
    const readOnly = this.engine
    this.engine = engine
    this.mode = 'writable'
    await readOnly.close()
  }

  close() {
    return this.engine.close()
  }

  promptOptions() {
    return this.options.promptDir ? { promptDir: this.options.promptDir } : {}
  }
}

/**
 * `promise`, or a rejection with E_ABORTED as soon as `signal` aborts.
 * @template T @param {Promise<T>} promise @param {AbortSignal} signal @returns {Promise<T>}
 */
function abortable(promise, signal) {
  if (signal.aborted) return Promise.reject(aborted())
  return new Promise((resolve, reject) => {
    const onAbort = () => reject(aborted())
    signal.addEventListener('abort', onAbort, { once: true })
    promise.then(
      (v) => {
        signal.removeEventListener('abort', onAbort)
        resolve(v)
      },
      (e) => {
        signal.removeEventListener('abort', onAbort)
        reject(e)
      },
    )
  })
}

function aborted() {
  return Object.assign(new Error('cancelled'), { code: 'E_ABORTED' })
}
