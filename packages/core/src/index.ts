/**
 * `@attnlab/core`: the shared tensor interface of attnlab.
 *
 * - Tensors are tfjs-core's `Tensor` types, never wrapped.
 * - {@link useBackend} / {@link defaultBackend}: the only place a backend is chosen (by apps).
 * - {@link Rng}: seeded, splittable randomness (one seed fixes data, init and sampling).
 * - {@link Task} / {@link TokenBatch}: the contract data generators implement and trainers read;
 *   {@link TaskRegistry} rebuilds a task from its description through the registered families.
 * - {@link AttnlabError} and subclasses: typed errors with stable codes.
 * - {@link assertShape}: shape checks at API boundaries.
 * - {@link AttentionKernel}: the contract pluggable attention methods implement;
 *   {@link denseAttention}, the default and reference kernel.
 * - {@link parseSafetensors} / {@link serializeSafetensors}: the safetensors format.
 * - `@attnlab/core/kernels`: the fused ops (`linear`, `layerNorm`, `causalAttention`, `gatherRows`,
 *   `softmaxCrossEntropy`, `oneHotAttention`, `adamwUpdate`: one kernel each when attnlab kernels
 *   are registered by `useBackend`, an equivalent composite otherwise) and the `native`, `wasm` and
 *   `js` kernel providers behind them (see [docs/performance.md](../../../docs/performance.md)).
 *
 * Node-only file helpers are in `@attnlab/core/node`; configuration schemas (zod, one declaration
 * for types, defaults, validation and CLI help) in `@attnlab/core/schema`; test helpers in
 * `@attnlab/core/testing`.
 *
 * @packageDocumentation
 */
export {
  AttnlabError,
  BackendUnavailableError,
  ConfigError,
  InterruptedError,
  InvalidArgumentError,
  InvalidCheckpointError,
  IoError,
  KernelsUnavailableError,
  NonFiniteError,
  ShapeError,
  TooLargeError,
  UnsupportedError,
  type AttnlabErrorCode,
} from './errors.ts'
export {
  checkOptionKeys,
  checkRange,
  closest,
  describeRange,
  formatNumber,
  inRange,
  type NumberRange,
} from './options.ts'
export {
  BACKEND_NAMES,
  BACKEND_PACKAGES,
  activeBackend,
  availableBackends,
  defaultBackend,
  isNodeRuntime,
  KERNELS_MODES,
  kernelsInUse,
  useBackend,
  type BackendName,
  type KernelsMode,
  type UseBackendOptions,
  type WasmFileName,
  type WasmPathMap,
} from './backend.ts'
export { readValuesSync, requireSyncReads, syncReadsAllowed } from './sync-read.ts'
export { Rng, type RngState } from './rng.ts'
export type { OffsetGroup, Task, TaskDescription, TokenBatch, TrueAttention, TrueAttentionMap } from './task.ts'
export { TaskRegistry, taskRegistry, UnknownTaskKindError, type TaskFamily } from './task-registry.ts'
export {
  causalMask,
  causalPairs,
  type AttentionContext,
  type AttentionDecodeInput,
  type AttentionHooks,
  type AttentionKernel,
  type AttentionPrefillInput,
  type AttentionResult,
  type KernelState,
  type LayerKVCache,
  type PackedProjections,
} from './attention.ts'
export { denseAttention } from './dense-attention.ts'
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
