/**
 * Fitting the ODE to a training run: the time scale that maps ODE time to optimiser steps, and
 * predicted vs observed transition steps.
 *
 * Normalisation. The ODE's loss is a regression loss (1/2 squared Frobenius norm) and a run's is
 * cross-entropy (nats), so curves are compared in **stage progress** units: each curve's loss is
 * mapped piecewise-linearly through its own plateaus, `P_j -> j` (the ODE's `L_j`, the run's
 * `H_n` oracles), so `progress = j + (P_j - loss) / (P_j - P_{j+1})` between plateaus `j` and
 * `j+1`, linearly extended beyond `P_0` and `P_K`. Progress 0 is the no-context level, `K` the
 * fully fitted model; plateau `j` of either curve sits at progress `j`. Both curves need the
 * same number of plateaus. (A run whose plateaus sit below its oracles shows progress slightly
 * above the integer on each plateau; pass the run's observed plateau levels instead of the
 * oracles if you have them.)
 *
 * @module
 */
import { InvalidArgumentError, ShapeError } from '@attnlab/core'
import { configSchema, enumField, numberField, parseConfig, type z } from '@attnlab/core/schema'
import { interpolateLinear } from './interpolate.ts'
import { checkPlateaus, detectTransitions, transitionDetectionOptionsSchema } from './stages.ts'

/**
 * Stage progress of one loss value (see the module comment): `P_j -> j`, piecewise linear.
 *
 * @param loss - a loss in the plateaus' unit
 * @param plateaus - `P_0 > ... > P_K`
 * @returns progress in stage units (0 at `P_0`, `K` at `P_K`; extrapolated outside)
 * @throws `InvalidArgumentError` (`@attnlab/core`) for plateaus that are not strictly decreasing
 * @example
 * ```ts
 * stageProgress(1.2225, [6.12105, 1.945, 0.5, 0]) // 1.5: halfway from L_1 to L_2
 * ```
 * @category Fitting
 */
export function stageProgress(loss: number, plateaus: readonly number[]): number {
  checkPlateaus(plateaus)
  return progressUnchecked(loss, plateaus)
}

function progressUnchecked(loss: number, plateaus: readonly number[]): number {
  const K = plateaus.length - 1
  let j = 0
  while (j < K - 1 && loss < (plateaus[j + 1] as number)) j++
  const high = plateaus[j] as number
  const low = plateaus[j + 1] as number
  return j + (high - loss) / (high - low)
}

function lossAtProgress(progress: number, plateaus: readonly number[]): number {
  const K = plateaus.length - 1
  const j = Math.min(K - 1, Math.max(0, Math.floor(progress)))
  const high = plateaus[j] as number
  const low = plateaus[j + 1] as number
  return high - (progress - j) * (high - low)
}

/**
 * Maps a loss from one curve's units to another's through their plateaus (equal stage
 * progress), e.g. an ODE loss to the nats of a run with oracle plateaus `H_n`, for overlays.
 *
 * @param loss - a loss in the units of `from`
 * @param from - plateaus of the source curve, `P_0 > ... > P_K`
 * @param to - plateaus of the destination curve, same length
 * @returns the loss in the units of `to`
 * @throws `InvalidArgumentError` (`@attnlab/core`) for invalid plateaus or different lengths
 * @category Fitting
 */
export function mapLossBetweenPlateaus(loss: number, from: readonly number[], to: readonly number[]): number {
  checkPlateaus(from, 'from')
  checkPlateaus(to, 'to')
  if (from.length !== to.length) {
    throw new InvalidArgumentError(`from has ${from.length} plateaus but to has ${to.length}; expected the same number`)
  }
  return lossAtProgress(progressUnchecked(loss, from), to)
}

/**
 * A loss curve with its plateaus.
 *
 * @category Fitting
 */
export interface LossCurve {
  /** Sample times: ODE time for the model, optimiser steps for a run; `[n]`, non-decreasing. */
  readonly time: ArrayLike<number>
  /** Losses, `[n]`, in the plateaus' unit. */
  readonly loss: ArrayLike<number>
  /** `P_0 > ... > P_K` (ODE: `L_j`; run: `H_n` oracles, nats). */
  readonly plateaus: readonly number[]
}

/**
 * The schema of {@link TimeScaleFitOptions}: each option's meaning and default, declared once.
 *
 * @category Fitting
 */
export const timeScaleFitOptionsSchema = configSchema({
  /**
   * `'curve'` (default): least squares between the two progress curves over all run samples;
   * `'transitions'`: least squares on log transition times (needs at least one transition
   * detected in both curves).
   */
  method: enumField('what is fitted: the progress curves or the transition times', [
    'curve',
    'transitions',
  ] as const).default('curve'),
  /** Known step offset: `step = scale * t + offset` (e.g. pre-training steps). */
  offset: numberField('known step offset: step = scale * t + offset').default(0),
  /** Detection options for the run's (noisy) curve. Default `{ smoothing: 5, persistence: 3 }`. */
  runDetection: transitionDetectionOptionsSchema.optional(),
  /** Detection options for the ODE curve. Default none. */
  odeDetection: transitionDetectionOptionsSchema.optional(),
})

/**
 * Options of {@link fitTimeScale} (see {@link timeScaleFitOptionsSchema}).
 *
 * @category Fitting
 */
export type TimeScaleFitOptions = Readonly<z.input<typeof timeScaleFitOptionsSchema>>

/**
 * Predicted vs observed step of one transition.
 *
 * @category Fitting
 */
export interface PredictedTransition {
  /** `j`: the transition into plateau `j`. */
  readonly stage: number
  /** ODE transition time, or null if the ODE did not reach it. */
  readonly odeTime: number | null
  /** `scale * odeTime + offset`, or null. */
  readonly predictedStep: number | null
  /** The run's detected transition step, or null. */
  readonly observedStep: number | null
  /** `(predicted - observed) / observed`, or null when either is missing. */
  readonly relativeError: number | null
}

/**
 * The best time scale and what it predicts.
 *
 * @category Fitting
 */
export interface TimeScaleFit {
  /** Optimiser steps per unit of ODE time. */
  readonly scale: number
  /** Step offset used (`step = scale * t + offset`). */
  readonly offset: number
  /** How the scale was fitted. */
  readonly method: 'curve' | 'transitions'
  /** Root-mean-square progress difference over the run's samples at this scale (stage units). */
  readonly rmse: number
  /** Per stage, predicted vs observed transition steps. */
  readonly transitions: readonly PredictedTransition[]
}

function checkCurve(curve: LossCurve, name: string): void {
  if (curve.time.length !== curve.loss.length) {
    throw new ShapeError(`${name}: time has ${curve.time.length} samples but loss has ${curve.loss.length}`)
  }
  if (curve.time.length < 2)
    throw new InvalidArgumentError(`${name}: expected at least two samples, got ${curve.time.length}`)
  checkPlateaus(curve.plateaus, `${name}.plateaus`)
}

/** Progress of the ODE at arbitrary times (linear interpolation in time, clamped at the ends). */
function progressInterpolator(curve: LossCurve): (t: number) => number {
  const times = curve.time
  const progress = Float64Array.from({ length: times.length }, (_, i) =>
    progressUnchecked(curve.loss[i] as number, curve.plateaus),
  )
  return (t: number) => interpolateLinear(times, progress, t)
}

/** The detection options for a run's curve when none are given: a 5-sample median, 3 samples of persistence. */
const RUN_DETECTION = { smoothing: 5, persistence: 3 } as const

/**
 * Finds the time scale `a` (steps per unit ODE time) that best maps the ODE's loss curve onto a
 * training run's, in stage-progress units (see the module comment), and compares the predicted
 * transition steps `a * t_j + offset` with the run's detected ones.
 *
 * `'curve'` minimises the mean squared progress difference over the run's samples (progress
 * clamped to `[-0.5, K + 0.5]` against outliers): a 600-point log grid over `a` spanning six
 * decades around `lastStep / lastOdeTime`, then golden-section refinement. `'transitions'`
 * averages `log((step_j - offset) / t_j)` over the stages detected in both curves.
 *
 * @param ode - the ODE curve (`time` = ODE time, `plateaus` = `L_j`)
 * @param run - the training curve (`time` = steps, `plateaus` = e.g. `H_n` in nats)
 * @param options - method, offset and detection options
 * @returns the fitted scale, its RMSE and predicted vs observed transitions
 * @throws `ShapeError` (`@attnlab/core`) when a curve's arrays differ in length
 * @throws `InvalidArgumentError` (`@attnlab/core`) for invalid curves, plateau counts that differ,
 *   or `'transitions'` with no transition detected in both curves
 * @throws `ConfigError` (`@attnlab/core`) for an unknown option name (the message lists the allowed ones)
 * @example
 * ```ts
 * const trajectory = simulate()
 * const fit = fitTimeScale(
 *   { time: trajectory.times, loss: trajectory.loss, plateaus: trajectory.plateaus },
 *   { time: steps, loss: validationLoss, plateaus: [h0, h1, h2, h3] },
 * )
 * fit.scale // steps per ODE time unit
 * ```
 * @category Fitting
 */
export function fitTimeScale(ode: LossCurve, run: LossCurve, options: TimeScaleFitOptions = {}): TimeScaleFit {
  const { method, offset, runDetection, odeDetection } = parseConfig(timeScaleFitOptionsSchema, options, 'fitTimeScale')
  checkCurve(ode, 'ode')
  checkCurve(run, 'run')
  if (ode.plateaus.length !== run.plateaus.length) {
    throw new InvalidArgumentError(
      `the ODE has ${ode.plateaus.length} plateaus but the run has ${run.plateaus.length}; expected the same ` +
        'number of stages',
    )
  }
  const K = ode.plateaus.length - 1
  const odeTransitions = detectTransitions(ode.time, ode.loss, ode.plateaus, odeDetection ?? {})
  const runTransitions = detectTransitions(run.time, run.loss, run.plateaus, runDetection ?? RUN_DETECTION)
  const odeProgress = progressInterpolator(ode)
  const clamp = (p: number): number => Math.min(K + 0.5, Math.max(-0.5, p))
  const runProgress = Float64Array.from({ length: run.time.length }, (_, i) =>
    clamp(progressUnchecked(run.loss[i] as number, run.plateaus)),
  )
  const objective = (scale: number): number => {
    let sum = 0
    for (let i = 0; i < runProgress.length; i++) {
      const t = ((run.time[i] as number) - offset) / scale
      const d = (runProgress[i] as number) - clamp(odeProgress(t))
      sum += d * d
    }
    return sum / runProgress.length
  }
  let scale: number
  if (method === 'transitions') {
    const logs: number[] = []
    for (let j = 0; j < K; j++) {
      const t = odeTransitions[j]?.time ?? null
      const step = runTransitions[j]?.time ?? null
      if (t !== null && step !== null && t > 0 && step - offset > 0) logs.push(Math.log((step - offset) / t))
    }
    if (logs.length === 0) {
      throw new InvalidArgumentError(
        'no stage transition was detected in both the ODE and the run; use method "curve"',
        {
          odeTransitions: odeTransitions.map((t) => t.time),
          runTransitions: runTransitions.map((t) => t.time),
        },
      )
    }
    scale = Math.exp(logs.reduce((a, b) => a + b, 0) / logs.length)
  } else {
    const lastStep = Math.max(Math.abs((run.time[run.time.length - 1] as number) - offset), 1e-12)
    const lastTime = Math.max(ode.time[ode.time.length - 1] as number, 1e-12)
    const center = Math.log(lastStep / lastTime)
    const lo = center - 3 * Math.LN10
    const hi = center + 3 * Math.LN10
    const grid = 600
    let best = 0
    let bestValue = Infinity
    const logScales = Array.from({ length: grid }, (_, i) => lo + ((hi - lo) * i) / (grid - 1))
    for (const [i, logScale] of logScales.entries()) {
      const value = objective(Math.exp(logScale))
      if (value < bestValue) {
        bestValue = value
        best = i
      }
    }
    // Golden-section search in the bracket around the best grid point.
    let a = logScales[Math.max(0, best - 1)] as number
    let b = logScales[Math.min(grid - 1, best + 1)] as number
    const ratio = (Math.sqrt(5) - 1) / 2
    let x1 = b - ratio * (b - a)
    let x2 = a + ratio * (b - a)
    let f1 = objective(Math.exp(x1))
    let f2 = objective(Math.exp(x2))
    for (let iteration = 0; iteration < 60 && b - a > 1e-10; iteration++) {
      if (f1 <= f2) {
        b = x2
        x2 = x1
        f2 = f1
        x1 = b - ratio * (b - a)
        f1 = objective(Math.exp(x1))
      } else {
        a = x1
        x1 = x2
        f1 = f2
        x2 = a + ratio * (b - a)
        f2 = objective(Math.exp(x2))
      }
    }
    const refined = f1 <= f2 ? x1 : x2
    scale = Math.exp(Math.min(f1, f2) <= bestValue ? refined : (logScales[best] as number))
  }
  const transitions: PredictedTransition[] = []
  for (let j = 0; j < K; j++) {
    const odeTime = odeTransitions[j]?.time ?? null
    const observedStep = runTransitions[j]?.time ?? null
    const predictedStep = odeTime === null ? null : scale * odeTime + offset
    transitions.push({
      stage: j + 1,
      odeTime,
      predictedStep,
      observedStep,
      relativeError:
        predictedStep === null || observedStep === null || observedStep === 0
          ? null
          : (predictedStep - observedStep) / observedStep,
    })
  }
  return { scale, offset, method, rmse: Math.sqrt(objective(scale)), transitions }
}

/**
 * An ODE curve in a run's coordinates.
 *
 * @category Fitting
 */
export interface ScaledCurve {
  /** Optimiser steps, `[n]`. */
  readonly step: Float64Array
  /** Loss in the run's unit (e.g. nats), `[n]`. */
  readonly loss: Float64Array
}

/**
 * The ODE curve in a run's coordinates, for overlays: times `scale * t + offset` (steps) and
 * losses mapped through the plateaus ({@link mapLossBetweenPlateaus}).
 *
 * @param ode - the ODE curve
 * @param fit - from {@link fitTimeScale}
 * @param runPlateaus - the run's plateaus (same count as the ODE's)
 * @returns `{ step, loss }`, `[n]` each
 * @throws `InvalidArgumentError` (`@attnlab/core`) for invalid or mismatched plateaus
 * @category Fitting
 */
export function scaleOdeCurve(
  ode: LossCurve,
  fit: Pick<TimeScaleFit, 'scale' | 'offset'>,
  runPlateaus: readonly number[],
): ScaledCurve {
  checkCurve(ode, 'ode')
  mapLossBetweenPlateaus(ode.plateaus[0] as number, ode.plateaus, runPlateaus)
  const n = ode.time.length
  const step = new Float64Array(n)
  const loss = new Float64Array(n)
  for (let i = 0; i < n; i++) {
    step[i] = fit.scale * (ode.time[i] as number) + fit.offset
    loss[i] = lossAtProgress(progressUnchecked(ode.loss[i] as number, ode.plateaus), runPlateaus)
  }
  return { step, loss }
}
