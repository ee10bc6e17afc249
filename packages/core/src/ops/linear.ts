/**
 * A linear layer with an optional bias and GELU: `act(x @ w + bias)` on 2-D inputs.
 *
 * @module
 */
import * as tf from '@tensorflow/tfjs-core'
import { ConfigError, ShapeError } from '../errors.ts'
import { ATTNLAB_KERNELS } from '../kernels/names.ts'
import { checkTensor, hasKernel, runFusedKernel, withGradient } from './support.ts'

/**
 * Activations {@link linear} fuses: `none`, or `gelu_new` (GPT-2's tanh approximation,
 * `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`; Hendrycks & Gimpel 2016, eq. for the tanh
 * approximation).
 *
 * @category Ops
 */
export type LinearActivation = 'none' | 'gelu_new'

const GELU_2C = 2 * Math.sqrt(2 / Math.PI)
const GELU_A = 0.044715

/** `gelu_new(z)` as `z sigmoid(2u)` (the same function; sigmoid and products are fast on wasm). */
function geluComposite(z: tf.Tensor): tf.Tensor {
  const cube = tf.mul(tf.mul(z, z), z)
  return tf.mul(z, tf.sigmoid(tf.mul(GELU_2C, tf.add(z, tf.mul(GELU_A, cube)))))
}
/** `dy * gelu_new'(z)`: with `s = sigmoid(2u)`, `d/dz [z s] = s + z s (1 - s) 2u'`. */
function geluGradComposite(z: tf.Tensor, dy: tf.Tensor): tf.Tensor {
  const z2 = tf.mul(z, z)
  const s = tf.sigmoid(tf.mul(GELU_2C, tf.add(z, tf.mul(GELU_A, tf.mul(z2, z)))))
  const du = tf.mul(GELU_2C, tf.add(1, tf.mul(3 * GELU_A, z2)))
  return tf.mul(dy, tf.add(s, tf.mul(tf.mul(tf.mul(z, s), tf.sub(1, s)), du)))
}

/**
 * Gradients with explicit transposes and plain rank-2 matmuls (`dx = dy @ w^T`, `dw = x^T @ dy`):
 * on stock tfjs-wasm only untransposed rank-2 matmuls reach XNNPACK.
 */
function compositeLinear(activation: LinearActivation, withBias: boolean): (...inputs: tf.Tensor[]) => tf.Tensor2D {
  return withGradient((save, ...inputs: tf.Tensor[]) => {
    const [x, w, bias] = inputs as [tf.Tensor2D, tf.Tensor2D, tf.Tensor1D | undefined]
    const product = tf.matMul(x, w) // [rows, out]
    const pre = withBias ? tf.add(product, bias!) : product
    const value = (activation === 'gelu_new' ? geluComposite(pre) : pre) as tf.Tensor2D
    save(activation === 'gelu_new' ? [x, w, pre] : [x, w])
    return {
      value,
      gradFunc: (dy, saved) => {
        const [xs, ws, pres] = saved as [tf.Tensor2D, tf.Tensor2D, tf.Tensor | undefined]
        const dz = (pres === undefined ? dy : geluGradComposite(pres, dy)) as tf.Tensor2D // [rows, out]
        const dx = tf.matMul(dz, tf.transpose(ws)) // [rows, in]
        const dw = tf.matMul(tf.transpose(xs), dz) // [in, out]
        return withBias ? [dx, dw, tf.sum(dz, 0)] : [dx, dw]
      },
    }
  })
}
const composites = new Map<string, (...inputs: tf.Tensor[]) => tf.Tensor2D>()

/**
 * `act(x @ w + bias)` for 2-D `x`: one fused kernel (matmul, bias, GELU; one backward kernel for
 * all three gradients) when attnlab kernels are registered on the active backend, else a
 * composite of stock ops with explicit-transpose gradients. Both give the same numbers within
 * float32 rounding.
 *
 * @param x - `[rows, in]` float32
 * @param w - `[in, out]` float32
 * @param bias - `[out]` float32, or null/undefined for none
 * @param activation - `none` (default) or `gelu_new`
 * @returns `[rows, out]`
 * @throws `ShapeError` (from `@attnlab/core`) for wrong ranks, dtypes or inner sizes
 * @throws `ConfigError` (from `@attnlab/core`) for an unknown activation
 * @example
 * ```ts
 * const h = linear(x, wIn, bIn, 'gelu_new') // [batch * pos, dMlp]
 * ```
 * @category Ops
 */
export function linear(
  x: tf.Tensor2D,
  w: tf.Tensor2D,
  bias?: tf.Tensor1D | null,
  activation: LinearActivation = 'none',
): tf.Tensor2D {
  checkTensor(x, 'x', 2, 'float32', 'linear')
  checkTensor(w, 'w', 2, 'float32', 'linear')
  if (x.shape[1] !== w.shape[0])
    throw new ShapeError(`linear: x [${x.shape.join(', ')}] and w [${w.shape.join(', ')}] have different inner sizes`)
  const withBias = bias !== null && bias !== undefined
  if (withBias) {
    checkTensor(bias, 'bias', 1, 'float32', 'linear')
    if (bias.shape[0] !== w.shape[1])
      throw new ShapeError(`linear: bias [${bias.shape.join(', ')}] must be [${w.shape[1]}]`)
  }
  if (activation !== 'none' && activation !== 'gelu_new') {
    throw new ConfigError(
      'activation',
      `'${String(activation)}' is not fused by linear; expected 'none' or 'gelu_new'`,
      { value: activation },
    )
  }
  const kernel = activation === 'gelu_new' ? ATTNLAB_KERNELS.linearGelu : ATTNLAB_KERNELS.linear
  if (hasKernel(kernel)) {
    const inputs: Record<string, tf.Tensor> = withBias ? { x, w, bias } : { x, w }
    if (kernel === ATTNLAB_KERNELS.linearGelu)
      return runFusedKernel(kernel, inputs, { hasBias: withBias }) as tf.Tensor2D // pre-activation output saved only
    const out = tf
      .engine()
      .runKernel(kernel, inputs as unknown as tf.NamedTensorMap, { hasBias: withBias }) as unknown as
      | tf.Tensor
      | tf.Tensor[]
    return (Array.isArray(out) ? out[0] : out) as tf.Tensor2D
  }
  const key = `${activation}:${withBias}`
  let fn = composites.get(key)
  if (fn === undefined) {
    fn = compositeLinear(activation, withBias)
    composites.set(key, fn)
  }
  return withBias ? fn(x, w, bias) : fn(x, w)
}
