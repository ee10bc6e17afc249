/**
 * Emergence steps of single curves, by one written definition each (Baherwani et al., arXiv 2606.25010: each
 * output position of the linear map is learned in its own abrupt drop of its loss, at a seed-dependent step, and a
 * head that acquires its pattern shows a sudden drop of its attention entropy). The definitions are
 * {@link EMERGENCE_DEFINITIONS}, stated in `summary.json` and `docs/experiments/emergence.md`.
 *
 * @module
 */

/** Evaluations after step 0 whose median is a curve's plateau, and last evaluations whose median is its final value. */
const WINDOW = 3

/** The smallest plateau-to-final drop (nats) that counts as an emergence. */
export const MIN_EMERGENCE_DROP = 0.1

/**
 * The definitions of the emergence steps a run reports, worded for `summary.json`'s `definitions` and the docs.
 *
 * @category Emergence
 */
export const EMERGENCE_DEFINITIONS = Object.freeze({
  positionEmergence:
    'Per scored output position, from its validation loss l_i at the evaluations t_0 = 0 < t_1 < ... < t_n: ' +
    `plateau P = median of l at t_1..t_${WINDOW} (the first ${WINDOW} evaluations after step 0, once the ` +
    `untrained model's loss has fallen to the token frequencies), final F = median of l at the last ${WINDOW} ` +
    `evaluations; the position emerges when P - F >= ${MIN_EMERGENCE_DROP} nats, at the step where l crosses ` +
    'the threshold F + (P - F) / 2 (midway from plateau to final value) for the last time from above: the first ' +
    'evaluation t_i after which every l_j (j >= i) is at or below it, interpolated linearly between t_(i-1) and ' +
    't_i. null: no such drop within the run.',
  entropyDrop:
    "Per head, the same definition on the head's mean attention entropy (nats, over the analysed validation " +
    'sequences) instead of a loss: the step where it crosses midway from its plateau to its final value for the ' +
    `last time from above, when it falls by at least ${MIN_EMERGENCE_DROP} nats; null otherwise.`,
  largestEntropyFall:
    "Per head, the evaluation t_i that ends the interval (t_(i-1), t_i] over which the head's mean attention " +
    'entropy falls most, with that fall (nats); null for a head whose entropy never falls.',
  emergenceStep:
    'Per seed: the first stage step (sparse Markov chain: when some head first holds a span, more than 0.5 of its ' +
    'attention on it, persistently); for tasks without spans, the step at which the validation loss first falls, ' +
    'for 2 evaluations, below the midpoint between chance and the Bayes floor.',
})

/**
 * A curve's drop by the {@link EMERGENCE_DEFINITIONS} definition.
 *
 * @category Emergence
 */
export interface CurveDrop {
  /** The interpolated step of the last downward crossing of `threshold`. */
  readonly step: number
  /** The plateau: median of the first 3 (`WINDOW`) values after step 0. */
  readonly plateau: number
  /** The final value: median of the last 3 (`WINDOW`) values. */
  readonly final: number
  /** `final + (plateau - final) / 2`. */
  readonly threshold: number
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  const n = sorted.length
  return n % 2 === 1
    ? (sorted[(n - 1) / 2] as number)
    : 0.5 * ((sorted[n / 2 - 1] as number) + (sorted[n / 2] as number))
}

/**
 * The emergence step of one curve (a position's loss, a head's entropy) by the definition of
 * {@link EMERGENCE_DEFINITIONS}: plateau = median of the first three values after step 0, final = median of the
 * last three, emerged when the curve falls by at least `minDrop` from one to the other, at its last downward
 * crossing of the midpoint (interpolated between evaluations). Null values (unscored) are skipped.
 *
 * @param steps - evaluation steps, increasing
 * @param values - the curve at those steps (null where not measured)
 * @param minDrop - smallest plateau-to-final fall that counts (default {@link MIN_EMERGENCE_DROP} nats)
 * @returns the drop, or null when the curve does not fall by `minDrop` (or has fewer than two values)
 * @category Emergence
 */
export function curveDrop(
  steps: readonly number[],
  values: readonly (number | null)[],
  minDrop = MIN_EMERGENCE_DROP,
): CurveDrop | null {
  const points: { step: number; value: number }[] = []
  values.forEach((value, i) => {
    if (value !== null && Number.isFinite(value) && steps[i] !== undefined) points.push({ step: steps[i], value })
  })
  const after = points.filter((p) => p.step > 0)
  if (points.length < 2 || after.length === 0) return null
  const plateau = median(after.slice(0, WINDOW).map((p) => p.value))
  const final = median(points.slice(-WINDOW).map((p) => p.value))
  if (plateau - final < minDrop) return null
  const threshold = final + 0.5 * (plateau - final)
  // The first point after which the curve stays at or below the threshold.
  let first = points.length
  while (first > 0 && (points[first - 1] as { value: number }).value <= threshold) first--
  if (first === points.length) return null
  const at = points[first] as { step: number; value: number }
  if (first === 0) return { step: at.step, plateau, final, threshold }
  const before = points[first - 1] as { step: number; value: number }
  const step = before.step + ((at.step - before.step) * (before.value - threshold)) / (before.value - at.value)
  return { step, plateau, final, threshold }
}

/**
 * The evaluation interval over which a curve falls most (the "sudden drop" of a head's attention entropy).
 *
 * @param steps - evaluation steps, increasing
 * @param values - the curve at those steps
 * @returns the step ending that interval and the fall (positive), or null when the curve never falls
 * @category Emergence
 */
export function largestFall(
  steps: readonly number[],
  values: readonly (number | null)[],
): { readonly step: number; readonly fall: number } | null {
  let best: { step: number; fall: number } | null = null
  let previous: number | null = null
  for (let i = 0; i < values.length; i++) {
    const value = values[i]
    if (value === null || value === undefined || !Number.isFinite(value)) continue
    if (previous !== null && previous - value > (best?.fall ?? 0))
      best = { step: steps[i] as number, fall: previous - value }
    previous = value
  }
  return best
}

/**
 * One head's attention-entropy drop (`summary.json`'s `entropyDrops`).
 *
 * @category Emergence
 */
export interface HeadEntropyDrop {
  /** `L{layer}H{head}`. */
  readonly head: string
  /** {@link EMERGENCE_DEFINITIONS}' `entropyDrop` step, or null. */
  readonly step: number | null
  /** Plateau and final entropy (nats) of the definition. */
  readonly plateau: number | null
  readonly final: number | null
  /** {@link EMERGENCE_DEFINITIONS}' `largestEntropyFall`: the step and the fall (nats), or null. */
  readonly largestFall: { readonly step: number; readonly fall: number } | null
}

/**
 * Each head's entropy drop from a run's evaluations.
 *
 * @param steps - evaluation steps
 * @param entropy - per evaluation, each head's mean attention entropy (nats), in the order of `heads`; an empty
 *   row (a model without attention) gives no heads
 * @param heads - head names
 * @returns one entry per head (empty when the run has no attention entropy)
 * @category Emergence
 */
export function headEntropyDrops(
  steps: readonly number[],
  entropy: readonly (readonly number[])[],
  heads: readonly string[],
): HeadEntropyDrop[] {
  if (entropy.length === 0 || entropy.some((row) => row.length !== heads.length)) return []
  return heads.map((head, h) => {
    const series = entropy.map((row) => row[h] as number)
    const drop = curveDrop(steps, series)
    return {
      head,
      step: drop?.step ?? null,
      plateau: drop?.plateau ?? null,
      final: drop?.final ?? null,
      largestFall: largestFall(steps, series),
    }
  })
}
