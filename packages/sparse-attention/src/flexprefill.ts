/**
 * FlexPrefill (Lai et al. 2025) in two modes:
 *
 * - **As evaluated** by the Sparse Frontier study (`tau = 0`, [v2] A.1.3): token level, the
 *   Vertical-Slash estimator with *mean* scores (distributions over keys and distances), per-head
 *   coverage sizing `V = max(minBudget, cover(v, alpha))`, `S` likewise, then the sinks and local
 *   distances forced *after* sizing and the Vertical-Slash 64x64 kernel. `alpha = 0` is uniform
 *   Vertical-Slash with `V = S = minBudget`.
 * - **Original** (`tau > 0`, as in the FlexPrefill authors' released code): block level (blocks of
 *   `blockSize = 128`), last-block queries, coverage in tokens converted to blocks
 *   (`floor(k / block) + 1`, clamped to `[ceil(minBudget/block), ceil(maxBudget/block)]`),
 *   sum-pooled vertical/slash scores, and the JS-divergence pattern switch: heads with
 *   `sqrt(JS(softmax(scale * mean(q_last) . kbar) || pooled vertical)) < tau` are query-aware
 *   (vertical/slash counts set to the minimum plus blocks of the causal block map
 *   `softmax(scale * qbar kbar^T)` covering `alpha * numBlocks` of its mass); the first
 *   vertical block and the diagonal slash block are always kept; sequences no longer than
 *   `max(2 block, ceil(minBudget/block) block)` fall back to dense.
 *
 * @module
 */
import { ConfigError, causalPairs, type AttentionPrefillInput } from '@attnlab/core'
import {
  configSchema,
  enumField,
  integerField,
  numberField,
  parseConfig,
  schemaDefaults,
  type z,
} from '@attnlab/core/schema'
import {
  defineKernel,
  densePlanner,
  type PrefillPlan,
  type PrefillShape,
  type SparseAttentionKernel,
} from './kernel.ts'
import { lastWindowProbabilities } from './masked-attention.ts'
import { blockMeans, coverCount, topK } from './select.ts'
import { floatValues } from './tensor-values.ts'
import type { VerticalSlashMaskMode } from './vertical-slash-index.ts'
import { LinePlanBuilder, selectLines, windowLineScores } from './vertical-slash.ts'

/**
 * The schema of {@link FlexPrefillConfig}: each parameter's meaning, range and study default,
 * declared once.
 *
 * @category FlexPrefill
 */
export const flexPrefillConfigSchema = configSchema({
  /** Coverage `alpha` (the original's `gamma`): fraction of estimated mass to cover (study default 0.65). */
  alpha: numberField('coverage alpha: the fraction of the estimated attention mass to cover', {
    min: 0,
    max: 1,
  }).default(0.65),
  /** Estimation window `W` for `tau = 0` (study: 512; 256 for non-retrieval tasks). Clamped to `n`. */
  window: integerField('estimation window: the last W queries', { min: 1 }).default(512),
  /** Minimum budget in tokens: lines for `tau = 0`, converted to blocks for `tau > 0` (study: 512). */
  minBudget: integerField('minimum budget in tokens', { min: 1 }).default(512),
  /** Maximum budget in tokens for `tau > 0` (`null`: no cap). */
  maxBudget: integerField('maximum budget in tokens for tau > 0 (null: no cap)', { min: 1 }).nullable().default(null),
  /** Forced sink columns for `tau = 0` (study: 4). */
  sinks: integerField('forced sink columns', { min: 0 }).default(4),
  /** Forced local distances for `tau = 0` (study: 64). */
  local: integerField('forced local distances', { min: 1 }).default(64),
  /**
   * JS-divergence threshold: 0 disables the pattern switch (token-level mode, as evaluated); `> 0` selects the
   * original block-level algorithm.
   */
  tau: numberField('JS-divergence threshold; 0 = token level, as evaluated', { min: 0 }).default(0),
  /** Block size of the original algorithm (`tau > 0`), default 128. */
  blockSize: integerField('block size for tau > 0', { min: 1 }).default(128),
  /** Kernel tile size for the `tau = 0` index and accounting (study: 64). */
  kernelBlockSize: integerField('kernel tile size of the tau = 0 index', { min: 1 }).default(64),
  /** For `tau = 0`: the kernel's blocks (`'kernel'`) or exact lines. */
  maskMode: enumField("computed cells: the kernel's 64x64 blocks (as the study ran) or the exact lines", [
    'kernel',
    'exact',
  ] as const satisfies readonly VerticalSlashMaskMode[]).default('kernel'),
})

/**
 * FlexPrefill parameters (see {@link flexPrefillConfigSchema} for each one).
 *
 * @category FlexPrefill
 */
export type FlexPrefillConfig = Readonly<z.output<typeof flexPrefillConfigSchema>>

/**
 * The study's FlexPrefill defaults (`flexprefill.yaml` with the paper's settings): `alpha = 0.65`,
 * `W = 512`, `minBudget = 512`, `tau = 0`, sinks 4, local 64.
 *
 * @category FlexPrefill
 */
export function defaultFlexPrefillConfig(): FlexPrefillConfig {
  return schemaDefaults(flexPrefillConfigSchema, 'flexprefill')
}

/**
 * Named FlexPrefill presets: `study` (as evaluated, `tau = 0`) and `original` (the FlexPrefill
 * repository's demo: `gamma = 0.9`, `tau = 0.1`, `minBudget = 1024`, blocks of 128).
 *
 * @category FlexPrefill
 */
export const FLEXPREFILL_PRESETS: Readonly<Record<'study' | 'original', Readonly<FlexPrefillConfig>>> = Object.freeze({
  study: Object.freeze(defaultFlexPrefillConfig()),
  original: Object.freeze({ ...defaultFlexPrefillConfig(), alpha: 0.9, tau: 0.1, minBudget: 1024 }),
})

/**
 * Resolves and validates a FlexPrefill configuration.
 *
 * @throws `ConfigError` (`@attnlab/core`) for an unknown parameter, `alpha` outside `[0, 1]`, `tau < 0`,
 *   non-positive sizes, `maxBudget < minBudget`, or (for `tau = 0`) `minBudget` below `sinks` or
 *   `local` (forced lines count toward the budget)
 * @category FlexPrefill
 */
export function resolveFlexPrefillConfig(overrides?: Partial<FlexPrefillConfig>): Readonly<FlexPrefillConfig> {
  const c = parseConfig(flexPrefillConfigSchema, overrides === undefined ? {} : overrides, 'flexprefill')
  if (c.maxBudget !== null && c.maxBudget < c.minBudget)
    throw new ConfigError('maxBudget', `${c.maxBudget} must be >= minBudget (${c.minBudget})`)
  if (c.tau === 0 && c.minBudget < Math.max(c.sinks, c.local)) {
    throw new ConfigError(
      'minBudget',
      `${c.minBudget} must be >= sinks (${c.sinks}) and local (${c.local}): the forced lines count toward the budget`,
    )
  }
  return Object.freeze(c)
}

function tokenLevelPlan(
  config: Readonly<FlexPrefillConfig>,
  input: AttentionPrefillInput,
  shape: PrefillShape,
): PrefillPlan {
  const { batch, nHeads, length } = shape
  const window = Math.min(config.window, length)
  const estimateStart = performance.now()
  const probabilities = lastWindowProbabilities(input.q, input.k, window, input.scale, 'flexprefill estimation')
  const estimate = (performance.now() - estimateStart) / 1000
  const builder = new LinePlanBuilder(shape, config.kernelBlockSize, config.maskMode)
  const selectionStart = performance.now()
  for (let head = 0; head < batch * nHeads; head++) {
    const { vertical, slash } = windowLineScores(probabilities, head, window, length)
    for (let j = 0; j < length; j++) {
      vertical[j] = (vertical[j] as number) / window
      slash[j] = (slash[j] as number) / window
    }
    const verticalCount = Math.min(length, Math.max(config.minBudget, coverCount(vertical, config.alpha)))
    const slashCount = Math.min(length, Math.max(config.minBudget, coverCount(slash, config.alpha)))
    const { verticals, slashes } = selectLines(vertical, slash, verticalCount, slashCount, config.sinks, config.local)
    builder.add(head, verticals, slashes)
  }
  const selection = (performance.now() - selectionStart) / 1000 - builder.indexSeconds
  return builder.plan({ window, tau: 0 }, { estimate, selection })
}

/** Square root of the Jensen-Shannon divergence (nats) between two distributions. */
export function jsDistance(p: ArrayLike<number>, q: ArrayLike<number>): number {
  let js = 0
  for (let i = 0; i < p.length; i++) {
    const a = p[i] as number
    const b = q[i] as number
    const m = (a + b) / 2
    if (a > 0) js += 0.5 * a * Math.log(a / m)
    if (b > 0) js += 0.5 * b * Math.log(b / m)
  }
  return Math.sqrt(Math.max(0, js))
}

function softmaxInPlace(x: Float64Array, count = x.length): void {
  let max = -Infinity
  for (let i = 0; i < count; i++) max = Math.max(max, x[i] as number)
  let sum = 0
  for (let i = 0; i < count; i++) {
    const e = Math.exp((x[i] as number) - max)
    x[i] = e
    sum += e
  }
  for (let i = 0; i < count; i++) x[i] = (x[i] as number) / sum
}

function blockLevelPlan(
  config: Readonly<FlexPrefillConfig>,
  input: AttentionPrefillInput,
  shape: PrefillShape,
): PrefillPlan {
  const { batch, nHeads, nKvHeads, length: n, dHead } = shape
  const block = config.blockSize
  const minBlocksRaw = Math.ceil(config.minBudget / block)
  if (n <= Math.max(2 * block, minBlocksRaw * block)) {
    return { ...densePlanner(input, shape), extra: { denseFallback: 1, tau: config.tau } }
  }
  const blocks = Math.ceil(n / block)
  const minBlocks = Math.min(blocks, minBlocksRaw)
  const maxBlocks =
    config.maxBudget === null ? blocks : Math.min(blocks, Math.max(minBlocks, Math.ceil(config.maxBudget / block)))
  const window = block // the last block of queries (n > 2 block)
  const estimateStart = performance.now()
  const probabilities = lastWindowProbabilities(input.q, input.k, window, input.scale, 'flexprefill estimation')
  const estimateSeconds = (performance.now() - estimateStart) / 1000
  const selectionStart = performance.now()
  // Mean-pooled queries and keys per block (over the block's actual tokens).
  // views of q and k where attnlab kernels run (no tfjs allocation until the block level is planned)
  const qData = floatValues(input.q, 'flexprefill estimation')
  const kData = floatValues(input.k, 'flexprefill estimation')
  const pooled = (data: Float32Array, bh: number): Float64Array => blockMeans(data, bh, n, dHead, block, false)
  const group = nHeads / nKvHeads
  const selectedOf: Uint8Array[] = [] // per head, [query block, key block]
  const reported = new Float64Array(batch * nHeads)
  let queryAwareHeads = 0
  let verticalBlocksTotal = 0
  let slashBlocksTotal = 0
  let distanceTotal = 0
  const causalBlocks = causalPairs(blocks, blocks)
  for (let b = 0; b < batch; b++) {
    const kBars = Array.from({ length: nKvHeads }, (_, kv) => pooled(kData, b * nKvHeads + kv))
    for (let h = 0; h < nHeads; h++) {
      const head = b * nHeads + h
      const kBar = kBars[Math.floor(h / group)] as Float64Array
      const qBar = pooled(qData, head)
      const { vertical, slash } = windowLineScores(probabilities, head, window, n)
      for (let j = 0; j < n; j++) {
        vertical[j] = (vertical[j] as number) / window
        slash[j] = (slash[j] as number) / window
      }
      const clampBlocks = (tokens: number): number =>
        Math.min(maxBlocks, Math.max(minBlocks, Math.floor(tokens / block) + 1))
      let verticalCount = clampBlocks(coverCount(vertical, config.alpha))
      let slashCount = clampBlocks(coverCount(slash, config.alpha))
      const pooledVertical = new Float64Array(blocks)
      const pooledSlash = new Float64Array(blocks)
      for (let j = 0; j < n; j++) {
        const m = Math.floor(j / block)
        pooledVertical[m] = (pooledVertical[m] as number) + (vertical[j] as number)
        pooledSlash[m] = (pooledSlash[m] as number) + (slash[j] as number)
      }
      // Pattern decision: the mean last-block query against the mean-pooled key blocks.
      const lastQuery = new Float64Array(dHead)
      const qBase = head * n * dHead
      for (let t = n - window; t < n; t++) {
        for (let d = 0; d < dHead; d++)
          lastQuery[d] = (lastQuery[d] as number) + (qData[qBase + t * dHead + d] as number) / window
      }
      const estimate = new Float64Array(blocks)
      for (let m = 0; m < blocks; m++) {
        let dot = 0
        for (let d = 0; d < dHead; d++) dot += (lastQuery[d] as number) * (kBar[m * dHead + d] as number)
        estimate[m] = input.scale * dot
      }
      softmaxInPlace(estimate)
      const distance = jsDistance(estimate, pooledVertical)
      distanceTotal += distance
      const queryAware = distance < config.tau
      const selected = new Uint8Array(blocks * blocks) // [query block, key block]
      if (queryAware) {
        queryAwareHeads++
        verticalCount = minBlocks
        slashCount = minBlocks
        // Causal block map, each row a softmax over key blocks <= the query block.
        const entries = new Float64Array(blocks * blocks).fill(-Infinity)
        const row = new Float64Array(blocks)
        for (let m = 0; m < blocks; m++) {
          for (let j = 0; j <= m; j++) {
            let dot = 0
            for (let d = 0; d < dHead; d++) dot += (qBar[m * dHead + d] as number) * (kBar[j * dHead + d] as number)
            row[j] = input.scale * dot
          }
          softmaxInPlace(row, m + 1)
          for (let j = 0; j <= m; j++) entries[m * blocks + j] = row[j] as number
        }
        const causalEntries: number[] = []
        for (let m = 0; m < blocks; m++)
          for (let j = 0; j <= m; j++) causalEntries.push(entries[m * blocks + j] as number)
        const count = coverCount(causalEntries, config.alpha * blocks)
        for (const flat of topK(entries, count)) selected[flat] = 1
      }
      pooledVertical[0] = Infinity
      pooledSlash[0] = Infinity
      const verticalBlocks = topK(pooledVertical, verticalCount)
      const slashBlocks = topK(pooledSlash, slashCount)
      verticalBlocksTotal += verticalBlocks.length
      slashBlocksTotal += slashBlocks.length
      for (let m = 0; m < blocks; m++) {
        for (const j of verticalBlocks) if (j <= m) selected[m * blocks + j] = 1
        for (const s of slashBlocks) if (m - s >= 0) selected[m * blocks + m - s] = 1
      }
      let chosen = 0
      for (let m = 0; m < blocks; m++) for (let j = 0; j <= m; j++) chosen += selected[m * blocks + j] as number
      reported[head] = 1 - chosen / causalBlocks
      selectedOf[head] = selected
    }
  }
  const heads = batch * nHeads
  const selectionSeconds = (performance.now() - selectionStart) / 1000
  return {
    // One tile per query block: its selected key blocks (ascending, adjacent ones merged).
    spans: (head, m) => {
      const selected = selectedOf[head] as Uint8Array
      const pairs: number[] = []
      for (let j = 0; j <= m; j++) {
        if (selected[m * blocks + j] !== 1) continue
        const start = j * block
        const stop = Math.min(n, (j + 1) * block)
        if (pairs.length > 0 && pairs[pairs.length - 1] === start) pairs[pairs.length - 1] = stop
        else pairs.push(start, stop)
      }
      return pairs
    },
    tileRows: block,
    steps: { estimate: estimateSeconds, selection: selectionSeconds },
    reported,
    extra: {
      denseFallback: 0,
      tau: config.tau,
      queryAwareFraction: queryAwareHeads / heads,
      verticalBlocks: verticalBlocksTotal / heads,
      slashBlocks: slashBlocksTotal / heads,
      jsDistance: distanceTotal / heads,
    },
  }
}

/**
 * The FlexPrefill prefill kernel (decoding stays dense). `tau = 0` runs the token-level mode the
 * study evaluated; `tau > 0` the original block-level algorithm with the JS-divergence switch.
 *
 * Reported sparsity: `tau = 0` uses the Vertical-Slash 64x64 kernel accounting; `tau > 0` the
 * block-level accounting `1 - selected causal blocks / (N_b (N_b + 1) / 2)` (0 on the dense
 * fallback).
 *
 * @param overrides - parameters to change from {@link defaultFlexPrefillConfig}
 * @throws `ConfigError` (`@attnlab/core`) on invalid parameters (see {@link resolveFlexPrefillConfig})
 * @example
 * ```ts
 * const kernel = flexPrefill({ alpha: 0.55, minBudget: 512 }) // Table 3, 16K
 * ```
 * @category FlexPrefill
 */
export function flexPrefill(
  overrides?: Partial<FlexPrefillConfig>,
): SparseAttentionKernel<Readonly<FlexPrefillConfig>> {
  const config = resolveFlexPrefillConfig(overrides)
  return defineKernel({
    method: 'flexprefill',
    phases: ['prefill'],
    config,
    planner: (input, shape) =>
      config.tau > 0 ? blockLevelPlan(config, input, shape) : tokenLevelPlan(config, input, shape),
  })
}
