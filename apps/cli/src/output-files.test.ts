// One rule for every output file (checkOutputFile): an existing file is replaced only with --force.
import { readFile, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { serializeSafetensors } from '@attnlab/core'
import { readSafetensorsFile } from '@attnlab/core/node'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { captureOutput, useTempDir } from './cli.test-utils.ts'
import { main } from './program.ts'

const root = useTempDir('attnlab-outputs-')
afterEach(() => {
  vi.restoreAllMocks()
})

/** q, k, v of 1 head, 8 positions, dHead 4. */
function qkvFile(): Uint8Array {
  const tensor = (offset: number) => ({
    dtype: 'F32' as const,
    shape: [1, 8, 4],
    data: Float32Array.from({ length: 32 }, (_, i) => Math.sin(i + offset)),
  })
  return serializeSafetensors({ q: tensor(0), k: tensor(1), v: tensor(2) })
}

describe('output files', () => {
  it(
    'markov sample --out, sparse apply --out and dynamics ' + 'simulate --plot refuse an existing file without --force',
    async () => {
      const qkv = join(root(), 'qkv.safetensors')
      await writeFile(qkv, qkvFile())
      const cases: [string, string, string[]][] = [
        ['--out', 'sample.safetensors', ['markov', 'sample', '--vocab', '6', '--spans', '1', '--sequences', '4']],
        [
          '--out',
          'apply.safetensors',
          ['sparse', 'apply', '--method', 'vertical-slash', '--qkv', qkv, '--backend', 'cpu'],
        ],
        ['--plot', 'dynamics.svg', ['dynamics', 'simulate', '--t-max', '50', '--points', '20']],
      ]
      for (const [flag, name, args] of cases) {
        const path = join(root(), name)
        await writeFile(path, 'mine')
        let io = captureOutput()
        expect(await main([...args, flag, path]), name).toBe(2)
        expect(io.err()).toMatch(
          new RegExp(`${flag} .*${name} already exists; pick another path, or pass --force to replace it`),
        )
        expect(await readFile(path, 'utf8')).toBe('mine')
        vi.restoreAllMocks()
        io = captureOutput()
        expect(await main([...args, flag, path, '--force']), `${name} --force`).toBe(0)
        expect(await readFile(path, 'utf8')).not.toBe('mine')
        vi.restoreAllMocks()
      }
      expect((await readSafetensorsFile(join(root(), 'sample.safetensors'))).tensors.has('tokens')).toBe(true)
    },
  )

  // The file is written to a temporary sibling and renamed: its directory must accept new entries.
  it.runIf(process.platform === 'linux')(
    'markov sample --out and dynamics simulate --plot under /proc fail before any work, naming the path given',
    async () => {
      const cases: [string, string, string[]][] = [
        ['--out', '/proc/x.safetensors', ['markov', 'sample', '--vocab', '6', '--spans', '1', '--sequences', '4']],
        ['--plot', '/proc/p.svg', ['dynamics', 'simulate', '--t-max', '50', '--points', '20']],
      ]
      for (const [flag, path, args] of cases) {
        const io = captureOutput()
        expect(await main([...args, flag, path]), path).toBe(2)
        expect(io.err()).toContain(`${flag} ${path} is not writable (`)
        expect(io.err()).not.toMatch(new RegExp(`${path.replaceAll('.', '\\.')}\\.\\d`))
        expect(io.out()).toBe('')
        vi.restoreAllMocks()
      }
    },
  )
})
