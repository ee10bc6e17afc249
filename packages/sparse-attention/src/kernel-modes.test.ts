// The methods on @attnlab/core's sparseAttention kernel, in every kernel mode (js on cpu, the
// read-back fallback on stock wasm, WebAssembly SIMD, native): decode outputs against the masked
// reference attendWithMask over absolute positions (the prefill methods are checked the same way
// in tiled-attention.test.ts), and the per-step timing parts.
import { expect, it } from 'vitest'
import * as tf from '@tensorflow/tfjs-core'
import { sparseAttentionKernelMode } from '@attnlab/core/kernels'
import { describeWithBackends, expectNoLeaks } from '@attnlab/core/testing'
import {
  adaSnapKV,
  applyDecode,
  applyPrefill,
  attendWithMask,
  blockSparse,
  dense,
  quest,
  snapKV,
  verticalSlash,
  type SparseAttentionKernel,
} from './index.ts'
import { maxAbsDiff, randomQkv } from './__fixtures__/reference.ts'

describeWithBackends('methods on the sparseAttention kernel', (_backend, mode) => {
  const expected = { cpu: 'js', wasm: 'readback', 'wasm+wasm-kernels': 'wasm', 'wasm+native': 'native' }
  it(`runs on the ${expected[mode as keyof typeof expected]} engine`, () => {
    expect(sparseAttentionKernelMode()).toBe(expected[mode as keyof typeof expected])
  })

  const T = 203
  const H = 4
  const Hkv = 2
  const d = 16
  const x = randomQkv(21, H, Hkv, T + 1, d, 8)
  const decoders: SparseAttentionKernel[] = [
    dense(),
    quest({ tokenBudget: 64, pageSize: 16 }),
    quest({ tokenBudget: 48, pageSize: 8, sharePages: false }),
    snapKV({ capacity: 70, window: 16, local: 8, prefix: 2, kernelSize: 5 }),
    adaSnapKV({ capacity: 70, window: 16, local: 8, prefix: 2, kernelSize: 5 }),
  ]
  for (const kernel of decoders) {
    it(`${kernel.method} decode: the masked reference over absolute positions, no leaks`, async () => {
      const all = {
        q: tf.tensor4d(x.q, [1, H, T + 1, d]),
        k: tf.tensor4d(x.k, [1, Hkv, T + 1, d]),
        v: tf.tensor4d(x.v, [1, Hkv, T + 1, 8]),
      }
      const qkv = {
        q: tf.tidy(() => tf.reshape(tf.slice(all.q, [0, 0, 0, 0], [1, H, T, d]), [H, T, d])) as tf.Tensor3D,
        k: tf.tidy(() => tf.reshape(tf.slice(all.k, [0, 0, 0, 0], [1, Hkv, T, d]), [Hkv, T, d])) as tf.Tensor3D,
        v: tf.tidy(() => tf.reshape(tf.slice(all.v, [0, 0, 0, 0], [1, Hkv, T, 8]), [Hkv, T, 8])) as tf.Tensor3D,
      }
      const step = tf.tidy(() => ({
        qNew: tf.reshape(tf.slice(all.q, [0, 0, T, 0], [1, H, 1, d]), [H, d]) as tf.Tensor2D,
        kNew: tf.reshape(tf.slice(all.k, [0, 0, T, 0], [1, Hkv, 1, d]), [Hkv, d]) as tf.Tensor2D,
        vNew: tf.reshape(tf.slice(all.v, [0, 0, T, 0], [1, Hkv, 1, 8]), [Hkv, 8]) as tf.Tensor2D,
      }))
      tf.keep(step.qNew)
      tf.keep(step.kNew)
      tf.keep(step.vNew)
      await expectNoLeaks(() => {
        const result = applyDecode(kernel, qkv, step)
        const qLast = tf.slice(all.q, [0, 0, T, 0], [1, H, 1, d]) as tf.Tensor4D
        const reference = attendWithMask(qLast, all.k, all.v, result.mask, 1 / Math.sqrt(d))
        expect(maxAbsDiff(result.output.dataSync(), reference.dataSync())).toBeLessThan(2e-5)
        expect(result.timing.attentionSeconds).toBeGreaterThanOrEqual(0)
        if (kernel.method === 'quest') expect(Object.keys(result.timing.steps).sort()).toContain('pageScores')
        tf.dispose([result.output, qLast, reference])
      })
      tf.dispose([all.q, all.k, all.v, qkv.q, qkv.k, qkv.v, step.qNew, step.kNew, step.vNew])
    })
  }

  it('prefill methods report their estimation steps apart', () => {
    const y = randomQkv(5, H, Hkv, 300, d)
    const qkv = {
      q: tf.tensor3d(y.q, [H, 300, d]),
      k: tf.tensor3d(y.k, [Hkv, 300, d]),
      v: tf.tensor3d(y.v, [Hkv, 300, d]),
    }
    const vs = applyPrefill(verticalSlash({ verticalSize: 20, slashSize: 70, window: 32 }), qkv)
    expect(Object.keys(vs.timing.steps).sort()).toEqual(['estimate', 'index', 'selection'])
    const bs = applyPrefill(blockSparse({ blockSize: 16, topK: 4 }), qkv)
    expect(Object.keys(bs.timing.steps).sort()).toEqual(['pooling', 'selection'])
    for (const r of [vs, bs]) {
      const parts = Object.values(r.timing.steps).reduce((a, b) => a + b, 0)
      expect(parts).toBeLessThanOrEqual(r.timing.estimationSeconds + 1e-3)
      r.output.dispose()
    }
    tf.dispose([qkv.q, qkv.k, qkv.v])
  })
})
