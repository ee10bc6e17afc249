/**
 * SnapKV as configured by the Sparse Frontier study ([v2] A.1.4): a dense prefill,
 * then per KV head (grouped-query aware):
 *
 * 1. Window attention of the last `W` prompt queries over the prompt (causal in the corner).
 * 2. Importance `I[kv, j]` = mean over the group's query heads of the sum over window queries.
 * 3. Average pooling with `kernelSize` (stride 1, zero padding counted, so edges are damped).
 * 4. The first `prefix` and last `local` tokens are forced.
 * 5. The top `C = min(capacity, n)` tokens stay in the cache; every generated token is added.
 *
 * Reported sparsity `1 - C/n`. When `n <= capacity` nothing is evicted (the reference asserts
 * instead; keeping everything is the only sensible reading).
 *
 * @module
 */
import { ConfigError, type AttentionPrefillInput, type LayerKVCache } from '@attnlab/core'
import { configSchema, integerField, parseConfig, schemaDefaults, type z } from '@attnlab/core/schema'
import { checkAfterPrefill, compactCache, evictionDecodeStrategy, forceEnds, windowImportance } from './eviction.ts'
import { defineKernel, type SparseAttentionKernel } from './kernel.ts'
import { topK } from './select.ts'
import { snapKVSparsity } from './sparsity.ts'

/**
 * The schema of {@link SnapKVConfig}: each parameter's meaning, range and study default, declared
 * once (Ada-SnapKV's schema extends it).
 *
 * @category SnapKV
 */
export const snapKVConfigSchema = configSchema({
  /** Prompt tokens kept per KV head `C` (study YAML: 1024; Table 3: `floor((1 - s) n)`). */
  capacity: integerField('prompt tokens kept per KV head C', { min: 1 }).default(1024),
  /** Observation window: last `W` prompt queries (study: 256). */
  window: integerField('observation window: the last W prompt queries', { min: 1 }).default(256),
  /** Average-pooling kernel (odd; study: 21). */
  kernelSize: integerField('average-pooling kernel, odd', { min: 1 }).default(21),
  /** Forced most recent tokens (study: 128). */
  local: integerField('forced most recent tokens', { min: 0 }).default(128),
  /** Forced first tokens (study: 4). */
  prefix: integerField('forced first tokens', { min: 0 }).default(4),
})

/**
 * SnapKV parameters (see {@link snapKVConfigSchema} for each one).
 *
 * @category SnapKV
 */
export type SnapKVConfig = Readonly<z.output<typeof snapKVConfigSchema>>

/**
 * The study's SnapKV defaults: `C = 1024`, `W = 256`, kernel 21, local 128, prefix 4.
 *
 * @category SnapKV
 */
export function defaultSnapKVConfig(): SnapKVConfig {
  return schemaDefaults(snapKVConfigSchema, 'snapkv')
}

/**
 * Checks the rules across the fields SnapKV and Ada-SnapKV share (after their schema): an odd
 * pooling kernel, and a capacity above the forced tokens.
 *
 * @throws `ConfigError` (`@attnlab/core`) naming the parameter
 */
export function checkEvictionConfig(c: SnapKVConfig): void {
  if (c.kernelSize % 2 !== 1)
    throw new ConfigError('kernelSize', `must be odd (the pooling keeps the length), got ${c.kernelSize}`)
  if (c.capacity <= c.local + c.prefix) {
    throw new ConfigError(
      'capacity',
      `${c.capacity} must be greater than local + prefix (${c.local} + ${c.prefix} = ${c.local + c.prefix}): the ` +
        `forced tokens alone would fill the cache`,
    )
  }
}

/**
 * Resolves and validates a SnapKV configuration.
 *
 * @throws `ConfigError` (`@attnlab/core`) for an unknown parameter, non-positive sizes, an even
 *   `kernelSize`, or `capacity <= local + prefix`
 * @category SnapKV
 */
export function resolveSnapKVConfig(overrides?: Partial<SnapKVConfig>): Readonly<SnapKVConfig> {
  const c = parseConfig(snapKVConfigSchema, overrides === undefined ? {} : overrides, 'snapkv')
  checkEvictionConfig(c)
  return Object.freeze(c)
}

function snapKVAfterPrefill(config: Readonly<SnapKVConfig>, input: AttentionPrefillInput, cache: LayerKVCache): void {
  const shape = checkAfterPrefill(input)
  const { batch, nKvHeads, length: n } = shape
  const capacity = Math.min(config.capacity, n)
  const kept: number[][] = []
  if (capacity >= n) {
    for (let bk = 0; bk < batch * nKvHeads; bk++) kept.push(Array.from({ length: n }, (_, j) => j))
  } else {
    for (const scores of windowImportance(input, shape, config.window, config.kernelSize, 'mean')) {
      forceEnds(scores, config.prefix, config.local)
      kept.push(topK(scores, capacity).sort((a, b) => a - b))
    }
  }
  compactCache('snapkv', cache, shape, kept, new Float64Array(batch).fill(snapKVSparsity(n, config.capacity)))
}

/**
 * The SnapKV decode kernel: dense prefill, eviction in `afterPrefill`, decoding over the kept
 * tokens plus every generated token. Needs the model to call `afterPrefill(prefillInput, cache)`
 * once after the prompt's prefill (the prompt queries feed the observation window).
 *
 * @param overrides - parameters to change from {@link defaultSnapKVConfig}
 * @throws `ConfigError` (`@attnlab/core`) on invalid parameters (see {@link resolveSnapKVConfig})
 * @example
 * ```ts
 * const kernel = snapKV({ capacity: snapKVCapacityForSparsity(16384, 0.95) }) // C = 819
 * ```
 * @category SnapKV
 */
export function snapKV(overrides?: Partial<SnapKVConfig>): SparseAttentionKernel<Readonly<SnapKVConfig>> {
  const config = resolveSnapKVConfig(overrides)
  return defineKernel({
    method: 'snapkv',
    phases: ['decode'],
    config,
    strategy: evictionDecodeStrategy('snapkv', (input, cache) => snapKVAfterPrefill(config, input, cache)),
  })
}
