// The addon's load time, require to first call, in fresh Node processes (the median of 15),
// and the size of each built binary (npm/<platform>/*.node, from `npm run build:all`).
//
//   node bench/probes/load_time.mjs [path/to/addon.node]
import { execFileSync } from 'node:child_process'
import { existsSync, readdirSync, statSync } from 'node:fs'
import { join, resolve } from 'node:path'

const ROOT = new URL('../..', import.meta.url).pathname
const target = resolve(process.argv[2] ?? join(ROOT, 'index.js'))
const probe = `const t=process.hrtime.bigint();const a=require(${JSON.stringify(target)});const r=a.LcmEngine?1:0;a.estimateTokens('x');process.stdout.write(String(Number(process.hrtime.bigint()-t)/1e6))`
const runs = Array.from({ length: 15 }, () => Number(execFileSync(process.execPath, ['-e', probe], { encoding: 'utf8' })))
runs.sort((a, b) => a - b)
console.log(`require to first call (${target.replace(ROOT, '')}): median ${runs[7].toFixed(1)} ms, min ${runs[0].toFixed(1)}, max ${runs[14].toFixed(1)} (15 fresh processes, Node ${process.version})`)
const npm = join(ROOT, 'npm')
if (existsSync(npm)) {
  for (const dir of readdirSync(npm).sort()) {
    for (const f of readdirSync(join(npm, dir)).filter((f) => f.endsWith('.node'))) {
      console.log(`${dir}: ${f} ${(statSync(join(npm, dir, f)).size / 1048576).toFixed(2)} MiB`)
    }
  }
}
