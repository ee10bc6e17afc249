import { readdir, stat } from 'node:fs/promises'
import { join } from 'node:path'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { captureOutput, TINY_RUN_FLAGS, useTempDir } from './cli.test-utils.ts'
import { checkWritable, createDirectory } from './out-dir.ts'
import { main } from './program.ts'

const root = useTempDir('attnlab-out-dir-')
afterEach(() => {
  vi.restoreAllMocks()
})

const TINY = TINY_RUN_FLAGS

describe('output directories', () => {
  it('createDirectory creates missing parents and returns the topmost one it created', async () => {
    const path = join(root(), 'a', 'b', 'c')
    expect(await createDirectory(path)).toBe(join(root(), 'a'))
    expect((await stat(path)).isDirectory()).toBe(true)
    expect(await createDirectory(path)).toBeUndefined()
  })

  // Node's mkdir(..., { recursive: true }) never returns for a missing directory under /proc.
  it.runIf(process.platform === 'linux')(
    'fails at once under /proc: the check, the helper, train and emergence',
    async () => {
      await expect(checkWritable('/proc/attnlab-out')).rejects.toThrow(
        /--out \/proc\/attnlab-out is not writable \(ENOENT in \/proc\)/,
      )
      await expect(createDirectory('/proc/attnlab-out/run')).rejects.toThrow(
        /--out \/proc\/attnlab-out\/run is not writable/,
      )
      for (const command of ['train', 'emergence']) {
        const io = captureOutput()
        const started = performance.now()
        const extra = command === 'emergence' ? ['--analysis-size', '8'] : []
        expect(await main([command, ...TINY, ...extra, '--steps', '5', '--out', '/proc/attnlab-out'])).toBe(2)
        expect(performance.now() - started).toBeLessThan(5000)
        expect(io.err()).toMatch(/--out \/proc\/attnlab-out is not writable \(ENOENT in \/proc\)/)
        // Refused before any work: no training step was printed.
        expect(io.out()).not.toMatch(/step \d/)
        vi.restoreAllMocks()
      }
      expect((await readdir(root())).filter((name) => name.startsWith('.attnlab-probe-'))).toEqual([])
    },
    20_000,
  )

  it('refuses an empty --out / --plot / --resume at once (exit 2), before any work', async () => {
    await expect(checkWritable('')).rejects.toThrow("--out must name a path, got ''")
    const cases: string[][] = [
      ['train', ...TINY, '--steps', '5', '--out', ''],
      ['train', ...TINY, '--steps', '5', '--resume', ''],
      ['emergence', ...TINY, '--analysis-size', '8', '--steps', '5', '--out', ''],
      ['markov', 'sample', '--vocab', '6', '--spans', '1', '--sequences', '4', '--out', ''],
      ['dynamics', 'simulate', '--t-max', '50', '--points', '20', '--plot', ' '],
    ]
    for (const args of cases) {
      const io = captureOutput()
      const started = performance.now()
      expect(await main(args), args.join(' ')).toBe(2)
      expect(performance.now() - started).toBeLessThan(5000)
      expect(io.err()).toMatch(/--(out|resume|plot) must name a path, got '\s*'/)
      expect(io.out()).not.toMatch(/step \d/)
      vi.restoreAllMocks()
    }
  })
})
