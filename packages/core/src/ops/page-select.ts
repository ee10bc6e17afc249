/**
 * Quest's query-aware page selection for a decode step (Tang et al. 2024, arXiv 2406.10774, §3):
 * the upper bound of `q . k` over each page of the KV cache from the page's element-wise key
 * minima and maxima, and the top pages per head, in one kernel. `@attnlab/sparse-attention`'s
 * Quest feeds the chosen pages to {@link sparseAttention}.
 *
 * @module
 */
import * as tf from '@tensorflow/tfjs-core'
import { ConfigError, ShapeError } from '../errors.ts'
import { ATTNLAB_KERNELS } from '../kernels/names.ts'
import { pageSelectJs } from '../kernels/page-select-js.ts'
import type { PageSelectShape } from '../kernels/provider.ts'
import { readValuesSync } from '../sync-read.ts'
import { checkTensor, hasKernel } from './support.ts'

/**
 * Options of {@link pageSelect}.
 *
 * @category Ops
 */
export interface PageSelectOptions {
  /** Pages to score, `0 .. pages - 1` (`<= capacity`, the last dimension of `bounds`). */
  readonly pages: number
  /** Pages chosen per head (`1 <= budget <= pages`). */
  readonly budget: number
  /** Sum the bounds of a GQA group's query heads and give the group the same pages (Quest's default). */
  readonly share: boolean
}

/**
 * For each query head, the `budget` pages with the largest upper bound of `q . k`,
 * `sum_d max(q_d min[p, d], q_d max[p, d])` (Quest, arXiv 2406.10774, §3), in ascending page
 * order (ties to the lower page, `NaN` below every number). Every engine computes each term as
 * `q_d * (q_d < 0 ? min : max)`: the same maximum bit for bit whenever `min <= max` (as page minima
 * and maxima are), reading one bound per dimension, half the memory of both; for bounds with
 * `min > max` the score is that sum, not the maximum. Query head `h` reads the bounds of KV
 * row `b * nKvHeads + floor(h / group)`; with `share` the scores of a group's heads are summed
 * first. Scores are float32 sums in a fixed order, so every engine (native, WebAssembly,
 * JavaScript, and the JavaScript kernel on values read back where no attnlab kernels are
 * registered) picks the same pages. Not differentiable.
 *
 * @param q - decode queries, `[batch, nHeads, 1, dHead]` float32
 * @param bounds - page key bounds, `[batch * nKvHeads, 2, dHead, capacity]` float32: per KV row the
 *   minima (`[.., 0, d, p]`) then the maxima (`[.., 1, d, p]`) of page `p`'s keys, dimension-major
 * @param options - pages to score, budget, sharing
 * @returns the chosen pages, `[batch, nHeads, budget]` int32, ascending per head
 * @throws `ShapeError` (`@attnlab/core`) for wrong ranks, dtypes or sizes (`nHeads` must be a multiple of the
 *   KV rows per batch); `ConfigError` for `pages` outside `[1, capacity]` or `budget` outside `[1, pages]`
 * @example
 * ```ts
 * const chosen = pageSelect(q, bounds, { pages: 512, budget: 64, share: true }) // [1, 8, 64]
 * ```
 * @category Ops
 */
export function pageSelect(q: tf.Tensor4D, bounds: tf.Tensor4D, options: PageSelectOptions): tf.Tensor3D {
  checkTensor(q, 'q', 4, 'float32', 'pageSelect')
  checkTensor(bounds, 'bounds', 4, 'float32', 'pageSelect')
  const [batch, nHeads, one, dHead] = q.shape
  const [rows, two, bd, capacity] = bounds.shape
  if (one !== 1 || two !== 2 || bd !== dHead || rows % batch !== 0 || nHeads % (rows / batch) !== 0) {
    throw new ShapeError(
      `pageSelect: q [${q.shape.join(', ')}] and bounds [${bounds.shape.join(', ')}] must be ` +
        '[batch, nHeads, 1, dHead] and [batch * nKvHeads, 2, dHead, capacity] with nHeads a multiple of nKvHeads',
      { q: [...q.shape], bounds: [...bounds.shape] },
    )
  }
  const { pages, budget, share } = options
  if (!(Number.isInteger(pages) && pages >= 1 && pages <= capacity))
    throw new ConfigError('pages', `must be an integer in [1, ${capacity}] (the bounds' capacity), got ${pages}`)
  if (!(Number.isInteger(budget) && budget >= 1 && budget <= pages))
    throw new ConfigError('budget', `must be an integer in [1, ${pages}] (the pages scored), got ${budget}`)
  const shape: PageSelectShape = {
    heads: batch * nHeads,
    group: (batch * nHeads) / rows,
    pages,
    capacity,
    dHead,
    budget,
    share: share === true,
  }
  if (hasKernel(ATTNLAB_KERNELS.pageSelect)) {
    return tf.tidy(() => {
      const chosen = tf
        .engine()
        .runKernel(
          ATTNLAB_KERNELS.pageSelect,
          { q, bounds } as unknown as tf.NamedTensorMap,
          shape as unknown as tf.NamedAttrMap,
        ) as tf.Tensor
      return tf.reshape(chosen, [batch, nHeads, budget]) as tf.Tensor3D
    })
  }
  const chosen = new Int32Array(shape.heads * budget)
  const op = 'pageSelect (the JavaScript kernel)'
  pageSelectJs(readValuesSync(q, op) as Float32Array, readValuesSync(bounds, op) as Float32Array, chosen, shape)
  return tf.tensor3d(chosen, [batch, nHeads, budget], 'int32')
}
