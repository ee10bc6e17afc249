/**
 * `@attnlab/knockout`: find the few attention heads a capability needs, with few model
 * evaluations (Bair, Xu, Sun & Kolter, "Compressed Sensing for Capability Localization in Large
 * Language Models", arXiv 2603.03335).
 *
 * - Ablations of any set of query heads at `hook_z` ({@link HeadAblation}: zero, mean,
 *   resample), many masks per forward pass through the transformer's batched `headMask`.
 * - {@link Capability}: a fixed evaluation set and a metric (loss, accuracy, log-prob);
 *   built-ins for `@attnlab/markov` tasks, sparse-Markov spans, the induction probe, text and
 *   story probes with a known answer ({@link storyCapability}: name recall, closing a quotation,
 *   pronoun agreement).
 * - Localization ({@link compressedSensing}, {@link exhaustiveSweep}, {@link greedySearch}):
 *   ranked heads with scores and the number of evaluations spent; our own {@link lasso}
 *   (coordinate descent matching scikit-learn's `Lasso`).
 * - Reports: per-head heatmaps ({@link headHeatmap}, {@link heatmapSpec}) and knockout effects
 *   on the target and off-target controls ({@link knockoutEffects}).
 * - Causal patching between checkpoints ({@link patchHeadsBetween}): one head's attention scores
 *   copied from a donor model (a post-emergence checkpoint) into a recipient (a pre-emergence one),
 *   and the change in p(target) per head (Baherwani et al., arXiv 2606.25010).
 * - {@link MixtureTask}: several tasks marked by prefix tokens, for planted-structure validation.
 *
 * @packageDocumentation
 */
export {
  ABLATION_MODES,
  HeadAblation,
  ablationOptionsSchema,
  type AblationMode,
  type AblationOptions,
  type ReferenceInputs,
} from './ablation.ts'
export {
  METRIC_NAMES,
  absentCapability,
  capabilityOptionsSchema,
  chanceLevel,
  checkCapability,
  evaluationSetFromBatch,
  higherIsBetter,
  inductionCapability,
  inductionOptionsSchema,
  performance,
  sparseMarkovSpanCapability,
  taskCapability,
  textCapability,
  type Capability,
  type CapabilityOptions,
  type EvaluationSet,
  type InductionOptions,
  type MetricName,
} from './capability.ts'
export {
  builtinCapability,
  builtinCapabilityNames,
  builtinOptionsSchema,
  parseCapabilityName,
  type BuiltinContext,
  type BuiltinOptions,
} from './builtins.ts'
export {
  checkHead,
  formatHead,
  headAt,
  headCount,
  headIndex,
  parseHeads,
  type HeadLayout,
  type HeadRef,
} from './heads.ts'
export {
  lasso,
  lassoAlphaGrid,
  lassoCV,
  lassoCVOptionsSchema,
  lassoObjective,
  lassoOptionsSchema,
  matrixFromRows,
  type LassoCVOptions,
  type LassoCVResult,
  type LassoFit,
  type LassoOptions,
  type Matrix,
} from './lasso.ts'
export {
  CONSTANT_SCORE_TOLERANCE,
  compressedSensing,
  compressedSensingOptionsSchema,
  crossValidateOptionsSchema,
  exhaustivePairBudget,
  exhaustiveSweep,
  greedySearch,
  localizeOptionsSchema,
  type CompressedSensingOptions,
  type CompressedSensingResult,
  type ExhaustiveResult,
  type GreedyResult,
  type GreedyRound,
  type LocalizationBase,
  type LocalizationResult,
  type LocalizeOptions,
  type RankedHead,
} from './localize.ts'
export {
  checkMasks,
  defaultHeadsPerMask,
  headsPerMask,
  knockoutCounts,
  masksFromHeadSets,
  measurementPlan,
  randomMaskOptionsSchema,
  randomMasks,
  singleHeadMasks,
  type KnockoutMasks,
  type MaskDesign,
  type MeasurementPlan,
  type RandomMaskOptions,
} from './masks.ts'
export {
  MixtureTask,
  mixtureOptionsSchema,
  mixtureTaskFamily,
  registerMixtureTask,
  taskFromDescription,
  type MixtureComponent,
  type MixtureOptions,
} from './mixture.ts'
export {
  PATCH_POINTS,
  patchHeadsBetween,
  patchingHeatmap,
  patchOptionsSchema,
  type HeadPatch,
  type PatchingResult,
  type PatchOptions,
  type PatchPoint,
} from './patching.ts'
export {
  effectsOptionsSchema,
  headHeatmap,
  heatmapSpec,
  knockoutEffects,
  precisionRecall,
  sweepHeads,
  type EffectRow,
  type EffectsOptions,
  type EffectsReport,
  type HeadHeatmap,
} from './report.ts'
export { HELD_OUT_SENTENCES } from './sentences.ts'
export {
  STORY_CAPABILITY_NAMES,
  storyCapabilities,
  storyCapability,
  type StoryCapabilityName,
  type StoryCapabilityOptions,
} from './stories.ts'
export { passOptionsSchema, scoreMasks, scoreOptionsSchema, type MaskScores, type ScoreOptions } from './scoring.ts'
