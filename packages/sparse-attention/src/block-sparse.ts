/**
 * Block-Sparse (MInference's block-sparse pattern as configured by the Sparse Frontier study,
 * [v2] A.1.1). Per query head, with blocks of `B` tokens for queries and keys:
 *
 * 1. Zero-pad the sequence to a multiple of `B`; mean-pool queries and keys per block (the padded
 *    zeros count in the last block's mean, as in the reference).
 * 2. Block scores `P[m, j] = qbar_m . kbar_j`: a raw dot product (no scale, no softmax).
 * 3. Force the diagonal (`j = m`), sub-diagonal (`j = m - 1`) and first (`j = 0`) blocks; non-causal
 *    blocks are excluded.
 * 4. Keep the top `K` blocks per query block (`K` capped at the number of blocks; query block `m`
 *    keeps `min(m + 1, K)`), ties to the lower block index.
 * 5. Attend exactly over the kept blocks with the causal mask inside diagonal blocks, one query
 *    block at a time from this compact block index as key spans (`@attnlab/core`'s
 *    `sparseAttention` kernel; never a `[nHeads, T, T]` mask).
 *
 * Reported sparsity: the analytic block formula ({@link blockSparseSparsity}).
 *
 * @module
 */
import type { AttentionPrefillInput } from '@attnlab/core'
import { configSchema, integerField, parseConfig, schemaDefaults, type z } from '@attnlab/core/schema'
import { defineKernel, type PrefillPlan, type PrefillShape, type SparseAttentionKernel } from './kernel.ts'
import type { SpanSource } from './span-index.ts'
import { topKMembers } from '@attnlab/core/kernels'
import { blockMeans } from './select.ts'
import { floatValues } from './tensor-values.ts'
import { blockSparseSparsity } from './sparsity.ts'

/**
 * The schema of {@link BlockSparseConfig}: each parameter's meaning, range and study default,
 * declared once.
 *
 * @category Block-Sparse
 */
export const blockSparseConfigSchema = configSchema({
  /** Block size `B` in tokens, for query and key blocks (study: 16; the reference needs `>= 8`). */
  blockSize: integerField('block size B in tokens (query and key blocks)', { min: 8 }).default(16),
  /**
   * Key blocks per query block `K`, forced blocks included (study YAML: 64; Table 3 from the target sparsity;
   * `>= 3`: the three forced blocks count toward `K`).
   */
  topK: integerField('key blocks per query block K, the 3 forced blocks included', { min: 3 }).default(64),
})

/**
 * Block-Sparse parameters (see {@link blockSparseConfigSchema} for each one).
 *
 * @category Block-Sparse
 */
export type BlockSparseConfig = Readonly<z.output<typeof blockSparseConfigSchema>>

/**
 * The study's Block-Sparse defaults (`B = 16`, `K = 64`).
 *
 * @category Block-Sparse
 */
export function defaultBlockSparseConfig(): BlockSparseConfig {
  return schemaDefaults(blockSparseConfigSchema, 'block-sparse')
}

/**
 * Named Block-Sparse presets: `study` (`B = 16`, `K = 64`) and `minference` (the original
 * 64-token blocks, `K = 100`).
 *
 * @category Block-Sparse
 */
export const BLOCK_SPARSE_PRESETS: Readonly<Record<'study' | 'minference', Readonly<BlockSparseConfig>>> =
  Object.freeze({
    study: Object.freeze(defaultBlockSparseConfig()),
    minference: Object.freeze({ blockSize: 64, topK: 100 }),
  })

/**
 * Resolves and validates a Block-Sparse configuration.
 *
 * @throws `ConfigError` (`@attnlab/core`) for an unknown parameter, `blockSize < 8` or `topK < 3` (the three
 *   forced blocks count toward `K`)
 * @category Block-Sparse
 */
export function resolveBlockSparseConfig(overrides?: Partial<BlockSparseConfig>): Readonly<BlockSparseConfig> {
  const c = parseConfig(blockSparseConfigSchema, overrides === undefined ? {} : overrides, 'block-sparse')
  return Object.freeze(c)
}

/**
 * `scores[j] = qBar[m] . kBar[j]` for key blocks `j <= m` (pooled means `[blocks, dHead]`, float64),
 * four key blocks per pass over `qBar[m]` (each dot still summed over `d` in order).
 */
function blockScores(qBar: Float64Array, kBar: Float64Array, m: number, dHead: number, scores: Float64Array): void {
  const qo = m * dHead
  let j = 0
  for (; j + 3 <= m; j += 4) {
    const k0 = j * dHead
    const k1 = k0 + dHead
    const k2 = k1 + dHead
    const k3 = k2 + dHead
    let dot0 = 0
    let dot1 = 0
    let dot2 = 0
    let dot3 = 0
    for (let d = 0; d < dHead; d++) {
      const x = qBar[qo + d] as number
      dot0 += x * (kBar[k0 + d] as number)
      dot1 += x * (kBar[k1 + d] as number)
      dot2 += x * (kBar[k2 + d] as number)
      dot3 += x * (kBar[k3 + d] as number)
    }
    scores[j] = dot0
    scores[j + 1] = dot1
    scores[j + 2] = dot2
    scores[j + 3] = dot3
  }
  for (; j <= m; j++) {
    const ko = j * dHead
    let dot = 0
    for (let d = 0; d < dHead; d++) dot += (qBar[qo + d] as number) * (kBar[ko + d] as number)
    scores[j] = dot
  }
}

function blockSparsePlan(
  config: Readonly<BlockSparseConfig>,
  input: AttentionPrefillInput,
  shape: PrefillShape,
): PrefillPlan {
  const { batch, nHeads, nKvHeads, length: n, dHead } = shape
  const B = config.blockSize
  const blocks = Math.ceil(n / B)
  const K = Math.min(config.topK, blocks)
  // zero padding counts in the mean
  const pool = (data: Float32Array, bh: number): Float64Array => blockMeans(data, bh, n, dHead, B, true)
  const group = nHeads / nKvHeads
  // The compact index: per head, the kept key blocks of query block m (ascending) at [m * K, m * K + count[m]).
  const kept = Array.from({ length: batch * nHeads }, () => new Int32Array(blocks * K))
  const keptCount = Array.from({ length: batch * nHeads }, () => new Int32Array(blocks))
  const reported = new Float64Array(batch * nHeads).fill(blockSparseSparsity(n, B, config.topK))
  const scores = new Float64Array(blocks)
  // Timed apart: block pooling (means, reads included, and the block scores) and the top-k selection.
  let poolingMs = 0
  let selectionMs = 0
  let mark = performance.now()
  // views of q and k where attnlab kernels run (no tfjs allocation until the means are taken)
  const qData = floatValues(input.q, 'block-sparse estimation')
  const kData = floatValues(input.k, 'block-sparse estimation')
  for (let b = 0; b < batch; b++) {
    const kBars = Array.from({ length: nKvHeads }, (_, kv) => pool(kData, b * nKvHeads + kv))
    for (let h = 0; h < nHeads; h++) {
      const head = b * nHeads + h
      const qBar = pool(qData, head)
      const kBar = kBars[Math.floor(h / group)] as Float64Array
      const headKept = kept[head] as Int32Array
      const headCount = keptCount[head] as Int32Array
      for (let m = 0; m < blocks; m++) {
        blockScores(qBar, kBar, m, dHead, scores)
        const pooled = performance.now()
        poolingMs += pooled - mark
        scores[0] = Infinity
        scores[m] = Infinity
        if (m >= 1) scores[m - 1] = Infinity
        // the top K (ties to the lower block), ascending
        const chosen = topKMembers(scores, Math.min(m + 1, K), m + 1)
        let count = 0
        for (let j = 0; j <= m; j++) if (chosen[j]) headKept[m * K + count++] = j
        headCount[m] = count
        mark = performance.now()
        selectionMs += mark - pooled
      }
    }
  }
  // One tile per query block: its kept key blocks as spans (adjacent blocks merged), clipped to T.
  const spans: SpanSource = (head, m) => {
    const headKept = kept[head] as Int32Array
    const pairs: number[] = []
    for (let c = 0; c < ((keptCount[head] as Int32Array)[m] as number); c++) {
      const j = headKept[m * K + c] as number
      const start = j * B
      const stop = Math.min(n, (j + 1) * B)
      if (pairs.length > 0 && pairs[pairs.length - 1] === start) pairs[pairs.length - 1] = stop
      else pairs.push(start, stop)
    }
    return pairs
  }
  return {
    spans,
    tileRows: B,
    reported,
    extra: { topK: K, blocks, blockSize: B },
    steps: { pooling: poolingMs / 1000, selection: selectionMs / 1000 },
  }
}

/**
 * The Block-Sparse prefill kernel (decoding stays dense).
 *
 * @param overrides - parameters to change from {@link defaultBlockSparseConfig}
 * @returns a kernel whose results carry `extra.topK` (after capping), `blocks`, `blockSize`
 * @throws `ConfigError` (`@attnlab/core`) on invalid parameters (see {@link resolveBlockSparseConfig})
 * @example
 * ```ts
 * const kernel = blockSparse({ topK: blockSparseTopKForSparsity(16384, 16, 0.95) }) // K = 26
 * ```
 * @category Block-Sparse
 */
export function blockSparse(
  overrides?: Partial<BlockSparseConfig>,
): SparseAttentionKernel<Readonly<BlockSparseConfig>> {
  const config = resolveBlockSparseConfig(overrides)
  return defineKernel({
    method: 'block-sparse',
    phases: ['prefill'],
    config,
    planner: (input, shape) => blockSparsePlan(config, input, shape),
  })
}
