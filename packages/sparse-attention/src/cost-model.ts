/**
 * The Sparse Frontier study's hardware-agnostic cost model ([v2] appendix B): prefill FLOPs with
 * attention density `rho = 1 - sparsity`, decode memory transfers, and the indexing overheads of
 * Vertical-Slash (FLOPs) and Quest (memory).
 *
 * Conventions of the paper, kept here: the quadratic terms count `L^2` (not `L^2 / 2`); the
 * attention projections are `2Ld(d + 2 d_h n_kv + d)` (query and output as `d x d`); weights in
 * memory are `N(4d^2 + 3 d d_mlp) + d|V| + d` elements.
 *
 * **Two readings of Eq. 3.** As written, `rho` multiplies only the `L^2` terms (`QK^T`, softmax,
 * `PV`): with 5x sparsity (`rho = 0.2`) this gives, averaged over Qwen2.5 7B-72B, end-to-end
 * prefill speedups of 1.31x / 2.0x / 2.59x at 16K / 64K / 128K. The text (B.2) quotes 1.5x / 2.2x
 * / 2.8x, which is what one gets by scaling the *whole* attention block (projections included) by
 * `rho`: Amdahl's law on the 40% / 68% / 80% attention share. {@link DensityScope} selects the
 * reading: `'quadratic'` (Eq. 3 as written, default) or `'attention'` (the text's numbers).
 *
 * Sliding-window layers (Gemma-3) are modelled with `L * min(W, L)` score terms and a
 * `min(W, L)`-token KV cache, and are never sparsified (the study sparsified only global layers);
 * this reproduces the paper's Gemma figures (B.4: 42% vs Qwen-14B's 76% attention share of
 * prefill at 64K; 54% at 128K; KV share 61% at 64K, 75% at 128K, batch 8).
 *
 * @module
 */
import { ConfigError } from '@attnlab/core'
import { checkInt, checkNumber } from './config.ts'

/**
 * A transformer's shape as the cost model needs it (Hugging Face config names in brackets).
 *
 * @category Cost model
 */
export interface ModelShape {
  /** Display name. */
  readonly name: string
  /** Layers `N` [`num_hidden_layers`]. */
  readonly layers: number
  /** Hidden size `d` [`hidden_size`]. */
  readonly dModel: number
  /** Query heads `h` [`num_attention_heads`]. */
  readonly nHeads: number
  /** Key/value heads `n_kv` [`num_key_value_heads`]. */
  readonly nKvHeads: number
  /** Head dimension `d_h` [`head_dim`]. */
  readonly dHead: number
  /** MLP size `d_mlp` [`intermediate_size`]; 0 for an attention-only model (no MLP term). */
  readonly dMlp: number
  /** Vocabulary size `|V|` [`vocab_size`]. */
  readonly dVocab: number
  /** Local sliding-window layers, if any (`null`: every layer is global). */
  readonly slidingWindow: SlidingWindowLayers | null
}

/**
 * Interleaved local attention (Gemma-3): which layers attend only to a recent window.
 *
 * @category Cost model
 */
export interface SlidingWindowLayers {
  /** Window `W` of the local layers (tokens). */
  readonly window: number
  /** One global layer every `globalEvery` layers (Gemma-3: 6, i.e. 5 local : 1 global). */
  readonly globalEvery: number
}

function shape(
  name: string,
  layers: number,
  dModel: number,
  nHeads: number,
  nKvHeads: number,
  dHead: number,
  dMlp: number,
  dVocab: number,
  slidingWindow: ModelShape['slidingWindow'] = null,
): ModelShape {
  return Object.freeze({ name, layers, dModel, nHeads, nKvHeads, dHead, dMlp, dVocab, slidingWindow })
}

/**
 * Names of the presets in {@link MODEL_SHAPES}.
 *
 * @category Cost model
 */
export type ModelShapeName =
  | 'qwen2.5-7b'
  | 'qwen2.5-14b'
  | 'qwen2.5-32b'
  | 'qwen2.5-72b'
  | 'llama-3.1-8b'
  | 'llama-3.1-70b'
  | 'gemma-3-4b'
  | 'gemma-3-12b'
  | 'gemma-3-27b'

/**
 * The model families of the study ([v2] §3.1, from each model's `config.json`): Qwen2.5
 * 7B/14B/32B/72B, Llama-3.1 8B/70B, Gemma-3 4B/12B/27B (5 sliding-window layers of 1024 tokens
 * per global layer).
 *
 * @category Cost model
 */
export const MODEL_SHAPES: Readonly<Record<ModelShapeName, ModelShape>> = Object.freeze({
  'qwen2.5-7b': shape('Qwen2.5-7B', 28, 3584, 28, 4, 128, 18944, 152064),
  'qwen2.5-14b': shape('Qwen2.5-14B', 48, 5120, 40, 8, 128, 13824, 152064),
  'qwen2.5-32b': shape('Qwen2.5-32B', 64, 5120, 40, 8, 128, 27648, 152064),
  'qwen2.5-72b': shape('Qwen2.5-72B', 80, 8192, 64, 8, 128, 29568, 152064),
  'llama-3.1-8b': shape('Llama-3.1-8B', 32, 4096, 32, 8, 128, 14336, 128256),
  'llama-3.1-70b': shape('Llama-3.1-70B', 80, 8192, 64, 8, 128, 28672, 128256),
  'gemma-3-4b': shape('Gemma-3-4B', 34, 2560, 8, 4, 256, 10240, 262208, { window: 1024, globalEvery: 6 }),
  'gemma-3-12b': shape('Gemma-3-12B', 48, 3840, 16, 8, 256, 15360, 262208, { window: 1024, globalEvery: 6 }),
  'gemma-3-27b': shape('Gemma-3-27B', 62, 5376, 32, 16, 128, 21504, 262208, { window: 1024, globalEvery: 6 }),
})

/**
 * The Qwen2.5 family the study averages its cost figures over (7B, 14B, 32B, 72B).
 *
 * @category Cost model
 */
export const QWEN25_FAMILY: readonly ModelShape[] = Object.freeze([
  MODEL_SHAPES['qwen2.5-7b'],
  MODEL_SHAPES['qwen2.5-14b'],
  MODEL_SHAPES['qwen2.5-32b'],
  MODEL_SHAPES['qwen2.5-72b'],
])

/**
 * Which FLOPs the density `rho` scales (see the module comment): `'quadratic'` = Eq. 3 as written
 * (`QK^T`, softmax and `PV` only), `'attention'` = the whole attention block including the
 * projections (reproduces the text's 1.5x / 2.2x / 2.8x).
 *
 * @category Cost model
 */
export type DensityScope = 'quadratic' | 'attention'

/**
 * Options of the prefill FLOPs model.
 *
 * @category Cost model
 */
export interface PrefillCostOptions {
  /** Attention density `rho = 1 - sparsity` in `[0, 1]` (default 1, dense). */
  readonly density?: number
  /** Batch size `B` (default 1). */
  readonly batch?: number
  /** What `rho` scales (default `'quadratic'`, Eq. 3 as written). */
  readonly densityScope?: DensityScope
}

/**
 * Prefill FLOPs by component (all in FLOPs, multiplied by the batch size).
 *
 * @category Cost model
 */
export interface PrefillFlops {
  /** `2 L d`. */
  readonly embedding: number
  /** `N 2 L d (d + 2 d_h n_kv + d)` (times `rho` with `densityScope: 'attention'` on sparsified layers). */
  readonly attentionProjections: number
  /** `rho N (2 h L^2 d_h + 3 h L^2 + 2 h L^2 d_h)` (`L * min(W, L)` in sliding-window layers, never sparsified). */
  readonly attentionScores: number
  /** `N (6 L d d_mlp + 2 L d_mlp)`. */
  readonly mlp: number
  /** `2 L d |V|`. */
  readonly logits: number
  /** Sum of the above. */
  readonly total: number
}

function layerSplit(model: ModelShape): { global: number; local: number } {
  if (model.slidingWindow === null) return { global: model.layers, local: 0 }
  const global = Math.floor(model.layers / model.slidingWindow.globalEvery)
  return { global, local: model.layers - global }
}

function checkModel(model: ModelShape): void {
  for (const key of ['layers', 'dModel', 'nHeads', 'nKvHeads', 'dHead', 'dVocab'] as const) {
    checkInt(`model.${key}`, model[key], 1)
  }
  checkInt('model.dMlp', model.dMlp, 0) // 0: an attention-only model
  if (model.slidingWindow !== null) {
    checkInt('model.slidingWindow.window', model.slidingWindow.window, 1)
    checkInt('model.slidingWindow.globalEvery', model.slidingWindow.globalEvery, 1)
  }
}

/**
 * Prefill FLOPs of one forward pass over `length` tokens ([v2] B.1, Eq. 3).
 *
 * @param model - the model shape (e.g. `MODEL_SHAPES['qwen2.5-7b']`)
 * @param length - sequence length `L` (tokens)
 * @param options - density, batch, density scope
 * @returns FLOPs per component and in total
 * @throws `ConfigError` (`@attnlab/core`) for a non-positive length, a density outside `[0, 1]` or an invalid shape
 * @example
 * ```ts
 * const dense = prefillFlops(MODEL_SHAPES['qwen2.5-7b'], 16384).total        // 3.40e14 FLOPs
 * const sparse = prefillFlops(MODEL_SHAPES['qwen2.5-7b'], 16384, { density: 0.2 }).total
 * ```
 * @category Cost model
 */
export function prefillFlops(model: ModelShape, length: number, options: PrefillCostOptions = {}): PrefillFlops {
  checkModel(model)
  const L = checkInt('length', length, 1)
  const rho = checkNumber('density', options.density ?? 1, 0, 1)
  const batch = checkInt('batch', options.batch ?? 1, 1)
  const scope = options.densityScope ?? 'quadratic'
  if (scope !== 'quadratic' && scope !== 'attention')
    throw new ConfigError('densityScope', `must be 'quadratic' or 'attention', got '${String(scope)}'`)
  const { dModel: d, nHeads: h, nKvHeads, dHead, dMlp, dVocab } = model
  const { global, local } = layerSplit(model)
  const scoresPerLayer = (keys: number): number =>
    2 * h * L * keys * dHead + 3 * h * L * keys + 2 * h * L * keys * dHead
  const projectionsPerLayer = 2 * L * d * (d + 2 * dHead * nKvHeads + d)
  const window = model.slidingWindow === null ? L : Math.min(model.slidingWindow.window, L)
  const embedding = batch * 2 * L * d
  const attentionProjections = batch * projectionsPerLayer * (local + global * (scope === 'attention' ? rho : 1))
  const attentionScores = batch * (global * rho * scoresPerLayer(L) + local * scoresPerLayer(window))
  const mlp = batch * model.layers * (6 * L * d * dMlp + 2 * L * dMlp)
  const logits = batch * 2 * L * d * dVocab
  return {
    embedding,
    attentionProjections,
    attentionScores,
    mlp,
    logits,
    total: embedding + attentionProjections + attentionScores + mlp + logits,
  }
}

/**
 * Share of dense prefill FLOPs spent in attention (projections and score terms), the figure of
 * [v2] B.2 / Fig. 12 (Qwen2.5 average: about 40% at 16K, 68% at 64K, 80% at 128K).
 *
 * @param model - the model shape
 * @param length - sequence length (tokens)
 * @returns a fraction in `[0, 1]`
 * @category Cost model
 */
export function attentionShareOfPrefill(model: ModelShape, length: number): number {
  const flops = prefillFlops(model, length)
  return (flops.attentionProjections + flops.attentionScores) / flops.total
}

/**
 * End-to-end prefill speedup of attention sparsity `sparsity`: dense FLOPs / sparse FLOPs.
 *
 * @param model - the model shape
 * @param length - sequence length (tokens)
 * @param sparsity - attention sparsity in `[0, 1]` (`rho = 1 - sparsity`)
 * @param densityScope - `'quadratic'` (Eq. 3 as written: 1.31x / 2.0x / 2.59x for 0.8 on Qwen2.5
 *   at 16K / 64K / 128K) or `'attention'` (the text's 1.5x / 2.2x / 2.8x)
 * @returns the speedup factor (>= 1)
 * @category Cost model
 */
export function prefillSpeedup(
  model: ModelShape,
  length: number,
  sparsity: number,
  densityScope: DensityScope = 'quadratic',
): number {
  checkNumber('sparsity', sparsity, 0, 1)
  return prefillFlops(model, length).total / prefillFlops(model, length, { density: 1 - sparsity, densityScope }).total
}

/**
 * Options of the decode memory model.
 *
 * @category Cost model
 */
export interface DecodeCostOptions {
  /** KV density `rho = 1 - sparsity` (default 1). */
  readonly density?: number
  /** Batch size `B` (default 1). */
  readonly batch?: number
  /** Bytes per element for the `*Bytes` fields (default 2, bf16). */
  readonly bytesPerElement?: number
}

/**
 * Memory read per decode step ([v2] B.1): elements and bytes.
 *
 * @category Cost model
 */
export interface DecodeMemory {
  /** `N (4 d^2 + 3 d d_mlp) + d |V| + d` elements. */
  readonly weights: number
  /** `B N 2 L d_h n_kv rho` elements (`min(W, L)` tokens, dense, in sliding-window layers). */
  readonly kvCache: number
  /** `weights + kvCache` elements. */
  readonly total: number
  /** `total * bytesPerElement` bytes. */
  readonly totalBytes: number
}

/**
 * Memory transferred by one decode step with a context of `length` tokens ([v2] B.1).
 *
 * @param model - the model shape
 * @param length - context length `L` (tokens)
 * @param options - density, batch, bytes per element
 * @throws `ConfigError` (`@attnlab/core`) on invalid arguments
 * @category Cost model
 */
export function decodeMemory(model: ModelShape, length: number, options: DecodeCostOptions = {}): DecodeMemory {
  checkModel(model)
  const L = checkInt('length', length, 1)
  const rho = checkNumber('density', options.density ?? 1, 0, 1)
  const batch = checkInt('batch', options.batch ?? 1, 1)
  const bytes = checkNumber('bytesPerElement', options.bytesPerElement ?? 2, 0, Infinity)
  const { dModel: d, dMlp, dVocab, dHead, nKvHeads } = model
  const { global, local } = layerSplit(model)
  const window = model.slidingWindow === null ? L : Math.min(model.slidingWindow.window, L)
  const weights = model.layers * (4 * d * d + 3 * d * dMlp) + d * dVocab + d
  const kvCache = batch * (global * 2 * L * dHead * nKvHeads * rho + local * 2 * window * dHead * nKvHeads)
  const total = weights + kvCache
  return { weights, kvCache, total, totalBytes: total * bytes }
}

/**
 * Share of decode memory spent on the KV cache ([v2] B.3 / Fig. 13: Qwen2.5 7% at 16K to 35% at
 * 128K for batch 1; 35-80% at batch 8).
 *
 * @param model - the model shape
 * @param length - context length (tokens)
 * @param batch - batch size (default 1)
 * @returns a fraction in `[0, 1]`
 * @category Cost model
 */
export function kvShareOfDecode(model: ModelShape, length: number, batch = 1): number {
  const memory = decodeMemory(model, length, { batch })
  return memory.kvCache / memory.total
}

/**
 * Decode speedup of KV sparsity (dense memory / sparse memory per step).
 *
 * @param model - the model shape
 * @param length - context length (tokens)
 * @param sparsity - KV sparsity in `[0, 1]`
 * @param batch - batch size (default 1)
 * @category Cost model
 */
export function decodeSpeedup(model: ModelShape, length: number, sparsity: number, batch = 1): number {
  checkNumber('sparsity', sparsity, 0, 1)
  return (
    decodeMemory(model, length, { batch }).total / decodeMemory(model, length, { batch, density: 1 - sparsity }).total
  )
}

/**
 * Which width the indexing formulas multiply by: `'model'` = `d` as the paper writes it, `'head'`
 * = `d_h` (what a per-head estimate actually costs).
 *
 * @category Cost model
 */
export type IndexingDimension = 'model' | 'head'

/**
 * Options of the Vertical-Slash indexing overhead.
 *
 * @category Cost model
 */
export interface VerticalSlashIndexingOptions {
  /** Estimation queries `q` (the window `W`, default 256). */
  readonly queries?: number
  /** Selected verticals `k_v` (default 512). */
  readonly verticals?: number
  /** Selected slashes `k_s` (default 512). */
  readonly slashes?: number
  /** Batch size (default 1). */
  readonly batch?: number
  /** `d` as written (default) or `d_h`. */
  readonly dimension?: IndexingDimension
}

/**
 * Vertical-Slash indexing FLOPs added to the prefill ([v2] B.1):
 * `B N h [2 d L q + 3 L q + 2 L q + 2 L log2 L + (L / 64)(k_v + k_s)]` (estimation `QK^T`,
 * softmax, vertical/diagonal sums, top-k sort, index conversion). Sliding-window layers are not
 * sparsified and add nothing.
 *
 * @param model - the model shape
 * @param length - sequence length `L` (tokens)
 * @returns FLOPs
 * @category Cost model
 */
export function verticalSlashIndexingFlops(
  model: ModelShape,
  length: number,
  options: VerticalSlashIndexingOptions = {},
): number {
  checkModel(model)
  const L = checkInt('length', length, 1)
  const q = checkInt('queries', options.queries ?? 256, 1)
  const kv = checkInt('verticals', options.verticals ?? 512, 0)
  const ks = checkInt('slashes', options.slashes ?? 512, 0)
  const batch = checkInt('batch', options.batch ?? 1, 1)
  const width = (options.dimension ?? 'model') === 'model' ? model.dModel : model.dHead
  const { global } = layerSplit(model)
  return (
    batch *
    global *
    model.nHeads *
    (2 * width * L * q + 3 * L * q + 2 * L * q + 2 * L * Math.log2(L) + (L / 64) * (kv + ks))
  )
}

/**
 * Options of the Quest indexing overhead.
 *
 * @category Cost model
 */
export interface QuestIndexingOptions {
  /** Page size `p` (default 16). */
  readonly pageSize?: number
  /** Batch size (default 1). */
  readonly batch?: number
  /** `d` as written (default) or `d_h`. */
  readonly dimension?: IndexingDimension
}

/**
 * Quest indexing memory added per decode step ([v2] B.1), loading every page's min and max key:
 * `B N n_kv 2 d L / p` elements (the paper writes `d`; `dimension: 'head'` uses `d_h`).
 *
 * @param model - the model shape
 * @param length - context length `L` (tokens)
 * @returns elements
 * @category Cost model
 */
export function questIndexingMemory(model: ModelShape, length: number, options: QuestIndexingOptions = {}): number {
  checkModel(model)
  const L = checkInt('length', length, 1)
  const p = checkInt('pageSize', options.pageSize ?? 16, 1)
  const batch = checkInt('batch', options.batch ?? 1, 1)
  const width = (options.dimension ?? 'model') === 'model' ? model.dModel : model.dHead
  const { global } = layerSplit(model)
  return (batch * global * model.nKvHeads * 2 * width * L) / p
}
