/**
 * The attention-bias intervention of Baherwani et al., "Emergent Capabilities Arise Randomly from
 * Learning Sparse Attention Patterns" (arXiv 2606.25010, the attention-bias experiment of the
 * cellular-automaton study): a bias toward the task's ground-truth routing pattern added to the
 * attention scores of chosen heads, which the paper reports makes the loss plateaus vanish.
 *
 * The form: `blocks.{l}.attn.hook_attn_scores[b, h, q, k] += beta * G_h[q, k]`, where `G_h` is the
 * task's 0/1 ground-truth map (`@attnlab/core`'s `TrueAttention`) assigned to head `h` and the
 * scores are the scaled, causally masked pre-softmax logits. The scores are log-space, so the bias
 * multiplies the unnormalised attention weight of every ground-truth key by `e^beta` (for
 * `beta = ln 9 = 2.2`, a query with 3 true keys among 40 gives them 3*9/(3*9+37) = 42 % of its
 * attention instead of 7.5 % at uniform scores). The paper's text (as far as it is public: "a
 * bias toward the ground-truth map on the attention scores") fixes where it goes, not its
 * scale; for a 0/1 map `beta' * log(G + eps)` is the same bias with `beta = beta' * ln((1 +
 * eps) / eps)` (the constant `beta' * log(eps)` on every key cancels in the softmax), so `beta`
 * in nats is the one parameter of both forms. The bias is finite, so a biased head can still
 * attend elsewhere, and it is a constant: gradients flow through the scores as without it.
 *
 * @module
 */
import * as tf from '@tensorflow/tfjs-core'
import { ConfigError, ShapeError, type TrueAttention } from '@attnlab/core'
import { configSchema, integerField, listField, numberField, parseConfig, type z } from '@attnlab/core/schema'
import { hasAttention, type TransformerConfig } from './config.ts'
import { hookName, type ForwardHook, type HookName } from './hooks.ts'

/**
 * The largest bias accepted (nats): `e^100` makes the bias a hard mask in float32, so a larger
 * value is a typo, refused rather than run.
 *
 * @category Interventions
 */
export const MAX_ATTENTION_BIAS = 100

/**
 * The schema of {@link AttentionBiasOptions}: `beta`, the targeted layers and heads, declared once
 * (the emergence and training settings and the CLI's `--attention-bias`, `--bias-layers`,
 * `--bias-heads` take their meaning and ranges from it).
 *
 * @category Interventions
 */
export const attentionBiasSchema = configSchema({
  /** Nats added to the pre-softmax score of every ground-truth key, in `[0, 100]`. */
  beta: numberField('nats added to the attention score of every ground-truth key', {
    min: 0,
    max: MAX_ATTENTION_BIAS,
  }),
  /** Blocks whose heads get the bias (default: every block). */
  layers: listField('blocks whose heads get the bias (default all)', integerField('a block index', { min: 0 }))
    .nullable()
    .default(null),
  /** Heads (of each targeted block) that get the bias (default: every head). */
  heads: listField('heads that get the bias (default all)', integerField('a head index', { min: 0 }))
    .nullable()
    .default(null),
})

/**
 * Options of the attention bias (declared by {@link attentionBiasSchema}): `beta` (nats, in
 * `[0, 100]`; 0 is a no-op control), and which `layers` and `heads` get it (`null` or absent:
 * all).
 *
 * @category Interventions
 */
export type AttentionBiasOptions = z.input<typeof attentionBiasSchema>

/**
 * A resolved attention bias: per targeted block, the bias `[nHeads, size, size]` added to its
 * scores (0 for heads that are not targeted), and the hooks that add it.
 *
 * @category Interventions
 */
export interface AttentionBias {
  /** Nats. */
  readonly beta: number
  /** The targeted blocks (ascending). */
  readonly layers: readonly number[]
  /** The targeted heads of each block (ascending). */
  readonly heads: readonly number[]
  /** For each targeted head (in `heads` order), the name of the ground-truth map it is biased toward. */
  readonly maps: readonly string[]
  /** Side of the maps (the task's `seqLength`). */
  readonly size: number
  /**
   * The forward hooks (one per targeted block, on `blocks.{l}.attn.hook_attn_scores`) that add the
   * bias; pass them as `fwdHooks` of a forward pass. Each creates its bias tensor inside the pass
   * (freed with it), so the hooks own nothing.
   */
  readonly hooks: readonly ForwardHook[]
}

function checkIndices(parameter: string, values: readonly number[], count: number, what: string): number[] {
  const sorted = [...values].sort((a, b) => a - b)
  for (const value of sorted) {
    if (value >= count)
      throw new ConfigError(parameter, `${value} is not a ${what} of this model; expected 0 .. ${count - 1}`, {
        value,
      })
  }
  const duplicate = sorted.find((value, i) => i > 0 && sorted[i - 1] === value)
  if (duplicate !== undefined)
    throw new ConfigError(parameter, `lists ${what} ${duplicate} twice; expected distinct indices`, {
      value: duplicate,
    })
  return sorted
}

/**
 * Builds the attention bias of a model toward a task's ground-truth attention. Targeted head
 * number `i` (in ascending order within each targeted block) is biased toward map
 * `i mod maps.length`: with one map (linear map, cellular automaton) every targeted head gets the
 * same map; with one map per span (sparse Markov chain), the first head the most important span,
 * the next the second, and so on, as the trained minimal model ends up (Yüksel et al., arXiv
 * 2602.19143).
 *
 * The hooks add `beta * G` to `hook_attn_scores` `[batch, nHeads, queryPos, keyPos]` of the
 * targeted blocks, rows `keyPos - queryPos .. keyPos - 1` and keys `0 .. keyPos - 1` of the maps
 * (a full pass: the top-left `[pos, pos]` block). Adding them disables the models' fused fast
 * paths (the scores are materialised), so a biased pass is slower.
 *
 * @param options - `beta` and the targeted layers and heads
 * @param config - the model's configuration (for `nLayers`, `nHeads`, `nCtx`)
 * @param attention - the task's ground-truth maps (`task.trueAttention()`)
 * @returns the resolved bias with its hooks
 * @throws `ConfigError` (`@attnlab/core`) naming `attentionBias.beta` (NaN, negative, above
 *   {@link MAX_ATTENTION_BIAS}), a layer or head outside the model or listed twice, or maps that
 *   are empty or not `[size, size]`, or a model without attention (the mixer); the hooks throw
 *   `ShapeError` (`@attnlab/core`) in a pass longer than the maps
 * @example
 * ```ts
 * const task = new LinearMapTask({ stateSize: 8, onesPerRow: 2 })
 * const bias = attentionBias({ beta: 3 }, model.config, task.trueAttention())
 * const logits = model.forward(tokens, { fwdHooks: bias.hooks })
 * ```
 * @category Interventions
 */
export function attentionBias(
  options: AttentionBiasOptions,
  config: TransformerConfig,
  attention: TrueAttention,
): AttentionBias {
  const parsed = parseConfig(attentionBiasSchema, options, 'attentionBias')
  if (!hasAttention(config)) {
    throw new ConfigError(
      'attentionBias',
      `the ${config.architecture} model has no attention scores to bias (it mixes positions without attention)`,
    )
  }
  const { nLayers, nHeads } = config
  const layers = checkIndices(
    'attentionBias.layers',
    parsed.layers ?? Array.from({ length: nLayers }, (_, l) => l),
    nLayers,
    'block',
  )
  const heads = checkIndices(
    'attentionBias.heads',
    parsed.heads ?? Array.from({ length: nHeads }, (_, h) => h),
    nHeads,
    'head',
  )
  const { size, maps } = attention
  if (maps.length === 0) throw new ConfigError('attentionBias', 'the task gives no ground-truth attention map')
  if (!Number.isSafeInteger(size) || size < 1 || maps.some((map) => map.weights.length !== size * size)) {
    throw new ConfigError('attentionBias', `expected ground-truth maps of ${size} x ${size} weights`)
  }
  const beta = parsed.beta
  // [nHeads, size, size]: beta * G for the targeted heads, 0 elsewhere.
  const bias = new Float32Array(nHeads * size * size)
  const assigned = heads.map((head, i) => {
    const map = maps[i % maps.length] as { name: string; weights: Float32Array }
    const base = head * size * size
    for (let j = 0; j < size * size; j++) bias[base + j] = beta * (map.weights[j] as number)
    return map.name
  })
  const add = (scores: tf.Tensor, name: HookName): tf.Tensor => {
    const [, heads4, queries, keys] = scores.shape as [number, number, number, number]
    if (heads4 !== nHeads || keys > size || queries > keys) {
      throw new ShapeError(
        `attention bias: ${name} has shape [${scores.shape.join(', ')}]; the bias covers ${nHeads} heads and ` +
          `${size} positions`,
        { shape: [...scores.shape] },
      )
    }
    const full = tf.tensor4d(bias, [1, nHeads, size, size])
    const block = tf.slice(full, [0, 0, keys - queries, 0], [1, nHeads, queries, keys]) // [1, nHeads, queries, keys]
    return tf.add(scores, block) // [batch, nHeads, queries, keys]
  }
  const hooks: ForwardHook[] = layers.map((layer) => {
    const name = hookName.attnScores(layer)
    return [name, (scores: tf.Tensor) => add(scores, name)] as const
  })
  return Object.freeze({
    beta,
    layers: Object.freeze(layers),
    heads: Object.freeze(heads),
    maps: Object.freeze(assigned),
    size,
    hooks: Object.freeze(hooks),
  })
}
