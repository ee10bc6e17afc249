import { expect, it } from 'vitest'
import * as tf from '@tensorflow/tfjs-core'
import { describeWithBackends, expectNoLeaks } from '@attnlab/core/testing'
import type { LayerKVCache } from '@attnlab/core'
import {
  adaSnapKV,
  applyDecode,
  applyPrefill,
  blockSparse,
  flexPrefill,
  quest,
  snapKV,
  verticalSlash,
  type SparseAttentionKernel,
} from './index.ts'
import { maxAbsDiff, randomQkv, tensors, type Qkv } from './__fixtures__/reference.ts'

// Batch rows are independent sequences: a batched kernel call must equal per-sequence calls.
const rows = [randomQkv(41, 4, 2, 48, 8), randomQkv(42, 4, 2, 48, 8)]
const steps = [randomQkv(43, 4, 2, 1, 8), randomQkv(44, 4, 2, 1, 8)]

function stack(get: (x: Qkv) => Float32Array, shape: [number, number, number]): tf.Tensor4D {
  return tf.tensor4d(Float32Array.from(rows.flatMap((x) => Array.from(get(x)))), [rows.length, ...shape])
}
function stackSteps(get: (x: Qkv) => Float32Array, shape: [number, number, number]): tf.Tensor4D {
  return tf.tensor4d(Float32Array.from(steps.flatMap((x) => Array.from(get(x)))), [steps.length, ...shape])
}

describeWithBackends('batched kernels', () => {
  const prefillKernels: SparseAttentionKernel[] = [
    verticalSlash({ verticalSize: 6, slashSize: 6, window: 8, sinks: 2, local: 3, kernelBlockSize: 8 }),
    flexPrefill({ alpha: 0.4, minBudget: 4, window: 8, sinks: 2, local: 3, kernelBlockSize: 8 }),
    flexPrefill({ alpha: 0.4, minBudget: 8, tau: 0.3, blockSize: 8 }),
    blockSparse({ blockSize: 8, topK: 4 }),
  ]

  it('prefill: each batch row equals the same sequence alone', async () => {
    for (const kernel of prefillKernels) {
      const result = await expectNoLeaks(() => {
        const q = stack((x) => x.q, [4, 48, 8])
        const k = stack((x) => x.k, [2, 48, 8])
        const v = stack((x) => x.v, [2, 48, 8])
        const r = kernel.prefillWithMask({ q, k, v, scale: 1 / Math.sqrt(8), layer: 3 })
        const z = r.z.dataSync().slice()
        tf.dispose([q, k, v, r.z])
        return { ...r, z }
      })
      expect(result.maskShape).toEqual([2, 4, 48, 48])
      expect(result.totalPairs).toBe(2 * 4 * ((48 * 49) / 2))
      rows.forEach((x, b) => {
        const t = tensors(x)
        const alone = applyPrefill(kernel, t)
        const n = 4 * 48 * 48
        expect(Array.from(result.mask.subarray(b * n, (b + 1) * n)), kernel.name).toEqual(Array.from(alone.mask))
        expect(
          maxAbsDiff(result.z.subarray(b * 4 * 48 * 8, (b + 1) * 4 * 48 * 8), alone.output.dataSync()),
        ).toBeLessThan(1e-6)
        expect(Array.from(result.headSparsity.reported.subarray(b * 4, b * 4 + 4))).toEqual(
          Array.from(alone.headSparsity.reported),
        )
        tf.dispose([t.q, t.k, t.v, alone.output])
      })
    }
  })

  it('decode: eviction and page selection per batch row', async () => {
    for (const kernel of [
      snapKV({ capacity: 12, window: 6, kernelSize: 3, local: 4, prefix: 2 }),
      adaSnapKV({ capacity: 12, window: 6, kernelSize: 3, local: 4, prefix: 2 }),
      quest({ tokenBudget: 16, pageSize: 8, sharePages: false }),
    ]) {
      const result = await expectNoLeaks(() => {
        const q = stack((x) => x.q, [4, 48, 8])
        const k = stack((x) => x.k, [2, 48, 8])
        const v = stack((x) => x.v, [2, 48, 8])
        const cache: LayerKVCache = {
          keys: tf.keep(tf.clone(k)),
          values: tf.keep(tf.clone(v)),
          positions: 48,
          promptLength: 48,
          kernelState: null,
        }
        kernel.afterPrefill?.({ q, k, v, scale: 1 / Math.sqrt(8), layer: 0 }, cache)
        const kNew = stackSteps((x) => x.k, [2, 1, 8])
        const vNew = stackSteps((x) => x.v, [2, 1, 8])
        const keys = tf.keep(tf.concat([cache.keys as tf.Tensor4D, kNew], 2) as tf.Tensor4D)
        const values = tf.keep(tf.concat([cache.values as tf.Tensor4D, vNew], 2) as tf.Tensor4D)
        tf.dispose([cache.keys as tf.Tensor, cache.values as tf.Tensor])
        cache.keys = keys
        cache.values = values
        cache.positions = 49
        const qNew = stackSteps((x) => x.q, [4, 1, 8])
        const r = kernel.decodeWithMask({ q: qNew, cache, position: 48, scale: 1 / Math.sqrt(8), layer: 0 })
        const z = r.z.dataSync().slice()
        tf.dispose([q, k, v, kNew, vNew, qNew, r.z, keys, values])
        cache.kernelState?.dispose()
        return { ...r, z }
      })
      expect(result.maskShape).toEqual([2, 4, 49])
      rows.forEach((x, b) => {
        const t = tensors(x)
        const s = steps[b] as Qkv
        const step = { qNew: tf.tensor2d(s.q, [4, 8]), kNew: tf.tensor2d(s.k, [2, 8]), vNew: tf.tensor2d(s.v, [2, 8]) }
        const alone = applyDecode(kernel, t, step)
        expect(Array.from(result.mask.subarray(b * 4 * 49, (b + 1) * 4 * 49)), kernel.name).toEqual(
          Array.from(alone.mask),
        )
        expect(maxAbsDiff(result.z.subarray(b * 32, (b + 1) * 32), alone.output.dataSync())).toBeLessThan(1e-6)
        tf.dispose([t.q, t.k, t.v, step.qNew, step.kNew, step.vNew, alone.output])
      })
    }
  })
})
