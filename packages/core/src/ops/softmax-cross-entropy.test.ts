import * as tf from '@tensorflow/tfjs-core'
import { expect, it } from 'vitest'
import { AttnlabError, ShapeError } from '../errors.ts'
import { Rng } from '../rng.ts'
import { describeWithBackends, expectArraysClose, expectNoLeaks } from '../testing.ts'
import {
  directionalError,
  gradients,
  randomArray,
  refCrossEntropy,
  toVec,
  withoutKernels,
} from './reference.test-utils.ts'
import { softmaxCrossEntropy } from './softmax-cross-entropy.ts'

describeWithBackends('softmaxCrossEntropy', () => {
  for (const [rows, cols] of [
    [9, 5],
    [64, 67],
    [1, 1],
  ] as const) {
    for (const weighted of [true, false]) {
      it(
        `[${rows}, ${cols}]${weighted ? ' weighted' : ''}: value and gradient match the reference and the ` +
          'composite',
        async () => {
          const rng = Rng.fromSeed(rows + cols)
          const logits = tf.tensor2d(randomArray(rng, rows * cols, 4), [rows, cols])
          const labelValues = Int32Array.from({ length: rows }, () => rng.int(cols))
          const labels = tf.tensor1d(labelValues, 'int32')
          const weightValues = weighted
            ? Float32Array.from({ length: rows }, (_, i) => (i % 3 === 0 ? 0 : 1 + (i % 2)))
            : new Float32Array(rows).fill(1)
          const weights = tf.tensor1d(weightValues)
          const dy = tf.scalar(1.7)
          const f = (...xs: tf.Tensor[]): tf.Tensor =>
            softmaxCrossEntropy(xs[0] as tf.Tensor2D, labels, weighted ? weights : undefined)
          const fused = await expectNoLeaks(() => gradients(f, [logits], dy))
          const composite = withoutKernels(() => gradients(f, [logits], dy))
          const vecs = [toVec(logits.dataSync())]
          const ref = (vs: Float64Array[]): Float64Array =>
            refCrossEntropy(vs[0]!, labelValues, weightValues, rows, cols)
          expectArraysClose(fused.value, ref(vecs), 1e-5, 1e-5)
          expectArraysClose(fused.value, composite.value, 1e-5, 1e-5)
          expectArraysClose(fused.grads[0]!, composite.grads[0]!, 1e-6, 1e-4)
          expect(directionalError(ref, vecs, 0, Float64Array.of(1.7), fused.grads[0]!, rng)).toBeLessThan(1e-4)
          tf.dispose([logits, labels, weights, dy])
        },
      )
    }
  }

  it('is 0 with zero gradient when every weight is 0', () => {
    const logits = tf.tensor2d([1, 2, 3, 4], [2, 2])
    const labels = tf.tensor1d([0, 1], 'int32')
    const weights = tf.zeros([2]) as tf.Tensor1D
    const { value, grads } = gradients(
      (x) => softmaxCrossEntropy(x as tf.Tensor2D, labels, weights),
      [logits],
      tf.scalar(1),
    )
    expect(value[0]).toBe(0)
    expectArraysClose(grads[0]!, [0, 0, 0, 0], 0, 0)
    tf.dispose([logits, labels, weights])
  })

  it('throws a typed error for a label out of range and for bad shapes', () => {
    const logits = tf.zeros([2, 3]) as tf.Tensor2D
    const bad = tf.tensor1d([0, 3], 'int32')
    expect(() => softmaxCrossEntropy(logits, bad)).toThrow(AttnlabError)
    expect(() => softmaxCrossEntropy(logits, bad)).toThrow(/label 3 at flat index 1 is out of range \[0, 3\)/)
    expect(() => softmaxCrossEntropy(logits, tf.tensor1d([-1, 0], 'int32'))).toThrow(/label -1/)
    expect(() => softmaxCrossEntropy(logits, tf.tensor1d([0], 'int32'))).toThrow(ShapeError)
    expect(() => softmaxCrossEntropy(logits, tf.tensor1d([0, 1]) as tf.Tensor1D)).toThrow(/int32/)
    expect(() => softmaxCrossEntropy(logits, tf.tensor1d([0, 1], 'int32'), tf.ones([3]) as tf.Tensor1D)).toThrow(
      ShapeError,
    )
    tf.dispose([logits, bad])
  })
})
