/**
 * Sparsity accounting as the Sparse Frontier study reports it ([v2] §3) and the
 * budget <-> sparsity conversions behind its Table 3 ([v2] A.1, Table 3).
 *
 * Sparsity `s` is the fraction of causal query-key interactions *not* computed; `1 - s` is the
 * attention budget (density `rho`); `s = 1 - 1/k` is a `k`x compression.
 *
 * @module
 */
import { ConfigError, causalPairs } from '@attnlab/core'
import { checkInt, checkNumber } from './config.ts'
import { buildVerticalSlashIndex } from './vertical-slash-index.ts'

/**
 * Block-Sparse's analytic sparsity (the reference's `_calculate_sparsity`): with
 * `N_b = ceil(n / B)` blocks and `K` capped at `N_b`,
 * `1 - (K (K + 1) / 2 + (N_b - K) K) / (N_b (N_b + 1) / 2)`. The study's formula is wrong for
 * `K > N_b`; the cap fixes it (sparsity 0).
 *
 * @param n - sequence length (tokens)
 * @param blockSize - block size `B` (tokens; the study: 16)
 * @param topK - blocks per query block `K`
 * @returns the sparsity (fraction)
 * @throws `ConfigError` (`@attnlab/core`) for non-positive integers
 * @example
 * ```ts
 * blockSparseSparsity(16384, 16, 26)  // 0.94989 (Table 3's 0.95)
 * blockSparseSparsity(16384, 16, 300) // 0.50010 (Table 3's 0.5)
 * ```
 * @category Accounting
 */
export function blockSparseSparsity(n: number, blockSize: number, topK: number): number {
  checkInt('n', n, 1)
  checkInt('blockSize', blockSize, 1)
  checkInt('topK', topK, 1)
  const blocks = Math.ceil(n / blockSize)
  const k = Math.min(topK, blocks)
  const selected = (k * (k + 1)) / 2 + (blocks - k) * k
  return 1 - selected / causalPairs(blocks, blocks)
}

/**
 * The `K` whose analytic Block-Sparse sparsity is nearest to `target` (ties to the smaller `K`),
 * the budget search the study used to fill Table 3 (reproduces every Block-Sparse entry there,
 * e.g. 16K: 26, 35, 53, 71, 108, 188, 300 for 0.95, 0.9333, 0.9, 0.8667, 0.8, 0.6667, 0.5).
 *
 * @param n - sequence length (tokens)
 * @param blockSize - block size `B` (tokens)
 * @param target - target sparsity in `[0, 1]`
 * @returns `K` in `[1, N_b]`
 * @throws `ConfigError` (`@attnlab/core`) for invalid arguments
 * @category Budgets
 */
export function blockSparseTopKForSparsity(n: number, blockSize: number, target: number): number {
  checkNumber('target', target, 0, 1)
  checkInt('n', n, 1)
  checkInt('blockSize', blockSize, 1)
  const blocks = Math.ceil(n / blockSize)
  // sparsity decreases with K: find the smallest K with sparsity <= target, then compare neighbours
  let lo = 1
  let hi = blocks
  while (lo < hi) {
    const mid = (lo + hi) >> 1
    if (blockSparseSparsity(n, blockSize, mid) > target) lo = mid + 1
    else hi = mid
  }
  if (lo > 1) {
    const below = Math.abs(blockSparseSparsity(n, blockSize, lo - 1) - target)
    const at = Math.abs(blockSparseSparsity(n, blockSize, lo) - target)
    if (below <= at) return lo - 1
  }
  return lo
}

/**
 * SnapKV's reported sparsity `1 - min(C, n) / n`.
 *
 * @param n - prompt length (tokens)
 * @param capacity - tokens kept per KV head `C`
 * @category Accounting
 */
export function snapKVSparsity(n: number, capacity: number): number {
  checkInt('n', n, 1)
  checkInt('capacity', capacity, 0)
  return 1 - Math.min(capacity, n) / n
}

/**
 * Ada-SnapKV's reported sparsity `1 - sum(kept) / (n * Hkv)`.
 *
 * @param n - prompt length (tokens)
 * @param keptPerHead - tokens kept by each KV head (length `Hkv`)
 * @category Accounting
 */
export function adaSnapKVSparsity(n: number, keptPerHead: readonly number[]): number {
  checkInt('n', n, 1)
  if (keptPerHead.length === 0) throw new ConfigError('keptPerHead', 'must list at least one KV head')
  let kept = 0
  for (const k of keptPerHead) kept += checkInt('keptPerHead', k, 0, n)
  return 1 - kept / (n * keptPerHead.length)
}

/**
 * Quest's reported sparsity `1 - budget / n`, relative to the *prompt* length (the growth of the
 * cache while decoding is ignored, as in the study).
 *
 * @param n - prompt length (tokens)
 * @param tokenBudget - tokens read per step
 * @category Accounting
 */
export function questSparsity(n: number, tokenBudget: number): number {
  checkInt('n', n, 1)
  checkInt('tokenBudget', tokenBudget, 0)
  return 1 - Math.min(tokenBudget, n) / n
}

/**
 * Vertical-Slash / FlexPrefill reported sparsity of one head from its selection, with the 64x64
 * kernel accounting (see `buildVerticalSlashIndex`).
 *
 * @param verticals - selected key positions
 * @param slashes - selected distances
 * @param n - sequence length (tokens)
 * @param blockSize - kernel tile (64)
 * @category Accounting
 */
export function verticalSlashKernelSparsity(
  verticals: readonly number[],
  slashes: readonly number[],
  n: number,
  blockSize = 64,
): number {
  checkInt('n', n, 1)
  return buildVerticalSlashIndex(verticals, slashes, n, blockSize).reportedSparsity
}

/**
 * Token capacity for a target sparsity as in Table 3 for SnapKV and Ada-SnapKV:
 * `C = floor((1 - s) n)` (e.g. 16K at 0.95: 819).
 *
 * @param n - prompt length (tokens)
 * @param sparsity - target in `[0, 1]`
 * @category Budgets
 */
export function snapKVCapacityForSparsity(n: number, sparsity: number): number {
  checkInt('n', n, 1)
  checkNumber('sparsity', sparsity, 0, 1)
  return Math.floor((1 - sparsity) * n + 1e-9)
}

/**
 * Quest token budget for a target sparsity as in Table 3: `(1 - s) n` rounded to the nearest
 * multiple of the page size (e.g. 16K at 0.8: 3280).
 *
 * @param n - prompt length (tokens)
 * @param sparsity - target in `[0, 1]`
 * @param pageSize - page size (16)
 * @category Budgets
 */
export function questBudgetForSparsity(n: number, sparsity: number, pageSize = 16): number {
  checkInt('n', n, 1)
  checkNumber('sparsity', sparsity, 0, 1)
  checkInt('pageSize', pageSize, 1)
  return Math.round(((1 - sparsity) * n) / pageSize) * pageSize
}

/**
 * The sparsity levels of Table 3's columns.
 *
 * @category Budgets
 */
export interface Table3Sparsities {
  /** The ten levels of Vertical-Slash, SnapKV, Ada-SnapKV and Quest (0.95 to 0.3). */
  readonly tenLevels: readonly number[]
  /** The seven levels of Block-Sparse and FlexPrefill (0.95 to 0.5). */
  readonly sevenLevels: readonly number[]
}

/**
 * Sparsity levels of Table 3's columns, highest first: 1/20, 1/15, 1/10, 1/7.5, 1/5, then
 * 0.7..0.3 (the ten-column methods) or 2/3 and 1/2 (Block-Sparse, FlexPrefill), rounded to four
 * decimals as the study did (the rounding matters: `0.8667` gives 2183 tokens at 16K, `13/15`
 * 2184).
 *
 * @category Budgets
 */
export const TABLE3_SPARSITIES: Table3Sparsities = Object.freeze({
  tenLevels: Object.freeze([0.95, 0.9333, 0.9, 0.8667, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3]),
  sevenLevels: Object.freeze([0.95, 0.9333, 0.9, 0.8667, 0.8, 0.6667, 0.5]),
})

/**
 * Table 3's budgets per method, keyed by sequence length (tokens), highest sparsity first.
 *
 * @category Budgets
 */
export interface Table3Budgets {
  /** Vertical-Slash `V = S` (lines per head), ten levels; lengths 16384, 32768, 65536, 128000. */
  readonly verticalSlash: Readonly<Record<number, readonly number[]>>
  /** FlexPrefill `[alpha, minBudget]`, seven levels; lengths 16384, 32768, 65536. */
  readonly flexPrefill: Readonly<Record<number, readonly (readonly [number, number])[]>>
  /** Block-Sparse `K` (with `B = 16`), seven levels; lengths 16384, 32768, 65536. */
  readonly blockSparse: Readonly<Record<number, readonly number[]>>
  /** SnapKV / Ada-SnapKV capacity `C` (tokens), ten levels; lengths 16384, 32768, 65536. */
  readonly snapKV: Readonly<Record<number, readonly number[]>>
  /** Quest token budget, ten levels; lengths 16384, 32768, 65536, 128000. */
  readonly quest: Readonly<Record<number, readonly number[]>>
}

/**
 * Table 3 of the study ([v2] A.1): the budgets used per method and sequence length, highest
 * sparsity first (sparsities in {@link TABLE3_SPARSITIES}). Vertical-Slash `V = S` was chosen from
 * attention statistics (no closed form); FlexPrefill entries are `[alpha, minBudget]`; the others
 * follow from the helpers in this module.
 *
 * @category Budgets
 */
export const TABLE3_BUDGETS: Table3Budgets = Object.freeze({
  verticalSlash: Object.freeze({
    16384: [164, 240, 315, 400, 448, 576, 768, 1024, 1536, 2304],
    32768: [290, 384, 448, 576, 704, 1024, 1536, 2304, 3584, 4608],
    65536: [400, 448, 544, 640, 960, 1280, 2304, 4096, 6144, 8192],
    128000: [480, 768, 1024, 1536, 2048, 3584, 5632, 10240, 13312, 18432],
  } as Readonly<Record<number, readonly number[]>>),
  flexPrefill: Object.freeze({
    16384: [
      [0, 164],
      [0, 240],
      [0, 315],
      [0, 400],
      [0.55, 512],
      [0.71, 512],
      [0.88, 512],
    ],
    32768: [
      [0, 290],
      [0, 384],
      [0.45, 512],
      [0.6, 512],
      [0.7, 512],
      [0.8, 512],
      [0.92, 512],
    ],
    65536: [
      [0, 400],
      [0.45, 512],
      [0.55, 512],
      [0.7, 512],
      [0.77, 512],
      [0.85, 512],
      [0.94, 512],
    ],
  } as Readonly<Record<number, readonly (readonly [number, number])[]>>),
  blockSparse: Object.freeze({
    16384: [26, 35, 53, 71, 108, 188, 300],
    32768: [52, 69, 105, 141, 216, 376, 600],
    65536: [104, 139, 210, 283, 432, 752, 1200],
  } as Readonly<Record<number, readonly number[]>>),
  snapKV: Object.freeze({
    16384: [819, 1092, 1638, 2183, 3276, 4915, 6553, 8192, 9830, 11468],
    32768: [1638, 2185, 3276, 4367, 6553, 9830, 13107, 16384, 19660, 22937],
    65536: [3276, 4371, 6553, 8735, 13107, 19660, 26214, 32768, 39321, 45875],
  } as Readonly<Record<number, readonly number[]>>),
  quest: Object.freeze({
    16384: [816, 1088, 1632, 2176, 3280, 4912, 6560, 8192, 9824, 11472],
    32768: [1632, 2192, 3280, 4368, 6560, 9824, 13104, 16384, 19664, 22944],
    65536: [3280, 4368, 6560, 8736, 13104, 19664, 26208, 32768, 39328, 45872],
    128000: [6400, 8544, 12800, 17056, 25600, 38400, 51200, 64000, 76800, 89600],
  } as Readonly<Record<number, readonly number[]>>),
})
