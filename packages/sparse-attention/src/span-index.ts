/**
 * Key spans: the compact form in which every method of this package hands its selection to
 * `@attnlab/core`'s `sparseAttention` kernel (native C++, WebAssembly SIMD or JavaScript, online
 * softmax over key chunks). A query tile of rows `[start, stop)` reads the keys of a few ascending,
 * disjoint half-open ranges, each row only those `<= ` itself (the causal mask is applied by the
 * kernel, so blocks may overhang the diagonal):
 *
 * - Block-Sparse / FlexPrefill's block level: one tile per query block, its kept key blocks
 *   (MInference's block index, [v2] A.1.1);
 * - Vertical-Slash / FlexPrefill's token level: one tile per 64-row query block, its merged
 *   diagonal blocks plus single-key columns (the index of `vertical-slash-index.ts`, [v2] A.1.2);
 * - decode: one row per head over cache slots (Quest's pages plus the current page, SnapKV's and
 *   Ada-SnapKV's kept tokens with per-head lengths).
 *
 * @module
 */
import { InvalidArgumentError, TooLargeError } from '@attnlab/core'
import type { SparseAttentionIndex } from '@attnlab/core/kernels'
import type { QueryTile, TileSource } from './tiled-attention.ts'

/**
 * The key spans of tile `tile` (rows `[start, stop)`) of flat head `b * nHeads + h`: flat pairs
 * `[start0, stop0, start1, stop1, ...]`, ascending and disjoint, within `[0, T]`.
 *
 * @category Attention
 */
export type SpanSource = (head: number, tile: number, start: number, stop: number) => ArrayLike<number>

/**
 * Sorts and merges half-open ranges (overlapping or touching ranges become one), dropping empty ones.
 *
 * @param pairs - flat `[start, stop, ...]` in any order
 * @param limit - ranges are clipped to `[0, limit)`
 * @returns flat ascending, disjoint pairs
 * @category Attention
 */
export function mergeSpans(pairs: ArrayLike<number>, limit: number): number[] {
  const order: number[] = []
  for (let p = 0; p < pairs.length; p += 2) order.push(p)
  order.sort((a, b) => (pairs[a] as number) - (pairs[b] as number))
  const merged: number[] = []
  for (const p of order) {
    const start = Math.max(0, pairs[p] as number)
    const stop = Math.min(limit, pairs[p + 1] as number)
    if (stop <= start) continue
    const last = merged.length - 1
    if (last > 0 && start <= (merged[last] as number)) merged[last] = Math.max(merged[last] as number, stop)
    else merged.push(start, stop)
  }
  return merged
}

/** Causal pairs of rows `[r0, r1)` within span `[a, b)`: `sum_i clamp(i + 1 - a, 0, b - a)`. */
function spanPairs(r0: number, r1: number, a: number, b: number): number {
  const width = b - a
  // Rows i in [a, b - 1) read i + 1 - a keys; rows i >= b - 1 read all of them; rows i < a none.
  const lo = Math.max(r0, a)
  const hi = Math.min(r1, b - 1)
  let total = 0
  if (hi > lo) total += ((lo + 1 - a + (hi - a)) * (hi - lo)) / 2
  const full = r1 - Math.max(r0, b - 1)
  if (full > 0) total += full * width
  return total
}

/**
 * A span source laid out as the kernel's index, with the causal pairs each head computes.
 *
 * @param spans - the plan's spans
 * @param heads - `batch * nHeads`
 * @param length - `T` (query rows and keys)
 * @param tileRows - query rows per tile
 * @returns the index for `sparseAttention` (causal offset 0) and the computed pairs per head
 * @throws `InvalidArgumentError` (`@attnlab/core`) if spans are out of order or range, or a row reads no key;
 *   `TooLargeError` when the index exceeds 2^31 spans
 * @category Attention
 */
export function buildSpanIndex(
  spans: SpanSource,
  heads: number,
  length: number,
  tileRows: number,
): { index: SparseAttentionIndex; computed: Float64Array } {
  const tiles = Math.ceil(length / tileRows)
  const tileStarts = new Int32Array(heads * tiles + 1)
  const chunks: ArrayLike<number>[] = []
  const computed = new Float64Array(heads)
  let total = 0
  for (let head = 0; head < heads; head++) {
    for (let t = 0; t < tiles; t++) {
      const start = t * tileRows
      const stop = Math.min(length, start + tileRows)
      const pairs = spans(head, t, start, stop)
      let previous = 0
      let first = -1
      let count = 0
      for (let p = 0; p < pairs.length; p += 2) {
        const a = pairs[p] as number
        const b = pairs[p + 1] as number
        if (!(Number.isInteger(a) && Number.isInteger(b) && a >= previous && b >= a && b <= length)) {
          throw new InvalidArgumentError(
            `internal: span [${a}, ${b}) of head ${head}, rows ${start}..${stop - 1} is not ascending, disjoint ` +
              `and within [0, ${length}]`,
          )
        }
        if (b > a && first < 0) first = a
        previous = b
        count += spanPairs(start, stop, a, b)
      }
      if (first < 0 || first > start) {
        throw new InvalidArgumentError(
          `mask row (head ${head}, query ${start}) computes no key: softmax over an empty set`,
          { head, query: start },
        )
      }
      computed[head] = (computed[head] as number) + count
      chunks.push(pairs)
      total += pairs.length / 2
      if (total >= 2 ** 31) throw new TooLargeError(`the sparse index has more than 2^31 key spans`, { spans: total })
      tileStarts[head * tiles + t + 1] = total
    }
  }
  const flat = new Int32Array(2 * total)
  let at = 0
  for (const pairs of chunks) {
    for (let p = 0; p < pairs.length; p++) flat[at + p] = pairs[p] as number
    at += pairs.length
  }
  return { index: { tileRows, tileStarts, spans: flat }, computed }
}

/**
 * The tiles of a span source (what the hooked path and the `mask` read): a tile's keys are its
 * spans' keys before `stop`, row `i` computes those `<= i`.
 *
 * @param spans - the plan's spans
 * @param tileRows - the rows per tile the spans were made for
 * @returns a {@link TileSource} (call it with tiles of `tileRows` rows)
 * @category Attention
 */
export function tilesFromSpans(spans: SpanSource, tileRows: number): TileSource {
  return (head, start, stop): QueryTile => {
    const pairs = spans(head, Math.floor(start / tileRows), start, stop)
    const list: number[] = []
    for (let p = 0; p < pairs.length; p += 2) {
      for (let j = pairs[p] as number; j < Math.min(stop, pairs[p + 1] as number); j++) list.push(j)
    }
    const keys = Int32Array.from(list)
    const allowed = new Uint8Array((stop - start) * keys.length)
    for (let i = start; i < stop; i++) {
      for (let c = 0; c < keys.length && (keys[c] as number) <= i; c++) allowed[(i - start) * keys.length + c] = 1
    }
    return { keys, allowed }
  }
}
