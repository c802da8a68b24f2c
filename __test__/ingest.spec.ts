// ingest(): the host's message shapes, both real transcripts, entryId de-duplication.
import { describe, expect, it } from 'vitest'
import { LcmEngine, estimateTokens, type IngestMessage } from '../index.js'
import { REFACTOR, THEME, freshDb, hostMessages, readTranscript, rejection, turns } from './helpers'

async function openTemp(): Promise<LcmEngine> {
  return LcmEngine.open({ dbPath: freshDb('lcm.db') })
}

describe('ingest', () => {
  it.each([THEME, REFACTOR])('stores %s completely and reads every message back unchanged', async (name) => {
    const engine = await openTemp()
    const messages = hostMessages(name)
    const raw = readTranscript(name)
    let conversationId = 0
    for (const turn of turns(messages)) {
      const out = await engine.ingest({ sessionId: name }, turn)
      expect(out.inserted).toBe(turn.length)
      expect(out.skipped).toBe(0)
      conversationId ||= out.conversationId
      expect(out.conversationId).toBe(conversationId)
    }
    const stored = await engine.messages(conversationId, { limit: 5000 })
    expect(stored).toHaveLength(raw.length)
    stored.forEach((m, i) => {
      expect(m.content, `message ${i}`).toEqual(raw[i].content)
      expect(m.role).toBe(raw[i].role === 'tool' ? 'toolResult' : raw[i].role)
      expect(m.seq).toBe(i + 1)
      expect(m.entryId).toBe(`line-${i}`)
      if (m.role === 'toolResult') expect(m.toolCallId).toBe(raw[i].toolCallId)
      // created_at keeps the transcript's time, to the second, in UTC.
      expect(m.createdAt).toBe(raw[i].createdAt.replace(/\.\d{3}Z$/, '.000Z'))
    })
    await engine.close()
  })

  it('makes re-ingesting the same transcript a no-op', async () => {
    const engine = await openTemp()
    const messages = hostMessages(THEME)
    const first = await engine.ingest({ sessionId: 's' }, messages)
    expect(first).toEqual({ conversationId: first.conversationId, inserted: 914, skipped: 0, duplicate: false, alreadyBootstrapped: false, replacedSurrogates: 0, redacted: 0, late: false })
    const second = await engine.ingest({ sessionId: 's' }, messages)
    expect(second).toEqual({ conversationId: first.conversationId, inserted: 0, skipped: 914, duplicate: false, alreadyBootstrapped: false, replacedSurrogates: 0, redacted: 0, late: false })
    const third = await engine.ingest({ conversationId: first.conversationId }, [
      ...messages.slice(-3),
      { role: 'user', content: 'new', entryId: 'new-1' },
    ])
    expect(third.inserted).toBe(1)
    expect(third.skipped).toBe(3)
    expect(await engine.messages(first.conversationId, { afterSeq: 914 })).toHaveLength(1)
    await engine.close()
  })

  it('accepts string content, system messages, epoch timestamps and unknown block types', async () => {
    const engine = await openTemp()
    const at = Date.UTC(2026, 1, 17, 23, 37, 5, 250)
    const msgs: IngestMessage[] = [
      { role: 'system', content: 'You are helpful.' },
      { role: 'user', content: 'Look at this', timestamp: at },
      { role: 'user', content: [{ type: 'image', data: 'aGVsbG8=', mimeType: 'image/png' }, { type: 'text', text: 'and this' }] },
      { role: 'assistant', content: [{ type: 'thinking', thinking: 'hmm', thinkingSignature: 'abc' }, { type: 'toolCall', id: 'c1', name: 'read', arguments: { path: 'x' } }] },
      { role: 'toolResult', toolCallId: 'c1', content: [{ type: 'text', text: 'file body' }] },
      { role: 'tool', toolCallId: 'c2', content: 'legacy alias' },
      { role: 'assistant', content: [] },
    ]
    const out = await engine.ingest({ sessionId: 'shapes' }, msgs)
    expect(out.inserted).toBe(msgs.length)
    const back = await engine.messages(out.conversationId)
    expect(back.map((m) => m.content)).toEqual(msgs.map((m) => m.content))
    expect(back.map((m) => m.role)).toEqual(['system', 'user', 'user', 'assistant', 'toolResult', 'toolResult', 'assistant'])
    expect(back[1].createdAt).toBe('2026-02-17T23:37:05.000Z')
    expect(back[5].toolCallId).toBe('c2')
    expect(back[1].tokenCount).toBe(estimateTokens('Look at this'))
    await engine.close()
  })

  it('hands back every character as stored, whatever its plane (results cross as ASCII-escaped JSON)', async () => {
    const engine = await openTemp()
    const text = 'caf\u00e9 \u2014 \u65e5\u672c\u8a9e \ud83d\ude00 \u00ff\u0100 \u{10FFFF} \\u00e9 "q"'
    const r = await engine.ingest({ sessionId: 's' }, [
      { role: 'user', content: text },
      { role: 'assistant', content: [{ type: 'text', text }] },
    ])
    const back = await engine.messages(r.conversationId)
    expect(back[0].content).toBe(text)
    expect(back[1].content).toEqual([{ type: 'text', text }])
    const { messages } = await engine.assemble(r.conversationId, { tokenBudget: 10_000 })
    expect(messages[0].content).toBe(text)
    expect(messages[1].content).toEqual([{ type: 'text', text }])
    await engine.close()
  })

  it('stores text holding lone UTF-16 surrogates, replacing each with U+FFFD, and says how many', async () => {
    const engine = await openTemp()
    const r = await engine.ingest({ sessionId: 's' }, [
      { role: 'user', content: 'half an emoji \uD83D here' },
      { role: 'assistant', content: [{ type: 'toolCall', id: 'c1', name: 'echo', arguments: { text: '\uDE00 tail' } }] },
      { role: 'toolResult', toolCallId: 'c1', content: [{ type: 'text', text: 'whole 😀 emoji' }] },
    ])
    expect(r).toMatchObject({ inserted: 3, replacedSurrogates: 2 })
    const back = await engine.messages(r.conversationId)
    expect(back[0].content).toBe('half an emoji \uFFFD here')
    expect(JSON.stringify(back[1].content)).toContain('\uFFFD tail')
    expect(JSON.stringify(back[2].content)).toContain('😀')
    const hits = await engine.grep(r.conversationId, { query: 'half \uD83D', mode: 'like' })
    expect(hits.hits).toHaveLength(1)
    await engine.close()
  })

  it('rejects a malformed message with its index and writes nothing of the call', async () => {
    const engine = await openTemp()
    const good = hostMessages(THEME).slice(0, 10)
    const ok = await engine.ingest({ sessionId: 's' }, good)
    const bad = [...hostMessages(THEME).slice(10, 20)] as unknown[]
    bad[6] = { role: 'toolResult', content: [{ type: 'text', text: 'no call id' }] }
    const err = await rejection(engine.ingest({ sessionId: 's' }, bad as IngestMessage[]))
    expect(err).toBeInstanceOf(Error)
    expect(err.code).toBe('E_INVALID_INPUT')
    expect(err.message).toMatch(/^message 6: .*toolCallId/)
    expect(await engine.messages(ok.conversationId)).toHaveLength(10)
    for (const [value, pattern] of [
      [null, /message 0: expected an object/],
      [{ role: 'user', content: { text: 'x' } }, /`content` must be/],
      [{ role: 'assistant', content: [{ type: 'toolCall', name: 'x' }] }, /content block 0 \(toolCall\): `id` is missing/],
      [{ role: 'user', content: 'x', timestamp: 'not a time' }, /not an ISO-8601 time/],
    ] as const) {
      const e = await rejection(engine.ingest({ sessionId: 's' }, [value as unknown as IngestMessage]))
      expect(e.code).toBe('E_INVALID_INPUT')
      expect(e.message).toMatch(pattern)
    }
    expect(await engine.messages(ok.conversationId)).toHaveLength(10)
    await engine.close()
  })

  it('rejects bad targets and unknown conversations with coded errors', async () => {
    const engine = await openTemp()
    const msg: IngestMessage[] = [{ role: 'user', content: 'x' }]
    expect((await rejection(engine.ingest({ conversationId: 77 }, msg))).code).toBe('E_NOT_FOUND')
    expect((await rejection(engine.ingest({} as never, msg))).code).toBe('E_INVALID_INPUT')
    expect((await rejection(engine.ingest({ sessionId: 'a', conversationId: 1 } as never, msg))).code).toBe('E_INVALID_INPUT')
    expect((await rejection(engine.ingest({ sessionId: 's' }, 'nope' as never))).code).toBe('E_INVALID_INPUT')
    expect((await rejection(engine.messages(-1))).code).toBe('E_INVALID_INPUT')
    await engine.close()
  })

  it('lists conversations with their sizes', async () => {
    const engine = await openTemp()
    expect(await engine.conversations()).toEqual([])
    await engine.ingest({ sessionId: 'a' }, hostMessages(THEME).slice(0, 5))
    await engine.ingest({ sessionId: 'b' }, [{ role: 'user', content: 'hi' }])
    const list = await engine.conversations()
    expect(list.map((c) => [c.sessionId, c.messageCount, c.contextItemCount, c.summaryCount])).toEqual([
      ['a', 5, 5, 0],
      ['b', 1, 1, 0],
    ])
    await engine.close()
  })

  it('rejects values JSON cannot carry, and accepts Date timestamps', async () => {
    const engine = await openTemp()
    const cyclic: Record<string, unknown> = { role: 'user', content: 'x' }
    cyclic.self = cyclic
    const call = engine.ingest({ sessionId: 's' }, [cyclic as unknown as IngestMessage])
    expect(call).toBeInstanceOf(Promise)
    const err = await rejection(call)
    expect(err.code).toBe('E_INVALID_INPUT')
    expect(err.message).toMatch(/messages cannot be read as JSON/)
    const big = await rejection(engine.ingest({ sessionId: 's' }, [{ role: 'user', content: 'x', n: 1n } as never]))
    expect(big.code).toBe('E_INVALID_INPUT')
    const at = new Date(Date.UTC(2026, 2, 1, 12, 0, 0))
    const out = await engine.ingest({ sessionId: 's' }, [{ role: 'user', content: 'dated', timestamp: at as never }])
    const [m] = await engine.messages(out.conversationId)
    expect(m.createdAt).toBe('2026-03-01T12:00:00.000Z')
    await engine.close()
  })

  it('concurrent calls (which may share a commit) each store all their messages, together and in order, or fail alone', async () => {
    const engine = await openTemp()
    const sessions = 6
    const turnsOf = turns(hostMessages(THEME)).slice(0, 60)
    const calls: Promise<unknown>[] = []
    for (const [i, turn] of turnsOf.entries()) {
      calls.push(engine.ingest({ sessionId: `s${i % sessions}` }, turn))
      // Now and then a call to a conversation that does not exist, in among the others.
      if (i % 17 === 0) calls.push(engine.ingest({ conversationId: 424242 }, turn).catch((e) => e.code))
    }
    const results = await Promise.all(calls)
    expect(results.filter((r) => r === 'E_NOT_FOUND')).toHaveLength(Math.ceil(turnsOf.length / 17))
    const conversations = await engine.conversations()
    expect(conversations).toHaveLength(sessions)
    for (const c of conversations) {
      const s = Number(c.sessionId.slice(1))
      // Calls in flight together are not ordered among themselves (await each to keep turn
      // order); each call's messages are contiguous and in their order.
      const key = (turn: { content?: unknown }[]) => JSON.stringify(turn.map((m) => m.content))
      const expected = turnsOf.filter((_, i) => i % sessions === s).map(key).sort()
      const stored = await engine.messages(c.conversationId, { limit: 5000 })
      expect(turns(stored).map(key).sort()).toEqual(expected)
    }
    expect((await engine.verify()).ok).toBe(true)
    await engine.close()
  })
})
