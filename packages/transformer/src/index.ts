/**
 * `@attnlab/transformer`: the model every attnlab experiment works on.
 *
 * - {@link createTransformer} / {@link Transformer}: three architectures from one implementation
 *   (`minimal` = Yüksel et al.'s minimal model, `gpt`, `llama`), configured by
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
 * - Ops, kernels and gradient registration (for attnlab packages; not a stable API):
 *   `@attnlab/transformer/internal`.
 *
 * @packageDocumentation
 */
export {
  DEFAULT_MINIMAL_QUERY_INIT,
  configFromJSON,
  configToJSON,
  createConfig,
  defaultTransformerConfig,
  presetConfig,
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
  parameterShapes,
  type AttentionReport,
  type ForwardOptions,
  type HookHandle,
  type RunWithCacheOptions,
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
export { generate, sampleToken, type GenerateOptions, type GenerateResult, type StopReason } from './generate.ts'
export {
  Trainer,
  train,
  type EvalRecord,
  type StepRecord,
  type TrainOptions,
  type TrainResult,
  type TrainerState,
  type TrainingSource,
} from './train.ts'
export {
  clipByGlobalNorm,
  createOptimizer,
  decayMatrices,
  type AdamWOptions,
  type Optimizer,
  type OptimizerOptions,
  type OptimizerState,
  type SgdOptions,
} from './optimizers.ts'
export {
  createSchedule,
  type ConstantSchedule,
  type ReduceOnPlateauSchedule,
  type Schedule,
  type ScheduleOptions,
  type ScheduleState,
  type WarmupCosineSchedule,
} from './schedules.ts'
export {
  analyze,
  headSeparation,
  valueAlignment,
  type AnalysisMetrics,
  type AnalyzeOptions,
  type TeacherSource,
} from './metrics.ts'

// ---- checkpoint import/export (files under src/import/; add lines only) ----
export { ModelFileError, UnsupportedModelError, type ModelFileErrorReason } from './import/errors.ts'
export type { CheckpointFormat, ImportedCheckpoint, SpecialTokens } from './import/checkpoint.ts'
export {
  interleavedToRotateHalf,
  rotateHalfToInterleaved,
  type Float32Tensor,
  type TensorMap,
} from './import/layout.ts'
export {
  NO_BIASES,
  checkTensorSet,
  huggingFaceBiasLayout,
  huggingFaceLlamaShapes,
  llamaFromHuggingFace,
  llamaToHuggingFace,
  tiedEmbeddingAliases,
  type LlamaBiasLayout,
  type TensorSetCheck,
} from './import/llama-weights.ts'
export {
  LLAMA2C_LEGACY_HEADER_BYTES,
  LLAMA2C_MAGIC,
  LLAMA2C_NORM_EPS,
  LLAMA2C_ROPE_THETA,
  LLAMA2C_V1_HEADER_BYTES,
  llama2cFileBytes,
  parseLlama2cCheckpoint,
  parseLlama2cHeader,
  readLlama2cCheckpoint,
  serializeLlama2cCheckpoint,
  type Llama2cCheckpoint,
  type Llama2cHeader,
  type Llama2cReadOptions,
} from './import/llama2c.ts'
export {
  Llama2cTokenizer,
  type DecodeOptions,
  type EncodeOptions,
  type Llama2cTokenizerOptions,
} from './import/tokenizer.ts'
export {
  ATTNLAB_FORMAT_VERSION,
  ATTNLAB_MODEL_TYPE,
  attnlabConfigFor,
  configFromHuggingFace,
  huggingFaceConfigFor,
  huggingFaceIncompatibility,
  type HuggingFaceConfigOptions,
  type HuggingFaceModelInfo,
  type HuggingFaceModelType,
} from './import/huggingface.ts'
export {
  HF_CONFIG_FILE,
  HF_INDEX_FILE,
  HF_WEIGHTS_FILE,
  LLAMA2C_MODEL_FILE,
  LLAMA2C_TOKENIZER_FILE,
  readHuggingFaceDirectory,
  readLlama2cFile,
  saveModelDirectory,
  type HuggingFaceReadOptions,
  type SaveModelOptions,
  type SavedModel,
} from './import/files.ts'
export {
  loadModel,
  loadTokenizer,
  modelFromCheckpoint,
  type LoadModelOptions,
  type LoadedModel,
} from './import/load.ts'
// ---- end of checkpoint import/export ----
