import { expect, it } from 'vitest'
import * as tf from '@tensorflow/tfjs-core'
import { describeWithBackends } from '@attnlab/core/testing'
import { floatValues } from './tensor-values.ts'

describeWithBackends('floatValues', () => {
  it('gives the values dataSync gives, also of a reshaped view and a sliced tensor, and leaks nothing', () => {
    const before = tf.memory().numTensors
    const x = tf.tensor3d(
      Float32Array.from({ length: 2 * 5 * 3 }, (_, i) => i * 0.5 - 3),
      [2, 5, 3],
    )
    const view = tf.expandDims(x, 0)
    const part = tf.slice(x, [1, 0, 0], [1, 5, 3])
    for (const t of [x, view, part]) expect(Array.from(floatValues(t))).toEqual(Array.from(t.dataSync()))
    tf.dispose([x, view, part])
    expect(tf.memory().numTensors).toBe(before)
  })
})
