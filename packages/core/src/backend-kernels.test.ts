// useBackend's kernel options, including the path where the native kernels are not built
// (ATTNLAB_NATIVE_DIR points at an empty folder; each test file runs in its own process).
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import * as tf from '@tensorflow/tfjs-core'
import { afterAll, describe, expect, it } from 'vitest'
import { kernelsInUse, useBackend, type KernelsMode } from './backend.ts'
import { ConfigError, KernelsUnavailableError } from './errors.ts'
import { activeKernels } from './kernels/register.ts'
import { linear } from './ops/linear.ts'

const emptyDir = mkdtempSync(join(tmpdir(), 'attnlab-no-native-'))
process.env.ATTNLAB_NATIVE_DIR = emptyDir

describe('useBackend kernels (native kernels not built)', () => {
  afterAll(() => rmSync(emptyDir, { recursive: true, force: true }))

  it("'auto' on wasm falls back to the WebAssembly kernels, and the fused ops use them", async () => {
    await useBackend('wasm')
    expect(kernelsInUse()).toBe('wasm')
    expect(tf.getKernel('AttnlabLinear', 'wasm')).toBeDefined()
    const y = tf.tidy(() => linear(tf.tensor2d([1, 2], [1, 2]), tf.tensor2d([3, 4], [2, 1])))
    expect(Array.from(y.dataSync())).toEqual([11])
    y.dispose()
  })

  it("'native' throws KernelsUnavailableError naming the build command, and keeps the current kernels", async () => {
    const error = await useBackend('wasm', { kernels: 'native' }).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(KernelsUnavailableError)
    expect((error as Error).message).toContain('pnpm attnlab kernels build')
    expect((error as KernelsUnavailableError).code).toBe('BACKEND_UNAVAILABLE')
    expect(kernelsInUse('wasm')).toBe('wasm')
  })

  it("'none' restores the stock kernels; 'js' and 'wasm' register those providers", async () => {
    const stock = tf.getKernel('BatchMatMul', 'wasm')
    await useBackend('wasm', { kernels: 'none' })
    expect(kernelsInUse()).toBe('none')
    expect(tf.getKernel('AttnlabLinear', 'wasm')).toBeUndefined()
    expect(tf.getKernel('BatchMatMul', 'wasm')).not.toBe(stock)
    await useBackend('wasm', { kernels: 'js' })
    expect(activeKernels()?.provider.name).toBe('js')
    await useBackend('wasm', { kernels: 'wasm', threads: 2 })
    expect(kernelsInUse()).toBe('wasm')
  })

  it("cpu: 'auto' registers the JS kernels; 'wasm' kernels are refused", async () => {
    await useBackend('cpu')
    expect(kernelsInUse()).toBe('js')
    await expect(useBackend('cpu', { kernels: 'wasm' })).rejects.toThrow(ConfigError)
    await useBackend('cpu', { kernels: 'none' })
    expect(kernelsInUse('cpu')).toBe('none')
  })

  it('rejects unknown modes and bad thread counts before doing anything', async () => {
    await expect(useBackend('wasm', { kernels: 'fast' as KernelsMode })).rejects.toThrow(/'fast' is not a kernels mode/)
    await expect(useBackend('wasm', { threads: 0 })).rejects.toThrow(/threads/)
    await expect(useBackend('wasm', { threads: 1.5 })).rejects.toThrow(ConfigError)
  })
})
