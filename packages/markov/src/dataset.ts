/**
 * Finite datasets: sample a fixed set of sequences once, then draw batches from it without
 * replacement (the paper's setting: 9000 training sequences, batches of 3000; Yüksel et al.,
 * arXiv 2602.19143, as configured in the authors' released code).
 *
 * @module
 */
import { ConfigError, InvalidArgumentError, Rng, type RngState, ShapeError } from '@attnlab/core'
import { checkBatch } from './sparse-markov.ts'
import type { Task, TokenBatch } from './task.ts'
import { checkInteger } from './validate.ts'

/**
 * Samples a finite dataset of `count` sequences (one `task.sample` call per chunk of 4096, so
 * the result equals `task.sample(count, rng)` for the same rng state).
 *
 * @param task - the generator
 * @param count - sequences, in `[1, 2^24]`
 * @param rng - the sampling stream (use e.g. `Rng.fromSeed(seed).split('train')` and `'validation'`)
 * @returns all sequences, `[count, seqLength]`
 * @throws `ConfigError` (`@attnlab/core`) for a bad `count`
 * @example
 * ```ts
 * const root = Rng.fromSeed(0)
 * const train = sampleDataset(task, 9000, root.split('train'))
 * const validation = sampleDataset(task, 3000, root.split('validation'))
 * ```
 * @category Datasets
 */
export function sampleDataset(task: Task, count: number, rng: Rng): TokenBatch {
  checkInteger('count', count, 1, 1 << 24)
  return task.sample(count, rng)
}

/**
 * Copies the sequences at `indices` (in that order) into a new batch.
 *
 * @param batch - the source, `[batchSize, seqLength]`
 * @param indices - sequence indices in `[0, batchSize)`
 * @returns `[indices.length, seqLength]`
 * @throws `ShapeError` (`@attnlab/core`) for an inconsistent batch; `InvalidArgumentError` (`@attnlab/core`)
 *   for an index out of range or an empty selection
 * @category Datasets
 */
export function selectSequences(batch: TokenBatch, indices: ArrayLike<number>): TokenBatch {
  const { tokens, lossMask, batchSize, seqLength } = checkBatch(batch)
  if (indices.length === 0) throw new InvalidArgumentError('selectSequences needs at least one index', {})
  const outTokens = new Int32Array(indices.length * seqLength)
  const outMask = new Uint8Array(indices.length * seqLength)
  for (let i = 0; i < indices.length; i++) {
    const index = indices[i] as number
    if (!Number.isInteger(index) || index < 0 || index >= batchSize) {
      throw new InvalidArgumentError(`sequence index ${index} is out of range [0, ${batchSize})`, {
        index,
        batchSize,
      })
    }
    outTokens.set(tokens.subarray(index * seqLength, (index + 1) * seqLength), i * seqLength)
    outMask.set(lossMask.subarray(index * seqLength, (index + 1) * seqLength), i * seqLength)
  }
  return { tokens: outTokens, lossMask: outMask, batchSize: indices.length, seqLength }
}

/**
 * Options of {@link DatasetBatches}.
 *
 * @category Datasets
 */
export interface DatasetBatchesOptions {
  /**
   * What to do with the `size mod batchSize` sequences left at the end of an epoch: `'drop'`
   * (default: every batch has exactly `batchSize` sequences; the leftovers differ per epoch
   * because each epoch is reshuffled) or `'short'` (a final smaller batch).
   */
  readonly remainder?: 'drop' | 'short'
}

/**
 * A serialisable position of a {@link DatasetBatches} (for checkpoints).
 *
 * @category Datasets
 */
export interface DatasetBatchesState {
  /** Completed epochs. */
  readonly epoch: number
  /** Next index into `order`. */
  readonly cursor: number
  /** This epoch's permutation of the sequence indices. */
  readonly order: readonly number[]
  /** The shuffling stream. */
  readonly rng: RngState
}

/**
 * Batches from a finite dataset, without replacement within an epoch: each epoch visits the
 * sequences in a fresh random order (Fisher-Yates with the given rng).
 *
 * @example
 * ```ts
 * const batches = new DatasetBatches(train, 3000, Rng.fromSeed(0).split('batches'))
 * for (let step = 0; step < 1000; step++) trainStep(batches.next())
 * ```
 * @category Datasets
 */
export class DatasetBatches {
  /** Sequences per batch. */
  readonly batchSize: number
  /** Batches per epoch. */
  readonly batchesPerEpoch: number
  private readonly dataset: TokenBatch
  private readonly remainder: 'drop' | 'short'
  private rng: Rng
  private order: Int32Array
  private cursor = 0
  private completedEpochs = 0

  /**
   * @param dataset - the finite dataset, `[size, seqLength]`
   * @param batchSize - sequences per batch, in `[1, size]`
   * @param rng - the shuffling stream
   * @param options - what to do with an epoch's remainder
   * @throws `ConfigError` (`@attnlab/core`) for a bad `batchSize` or `remainder`; `ShapeError` (`@attnlab/core`) for an
   * inconsistent dataset
   */
  constructor(dataset: TokenBatch, batchSize: number, rng: Rng, options: DatasetBatchesOptions = {}) {
    this.dataset = checkBatch(dataset)
    this.batchSize = checkInteger('batchSize', batchSize, 1, dataset.batchSize)
    const remainder = options.remainder ?? 'drop'
    if (remainder !== 'drop' && remainder !== 'short') {
      throw new ConfigError('remainder', `got '${String(remainder)}'; expected 'drop' or 'short'`)
    }
    this.remainder = remainder
    this.batchesPerEpoch =
      remainder === 'drop' ? Math.floor(dataset.batchSize / batchSize) : Math.ceil(dataset.batchSize / batchSize)
    this.rng = rng
    this.order = this.shuffled()
  }

  /** Completed epochs. */
  get epoch(): number {
    return this.completedEpochs
  }

  /** The next batch (starting a new, reshuffled epoch when the current one is used up). */
  next(): TokenBatch {
    const size = this.dataset.batchSize
    const left = size - this.cursor
    if (left === 0 || (this.remainder === 'drop' && left < this.batchSize)) {
      this.completedEpochs++
      this.order = this.shuffled()
      this.cursor = 0
    }
    const count = Math.min(this.batchSize, size - this.cursor)
    const indices = this.order.subarray(this.cursor, this.cursor + count)
    this.cursor += count
    return selectSequences(this.dataset, indices)
  }

  /** A snapshot to resume the exact same batch sequence with {@link DatasetBatches.restore}. */
  getState(): DatasetBatchesState {
    return { epoch: this.completedEpochs, cursor: this.cursor, order: Array.from(this.order), rng: this.rng.getState() }
  }

  /**
   * Resumes from a snapshot taken on a batcher over the same dataset.
   *
   * @throws `ShapeError` (`@attnlab/core`) if the snapshot's order does not match the dataset size;
   *   `ConfigError` (`@attnlab/core`) for a malformed rng state
   */
  restore(state: DatasetBatchesState): void {
    if (!Array.isArray(state.order) || state.order.length !== this.dataset.batchSize) {
      throw new ShapeError(
        `the snapshot orders ${state.order?.length} sequences but the dataset has ${this.dataset.batchSize}`,
        {},
      )
    }
    this.rng = Rng.fromState(state.rng)
    this.order = Int32Array.from(state.order)
    this.cursor = checkInteger('cursor', state.cursor, 0, this.dataset.batchSize)
    this.completedEpochs = checkInteger('epoch', state.epoch, 0)
  }

  private shuffled(): Int32Array {
    const order = Int32Array.from({ length: this.dataset.batchSize }, (_, i) => i)
    return this.rng.shuffle(order)
  }
}
