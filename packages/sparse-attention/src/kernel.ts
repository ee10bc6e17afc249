/**
 * How the methods plug into `@attnlab/core`'s attention-kernel contract. Every method is a
 * {@link SparseAttentionKernel}: an `AttentionKernel` (usable by any attnlab model) that also
 * returns, on request, the boolean mask of the query-key pairs it computed and both sparsities
 * (the exact one from the mask and the figure the study reports).
 *
 * A prefill method is a *planner* (selection in JavaScript from scores read back from tfjs)
 * followed by softmax attention restricted to the planned pairs, computed tile by tile of query
 * rows from the plan's compact form (memory linear in `T`); a decode method is a *strategy*
 * that may compact the KV cache after the prefill (eviction) and picks, at every step, which
 * cache slots each query head reads.
 *
 * @module
 */
import * as tf from '@tensorflow/tfjs-core'
import {
  assertShape,
  type AttentionContext,
  type AttentionDecodeInput,
  type AttentionKernel,
  type AttentionPrefillInput,
  type AttentionResult,
  causalPairs,
  ConfigError,
  denseAttention,
  InvalidArgumentError,
  type LayerKVCache,
  ShapeError,
  TooLargeError,
} from '@attnlab/core'
import { sparseAttention } from '@attnlab/core/kernels'
import { attendWithMask } from './masked-attention.ts'
import { buildSpanIndex, tilesFromSpans, type SpanSource } from './span-index.ts'
import {
  attendByTiles,
  causalTile,
  MAX_TYPED_ARRAY_LENGTH,
  maskFromTiles,
  tiledAttentionBytes,
  tilesFromMask,
  type TileSource,
} from './tiled-attention.ts'

/**
 * The method names of this package (`dense` is the reference).
 *
 * @category Kernels
 */
export type SparseMethodName =
  | 'dense'
  | 'vertical-slash'
  | 'flexprefill'
  | 'block-sparse'
  | 'snapkv'
  | 'ada-snapkv'
  | 'quest'

/**
 * The two phases of generation. Prefill methods sparsify the prompt's attention and decode
 * densely; decode methods prefill densely and sparsify each generated token's attention.
 *
 * @category Kernels
 */
export type AttentionPhase = 'prefill' | 'decode'

/**
 * The two sparsities every method reports ([v2] §3): fractions in
 * `[0, 1]` of causal query-key pairs *not* computed.
 *
 * @category Accounting
 */
export interface SparsityReport {
  /** Exact: `1 - computed / causal` from the method's own mask, averaged over batch and heads. */
  readonly exact: number
  /**
   * As the study reports it: 64x64 kernel accounting (Vertical-Slash, FlexPrefill), the analytic
   * block formula (Block-Sparse), `1 - C/n` (SnapKV), `1 - kept/(n Hkv)` (Ada-SnapKV),
   * `1 - budget/n` (Quest), 0 for dense phases. Averaged over batch and heads. Kernel accounting
   * may go below 0 for very short sequences (whole 64x64 blocks are counted).
   */
  readonly reported: number
}

/**
 * Per-head sparsities, `[batch * nHeads]` (index `b * nHeads + h`).
 *
 * @category Accounting
 */
export interface HeadSparsity {
  /** Exact sparsity of each head. */
  readonly exact: Float64Array
  /** Reported (study) sparsity of each head. */
  readonly reported: Float64Array
}

/**
 * Wall-clock seconds (`performance.now()`) of a kernel call's two parts: the method's importance
 * estimation and selection (Vertical-Slash's and FlexPrefill's last-window estimate, Block-Sparse's
 * block pooling, Quest's page scores; SnapKV's observation-window scores run in `afterPrefill`,
 * timed by the sequence API) and the attention itself. Reading results back from tfjs (`dataSync`)
 * counts in the part that reads them.
 *
 * @category Kernels
 */
export interface AttentionTiming {
  /** Seconds of the estimation and selection (the planner or decode strategy). */
  readonly estimationSeconds: number
  /** Seconds of the attention over the selected pairs (output tensor ready, `dataSync` not included). */
  readonly attentionSeconds: number
  /**
   * The estimation's steps apart, in seconds (each a part of `estimationSeconds`): `estimate` (the
   * last-window attention of Vertical-Slash and FlexPrefill), `pooling` (Block-Sparse's and
   * block scores; FlexPrefill's block level counts them in `selection`), `pageBounds` (Quest's per-page key min/max
   * updates) and `pageScores` (Quest's upper bounds), `selection` (top-k, coverage) and `index`
   * (building the method's block index or key spans). Only the steps a method has are present.
   */
  readonly steps: Readonly<Record<string, number>>
}

/**
 * A prefill's result with its mask and sparsities.
 *
 * @category Kernels
 */
export interface MaskedPrefillResult extends AttentionResult {
  /**
   * 1 where the pair was computed, `[batch, nHeads, T, T]` row-major (query-major). Built on first
   * read from the method's compact selection (512 MB at 8 heads and T = 8192): leave it unread at
   * long contexts.
   *
   * @throws `TooLargeError` (`@attnlab/core`) on read when `batch * nHeads * T * T` exceeds 2^32 entries
   */
  readonly mask: Uint8Array
  /** `[batch, nHeads, T, T]`. */
  readonly maskShape: readonly [number, number, number, number]
  /** Both sparsities, averaged over batch and heads. */
  readonly sparsity: SparsityReport
  /** Both sparsities per head. */
  readonly headSparsity: HeadSparsity
  /** Seconds of the estimation and of the attention. */
  readonly timing: AttentionTiming
}

/**
 * A decode step's result with its mask (over absolute key positions) and sparsities.
 *
 * @category Kernels
 */
export interface MaskedDecodeResult extends AttentionResult {
  /**
   * 1 where the new token's query read the key at that absolute position, `[batch, nHeads, position + 1]`;
   * built on first read from the strategy's selection (a generation step that never reads it skips the loop).
   */
  readonly mask: Uint8Array
  /** `[batch, nHeads, position + 1]`. */
  readonly maskShape: readonly [number, number, number]
  /** Both sparsities, averaged over batch and heads (exact: over the `position + 1` causal keys). */
  readonly sparsity: SparsityReport
  /** Both sparsities per head. */
  readonly headSparsity: HeadSparsity
  /** Seconds of the slot selection (estimation) and of the attention. */
  readonly timing: AttentionTiming
}

/**
 * An attention kernel of this package: the core contract plus masks and sparsity reports.
 * `prefill`/`decode` are `prefillWithMask`/`decodeWithMask` (the results carry the extra
 * fields; `extra` holds `exactSparsity`, `reportedSparsity` and method-specific numbers).
 *
 * @typeParam C - the method's resolved (frozen) configuration
 * @category Kernels
 */
export interface SparseAttentionKernel<C = unknown> extends AttentionKernel {
  /** The method (or `prefill+decode` for a {@link combine}d kernel). */
  readonly method: string
  /** The phases this kernel sparsifies (empty for dense). */
  readonly phases: readonly AttentionPhase[]
  /** The resolved, frozen configuration. */
  readonly config: C
  /**
   * The prefill with its mask.
   *
   * @throws `ShapeError` (`@attnlab/core`) on inconsistent input shapes; method-specific errors (see each factory)
   */
  prefillWithMask(input: AttentionPrefillInput, context?: AttentionContext): MaskedPrefillResult
  /**
   * One decode step with its mask.
   *
   * @throws `ShapeError` (`@attnlab/core`) when the cache does not match the query or position
   */
  decodeWithMask(input: AttentionDecodeInput, context?: AttentionContext): MaskedDecodeResult
}

/**
 * What a prefill planner decides for a whole batch.
 *
 * @category Kernels
 */
export interface PrefillPlan {
  /**
   * 1 where the pair is computed, `[batch, nHeads, T, T]`; must be causal and cover every row.
   * Give this or {@link PrefillPlan.tiles} (the compact form, needed for long contexts).
   */
  readonly allowed?: Uint8Array
  /**
   * The computed pairs tile by tile, from the method's compact index (see `QueryTile`): what the
   * attention reads when given; `allowed` is then built only if a caller reads the result's mask.
   */
  readonly tiles?: TileSource
  /**
   * The computed pairs as key spans per tile of `tileRows` rows (row `i` reads the spans' keys
   * `<= i`): when given, the attention runs on `@attnlab/core`'s `sparseAttention` kernel (native,
   * WebAssembly or JavaScript, online softmax) and `tiles` defaults to the spans' tiles.
   */
  readonly spans?: SpanSource
  /** Seconds of the planner's steps (see {@link AttentionTiming.steps}). */
  readonly steps?: Readonly<Record<string, number>>
  /** Query rows per tile (default 64; the dense planner 256). */
  readonly tileRows?: number
  /** The study's sparsity per head, `[batch * nHeads]`. */
  readonly reported: Float64Array
  /** Method-specific numbers (averages over batch and heads). */
  readonly extra?: Readonly<Record<string, number>>
  /**
   * True only when the plan is every causal pair (the {@link densePlanner}): under hooks the output
   * then comes from `@attnlab/core`'s `denseAttention`, attnlab's one dense kernel, instead of
   * the masked attention.
   */
  readonly everyCausalPair?: boolean
}

/**
 * A prefill method's selection step: reads the input (it may run tfjs ops and read them back)
 * and returns the pairs to compute (as tiles, or a full mask).
 *
 * @category Kernels
 */
export type PrefillPlanner = (input: AttentionPrefillInput, shape: PrefillShape) => PrefillPlan

/**
 * Validated dimensions of a prefill input.
 *
 * @category Kernels
 */
export interface PrefillShape {
  /** Batch size. */
  readonly batch: number
  /** Query heads `H`. */
  readonly nHeads: number
  /** Key/value heads `Hkv` (divides `H`). */
  readonly nKvHeads: number
  /** Sequence length `T`. */
  readonly length: number
  /** Query/key width. */
  readonly dHead: number
  /** Value width. */
  readonly dValue: number
}

/**
 * What a decode strategy picks for one step.
 *
 * @category Kernels
 */
export interface DecodeSelection {
  /**
   * 1 where query head `h` reads cache slot `s`, `[batch, nHeads, stored]`. Give this or
   * {@link DecodeSelection.slotSpans} (the compact form, which skips every `O(nHeads x stored)` loop of a step).
   */
  readonly allowedSlots?: Uint8Array
  /**
   * The slots each query head reads as runs: head `b * nHeads + h` reads slots
   * `[spans[2 r], spans[2 r + 1])` for `r` in `tileStarts[head] .. tileStarts[head + 1] - 1` (ascending,
   * disjoint, each head at least one slot). Only for a full cache (slot `s` holds position `s`, no
   * `slotPositions`): Quest and dense decoding.
   */
  readonly slotSpans?: DecodeSlotSpans
  /**
   * Absolute position held by each slot per KV head, `[batch, nKvHeads, stored]`; `-1` for padding.
   * Absent: the full cache (slot `s` holds position `s`, `stored = position + 1`).
   */
  readonly slotPositions?: Int32Array
  /** The study's sparsity per head, `[batch * nHeads]`. */
  readonly reported: Float64Array
  /** Method-specific numbers. */
  readonly extra?: Readonly<Record<string, number>>
  /**
   * True only when every head reads every slot of a full cache (the {@link denseDecodeStrategy}):
   * under hooks the output then comes from `@attnlab/core`'s `denseAttention`.
   */
  readonly everySlot?: boolean
  /** Seconds of the strategy's steps (see {@link AttentionTiming.steps}). */
  readonly steps?: Readonly<Record<string, number>>
}

/**
 * Runs of cache slots per query head (see {@link DecodeSelection.slotSpans}): `tileStarts`
 * `[batch * nHeads + 1]` from 0, `spans` `[2 * runs]` half-open slot ranges.
 *
 * @category Kernels
 */
export interface DecodeSlotSpans {
  /** `[batch * nHeads + 1]`, non-decreasing from 0: head `u` owns runs `tileStarts[u] .. tileStarts[u + 1] - 1`. */
  readonly tileStarts: Int32Array
  /** `[2 * runs]`: half-open slot ranges `[spans[2 r], spans[2 r + 1])`. */
  readonly spans: Int32Array
}

/**
 * A decode method: optional cache compaction after the prefill, and a per-step slot choice.
 *
 * @category Kernels
 */
export interface DecodeStrategy {
  /** Compacts or annotates the cache after a generation prefill (see `AttentionKernel.afterPrefill`). */
  afterPrefill?(input: AttentionPrefillInput, cache: LayerKVCache): void
  /** Picks the slots of this step (the cache already holds the new token). */
  select(input: AttentionDecodeInput, shape: DecodeShape): DecodeSelection
}

/**
 * Validated dimensions of a decode input.
 *
 * @category Kernels
 */
export interface DecodeShape {
  /** Batch size. */
  readonly batch: number
  /** Query heads `H`. */
  readonly nHeads: number
  /** Key/value heads `Hkv` (divides `H`). */
  readonly nKvHeads: number
  /** Entries stored in the cache (after any eviction), including the new token. */
  readonly stored: number
  /** Query/key width. */
  readonly dHead: number
  /** Value width. */
  readonly dValue: number
  /** Absolute position of the new token. */
  readonly position: number
}

const NO_CONTEXT: AttentionContext = Object.freeze({ hooks: Object.freeze({}), needsPattern: false })

/**
 * Checks a prefill input's shapes: `q [b, H, T, d]`, `k [b, Hkv, T, d]`, `v [b, Hkv, T, dv]`,
 * `H` a multiple of `Hkv`, `T >= 1`, finite scale.
 *
 * @throws `ShapeError` (`@attnlab/core`) naming the offending tensor
 * @category Kernels
 */
export function checkPrefillInput(input: AttentionPrefillInput): PrefillShape {
  const dims = assertShape(input.q, ['batch', 'nHeads', 'pos', 'dHead'], 'q')
  assertShape(input.k, ['batch', 'nKvHeads', 'pos', 'dHead'], 'k', dims)
  assertShape(input.v, ['batch', 'nKvHeads', 'pos', 'dValue'], 'v', dims)
  const shape: PrefillShape = {
    batch: dims.batch as number,
    nHeads: dims.nHeads as number,
    nKvHeads: dims.nKvHeads as number,
    length: dims.pos as number,
    dHead: dims.dHead as number,
    dValue: dims.dValue as number,
  }
  checkGroups(shape.nHeads, shape.nKvHeads)
  if (shape.length < 1)
    throw new ShapeError(`q has ${shape.length} positions but at least 1 is needed`, { length: shape.length })
  if (!Number.isFinite(input.scale)) throw new ConfigError('scale', `must be a finite number, got ${input.scale}`)
  return shape
}

function checkGroups(nHeads: number, nKvHeads: number): void {
  if (nKvHeads < 1 || nHeads % nKvHeads !== 0) {
    throw new ShapeError(
      `nHeads (${nHeads}) must be a positive multiple of nKvHeads (${nKvHeads}) for grouped-query attention`,
      {
        nHeads,
        nKvHeads,
      },
    )
  }
}

/**
 * Checks a decode input: `q [b, H, 1, d]`, cache keys `[b, Hkv, stored, d]` and values
 * `[b, Hkv, stored, dv]` present, `H` a multiple of `Hkv`.
 *
 * @throws `ShapeError` (`@attnlab/core`) naming the offending tensor
 * @category Kernels
 */
export function checkDecodeInput(input: AttentionDecodeInput): DecodeShape {
  const { keys, values } = input.cache
  if (keys === null || values === null) {
    throw new ShapeError('decode needs a cache holding at least the new token, but cache.keys/values are null')
  }
  const dims = assertShape(input.q, ['batch', 'nHeads', 1, 'dHead'], 'q')
  assertShape(keys, ['batch', 'nKvHeads', 'stored', 'dHead'], 'cache.keys', dims)
  assertShape(values, ['batch', 'nKvHeads', 'stored', 'dValue'], 'cache.values', dims)
  const shape: DecodeShape = {
    batch: dims.batch as number,
    nHeads: dims.nHeads as number,
    nKvHeads: dims.nKvHeads as number,
    stored: dims.stored as number,
    dHead: dims.dHead as number,
    dValue: dims.dValue as number,
    position: input.position,
  }
  checkGroups(shape.nHeads, shape.nKvHeads)
  if (!Number.isSafeInteger(input.position) || input.position < 0) {
    throw new ShapeError(`position must be a non-negative integer, got ${input.position}`)
  }
  if (shape.stored < 1 || shape.stored > input.position + 1) {
    throw new ShapeError(
      `cache holds ${shape.stored} entries but the new token at position ${input.position} allows ` +
        `1..${input.position + 1}`,
      { stored: shape.stored, position: input.position },
    )
  }
  if (!Number.isFinite(input.scale)) throw new ConfigError('scale', `must be a finite number, got ${input.scale}`)
  return shape
}

function mean(values: Float64Array): number {
  let sum = 0
  for (const x of values) sum += x
  return values.length === 0 ? 0 : sum / values.length
}

/** Seconds since `start` (a `performance.now()` reading). */
function secondsSince(start: number): number {
  return (performance.now() - start) / 1000
}

/** Default query rows per tile of a plan without `tileRows`. */
const DEFAULT_TILE_ROWS = 64

/**
 * Bytes the tfjs backend may still allocate: the wasm backend's heap is capped at 4 GiB (2^32
 * bytes) and holds every tensor; other backends report no cap here (`Infinity`).
 *
 * @returns free bytes of the backend, or `Infinity` when it has no known cap
 * @category Kernels
 */
export function backendBytesAvailable(): number {
  if (tf.getBackend() !== 'wasm') return Number.POSITIVE_INFINITY
  return 2 ** 32 - tf.memory().numBytes
}

/**
 * Checks, before any work, that a prefill fits: the tiled attention's work space (memory linear in
 * `T`, see `tiledAttentionBytes`) or, when hooks or `needsPattern` need the dense scores and
 * pattern, three `[batch, nHeads, T, T]` float32 tensors (scores, mask bias, probabilities), each
 * at most 2^32 elements, against {@link backendBytesAvailable}.
 *
 * @param shape - the validated input shape
 * @param materialised - true when the dense `[batch, nHeads, T, T]` tensors will be built
 * @param tileRows - query rows per tile of the tiled path
 * @throws `TooLargeError` (`@attnlab/core`) naming the bytes needed, the bytes available and the dimension
 * @category Kernels
 */
export function checkPrefillFits(shape: PrefillShape, materialised: boolean, tileRows = 256): void {
  const { batch, nHeads, length } = shape
  const available = backendBytesAvailable()
  const dims = `[batch, nHeads, T, T] = [${batch}, ${nHeads}, ${length}, ${length}]`
  if (materialised) {
    const elements = batch * nHeads * length * length
    const bytes = 3 * 4 * elements
    if (elements > MAX_TYPED_ARRAY_LENGTH || bytes > available) {
      const limit =
        elements > MAX_TYPED_ARRAY_LENGTH ? `one tensor holds at most ${MAX_TYPED_ARRAY_LENGTH} elements` : ''
      throw new TooLargeError(
        `attention hooks (hook_attn_scores / hook_pattern) need the dense scores, bias and pattern ${dims}: ` +
          `${bytes} bytes, but ${limit || `the ${tf.getBackend()} backend has ${available} bytes free`}; ` +
          'run without those hooks (the tiled path needs memory linear in T) or on a shorter T',
        { bytes, available, dimension: 'T', T: length },
      )
    }
    return
  }
  const bytes = tiledAttentionBytes(shape, tileRows)
  if (bytes > available) {
    throw new TooLargeError(
      `tiled attention over T = ${length} (${batch} x ${nHeads} heads, dHead ${shape.dHead}) needs about ${bytes} ` +
        `bytes but the ${tf.getBackend()} backend has ${available} bytes free; use a shorter T`,
      { bytes, available, dimension: 'T', T: length },
    )
  }
}

/**
 * Runs a prefill planner and the attention over its selection; counts pairs and sparsities.
 * Without hooks (and `needsPattern` false) the output comes from `@attnlab/core`'s
 * `sparseAttention` kernel over the plan's key spans (native, WebAssembly or JavaScript, online
 * softmax), or for plans without spans (Vertical-Slash's exact lines) from the tiled attention
 * (`attendByTiles`); both use memory linear in `T`, never an `[nHeads, T, T]` tensor; with them, the dense
 * scores and pattern are built for the hooks (`attendWithMask`, or `denseAttention` for a dense plan).
 *
 * @throws `TooLargeError` (`@attnlab/core`) before the planner runs when the request cannot fit
 *   ({@link checkPrefillFits}); `ShapeError` (`@attnlab/core`) on inconsistent input shapes
 * @category Kernels
 */
export function runPrefill(
  planner: PrefillPlanner,
  input: AttentionPrefillInput,
  context: AttentionContext = NO_CONTEXT,
): MaskedPrefillResult {
  const shape = checkPrefillInput(input)
  const { batch, nHeads, length } = shape
  const hooked = context.needsPattern || context.hooks.attnScores !== undefined || context.hooks.pattern !== undefined
  checkPrefillFits(shape, hooked)
  const estimationStart = performance.now()
  const plan = planner(input, shape)
  const estimationSeconds = secondsSince(estimationStart)
  const rowSize = length * length
  if (plan.allowed !== undefined && plan.allowed.length !== batch * nHeads * rowSize) {
    throw new InvalidArgumentError(
      `planner returned a mask of ${plan.allowed.length} entries, expected ${batch * nHeads * rowSize}`,
    )
  }
  if (plan.allowed === undefined && plan.tiles === undefined && plan.spans === undefined)
    throw new InvalidArgumentError('internal: the planner returned neither allowed, tiles nor spans')
  const tileRows = plan.tileRows ?? DEFAULT_TILE_ROWS
  const tiles =
    plan.tiles ??
    (plan.spans !== undefined
      ? tilesFromSpans(plan.spans, tileRows)
      : tilesFromMask(plan.allowed as Uint8Array, length))
  let built: Uint8Array | undefined = plan.allowed
  const maskOf = (): Uint8Array => {
    built ??= maskFromTiles(tiles, batch * nHeads, length, tileRows)
    return built
  }
  const causal = causalPairs(length, length)
  const exact = new Float64Array(batch * nHeads)
  let computedPairs = 0
  const attentionStart = performance.now()
  let z: tf.Tensor4D
  if (hooked) {
    const allowed = maskOf()
    for (let bh = 0; bh < batch * nHeads; bh++) {
      let count = 0
      const base = bh * rowSize
      for (let i = 0; i < length; i++) {
        const row = base + i * length
        for (let j = 0; j <= i; j++) count += allowed[row + j] as number
        for (let j = i + 1; j < length; j++) {
          if (allowed[row + j]) throw new InvalidArgumentError(`internal: non-causal pair (${i}, ${j}) in the plan`)
        }
      }
      exact[bh] = 1 - count / causal
      computedPairs += count
    }
    // q, k, v without the packed projections: dense() stays the stock-op computation of the masked path.
    const unpacked = { q: input.q, k: input.k, v: input.v, scale: input.scale, layer: input.layer }
    z =
      plan.everyCausalPair === true
        ? denseAttention.prefill(unpacked, context).z
        : attendWithMask(input.q, input.k, input.v, allowed, input.scale, context)
  } else if (plan.spans !== undefined) {
    const { index, computed } = buildSpanIndex(plan.spans, batch * nHeads, length, tileRows)
    z = sparseAttention(input.q, input.k, input.v, index, { scale: input.scale })
    for (let bh = 0; bh < batch * nHeads; bh++) {
      const count = computed[bh] as number
      exact[bh] = 1 - count / causal
      computedPairs += count
    }
  } else {
    const tiled = attendByTiles(input.q, input.k, input.v, input.scale, tiles, tileRows)
    z = tiled.z
    for (let bh = 0; bh < batch * nHeads; bh++) {
      const count = tiled.counts.computed[bh] as number
      exact[bh] = 1 - count / causal
      computedPairs += count
    }
  }
  const attentionSeconds = secondsSince(attentionStart)
  const sparsity = { exact: mean(exact), reported: mean(plan.reported) }
  const result = {
    z,
    computedPairs,
    totalPairs: batch * nHeads * causal,
    extra: { exactSparsity: sparsity.exact, reportedSparsity: sparsity.reported, ...plan.extra },
    maskShape: [batch, nHeads, length, length] as const,
    sparsity,
    headSparsity: { exact, reported: plan.reported },
    timing: { estimationSeconds, attentionSeconds, steps: plan.steps ?? {} },
  }
  Object.defineProperty(result, 'mask', { enumerable: true, get: maskOf })
  return result as typeof result & { readonly mask: Uint8Array }
}

/** One row per head: the runs of allowed slots as key spans (the decode index of `sparseAttention`). */
function decodeSpans(allowedSlots: Uint8Array, heads: number, stored: number) {
  const tileStarts = new Int32Array(heads + 1)
  const pairs: number[] = []
  for (let head = 0; head < heads; head++) {
    const base = head * stored
    let s = 0
    while (s < stored) {
      while (s < stored && !allowedSlots[base + s]) s++
      if (s >= stored) break
      const start = s
      while (s < stored && allowedSlots[base + s]) s++
      pairs.push(start, s)
    }
    if (pairs.length / 2 === tileStarts[head]) {
      throw new InvalidArgumentError(`mask row (head ${head}) computes no key: softmax over an empty set`, { head })
    }
    tileStarts[head + 1] = pairs.length / 2
  }
  return { tileRows: 1, tileStarts, spans: Int32Array.from(pairs) }
}

/**
 * Runs a decode strategy's selection and the attention over the cache. Without hooks the
 * attention runs on `@attnlab/core`'s `sparseAttention` kernel over the runs of selected slots
 * (dense decode: every slot); when hooks are given or `needsPattern`, keys and values are
 * first laid out by absolute position (evicted positions hold zeros and are masked), so the
 * hooks see `[batch, nHeads, 1, position + 1]` tensors with TransformerLens semantics.
 *
 * @category Kernels
 */
export function runDecode(
  strategy: DecodeStrategy,
  input: AttentionDecodeInput,
  context: AttentionContext = NO_CONTEXT,
): MaskedDecodeResult {
  const shape = checkDecodeInput(input)
  const { batch, nHeads, nKvHeads, stored, position } = shape
  const estimationStart = performance.now()
  const selection = strategy.select(input, shape)
  const estimationSeconds = secondsSince(estimationStart)
  const attentionStart = performance.now()
  const heads = batch * nHeads
  const group = nHeads / nKvHeads
  const keyCount = position + 1
  const exact = new Float64Array(heads)
  let computedPairs = 0
  let identity = stored === keyCount
  let spans: DecodeSlotSpans
  let maskOf: () => Uint8Array
  const { slotPositions, slotSpans } = selection
  if (slotSpans !== undefined) {
    // The compact form: a full cache (slot s is position s), counts from the runs, the mask on first read.
    if (slotPositions !== undefined || stored !== keyCount) {
      throw new InvalidArgumentError(
        `internal: slotSpans need the full cache (${keyCount} slots for position ${position}, no slotPositions), ` +
          `got ${stored} slots${slotPositions === undefined ? '' : ' with slotPositions'}`,
      )
    }
    if (slotSpans.tileStarts.length !== heads + 1) {
      throw new InvalidArgumentError(
        `internal: slotSpans.tileStarts has ${slotSpans.tileStarts.length} entries, expected ${heads + 1}`,
      )
    }
    for (let head = 0; head < heads; head++) {
      let count = 0
      for (let r = slotSpans.tileStarts[head] as number; r < (slotSpans.tileStarts[head + 1] as number); r++) {
        count += (slotSpans.spans[2 * r + 1] as number) - (slotSpans.spans[2 * r] as number)
      }
      if (count <= 0) {
        throw new InvalidArgumentError(`mask row (head ${head}) computes no key: softmax over an empty set`, { head })
      }
      exact[head] = 1 - count / keyCount
      computedPairs += count
    }
    spans = slotSpans
    let built: Uint8Array | undefined
    maskOf = () => {
      if (built === undefined) {
        built = new Uint8Array(heads * keyCount)
        for (let head = 0; head < heads; head++) {
          for (let r = slotSpans.tileStarts[head] as number; r < (slotSpans.tileStarts[head + 1] as number); r++) {
            built.fill(
              1,
              head * keyCount + (slotSpans.spans[2 * r] as number),
              head * keyCount + (slotSpans.spans[2 * r + 1] as number),
            )
          }
        }
      }
      return built
    }
  } else {
    const allowedSlots = selection.allowedSlots
    if (allowedSlots === undefined || allowedSlots.length !== heads * stored) {
      const got =
        allowedSlots === undefined
          ? 'neither allowedSlots nor slotSpans'
          : `allowedSlots of ${allowedSlots.length} entries, expected ${heads * stored}`
      throw new InvalidArgumentError(`internal: the decode strategy returned ${got}`)
    }
    const positionOf = (bk: number, s: number): number =>
      slotPositions === undefined ? s : (slotPositions[bk * stored + s] as number)
    if (slotPositions !== undefined) {
      for (let bk = 0; bk < batch * nKvHeads; bk++) {
        for (let s = 0; s < stored; s++) {
          const p = slotPositions[bk * stored + s] as number
          if (p !== s) identity = false
          if (p > position)
            throw new InvalidArgumentError(`internal: slot ${s} holds position ${p} after the new token ${position}`)
        }
      }
    } else if (!identity) {
      throw new InvalidArgumentError(
        `internal: no slotPositions (the full cache) but ${stored} slots for the new token at position ${position}`,
      )
    }
    for (let b = 0; b < batch; b++) {
      for (let h = 0; h < nHeads; h++) {
        const bk = b * nKvHeads + Math.floor(h / group)
        let count = 0
        for (let s = 0; s < stored; s++) {
          if (!allowedSlots[(b * nHeads + h) * stored + s]) continue
          if (positionOf(bk, s) < 0) throw new InvalidArgumentError(`internal: head ${h} reads padding slot ${s}`)
          count++
        }
        exact[b * nHeads + h] = 1 - count / keyCount
        computedPairs += count
      }
    }
    spans = decodeSpans(allowedSlots, heads, stored)
    let built: Uint8Array | undefined
    maskOf = () => {
      if (built === undefined) {
        built = new Uint8Array(heads * keyCount)
        for (let b = 0; b < batch; b++) {
          for (let h = 0; h < nHeads; h++) {
            const bk = b * nKvHeads + Math.floor(h / group)
            for (let s = 0; s < stored; s++) {
              if (allowedSlots[(b * nHeads + h) * stored + s])
                built[(b * nHeads + h) * keyCount + positionOf(bk, s)] = 1
            }
          }
        }
      }
      return built
    }
  }
  const hooked = context.needsPattern || context.hooks.attnScores !== undefined || context.hooks.pattern !== undefined
  let z: tf.Tensor4D
  const { keys, values } = input.cache as { keys: tf.Tensor4D; values: tf.Tensor4D }
  if (!hooked) {
    z = sparseAttention(input.q, keys, values, { tileRows: 1, ...spans }, { scale: input.scale, causalOffset: stored })
  } else if (selection.everySlot === true) {
    z = denseAttention.decode(input, context).z
  } else if (identity) {
    // slot s holds position s: the mask over positions is the mask over slots
    z = attendWithMask(input.q, keys, values, maskOf(), input.scale, context)
  } else {
    // Lay keys/values out by absolute position: slotOf[p] (0 when p was evicted; masked anyway).
    const index = new Int32Array(batch * nKvHeads * keyCount)
    const present = new Float32Array(batch * nKvHeads * keyCount)
    const positions = slotPositions as Int32Array
    for (let bk = 0; bk < batch * nKvHeads; bk++) {
      for (let s = 0; s < stored; s++) {
        const p = positions[bk * stored + s] as number
        if (p < 0) continue
        index[bk * keyCount + p] = bk * stored + s
        present[bk * keyCount + p] = 1
      }
    }
    const [keysAbs, valuesAbs] = tf.tidy(() => {
      const flatIndex = tf.tensor1d(index, 'int32')
      const weight = tf.tensor4d(present, [batch, nKvHeads, keyCount, 1])
      const gatherAbs = (x: tf.Tensor4D): tf.Tensor4D =>
        tf.mul(
          tf.reshape(tf.gather(tf.reshape(x, [batch * nKvHeads * stored, x.shape[3]]), flatIndex), [
            batch,
            nKvHeads,
            keyCount,
            x.shape[3],
          ]),
          weight,
        ) as tf.Tensor4D
      return [gatherAbs(keys), gatherAbs(values)]
    })
    try {
      z = attendWithMask(input.q, keysAbs, valuesAbs, maskOf(), input.scale, context)
    } finally {
      keysAbs.dispose()
      valuesAbs.dispose()
    }
  }
  const attentionSeconds = secondsSince(attentionStart)
  const sparsity = { exact: mean(exact), reported: mean(selection.reported) }
  const result = {
    z,
    computedPairs,
    totalPairs: heads * keyCount,
    extra: { exactSparsity: sparsity.exact, reportedSparsity: sparsity.reported, ...selection.extra },
    maskShape: [batch, nHeads, keyCount] as const,
    sparsity,
    headSparsity: { exact, reported: selection.reported },
    timing: { estimationSeconds, attentionSeconds, steps: selection.steps ?? {} },
  }
  // built on first read (an O(nHeads x position) loop a generation step does not need)
  Object.defineProperty(result, 'mask', { enumerable: true, get: maskOf })
  return result as typeof result & { readonly mask: Uint8Array }
}

/**
 * The dense prefill planner: every causal pair, one key span `[0, stop)` per tile of 64 query rows
 * (attnlab's dense attention is the `sparseAttention` kernel over that index: online softmax,
 * memory linear in `T`), reported sparsity 0 (with hooks the output comes from `@attnlab/core`'s
 * `denseAttention`, see {@link PrefillPlan.everyCausalPair}).
 *
 * @category Kernels
 */
export const densePlanner: PrefillPlanner = (_input, shape) => ({
  tiles: (_head, start, stop) => causalTile(start, stop),
  spans: (_head, _tile, _start, stop) => [0, stop],
  tileRows: 64,
  reported: new Float64Array(shape.batch * shape.nHeads),
  everyCausalPair: true,
})

/**
 * The dense decode strategy: every stored slot, which must be the full cache (slot `s` holds
 * position `s`); the output comes from `@attnlab/core`'s `denseAttention` (see
 * {@link DecodeSelection.everySlot}).
 *
 * @category Kernels
 */
export const denseDecodeStrategy: DecodeStrategy = {
  select(_input, shape) {
    const { batch, nHeads, stored, position } = shape
    if (stored !== position + 1) {
      throw new ShapeError(
        `dense decode needs the full cache (${position + 1} entries for position ${position}) but it ` +
          `holds ${stored}; was it compacted by an eviction method?`,
        { stored, position },
      )
    }
    const heads = batch * nHeads
    const spans = new Int32Array(2 * heads)
    for (let head = 0; head < heads; head++) spans[2 * head + 1] = stored
    return {
      slotSpans: { tileStarts: Int32Array.from({ length: heads + 1 }, (_, i) => i), spans },
      reported: new Float64Array(batch * nHeads),
      everySlot: true,
    }
  },
}

/**
 * The parts a kernel is made of (see {@link defineKernel}).
 *
 * @category Kernels
 */
export interface KernelParts<C> {
  /** Name for reports, e.g. `'vertical-slash'`. */
  readonly method: string
  /** Phases the kernel sparsifies. */
  readonly phases: readonly AttentionPhase[]
  /** The resolved configuration (frozen by {@link defineKernel}). */
  readonly config: C
  /** The prefill's selection (default: dense). */
  readonly planner?: PrefillPlanner
  /** The decode's strategy (default: dense). */
  readonly strategy?: DecodeStrategy
}

/**
 * Builds a {@link SparseAttentionKernel} from a planner and a decode strategy (dense where
 * absent). Used by every factory of this package; exposed for custom methods.
 *
 * @category Kernels
 */
export function defineKernel<C>(parts: KernelParts<C>): SparseAttentionKernel<Readonly<C>> {
  const planner = parts.planner ?? densePlanner
  const strategy = parts.strategy ?? denseDecodeStrategy
  const config = Object.freeze(parts.config) as Readonly<C>
  const kernel: SparseAttentionKernel<Readonly<C>> = {
    name: parts.method,
    method: parts.method,
    phases: Object.freeze([...parts.phases]),
    config,
    prefillWithMask: (input, context) => runPrefill(planner, input, context),
    prefill: (input, context) => runPrefill(planner, input, context),
    decodeWithMask: (input, context) => runDecode(strategy, input, context),
    decode: (input, context) => runDecode(strategy, input, context),
  }
  if (strategy.afterPrefill) {
    const after = strategy.afterPrefill.bind(strategy)
    ;(kernel as { afterPrefill?: AttentionKernel['afterPrefill'] }).afterPrefill = (input, cache) => after(input, cache)
  }
  return Object.freeze(kernel)
}

/**
 * The configuration of a {@link combine}d kernel.
 *
 * @typeParam P - the prefill kernel's configuration
 * @typeParam D - the decode kernel's configuration
 * @category Kernels
 */
export interface CombinedConfig<P, D> {
  /** The prefill kernel's configuration. */
  readonly prefill: P
  /** The decode kernel's configuration. */
  readonly decode: D
}

/**
 * Combines a prefill method and a decode method into one kernel: `prefill` from the first,
 * `afterPrefill` and `decode` from the second (e.g. Vertical-Slash prefill with Quest decoding;
 * the study evaluated the phases separately, [v2] §3).
 *
 * @param prefillKernel - a kernel that sparsifies the prefill (or dense)
 * @param decodeKernel - a kernel that sparsifies decoding (or dense)
 * @returns a kernel named `'<prefill>+<decode>'` with config `{ prefill, decode }`
 * @throws `ConfigError` (`@attnlab/core`) if `prefillKernel` only sparsifies decoding or `decodeKernel` only
 *   prefill (the combination would silently drop a method)
 * @example
 * ```ts
 * const kernel = combine(verticalSlash(), quest({ tokenBudget: 256 }))
 * ```
 * @category Kernels
 */
export function combine<P, D>(
  prefillKernel: SparseAttentionKernel<P>,
  decodeKernel: SparseAttentionKernel<D>,
): SparseAttentionKernel<CombinedConfig<P, D>> {
  if (prefillKernel.phases.length > 0 && !prefillKernel.phases.includes('prefill')) {
    throw new ConfigError(
      'prefillKernel',
      `'${prefillKernel.method}' sparsifies only ${prefillKernel.phases.join(', ')}; pass a prefill method or dense`,
    )
  }
  if (decodeKernel.phases.length > 0 && !decodeKernel.phases.includes('decode')) {
    throw new ConfigError(
      'decodeKernel',
      `'${decodeKernel.method}' sparsifies only ${decodeKernel.phases.join(', ')}; pass a decode method or dense`,
    )
  }
  const method = `${prefillKernel.method}+${decodeKernel.method}`
  const phases: AttentionPhase[] = []
  if (prefillKernel.phases.includes('prefill')) phases.push('prefill')
  if (decodeKernel.phases.includes('decode')) phases.push('decode')
  const kernel: SparseAttentionKernel<CombinedConfig<P, D>> = {
    name: method,
    method,
    phases: Object.freeze(phases),
    config: Object.freeze({ prefill: prefillKernel.config, decode: decodeKernel.config }),
    prefillWithMask: (input, context) => prefillKernel.prefillWithMask(input, context),
    prefill: (input, context) => prefillKernel.prefillWithMask(input, context),
    decodeWithMask: (input, context) => decodeKernel.decodeWithMask(input, context),
    decode: (input, context) => decodeKernel.decodeWithMask(input, context),
  }
  if (decodeKernel.afterPrefill) {
    const after = decodeKernel.afterPrefill.bind(decodeKernel)
    ;(kernel as { afterPrefill?: AttentionKernel['afterPrefill'] }).afterPrefill = (input, cache) => after(input, cache)
  }
  return Object.freeze(kernel)
}
