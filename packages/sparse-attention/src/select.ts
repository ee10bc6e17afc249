/**
 * Selection primitives shared by every method: top-k with ties to the lower index, coverage
 * sizing (FlexPrefill's `score_cover_topk`) and average pooling with zero padding (SnapKV's
 * `avg_pool1d`). They run on small JavaScript arrays read back from the estimation tensors.
 *
 * @module
 */

/**
 * Compares two scores for a descending sort where `+Infinity` (a forced entry) ranks first,
 * `NaN` ranks last and equal scores keep ascending index order.
 */
function descending(scores: ArrayLike<number>): (a: number, b: number) => number {
  return (a, b) => {
    const x = scores[a] as number
    const y = scores[b] as number
    if (x === y) return a - b
    if (Number.isNaN(x)) return Number.isNaN(y) ? a - b : 1
    if (Number.isNaN(y)) return -1
    return x > y ? -1 : 1
  }
}

/**
 * Indices of the `k` largest scores, best first. Ties go to the lower index; `+Infinity`
 * marks forced entries (kept first, in index order); `NaN` ranks below everything.
 *
 * @param scores - the scores (any length `n`)
 * @param k - how many to take; clamped to `[0, n]`
 * @param length - only consider indices `< length` (default `scores.length`)
 * @returns the chosen indices, ordered by decreasing score
 * @example
 * ```ts
 * topK([1, 3, 3, 2], 2) // [1, 2]
 * ```
 */
export function topK(scores: ArrayLike<number>, k: number, length = scores.length): number[] {
  const n = Math.min(length, scores.length)
  const take = Math.max(0, Math.min(Math.floor(k), n))
  if (take === 0) return []
  const order = new Array<number>(n)
  for (let i = 0; i < n; i++) order[i] = i
  order.sort(descending(scores))
  return order.slice(0, take)
}

/**
 * The order of all indices by decreasing score (ties to the lower index), i.e. a stable
 * descending argsort.
 *
 * @param scores - the scores
 * @returns a permutation of `0..n-1`
 */
export function argsortDescending(scores: ArrayLike<number>): number[] {
  return topK(scores, scores.length)
}

/**
 * Coverage sizing: the smallest number of entries whose mass reaches `coverage`, computed as in
 * FlexPrefill's `score_cover_topk`: sort descending, take the cumulative sum, count the entries
 * whose cumulative sum is `<= coverage`, add one; clamped to `n`.
 *
 * Source: FlexPrefill (Lai et al. 2025) as used by the Sparse Frontier study ([v2] A.1.3).
 *
 * @param scores - non-negative masses (typically a distribution summing to about 1)
 * @param coverage - the mass to cover (alpha, or gamma times the number of rows)
 * @returns the count, in `[1, n]` (0 when `scores` is empty)
 */
export function coverCount(scores: ArrayLike<number>, coverage: number): number {
  const n = scores.length
  if (n === 0) return 0
  const sorted = Float64Array.from(scores as ArrayLike<number>)
    .sort()
    .reverse()
  let sum = 0
  let count = 0
  for (let i = 0; i < n; i++) {
    sum += sorted[i] as number
    if (sum <= coverage) count++
    else break
  }
  return Math.min(n, count + 1)
}

/**
 * One-dimensional average pooling with stride 1 and zero padding of `floor(kernel/2)` on each
 * side, dividing by `kernel` everywhere (PyTorch `avg_pool1d` with `count_include_pad=True`),
 * so edges are damped. Output length equals input length for odd kernels.
 *
 * @param values - the signal, length `n`
 * @param kernel - odd window size
 * @returns the pooled signal (new array, length `n`)
 */
export function averagePool(values: ArrayLike<number>, kernel: number): Float64Array {
  const n = values.length
  const half = Math.floor(kernel / 2)
  const out = new Float64Array(n)
  // prefix sums for O(n)
  const prefix = new Float64Array(n + 1)
  for (let i = 0; i < n; i++) prefix[i + 1] = (prefix[i] as number) + (values[i] as number)
  for (let j = 0; j < n; j++) {
    const lo = Math.max(0, j - half)
    const hi = Math.min(n, j + half + 1)
    out[j] = ((prefix[hi] as number) - (prefix[lo] as number)) / kernel
  }
  return out
}

/**
 * Mean-pools one head's rows in blocks of `blockSize` tokens: `data` is `[heads, n, dHead]`
 * (row-major), the result is `[ceil(n / blockSize), dHead]` for head `head`. `zeroPadded`
 * divides every block by `blockSize` (the last, partial block counts its missing tokens as zeros,
 * as Block-Sparse's pooling does); otherwise each block is divided by its own token count
 * (FlexPrefill).
 */
export function blockMeans(
  data: Float32Array,
  head: number,
  n: number,
  dHead: number,
  blockSize: number,
  zeroPadded: boolean,
): Float64Array {
  const blocks = Math.ceil(n / blockSize)
  const out = new Float64Array(blocks * dHead)
  const base = head * n * dHead
  for (let t = 0; t < n; t++) {
    const m = Math.floor(t / blockSize)
    for (let d = 0; d < dHead; d++)
      out[m * dHead + d] = (out[m * dHead + d] as number) + (data[base + t * dHead + d] as number)
  }
  for (let m = 0; m < blocks; m++) {
    const count = zeroPadded ? blockSize : Math.min(n, (m + 1) * blockSize) - m * blockSize
    for (let d = 0; d < dHead; d++) out[m * dHead + d] = (out[m * dHead + d] as number) / count
  }
  return out
}
