/**
 * Row gathers (embedding lookups, and the sum of two one-hot projections) that train on every
 * backend.
 *
 * @module
 */
import * as tf from '@tensorflow/tfjs-core'
import { ShapeError } from '../errors.ts'
import { ATTNLAB_KERNELS } from '../kernels/names.ts'
import { checkIds, checkTensor, hasKernel, withGradient } from './support.ts'

/**
 * Composite: `tf.gather` forward; the gradient adds rows back with `tf.scatterND` (duplicates add),
 * which every backend has (tfjs-wasm lacks `tf.gather`'s own gradient kernel, UnsortedSegmentSum).
 */
function composite(rows: number): (table: tf.Tensor2D, indices: tf.Tensor2D) => tf.Tensor2D {
  return withGradient((save, table: tf.Tensor2D, indices: tf.Tensor2D) => {
    const [n, k] = indices.shape
    const width = table.shape[1]
    const flat = tf.reshape(indices, [n * k]) as tf.Tensor1D
    const gathered = tf.gather(table, flat) // [n * k, width]
    save([indices])
    return {
      value: (k === 1 ? gathered : tf.sum(tf.reshape(gathered, [n, k, width]), 1)) as tf.Tensor2D,
      gradFunc: (dy, saved) => {
        const [idx] = saved as [tf.Tensor2D]
        const updates = k === 1 ? dy : tf.reshape(tf.tile(tf.reshape(dy, [n, 1, width]), [1, k, 1]), [n * k, width])
        return [tf.scatterND(tf.reshape(idx, [n * k, 1]), updates, [rows, width]), tf.zeros(idx.shape, 'float32')]
      },
    }
  })
}

/**
 * Sums of table rows: `out[r, :] = sum_m table[indices[r, m], :]` (with `k = 1` an embedding
 * lookup; with `k = 2` the minimal model's `x W = W[token] + W[dVocab + t]`). One kernel each way
 * when attnlab kernels are registered; otherwise `tf.gather` with a scatter-add gradient.
 * Differentiable in `table`.
 *
 * @param table - `[rows, width]` float32
 * @param indices - `[n]` (k = 1) or `[n, k]` int32, each in `[0, rows)`
 * @returns `[n, width]`
 * @throws `ShapeError` (from `@attnlab/core`) for wrong ranks or dtypes
 * @throws `AttnlabError` (from `@attnlab/core`) `INVALID_ARGUMENT` for an index out of range (on `cpu`/`wasm`)
 * @example
 * ```ts
 * const embedded = gatherRows(wE, tf.reshape(tokens, [-1])) // [batch * pos, dModel]
 * ```
 * @category Ops
 */
export function gatherRows(table: tf.Tensor2D, indices: tf.Tensor1D | tf.Tensor2D): tf.Tensor2D {
  checkTensor(table, 'table', 2, 'float32', 'gatherRows')
  if (!(indices instanceof tf.Tensor) || (indices.rank !== 1 && indices.rank !== 2) || indices.dtype !== 'int32') {
    throw new ShapeError(
      'gatherRows: indices must be int32 [n] or [n, k]; got ' +
        `${indices instanceof tf.Tensor ? `${indices.dtype} [${indices.shape.join(', ')}]` : typeof indices}`,
    )
  }
  const rows = table.shape[0]
  return tf.tidy(() => {
    const index = (indices.rank === 1 ? tf.reshape(indices, [indices.shape[0], 1]) : indices) as tf.Tensor2D
    if (hasKernel(ATTNLAB_KERNELS.gatherRows)) {
      return tf
        .engine()
        .runKernel(
          ATTNLAB_KERNELS.gatherRows,
          { table, indices: index } as unknown as tf.NamedTensorMap,
          {},
        ) as tf.Tensor2D
    }
    checkIds(index, rows, 'row index')
    if (index.size === 0) return tf.zeros([index.shape[0], table.shape[1]]) as tf.Tensor2D
    return composite(rows)(table, index)
  })
}
