/**
 * Exact plateau oracles of the sparse Markov chain: the Bayes-optimal loss of predictors that
 * see only part of the window, by propagating the exact window distribution (after Yüksel et
 * al., arXiv 2602.19143).
 *
 * @module
 */
import { OracleTooLargeError } from './errors.ts'
import { conditionalEntropy, dropOldest } from './entropy.ts'
import type { SparseMarkovTask, TeacherTables } from './sparse-markov.ts'
import { checkInteger } from './validate.ts'

/**
 * Options of {@link restrictedContextEntropy}.
 *
 * @category Oracles
 */
export interface ExactOracleOptions {
  /**
   * The largest number of window states `d^C` to enumerate; default `1_000_000` (about 10 s and
   * 50 MB at d = 100, C = 3; 2 s at d = 50, C = 3 is 125k states). Range `[1, 2^28]`.
   */
  readonly maxStates?: number
}

/**
 * Exact restricted-context and truncated-teacher losses of a sparse Markov chain, all in nats.
 *
 * Plateau interpretation (arXiv 2602.19143): training proceeds in stages; in stage `j` the model
 * uses (attends to) only the `j` most important spans, so its loss sits near the Bayes loss of a
 * predictor that sees only those spans, `topSpans.pooled[j]` (for the default, non-reversed
 * teacher the `j` most important spans are the newest ones, so this equals
 * `pooled[n_j]` with `n_j` the length of the `j` newest spans). Measured plateaus of real models
 * sit 0.1-0.3 nat below these lines early in training (the minimal model's plateaus in Yüksel et
 * al., arXiv 2602.19143, Figure 1).
 *
 * @category Oracles
 */
export interface RestrictedContextEntropy {
  /** How the numbers were obtained. */
  readonly method: 'exact'
  /** `n = 0 .. C`, the context lengths of {@link RestrictedContextEntropy.pooled}. */
  readonly contextLengths: readonly number[]
  /**
   * `H_n = H(Y | last n tokens)` for `n = 0 .. C`, with the window distribution pooled (averaged)
   * over the `genLen` generated positions: the best loss of a predictor that sees the last `n`
   * tokens but not the position. Non-increasing in `n`; `H_0` is the entropy of the pooled
   * marginal, `H_C` the teacher's entropy.
   */
  readonly pooled: readonly number[]
  /**
   * Position-specific variant: the mean over positions `t` of `H(Y_t | last n tokens at t)` (a predictor that also
   * knows the position).
   */
  readonly positionSpecific: readonly number[]
  /** `perPosition[t][n] = H(Y_t | last n tokens at t)`, `[genLen][C + 1]`. */
  readonly perPosition: readonly (readonly number[])[]
  /** The teacher's entropy `H_C` (the best achievable loss), pooled = position-specific. */
  readonly teacherEntropy: number
  /**
   * Bayes losses of predictors that see only the tokens of the `j` most important spans, for
   * `j = 0 .. K` (`spans[j]` lists the kept span indices, oldest-first numbering): the plateau
   * lines of stage-wise learning.
   */
  readonly topSpans: {
    readonly spans: readonly (readonly number[])[]
    readonly pooled: readonly number[]
    readonly positionSpecific: readonly number[]
  }
  /**
   * Cross-entropy of the truncated teacher `A*_{1:k}` (the `k` most important spans, not refit)
   * on the data, `E[-log P_k(y | window)]`, for `k = 0 .. K` (`k = 0`: `ln d`; `k = K`: the
   * teacher entropy). Minus {@link RestrictedContextEntropy.teacherEntropy} it is the expected
   * `KL(teacher || teacher_k)`. The truncated teacher is miscalibrated, so this is above the
   * matching `topSpans` value.
   */
  readonly truncatedTeacherCrossEntropy: readonly number[]
}

/**
 * Default limit on the enumerated window states of the exact oracle.
 *
 * @category Oracles
 */
export const DEFAULT_MAX_EXACT_STATES = 1_000_000

/**
 * Exact Bayes-optimal losses of restricted predictors on a sparse Markov chain
 * (after Yüksel et al., arXiv 2602.19143).
 *
 * Algorithm: the window distribution `p_0` is uniform over the `d^C` windows (burn-in); for each
 * generated position `t`, one pass over all windows `w` computes `P(. | w)` and accumulates
 * `J_t(w[1:], y) = p_t(w) P(y | w)`, which is at the same time the next window distribution
 * `p_{t+1}` and the joint of (last `C-1` tokens, next token). Marginalising the oldest token
 * repeatedly gives the joints of (last `n` tokens, next token) for every `n`, whose conditional
 * entropies are `H_n` at position `t`; pooling averages the joints over `t` first. Cost
 * `O(genLen * d^(C+1))` time, `O(d^C)` memory.
 *
 * @param task - the chain
 * @param options - `maxStates`
 * @returns the oracle values in nats
 * @throws {@link OracleTooLargeError} (code `TOO_LARGE`) when `d^C > maxStates`; use
 *   {@link restrictedContextEntropyMonteCarlo} then. `ConfigError` (`@attnlab/core`) for a bad `maxStates`.
 * @example
 * ```ts
 * const task = new SparseMarkovTask({ vocabSize: 50, spans: [1, 1, 1] })
 * restrictedContextEntropy(task).pooled // [3.696, 1.759, 1.167, 0.964] for teacher seed 0
 * ```
 * @category Oracles
 */
export function restrictedContextEntropy(
  task: SparseMarkovTask,
  options: ExactOracleOptions = {},
): RestrictedContextEntropy {
  const maxStates = checkInteger('maxStates', options.maxStates ?? DEFAULT_MAX_EXACT_STATES, 1, 2 ** 28)
  const d = task.vocabSize
  const C = task.contextLength
  const G = task.config.genLen
  const K = task.spanCount
  const states = d ** C
  if (states > maxStates) {
    throw new OracleTooLargeError(
      `the exact restricted-context entropy of d = ${d}, C = ${C} (d^C windows)`,
      states,
      maxStates,
      'restrictedContextEntropyMonteCarlo(task) (CLI: attnlab markov oracle --method monte-carlo)',
    )
  }
  const { importanceOrder, spans, starts } = task.teacher
  // Models evaluated per window: the full teacher (index 0) and truncated teachers k = 1 .. K-1.
  const models: TeacherTables[] = [task.tables(K)]
  for (let k = 1; k < K; k++) models.push(task.tables(k))
  // Position sets of the top-j spans that are not a suffix of the window need their own joints.
  const topSpanSets = Array.from({ length: K + 1 }, (_, j) => {
    const positions = new Set<number>()
    for (const i of importanceOrder.slice(0, j)) {
      for (let p = starts[i] as number; p < (starts[i] as number) + (spans[i] as number); p++) positions.add(p)
    }
    const sorted = [...positions].sort((a, b) => a - b)
    const isSuffix = sorted.every((p, r) => p === C - sorted.length + r)
    return { spans: importanceOrder.slice(0, j).sort((a, b) => a - b), positions: sorted, isSuffix }
  })
  const extraSets = topSpanSets.filter((s) => !s.isSuffix)
  const extraJoints = extraSets.map((s) => new Float64Array(d ** s.positions.length * d))
  const extraPooled = extraSets.map((s) => new Float64Array(d ** s.positions.length * d))
  const extraPerPosition = extraSets.map(() => [] as number[])

  // Phase 1 (once): per window, the teacher entropy, the truncated teachers' cross-entropies,
  // the top-span context indices, and (if it fits in memory) P(. | w) itself.
  const cacheProbabilities = states * d <= PROBABILITY_CACHE_ENTRIES
  const cachedProbabilities = cacheProbabilities ? new Float64Array(states * d) : undefined
  const windowEntropy = new Float64Array(states)
  const windowCrossEntropy = Array.from({ length: K }, () => new Float64Array(K > 1 ? states : 0))
  const subsetIndex = extraSets.map(() => new Int32Array(states))
  const probabilities = new Float64Array(d)
  forEachWindow(models, d, C, (w, digits, prods, logs) => {
    const leaf = (C - 1) * d
    const logFull = logs[0] as Float64Array
    const logTotal = normalise(prods[0] as Float64Array, logFull, leaf, d, probabilities)
    if (cachedProbabilities) cachedProbabilities.set(probabilities, w * d)
    let expectedLog = 0
    for (let y = 0; y < d; y++) expectedLog += (probabilities[y] as number) * (logFull[leaf + y] as number)
    windowEntropy[w] = logTotal - expectedLog
    for (let m = 1; m < models.length; m++) {
      const prod = prods[m] as Float64Array
      const logSum = logs[m] as Float64Array
      let total = 0
      for (let y = 0; y < d; y++) total += prod[leaf + y] as number
      const logNormaliser = total > 1e-200 && total < Infinity ? Math.log(total) : logSumExp(logSum, leaf, d)
      let expected = 0
      for (let y = 0; y < d; y++) expected += (probabilities[y] as number) * (logSum[leaf + y] as number)
      ;(windowCrossEntropy[m] as Float64Array)[w] = logNormaliser - expected
    }
    for (let s = 0; s < extraSets.length; s++) {
      let index = 0
      for (const p of (extraSets[s] as { positions: number[] }).positions) index = index * d + (digits[p] as number)
      ;(subsetIndex[s] as Int32Array)[w] = index
    }
  })

  // Phase 2: propagate the window distribution through the genLen generated positions.
  let current = new Float64Array(states).fill(1 / states)
  let next = new Float64Array(states)
  const pooledJoint = new Float64Array(states)
  const perPosition: number[][] = []
  let pooledTeacherEntropy = 0
  const pooledCrossEntropy = new Array<number>(K).fill(0)
  const tail = states / d // d^(C-1)
  const fullModel = [models[0] as TeacherTables]
  for (let t = 0; t < G; t++) {
    next.fill(0)
    for (const joint of extraJoints) joint.fill(0)
    const weights = current
    const accumulate = (w: number, source: Float64Array, offset: number): void => {
      const weight = weights[w] as number
      if (weight === 0) return
      const base = (w % tail) * d
      for (let y = 0; y < d; y++) next[base + y] = (next[base + y] as number) + weight * (source[offset + y] as number)
      for (let s = 0; s < extraJoints.length; s++) {
        const joint = extraJoints[s] as Float64Array
        const o = ((subsetIndex[s] as Int32Array)[w] as number) * d
        for (let y = 0; y < d; y++) joint[o + y] = (joint[o + y] as number) + weight * (source[offset + y] as number)
      }
    }
    if (cachedProbabilities) {
      for (let w = 0; w < states; w++) accumulate(w, cachedProbabilities, w * d)
    } else {
      forEachWindow(fullModel, d, C, (w, _digits, prods, logs) => {
        normalise(prods[0] as Float64Array, logs[0] as Float64Array, (C - 1) * d, d, probabilities)
        accumulate(w, probabilities, 0)
      })
    }
    let teacherEntropy = 0
    for (let w = 0; w < states; w++) teacherEntropy += (weights[w] as number) * (windowEntropy[w] as number)
    for (let m = 1; m < K; m++) {
      const values = windowCrossEntropy[m] as Float64Array
      let ce = 0
      for (let w = 0; w < states; w++) ce += (weights[w] as number) * (values[w] as number)
      pooledCrossEntropy[m] = (pooledCrossEntropy[m] as number) + ce / G
    }
    // Position-specific entropies at t, from the joint of (last C-1 tokens, next token) = next.
    const row = new Array<number>(C + 1).fill(0)
    row[C] = teacherEntropy
    let joint: Float64Array = next
    for (let n = C - 1; n >= 0; n--) {
      if (n < C - 1) joint = dropOldest(joint, d)
      row[n] = conditionalEntropy(joint, d)
    }
    perPosition.push(row)
    for (let i = 0; i < states; i++) pooledJoint[i] = (pooledJoint[i] as number) + (next[i] as number) / G
    pooledTeacherEntropy += teacherEntropy / G
    extraSets.forEach((_, s) => {
      const joint = extraJoints[s] as Float64Array
      const pooled = extraPooled[s] as Float64Array
      for (let i = 0; i < joint.length; i++) pooled[i] = (pooled[i] as number) + (joint[i] as number) / G
      ;(extraPerPosition[s] as number[]).push(conditionalEntropy(joint, d))
    })
    const swap = current
    current = next
    next = swap
  }

  const pooled = new Array<number>(C + 1).fill(0)
  pooled[C] = pooledTeacherEntropy
  let joint: Float64Array = pooledJoint
  for (let n = C - 1; n >= 0; n--) {
    if (n < C - 1) joint = dropOldest(joint, d)
    pooled[n] = conditionalEntropy(joint, d)
  }
  const positionSpecific = pooled.map((_, n) => perPosition.reduce((sum, row) => sum + (row[n] as number), 0) / G)
  const topPooled: number[] = []
  const topPositionSpecific: number[] = []
  let extra = 0
  for (const set of topSpanSets) {
    if (set.isSuffix) {
      topPooled.push(pooled[set.positions.length] as number)
      topPositionSpecific.push(positionSpecific[set.positions.length] as number)
    } else {
      topPooled.push(conditionalEntropy(extraPooled[extra] as Float64Array, d))
      const values = extraPerPosition[extra] as number[]
      topPositionSpecific.push(values.reduce((a, b) => a + b, 0) / G)
      extra++
    }
  }
  const truncatedTeacherCrossEntropy = [Math.log(d), ...pooledCrossEntropy.slice(1), pooledTeacherEntropy]
  return {
    method: 'exact',
    contextLengths: pooled.map((_, n) => n),
    pooled,
    positionSpecific,
    perPosition,
    teacherEntropy: pooledTeacherEntropy,
    topSpans: { spans: topSpanSets.map((s) => s.spans), pooled: topPooled, positionSpecific: topPositionSpecific },
    truncatedTeacherCrossEntropy: K === 1 ? [Math.log(d), pooledTeacherEntropy] : truncatedTeacherCrossEntropy,
  }
}

/** Cache `P(. | w)` for all windows when `d^(C+1)` is at most this (64 MB of float64). */
const PROBABILITY_CACHE_ENTRIES = 1 << 23

/**
 * Visits every window `w = 0 .. d^C - 1` (base-d digits, oldest token most significant) in
 * order, keeping per model the running products of exp columns (`prods[m][level * d + y]`) and
 * sums of shifted logits (`logs[m][...]`) of positions `0 .. level`; only the levels whose digit
 * changed are recomputed, so a visit costs `O(d)` per model on average. At the visit, level
 * `C - 1` holds the window's unnormalised weights.
 */
function forEachWindow(
  models: readonly TeacherTables[],
  d: number,
  C: number,
  visit: (w: number, digits: Int32Array, prods: readonly Float64Array[], logs: readonly Float64Array[]) => void,
): void {
  const states = d ** C
  const digits = new Int32Array(C)
  const prods = models.map(() => new Float64Array(C * d))
  const logs = models.map(() => new Float64Array(C * d))
  let changed = 0
  for (let w = 0; w < states; w++) {
    for (let m = 0; m < models.length; m++) {
      const { exp, log } = models[m] as TeacherTables
      const prod = prods[m] as Float64Array
      const logSum = logs[m] as Float64Array
      for (let level = changed; level < C; level++) {
        const o = (level * d + (digits[level] as number)) * d
        const here = level * d
        if (level === 0) {
          for (let y = 0; y < d; y++) {
            prod[y] = exp[o + y] as number
            logSum[y] = log[o + y] as number
          }
        } else {
          const before = here - d
          for (let y = 0; y < d; y++) {
            prod[here + y] = (prod[before + y] as number) * (exp[o + y] as number)
            logSum[here + y] = (logSum[before + y] as number) + (log[o + y] as number)
          }
        }
      }
    }
    visit(w, digits, prods, logs)
    // Odometer increment: recompute from the leftmost digit that moves.
    let level = C - 1
    while (level >= 0) {
      const v = (digits[level] as number) + 1
      if (v < d) {
        digits[level] = v
        break
      }
      digits[level] = 0
      level--
    }
    changed = Math.max(level, 0)
  }
}

/**
 * Normalises the leaf weights `prod[leaf .. leaf+d)` into `out` and returns the log of their
 * total (relative to the shifted logits `log[leaf ..]`), recomputing in log space on underflow.
 */
function normalise(prod: Float64Array, log: Float64Array, leaf: number, d: number, out: Float64Array): number {
  let total = 0
  for (let y = 0; y < d; y++) total += prod[leaf + y] as number
  if (total > 1e-200 && total < Infinity) {
    const inverse = 1 / total
    for (let y = 0; y < d; y++) out[y] = (prod[leaf + y] as number) * inverse
    return Math.log(total)
  }
  let max = -Infinity
  for (let y = 0; y < d; y++) max = Math.max(max, log[leaf + y] as number)
  let sum = 0
  for (let y = 0; y < d; y++) {
    const v = Math.exp((log[leaf + y] as number) - max)
    out[y] = v
    sum += v
  }
  for (let y = 0; y < d; y++) out[y] = (out[y] as number) / sum
  return max + Math.log(sum)
}

function logSumExp(values: Float64Array, offset: number, length: number): number {
  let max = -Infinity
  for (let i = 0; i < length; i++) max = Math.max(max, values[offset + i] as number)
  let sum = 0
  for (let i = 0; i < length; i++) sum += Math.exp((values[offset + i] as number) - max)
  return max + Math.log(sum)
}
