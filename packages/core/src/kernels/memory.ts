/**
 * Direct access to a tfjs backend's tensor memory, so kernels compute in place (no copies).
 *
 * - `wasm` (tfjs-backend-wasm 4.22): a tensor lives at `backend.dataIdMap.get(dataId).memoryOffset`
 *   in the module's linear memory (`backend.wasm.HEAPU8.buffer`, the `WebAssembly.Memory`
 *   `backend.wasm.asm.memory`); `backend.makeOutput(shape, dtype)` allocates a new tensor there.
 *   These are internals, not API: {@link wasmInternalsProblems} checks them (a canary test runs
 *   it), and registration refuses to proceed when they are missing.
 * - `cpu`: `backend.data.get(dataId).values` is the tensor's typed array;
 *   `backend.makeTensorInfo(shape, dtype, values)` adopts a new one.
 *
 * Allocating an output on `wasm` may grow the memory, which detaches every earlier view: callers
 * allocate all outputs first and take views afterwards.
 *
 * @module
 */
import type * as tf from '@tensorflow/tfjs-core'
import { InvalidArgumentError, UnsupportedError } from '../errors.ts'
import { isWasmMemory, type WasmMemory } from './webassembly.ts'

/** Float32/int32 views of tensors plus output allocation, for one backend. @category Kernels */
export interface BackendMemory {
  /** A float32 view of a float32 tensor's values (valid until the next allocation). */
  floats(info: tf.TensorInfo): Float32Array
  /** An int32 view of an int32 tensor's values (valid until the next allocation). */
  ints(info: tf.TensorInfo): Int32Array
  /** Allocates an uninitialised tensor of `shape` on the backend. */
  output(shape: readonly number[], dtype?: 'float32' | 'int32'): tf.TensorInfo
  /** Frees a tensor allocated by {@link BackendMemory.output} that is not returned. */
  release(info: tf.TensorInfo): void
  /** The number of tensors sharing `info`'s storage (1 = exclusively owned). */
  refCount(info: tf.TensorInfo): number
}

/** The tfjs-backend-wasm internals attnlab relies on (4.22.x). */
export interface WasmBackendInternals {
  dataIdMap: { get(dataId: tf.DataId): { memoryOffset: number; refCount: number } | undefined }
  makeOutput(shape: number[], dtype: tf.DataType): tf.TensorInfo
  disposeData(dataId: tf.DataId, force?: boolean): boolean
  wasm: { HEAPU8: Uint8Array; asm?: { memory?: unknown }; _malloc(bytes: number): number; _free(pointer: number): void }
}

interface CpuBackendInternals {
  data: { get(dataId: tf.DataId): { values?: unknown; refCount: number } | undefined }
  makeTensorInfo(shape: number[], dtype: tf.DataType, values?: unknown): tf.TensorInfo
  disposeData(dataId: tf.DataId, force?: boolean): boolean
}

const sizeOf = (shape: readonly number[]): number => shape.reduce((n, d) => n * d, 1)

/**
 * What is missing from a tfjs wasm backend object for attnlab's kernels to run on it (empty when
 * everything is there): `dataIdMap.get`, `makeOutput`, `disposeData`, `wasm.HEAPU8`,
 * `wasm._malloc`/`_free`, and the `WebAssembly.Memory` at `wasm.asm.memory`.
 *
 * @param backend - `tf.findBackend('wasm')`
 * @returns a list of human-readable problems
 * @category Kernels
 */
export function wasmInternalsProblems(backend: unknown): string[] {
  const problems: string[] = []
  const b = backend as Partial<WasmBackendInternals> | null | undefined
  if (b === null || b === undefined) return ['the wasm backend is not initialised']
  if (typeof b.dataIdMap?.get !== 'function') problems.push('backend.dataIdMap.get is missing')
  if (typeof b.makeOutput !== 'function') problems.push('backend.makeOutput is missing')
  if (typeof b.disposeData !== 'function') problems.push('backend.disposeData is missing')
  if (!(b.wasm?.HEAPU8 instanceof Uint8Array)) problems.push('backend.wasm.HEAPU8 is missing')
  if (typeof b.wasm?._malloc !== 'function' || typeof b.wasm?._free !== 'function')
    problems.push('backend.wasm._malloc/_free are missing')
  if (!isWasmMemory(b.wasm?.asm?.memory)) problems.push('backend.wasm.asm.memory is not a WebAssembly.Memory')
  return problems
}

/**
 * The `WebAssembly.Memory` of an initialised tfjs wasm backend.
 *
 * @throws `UnsupportedError` (from `@attnlab/core`) when the backend lacks the internals attnlab uses
 * @category Kernels
 */
export function wasmBackendMemory(backend: unknown): WasmMemory {
  const problems = wasmInternalsProblems(backend)
  if (problems.length > 0) {
    throw new UnsupportedError(
      `the tfjs wasm backend does not expose what attnlab's kernels need (${problems.join('; ')}); ` +
        'tfjs-backend-wasm 4.22.x is supported',
      { problems },
    )
  }
  return (backend as WasmBackendInternals).wasm.asm!.memory as WasmMemory
}

function wasmMemory(backend: WasmBackendInternals): BackendMemory {
  const entry = (info: tf.TensorInfo): { memoryOffset: number; refCount: number } => {
    const found = backend.dataIdMap.get(info.dataId)
    if (found === undefined)
      throw new InvalidArgumentError(
        'a tensor passed to an attnlab kernel is not on the wasm backend (was it disposed?)',
      )
    return found
  }
  return {
    floats: (info) => new Float32Array(backend.wasm.HEAPU8.buffer, entry(info).memoryOffset, sizeOf(info.shape)),
    ints: (info) => new Int32Array(backend.wasm.HEAPU8.buffer, entry(info).memoryOffset, sizeOf(info.shape)),
    output: (shape, dtype = 'float32') => backend.makeOutput([...shape], dtype),
    release: (info) => void backend.disposeData(info.dataId, true),
    refCount: (info) => entry(info).refCount,
  }
}

function cpuMemory(backend: CpuBackendInternals): BackendMemory {
  const values = (info: tf.TensorInfo): unknown => {
    const found = backend.data.get(info.dataId)
    if (found === undefined)
      throw new InvalidArgumentError(
        'a tensor passed to an attnlab kernel is not on the cpu backend (was it disposed?)',
      )
    return found.values
  }
  return {
    floats: (info) => {
      const v = values(info)
      if (v instanceof Float32Array) return v
      throw new InvalidArgumentError(`an attnlab kernel expected float32 values, got ${info.dtype}`)
    },
    ints: (info) => {
      const v = values(info)
      if (v instanceof Int32Array) return v
      throw new InvalidArgumentError(`an attnlab kernel expected int32 values, got ${info.dtype}`)
    },
    output: (shape, dtype = 'float32') =>
      backend.makeTensorInfo(
        [...shape],
        dtype,
        dtype === 'int32' ? new Int32Array(sizeOf(shape)) : new Float32Array(sizeOf(shape)),
      ),
    release: (info) => void backend.disposeData(info.dataId, true),
    refCount: (info) => backend.data.get(info.dataId)?.refCount ?? 0,
  }
}

/**
 * Memory access for a `wasm` or `cpu` backend object.
 *
 * @param backendName - `'wasm'` or `'cpu'`
 * @param backend - the backend object a kernel function receives
 * @throws `UnsupportedError` (from `@attnlab/core`) for other backends
 * @category Kernels
 */
export function backendMemory(backendName: string, backend: unknown): BackendMemory {
  if (backendName === 'wasm') return wasmMemory(backend as WasmBackendInternals)
  if (backendName === 'cpu') return cpuMemory(backend as CpuBackendInternals)
  throw new UnsupportedError(`attnlab kernels run on the 'wasm' and 'cpu' backends, not '${backendName}'`, {
    backend: backendName,
  })
}
