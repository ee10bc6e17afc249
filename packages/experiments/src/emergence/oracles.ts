/**
 * The reference lines a training run's loss is compared against: for the sparse Markov chain,
 * the restricted-context Bayes losses `H_n` at span boundaries (the loss of the best predictor
 * that sees only the newest `j` spans: stage `j`'s plateau, cf. the plateaus of Yüksel et al., arXiv
 * 2602.19143, Figure 1) and the truncated-teacher cross-entropies; for the emergence tasks,
 * chance and the Bayes floor (Baherwani et al.).
 */
import { Rng } from '@attnlab/core'
import {
  type CellularAutomatonTask,
  IclMarkovTask,
  LinearMapTask,
  SparseMarkovTask,
  restrictedContextEntropy,
  restrictedContextEntropyMonteCarlo,
  type AnyTask,
  type EntropyEstimate,
} from '@attnlab/markov'

/** One horizontal reference line (nats). */
export interface OracleLine {
  /** Short label for plots and tables, e.g. `H_2 (newest span)`. */
  readonly label: string
  /** What it is. */
  readonly kind: 'restricted-context' | 'teacher-entropy' | 'truncated-teacher' | 'chance' | 'floor'
  /** For restricted-context lines: how many of the most important spans the predictor sees. */
  readonly spans?: number
  /** The value (nats), or null when it could not be estimated without bias (then `bounds`). */
  readonly value: number | null
  /** Standard error (Monte-Carlo estimates), or null for exact values. */
  readonly standardError: number | null
  /** An interval known to contain the value, when `value` is null. */
  readonly bounds: readonly [number, number] | null
  /** How it was computed. */
  readonly method: 'exact' | 'monte-carlo' | 'closed-form'
  /**
   * For a line known only by `bounds`: whether they are narrow enough to test a plateau against
   * ({@link boundsInformative}); absent for lines with a value.
   */
  readonly boundsInformative?: boolean
}

/** The plateau lines of one task. */
export interface Oracles {
  /** Lines, most loss first. */
  readonly lines: readonly OracleLine[]
  /**
   * Plateau values `P_0 > P_1 > ... > P_K` for stage `j` (after `j` spans are learned), where
   * known: `P_0` no context, `P_K` the teacher entropy; null entries were not estimated.
   */
  readonly plateaus: readonly (number | null)[]
  /** The loss floor (teacher entropy / Bayes loss), nats, if known. */
  readonly floor: number | null
  /** Seconds spent computing. */
  readonly seconds: number
  /** One line on how the values were obtained. */
  readonly note: string
}

/** Windows up to this many states get the exact oracle. */
const MAX_EXACT_STATES = 1_000_000

/**
 * Whether an interval known to contain an oracle value says anything about a plateau: it must be
 * at most half as wide as the gap between the estimated lines next to it (`below`: the next
 * smaller value, e.g. `H` of a longer context; `above`: the next larger one; a missing neighbour
 * is replaced by the interval's own end). A wider interval cannot tell the stage's plateau from
 * its neighbours', so a plateau inside it is no test.
 *
 * @param bounds - `[lower, upper]` (nats)
 * @param below - the nearest estimated value below the line (nats), or null
 * @param above - the nearest estimated value above the line (nats), or null
 */
export function boundsInformative(
  bounds: readonly [number, number],
  below: number | null,
  above: number | null,
): boolean {
  const gap = (above ?? bounds[1]) - (below ?? bounds[0])
  return bounds[1] - bounds[0] <= 0.5 * gap
}

/**
 * An oracle line's value for text: `1.734`, `in [0.69, 1.41]`, with `, too wide to test a
 * plateau` for uninformative bounds, or `not estimated`.
 */
export function describeOracleValue(line: OracleLine, digits = 3): string {
  if (line.value !== null) return line.value.toFixed(digits)
  if (line.bounds === null) return 'not estimated'
  const range = `in [${line.bounds[0].toFixed(digits)}, ${line.bounds[1].toFixed(digits)}]`
  return line.boundsInformative === false ? `${range}, too wide to test a plateau` : range
}

function sparseMarkovOracles(task: SparseMarkovTask, seed: number): Omit<Oracles, 'seconds'> {
  const spans = task.config.spans
  const K = spans.length
  // Context lengths at which a predictor sees exactly the newest j spans (importance order
  // follows recency unless reversed; reversed chains have no such boundary but the newest).
  const order = [...spans.keys()].reverse() // newest first
  const boundaries: number[] = [0]
  let covered = 0
  for (const span of order) {
    covered += spans[span] as number
    boundaries.push(covered)
  }
  const C = task.contextLength
  const stateCount = task.vocabSize ** C
  const reversed = task.config.reverse === true
  const labelFor = (j: number, n: number): string =>
    j === 0 ? 'H_0 (no context)' : j === K ? `H_${n} (teacher entropy)` : `H_${n} (newest ${j} span${j > 1 ? 's' : ''})`
  const lines: OracleLine[] = []
  const plateaus: (number | null)[] = []
  if (stateCount <= MAX_EXACT_STATES) {
    const exact = restrictedContextEntropy(task, { maxStates: MAX_EXACT_STATES })
    boundaries.forEach((n, j) => {
      const value = exact.pooled[n] as number
      lines.push({
        label: labelFor(j, n),
        kind: j === K ? 'teacher-entropy' : 'restricted-context',
        spans: j,
        value,
        standardError: null,
        bounds: null,
        method: 'exact',
      })
    })
    // The Bayes loss given the j most important spans (equal to H at the span boundary unless
    // the importance order is reversed).
    for (let j = 0; j <= K; j++) plateaus.push((exact.topSpans.pooled[j] as number | undefined) ?? null)
    exact.truncatedTeacherCrossEntropy.forEach((value, k) => {
      if (k > 0 && k < K)
        lines.push({
          label: `truncated teacher, top ${k} span${k > 1 ? 's' : ''}`,
          kind: 'truncated-teacher',
          spans: k,
          value,
          standardError: null,
          bounds: null,
          method: 'exact',
        })
    })
    return { lines, plateaus, floor: exact.teacherEntropy, note: `exact (d^C = ${stateCount} windows)` }
  }
  // The package's estimator, as `attnlab markov oracle` uses it, on the span boundaries only and
  // without posterior sampling (about 20 s per uncountable length for d = 50, [2,2,2], and the
  // two-span line H_4 does not converge even then): those lines get the estimator's bounds.
  const estimate = restrictedContextEntropyMonteCarlo(task, {
    seed,
    contextLengths: boundaries,
    posteriorSampling: false,
  })
  const truncated = estimate.truncatedTeacherCrossEntropy
  for (const [j, n] of boundaries.entries()) {
    const e = estimate.pooled[j] as EntropyEstimate
    const base = {
      label: labelFor(j, n),
      kind: j === K ? ('teacher-entropy' as const) : ('restricted-context' as const),
      spans: j,
      method: 'monte-carlo' as const,
    }
    if (e.estimate !== null) {
      lines.push({ ...base, value: e.estimate, standardError: e.standardError, bounds: null })
      plateaus.push(reversed && j > 0 && j < K ? null : e.estimate)
    } else {
      const valueAt = (m: number): number | null => estimate.pooled[m]?.estimate ?? null
      const below =
        boundaries
          .slice(j + 1)
          .map((_, i) => valueAt(j + 1 + i))
          .find((x) => x !== null) ?? null
      const above =
        boundaries
          .slice(0, j)
          .map((_, i) => valueAt(j - 1 - i))
          .find((x) => x !== null) ?? null
      lines.push({
        ...base,
        value: null,
        standardError: null,
        bounds: e.bounds,
        ...(e.bounds === null ? {} : { boundsInformative: boundsInformative(e.bounds, below, above) }),
      })
      plateaus.push(null)
    }
  }
  truncated.forEach((e, k) => {
    if (k > 0 && k < K && e.estimate !== null) {
      lines.push({
        label: `truncated teacher, top ${k} span${k > 1 ? 's' : ''}`,
        kind: 'truncated-teacher',
        spans: k,
        value: e.estimate,
        standardError: e.standardError,
        bounds: null,
        method: 'monte-carlo',
      })
    }
  })
  return {
    lines,
    plateaus,
    floor: estimate.teacherEntropy.estimate,
    note:
      `Monte Carlo (d^C = ${stateCount.toExponential(1)} windows is beyond the exact oracle); values whose context ` +
      'is too long to count are shown as bounds (from the estimated neighbours and the truncated teachers, widened ' +
      'by 2 standard errors)',
  }
}

/**
 * Computes the reference lines for a task.
 *
 * @param task - the task being trained on
 * @param seed - seed of the Monte-Carlo estimators (not of the task)
 * @returns the lines, the stage plateaus and the floor (nats)
 */
export function computeOracles(task: AnyTask, seed = 0): Oracles {
  const started = performance.now()
  const done = (result: Omit<Oracles, 'seconds'>): Oracles => ({
    ...result,
    seconds: (performance.now() - started) / 1000,
  })
  if (task instanceof SparseMarkovTask) return done(sparseMarkovOracles(task, seed))
  if (task instanceof LinearMapTask) {
    const floor = task.lossFloor()
    return done({
      lines: [
        {
          label: 'chance (ln 2)',
          kind: 'chance',
          value: Math.LN2,
          standardError: null,
          bounds: null,
          method: 'closed-form',
        },
        { label: 'Bayes floor', kind: 'floor', value: floor, standardError: null, bounds: null, method: 'closed-form' },
      ],
      plateaus: [Math.LN2, floor],
      floor,
      note: 'closed form: random initial bits cost ln 2, determined bits cost 0',
    })
  }
  const rng = Rng.fromSeed(seed).split('emergence/oracle')
  const chance = Math.log(task instanceof IclMarkovTask ? task.vocabSize : 2)
  const bayes = (task as CellularAutomatonTask | IclMarkovTask).bayesLoss(4096, rng)
  return done({
    lines: [
      { label: 'chance', kind: 'chance', value: chance, standardError: null, bounds: null, method: 'closed-form' },
      {
        label: 'Bayes loss',
        kind: 'floor',
        value: bayes.estimate,
        standardError: bayes.standardError,
        bounds: null,
        method: 'monte-carlo',
      },
    ],
    plateaus: [chance, bayes.estimate],
    floor: bayes.estimate,
    note: 'Bayes loss by Monte Carlo over 4096 sequences',
  })
}
