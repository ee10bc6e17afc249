// The native kernels: build/status helpers and the addon's own argument checks. The numeric
// behaviour is tested through the ops in the 'wasm+native' mode.
import { describe, expect, it } from 'vitest'
import {
  buildNativeKernels,
  loadNativeKernelProvider,
  loadedNativeKernelsInfo,
  nativeKernelsStatus,
} from './native-provider.ts'

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

describe.skipIf(status.state !== 'loadable')(
  `native kernels addon${status.state === 'loadable' ? '' : ' (skipped: not built; pnpm attnlab kernels build)'}`,
  () => {
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
      const sum = new Float32Array(3)
      provider.add!(Float32Array.of(1, 2, 3), Float32Array.of(4, 5, 0.5), sum, 3)
      expect(Array.from(sum)).toEqual([5, 7, 3.5])
      expect(() =>
        provider.gemm(false, false, 1, 2, 2, 3, Float32Array.of(1, 2), 0, Float32Array.of(3, 4), 0, c),
      ).toThrow(RangeError)
      expect(() => provider.softmax(new Float32Array(2), new Float32Array(2), 1, 3)).toThrow(/needs 3/)
      await expect(loadNativeKernelProvider({ threads: 0 })).rejects.toThrow(
        /Invalid threads: must be an integer >= 1, got 0/,
      )
    })
  },
)

describe.skipIf(status.state !== 'loadable')('native kernels with 2 threads', () => {
  const data = (n: number, s = 1): Float32Array => Float32Array.from({ length: n }, (_, i) => Math.sin(i * 0.37 * s))
  it('give bit-identical results to 1 thread (matmuls, row ' +
    'kernels, sums over rows, attention, one-hot attention)', async () => {
    const provider = await loadNativeKernelProvider({ threads: 1 })
    const run = (threads: number): Float32Array[] => {
      provider.setThreads(threads)
      const outs: Float32Array[] = []
      // Row split, panel split (N > M, deep K), transposed B, a partial last row block.
      for (const [tA, tB, m, n, k] of [
        [false, false, 301, 45, 700],
        [true, false, 64, 70, 1000],
        [false, true, 129, 33, 257],
        [true, false, 40, 200, 900],
        [true, false, 64, 256, 2048],
      ] as const) {
        const c = new Float32Array(m * n)
        provider.gemm(tA, tB, 1, m, n, k, data(m * k), 0, data(k * n, 1.3), 0, c)
        outs.push(c)
      }
      const rows = 3000
      for (const cols of [64, 75]) {
        const x = data(rows * cols, 2)
        const g = data(cols, 3)
        const y = new Float32Array(rows * cols)
        const mean = new Float32Array(rows)
        const rstd = new Float32Array(rows)
        provider.layerNormForward(x, g, data(cols, 4), y, mean, rstd, rows, cols, 1e-5)
        const dx = new Float32Array(rows * cols)
        const dg = new Float32Array(cols)
        const db = new Float32Array(cols)
        provider.layerNormBackward(x, g, mean, rstd, data(rows * cols, 5), dx, dg, db, rows, cols)
        const sums = new Float32Array(cols)
        provider.columnSum(x, sums, rows, cols)
        const soft = new Float32Array(rows * cols)
        provider.softmax(x, soft, rows, cols)
        const gelu = new Float32Array(rows * cols)
        provider.geluForward(x, gelu, rows * cols)
        const geluGrad = new Float32Array(rows * cols)
        provider.geluBackward(x, y, geluGrad, rows * cols)
        outs.push(y, mean, rstd, dx, dg, db, sums, soft, gelu, geluGrad)
      }
      const labels = Int32Array.from({ length: rows }, (_, i) => (i * 7) % 64)
      const weights = Float32Array.from({ length: rows }, (_, i) => (i % 5 === 0 ? 0 : 1))
      const logits = data(rows * 64, 6)
      const dLogits = new Float32Array(rows * 64)
      provider.softmaxCrossEntropyBackward(logits, labels, weights, rows, 64, 1, dLogits)
      outs.push(Float32Array.of(provider.softmaxCrossEntropy(logits, labels, weights, rows, 64)), dLogits)
      const [b, t, h, dh] = [16, 40, 4, 16]
      const qkv = data(b * t * 3 * h * dh, 7)
      const out = new Float32Array(b * t * h * dh)
      const probs = new Float32Array(b * h * t * t)
      provider.attentionForward(qkv, out, probs, b, t, h, dh, 0.25, true)
      const dQkv = new Float32Array(qkv.length)
      provider.attentionBackward(qkv, probs, data(out.length, 8), dQkv, b, t, h, dh, 0.25, true, out)
      outs.push(out, probs, dQkv)
      const shape = {
        batch: 64,
        pos: 12,
        nHeads: 3,
        dModel: 20,
        dValue: 20,
        dVocab: 8,
        outCols: 8,
        scale: 0.3,
        from: 2,
      }
      const tokens = Int32Array.from({ length: 64 * 12 }, (_, i) => (i * 5 + (i >> 2)) % 8)
      const wq = data(3 * 20 * 20, 9)
      const wv = data(3 * 20 * 20, 10)
      const ohLogits = new Float32Array(64 * 10 * 8)
      const ohProbs = new Float32Array(64 * 3 * 12 * 12)
      provider.oneHotAttentionForward(tokens, wq, wv, ohLogits, ohProbs, shape)
      const dWq = new Float32Array(wq.length)
      const dWv = new Float32Array(wv.length)
      provider.oneHotAttentionBackward(tokens, wq, wv, ohProbs, data(ohLogits.length, 11), dWq, dWv, shape)
      outs.push(ohLogits, ohProbs, dWq, dWv)
      return outs
    }
    const one = run(1)
    const two = run(2)
    const three = run(3)
    one.forEach((c, i) => {
      expect(Array.from(two[i]!), `output ${i}, 2 threads`).toEqual(Array.from(c))
      expect(Array.from(three[i]!), `output ${i}, 3 threads`).toEqual(Array.from(c))
    })
    provider.setThreads(1)
    expect(provider.threads()).toBe(1)
  }, 300_000) // ~6 s alone; 8-10x that when every core is busy (2 and 3 threads share 2 cores with turbo's other tasks)
})
