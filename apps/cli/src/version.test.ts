import { readFile } from 'node:fs/promises'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { captureOutput } from './cli.test-utils.ts'
import { main } from './program.ts'

afterEach(() => {
  vi.restoreAllMocks()
})

describe('attnlab --version', () => {
  it('prints the CLI package version, which info also shows', async () => {
    const { version } = JSON.parse(await readFile(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }
    expect(version).toMatch(/^\d+\.\d+\.\d+/)
    for (const flag of ['--version', '-V']) {
      const io = captureOutput({ stdout: true })
      expect(await main([flag])).toBe(0)
      expect(io.out().trim()).toBe(version)
      vi.restoreAllMocks()
    }
    let io = captureOutput({ stdout: true })
    expect(await main(['info', '--json'])).toBe(0)
    expect(JSON.parse(io.out())).toMatchObject({ attnlab: version })
    vi.restoreAllMocks()
    io = captureOutput({ stdout: true })
    expect(await main(['info'])).toBe(0)
    expect(io.out().split('\n')[0]).toBe(`attnlab ${version}`)
  })
})
