/**
 * One call for the loss floors and plateau lines of any task with a loss oracle: the exact or
 * Monte-Carlo restricted-context entropies of the sparse Markov chain (the losses of the
 * misspecified predictors that see only part of the context: the oracle plateaus of Yüksel et al.,
 * arXiv 2602.19143, sec. 4), the closed-form floor of the linear map and the in-context Bayes loss of the
 * cellular automaton and ICL Markov tasks (Baherwani et al., arXiv 2606.25010).
 *
 * @module
 */
import { ConfigError, Rng } from '@attnlab/core'
import { CellularAutomatonTask } from './cellular-automaton.ts'
import type { AnyTask } from './create-task.ts'
import { OracleTooLargeError } from './errors.ts'
import { IclMarkovTask } from './icl-markov.ts'
import { LinearMapTask } from './linear-map.ts'
import {
  DEFAULT_MAX_EXACT_STATES,
  type RestrictedContextEntropy,
  restrictedContextEntropy,
} from './sparse-markov-exact.ts'
import {
  restrictedContextEntropyMonteCarlo,
  type EntropyEstimate,
  type MonteCarloProgress,
  type RestrictedContextEntropyEstimate,
} from './sparse-markov-monte-carlo.ts'
import { SparseMarkovTask } from './sparse-markov.ts'

/**
 * Options of {@link taskOracle}. The sparse-Markov options are ignored by the other tasks and
 * `sequences` by the sparse Markov chain.
 *
 * @category Oracles
 */
export interface TaskOracleOptions {
  /**
   * Sparse Markov chain: `'exact'` enumerates the `d^C` windows, `'monte-carlo'` estimates,
   * `'auto'` (default) is exact when `d^C <= maxStates`.
   */
  readonly method?: 'auto' | 'exact' | 'monte-carlo'
  /** Sparse Markov chain: the largest `d^C` the exact oracle enumerates (default {@link DEFAULT_MAX_EXACT_STATES}). */
  readonly maxStates?: number
  /** Seed of the Monte-Carlo estimators (not of the task); default 0. */
  readonly seed?: number
  /** Monte Carlo: sequences for the counting estimates (the estimator's default when absent). */
  readonly mcSequences?: number
  /** Monte Carlo: contexts per posterior estimate (the estimator's default when absent). */
  readonly contexts?: number
  /** Monte Carlo: chain sweeps per context, a multiple of 4 (the estimator's default when absent). */
  readonly sweeps?: number
  /** Monte Carlo: also estimate the position-specific variant (default false). */
  readonly positionSpecific?: boolean
  /** Cellular automaton / ICL Markov: sequences for the Bayes-loss estimate (default 20000). */
  readonly sequences?: number
  /**
   * Called with `d^C` before estimating by Monte Carlo when `method` is `'auto'` and the windows
   * are too many to enumerate (for a notice: the estimate can take a while).
   */
  readonly onMonteCarlo?: (states: number) => void
  /** Monte Carlo: called as the posterior-sampling estimates advance (for a progress display). */
  readonly onProgress?: (progress: MonteCarloProgress) => void
}

/**
 * The fields every {@link TaskOracle} has.
 *
 * @category Oracles
 */
export type OracleBase = {
  /** The task's `describe()` output. */
  readonly task: ReturnType<AnyTask['describe']>
  /** Every loss value is in nats. */
  readonly units: 'nats'
}

/**
 * {@link taskOracle} on a sparse Markov chain, exact (`restrictedContextEntropy`): every list is
 * indexed by context length `n = 0 .. C` unless said otherwise.
 *
 * @category Oracles
 */
export type SparseMarkovExactOracle = OracleBase & {
  readonly method: 'exact'
  /** `H_n`, pooled over positions, `[C + 1]`. */
  readonly restrictedContextEntropy: readonly number[]
  /** The position-specific `H_n`, `[C + 1]`. */
  readonly positionSpecificEntropy: readonly number[]
  /** `H_C`, the best achievable loss. */
  readonly teacherEntropy: number
  /** Bayes losses given the `j` most important spans, `j = 0 .. K` (as {@link restrictedContextEntropy}'s). */
  readonly topSpans: RestrictedContextEntropy['topSpans']
  /** Cross-entropy of the truncated teacher with the `k` most important spans, `k = 0 .. K`. */
  readonly truncatedTeacherCrossEntropy: readonly number[]
  /** `H(Y_t | last n tokens at t)`, `[genLen][C + 1]`. */
  readonly perPositionEntropy: readonly (readonly number[])[]
}

/**
 * {@link taskOracle} on a sparse Markov chain, by Monte Carlo (`restrictedContextEntropyMonteCarlo`):
 * null where a value could not be estimated without bias (then `restrictedContextEntropyBounds`).
 *
 * @category Oracles
 */
export type SparseMarkovMonteCarloOracle = OracleBase & {
  readonly method: 'monte-carlo'
  readonly restrictedContextEntropy: readonly (number | null)[]
  readonly restrictedContextEntropyStandardError: readonly (number | null)[]
  readonly restrictedContextEntropyBounds: readonly (readonly [number, number] | null)[]
  /** Only with `positionSpecific: true`. */
  readonly positionSpecificEntropy?: readonly (number | null)[]
  readonly positionSpecificEntropyStandardError?: readonly (number | null)[]
  readonly teacherEntropy: number | null
  readonly teacherEntropyStandardError: number | null
  readonly topSpans: {
    readonly spans: readonly (readonly number[])[]
    readonly pooled: readonly (number | null)[]
    readonly standardError: readonly (number | null)[]
  }
  readonly truncatedTeacherCrossEntropy: readonly (number | null)[]
  readonly truncatedTeacherCrossEntropyStandardError: readonly (number | null)[]
  /** The estimator's per-length estimates (with notes on unreliable ones). */
  readonly estimates: readonly EntropyEstimate[]
  /** The estimator's resolved options. */
  readonly monteCarloOptions: RestrictedContextEntropyEstimate['options']
}

/**
 * {@link taskOracle} on the linear map: the closed-form floor.
 *
 * @category Oracles
 */
export type LinearMapOracle = OracleBase & {
  readonly lossFloor: number
  /** `ln 2`. */
  readonly chanceLoss: number
  readonly formula: string
}

/**
 * {@link taskOracle} on the cellular automaton or the ICL Markov chain: the in-context Bayes loss
 * by Monte Carlo.
 *
 * @category Oracles
 */
export type BayesLossOracle = OracleBase & {
  readonly bayesLoss: number
  readonly bayesLossStandardError: number
  /** Sequences sampled. */
  readonly sequences: number
  /** `ln(vocabSize)` (ICL Markov) or `ln 2` (cellular automaton). */
  readonly chanceLoss: number
  /** Mean loss per position, null where a position is never scored, `[seqLength]`. */
  readonly perPositionBayesLoss: readonly (number | null)[]
}

/**
 * The result of {@link taskOracle} (what `attnlab markov oracle --json` prints).
 *
 * @category Oracles
 */
export type TaskOracle = SparseMarkovExactOracle | SparseMarkovMonteCarloOracle | LinearMapOracle | BayesLossOracle

/**
 * The loss floor and plateau lines of a task, in nats: for the sparse Markov chain the
 * restricted-context entropies `H_n` (the Bayes losses of the misspecified predictors that see
 * only the last `n` tokens: the oracle plateaus of Yüksel et al., arXiv 2602.19143, sec. 4), the top-span losses and
 * the truncated-teacher cross-entropies, exact when `d^C` fits `maxStates` or by Monte Carlo with
 * standard errors; for the linear map its closed-form floor; for the cellular automaton and the
 * ICL Markov chain the in-context Bayes loss estimated over `sequences` sequences drawn from
 * `Rng.fromSeed(seed).split('markov/oracle')` (Baherwani et al., arXiv 2606.25010). Same seed,
 * same numbers.
 *
 * @param task - the task (a retrieval task has no loss oracle)
 * @param options - method and estimator settings ({@link TaskOracleOptions})
 * @returns the oracle summary ({@link TaskOracle})
 * @throws OracleTooLargeError (code `TOO_LARGE`) for `method: 'exact'` when `d^C > maxStates`
 * @throws ConfigError for a task without a loss oracle (a retrieval task) or an option the
 *   estimators refuse (e.g. `sweeps` not a multiple of 4)
 * @example
 * ```ts
 * const oracle = taskOracle(new SparseMarkovTask({ vocabSize: 4, spans: [1, 1, 1] }))
 * oracle.method // 'exact'; oracle.restrictedContextEntropy: H_0 .. H_3
 * ```
 * @category Oracles
 */
export function taskOracle(task: AnyTask, options: TaskOracleOptions = {}): TaskOracle {
  const seed = options.seed ?? 0
  if (task instanceof SparseMarkovTask) return sparseMarkovOracle(task, options, seed)
  const base = { task: task.describe(), units: 'nats' as const }
  if (task instanceof LinearMapTask) {
    return {
      ...base,
      lossFloor: task.lossFloor(),
      chanceLoss: Math.LN2,
      formula: 'ln2 * (random scored bits) / (scored bits)',
    }
  }
  if (!(task instanceof CellularAutomatonTask || task instanceof IclMarkovTask)) {
    throw new ConfigError(
      'task',
      `has no loss oracle: got a ${task.kind} task (a retrieval task: its answers are determined by the context; ` +
        'expected sparse-markov, linear-map, cellular-automaton or icl-markov)',
      { kind: task.kind },
    )
  }
  const rng = Rng.fromSeed(seed).split('markov/oracle')
  const loss = task.bayesLoss(options.sequences ?? 20_000, rng)
  return {
    ...base,
    bayesLoss: loss.estimate,
    bayesLossStandardError: loss.standardError,
    sequences: loss.samples,
    chanceLoss: Math.log(task.kind === 'icl-markov' ? task.vocabSize : 2),
    perPositionBayesLoss: loss.perPosition.map((x) => (Number.isNaN(x) ? null : x)),
  }
}

function sparseMarkovOracle(task: SparseMarkovTask, options: TaskOracleOptions, seed: number): TaskOracle {
  const base = { task: task.describe(), units: 'nats' as const }
  const method = options.method ?? 'auto'
  const maxStates = options.maxStates ?? DEFAULT_MAX_EXACT_STATES
  const states = task.vocabSize ** task.contextLength
  const exact = method === 'exact' || (method === 'auto' && states <= maxStates)
  if (exact && states > maxStates) {
    throw new OracleTooLargeError("taskOracle's exact method", states, maxStates, "method 'monte-carlo'")
  }
  if (exact) {
    const oracle = restrictedContextEntropy(task, { maxStates })
    return {
      ...base,
      method: 'exact',
      restrictedContextEntropy: oracle.pooled,
      positionSpecificEntropy: oracle.positionSpecific,
      teacherEntropy: oracle.teacherEntropy,
      topSpans: oracle.topSpans,
      truncatedTeacherCrossEntropy: oracle.truncatedTeacherCrossEntropy,
      perPositionEntropy: oracle.perPosition,
    }
  }
  if (method === 'auto') options.onMonteCarlo?.(states)
  const estimate = restrictedContextEntropyMonteCarlo(task, {
    seed,
    ...(options.mcSequences !== undefined ? { sequences: options.mcSequences } : {}),
    ...(options.contexts !== undefined ? { contexts: options.contexts } : {}),
    ...(options.sweeps !== undefined ? { sweeps: options.sweeps } : {}),
    positionSpecific: options.positionSpecific === true,
    ...(options.onProgress !== undefined ? { onProgress: options.onProgress } : {}),
  })
  const values = (list: readonly EntropyEstimate[]): (number | null)[] => list.map((e) => e.estimate)
  const errors = (list: readonly EntropyEstimate[]): (number | null)[] => list.map((e) => e.standardError)
  return {
    ...base,
    method: 'monte-carlo',
    restrictedContextEntropy: values(estimate.pooled),
    restrictedContextEntropyStandardError: errors(estimate.pooled),
    restrictedContextEntropyBounds: estimate.pooled.map((e) => e.bounds),
    ...(estimate.positionSpecific
      ? {
          positionSpecificEntropy: values(estimate.positionSpecific),
          positionSpecificEntropyStandardError: errors(estimate.positionSpecific),
        }
      : {}),
    teacherEntropy: estimate.teacherEntropy.estimate,
    teacherEntropyStandardError: estimate.teacherEntropy.standardError,
    topSpans: {
      spans: estimate.topSpans.spans,
      pooled: values(estimate.topSpans.pooled),
      standardError: errors(estimate.topSpans.pooled),
    },
    truncatedTeacherCrossEntropy: estimate.truncatedTeacherCrossEntropy.map((e) => e.estimate),
    truncatedTeacherCrossEntropyStandardError: estimate.truncatedTeacherCrossEntropy.map((e) => e.standardError),
    estimates: estimate.pooled,
    monteCarloOptions: estimate.options,
  }
}
