/**
 * Dense causal attention, the reference every sparse method is compared with: `@attnlab/core`'s
 * `denseAttention` (attnlab's one dense kernel) with this package's accounting (the mask of every
 * causal pair, both sparsities 0).
 *
 * @module
 */
import { defineKernel, type SparseAttentionKernel } from './kernel.ts'

/**
 * Dense attention has no parameters.
 *
 * @category Kernels
 */
export type DenseConfig = Readonly<Record<string, never>>

/**
 * The dense kernel: causal softmax attention over every pair in prefill and over the whole cache
 * in decode, computed by `@attnlab/core`'s `denseAttention` (the same numbers as a model's default
 * attention). Both sparsities are 0.
 *
 * @returns a kernel named `'dense'`
 * @example
 * ```ts
 * const reference = dense().prefillWithMask(input)
 * ```
 * @category Kernels
 */
export function dense(): SparseAttentionKernel<DenseConfig> {
  return defineKernel<DenseConfig>({ method: 'dense', phases: [], config: {} })
}
