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
import { activeKernels, pageSelect } from '@attnlab/core/kernels'
import { SequenceTooShortError } from './errors.ts'
import { booleanField, configSchema, integerField, parseConfig, schemaDefaults, type z } from '@attnlab/core/schema'
import {
  checkPrefillInput,
  defineKernel,
  type DecodeShape,
  type DecodeStrategy,
  type SparseAttentionKernel,
} from './kernel.ts'
import { floatValues } from './tensor-values.ts'
import { questSparsity } from './sparsity.ts'

/** `'1 page of 16'`, `'3 pages of 16'`. */
const pagesOf = (pages: number, size: number): string => `${pages} ${pages === 1 ? 'page' : 'pages'} of ${size}`
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
 * Per-page key bounds of one layer's cache, attached as its kernel state, in the layout of
 * `@attnlab/core`'s `pageSelect` kernel.
 *
 * @category Quest
 */
export class QuestState implements KernelState {
  readonly [key: string]: unknown
  /** Marks this state type. */
  readonly kind = 'quest' as const
  /**
   * Element-wise minima then maxima of each page's keys, `[rows, 2, dHead, capacity]` (dimension-major:
   * page `p` of dimension `d` of row `r` at `((2 r + side) dHead + d) capacity + p`); pages past the last
   * summarised one hold `+Infinity` / `-Infinity`.
   */
  bounds = new Float32Array(0)
  /** Pages `bounds` has room for (grows by doubling). */
  capacity = 0
  /** Tokens summarised so far. */
  summarized = 0
  #tensor: tf.Tensor4D | null = null
  constructor(
    /** Prompt length (tokens). */
    readonly promptLength: number,
    /** `batch * nKvHeads`. */
    readonly rows: number,
    /** Key dimension. */
    readonly dHead: number,
    /** Page size. */
    readonly pageSize: number,
  ) {}
  /** Adds keys `[rows, count, dHead]` (row-major) of tokens `summarized..summarized+count-1`. */
  add(keys: Float32Array, count: number): void {
    const { dHead, pageSize, rows } = this
    const total = this.summarized + count
    const pages = Math.ceil(total / pageSize)
    if (pages > this.capacity) this.#grow(Math.max(pages, 2 * this.capacity))
    const cap = this.capacity
    const bounds = this.bounds
    for (let r = 0; r < rows; r++) {
      const lo = 2 * r * dHead * cap
      const hi = lo + dHead * cap
      for (let t = 0; t < count; t++) {
        const page = Math.floor((this.summarized + t) / pageSize)
        const key = (r * count + t) * dHead
        for (let d = 0; d < dHead; d++) {
          const x = keys[key + d] as number
          const i = d * cap + page
          if (x < (bounds[lo + i] as number)) bounds[lo + i] = x
          if (x > (bounds[hi + i] as number)) bounds[hi + i] = x
        }
      }
    }
    this.summarized = total
    this.#tensor?.dispose()
    this.#tensor = null
  }
  /** The bounds as a tensor `[rows, 2, dHead, capacity]` for `pageSelect` (kept; rebuilt after each `add`). */
  boundsTensor(): tf.Tensor4D {
    if (this.#tensor === null) {
      this.#tensor = tf.keep(tf.tensor4d(this.bounds, [this.rows, 2, this.dHead, this.capacity]))
    }
    return this.#tensor
  }
  #grow(capacity: number): void {
    const { rows, dHead } = this
    const old = this.bounds
    const oldCap = this.capacity
    const bounds = new Float32Array(rows * 2 * dHead * capacity)
    for (let line = 0; line < rows * 2 * dHead; line++) {
      const side = Math.floor(line / dHead) % 2
      const base = line * capacity
      bounds.fill(side === 0 ? Infinity : -Infinity, base, base + capacity)
      if (oldCap > 0) bounds.set(old.subarray(line * oldCap, (line + 1) * oldCap), base)
    }
    this.bounds = bounds
    this.capacity = capacity
  }
  /** Frees the bounds tensor. */
  dispose(): void {
    this.#tensor?.dispose()
    this.#tensor = null
  }
}

/**
 * The chosen pages `[batch * nHeads * budget]`: on the native kernels the provider is called on the
 * state's own bounds (no bounds tensor and no tfjs op: at T = 8K a decode step takes 0.5-1 ms and the
 * op added about 0.1 ms to it), elsewhere the `pageSelect` op. The same pages either way.
 */
function selectPages(q: tf.Tensor4D, state: QuestState, pages: number, budget: number, share: boolean): Int32Array {
  const provider = activeKernels(tf.getBackend())?.provider
  if (provider?.name === 'native') {
    const [batch, nHeads, , dHead] = q.shape
    const heads = batch * nHeads
    const chosen = new Int32Array(heads * budget)
    const shape = { heads, group: heads / state.rows, pages, capacity: state.capacity, dHead, budget, share }
    provider.pageSelect(floatValues(q, 'quest page selection'), state.bounds, chosen, shape)
    return chosen
  }
  const chosenTensor = pageSelect(q, state.boundsTensor(), { pages, budget, share })
  const chosen = (readValuesSync(chosenTensor, 'quest page selection') as Int32Array).slice()
  chosenTensor.dispose()
  return chosen
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
          `a budget of ${config.tokenBudget} tokens (${pagesOf(pages, P)}) needs the prompt to span ${pages + 1} ` +
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
          `a budget of ${config.tokenBudget} tokens (${pagesOf(pages, P)}) needs ${pages + 1} full pages before ` +
            `the current one (prompt of ${input.cache.promptLength} tokens)`,
        )
      }
      // Scores and top-k in one kernel (native, WebAssembly or JavaScript): [b, H, pages] ascending.
      const scoresStart = performance.now()
      const chosen = selectPages(input.q, quest, current, pages, config.sharePages)
      const scoring = performance.now() - scoresStart
      // The chosen pages plus the current one as runs of slots per query head (slot s is position s).
      const heads = batch * nHeads
      const tileStarts = new Int32Array(heads + 1)
      const runs = new Int32Array(2 * heads * (pages + 1))
      let n = 0
      for (let head = 0; head < heads; head++) {
        let previous = -2
        for (let i = head * pages; i < (head + 1) * pages; i++) {
          const page = chosen[i] as number
          if (page === previous + 1) runs[n - 1] = (page + 1) * P
          else {
            runs[n++] = page * P
            runs[n++] = (page + 1) * P
          }
          previous = page
        }
        if (previous === current - 1) runs[n - 1] = position + 1
        else {
          runs[n++] = current * P
          runs[n++] = position + 1
        }
        tileStarts[head + 1] = n / 2
      }
      const selection = (performance.now() - boundsStart) / 1000 - pageBounds - scoring / 1000
      const reported = new Float64Array(batch * nHeads).fill(questSparsity(quest.promptLength, config.tokenBudget))
      return {
        slotSpans: { tileStarts, spans: runs.subarray(0, n) },
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
