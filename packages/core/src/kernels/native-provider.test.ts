// The native kernels: build/status helpers and the addon's own argument checks. The numeric
// behaviour is tested through the ops in the 'wasm+native' mode.
import { describe, expect, it } from 'vitest'
import { buildNativeKernels, loadNativeKernelProvider, loadedNativeKernelsInfo, nativeKernelsStatus } from './native-provider.ts'

const status = await nativeKernelsStatus()
const required = process.env.ATTNLAB_REQUIRE_NATIVE === '1'

describe('native kernels status', () => {
  it('reports the source hash, the folders searched and a state', () => {
    expect(status.sourceHash).toMatch(/^[0-9a-f]{64}$/)
    expect(status.searched.length).toBeGreaterThanOrEqual(2)
    expect(['loadable', 'stale', 'missing']).toContain(status.state)
    if (required) expect(status.state, 'ATTNLAB_REQUIRE_NATIVE=1').toBe('loadable')
  })
})

describe.skipIf(status.state !== 'loadable')(`native kernels addon${status.state === 'loadable' ? '' : ' (skipped: not built; pnpm attnlab kernels build)'}`, () => {
  it('builds nothing when an up-to-date build exists', async () => {
    const result = await buildNativeKernels()
    expect(result.ok).toBe(true)
    expect(result.skipped).toBe(true)
    expect(result.path).toBe(status.path)
  })

  it('loads, reports its CPU level and threads, and checks array sizes instead of overrunning', async () => {
    const provider = await loadNativeKernelProvider({ threads: 1 })
    expect(provider.name).toBe('native')
    expect(provider.threads()).toBe(1)
    const info = loadedNativeKernelsInfo()
    expect(info?.path).toBe(status.path)
    expect(typeof info?.cpuLevel).toBe('string')
    const c = new Float32Array(4)
    provider.gemm(false, false, 1, 2, 2, 1, Float32Array.of(1, 2), 0, Float32Array.of(3, 4), 0, c)
    expect(Array.from(c)).toEqual([3, 4, 6, 8])
    expect(() => provider.gemm(false, false, 1, 2, 2, 3, Float32Array.of(1, 2), 0, Float32Array.of(3, 4), 0, c)).toThrow(RangeError)
    expect(() => provider.softmax(new Float32Array(2), new Float32Array(2), 1, 3)).toThrow(/needs 3/)
    await expect(loadNativeKernelProvider({ threads: 0 })).rejects.toThrow(/threads 0/)
  })
})

describe.skipIf(status.state !== 'loadable')('native kernels with 2 threads', () => {
  it('give bit-identical matmuls and the same one-hot attention as 1 thread', async () => {
    const provider = await loadNativeKernelProvider({ threads: 1 })
    const run = (threads: number): Float32Array[] => {
      provider.setThreads(threads)
      const outs: Float32Array[] = []
      for (const [tA, tB, m, n, k] of [[false, false, 301, 45, 700], [true, false, 64, 70, 1000], [false, true, 129, 33, 257]] as const) {
        const a = Float32Array.from({ length: m * k }, (_, i) => Math.sin(i))
        const b = Float32Array.from({ length: k * n }, (_, i) => Math.cos(i))
        const c = new Float32Array(m * n)
        provider.gemm(tA, tB, 1, m, n, k, a, 0, b, 0, c)
        outs.push(c)
      }
      return outs
    }
    const one = run(1)
    const two = run(2)
    one.forEach((c, i) => expect(Array.from(two[i]!)).toEqual(Array.from(c)))
    provider.setThreads(1)
    expect(provider.threads()).toBe(1)
  })
})
