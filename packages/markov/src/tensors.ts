/**
 * Turning a token batch into tfjs tensors.
 *
 * @module
 */
import * as tf from '@tensorflow/tfjs-core'
import { checkBatch } from './sparse-markov.ts'
import type { TokenBatch } from './task.ts'

/**
 * A token batch as tensors (owned by the caller: dispose both when done).
 *
 * @category Datasets
 */
export interface BatchTensors {
  /** Token ids, int32 `[batchSize, seqLength]`. */
  readonly tokens: tf.Tensor2D
  /** 1 at scored positions, else 0; float32 `[batchSize, seqLength]` (ready to multiply per-token losses). */
  readonly lossMask: tf.Tensor2D
}

/**
 * Creates `tokens` (int32) and `lossMask` (float32) tensors `[batchSize, seqLength]` from a
 * batch on the active backend. Exactly two tensors are created; the caller owns and disposes
 * them (e.g. `tf.dispose(batchToTensors(batch))`).
 *
 * @param batch - the batch
 * @returns the two tensors
 * @throws `ShapeError` (`@attnlab/core`) if the batch's arrays do not match `batchSize * seqLength`
 * @example
 * ```ts
 * const { tokens, lossMask } = batchToTensors(task.sample(32, rng))
 * try { ... } finally { tf.dispose([tokens, lossMask]) }
 * ```
 * @category Datasets
 */
export function batchToTensors(batch: TokenBatch): BatchTensors {
  const { tokens, lossMask, batchSize, seqLength } = checkBatch(batch)
  const mask = new Float32Array(lossMask.length)
  for (let i = 0; i < mask.length; i++) mask[i] = lossMask[i] as number
  return {
    tokens: tf.tensor2d(tokens, [batchSize, seqLength], 'int32'),
    lossMask: tf.tensor2d(mask, [batchSize, seqLength], 'float32'),
  }
}
