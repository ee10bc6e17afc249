/**
 * The minimal model (Yüksel et al., arXiv 2602.19143; `tml-epfl/hmm-attention`): one attention
 * layer on the one-hot input `x = [onehot(token); onehot(position)]`, queries `x W_Q`, no key
 * projection (every head's key is the input itself), values `x W_V`, heads summed, no residual,
 * and the first `dVocab` output coordinates as the logits. `model.ts` runs it through the same
 * Attention/Block modules as the other architectures, with the pieces here.
 *
 * It has two computations that give the same numbers: the literal one (materialise `x`
 * ({@link minimalInput}), `q = x W_Q`, `k = x`, `v = x W_V` ({@link minimalQkv}), call the attention
 * kernel, sum heads, take the first `dVocab` coordinates) used whenever a hook, a KV cache or a
 * non-default kernel needs it; and the structured one ({@link minimalStructured}, see
 * `docs/performance.md`) used otherwise (training): the scores `x_i W_Q^h x_j^T` as four lookups in
 * `W_Q` (`twoHotScores`), the attention-weighted input `sum_j p_ij x_j` by `pairScatter`, and one
 * matmul with the first `dVocab` columns of `W_V` (the only ones that reach the logits).
 * Internal to the package (not exported by the barrel).
 *
 * @module
 */
import * as tf from '@tensorflow/tfjs-core'
import { causalPairs } from '@attnlab/core'
import { linear, oneHotAttention, pairScatter, twoHotScores } from '@attnlab/core/kernels'
import type { TransformerConfig } from './config.ts'
import { BLOCK_HOOK_POINTS, blockHookName, hookName, type HookName } from './hooks.ts'
import { dropout, oneHotFloat } from './ops.ts'
import {
  fromPosition,
  headMaskFor,
  headsToColumns,
  param,
  type ArchitectureParts,
  type AttentionProjections,
  type ModelBlock,
  type ParameterSpec,
  type Parameters,
  type PassContext,
  type Projected,
  type ResidualHook,
} from './pass.ts'

/**
 * The minimal model's parameters: `blocks.0.attn.W_Q` (`U(-queryInit, queryInit)`, Xavier, or 0)
 * and `blocks.0.attn.W_V` (zeros), both `[nHeads, dModel, dModel]` (paper (b)'s init).
 */
function minimalParameterSpecs(config: TransformerConfig): ParameterSpec[] {
  const { dModel, nHeads } = config
  const zerosInit: ParameterSpec['init'] = (_rng, size) => new Float32Array(size)
  const queryInit: ParameterSpec['init'] =
    config.queryInit === 'xavier'
      ? (rng, size) => {
          const bound = Math.sqrt(6 / (dModel + dModel))
          return rng.fillUniform(new Float32Array(size), -bound, bound)
        }
      : config.queryInit === 0
        ? zerosInit
        : (rng, size) =>
            rng.fillUniform(new Float32Array(size), -(config.queryInit as number), config.queryInit as number)
  return [
    { name: 'blocks.0.attn.W_Q', shape: [nHeads, dModel, dModel], init: queryInit },
    { name: 'blocks.0.attn.W_V', shape: [nHeads, dModel, dModel], init: zerosInit },
  ]
}

/**
 * The literal input `x = [onehot(token); onehot(dVocab + position)]` after `hook_embed` (the token
 * part) and `hook_pos_embed` (the position part).
 *
 * @param hook - runs a hook on a `[batch * pos, dModel]` tensor (identity when not hooked)
 * @returns `[batch * pos, dModel]`
 */
function minimalInput(context: PassContext, hook: (name: HookName, x: tf.Tensor2D) => tf.Tensor2D): tf.Tensor2D {
  const { batch, pos, tokens } = context
  const { dModel, dVocab } = context.config
  const flatTokens = tf.reshape(tokens, [batch * pos])
  const tokenPart = tf.pad(oneHotFloat(flatTokens, dVocab), [
    [0, 0],
    [0, dModel - dVocab],
  ]) as tf.Tensor2D // [batch * pos, dModel]
  const positions = tf.add(
    tf.range(dVocab + context.start, dVocab + context.start + pos, 1, 'int32'),
    tf.zeros([batch, pos], 'int32'),
  )
  // [batch * pos, dModel]
  const positionPart = oneHotFloat(tf.reshape(positions, [batch * pos]), dModel) as tf.Tensor2D
  const embed = hook(hookName.embed, tokenPart)
  const posEmbed = hook(hookName.posEmbed, positionPart)
  return tf.add(embed, posEmbed) as tf.Tensor2D // [batch * pos, dModel]
}

/**
 * Queries and values by one fused matmul `x [W_Q | W_V]`; no key projection: every head's key is
 * the input itself.
 *
 * @param x - the one-hot input `[batch * pos, dModel]`
 * @returns `q`, `k`, `v`, each `[batch, pos, nHeads, dModel]`
 */
function minimalQkv(
  parameters: Parameters,
  config: TransformerConfig,
  x: tf.Tensor2D,
  context: PassContext,
): Projected {
  const { batch, pos } = context
  const { nHeads, dHead } = config
  const wqv = tf.concat(
    [headsToColumns(param(parameters, 'blocks.0.attn.W_Q')), headsToColumns(param(parameters, 'blocks.0.attn.W_V'))],
    1,
  ) // [dModel, 2 * nHeads * dModel]
  // [batch * pos, nHeads * dModel] each
  const [q2, v2] = tf.split(linear(x, wqv), 2, 1) as [tf.Tensor2D, tf.Tensor2D]
  const q = tf.reshape(q2, [batch, pos, nHeads, dHead]) as tf.Tensor4D // [batch, pos, nHeads, dModel]
  const v = tf.reshape(v2, [batch, pos, nHeads, dHead]) as tf.Tensor4D // [batch, pos, nHeads, dModel]
  // [batch, pos, nHeads, dModel]
  const k = tf.add(tf.reshape(x, [batch, pos, 1, dHead]), tf.zeros([1, 1, nHeads, 1])) as tf.Tensor4D
  return { q, k, v, qkv: undefined }
}

/**
 * Whether the minimal model can take its structured path for this pass: a kernel that declares it
 * computes exactly dense attention (`exactDense`, the default `denseAttention`), no KV cache, and
 * no hook other than `blocks.0.attn.hook_attn_scores` / `hook_pattern`.
 */
function minimalStructuredApplies(context: PassContext): boolean {
  if (context.cache !== null || context.attention.exactDense !== true) return false
  if (!context.hooks.active) return true
  const allowed = new Set<HookName>([hookName.attnScores(0), hookName.pattern(0)])
  const all: HookName[] = [
    hookName.embed,
    hookName.posEmbed,
    hookName.lnFinal,
    ...BLOCK_HOOK_POINTS.map((point) => blockHookName(0, point)),
  ]
  return all.every((name) => allowed.has(name) || !context.hooks.has(name))
}

/**
 * The minimal model's structured computation (no hooks except scores/pattern, dense kernel,
 * no cache, see {@link minimalStructuredApplies}): gathers instead of one-hot matmuls. Same
 * numbers as the literal path through the Attention module.
 *
 * @returns the logits `[batch * (pos - logitsFrom), dVocab]`
 */
function minimalStructured(parameters: Parameters, context: PassContext): tf.Tensor2D {
  const { batch, pos, tokens, config } = context
  const { nHeads, dModel, dVocab } = config
  const layer = 0
  const wQ = param(parameters, 'blocks.0.attn.W_Q') as tf.Tensor3D // [nHeads, dModel, dModel]
  const wV = param(parameters, 'blocks.0.attn.W_V') // [nHeads, dModel, dModel]
  const plain =
    !context.hooks.active && headMaskFor(context, layer) === null && !(context.rng !== null && config.dropout > 0)
  if (plain) {
    // The whole layer as one op (gathers; one fused kernel forward and backward when attnlab
    // kernels are registered): the same function as below.
    // Only the positions whose logits are needed (logitsFrom) are computed.
    const from = context.logitsFrom
    // [batch, pos - from, dVocab]
    const logits = oneHotAttention(tokens, wQ, wV as tf.Tensor3D, { dVocab, scale: config.attnScale, from })
    const pairs = batch * nHeads * causalPairs(pos, pos)
    context.reports?.push({ layer, kernel: context.attention.name, computedPairs: pairs, totalPairs: pairs })
    return tf.reshape(logits, [batch * (pos - from), dVocab]) as tf.Tensor2D // [batch * outPos, dVocab]
  }
  // Scores x_i W_Q^h x_j^T against the one-hot keys (key = input) as four lookups in W_Q, masked above the diagonal.
  let scores = twoHotScores(wQ, tokens, dVocab, -Infinity) // [batch, nHeads, pos, pos]
  if (config.attnScale !== 1) scores = tf.mul(scores, config.attnScale)
  scores = context.hooks.run(hookName.attnScores(layer), scores)
  let pattern = tf.softmax(scores) as tf.Tensor4D // [batch, nHeads, pos, pos]
  pattern = context.hooks.run(hookName.pattern(layer), pattern)
  if (context.rng !== null && config.dropout > 0) pattern = dropout(pattern, config.dropout, context.rng)
  const pairs = batch * nHeads * causalPairs(pos, pos)
  context.reports?.push({ layer, kernel: context.attention.name, computedPairs: pairs, totalPairs: pairs })
  const mask = headMaskFor(context, layer)
  if (mask !== null)
    // z_h is linear in pattern_h
    pattern = tf.mul(pattern, tf.reshape(mask, [mask.shape[0] as number, nHeads, 1, 1])) as tf.Tensor4D
  // sum_j pattern[h, i, j] x_j, then the value matrices' first dVocab columns (the logits).
  let weighted = pairScatter(pattern, tokens, dModel, dVocab) as tf.Tensor // [batch, pos, nHeads, dModel]
  // positions whose logits are needed
  if (context.logitsFrom > 0) weighted = tf.slice(weighted, [0, context.logitsFrom, 0, 0], [-1, -1, -1, -1])
  // [batch * outPos, nHeads * dModel]
  weighted = tf.reshape(weighted, [batch * (pos - context.logitsFrom), nHeads * dModel])
  // [nHeads * dModel, dVocab]
  const wVLogits = tf.reshape(tf.slice(wV, [0, 0, 0], [nHeads, dModel, dVocab]), [nHeads * dModel, dVocab])
  return linear(weighted as tf.Tensor2D, wVLogits as tf.Tensor2D) // [batch * outPos, dVocab]
}

/** Queries and values from `x [W_Q | W_V]`, key = input; the output sums the heads (no `W_O`). */
class MinimalProjections implements AttentionProjections {
  constructor(
    private readonly parameters: Parameters,
    private readonly config: TransformerConfig,
    readonly layer: number,
  ) {}

  project(x: tf.Tensor2D, context: PassContext): Projected {
    return minimalQkv(this.parameters, this.config, x, context)
  }

  output(z: tf.Tensor4D, context: PassContext): tf.Tensor2D {
    const { batch, pos } = context
    const result = context.hooks.run(hookName.result(this.layer), z) // [batch, pos, nHeads, dModel] (no W_O)
    return tf.reshape(tf.sum(result, 2), [batch * pos, z.shape[3]]) as tf.Tensor2D // [batch * pos, dModel]
  }
}

/**
 * The minimal model's pass: the structured computation when it applies
 * ({@link minimalStructuredApplies}), else the literal one: one-hot input, the block, and the first
 * `dVocab` output coordinates as the logits.
 *
 * @returns `[batch * (pos - logitsFrom), dVocab]`
 */
function minimalForward(
  parameters: Parameters,
  blocks: readonly ModelBlock[],
  context: PassContext,
  hook: ResidualHook,
): tf.Tensor2D {
  if (minimalStructuredApplies(context)) return minimalStructured(parameters, context)
  const { batch, pos } = context
  const x = minimalInput(context, hook) // [batch * pos, dModel]: [onehot(token); onehot(position)]
  const out = (blocks[0] as ModelBlock).forward(x, context) // [batch * pos, dModel]
  // the first dVocab coordinates are the logits
  const logits = tf.slice(out, [0, 0], [batch * pos, context.config.dVocab]) as tf.Tensor2D
  return fromPosition(logits, batch, pos, context.logitsFrom) // [batch * outPos, dVocab]
}

/** The minimal model's parts of the shared modules (see `ArchitectureParts` in `model.ts`). */
export const minimalArchitecture: ArchitectureParts = Object.freeze({
  parameterSpecs: minimalParameterSpecs,
  projections: (parameters: Parameters, config: TransformerConfig, layer: number) =>
    new MinimalProjections(parameters, config, layer),
  residual: false,
  forward: minimalForward,
})
