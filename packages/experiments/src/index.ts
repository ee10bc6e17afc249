/**
 * `@attnlab/experiments`: attnlab's experiments as library calls, so that a script, a notebook,
 * a browser page and the CLI run the same science. This entry runs in any runtime (no file
 * access); writing results to files lives in `@attnlab/experiments/node`.
 *
 * - {@link compareWithDense}: sparse attention methods against dense attention on one model and
 *   prompt, each sized for target sparsities, with KL(dense || sparse), top-1 agreement and both
 *   sparsities (The Sparse Frontier, Nawrot et al., arXiv 2504.17768 [v2], section 2 and A.1).
 *   {@link sizedConfig} sizes one method for one prompt (for generation with it).
 * - Reports: {@link compareSpec} (a Vega-Lite spec), {@link compareNotes} (text lines);
 *   {@link dynamicsPlotSpec} plots a trajectory of `@attnlab/dynamics`' reduced gradient flow.
 * - Targets: {@link clampReportedSparsity}, {@link targetReached}, {@link targetWarning}.
 * - {@link runEmergence}: the emergence experiment (Yüksel et al., arXiv 2602.19143; Baherwani et
 *   al., arXiv 2606.25010): {@link defaultEmergenceConfig}, stages against the Bayes oracles, the
 *   reduced ODE fitted to the run; {@link buildEmergenceReport} returns its report page (HTML).
 * - {@link runTraining}: the training run of `attnlab train` (a model of `@attnlab/transformer` on a
 *   task, checkpoints through a callback, exact resume); {@link resolveTrainingConfig} validates a
 *   plain {@link TrainingConfig} ({@link defaultTrainingConfig}).
 *
 * Where things live: sizing a method for a prompt length and a target sparsity needs no model
 * and is not an experiment, so `budgetFor` and `calibratedRun` are in `@attnlab/sparse-attention`
 * beside the study's budget formulas; what runs a model (calibration on a prompt, the comparison
 * with dense, its metrics and reports) is here.
 *
 * @packageDocumentation
 */
export { ExperimentInputError } from './errors.ts'
export {
  TARGET_SPARSITY_TOLERANCE,
  clampReportedSparsity,
  targetReached,
  targetWarning,
} from './targets.ts'
export {
  DEFAULT_COMPARE_DECODE_STEPS,
  DEFAULT_COMPARE_SPARSITIES,
  compareDistributions,
  compareWithDense,
  meanExtra,
  sizedConfig,
  type CompareRow,
  type CompareWithDenseOptions,
  type CompareWithDenseResult,
} from './compare-with-dense.ts'
export {
  DEFAULT_EVAL_SPARSITIES,
  greedyAnswers,
  modelShapeOf,
  resolveSparseEvalTrialConfig,
  runSparseEval,
  SPARSE_EVAL_TASK_KINDS,
  TEXT_TASK_KIND_SETTINGS,
  TEXT_TASK_SETTINGS,
  sparseEvalTrialSchema,
  type SparseEvalTrialConfig,
  type SparseEvalCost,
  type SparseEvalOptions,
  type SparseEvalResult,
  type SparseEvalRow,
} from './sparse-eval.ts'
export {
  DEFAULT_TEXT_EVAL_NEW_TOKENS,
  TEXT_EVAL_TASK_KINDS,
  runTextSparseEval,
  type TextSparseEvalOptions,
} from './text-eval.ts'
export {
  isoCostPoints,
  relativeErrors,
  sparseEvalIsoCostSpec,
  sparseEvalRelativeErrorSpec,
  sparseEvalReportHtml,
  sparseEvalSpec,
  sparseEvalTable,
  type IsoCostPoint,
  type RelativeErrorPoint,
} from './sparse-eval-report.ts'
export { measureRetrievalHeads, retrievalHeadsTable, type RetrievalHeadRow } from './retrieval-heads.ts'
export {
  compareNotes,
  compareSpec,
  type CompareSpec,
  type CompareSpecAxis,
  type CompareSpecPanel,
} from './compare-report.ts'
export {
  EMERGENCE_DEFAULTS,
  EMERGENCE_PRESETS,
  EMERGENCE_TASK_DEFAULTS,
  MAX_EMERGENCE_SEQUENCES,
  batchFromTokens,
  checkAttentionBias,
  defaultEmergenceConfig,
  resolveEmergenceConfig,
  resolveEmergenceRecord,
  type EmergenceConfig,
  type EmergenceModelOverrides,
  type EmergencePreset,
  type ResolvedEmergenceConfig,
  emergenceConfigSchema,
  trainingSettingsSchema,
  type TrainingSettings,
} from './emergence/config.ts'
export {
  runEmergence,
  runPlateaus,
  type EmergenceProgress,
  type EmergenceResult,
  type EmergenceRunOptions,
  type EmergenceSeedSummary,
  type EmergenceSummary,
} from './emergence/experiment.ts'
export {
  meanPatterns,
  type EmergenceControl,
  type EmergenceRecord,
  type EmergenceStore,
  type EmergenceTransfer,
  type KnockoutEvaluation,
  type SeedCheckpoint,
  type SeedRun,
} from './emergence/run.ts'
export {
  INTERPOLATED_NOTE,
  analyzeRun,
  describeLearned,
  describeOracle,
  describePlateau,
  describeStageOracle,
  headNames,
  learnedHeader,
  type MetricLine,
  type RunAnalysis,
  type RunAnalysisOptions,
  type RunStage,
} from './emergence/stages.ts'
export {
  EMERGENCE_DEFINITIONS,
  MIN_EMERGENCE_DROP,
  curveDrop,
  headEntropyDrops,
  largestFall,
  type CurveDrop,
  type HeadEntropyDrop,
} from './emergence/emergence-steps.ts'
export {
  boundsInformative,
  computeOracles,
  describeOracleValue,
  type OracleLine,
  type Oracles,
} from './emergence/oracles.ts'
export { odeOverlay, type OdeOverlay } from './emergence/ode.ts'
export {
  buildEmergenceReport,
  buildReport,
  emergenceHeadline,
  type PatternSnapshot,
  type ReportInput,
  type SeedReport,
} from './emergence/report.ts'
export { emergenceSummaryLines } from './emergence/summary-text.ts'
export {
  TRAINING_DEFAULTS,
  defaultTrainingConfig,
  resolveTrainingConfig,
  runTraining,
  trainingConfigSchema,
  type TrainingConfig,
  type TrainingEvaluation,
  type TrainingRunOptions,
  type TrainingRunResult,
  type TrainingRunSettings,
} from './training.ts'
export {
  INDUCTION_THRESHOLD,
  inductionHeadDamage,
  inductionProbes,
  inductionStep,
  scoreInduction,
} from './induction-probe.ts'
export { renderSvg, type PlotSpec } from './plot.ts'
export { dynamicsPlotSpec } from './dynamics-plot.ts'
