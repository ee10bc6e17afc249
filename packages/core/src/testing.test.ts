import * as tf from '@tensorflow/tfjs-core'
import { describe, expect, it } from 'vitest'
import { ConfigError } from './errors.ts'
import {
  DEFAULT_TEST_BACKENDS,
  describeWithBackends,
  expectArraysClose,
  expectNoLeaks,
  resolveTestBackend,
  testBackends,
  type TestBackend,
} from './testing.ts'

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

describe('test modes', () => {
  it('resolve to a backend and kernels; unknown modes are a ConfigError', () => {
    expect(resolveTestBackend('cpu')).toEqual({ backend: 'cpu', kernels: 'js' })
    expect(resolveTestBackend('wasm')).toEqual({ backend: 'wasm', kernels: 'none' })
    expect(resolveTestBackend('wasm+wasm-kernels')).toEqual({ backend: 'wasm', kernels: 'wasm' })
    expect(resolveTestBackend('wasm+native')).toEqual({ backend: 'wasm', kernels: 'native' })
    expect(resolveTestBackend('webgl')).toEqual({ backend: 'webgl', kernels: 'auto' })
    expect(() => resolveTestBackend('gpu' as TestBackend)).toThrow(ConfigError)
  })

  it('default to cpu, stock wasm, wasm with WebAssembly kernels and wasm with native kernels', () => {
    expect(DEFAULT_TEST_BACKENDS).toEqual(['cpu', 'wasm', 'wasm+wasm-kernels', 'wasm+native'])
    if (process.env.ATTNLAB_TEST_BACKENDS === undefined) expect(testBackends()).toEqual([...DEFAULT_TEST_BACKENDS])
  })
})
