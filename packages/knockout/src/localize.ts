/**
 * Localization: which heads does a capability need? Three methods, all returning heads ranked
 * by importance with per-head scores and the number of model evaluations spent (one evaluation
 * = scoring the capability once under one mask):
 *
 * - {@link exhaustiveSweep}: knock out each head alone (N evaluations + 1 for the clean model);
 *   the "greedy search" baseline of the authors' released code.
 * - {@link greedySearch}: the iterative variant: k rounds, each sweeping the remaining heads with
 *   the heads found so far always knocked out (`sum_{i<k} (N - i)` evaluations + 1).
 * - {@link compressedSensing}: M random masks (default `ceil(2 k ln(1 + N / k))`, each head
 *   knocked out in about 3 of them; see {@link measurementPlan}), standardized scores, a Lasso of
 *   score on mask, heads ranked by most negative coefficient (Bair et al., arXiv 2603.03335, as
 *   in the authors' released code).
 *
 * @module
 */
import {
  customField,
  enumField,
  integerField,
  numberField,
  parseConfig,
  schemaDefaults,
  type z,
} from '@attnlab/core/schema'
import type { Transformer } from '@attnlab/transformer'
import { ABLATION_MODES, HeadAblation, type AblationMode, type ReferenceInputs } from './ablation.ts'
import { performance as performanceOf, type Capability, type MetricName } from './capability.ts'
import { headAt, headCount, type HeadLayout, type HeadRef } from './heads.ts'
import { lasso, lassoCV, lassoCVOptionsSchema, lassoOptionsSchema, type LassoFit } from './lasso.ts'
import {
  defaultHeadsPerMask,
  knockoutCounts,
  masksFromHeadSets,
  measurementPlan,
  randomMaskOptionsSchema,
  randomMasks,
  singleHeadMasks,
  type KnockoutMasks,
} from './masks.ts'
import { passOptionsSchema, scoreMasks, type ScoreOptions } from './scoring.ts'

/**
 * A head with its method-specific score.
 *
 * @category Localization
 */
export interface RankedHead extends HeadRef {
  /** Flat layer-major index. */
  readonly index: number
  /**
   * The method's importance statistic: the performance drop when knocked out (exhaustive,
   * greedy; metric units, positive = the capability got worse), or the Lasso coefficient
   * (compressed sensing; standardized score units, negative = needed).
   */
  readonly score: number
}

/**
 * The schema of {@link LocalizeOptions}: the forward-pass options ({@link passOptionsSchema}) and
 * the localization's own, each with its meaning and default, declared once.
 *
 * @category Localization
 */
export const localizeOptionsSchema = passOptionsSchema.extend({
  /** Number of heads to report as the capability's heads (default 5, the paper's choice). */
  top: integerField("number of heads to report as the capability's heads", { min: 1 }).default(5),
  /** Ablation kind (default `zero`). */
  mode: enumField('ablation kind', ABLATION_MODES as [AblationMode, ...AblationMode[]]).optional(),
  /** Reference sequences for `mean`/`resample` (default: the capability's own sequences). */
  reference: customField<ReferenceInputs>(
    "reference sequences for mean/resample (default: the capability's own)",
  ).optional(),
  /** Seed of the resample pairing (default 0). */
  resampleSeed: integerField('seed of the resample pairing').optional(),
})

/**
 * Options every localization method takes (see {@link localizeOptionsSchema}).
 *
 * @category Localization
 */
export type LocalizeOptions = Readonly<z.input<typeof localizeOptionsSchema>>

/**
 * What every method returns.
 *
 * @category Localization
 */
export interface LocalizationBase {
  /** The capability localized. */
  readonly capability: string
  /** Its metric. */
  readonly metric: MetricName
  /** The ablation used. */
  readonly mode: AblationMode
  /** Layers x heads of the model. */
  readonly layout: HeadLayout
  /** Every head, most important first. */
  readonly ranking: readonly RankedHead[]
  /** The top-k heads (the capability's heads according to this method). */
  readonly top: readonly RankedHead[]
  /** Per-head score in layer-major order, `[N]` (as {@link RankedHead.score}). */
  readonly scores: Float64Array
  /** Model evaluations spent (one = the capability scored once under one mask). */
  readonly evaluations: number
  /** Forward passes run. */
  readonly forwardPasses: number
  /** Wall time in seconds. */
  readonly seconds: number
}

/**
 * Result of {@link exhaustiveSweep}.
 *
 * @category Localization
 */
export interface ExhaustiveResult extends LocalizationBase {
  /** Discriminant. */
  readonly method: 'exhaustive'
  /** The metric of the clean model. */
  readonly baseline: number
  /** The metric with each head knocked out alone, `[N]`. */
  readonly knockedOut: Float64Array
}

/**
 * One round of {@link greedySearch}.
 *
 * @category Localization
 */
export interface GreedyRound {
  /** The head chosen in this round. */
  readonly head: RankedHead
  /** The metric with every head chosen so far (this one included) knocked out. */
  readonly metricAfter: number
  /** Evaluations of this round (the heads not yet chosen). */
  readonly evaluations: number
}

/**
 * Result of {@link greedySearch}.
 *
 * @category Localization
 */
export interface GreedyResult extends LocalizationBase {
  /** Discriminant. */
  readonly method: 'greedy'
  /** The metric of the clean model. */
  readonly baseline: number
  /** The rounds, in order. */
  readonly rounds: readonly GreedyRound[]
}

/**
 * Result of {@link compressedSensing}.
 *
 * @category Localization
 */
export interface CompressedSensingResult extends LocalizationBase {
  /** Discriminant. */
  readonly method: 'compressed-sensing'
  /** The masks evaluated, `[M, N]`. */
  readonly masks: KnockoutMasks
  /** The metric under each mask, `[M]`. */
  readonly measurements: Float64Array
  /** The standardized performance regressed on (`(p - mean) / sd`, higher = better), `[M]`. */
  readonly standardized: Float64Array
  /** The Lasso fit (coefficients `[N]`, intercept, R^2, alpha used). */
  readonly fit: LassoFit
  /** Cross-validation, when requested: the grid and mean held-out error per alpha. */
  readonly crossValidation?: { readonly alphas: readonly number[]; readonly meanMse: readonly number[] }
  /** How many masks knocked out each head, `[N]` (a head never knocked out cannot be found). */
  readonly knockoutCounts: Int32Array
  /**
   * True when every mask gave the same score up to float32 rounding ({@link CONSTANT_SCORE_TOLERANCE}):
   * nothing to regress, every coefficient is 0.
   */
  readonly constantScores: boolean
  /**
   * The population standard deviation of the score over the masks (metric units; 0 when
   * {@link CompressedSensingResult.constantScores}): the unit of a coefficient, so
   * `-coefficient * scoreSd` estimates a head's performance drop in metric units.
   */
  readonly scoreSd: number
}

/**
 * Scores whose population standard deviation over the masks is at most this fraction of
 * `max(1, |mean|)` count as constant (float32 rounding, not knockout effects).
 *
 * @category Localization
 */
export const CONSTANT_SCORE_TOLERANCE = 1e-6

/** Any localization result. @category Localization */
export type LocalizationResult = ExhaustiveResult | GreedyResult | CompressedSensingResult

async function withAblation<T>(
  model: Transformer,
  capability: Capability,
  options: LocalizeOptions,
  run: (ablation: HeadAblation) => Promise<T>,
): Promise<T> {
  const mode = options.mode ?? 'zero'
  const reference = options.reference ?? capability.data
  const ablation = await HeadAblation.create(
    model,
    mode,
    mode === 'zero' ? {} : { reference, ...(options.resampleSeed === undefined ? {} : { seed: options.resampleSeed }) },
  )
  try {
    return await run(ablation)
  } finally {
    ablation.dispose()
  }
}

function scoreOptions(options: LocalizeOptions, ablation: HeadAblation): ScoreOptions {
  return {
    ablation,
    ...(options.maxTokensPerPass === undefined ? {} : { maxTokensPerPass: options.maxTokensPerPass }),
    ...(options.batched === undefined ? {} : { batched: options.batched }),
    ...(options.onProgress === undefined ? {} : { onProgress: options.onProgress }),
  }
}

function rank(scores: Float64Array, layout: HeadLayout, descending: boolean): RankedHead[] {
  return Array.from(scores, (score, index) => ({ ...headAt(index, layout), index, score })).sort(
    (a, b) => (descending ? b.score - a.score : a.score - b.score) || a.index - b.index,
  )
}

/**
 * Knocks out each head alone and ranks heads by how much the capability's performance drops
 * (the exhaustive single-head sweep of the authors' released code).
 *
 * Cost: N + 1 evaluations (the clean model and one per head), batched into few forward passes.
 *
 * @param model - the model
 * @param capability - what to score
 * @param options - top-k (default 5), ablation, pass size
 * @returns heads ranked by performance drop (metric units; positive = knocking it out hurts);
 *   `top` holds at most k heads, only those with a positive drop (as compressed sensing's `top`
 *   holds only negative coefficients); `ranking` has every head
 * @throws `ConfigError` (`@attnlab/core`) for a bad `top` or an unknown option name; scoring errors
 * (see {@link scoreMasks})
 * @category Localization
 */
export async function exhaustiveSweep(
  model: Transformer,
  capability: Capability,
  options: LocalizeOptions = {},
): Promise<ExhaustiveResult> {
  const settings = parseConfig(localizeOptionsSchema, options, 'exhaustiveSweep')
  const layout: HeadLayout = { nLayers: model.config.nLayers, nHeads: model.config.nHeads }
  const n = headCount(layout)
  const top = Math.min(settings.top, n)
  return withAblation(model, capability, options, async (ablation) => {
    const clean = masksFromHeadSets(layout, [[]])
    const singles = singleHeadMasks(layout)
    const all: KnockoutMasks = { count: n + 1, heads: n, data: new Uint8Array([...clean.data, ...singles.data]) }
    const result = await scoreMasks(model, capability, all, scoreOptions(options, ablation))
    const baseline = result.values[0] as number
    const knockedOut = result.values.slice(1)
    const scores = Float64Array.from(
      knockedOut,
      (v) => performanceOf(baseline, capability.metric) - performanceOf(v, capability.metric),
    )
    const ranking = rank(scores, layout, true)
    return {
      method: 'exhaustive',
      capability: capability.name,
      metric: capability.metric,
      mode: ablation.mode,
      layout,
      ranking,
      // Like compressed sensing's negative coefficients: only heads whose knockout hurts.
      top: ranking.filter((h) => h.score > 0).slice(0, top),
      scores,
      evaluations: result.evaluations,
      forwardPasses: result.forwardPasses,
      seconds: result.seconds,
      baseline,
      knockedOut,
    }
  })
}

/**
 * Iterative greedy search: in each of k rounds, knock out every remaining head on top of the
 * heads chosen so far and choose the one whose knockout lowers performance most (the iterative
 * sweep of the authors' released code).
 *
 * Cost: `1 + sum_{i=0}^{k-1} (N - i)` evaluations.
 *
 * @param model - the model
 * @param capability - what to score
 * @param options - k = top (default 5), ablation, pass size
 * @returns the chosen heads in order (score = the marginal performance drop when chosen), then
 *   the rest ranked by their marginal drop in the last round
 * @throws `ConfigError` (`@attnlab/core`) for a bad `top`; scoring errors
 * @category Localization
 */
export async function greedySearch(
  model: Transformer,
  capability: Capability,
  options: LocalizeOptions = {},
): Promise<GreedyResult> {
  const settings = parseConfig(localizeOptionsSchema, options, 'greedySearch')
  const layout: HeadLayout = { nLayers: model.config.nLayers, nHeads: model.config.nHeads }
  const n = headCount(layout)
  const k = Math.min(settings.top, n)
  return withAblation(model, capability, options, async (ablation) => {
    const started = performance.now()
    const clean = await scoreMasks(model, capability, masksFromHeadSets(layout, [[]]), scoreOptions(options, ablation))
    const baseline = clean.values[0] as number
    let evaluations = clean.evaluations
    let passes = clean.forwardPasses
    const chosen: RankedHead[] = []
    const rounds: GreedyRound[] = []
    const scores = new Float64Array(n).fill(Number.NaN)
    let current = performanceOf(baseline, capability.metric)
    let lastDrops = new Map<number, number>()
    for (let round = 0; round < k; round++) {
      const chosenSet = new Set(chosen.map((h) => h.index))
      const candidates = Array.from({ length: n }, (_, i) => i).filter((i) => !chosenSet.has(i))
      const masks = singleHeadMasks(layout, { base: chosen, candidates })
      const result = await scoreMasks(model, capability, masks, scoreOptions(options, ablation))
      evaluations += result.evaluations
      passes += result.forwardPasses
      lastDrops = new Map(
        candidates.map((c, j) => [c, current - performanceOf(result.values[j] as number, capability.metric)]),
      )
      let best = candidates[0] as number
      for (const c of candidates) if ((lastDrops.get(c) as number) > (lastDrops.get(best) as number)) best = c
      const drop = lastDrops.get(best) as number
      const head: RankedHead = { ...headAt(best, layout), index: best, score: drop }
      chosen.push(head)
      scores[best] = drop
      const metricAfter = result.values[candidates.indexOf(best)] as number
      current = performanceOf(metricAfter, capability.metric)
      rounds.push({ head, metricAfter, evaluations: result.evaluations })
    }
    const chosenSet = new Set(chosen.map((h) => h.index))
    const rest = [...lastDrops.entries()]
      .filter(([i]) => !chosenSet.has(i))
      .map(([index, score]) => ({ ...headAt(index, layout), index, score }))
    rest.sort((a, b) => b.score - a.score || a.index - b.index)
    for (const h of rest) scores[h.index] = h.score
    const ranking = [...chosen, ...rest]
    return {
      method: 'greedy',
      capability: capability.name,
      metric: capability.metric,
      mode: ablation.mode,
      layout,
      ranking,
      top: chosen,
      scores,
      evaluations,
      forwardPasses: passes,
      seconds: (performance.now() - started) / 1000,
      baseline,
      rounds,
    }
  })
}

/**
 * The schema of {@link CompressedSensingOptions}: the {@link localizeOptionsSchema} options, the
 * measurement design (the fields of {@link randomMaskOptionsSchema}) and the Lasso fit (those of
 * {@link lassoOptionsSchema}), each with its meaning, range and default, declared once (the CLI's
 * `knockout locate` flags are made from them).
 *
 * @category Localization
 */
export const compressedSensingOptionsSchema = localizeOptionsSchema.extend({
  /**
   * Number of masks M (default {@link measurementPlan}'s `ceil(2 k ln(1 + N / k))`, k = `top`:
   * 15 for 16 heads, 22 for 40, 54 for 1024; the paper's README uses 100).
   */
  masks: integerField('number of random masks M (default ceil(2 k ln(1 + N/k)) for k = top of N heads)', {
    min: 1,
  }).optional(),
  /**
   * Fraction of heads knocked out per mask, at least one head (default: {@link defaultHeadsPerMask}
   * of N and M, over N, so each head is knocked out about 3 times; the paper's 0.02 once N is large).
   */
  fraction: randomMaskOptionsSchema.shape.fraction.unwrap().optional(),
  /** `balanced` (default) or `iid` (see `MaskDesign`). */
  design: randomMaskOptionsSchema.shape.design,
  /** Seed of the masks (default 0). */
  seed: randomMaskOptionsSchema.shape.seed,
  /**
   * Lasso `alpha` (default 0.01, {@link lassoOptionsSchema}'s); ignored with `crossValidate`. Positive: the L1
   * penalty is what singles out a few heads from M < N + 1 masks (without it the fit has no unique solution).
   */
  alpha: numberField('Lasso alpha, the L1 weight (ignored with cross-validation)', {
    min: 0,
    minExclusive: true,
  }).default(schemaDefaults(lassoOptionsSchema, 'lasso').alpha),
  /** Choose alpha by K-fold cross-validation (`true` = 5 folds, or `{ folds }`); default off. */
  crossValidate: customField<boolean | { readonly folds?: number }>(
    'choose alpha by K-fold cross-validation (true: 5 folds, or { folds })',
  ).optional(),
  /** Lasso iterations (default 5000, the `max_iter` of the authors' released code). */
  maxIter: lassoOptionsSchema.shape.maxIter,
  /** Lasso tolerance (default 1e-4). */
  tol: lassoOptionsSchema.shape.tol,
  /** Evaluate these masks instead of drawing random ones (`[M, N]`). */
  customMasks: customField<KnockoutMasks>('masks to evaluate instead of random ones').optional(),
})

/**
 * Options of {@link compressedSensing} (see {@link compressedSensingOptionsSchema}).
 *
 * @category Localization
 */
export type CompressedSensingOptions = Readonly<z.input<typeof compressedSensingOptionsSchema>>

/**
 * The keys an object `crossValidate` of {@link CompressedSensingOptions} takes: {@link lassoCVOptionsSchema}'s
 * `folds` (at least 2, default 5; `crossValidate: true` takes the default).
 *
 * @category Localization
 */
export const crossValidateOptionsSchema = lassoCVOptionsSchema.pick({ folds: true })

/**
 * Compressed-sensing localization (Bair et al., arXiv 2603.03335, as in the authors' released
 * code): score the capability under M random masks, standardize the scores, fit
 * `score ~ b + sum_i w_i mask_i` with the Lasso, and rank heads by coefficient, most negative
 * first (knocking those heads out lowers the score).
 *
 * Scores are performance (higher = better; minus the loss for the `loss` metric) standardized
 * with the population standard deviation, as `StandardScaler`. The top-k are the k most negative
 * coefficients among the strictly negative ones (fewer than k when fewer heads have a negative
 * coefficient: a zero coefficient carries no evidence).
 *
 * Cost: M evaluations, batched into `ceil(M n / rowsPerPass)` forward passes. The default M grows
 * as `k log N` ({@link measurementPlan}); when that is not below the exhaustive sweep's N + 1,
 * {@link measurementPlan} says so and a caller should sweep instead (the CLI does).
 *
 * @param model - the model
 * @param capability - what to score
 * @param options - masks (default {@link measurementPlan}), fraction (default
 *   {@link defaultHeadsPerMask} / N), design (default balanced),
 *   seed, alpha (default 0.01) or cross-validation, top-k (default 5), ablation, pass size
 * @returns the ranking, coefficients, R^2, masks and measurements
 * @throws `ConfigError` (`@attnlab/core`) for bad options (see {@link randomMasks}, {@link lasso}), an
 *   unknown option name included (e.g. `mask` for `masks`; the message lists the allowed ones);
 *   scoring errors
 * @example
 * ```ts
 * const found = await compressedSensing(model, capability, { masks: 100, fraction: 0.02, seed: 0 })
 * found.top // the 5 heads with the most negative coefficients
 * ```
 * @category Localization
 */
export async function compressedSensing(
  model: Transformer,
  capability: Capability,
  options: CompressedSensingOptions = {},
): Promise<CompressedSensingResult> {
  const settings = parseConfig(compressedSensingOptionsSchema, options, 'compressedSensing')
  const crossValidate =
    settings.crossValidate === undefined || settings.crossValidate === false
      ? null
      : parseConfig(
          crossValidateOptionsSchema,
          settings.crossValidate === true ? {} : settings.crossValidate,
          'compressedSensing crossValidate',
        )
  const layout: HeadLayout = { nLayers: model.config.nLayers, nHeads: model.config.nHeads }
  const n = headCount(layout)
  const top = Math.min(settings.top, n)
  // Defaults scale with the head count (measurementPlan): O(k log N) masks, ~3 knockouts per head.
  const count = settings.masks ?? measurementPlan(layout, top).masks
  const fraction = settings.fraction ?? defaultHeadsPerMask(n, count) / n
  const masks =
    settings.customMasks ??
    randomMasks(layout, {
      count,
      fraction,
      design: settings.design,
      seed: settings.seed,
    })
  return withAblation(model, capability, options, async (ablation) => {
    const result = await scoreMasks(model, capability, masks, scoreOptions(options, ablation))
    const M = masks.count
    const performance = Float64Array.from(result.values, (v) => performanceOf(v, capability.metric))
    let mean = 0
    for (const v of performance) mean += v
    mean /= M
    let variance = 0
    for (const v of performance) variance += (v - mean) ** 2
    const sd = Math.sqrt(variance / M)
    // Differences at float32 rounding level (the same model output computed in batches of other
    // shapes) are not evidence: treat them as constant scores.
    const constantScores = !(sd > CONSTANT_SCORE_TOLERANCE * Math.max(1, Math.abs(mean)))
    const standardized = Float64Array.from(performance, (v) => (constantScores ? 0 : (v - mean) / sd))
    const design = { rows: M, columns: n, data: masks.data }
    const lassoOptions = { maxIter: settings.maxIter, tol: settings.tol }
    let fit: LassoFit
    let crossValidation: CompressedSensingResult['crossValidation']
    if (crossValidate !== null && !constantScores) {
      const cv = lassoCV(design, standardized, { ...lassoOptions, folds: crossValidate.folds })
      fit = cv.fit
      crossValidation = { alphas: cv.alphas, meanMse: cv.meanMse }
    } else {
      fit = lasso(design, standardized, { ...lassoOptions, alpha: settings.alpha })
    }
    const scores = Float64Array.from(fit.coefficients)
    const ranking = rank(scores, layout, false)
    return {
      method: 'compressed-sensing',
      capability: capability.name,
      metric: capability.metric,
      mode: ablation.mode,
      layout,
      ranking,
      top: ranking.filter((h) => h.score < 0).slice(0, top),
      scores,
      evaluations: result.evaluations,
      forwardPasses: result.forwardPasses,
      seconds: result.seconds,
      masks,
      measurements: result.values,
      standardized,
      fit,
      ...(crossValidation === undefined ? {} : { crossValidation }),
      knockoutCounts: knockoutCounts(masks),
      constantScores,
      scoreSd: constantScores ? 0 : sd,
    }
  })
}

/**
 * The number of evaluations an exhaustive search over all single heads and all pairs of heads
 * needs, `N + N (N - 1) / 2`: the budget the compressed-sensing evaluation count is compared
 * with (the knockout validation on planted heads asks for at most 10% of it).
 *
 * @param layout - the head grid
 * @category Localization
 */
export function exhaustivePairBudget(layout: HeadLayout): number {
  const n = headCount(layout)
  return n + (n * (n - 1)) / 2
}
