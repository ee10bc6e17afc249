/**
 * `simulate`: integrates the reduced gradient flow and samples its trajectory (Yüksel et al.,
 * arXiv 2602.19143, Eq. (4)).
 *
 * @module
 */
import { checkOptionKeys, ConfigError } from '@attnlab/core'
import { resolveDynamicsConfig, type DynamicsConfig, type ResolvedDynamicsConfig } from './config.ts'
import { integrateAt, resolveIntegratorOptions, type IntegrationStats, type IntegratorOptions } from './integrator.ts'
import { GradientFlowSystem } from './system.ts'
import { learningOrder, plateauLosses } from './target.ts'

/**
 * Where to sample the trajectory, and the integrator's error control.
 *
 * @category Simulation
 */
export interface SimulateOptions extends IntegratorOptions {
  /**
   * Final ODE time (dimensionless, > 0). Default 1000 for the replicator variant and 5000 for
   * the logit variant (long enough for all three stages of the reference configs).
   */
  readonly tMax?: number
  /** Number of sample times after `t = 0` (>= 1). Default 1000. */
  readonly points?: number
  /**
   * `'log'` (default): `points` times log-spaced from `tMax * 1e-5` to `tMax`, which resolves the
   * early first transition and the late ones with the same relative precision; `'linear'`:
   * evenly spaced up to `tMax`. Both include `t = 0` first.
   */
  readonly spacing?: 'log' | 'linear'
  /** Explicit sample times (finite, >= 0, strictly increasing); overrides tMax/points/spacing. */
  readonly times?: readonly number[]
}

/**
 * A sampled trajectory of the reduced model. All arrays are row-major and indexed by sample
 * first (`i` in `0 .. times.length - 1`).
 *
 * @category Simulation
 */
export interface Trajectory {
  /** The config that was simulated. */
  readonly config: ResolvedDynamicsConfig
  /** Sample times (dimensionless ODE time), `[nTimes]`. */
  readonly times: Float64Array
  /** Loss `1/2 ||G - sum_k V_k s_k^T||_F^2` at each sample, `[nTimes]`. */
  readonly loss: Float64Array
  /** Value vectors `V_k`, `[nTimes, nHeads, nFeatures]`. */
  readonly values: Float64Array
  /** Attention distributions `s_k`, `[nTimes, nHeads, nCtx]`. */
  readonly attention: Float64Array
  /** Attention mass of each head on each span, `[nTimes, nHeads, nSpans]`. */
  readonly spanMass: Float64Array
  /**
   * Share of span `j`'s target that head `k` fits, `V_k[j] * mass_k(j) / (c_j |span_j|)`,
   * `[nTimes, nHeads, nSpans]`. At a global minimum the shares of each span sum to 1. The flow
   * can end at a minimum where a head's attention mixes two spans while its value vector serves
   * one (other heads cancel the cross terms, the "cooperative correction"); the share says which
   * span a head actually fits, so {@link analyzeTrajectory} assigns heads by it.
   */
  readonly spanShare: Float64Array
  /** The exact plateau losses `L_0 .. L_K` ({@link plateauLosses}). */
  readonly plateaus: readonly number[]
  /** The order in which spans get fitted ({@link learningOrder}). */
  readonly learningOrder: readonly number[]
  /** Integrator work counters. */
  readonly stats: IntegrationStats
}

/** Every key of {@link SimulateOptions} (a misspelled one is rejected). */
export const SIMULATE_OPTION_KEYS: readonly string[] = Object.keys({
  tMax: 1,
  points: 1,
  spacing: 1,
  times: 1,
  relativeTolerance: 1,
  absoluteTolerance: 1,
  maxSteps: 1,
} satisfies Record<keyof SimulateOptions, 1>)

/**
 * The sample times {@link simulate} uses for a config and options: `options.times` as given, or
 * `t = 0` followed by `points` log- or linearly spaced times up to `tMax`.
 *
 * @param config - the variant decides the default `tMax`
 * @param options - see {@link SimulateOptions}
 * @returns increasing times, starting at 0 unless `times` says otherwise
 * @throws `ConfigError` (`@attnlab/core`) for invalid times, tMax, points or spacing
 * @category Simulation
 */
export function sampleTimes(config: Pick<DynamicsConfig, 'variant'>, options: SimulateOptions = {}): number[] {
  checkOptionKeys('simulate options', options, SIMULATE_OPTION_KEYS)
  if (options.times !== undefined) {
    const times = [...options.times]
    if (times.length === 0) throw new ConfigError('times', 'expected at least one sample time', { value: times })
    for (const [i, t] of times.entries()) {
      if (!Number.isFinite(t) || t < 0 || (i > 0 && t <= (times[i - 1] as number))) {
        throw new ConfigError('times', `expected finite, non-negative, strictly increasing times; entry ${i} is ${t}`, {
          index: i,
          value: t,
        })
      }
    }
    return times
  }
  const tMax = options.tMax ?? (config.variant === 'logit' ? 5000 : 1000)
  if (!Number.isFinite(tMax) || tMax <= 0)
    throw new ConfigError('tMax', `expected a finite number > 0, got ${tMax}`, { value: tMax })
  const points = options.points ?? 1000
  if (!Number.isSafeInteger(points) || points < 1) {
    throw new ConfigError('points', `expected an integer >= 1, got ${points}`, { value: points })
  }
  const spacing = options.spacing ?? 'log'
  if (spacing !== 'log' && spacing !== 'linear') {
    throw new ConfigError('spacing', `expected 'log' or 'linear', got '${String(spacing)}'`, { value: spacing })
  }
  const times = [0]
  for (let i = 1; i <= points; i++) {
    if (spacing === 'linear') times.push((tMax * i) / points)
    else times.push(points === 1 ? tMax : tMax * 10 ** (-5 * (1 - (i - 1) / (points - 1))))
  }
  times[times.length - 1] = tMax
  return times
}

/**
 * Integrates the reduced gradient flow from `V = 0`, `s_k = softmax(eps T z_k)` and samples it.
 *
 * The integrator is ODEX (adaptive Gragg-Bulirsch-Stoer extrapolation with error control, see
 * `integrator.ts`), restarted at each sample time; default tolerances `1e-8` relative and
 * absolute, on `V` and on the attention logits.
 *
 * @param config - any subset of {@link DynamicsConfig} (defaults: {@link defaultDynamicsConfig})
 * @param options - sample times and tolerances
 * @returns the sampled trajectory with the exact plateau values
 * @throws `ConfigError` (`@attnlab/core`) for an invalid config or options, an unknown field or
 *   option name included (`importanceRatios`, `tmax`: the message lists the allowed names)
 * @throws `NonFiniteError` (`@attnlab/core`) if the flow diverges
 * @throws `AttnlabError` (`@attnlab/core`) `TOO_LARGE` if the step budget runs out
 * @example
 * ```ts
 * const run = simulate({ nHeads: 3, nCtx: 40, importanceRatio: 1.7, initNoise: 1e-6 })
 * const stages = analyzeTrajectory(run)
 * stages.transitions.map((t) => t.time) // about [4.55, 50-65, 160-380]
 * ```
 * @category Simulation
 */
export function simulate(config: Partial<DynamicsConfig> = {}, options: SimulateOptions = {}): Trajectory {
  const resolved = resolveDynamicsConfig(config)
  checkOptionKeys('simulate options', options, SIMULATE_OPTION_KEYS)
  const times = sampleTimes(resolved, options)
  resolveIntegratorOptions(options)
  const system = new GradientFlowSystem(resolved)
  const { nHeads: h, nFeatures: F, nCtx: T } = system
  const K = resolved.spans.length
  const n = times.length
  const loss = new Float64Array(n)
  const values = new Float64Array(n * h * F)
  const attention = new Float64Array(n * h * T)
  const spanMass = new Float64Array(n * h * K)
  const spanShare = new Float64Array(n * h * K)
  const spanPositions = system.target.spanPositions
  const stats = integrateAt(
    (y) => system.derivative(y),
    system.initialState(),
    times,
    (i, _t, y) => {
      const snapshot = system.evaluate(y)
      loss[i] = snapshot.loss
      values.set(snapshot.values, i * h * F)
      attention.set(snapshot.attention, i * h * T)
      for (let k = 0; k < h; k++) {
        for (let j = 0; j < K; j++) {
          let mass = 0
          for (const p of spanPositions[j] as readonly number[]) mass += snapshot.attention[k * T + p] as number
          spanMass[(i * h + k) * K + j] = mass
          const blockSum = (resolved.spanWeights[j] as number) * (resolved.spans[j] as number)
          spanShare[(i * h + k) * K + j] = ((snapshot.values[k * F + j] as number) * mass) / blockSum
        }
      }
    },
    options,
  )
  return {
    config: resolved,
    times: Float64Array.from(times),
    loss,
    values,
    attention,
    spanMass,
    spanShare,
    plateaus: Object.freeze(plateauLosses(resolved)),
    learningOrder: Object.freeze(learningOrder(resolved)),
    stats,
  }
}

/**
 * The span masses (or span shares) of a trajectory as nested arrays `[time][head][span]` (views,
 * no copy), the shape the generic stage detectors take.
 *
 * @param trajectory - from {@link simulate}
 * @param field - `'spanMass'` (default) or `'spanShare'`
 * @category Simulation
 */
export function trajectorySpanMass(
  trajectory: Trajectory,
  field: 'spanMass' | 'spanShare' = 'spanMass',
): Float64Array[][] {
  const h = trajectory.config.nHeads
  const K = trajectory.config.spans.length
  const data = trajectory[field]
  const out: Float64Array[][] = []
  for (let i = 0; i < trajectory.times.length; i++) {
    const heads: Float64Array[] = []
    for (let k = 0; k < h; k++) heads.push(data.subarray((i * h + k) * K, (i * h + k + 1) * K))
    out.push(heads)
  }
  return out
}
