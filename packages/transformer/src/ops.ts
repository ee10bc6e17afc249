/**
 * Numerical building blocks of the transformer: RMSNorm, activations, rotary embeddings
 * (rotate-half layout), dropout from a seeded `Rng` (`@attnlab/core`), and the masked
 * cross-entropy loss. The linear layer and LayerNorm are `@attnlab/core`'s fused ops (`linear`,
 * `layerNorm`: one kernel each when attnlab kernels are registered; composites with
 * explicit-transpose gradients otherwise).
 *
 * @module
 */
import * as tf from '@tensorflow/tfjs-core'
import { ConfigError, InvalidArgumentError, type Rng } from '@attnlab/core'
import { softmaxCrossEntropy } from '@attnlab/core/kernels'
import type { ActivationFunction } from './config.ts'

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
export function ropeTables(
  start: number,
  pos: number,
  dHead: number,
  theta: number,
): { cos: Float32Array; sin: Float32Array } {
  const half = dHead / 2
  const cos = new Float32Array(pos * dHead)
  const sin = new Float32Array(pos * dHead)
  for (let p = 0; p < pos; p++) {
    for (let i = 0; i < half; i++) {
      const frequency = 1 / theta ** ((2 * i) / dHead)
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
 * `rotate_half([x1, x2]) = [-x2, x1]` along the head axis (Su et al., RoFormer, arXiv 2104.09864, sec. 3.4).
 * With `rotaryDims` below `dHead` only the first `rotaryDims` dimensions of each head are rotated (with the
 * frequencies of a `rotaryDims`-wide head) and the rest pass through: GPT-NeoX's partial rotary embedding
 * (Black et al., arXiv 2204.06745, sec. 2.1.1).
 *
 * @param x - queries or keys, `[batch, pos, heads, dHead]`
 * @param start - absolute position of `x`'s first position
 * @param theta - RoPE base
 * @param rotaryDims - dimensions rotated, even, at most `dHead` (default 0 = all of `dHead`)
 * @returns `[batch, pos, heads, dHead]`
 * @throws `InvalidArgumentError` (`@attnlab/core`) for a `rotaryDims` that is odd, negative or above `dHead`
 * @category Ops
 */
export function applyRotary(x: tf.Tensor4D, start: number, theta: number, rotaryDims = 0): tf.Tensor4D {
  const width = x.shape[3]
  if (!(Number.isInteger(rotaryDims) && rotaryDims >= 0 && rotaryDims % 2 === 0 && rotaryDims <= width)) {
    throw new InvalidArgumentError(
      `rotaryDims ${rotaryDims} is not an even number of dimensions in 0 .. ${width} (the head width; 0 = all)`,
      { rotaryDims },
    )
  }
  if (rotaryDims !== 0 && rotaryDims < width) {
    const rotated = rotateHalf(tf.slice(x, [0, 0, 0, 0], [-1, -1, -1, rotaryDims]), start, theta) // [b, pos, h, r]
    const passed = tf.slice(x, [0, 0, 0, rotaryDims], [-1, -1, -1, width - rotaryDims]) // [b, pos, h, dHead - r]
    return tf.concat([rotated, passed], 3) as tf.Tensor4D // [b, pos, h, dHead]
  }
  return rotateHalf(x, start, theta)
}

/** Rotate-half RoPE over the whole last axis of `x`, `[batch, pos, heads, d]`. */
function rotateHalf(x: tf.Tensor4D, start: number, theta: number): tf.Tensor4D {
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
 * `weights` is non-zero: `sum(w * (logsumexp(logits) - logits[target])) / sum(w)` (0 when no
 * position is scored). `@attnlab/core`'s `softmaxCrossEntropy`: one fused kernel forward and
 * backward when attnlab kernels are registered, a composite with a written-out gradient
 * otherwise.
 *
 * @param logits - `[rows, dVocab]`
 * @param targets - `[rows]` int32 in `[0, dVocab)`
 * @param weights - `[rows]` float32 (a loss mask; 1 = scored)
 * @returns a scalar: the weighted mean loss in nats
 * @throws `AttnlabError` (`@attnlab/core`) `INVALID_ARGUMENT` for a target outside the vocabulary
 * @category Ops
 */
export function maskedCrossEntropy(logits: tf.Tensor2D, targets: tf.Tensor1D, weights: tf.Tensor1D): tf.Scalar {
  return softmaxCrossEntropy(logits, targets, weights)
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
