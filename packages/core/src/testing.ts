/**
 * Test helpers for attnlab packages (import from `@attnlab/core/testing` in `*.test.ts`):
 * run a suite on every backend, compare arrays with a backend-aware tolerance, and assert that
 * no tensors leak. Requires `vitest`.
 *
 * @packageDocumentation
 */
import * as tf from '@tensorflow/tfjs-core'
import { beforeAll, describe, expect, it } from 'vitest'
import { BACKEND_NAMES, isNodeRuntime, useBackend, type BackendName, type KernelsMode } from './backend.ts'
import { ConfigError } from './errors.ts'

/**
 * A backend plus kernel mode a suite runs on:
 * - `cpu`: the cpu backend with the plain-JS attnlab kernels;
 * - `wasm`: the stock tfjs-wasm kernels (no attnlab kernels; fused ops run as composites);
 * - `wasm+wasm-kernels`: the wasm backend with the AssemblyScript kernels;
 * - `wasm+native`: the wasm backend with the native kernels (skipped, with the reason in the
 *   suite's name, when they are not built, unless `ATTNLAB_REQUIRE_NATIVE=1`, which makes the
 *   suite fail instead);
 * - any other {@link BackendName} (`webgl`, ...): that backend with its default kernels.
 *
 * @category Testing
 */
export type TestBackend = BackendName | 'wasm+wasm-kernels' | 'wasm+native' | 'wasm+js-kernels'

/** The default test modes. @category Testing */
export const DEFAULT_TEST_BACKENDS: readonly TestBackend[] = Object.freeze([
  'cpu',
  'wasm',
  'wasm+wasm-kernels',
  'wasm+native',
])

const MODES: Readonly<Record<string, { backend: BackendName; kernels: KernelsMode }>> = {
  cpu: { backend: 'cpu', kernels: 'js' },
  wasm: { backend: 'wasm', kernels: 'none' },
  'wasm+wasm-kernels': { backend: 'wasm', kernels: 'wasm' },
  'wasm+native': { backend: 'wasm', kernels: 'native' },
  'wasm+js-kernels': { backend: 'wasm', kernels: 'js' },
}

/**
 * The backend and kernels of a test mode.
 *
 * @throws `ConfigError` (`@attnlab/core`) for an unknown mode
 * @category Testing
 */
export function resolveTestBackend(mode: TestBackend): { backend: BackendName; kernels: KernelsMode } {
  const known = MODES[mode]
  if (known !== undefined) return known
  if ((BACKEND_NAMES as readonly string[]).includes(mode)) return { backend: mode as BackendName, kernels: 'auto' }
  throw new ConfigError(
    'ATTNLAB_TEST_BACKENDS',
    `'${mode}' is not a test backend; expected one of ${[...Object.keys(MODES), ...BACKEND_NAMES].join(', ')}`,
    { value: mode },
  )
}

/**
 * The modes test suites run on: `ATTNLAB_TEST_BACKENDS` (comma-separated) or
 * {@link DEFAULT_TEST_BACKENDS}.
 *
 * @category Testing
 */
export function testBackends(): TestBackend[] {
  const env = typeof process !== 'undefined' ? process.env.ATTNLAB_TEST_BACKENDS : undefined
  if (env === undefined) return [...DEFAULT_TEST_BACKENDS]
  return env
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s.length > 0) as TestBackend[]
}

/** Why native kernels cannot load here (undefined when they can), probed once at import. */
const nativeUnavailable: string | undefined = await (async () => {
  if (!isNodeRuntime()) return 'not Node.js'
  try {
    const { nativeKernelsStatus } = await import('./kernels/native-provider.ts')
    const status = await nativeKernelsStatus()
    if (status.state === 'loadable') return undefined
    return status.state === 'stale'
      ? 'native kernels built from other sources; run pnpm attnlab kernels build'
      : 'native kernels not built; run pnpm attnlab kernels build'
  } catch (error) {
    return `native kernels cannot be probed (${error instanceof Error ? error.message : String(error)})`
  }
})()

/**
 * Declares `suite` once per test mode, as `describe('<name> [<mode>]')`, activating the backend
 * and kernels before the suite's tests run. `suite` receives the tfjs backend name and the mode.
 *
 * @example
 * ```ts
 * describeWithBackends('softmax', (backend, mode) => {
 *   it('sums to one', () => { ... })
 * })
 * ```
 * @category Testing
 */
export function describeWithBackends(
  name: string,
  suite: (backend: BackendName, mode: TestBackend) => void,
  backends: readonly TestBackend[] = testBackends(),
): void {
  for (const mode of backends) {
    const { backend, kernels } = resolveTestBackend(mode)
    if (kernels === 'native' && nativeUnavailable !== undefined) {
      const required = typeof process !== 'undefined' && process.env.ATTNLAB_REQUIRE_NATIVE === '1'
      if (required) {
        describe(`${name} [${mode}]`, () => {
          it('has the native kernels (ATTNLAB_REQUIRE_NATIVE=1)', () => {
            expect.fail(`ATTNLAB_REQUIRE_NATIVE=1 but ${nativeUnavailable}`)
          })
        })
      } else {
        describe.skip(`${name} [${mode}: skipped, ${nativeUnavailable}]`, () => suite(backend, mode))
      }
      continue
    }
    describe(`${name} [${mode}]`, () => {
      beforeAll(async () => {
        await useBackend(backend, { kernels })
      })
      suite(backend, mode)
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
export async function expectNoLeaks<T>(
  fn: () => T | Promise<T>,
  options: { disposeResult?: boolean } = {},
): Promise<T> {
  const before = tf.memory().numTensors
  const result = await fn()
  if (options.disposeResult) tf.dispose(result as unknown as tf.TensorContainer)
  const after = tf.memory().numTensors
  expect(after - before, `leaked ${after - before} tensors`).toBe(0)
  return result
}
