// dense() computes every causal pair (@attnlab/core's sparseAttention kernel over one key span per
// 64-row tile, or its denseAttention under hooks) with the mask accounting of this package: both
// sparsities 0. The kernel's online softmax matches denseAttention up to float32 rounding.
import { expect, it } from 'vitest'
import * as tf from '@tensorflow/tfjs-core'
import { describeWithBackends, expectArraysClose, expectNoLeaks } from '@attnlab/core/testing'
import { denseAttention } from '@attnlab/core'
import { causalPairMask, dense } from './index.ts'
import { randomQkv } from './__fixtures__/reference.ts'

const none = { hooks: {}, needsPattern: false }

describeWithBackends('dense()', () => {
  const x = randomQkv(11, 4, 2, 9, 4, 3)
  const input = () => ({
    q: tf.tensor4d(x.q, [1, 4, 9, 4]),
    k: tf.tensor4d(x.k, [1, 2, 9, 4]),
    v: tf.tensor4d(x.v, [1, 2, 9, 3]),
    scale: 0.5,
    layer: 0,
  })

  it('prefill: the output of denseAttention, the causal mask, sparsity 0', async () => {
    await expectNoLeaks(() => {
      const qkv = input()
      const mine = dense().prefillWithMask(qkv, none)
      const reference = denseAttention.prefill(qkv, none)
      expectArraysClose(mine.z.dataSync(), reference.z.dataSync(), 1e-6)
      expect(mine.mask).toEqual(causalPairMask(1, 4, 9))
      expect(mine.sparsity).toEqual({ exact: 0, reported: 0 })
      expect(mine.computedPairs).toBe(reference.computedPairs)
      tf.dispose([qkv.q, qkv.k, qkv.v, mine.z, reference.z])
    })
  })

  it('decode: the output of denseAttention over the full cache, sparsity 0', async () => {
    await expectNoLeaks(() => {
      const qkv = input()
      const q = tf.slice(qkv.q, [0, 0, 8, 0], [1, 4, 1, 4]) as tf.Tensor4D
      const cache = { keys: qkv.k, values: qkv.v, positions: 9, promptLength: 8, kernelState: null }
      const step = { q, cache, position: 8, scale: 0.5, layer: 0 }
      const mine = dense().decodeWithMask(step, none)
      const reference = denseAttention.decode(step, none)
      expectArraysClose(mine.z.dataSync(), reference.z.dataSync(), 1e-6)
      expect(mine.sparsity).toEqual({ exact: 0, reported: 0 })
      // under hooks both are denseAttention itself
      const hooked = dense().decodeWithMask(step, { hooks: {}, needsPattern: true })
      expect(Array.from(hooked.z.dataSync())).toEqual(Array.from(reference.z.dataSync()))
      tf.dispose([qkv.q, qkv.k, qkv.v, q, mine.z, reference.z, hooked.z])
    })
  })
})
