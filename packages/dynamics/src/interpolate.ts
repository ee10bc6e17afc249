/**
 * Piecewise-linear interpolation of sampled curves (a run's or the ODE's loss against steps or
 * time), by bisection over the sample positions.
 *
 * @module
 */
import { InvalidArgumentError, ShapeError } from '@attnlab/core'

/** What {@link interpolateLinear} returns outside the samples' range. */
export interface InterpolateOptions {
  /**
   * `'clamp'` (default): the first sample's value before it, the last one's after it; `'null'`:
   * `null` (for a curve that says nothing there, e.g. an ODE overlay shorter than the plot).
   */
  readonly outside?: 'clamp' | 'null'
}

/**
 * The value of the piecewise-linear curve through the samples `(xs[i], ys[i])` at `x`: found by
 * bisection (`O(log n)`), weighted between the two samples around `x`; at the ends exactly, the
 * first or last sample's value; outside `[xs[0], xs[n - 1]]`, the nearest end's value (clamped).
 *
 * @param xs - sample positions, ascending (not checked: O(n))
 * @param ys - sample values, as many as `xs`
 * @param x - where to read the curve, in the unit of `xs`
 * @returns the interpolated value
 * @throws `ShapeError` (`@attnlab/core`) when `xs` and `ys` differ in length
 * @throws `InvalidArgumentError` (`@attnlab/core`) when there are no samples or `x` is NaN
 * @example
 * ```ts
 * interpolateLinear([0, 10, 20], [3, 2, 0], 15) // 1
 * interpolateLinear([0, 10, 20], [3, 2, 0], 25) // 0 (clamped)
 * ```
 * @category Fitting
 */
export function interpolateLinear(xs: ArrayLike<number>, ys: ArrayLike<number>, x: number): number
/**
 * {@link interpolateLinear} with a choice of what to return outside the samples' range.
 *
 * @param xs - sample positions, ascending (not checked: O(n))
 * @param ys - sample values, as many as `xs`
 * @param x - where to read the curve, in the unit of `xs`
 * @param options - what to return outside `[xs[0], xs[n - 1]]` (default: clamp)
 * @returns the interpolated value, or `null` outside the range with `outside: 'null'`
 * @throws `ShapeError` (`@attnlab/core`) when `xs` and `ys` differ in length
 * @throws `InvalidArgumentError` (`@attnlab/core`) when there are no samples or `x` is NaN
 * @example
 * ```ts
 * interpolateLinear([0, 10, 20], [3, 2, 0], 25, { outside: 'null' }) // null
 * ```
 * @category Fitting
 */
export function interpolateLinear(
  xs: ArrayLike<number>,
  ys: ArrayLike<number>,
  x: number,
  options: InterpolateOptions,
): number | null
export function interpolateLinear(
  xs: ArrayLike<number>,
  ys: ArrayLike<number>,
  x: number,
  options: InterpolateOptions = {},
): number | null {
  const n = xs.length
  if (ys.length !== n) throw new ShapeError(`interpolateLinear: ${n} positions but ${ys.length} values`)
  if (n === 0) throw new InvalidArgumentError('interpolateLinear: expected at least one sample, got none')
  if (Number.isNaN(x)) throw new InvalidArgumentError('interpolateLinear: x is NaN', { value: x })
  const first = xs[0] as number
  const last = xs[n - 1] as number
  if (x < first || x > last) {
    if (options.outside === 'null') return null
    return (x < first ? ys[0] : ys[n - 1]) as number
  }
  if (x === first) return ys[0] as number
  if (x === last) return ys[n - 1] as number
  let lo = 0
  let hi = n - 1
  while (hi - lo > 1) {
    const mid = (lo + hi) >> 1
    if ((xs[mid] as number) <= x) lo = mid
    else hi = mid
  }
  const x0 = xs[lo] as number
  const x1 = xs[hi] as number
  const w = x1 > x0 ? (x - x0) / (x1 - x0) : 0
  return (ys[lo] as number) * (1 - w) + (ys[hi] as number) * w
}
