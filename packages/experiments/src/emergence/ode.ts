/**
 * The reduced gradient-flow model (Yüksel et al., arXiv 2602.19143, Eq. 4; `@attnlab/dynamics`)
 * set up like a sparse-Markov run (same spans, importance m, heads and context length) and
 * time-scaled onto the run's validation loss: ODE time maps linearly to optimiser steps and the
 * ODE's regression loss maps to nats through the plateaus (stage progress units).
 */
import { fitTimeScale, plateauLosses, scaleOdeCurve, simulate, type TimeScaleFit } from '@attnlab/dynamics'
import type { SparseMarkovTask } from '@attnlab/markov'

/** The ODE curve on the run's axes. */
export interface OdeOverlay {
  /**
   * The ODE settings used; `spans` oldest first, as the task's `--spans` (the ODE itself gets
   * them most important first).
   */
  readonly config: {
    readonly nHeads: number
    readonly nCtx: number
    readonly spans: readonly number[]
    readonly m: number
    readonly initNoise: number
    readonly variant: 'replicator'
  }
  /** The fitted time scale (steps per unit of ODE time) and predicted vs observed transitions. */
  readonly fit: TimeScaleFit
  /** The ODE loss curve in steps and nats. */
  readonly curve: { readonly step: readonly number[]; readonly loss: readonly number[] }
  /** The run plateaus the curve was mapped through (nats). */
  readonly runPlateaus: readonly number[]
  /** The ODE's exact plateaus `L_0 > ... > L_K` (its own units, 1/2 squared Frobenius norm). */
  readonly odePlateaus: readonly number[]
}

/**
 * Simulates the reduced model for a sparse-Markov run and fits it to the run's curve.
 *
 * @param task - the run's task (spans, m, reverse)
 * @param nHeads - heads of the run's model
 * @param nCtx - positions each head attends over in the run (the model's input length)
 * @param steps - evaluation steps of the run
 * @param losses - validation losses (nats) at those steps
 * @param runPlateaus - the run's plateaus `P_0 > ... > P_K` (nats): its initial loss and each stage's plateau
 * @param seed - seed of the ODE's initial noise
 * @returns the overlay, or null when the run's plateaus are not strictly decreasing (no stage structure to fit)
 */
export function odeOverlay(
  task: SparseMarkovTask,
  nHeads: number,
  nCtx: number,
  steps: readonly number[],
  losses: readonly number[],
  runPlateaus: readonly number[],
  seed: number,
): OdeOverlay | null {
  const K = task.config.spans.length
  if (runPlateaus.length !== K + 1) return null
  for (let j = 1; j < runPlateaus.length; j++)
    if (!((runPlateaus[j] as number) < (runPlateaus[j - 1] as number))) return null
  // Dynamics spans are listed most important first.
  const spans = task.config.reverse === true ? [...task.config.spans] : [...task.config.spans].reverse()
  const config = {
    nHeads,
    nCtx: Math.max(
      nCtx,
      spans.reduce((a, b) => a + b, 0),
    ),
    spans: [...task.config.spans],
    m: task.config.m,
    initNoise: 1e-6,
    variant: 'replicator' as const,
  }
  const trajectory = simulate(
    {
      nHeads: config.nHeads,
      nCtx: config.nCtx,
      spans,
      importanceRatio: config.m,
      initNoise: config.initNoise,
      seed,
      variant: 'replicator',
    },
    { points: 400 },
  )
  const odePlateaus = plateauLosses(trajectory.config)
  const ode = { time: trajectory.times, loss: trajectory.loss, plateaus: odePlateaus }
  const run = { time: steps, loss: losses, plateaus: runPlateaus }
  const fit = fitTimeScale(ode, run, { method: 'curve' })
  const scaled = scaleOdeCurve(ode, fit, runPlateaus)
  const lastStep = steps[steps.length - 1] ?? 0
  const step: number[] = []
  const loss: number[] = []
  for (let i = 0; i < scaled.step.length; i++) {
    const s = scaled.step[i] as number
    if (s > lastStep * 1.05) break
    step.push(s)
    loss.push(scaled.loss[i] as number)
  }
  return { config, fit, curve: { step, loss }, runPlateaus, odePlateaus }
}
