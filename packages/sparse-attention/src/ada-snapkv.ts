/**
 * Ada-SnapKV (Ada-KV's adaptive head budgets on SnapKV) as configured by the Sparse Frontier
 * study ([v2] A.1.5). After a dense prefill, per layer:
 *
 * 1. Importance `I[kv, j]` = max over the group's query heads of the max over window queries of
 *    the window probabilities (max aggregation), average-pooled with `kernelSize`; first
 *    `prefix` and last `local` tokens forced.
 * 2. Total budget `T = C * Hkv` with `C = min(capacity, n)`; every KV head first takes its top
 *    `f = max(floor(C * minHeadRatio), local + prefix)` tokens.
 * 3. The remaining `T - f * Hkv` slots go to the global top of all heads' unselected scores
 *    (flattened head-major; ties to the lower head, then the lower position).
 *
 * Per-head cache lengths therefore differ (the compacted cache pads and masks). Reported
 * sparsity `1 - kept / (n * Hkv)`.
 *
 * @module
 */
import type { AttentionPrefillInput, LayerKVCache } from '@attnlab/core'
import { numberField, parseConfig, schemaDefaults, type z } from '@attnlab/core/schema'
import { checkAfterPrefill, compactCache, evictionDecodeStrategy, forceEnds, windowImportance } from './eviction.ts'
import { defineKernel, type SparseAttentionKernel } from './kernel.ts'
import { topK } from './select.ts'
import { checkEvictionConfig, snapKVConfigSchema } from './snapkv.ts'
import { adaSnapKVSparsity } from './sparsity.ts'

/**
 * The schema of {@link AdaSnapKVConfig}: SnapKV's ({@link snapKVConfigSchema}) plus the per-head floor.
 *
 * @category Ada-SnapKV
 */
export const adaSnapKVConfigSchema = snapKVConfigSchema.extend({
  /** Per-head floor as a fraction of `C` (study: 0.2; 1 is uniform SnapKV-style allocation). */
  minHeadRatio: numberField('per-head floor as a fraction of C (1: uniform)', { min: 0, max: 1 }).default(0.2),
})

/**
 * Ada-SnapKV parameters (SnapKV's plus the per-head floor; see {@link adaSnapKVConfigSchema}).
 *
 * @category Ada-SnapKV
 */
export type AdaSnapKVConfig = Readonly<z.output<typeof adaSnapKVConfigSchema>>

/**
 * The study's Ada-SnapKV defaults: SnapKV's (`C = 1024`, `W = 256`, kernel 21, local 128,
 * prefix 4) and `minHeadRatio = 0.2`.
 *
 * @category Ada-SnapKV
 */
export function defaultAdaSnapKVConfig(): AdaSnapKVConfig {
  return schemaDefaults(adaSnapKVConfigSchema, 'ada-snapkv')
}

/**
 * Resolves and validates an Ada-SnapKV configuration.
 *
 * @throws `ConfigError` (`@attnlab/core`) as SnapKV, and for `minHeadRatio` outside `[0, 1]`
 * @category Ada-SnapKV
 */
export function resolveAdaSnapKVConfig(overrides?: Partial<AdaSnapKVConfig>): Readonly<AdaSnapKVConfig> {
  const c = parseConfig(adaSnapKVConfigSchema, overrides === undefined ? {} : overrides, 'ada-snapkv')
  checkEvictionConfig(c)
  return Object.freeze(c)
}

/**
 * Ada-KV's allocation for one batch row: per-head floors, then the global top of the rest.
 *
 * @param scores - pooled, forced importance per KV head (each length `n`)
 * @param capacity - `C = min(capacity, n)` per head on average
 * @param floor - tokens every head takes first
 * @returns ascending kept positions per KV head
 */
export function adaptiveAllocation(scores: readonly Float64Array[], capacity: number, floor: number): number[][] {
  const heads = scores.length
  const n = scores[0]?.length ?? 0
  const kept: number[][] = []
  const flat = new Float64Array(heads * n)
  scores.forEach((s, kv) => {
    const first = topK(s, floor)
    kept.push(first)
    flat.set(s, kv * n)
    for (const j of first) flat[kv * n + j] = -Infinity
  })
  const remaining = capacity * heads - floor * heads
  for (const index of topK(flat, remaining)) kept[Math.floor(index / n)]?.push(index % n)
  return kept.map((k) => k.sort((a, b) => a - b))
}

function adaSnapKVAfterPrefill(
  config: Readonly<AdaSnapKVConfig>,
  input: AttentionPrefillInput,
  cache: LayerKVCache,
): void {
  const shape = checkAfterPrefill(input)
  const { batch, nKvHeads, length: n } = shape
  const capacity = Math.min(config.capacity, n)
  const kept: number[][] = []
  const reported = new Float64Array(batch)
  if (capacity >= n) {
    for (let bk = 0; bk < batch * nKvHeads; bk++) kept.push(Array.from({ length: n }, (_, j) => j))
  } else {
    const importance = windowImportance(input, shape, config.window, config.kernelSize, 'max')
    for (const scores of importance) forceEnds(scores, config.prefix, config.local)
    const floor = Math.min(capacity, Math.max(Math.floor(capacity * config.minHeadRatio), config.local + config.prefix))
    for (let b = 0; b < batch; b++) {
      kept.push(...adaptiveAllocation(importance.slice(b * nKvHeads, (b + 1) * nKvHeads), capacity, floor))
    }
  }
  for (let b = 0; b < batch; b++) {
    reported[b] = adaSnapKVSparsity(
      n,
      kept.slice(b * nKvHeads, (b + 1) * nKvHeads).map((k) => k.length),
    )
  }
  compactCache('ada-snapkv', cache, shape, kept, reported)
}

/**
 * The Ada-SnapKV decode kernel: dense prefill, adaptive eviction in `afterPrefill` (per-head
 * cache lengths differ), decoding over the kept tokens plus every generated token.
 *
 * @param overrides - parameters to change from {@link defaultAdaSnapKVConfig}
 * @throws `ConfigError` (`@attnlab/core`) on invalid parameters (see {@link resolveAdaSnapKVConfig})
 * @example
 * ```ts
 * const kernel = adaSnapKV({ capacity: 1638 }) // 0.9 at 16K
 * ```
 * @category Ada-SnapKV
 */
export function adaSnapKV(overrides?: Partial<AdaSnapKVConfig>): SparseAttentionKernel<Readonly<AdaSnapKVConfig>> {
  const config = resolveAdaSnapKVConfig(overrides)
  return defineKernel({
    method: 'ada-snapkv',
    phases: ['decode'],
    config,
    strategy: evictionDecodeStrategy('ada-snapkv', (input, cache) => adaSnapKVAfterPrefill(config, input, cache)),
  })
}
