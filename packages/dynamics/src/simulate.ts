/**
 * `simulate`: integrates the reduced gradient flow and samples its trajectory (Yüksel et al.,
 * arXiv 2602.19143, Eq. (4)).
 *
 * @module
 */
import { ConfigError } from '@attnlab/core'
import {
  configSchema,
  enumField,
  integerField,
  listField,
  numberField,
  parseConfig,
  type z,
} from '@attnlab/core/schema'
import { resolveDynamicsConfig, type DynamicsConfig, type ResolvedDynamicsConfig } from './config.ts'
import { integrateAt, integratorOptionsSchema, type IntegrationStats } from './integrator.ts'
import { GradientFlowSystem } from './system.ts'
import { learningOrder, plateauLosses } from './target.ts'

/**
 * The schema of {@link SimulateOptions}: where to sample the trajectory (each option's meaning,
 * range and default, declared once; the CLI's `dynamics simulate` flags take their help and ranges
 * from it), then the integrator's error control ({@link integratorOptionsSchema}).
 *
 * @category Simulation
 */
export const simulateOptionsSchema = configSchema({
  /**
   * Final ODE time (dimensionless, > 0). Default 1000 for the replicator variant and 5000 for
   * the logit variant (long enough for all three stages of the reference configs).
   */
  tMax: numberField('final ODE time (default 1000 replicator, 5000 logit)', { min: 0, minExclusive: true }).optional(),
  /** Number of sample times after `t = 0`. */
  points: integerField('number of sample times after t = 0', { min: 1 }).default(1000),
  /**
   * `'log'` (default): `points` times log-spaced from `tMax * 1e-5` to `tMax`, which resolves the
   * early first transition and the late ones with the same relative precision; `'linear'`:
   * evenly spaced up to `tMax`. Both include `t = 0` first.
   */
  spacing: enumField('spacing of the sample times (both start at t = 0)', ['log', 'linear'] as const).default('log'),
  /** Explicit sample times (finite, >= 0, strictly increasing); overrides tMax/points/spacing. */
  times: listField('explicit sample times, strictly increasing', numberField('a sample time', { min: 0 })).optional(),
  ...integratorOptionsSchema.shape,
})

/**
 * Where to sample the trajectory, and the integrator's error control (see
 * {@link simulateOptionsSchema}).
 *
 * @category Simulation
 */
export type SimulateOptions = Readonly<z.input<typeof simulateOptionsSchema>>

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
  const { times: given, tMax: maxTime, points, spacing } = parseConfig(simulateOptionsSchema, options, 'simulate')
  if (given !== undefined) {
    const times = [...given]
    for (const [i, t] of times.entries()) {
      if (i > 0 && t <= (times[i - 1] as number)) {
        throw new ConfigError('times', `expected strictly increasing times; entry ${i} is ${t}`, { index: i, value: t })
      }
    }
    return times
  }
  const tMax = maxTime ?? (config.variant === 'logit' ? 5000 : 1000)
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
 * @throws `TooLargeError` (`@attnlab/core`) if the step budget runs out
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
  const { relativeTolerance, absoluteTolerance, maxSteps } = parseConfig(simulateOptionsSchema, options, 'simulate')
  const times = sampleTimes(resolved, options)
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
    { relativeTolerance, absoluteTolerance, maxSteps },
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
