/**
 * The structured kernels as tfjs compositions, for GPU backends (`webgl`, `webgpu`): the kernels'
 * JavaScript loops would read their inputs back from the GPU (`readSync`), which stalls `webgl` and
 * loses the device on `webgpu`. Each composition builds the two-hot inputs
 * `x_i = onehot(t_i) + onehot(offset + i)` (`[batch, pos, width]`) and multiplies by them: the
 * same sums as the loops (each row of `x` holds two ones), in another order, so the results agree
 * to float32 rounding. tfjs differentiates them with its stock gradients.
 *
 * Yüksel et al., arXiv 2602.19143, section 2 (the minimal model's scores `(x W_Q) x^T`).
 *
 * @module
 */
import * as tf from '@tensorflow/tfjs-core'

/** The backends whose structured ops are these compositions instead of registered kernels. */
export const COMPOSITE_BACKENDS: readonly string[] = Object.freeze(['webgl', 'webgpu'])

/** The composite backends `useBackend` started (it registers the gradients the compositions use). */
const started = new Set<string>()

/** Records that `useBackend` started `backendName`, a composite backend. */
export function markCompositesReady(backendName: string): void {
  started.add(backendName)
}

/** Whether the structured ops run as compositions on the active backend (or `backendName`). */
export function usesComposites(backendName: string = tf.getBackend()): boolean {
  return started.has(backendName)
}

/** `x [batch, pos, width]`: `onehot(tokens[b, i]) + onehot(offset + i)`, float32. */
function twoHotInputs(tokens: tf.Tensor2D, width: number, offset: number): tf.Tensor3D {
  const pos = tokens.shape[1]
  const positions = tf.oneHot(tf.range(offset, offset + pos, 1, 'int32'), width) // [pos, width]
  return tf.add(tf.cast(tf.oneHot(tokens, width), 'float32'), tf.cast(positions, 'float32')) as tf.Tensor3D
}

/** `[batch, heads, pos, pos]` true where `j <= i`. */
function causal(batch: number, heads: number, pos: number): tf.Tensor4D {
  const lower = tf.cast(tf.linalg.bandPart(tf.ones([pos, pos]), -1, 0), 'bool') // [pos, pos]
  return tf.broadcastTo(lower, [batch, heads, pos, pos]) as tf.Tensor4D
}

/** `scores` with `maskValue` above the diagonal. */
function maskAbove(scores: tf.Tensor4D, maskValue: number): tf.Tensor4D {
  const [batch, heads, pos] = scores.shape
  return tf.where(causal(batch, heads, pos), scores, tf.fill(scores.shape, maskValue)) as tf.Tensor4D
}

/** `twoHotScores` as a composition: `x W^h x^T`, `[batch, heads, pos, pos]`. */
export function twoHotScoresComposite(
  w: tf.Tensor3D,
  tokens: tf.Tensor2D,
  offset: number,
  maskValue: number,
): tf.Tensor4D {
  return tf.tidy(() => {
    const [heads, width] = w.shape
    const [batch, pos] = tokens.shape
    const x = twoHotInputs(tokens, width, offset) // [batch, pos, width]
    const table = tf.reshape(tf.transpose(w, [1, 0, 2]), [width, heads * width]) // [width, heads * width]
    const xw = tf.matMul(tf.reshape(x, [batch * pos, width]), table) // [batch * pos, heads * width]
    const queries = tf.transpose(tf.reshape(xw, [batch, pos, heads, width]), [0, 2, 1, 3]) // [batch, heads, pos, width]
    const scores = tf.matMul(tf.reshape(queries, [batch, heads * pos, width]), x, false, true) // [b, h * pos, pos]
    return maskAbove(tf.reshape(scores, [batch, heads, pos, pos]) as tf.Tensor4D, maskValue)
  })
}

/** `twoHotScoresGrad` as a composition: `sum_b x^T dy_lower x`, `[heads, width, width]`. */
export function twoHotScoresGradComposite(
  dScores: tf.Tensor4D,
  tokens: tf.Tensor2D,
  width: number,
  offset: number,
): tf.Tensor3D {
  return tf.tidy(() => {
    const [batch, heads, pos] = dScores.shape
    const x = twoHotInputs(tokens, width, offset) // [batch, pos, width]
    const lower = maskAbove(dScores, 0) // [batch, heads, pos, pos]
    const right = tf.matMul(tf.reshape(lower, [batch, heads * pos, pos]), x) // [batch, heads * pos, width]
    const byPosition = tf.reshape(tf.transpose(tf.reshape(right, [batch, heads, pos, width]), [0, 2, 1, 3]), [
      batch,
      pos,
      heads * width,
    ]) // [batch, pos, heads * width]
    const summed = tf.sum(tf.matMul(x, byPosition, true, false), 0) // [width, heads * width]
    return tf.transpose(tf.reshape(summed, [width, heads, width]), [1, 0, 2]) as tf.Tensor3D
  })
}

/** `pairScores` as a composition: `q[b, i, h, :] . x_j`, `[batch, heads, pos, pos]`. */
export function pairScoresComposite(
  q: tf.Tensor4D,
  tokens: tf.Tensor2D,
  offset: number,
  maskValue: number,
): tf.Tensor4D {
  return tf.tidy(() => {
    const [batch, pos, heads, width] = q.shape
    const x = twoHotInputs(tokens, width, offset) // [batch, pos, width]
    const queries = tf.reshape(tf.transpose(q, [0, 2, 1, 3]), [batch, heads * pos, width]) // [b, h * pos, width]
    const scores = tf.matMul(queries, x, false, true) // [batch, heads * pos, pos]
    return maskAbove(tf.reshape(scores, [batch, heads, pos, pos]) as tf.Tensor4D, maskValue)
  })
}

/** `pairScatter` as a composition: `sum_{j <= i} p[b, h, i, j] x_j`, `[batch, pos, heads, width]`. */
export function pairScatterComposite(p: tf.Tensor4D, tokens: tf.Tensor2D, width: number, offset: number): tf.Tensor4D {
  return tf.tidy(() => {
    const [batch, heads, pos] = p.shape
    const x = twoHotInputs(tokens, width, offset) // [batch, pos, width]
    const lower = maskAbove(p, 0) // [batch, heads, pos, pos]
    const weighted = tf.matMul(tf.reshape(lower, [batch, heads * pos, pos]), x) // [batch, heads * pos, width]
    return tf.transpose(tf.reshape(weighted, [batch, heads, pos, width]), [0, 2, 1, 3]) as tf.Tensor4D
  })
}
