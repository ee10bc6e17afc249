// Shared vitest settings for every package (each package's vitest.config.ts re-exports this).
// Workspace packages resolve to their TypeScript source through the '@attnlab/source' export
// condition, so tests never need a build.
import { defineConfig } from 'vitest/config'

export default defineConfig({
  resolve: {
    conditions: ['@attnlab/source'],
  },
  ssr: {
    resolve: {
      conditions: ['@attnlab/source'],
    },
  },
  test: {
    include: ['src/**/*.test.ts', 'test/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    maxWorkers: 2,
  },
})
