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
import { AttnlabError, ConfigError } from './errors.ts'

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

/**
 * The budget and seed of a property-based (fuzz) test. `numRuns` is the CI budget times
 * `ATTNLAB_FUZZ_SCALE` (default 1; `pnpm bench` runs with a larger scale); `seed` is
 * `ATTNLAB_FUZZ_SEED` or a fixed default, so a failure replays with the seed fast-check prints.
 *
 * @param ciRuns - the number of inputs tried in CI
 * @example
 * ```ts
 * fc.assert(fc.property(arbitrary, check), fuzzSettings(200))
 * ```
 * @category Testing
 */
export function fuzzSettings(ciRuns: number): { numRuns: number; seed: number } {
  const env = typeof process === 'undefined' ? {} : process.env
  const scale = Number(env.ATTNLAB_FUZZ_SCALE ?? '1')
  const seed = Number(env.ATTNLAB_FUZZ_SEED ?? String(FUZZ_SEED))
  if (!(Number.isFinite(scale) && scale > 0)) throw new ConfigError('ATTNLAB_FUZZ_SCALE', `${scale} is not positive`)
  if (!Number.isSafeInteger(seed)) throw new ConfigError('ATTNLAB_FUZZ_SEED', `${seed} is not an integer`)
  return { numRuns: Math.max(1, Math.round(ciRuns * scale)), seed }
}

/** The default seed of {@link fuzzSettings}. @category Testing */
export const FUZZ_SEED = 20261201

/**
 * One corruption of a file's bytes (see {@link mutateBytes}).
 *
 * @category Testing
 */
export type ByteMutation =
  | { readonly kind: 'truncate'; readonly length: number }
  | { readonly kind: 'append'; readonly bytes: Uint8Array }
  | { readonly kind: 'flip'; readonly bit: number }
  | { readonly kind: 'write'; readonly offset: number; readonly bytes: Uint8Array }
  | { readonly kind: 'integer'; readonly offset: number; readonly width: 4 | 8; readonly value: bigint }

/**
 * Integers that break sizes and offsets: zero, one, negative, the int32 and uint32 limits, and
 * values past any file (as int32 or 64-bit little-endian words, see {@link mutateBytes}).
 *
 * @category Testing
 */
export const HOSTILE_INTEGERS: readonly bigint[] = Object.freeze([
  0n,
  1n,
  -1n,
  2n,
  3n,
  7n,
  255n,
  65535n,
  2n ** 31n - 1n,
  -(2n ** 31n),
  2n ** 32n - 1n,
  2n ** 53n + 1n,
  2n ** 63n - 1n,
  -(2n ** 63n),
])

/**
 * A copy of `bytes` with one corruption applied: cut to `length` bytes, bytes appended, one bit
 * flipped (`bit` modulo the bit count), bytes overwritten (clipped to the file), or a little-endian
 * integer written (wrapped to `width` bytes, clipped to the file). Offsets wrap modulo the length.
 *
 * @category Testing
 */
export function mutateBytes(bytes: Uint8Array, mutation: ByteMutation): Uint8Array {
  const n = bytes.byteLength
  switch (mutation.kind) {
    case 'truncate':
      return bytes.slice(0, Math.min(n, Math.max(0, mutation.length)))
    case 'append': {
      const out = new Uint8Array(n + mutation.bytes.byteLength)
      out.set(bytes)
      out.set(mutation.bytes, n)
      return out
    }
    case 'flip': {
      const out = bytes.slice()
      if (n === 0) return out
      const bit = mutation.bit % (8 * n)
      out[bit >> 3] = (out[bit >> 3] as number) ^ (1 << (bit & 7))
      return out
    }
    case 'write': {
      const out = bytes.slice()
      if (n === 0) return out
      const offset = mutation.offset % n
      out.set(mutation.bytes.subarray(0, n - offset), offset)
      return out
    }
    case 'integer': {
      const word = new Uint8Array(8)
      new DataView(word.buffer).setBigUint64(0, BigInt.asUintN(64, mutation.value), true)
      return mutateBytes(bytes, { kind: 'write', offset: mutation.offset, bytes: word.subarray(0, mutation.width) })
    }
  }
}

/** The global constructors whose allocations {@link expectAcceptedOrRejected} bounds. */
const ALLOCATORS = [
  'ArrayBuffer',
  'SharedArrayBuffer',
  'Int8Array',
  'Uint8Array',
  'Uint8ClampedArray',
  'Int16Array',
  'Uint16Array',
  'Int32Array',
  'Uint32Array',
  'Float32Array',
  'Float64Array',
  'BigInt64Array',
  'BigUint64Array',
] as const

/** Bytes a `new <name>(first)` asks for (0 for a view over an existing buffer). */
function requestedBytes(name: (typeof ALLOCATORS)[number], first: unknown): number {
  const width = name.endsWith('Buffer')
    ? 1
    : (globalThis[name] as unknown as { BYTES_PER_ELEMENT: number }).BYTES_PER_ELEMENT
  if (typeof first === 'number' || typeof first === 'bigint') return Number(first) * width
  if (first instanceof ArrayBuffer || (typeof SharedArrayBuffer !== 'undefined' && first instanceof SharedArrayBuffer))
    return 0
  const length = (first as { length?: unknown } | null | undefined)?.length
  return typeof length === 'number' ? length * width : 0
}

/**
 * Runs `body` with the global `ArrayBuffer` and typed-array constructors wrapped so that the largest single
 * allocation asked for is recorded (bytes), also one that fails (a `RangeError`) or is dropped at once: an
 * allocation sized from a header's claim shows here even when the garbage collector has already freed it.
 */
async function largestAllocation(body: () => Promise<void>): Promise<number> {
  let largest = 0
  const originals = ALLOCATORS.map((name) => [name, globalThis[name]] as const).filter(([, c]) => c !== undefined)
  for (const [name, original] of originals) {
    type Constructor = new (...args: unknown[]) => object
    const traced: Constructor = new Proxy(original as unknown as Constructor, {
      construct(target, args, newTarget): object {
        const bytes = requestedBytes(name, args[0])
        if (Number.isNaN(bytes) || bytes > largest) largest = Number.isNaN(bytes) ? Number.POSITIVE_INFINITY : bytes
        return Reflect.construct(target, args, newTarget === traced ? target : newTarget)
      },
    })
    ;(globalThis as Record<string, unknown>)[name] = traced
  }
  try {
    await body()
  } finally {
    for (const [name, original] of originals) (globalThis as Record<string, unknown>)[name] = original
  }
  return largest
}

/**
 * Runs a parser on (possibly corrupt) input and checks the reliability contract: it either returns,
 * or throws one `AttnlabError` (a typed error, never a `TypeError` or `RangeError`) whose message
 * is one line naming `file`; it never asks for more than `maxAllocation` bytes in one `ArrayBuffer` or typed
 * array (the global constructors are traced during the call, so an allocation sized from a header's claim fails
 * the check even if it is freed at once), and in Node the live array buffers grow by no more than that either
 * (default 8 times the input plus 1 MiB: nothing sized from a header's claims).
 *
 * @param parse - the parser call
 * @param options - `file`: the name the message must contain (or a list: one of them); `inputBytes`: the input's size;
 *   `mustReject`: the input is certainly invalid (truncated, for example), so returning fails
 * @returns whether the input was accepted, and the error when it was not
 * @category Testing
 */
export async function expectAcceptedOrRejected(
  parse: () => unknown,
  options: { file: string | readonly string[]; inputBytes: number; mustReject?: boolean; maxAllocation?: number },
): Promise<{ accepted: boolean; error?: AttnlabError }> {
  const memory = (): number => (typeof process === 'undefined' ? 0 : process.memoryUsage().arrayBuffers)
  const before = memory()
  let error: unknown
  let accepted = false
  const largest = await largestAllocation(async () => {
    try {
      await parse()
      accepted = true
    } catch (caught) {
      error = caught
    }
  })
  const allocated = memory() - before
  const limit = options.maxAllocation ?? 8 * options.inputBytes + 2 ** 20
  expect(largest, `asked for ${largest} bytes at once for a ${options.inputBytes}-byte input`).toBeLessThanOrEqual(
    limit,
  )
  expect(allocated, `allocated ${allocated} bytes for a ${options.inputBytes}-byte input`).toBeLessThanOrEqual(limit)
  if (accepted) {
    expect(options.mustReject ?? false, `accepted an invalid ${options.file}`).toBe(false)
    return { accepted }
  }
  const failure: unknown = error
  if (!(failure instanceof AttnlabError)) throw failure
  const names = typeof options.file === 'string' ? [options.file] : options.file
  expect(
    names.some((name) => failure.message.includes(name)),
    `the error names ${names.join(' or ')}: ${failure.message}`,
  ).toBe(true)
  expect(failure.message, 'the error is one line').not.toContain('\n')
  return { accepted, error: failure }
}

/**
 * JSON values that break fields of a JSON file: wrong types, negative, zero, fractional, huge and
 * unsafe numbers, empty and odd strings, empty containers (`undefined` deletes the field; see
 * {@link withJsonValue}).
 *
 * @category Testing
 */
export const HOSTILE_JSON_VALUES: readonly unknown[] = Object.freeze([
  undefined,
  null,
  true,
  0,
  -1,
  1.5,
  -0.5,
  2 ** 31,
  2 ** 53 + 2,
  1e300,
  -1e300,
  '',
  'x',
  '1',
  '\u0000\uffff',
  [],
  [1, -1],
  {},
  { a: 1 },
])

/**
 * Every path into a JSON value (object keys and array indices), the root's `[]` first.
 *
 * @category Testing
 */
export function jsonPaths(value: unknown, prefix: readonly (string | number)[] = []): (string | number)[][] {
  const out: (string | number)[][] = [[...prefix]]
  if (Array.isArray(value)) {
    for (const [i, item] of value.entries()) out.push(...jsonPaths(item, [...prefix, i]))
  } else if (typeof value === 'object' && value !== null)
    for (const [key, item] of Object.entries(value)) out.push(...jsonPaths(item, [...prefix, key]))
  return out
}

/**
 * A deep copy of a JSON value with the value at `path` replaced (`undefined` deletes an object
 * field; the empty path replaces the whole value).
 *
 * @category Testing
 */
export function withJsonValue(value: unknown, path: readonly (string | number)[], replacement: unknown): unknown {
  if (path.length === 0) return replacement
  const copy = structuredClone(value) as Record<string | number, unknown>
  let parent = copy
  for (const key of path.slice(0, -1)) parent = parent[key] as Record<string | number, unknown>
  const last = path[path.length - 1] as string | number
  if (replacement === undefined && !Array.isArray(parent)) delete parent[last]
  else parent[last] = replacement
  return copy
}
