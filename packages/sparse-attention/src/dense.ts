/**
 * Dense causal attention, the reference every sparse method is compared with: every causal pair,
 * computed over tiles of 256 query rows (memory linear in `T`), with this package's accounting
 * (both sparsities 0); with hooks on the scores or pattern, `@attnlab/core`'s `denseAttention`.
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
 * in decode. Prefill runs over tiles of 256 query rows (`attendByTiles`, never a `[nHeads, T, T]`
 * tensor), or through `@attnlab/core`'s `denseAttention` when hooks need the dense scores or
 * pattern; decode runs `denseAttention`. The same numbers as a model's default attention up to
 * float32 rounding (FlashAttention's tiling, Dao et al. 2022, arXiv 2205.14135, section 3.1). Both
 * sparsities are 0.
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
