/**
 * Softmax attention restricted to a boolean mask of computed query-key pairs, as tfjs ops: the
 * reference every method's output is tested against, and the path a prefill takes when hooks need
 * the dense scores or pattern (otherwise prefill runs tile by tile, `tiled-attention.ts`). As the
 * study's kernels: exact softmax over the selected cells, nothing outside them.
 *
 * @module
 */
import * as tf from '@tensorflow/tfjs-core'
import { assertShape, type AttentionContext, InvalidArgumentError, requireSyncReads, ShapeError } from '@attnlab/core'
import { kernelsActive } from '@attnlab/core/kernels'

/**
 * Repeats key/value heads so that query head `h` sees KV head `floor(h / (nHeads / nKvHeads))`.
 *
 * @param x - keys or values, `[batch, nKvHeads, pos, d]`
 * @param nHeads - number of query heads (a multiple of `nKvHeads`)
 * @returns `[batch, nHeads, pos, d]` (the input itself when `nHeads === nKvHeads`)
 * @throws `ShapeError` (`@attnlab/core`) if `nHeads` is not a multiple of `nKvHeads`
 */
export function repeatKvHeads(x: tf.Tensor4D, nHeads: number): tf.Tensor4D {
  const nKvHeads = x.shape[1]
  if (nKvHeads === nHeads) return x
  if (nKvHeads <= 0 || nHeads % nKvHeads !== 0) {
    throw new ShapeError(
      `nHeads (${nHeads}) must be a multiple of nKvHeads (${nKvHeads}) for grouped-query attention`,
      {
        nHeads,
        nKvHeads,
      },
    )
  }
  const group = nHeads / nKvHeads
  const index = tf.tensor1d(
    Array.from({ length: nHeads }, (_, h) => Math.floor(h / group)),
    'int32',
  )
  const out = tf.gather(x, index, 1) as tf.Tensor4D
  index.dispose()
  return out
}

/**
 * Softmax attention where only the pairs marked in `allowed` are computed: scores
 * `scale * q . k` (masked entries `-Infinity`), softmax over keys, weighted sum of values.
 * Grouped-query attention: query head `h` reads KV head `floor(h / (nHeads / nKvHeads))`.
 * Calls `context.hooks.attnScores` / `pattern` (TransformerLens `hook_attn_scores` /
 * `hook_pattern`) on the `[batch, nHeads, queryPos, keyPos]` tensors when given; a returned
 * tensor replaces the original.
 *
 * @param q - queries, `[batch, nHeads, queryPos, dHead]`
 * @param k - keys, `[batch, nKvHeads, keyPos, dHead]`
 * @param v - values, `[batch, nKvHeads, keyPos, dValue]`
 * @param allowed - 1 where the pair is computed, `[batch, nHeads, queryPos, keyPos]` row-major
 * @param scale - multiplier of `q . k` (usually `1 / sqrt(dHead)`)
 * @param context - hooks to call (optional)
 * @returns the output `z`, `[batch, nHeads, queryPos, dValue]` (a new tensor owned by the caller)
 * @throws `ShapeError` (`@attnlab/core`) on inconsistent shapes or a mask of the wrong length;
 *   `InvalidArgumentError` (`@attnlab/core`) if a query row has no computed key (softmax of nothing)
 * @example
 * ```ts
 * const z = attendWithMask(q, k, v, causalPairMask(1, 2, 4), 1 / Math.sqrt(8))
 * ```
 */
export function attendWithMask(
  q: tf.Tensor4D,
  k: tf.Tensor4D,
  v: tf.Tensor4D,
  allowed: Uint8Array,
  scale: number,
  context?: AttentionContext,
): tf.Tensor4D {
  const dims = assertShape(q, ['batch', 'nHeads', 'queryPos', 'dHead'], 'q')
  assertShape(k, ['batch', 'nKvHeads', 'keyPos', 'dHead'], 'k', dims)
  assertShape(v, ['batch', 'nKvHeads', 'keyPos', 'dValue'], 'v', dims)
  const batch = dims.batch as number
  const nHeads = dims.nHeads as number
  const queryPos = dims.queryPos as number
  const keyPos = dims.keyPos as number
  const size = batch * nHeads * queryPos * keyPos
  if (allowed.length !== size) {
    throw new ShapeError(
      `mask has ${allowed.length} entries but [batch, nHeads, queryPos, keyPos] = ` +
        `[${batch}, ${nHeads}, ${queryPos}, ${keyPos}] needs ${size}`,
      { length: allowed.length, expected: size },
    )
  }
  const bias = new Float32Array(size)
  for (let row = 0; row < batch * nHeads * queryPos; row++) {
    let any = false
    const base = row * keyPos
    for (let j = 0; j < keyPos; j++) {
      if (allowed[base + j]) any = true
      else bias[base + j] = -Infinity
    }
    if (!any && keyPos > 0) {
      const i = row % queryPos
      const h = Math.floor(row / queryPos) % nHeads
      const b = Math.floor(row / (queryPos * nHeads))
      throw new InvalidArgumentError(
        `mask row (batch ${b}, head ${h}, query ${i}) computes no key: softmax over an empty set`,
        {
          batch: b,
          head: h,
          query: i,
        },
      )
    }
  }
  return tf.tidy(() => {
    const kRep = repeatKvHeads(k, nHeads) // [b, H, Tk, d]
    const vRep = repeatKvHeads(v, nHeads) // [b, H, Tk, dv]
    // scale the queries (pos x d) rather than the scores (pos x pos): one pass less over the big tensor
    let scores = tf.add(
      tf.matMul(tf.mul(q, scale), kRep, false, true),
      tf.tensor4d(bias, [batch, nHeads, queryPos, keyPos]),
    ) as tf.Tensor4D
    const hooks = context?.hooks
    if (hooks?.attnScores) scores = hooks.attnScores(scores)
    let pattern = tf.softmax(scores, -1) as tf.Tensor4D // [b, H, Tq, Tk]
    if (hooks?.pattern) pattern = hooks.pattern(pattern)
    return tf.matMul(pattern, vRep) as tf.Tensor4D // [b, H, Tq, dv]
  })
}

/**
 * Probabilities of the last `window` queries over all keys, with the causal mask applied in the
 * trailing `window x window` corner (query at absolute position `T - window + i` sees keys
 * `<= T - window + i`): the importance estimate shared by Vertical-Slash, FlexPrefill, SnapKV and
 * Ada-SnapKV ([v2] A.1.2, A.1.4). Computed in float32 with tfjs ops and read back.
 *
 * @param q - queries, `[batch, nHeads, T, dHead]`
 * @param k - keys, `[batch, nKvHeads, T, dHead]`
 * @param window - number of trailing queries, `1..T`
 * @param scale - multiplier of `q . k`
 * @param op - the method estimating, named in the error on a backend without synchronous reads
 * @returns softmax probabilities, `[batch, nHeads, window, T]` row-major
 * @throws `UnsupportedError` (`@attnlab/core`) on `webgpu` (the result is read back synchronously), naming `op`
 */
export function lastWindowProbabilities(
  q: tf.Tensor4D,
  k: tf.Tensor4D,
  window: number,
  scale: number,
  op = 'the last-window estimate',
): Float32Array {
  requireSyncReads(op)
  const [batch, nHeads, length, dHead] = q.shape
  const bias = new Float32Array(window * length)
  for (let i = 0; i < window; i++) {
    const position = length - window + i
    for (let j = position + 1; j < length; j++) bias[i * length + j] = -Infinity
  }
  const nKvHeads = k.shape[1]
  const group = nHeads / nKvHeads
  const probabilities = tf.tidy(() => {
    const qWindow = tf.slice(q, [0, 0, length - window, 0], [batch, nHeads, window, dHead])
    // The query heads of a GQA group side by side ([b, Hkv, group * W, d]): no repeated keys.
    const qGroups = tf.reshape(tf.mul(qWindow, scale), [batch, nKvHeads, group * window, dHead])
    // With attnlab kernels the transposed matmul is one gemm; on stock tfjs-wasm the batched
    // transposed form is the slow one, so the keys are transposed explicitly there.
    const product = kernelsActive()
      ? tf.matMul(qGroups, k, false, true)
      : tf.matMul(qGroups, tf.transpose(k, [0, 1, 3, 2]))
    const scores = tf.add(tf.reshape(product, [batch, nHeads, window, length]), tf.tensor2d(bias, [window, length]))
    return tf.softmax(scores, -1)
  })
  const data = probabilities.dataSync() as Float32Array
  probabilities.dispose()
  return data
}

/**
 * The causal pairs as a mask of computed pairs: 1 where key `j <= ` query `i`, for every batch
 * row and head; the starting point of every prefill plan (a method clears the pairs it skips).
 * The 0/1 form of `@attnlab/core`'s additive `causalMask` (0 / -Infinity), which the tensor
 * kernels add to their scores; this one is what {@link attendWithMask} and the planners read.
 *
 * @param batch - batch size
 * @param nHeads - query heads
 * @param length - sequence length `T`
 * @returns `[batch, nHeads, T, T]` row-major, 1 = computed
 * @category Attention
 */
export function causalPairMask(batch: number, nHeads: number, length: number): Uint8Array {
  const mask = new Uint8Array(batch * nHeads * length * length)
  for (let row = 0; row < batch * nHeads; row++) {
    const base = row * length * length
    for (let i = 0; i < length; i++) mask.fill(1, base + i * length, base + i * length + i + 1)
  }
  return mask
}
