/**
 * Quest (query-aware page selection over the full cache) as configured by the Sparse Frontier
 * study ([v2] A.1.6). The prefill is dense; the cache is never compacted. Per KV
 * head, every page of `pageSize` tokens keeps the element-wise min and max of its keys. At each
 * decode step (the cache already holds the new token at `position`):
 *
 * 1. The current (possibly partial) page is `c = floor(position / P)`; it needs
 *    `c >= budget + 1` with `budget = tokenBudget / P` pages.
 * 2. Every earlier page `p < c` is scored per query head as the upper bound of `q . k`:
 *    `sum_d max(q_d min[p, d], q_d max[p, d])`; with `sharePages` (default) the scores are summed
 *    over the query heads of a GQA group, so the group reads the same pages.
 * 3. The top `budget` pages (ties to the lower page) plus the current page are read.
 *
 * Reported sparsity `1 - tokenBudget / n` relative to the prompt length `n`.
 *
 * Cost per step: the bounds belong to the cache ({@link QuestState}, its kernel state), built once
 * by `afterPrefill` and extended when a page completes (every `P` steps: only complete pages are
 * scored); a step computes the page scores (`O(H x pages x dHead)`) and the top-k, and hands the
 * chosen pages to the kernel as runs of slots (no `O(H x T)` array per step).
 *
 * @module
 */
import * as tf from '@tensorflow/tfjs-core'
import { ConfigError, readValuesSync, ShapeError, type KernelState, type LayerKVCache } from '@attnlab/core'
import { SequenceTooShortError } from './errors.ts'
import { booleanField, configSchema, integerField, parseConfig, schemaDefaults, type z } from '@attnlab/core/schema'
import {
  checkPrefillInput,
  defineKernel,
  type DecodeShape,
  type DecodeStrategy,
  type SparseAttentionKernel,
} from './kernel.ts'
import { topKMembers } from './select.ts'
import { floatValues } from './tensor-values.ts'
import { questSparsity } from './sparsity.ts'

/**
 * The schema of {@link QuestConfig}: each parameter's meaning, range and study default, declared once.
 *
 * @category Quest
 */
export const questConfigSchema = configSchema({
  /** Tokens read per step besides the current page (study YAML: 1024; a multiple of `pageSize`). */
  tokenBudget: integerField('tokens read per step besides the current page', { min: 1 }).default(1024),
  /** Page size `P` in tokens (study: 16). */
  pageSize: integerField('page size P in tokens', { min: 1 }).default(16),
  /** Select pages per GQA group (summed scores) rather than per query head (study: true). */
  sharePages: booleanField('select pages per GQA group (summed scores), not per query head').default(true),
})

/**
 * Quest parameters (see {@link questConfigSchema} for each one).
 *
 * @category Quest
 */
export type QuestConfig = Readonly<z.output<typeof questConfigSchema>>

/**
 * The study's Quest defaults: budget 1024 tokens, pages of 16, pages shared within a GQA group.
 *
 * @category Quest
 */
export function defaultQuestConfig(): QuestConfig {
  return schemaDefaults(questConfigSchema, 'quest')
}

/**
 * Resolves and validates a Quest configuration.
 *
 * @throws `ConfigError` (`@attnlab/core`) for an unknown parameter, non-positive sizes, or a budget that is
 *   not a multiple of the page size
 * @category Quest
 */
export function resolveQuestConfig(overrides?: Partial<QuestConfig>): Readonly<QuestConfig> {
  const c = parseConfig(questConfigSchema, overrides === undefined ? {} : overrides, 'quest')
  if (c.tokenBudget % c.pageSize !== 0) {
    throw new ConfigError('tokenBudget', `${c.tokenBudget} must be a multiple of pageSize (${c.pageSize})`)
  }
  return Object.freeze(c)
}

/**
 * The shortest prompt Quest accepts: the first generated token must find `budget + 1` earlier
 * pages before its own, i.e. `n >= (tokenBudget / P + 1) P`.
 *
 * @param config - a resolved Quest configuration
 * @returns the minimum prompt length (tokens)
 * @category Quest
 */
export function questMinimumPromptLength(config: Readonly<QuestConfig>): number {
  return config.tokenBudget + config.pageSize
}

/**
 * Per-page key bounds of one layer's cache, attached as its kernel state.
 *
 * @category Quest
 */
export class QuestState implements KernelState {
  readonly [key: string]: unknown
  /** Marks this state type. */
  readonly kind = 'quest' as const
  /** Element-wise minimum of each page's keys, per `(batch, kvHead)`: `[pages * dHead]`. */
  pageMin: Float32Array[]
  /** Element-wise maximum, same layout. */
  pageMax: Float32Array[]
  /** Tokens summarised so far. */
  summarized = 0
  constructor(
    /** Prompt length (tokens). */
    readonly promptLength: number,
    /** `batch * nKvHeads`. */
    readonly rows: number,
    /** Key dimension. */
    readonly dHead: number,
    /** Page size. */
    readonly pageSize: number,
  ) {
    this.pageMin = Array.from({ length: rows }, () => new Float32Array(0))
    this.pageMax = Array.from({ length: rows }, () => new Float32Array(0))
  }
  /** Adds keys `[rows, count, dHead]` (row-major) of tokens `summarized..summarized+count-1`. */
  add(keys: Float32Array, count: number): void {
    const { dHead, pageSize } = this
    const total = this.summarized + count
    const pages = Math.ceil(total / pageSize)
    for (let r = 0; r < this.rows; r++) {
      let min = this.pageMin[r] as Float32Array
      let max = this.pageMax[r] as Float32Array
      if (min.length < pages * dHead) {
        const grown = Math.max(pages, 2 * (min.length / dHead)) * dHead
        const newMin = new Float32Array(grown).fill(Infinity)
        const newMax = new Float32Array(grown).fill(-Infinity)
        newMin.set(min)
        newMax.set(max)
        this.pageMin[r] = min = newMin
        this.pageMax[r] = max = newMax
      }
      for (let t = 0; t < count; t++) {
        const page = Math.floor((this.summarized + t) / pageSize)
        for (let d = 0; d < dHead; d++) {
          const x = keys[(r * count + t) * dHead + d] as number
          const i = page * dHead + d
          if (x < (min[i] as number)) min[i] = x
          if (x > (max[i] as number)) max[i] = x
        }
      }
    }
    this.summarized = total
  }
  /** Nothing to free: the state holds plain arrays. */
  dispose(): void {}
}

function summarize(state: QuestState, cache: LayerKVCache, upTo: number): void {
  const keys = cache.keys
  if (keys === null || upTo <= state.summarized) return
  const count = upTo - state.summarized
  let data: Float32Array
  // the whole prompt: a view where attnlab kernels run (read at once by add, no tfjs allocation between)
  if (state.summarized === 0 && upTo === keys.shape[2]) data = floatValues(keys, 'quest page bounds')
  else {
    // a gather along the positions (tfjs-wasm's strided slice of a long cache took ~10x longer)
    const rows = tf.tidy(() => tf.gather(keys, tf.range(state.summarized, upTo, 1, 'int32'), 2))
    data = readValuesSync(rows, 'quest page bounds') as Float32Array
    rows.dispose()
  }
  state.add(data, count)
}

/**
 * Quest's upper bound of `q . k` per complete page, `sum_d max(q_d min[p, d], q_d max[p, d])`, into
 * `into[p]` (added to it when `accumulate`), for pages `0 .. into.length - 1`; four pages per pass
 * over `q` (each page still summed over `d` in order).
 */
function scorePages(
  q: Float32Array,
  qOffset: number,
  min: Float32Array,
  max: Float32Array,
  dHead: number,
  into: Float64Array,
  accumulate: boolean,
): void {
  const pages = into.length
  let p = 0
  for (; p + 4 <= pages; p += 4) {
    const o0 = p * dHead
    const o1 = o0 + dHead
    const o2 = o1 + dHead
    const o3 = o2 + dHead
    let s0 = 0
    let s1 = 0
    let s2 = 0
    let s3 = 0
    for (let d = 0; d < dHead; d++) {
      const x = q[qOffset + d] as number
      s0 += Math.max(x * (min[o0 + d] as number), x * (max[o0 + d] as number))
      s1 += Math.max(x * (min[o1 + d] as number), x * (max[o1 + d] as number))
      s2 += Math.max(x * (min[o2 + d] as number), x * (max[o2 + d] as number))
      s3 += Math.max(x * (min[o3 + d] as number), x * (max[o3 + d] as number))
    }
    into[p] = accumulate ? (into[p] as number) + s0 : s0
    into[p + 1] = accumulate ? (into[p + 1] as number) + s1 : s1
    into[p + 2] = accumulate ? (into[p + 2] as number) + s2 : s2
    into[p + 3] = accumulate ? (into[p + 3] as number) + s3 : s3
  }
  for (; p < pages; p++) {
    const o = p * dHead
    let score = 0
    for (let d = 0; d < dHead; d++) {
      const x = q[qOffset + d] as number
      score += Math.max(x * (min[o + d] as number), x * (max[o + d] as number))
    }
    into[p] = accumulate ? (into[p] as number) + score : score
  }
}

function questStrategy(config: Readonly<QuestConfig>): DecodeStrategy {
  const pages = config.tokenBudget / config.pageSize
  const P = config.pageSize
  const required = questMinimumPromptLength(config)
  return {
    afterPrefill(input, cache) {
      const shape = checkPrefillInput(input)
      if (shape.length < required) {
        throw new SequenceTooShortError(
          'quest',
          shape.length,
          required,
          `a budget of ${config.tokenBudget} tokens (${pages} pages of ${P}) needs the prompt to span ${pages + 1} ` +
            `full pages before the first generated token`,
        )
      }
      cache.kernelState?.dispose()
      const state = new QuestState(shape.length, shape.batch * shape.nKvHeads, shape.dHead, P)
      cache.kernelState = state
      summarize(state, cache, shape.length)
    },
    select(input, shape: DecodeShape) {
      const { batch, nHeads, nKvHeads, stored, position, dHead } = shape
      if (stored !== position + 1) {
        throw new ShapeError(
          `quest reads the full cache: ${position + 1} entries expected for position ${position}, got ${stored}`,
          {
            stored,
            position,
          },
        )
      }
      let state = input.cache.kernelState
      if (!(state instanceof QuestState)) {
        // No afterPrefill (e.g. a model that never calls it): summarise the full cache now.
        input.cache.kernelState?.dispose()
        state = new QuestState(input.cache.promptLength, batch * nKvHeads, dHead, P)
        input.cache.kernelState = state
      }
      const quest = state as QuestState
      if (quest.rows !== batch * nKvHeads || quest.dHead !== dHead) {
        throw new ShapeError(
          `quest: cache state is for ${quest.rows} (batch x KV head) rows of dHead ${quest.dHead}, ` +
            `got ${batch * nKvHeads} of ${dHead}`,
        )
      }
      if (position < quest.summarized - 1) {
        throw new ShapeError(`quest: position ${position} is before the ${quest.summarized} tokens already summarised`)
      }
      const boundsStart = performance.now()
      const current = Math.floor(position / P)
      // Only complete pages are scored: their bounds are read once, when a page fills (every P steps).
      summarize(quest, input.cache, current * P)
      const pageBounds = (performance.now() - boundsStart) / 1000
      if (current < pages + 1) {
        throw new SequenceTooShortError(
          'quest',
          position,
          required,
          `a budget of ${config.tokenBudget} tokens (${pages} pages of ${P}) needs ${pages + 1} full pages before ` +
            `the current one (prompt of ${input.cache.promptLength} tokens)`,
        )
      }
      const q = readValuesSync(input.q, 'quest page selection') as Float32Array // [b, H, 1, d]
      const group = nHeads / nKvHeads
      // The chosen pages plus the current one as runs of slots per query head (slot s is position s).
      const tileStarts = new Int32Array(batch * nHeads + 1)
      const runs: number[] = []
      const scores = new Float64Array(current)
      const pageScores = (h: number, bk: number, into: Float64Array, accumulate: boolean): void =>
        scorePages(
          q,
          h * dHead,
          quest.pageMin[bk] as Float32Array,
          quest.pageMax[bk] as Float32Array,
          dHead,
          into,
          accumulate,
        )
      const mark = (flatHead: number, chosen: Uint8Array): void => {
        const first = runs.length
        let p = 0
        while (p < current) {
          if (!chosen[p]) {
            p++
            continue
          }
          const start = p
          while (p < current && chosen[p]) p++
          runs.push(start * P, p * P)
        }
        if (runs.length > first && runs[runs.length - 1] === current * P) runs[runs.length - 1] = position + 1
        else runs.push(current * P, position + 1)
        tileStarts[flatHead + 1] = runs.length / 2
      }
      // Timed apart: the page upper bounds (scores) and the top-k selection with its slot runs.
      let scoring = 0
      let clock = performance.now()
      const lap = (): number => {
        const now = performance.now()
        const elapsed = now - clock
        clock = now
        return elapsed
      }
      for (let b = 0; b < batch; b++) {
        for (let kv = 0; kv < nKvHeads; kv++) {
          const bk = b * nKvHeads + kv
          if (config.sharePages) {
            lap()
            scores.fill(0)
            for (let g = 0; g < group; g++) pageScores(b * nHeads + kv * group + g, bk, scores, true)
            scoring += lap()
            const chosen = topKMembers(scores, pages)
            for (let g = 0; g < group; g++) mark(b * nHeads + kv * group + g, chosen)
          } else {
            for (let g = 0; g < group; g++) {
              const head = b * nHeads + kv * group + g
              lap()
              pageScores(head, bk, scores, false)
              scoring += lap()
              mark(head, topKMembers(scores, pages))
            }
          }
        }
      }
      const selection = (performance.now() - boundsStart) / 1000 - pageBounds - scoring / 1000
      const reported = new Float64Array(batch * nHeads).fill(questSparsity(quest.promptLength, config.tokenBudget))
      return {
        slotSpans: { tileStarts, spans: Int32Array.from(runs) },
        reported,
        extra: { pages, currentPage: current },
        steps: { pageBounds, pageScores: scoring / 1000, selection },
      }
    },
  }
}

/**
 * The Quest decode kernel: dense prefill, full cache, query-aware page selection at every step.
 *
 * @param overrides - parameters to change from {@link defaultQuestConfig}
 * @throws `ConfigError` (`@attnlab/core`) on invalid parameters (see {@link resolveQuestConfig}); at run time
 *   {@link SequenceTooShortError} when the prompt is shorter than {@link questMinimumPromptLength}
 * @example
 * ```ts
 * const kernel = quest({ tokenBudget: questBudgetForSparsity(16384, 0.95) }) // 816 tokens
 * ```
 * @category Quest
 */
export function quest(overrides?: Partial<QuestConfig>): SparseAttentionKernel<Readonly<QuestConfig>> {
  const config = resolveQuestConfig(overrides)
  return defineKernel({ method: 'quest', phases: ['decode'], config, strategy: questStrategy(config) })
}
