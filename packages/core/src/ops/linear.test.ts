import * as tf from '@tensorflow/tfjs-core'
import { expect, it } from 'vitest'
import { ConfigError, ShapeError } from '../errors.ts'
import { Rng } from '../rng.ts'
import { describeWithBackends, expectArraysClose, expectNoLeaks } from '../testing.ts'
import { linear } from './linear.ts'
import { directionalError, gradients, randomArray, refLinear, toVec, withoutKernels } from './reference.test-utils.ts'

describeWithBackends('linear', () => {
  // Odd sizes: rows not a multiple of the kernels' tiles, inner < 8, columns not a multiple of 4.
  const cases = [
    { rows: 7, inner: 5, cols: 3 },
    { rows: 33, inner: 17, cols: 37 },
    { rows: 1, inner: 1, cols: 1 },
  ]
  for (const { rows, inner, cols } of cases) {
    for (const activation of ['none', 'gelu_new'] as const) {
      for (const withBias of [true, false]) {
        it(
          `[${rows}, ${inner}] @ [${inner}, ${cols}]${withBias ? ' + bias' : ''}, ${activation}: values and ` +
            'gradients match the reference and the composite',
          async () => {
            const rng = Rng.fromSeed(rows * 100 + cols + (withBias ? 1 : 0))
            const xv = randomArray(rng, rows * inner)
            const wv = randomArray(rng, inner * cols)
            const bv = randomArray(rng, cols)
            const rv = randomArray(rng, rows * cols)
            const x = tf.tensor2d(xv, [rows, inner])
            const w = tf.tensor2d(wv, [inner, cols])
            const b = tf.tensor1d(bv)
            const r = tf.tensor2d(rv, [rows, cols])
            const inputs = withBias ? [x, w, b] : [x, w]
            const f = (...xs: tf.Tensor[]): tf.Tensor =>
              linear(xs[0] as tf.Tensor2D, xs[1] as tf.Tensor2D, withBias ? (xs[2] as tf.Tensor1D) : null, activation)
            const fused = await expectNoLeaks(() => gradients(f, inputs, r))
            const composite = withoutKernels(() => gradients(f, inputs, r))
            const gelu = activation === 'gelu_new'
            const ref = (vs: Float64Array[]): Float64Array =>
              refLinear(vs[0]!, vs[1]!, withBias ? vs[2]! : null, rows, inner, cols, gelu)
            const vecs = inputs.map((t) => toVec(t.dataSync()))
            expectArraysClose(fused.value, ref(vecs), 1e-5, 1e-4)
            expectArraysClose(fused.value, composite.value, 1e-5, 1e-4)
            fused.grads.forEach((g, i) => {
              expectArraysClose(g, composite.grads[i]!, 1e-5, 1e-4)
              expect(directionalError(ref, vecs, i, toVec(rv), g, rng)).toBeLessThan(1e-4)
            })
            tf.dispose([x, w, b, r])
          },
        )
      }
    }
  }

  it('rejects bad inputs with typed errors', () => {
    const x = tf.zeros([2, 3])
    const w = tf.zeros([4, 5])
    expect(() => linear(x as tf.Tensor2D, w as tf.Tensor2D)).toThrow(ShapeError)
    expect(() => linear(x as tf.Tensor2D, tf.zeros([3, 2]) as tf.Tensor2D, tf.zeros([3]) as tf.Tensor1D)).toThrow(
      /bias \[3\] must be \[2\]/,
    )
    expect(() => linear(tf.zeros([2, 3], 'int32') as tf.Tensor2D, tf.zeros([3, 2]) as tf.Tensor2D)).toThrow(/float32/)
    expect(() => linear(x as tf.Tensor2D, tf.zeros([3, 2]) as tf.Tensor2D, null, 'relu' as 'none')).toThrow(ConfigError)
    tf.dispose([x, w])
  })
})
