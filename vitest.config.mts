import { defineConfig } from 'vitest/config'

export default defineConfig({
  test: {
    include: ['__test__/**/*.spec.ts'],
    testTimeout: 60000,
    hookTimeout: 60000,
    reporters: ['default', './scripts/count-reporter.mjs'],
  },
})
