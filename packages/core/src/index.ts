/**
 * `@attnlab/core`: the shared tensor interface of attnlab.
 *
 * - Tensors are tfjs-core's `Tensor` types, never wrapped.
 * - {@link useBackend} / {@link defaultBackend}: the only place a backend is chosen (by apps).
 * - {@link Rng}: seeded, splittable randomness (one seed fixes data, init and sampling).
 * - {@link AttnlabError} and subclasses: typed errors with stable codes.
 * - {@link assertShape}: shape checks at API boundaries.
 * - {@link AttentionKernel}: the contract pluggable attention methods implement.
 * - {@link parseSafetensors} / {@link serializeSafetensors}: the safetensors format.
 *
 * Node-only file helpers are in `@attnlab/core/node`; test helpers in `@attnlab/core/testing`.
 *
 * @packageDocumentation
 */
export {
  AttnlabError,
  BackendUnavailableError,
  ConfigError,
  NonFiniteError,
  ShapeError,
  type AttnlabErrorCode,
} from './errors.ts'
export {
  BACKEND_NAMES,
  BACKEND_PACKAGES,
  activeBackend,
  availableBackends,
  defaultBackend,
  isNodeRuntime,
  useBackend,
  type BackendName,
  type UseBackendOptions,
} from './backend.ts'
export { Rng, type RngState } from './rng.ts'
export {
  causalPairs,
  type AttentionContext,
  type AttentionDecodeInput,
  type AttentionHooks,
  type AttentionKernel,
  type AttentionPrefillInput,
  type AttentionResult,
  type KernelState,
  type LayerKVCache,
} from './attention.ts'
export { assertShape, type ExpectedDim } from './shape.ts'
export {
  SAFETENSORS_DTYPE_SIZE,
  SAFETENSORS_MAX_HEADER_BYTES,
  SafetensorsError,
  parseSafetensors,
  safetensorsToFloat32,
  safetensorsToInt32,
  serializeSafetensors,
  type SafetensorsDtype,
  type SafetensorsEntry,
  type SafetensorsFile,
  type SafetensorsTensorInput,
} from './safetensors.ts'
