/**
 * Numerical building blocks of the transformer, shaped for the backends we ship: 2-D matmuls
 * with explicit-transpose gradients (only untransposed rank-2 matmuls reach XNNPACK on wasm;
 * `tfjs-cpu-performance.md`), LayerNorm/RMSNorm, activations, rotary embeddings (rotate-half
 * layout), dropout from a seeded `Rng` (`@attnlab/core`), and the masked cross-entropy loss.
 *
 * @module
 */
import * as tf from '@tensorflow/tfjs-core'
import { ConfigError, type Rng } from '@attnlab/core'
import type { ActivationFunction } from './config.ts'
import { softmax } from './kernels.ts'

/**
 * `x @ w` for 2-D tensors, with a gradient that uses only untransposed matmuls on explicitly
 * transposed operands: `dx = dy @ w^T`, `dw = x^T @ dy` (or `(dy^T @ x)^T`, whichever transposes
 * the smaller matrix).
 *
 * @param x - `[rows, in]`
 * @param w - `[in, out]`
 * @returns `[rows, out]`
 * @category Ops
 */
export const linear: (x: tf.Tensor2D, w: tf.Tensor2D) => tf.Tensor2D = tf.customGrad(
  (...args: (tf.Tensor | tf.GradSaveFunc)[]) => {
    const [x, w, save] = args as [tf.Tensor, tf.Tensor, tf.GradSaveFunc]
    save([x, w])
    return {
      value: tf.matMul(x as tf.Tensor2D, w as tf.Tensor2D), // [rows, out]
      gradFunc: (dy: tf.Tensor, saved: tf.Tensor[]) => {
        const [xs, ws] = saved as [tf.Tensor2D, tf.Tensor2D]
        const g = dy as tf.Tensor2D
        const dx = tf.matMul(g, tf.transpose(ws)) // [rows, in]
        const dw =
          (xs.shape[1] as number) > (g.shape[1] as number)
            ? tf.transpose(tf.matMul(tf.transpose(g), xs)) // ([out, rows] @ [rows, in])^T
            : tf.matMul(tf.transpose(xs), g) // [in, rows] @ [rows, out]
        return [dx, dw]
      },
    }
  },
) as unknown as (x: tf.Tensor2D, w: tf.Tensor2D) => tf.Tensor2D

/**
 * LayerNorm over the last axis: `(x - mean) / sqrt(var + eps) * w + b` (biased variance, as
 * PyTorch / TransformerLens).
 *
 * @param x - `[rows, dModel]`
 * @param w - `[dModel]`
 * @param b - `[dModel]` or null
 * @param eps - added to the variance
 * @returns `[rows, dModel]`
 * @category Ops
 */
export function layerNorm(x: tf.Tensor2D, w: tf.Tensor1D, b: tf.Tensor1D | null, eps: number): tf.Tensor2D {
  const mean = tf.mean(x, -1, true) // [rows, 1]
  const centered = tf.sub(x, mean) // [rows, dModel]
  const variance = tf.mean(tf.square(centered), -1, true) // [rows, 1]
  const normalized = tf.mul(centered, tf.rsqrt(tf.add(variance, eps))) // [rows, dModel]
  const scaled = tf.mul(normalized, w)
  return (b === null ? scaled : tf.add(scaled, b)) as tf.Tensor2D
}

/**
 * RMSNorm over the last axis: `x / sqrt(mean(x^2) + eps) * w` (Llama; Zhang & Sennrich 2019).
 *
 * @param x - `[rows, dModel]`
 * @param w - `[dModel]`
 * @param eps - added to the mean square
 * @returns `[rows, dModel]`
 * @category Ops
 */
export function rmsNorm(x: tf.Tensor2D, w: tf.Tensor1D, eps: number): tf.Tensor2D {
  const meanSquare = tf.mean(tf.square(x), -1, true) // [rows, 1]
  return tf.mul(tf.mul(x, tf.rsqrt(tf.add(meanSquare, eps))), w) as tf.Tensor2D
}

/**
 * An MLP activation function.
 *
 * - `gelu_new`: `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))` (GPT-2), computed as the
 *   identical `x sigmoid(2 sqrt(2/pi) (x + 0.044715 x^3))`;
 * - `gelu`: `0.5 x (1 + erf(x / sqrt 2))`;
 * - `silu`: `x sigmoid(x)`; `relu`: `max(x, 0)`.
 *
 * @category Ops
 */
export function activation<T extends tf.Tensor>(x: T, fn: ActivationFunction): T {
  switch (fn) {
    case 'gelu_new': {
      // 0.5 x (1 + tanh(u)) = x sigmoid(2u): the same function, but sigmoid is ~10x faster than
      // tanh on tfjs-wasm, and x^3 as two products avoids tf.pow (also ~10x slower).
      const cube = tf.mul(tf.mul(x, x), x)
      const u = tf.mul(2 * Math.sqrt(2 / Math.PI), tf.add(x, tf.mul(0.044715, cube)))
      return tf.mul(x, tf.sigmoid(u)) as T
    }
    case 'gelu':
      return tf.mul(tf.mul(0.5, x), tf.add(1, tf.erf(tf.mul(x, Math.SQRT1_2)))) as T
    case 'silu':
      return tf.mul(x, tf.sigmoid(x)) as T
    case 'relu':
      return tf.relu(x) as T
  }
}

/**
 * Rotary-embedding tables in the rotate-half layout (Hugging Face Llama, GPT-NeoX): for
 * `i < dHead / 2`, frequency `theta^(-2i / dHead)`, angle `p * freq_i`; both halves of the head
 * share the angles: `cos[p, i] = cos[p, i + dHead/2] = cos(p * freq_i)`.
 *
 * The layout pairs dimension `i` with `i + dHead/2`. llama2.c (and Meta's original code) pairs
 * `2i` with `2i + 1` instead ("interleaved"); a checkpoint in that layout must have the rows of its
 * `W_Q` and `W_K` permuted per head (new row `i` <- old row `2i`, new row `i + dHead/2` <- old
 * row `2i + 1`) before loading: the attention scores are then identical.
 *
 * @param start - first absolute position
 * @param pos - number of positions
 * @param dHead - head width (even)
 * @param theta - RoPE base
 * @returns `cos` and `sin`, each `[pos, dHead]` float32 values
 * @category Ops
 */
export function ropeTables(start: number, pos: number, dHead: number, theta: number): { cos: Float32Array; sin: Float32Array } {
  const half = dHead / 2
  const cos = new Float32Array(pos * dHead)
  const sin = new Float32Array(pos * dHead)
  for (let p = 0; p < pos; p++) {
    for (let i = 0; i < half; i++) {
      const frequency = 1 / Math.pow(theta, (2 * i) / dHead)
      const angle = (start + p) * frequency
      const c = Math.cos(angle)
      const s = Math.sin(angle)
      cos[p * dHead + i] = c
      cos[p * dHead + i + half] = c
      sin[p * dHead + i] = s
      sin[p * dHead + i + half] = s
    }
  }
  return { cos, sin }
}

/**
 * Applies rotary position embeddings (rotate-half): `x cos + rotate_half(x) sin` with
 * `rotate_half([x1, x2]) = [-x2, x1]` along the head axis.
 *
 * @param x - queries or keys, `[batch, pos, heads, dHead]`
 * @param start - absolute position of `x`'s first position
 * @param theta - RoPE base
 * @returns `[batch, pos, heads, dHead]`
 * @category Ops
 */
export function applyRotary(x: tf.Tensor4D, start: number, theta: number): tf.Tensor4D {
  const [, pos, , dHead] = x.shape
  const half = dHead / 2
  const { cos, sin } = ropeTables(start, pos, dHead, theta)
  const cosT = tf.tensor4d(cos, [1, pos, 1, dHead])
  const sinT = tf.tensor4d(sin, [1, pos, 1, dHead])
  const first = tf.slice(x, [0, 0, 0, 0], [-1, -1, -1, half]) // [b, pos, h, half]
  const second = tf.slice(x, [0, 0, 0, half], [-1, -1, -1, half]) // [b, pos, h, half]
  const rotated = tf.concat([tf.neg(second), first], 3) // [b, pos, h, dHead]
  return tf.add(tf.mul(x, cosT), tf.mul(rotated, sinT)) as tf.Tensor4D
}

/**
 * Inverted dropout with a mask drawn from `rng` (no `tf.random`): keeps each entry with
 * probability `1 - rate` and scales kept entries by `1 / (1 - rate)`.
 *
 * @param x - any tensor
 * @param rate - drop probability in [0, 1)
 * @param rng - the random stream (advanced by `x.size` draws)
 * @throws `ConfigError` (`@attnlab/core`) for a rate outside [0, 1)
 * @category Ops
 */
export function dropout<T extends tf.Tensor>(x: T, rate: number, rng: Rng): T {
  if (!(rate >= 0 && rate < 1)) throw new ConfigError('dropout', `${rate} is not in [0, 1)`, { value: rate })
  if (rate === 0) return x
  const keep = 1 - rate
  const mask = new Float32Array(x.size)
  for (let i = 0; i < mask.length; i++) mask[i] = rng.float() < keep ? 1 / keep : 0
  return tf.mul(x, tf.tensor(mask, x.shape)) as T
}

/**
 * A float32 one-hot encoding, `[..., depth]`. (tfjs-wasm 4.22's `tf.oneHot(..., 'float32')`
 * writes integer bit patterns into the float buffer, so the int32 one-hot is cast instead.)
 *
 * @param indices - int32 ids
 * @param depth - number of classes
 * @category Ops
 */
export function oneHotFloat(indices: tf.Tensor, depth: number): tf.Tensor {
  return tf.cast(tf.oneHot(indices as tf.Tensor1D, depth), 'float32')
}

/**
 * Mean cross-entropy (nats) of `logits` against integer `targets` over the positions where
 * `weights` is non-zero: `sum(w * (logsumexp(logits) - logits[target])) / sum(w)`.
 *
 * Computed from one softmax (the fastest kernel here): with `m = max(logits)` and `p = softmax`,
 * `logsumexp = m - log(max(p))` (the largest probability is `1/sum(exp(logits - m))`, never
 * below `1/dVocab`, so nothing underflows), and the gradient is written out,
 * `(p - onehot) * w / sum(w)`, without any `exp` of a full `[rows, dVocab]` tensor.
 *
 * @param logits - `[rows, dVocab]`
 * @param targets - `[rows]` int32 in `[0, dVocab)`
 * @param weights - `[rows]` float32 (a loss mask; 1 = scored)
 * @returns a scalar: the weighted mean loss in nats (0 when no position is scored)
 * @category Ops
 */
export function maskedCrossEntropy(logits: tf.Tensor2D, targets: tf.Tensor1D, weights: tf.Tensor1D): tf.Scalar {
  const dVocab = logits.shape[1] as number
  const denominator = tf.maximum(tf.sum(weights), 1e-12)
  const onehot = oneHotFloat(targets, dVocab) as tf.Tensor2D // [rows, dVocab]
  const column = tf.reshape(tf.div(weights, denominator), [-1, 1]) // [rows, 1]
  const fn = tf.customGrad((...args: (tf.Tensor | tf.GradSaveFunc)[]) => {
    const [z, save] = args as [tf.Tensor2D, tf.GradSaveFunc]
    const probabilities = softmax(z) // [rows, dVocab]
    save([probabilities, onehot, column]) // saved tensors outlive the forward scope; closures do not
    const logSumExp = tf.sub(tf.max(z, -1), tf.log(tf.max(probabilities, -1))) // [rows]
    const targetLogit = tf.sum(tf.mul(z, onehot), -1) // [rows]
    const perRow = tf.sub(logSumExp, targetLogit) // [rows], nats
    return {
      value: tf.sum(tf.mul(perRow, tf.reshape(column, [-1]))) as tf.Scalar,
      gradFunc: (dy: tf.Tensor, saved: tf.Tensor[]) => {
        const [savedProbabilities, savedOnehot, savedColumn] = saved as [tf.Tensor, tf.Tensor, tf.Tensor]
        return [tf.mul(tf.mul(tf.sub(savedProbabilities, savedOnehot), savedColumn), dy)]
      },
    }
  })
  return fn(logits) as tf.Scalar
}

/**
 * Per-row cross-entropy (nats) without reduction: `logsumexp(logits) - logits[target]`.
 *
 * @param logits - `[rows, dVocab]`
 * @param targets - `[rows]` int32
 * @returns `[rows]`
 * @category Ops
 */
export function crossEntropyPerRow(logits: tf.Tensor2D, targets: tf.Tensor1D): tf.Tensor1D {
  const dVocab = logits.shape[1] as number
  const onehot = oneHotFloat(targets, dVocab)
  return tf.neg(tf.sum(tf.mul(tf.logSoftmax(logits), onehot), -1)) as tf.Tensor1D
}
