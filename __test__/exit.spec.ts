// Node must exit by itself after every kind of call (vitest would hide a hang, so each case
// runs in a child process with a timeout).
import { spawnSync } from 'node:child_process'
import { join } from 'node:path'

import { describe, expect, it } from 'vitest'

import { ROOT, tempDir } from './helpers'

describe('clean exit', () => {
  it.each(['migrate', 'open', 'ingest', 'error', 'no-close', 'leafPass', 'timeout', 'auth', 'offline', 'close-in-flight', 'exit-during-reads'])('exits after %s', (mode) => {
    const started = Date.now()
    const child = spawnSync(process.execPath, [join(ROOT, '__test__/child/exit-check.cjs'), mode, join(tempDir(), 'e.db')], {
      encoding: 'utf8',
      timeout: 15000,
    })
    expect(child.error, 'process did not exit by itself').toBeUndefined()
    expect(child.status, child.stderr).toBe(0)
    expect(child.stdout).toContain('done')
    expect(Date.now() - started).toBeLessThan(10000)
  })
})
