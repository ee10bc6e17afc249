/**
 * The array-level API: run any kernel of this package on one sequence's `q`, `k`, `v` (no batch
 * axis, no model) and get the output, the boolean mask of computed pairs per head and both
 * sparsities. The CLI's `sparse apply` is built on it, and it runs exactly the kernel code a model
 * runs (decode goes through `afterPrefill` and a one-token KV cache).
 *
 * @module
 */
import * as tf from '@tensorflow/tfjs-core'
import { assertShape, type LayerKVCache } from '@attnlab/core'
import type { AttentionTiming, HeadSparsity, SparseAttentionKernel, SparsityReport } from './kernel.ts'

/**
 * One sequence's projections, after any positional transform.
 *
 * @category Sequence API
 */
export interface SequenceQKV {
  /** Queries, `[nHeads, T, dHead]`. */
  readonly q: tf.Tensor3D
  /** Keys, `[nKvHeads, T, dHead]` (`nHeads` a multiple of `nKvHeads`). */
  readonly k: tf.Tensor3D
  /** Values, `[nKvHeads, T, dValue]`. */
  readonly v: tf.Tensor3D
}

/**
 * The newest token's projections for one decode step.
 *
 * @category Sequence API
 */
export interface DecodeStepQKV {
  /** Query of the new token, `[nHeads, dHead]`. */
  readonly qNew: tf.Tensor2D
  /** Its key, `[nKvHeads, dHead]`. */
  readonly kNew: tf.Tensor2D
  /** Its value, `[nKvHeads, dValue]`. */
  readonly vNew: tf.Tensor2D
}

/**
 * Options of the sequence API.
 *
 * @category Sequence API
 */
export interface SequenceOptions {
  /** Multiplier of `q . k` (default `1 / sqrt(dHead)`). */
  readonly scale?: number
}

/**
 * A prefill on one sequence.
 *
 * @category Sequence API
 */
export interface SequencePrefillResult {
  /** Attention output, `[nHeads, T, dValue]` (owned by the caller: dispose it). */
  readonly output: tf.Tensor3D
  /**
   * 1 where the pair was computed, `[nHeads, T, T]` row-major; built on first read from the
   * method's compact selection (512 MB at 8 heads and T = 8192).
   *
   * @throws `TooLargeError` (`@attnlab/core`) on read when `nHeads * T * T` exceeds 2^32 entries
   */
  readonly mask: Uint8Array
  /** `[nHeads, T, T]`. */
  readonly maskShape: readonly [number, number, number]
  /** Both sparsities averaged over heads. */
  readonly sparsity: SparsityReport
  /** Both sparsities per head (`[nHeads]`). */
  readonly headSparsity: HeadSparsity
  /** Method-specific numbers (see each factory). */
  readonly extra: Readonly<Record<string, number>>
  /** Wall-clock seconds of the estimation (planner) and of the attention. */
  readonly timing: AttentionTiming
}

/**
 * One decode step on one sequence.
 *
 * @category Sequence API
 */
export interface SequenceDecodeResult {
  /** The new token's attention output, `[nHeads, dValue]` (owned by the caller). */
  readonly output: tf.Tensor2D
  /**
   * 1 where the new query read the key at that position, `[nHeads, T + 1]` (position `T` is the new token);
   * built on first read.
   */
  readonly mask: Uint8Array
  /** `[nHeads, T + 1]`. */
  readonly maskShape: readonly [number, number]
  /** Both sparsities averaged over heads (exact: over the `T + 1` causal keys). */
  readonly sparsity: SparsityReport
  /** Both sparsities per head. */
  readonly headSparsity: HeadSparsity
  /** Method-specific numbers. */
  readonly extra: Readonly<Record<string, number>>
  /** Wall-clock seconds: the estimation (`afterPrefill` and the step's selection) and the attention. */
  readonly timing: SequenceDecodeTiming
}

/**
 * Timing of one decode step on one sequence.
 *
 * @category Sequence API
 */
export interface SequenceDecodeTiming extends AttentionTiming {
  /**
   * Seconds of `afterPrefill` (SnapKV's and Ada-SnapKV's observation-window scores and eviction,
   * Quest's page bounds), included in `estimationSeconds`; 0 for kernels without one.
   */
  readonly afterPrefillSeconds: number
}

function checkSequence(qkv: SequenceQKV): Record<string, number> {
  const dims = assertShape(qkv.q, ['nHeads', 'T', 'dHead'], 'q')
  assertShape(qkv.k, ['nKvHeads', 'T', 'dHead'], 'k', dims)
  assertShape(qkv.v, ['nKvHeads', 'T', 'dValue'], 'v', dims)
  return dims
}

/**
 * Runs a kernel's prefill on one sequence.
 *
 * @param kernel - any kernel of this package (a decode method prefills densely)
 * @param qkv - `q [nHeads, T, dHead]`, `k`/`v [nKvHeads, T, d]`
 * @param options - `scale` (default `1 / sqrt(dHead)`)
 * @returns output, mask `[nHeads, T, T]` (built on first read), sparsities, timing
 * @throws `ShapeError` (`@attnlab/core`) on inconsistent shapes (naming the tensor); `TooLargeError`
 *   (`@attnlab/core`) before any work when the request cannot fit the backend; the kernel's own errors
 * @example
 * ```ts
 * const kernel = verticalSlash({ verticalSize: 8, slashSize: 8, local: 4, window: 8 })
 * const { output, mask, sparsity } = applyPrefill(kernel, { q, k, v })
 * ```
 * @category Sequence API
 */
export function applyPrefill(
  kernel: SparseAttentionKernel,
  qkv: SequenceQKV,
  options: SequenceOptions = {},
): SequencePrefillResult {
  const dims = checkSequence(qkv)
  const scale = options.scale ?? 1 / Math.sqrt(dims.dHead as number)
  const [q, k, v] = [qkv.q, qkv.k, qkv.v].map((x) => tf.expandDims(x, 0) as tf.Tensor4D) as [
    tf.Tensor4D,
    tf.Tensor4D,
    tf.Tensor4D,
  ]
  try {
    const result = kernel.prefillWithMask({ q, k, v, scale, layer: 0 })
    const output = tf.squeeze(result.z, [0]) as tf.Tensor3D
    result.z.dispose()
    const [, nHeads, T] = result.maskShape
    const sequence = {
      output,
      maskShape: [nHeads, T, T] as const,
      sparsity: result.sparsity,
      headSparsity: result.headSparsity,
      extra: result.extra ?? {},
      timing: result.timing,
    }
    // the kernel's mask is built on first read: forward the read
    Object.defineProperty(sequence, 'mask', { enumerable: true, get: () => result.mask })
    return sequence as typeof sequence & { readonly mask: Uint8Array }
  } finally {
    tf.dispose([q, k, v])
  }
}

/**
 * Runs one decode step of a kernel on one sequence: the prompt's keys/values form the cache,
 * `afterPrefill` runs with the prompt's `q/k/v` (eviction methods select here), the new token is
 * appended, and the kernel's decode reads the cache.
 *
 * @param kernel - any kernel of this package (a prefill method decodes densely)
 * @param qkv - the prompt: `q [nHeads, T, dHead]`, `k`/`v [nKvHeads, T, d]`
 * @param step - the new token: `qNew [nHeads, dHead]`, `kNew [nKvHeads, dHead]`, `vNew [nKvHeads, dValue]`
 * @param options - `scale` (default `1 / sqrt(dHead)`)
 * @returns output `[nHeads, dValue]`, mask `[nHeads, T + 1]`, sparsities
 * @throws `ShapeError` (`@attnlab/core`) naming the offending tensor; the kernel's own errors (e.g.
 *   {@link SequenceTooShortError} from Quest)
 * @category Sequence API
 */
export function applyDecode(
  kernel: SparseAttentionKernel,
  qkv: SequenceQKV,
  step: DecodeStepQKV,
  options: SequenceOptions = {},
): SequenceDecodeResult {
  const dims = checkSequence(qkv)
  assertShape(step.qNew, ['nHeads', 'dHead'], 'q_new', dims)
  assertShape(step.kNew, ['nKvHeads', 'dHead'], 'k_new', dims)
  assertShape(step.vNew, ['nKvHeads', 'dValue'], 'v_new', dims)
  const T = dims.T as number
  const scale = options.scale ?? 1 / Math.sqrt(dims.dHead as number)
  const [q, k, v] = [qkv.q, qkv.k, qkv.v].map((x) => tf.expandDims(x, 0) as tf.Tensor4D) as [
    tf.Tensor4D,
    tf.Tensor4D,
    tf.Tensor4D,
  ]
  const cache: LayerKVCache = {
    keys: tf.keep(tf.clone(k)),
    values: tf.keep(tf.clone(v)),
    positions: T,
    promptLength: T,
    kernelState: null,
  }
  const qNew = tf.reshape(step.qNew, [1, dims.nHeads as number, 1, dims.dHead as number]) as tf.Tensor4D
  try {
    let afterPrefillSeconds = 0
    if (kernel.afterPrefill !== undefined) {
      const afterPrefillStart = performance.now()
      kernel.afterPrefill({ q, k, v, scale, layer: 0 }, cache)
      afterPrefillSeconds = (performance.now() - afterPrefillStart) / 1000
    }
    const append = (stored: tf.Tensor4D, x: tf.Tensor2D): tf.Tensor4D =>
      tf.keep(tf.tidy(() => tf.concat([stored, tf.reshape(x, [1, x.shape[0], 1, x.shape[1]])], 2) as tf.Tensor4D))
    const keys = append(cache.keys as tf.Tensor4D, step.kNew)
    cache.keys?.dispose()
    cache.keys = keys
    const values = append(cache.values as tf.Tensor4D, step.vNew)
    cache.values?.dispose()
    cache.values = values
    cache.positions = T + 1
    const result = kernel.decodeWithMask({ q: qNew, cache, position: T, scale, layer: 0 })
    const output = tf.reshape(result.z, [result.z.shape[1], result.z.shape[3]]) as tf.Tensor2D
    result.z.dispose()
    const [, nHeads, keyCount] = result.maskShape
    const sequence = {
      output,
      maskShape: [nHeads, keyCount] as const,
      sparsity: result.sparsity,
      headSparsity: result.headSparsity,
      extra: result.extra ?? {},
      timing: {
        estimationSeconds: afterPrefillSeconds + result.timing.estimationSeconds,
        attentionSeconds: result.timing.attentionSeconds,
        afterPrefillSeconds,
        steps: { ...result.timing.steps, afterPrefill: afterPrefillSeconds },
      },
    }
    // the kernel's mask is built on first read: forward the read
    Object.defineProperty(sequence, 'mask', { enumerable: true, get: () => result.mask })
    return sequence as typeof sequence & { readonly mask: Uint8Array }
  } finally {
    tf.dispose([q, k, v, qNew])
    cache.keys?.dispose()
    cache.values?.dispose()
    cache.kernelState?.dispose()
  }
}
