/**
 * One AdamW update of a parameter (Loshchilov & Hutter 2019, Algorithm 2, with PyTorch's
 * `torch.optim.AdamW` update order: decoupled decay `p *= 1 - lr wd`, bias-corrected moments).
 *
 * @module
 */
import * as tf from '@tensorflow/tfjs-core'
import { ConfigError, ShapeError } from '../errors.ts'
import { backendMemory } from '../kernels/memory.ts'
import type { AdamWHyper } from '../kernels/provider.ts'
import { activeKernels } from '../kernels/register.ts'

function checkHyper(hyper: AdamWHyper): void {
  const { lr, beta1, beta2, eps, weightDecay, step } = hyper
  if (!(lr >= 0 && Number.isFinite(lr)))
    throw new ConfigError('lr', `${lr} must be a finite number >= 0`, { value: lr })
  if (!(beta1 >= 0 && beta1 < 1)) throw new ConfigError('beta1', `${beta1} must be in [0, 1)`, { value: beta1 })
  if (!(beta2 >= 0 && beta2 < 1)) throw new ConfigError('beta2', `${beta2} must be in [0, 1)`, { value: beta2 })
  if (!(eps >= 0 && Number.isFinite(eps)))
    throw new ConfigError('eps', `${eps} must be a finite number >= 0`, { value: eps })
  if (!(weightDecay >= 0 && Number.isFinite(weightDecay)))
    throw new ConfigError('weightDecay', `${weightDecay} must be a finite number >= 0`, { value: weightDecay })
  if (!(Number.isInteger(step) && step >= 1))
    throw new ConfigError('step', `${step} must be an integer >= 1`, { value: step })
}

/**
 * Updates `parameter`, `m` and `v` by one AdamW step:
 * `m = b1 m + (1 - b1) g`, `v = b2 v + (1 - b2) g^2`,
 * `p = p (1 - lr wd) - lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)`.
 *
 * With attnlab kernels registered on the active backend (`wasm` or `cpu`) and the three variables
 * exclusively owning their memory, the update runs in place in one pass (no allocation, no
 * kernels launched); otherwise it is a composite of stock ops and `assign`s. Same numbers within
 * float32 rounding.
 *
 * @param parameter - the trained variable (float32, any shape)
 * @param gradient - its gradient (same shape)
 * @param m - first-moment slot (same shape)
 * @param v - second-moment slot (same shape)
 * @param hyper - learning rate, betas, eps, weight decay and the step number (from 1)
 * @returns whether the in-place kernel path was taken
 * @throws `ShapeError` (from `@attnlab/core`) when shapes or dtypes differ
 * @throws `ConfigError` (from `@attnlab/core`) for out-of-range hyperparameters
 * @category Ops
 */
export function adamwUpdate(
  parameter: tf.Variable,
  gradient: tf.Tensor,
  m: tf.Variable,
  v: tf.Variable,
  hyper: AdamWHyper,
): boolean {
  for (const [name, t] of [
    ['gradient', gradient],
    ['m', m],
    ['v', v],
  ] as const) {
    if (t.dtype !== 'float32' || !tf.util.arraysEqual(t.shape, parameter.shape)) {
      throw new ShapeError(
        `adamwUpdate: ${name} ${t.dtype} [${t.shape.join(', ')}] must be float32 [${parameter.shape.join(', ')}] ` +
          'like the parameter',
      )
    }
  }
  if (parameter.dtype !== 'float32')
    throw new ShapeError(`adamwUpdate: the parameter must be float32, got ${parameter.dtype}`)
  checkHyper(hyper)
  const registration = activeKernels()
  if (registration !== undefined) {
    const backend = tf.backend()
    const memory = backendMemory(registration.backendName, backend)
    // In place only when nothing else shares the buffers (a reshape or clone would see the change).
    const exclusive = [parameter, m, v].every((t) => memory.refCount(t) === 1) && memory.refCount(gradient) >= 1
    const distinct = new Set([parameter.dataId, m.dataId, v.dataId, gradient.dataId]).size === 4
    if (exclusive && distinct) {
      registration.provider.adamw(
        memory.floats(parameter),
        memory.floats(gradient),
        memory.floats(m),
        memory.floats(v),
        parameter.size,
        hyper,
      )
      return true
    }
  }
  const { lr, beta1, beta2, eps, weightDecay, step } = hyper
  tf.tidy(() => {
    const newM = tf.add(tf.mul(m, beta1), tf.mul(gradient, 1 - beta1))
    const newV = tf.add(tf.mul(v, beta2), tf.mul(tf.square(gradient), 1 - beta2))
    const denominator = tf.add(tf.div(tf.sqrt(newV), Math.sqrt(1 - beta2 ** step)), eps)
    const decayed = weightDecay > 0 ? tf.mul(parameter, 1 - lr * weightDecay) : parameter
    const updated = tf.sub(decayed, tf.mul(tf.div(newM, denominator), lr / (1 - beta1 ** step)))
    m.assign(newM)
    v.assign(newV)
    parameter.assign(updated)
  })
  return false
}
