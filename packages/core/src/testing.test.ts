import * as tf from '@tensorflow/tfjs-core'
import { expect, it } from 'vitest'
import { describeWithBackends, expectArraysClose, expectNoLeaks } from './testing.ts'

describeWithBackends('testing helpers', (backend) => {
  it('runs on the requested backend', () => {
    expect(tf.getBackend()).toBe(backend)
  })

  it('compares arrays with tolerance and fails outside it', () => {
    expectArraysClose([1, 2, 3], [1, 2, 3.00001])
    expectArraysClose(tf.tensor([[1, 2]]), tf.tensor([[1, 2]]))
    expectArraysClose([Number.NaN, Infinity], [Number.NaN, Infinity])
    expect(() => expectArraysClose([1, 2], [1, 2.1])).toThrow(/element 1/)
    expect(() => expectArraysClose([1], [1, 2])).toThrow()
    expect(() => expectArraysClose([1], [Number.NaN])).toThrow(/NaN/)
    expect(() => expectArraysClose(tf.tensor([1, 2]), tf.tensor([[1, 2]]))).toThrow(/shapes differ/)
  })

  it('detects leaked tensors', async () => {
    await expectNoLeaks(() => tf.tidy(() => tf.add(tf.ones([2]), 1)), { disposeResult: true })
    let leaked: tf.Tensor | undefined
    await expect(
      expectNoLeaks(() => {
        leaked = tf.ones([3])
      }),
    ).rejects.toThrow(/leaked 1 tensors/)
    leaked?.dispose()
  })
})
