/**
 * `@attnlab/transformer/train`: training on its own: {@link train} / {@link Trainer} (AdamW, SGD,
 * clipping, schedules, evaluation, exact resume, the attention-bias intervention {@link attentionBias}),
 * {@link createOptimizer}, {@link createSchedule},
 * and the analysis metrics ({@link analyze}). The same names are also exported by the main entry.
 *
 * @packageDocumentation
 */
export {
  Trainer,
  train,
  trainAnalysisOptionsSchema,
  trainOptionsSchema,
  type EvalRecord,
  type StepRecord,
  type TrainOptions,
  type TrainResult,
  type TrainerState,
  type TrainingSource,
} from './train.ts'
export { planWeightTransfer, transferWeights, type WeightData, type WeightTransfer } from './transfer.ts'
export {
  MAX_ATTENTION_BIAS,
  attentionBias,
  attentionBiasSchema,
  type AttentionBias,
  type AttentionBiasOptions,
} from './attention-bias.ts'
export {
  clipByGlobalNorm,
  adamwOptionsSchema,
  createOptimizer,
  decayMatrices,
  resolveOptimizerOptions,
  sgdOptionsSchema,
  type AdamWOptions,
  type Optimizer,
  type OptimizerOptions,
  type OptimizerState,
  type ResolvedOptimizerOptions,
  type SgdOptions,
} from './optimizers.ts'
export {
  constantScheduleSchema,
  createSchedule,
  reduceOnPlateauScheduleSchema,
  resolveScheduleOptions,
  warmupCosineScheduleSchema,
  type ConstantSchedule,
  type ReduceOnPlateauSchedule,
  type ResolvedScheduleOptions,
  type Schedule,
  type ScheduleOptions,
  type ScheduleState,
  type WarmupCosineSchedule,
} from './schedules.ts'
export {
  analyze,
  analyzeOptionsSchema,
  headSeparation,
  valueAlignment,
  type AnalysisMetrics,
  type AnalyzeOptions,
  type TeacherSource,
} from './metrics.ts'
