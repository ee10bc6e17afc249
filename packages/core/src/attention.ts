/**
 * The attention-kernel contract: how a transformer layer hands its attention computation to a
 * pluggable method (dense by default; the training-free sparse methods of
 * `@attnlab/sparse-attention` plug in here). Defined in core so that models and methods depend
 * on the contract, not on each other. See
 * [docs/architecture/attention-kernel.md](../../../docs/architecture/attention-kernel.md).
 *
 * Conventions (all kernels):
 * - Queries and keys arrive after any positional transform (RoPE), per head, with grouped-query
 *   attention: query head `h` reads key/value head `floor(h / (nHeads / nKvHeads))`.
 * - Attention is causal: query at position `i` may see keys at positions `<= i`.
 * - Scores are `scale * q . k` (`scale` is usually `1/sqrt(dHead)`; the minimal model uses 1).
 * - A kernel computes only inside `tf.tidy` scopes of the caller: it returns new tensors and
 *   must not keep references to its inputs, except through the KV cache it is given.
 *
 * @module
 */
import * as tf from '@tensorflow/tfjs-core'
import type { Tensor3D, Tensor4D } from '@tensorflow/tfjs-core'

/**
 * Inputs of a prefill: attention of every prompt position over the prompt (also the training
 * forward pass).
 *
 * @category Attention
 */
export interface AttentionPrefillInput {
  /** Queries, `[batch, nHeads, pos, dHead]`. */
  readonly q: Tensor4D
  /** Keys, `[batch, nKvHeads, pos, dHead]`. */
  readonly k: Tensor4D
  /** Values, `[batch, nKvHeads, pos, dValue]` (`dValue` is `dHead` except in the minimal model). */
  readonly v: Tensor4D
  /** Multiplier of `q . k` before the softmax. */
  readonly scale: number
  /** Index of the layer (for per-layer budgets and reports). */
  readonly layer: number
  /**
   * The one tensor `q`, `k` and `v` are slices of, when the model has it: offered only when they
   * are plain projections (no hook replaced them, no rotary embedding, `nKvHeads === nHeads`) and
   * the model reads nothing per head from this call (no head mask, `hook_z` or `hook_result`).
   * A kernel may compute from it instead of `q`, `k`, `v` (which the model then never
   * materialises) and return {@link AttentionResult.zByPosition}; other kernels ignore it.
   */
  readonly packed?: PackedProjections
}

/**
 * The queries, keys and values of a prefill as the model's one projection produced them.
 *
 * @category Attention
 */
export interface PackedProjections {
  /** `[batch, pos, 3 * nHeads * dHead]`: `[q | k | v]`, each third `[nHeads, dHead]` per position. */
  readonly qkv: Tensor3D
  /** Number of heads (queries, keys and values alike). */
  readonly nHeads: number
}

/**
 * Inputs of one decode step: the newest token's queries against the layer's KV cache, which
 * already holds the newest token's key and value.
 *
 * @category Attention
 */
export interface AttentionDecodeInput {
  /** Queries of the new token, `[batch, nHeads, 1, dHead]`. */
  readonly q: Tensor4D
  /** The layer's cache (the new token is already appended). */
  readonly cache: LayerKVCache
  /** Absolute position of the new token (0-based). */
  readonly position: number
  /** Multiplier of `q . k` before the softmax. */
  readonly scale: number
  /** Index of the layer. */
  readonly layer: number
}

/**
 * Hooks a kernel calls on the intermediate activations it materialises, so that
 * `blocks.{l}.attn.hook_attn_scores` and `hook_pattern` keep TransformerLens semantics. A hook
 * may return a replacement tensor of the same shape. Kernels that never materialise a dense
 * `[batch, nHeads, queryPos, keyPos]` matrix call them only when {@link AttentionContext.needsPattern}.
 *
 * @category Attention
 */
export interface AttentionHooks {
  /** Pre-softmax scores, masked entries `-Infinity`: `[batch, nHeads, queryPos, keyPos]`. */
  readonly attnScores?: (scores: Tensor4D) => Tensor4D
  /** Post-softmax probabilities: `[batch, nHeads, queryPos, keyPos]`. */
  readonly pattern?: (pattern: Tensor4D) => Tensor4D
}

/**
 * What the caller needs from a kernel call besides the output.
 *
 * @category Attention
 */
export interface AttentionContext {
  /** Call these on the scores/pattern if materialised (see {@link AttentionHooks}). */
  readonly hooks: AttentionHooks
  /**
   * True when a hook or cache wants the dense scores/pattern: the kernel must then materialise
   * them (as `[batch, nHeads, queryPos, keyPos]`, zero probability outside its mask) and call
   * the hooks.
   */
  readonly needsPattern: boolean
}

/**
 * Output of a kernel call, with its accounting.
 *
 * @category Attention
 */
export interface AttentionResult {
  /** Attention output per head, `[batch, nHeads, queryPos, dValue]` (TransformerLens `hook_z`). */
  readonly z: Tensor4D
  /**
   * The same output position-major, `[batch, queryPos, nHeads * dValue]`, when the kernel
   * computed it that way (from {@link AttentionPrefillInput.packed}); the model then reads this
   * and `z` is only materialised if read.
   */
  readonly zByPosition?: Tensor3D
  /** Query-key pairs whose score was actually computed, summed over batch and heads. */
  readonly computedPairs: number
  /** Causal query-key pairs a dense computation would compute, summed over batch and heads. */
  readonly totalPairs: number
  /** Method-specific numbers (e.g. the sparsity a paper reports). */
  readonly extra?: Readonly<Record<string, number>>
}

/**
 * One layer's key/value cache during generation. The model creates it, appends each new token's
 * key and value (concatenating on the position axis), and disposes it. Kernels may read it,
 * replace `keys`/`values` with a compacted version (eviction), and keep their own state in
 * `kernelState` (disposed with the cache).
 *
 * @category Attention
 */
export interface LayerKVCache {
  /** Cached keys, `[batch, nKvHeads, stored, dHead]`, or null before the first token. Kept (not tidied). */
  keys: Tensor4D | null
  /** Cached values, `[batch, nKvHeads, stored, dValue]`, or null. Kept. */
  values: Tensor4D | null
  /** Tokens seen so far (prompt + generated); `>= stored` when a kernel evicted entries. */
  positions: number
  /** Length of the prompt that the prefill processed. */
  promptLength: number
  /** Kernel-owned state; its tensors must be kept, and `dispose` is called with the cache's. */
  kernelState: KernelState | null
}

/**
 * State a kernel attaches to a {@link LayerKVCache}.
 *
 * @category Attention
 */
export interface KernelState {
  /** Frees the state's tensors. */
  dispose(): void
  readonly [key: string]: unknown
}

/**
 * A pluggable attention computation.
 *
 * @example
 * ```ts
 * const model = createModel(config, { attention: myKernel })
 * ```
 * @category Attention
 */
export interface AttentionKernel {
  /** Name for reports, e.g. `'dense'`, `'quest'`. */
  readonly name: string
  /**
   * True when `prefill` and `decode` compute exactly dense causal softmax attention, with no
   * state and no accounting of their own (the default `denseAttention`). A model may then compute
   * the same function in a structured way instead of calling the kernel (the minimal model's
   * one-hot path). Leave it unset for any other kernel.
   */
  readonly exactDense?: boolean
  /**
   * Causal attention of all positions of the input over themselves.
   *
   * @throws a typed attnlab error if the method's parameters do not fit the input (e.g. a
   *   budget larger than the prompt allows)
   */
  prefill(input: AttentionPrefillInput, context: AttentionContext): AttentionResult
  /**
   * Called once after a generation prefill stored the prompt's keys/values in `cache`; eviction
   * methods (SnapKV) select what to keep here. Optional.
   */
  afterPrefill?(input: AttentionPrefillInput, cache: LayerKVCache): void
  /** Attention of one new token over the cache. */
  decode(input: AttentionDecodeInput, context: AttentionContext): AttentionResult
}

/**
 * Number of causal query-key pairs for `queries` queries at the end of `keys` positions:
 * `sum_{i} (keys - queries + i + 1)`. For a fresh prefill (`queries === keys = n`) this is
 * `n (n + 1) / 2`.
 *
 * @category Attention
 */
export function causalPairs(queries: number, keys: number): number {
  return queries * (keys - queries) + (queries * (queries + 1)) / 2
}

const maskCache = new Map<number, Float32Array>()

/**
 * The additive causal mask `[pos, pos]`: 0 where key `j <= i`, `-Infinity` above the diagonal,
 * added to attention scores before the softmax (Vaswani et al. 2017, section 3.2.3). The one
 * causal mask of attnlab: `denseAttention` and the composite of the fused `causalAttention` op
 * (`@attnlab/core/kernels`) use it (the mask-based kernels of `@attnlab/sparse-attention` select
 * pairs with its 0/1 form, `causalPairMask`). Values are cached per length up to 1024.
 *
 * @param pos - sequence length (positions)
 * @returns a new tensor (caller disposes)
 * @example
 * ```ts
 * causalMask(3).dataSync() // [0, -Infinity, -Infinity, 0, 0, -Infinity, 0, 0, 0]
 * ```
 * @category Attention
 */
export function causalMask(pos: number): tf.Tensor2D {
  let values = maskCache.get(pos)
  if (values === undefined) {
    values = new Float32Array(pos * pos)
    for (let i = 0; i < pos; i++) for (let j = i + 1; j < pos; j++) values[i * pos + j] = -Infinity
    if (pos <= 1024) maskCache.set(pos, values)
  }
  return tf.tensor2d(values, [pos, pos])
}
