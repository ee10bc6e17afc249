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
    // `pnpm test` runs several packages' vitest processes at once (turbo), each with 2 workers: on a
    // 2-core CI machine a test that takes 8 s alone took 75 s (the MC oracle's counting check, the
    // compareWithDense sweep on cpu), past the old 60 s. 300 s holds under that load; a hang still fails.
    testTimeout: 300_000,
    hookTimeout: 300_000,
    pool: 'forks',
    maxWorkers: 2,
  },
})
