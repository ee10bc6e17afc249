/**
 * LayerNorm over the last axis (Ba, Kiros & Hinton 2016, eq. 4; biased variance, as PyTorch).
 *
 * @module
 */
import * as tf from '@tensorflow/tfjs-core'
import { ConfigError, ShapeError } from '../errors.ts'
import { ATTNLAB_KERNELS } from '../kernels/names.ts'
import { checkTensor, hasKernel, runFusedKernel, withGradient } from './support.ts'

function compositeLayerNorm(eps: number, withBias: boolean): (...inputs: tf.Tensor[]) => tf.Tensor2D {
  return withGradient((save, ...inputs: tf.Tensor[]) => {
    const [x, gain, bias] = inputs as [tf.Tensor2D, tf.Tensor1D, tf.Tensor1D | undefined]
    const mean = tf.mean(x, -1, true) // [rows, 1]
    const centered = tf.sub(x, mean) // [rows, cols]
    const rstd = tf.rsqrt(tf.add(tf.mean(tf.square(centered), -1, true), eps)) // [rows, 1]
    const normalized = tf.mul(centered, rstd) // [rows, cols]
    const scaled = tf.mul(normalized, gain)
    save([normalized, rstd, gain])
    return {
      value: (withBias ? tf.add(scaled, bias!) : scaled) as tf.Tensor2D,
      gradFunc: (dy, saved) => {
        const [xHat, r, g] = saved as [tf.Tensor2D, tf.Tensor2D, tf.Tensor1D]
        const dxHat = tf.mul(dy, g) // [rows, cols]
        const meanD = tf.mean(dxHat, -1, true)
        const meanDX = tf.mean(tf.mul(dxHat, xHat), -1, true)
        const dx = tf.mul(r, tf.sub(tf.sub(dxHat, meanD), tf.mul(xHat, meanDX))) // [rows, cols]
        const dGain = tf.sum(tf.mul(dy, xHat), 0) // [cols]
        return withBias ? [dx, dGain, tf.sum(dy, 0)] : [dx, dGain]
      },
    }
  })
}

/**
 * LayerNorm over the last axis: `(x - mean) / sqrt(var + eps) * gain + bias` (biased variance, as
 * PyTorch and TransformerLens). A fused kernel (one forward, one backward) when attnlab kernels
 * are registered on the active backend, else a composite with a hand-written gradient.
 *
 * @param x - `[rows, cols]` float32
 * @param gain - `[cols]` float32
 * @param bias - `[cols]` float32, or null/undefined for none
 * @param eps - added to the variance (default 1e-5), > 0
 * @returns `[rows, cols]`
 * @throws `ShapeError` (from `@attnlab/core`) for wrong ranks, dtypes or sizes
 * @throws `ConfigError` (from `@attnlab/core`) for `eps <= 0` or not finite
 * @category Ops
 */
export function layerNorm(x: tf.Tensor2D, gain: tf.Tensor1D, bias?: tf.Tensor1D | null, eps = 1e-5): tf.Tensor2D {
  checkTensor(x, 'x', 2, 'float32', 'layerNorm')
  checkTensor(gain, 'gain', 1, 'float32', 'layerNorm')
  const cols = x.shape[1]
  if (gain.shape[0] !== cols) throw new ShapeError(`layerNorm: gain [${gain.shape.join(', ')}] must be [${cols}]`)
  const withBias = bias !== null && bias !== undefined
  if (withBias) {
    checkTensor(bias, 'bias', 1, 'float32', 'layerNorm')
    if (bias.shape[0] !== cols) throw new ShapeError(`layerNorm: bias [${bias.shape.join(', ')}] must be [${cols}]`)
  }
  if (!(eps > 0 && Number.isFinite(eps)))
    throw new ConfigError('eps', `${eps} must be a positive finite number`, { value: eps })
  if (hasKernel(ATTNLAB_KERNELS.layerNorm) && cols > 0) {
    const inputs: Record<string, tf.Tensor> = withBias ? { x, gain, bias } : { x, gain }
    return runFusedKernel(ATTNLAB_KERNELS.layerNorm, inputs, { eps, hasBias: withBias }) as tf.Tensor2D
  }
  const fn = compositeLayerNorm(eps, withBias)
  return withBias ? fn(x, gain, bias) : fn(x, gain)
}
