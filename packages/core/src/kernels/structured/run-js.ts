/**
 * The plumbing of the structured kernels (`pair-scores.ts`, `pair-scatter.ts`, `two-hot-scores.ts`,
 * `two-hot-scores-grad.ts`): plain JavaScript loops over the backend's memory, on every backend.
 *
 * @module
 */
import * as tf from '@tensorflow/tfjs-core'
import { KernelsUnavailableError } from '../../errors.ts'
import { usesComposites } from './composite.ts'

/** What tfjs passes a kernel function. */
export interface KernelArgs {
  inputs: tf.NamedTensorInfoMap
  backend: unknown
  attrs: tf.NamedAttrMap
}

/** The values a structured kernel reads. */
export type TypedArray = Float32Array | Int32Array

interface WasmLike {
  makeOutput(shape: number[], dtype: tf.DataType): tf.TensorInfo
  typedArrayFromHeap(info: tf.TensorInfo): tf.backend_util.TypedArray
}
interface GenericBackend {
  readSync(dataId: tf.DataId): tf.backend_util.BackendValues
  makeTensorInfo(shape: number[], dtype: tf.DataType, values?: tf.backend_util.BackendValues): tf.TensorInfo
}

/**
 * Runs `compute` on the inputs' values and a zero-filled float32 output of `shape`, using the
 * wasm heap directly when the backend is wasm (no copies) and readSync/makeTensorInfo otherwise.
 */
export function runJs(
  backend: unknown,
  inputs: readonly tf.TensorInfo[],
  shape: number[],
  compute: (values: TypedArray[], out: Float32Array) => void,
): tf.TensorInfo {
  const wasm = backend as Partial<WasmLike>
  if (typeof wasm.makeOutput === 'function' && typeof wasm.typedArrayFromHeap === 'function') {
    // Allocate first: allocation may grow (and detach) the heap, invalidating earlier views.
    const out = wasm.makeOutput(shape, 'float32')
    const values = inputs.map((t) => wasm.typedArrayFromHeap!(t) as TypedArray)
    const outValues = wasm.typedArrayFromHeap(out) as Float32Array
    outValues.fill(0)
    compute(values, outValues)
    return out
  }
  const generic = backend as GenericBackend
  const values = inputs.map((t) => generic.readSync(t.dataId) as TypedArray)
  const outValues = new Float32Array(shape.reduce((n, d) => n * d, 1))
  compute(values, outValues)
  return generic.makeTensorInfo(shape, 'float32', outValues)
}

/**
 * Throws when `kernelName` is not registered on the active backend: attnlab's kernels are
 * registered by `useBackend` (`@attnlab/core`), so a backend started another way lacks them. A GPU
 * backend started by `useBackend` passes: its structured ops are compositions (`composite.ts`).
 *
 * @throws {@link KernelsUnavailableError} naming the backend and `useBackend`
 */
export function requireKernel(kernelName: string): void {
  const backendName = tf.getBackend()
  if (tf.getKernel(kernelName, backendName) !== undefined || usesComposites(backendName)) return
  throw new KernelsUnavailableError(
    'attnlab',
    `kernel '${kernelName}' is not registered on the '${backendName}' backend; start the backend with ` +
      `\`await useBackend('${backendName}')\` from @attnlab/core, which registers attnlab's kernels and gradients`,
  )
}
