// @ts-check
// `lcm-native tui`: opens the session and runs the app until the user quits. Loaded by the
// command line only for this command, so `require('lcm-native')` never loads Ink or React.

import { render } from 'ink'
import { createElement as h } from 'react'

import config from '../plugin/config.cjs'

import { App } from './app.mjs'
import { OFFLINE_MODEL, TuiSession } from './session.mjs'

/**
 * @param {object} o
 * @param {{ open(config: object): Promise<import('../index.js').LcmEngine> }} o.Engine
 * @param {string} o.dbPath
 * @param {string} [o.promptDir]
 * @param {{ model: string, describe: string, summarizerFor(signal?: AbortSignal): import('../index.js').Summarize } | null} o.llm
 * @param {Record<string, unknown>} [o.engineOptions]
 * @param {number} [o.conversationId]  open this conversation's DAG first
 */
export async function runTui({ Engine, dbPath, promptDir, llm, engineOptions, conversationId }) {
  const session = await TuiSession.open({
    Engine,
    dbPath,
    promptDir,
    engineOptions,
    summarizerFor: llm ? (signal) => llm.summarizerFor(signal) : () => 'offline',
    model: llm ? llm.model : OFFLINE_MODEL,
    describe: llm ? llm.describe : 'offline',
  })
  const app = render(h(App, { session, dbPath: config.shownDatabase(dbPath), summarizer: session.options.describe, initialConversation: conversationId }), {
    exitOnCtrlC: false,
  })
  try {
    await app.waitUntilExit()
  } finally {
    await session.close()
  }
}
