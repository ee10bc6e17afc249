/**
 * `@attnlab/dynamics`: the reduced gradient-flow model of stage-wise learning of sparse
 * attention (Yüksel, Alvarez Lucendo, Flammarion, "Incremental Learning of Sparse Attention
 * Patterns in Transformers", arXiv 2602.19143; the reduced gradient flow of its Eq. (4)).
 *
 * - {@link simulate}: integrate `L(V, S) = 1/2 ||G - sum_k V_k s_k^T||_F^2` (replicator or logit
 *   flow, weight decay, fast-value limit) with an adaptive, error-controlled solver (ODEX).
 * - {@link plateauLosses}: the exact plateaus `L_j`.
 * - {@link analyzeStages} / {@link analyzeTrajectory}: transitions, which head took which span,
 *   competitive vs cooperative phases - on plain arrays, so training runs can use them too;
 *   {@link detectSpanStages} (stages of a run from its heads' span masses) and
 *   {@link detectCrossing} (a run's abrupt loss drops) are the criteria `attnlab emergence` uses.
 * - {@link fitTimeScale}: map ODE time to optimiser steps for a run and compare transition steps;
 *   {@link interpolateLinear}: a sampled curve read at any point (clamped or null outside).
 *
 * Units: ODE time is dimensionless; the ODE's loss is 1/2 the squared Frobenius norm.
 *
 * @packageDocumentation
 */
export {
  DYNAMICS_PRESETS,
  DYNAMICS_VARIANTS,
  defaultDynamicsConfig,
  dynamicsConfigSchema,
  resolveDynamicsConfig,
  type DynamicsConfig,
  type DynamicsVariant,
  type ResolvedDynamicsConfig,
} from './config.ts'
export { buildTarget, learningOrder, plateauLosses, type DynamicsTarget } from './target.ts'
export { GradientFlowSystem, type DynamicsSnapshot } from './system.ts'
export { integrateAt, integratorOptionsSchema, type IntegrationStats, type IntegratorOptions } from './integrator.ts'
export {
  sampleTimes,
  simulate,
  simulateOptionsSchema,
  trajectorySpanMass,
  type SimulateOptions,
  type Trajectory,
} from './simulate.ts'
export { analyzeTrajectory, simulateAndAnalyze, type SimulationResult } from './analysis.ts'
export {
  analyzeStages,
  assignHeads,
  classifyPhases,
  detectCrossing,
  detectSpanStages,
  detectTransitions,
  headSimilarity,
  phaseOptionsSchema,
  runningMedian,
  spanStageOptionsSchema,
  stageAnalysisOptionsSchema,
  transitionDetectionOptionsSchema,
  type HeadAssignment,
  type HeadSpan,
  type Phase,
  type PhaseOptions,
  type PhaseSegment,
  type SpanStage,
  type SpanStageOptions,
  type StageAnalysis,
  type StageAnalysisOptions,
  type StageInput,
  type StageTransition,
  type TakenSpan,
  type Transition,
  type TransitionDetectionOptions,
} from './stages.ts'
export {
  fitTimeScale,
  mapLossBetweenPlateaus,
  scaleOdeCurve,
  stageProgress,
  timeScaleFitOptionsSchema,
  type LossCurve,
  type PredictedTransition,
  type ScaledCurve,
  type TimeScaleFit,
  type TimeScaleFitOptions,
} from './fit.ts'
export { interpolateLinear, type InterpolateOptions } from './interpolate.ts'
