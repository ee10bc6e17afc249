/**
 * The Vertical-Slash block index and its kernel accounting, as MInference's index builder
 * (`convert_vertical_slash_indexes`, 64x64) produces them and the Sparse Frontier study counts
 * them ([v2] A.1.2):
 *
 * - For every query block `[m0, m0 + B)` (`end = m0 + B`), each selected distance `delta < end`
 *   becomes the key range `[max(end - delta, B) - B, max(end - delta, B))`.
 * - Ranges are visited by increasing start (decreasing distance). A range that starts after the
 *   current range's end (`newEnd > end + B`) closes the current range; otherwise, if it reaches past
 *   the current end, the current range grows by exactly `B` (so merged ranges are always whole
 *   multiples of `B`, possibly overhanging the diagonal). Each range is emitted as `B`-wide key
 *   blocks.
 * - Vertical indices (ascending) that fall before the current range's start become single
 *   columns; verticals inside a range are dropped; verticals at or after the last range's end are
 *   never considered (they are not causal).
 * - Reported sparsity: `1 - (B^2 * blocks + B * columns) / (n (n + 1) / 2)`, whole blocks and
 *   `B`-cell columns, even where they overhang the diagonal or the sequence end.
 *
 * @module
 */
import { causalPairs } from '@attnlab/core'

/**
 * The blocks and columns one query block computes.
 *
 * @category Vertical-Slash
 */
export interface VerticalSlashRowBlock {
  /** Start of each `blockSize`-wide key block, in emission order. */
  readonly blockStarts: readonly number[]
  /** Individual key columns (vertical lines outside the covered ranges), ascending. */
  readonly columns: readonly number[]
}

/**
 * A Vertical-Slash index for one head.
 *
 * @category Vertical-Slash
 */
export interface VerticalSlashIndex {
  /** The kernel tile size `B` (64 in the study). */
  readonly blockSize: number
  /** Sequence length `n`. */
  readonly length: number
  /** One entry per query block, `ceil(n / B)` of them. */
  readonly rowBlocks: readonly VerticalSlashRowBlock[]
  /** Total key blocks over all query blocks. */
  readonly blockCount: number
  /** Total columns over all query blocks. */
  readonly columnCount: number
  /** Cells the kernel accounts for: `B^2 * blockCount + B * columnCount`. */
  readonly kernelCells: number
  /** `1 - kernelCells / (n (n + 1) / 2)`: the sparsity the study reports. */
  readonly reportedSparsity: number
}

/**
 * Builds the Vertical-Slash index the way the reference index builder does (see the module
 * comment).
 *
 * @param verticals - selected key positions (any order, distinct, each in `[0, n)`)
 * @param slashes - selected query-key distances (any order, distinct, each in `[0, n)`)
 * @param length - sequence length `n`
 * @param blockSize - kernel tile size `B` (the study: 64)
 * @returns the per-query-block blocks and columns with the kernel accounting
 * @category Vertical-Slash
 */
export function buildVerticalSlashIndex(
  verticals: readonly number[],
  slashes: readonly number[],
  length: number,
  blockSize = 64,
): VerticalSlashIndex {
  const vs = [...verticals].sort((a, b) => a - b)
  const ss = [...slashes].sort((a, b) => b - a) // distances, descending = range starts ascending
  const rows = Math.ceil(length / blockSize)
  const rowBlocks: VerticalSlashRowBlock[] = []
  let blockCount = 0
  let columnCount = 0
  for (let m = 0; m < rows; m++) {
    const end = (m + 1) * blockSize
    const blockStarts: number[] = []
    const columns: number[] = []
    const save = (start: number, stop: number): void => {
      for (let x = start; x < stop; x += blockSize) blockStarts.push(x)
    }
    let s = 0
    let v = 0
    // First usable slash: distances >= end never reach this query block.
    while (s < ss.length && (ss[s] as number) >= end) s++
    let rangeEnd: number
    if (s < ss.length) {
      rangeEnd = Math.max(end - (ss[s] as number), blockSize)
      s++
    } else {
      rangeEnd = end + blockSize // no slash at all: an empty range past the block
    }
    let rangeStart = rangeEnd - blockSize
    let vertical = v < vs.length ? (vs[v++] as number) : end + blockSize
    for (;;) {
      if (vertical < rangeEnd) {
        if (vertical < rangeStart) columns.push(vertical)
        vertical = v < vs.length ? (vs[v++] as number) : end + blockSize
      } else {
        if (s >= ss.length) {
          save(rangeStart, rangeEnd)
          break
        }
        const nextEnd = Math.max(end - (ss[s++] as number), blockSize)
        if (nextEnd > rangeEnd + blockSize) {
          save(rangeStart, rangeEnd)
          rangeStart = nextEnd - blockSize
          rangeEnd = nextEnd
        } else if (nextEnd > rangeEnd) {
          rangeEnd += blockSize
        }
      }
    }
    blockCount += blockStarts.length
    columnCount += columns.length
    rowBlocks.push({ blockStarts, columns })
  }
  const kernelCells = blockSize * blockSize * blockCount + blockSize * columnCount
  return {
    blockSize,
    length,
    rowBlocks,
    blockCount,
    columnCount,
    kernelCells,
    reportedSparsity: 1 - kernelCells / causalPairs(length, length),
  }
}

/**
 * How a Vertical-Slash selection becomes the computed pairs:
 * - `'kernel'`: what the study's kernel computes: the index's key blocks (with the in-block
 *   causal mask) and columns, per query block (slashes become `B`-wide diagonal bands; more
 *   cells than the exact lines);
 * - `'exact'`: exactly the selected diagonals and columns, token by token (as in
 *   nano-sparse-attention).
 *
 * @category Vertical-Slash
 */
export type VerticalSlashMaskMode = 'kernel' | 'exact'

/**
 * Writes one head's computed pairs into `mask` (`[n, n]` starting at `offset`), causal.
 *
 * @param mask - the destination (pairs are set to 1, never cleared)
 * @param offset - index of the head's `[0, 0]` entry
 * @param verticals - selected key positions
 * @param slashes - selected distances
 * @param index - the index built from the same selection (used by `'kernel'` mode)
 * @param mode - see {@link VerticalSlashMaskMode}
 * @category Vertical-Slash
 */
export function fillVerticalSlashMask(
  mask: Uint8Array,
  offset: number,
  verticals: readonly number[],
  slashes: readonly number[],
  index: VerticalSlashIndex,
  mode: VerticalSlashMaskMode,
): void {
  const n = index.length
  if (mode === 'exact') {
    for (let i = 0; i < n; i++) {
      const row = offset + i * n
      for (const j of verticals) if (j <= i) mask[row + j] = 1
      for (const d of slashes) if (d <= i) mask[row + i - d] = 1
    }
    return
  }
  const B = index.blockSize
  index.rowBlocks.forEach((rowBlock, m) => {
    const stop = Math.min(n, (m + 1) * B)
    for (let i = m * B; i < stop; i++) {
      const row = offset + i * n
      for (const start of rowBlock.blockStarts) {
        const hi = Math.min(start + B - 1, i)
        for (let j = Math.max(0, start); j <= hi; j++) mask[row + j] = 1
      }
      for (const c of rowBlock.columns) if (c <= i) mask[row + c] = 1
    }
  })
}
