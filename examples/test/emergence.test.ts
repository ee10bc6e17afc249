// examples/emergence.ts (the README's "Your own scripts"): runEmergence on a small config prints
// its stages, run the way the README says (`pnpm example FILE` from the repository root).
import { spawnSync } from 'node:child_process'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { expect, it } from 'vitest'

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..')

it('examples/emergence.ts runs runEmergence and prints both stages of the two-span chain', () => {
  const result = spawnSync(
    process.execPath,
    ['--conditions=@attnlab/source', '--import', 'tsx', join('examples', 'emergence.ts')],
    { cwd: root, encoding: 'utf8', timeout: 300_000 },
  )
  expect(result.status, result.stderr.slice(-2000)).toBe(0)
  expect(result.stdout).toMatch(/^stage 1 at step \d+: [~\d.]+ nats, span 1 \(newest, c=1\.500\) <- L0H\d$/m)
  expect(result.stdout).toMatch(/^stage 2 at step \d+: [~\d.]+ nats, span 0 \(oldest, c=1\.000\) <- L0H\d$/m)
  expect(result.stdout).toMatch(/^final loss \d\.\d{3}, teacher entropy \d\.\d{3}$/m)
}, 300_000)
