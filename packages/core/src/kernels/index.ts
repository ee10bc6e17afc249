/**
 * `@attnlab/core/kernels`: the kernel engines behind attnlab's ops, and the ops themselves.
 * Libraries call the ops; only `useBackend` (`@attnlab/core`) registers kernels and gradients, so a
 * library never touches a backend (see
 * [docs/architecture/tensor-interface.md](../../../../docs/architecture/tensor-interface.md)).
 *
 * - Fused ops ({@link linear}, {@link layerNorm}, {@link causalAttention}, {@link gatherRows},
 *   {@link softmaxCrossEntropy}, {@link oneHotAttention}, {@link adamwUpdate}): one kernel each
 *   when a provider's kernels are registered, an equivalent composite of stock ops otherwise.
 * - Structured kernels of the minimal model's one-hot inputs ({@link pairScores},
 *   {@link pairScatter}, {@link twoHotScores}, {@link twoHotScoresGrad}; names
 *   {@link STRUCTURED_KERNELS}): registered on every backend `useBackend` starts;
 *   {@link requireAttnlabKernels} checks that the active backend was started that way.
 * - Gradients of the stock kernels tfjs-core's Node build lacks ({@link registerGradients},
 *   {@link registeredGradientKernels}): registered by `useBackend`.
 * - Providers ({@link KernelProvider}: {@link jsKernelProvider}, {@link loadWasmKernelProvider}; the
 *   native one in `@attnlab/core/node`) and their registration ({@link registerAttnlabKernels},
 *   {@link activeKernels}, {@link kernelsActive}); names {@link ATTNLAB_KERNELS},
 *   {@link REPLACED_STOCK_KERNELS}. Measurements: [docs/performance.md](../../../../docs/performance.md).
 *
 * @packageDocumentation
 */
export { ATTNLAB_KERNELS, REPLACED_STOCK_KERNELS } from './names.ts'
export type {
  AdamWHyper,
  FloatArray,
  IntArray,
  KernelProvider,
  KernelProviderName,
  OneHotAttentionShape,
  SparseAttentionShape,
  PageSelectShape,
} from './provider.ts'
export { activeKernels, kernelsActive, type KernelRegistration } from './active.ts'
export { registerAttnlabKernels, type RegisterKernelsOptions } from './register.ts'
export { backendMemory, wasmInternalsProblems, type BackendMemory } from './memory.ts'
export { jsKernelProvider } from './js-provider.ts'
export { loadWasmKernelProvider, type WasmKernelOptions } from './wasm-provider.ts'
export { registerGradients, registeredGradientKernels } from './gradients.ts'
export { STRUCTURED_KERNELS } from './structured/names.ts'
export { requireAttnlabKernels } from './structured/register.ts'
export { pairScores } from './structured/pair-scores.ts'
export { pairScatter } from './structured/pair-scatter.ts'
export { twoHotScores } from './structured/two-hot-scores.ts'
export { twoHotScoresGrad } from './structured/two-hot-scores-grad.ts'
export { linear, type LinearActivation } from '../ops/linear.ts'
export { layerNorm } from '../ops/layer-norm.ts'
export { causalAttention, type CausalAttentionOptions } from '../ops/causal-attention.ts'
export { softmaxCrossEntropy } from '../ops/softmax-cross-entropy.ts'
export { oneHotAttention, type OneHotAttentionOptions } from '../ops/one-hot-attention.ts'
export { adamwUpdate } from '../ops/adamw.ts'
export { gatherRows } from '../ops/gather-rows.ts'
export { sparseAttentionJs } from './sparse-attention-js.ts'
export { pageSelectJs } from './page-select-js.ts'
export { topKMembers } from './top-k.ts'
export { pageSelect, type PageSelectOptions } from '../ops/page-select.ts'
export {
  sparseAttention,
  sparseAttentionKernelMode,
  type SparseAttentionIndex,
  type SparseAttentionOptions,
} from '../ops/sparse-attention.ts'
