/**
 * The default attention kernel: dense causal softmax attention, with grouped-query attention,
 * for prefill (training and prompt processing) and single-token decode against a KV cache.
 * Implements the {@link AttentionKernel} contract (see `docs/architecture/attention-kernel.md`)
 * and lives beside it, below the models and the methods: `@attnlab/transformer` uses it by
 * default (and re-exports it), `@attnlab/sparse-attention`'s `dense()` runs it.
 *
 * Grouped-query attention without repeating keys: query head `h` uses key/value head
 * `floor(h / g)`, `g = nHeads / nKvHeads`, so the queries `[batch, nHeads, pos, dHead]` are
 * viewed as `[batch, nKvHeads, g * pos, dHead]` and multiplied by each key/value head once.
 * Transposes are explicit (`tf.transpose` + untransposed matmul), which is faster on wasm.
 *
 * The one dense kernel: when the model offers the packed projections
 * (`AttentionPrefillInput.packed`) and nothing needs the scores or pattern, the prefill runs the
 * fused `causalAttention` op (`ops/causal-attention.ts`: one kernel forward and backward when a
 * kernel provider is registered, the same composite otherwise) on them; otherwise it computes
 * scores, pattern and output with stock ops and calls the hooks.
 *
 * @module
 */
import * as tf from '@tensorflow/tfjs-core'
import {
  causalMask,
  causalPairs,
  type AttentionContext,
  type AttentionDecodeInput,
  type AttentionKernel,
  type AttentionPrefillInput,
  type AttentionResult,
  type PackedProjections,
} from './attention.ts'
import { ShapeError } from './errors.ts'
import { causalAttention } from './ops/causal-attention.ts'

function checkGroups(
  q: tf.Tensor4D,
  k: tf.Tensor4D,
  v: tf.Tensor4D,
  where: string,
): { batch: number; heads: number; kvHeads: number; group: number } {
  const [batch, heads, , dHead] = q.shape
  const [kBatch, kvHeads, , kDim] = k.shape
  if (
    kBatch !== batch ||
    kDim !== dHead ||
    v.shape[0] !== batch ||
    v.shape[1] !== kvHeads ||
    v.shape[2] !== k.shape[2]
  ) {
    throw new ShapeError(
      `${where}: q [${q.shape}], k [${k.shape}], v [${v.shape}] do not fit (expected q [batch, nHeads, pos, ` +
        'dHead], k [batch, nKvHeads, keys, dHead], v [batch, nKvHeads, keys, dValue])',
      { q: [...q.shape], k: [...k.shape], v: [...v.shape] },
    )
  }
  if (heads % kvHeads !== 0) {
    throw new ShapeError(`${where}: nHeads ${heads} is not a multiple of nKvHeads ${kvHeads}`, { heads, kvHeads })
  }
  return { batch, heads, kvHeads, group: heads / kvHeads }
}

/** scores -> hooks -> softmax -> hooks -> pattern @ v, with the group folded into the query axis. */
function attend(
  q: tf.Tensor4D,
  keys: tf.Tensor4D,
  values: tf.Tensor4D,
  scale: number,
  mask: tf.Tensor2D | null,
  context: AttentionContext,
): tf.Tensor4D {
  const [batch, heads, queries, dHead] = q.shape
  const kvHeads = keys.shape[1]
  const stored = keys.shape[2]
  const dValue = values.shape[3]
  const group = heads / kvHeads
  const grouped = tf.reshape(q, [batch, kvHeads, group * queries, dHead]) // [b, kvH, g*q, dHead]
  const keysT = tf.transpose(keys, [0, 1, 3, 2]) // [b, kvH, dHead, keys]
  let scores = tf.reshape(tf.matMul(grouped, keysT), [batch, heads, queries, stored]) as tf.Tensor4D // [b, H, q, keys]
  if (scale !== 1) scores = tf.mul(scores, scale)
  if (mask !== null) scores = tf.add(scores, mask) // masked entries -Infinity
  if (context.hooks.attnScores !== undefined) scores = context.hooks.attnScores(scores)
  // [b, H, q, keys] (attnlab's softmax kernel when registered: exact zeros)
  let pattern = tf.softmax(scores) as tf.Tensor4D
  if (context.hooks.pattern !== undefined) pattern = context.hooks.pattern(pattern)
  const groupedPattern = tf.reshape(pattern, [batch, kvHeads, group * queries, stored]) // [b, kvH, g*q, keys]
  // [b, H, q, dValue]
  return tf.reshape(tf.matMul(groupedPattern, values), [batch, heads, queries, dValue]) as tf.Tensor4D
}

/** The prefill on the packed projections: one fused attention op, `z` position-major. */
function fusedPrefill({ qkv, nHeads }: PackedProjections, scale: number): AttentionResult {
  const [batch, pos, width] = qkv.shape
  const dHead = width / (3 * nHeads)
  const zByPosition = causalAttention(qkv, nHeads, { scale }) // [batch, pos, nHeads * dHead]
  const pairs = batch * nHeads * causalPairs(pos, pos)
  return {
    // [batch, nHeads, pos, dHead], materialised only when read
    get z(): tf.Tensor4D {
      return tf.transpose(tf.reshape(zByPosition, [batch, pos, nHeads, dHead]), [0, 2, 1, 3])
    },
    zByPosition,
    computedPairs: pairs,
    totalPairs: pairs,
  }
}

/**
 * Dense causal attention (the reference every other kernel is compared with).
 *
 * - `prefill`: `z = softmax(scale * q k^T + causal mask) v` per head, `[batch, nHeads, pos, dValue]`.
 * - `decode`: the new token's queries against every cached key (the cache already holds the new
 *   token's key and value).
 *
 * Both call the `attnScores` / `pattern` hooks of the context (the pattern is materialised
 * whenever `context.needsPattern`) and report `computedPairs === totalPairs` (the causal pairs).
 *
 * @example
 * ```ts
 * const model = createTransformer(presetConfig('gpt'), { attention: denseAttention })
 * ```
 * @category Attention
 */
export const denseAttention: AttentionKernel = Object.freeze({
  name: 'dense',
  exactDense: true,
  prefill(input: AttentionPrefillInput, context: AttentionContext): AttentionResult {
    if (input.packed !== undefined && !context.needsPattern) return fusedPrefill(input.packed, input.scale)
    const { batch, heads } = checkGroups(input.q, input.k, input.v, 'denseAttention.prefill')
    const pos = input.q.shape[2]
    if (input.k.shape[2] !== pos) {
      throw new ShapeError(`denseAttention.prefill: q has ${pos} positions but k has ${input.k.shape[2]}`, {
        q: [...input.q.shape],
        k: [...input.k.shape],
      })
    }
    const z = tf.tidy(() => attend(input.q, input.k, input.v, input.scale, causalMask(pos), context))
    const pairs = batch * heads * causalPairs(pos, pos)
    return { z, computedPairs: pairs, totalPairs: pairs }
  },
  decode(input: AttentionDecodeInput, context: AttentionContext): AttentionResult {
    const keys = input.cache.keys
    const values = input.cache.values
    if (keys === null || values === null) {
      throw new ShapeError('denseAttention.decode: the KV cache is empty (run a prefill first)')
    }
    const { batch, heads } = checkGroups(input.q, keys, values, 'denseAttention.decode')
    if (input.q.shape[2] !== 1)
      throw new ShapeError(`denseAttention.decode: expected one query position, got ${input.q.shape[2]}`)
    const z = tf.tidy(() => attend(input.q, keys, values, input.scale, null, context))
    const stored = keys.shape[2]
    return { z, computedPairs: batch * heads * stored, totalPairs: batch * heads * (input.position + 1) }
  },
})
