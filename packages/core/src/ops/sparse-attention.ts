/**
 * Softmax attention restricted to key spans per query tile, with an online softmax over key
 * chunks (FlashAttention, Dao et al. 2022, arXiv 2205.14135, Algorithm 1): the kernel behind
 * `@attnlab/sparse-attention`'s methods (block-sparse and Vertical-Slash prefill, Quest and
 * SnapKV decode) and their dense reference. Memory linear in the sequence length: no `T x T`
 * buffer is ever allocated.
 *
 * @module
 */
import * as tf from '@tensorflow/tfjs-core'
import { ConfigError, InvalidArgumentError, ShapeError } from '../errors.ts'
import { activeKernels } from '../kernels/active.ts'
import { ATTNLAB_KERNELS } from '../kernels/names.ts'
import type { KernelProviderName, SparseAttentionShape } from '../kernels/provider.ts'
import { sparseAttentionJs } from '../kernels/sparse-attention-js.ts'
import { readValuesSync } from '../sync-read.ts'
import { checkTensor, hasKernel } from './support.ts'

/**
 * Which keys each query tile reads: the compact index of {@link sparseAttention}.
 *
 * @category Ops
 */
export interface SparseAttentionIndex {
  /** Query rows per tile (>= 1); tile `t` is rows `[t * tileRows, (t + 1) * tileRows)`. */
  readonly tileRows: number
  /**
   * `[batch * nHeads * tiles + 1]`, non-decreasing from 0: tile `u = (b * nHeads + h) * tiles + t`
   * reads spans `tileStarts[u] .. tileStarts[u + 1] - 1` (`tiles = ceil(rows / tileRows)`).
   */
  readonly tileStarts: Int32Array
  /** `[2 * spanCount]`: half-open key ranges `[spans[2 s], spans[2 s + 1])`, ascending and disjoint per tile. */
  readonly spans: Int32Array
}

/**
 * Options of {@link sparseAttention}.
 *
 * @category Ops
 */
export interface SparseAttentionOptions {
  /** Multiplier of `q . k` (e.g. `1 / sqrt(dHead)`). */
  readonly scale: number
  /**
   * Row `i` reads only keys `<= i + causalOffset` of its spans (default 0: the causal mask of a
   * prefill; pass the key count for a decode step over cache slots).
   */
  readonly causalOffset?: number
}

/**
 * Which engine {@link sparseAttention} runs on the active backend: a registered provider
 * (`native`, `wasm` or `js`), or `'readback'` (no attnlab kernels: the plain-JavaScript kernel on
 * values read back from the backend).
 *
 * @returns the provider name or `'readback'`
 * @category Ops
 */
export function sparseAttentionKernelMode(): KernelProviderName | 'readback' {
  return hasKernel(ATTNLAB_KERNELS.sparseAttention) ? (activeKernels()?.provider.name ?? 'js') : 'readback'
}

/** Validates the index against the sizes; returns the span count. */
function checkIndex(index: SparseAttentionIndex, heads: number, rows: number, keys: number): void {
  const { tileRows, tileStarts, spans } = index
  if (!(Number.isInteger(tileRows) && tileRows >= 1))
    throw new ConfigError('tileRows', `must be an integer >= 1, got ${tileRows}`, { value: tileRows })
  const tiles = Math.ceil(rows / tileRows)
  if (tileStarts.length !== heads * tiles + 1) {
    throw new ShapeError(
      `sparseAttention: tileStarts has ${tileStarts.length} entries, expected heads * tiles + 1 = ` +
        `${heads} * ${tiles} + 1 = ${heads * tiles + 1}`,
      { length: tileStarts.length, expected: heads * tiles + 1 },
    )
  }
  if (tileStarts[0] !== 0)
    throw new InvalidArgumentError(`sparseAttention: tileStarts[0] must be 0, got ${tileStarts[0]}`)
  const total = tileStarts[heads * tiles]!
  if (spans.length !== 2 * total) {
    throw new ShapeError(`sparseAttention: spans has ${spans.length} entries, tileStarts names ${total} spans`, {
      length: spans.length,
      spans: total,
    })
  }
  for (let u = 0; u < heads * tiles; u++) {
    const s0 = tileStarts[u]!
    const s1 = tileStarts[u + 1]!
    if (s1 < s0) throw new InvalidArgumentError(`sparseAttention: tileStarts decreases at tile ${u} (${s0} -> ${s1})`)
    let previous = 0
    for (let s = s0; s < s1; s++) {
      const start = spans[2 * s]!
      const stop = spans[2 * s + 1]!
      if (!(start >= previous && stop >= start && stop <= keys)) {
        throw new InvalidArgumentError(
          `sparseAttention: span ${s} [${start}, ${stop}) of tile ${u} is not ascending, disjoint and within ` +
            `[0, ${keys}]`,
          { tile: u, span: s, start, stop, keys },
        )
      }
      previous = stop
    }
  }
}

/**
 * Exact softmax attention over the keys an index names: for query row `i` of head `(b, h)` in
 * tile `t`, `z_i = sum_j softmax_j(scale q_i . k_j) v_j` over the keys `j` of the tile's spans with
 * `j <= i + causalOffset` (a row with no such key gets zeros). Grouped-query attention: query head
 * `h` reads KV head `floor(h / (nHeads / nKvHeads))`. Runs the registered attnlab kernel of the
 * active backend (native C++ with threads, WebAssembly SIMD, or JavaScript), else the JavaScript
 * kernel on values read back (see {@link sparseAttentionKernelMode}); every engine uses an online
 * softmax over key chunks, so memory stays linear in the key count. Not differentiable.
 *
 * @param q - queries, `[batch, nHeads, rows, dHead]` float32
 * @param k - keys, `[batch, nKvHeads, keys, dHead]` float32
 * @param v - values, `[batch, nKvHeads, keys, dValue]` float32
 * @param index - the spans each query tile reads ({@link SparseAttentionIndex})
 * @param options - scale and causal offset
 * @returns `z`, `[batch, nHeads, rows, dValue]`
 * @throws `ShapeError` (`@attnlab/core`) for wrong ranks, dtypes or mismatched sizes, or an index of
 *   the wrong length; `InvalidArgumentError` for spans out of order or out of range; `ConfigError`
 *   for a non-finite scale, a negative causal offset or a bad `tileRows`; `UnsupportedError` on a
 *   backend without synchronous reads (`webgpu`: no attnlab kernel there, and the JavaScript one reads back)
 * @example
 * ```ts
 * // dense causal attention, one span per tile of 64 rows
 * const z = sparseAttention(q, k, v, index, { scale: 1 / Math.sqrt(dHead) })
 * ```
 * @category Ops
 */
export function sparseAttention(
  q: tf.Tensor4D,
  k: tf.Tensor4D,
  v: tf.Tensor4D,
  index: SparseAttentionIndex,
  options: SparseAttentionOptions,
): tf.Tensor4D {
  checkTensor(q, 'q', 4, 'float32', 'sparseAttention')
  checkTensor(k, 'k', 4, 'float32', 'sparseAttention')
  checkTensor(v, 'v', 4, 'float32', 'sparseAttention')
  const [batch, nHeads, rows, dHead] = q.shape
  const [kb, nKvHeads, keys, kd] = k.shape
  const [vb, vh, vKeys, dValue] = v.shape
  if (kb !== batch || vb !== batch || kd !== dHead || vh !== nKvHeads || vKeys !== keys) {
    throw new ShapeError(
      `sparseAttention: q [${q.shape.join(', ')}], k [${k.shape.join(', ')}] and v [${v.shape.join(', ')}] must be ` +
        '[batch, nHeads, rows, dHead], [batch, nKvHeads, keys, dHead] and [batch, nKvHeads, keys, dValue]',
      { q: [...q.shape], k: [...k.shape], v: [...v.shape] },
    )
  }
  if (nKvHeads < 1 || nHeads % nKvHeads !== 0) {
    throw new ShapeError(`sparseAttention: nHeads (${nHeads}) must be a multiple of nKvHeads (${nKvHeads})`, {
      nHeads,
      nKvHeads,
    })
  }
  const scale = options.scale
  if (!Number.isFinite(scale)) throw new ConfigError('scale', `must be finite, got ${scale}`, { value: scale })
  const causalOffset = options.causalOffset ?? 0
  if (!(Number.isInteger(causalOffset) && causalOffset >= 0 && causalOffset < 2 ** 31)) {
    throw new ConfigError('causalOffset', `must be an integer in [0, 2^31), got ${causalOffset}`, {
      value: causalOffset,
    })
  }
  const heads = batch * nHeads
  checkIndex(index, heads, rows, keys)
  const shape: SparseAttentionShape = {
    heads,
    group: nHeads / nKvHeads,
    rows,
    keys,
    dHead,
    dValue,
    tileRows: index.tileRows,
    scale,
    causalOffset,
  }
  if (heads * rows * dValue === 0) return tf.zeros([batch, nHeads, rows, dValue])
  if (hasKernel(ATTNLAB_KERNELS.sparseAttention)) {
    // At least one span entry pair, so that no index tensor is empty.
    const spans = index.spans.length > 0 ? index.spans : new Int32Array(2)
    return tf.tidy(() => {
      const inputs = {
        q,
        k,
        v,
        tileStarts: tf.tensor1d(index.tileStarts, 'int32'),
        spans: tf.tensor1d(spans, 'int32'),
      }
      const z = tf
        .engine()
        .runKernel(
          ATTNLAB_KERNELS.sparseAttention,
          inputs as unknown as tf.NamedTensorMap,
          shape as unknown as tf.NamedAttrMap,
        ) as tf.Tensor
      return tf.reshape(z, [batch, nHeads, rows, dValue]) as tf.Tensor4D
    })
  }
  const out = new Float32Array(heads * rows * dValue)
  const op = 'sparseAttention (the JavaScript kernel)'
  sparseAttentionJs(
    readValuesSync(q, op) as Float32Array,
    readValuesSync(k, op) as Float32Array,
    readValuesSync(v, op) as Float32Array,
    out,
    index.tileStarts,
    index.spans,
    shape,
  )
  return tf.tensor4d(out, [batch, nHeads, rows, dValue])
}
