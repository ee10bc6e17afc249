/**
 * `@attnlab/transformer`: the model every attnlab experiment works on.
 *
 * - {@link createTransformer} / {@link Transformer}: four architectures from one implementation
 *   (`minimal` = Yüksel et al.'s minimal model, `gpt`, `llama`, and `mixer`, a causal MLP-Mixer
 *   without attention; {@link hasAttention}), configured by
 *   {@link createConfig} / {@link presetConfig}, with TransformerLens parameter names.
 * - Hooks: {@link Transformer.runWithHooks}, {@link Transformer.runWithCache}, batched head
 *   masks, {@link getActName}; see [docs/architecture/hooks.md](../../../docs/architecture/hooks.md).
 * - Pluggable attention: any `@attnlab/core` `AttentionKernel` ({@link denseAttention} by
 *   default), for prefill and KV-cached decode; see
 *   [docs/architecture/attention-kernel.md](../../../docs/architecture/attention-kernel.md).
 * - Training: {@link train} / {@link Trainer} (AdamW, SGD, clipping, schedules, evaluation,
 *   analysis metrics, exact resume), {@link analyze} metrics.
 * - Generation: {@link generate} (KV-cached; greedy, temperature, top-k, top-p).
 * - Checkpoints on disk: `@attnlab/transformer/node`.
 * - Subpaths with a part of this entry's names: `@attnlab/transformer/train` (training, optimizers,
 *   schedules, metrics) and `@attnlab/transformer/io` (model files: llama2.c, Hugging Face).
 * - The model's ops (for attnlab packages; not a stable API): `@attnlab/transformer/internal`.
 *   Its kernels and gradients are `@attnlab/core/kernels`', registered by `useBackend`.
 *
 * @packageDocumentation
 */
export {
  DEFAULT_MINIMAL_QUERY_INIT,
  configFromJSON,
  configToJSON,
  createConfig,
  defaultTransformerConfig,
  hasAttention,
  presetConfig,
  transformerConfigSchema,
  type ActivationFunction,
  type Architecture,
  type Normalization,
  type Positional,
  type PresetName,
  type QueryInit,
  type TransformerConfig,
  type TransformerConfigInput,
} from './config.ts'
export {
  ActivationCache,
  Transformer,
  createTransformer,
  forwardCachedOptionsSchema,
  forwardOptionsSchema,
  parameterShapes,
  runWithCacheOptionsSchema,
  setWeightsOptionsSchema,
  transformerOptionsSchema,
  type AttentionReport,
  type ForwardCachedOptions,
  type ForwardOptions,
  type HookHandle,
  type RunWithCacheOptions,
  type SetWeightsOptions,
  type TokenInput,
  type TransformerOptions,
} from './model.ts'
export {
  BLOCK_HOOK_POINTS,
  HookRunner,
  blockHookName,
  getActName,
  hookName,
  parseHookName,
  type ActName,
  type BlockHookName,
  type BlockHookPoint,
  type ForwardHook,
  type HookContext,
  type HookFunction,
  type HookName,
  type HookSelector,
} from './hooks.ts'
export { denseAttention } from '@attnlab/core'
export { KVCache } from './kv-cache.ts'
export {
  generate,
  generateOptionsSchema,
  sampleToken,
  samplingOptionsSchema,
  type GenerateOptions,
  type GenerateResult,
  type StopReason,
} from './generate.ts'
// Training (also the `./train` entry): Trainer, train, optimizers, schedules, analysis metrics.
export * from './training.ts'

// Model files in and out (also the `./io` entry): llama2.c, Hugging Face, directories, loadModel.
export * from './io.ts'
