/**
 * Synchronous read-back (`dataSync`): which backends allow it, and the one guarded way attnlab
 * reads a tensor synchronously.
 *
 * `webgpu` does not: under Chromium's SwiftShader adapter a synchronous read loses the WebGPU
 * device, and on real GPUs it stalls the queue. Ops whose work is a JavaScript loop over tensor
 * values (the sparse methods' estimation, the JavaScript sparse-attention kernel) therefore throw an
 * {@link UnsupportedError} naming the op and the backend there, and the minimal model's structured
 * kernels run as tfjs compositions on GPU backends (see `docs/architecture/backends.md`).
 *
 * @module
 */
import * as tf from '@tensorflow/tfjs-core'
import { UnsupportedError } from './errors.ts'

/** Backends on which attnlab never reads a tensor synchronously. */
const NO_SYNC_READ: readonly string[] = ['webgpu']

/**
 * Whether attnlab reads tensors synchronously (`dataSync`) on a backend: every backend but `webgpu`.
 *
 * @param backendName - tfjs' registered backend name (default: the active backend)
 * @returns `false` on `webgpu`, else `true`
 * @example
 * ```ts
 * if (syncReadsAllowed()) check(ids.dataSync())
 * ```
 * @category Backends
 */
export function syncReadsAllowed(backendName: string = tf.getBackend()): boolean {
  return !NO_SYNC_READ.includes(backendName)
}

/**
 * Reads a tensor's values synchronously (`dataSync`) for `op`, or throws where that is not allowed.
 *
 * @param t - any tensor
 * @param op - the attnlab operation that needs the values, for the message (e.g. `blockSparse estimation`)
 * @returns the tensor's values (a copy on every backend but `cpu`)
 * @throws {@link UnsupportedError} (`UNSUPPORTED`) on a backend without synchronous reads
 *   (`webgpu`), naming `op` and the backend, before touching the tensor
 * @example
 * ```ts
 * const values = readValuesSync(scores, 'quest page bounds') as Float32Array
 * ```
 * @category Backends
 */
export function readValuesSync(t: tf.Tensor, op: string): tf.TypedArray {
  requireSyncReads(op)
  return t.dataSync()
}

/**
 * Throws unless the active backend allows synchronous reads (see {@link syncReadsAllowed}).
 *
 * @param op - the attnlab operation that needs a synchronous read, for the message
 * @throws {@link UnsupportedError} (`UNSUPPORTED`) on `webgpu`, naming `op`, the backend and the
 *   backends that can run it
 * @category Backends
 */
export function requireSyncReads(op: string): void {
  const backend = tf.getBackend()
  if (syncReadsAllowed(backend)) return
  throw new UnsupportedError(
    `${op} reads tensor values synchronously, which the '${backend}' backend does not allow (a synchronous ` +
      `read loses or stalls the GPU device); run it on 'webgl', 'wasm' or 'cpu'`,
    { op, backend },
  )
}
