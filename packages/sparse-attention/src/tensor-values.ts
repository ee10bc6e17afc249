/**
 * Reading a tensor's values in JavaScript without a copy where attnlab kernels are registered (their
 * backend memory access), else by `dataSync`. The estimation steps read the whole `q` and `k`
 * (16 MB each at 8 heads, T = 8192, dHead 64), where tfjs-wasm's `dataSync` copy took 60-70 ms.
 *
 * @module
 */
import * as tf from '@tensorflow/tfjs-core'
import { readValuesSync } from '@attnlab/core'
import { activeKernels, backendMemory } from '@attnlab/core/kernels'

/**
 * The float32 values of `t`, row-major: a view of the backend's memory when attnlab kernels are
 * registered on the active backend (`wasm` or `cpu`), else a copy (`dataSync`). Read-only, and valid
 * only until the next tfjs allocation (a wasm heap growth detaches the view): read it at once.
 *
 * @param t - a float32 tensor on the active backend
 * @param op - the operation reading, named in the error on a backend without synchronous reads
 * @returns its values (do not write to them)
 * @throws `UnsupportedError` (`@attnlab/core`) on `webgpu` (no synchronous reads), naming `op`
 */
export function floatValues(t: tf.Tensor, op = 'a sparse method'): Float32Array {
  const name = tf.getBackend()
  if (t.dtype === 'float32' && activeKernels(name) !== undefined) {
    try {
      return backendMemory(name, tf.backend()).floats(t)
    } catch {
      // not on this backend's memory (e.g. created on another backend): copy
    }
  }
  return readValuesSync(t, op) as Float32Array
}
