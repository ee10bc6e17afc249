/**
 * Monte-Carlo estimates of the sparse Markov chain's plateau oracles, for configurations whose
 * `d^C` windows are too many for {@link restrictedContextEntropy} (e.g. the default d = 50,
 * spans [2,2,2]: 1.6e10 windows).
 *
 * @module
 */
import { ConfigError, Rng } from '@attnlab/core'
import { ContextPosteriorChain } from './context-posterior.ts'
import { entropy, meanAndStandardError, type Estimate } from './entropy.ts'
import { windowWeights, type SparseMarkovTask, type TeacherTables } from './sparse-markov.ts'
import { checkArray, checkBoolean, checkInteger } from './validate.ts'

/**
 * Options of {@link restrictedContextEntropyMonteCarlo}.
 *
 * @category Oracles
 */
export interface MonteCarloOracleOptions {
  /** Seed of the estimator's random streams (not the teacher's); default 0. */
  readonly seed?: number
  /** Sequences sampled for the teacher entropy and the counting estimates; default 40_000, >= 2 per group. */
  readonly sequences?: number
  /**
   * Jackknife groups the sequences are split into (bias correction and standard errors); default 10, range [2, 1000].
   */
  readonly groups?: number
  /** Contexts drawn for each posterior-sampling estimate; default 1_000, range [10, 1e9]. */
  readonly contexts?: number
  /**
   * Markov-chain sweeps per context (a multiple of 4: it is split in halves and quarters); default 32,
   * range [4, 100_000].
   */
  readonly sweeps?: number
  /** Forward-resimulation proposals per sweep; default 8, range [0, 100_000]. */
  readonly resimulations?: number
  /**
   * Estimate by counting when there are at most this many contexts `d^n`, and at least 20
   * sampled windows per possible context; default 10_000.
   */
  readonly maxCountingContexts?: number
  /** Which context lengths `n` to estimate; default all of `0 .. C`. */
  readonly contextLengths?: readonly number[]
  /**
   * Also estimate the position-specific variant (doubles the cost of the posterior-sampling estimates); default false.
   */
  readonly positionSpecific?: boolean
  /**
   * Estimate the context lengths that cannot be counted by posterior sampling (the slow part:
   * about 20 s per length for d = 50, spans [2,2,2]); `false` reports them as not estimated,
   * with {@link EntropyEstimate.bounds} from the estimated neighbours. Default true.
   */
  readonly posteriorSampling?: boolean
  /**
   * Called as the posterior-sampling estimates (the slow part) advance: at the start of each, every 25
   * contexts, and at its end. Not part of the resolved options the result reports.
   */
  readonly onProgress?: (progress: MonteCarloProgress) => void
}

/**
 * Progress of {@link restrictedContextEntropyMonteCarlo}'s posterior-sampling estimates, for a
 * progress display ({@link MonteCarloOracleOptions.onProgress}).
 *
 * @category Oracles
 */
export interface MonteCarloProgress {
  /** The context length `n` being estimated. */
  readonly contextLength: number
  /** Whether it is the position-specific variant of `H_n`. */
  readonly positionSpecific: boolean
  /** Contexts sampled so far, over all the posterior-sampling estimates of this call. */
  readonly done: number
  /** Contexts to sample in all (`contexts` times the number of estimates that need posterior sampling). */
  readonly total: number
}

/**
 * One Monte-Carlo estimate of a restricted-context entropy, in nats.
 *
 * @category Oracles
 */
export interface EntropyEstimate {
  /** The context length `n` (for `topSpans`: the number of kept spans `j`). */
  readonly contextLength: number
  /**
   * The estimate, or `null` when it could not be made without a large bias (see
   * {@link EntropyEstimate.note}): never a misleading number.
   */
  readonly estimate: number | null
  /** Its standard error (statistical only), or `null`. */
  readonly standardError: number | null
  /**
   * `'direct'`: mean of an exact per-window quantity (unbiased); `'counting'`: conditional
   * entropy of Rao-Blackwellised counts per context, jackknife bias-corrected; `'posterior'`:
   * exact posterior sampling of the hidden history per context (see
   * {@link restrictedContextEntropyMonteCarlo}); `'none'`: not estimated.
   */
  readonly method: 'direct' | 'counting' | 'posterior' | 'none'
  /** False if the estimate failed its bias diagnostics or was not made (then `estimate` is null). */
  readonly reliable: boolean
  /** One sentence on how it was obtained, or why not. */
  readonly note: string
  /** The first-order bias correction that was applied (nats), if any. */
  readonly biasCorrection: number | null
  /**
   * When `estimate` is null: an interval `[lower, upper]` (nats) that contains the value, from
   * quantities that were estimated: `H_n` is non-increasing in `n` (so reliable `H_{n'}`, `n' > n`,
   * bound it from below and `n' < n` from above), and the cross-entropy of a truncated teacher whose
   * spans lie within the last `n` tokens is the loss of one such predictor, so it bounds the Bayes
   * loss from above. Each end is widened by 2 standard errors. `null` when an estimate exists or no
   * bound is available.
   */
  readonly bounds: readonly [number, number] | null
}

/**
 * Monte-Carlo restricted-context entropies of a sparse Markov chain (nats): the counterpart of
 * {@link RestrictedContextEntropy} with an {@link EntropyEstimate} per value.
 *
 * @category Oracles
 */
export interface RestrictedContextEntropyEstimate {
  /** Always `'monte-carlo'`. */
  readonly method: 'monte-carlo'
  /** The estimated context lengths. */
  readonly contextLengths: readonly number[]
  /** Pooled `H_n` per requested `n` (same order as `contextLengths`). */
  readonly pooled: readonly EntropyEstimate[]
  /** Position-specific `H_n` per requested `n`, if requested, else null. */
  readonly positionSpecific: readonly EntropyEstimate[] | null
  /** The teacher entropy `H_C` (direct average; unbiased). */
  readonly teacherEntropy: Estimate
  /** Pooled Bayes losses given the `j` most important spans, `j = 0 .. K`. */
  readonly topSpans: { readonly spans: readonly (readonly number[])[]; readonly pooled: readonly EntropyEstimate[] }
  /** Cross-entropy of the truncated teachers `A*_{1:k}` on the data, `k = 0 .. K` (direct averages). */
  readonly truncatedTeacherCrossEntropy: readonly Estimate[]
  /** The resolved options. */
  readonly options: Readonly<Required<Omit<MonteCarloOracleOptions, 'contextLengths' | 'onProgress'>>>
}

/** Estimates whose first-order bias correction exceeds this (nats) are reported as unreliable. */
const MAX_BIAS_CORRECTION = 0.02
/**
 * Posterior estimates are reported as unreliable when the Richardson step changes by more than
 * this between (all, halves) and (halves, quarters) of the sweeps: the sign that the first-order
 * bias expansion has not converged (nats).
 */
const MAX_RESIDUAL = 0.01
/** Below this teacher entropy (nats) posterior sampling is not attempted (slow mixing). */
const MIN_POSTERIOR_TEACHER_ENTROPY = 0.3

/**
 * Monte-Carlo estimates, with standard errors, of the restricted-context entropies `H_n` (the
 * Bayes loss of a predictor that sees only the last `n` tokens) and of the truncated-teacher cross-entropies.
 *
 * `H_n = E_c[H(q(. | c))]` with `q(y | c) = E[P(y | window) | last n tokens = c]`. Estimators,
 * chosen per `n`:
 * - **direct** (`n = C`): the mean of the teacher entropy `H(P(. | window))` over sampled
 *   windows; unbiased.
 * - **counting** (few contexts: `d^n <= maxCountingContexts` and >= 20 sampled windows per
 *   possible context): per context, the sum of the teacher distributions `P(. | window)` of the
 *   sampled windows with that context (Rao-Blackwellised counts); the conditional entropy of
 *   that table is biased low at first order in 1/samples, which the delete-a-group jackknife over
 *   `groups` groups of sequences removes (it also gives the standard error).
 * - **posterior** (otherwise, e.g. `n = 3, 4, 5` for d = 50, [2,2,2]): for each of `contexts`
 *   contexts `c` drawn from the process together with their history, a Markov chain
 *   (Gibbs updates of the hidden tokens, plus Metropolis-Hastings moves of the generated
 *   position for the pooled variant) samples the history from its exact posterior given `c`.
 *   Because the chain starts at a draw of the process, it starts in stationarity and every state
 *   is an exact posterior draw: the average over `sweeps` states of the Rao-Blackwellised mixture
 *   `sum_v pi(v | rest) P(. | window(v))` (the token before `c` summed out) is an unbiased
 *   estimate of `q(. | c)`. The entropy of that average is biased low at first order in
 *   1/sweeps, which split-half Richardson extrapolation removes (`2 H(all) - mean H(half)`).
 *   The teacher entropy of the drawn window is a control variate:
 *   `H_n = H_C + E[H(q(. | c)) - H(P(. | window))]`.
 *
 * An estimate that fails its diagnostics is withdrawn (`estimate: null`, `reliable: false`, a
 * note saying why) instead of being printed with an unknown bias: a bias correction above
 * 0.02 nat; for posterior estimates, a correction that changes by more than 0.01 nat between
 * (all, halves) and (halves, quarters) of the sweeps (the chain mixes too slowly), a value that
 * contradicts the monotonicity of `H_n` by more than 3 standard errors, or a nearly
 * deterministic teacher (entropy below 0.3 nat, where single-token moves cannot explore the
 * history). A withdrawn value gets {@link EntropyEstimate.bounds} from the values that were
 * estimated.
 *
 * Validation: the counting and direct estimates agree with {@link restrictedContextEntropy} within
 * their standard errors for d = 6, spans [2,2,2] and d = 50, spans [1,1,1]; the posterior estimates
 * for d = 4, spans [2,2] (tau = 0.3) and d = 3 configurations (tests in this package).
 *
 * Known limit: for d = 50, spans [2,2,2] (the default emergence setting) the defaults give `H_0`,
 * `H_1`, `H_2` (counting), `H_5` (posterior) and `H_6` in about a minute, but withdraw `H_3` and
 * `H_4` (the two-span plateau line): the chain's bias correction does not converge there even with
 * 128 sweeps, so only bounds are reported (`H_4` lies between `H_5` and the truncated teacher that
 * keeps the two newest spans).
 *
 * Cost: `O(sequences * genLen * C * d)` for counting and direct estimates, and
 * `O(contexts * sweeps * (2C - n) * C * d^2)` per posterior estimate.
 *
 * @param task - the chain
 * @param options - sample sizes and which values to estimate
 * @returns estimates in nats with standard errors
 * @throws `ConfigError` (`@attnlab/core`) for invalid options (naming the option and its allowed range)
 * @example
 * ```ts
 * const oracle = restrictedContextEntropyMonteCarlo(new SparseMarkovTask()) // d = 50, [2,2,2]
 * oracle.pooled.map((e) => [e.contextLength, e.estimate, e.standardError])
 * ```
 * @category Oracles
 */
export function restrictedContextEntropyMonteCarlo(
  task: SparseMarkovTask,
  options: MonteCarloOracleOptions = {},
): RestrictedContextEntropyEstimate {
  const C = task.contextLength
  const d = task.vocabSize
  const K = task.spanCount
  const G = task.config.genLen
  const resolved = Object.freeze({
    seed: checkInteger('seed', options.seed ?? 0, Number.MIN_SAFE_INTEGER),
    sequences: checkInteger('sequences', options.sequences ?? 40_000, 4, 1e9),
    groups: checkInteger('groups', options.groups ?? 10, 2, 1000),
    contexts: checkInteger('contexts', options.contexts ?? 1_000, 10, 1e9),
    sweeps: checkInteger('sweeps', options.sweeps ?? 32, 4, 100_000),
    resimulations: checkInteger('resimulations', options.resimulations ?? 8, 0, 100_000),
    maxCountingContexts: checkInteger('maxCountingContexts', options.maxCountingContexts ?? 10_000, 1, 1e7),
    positionSpecific: checkBoolean('positionSpecific', options.positionSpecific ?? false),
    posteriorSampling: checkBoolean('posteriorSampling', options.posteriorSampling ?? true),
  })
  if (options.onProgress !== undefined && typeof options.onProgress !== 'function') {
    throw new ConfigError('onProgress', `expected a function, got ${typeof options.onProgress}`)
  }
  if (resolved.sweeps % 4 !== 0) {
    throw new ConfigError(
      'sweeps',
      `got ${resolved.sweeps}; expected a multiple of 4 in [4, 100000] (the sweeps are split in halves and quarters)`,
    )
  }
  if (resolved.sequences < 2 * resolved.groups) {
    throw new ConfigError(
      'sequences',
      `got ${resolved.sequences}; expected at least 2 per jackknife group (groups = ${resolved.groups}), i.e. >= ` +
        `${2 * resolved.groups}`,
    )
  }
  const contextLengths = (
    options.contextLengths === undefined
      ? Array.from({ length: C + 1 }, (_, n) => n)
      : checkArray('contextLengths', options.contextLengths, 1, C + 1).map((n, i) =>
          checkInteger(`contextLengths[${i}]`, n, 0, C),
        )
  ) as number[]
  const root = Rng.fromSeed(resolved.seed).split('sparse-markov/monte-carlo')

  const { importanceOrder, spans, starts } = task.teacher
  const topSets = Array.from({ length: K + 1 }, (_, j) => {
    const positions = new Set<number>()
    const kept = importanceOrder.slice(0, j)
    for (const i of kept)
      for (let p = starts[i] as number; p < (starts[i] as number) + (spans[i] as number); p++) positions.add(p)
    const sorted = [...positions].sort((a, b) => a - b)
    return {
      spans: [...kept].sort((a, b) => a - b),
      positions: sorted,
      isSuffix: sorted.every((p, r) => p === C - sorted.length + r),
    }
  })
  const windows = Math.floor(resolved.sequences / resolved.groups) * resolved.groups * G
  const countable = (size: number): boolean =>
    size < C && d ** size <= Math.min(resolved.maxCountingContexts, windows / 20)
  const suffix = (n: number): number[] => Array.from({ length: n }, (_, r) => C - n + r)
  const countSets: number[][] = []
  for (const n of contextLengths) if (countable(n)) countSets.push(suffix(n))
  for (const set of topSets) if (!set.isSuffix && countable(set.positions.length)) countSets.push(set.positions)

  const counting = countingPass(task, countSets, resolved, root.split('counting'))
  const teacherEntropy = counting.teacherEntropy

  const estimateFor = (n: number, positionSpecific: boolean): EntropyEstimate => {
    if (n === C) {
      return {
        contextLength: n,
        estimate: teacherEntropy.estimate,
        standardError: teacherEntropy.standardError,
        method: 'direct',
        reliable: true,
        note: 'teacher entropy: mean of H(P(. | window)) over sampled windows',
        biasCorrection: null,
        bounds: null,
      }
    }
    const counted = counting.counted.get(suffix(n).join(','))
    if (counted) {
      const value = positionSpecific ? counted.positionSpecific : counted.pooled
      if (value) return countingEstimate(n, value, n === 0 ? 'no context' : `the last ${n} tokens`)
      return notEstimated(n, `too many (context, position) tables to count H_${n} per position in memory`)
    }
    if (!resolved.posteriorSampling) {
      const why = `not estimated: H_${n} needs posterior sampling, which was turned off (posteriorSampling: false)`
      return notEstimated(n, why)
    }
    if (teacherEntropy.estimate < MIN_POSTERIOR_TEACHER_ENTROPY) {
      return notEstimated(
        n,
        `not estimated: the teacher is nearly deterministic (entropy ${teacherEntropy.estimate.toFixed(3)} nat < ` +
          `${MIN_POSTERIOR_TEACHER_ENTROPY}), ` +
          'where posterior sampling of the history mixes too slowly to trust; use the exact oracle (small d) instead',
      )
    }
    return posteriorEstimate(
      task,
      n,
      positionSpecific,
      teacherEntropy,
      resolved,
      root.split(`posterior n=${n} ${positionSpecific ? 'position' : 'pooled'}`),
      (contexts) => progress?.(n, positionSpecific, contexts),
    )
  }
  // The estimates that need posterior sampling, counted up front so that a progress display has its total.
  const sampled = (n: number): boolean =>
    n !== C &&
    !counting.counted.has(suffix(n).join(',')) &&
    resolved.posteriorSampling &&
    teacherEntropy.estimate >= MIN_POSTERIOR_TEACHER_ENTROPY
  const onProgress = options.onProgress
  const total = contextLengths.filter(sampled).length * resolved.contexts * (resolved.positionSpecific ? 2 : 1)
  let finished = 0
  const progress =
    onProgress === undefined || total === 0
      ? undefined
      : (n: number, positionSpecific: boolean, contexts: number): void => {
          onProgress({ contextLength: n, positionSpecific, done: finished + contexts, total })
          if (contexts === resolved.contexts) finished += contexts
        }

  // Upper bounds from truncated teachers: CE_k bounds H_n when the k most important spans lie within the last n tokens.
  const truncatedBound = (n: number): number => {
    let best = Infinity
    topSets.forEach((set, k) => {
      const ce = counting.truncatedCrossEntropy[k] as Estimate
      if (set.positions.every((p) => p >= C - n)) best = Math.min(best, ce.estimate + 2 * ce.standardError)
    })
    return best
  }
  const pooled = withBounds(checkOrdering(contextLengths.map((n) => estimateFor(n, false))), truncatedBound)
  const positionSpecific = resolved.positionSpecific
    ? withBounds(checkOrdering(contextLengths.map((n) => estimateFor(n, true))), truncatedBound)
    : null
  const topPooled = topSets.map((set, j): EntropyEstimate => {
    const n = set.positions.length
    if (set.isSuffix) {
      const index = contextLengths.indexOf(n)
      if (index >= 0) return { ...(pooled[index] as EntropyEstimate), contextLength: j }
      return notEstimated(j, `H_${n} (the last ${n} tokens) was not among the requested contextLengths`)
    }
    const counted = counting.counted.get(set.positions.join(','))
    if (counted)
      return { ...countingEstimate(n, counted.pooled, `window positions ${set.positions.join(',')}`), contextLength: j }
    return notEstimated(
      j,
      `the ${j} most important spans are not the newest tokens and have ${(d ** n).toExponential(2)} contexts, ` +
        'too many to count; no unbiased estimator is implemented for this case',
    )
  })
  return {
    method: 'monte-carlo',
    contextLengths,
    pooled,
    positionSpecific,
    teacherEntropy,
    topSpans: { spans: topSets.map((s) => s.spans), pooled: topPooled },
    truncatedTeacherCrossEntropy: counting.truncatedCrossEntropy,
    options: resolved,
  }
}

/**
 * `H_n` is non-increasing in `n`: a posterior estimate that contradicts a reliable neighbour by
 * more than 3 combined standard errors is withdrawn (it signals a chain that did not mix).
 */
function checkOrdering(estimates: EntropyEstimate[]): EntropyEstimate[] {
  return estimates.map((e) => {
    if (e.method !== 'posterior' || e.estimate === null || e.standardError === null) return e
    for (const other of estimates) {
      if (other === e || other.estimate === null || other.standardError === null || other.method === 'posterior')
        continue
      const tolerance = 3 * Math.hypot(e.standardError, other.standardError)
      const violated =
        (other.contextLength < e.contextLength && e.estimate > other.estimate + tolerance) ||
        (other.contextLength > e.contextLength && e.estimate < other.estimate - tolerance)
      if (violated) {
        return {
          ...e,
          estimate: null,
          standardError: null,
          reliable: false,
          note:
            `not estimated: the posterior-sampling estimate ${e.estimate.toFixed(3)} contradicts ` +
            `H_${other.contextLength} = ${other.estimate.toFixed(3)} (H_n must not increase with n); raise sweeps`,
        }
      }
    }
    return e
  })
}

/** Adds {@link EntropyEstimate.bounds} to the estimates that could not be made. */
function withBounds(estimates: EntropyEstimate[], truncatedBound: (n: number) => number): EntropyEstimate[] {
  return estimates.map((e) => {
    if (e.estimate !== null) return e
    let lower = -Infinity
    let upper = truncatedBound(e.contextLength)
    for (const other of estimates) {
      if (other.estimate === null || other.standardError === null) continue
      if (other.contextLength > e.contextLength) lower = Math.max(lower, other.estimate - 2 * other.standardError)
      if (other.contextLength < e.contextLength) upper = Math.min(upper, other.estimate + 2 * other.standardError)
    }
    return Number.isFinite(lower) && Number.isFinite(upper) ? { ...e, bounds: [lower, upper] as const } : e
  })
}

type ResolvedOptions = Readonly<Required<Omit<MonteCarloOracleOptions, 'contextLengths' | 'onProgress'>>>

function notEstimated(contextLength: number, note: string): EntropyEstimate {
  return {
    contextLength,
    estimate: null,
    standardError: null,
    method: 'none',
    reliable: false,
    note,
    biasCorrection: null,
    bounds: null,
  }
}

/** A jackknife result: bias-corrected estimate, its standard error, and the correction applied. */
interface Jackknifed {
  readonly estimate: number
  readonly standardError: number
  readonly correction: number
}

function countingEstimate(n: number, value: Jackknifed, what: string): EntropyEstimate {
  const reliable = Math.abs(value.correction) <= MAX_BIAS_CORRECTION
  return {
    contextLength: n,
    estimate: reliable ? value.estimate : null,
    standardError: reliable ? value.standardError : null,
    method: 'counting',
    reliable,
    note: reliable
      ? `conditional entropy of Rao-Blackwellised counts given ${what}, jackknife bias-corrected`
      : `not estimated: the counting bias correction (${value.correction.toFixed(3)} nat) is too large to trust; ` +
        'raise sequences',
    biasCorrection: value.correction,
    bounds: null,
  }
}

interface CountingResult {
  readonly teacherEntropy: Estimate
  readonly truncatedCrossEntropy: Estimate[]
  /** Per context set (key: positions joined by ','): pooled, and position-specific if it fit in memory. */
  readonly counted: Map<string, { pooled: Jackknifed; positionSpecific: Jackknifed | null }>
}

/**
 * Samples `sequences` sequences in `groups` groups; per generated window accumulates the teacher
 * entropy, the truncated teachers' cross-entropies and, per context set, the Rao-Blackwellised
 * joint of (context, next token), per group (and per position when it fits in memory).
 */
function countingPass(
  task: SparseMarkovTask,
  sets: readonly number[][],
  options: ResolvedOptions,
  rng: Rng,
): CountingResult {
  const d = task.vocabSize
  const C = task.contextLength
  const G = task.config.genLen
  const K = task.spanCount
  const L = task.seqLength
  const groups = options.groups
  const perGroup = Math.floor(options.sequences / groups)
  const full = task.tables(K)
  const truncated: TeacherTables[] = []
  for (let k = 1; k < K; k++) truncated.push(task.tables(k))
  const sizes = sets.map((set) => d ** set.length * d)
  const totalSize = sizes.reduce((a, b) => a + b, 0)
  const perPosition = totalSize * groups * G <= 2e7
  // joints[set][group][t or 0] : [contexts, d]
  const joints = sets.map((_, s) =>
    Array.from({ length: groups }, () =>
      Array.from({ length: perPosition ? G : 1 }, () => new Float64Array(sizes[s] as number)),
    ),
  )
  const teacherEntropies: number[] = []
  const crossEntropies: number[][] = Array.from({ length: K + 1 }, () => [])
  const probabilities = new Float64Array(d)
  const truncatedWeights = new Float64Array(d)
  const shift = new Float64Array(1)
  const tokens = new Int32Array(L)
  const mask = new Uint8Array(L)
  for (let group = 0; group < groups; group++) {
    const stream = rng.split(`group ${group}`)
    let entropySum = 0
    const crossSums = new Array<number>(K + 1).fill(0)
    for (let sequence = 0; sequence < perGroup; sequence++) {
      task.sampleSequenceInto(tokens, mask, 0, stream)
      for (let t = 0; t < G; t++) {
        const total = windowWeights(full, tokens, t, C, d, probabilities, shift)
        const logTotal = Math.log(total) + (shift[0] as number)
        for (let y = 0; y < d; y++) probabilities[y] = (probabilities[y] as number) / total
        // H = log Z - sum_y P(y) z(y), with z the shifted logits summed over the window.
        let expected = 0
        for (let pos = 0; pos < C; pos++) {
          const o = (pos * d + (tokens[t + pos] as number)) * d
          for (let y = 0; y < d; y++) expected += (probabilities[y] as number) * (full.log[o + y] as number)
        }
        entropySum += logTotal - expected
        for (let k = 1; k < K; k++) {
          const tables = truncated[k - 1] as TeacherTables
          const totalK = windowWeights(tables, tokens, t, C, d, truncatedWeights, shift)
          let expectedK = 0
          for (let pos = 0; pos < C; pos++) {
            const o = (pos * d + (tokens[t + pos] as number)) * d
            for (let y = 0; y < d; y++) expectedK += (probabilities[y] as number) * (tables.log[o + y] as number)
          }
          crossSums[k] = (crossSums[k] as number) + Math.log(totalK) + (shift[0] as number) - expectedK
        }
        for (let s = 0; s < sets.length; s++) {
          let index = 0
          for (const p of sets[s] as number[]) index = index * d + (tokens[t + p] as number)
          const joint = (joints[s] as Float64Array[][])[group]?.[perPosition ? t : 0] as Float64Array
          const o = index * d
          for (let y = 0; y < d; y++) joint[o + y] = (joint[o + y] as number) + (probabilities[y] as number)
        }
      }
    }
    const groupWindows = perGroup * G
    teacherEntropies.push(entropySum / groupWindows)
    crossEntropies[0]?.push(Math.log(d))
    for (let k = 1; k < K; k++) crossEntropies[k]?.push((crossSums[k] as number) / groupWindows)
    crossEntropies[K]?.push(entropySum / groupWindows)
  }
  const counted = new Map<string, { pooled: Jackknifed; positionSpecific: Jackknifed | null }>()
  sets.forEach((set, s) => {
    const perGroupTables = joints[s] as Float64Array[][]
    const size = sizes[s] as number
    // Pooled: sum each group's tables over positions.
    const pooledGroups = perGroupTables.map((tables) => sumArrays(tables, size))
    const pooled = jackknife(groups, (exclude) =>
      normalisedEntropy(
        sumArrays(
          pooledGroups.filter((_, g) => g !== exclude),
          size,
        ),
        d,
      ),
    )
    let positionSpecific: Jackknifed | null = null
    if (perPosition) {
      positionSpecific = jackknife(groups, (exclude) => {
        let value = 0
        for (let t = 0; t < G; t++) {
          const tables = perGroupTables
            .filter((_, g) => g !== exclude)
            .map((tablesOfGroup) => tablesOfGroup[t] as Float64Array)
          value += normalisedEntropy(sumArrays(tables, size), d) / G
        }
        return value
      })
    }
    counted.set(set.join(','), { pooled, positionSpecific })
  })
  return {
    teacherEntropy: meanAndStandardError(teacherEntropies),
    truncatedCrossEntropy: crossEntropies.map((values) => meanAndStandardError(values)),
    counted,
  }
}

/**
 * Delete-a-group jackknife of a statistic: `statistic(-1)` on all groups, `statistic(g)` without
 * group `g`. Returns the bias-corrected estimate `R T_all - (R-1) mean_g T_-g`, its standard error
 * `sqrt((R-1)/R sum_g (T_-g - mean)^2)` and the correction (estimate - T_all).
 */
function jackknife(groups: number, statistic: (exclude: number) => number): Jackknifed {
  const all = statistic(-1)
  const leaveOut: number[] = []
  for (let g = 0; g < groups; g++) leaveOut.push(statistic(g))
  const mean = leaveOut.reduce((a, b) => a + b, 0) / groups
  const estimate = groups * all - (groups - 1) * mean
  const spread = leaveOut.reduce((a, b) => a + (b - mean) ** 2, 0)
  return { estimate, standardError: Math.sqrt(((groups - 1) / groups) * spread), correction: estimate - all }
}

function sumArrays(arrays: readonly Float64Array[], size: number): Float64Array {
  const out = new Float64Array(size)
  for (const array of arrays) for (let i = 0; i < size; i++) out[i] = (out[i] as number) + (array[i] as number)
  return out
}

/** Conditional entropy (nats) of an unnormalised joint `[contexts, d]`, divided by its total mass. */
function normalisedEntropy(joint: Float64Array, d: number): number {
  let mass = 0
  let total = 0
  const contexts = joint.length / d
  for (let c = 0; c < contexts; c++) {
    const base = c * d
    let row = 0
    for (let y = 0; y < d; y++) row += joint[base + y] as number
    if (row <= 0) continue
    mass += row
    let acc = 0
    for (let y = 0; y < d; y++) {
      const j = joint[base + y] as number
      if (j > 0) acc += j * Math.log(j)
    }
    total += row * Math.log(row) - acc
  }
  return total / mass
}

/**
 * Posterior-sampling estimate of `H_n` (see {@link restrictedContextEntropyMonteCarlo}).
 */
function posteriorEstimate(
  task: SparseMarkovTask,
  n: number,
  positionSpecific: boolean,
  teacherEntropy: Estimate,
  options: ResolvedOptions,
  rng: Rng,
  progress: (contexts: number) => void,
): EntropyEstimate {
  const d = task.vocabSize
  const C = task.contextLength
  const G = task.config.genLen
  const chain = new ContextPosteriorChain(task, n, !positionSpecific)
  const S = options.sweeps
  const differences: number[] = []
  const corrections: number[] = []
  const sequence = new Int32Array(task.seqLength)
  const mask = new Uint8Array(task.seqLength)
  const windowProbabilities = new Float64Array(d)
  const mixture = new Float64Array(d)
  const quarters = [0, 1, 2, 3].map(() => new Float64Array(d))
  const pair = new Float64Array(d)
  const all = new Float64Array(d)
  const full = task.tables()
  const residuals: number[] = []
  progress(0)
  for (let i = 0; i < options.contexts; i++) {
    if (i > 0 && i % 25 === 0) progress(i)
    task.sampleSequenceInto(sequence, mask, 0, rng)
    const t = rng.int(G)
    const total = windowWeights(full, sequence, t, C, d, windowProbabilities)
    for (let y = 0; y < d; y++) windowProbabilities[y] = (windowProbabilities[y] as number) / total
    chain.start(sequence, 0, t)
    for (const quarter of quarters) quarter.fill(0)
    for (let s = 0; s < S; s++) {
      chain.sweep(rng, options.resimulations)
      chain.mixture(mixture)
      const quarter = quarters[Math.floor((4 * s) / S)] as Float64Array
      for (let y = 0; y < d; y++) quarter[y] = (quarter[y] as number) + (mixture[y] as number)
    }
    // Entropies of the averages over all sweeps, halves and quarters; Richardson steps on each pair.
    const averageEntropy = (parts: Float64Array[]): number => {
      pair.fill(0)
      for (const part of parts) for (let y = 0; y < d; y++) pair[y] = (pair[y] as number) + (part[y] as number)
      let sum = 0
      for (let y = 0; y < d; y++) sum += pair[y] as number
      for (let y = 0; y < d; y++) pair[y] = (pair[y] as number) / sum
      return entropy(pair)
    }
    const [q1, q2, q3, q4] = quarters as [Float64Array, Float64Array, Float64Array, Float64Array]
    const hAll = averageEntropy([q1, q2, q3, q4])
    const hHalf = (averageEntropy([q1, q2]) + averageEntropy([q3, q4])) / 2
    const hQuarter = (averageEntropy([q1]) + averageEntropy([q2]) + averageEntropy([q3]) + averageEntropy([q4])) / 4
    const corrected = 2 * hAll - hHalf
    differences.push(corrected - entropy(windowProbabilities))
    corrections.push(corrected - hAll)
    residuals.push(corrected - (2 * hHalf - hQuarter))
    void all
  }
  progress(options.contexts)
  const difference = meanAndStandardError(differences)
  const correction = meanAndStandardError(corrections).estimate
  const residual = meanAndStandardError(residuals).estimate
  const estimate = teacherEntropy.estimate + difference.estimate
  const standardError = Math.sqrt(teacherEntropy.standardError ** 2 + difference.standardError ** 2)
  const reliable = Math.abs(correction) <= MAX_BIAS_CORRECTION && Math.abs(residual) <= MAX_RESIDUAL
  return {
    contextLength: n,
    estimate: reliable ? estimate : null,
    standardError: reliable ? standardError : null,
    method: 'posterior',
    reliable,
    note: reliable
      ? `exact posterior sampling of the history before the last ${n} tokens (${options.contexts} contexts x ${S} ` +
        `sweeps${positionSpecific ? '' : ', position resampled'}), split-half bias-corrected`
      : Math.abs(correction) > MAX_BIAS_CORRECTION
        ? `not estimated: the posterior-sampling bias correction (${correction.toFixed(3)} nat) is too large to ` +
          'trust; raise sweeps'
        : `not estimated: the posterior-sampling bias correction (${correction.toFixed(3)} nat) did not converge ` +
          `between halves and quarters of the sweeps (change ${residual.toFixed(3)} nat > ${MAX_RESIDUAL}): the ` +
          'chain mixes too slowly; raise sweeps',
    biasCorrection: correction,
    bounds: null,
  }
}
