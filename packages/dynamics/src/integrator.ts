/**
 * The ODE integrator: ODEX (E. Hairer & G. Wanner's Gragg-Bulirsch-Stoer extrapolation code,
 * "Solving Ordinary Differential Equations I", section II.9), from the npm package `odex`.
 *
 * Why this integrator (see the package README for the full evaluation):
 * - it is adaptive and error-controlled (mixed absolute/relative tolerance per component, order
 *   and step-size control), so it strides across the long plateaus (t ~ 1e3 - 1e4) with steps of
 *   several time units and shortens them only through the transitions;
 * - the reduced flow is not stiff in the sense that matters for explicit methods (its Jacobian's
 *   eigenvalues are bounded by about `max_j c_j^2 |span_j|`); the saddles are slow, not stiff;
 * - it is dependency-free pure JavaScript (runs unchanged on Node 20 and in browsers), and its
 *   high, self-selected order (up to 18) needs far fewer steps at tight tolerances than the
 *   fifth-order alternatives checked: `ode45-cash-karp` (scijs; one scalar tolerance, and it
 *   silently accepts steps once its minimum step is reached) and mathjs' `solveODE` (absolute
 *   tolerance only, reports only its own steps, generic slow arithmetic).
 *
 * The solution is sampled at the requested times by restarting the solver at each of them
 * (passing the last step size on), not with ODEX's dense output: `odex`'s dense-output closure
 * looks each component up with a linear scan, which makes sampling O(n^2) per time point, while
 * restarts cost O(n) per point. Every sample therefore carries the solver's full accuracy.
 *
 * @module
 */
import * as odexModule from '#odex'
import { TooLargeError } from '@attnlab/core'
import { configSchema, integerField, numberField, parseConfig, type z } from '@attnlab/core/schema'

/**
 * `odex` is CommonJS. Node's ESM loader exposes `module.exports` as the default export but does
 * not detect every named export (`Outcome` is assigned in a pattern its lexer misses), while
 * CommonJS transpilers hand over `module.exports` itself; accept both.
 */
const odex: typeof odexModule = (odexModule as unknown as { default?: typeof odexModule }).default ?? odexModule

/** A tolerance per component, in (0, 1). */
const TOLERANCE = { min: 0, max: 1, minExclusive: true, maxExclusive: true } as const

/**
 * The schema of {@link IntegratorOptions}: the integrator's error control and step budget, each
 * with its meaning, range and default, declared once.
 *
 * @category Simulation
 */
export const integratorOptionsSchema = configSchema({
  /** Relative tolerance per component, in (0, 1). */
  relativeTolerance: numberField('relative tolerance per component', TOLERANCE).default(1e-8),
  /** Absolute tolerance per component, in (0, 1). */
  absoluteTolerance: numberField('absolute tolerance per component', TOLERANCE).default(1e-8),
  /** Maximum number of solver steps over the whole run. */
  maxSteps: integerField('maximum solver steps over the whole run', { min: 1 }).default(1_000_000),
})

/**
 * Error control and limits of the integration (see {@link integratorOptionsSchema}: tolerances
 * 1e-8, at most 1e6 steps by default).
 *
 * @category Simulation
 */
export type IntegratorOptions = Readonly<z.input<typeof integratorOptionsSchema>>

/**
 * Work counters of one integration.
 *
 * @category Simulation
 */
export interface IntegrationStats {
  /** Solver steps taken (accepted and rejected). */
  readonly steps: number
  /** Rejected steps. */
  readonly rejectedSteps: number
  /** Right-hand-side evaluations. */
  readonly evaluations: number
  /** Wall-clock time of the integration, milliseconds. */
  readonly wallTimeMs: number
}

/**
 * The integrator options with their defaults, checked against {@link integratorOptionsSchema}.
 *
 * @throws `ConfigError` (`@attnlab/core`) naming the option, for an unknown one (did you mean) or a bad value
 */
export function resolveIntegratorOptions(options: IntegratorOptions = {}): z.output<typeof integratorOptionsSchema> {
  return parseConfig(integratorOptionsSchema, options, 'integrator')
}

/**
 * Integrates `dy/dt = f(y)` from `t = 0` and reports the solution at each requested time.
 *
 * @param derivative - the autonomous right-hand side, returning a new array
 * @param y0 - the state at `t = 0`
 * @param times - increasing sample times, all >= 0 (a time equal to the current one is sampled
 *   without stepping)
 * @param onSample - called with `(index, time, y)` for each requested time, in order
 * @param options - tolerances and step budget
 * @returns work counters
 * @throws `ConfigError` (`@attnlab/core`) for an unknown option or a bad value
 * @throws `TooLargeError` (`@attnlab/core`) when the step budget runs out
 * @throws whatever `derivative` or `onSample` throw (for example a non-finite error)
 * @category Simulation
 */
export function integrateAt(
  derivative: (y: number[]) => number[],
  y0: readonly number[],
  times: readonly number[],
  onSample: (index: number, time: number, y: readonly number[]) => void,
  options: IntegratorOptions = {},
): IntegrationStats {
  const { relativeTolerance, absoluteTolerance, maxSteps } = resolveIntegratorOptions(options)
  const start = performance.now()
  const solver = new odex.Solver(y0.length)
  solver.relativeTolerance = relativeTolerance
  solver.absoluteTolerance = absoluteTolerance
  solver.denseOutput = false
  const f = (_t: number, y: number[]): number[] => derivative(y)
  let y = [...y0]
  let t = 0
  let step = 1e-4 // ODEX's own default first step
  let steps = 0
  let rejectedSteps = 0
  let evaluations = 0
  for (const [index, target] of times.entries()) {
    if (target > t) {
      if (steps >= maxSteps) throw stepBudgetError(maxSteps, t, target)
      solver.initialStepSize = Math.min(step, target - t)
      solver.maxSteps = maxSteps - steps
      let lastFullStep = step
      const result = solver.solve(f, t, y, target, (n, xOld, x) => {
        // The final step is clipped to land on `target`; keep the last unclipped one.
        if (n > 1 && x < target) lastFullStep = x - xOld
      })
      steps += result.nStep
      rejectedSteps += result.nReject
      evaluations += result.nEval
      if (result.outcome !== odex.Outcome.Converged) throw stepBudgetError(maxSteps, t, target)
      step = lastFullStep
      y = result.y
      t = target
    }
    onSample(index, t, y)
  }
  return { steps, rejectedSteps, evaluations, wallTimeMs: performance.now() - start }
}

function stepBudgetError(maxSteps: number, time: number, target: number): TooLargeError {
  return new TooLargeError(
    `the ODE integration needed more than ${maxSteps} steps to reach t = ${target} (stopped after t = ${time}); ` +
      'raise maxSteps or loosen the tolerances',
    { maxSteps, time, target },
  )
}
