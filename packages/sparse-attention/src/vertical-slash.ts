/**
 * Vertical-Slash (MInference, as configured by the Sparse Frontier study, [v2] A.1.2). Per query
 * head (paired with its GQA key/value head):
 *
 * 1. Estimate `A = softmax(scale * Q[n-W:] K^T)` for the last `W` queries (causal in the trailing
 *    `W x W` corner).
 * 2. Vertical scores `v[j] = sum_i A[i, j]`; the first `sinks` columns are forced (+Infinity);
 *    take the top `verticalSize`.
 * 3. Slash scores `sl[delta] = sum_i A[i, (n - W + i) - delta]` (sum along each query-key
 *    distance); distances `< local` are forced; take the top `slashSize`.
 * 4. Build the 64x64 block index (see `vertical-slash-index.ts`) and attend exactly over its
 *    cells (`maskMode: 'kernel'`, what the study ran: merged diagonal blocks plus columns as key
 *    spans per 64-row query block, on `@attnlab/core`'s `sparseAttention` kernel) or over the exact
 *    lines (`'exact'`, tile by tile of query rows); never a `[nHeads, T, T]` mask.
 *
 * @module
 */
import { ConfigError, type AttentionPrefillInput } from '@attnlab/core'
import { configSchema, enumField, integerField, parseConfig, schemaDefaults, type z } from '@attnlab/core/schema'
import { defineKernel, type PrefillPlan, type PrefillShape, type SparseAttentionKernel } from './kernel.ts'
import { lastWindowProbabilities } from './masked-attention.ts'
import { topK } from './select.ts'
import { mergeSpans } from './span-index.ts'
import type { QueryTile } from './tiled-attention.ts'
import {
  buildVerticalSlashIndex,
  type VerticalSlashIndex,
  type VerticalSlashMaskMode,
  type VerticalSlashRowBlock,
} from './vertical-slash-index.ts'

/**
 * The schema of {@link VerticalSlashConfig}: each parameter's meaning, range and study default,
 * declared once (the CLI's `--vertical-size`, `--window`, ... flags take their help and ranges from it).
 *
 * @category Vertical-Slash
 */
export const verticalSlashConfigSchema = configSchema({
  /** Number of vertical lines (key columns) per head, `V` (study: 512; Table 3 sets `V = S`). */
  verticalSize: integerField('vertical lines (key columns) per head V', { min: 1 }).default(512),
  /** Number of slash lines (query-key distances) per head, `S` (study: 512). */
  slashSize: integerField('slash lines (query-key distances) per head S', { min: 1 }).default(512),
  /** Estimation window: last `W` queries (study: 256; 512 for retrieval-heavy tasks). Clamped to `n`. */
  window: integerField('estimation window: the last W queries', { min: 1 }).default(256),
  /** Forced leading columns (attention sinks), counted in `verticalSize` (study: 4). */
  sinks: integerField('forced sink columns, counted in V', { min: 0 }).default(4),
  /** Forced distances `0..local-1`, counted in `slashSize` (study: 64). */
  local: integerField('forced local distances, counted in S', { min: 1 }).default(64),
  /** Kernel tile size `B` of the block index and accounting (study: 64). */
  kernelBlockSize: integerField('kernel tile size B of the block index', { min: 1 }).default(64),
  /** Which cells are computed: the kernel's blocks (`'kernel'`, default) or exact lines. */
  maskMode: enumField("computed cells: the kernel's 64x64 blocks (as the study ran) or the exact lines", [
    'kernel',
    'exact',
  ] as const satisfies readonly VerticalSlashMaskMode[]).default('kernel'),
})

/**
 * Vertical-Slash parameters (see {@link verticalSlashConfigSchema} for each one).
 *
 * @category Vertical-Slash
 */
export type VerticalSlashConfig = Readonly<z.output<typeof verticalSlashConfigSchema>>

/**
 * The study's Vertical-Slash defaults (`configs/attention/vertical_and_slash.yaml` with the
 * paper's prefix 4 / local 64): `V = S = 512`, `W = 256`, 64x64 kernel mask.
 *
 * @category Vertical-Slash
 */
export function defaultVerticalSlashConfig(): VerticalSlashConfig {
  return schemaDefaults(verticalSlashConfigSchema, 'vertical-slash')
}

/**
 * Named Vertical-Slash presets: `study` (the defaults), `retrieval` (window 512, as the study
 * used for Ruler NIAH and Story Retrieval), `minference` (the original MInference forcing:
 * last 64 queries, 30 sinks, 100 local distances).
 *
 * @category Vertical-Slash
 */
export const VERTICAL_SLASH_PRESETS: Readonly<
  Record<'study' | 'retrieval' | 'minference', Readonly<VerticalSlashConfig>>
> = Object.freeze({
  study: Object.freeze(defaultVerticalSlashConfig()),
  retrieval: Object.freeze({ ...defaultVerticalSlashConfig(), window: 512 }),
  minference: Object.freeze({ ...defaultVerticalSlashConfig(), window: 64, sinks: 30, local: 100 }),
})

/**
 * Resolves and validates a Vertical-Slash configuration.
 *
 * @param overrides - parameters to change from {@link defaultVerticalSlashConfig}
 * @returns the frozen configuration
 * @throws `ConfigError` (`@attnlab/core`) for an unknown parameter, a non-integer or out-of-range value,
 *   `verticalSize < sinks` or `slashSize < local` (forced lines count toward the budget)
 * @category Vertical-Slash
 */
export function resolveVerticalSlashConfig(overrides?: Partial<VerticalSlashConfig>): Readonly<VerticalSlashConfig> {
  const c = parseConfig(verticalSlashConfigSchema, overrides === undefined ? {} : overrides, 'vertical-slash')
  if (c.verticalSize < c.sinks) {
    throw new ConfigError(
      'verticalSize',
      `${c.verticalSize} must be >= sinks (${c.sinks}): the forced sink columns count toward the budget`,
    )
  }
  if (c.slashSize < c.local) {
    throw new ConfigError(
      'slashSize',
      `${c.slashSize} must be >= local (${c.local}): the forced local distances count toward the budget`,
    )
  }
  return Object.freeze(c)
}

/**
 * Vertical and slash scores of one head from the window probabilities.
 *
 * @param probabilities - `[batch * nHeads, W, n]` window probabilities
 * @param head - flat index `b * nHeads + h`
 * @returns sums over the window: per key (`vertical`, length `n`) and per distance (`slash`, length `n`)
 */
export function windowLineScores(
  probabilities: Float32Array,
  head: number,
  window: number,
  length: number,
): { vertical: Float64Array; slash: Float64Array } {
  const vertical = new Float64Array(length)
  const slash = new Float64Array(length)
  const base = head * window * length
  for (let i = 0; i < window; i++) {
    const position = length - window + i
    const row = base + i * length
    for (let j = 0; j <= position; j++) {
      const p = probabilities[row + j] as number
      vertical[j] = (vertical[j] as number) + p
      slash[position - j] = (slash[position - j] as number) + p
    }
  }
  return { vertical, slash }
}

/** Selected lines of one head, with forcing applied after any sizing. */
export function selectLines(
  vertical: Float64Array,
  slash: Float64Array,
  verticalCount: number,
  slashCount: number,
  sinks: number,
  local: number,
): { verticals: number[]; slashes: number[] } {
  const length = vertical.length
  const v = Float64Array.from(vertical)
  const s = Float64Array.from(slash)
  for (let j = 0; j < Math.min(sinks, length); j++) v[j] = Infinity
  for (let d = 0; d < Math.min(local, length); d++) s[d] = Infinity
  return { verticals: topK(v, Math.min(verticalCount, length)), slashes: topK(s, Math.min(slashCount, length)) }
}

/** One head's selection, kept compactly: its lines and their block index. */
interface HeadLines {
  readonly verticals: readonly number[]
  readonly slashes: readonly number[]
  readonly index: VerticalSlashIndex
}

/**
 * Query tiles of one head's lines: in `'kernel'` mode the index's key blocks and columns of each
 * query block (row `i` computes those `<= i`); in `'exact'` mode the selected columns and
 * diagonals themselves.
 */
function lineTile(lines: HeadLines, mode: VerticalSlashMaskMode, start: number, stop: number): QueryTile {
  const n = lines.index.length
  const used = new Uint8Array(n)
  const rows = stop - start
  if (mode === 'exact') {
    const isVertical = new Uint8Array(n)
    const isSlash = new Uint8Array(n)
    for (const j of lines.verticals) if (j < stop) used[j] = isVertical[j] = 1
    for (const d of lines.slashes) {
      isSlash[d] = 1
      for (let i = Math.max(start, d); i < stop; i++) used[i - d] = 1
    }
    const keys = keysOf(used)
    const allowed = new Uint8Array(rows * keys.length)
    for (let i = start; i < stop; i++) {
      for (let c = 0; c < keys.length; c++) {
        const j = keys[c] as number
        if (j <= i && (isVertical[j] || isSlash[i - j])) allowed[(i - start) * keys.length + c] = 1
      }
    }
    return { keys, allowed }
  }
  const B = lines.index.blockSize
  const first = Math.floor(start / B)
  const last = Math.floor((stop - 1) / B)
  const member = new Uint8Array((last - first + 1) * n) // [query block - first, key]
  for (let m = first; m <= last; m++) {
    const rowBlock = lines.index.rowBlocks[m] as VerticalSlashRowBlock
    const rowStop = Math.min(n, stop, (m + 1) * B)
    for (const blockStart of rowBlock.blockStarts) {
      for (let j = Math.max(0, blockStart); j < Math.min(blockStart + B, rowStop); j++) {
        member[(m - first) * n + j] = 1
        used[j] = 1
      }
    }
    for (const c of rowBlock.columns) {
      if (c >= rowStop) continue
      member[(m - first) * n + c] = 1
      used[c] = 1
    }
  }
  const keys = keysOf(used)
  const allowed = new Uint8Array(rows * keys.length)
  for (let i = start; i < stop; i++) {
    const m = Math.floor(i / B) - first
    for (let c = 0; c < keys.length; c++) {
      const j = keys[c] as number
      if (j <= i && member[m * n + j]) allowed[(i - start) * keys.length + c] = 1
    }
  }
  return { keys, allowed }
}

/**
 * Key spans of query block `m` in `'kernel'` mode: the index's key blocks and columns, clipped to
 * the block's last row, sorted and merged (the kernel applies the causal mask inside them).
 */
function lineSpans(lines: HeadLines, m: number): number[] {
  const { blockSize: B, length: n } = lines.index
  const rowBlock = lines.index.rowBlocks[m] as VerticalSlashRowBlock
  const pairs: number[] = []
  for (const start of rowBlock.blockStarts) pairs.push(start, start + B)
  for (const c of rowBlock.columns) pairs.push(c, c + 1)
  return mergeSpans(pairs, Math.min(n, (m + 1) * B))
}

function keysOf(used: Uint8Array): Int32Array {
  let count = 0
  for (const u of used) count += u
  const keys = new Int32Array(count)
  let c = 0
  for (let j = 0; j < used.length; j++) if (used[j]) keys[c++] = j
  return keys
}

/** Accumulates one head's lines into a plan under construction (compactly: lines and block index per head). */
export class LinePlanBuilder {
  readonly reported: Float64Array
  private readonly heads: HeadLines[] = []
  private verticalTotal = 0
  private slashTotal = 0
  private blockTotal = 0
  private columnTotal = 0
  constructor(
    private readonly shape: PrefillShape,
    private readonly kernelBlockSize: number,
    private readonly maskMode: VerticalSlashMaskMode,
  ) {
    this.reported = new Float64Array(shape.batch * shape.nHeads)
  }
  /** Seconds spent building block indexes (in {@link LinePlanBuilder.add}). */
  indexSeconds = 0
  add(head: number, verticals: number[], slashes: number[]): void {
    const n = this.shape.length
    const start = performance.now()
    const index = buildVerticalSlashIndex(verticals, slashes, n, this.kernelBlockSize)
    this.indexSeconds += (performance.now() - start) / 1000
    this.heads[head] = { verticals, slashes, index }
    this.reported[head] = index.reportedSparsity
    this.verticalTotal += verticals.length
    this.slashTotal += slashes.length
    this.blockTotal += index.blockCount
    this.columnTotal += index.columnCount
  }
  plan(extra: Record<string, number> = {}, steps: Record<string, number> = {}): PrefillPlan {
    const heads = Math.max(1, this.heads.length)
    const mode = this.maskMode
    const lines = this.heads
    const selection =
      mode === 'kernel'
        ? { spans: (head: number, tile: number) => lineSpans(lines[head] as HeadLines, tile) }
        : {
            tiles: (head: number, start: number, stop: number) => lineTile(lines[head] as HeadLines, mode, start, stop),
          }
    return {
      ...selection,
      steps: { ...steps, index: this.indexSeconds },
      tileRows: mode === 'kernel' ? this.kernelBlockSize : 32,
      reported: this.reported,
      extra: {
        verticals: this.verticalTotal / heads,
        slashes: this.slashTotal / heads,
        kernelBlocks: this.blockTotal / heads,
        kernelColumns: this.columnTotal / heads,
        ...extra,
      },
    }
  }
}

function verticalSlashPlan(
  config: Readonly<VerticalSlashConfig>,
  input: AttentionPrefillInput,
  shape: PrefillShape,
): PrefillPlan {
  const { batch, nHeads, length } = shape
  const window = Math.min(config.window, length)
  const estimateStart = performance.now()
  const probabilities = lastWindowProbabilities(input.q, input.k, window, input.scale, 'vertical-slash estimation')
  const estimate = (performance.now() - estimateStart) / 1000
  const builder = new LinePlanBuilder(shape, config.kernelBlockSize, config.maskMode)
  const selectionStart = performance.now()
  for (let head = 0; head < batch * nHeads; head++) {
    const { vertical, slash } = windowLineScores(probabilities, head, window, length)
    const { verticals, slashes } = selectLines(
      vertical,
      slash,
      config.verticalSize,
      config.slashSize,
      config.sinks,
      config.local,
    )
    builder.add(head, verticals, slashes)
  }
  const selection = (performance.now() - selectionStart) / 1000 - builder.indexSeconds
  return builder.plan({ window }, { estimate, selection })
}

/**
 * The Vertical-Slash prefill kernel (decoding stays dense on the full cache).
 *
 * @param overrides - parameters to change from {@link defaultVerticalSlashConfig}
 * @returns an attention kernel for any attnlab model; its results carry `extra.verticals`,
 *   `slashes`, `kernelBlocks`, `kernelColumns` (means per head), `window`, `exactSparsity`,
 *   `reportedSparsity` (64x64 kernel accounting)
 * @throws `ConfigError` (`@attnlab/core`) on invalid parameters (see {@link resolveVerticalSlashConfig})
 * @example
 * ```ts
 * const kernel = verticalSlash({ verticalSize: 164, slashSize: 164 }) // about 0.95 at 16K (Table 3)
 * const model = createModel(config, { attention: kernel })
 * ```
 * @category Vertical-Slash
 */
export function verticalSlash(
  overrides?: Partial<VerticalSlashConfig>,
): SparseAttentionKernel<Readonly<VerticalSlashConfig>> {
  const config = resolveVerticalSlashConfig(overrides)
  return defineKernel({
    method: 'vertical-slash',
    phases: ['prefill'],
    config,
    planner: (input, shape) => verticalSlashPlan(config, input, shape),
  })
}
