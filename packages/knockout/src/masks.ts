/**
 * Knockout masks: which heads each evaluation knocks out. A set of masks is a 0/1 matrix
 * `[count, N]` (row-major `Uint8Array`, 1 = knocked out, the paper's convention), N heads in
 * layer-major order. Random designs for compressed sensing follow Bair et al. (arXiv
 * 2603.03335, as in the authors' released code): i.i.d. Bernoulli(fraction) entries, or a
 * balanced ("stratified") design with exactly `k` heads per mask, each mask taking the heads used
 * least so far (ties broken at random), so every head is knocked out `floor(Mk/N)` or
 * `ceil(Mk/N)` times. Unlike the authors' released code, both designs are seeded.
 *
 * @module
 */
import { checkRange, InvalidArgumentError, Rng } from '@attnlab/core'
import {
  configSchema,
  customField,
  enumField,
  integerField,
  numberField,
  parseConfig,
  type z,
} from '@attnlab/core/schema'
import { headCount, headIndex, type HeadLayout, type HeadRef } from './heads.ts'

/**
 * A set of knockout masks.
 *
 * @category Masks
 */
export interface KnockoutMasks {
  /** Number of masks `M`. */
  readonly count: number
  /** Number of heads `N` (columns). */
  readonly heads: number
  /** `[count, heads]` row-major, 1 = head knocked out in that mask. */
  readonly data: Uint8Array
}

/**
 * How random masks are drawn: `iid` (each head knocked out independently with probability
 * `fraction`; a mask that came out empty is redrawn) or `balanced` (exactly
 * `k = max(1, floor(fraction * N))` heads per mask, least-used heads first).
 *
 * @category Masks
 */
export type MaskDesign = 'iid' | 'balanced'

/**
 * Options of {@link randomMasks}.
 *
 * @category Masks
 */
export type RandomMaskOptions = Readonly<z.input<typeof randomMaskOptionsSchema>>

/**
 * The schema of {@link RandomMaskOptions}: each option's meaning, range and default, declared once.
 *
 * @category Masks
 */
export const randomMaskOptionsSchema = configSchema({
  /** Number of masks `M` (default 100, the paper's README setting); checked as `masks`, an integer >= 1. */
  count: customField<number>('number of masks M (default 100)').optional(),
  /** Fraction of heads knocked out per mask (default 0.02, at least one head). In (0, 1]. */
  fraction: numberField('fraction of heads knocked out per mask', { min: 0, max: 1, minExclusive: true }).default(0.02),
  /** `balanced` (default; the paper recommends `--stratified`) or `iid`. */
  design: enumField('mask design', ['balanced', 'iid'] as const satisfies readonly MaskDesign[]).default('balanced'),
  /** Seed of the draw (default 0). */
  seed: integerField('seed of the masks').default(0),
})

/**
 * Number of heads a balanced mask knocks out: `max(1, floor(fraction * N))` (the authors' released code's
 * `int(p * N)`, with the "at least one head" rule).
 *
 * @category Masks
 */
export function headsPerMask(fraction: number, heads: number): number {
  return Math.min(heads, Math.max(1, Math.floor(fraction * heads + 1e-9)))
}

/**
 * Draws `count` random knockout masks over the layout's heads (seeded).
 *
 * @param layout - the head grid (or `{ nLayers: 1, nHeads: N }` for N abstract features)
 * @param options - count (default 100), fraction (default 0.02), design (default balanced), seed
 * @returns the masks `[count, N]`, 1 = knocked out; every mask knocks out at least one head
 * @throws `ConfigError` (`@attnlab/core`) for a count < 1 or a fraction outside (0, 1]
 * @example
 * ```ts
 * const masks = randomMasks({ nLayers: 32, nHeads: 32 }, { count: 100, fraction: 0.02 }) // 20 heads per mask
 * ```
 * @category Masks
 */
export function randomMasks(layout: HeadLayout, options: RandomMaskOptions = {}): KnockoutMasks {
  const { fraction, design, seed } = parseConfig(randomMaskOptionsSchema, options, 'randomMasks')
  const count = options.count ?? 100
  checkRange('masks', count, { min: 1, integer: true })
  const n = headCount(layout)
  const rng = Rng.fromSeed(seed).split(`knockout/masks/${design}`)
  const data = new Uint8Array(count * n)
  if (design === 'iid') {
    for (let j = 0; j < count; j++) {
      const row = data.subarray(j * n, (j + 1) * n)
      let on = 0
      do {
        on = 0
        for (let i = 0; i < n; i++) {
          const bit = rng.float() < fraction ? 1 : 0
          row[i] = bit
          on += bit
        }
      } while (on === 0)
    }
  } else {
    const k = headsPerMask(fraction, n)
    const uses = new Float64Array(n)
    const order = Array.from({ length: n }, (_, i) => i)
    const tieBreak = new Float64Array(n)
    for (let j = 0; j < count; j++) {
      for (let i = 0; i < n; i++) tieBreak[i] = rng.float()
      order.sort(
        (a, b) => (uses[a] as number) - (uses[b] as number) || (tieBreak[a] as number) - (tieBreak[b] as number),
      )
      for (let t = 0; t < k; t++) {
        const i = order[t] as number
        data[j * n + i] = 1
        uses[i] = (uses[i] as number) + 1
      }
    }
  }
  return { count, heads: n, data }
}

/**
 * One mask per head knocking out that head alone (the exhaustive sweep's design), optionally
 * on top of a fixed set of heads (the greedy search's later rounds).
 *
 * @param layout - the head grid
 * @param options - `base`: heads knocked out in every mask; `candidates`: flat indices to sweep
 *   (default all heads not in `base`)
 * @returns `[candidates.length, N]`
 * @throws `InvalidArgumentError` (`@attnlab/core`) for a head outside the layout
 * @category Masks
 */
export function singleHeadMasks(
  layout: HeadLayout,
  options: { base?: readonly HeadRef[]; candidates?: readonly number[] } = {},
): KnockoutMasks {
  const n = headCount(layout)
  const base = (options.base ?? []).map((h) => headIndex(h, layout))
  const baseSet = new Set(base)
  const candidates = options.candidates ?? Array.from({ length: n }, (_, i) => i).filter((i) => !baseSet.has(i))
  const data = new Uint8Array(candidates.length * n)
  candidates.forEach((c, j) => {
    if (!Number.isSafeInteger(c) || c < 0 || c >= n)
      throw new InvalidArgumentError(`candidate head index ${c} is outside [0, ${n})`)
    for (const b of base) data[j * n + b] = 1
    data[j * n + c] = 1
  })
  return { count: candidates.length, heads: n, data }
}

/**
 * Masks from explicit head sets (one mask per set; an empty set is the unablated model).
 *
 * @param layout - the head grid
 * @param sets - the heads to knock out in each mask
 * @throws `InvalidArgumentError` (`@attnlab/core`) for a head outside the layout
 * @category Masks
 */
export function masksFromHeadSets(layout: HeadLayout, sets: readonly (readonly HeadRef[])[]): KnockoutMasks {
  const n = headCount(layout)
  const data = new Uint8Array(sets.length * n)
  sets.forEach((set, j) => {
    for (const head of set) data[j * n + headIndex(head, layout)] = 1
  })
  return { count: sets.length, heads: n, data }
}

/**
 * How often each head is knocked out across a set of masks.
 *
 * @returns `[N]` counts
 * @category Masks
 */
export function knockoutCounts(masks: KnockoutMasks): Int32Array {
  const counts = new Int32Array(masks.heads)
  for (let j = 0; j < masks.count; j++)
    for (let i = 0; i < masks.heads; i++)
      counts[i] = (counts[i] as number) + (masks.data[j * masks.heads + i] as number)
  return counts
}

/**
 * Checks a mask set's shape and values against a layout.
 *
 * @throws `InvalidArgumentError` (`@attnlab/core`) when `heads` differs from the layout's N, the
 *   data has the wrong length, or an entry is not 0 or 1
 * @category Masks
 */
export function checkMasks(masks: KnockoutMasks, layout: HeadLayout): void {
  const n = headCount(layout)
  const expected =
    `a KnockoutMasks object { count, heads: ${n}, data: Uint8Array } (the model has ${n} heads: ` +
    `${layout.nLayers} layers x ${layout.nHeads} heads; build one with masksFromHeadSets, singleHeadMasks or ` +
    'randomMasks)'
  if (Array.isArray(masks)) {
    const widths = [...new Set((masks as unknown[]).map((row) => (Array.isArray(row) ? row.length : -1)))]
    const got =
      widths.length === 1 && widths[0] !== -1
        ? `a plain array of ${masks.length} mask(s) of ${widths[0]} heads`
        : `a plain array of ${masks.length} entries`
    throw new InvalidArgumentError(`masks is ${got}; expected ${expected}`, { expectedHeads: n })
  }
  if (
    masks === null ||
    typeof masks !== 'object' ||
    !(masks.data instanceof Uint8Array) ||
    typeof masks.heads !== 'number'
  ) {
    throw new InvalidArgumentError(`masks is not a KnockoutMasks object; expected ${expected}`, {
      expectedHeads: n,
    })
  }
  if (masks.heads !== n)
    throw new InvalidArgumentError(
      `masks cover ${masks.heads} heads; the model has ${n} (${layout.nLayers} layers x ${layout.nHeads} heads)`,
    )
  if (!Number.isSafeInteger(masks.count) || masks.count < 0 || masks.data.length !== masks.count * n) {
    throw new InvalidArgumentError(
      `mask data has ${masks.data.length} entries; expected count * heads = ${masks.count * n}`,
    )
  }
  for (let i = 0; i < masks.data.length; i++) {
    const v = masks.data[i] as number
    if (v !== 0 && v !== 1)
      throw new InvalidArgumentError(
        `mask ${Math.floor(i / n)} head ${i % n} is ${v}; expected 0 (kept) or 1 (knocked out)`,
      )
  }
}

/**
 * A default measurement design for compressed sensing: how many random masks, and how many heads
 * each knocks out, for `top` capability heads among N. See {@link measurementPlan}.
 *
 * @category Masks
 */
export interface MeasurementPlan {
  /** Heads N. */
  readonly heads: number
  /** Sparsity k assumed: `min(top, N)`. */
  readonly sparsity: number
  /** Masks M = `ceil(2 k ln(1 + N / k))` (evaluations). */
  readonly masks: number
  /** Heads knocked out per mask: `max(floor(0.02 N), ceil(3 N / M))`, at most `ceil(N / 2)`. */
  readonly headsPerMask: number
  /** `headsPerMask / N`, the `fraction` that gives it (balanced design). */
  readonly fraction: number
  /** Evaluations of the exhaustive single-head sweep, N + 1. */
  readonly exhaustiveEvaluations: number
  /**
   * True when M would not save at least half of the sweep's N + 1 evaluations (`2 M > N + 1`): run
   * the exact exhaustive sweep instead, since the Lasso's estimate is not worth a smaller saving.
   */
  readonly useExhaustive: boolean
}

/**
 * Heads each of M random masks knocks out by default, so that each of N heads is knocked out in
 * about 3 masks: `max(floor(0.02 N), ceil(3 N / M))` (the paper's 2% once N is large), between 1
 * and `ceil(N / 2)`. See {@link measurementPlan}.
 *
 * @param heads - N
 * @param masks - M
 * @category Masks
 */
export function defaultHeadsPerMask(heads: number, masks: number): number {
  return Math.max(1, Math.min(Math.ceil(heads / 2), Math.max(Math.floor(0.02 * heads), Math.ceil((3 * heads) / masks))))
}

/**
 * The default measurement design for `top` capability heads among the layout's N heads.
 *
 * Compressed sensing recovers a k-sparse vector of head effects from `O(k log(N / k))` random
 * measurements (Bair et al., arXiv 2603.03335, section 3; the classical bound for random
 * designs), so the number of masks grows with the logarithm of the head count instead of the
 * paper's fixed 100: `M = ceil(2 k ln(1 + N / k))` with `k = min(top, N)` (e.g. 15 masks for 16
 * heads, 22 for 40, 53 for 1024 at k = 5). Every head should be knocked out in about 3 masks for
 * its coefficient to be estimable, so a mask knocks out `max(floor(0.02 N), ceil(3 N / M))` heads
 * (the paper's 2% once N is large), at most half of them. When M does not save at least half of
 * the exhaustive sweep's N + 1 evaluations ({@link MeasurementPlan.useExhaustive}: `2 M > N + 1`),
 * the plan says to sweep instead: on models whose heads all move a capability a little (measured
 * on aidreams260K, 16 heads, and stories260K, 40 heads: the default masks found only 40-60% of
 * the sweep's top 5), compressed sensing pays only where it saves most of the evaluations, which
 * is from about 60 heads on (64 heads: 27 masks against 65).
 *
 * @param layout - the head grid
 * @param top - the number of capability heads sought (default 5, the paper's top-k)
 * @returns the plan (masks, heads per mask, fraction, and whether the exhaustive sweep is cheaper)
 * @throws `ConfigError` (`@attnlab/core`) for a `top` that is not a positive integer
 * @example
 * ```ts
 * measurementPlan({ nLayers: 8, nHeads: 8 }) // { masks: 27, headsPerMask: 8, useExhaustive: false, ... }
 * measurementPlan({ nLayers: 5, nHeads: 8 }) // { masks: 22, ..., useExhaustive: true } (the sweep needs 41)
 * ```
 * @category Masks
 */
export function measurementPlan(layout: HeadLayout, top = 5): MeasurementPlan {
  checkRange('top', top, { min: 1, integer: true })
  const n = headCount(layout)
  const k = Math.min(top, n)
  const masks = Math.ceil(2 * k * Math.log(1 + n / k))
  const headsPerMask = defaultHeadsPerMask(n, masks)
  return {
    heads: n,
    sparsity: k,
    masks,
    headsPerMask,
    fraction: headsPerMask / n,
    exhaustiveEvaluations: n + 1,
    useExhaustive: 2 * masks > n + 1,
  }
}
