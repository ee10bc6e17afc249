/**
 * Weight transfer between models: start a model from the parameters of another (pre-pretraining,
 * Baherwani et al., arXiv 2606.25010, the interventions that speed emergence up), copying the
 * parameters whose name and shape fit and keeping the model's own initialisation for the others.
 *
 * @module
 */
import { InvalidArgumentError } from '@attnlab/core'
import type { TransformerConfig } from './config.ts'
import { parameterShapes, type Transformer } from './model.ts'

/**
 * Parameters as plain data, by TransformerLens name (`Transformer.getWeightData()`, a loaded
 * checkpoint's `weights`).
 *
 * @category Checkpoints
 */
export type WeightData = ReadonlyMap<string, { readonly shape: readonly number[]; readonly data: Float32Array }>

/**
 * What {@link transferWeights} did, parameter by parameter (what a run records).
 *
 * @category Checkpoints
 */
export interface WeightTransfer {
  /** The model's parameters that now hold the source's values (name and shape fit), in the model's order. */
  readonly copied: readonly string[]
  /**
   * The model's parameters that keep their fresh initialisation, in the model's order, each with why:
   * absent from the source, or the source's shape.
   */
  readonly reinitialized: readonly { readonly name: string; readonly reason: string }[]
  /** The source's parameters the model does not have (ignored), in the source's order. */
  readonly unused: readonly string[]
}

/**
 * Which parameters {@link transferWeights} would copy into a model of `config`, without a model:
 * those whose name and shape fit (the same for every seed of a configuration).
 *
 * @param config - the target model's configuration
 * @param source - the source's parameters
 * @returns the names that would be copied, re-initialised (with why) and unused
 * @throws `InvalidArgumentError` (`@attnlab/core`) as {@link transferWeights}
 * @category Checkpoints
 */
export function planWeightTransfer(config: TransformerConfig, source: WeightData): WeightTransfer {
  const shapes = parameterShapes(config)
  const copied: string[] = []
  const reinitialized: { name: string; reason: string }[] = []
  for (const [name, shape] of shapes) {
    const value = source.get(name)
    if (value === undefined) {
      reinitialized.push({ name, reason: 'not in the source' })
      continue
    }
    const size = value.shape.reduce((a, b) => a * b, 1)
    if (value.data.length !== size) {
      throw new InvalidArgumentError(
        `source parameter '${name}' has ${value.data.length} values for shape [${value.shape.join(', ')}]`,
        { name },
      )
    }
    if (value.shape.length !== shape.length || value.shape.some((d, i) => d !== shape[i])) {
      reinitialized.push({
        name,
        reason: `the source's shape [${value.shape.join(', ')}] is not [${shape.join(', ')}]`,
      })
      continue
    }
    copied.push(name)
  }
  if (copied.length === 0) {
    throw new InvalidArgumentError(
      `no parameter of the source fits this ${config.architecture} model (no name and shape in common); ` +
        `the source has ${[...source.keys()].slice(0, 6).join(', ')}${source.size > 6 ? ', ...' : ''}`,
    )
  }
  const own = new Set(shapes.map(([name]) => name))
  const unused = [...source.keys()].filter((name) => !own.has(name))
  return { copied, reinitialized, unused }
}

/**
 * Copies into `model` every source parameter whose name and shape equal one of the model's; the
 * others keep the model's initialisation. A model with another vocabulary keeps a fresh
 * `embed.W_E` (and `unembed.W_U` when untied) and takes the blocks; a model of the same
 * configuration becomes an exact copy (its logits are the source's).
 *
 * @param model - the model to initialise (its weights change)
 * @param source - the source's parameters (`getWeightData()` of a model, or a checkpoint's `weights`)
 * @returns the names copied, re-initialised (with why) and unused ({@link planWeightTransfer})
 * @throws `InvalidArgumentError` (`@attnlab/core`) when nothing fits (no parameter name and shape in
 *   common: the source is another kind of model), or a source value's data length does not match its shape
 * @example
 * ```ts
 * const source = await loadCheckpoint('runs/ca/seeds/0/checkpoint')
 * const transfer = transferWeights(model, source.weights)
 * transfer.copied // ['blocks.0.attn.W_Q', ...]
 * ```
 * @category Checkpoints
 */
export function transferWeights(model: Transformer, source: WeightData): WeightTransfer {
  const plan = planWeightTransfer(model.config, source)
  const values = new Map<string, { shape: number[]; data: Float32Array }>()
  for (const name of plan.copied) {
    const value = source.get(name) as { shape: readonly number[]; data: Float32Array }
    values.set(name, { shape: [...value.shape], data: value.data })
  }
  model.setWeights(values, { strict: false })
  return plan
}
