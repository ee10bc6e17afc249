/**
 * Stage analysis of a simulated trajectory: the generic detectors of `stages.ts` applied with
 * the exact plateaus `L_j`.
 *
 * @module
 */
import { parseConfig } from '@attnlab/core/schema'
import {
  simulate,
  simulateOptionsSchema,
  trajectorySpanMass,
  type SimulateOptions,
  type Trajectory,
} from './simulate.ts'
import {
  analyzeStages,
  pick,
  stageAnalysisOptionsSchema,
  type StageAnalysis,
  type StageAnalysisOptions,
} from './stages.ts'
import type { DynamicsConfig } from './config.ts'

/**
 * Transitions (loss crossing the midpoints between the exact plateaus `L_j`), which head took
 * which span (by the share of the span's target each head fits, {@link Trajectory.spanShare};
 * attention argmax can mislead at the flow's mixed minima), and the competitive/cooperative
 * phases (by attention span mass) of a trajectory. The ODE is noise-free, so no smoothing is
 * applied unless asked for.
 *
 * @param trajectory - from {@link simulate}
 * @param options - detection and phase thresholds (see {@link analyzeStages})
 * @returns the analysis (times in ODE time units)
 * @category Simulation
 */
export function analyzeTrajectory(trajectory: Trajectory, options: StageAnalysisOptions = {}): StageAnalysis {
  return analyzeStages(
    {
      time: trajectory.times,
      loss: trajectory.loss,
      plateaus: trajectory.plateaus,
      spanMass: trajectorySpanMass(trajectory, 'spanMass'),
      ownership: trajectorySpanMass(trajectory, 'spanShare'),
    },
    options,
  )
}

/**
 * A trajectory with its stage analysis.
 *
 * @category Simulation
 */
export interface SimulationResult {
  /** The sampled trajectory. */
  readonly trajectory: Trajectory
  /** Its transitions, head assignments and phases. */
  readonly analysis: StageAnalysis
}

/** The options of {@link simulateAndAnalyze}: the simulation's and the stage analysis' in one object. */
const simulateAndAnalyzeOptionsSchema = simulateOptionsSchema.extend(stageAnalysisOptionsSchema.shape)

/**
 * {@link simulate} then {@link analyzeTrajectory}.
 *
 * @param config - any subset of {@link DynamicsConfig}
 * @param options - sample times, tolerances, detection thresholds
 * @returns the trajectory and its stage analysis
 * @throws as {@link simulate}
 * @example
 * ```ts
 * const { analysis } = simulateAndAnalyze({ initNoise: 1e-6, seed: 1 })
 * analysis.transitions[0]?.time // about 4.55
 * ```
 * @category Simulation
 */
export function simulateAndAnalyze(
  config: Partial<DynamicsConfig> = {},
  options: SimulateOptions & StageAnalysisOptions = {},
): SimulationResult {
  parseConfig(simulateAndAnalyzeOptionsSchema, options, 'simulateAndAnalyze')
  const trajectory = simulate(config, pick(options, simulateOptionsSchema))
  return { trajectory, analysis: analyzeTrajectory(trajectory, pick(options, stageAnalysisOptionsSchema)) }
}
