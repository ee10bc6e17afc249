/**
 * Top-k membership in time linear in `n` (quickselect): the selection of Quest's pages
 * ({@link pageSelectJs}) and Block-Sparse's key blocks, where the order of the chosen entries does
 * not matter.
 *
 * @module
 */

/** The value of rank `rank` (0-based, ascending) among `values[0 .. count - 1]` (no NaN), by quickselect (reorders). */
function kthSmallest(values: Float64Array, count: number, rank: number): number {
  let lo = 0
  let hi = count - 1
  while (hi > lo) {
    const pivot = values[(lo + hi) >> 1] as number
    let i = lo
    let j = hi
    while (i <= j) {
      while ((values[i] as number) < pivot) i++
      while ((values[j] as number) > pivot) j--
      if (i <= j) {
        const t = values[i] as number
        values[i] = values[j] as number
        values[j] = t
        i++
        j--
      }
    }
    if (rank <= j) hi = j
    else if (rank >= i) lo = i
    else return values[rank] as number
  }
  return values[lo] as number
}

/**
 * The set `topK` of `@attnlab/sparse-attention` chooses, as a membership array, without sorting
 * the indices: the `k`-th largest score is found by quickselect on a copy of the scores, then every
 * index above it and the lowest indices equal to it are taken (ties to the lower index, `NaN` below
 * everything, as in `topK`), in time linear in `n`. For selections where the order of the chosen
 * entries does not matter (Quest's pages per step, Block-Sparse's key blocks per query block).
 *
 * @param scores - the scores (any length `n`)
 * @param k - how many to take; clamped to `[0, n]`
 * @param length - only consider indices `< length` (default `scores.length`)
 * @returns `[n]`, 1 at the chosen indices
 * @example
 * ```ts
 * topKMembers([1, 3, 3, 2], 2) // Uint8Array [0, 1, 1, 0]
 * ```
 * @category Kernels
 */
export function topKMembers(scores: ArrayLike<number>, k: number, length = scores.length): Uint8Array {
  const n = Math.min(length, scores.length)
  const take = Math.max(0, Math.min(Math.floor(k), n))
  const chosen = new Uint8Array(n)
  if (take === 0) return chosen
  const numbers = new Float64Array(n)
  let m = 0
  for (let i = 0; i < n; i++) {
    const x = scores[i] as number
    if (!Number.isNaN(x)) numbers[m++] = x
  }
  if (take >= m) {
    // every number, then the lowest-index NaNs
    let nans = take - m
    for (let i = 0; i < n; i++) {
      if (!Number.isNaN(scores[i] as number)) chosen[i] = 1
      else if (nans > 0) {
        chosen[i] = 1
        nans--
      }
    }
    return chosen
  }
  const threshold = kthSmallest(numbers, m, m - take)
  let left = take
  for (let i = 0; i < n; i++) {
    if ((scores[i] as number) > threshold) {
      chosen[i] = 1
      left--
    }
  }
  for (let i = 0; i < n && left > 0; i++) {
    if ((scores[i] as number) === threshold) {
      chosen[i] = 1
      left--
    }
  }
  return chosen
}
