/**
 * What the token-level retrieval tasks (`niah-tokens`, `vt-tokens`, `cwe-tokens`,
 * `multihop-tokens`) share: the answer layout a scorer reads, the metrics of The Sparse Frontier
 * (Nawrot et al., arXiv 2504.17768 [v2], section 4 and appendix A.2: per-key exact match for NIAH,
 * set overlap for VT and CWE, exact match for multi-hop) with their strict variants, and the
 * sampling helpers. The tasks are synthetic-vocabulary versions of RULER's NIAH, VT and CWE and of
 * the study's Story Multi-hop: no tokenizer, every item is one token.
 *
 * @module
 */
import { ConfigError, InvalidArgumentError, type Rng } from '@attnlab/core'
import type { Task } from './task.ts'

/**
 * How a retrieval task's answer is scored: `'sequence'` (each answer token against the gold token
 * at its position: NIAH, multi-hop) or `'set'` (the answer tokens as a set against the gold set:
 * VT, CWE; order does not matter).
 *
 * @category Retrieval tasks
 */
export type AnswerKind = 'sequence' | 'set'

/**
 * The score of one answer (one sequence), every field in `[0, 1]`.
 *
 * @category Retrieval tasks
 */
export interface AnswerScore {
  /**
   * The study's score. `'sequence'` answers: the fraction of answer tokens equal to the gold
   * token at the same position (NIAH's per-key exact match, [v2] A.2). `'set'` answers: recall,
   * `|predicted ∩ gold| / |gold|` (per-item recall; predicted duplicates count once).
   */
  readonly score: number
  /** 1 when every answer token is right (`'sequence'`) or the predicted set equals the gold set (`'set'`), else 0. */
  readonly strict: number
  /**
   * Intersection over union of the predicted and gold sets (the metric RULER VT and CWE report in
   * the study's code, [v2] section 4); for `'sequence'` answers the same set formula over tokens.
   */
  readonly iou: number
}

/**
 * A task whose sequences end in a question and its answer: the answer tokens sit at fixed
 * positions (the same for every sequence of the task), which are the only positions its loss mask
 * marks. A scorer feeds the tokens before {@link RetrievalTask.answerPositions}'s first entry as
 * the prompt and reads the model's predictions at the answer positions.
 *
 * @category Retrieval tasks
 */
export interface RetrievalTask extends Task {
  /** How the answer is scored. */
  readonly answerKind: AnswerKind
  /**
   * The absolute positions (ascending, in `[1, seqLength)`) of the answer tokens: exactly where
   * `lossMask` is 1. Positions between two answer tokens that are not answers (the next queried
   * key in multi-needle NIAH) are part of the question and are fed, not predicted.
   */
  readonly answerPositions: readonly number[]
  /**
   * Scores predicted answer tokens against the gold ones (both in the order of
   * {@link RetrievalTask.answerPositions}).
   *
   * @param gold - the gold tokens at the answer positions
   * @param predicted - the predicted tokens, same length
   * @throws `InvalidArgumentError` (`@attnlab/core`) when the lengths differ from the answer's
   */
  scoreAnswer(gold: ArrayLike<number>, predicted: ArrayLike<number>): AnswerScore
}

/**
 * Whether `task` is a {@link RetrievalTask} (has answer positions and a scorer).
 *
 * @category Retrieval tasks
 */
export function isRetrievalTask(task: Task): task is RetrievalTask {
  const candidate = task as Partial<RetrievalTask>
  return (
    Array.isArray(candidate.answerPositions) &&
    typeof candidate.scoreAnswer === 'function' &&
    (candidate.answerKind === 'sequence' || candidate.answerKind === 'set')
  )
}

/**
 * Scores an answer of `kind` (see {@link AnswerScore}). Empty answers score 1 (nothing to miss).
 *
 * @param kind - `'sequence'` or `'set'`
 * @param gold - the gold answer tokens
 * @param predicted - the predicted answer tokens, as many as `gold`
 * @param expected - the answer length both must have (a task's answer positions), when known
 * @throws `InvalidArgumentError` (`@attnlab/core`) when the lengths differ (from each other or `expected`)
 * @example
 * ```ts
 * scoreAnswer('set', [4, 7, 9], [9, 4, 4]) // { score: 2/3, strict: 0, iou: 2/3 }
 * ```
 * @category Retrieval tasks
 */
export function scoreAnswer(
  kind: AnswerKind,
  gold: ArrayLike<number>,
  predicted: ArrayLike<number>,
  expected: number = gold.length,
): AnswerScore {
  for (const [name, answer] of [
    ['gold', gold],
    ['predicted', predicted],
  ] as const) {
    if (answer.length !== expected) {
      throw new InvalidArgumentError(
        `${name} has ${answer.length} tokens; expected one per answer token (${expected})`,
        { gold: gold.length, predicted: predicted.length, expected },
      )
    }
  }
  const goldSet = new Set(Array.from(gold))
  const predictedSet = new Set(Array.from(predicted))
  let common = 0
  for (const token of predictedSet) if (goldSet.has(token)) common++
  const union = goldSet.size + predictedSet.size - common
  const iou = union === 0 ? 1 : common / union
  if (kind === 'set') {
    const score = goldSet.size === 0 ? 1 : common / goldSet.size
    const strict = common === goldSet.size && predictedSet.size === goldSet.size ? 1 : 0
    return { score, strict, iou }
  }
  let right = 0
  for (let i = 0; i < gold.length; i++) if (gold[i] === predicted[i]) right++
  const score = gold.length === 0 ? 1 : right / gold.length
  return { score, strict: right === gold.length ? 1 : 0, iou }
}

/**
 * A `ConfigError` for a configuration whose items do not fit in the sequence.
 *
 * @internal
 */
export function tooLong(kind: string, needed: number, seqLength: number, what: string): ConfigError {
  return new ConfigError(
    'nCtx',
    `${kind}: ${what} needs ${needed} tokens but the sequence has ${seqLength} (nCtx + 1); ` +
      'raise nCtx or use fewer items',
    { needed, seqLength },
  )
}

/**
 * A `ConfigError` for a token range too small for the distinct items a sequence needs.
 *
 * @internal
 */
export function tooFewTokens(kind: string, parameter: string, have: number, needed: number, what: string): ConfigError {
  return new ConfigError(
    parameter,
    `${kind}: ${parameter} = ${have} but ${what} needs ${needed} distinct tokens; raise ${parameter}`,
    { value: have, needed },
  )
}

/**
 * `count` distinct integers of `[0, n)` in random order (a partial Fisher-Yates shuffle).
 *
 * @internal
 */
export function distinct(rng: Rng, n: number, count: number): Int32Array {
  const pool = new Int32Array(n)
  for (let i = 0; i < n; i++) pool[i] = i
  for (let i = 0; i < count; i++) {
    const j = i + rng.int(n - i)
    const t = pool[i] as number
    pool[i] = pool[j] as number
    pool[j] = t
  }
  return pool.slice(0, count)
}
