import * as tf from '@tensorflow/tfjs-core'
import { expect, it } from 'vitest'
import { AttnlabError, ShapeError } from '../errors.ts'
import { Rng } from '../rng.ts'
import { describeWithBackends, expectArraysClose, expectNoLeaks } from '../testing.ts'
import { gatherRows } from './gather-rows.ts'
import { gradients, randomArray, withoutKernels } from './reference.test-utils.ts'

describeWithBackends('gatherRows', () => {
  for (const [rows, width, n, k] of [
    [7, 5, 9, 1],
    [13, 33, 20, 2],
    [1, 1, 3, 3],
  ] as const) {
    it(
      `table [${rows}, ${width}], ` + `${n} x ${k} indices (with repeats): sums of rows, gradient adds them back`,
      async () => {
        const rng = Rng.fromSeed(rows * 7 + k)
        const values = randomArray(rng, rows * width)
        const table = tf.tensor2d(values, [rows, width])
        const idx = Int32Array.from({ length: n * k }, () => rng.int(rows))
        const indices = k === 1 ? tf.tensor1d(idx, 'int32') : tf.tensor2d(idx, [n, k], 'int32')
        const rv = randomArray(rng, n * width)
        const r = tf.tensor2d(rv, [n, width])
        const f = (t: tf.Tensor): tf.Tensor => gatherRows(t as tf.Tensor2D, indices as tf.Tensor2D)
        const fused = await expectNoLeaks(() => gradients(f, [table], r))
        const composite = withoutKernels(() => gradients(f, [table], r))
        const expected = new Float64Array(n * width)
        const expectedGrad = new Float64Array(rows * width)
        for (let i = 0; i < n; i++) {
          for (let m = 0; m < k; m++) {
            const row = idx[i * k + m]!
            for (let j = 0; j < width; j++) {
              expected[i * width + j]! += values[row * width + j]!
              expectedGrad[row * width + j]! += rv[i * width + j]!
            }
          }
        }
        expectArraysClose(fused.value, expected, 1e-6)
        expectArraysClose(composite.value, expected, 1e-6)
        expectArraysClose(fused.grads[0]!, expectedGrad, 1e-6)
        expectArraysClose(composite.grads[0]!, expectedGrad, 1e-6)
        tf.dispose([table, indices, r])
      },
    )
  }

  it('throws typed errors for out-of-range indices and bad inputs', () => {
    const table = tf.zeros([3, 2]) as tf.Tensor2D
    expect(() => gatherRows(table, tf.tensor1d([0, 3], 'int32'))).toThrow(AttnlabError)
    expect(() => gatherRows(table, tf.tensor1d([0, 3], 'int32'))).toThrow(
      /row index 3 at flat index 1 is out of range \[0, 3\)/,
    )
    expect(() => gatherRows(table, tf.tensor1d([-1], 'int32'))).toThrow(/row index -1/)
    expect(() => gatherRows(table, tf.tensor1d([0, 1]) as tf.Tensor1D)).toThrow(ShapeError)
    expect(() => gatherRows(tf.zeros([3]) as unknown as tf.Tensor2D, tf.tensor1d([0], 'int32'))).toThrow(/rank-2/)
    table.dispose()
  })
})
