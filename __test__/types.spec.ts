// The published types: index.d.ts is what the build makes of src/types.d.ts (whose result types
// `cargo test` checks against the Rust types) and of the binding. The full check, a build
// compared with the committed file, is in .ci/run; this one needs no build.
import { readFileSync } from 'node:fs'
import { join } from 'node:path'

import { describe, expect, it } from 'vitest'

import { ROOT } from './helpers'

describe('types', () => {
  it('index.d.ts starts with the current src/types.d.ts', () => {
    const shared = readFileSync(join(ROOT, 'src/types.d.ts'), 'utf8')
    const published = readFileSync(join(ROOT, 'index.d.ts'), 'utf8')
    expect(published.slice(0, shared.length), 'run `npm run build` after changing src/types.d.ts').toBe(shared)
  })

  it('the generated part holds the result types the methods name', () => {
    const shared = readFileSync(join(ROOT, 'src/types.d.ts'), 'utf8')
    const generated = shared.slice(shared.indexOf('---- Generated'))
    const published = readFileSync(join(ROOT, 'index.d.ts'), 'utf8')
    const named = new Set([...published.matchAll(/Promise<(\w+)(?:\[\])?(?: \| null)?>/g)].map((m) => m[1]))
    const inputs = ['LcmEngine', 'string', 'void', 'number']
    for (const name of named) {
      if (inputs.includes(name)) continue
      expect(generated, name).toMatch(new RegExp(`export (interface|type) ${name}\\b`))
    }
    expect(named.size).toBeGreaterThan(15)
  })
})
