/**
 * `@attnlab/sparse-attention`: the six training-free sparse attention methods of the Sparse
 * Frontier study (Nawrot et al. 2025, arXiv 2504.17768), behind `@attnlab/core`'s
 * `AttentionKernel` contract so any attnlab model runs with them, plus the study's sparsity
 * accounting, Table 3 budgets and appendix-B cost model.
 *
 * - Prefill: {@link verticalSlash}, {@link flexPrefill}, {@link blockSparse}.
 * - Decode: {@link snapKV}, {@link adaSnapKV}, {@link quest}; {@link dense} is the reference;
 *   {@link combine} pairs a prefill method with a decode method.
 * - {@link applyPrefill} / {@link applyDecode}: the array-level API on one sequence's q/k/v,
 *   returning the output, the mask of computed pairs and both sparsities.
 * - Accounting and budgets: {@link blockSparseSparsity}, {@link blockSparseTopKForSparsity},
 *   {@link TABLE3_BUDGETS}, ...; sizing a method for a prompt and a target sparsity:
 *   {@link budgetFor}, {@link calibratedRun}; cost model: {@link prefillFlops}, {@link decodeMemory}, ...
 *
 * Every method runs per query head and is grouped-query aware (query head `h` reads KV head
 * `floor(h / (nHeads / nKvHeads))`), computes in float32, breaks top-k ties toward the lower
 * index, and attends with exact softmax over its own selection (selection in JavaScript, attention as
 * tfjs ops over tiles of query rows from the method's compact index, {@link attendByTiles}: memory
 * linear in the sequence length, work proportional to the pairs the tiles read). They are
 * reference implementations for studying the methods, not fast kernels.
 *
 * @packageDocumentation
 */
export { SequenceTooShortError } from './errors.ts'
export {
  backendBytesAvailable,
  checkDecodeInput,
  checkPrefillFits,
  checkPrefillInput,
  combine,
  defineKernel,
  denseDecodeStrategy,
  densePlanner,
  runDecode,
  runPrefill,
  type AttentionPhase,
  type AttentionTiming,
  type CombinedConfig,
  type DecodeSelection,
  type DecodeSlotSpans,
  type DecodeShape,
  type DecodeStrategy,
  type HeadSparsity,
  type KernelParts,
  type MaskedDecodeResult,
  type MaskedPrefillResult,
  type PrefillPlan,
  type PrefillPlanner,
  type PrefillShape,
  type SparseAttentionKernel,
  type SparseMethodName,
  type SparsityReport,
} from './kernel.ts'
export { attendWithMask, causalPairMask, lastWindowProbabilities, repeatKvHeads } from './masked-attention.ts'
export {
  MAX_TYPED_ARRAY_LENGTH,
  attendByTiles,
  blockSelectionTile,
  causalTile,
  maskFromTiles,
  tiledAttentionBytes,
  tilesFromMask,
  type QueryTile,
  type TiledAttentionCounts,
  type TileSource,
} from './tiled-attention.ts'
export { buildSpanIndex, mergeSpans, tilesFromSpans, type SpanSource } from './span-index.ts'
export { argsortDescending, averagePool, coverCount, topK } from './select.ts'
export { dense, type DenseConfig } from './dense.ts'
export {
  VERTICAL_SLASH_PRESETS,
  defaultVerticalSlashConfig,
  resolveVerticalSlashConfig,
  verticalSlash,
  verticalSlashConfigSchema,
  type VerticalSlashConfig,
} from './vertical-slash.ts'
export {
  buildVerticalSlashIndex,
  fillVerticalSlashMask,
  type VerticalSlashIndex,
  type VerticalSlashMaskMode,
  type VerticalSlashRowBlock,
} from './vertical-slash-index.ts'
export {
  FLEXPREFILL_PRESETS,
  defaultFlexPrefillConfig,
  flexPrefill,
  flexPrefillConfigSchema,
  resolveFlexPrefillConfig,
  type FlexPrefillConfig,
} from './flexprefill.ts'
export {
  BLOCK_SPARSE_PRESETS,
  blockSparse,
  blockSparseConfigSchema,
  defaultBlockSparseConfig,
  resolveBlockSparseConfig,
  type BlockSparseConfig,
} from './block-sparse.ts'
export { EvictionState } from './eviction.ts'
export { defaultSnapKVConfig, resolveSnapKVConfig, snapKV, snapKVConfigSchema, type SnapKVConfig } from './snapkv.ts'
export {
  adaSnapKV,
  adaSnapKVConfigSchema,
  defaultAdaSnapKVConfig,
  resolveAdaSnapKVConfig,
  type AdaSnapKVConfig,
} from './ada-snapkv.ts'
export {
  QuestState,
  defaultQuestConfig,
  quest,
  questConfigSchema,
  questMinimumPromptLength,
  resolveQuestConfig,
  type QuestConfig,
} from './quest.ts'
export {
  SPARSE_METHOD_SCHEMAS,
  SPARSE_METHODS,
  createKernel,
  type SparseMethodConfigs,
  type SparseMethodInfo,
} from './methods.ts'
export {
  applyDecode,
  applyPrefill,
  type DecodeStepQKV,
  type SequenceDecodeResult,
  type SequenceDecodeTiming,
  type SequenceOptions,
  type SequencePrefillResult,
  type SequenceQKV,
} from './sequence.ts'
export {
  TABLE3_BUDGETS,
  TABLE3_SPARSITIES,
  type Table3Budgets,
  type Table3Sparsities,
  adaSnapKVSparsity,
  blockSparseSparsity,
  blockSparseTopKForSparsity,
  questBudgetForSparsity,
  questSparsity,
  snapKVCapacityForSparsity,
  snapKVSparsity,
  verticalSlashKernelSparsity,
} from './sparsity.ts'
export { budgetFor, calibratedRun, type MethodBudget } from './sizing.ts'
export {
  MODEL_SHAPES,
  QWEN25_FAMILY,
  attentionShareOfPrefill,
  decodeMemory,
  decodeSpeedup,
  kvShareOfDecode,
  prefillFlops,
  prefillSpeedup,
  questIndexingMemory,
  verticalSlashIndexingFlops,
  type DecodeCostOptions,
  type DecodeMemory,
  type DensityScope,
  type IndexingDimension,
  type ModelShape,
  type ModelShapeName,
  type PrefillCostOptions,
  type PrefillFlops,
  type QuestIndexingOptions,
  type SlidingWindowLayers,
  type VerticalSlashIndexingOptions,
} from './cost-model.ts'
