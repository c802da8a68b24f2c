// grep over the message shapes of issue #33 finding 3: one message in which the searched term
// occurs thousands of times. Each shape is stored in a fresh database; the figure is one
// `grep` call's wall time, the best of three, with whether it finished or stopped at its
// deadline.
//
//   node bench/probes/grep_shapes.mjs [path/to/addon.node] [--skip-50mb]
//
// Without a path it loads the package (index.js).
import { mkdtempSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'

const require = createRequire(import.meta.url)
const args = process.argv.slice(2)
const addon = args.find((a) => !a.startsWith('--'))
const { LcmEngine } = require(addon ? resolve(addon) : '../../index.js')

const sentence = 'The gateway restarted a worker after the gateway timed out and the operator paged again. '
const prose = (bytes) => sentence.repeat(Math.ceil(bytes / sentence.length)).slice(0, bytes)
const hexdump = (bytes) => {
  const lines = []
  for (let off = 0; lines.length * 58 < bytes; off += 16) lines.push(`${off.toString(16).padStart(8, '0')}: ff ff ff ff 00 ff ff ff ff ff ff ff 00 ff ff ff`)
  return lines.join('\n')
}
const zerosCsv = (bytes) => '0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0\n'.repeat(Math.ceil(bytes / 32))

const shapes = [
  ['prose 0.25 MB', prose(256 * 1024), 'gateway'],
  ['prose 0.5 MB', prose(512 * 1024), 'gateway'],
  ['prose 1 MB', prose(1024 * 1024), 'gateway'],
  ['prose 2 MB', prose(2048 * 1024), 'gateway'],
  ['hexdump 256 KB', hexdump(256 * 1024), 'ff'],
  ['CSV of zeros 256 KB', zerosCsv(256 * 1024), '0'],
]
if (!args.includes('--skip-50mb')) shapes.push(['prose 50 MB', prose(50 * 1024 * 1024), 'gateway'])

const dir = mkdtempSync(join(tmpdir(), 'lcm-grep-shapes-'))
try {
  console.log('| shape | query | mode | best of 3 (ms) | finished |')
  console.log('|---|---|---|---:|---|')
  for (const [i, [name, text, query]] of shapes.entries()) {
    const engine = await LcmEngine.open({ dbPath: join(dir, `s${i}.db`) })
    await engine.ingest({ sessionId: 's' }, [{ role: 'user', content: text }])
    for (const mode of ['fts', 'like', 'regex']) {
      let best = Infinity
      let partial = null
      let hits = 0
      for (let run = 0; run < 3; run++) {
        const t = process.hrtime.bigint()
        const r = await engine.grep(null, { query, mode })
        best = Math.min(best, Number(process.hrtime.bigint() - t) / 1e6)
        partial = r.partial ?? null
        hits = r.hits.length
      }
      console.log(`| ${name} | ${query} | ${mode} | ${best.toFixed(1)} | ${partial ? partial.code : hits === 1 ? 'yes, 1 hit' : `yes, ${hits} hits`} |`)
    }
    await engine.close()
  }
} finally {
  rmSync(dir, { recursive: true, force: true })
}
