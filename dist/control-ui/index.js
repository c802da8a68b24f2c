// The LCM panel of OpenClaw's Control UI (and of `lcm-native ui`): one ES module, no imports,
// no build step, plain DOM. OpenClaw loads it from the plugin's manifest (`controlUi.entry`;
// the host requires the path under dist/) and calls `activate(host)`; the panel asks the
// plugin's session actions (plugin/panel.cjs → panel/operations.cjs) for everything it shows.
// Text from the database is only ever set as text content, never parsed as HTML, and always
// in an isolate of its own (a <bdi>, or an element the CSS gives `unicode-bidi: isolate`): a
// stored U+202E RIGHT-TO-LEFT OVERRIDE left open reverses nothing of the panel's own text
// after it. Ids, names, keys and file names show their bidi controls (`⟨U+202E⟩`); message
// and summary text keep theirs.

const PLUGIN_ID = 'lcm-native'
const PAGE = 30

/** An element with attributes, properties (`on*` functions are listeners) and children. */
function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag)
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue
    if (k.startsWith('on') && typeof v === 'function') node.addEventListener(k.slice(2), v)
    else if (k === 'class') node.className = v
    else node.setAttribute(k, v === true ? '' : String(v))
  }
  for (const c of children.flat()) if (c !== null && c !== undefined && c !== false) node.append(c instanceof Node ? c : String(c))
  return node
}

/** The bidi formatting characters: marks U+061C, U+200E, U+200F; embeddings and overrides; isolates. */
const BIDI = /[\u061C\u200E\u200F\u202A-\u202E\u2066-\u2069]/g
const BIDI_NAMES = {
  '\u061C': 'ARABIC LETTER MARK',
  '\u200E': 'LEFT-TO-RIGHT MARK',
  '\u200F': 'RIGHT-TO-LEFT MARK',
  '\u202A': 'LEFT-TO-RIGHT EMBEDDING',
  '\u202B': 'RIGHT-TO-LEFT EMBEDDING',
  '\u202C': 'POP DIRECTIONAL FORMATTING',
  '\u202D': 'LEFT-TO-RIGHT OVERRIDE',
  '\u202E': 'RIGHT-TO-LEFT OVERRIDE',
  '\u2066': 'LEFT-TO-RIGHT ISOLATE',
  '\u2067': 'RIGHT-TO-LEFT ISOLATE',
  '\u2068': 'FIRST STRONG ISOLATE',
  '\u2069': 'POP DIRECTIONAL ISOLATE',
}
const codePoint = (c) => `U+${c.codePointAt(0).toString(16).toUpperCase().padStart(4, '0')}`
/** A stored id or name as a string (an attribute, a confirmation), its bidi controls shown: `call_⟨U+202E⟩7`. */
const visible = (value) => String(value ?? '').replace(BIDI, (c) => `⟨${codePoint(c)}⟩`)

/**
 * A stored id, name, key, file name or time inside a line of the panel's own text: in a <bdi>
 * (an isolate: nothing in it reorders what comes after), each bidi control in it shown as
 * `⟨U+202E⟩` and named in its title.
 */
function field(value) {
  const s = String(value ?? '')
  const node = el('bdi', { class: 'lcmn-field' })
  let from = 0
  for (const m of s.matchAll(BIDI)) {
    if (m.index > from) node.append(s.slice(from, m.index))
    node.append(el('span', { class: 'lcmn-ctl', title: `${codePoint(m[0])} ${BIDI_NAMES[m[0]]}` }, `⟨${codePoint(m[0])}⟩`))
    from = m.index + m[0].length
  }
  if (from < s.length) node.append(s.slice(from))
  return node
}

/** Stored text quoted inline in a line of the panel's own (a redaction's example), as written, in a <bdi>. */
const quote = (value) => el('bdi', { class: 'lcmn-quote' }, String(value ?? ''))

/** Fields joined by commas, each in its own isolate. */
const fields = (values) => values.flatMap((v, i) => (i ? [', ', field(v)] : [field(v)]))

const fmt = (n) => (typeof n === 'number' ? n.toLocaleString('en-US') : '–')
const when = (iso) => (iso ? String(iso).replace('T', ' ').replace(/(\.\d+)?Z$/, '').slice(0, 16) : '')
/** A stored time as a field (the engine writes ISO-8601; an imported file may hold anything). */
const stamp = (iso) => field(when(iso))
/** A time span in one line: the end without its date when both fall on one day. */
function span(a, b) {
  const x = when(a)
  const y = when(b)
  if (!x || !y) return x || y
  return x.slice(0, 10) === y.slice(0, 10) ? `${x} → ${y.slice(11)}` : `${x} → ${y}`
}
const bytes = (n) => (n === null || n === undefined ? '' : n < 1024 * 1024 ? `${(n / 1024).toFixed(0)} KiB` : `${(n / 1024 / 1024).toFixed(1)} MiB`)

/**
 * Markdown as DOM: headings, lists, fenced code, inline code and bold; anything else as text.
 * Summaries are model-written Markdown; nothing from them becomes HTML.
 */
function markdown(text) {
  const root = el('div', { class: 'lcmn-md' })
  const lines = String(text).split('\n')
  let list = null
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]
    if (line.startsWith('```')) {
      const code = []
      for (i++; i < lines.length && !lines[i].startsWith('```'); i++) code.push(lines[i])
      root.append(el('pre', {}, el('code', {}, code.join('\n'))))
      list = null
      continue
    }
    const heading = /^(#{1,6})\s+(.*)$/.exec(line)
    const item = /^\s*(?:[-*+]|\d+[.)])\s+(.*)$/.exec(line)
    if (heading) {
      root.append(el('p', { class: 'lcmn-md-h' }, ...inline(heading[2])))
      list = null
    } else if (item) {
      if (!list) root.append((list = el('ul')))
      list.append(el('li', {}, ...inline(item[1])))
    } else if (line.trim() === '') {
      list = null
    } else {
      root.append(el('p', {}, ...inline(line)))
      list = null
    }
  }
  return root
}

/** `code` and **bold** inside a line, the rest as text. */
function inline(line) {
  const out = []
  const re = /`([^`]+)`|\*\*([^*]+)\*\*/g
  let at = 0
  for (let m; (m = re.exec(line)); ) {
    if (m.index > at) out.push(line.slice(at, m.index))
    out.push(m[1] !== undefined ? el('code', {}, m[1]) : el('strong', {}, m[2]))
    at = m.index + m[0].length
  }
  if (at < line.length) out.push(line.slice(at))
  return out
}

/** The panel for one session. */
class LcmPanel {
  constructor(container, ctx) {
    this.container = container
    this.host = ctx.host
    this.props = ctx.props
    this.signal = ctx.signal
    this.tab = 'summaries'
    this.root = el('section', { class: 'lcmn', 'aria-label': 'Lossless context memory' })
    container.append(this.root)
    this.render()
  }

  /** Calls a panel operation of the plugin for this session. */
  async call(actionId, payload) {
    const params = { pluginId: PLUGIN_ID, actionId }
    if (payload !== undefined) params.payload = payload
    // The host's schema refuses an empty key: a pane without a session sends none.
    if (this.props.sessionKey) params.sessionKey = this.props.sessionKey
    if (this.props.agentId) params.agentId = this.props.agentId
    const r = await this.host.request('plugins.sessionAction', params)
    if (!r || r.ok === false) throw Object.assign(new Error(r?.error || 'the plugin gave no answer'), { code: r?.code || 'E_PLUGIN' })
    return r.result
  }

  get canWrite() {
    return Boolean(this.host.connection?.canWrite)
  }

  update(ctx) {
    const changed = ctx.props.sessionKey !== this.props.sessionKey || ctx.props.agentId !== this.props.agentId
    this.props = ctx.props
    if (changed) this.render()
  }

  /** Draws the whole panel again (a new session, a refresh). */
  render() {
    this.root.replaceChildren()
    this.focusArea = el('div', { class: 'lcmn-focus' })
    this.totals = el('div', { class: 'lcmn-totals', 'aria-live': 'polite' }, 'Loading…')
    this.body = el('div', { class: 'lcmn-body', role: 'tabpanel' })
    this.footer = el('footer', { class: 'lcmn-footer' })
    const tabs = [
      ['summaries', 'Summaries'],
      ['context', 'Last turn'],
      ['search', 'Search'],
      ['maintain', this.canWrite ? 'Check & redact' : 'Check'],
    ]
    const bar = el('div', { class: 'lcmn-tabs', role: 'tablist', 'aria-label': 'LCM views' })
    const buttons = tabs.map(([id, label]) =>
      el('button', { type: 'button', role: 'tab', 'data-tab': id, 'aria-selected': String(this.tab === id), tabindex: this.tab === id ? '0' : '-1', onclick: () => this.show(id) }, label),
    )
    bar.append(...buttons)
    // Arrow keys move between tabs (the WAI-ARIA tabs pattern).
    bar.addEventListener('keydown', (e) => {
      const i = buttons.indexOf(document.activeElement)
      if (i < 0 || (e.key !== 'ArrowRight' && e.key !== 'ArrowLeft')) return
      const next = buttons[(i + (e.key === 'ArrowRight' ? 1 : buttons.length - 1)) % buttons.length]
      next.focus()
      this.show(next.dataset.tab)
      e.preventDefault()
    })
    const refresh = el('button', { type: 'button', class: 'lcmn-refresh', onclick: () => this.render() }, 'Refresh')
    this.root.append(el('header', { class: 'lcmn-head' }, el('strong', {}, 'LCM'), refresh), this.totals, bar, this.focusArea, this.body, this.footer)
    this.tabButtons = buttons
    this.loadOverview()
    this.show(this.tab)
  }

  show(tab) {
    this.tab = tab
    for (const b of this.tabButtons) {
      b.setAttribute('aria-selected', String(b.dataset.tab === tab))
      b.tabIndex = b.dataset.tab === tab ? 0 : -1
    }
    this.body.replaceChildren()
    if (tab === 'summaries') this.showSummaries()
    else if (tab === 'context') this.showContext()
    else if (tab === 'search') this.showSearch()
    else this.showMaintain()
  }

  /** Runs `fn`, showing its error in `where` (with the code) instead of throwing. */
  async guarded(where, fn) {
    try {
      return await fn()
    } catch (err) {
      // The message may name a file, an id or a pattern: isolated, its controls shown.
      where.append(el('p', { class: 'lcmn-error', role: 'alert' }, err.code ? `${visible(err.code)}: ` : '', field(err.message)))
      return undefined
    }
  }

  async loadOverview() {
    const o = await this.guarded(this.totals, () => this.call('overview'))
    this.totals.firstChild?.nodeType === Node.TEXT_NODE && this.totals.firstChild.remove()
    if (!o) return
    const a = o.about
    this.footer.replaceChildren(`lcm-native ${visible(a.version)} · `, field(a.database), a.databaseBytes !== null ? ` · ${bytes(a.databaseBytes)}` : '')
    const c = o.conversation
    if (!c) {
      this.totals.replaceChildren(el('p', { class: 'lcmn-empty' }, 'LCM has stored nothing for this session yet.'))
      return
    }
    const depths = c.summariesByDepth.map((n, d) => `d${d} ${fmt(n)}`).join(' · ')
    const cache = c.promptCache
    const low = o.fidelity.reduce((n, d) => n + d.lowFidelity, 0)
    this.totals.replaceChildren(
      el(
        'dl',
        {},
        el('div', {}, el('dt', {}, 'Messages'), el('dd', { 'data-total': 'messages' }, fmt(c.messageCount))),
        el('div', {}, el('dt', {}, 'Summaries'), el('dd', { 'data-total': 'summaries' }, fmt(c.summaryCount), depths ? el('small', {}, ` (${depths})`) : '')),
        el('div', {}, el('dt', {}, 'Tokens stored'), el('dd', {}, fmt(c.messageTokens))),
        el('div', {}, el('dt', {}, 'In context'), el('dd', {}, `${fmt(c.contextTokens)} in ${fmt(c.contextItems)} items`)),
        el('div', {}, el('dt', {}, 'Compression'), el('dd', {}, c.compression ? `${c.compression.toFixed(1)}×` : '–')),
        cache ? el('div', {}, el('dt', {}, 'Prompt cache'), el('dd', {}, `${(cache.keptShare * 100).toFixed(1)} % kept over ${fmt(cache.assemblies)} requests, ${fmt(cache.compactions)} compactions`)) : '',
      ),
      low > 0 ? el('p', { class: 'lcmn-warn' }, `${fmt(low)} summaries are marked low-fidelity (see Check).`) : '',
    )
  }

  // ---- Summaries: the DAG, newest first, a page at a time ----

  async showSummaries() {
    const list = el('ol', { class: 'lcmn-list', 'aria-label': 'Summaries, newest first' })
    const more = el('button', { type: 'button', class: 'lcmn-more' }, 'Older summaries')
    const box = el('div', {}, list)
    this.body.append(box)
    let offset = 0
    const load = async () => {
      more.remove()
      const page = await this.guarded(box, () => this.call('summaries', { offset, limit: PAGE }))
      if (!page) return
      if (offset === 0 && page.summaries.length === 0) list.replaceWith(el('p', { class: 'lcmn-empty' }, 'No summaries yet: everything is still in context as written.'))
      for (const s of page.summaries) list.append(this.summaryItem(s))
      offset += page.summaries.length
      if (page.summaries.length === PAGE) box.append(more)
    }
    more.addEventListener('click', load)
    await load()
  }

  /** One summary row: badges and a preview; opening it shows its text, inputs and sources. */
  summaryItem(s) {
    const li = el('li', { class: 'lcmn-item', 'data-summary': s.summaryId })
    const detail = el('div', { class: 'lcmn-detail', hidden: true })
    const toggle = el(
      'button',
      { type: 'button', class: 'lcmn-row', 'aria-expanded': 'false' },
      el('span', { class: `lcmn-badge lcmn-d${Math.min(s.depth, 3)}` }, `d${s.depth}`),
      el('span', { class: 'lcmn-meta' }, `${fmt(s.tokenCount)} tok · `, field(span(s.earliestAt, s.latestAt))),
      s.fidelity !== null ? el('span', { class: 'lcmn-score', title: 'fidelity: share of its source’s identifiers kept' }, `fid ${s.fidelity.toFixed(2)}`) : '',
      s.fallback ? el('span', { class: 'lcmn-mark' }, 'fallback') : '',
      s.truncated ? el('span', { class: 'lcmn-mark' }, 'truncated') : '',
      s.lowFidelity ? el('span', { class: 'lcmn-mark' }, 'low fidelity') : '',
      el('span', { class: 'lcmn-preview' }, s.preview.replace(/\s+/g, ' ').slice(0, 160)),
    )
    toggle.addEventListener('click', async () => {
      const open = toggle.getAttribute('aria-expanded') !== 'true'
      toggle.setAttribute('aria-expanded', String(open))
      detail.hidden = !open
      if (open && !detail.dataset.loaded) {
        detail.dataset.loaded = '1'
        await this.fillSummary(detail, s.summaryId)
      }
    })
    li.append(toggle, detail)
    return li
  }

  /** A summary's whole text, marks, inputs, sources and (with write access) its actions. */
  async fillSummary(box, summaryId, highlight) {
    const d = await this.guarded(box, () => this.call('summary', { summaryId }))
    if (!d) return
    const fid = d.fidelityDetail
    box.append(
      el(
        'p',
        { class: 'lcmn-sub' },
        field(d.summaryId),
        ' · ',
        field(d.kind),
        ' · ',
        field(d.range),
        ` · covers ${fmt(d.coveredMessages.count)} messages · `,
        d.live ? 'in context' : d.liveSummary ? ['under ', field(d.liveSummary)] : 'under a deeper summary',
        ' · model ',
        field(d.model),
        ` · version ${d.versions.length || 1}`,
      ),
      fid && fid.score !== null
        ? el('p', { class: 'lcmn-sub' }, `fidelity ${fid.score.toFixed(2)}: keeps ${fid.kept} of ${fid.identifiers} identifiers`, fid.missingSalient.length ? ['; left out: ', ...fields(fid.missingSalient.slice(0, 8))] : '')
        : '',
      markdown(d.content),
    )
    if (d.inputCount) {
      const inputs = el('ol', { class: 'lcmn-list lcmn-nested', 'aria-label': `Inputs of ${visible(d.summaryId)}` })
      const more = d.inputCount - d.inputs.length
      box.append(el('p', { class: 'lcmn-sub' }, `Made from ${d.inputCount} summaries${more > 0 ? ` (the first ${d.inputs.length} listed)` : ''}:`), inputs)
      for (const child of d.inputs) inputs.append(this.summaryItem(child))
    }
    const sources = el('div', { class: 'lcmn-sources' })
    const open = el('button', { type: 'button', class: 'lcmn-more' }, `Raw messages (${fmt(d.coveredMessages.count)})`)
    open.addEventListener('click', () => {
      open.remove()
      this.fillSources(sources, summaryId, 0, highlight)
    })
    box.append(open, sources)
    if (this.canWrite) box.append(this.summaryActions(d))
    if (highlight !== undefined) {
      open.remove()
      await this.fillSources(sources, summaryId, 0, highlight)
    }
  }

  /** A page of the raw messages a summary stands for. */
  async fillSources(box, summaryId, offset, highlight) {
    const page = await this.guarded(box, () => this.call('children', { summaryId, offset, limit: 20 }))
    if (!page) return
    for (const m of page.messages) box.append(this.messageItem(m, m.messageId === highlight))
    const next = offset + page.messages.length
    if (next < page.total && page.messages.length > 0) {
      const more = el('button', { type: 'button', class: 'lcmn-more' }, `More messages (${fmt(page.total - next)} left)`)
      more.addEventListener('click', () => {
        more.remove()
        this.fillSources(box, summaryId, next, highlight)
      })
      box.append(more)
    }
    box.querySelector('.lcmn-hit')?.scrollIntoView({ block: 'nearest' })
  }

  /** One raw message: its role and time, each block (tool calls and results folded). */
  messageItem(m, hit) {
    const box = el('article', { class: `lcmn-msg lcmn-role-${m.role}${hit ? ' lcmn-hit' : ''}`, 'data-message': m.messageId, tabindex: hit ? '-1' : undefined })
    // The role, the id of the call a result answers and the time are stored: each isolated, so
    // that an override left open in one reverses nothing after it.
    box.append(el('p', { class: 'lcmn-sub' }, `#${m.seq} `, field(m.role), m.toolCallId ? [' (', field(m.toolCallId), ')'] : '', ' · ', stamp(m.createdAt), ` · ${fmt(m.tokenCount)} tok`))
    for (const b of m.blocks) {
      const label = b.type === 'toolCall' ? ['tool call ', field(b.toolName ?? '')] : b.type === 'text' ? (m.role === 'toolResult' ? 'tool result' : '') : [field(b.type)]
      // Prose as prose; tool calls, results and other blocks as code.
      const prose = b.type === 'text' && m.role !== 'toolResult'
      const body = el(prose ? 'div' : 'pre', { class: prose ? 'lcmn-prose' : 'lcmn-text' }, b.text)
      const size = b.chars === null || b.chars === undefined ? 'long fields folded' : `${fmt(b.chars)} chars`
      if (b.folded) {
        const wrap = el('div', {}, body, ...this.moreOf(box, m, b, body))
        box.append(label ? el('details', { open: b.type === 'text' && m.role !== 'toolResult' ? true : undefined }, el('summary', {}, label, ` · ${size}`), wrap) : wrap)
      } else {
        box.append(label ? el('details', { open: b.chars < 400 ? true : undefined }, el('summary', {}, label, ` · ${size}`), body) : body)
      }
    }
    if (m.moreBlocks > 0) box.append(el('p', { class: 'lcmn-sub' }, `… ${m.moreBlocks} more blocks`))
    return box
  }

  /**
   * What brings more of a folded block: its text a page at a time (the `text` operation: the
   * server reads only the page, however long the text), each long string of a block drawn as
   * JSON likewise under it, or, for JSON folded only here, the message opened whole.
   */
  moreOf(box, m, b, body) {
    if (b.path !== null && b.path !== undefined) return [this.pager(box, m.messageId, b.block, b.path, b.shown, b.chars, (t) => body.append(t))]
    const fields = (b.foldedFields ?? []).map((f) => {
      const out = el('pre', { class: 'lcmn-text', hidden: true })
      const open = el('button', { type: 'button', class: 'lcmn-more' }, 'Show ', field(f.path), ` (${fmt(f.chars)} characters)`)
      open.addEventListener('click', () => {
        const pages = this.pager(box, m.messageId, b.block, f.path, 0, f.chars, (t) => out.append(t))
        open.replaceWith(el('p', { class: 'lcmn-sub' }, field(f.path), ':'), out, pages)
        out.hidden = false
        pages.click()
      })
      return open
    })
    if (fields.length) return fields
    const whole = el('button', { type: 'button', class: 'lcmn-more' }, 'Show all')
    whole.addEventListener('click', async () => {
      const full = await this.guarded(box, () => this.call('message', { messageId: m.messageId }))
      const same = full?.blocks.find((x) => x.block === b.block)
      if (same) body.textContent = same.text
      whole.remove()
    })
    return [whole]
  }

  /** A button that appends the next page of one text (from `from`, of `chars`) through `add`. */
  pager(box, messageId, block, path, from, chars, add) {
    let next = from
    const more = el('button', { type: 'button', class: 'lcmn-more' })
    const label = () => {
      more.textContent = next === 0 ? `Show (${fmt(chars)} characters)` : `Show more (${fmt(chars - next)} of ${fmt(chars)} characters left)`
    }
    label()
    more.addEventListener('click', async () => {
      more.disabled = true
      const payload = { messageId, path, offset: next }
      if (block !== null && block !== undefined) payload.block = block
      const page = await this.guarded(box, () => this.call('text', payload))
      more.disabled = false
      if (!page) return
      add(page.text)
      if (page.nextOffset === null) return more.remove()
      next = page.nextOffset
      label()
    })
    return more
  }

  // ---- Writes on one summary: rewrite (preview → draft → review → apply), versions ----

  summaryActions(d) {
    const box = el('div', { class: 'lcmn-actions' })
    const out = el('div', { class: 'lcmn-work' })
    const rewrite = el('button', { type: 'button' }, 'Rewrite…')
    const versions = el('button', { type: 'button' }, 'Versions')
    rewrite.addEventListener('click', () => this.rewriteFlow(out, d.summaryId))
    versions.addEventListener('click', () => this.versionsView(out, d.summaryId))
    box.append(rewrite, versions, out)
    return box
  }

  async rewriteFlow(out, summaryId) {
    out.replaceChildren()
    const p = await this.guarded(out, () => this.call('rewritePreview', { summaryId }))
    if (!p) return
    const draft = el('button', { type: 'button' }, 'Ask the summarizer for a draft')
    out.append(
      el('p', { class: 'lcmn-sub' }, 'Template ', field(p.template.name), ' (', field(p.template.source), `) · prompt ${fmt(p.promptTokens)} tok · source ${fmt(p.sourceTokens)} tok · target ${fmt(p.targetTokens)} tok (now ${fmt(p.oldTokens)})`),
      el('details', {}, el('summary', {}, 'Prompt'), el('pre', { class: 'lcmn-text' }, p.prompt)),
      draft,
    )
    draft.addEventListener('click', async () => {
      draft.disabled = true
      draft.textContent = 'Waiting for the summarizer…'
      const e = await this.guarded(out, () => this.call('rewriteDraft', { summaryId }))
      draft.remove()
      if (!e) return
      const text = el('textarea', { class: 'lcmn-edit', rows: 10, 'aria-label': 'New text (you may edit it)' })
      text.value = e.newContent
      const apply = el('button', { type: 'button', class: 'lcmn-primary' }, 'Apply as a new version')
      out.append(el('p', { class: 'lcmn-sub' }, `${fmt(e.oldTokens)} → ${fmt(e.newTokens)} tokens · ${e.level}${e.fidelity !== null ? ` · fidelity ${e.fidelity.toFixed(2)}` : ''}`), diffView(e.diff), text, apply)
      apply.addEventListener('click', async () => {
        if (!confirm(`Write this text as the new version of ${visible(summaryId)}? The old version stays in its history.`)) return
        apply.disabled = true
        const r = await this.guarded(out, () => this.call('rewriteApply', { summaryId, content: text.value }))
        if (r) out.replaceChildren(el('p', { class: 'lcmn-ok', role: 'status' }, 'Written: ', field(summaryId), ` is now version ${r.version}.`))
      })
    })
  }

  async versionsView(out, summaryId) {
    out.replaceChildren()
    const h = await this.guarded(out, () => this.call('history', { summaryId }))
    if (!h) return
    const list = el('ol', { class: 'lcmn-versions', 'aria-label': `Versions of ${visible(summaryId)}` })
    for (const v of h.versions) {
      const item = el('li', {}, el('p', { class: 'lcmn-sub' }, `v${v.version}${v.current ? ' (current)' : ''} · `, field(v.reason), ' · ', field(v.model), ' · ', stamp(v.createdAt), ` · ${fmt(v.tokenCount)} tok`))
      item.append(el('details', {}, el('summary', {}, 'Text'), el('pre', { class: 'lcmn-text' }, v.content)))
      if (!v.current && v.stored) {
        const back = el('button', { type: 'button' }, `Roll back to v${v.version}`)
        back.addEventListener('click', async () => {
          if (!confirm(`Restore version ${v.version} of ${visible(summaryId)} as its newest version?`)) return
          const r = await this.guarded(out, () => this.call('rollback', { summaryId, version: v.version }))
          if (r) out.replaceChildren(el('p', { class: 'lcmn-ok', role: 'status' }, 'Restored: ', field(summaryId), ` is now version ${r.version}.`))
        })
        item.append(back)
      }
      list.append(item)
    }
    out.append(list)
  }

  // ---- What the model saw last turn ----

  async showContext() {
    const c = await this.guarded(this.body, () => this.call('context'))
    if (!c) return
    const a = c.lastAssembly
    if (a) {
      const s = a.stats
      this.body.append(
        el('p', {}, `Newest assembly ${when(a.at)}: ${fmt(a.estimatedTokens)} of a ${fmt(a.tokenBudget)}-token budget; ${fmt(s.keptItems)} items kept, ${fmt(s.evictedItems)} left out (${fmt(s.evictedTokens)} tok); fresh tail ${fmt(s.freshTailItems)} items.`),
        s.previousTokens !== null ? el('p', { class: 'lcmn-sub' }, `It began with ${fmt(s.keptTokens)} of the previous request's ${fmt(s.previousTokens)} tokens unchanged (what a prompt cache serves).`) : '',
        a.sameContext ? '' : el('p', { class: 'lcmn-warn' }, 'The context changed since (a compaction): the items below are the context now.'),
      )
      if (s.recall) this.body.append(this.recallSection(s.recall))
    } else {
      this.body.append(el('p', { class: 'lcmn-sub' }, 'No assembly seen by this process yet: the context as it stands.'))
    }
    this.body.append(el('p', { class: 'lcmn-sub' }, `${fmt(c.totalItems)} items, ${fmt(c.totalTokens)} tokens${c.itemsNotListed ? `; the oldest ${fmt(c.itemsNotListed)} are not listed` : ''}.`))
    const list = el('ol', { class: 'lcmn-list', 'aria-label': 'Context items, oldest first' })
    for (const i of c.items) {
      const what = i.kind === 'summary' ? [`summary d${i.depth} `, field(i.summaryId)] : [field(i.role), ` message ${i.messageId}`]
      list.append(el('li', { class: `lcmn-ctx${i.leftOut ? ' lcmn-out' : ''}` }, ...what, ` · ${fmt(i.tokens)} tok${i.leftOut ? ' · left out' : ''}`))
    }
    this.body.append(list)
  }

  /** What recall at assembly added to the newest assembly, and why each excerpt was chosen. */
  recallSection(r) {
    const box = el('section', { class: 'lcmn-recall', 'aria-label': 'Recalled for this turn' })
    // The terms are words of the user's message: each isolated, its controls shown.
    const asked = r.terms.length ? ['searched for ', ...fields(r.terms)] : ['nothing to search for']
    const kind = r.wants ? ['; asks for a ', field(r.wants)] : []
    const earlier = r.earlierBlocks ? `; ${fmt(r.earlierBlocks)} earlier block(s) kept where they were sent (${fmt(r.earlierTokens)} tok)` : ''
    const meaning = r.meaning === 'reading' ? '; by meaning once the history is read (it is being read now)' : r.meaning === 'compared' ? '; compared by meaning' : ''
    box.append(el('h3', {}, 'Recalled for this turn'))
    if (r.abstained) {
      box.append(el('p', { class: 'lcmn-sub' }, 'Nothing added (', field(r.abstained), '): ', ...asked, ...kind, `${meaning}${earlier}.`))
      return box
    }
    box.append(el('p', { class: 'lcmn-sub' }, `${fmt(r.tokens)} tok${r.reused ? ', given again from the turn\'s first assembly' : ''}: `, ...asked, ...kind, `; ${fmt(r.candidates)} messages outside the context read${meaning}${earlier}.`))
    const list = el('ol', { class: 'lcmn-list', 'aria-label': 'Recalled excerpts, as shown' })
    for (const h of r.hits) {
      const why = [
        h.matched.length ? ['matched ', ...fields(h.matched)] : null,
        h.valueOfKind ? ['holds a ', r.wants ? field(r.wants) : 'value'] : null,
        h.similarity !== null && h.similarity !== undefined ? [`near in meaning (cosine ${h.similarity})`] : null,
        h.supersededBy !== null && h.supersededBy !== undefined ? [`superseded by message ${h.supersededBy}`] : null,
      ].filter(Boolean)
      list.append(el('li', { class: 'lcmn-ctx' }, field(h.role), ` message ${h.messageId} · `, stamp(h.time), ` · score ${h.score} · ${fmt(h.tokens)} tok · `, ...why.flatMap((w, i) => (i ? ['; ', ...w] : w))))
    }
    box.append(list)
    if (r.block) box.append(el('pre', { class: 'lcmn-block', 'aria-label': 'The block as sent' }, r.block))
    return box
  }

  // ---- Search ----

  showSearch() {
    const query = el('input', { type: 'search', class: 'lcmn-input', 'aria-label': 'Search stored messages and summaries', placeholder: 'words, a substring or a regex' })
    const mode = el('select', { 'aria-label': 'Search mode' }, el('option', { value: 'fts' }, 'words'), el('option', { value: 'like' }, 'substring'), el('option', { value: 'regex' }, 'regex'))
    const scope = el('select', { 'aria-label': 'Search in' }, el('option', { value: 'both' }, 'everything'), el('option', { value: 'messages' }, 'messages'), el('option', { value: 'summaries' }, 'summaries'))
    const go = el('button', { type: 'submit' }, 'Search')
    const results = el('div', { class: 'lcmn-results', 'aria-live': 'polite' })
    const form = el('form', { class: 'lcmn-search', role: 'search' }, query, mode, scope, go)
    form.addEventListener('submit', async (e) => {
      e.preventDefault()
      results.replaceChildren()
      if (!query.value.trim()) return
      const r = await this.guarded(results, () => this.call('grep', { query: query.value, mode: mode.value, scope: scope.value, limit: 50 }))
      if (!r) return
      results.append(el('p', { class: 'lcmn-sub' }, `${r.hits.length}${r.truncated ? '+' : ''} hits`, r.partial ? [' (', field(r.partial.message), ')'] : ''))
      const list = el('ol', { class: 'lcmn-list', 'aria-label': 'Search hits' })
      for (const h of r.hits) {
        const label = h.type === 'summary' ? [`summary d${h.depth} `, field(h.summaryId)] : [field(h.role), ` message ${h.messageId}`]
        const open = el('button', { type: 'button', class: 'lcmn-row' }, el('span', { class: 'lcmn-meta' }, ...label, ' · ', stamp(h.time)), el('span', { class: 'lcmn-preview' }, h.snippet))
        open.addEventListener('click', () => this.openHit(h))
        list.append(el('li', { class: 'lcmn-item' }, open))
      }
      results.append(list)
    })
    this.body.append(form, results)
    query.focus()
  }

  /** Opens a hit in the tree: its summary (a message: the leaf above it, scrolled to it). */
  async openHit(h) {
    this.focusArea.replaceChildren()
    const close = el('button', { type: 'button', class: 'lcmn-close', 'aria-label': 'Close' }, '×')
    close.addEventListener('click', () => this.focusArea.replaceChildren())
    const box = el('div', { class: 'lcmn-detail' })
    this.focusArea.append(el('div', { class: 'lcmn-focus-head' }, el('strong', {}, 'Opened from search'), close), box)
    if (h.type === 'summary') {
      await this.fillSummary(box, h.summaryId)
    } else {
      const m = await this.guarded(box, () => this.call('message', { messageId: h.messageId }))
      if (!m) return
      const leaf = m.chain[0]?.summaryId
      if (!leaf) {
        box.append(el('p', { class: 'lcmn-sub' }, 'In context as written (no summary covers it yet):'), this.messageItem(m, true))
      } else {
        box.append(el('p', { class: 'lcmn-sub' }, 'Under ', ...m.chain.flatMap((c, i) => [i ? ' ← ' : '', `d${c.depth} `, field(c.summaryId)])))
        await this.fillSummary(box, leaf, h.messageId)
      }
    }
    this.focusArea.scrollIntoView({ block: 'nearest' })
    box.querySelector('.lcmn-hit')?.focus?.()
  }

  // ---- Check summaries, repair, redaction ----

  showMaintain() {
    const box = this.body
    if (!this.canWrite) {
      box.append(el('p', { class: 'lcmn-sub' }, 'Checking and repairing summaries and redaction write to the database: they need a connection with the write scope.'))
    }
    const checkOut = el('div', { class: 'lcmn-work' })
    const check = el('button', { type: 'button', disabled: !this.canWrite || undefined }, 'Check summaries')
    check.addEventListener('click', async () => {
      checkOut.replaceChildren('Scoring…')
      const r = await this.guarded(checkOut, () => this.call('checkSummaries'))
      checkOut.firstChild?.nodeType === Node.TEXT_NODE && checkOut.firstChild.remove()
      if (!r) return
      checkOut.append(el('p', {}, `${fmt(r.scored)} newly scored; ${fmt(r.fallbacks)} fallback and ${fmt(r.lowFidelity)} low-fidelity summaries.`))
      const list = el('ol', { class: 'lcmn-list' })
      for (const s of r.weak) list.append(this.summaryItem(s))
      checkOut.append(list)
      for (const which of ['fallbacks', 'lowFidelity']) {
        const n = which === 'fallbacks' ? r.fallbacks : r.lowFidelity
        if (!n) continue
        const repair = el('button', { type: 'button' }, `Regenerate ${fmt(n)} ${which === 'fallbacks' ? 'fallback' : 'low-fidelity'} summaries…`)
        repair.addEventListener('click', async () => {
          if (!confirm(`Back the database up, then regenerate ${n} summaries with the summarizer?`)) return
          repair.disabled = true
          const done = await this.guarded(checkOut, () => this.call('repairSummaries', { which }))
          if (done) checkOut.append(el('p', { class: 'lcmn-ok', role: 'status' }, `Regenerated ${done.applied} of ${done.candidates}`, done.backup ? ['; backup ', field(done.backup)] : '', '.'))
        })
        checkOut.append(repair)
      }
    })
    box.append(el('h3', {}, 'Summaries'), check, checkOut)

    const pattern = el('input', { type: 'text', class: 'lcmn-input', 'aria-label': 'Pattern to redact (a regular expression)', placeholder: 'regular expression, e.g. sk-[A-Za-z0-9]{20,}' })
    const count = el('button', { type: 'button' }, 'Count matches')
    const redactOut = el('div', { class: 'lcmn-work', 'aria-live': 'polite' })
    count.addEventListener('click', async () => {
      redactOut.replaceChildren()
      const c = await this.guarded(redactOut, () => this.call('redactCount', { pattern: pattern.value }))
      if (!c) return
      redactOut.append(el('p', {}, `${c.atLeast ? 'At least ' : ''}${fmt(c.messages)} messages and ${fmt(c.summaries)} summaries match.`))
      for (const x of c.examples) redactOut.append(el('p', { class: 'lcmn-sub' }, field(x.type), ' ', field(x.messageId ?? x.summaryId), ': ', quote(x.snippet)))
      if (this.canWrite && c.messages + c.summaries > 0) {
        const apply = el('button', { type: 'button', class: 'lcmn-danger' }, 'Redact…')
        apply.addEventListener('click', async () => {
          if (!confirm(`Replace every match of ${visible(c.pattern)} in this session with [REDACTED]? This cannot be undone; the summaries it reached are regenerated.`)) return
          apply.disabled = true
          const r = await this.guarded(redactOut, () => this.call('redact', { pattern: c.pattern }))
          if (r) redactOut.append(el('p', { class: 'lcmn-ok', role: 'status' }, `Redacted ${fmt(r.matches)} matches in ${fmt(r.messages)} messages; ${fmt(r.regenerated)} summaries regenerated${r.pending ? `, ${r.pending} pending` : ''}.`))
        })
        redactOut.append(apply)
      }
    })
    box.append(el('h3', {}, 'Redaction'), el('div', { class: 'lcmn-search' }, pattern, count), redactOut)
  }

  dispose() {
    this.root.remove()
  }
}

/** A unified diff with its added and removed lines marked. */
function diffView(diff) {
  const pre = el('pre', { class: 'lcmn-diff', 'aria-label': 'Changes' })
  for (const line of String(diff).split('\n')) {
    const cls = line.startsWith('+') && !line.startsWith('+++') ? 'lcmn-add' : line.startsWith('-') && !line.startsWith('---') ? 'lcmn-del' : ''
    // Each line in its own isolate, the line break outside it.
    pre.append(el('span', { class: cls ? `lcmn-line ${cls}` : 'lcmn-line' }, line), '\n')
  }
  return pre
}

/** Mounts the panel for one session pane; the host passes new props through `update`. */
export function mountLcmPanel(container, ctx) {
  const panel = new LcmPanel(container, ctx)
  return {
    update: (next) => panel.update(next),
    focus: () => panel.root.querySelector('[role="tab"][aria-selected="true"]')?.focus(),
    dispose: () => panel.dispose(),
  }
}

export default {
  id: PLUGIN_ID,
  activate(host) {
    return host.ui.registerPanel({ id: 'lcm', label: 'LCM', mount: mountLcmPanel })
  },
}
