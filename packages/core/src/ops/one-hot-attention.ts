/**
 * The minimal model's attention layer on one-hot inputs (Yüksel et al., arXiv 2602.19143: one
 * attention-only layer, input `x_t = [onehot(token_t); onehot(t)]`, key = input, per-head full
 * `W_Q^h`, `W_V^h`, logits = the first `dVocab` coordinates of `sum_h A_h X W_V^h`).
 *
 * @module
 */
import * as tf from '@tensorflow/tfjs-core'
import { ConfigError, ShapeError } from '../errors.ts'
import { ATTNLAB_KERNELS } from '../kernels/names.ts'
import { checkIds, checkTensor, hasKernel, runFusedKernel, withGradient } from './support.ts'

/** Options of {@link oneHotAttention}. @category Ops */
export interface OneHotAttentionOptions {
  /** Token vocabulary: token one-hots occupy `[0, dVocab)`, position `t`'s one-hot is at `dVocab + t`. */
  readonly dVocab: number
  /** Output columns: the first `outCols` columns of each `W_V^h` (default `dVocab`). */
  readonly outCols?: number
  /** Score multiplier (default 1, as the minimal model). */
  readonly scale?: number
  /**
   * First position whose logits are returned (default 0): the result is
   * `[batch, pos - from, outCols]`. Earlier queries are not computed at all (a trainer that
   * scores only later positions saves their work and a copy).
   */
  readonly from?: number
}

/** The one-hot inputs `[batch, pos, dModel]`. */
function oneHotInputs(tokens: tf.Tensor2D, dVocab: number, dModel: number): tf.Tensor3D {
  const [batch, pos] = tokens.shape
  // [batch * pos, dModel]
  const tokenPart = tf.cast(tf.oneHot(tf.reshape(tokens, [-1]) as tf.Tensor1D, dModel), 'float32')
  const positions = new Float32Array(pos * dModel)
  for (let t = 0; t < pos; t++) positions[t * dModel + dVocab + t] = 1
  return tf.add(tf.reshape(tokenPart, [batch, pos, dModel]), tf.tensor3d(positions, [1, pos, dModel])) as tf.Tensor3D
}

/**
 * Dense form (the paper's): `q = X W_Q^h`, `S = q X^T`, `A = softmax(S)`, `out = A X W_V^h[:, :c]`, with a written-out
 * gradient.
 */
function compositeOneHot(dVocab: number, outCols: number, scale: number, from: number) {
  return withGradient((save, tokens: tf.Tensor2D, wq: tf.Tensor3D, wv: tf.Tensor3D) => {
    const [batch, pos] = tokens.shape
    const [nHeads, dModel, dValue] = wv.shape
    const x = oneHotInputs(tokens, dVocab, dModel) // [batch, pos, dModel]
    const x2 = tf.reshape(x, [batch * pos, dModel])
    const wq2 = tf.reshape(tf.transpose(wq, [1, 0, 2]), [dModel, nHeads * dModel]) // [in, (h, out)]
    const toHeads = (t: tf.Tensor, width: number): tf.Tensor3D =>
      tf.reshape(tf.transpose(tf.reshape(t, [batch, pos, nHeads, width]), [0, 2, 1, 3]), [
        batch,
        nHeads * pos,
        width,
      ]) as tf.Tensor3D
    const q = toHeads(tf.matMul(x2, wq2), dModel) // [batch, (h, t), dModel]
    const mask = new Float32Array(nHeads * pos * pos)
    for (let h = 0; h < nHeads; h++)
      for (let t = 0; t < pos; t++) mask.fill(-Infinity, (h * pos + t) * pos + t + 1, (h * pos + t + 1) * pos)
    const scores = tf.add(
      tf.mul(tf.matMul(q, tf.transpose(x, [0, 2, 1])), scale),
      tf.tensor3d(mask, [1, nHeads * pos, pos]),
    ) // [batch, (h, t), s]
    const pattern = tf.softmax(scores) as tf.Tensor3D
    const weighted = tf.matMul(pattern, x) // [batch, (h, t), dModel]
    const z2 = tf.reshape(tf.transpose(tf.reshape(weighted, [batch, nHeads, pos, dModel]), [0, 2, 1, 3]), [
      batch * pos,
      nHeads * dModel,
    ]) // [(b, t), (h, in)]
    const wv2 = tf.reshape(tf.slice(wv, [0, 0, 0], [nHeads, dModel, outCols]), [nHeads * dModel, outCols])
    save([x, x2, pattern, z2, wv2])
    const logits = tf.reshape(tf.matMul(z2, wv2), [batch, pos, outCols]) as tf.Tensor3D
    return {
      value: from === 0 ? logits : (tf.slice(logits, [0, from, 0], [-1, -1, -1]) as tf.Tensor3D),
      gradFunc: (dy, saved) => {
        const [xs, xs2, p, zs2, wvs2] = saved as [tf.Tensor3D, tf.Tensor2D, tf.Tensor3D, tf.Tensor2D, tf.Tensor2D]
        const full =
          from === 0
            ? dy
            : tf.pad(dy, [
                [0, 0],
                [from, 0],
                [0, 0],
              ]) // earlier positions: no gradient
        const d2 = tf.reshape(full, [batch * pos, outCols])
        const dWv2 = tf.matMul(tf.transpose(zs2), d2) // [(h, in), outCols]
        let dWv = tf.reshape(dWv2, [nHeads, dModel, outCols])
        if (outCols < dValue)
          dWv = tf.pad(dWv, [
            [0, 0],
            [0, 0],
            [0, dValue - outCols],
          ])
        const dWeighted = toHeads(tf.matMul(d2, tf.transpose(wvs2)), dModel) // [batch, (h, t), dModel]
        const dp = tf.matMul(dWeighted, tf.transpose(xs, [0, 2, 1])) // [batch, (h, t), s]
        const ds = tf.mul(tf.mul(p, tf.sub(dp, tf.sum(tf.mul(p, dp), -1, true))), scale)
        const dq = tf.matMul(ds, xs) // [batch, (h, t), dModel]
        const dq2 = tf.reshape(tf.transpose(tf.reshape(dq, [batch, nHeads, pos, dModel]), [0, 2, 1, 3]), [
          batch * pos,
          nHeads * dModel,
        ])
        const dWq2 = tf.matMul(tf.transpose(xs2), dq2) // [in, (h, out)]
        const dWq = tf.transpose(tf.reshape(dWq2, [dModel, nHeads, dModel]), [1, 0, 2])
        return [tf.zeros(tokens.shape, 'float32'), dWq, dWv]
      },
    }
  })
}

/**
 * The minimal model's attention layer: with `x_t = onehot(tokens[b, t]) + onehot(dVocab + t)`
 * (width `dModel`), per head `S = scale (X W_Q^h) X^T` (causal), `A = softmax(S)`, and
 * `logits = sum_h A X W_V^h[:, :outCols]`. With attnlab kernels registered this is one forward and
 * one backward kernel computed with gathers (`x W = W[token] + W[dVocab + t]`, scores as two
 * lookups per pair: ~10x fewer FLOPs than the dense form); otherwise the dense form with batched
 * matmuls. Both are the same function. Differentiable in `wq` and `wv`.
 *
 * @param tokens - `[batch, pos]` int32 in `[0, dVocab)`
 * @param wq - `W_Q`, `[nHeads, dModel, dModel]` (TransformerLens layout: input row, query column)
 * @param wv - `W_V`, `[nHeads, dModel, dValue]`
 * @param options - `dVocab` (required), `outCols` (default `dVocab`), `scale` (default 1),
 *   `from` (default 0)
 * @returns logits `[batch, pos - from, outCols]`
 * @throws `ShapeError` (from `@attnlab/core`) for wrong ranks or dtypes, `dVocab + pos > dModel`, or mismatched heads
 * @throws `ConfigError` (from `@attnlab/core`) for `dVocab`/`outCols`/`from` out of range or a non-finite scale
 * @throws `AttnlabError` (from `@attnlab/core`) `INVALID_ARGUMENT` for a token outside `[0, dVocab)` (always with
 *   the kernels; on `cpu`/`wasm` for the composite)
 * @category Ops
 */
export function oneHotAttention(
  tokens: tf.Tensor2D,
  wq: tf.Tensor3D,
  wv: tf.Tensor3D,
  options: OneHotAttentionOptions,
): tf.Tensor3D {
  checkTensor(tokens, 'tokens', 2, 'int32', 'oneHotAttention')
  checkTensor(wq, 'wq', 3, 'float32', 'oneHotAttention')
  checkTensor(wv, 'wv', 3, 'float32', 'oneHotAttention')
  const [batch, pos] = tokens.shape
  const [nHeads, dModel, dModelColumns] = wq.shape
  const { dVocab } = options
  const outCols = options.outCols ?? dVocab
  const scale = options.scale ?? 1
  if (dModel !== dModelColumns)
    throw new ShapeError(`oneHotAttention: wq [${wq.shape.join(', ')}] must be [nHeads, dModel, dModel]`)
  if (wv.shape[0] !== nHeads || wv.shape[1] !== dModel)
    throw new ShapeError(`oneHotAttention: wv [${wv.shape.join(', ')}] must be [${nHeads}, ${dModel}, dValue]`)
  if (!(Number.isInteger(dVocab) && dVocab > 0))
    throw new ConfigError('dVocab', `${dVocab} must be a positive integer`, { value: dVocab })
  if (dVocab + pos > dModel)
    throw new ShapeError(
      `oneHotAttention: dVocab ${dVocab} + pos ${pos} exceeds dModel ${dModel} (position one-hots would not fit)`,
      { dVocab, pos, dModel },
    )
  if (!(Number.isInteger(outCols) && outCols > 0 && outCols <= (wv.shape[2] as number))) {
    throw new ConfigError('outCols', `${outCols} must be an integer in [1, ${wv.shape[2]}]`, { value: outCols })
  }
  if (!Number.isFinite(scale)) throw new ConfigError('scale', `${scale} must be finite`, { value: scale })
  const from = options.from ?? 0
  if (!(Number.isInteger(from) && from >= 0 && (from < pos || pos === 0))) {
    throw new ConfigError('from', `${from} must be an integer in [0, ${Math.max(pos - 1, 0)}]`, { value: from })
  }
  if (batch === 0 || pos === 0) return tf.zeros([batch, pos, outCols])
  if (hasKernel(ATTNLAB_KERNELS.oneHotAttention)) {
    return runFusedKernel(
      ATTNLAB_KERNELS.oneHotAttention,
      { tokens, wq, wv },
      { dVocab, outCols, scale, from },
    ) as tf.Tensor3D
  }
  checkIds(tokens, dVocab, 'token')
  return compositeOneHot(dVocab, outCols, scale, from)(tokens, wq, wv) as tf.Tensor3D
}
