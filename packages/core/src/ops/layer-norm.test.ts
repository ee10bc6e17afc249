import * as tf from '@tensorflow/tfjs-core'
import { expect, it } from 'vitest'
import { ConfigError, ShapeError } from '../errors.ts'
import { Rng } from '../rng.ts'
import { describeWithBackends, expectArraysClose, expectNoLeaks } from '../testing.ts'
import { layerNorm } from './layer-norm.ts'
import {
  directionalError,
  gradients,
  randomArray,
  refLayerNorm,
  toVec,
  withoutKernels,
} from './reference.test-utils.ts'

describeWithBackends('layerNorm', () => {
  for (const [rows, cols] of [
    [5, 7],
    [19, 64],
    [1, 3],
  ] as const) {
    for (const withBias of [true, false]) {
      it(
        `[${rows}, ${cols}]${withBias ? ' with bias' : ''}: values and gradients match the reference and the ` +
          'composite',
        async () => {
          const rng = Rng.fromSeed(rows * 31 + cols)
          const x = tf.tensor2d(randomArray(rng, rows * cols, 3), [rows, cols])
          const gain = tf.tensor1d(randomArray(rng, cols))
          const bias = tf.tensor1d(randomArray(rng, cols))
          const rv = randomArray(rng, rows * cols)
          const r = tf.tensor2d(rv, [rows, cols])
          const inputs = withBias ? [x, gain, bias] : [x, gain]
          const f = (...xs: tf.Tensor[]): tf.Tensor =>
            layerNorm(xs[0] as tf.Tensor2D, xs[1] as tf.Tensor1D, withBias ? (xs[2] as tf.Tensor1D) : undefined, 1e-5)
          const fused = await expectNoLeaks(() => gradients(f, inputs, r))
          const composite = withoutKernels(() => gradients(f, inputs, r))
          const vecs = inputs.map((t) => toVec(t.dataSync()))
          const ref = (vs: Float64Array[]): Float64Array =>
            refLayerNorm(vs[0]!, vs[1]!, withBias ? vs[2]! : null, rows, cols, 1e-5)
          expectArraysClose(fused.value, ref(vecs), 1e-5, 1e-4)
          expectArraysClose(fused.value, composite.value, 1e-5, 1e-4)
          fused.grads.forEach((g, i) => {
            expectArraysClose(g, composite.grads[i]!, 2e-5, 1e-4)
            expect(directionalError(ref, vecs, i, toVec(rv), g, rng)).toBeLessThan(2e-4)
          })
          tf.dispose([x, gain, bias, r])
        },
      )
    }
  }

  it('rejects bad inputs with typed errors', () => {
    const x = tf.zeros([2, 3]) as tf.Tensor2D
    expect(() => layerNorm(x, tf.zeros([4]) as tf.Tensor1D)).toThrow(ShapeError)
    expect(() => layerNorm(x, tf.zeros([3]) as tf.Tensor1D, tf.zeros([2]) as tf.Tensor1D)).toThrow(
      /bias \[2\] must be \[3\]/,
    )
    expect(() => layerNorm(x, tf.zeros([3]) as tf.Tensor1D, null, 0)).toThrow(ConfigError)
    expect(() => layerNorm(tf.zeros([3]) as unknown as tf.Tensor2D, tf.zeros([3]) as tf.Tensor1D)).toThrow(/rank-2/)
    x.dispose()
  })
})
