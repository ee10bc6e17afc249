/**
 * Helpers shared by the fused ops: kernel lookup, input checks, and a typed `customGrad`.
 *
 * @module
 */
import * as tf from '@tensorflow/tfjs-core'
import { InvalidArgumentError, ShapeError } from '../errors.ts'

/** Whether the active backend has a kernel registered under `name`. */
export function hasKernel(name: string): boolean {
  return tf.getKernel(name, tf.getBackend()) !== undefined
}

/** Throws a `ShapeError` (from `@attnlab/core`) unless `t` is a tensor of `rank` and `dtype`. */
export function checkTensor(
  t: unknown,
  name: string,
  rank: number,
  dtype: 'float32' | 'int32',
  op: string,
): asserts t is tf.Tensor {
  if (!(t instanceof tf.Tensor)) throw new ShapeError(`${op}: ${name} must be a tensor, got ${typeof t}`, { name })
  if (t.rank !== rank || t.dtype !== dtype) {
    throw new ShapeError(
      `${op}: ${name} must be a rank-${rank} ${dtype} tensor, got ${t.dtype} [${t.shape.join(', ')}]`,
      {
        name,
        shape: [...t.shape],
        dtype: t.dtype,
      },
    )
  }
}

/**
 * Checks that int32 ids are in `[0, limit)` by reading them (synchronously) on the `cpu` and
 * `wasm` backends, where that is cheap; on GPU backends the read would stall the pipeline and is
 * skipped.
 */
export function checkIds(ids: tf.Tensor, limit: number, what: string): void {
  const backend = tf.getBackend()
  if (backend !== 'cpu' && backend !== 'wasm') return
  const values = ids.dataSync() as Int32Array
  for (let i = 0; i < values.length; i++) {
    const v = values[i]!
    if (!(v >= 0 && v < limit)) {
      throw new InvalidArgumentError(`${what} ${v} at flat index ${i} is out of range [0, ${limit})`, {
        value: v,
        index: i,
        limit,
      })
    }
  }
}

/**
 * `tf.customGrad` with typed arguments: `forward(...inputs)` returns the value and a gradient
 * function giving one gradient per input (all inputs must be tensors). No gradients of the
 * forward's own ops are needed (tfjs-core's Node build registers none).
 */
export function withGradient<Inputs extends tf.Tensor[], Output extends tf.Tensor>(
  forward: (
    save: (tensors: tf.Tensor[]) => void,
    ...inputs: Inputs
  ) => { value: Output; gradFunc: (dy: Output, saved: tf.Tensor[]) => tf.Tensor[] },
): (...inputs: Inputs) => Output {
  const fn = tf.customGrad((...args: (tf.Tensor | tf.GradSaveFunc)[]) => {
    const save = args[args.length - 1] as tf.GradSaveFunc
    const inputs = args.slice(0, -1) as Inputs
    const { value, gradFunc } = forward((tensors) => save(tensors), ...inputs)
    return { value, gradFunc: (dy: tf.Tensor | tf.Tensor[], saved: tf.Tensor[]) => gradFunc(dy as Output, saved) }
  })
  return (...inputs: Inputs) => fn(...inputs) as Output
}

/**
 * Runs a fused kernel whose extra outputs (attention pattern, GELU pre-activation, LayerNorm
 * statistics) exist only for its own backward pass, recording it on the gradient tape with a single
 * output. tfjs fills the gradient of every unused output of a multi-output kernel with zeros built
 * in JavaScript and copied to the backend before calling the gradient (for a GPT step with T 64,
 * batch 64: ~16 MB per step, ~4 ms of a 45 ms step), and the registered gradients ignore them. The
 * kernel's registered gradient (`tf.registerGradient`) computes the result, with the same saved
 * tensors in the same order (inputsToSave, then outputsToSave).
 *
 * @returns the kernel's first output
 */
export function runFusedKernel(
  kernelName: string,
  inputs: Record<string, tf.Tensor>,
  attrs: tf.NamedAttrMap,
): tf.Tensor {
  const config = tf.getGradient(kernelName)
  if (config === undefined) {
    const outs = tf
      .engine()
      .runKernel(kernelName, inputs as unknown as tf.NamedTensorMap, attrs) as unknown as tf.Tensor[]
    outs.slice(1).forEach((t) => {
      t.dispose()
    })
    return outs[0]!
  }
  const names = Object.keys(inputs)
  const fn = tf.customGrad((...args: (tf.Tensor | tf.GradSaveFunc)[]) => {
    const save = args[args.length - 1] as tf.GradSaveFunc
    const named: Record<string, tf.Tensor> = {}
    names.forEach((name, i) => {
      named[name] = args[i] as tf.Tensor
    })
    const outs = tf
      .engine()
      .runKernel(kernelName, named as unknown as tf.NamedTensorMap, attrs) as unknown as tf.Tensor[]
    const savedOutputs = (config.outputsToSave ?? []).flatMap((keep, i) => (keep ? [outs[i]!] : []))
    save([...(config.inputsToSave ?? []).map((name) => named[name]!), ...savedOutputs])
    return {
      value: outs[0]!,
      gradFunc: (dy: tf.Tensor | tf.Tensor[], saved: tf.Tensor[]) => {
        const grads = config.gradFunc(dy, saved, attrs)
        return names.map((name) => grads[name]!())
      },
    }
  })
  return fn(...names.map((name) => inputs[name]!))
}
