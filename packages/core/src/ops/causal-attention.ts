/**
 * Multi-head (causal) scaled dot-product attention on a fused QKV projection (Vaswani et al.
 * 2017, eq. 1), without per-head loops.
 *
 * @module
 */
import * as tf from '@tensorflow/tfjs-core'
import { causalMask } from '../attention.ts'
import { ConfigError, ShapeError } from '../errors.ts'
import { ATTNLAB_KERNELS } from '../kernels/names.ts'
import { checkTensor, hasKernel, runFusedKernel, withGradient } from './support.ts'

/** Options of {@link causalAttention}. @category Ops */
export interface CausalAttentionOptions {
  /** Score multiplier (default `1 / sqrt(dHead)`). */
  readonly scale?: number
  /** Mask keys after the query (default true). */
  readonly causal?: boolean
}

function compositeAttention(nHeads: number, scale: number, causal: boolean): (qkv: tf.Tensor3D) => tf.Tensor3D {
  return withGradient((save, qkv: tf.Tensor3D) => {
    const [batch, pos, width] = qkv.shape
    const dHead = width / 3 / nHeads
    // [batch, nHeads, pos, dHead]
    const heads = (t: tf.Tensor): tf.Tensor4D => tf.transpose(tf.reshape(t, [batch, pos, nHeads, dHead]), [0, 2, 1, 3])
    const [q, k, v] = tf.split(qkv, 3, 2).map(heads) as [tf.Tensor4D, tf.Tensor4D, tf.Tensor4D]
    // [batch, nHeads, pos, pos]
    let scores: tf.Tensor = tf.mul(tf.matMul(q, tf.transpose(k, [0, 1, 3, 2]) as tf.Tensor4D), scale)
    if (causal) scores = tf.add(scores, causalMask(pos))
    const pattern = tf.softmax(scores) as tf.Tensor4D // [batch, nHeads, pos, pos]
    const z = tf.matMul(pattern, v) // [batch, nHeads, pos, dHead]
    save([q, k, v, pattern])
    return {
      value: tf.reshape(tf.transpose(z, [0, 2, 1, 3]), [batch, pos, nHeads * dHead]) as tf.Tensor3D,
      gradFunc: (dy, saved) => {
        const [qs, ks, vs, p] = saved as [tf.Tensor4D, tf.Tensor4D, tf.Tensor4D, tf.Tensor4D]
        const swap = (t: tf.Tensor4D): tf.Tensor4D => tf.transpose(t, [0, 1, 3, 2])
        const dz = heads(dy) // [batch, nHeads, pos, dHead]
        const dv = tf.matMul(swap(p), dz) as tf.Tensor4D // P^T dZ
        const dp = tf.matMul(dz, swap(vs)) as tf.Tensor4D // dZ V^T, [batch, nHeads, pos, pos]
        // softmax backward
        const ds = tf.mul(tf.mul(p, tf.sub(dp, tf.sum(tf.mul(p, dp), -1, true))), scale) as tf.Tensor4D
        const dq = tf.matMul(ds, ks) as tf.Tensor4D // [batch, nHeads, pos, dHead]
        const dk = tf.matMul(swap(ds), qs) as tf.Tensor4D
        const columns = (t: tf.Tensor4D): tf.Tensor =>
          tf.reshape(tf.transpose(t, [0, 2, 1, 3]), [batch, pos, nHeads * dHead])
        return [tf.concat([columns(dq), columns(dk), columns(dv)], 2)]
      },
    }
  })
}

/**
 * Multi-head attention on a fused projection `qkv` (column blocks q | k | v, heads contiguous
 * inside each, as `x @ [W_Q | W_K | W_V]` gives): `z = softmax(scale q k^T + mask) v` per head,
 * heads concatenated. A fused kernel (scores, mask, softmax, weighted sum, and one backward
 * kernel) when attnlab kernels are registered, else a composite of batched matmuls with a
 * hand-written gradient. Masked probabilities are exactly 0.
 *
 * @param qkv - `[batch, pos, 3 * nHeads * dHead]` float32
 * @param nHeads - number of heads (divides `qkv.shape[2] / 3`)
 * @param options - scale (default `1/sqrt(dHead)`) and causal masking (default on)
 * @returns `z`, `[batch, pos, nHeads * dHead]` (ready for `W_O`)
 * @throws `ShapeError` (from `@attnlab/core`) for a wrong rank, dtype or width
 * @throws `ConfigError` (from `@attnlab/core`) for `nHeads` not a positive integer or a non-finite scale
 * @example
 * ```ts
 * const qkv = tf.reshape(linear(x, wQkv, bQkv), [batch, pos, 3 * dModel])
 * const z = causalAttention(qkv, nHeads) // [batch, pos, dModel]
 * ```
 * @category Ops
 */
export function causalAttention(qkv: tf.Tensor3D, nHeads: number, options: CausalAttentionOptions = {}): tf.Tensor3D {
  checkTensor(qkv, 'qkv', 3, 'float32', 'causalAttention')
  if (!(Number.isInteger(nHeads) && nHeads > 0))
    throw new ConfigError('nHeads', `${nHeads} must be a positive integer`, { value: nHeads })
  const [batch, pos, width] = qkv.shape
  if (width % (3 * nHeads) !== 0 || width === 0) {
    throw new ShapeError(
      `causalAttention: qkv width ${width} must be 3 * nHeads * dHead with nHeads ${nHeads} and dHead >= 1`,
      { width, nHeads },
    )
  }
  const dHead = width / 3 / nHeads
  const scale = options.scale ?? 1 / Math.sqrt(dHead)
  if (!Number.isFinite(scale)) throw new ConfigError('scale', `${scale} must be finite`, { value: scale })
  const causal = options.causal ?? true
  if (batch === 0 || pos === 0) return tf.zeros([batch, pos, nHeads * dHead])
  if (hasKernel(ATTNLAB_KERNELS.attention)) {
    return runFusedKernel(ATTNLAB_KERNELS.attention, { qkv }, { nHeads, scale, causal }) as tf.Tensor3D
  }
  return compositeAttention(nHeads, scale, causal)(qkv)
}
