// A stored message's content as one text, for the CLI's read commands and the TUI's messages
// view alike: text blocks as they are, a tool call as `[tool call: name] {arguments}`,
// thinking marked, any other block by its type.
'use strict'

/**
 * @param {string | import('../index.js').ContentBlock[]} content
 * @returns {string}
 */
function messageText(content) {
  if (typeof content === 'string') return content
  return content
    .map((b) => {
      if (b.type === 'text' && typeof b.text === 'string') return b.text
      if (b.type === 'toolCall') return `[tool call: ${String(b.name)}] ${JSON.stringify(b.arguments ?? {})}`
      if (b.type === 'thinking' && typeof b.thinking === 'string') return `[thinking] ${b.thinking}`
      return `[${b.type}]`
    })
    .join('\n')
}

module.exports = { messageText }
