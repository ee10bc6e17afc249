/**
 * The task contract: what a data generator gives a trainer. Implemented by `@attnlab/markov`'s
 * tasks and `@attnlab/knockout`'s `MixtureTask`, consumed by `@attnlab/transformer`'s trainer
 * and metrics.
 *
 * Token layout: a batch is `batchSize` sequences of `seqLength` tokens, row-major in an
 * `Int32Array` (`tokens[b * seqLength + p]`). `lossMask[b * seqLength + p] = 1` marks the
 * positions whose token is scored: the model predicts token `p` from tokens `< p`, so a
 * next-token trainer feeds `tokens[:, :-1]` and scores its outputs against `tokens[:, 1:]` where
 * `lossMask[:, 1:]` is 1. Position 0 is never scored.
 *
 * @module
 */
import type { Rng } from './rng.ts'

/**
 * A batch of token sequences with a loss mask (see the module comment for the layout).
 *
 * @category Tasks
 */
export interface TokenBatch {
  /** Token ids in `[0, vocabSize)`, `[batchSize, seqLength]` row-major. */
  readonly tokens: Int32Array
  /** 1 where the token at that position is scored, else 0; `[batchSize, seqLength]` row-major. */
  readonly lossMask: Uint8Array
  /** Number of sequences. */
  readonly batchSize: number
  /** Tokens per sequence. */
  readonly seqLength: number
}

/**
 * A set of relative offsets a prediction depends on, for attention-mass metrics. Offset 0 is
 * the query's own position (the newest token the model sees when predicting the next one),
 * offset 1 the token before it, and so on.
 *
 * @category Tasks
 */
export interface OffsetGroup {
  /** A short label, e.g. `'span 2 (newest)'`. */
  readonly name: string
  /** Relative offsets (non-negative), e.g. `[0, 1]`. */
  readonly offsets: readonly number[]
}

/**
 * One ground-truth attention map of a task: which keys each query position should attend to.
 *
 * `weights` is `[size, size]` row-major, query x key, in the positions of the model's input
 * (the tokens the model sees, `tokens[:, :-1]`): row `q` is the query that predicts token `q + 1`,
 * and `weights[q * size + k]` is 1 when the token at key `k <= q` is one of the tokens that
 * token depends on (its parents, see {@link Task.parentPositions}), else 0. Rows of positions
 * whose token is not determined by a fixed pattern (the initial random state, burn-in tokens, the
 * last position) are all 0. A 0/1 indicator, not a distribution: an attention bias adds
 * `beta * weights` to the pre-softmax scores (Baherwani et al., arXiv 2606.25010, the
 * attention-bias intervention).
 *
 * @category Tasks
 */
export interface TrueAttentionMap {
  /** A short label, e.g. `'rows of M'` or `'span 2 (newest)'`. */
  readonly name: string
  /** `[size, size]` row-major, query x key, entries 0 or 1 (1 only at keys `<=` the query). */
  readonly weights: Float32Array
}

/**
 * The ground-truth attention of a task with a fixed sparse routing pattern: one map, or one per
 * component the task's solution routes separately (the sparse Markov chain: one per span, most
 * important first, as {@link Task.offsetGroups}).
 *
 * @category Tasks
 */
export interface TrueAttention {
  /** Positions per side of each map: the task's `seqLength` (one more than the model's inputs). */
  readonly size: number
  /** At least one map. */
  readonly maps: readonly TrueAttentionMap[]
}

/**
 * A task as plain JSON: `{ kind, ...configuration }`, the output of {@link Task.describe} (what a
 * checkpoint stores), from which the task's family rebuilds the identical task.
 *
 * @category Tasks
 */
export interface TaskDescription {
  /** The task family (e.g. `'sparse-markov'`). */
  readonly kind: string
  /** The family's configuration (JSON values). */
  readonly [key: string]: unknown
}

/**
 * A data generator: draws token batches and describes itself as JSON.
 *
 * @example
 * ```ts
 * const batch = task.sample(32, Rng.fromSeed(0)) // tokens [32, task.seqLength]
 * ```
 * @category Tasks
 */
export interface Task {
  /** The task family (`'sparse-markov'`, `'mixture'`, ...): the `kind` of its description. */
  readonly kind: string
  /** Number of distinct token ids (ids are `0 .. vocabSize - 1`). */
  readonly vocabSize: number
  /** Tokens per sequence. */
  readonly seqLength: number
  /**
   * Groups of relative offsets the next token depends on, most important first, when the task
   * has a fixed sparse dependency pattern (sparse-markov: one group per span); else undefined.
   */
  readonly offsetGroups?: readonly OffsetGroup[]
  /**
   * The absolute positions (ascending) whose tokens determine the distribution of the token at
   * `position`, given the task's fixed parameters (a teacher, a matrix M), when that dependency
   * is fixed; `undefined` for unscored positions and for dependencies that are not fixed (for
   * example a rule that must be inferred from the whole context). Optional: finer-grained than
   * {@link Task.offsetGroups} for tasks whose pattern varies with the position (linear map).
   *
   * @param position - a position in `[0, seqLength)`
   */
  parentPositions?(position: number): readonly number[] | undefined
  /**
   * The task's ground-truth attention maps (see {@link TrueAttention}), when its routing pattern
   * is fixed (linear map: the rows of `M`; cellular automaton: the neighbourhood window; sparse
   * Markov chain: its spans); absent for tasks whose pattern must be inferred in context.
   * Optional: what an attention-bias intervention (Baherwani et al., arXiv 2606.25010) adds to
   * the attention scores. Each call returns fresh arrays.
   */
  trueAttention?(): TrueAttention
  /**
   * Draws `batchSize` fresh sequences.
   *
   * @param batchSize - number of sequences, >= 1
   * @param rng - the random stream to draw from (the task's fixed parameters, e.g. a teacher,
   *   come from its own seed, not from this stream)
   * @returns tokens and loss mask, `[batchSize, seqLength]`
   */
  sample(batchSize: number, rng: Rng): TokenBatch
  /** The task's full configuration as plain JSON with its `kind` (enough to rebuild it). */
  describe(): Readonly<Record<string, unknown>>
}
