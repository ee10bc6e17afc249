/**
 * The method registry: every method by name, for programs that choose a method at run time (the
 * CLI, sweeps).
 *
 * @module
 */
import { ConfigError } from '@attnlab/core'
import { configSchema, type z } from '@attnlab/core/schema'
import { adaSnapKV, adaSnapKVConfigSchema, type AdaSnapKVConfig } from './ada-snapkv.ts'
import { blockSparse, blockSparseConfigSchema, type BlockSparseConfig } from './block-sparse.ts'
import { dense } from './dense.ts'
import { flexPrefill, flexPrefillConfigSchema, type FlexPrefillConfig } from './flexprefill.ts'
import type { AttentionPhase, SparseAttentionKernel, SparseMethodName } from './kernel.ts'
import { quest, questConfigSchema, type QuestConfig } from './quest.ts'
import { snapKV, snapKVConfigSchema, type SnapKVConfig } from './snapkv.ts'
import { verticalSlash, verticalSlashConfigSchema, type VerticalSlashConfig } from './vertical-slash.ts'

/**
 * What {@link SPARSE_METHODS} says about a method.
 *
 * @category Kernels
 */
export interface SparseMethodInfo {
  /** The phase it sparsifies (`null`: dense, neither). */
  readonly phase: AttentionPhase | null
  /** One line from the study's Table 1. */
  readonly description: string
}

/**
 * Every method with the phase it sparsifies (`null` for dense) and its Table 1 description.
 *
 * @category Kernels
 */
export const SPARSE_METHODS: Readonly<Record<SparseMethodName, SparseMethodInfo>> = Object.freeze({
  dense: { phase: null, description: 'dense causal attention (the reference)' },
  'vertical-slash': {
    phase: 'prefill',
    description: 'verticals + slashes from the last-W-query estimate, uniform budget',
  },
  flexprefill: {
    phase: 'prefill',
    description: 'verticals + slashes sized per head by coverage alpha (threshold budget)',
  },
  'block-sparse': { phase: 'prefill', description: 'top-K blocks per query block from mean-pooled block scores' },
  snapkv: { phase: 'decode', description: 'KV eviction by observation-window importance, uniform per KV head' },
  'ada-snapkv': { phase: 'decode', description: 'KV eviction with adaptive per-head budgets (max aggregation)' },
  quest: { phase: 'decode', description: 'full cache, top pages by the min/max upper bound of q.k' },
})

/**
 * The configuration schema of each method (dense: an empty one): each parameter's meaning, range
 * and study default, for programs that build a method's options at run time (the CLI derives its
 * method flags, their help and their ranges from these).
 *
 * @example
 * ```ts
 * fieldInfo(SPARSE_METHOD_SCHEMAS.quest.shape.pageSize) // { kind: 'integer', help: 'page size P in tokens', ... }
 * ```
 * @category Kernels
 */
export const SPARSE_METHOD_SCHEMAS: Readonly<{
  dense: z.ZodObject<Record<string, never>, z.core.$strict>
  'vertical-slash': typeof verticalSlashConfigSchema
  flexprefill: typeof flexPrefillConfigSchema
  'block-sparse': typeof blockSparseConfigSchema
  snapkv: typeof snapKVConfigSchema
  'ada-snapkv': typeof adaSnapKVConfigSchema
  quest: typeof questConfigSchema
}> = Object.freeze({
  dense: configSchema({}),
  'vertical-slash': verticalSlashConfigSchema,
  flexprefill: flexPrefillConfigSchema,
  'block-sparse': blockSparseConfigSchema,
  snapkv: snapKVConfigSchema,
  'ada-snapkv': adaSnapKVConfigSchema,
  quest: questConfigSchema,
} satisfies Record<SparseMethodName, unknown>)

/**
 * The configuration type of each method.
 *
 * @category Kernels
 */
export interface SparseMethodConfigs {
  /** Dense has no parameters. */
  dense: Record<string, never>
  /** See {@link VerticalSlashConfig}. */
  'vertical-slash': VerticalSlashConfig
  /** See {@link FlexPrefillConfig}. */
  flexprefill: FlexPrefillConfig
  /** See {@link BlockSparseConfig}. */
  'block-sparse': BlockSparseConfig
  /** See {@link SnapKVConfig}. */
  snapkv: SnapKVConfig
  /** See {@link AdaSnapKVConfig}. */
  'ada-snapkv': AdaSnapKVConfig
  /** See {@link QuestConfig}. */
  quest: QuestConfig
}

/**
 * Creates a method's kernel by name.
 *
 * @param method - one of {@link SPARSE_METHODS}
 * @param overrides - parameters to change from the method's study defaults
 * @returns the kernel
 * @throws `ConfigError` (`@attnlab/core`) for an unknown method or invalid parameters
 * @example
 * ```ts
 * const kernel = createKernel('quest', { tokenBudget: 64, pageSize: 16 })
 * ```
 * @category Kernels
 */
export function createKernel<M extends SparseMethodName>(
  method: M,
  overrides: Partial<SparseMethodConfigs[M]> = {},
): SparseAttentionKernel {
  const o = overrides as Record<string, unknown>
  switch (method as SparseMethodName) {
    case 'dense':
      if (Object.keys(o).length > 0)
        throw new ConfigError(Object.keys(o)[0] as string, 'is not a parameter of dense (it has none)')
      return dense()
    case 'vertical-slash':
      return verticalSlash(o as Partial<VerticalSlashConfig>)
    case 'flexprefill':
      return flexPrefill(o as Partial<FlexPrefillConfig>)
    case 'block-sparse':
      return blockSparse(o as Partial<BlockSparseConfig>)
    case 'snapkv':
      return snapKV(o as Partial<SnapKVConfig>)
    case 'ada-snapkv':
      return adaSnapKV(o as Partial<AdaSnapKVConfig>)
    case 'quest':
      return quest(o as Partial<QuestConfig>)
    default:
      throw new ConfigError(
        'method',
        `must be one of ${Object.keys(SPARSE_METHODS).join(', ')}, got '${String(method)}'`,
      )
  }
}
