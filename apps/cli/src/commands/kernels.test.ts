import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import * as tf from '@tensorflow/tfjs-core'
import { kernelsInUse, useBackend } from '@attnlab/core'
import { nativeKernelsStatus } from '@attnlab/core/node'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { captureOutput } from '../cli.test-utils.ts'
import { activateBackend } from '../options.ts'
import type { Command } from 'commander'
import { buildProgram, main } from '../program.ts'

afterEach(() => {
  vi.restoreAllMocks()
  delete process.env.ATTNLAB_NATIVE_DIR
})

const native = await nativeKernelsStatus()

describe('attnlab kernels', () => {
  it('status --json reports what auto picks and the native build', async () => {
    const io = captureOutput()
    expect(await main(['kernels', 'status', '--json'])).toBe(0)
    const report = JSON.parse(io.out())
    expect(report.native.state).toBe(native.state)
    expect(report.autoOnWasm).toBe(native.state === 'loadable' ? 'native' : 'wasm')
    expect(report.native.searched.length).toBeGreaterThan(0)
  })

  it(
    'status explains how to build when the native kernels ' + 'are missing, and auto uses the WebAssembly kernels',
    async () => {
      const empty = mkdtempSync(join(tmpdir(), 'attnlab-cli-no-native-'))
      process.env.ATTNLAB_NATIVE_DIR = empty
      try {
        const io = captureOutput()
        expect(await main(['kernels', 'status'])).toBe(0)
        // The native addon may already be loaded in this process (first test); the status of the
        // build folder is what is reported.
        expect(io.out()).toContain('native kernels: not built; build them with: pnpm attnlab kernels build')
      } finally {
        rmSync(empty, { recursive: true, force: true })
      }
    },
  )

  it.skipIf(native.state !== 'loadable')('build is a no-op when the build is up to date', async () => {
    const io = captureOutput()
    expect(await main(['kernels', 'build'])).toBe(0)
    expect(io.out()).toContain('native kernels up to date')
  })

  it('rejects bad --kernels and --threads values with one line and exit code 2', async () => {
    const io = captureOutput()
    expect(await main(['kernels', 'status', '--kernels', 'fast'])).toBe(2)
    expect(io.err()).toMatch(/--kernels <mode>' argument 'fast' is invalid/)
    expect(await main(['kernels', 'status', '--threads', '0'])).toBe(2)
    expect(io.err()).toMatch(/--threads/)
  })
})

describe('--kernels / --threads with --backend', () => {
  it('activateBackend applies the flags recorded for the running command', async () => {
    captureOutput()
    // 'kernels status' records the global flags before its action, like any command.
    expect(await main(['kernels', 'status', '--kernels', 'none', '--json'])).toBe(0)
    expect(await activateBackend('wasm')).toBe('wasm')
    expect(kernelsInUse('wasm')).toBe('none')
    expect(await main(['kernels', 'status', '--kernels', 'js', '--json'])).toBe(0)
    await activateBackend('cpu')
    expect(kernelsInUse('cpu')).toBe('js')
    expect(tf.getBackend()).toBe('cpu')
  })

  it('a kernels mode the backend cannot host is a usage error (exit 2), before any work', async () => {
    const io = captureOutput()
    expect(
      await main([
        'train',
        '--preset',
        'minimal',
        '--backend',
        'cpu',
        '--kernels',
        'wasm',
        '--steps',
        '1',
        '--out',
        join(tmpdir(), 'attnlab-never-written'),
      ]),
    ).toBe(2)
    expect(io.err()).toMatch(/'wasm' kernels compute on the tfjs wasm heap and need the 'wasm' backend/)
    await useBackend('wasm', { kernels: 'auto' })
  })
})

describe('kernels status and info for the chosen backend and --kernels', () => {
  afterEach(async () => {
    await useBackend('wasm', { kernels: 'auto' })
  })

  it('status reports the --kernels given, before or after the subcommand, on --backend', async () => {
    const io = captureOutput()
    expect(await main(['--kernels', 'js', 'kernels', 'status', '--backend', 'cpu'])).toBe(0)
    expect(io.out()).toContain('--kernels js on the cpu backend uses: js')
    expect(io.out()).not.toContain('--kernels auto on the cpu')
    io.logs.length = 0
    expect(await main(['kernels', 'status', '--kernels', 'none', '--json'])).toBe(0)
    const report = JSON.parse(io.out())
    expect(report).toMatchObject({ backend: 'wasm', kernels: 'none', uses: 'none' })
    expect(report.autoOnWasm).toBe(native.state === 'loadable' ? 'native' : 'wasm')
  })

  it('status with a --kernels the backend cannot host is a usage error (exit 2)', async () => {
    const io = captureOutput()
    expect(await main(['--kernels', 'wasm', 'kernels', 'status', '--backend', 'cpu'])).toBe(2)
    expect(io.err()).toMatch(/'wasm' kernels compute on the tfjs wasm heap/)
  })

  it('info --backend activates it and reports its kernels', async () => {
    const io = captureOutput()
    expect(await main(['info', '--backend', 'cpu', '--kernels', 'js', '--json'])).toBe(0)
    expect(JSON.parse(io.out()).backend).toEqual({ name: 'cpu', kernels: 'js' })
  })

  it('every command the README lists takes --backend; markov and dynamics do not', () => {
    const program = buildProgram()
    const find = (path: string): Command =>
      path.split(' ').reduce<Command>((c, name) => c.commands.find((s) => s.name() === name) as Command, program)
    const hasBackend = (path: string): boolean => find(path).options.some((o) => o.long === '--backend')
    for (const path of [
      'emergence',
      'train',
      'generate',
      'sparse apply',
      'sparse compare',
      'knockout capabilities',
      'knockout locate',
      'knockout ablate',
      'info',
      'kernels status',
    ]) {
      expect(hasBackend(path), path).toBe(true)
    }
    for (const path of ['markov sample', 'markov oracle', 'dynamics simulate'])
      expect(hasBackend(path), path).toBe(false)
  })
})
