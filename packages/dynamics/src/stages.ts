/**
 * Stage and phase detection on plain arrays, shared by the ODE (`attnlab dynamics`) and real
 * training runs (`attnlab emergence`).
 *
 * - Transitions: the loss crossing the midpoint between consecutive plateau values (a drop of
 *   more than 50% of the gap between consecutive plateaus; Yüksel et al., arXiv 2602.19143, set
 *   their stage boundaries by hand). For the ODE the plateaus are the exact `L_j`; for a training
 *   run, the restricted-context Bayes losses `H_n`. Noisy curves: a running median and a
 *   persistence requirement.
 * - Which head took which span: the argmax of each head's attention mass over the spans, once
 *   the stage has settled.
 * - Phases (Yüksel et al., arXiv 2602.19143): **competitive** (every head attends to the same span, mean
 *   pairwise head similarity near 1) then **cooperative** (heads specialise, similarity drops).
 *
 * Times are whatever the caller uses (ODE time, optimiser steps); losses any unit, as long as
 * the plateaus are in the same unit.
 *
 * @module
 */
import { InvalidArgumentError, ShapeError } from '@attnlab/core'
import { configSchema, integerField, numberField, parseConfig, type z } from '@attnlab/core/schema'

/**
 * The schema of {@link TransitionDetectionOptions}: each option's meaning, range and default,
 * declared once.
 *
 * @category Stages
 */
export const transitionDetectionOptionsSchema = configSchema({
  /**
   * Width of the running median applied to the loss first (odd, >= 1; 1 = none, the default).
   * Use 3-7 for noisy training curves.
   */
  smoothing: integerField('width of the running median applied to the loss first (odd; 1 = none)', {
    min: 1,
  }).default(1),
  /**
   * Number of consecutive (smoothed) samples that must stay at or below the midpoint for a
   * crossing to count (>= 1; default 1). A crossing in the last samples of the curve counts if
   * all remaining samples stay below.
   */
  persistence: integerField('consecutive samples that must stay at or below the midpoint', { min: 1 }).default(1),
})

/**
 * Noise handling for {@link detectTransitions} (see {@link transitionDetectionOptionsSchema}).
 *
 * @category Stages
 */
export type TransitionDetectionOptions = Readonly<z.input<typeof transitionDetectionOptionsSchema>>

/**
 * One stage transition: the loss falling from plateau `j - 1` to plateau `j`.
 *
 * @category Stages
 */
export interface Transition {
  /** `j` (1-based): after this transition `j` spans are fitted. */
  readonly stage: number
  /** The midpoint `(P_{j-1} + P_j) / 2` whose crossing marks the transition. */
  readonly level: number
  /**
   * When the (smoothed) loss crossed the level, linearly interpolated between samples, in the
   * caller's time unit; null if it never did (persistently).
   */
  readonly time: number | null
  /** The first sample at or below the level, or null. */
  readonly sampleIndex: number | null
}

function invalid(message: string, details: Record<string, unknown> = {}): InvalidArgumentError {
  return new InvalidArgumentError(message, details)
}

/** Validates a decreasing plateau list. */
export function checkPlateaus(plateaus: readonly number[], name = 'plateaus'): void {
  if (!Array.isArray(plateaus) || plateaus.length < 2) {
    throw invalid(
      `${name} must list at least two plateau losses (from the no-context level down), got ${JSON.stringify(plateaus)}`,
    )
  }
  for (let j = 0; j < plateaus.length; j++) {
    const value = plateaus[j] as number
    if (!Number.isFinite(value) || (j > 0 && value >= (plateaus[j - 1] as number))) {
      throw invalid(`${name} must be finite and strictly decreasing; entry ${j} is ${value} after ${plateaus[j - 1]}`, {
        index: j,
        value,
      })
    }
  }
}

function checkSeries(time: ArrayLike<number>, loss: ArrayLike<number>): void {
  if (time.length !== loss.length) {
    throw new ShapeError(`time has ${time.length} samples but loss has ${loss.length}; expected the same number`, {
      time: time.length,
      loss: loss.length,
    })
  }
  if (time.length === 0) throw invalid('the curve is empty; expected at least one (time, loss) sample')
  for (let i = 0; i < time.length; i++) {
    const t = time[i] as number
    if (!Number.isFinite(t) || (i > 0 && t < (time[i - 1] as number))) {
      throw invalid(`time must be finite and non-decreasing; sample ${i} is ${t} after ${time[i - 1]}`, {
        index: i,
        value: t,
      })
    }
    if (!Number.isFinite(loss[i] as number)) {
      throw invalid(`loss sample ${i} is ${loss[i]}; expected a finite number (drop diverged samples first)`, {
        index: i,
      })
    }
  }
}

function checkPositiveInteger(name: string, value: number, odd = false): void {
  if (!Number.isSafeInteger(value) || value < 1 || (odd && value % 2 === 0)) {
    throw invalid(`${name} must be ${odd ? 'an odd' : 'an'} integer >= 1, got ${value}`, { [name]: value })
  }
}

/**
 * A centred running median (window shrinks at the ends).
 *
 * @param values - the series
 * @param window - odd width >= 1 (1 returns a copy)
 * @returns the smoothed series
 * @throws `InvalidArgumentError` (`@attnlab/core`) for an even or non-positive window
 * @category Stages
 */
export function runningMedian(values: ArrayLike<number>, window: number): Float64Array {
  checkPositiveInteger('smoothing', window, true)
  const n = values.length
  const out = new Float64Array(n)
  const half = (window - 1) / 2
  const buffer: number[] = []
  for (let i = 0; i < n; i++) {
    buffer.length = 0
    for (let k = Math.max(0, i - half); k <= Math.min(n - 1, i + half); k++) buffer.push(values[k] as number)
    buffer.sort((a, b) => a - b)
    const m = buffer.length
    out[i] =
      m % 2 === 1 ? (buffer[(m - 1) / 2] as number) : 0.5 * ((buffer[m / 2 - 1] as number) + (buffer[m / 2] as number))
  }
  return out
}

/**
 * Detects the stage transitions of a loss curve: for each `j = 1 .. K`, the first time the loss
 * falls (persistently) to the midpoint between plateaus `P_{j-1}` and `P_j`. Transitions are
 * searched in order, each from the previous one on, so their times never decrease.
 *
 * @param time - sample times (ODE time or steps), `[n]`, non-decreasing
 * @param loss - losses, `[n]`, same unit as `plateaus`
 * @param plateaus - `P_0 > P_1 > ... > P_K` (for the ODE `L_j`; for a run the `H_n` oracles)
 * @param options - smoothing and persistence for noisy curves
 * @returns `K` transitions (missing ones have `time: null`)
 * @throws `ShapeError` (`@attnlab/core`) when `time` and `loss` differ in length
 * @throws `ConfigError` (`@attnlab/core`) for an unknown option name (the message lists the allowed ones)
 * @throws `InvalidArgumentError` (`@attnlab/core`) for non-finite samples, decreasing time,
 *   non-decreasing plateaus or bad options
 * @example
 * ```ts
 * detectTransitions([0, 1, 2, 3], [6, 5, 1.5, 0.2], [6.12, 1.945, 0.5, 0])
 * // stage 1 at t = 1.x (level 4.03), stage 2 at 2.x (level 1.22), stage 3 at 2.9x (level 0.25)
 * ```
 * @category Stages
 */
export function detectTransitions(
  time: ArrayLike<number>,
  loss: ArrayLike<number>,
  plateaus: readonly number[],
  options: TransitionDetectionOptions = {},
): Transition[] {
  const { smoothing, persistence } = parseConfig(transitionDetectionOptionsSchema, options, 'transition detection')
  checkSeries(time, loss)
  checkPlateaus(plateaus)
  const smoothed = runningMedian(loss, smoothing)
  const transitions: Transition[] = []
  let from = 0
  for (let j = 1; j < plateaus.length; j++) {
    const level = 0.5 * ((plateaus[j - 1] as number) + (plateaus[j] as number))
    const crossing = firstCrossing(time, smoothed, level, persistence, from)
    if (crossing === null) {
      transitions.push({ stage: j, level, time: null, sampleIndex: null })
      continue
    }
    transitions.push({ stage: j, level, time: crossing.time, sampleIndex: crossing.sampleIndex })
    from = crossing.sampleIndex
  }
  return transitions
}

/**
 * The first persistent fall of a series to a level, from sample `from` on: the first sample at
 * or below `level` followed by `persistence - 1` more (fewer at the end of the series), with the
 * time interpolated linearly from the sample before when that one was above the level and
 * higher. Null samples (unscored) count as not below. The one crossing rule of
 * {@link detectTransitions} and {@link detectCrossing}.
 */
function firstCrossing(
  time: ArrayLike<number>,
  values: ArrayLike<number | null>,
  level: number,
  persistence: number,
  from: number,
): { time: number; sampleIndex: number } | null {
  const n = values.length
  for (let i = from; i < n; i++) {
    const v = values[i]
    if (v === null || v === undefined || v > level) continue
    let holds = true
    for (let k = i + 1; k < Math.min(n, i + persistence) && holds; k++) {
      const w = values[k]
      holds = w !== null && w !== undefined && w <= level
    }
    if (!holds) continue
    let t = time[i] as number
    const before = i > 0 ? values[i - 1] : null
    if (before !== null && before !== undefined && before > level && before > v) {
      const t0 = time[i - 1] as number
      t = t0 + ((t - t0) * (before - level)) / (before - v)
    }
    return { time: t, sampleIndex: i }
  }
  return null
}

/**
 * The first time a series falls, persistently, to `level` (or below): a training run's loss
 * reaching the midpoint between chance and the Bayes floor, or one output position's loss
 * halving (the abrupt drops of Baherwani et al., arXiv 2606.25010, sec. 4 and Fig. 3). The same
 * rule as {@link detectTransitions} for one level, on a raw series that may hold nulls.
 *
 * @param time - sample times (steps), `[n]`, non-decreasing
 * @param values - the series, `[n]`; null where a sample has no value (counts as not below)
 * @param level - the level to reach (same unit as `values`)
 * @param persistence - samples that must stay at or below the level (>= 1; default 1)
 * @returns the interpolated time and the first sample at or below the level, or null when the
 *   series never gets there persistently
 * @throws `ShapeError` (`@attnlab/core`) when `time` and `values` differ in length
 * @throws `InvalidArgumentError` (`@attnlab/core`) for a persistence that is not an integer >= 1
 * @example
 * ```ts
 * detectCrossing([0, 10, 20], [0.7, 0.6, 0.1], 0.35) // { time: 17, sampleIndex: 2 }
 * ```
 * @category Stages
 */
export function detectCrossing(
  time: ArrayLike<number>,
  values: ArrayLike<number | null>,
  level: number,
  persistence = 1,
): { readonly time: number; readonly sampleIndex: number } | null {
  if (time.length !== values.length) {
    throw new ShapeError(`time has ${time.length} samples but values has ${values.length}; expected the same number`, {
      time: time.length,
      values: values.length,
    })
  }
  checkPositiveInteger('persistence', persistence)
  return firstCrossing(time, values, level, persistence, 0)
}

/**
 * A stage of a training run by the span criterion of {@link detectSpanStages}.
 *
 * @category Stages
 */
export interface SpanStage {
  /** `j` (1-based): `j` distinct spans are held from then on. */
  readonly stage: number
  /**
   * When the newly held span's best head mass crossed the focus threshold, interpolated linearly
   * between the sample before and the first sample with `j` spans held (caller's time unit).
   */
  readonly time: number
  /** The first sample with `j` spans held (persistently). */
  readonly sampleIndex: number
  /** The spans newly held at that sample (or, when none is new, one of the held spans). */
  readonly spans: readonly number[]
  /** For each of `spans`, the head with the most mass on it at that sample (ties: the lower index). */
  readonly heads: readonly number[]
}

/** A threshold on a share of attention mass or a similarity, in (0, 1]. */
const UNIT_THRESHOLD = { min: 0, max: 1, minExclusive: true } as const

/**
 * The schema of {@link SpanStageOptions}: each option's meaning, range and default, declared once.
 *
 * @category Stages
 */
export const spanStageOptionsSchema = configSchema({
  /** Mass above which a head holds a span. */
  focusThreshold: numberField('attention mass above which a head holds a span', UNIT_THRESHOLD).default(0.5),
  /** Samples a new stage must persist (fewer at the end of the series). */
  persistence: integerField('samples a new stage must persist', { min: 1 }).default(2),
})

/**
 * Options of {@link detectSpanStages} (see {@link spanStageOptionsSchema}).
 *
 * @category Stages
 */
export type SpanStageOptions = Readonly<z.input<typeof spanStageOptionsSchema>>

/**
 * Stages of a training run from its heads' attention on the spans (Yüksel et al., arXiv
 * 2602.19143, sec. 3-4: each stage is the model learning to copy from one more span through a
 * sparse attention pattern). A span is *held* at a sample once some head puts more than
 * `focusThreshold` of its attention on it; stage `j` begins at the first sample (searching from
 * the previous stage's) where `j` distinct spans are held and stay held for `persistence`
 * samples. The competitive stage 1 has every head on the most important span: one span held.
 * Unlike {@link detectTransitions}, this needs no plateau values, so it works where the oracle
 * plateaus are known only by bounds.
 *
 * @param time - sample times (steps), `[n]`
 * @param spanMass - `[n][nHeads][nSpans]` attention mass of each head on each span
 * @param options - the focus threshold and the persistence
 * @returns the stages found, in order (at most `nSpans`)
 * @throws `ShapeError` (`@attnlab/core`) when `time` and `spanMass` differ in length
 * @throws `ConfigError` (`@attnlab/core`) for an unknown option name (did you mean ...), a threshold outside
 *   (0, 1] or a bad persistence
 * @example
 * ```ts
 * detectSpanStages([0, 10, 20], [[[0.3, 0.3]], [[0.9, 0.1]], [[0.9, 0.1]]])
 * // [{ stage: 1, time: 6.67, sampleIndex: 1, spans: [0], heads: [0] }]
 * ```
 * @category Stages
 */
export function detectSpanStages(
  time: ArrayLike<number>,
  spanMass: ArrayLike<ArrayLike<ArrayLike<number>>>,
  options: SpanStageOptions = {},
): SpanStage[] {
  const { focusThreshold: focus, persistence } = parseConfig(spanStageOptionsSchema, options, 'span stage')
  if (time.length !== spanMass.length) {
    throw new ShapeError(`time has ${time.length} samples but spanMass has ${spanMass.length}`, {
      time: time.length,
      spanMass: spanMass.length,
    })
  }
  const n = spanMass.length
  if (n === 0) return []
  const K = ((spanMass[0] as ArrayLike<ArrayLike<number>>)[0] as ArrayLike<number> | undefined)?.length ?? 0
  const rowsAt = (i: number): ArrayLike<number>[] => Array.from(spanMass[i] as ArrayLike<ArrayLike<number>>)
  const held: Set<number>[] = []
  for (let i = 0; i < n; i++) {
    const set = new Set<number>()
    const m = rowsAt(i)
    for (let g = 0; g < K; g++) if (m.some((row) => (row[g] as number) > focus)) set.add(g)
    held.push(set)
  }
  const stages: SpanStage[] = []
  let from = 0
  let previous = new Set<number>()
  for (let j = 1; j <= K; j++) {
    let found = -1
    for (let i = from; i < n && found < 0; i++) {
      if ((held[i] as Set<number>).size < j) continue
      let holds = true
      for (let k = i + 1; k < Math.min(n, i + persistence) && holds; k++) holds = (held[k] as Set<number>).size >= j
      if (holds) found = i
    }
    if (found < 0) break
    const now = held[found] as Set<number>
    const fresh = [...now].filter((g) => !previous.has(g))
    const spans = fresh.length > 0 ? fresh : [...now].slice(0, 1)
    // Interpolate the step where the newly held span's best mass crossed the threshold.
    let t = time[found] as number
    if (found > 0) {
      const g = spans[0] as number
      const best = (i: number): number => Math.max(...rowsAt(i).map((row) => row[g] as number))
      const before = best(found - 1)
      const after = best(found)
      if (before < focus && after > before) {
        const t0 = time[found - 1] as number
        t = t0 + ((t - t0) * (focus - before)) / (after - before)
      }
    }
    const m = rowsAt(found)
    const heads = spans.map((g) => {
      let bestHead = 0
      for (let h = 1; h < m.length; h++) if ((m[h]?.[g] as number) > (m[bestHead]?.[g] as number)) bestHead = h
      return bestHead
    })
    stages.push({ stage: j, time: t, sampleIndex: found, spans, heads })
    previous = now
    from = found
  }
  return stages
}

/**
 * Mean pairwise cosine similarity between heads' attention vectors (span masses, or full
 * attention rows). 1 for a single head; two all-zero vectors count as identical.
 *
 * @param heads - `[nHeads][nSpans]` (any non-negative vectors of equal length)
 * @returns a number in [-1, 1] (in [0, 1] for non-negative inputs)
 * @throws `ShapeError` (`@attnlab/core`) when the heads' vectors differ in length
 * @category Stages
 */
export function headSimilarity(heads: ArrayLike<ArrayLike<number>>): number {
  const h = heads.length
  if (h <= 1) return 1
  const width = (heads[0] as ArrayLike<number>).length
  const norms: number[] = []
  for (let k = 0; k < h; k++) {
    const v = heads[k] as ArrayLike<number>
    if (v.length !== width)
      throw new ShapeError(`head ${k} has ${v.length} entries but head 0 has ${width}`, { head: k })
    let s = 0
    for (let j = 0; j < width; j++) s += (v[j] as number) ** 2
    norms.push(Math.sqrt(s))
  }
  let total = 0
  let pairs = 0
  for (let a = 0; a < h; a++) {
    for (let b = a + 1; b < h; b++) {
      const na = norms[a] as number
      const nb = norms[b] as number
      let cosine: number
      if (na === 0 || nb === 0) cosine = na === nb ? 1 : 0
      else {
        let dot = 0
        const va = heads[a] as ArrayLike<number>
        const vb = heads[b] as ArrayLike<number>
        for (let j = 0; j < width; j++) dot += (va[j] as number) * (vb[j] as number)
        cosine = dot / (na * nb)
      }
      total += cosine
      pairs++
    }
  }
  return total / pairs
}

/**
 * One head's argmax span and its score there.
 *
 * @category Stages
 */
export interface HeadSpan {
  /** The span with the largest score (ties: the lower index). */
  readonly span: number
  /** The score there (attention mass, or the ownership score used). */
  readonly mass: number
}

/**
 * A span that gained a holder at a transition.
 *
 * @category Stages
 */
export interface TakenSpan {
  /** The span. */
  readonly span: number
  /** The head now holding it. */
  readonly head: number
}

/**
 * Each head's span (argmax of its attention mass over the spans) at one instant.
 *
 * @category Stages
 */
export interface HeadAssignment {
  /** Per head: the span it attends to most (ties: the lower index) and its mass there. */
  readonly heads: readonly HeadSpan[]
  /**
   * Per span: the head holding it (among heads whose argmax is the span, the one with the most
   * mass there), or null when no head's argmax is the span.
   */
  readonly holders: readonly (number | null)[]
}

/**
 * Which head attends to which span at one instant.
 *
 * @param heads - span masses `[nHeads][nSpans]` at one sample
 * @returns per-head argmax spans and per-span holders
 * @throws `ShapeError` (`@attnlab/core`) when heads have different numbers of spans
 * @category Stages
 */
export function assignHeads(heads: ArrayLike<ArrayLike<number>>): HeadAssignment {
  const h = heads.length
  const K = h > 0 ? (heads[0] as ArrayLike<number>).length : 0
  const perHead: { span: number; mass: number }[] = []
  const holders: (number | null)[] = new Array<number | null>(K).fill(null)
  for (let k = 0; k < h; k++) {
    const v = heads[k] as ArrayLike<number>
    if (v.length !== K) throw new ShapeError(`head ${k} has ${v.length} span masses but head 0 has ${K}`, { head: k })
    let best = 0
    for (let j = 1; j < K; j++) if ((v[j] as number) > (v[best] as number)) best = j
    perHead.push({ span: best, mass: K > 0 ? (v[best] as number) : 0 })
  }
  for (const [k, { span, mass }] of perHead.entries()) {
    const current = holders[span]
    if (current === null || current === undefined || mass > (perHead[current] as { mass: number }).mass)
      holders[span] = k
  }
  return { heads: perHead, holders }
}

/**
 * The phases of the competitive-to-cooperative picture (Yüksel et al., arXiv 2602.19143).
 *
 * - `'initial'`: before any head focuses on a span;
 * - `'competitive'`: every head focused on the same span (in the ODE, the most important one),
 *   and the mean pairwise head similarity at or above the threshold;
 * - `'cooperative'`: heads attend to different spans, or their similarity dropped.
 *
 * @category Stages
 */
export type Phase = 'initial' | 'competitive' | 'cooperative'

/**
 * The schema of {@link PhaseOptions}: each threshold's meaning, range and default, declared once.
 *
 * @category Stages
 */
export const phaseOptionsSchema = configSchema({
  /** Mean pairwise cosine similarity of span-mass vectors above which heads count as identical. */
  similarityThreshold: numberField(
    'mean pairwise cosine similarity of span masses above which heads count as identical',
    UNIT_THRESHOLD,
  ).default(0.95),
  /** Span mass at or above which a head counts as focused on its argmax span. */
  focusThreshold: numberField(
    'span mass at or above which a head is focused on its argmax span',
    UNIT_THRESHOLD,
  ).default(0.5),
  /** Segments shorter than this many samples merge into the previous one (noise). */
  minSamples: integerField('segments shorter than this many samples merge into the previous one', { min: 1 }).default(
    1,
  ),
})

/**
 * Thresholds of {@link classifyPhases} (see {@link phaseOptionsSchema}).
 *
 * @category Stages
 */
export type PhaseOptions = Readonly<z.input<typeof phaseOptionsSchema>>

/**
 * A maximal run of samples with the same phase.
 *
 * @category Stages
 */
export interface PhaseSegment {
  /** The phase. */
  readonly phase: Phase
  /** Time of the first sample of the segment. */
  readonly start: number
  /** Time of the last sample of the segment. */
  readonly end: number
  /** Index of the first sample. */
  readonly startIndex: number
  /** Index of the last sample. */
  readonly endIndex: number
  /** For a competitive segment: the span every head attends to (at its first sample); else null. */
  readonly span: number | null
  /** Mean pairwise head similarity, averaged over the segment's samples. */
  readonly meanSimilarity: number
}

/**
 * Labels every sample with a {@link Phase} and groups the labels into segments.
 *
 * Per sample: competitive if every head is focused (`mass >= focusThreshold`) on the same argmax
 * span and the similarity is `>= similarityThreshold`; cooperative if at least one head is
 * focused and the heads differ (different argmax or lower similarity); otherwise the previous
 * label holds (`'initial'` at the start), so a head in flight between spans does not flip the
 * phase back.
 *
 * @param time - sample times, `[n]`
 * @param spanMass - `[n][nHeads][nSpans]` attention mass of each head on each span
 * @param options - thresholds
 * @returns segments in time order (at least one)
 * @throws `ShapeError` (`@attnlab/core`) when `time` and `spanMass` differ in length or the heads' shapes vary
 * @throws `InvalidArgumentError` (`@attnlab/core`) for an empty series
 * @throws `ConfigError` (`@attnlab/core`) for an unknown option name (did you mean; the message lists the allowed
 *   ones) or a threshold out of range
 * @category Stages
 */
export function classifyPhases(
  time: ArrayLike<number>,
  spanMass: ArrayLike<ArrayLike<ArrayLike<number>>>,
  options: PhaseOptions = {},
): PhaseSegment[] {
  const { similarityThreshold, focusThreshold, minSamples } = parseConfig(phaseOptionsSchema, options, 'phase')
  if (time.length !== spanMass.length) {
    throw new ShapeError(`time has ${time.length} samples but spanMass has ${spanMass.length}`, {
      time: time.length,
      spanMass: spanMass.length,
    })
  }
  if (time.length === 0) throw invalid('the series is empty; expected at least one sample')
  const labels: Phase[] = []
  const spans: (number | null)[] = []
  const similarities: number[] = []
  let previous: Phase = 'initial'
  for (let i = 0; i < time.length; i++) {
    const heads = spanMass[i] as ArrayLike<ArrayLike<number>>
    const { heads: assigned } = assignHeads(heads)
    const similarity = headSimilarity(heads)
    const sameSpan = assigned.every((a) => a.span === (assigned[0] as { span: number }).span)
    const allFocused = assigned.every((a) => a.mass >= focusThreshold)
    const anyFocused = assigned.some((a) => a.mass >= focusThreshold)
    let label: Phase = previous
    if (allFocused && sameSpan && similarity >= similarityThreshold) label = 'competitive'
    else if (anyFocused && !(sameSpan && similarity >= similarityThreshold)) label = 'cooperative'
    labels.push(label)
    spans.push(label === 'competitive' ? (assigned[0] as { span: number }).span : null)
    similarities.push(similarity)
    previous = label
  }
  // Group, then merge short segments into their predecessor.
  const raw: { phase: Phase; startIndex: number; endIndex: number }[] = []
  for (let i = 0; i < labels.length; i++) {
    const last = raw[raw.length - 1]
    if (last !== undefined && last.phase === labels[i]) last.endIndex = i
    else raw.push({ phase: labels[i] as Phase, startIndex: i, endIndex: i })
  }
  const merged: { phase: Phase; startIndex: number; endIndex: number }[] = []
  for (const segment of raw) {
    const last = merged[merged.length - 1]
    if (
      last !== undefined &&
      (segment.endIndex - segment.startIndex + 1 < minSamples || last.phase === segment.phase)
    ) {
      last.endIndex = segment.endIndex
    } else merged.push({ ...segment })
  }
  return merged.map(({ phase, startIndex, endIndex }) => {
    let sum = 0
    for (let i = startIndex; i <= endIndex; i++) sum += similarities[i] as number
    return {
      phase,
      start: time[startIndex] as number,
      end: time[endIndex] as number,
      startIndex,
      endIndex,
      span: phase === 'competitive' ? (spans[startIndex] ?? null) : null,
      meanSimilarity: sum / (endIndex - startIndex + 1),
    }
  })
}

/**
 * A detected transition with the head-to-span picture once the stage has settled.
 *
 * @category Stages
 */
export interface StageTransition extends Transition {
  /**
   * The sample used for the assignment: the first one at or after the midpoint in time between
   * this transition and the next detected one (or the end of the curve); null when the
   * transition was not detected or neither span masses nor ownership scores were given.
   */
  readonly assignmentIndex: number | null
  /**
   * Per-head argmax spans and per-span holders at `assignmentIndex` (by ownership scores if given, else span mass), or
   * null.
   */
  readonly assignment: HeadAssignment | null
  /** Spans that gained a holder since the previous stage (`{ span, head }`), the stage's "new" spans. */
  readonly takenSpans: readonly TakenSpan[]
}

/**
 * Input of {@link analyzeStages}: one curve, ODE or training run.
 *
 * @category Stages
 */
export interface StageInput {
  /** Sample times (ODE time or optimiser steps), `[n]`. */
  readonly time: ArrayLike<number>
  /** Loss at each sample, `[n]`, same unit as `plateaus`. */
  readonly loss: ArrayLike<number>
  /** Plateau losses `P_0 > ... > P_K`. */
  readonly plateaus: readonly number[]
  /** Optional span masses `[n][nHeads][nSpans]`, for head assignment and phases. */
  readonly spanMass?: ArrayLike<ArrayLike<ArrayLike<number>>>
  /**
   * Optional ownership scores `[n][nHeads][nSpans]` used instead of `spanMass` to decide which
   * head holds which span (e.g. the ODE's fitted share, or span mass times value alignment for
   * a run). Phases always use `spanMass`.
   */
  readonly ownership?: ArrayLike<ArrayLike<ArrayLike<number>>>
}

/**
 * The schema of {@link StageAnalysisOptions}: the transition detection options
 * ({@link transitionDetectionOptionsSchema}) and the phase thresholds ({@link phaseOptionsSchema}).
 *
 * @category Stages
 */
export const stageAnalysisOptionsSchema = transitionDetectionOptionsSchema.extend(phaseOptionsSchema.shape)

/**
 * Options of {@link analyzeStages} (see {@link stageAnalysisOptionsSchema}).
 *
 * @category Stages
 */
export type StageAnalysisOptions = Readonly<z.input<typeof stageAnalysisOptionsSchema>>

/** The entries of `options` that are fields of `schema` (to pass one part of combined options on). */
export function pick<T extends object>(options: T, schema: z.ZodObject): T {
  const keys = Object.keys(schema.shape)
  return Object.fromEntries(Object.entries(options).filter(([key]) => keys.includes(key))) as T
}

/**
 * Everything stage detection finds on one curve.
 *
 * @category Stages
 */
export interface StageAnalysis {
  /** The plateaus used. */
  readonly plateaus: readonly number[]
  /** One entry per stage `j = 1 .. K` (undetected ones have `time: null`). */
  readonly transitions: readonly StageTransition[]
  /** Phase segments in time order (empty without span masses). */
  readonly phases: readonly PhaseSegment[]
  /** Loss at the last sample. */
  readonly finalLoss: number
  /** Number of transitions detected. */
  readonly stagesReached: number
}

/**
 * Transitions, head assignments and phases of one curve. Works on any (time, loss) series with
 * plateau values: the ODE's `L_j` or a training run's `H_n` oracles (pass `smoothing` and
 * `persistence` for noisy runs, e.g. 5 and 3).
 *
 * @param input - the curve, its plateaus and optionally per-head span masses
 * @param options - detection and phase thresholds
 * @throws `ConfigError` (`@attnlab/core`) for an unknown option name (the message lists the allowed ones)
 * @throws `ShapeError` (`@attnlab/core`) / `InvalidArgumentError` (`@attnlab/core`) as {@link detectTransitions} and
 *   {@link classifyPhases}
 * @category Stages
 */
export function analyzeStages(input: StageInput, options: StageAnalysisOptions = {}): StageAnalysis {
  const settings = parseConfig(stageAnalysisOptionsSchema, options, 'stage analysis')
  const { time, loss, plateaus, spanMass } = input
  const transitions = detectTransitions(time, loss, plateaus, pick(settings, transitionDetectionOptionsSchema))
  if (spanMass !== undefined && spanMass.length !== time.length) {
    throw new ShapeError(`time has ${time.length} samples but spanMass has ${spanMass.length}`)
  }
  if (input.ownership !== undefined && input.ownership.length !== time.length) {
    throw new ShapeError(`time has ${time.length} samples but ownership has ${input.ownership.length}`)
  }
  const scores = input.ownership ?? spanMass
  const detected = transitions.filter((t) => t.time !== null)
  const lastTime = time[time.length - 1] as number
  const result: StageTransition[] = []
  let previousHolders: readonly (number | null)[] | null = null
  for (const transition of transitions) {
    if (transition.time === null || scores === undefined) {
      result.push({ ...transition, assignmentIndex: null, assignment: null, takenSpans: [] })
      continue
    }
    const next = detected.find((t) => t.stage > transition.stage)
    const settle = 0.5 * (transition.time + (next?.time ?? lastTime))
    let index = transition.sampleIndex as number
    while (index < time.length - 1 && (time[index] as number) < settle) index++
    const assignment = assignHeads(scores[index] as ArrayLike<ArrayLike<number>>)
    const takenSpans: { span: number; head: number }[] = []
    for (const [span, head] of assignment.holders.entries()) {
      if (head !== null && (previousHolders === null || previousHolders[span] === null)) takenSpans.push({ span, head })
    }
    previousHolders = assignment.holders
    result.push({ ...transition, assignmentIndex: index, assignment, takenSpans })
  }
  const phases = spanMass === undefined ? [] : classifyPhases(time, spanMass, pick(settings, phaseOptionsSchema))
  return {
    plateaus: [...plateaus],
    transitions: result,
    phases,
    finalLoss: loss[loss.length - 1] as number,
    stagesReached: detected.length,
  }
}
