/**
 * Test helpers for attnlab packages (import from `@attnlab/core/testing` in `*.test.ts`):
 * run a suite on every backend, compare arrays with a backend-aware tolerance, and assert that
 * no tensors leak. Requires `vitest`.
 *
 * @packageDocumentation
 */
import * as tf from '@tensorflow/tfjs-core'
import { beforeAll, describe, expect } from 'vitest'
import { useBackend, type BackendName } from './backend.ts'

/**
 * The backends test suites run on: `ATTNLAB_TEST_BACKENDS` (comma-separated) or `cpu,wasm`.
 *
 * @category Testing
 */
export function testBackends(): BackendName[] {
  const env = typeof process !== 'undefined' ? process.env.ATTNLAB_TEST_BACKENDS : undefined
  const names = (env ?? 'cpu,wasm')
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s.length > 0)
  return names as BackendName[]
}

/**
 * Declares `suite` once per test backend, as `describe('<name> [<backend>]')`, activating the
 * backend before the suite's tests run.
 *
 * @example
 * ```ts
 * describeWithBackends('softmax', (backend) => {
 *   it('sums to one', () => { ... })
 * })
 * ```
 * @category Testing
 */
export function describeWithBackends(
  name: string,
  suite: (backend: BackendName) => void,
  backends: readonly BackendName[] = testBackends(),
): void {
  for (const backend of backends) {
    describe(`${name} [${backend}]`, () => {
      beforeAll(async () => {
        await useBackend(backend)
      })
      suite(backend)
    })
  }
}

/**
 * The absolute tolerance for float32 comparisons on the active backend (looser on GPU
 * backends, which may use 16-bit floats).
 *
 * @category Testing
 */
export function backendTolerance(): number {
  const name = tf.getBackend()
  return name === 'webgl' || name === 'webgpu' ? 1e-2 : 1e-4
}

/**
 * Asserts two arrays (or tensors) are elementwise close: `|a - e| <= atol + rtol * |e|`.
 * NaN matches only NaN, and infinities must match exactly.
 *
 * @param actual - values or a tensor
 * @param expected - values or a tensor (same number of elements; shapes compared for tensors)
 * @param atol - absolute tolerance, default {@link backendTolerance}
 * @param rtol - relative tolerance, default `atol`
 * @category Testing
 */
export function expectArraysClose(
  actual: tf.Tensor | ArrayLike<number> | number[][],
  expected: tf.Tensor | ArrayLike<number> | number[][] | number,
  atol = backendTolerance(),
  rtol = atol,
): void {
  const flatten = (x: tf.Tensor | ArrayLike<number> | number[][] | number): number[] => {
    if (typeof x === 'number') return [x]
    if (x instanceof tf.Tensor) return Array.from(x.dataSync())
    return (Array.from(x as ArrayLike<unknown>) as unknown[]).flat(Infinity as 1) as number[]
  }
  if (actual instanceof tf.Tensor && expected instanceof tf.Tensor) {
    expect(actual.shape, 'shapes differ').toEqual(expected.shape)
  }
  const a = flatten(actual)
  const e = typeof expected === 'number' ? new Array<number>(a.length).fill(expected) : flatten(expected)
  expect(a.length, 'element counts differ').toBe(e.length)
  for (let i = 0; i < a.length; i++) {
    const x = a[i] as number
    const y = e[i] as number
    if (Number.isNaN(y)) {
      if (!Number.isNaN(x)) expect.fail(`element ${i}: got ${x}, expected NaN`)
      continue
    }
    if (!Number.isFinite(y)) {
      if (x !== y) expect.fail(`element ${i}: got ${x}, expected ${y}`)
      continue
    }
    if (!(Math.abs(x - y) <= atol + rtol * Math.abs(y))) {
      expect.fail(`element ${i}: got ${x}, expected ${y} (|diff| ${Math.abs(x - y)} > ${atol} + ${rtol}*|expected|)`)
    }
  }
}

/**
 * Runs `fn` and asserts that the number of live tensors is the same before and after (tensors
 * returned by `fn` are disposed first if `disposeResult`).
 *
 * @returns what `fn` returned
 * @category Testing
 */
export async function expectNoLeaks<T>(fn: () => T | Promise<T>, options: { disposeResult?: boolean } = {}): Promise<T> {
  const before = tf.memory().numTensors
  const result = await fn()
  if (options.disposeResult) tf.dispose(result as unknown as tf.TensorContainer)
  const after = tf.memory().numTensors
  expect(after - before, `leaked ${after - before} tensors`).toBe(0)
  return result
}
