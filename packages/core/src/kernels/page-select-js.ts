/**
 * The plain-JavaScript Quest page selection ({@link KernelProvider.pageSelect}): the `js`
 * provider's kernel, the reference of the native and WebAssembly ones, and the fallback of the
 * `pageSelect` op on backends without attnlab kernels. Float32 arithmetic (`Math.fround`) in the
 * engines' order, so every engine picks the same pages.
 *
 * @module
 */
import type { FloatArray, IntArray, KernelProvider, PageSelectShape } from './provider.ts'
import { topKMembers } from './top-k.ts'

const f = Math.fround

/**
 * `score[p] = sum_d q_d (q_d < 0 ? lo : hi)[d][p]`, float32, `d` in order: `max(q_d lo, q_d hi)` bit for
 * bit when `lo <= hi` (Quest's page minima and maxima), reading one bound per dimension.
 */
function scoreRow(
  q: FloatArray,
  qOffset: number,
  bounds: FloatArray,
  lo: number,
  hi: number,
  shape: PageSelectShape,
  score: Float32Array,
): void {
  const { pages, capacity, dHead } = shape
  score.fill(0, 0, pages)
  for (let d = 0; d < dHead; d++) {
    const x = q[qOffset + d] as number
    const b = (x < 0 ? lo : hi) + d * capacity
    for (let p = 0; p < pages; p++) score[p] = (score[p] as number) + f(x * (bounds[b + p] as number))
  }
}

/** The `k` largest of `score[0 .. n - 1]` in ascending index order into `out` from `offset`. */
function topKAscending(score: Float32Array, n: number, k: number, out: IntArray, offset: number): void {
  const chosen = topKMembers(score, k, n)
  let c = offset
  for (let i = 0; i < n; i++) if (chosen[i]) out[c++] = i
}

/**
 * {@link KernelProvider.pageSelect} in plain JavaScript (inputs already validated).
 *
 * @param q - decode queries, `[heads, dHead]`
 * @param bounds - page minima and maxima, `[heads / group, 2, dHead, capacity]`
 * @param chosen - output, `[heads, budget]` ascending page indices (overwritten)
 * @param shape - sizes (see {@link PageSelectShape})
 * @category Kernels
 */
export function pageSelectJs(q: FloatArray, bounds: FloatArray, chosen: IntArray, shape: PageSelectShape): void {
  const { heads, group, pages, capacity, dHead, budget, share } = shape
  const k = Math.max(0, Math.min(budget, pages))
  const rowFloats = 2 * dHead * capacity
  const score = new Float32Array(pages)
  if (!share) {
    for (let h = 0; h < heads; h++) {
      const lo = Math.floor(h / group) * rowFloats
      scoreRow(q, h * dHead, bounds, lo, lo + dHead * capacity, shape, score)
      topKAscending(score, pages, k, chosen, h * budget)
    }
    return
  }
  const sum = new Float32Array(pages)
  for (let kv = 0; kv < heads / group; kv++) {
    const lo = kv * rowFloats
    sum.fill(0)
    for (let g = 0; g < group; g++) {
      scoreRow(q, (kv * group + g) * dHead, bounds, lo, lo + dHead * capacity, shape, score)
      for (let p = 0; p < pages; p++) sum[p] = (sum[p] as number) + (score[p] as number)
    }
    const first = kv * group * budget
    topKAscending(sum, pages, k, chosen, first)
    for (let g = 1; g < group; g++) chosen.copyWithin(first + g * budget, first, first + k)
  }
}
