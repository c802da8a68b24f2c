// Shared pieces of the fuzz children (fuzz-summarizer.cjs, fuzz-ingest.cjs): a seeded PRNG and
// generators of awkward text. Every case draws from its own generator, derived from the run's
// seed and the case's index, so a failing case can be named by (seed, index) and replayed.

/** mulberry32: a small 32-bit PRNG; `next()` is uniform in [0, 1). */
function mulberry32(seed) {
  let a = seed >>> 0
  return function next() {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

/** The generator of case `index` of the run seeded with `seed`. */
function caseRng(seed, index) {
  const next = mulberry32((seed ^ Math.imul(index + 1, 0x9e3779b9)) >>> 0)
  const r = {
    next,
    /** An integer in [lo, hi]. */
    int: (lo, hi) => lo + Math.floor(next() * (hi - lo + 1)),
    chance: (p) => next() < p,
    pick: (arr) => arr[Math.floor(next() * arr.length)],
    /** Picks from `[weight, value]` pairs. */
    weighted: (pairs) => {
      const total = pairs.reduce((s, [w]) => s + w, 0)
      let x = next() * total
      for (const [w, v] of pairs) {
        x -= w
        if (x < 0) return v
      }
      return pairs[pairs.length - 1][1]
    },
  }
  return r
}

const LONE = ['\uD83D', '\uDE00', '\uDBFF', '\uDC00', '\uD800']
const PIECES = [
  'hello', 'world', 'the', 'fix', 'build', 'error', 'a', 'é', 'ß', 'ñ', 'Ω', '日本語', '漢字', '한국어',
  '😀', '👩‍💻', '🏳️‍🌈', '\u0000', '\t', '\n', '\r\n', '"', "'", '\\', '\\ud83d', '</summary>',
  '<summary id="x">', '${x}', '{{.SourceText}}', '%s', 'NaN', 'null', '\u200b', '\u202e', '\ufeff', '\uFFFD',
  'Expand for details about:', ' ', '  ', '—', '\u2028',
]

/** Random text of about `words` pieces; with `lone`, lone UTF-16 surrogates may appear. */
function text(r, words, lone = false) {
  const out = []
  for (let i = 0; i < words; i++) {
    if (lone && r.chance(0.05)) out.push(r.pick(LONE))
    else out.push(r.pick(PIECES))
    if (r.chance(0.6)) out.push(' ')
  }
  return out.join('')
}

/** Plain printable words: content that is valid everywhere and compacts predictably. */
function words(r, n) {
  const w = ['alpha', 'beta', 'gamma', 'delta', 'parser', 'cache', 'index', 'deploy', 'retry', 'timeout', 'schema', 'token']
  return Array.from({ length: n }, () => r.pick(w)).join(' ')
}

/** A string of about `bytes` characters (at most ~1 MB in these tests). */
function huge(r, bytes) {
  const unit = r.pick(['x', 'abc ', '日本', '😀', 'word ', text(r, 8)])
  return unit.repeat(Math.max(1, Math.floor(bytes / unit.length))).slice(0, bytes)
}

/** Lone UTF-16 surrogates in `s` (code units not part of a pair). */
function countLone(s) {
  const m = s.match(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g)
  return m ? m.length : 0
}

/** A JSON value with every lone surrogate (in keys and strings) replaced by U+FFFD. */
function wellFormed(v) {
  if (typeof v === 'string') return v.toWellFormed()
  if (Array.isArray(v)) return v.map(wellFormed)
  if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k.toWellFormed(), wellFormed(x)]))
  return v
}

/** Lone surrogates in the keys and strings of a JSON value. */
function loneIn(v) {
  if (typeof v === 'string') return countLone(v)
  if (Array.isArray(v)) return v.reduce((s, x) => s + loneIn(x), 0)
  if (v && typeof v === 'object') return Object.entries(v).reduce((s, [k, x]) => s + countLone(k) + loneIn(x), 0)
  return 0
}

/** A short, JSON-safe description of an outcome's message. */
function clip(s, n = 240) {
  s = String(s)
  return s.length > n ? `${s.slice(0, n)}…(${s.length} chars)` : s
}

const sleep = (ms) => new Promise((res) => setTimeout(res, ms))

module.exports = { mulberry32, caseRng, text, words, huge, countLone, wellFormed, loneIn, clip, sleep, LONE }
