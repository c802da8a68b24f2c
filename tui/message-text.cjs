// A stored message's content as one text, for the CLI's read commands and the TUI's messages
// view alike: text blocks as they are, a tool call as `[tool call: name] {arguments}`,
// thinking marked, any other block by its type. And the stored texts with their
// bidirectional controls shown, for a terminal.
'use strict'

/**
 * The bidirectional controls that open a scope reaching past them: the embeddings and
 * overrides U+202A–U+202E (U+202C closes one) and the isolates U+2066–U+2069. An
 * unterminated U+202E RIGHT-TO-LEFT OVERRIDE draws everything after it on the line right to
 * left, the terminal's own text after a stored field included.
 */
const SCOPED = /[\u202A-\u202E\u2066-\u2069]/g
/** Those and the marks U+061C, U+200E, U+200F, which an id or a name never needs. */
const ALL = /[\u061C\u200E\u200F\u202A-\u202E\u2066-\u2069]/g

/** `⟨U+202E⟩` @param {string} c */
const shown = (c) => `⟨U+${(c.codePointAt(0) ?? 0).toString(16).toUpperCase().padStart(4, '0')}⟩`

/**
 * An id, a name, a key or a file name with every bidirectional control shown as `⟨U+202E⟩`,
 * so that an operator can tell one is there and nothing after it is drawn reversed.
 * @param {unknown} value
 */
function visibleControls(value) {
  return String(value).replace(ALL, shown)
}

/**
 * A stored text (a message, a summary) for a terminal: its embeddings, overrides and isolates
 * shown as `⟨U+202E⟩`, its letters and marks as they are. A terminal has no element to
 * isolate a field in, and most draw no bidi at all: there, wrapping a field in U+2068 … U+2069
 * would neither show the control nor hold, since a line cut to the width or wrapped
 * may lose the closing U+2069 and a stored U+2069 would end the isolate early.
 * @param {unknown} value
 */
function terminalText(value) {
  return String(value).replace(SCOPED, shown)
}

/**
 * @param {string | import('../index.js').ContentBlock[]} content
 * @returns {string}
 */
function messageText(content) {
  if (typeof content === 'string') return content
  return content
    .map((b) => {
      if (b.type === 'text' && typeof b.text === 'string') return b.text
      if (b.type === 'toolCall') return `[tool call: ${visibleControls(b.name)}] ${JSON.stringify(b.arguments ?? {})}`
      if (b.type === 'thinking' && typeof b.thinking === 'string') return `[thinking] ${b.thinking}`
      return `[${visibleControls(b.type)}]`
    })
    .join('\n')
}

module.exports = { messageText, terminalText, visibleControls }
