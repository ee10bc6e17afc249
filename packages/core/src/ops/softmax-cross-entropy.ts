/**
 * Weighted mean softmax cross-entropy from logits and integer labels.
 *
 * @module
 */
import * as tf from '@tensorflow/tfjs-core'
import { ShapeError } from '../errors.ts'
import { ATTNLAB_KERNELS } from '../kernels/names.ts'
import { checkIds, checkTensor, hasKernel, withGradient } from './support.ts'

/**
 * Composite: one softmax, `logsumexp = max - log(max softmax)` (the largest probability is at
 * least `1/cols`, so nothing underflows), and the gradient written out as
 * `(softmax - onehot) * w / sum(w)`.
 */
const composite = withGradient((save, logits: tf.Tensor2D, labels: tf.Tensor1D, weights: tf.Tensor1D) => {
  const cols = logits.shape[1]
  const denominator = tf.maximum(tf.sum(weights), 1e-12)
  const column = tf.reshape(tf.div(weights, denominator), [-1, 1]) // [rows, 1]
  // [rows, cols]; cast from int32 (wasm's float32 oneHot is broken in 4.22); tf.oneHot needs depth >= 2
  const onehot = cols === 1 ? tf.ones([labels.shape[0], 1]) : tf.cast(tf.oneHot(labels, cols), 'float32')
  const probabilities = tf.softmax(logits) // [rows, cols]
  const logSumExp = tf.sub(tf.max(logits, -1), tf.log(tf.max(probabilities, -1))) // [rows]
  const perRow = tf.sub(logSumExp, tf.sum(tf.mul(logits, onehot), -1)) // [rows], nats
  save([probabilities, onehot, column])
  return {
    value: tf.sum(tf.mul(perRow, tf.reshape(column, [-1]))) as tf.Scalar,
    gradFunc: (dy, saved) => {
      const [p, oh, c] = saved as [tf.Tensor2D, tf.Tensor2D, tf.Tensor2D]
      return [tf.mul(tf.mul(tf.sub(p, oh), c), dy), tf.zeros(labels.shape, 'float32'), tf.zerosLike(weights)]
    },
  }
})

/**
 * Weighted mean cross-entropy in nats: `sum_r w_r (logsumexp(logits_r) - logits_r[label_r]) /
 * max(sum_r w_r, 1e-12)` (0 when every weight is 0). A fused kernel (forward and backward each one
 * pass over the logits) when attnlab kernels are registered, else a composite with a written-out
 * gradient. Differentiable in `logits` only.
 *
 * @param logits - `[rows, cols]` float32
 * @param labels - `[rows]` int32 in `[0, cols)`
 * @param weights - `[rows]` float32 (a loss mask, 1 = scored); default all ones
 * @returns a scalar: the weighted mean loss (nats)
 * @throws `ShapeError` (from `@attnlab/core`) for wrong ranks, dtypes or row counts
 * @throws `AttnlabError` (from `@attnlab/core`) `INVALID_ARGUMENT` for a label outside `[0, cols)` (checked on the
 *   `cpu` and `wasm` backends)
 * @category Ops
 */
export function softmaxCrossEntropy(logits: tf.Tensor2D, labels: tf.Tensor1D, weights?: tf.Tensor1D | null): tf.Scalar {
  checkTensor(logits, 'logits', 2, 'float32', 'softmaxCrossEntropy')
  checkTensor(labels, 'labels', 1, 'int32', 'softmaxCrossEntropy')
  const [rows, cols] = logits.shape
  if (labels.shape[0] !== rows)
    throw new ShapeError(`softmaxCrossEntropy: labels [${labels.shape.join(', ')}] must have ${rows} rows like logits`)
  if (weights !== null && weights !== undefined) {
    checkTensor(weights, 'weights', 1, 'float32', 'softmaxCrossEntropy')
    if (weights.shape[0] !== rows)
      throw new ShapeError(
        `softmaxCrossEntropy: weights [${weights.shape.join(', ')}] must have ${rows} rows like logits`,
      )
  }
  if (cols === 0) throw new ShapeError('softmaxCrossEntropy: logits have no columns')
  return tf.tidy(() => {
    const w = weights ?? tf.ones([rows], 'float32')
    if (hasKernel(ATTNLAB_KERNELS.softmaxCrossEntropy)) {
      return tf
        .engine()
        .runKernel(
          ATTNLAB_KERNELS.softmaxCrossEntropy,
          { logits, labels, weights: w } as unknown as tf.NamedTensorMap,
          {},
        ) as tf.Scalar
    }
    checkIds(labels, cols, 'label')
    return composite(logits, labels, w) as tf.Scalar
  })
}
