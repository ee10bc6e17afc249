import { readFile } from 'node:fs/promises'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { captureOutput } from './cli.test-utils.ts'
import { main } from './program.ts'

afterEach(() => {
  vi.restoreAllMocks()
})

describe('attnlab --version', () => {
  it('prints the CLI package version, which info also shows', async () => {
    const { version } = JSON.parse(await readFile(new URL('../package.json', import.meta.url), 'utf8')) as {
      version: string
    }
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

describe('a reader that goes away', () => {
  it('`attnlab info | head -1`: the command exits 0 without an EPIPE crash', async () => {
    const { spawn } = await import('node:child_process')
    const launcher = new URL('../../../attnlab', import.meta.url).pathname
    const child = spawn('bash', ['-c', `set -o pipefail; "${launcher}" info | head -1`], {
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let out = ''
    let err = ''
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()))
    child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()))
    // pipefail: the status is attnlab's own when it fails
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve))
    expect(code).toBe(0)
    expect(out).toMatch(/^attnlab \d+\.\d+\.\d+\n$/)
    expect(err).not.toMatch(/EPIPE|Unhandled/)
  }, 300_000)
})
