import { spawnSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import * as tf from '@tensorflow/tfjs-core'
import { describe, expect, it } from 'vitest'
import { BackendUnavailableError, ConfigError } from './errors.ts'
import { availableBackends, defaultBackend, useBackend, type BackendName } from './backend.ts'

describe('useBackend', () => {
  it('starts wasm and getBackend confirms it', async () => {
    expect(await useBackend('wasm')).toBe('wasm')
    expect(tf.getBackend()).toBe('wasm')
    const x = tf.tensor([1, 2, 3])
    expect(Array.from(await x.data())).toEqual([1, 2, 3])
    x.dispose()
  })

  it('starts cpu', async () => {
    expect(await useBackend('cpu')).toBe('cpu')
    expect(tf.getBackend()).toBe('cpu')
  })

  it('fails for tensorflow with a message naming @tensorflow/tfjs-node', async () => {
    const error = await useBackend('tensorflow').catch((e: unknown) => e)
    expect(error).toBeInstanceOf(BackendUnavailableError)
    const e = error as BackendUnavailableError
    expect(e.code).toBe('BACKEND_UNAVAILABLE')
    expect(e.message).toContain('@tensorflow/tfjs-node')
    expect(e.message).toContain('not installed')
    expect(e.message).toContain('install it with: pnpm add @tensorflow/tfjs-node')
    expect(e.message).toMatch(/available here: .*cpu.*wasm/)
  })

  it('fails for tensorflow-gpu naming @tensorflow/tfjs-node-gpu', async () => {
    const error = await useBackend('tensorflow-gpu').catch((e: unknown) => e)
    expect(error).toBeInstanceOf(BackendUnavailableError)
    expect((error as Error).message).toContain('@tensorflow/tfjs-node-gpu')
  })

  it('fails clearly for webgl and webgpu in Node and keeps the previous backend', async () => {
    await useBackend('cpu')
    for (const name of ['webgl', 'webgpu'] as const) {
      const error = await useBackend(name).catch((e: unknown) => e)
      expect(error).toBeInstanceOf(BackendUnavailableError)
      expect((error as Error).message).toContain(`only in a browser`)
      // Installing the package (it is installed) would not help: no `pnpm add` advice.
      expect((error as Error).message).not.toContain('pnpm add')
      expect((error as BackendUnavailableError).packageName).toBe(`@tensorflow/tfjs-backend-${name}`)
    }
    expect(tf.getBackend()).toBe('cpu')
  })

  it('rejects unknown names', async () => {
    await expect(useBackend('gpu' as BackendName)).rejects.toBeInstanceOf(ConfigError)
  })

  it('rejects a wasmPaths map with an unknown file or a non-string URL, naming it', async () => {
    const unknownFile = await useBackend('wasm', {
      wasmPaths: { 'tfjs-backend-wasm-simd.wasm': '/a.wasm', 'other.wasm': '/b.wasm' } as never,
    }).catch((e: unknown) => e)
    expect(unknownFile).toBeInstanceOf(ConfigError)
    expect((unknownFile as Error).message).toMatch(/'other\.wasm' is not a tfjs wasm file/)
    const badUrl = await useBackend('wasm', { wasmPaths: { 'tfjs-backend-wasm.wasm': 3 } as never }).catch(
      (e: unknown) => e,
    )
    expect(badUrl).toBeInstanceOf(ConfigError)
    expect((badUrl as Error).message).toContain(`'tfjs-backend-wasm.wasm' must be a non-empty string`)
    await expect(useBackend('wasm', { wasmPaths: 7 as never })).rejects.toBeInstanceOf(ConfigError)
  })

  it('lists cpu and wasm as available and prefers wasm in Node', async () => {
    const available = await availableBackends()
    expect(available).toEqual(['cpu', 'wasm'])
    expect(await defaultBackend()).toBe('wasm')
  })
})

describe('useBackend in a user script', () => {
  const fixture = fileURLToPath(new URL('./__fixtures__/throw-after-wasm.ts', import.meta.url))
  const run = (how: string): { status: number | null; stderr: string } => {
    const result = spawnSync(process.execPath, ['--conditions=@attnlab/source', '--import', 'tsx', fixture, how], {
      encoding: 'utf8',
      // a tsx + tfjs-wasm process: ~5 s alone, 60 s seen beside other packages' tests on 2 cores
      timeout: 240_000,
    })
    return { status: result.status, stderr: result.stderr }
  }

  it.each(['top', 'throw', 'reject'])(
    "an uncaught error (%s) after useBackend('wasm') prints the user's error, short, and exits 1",
    (how) => {
      const { status, stderr } = run(how)
      expect(stderr).toContain(`Error: the user script failed (${how})`)
      // Before: tfjs-wasm's emscripten handler rethrew, Node printed ~39 KB of its minified source, exit code 7.
      expect(stderr.length).toBeLessThan(2000)
      expect(stderr).not.toContain('WasmBackendModule')
      expect(status).toBe(1)
    },
    300_000,
  )
})
