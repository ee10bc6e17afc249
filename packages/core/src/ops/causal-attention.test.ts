import * as tf from '@tensorflow/tfjs-core'
import { expect, it } from 'vitest'
import { ConfigError, ShapeError } from '../errors.ts'
import { Rng } from '../rng.ts'
import { describeWithBackends, expectArraysClose, expectNoLeaks } from '../testing.ts'
import { causalMask } from '../attention.ts'
import { causalAttention } from './causal-attention.ts'
import {
  directionalError,
  gradients,
  randomArray,
  refAttention,
  toVec,
  withoutKernels,
} from './reference.test-utils.ts'

describeWithBackends('causalMask', () => {
  it('is 0 on and below the diagonal and -Infinity above, a new tensor per call', () => {
    const mask = causalMask(3)
    expect(mask.shape).toEqual([3, 3])
    expect(Array.from(mask.dataSync())).toEqual([0, -Infinity, -Infinity, 0, 0, -Infinity, 0, 0, 0])
    const again = causalMask(3)
    expect(again).not.toBe(mask)
    tf.dispose([mask, again])
    const one = causalMask(1)
    expect(Array.from(one.dataSync())).toEqual([0])
    one.dispose()
  })
})

describeWithBackends('causalAttention', () => {
  // pos not a multiple of 16, dHead not a multiple of 4, a single position; on the native kernels
  // each head size of the tile kernels (dHead padded to 8, 16, 32, 64) over several 16-row tiles,
  // not causal across a partial key tile, and dHead > 64 (the row kernels).
  const cases = [
    { batch: 2, pos: 7, nHeads: 3, dHead: 5, causal: true },
    { batch: 1, pos: 19, nHeads: 2, dHead: 16, causal: true },
    { batch: 3, pos: 5, nHeads: 1, dHead: 3, causal: false },
    { batch: 1, pos: 1, nHeads: 2, dHead: 2, causal: true },
    { batch: 2, pos: 37, nHeads: 2, dHead: 8, causal: true },
    { batch: 1, pos: 21, nHeads: 2, dHead: 8, causal: false },
    { batch: 1, pos: 33, nHeads: 1, dHead: 24, causal: true },
    { batch: 1, pos: 18, nHeads: 1, dHead: 40, causal: false },
    { batch: 1, pos: 17, nHeads: 1, dHead: 72, causal: true },
  ]
  for (const { batch, pos, nHeads, dHead, causal } of cases) {
    it(
      `batch ${batch}, pos ${pos}, ${nHeads} heads of ${dHead}${causal ? '' : ', not causal'}: values and ` +
        'gradients match the reference and the composite',
      async () => {
        const rng = Rng.fromSeed(batch * 1000 + pos * 10 + dHead)
        const width = nHeads * dHead
        const qkv = tf.tensor3d(randomArray(rng, batch * pos * 3 * width, 2), [batch, pos, 3 * width])
        const rv = randomArray(rng, batch * pos * width)
        const r = tf.tensor3d(rv, [batch, pos, width])
        const scale = 0.7
        const f = (...xs: tf.Tensor[]): tf.Tensor => causalAttention(xs[0] as tf.Tensor3D, nHeads, { scale, causal })
        const fused = await expectNoLeaks(() => gradients(f, [qkv], r))
        const composite = withoutKernels(() => gradients(f, [qkv], r))
        const vecs = [toVec(qkv.dataSync())]
        const ref = (vs: Float64Array[]): Float64Array => refAttention(vs[0]!, batch, pos, nHeads, dHead, scale, causal)
        expectArraysClose(fused.value, ref(vecs), 1e-5, 1e-4)
        expectArraysClose(fused.value, composite.value, 1e-5, 1e-4)
        expectArraysClose(fused.grads[0]!, composite.grads[0]!, 1e-5, 1e-4)
        expect(directionalError(ref, vecs, 0, toVec(rv), fused.grads[0]!, rng)).toBeLessThan(1e-4)
        tf.dispose([qkv, r])
      },
    )
  }

  it('default scale is 1/sqrt(dHead); no leaks in inference', async () => {
    const rng = Rng.fromSeed(3)
    const qkv = tf.tensor3d(randomArray(rng, 2 * 4 * 3 * 8), [2, 4, 24])
    await expectNoLeaks(() => {
      const z = causalAttention(qkv, 2)
      expectArraysClose(z.dataSync(), refAttention(toVec(qkv.dataSync()), 2, 4, 2, 4, 0.5, true), 1e-5, 1e-4)
      z.dispose()
    })
    qkv.dispose()
  })

  it('stays exact with near-sparse attention: masked entries are 0, no NaN or denormal slowdowns', () => {
    // Huge score margins: softmax underflows for all but one key; outputs equal that key's value.
    const pos = 6
    const values = new Float32Array(pos * 3)
    for (let t = 0; t < pos; t++) {
      values[t * 3] = 40 // q
      values[t * 3 + 1] = t === 0 ? 40 : -40 // k: only position 0 matches
      values[t * 3 + 2] = t + 1 // v
    }
    const z = tf.tidy(() => causalAttention(tf.tensor3d(values, [1, pos, 3]), 1, { scale: 1 }))
    expectArraysClose(z.dataSync(), new Float32Array(pos).fill(1), 0, 0)
    z.dispose()
  })

  it('rejects bad inputs with typed errors', () => {
    const qkv = tf.zeros([1, 2, 12]) as tf.Tensor3D
    expect(() => causalAttention(qkv, 5)).toThrow(ShapeError)
    expect(() => causalAttention(qkv, 0)).toThrow(ConfigError)
    expect(() => causalAttention(qkv, 2, { scale: Number.NaN })).toThrow(ConfigError)
    expect(() => causalAttention(tf.zeros([2, 12]) as unknown as tf.Tensor3D, 2)).toThrow(/rank-3/)
    qkv.dispose()
  })
})
