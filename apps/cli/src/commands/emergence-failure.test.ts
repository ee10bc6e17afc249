// A fresh `attnlab emergence` run that fails before its first checkpoint removes what it created
// (and only that): here every checkpoint write fails.
import { mkdir, readdir, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { AttnlabError } from '@attnlab/core'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { captureOutput, TINY_TASK_FLAGS, useTempDir } from '../cli.test-utils.ts'
import { main } from '../program.ts'

vi.mock('@attnlab/transformer/node', async (importOriginal) => ({
  ...(await importOriginal<typeof import('@attnlab/transformer/node')>()),
  saveCheckpoint: async (): Promise<void> => {
    throw new AttnlabError('IO_ERROR', 'disk full (simulated)')
  },
}))

const root = useTempDir('attnlab-emergence-failure-')
afterEach(() => {
  vi.restoreAllMocks()
})

const TINY = [
  ...TINY_TASK_FLAGS,
  '--batch',
  '16',
  '--validation-size',
  '32',
  '--analysis-size',
  '16',
  '--eval-every',
  '3',
  '--steps',
  '3',
  '--backend',
  'cpu',
]

describe('attnlab emergence: a fresh run failing before its first checkpoint', () => {
  it('removes the directories it created, parents included', async () => {
    const io = captureOutput()
    expect(await main(['emergence', ...TINY, '--out', join(root(), 'new', 'run')])).toBe(1)
    expect(io.err()).toMatch(/IO_ERROR.*disk full \(simulated\)/)
    expect(await readdir(root())).toEqual([])
  })

  it('empties a directory that was empty before, and keeps the directory', async () => {
    const out = join(root(), 'empty')
    await mkdir(out)
    captureOutput()
    expect(await main(['emergence', ...TINY, '--out', out])).toBe(1)
    expect(await readdir(out)).toEqual([])
  })

  it('never removes a directory that held files before (--force)', async () => {
    const out = join(root(), 'user')
    await mkdir(out)
    await writeFile(join(out, 'notes.txt'), 'mine')
    captureOutput()
    expect(await main(['emergence', ...TINY, '--out', out, '--force'])).toBe(1)
    expect(await readdir(out)).toContain('notes.txt')
  })
})
