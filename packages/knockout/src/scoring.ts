/**
 * Scoring a capability under many knockout masks. Every (mask, sequence) pair becomes one row of
 * a batched forward pass whose `headMask` row is that mask, so M masks over n sequences cost
 * `ceil(M n / rowsPerPass)` forward passes instead of M separate evaluations (the authors' released
 * code for Bair et al., arXiv 2603.03335, reloads the model and evaluates once per mask).
 *
 * @module
 */
import * as tf from '@tensorflow/tfjs-core'
import { NonFiniteError } from '@attnlab/core'
import { booleanField, configSchema, customField, integerField, parseConfig, type z } from '@attnlab/core/schema'
import type { Transformer } from '@attnlab/transformer'
import { oneHotFloat } from '@attnlab/transformer/internal'
import { HeadAblation } from './ablation.ts'
import { checkCapability, type Capability } from './capability.ts'
import { checkMasks, type KnockoutMasks } from './masks.ts'

/**
 * The schema of the forward-pass options every scoring call takes (all of {@link ScoreOptions}
 * but `ablation`): each option's meaning and default, declared once (localization and reports
 * extend it).
 *
 * @category Scoring
 */
export const passOptionsSchema = configSchema({
  /**
   * Upper bound on tokens (`rows * length`) per forward pass; default 16384. The logits of a pass
   * are also capped at 2^23 values. Lower it to save memory, raise it for speed on big machines.
   */
  maxTokensPerPass: integerField('upper bound on tokens (rows x length) per forward pass', { min: 1 }).default(16384),
  /**
   * `true` (default): rows of different masks share forward passes. `false`: one mask per pass
   * (the one-evaluation-per-mask cost model of the authors' released code; used by the benchmark).
   */
  batched: booleanField('rows of different masks share forward passes').default(true),
  /** Called after each forward pass with the number of rows done and the total. */
  onProgress: customField<(done: number, total: number) => void>(
    'called after each forward pass with the rows done and the total',
  ).optional(),
})

/**
 * The schema of {@link ScoreOptions}: the ablation and the forward-pass options ({@link passOptionsSchema}).
 *
 * @category Scoring
 */
export const scoreOptionsSchema = configSchema({
  /** The ablation (default: zero ablation). Create mean/resample ones with {@link HeadAblation.create}. */
  ablation: customField<HeadAblation>('the ablation (default: zero ablation)').optional(),
  ...passOptionsSchema.shape,
})

/**
 * Options of {@link scoreMasks} (see {@link scoreOptionsSchema}).
 *
 * @category Scoring
 */
export type ScoreOptions = Readonly<z.input<typeof scoreOptionsSchema>>

/**
 * Metric values of a capability under a set of masks, with the cost.
 *
 * @category Scoring
 */
export interface MaskScores {
  /** The capability's metric under each mask, `[M]` (units of the metric: nats or a fraction). */
  readonly values: Float64Array
  /** Mask evaluations spent (`M`): each is one full scoring of the capability. */
  readonly evaluations: number
  /** Forward passes run. */
  readonly forwardPasses: number
  /** Sequences forwarded (`M * count`). */
  readonly sequences: number
  /** Wall time in seconds. */
  readonly seconds: number
}

/**
 * Scores a capability under every mask of a set (one value per mask), batching masks into
 * shared forward passes.
 *
 * @param model - the model (not modified)
 * @param capability - what to score
 * @param masks - `[M, N]` knockout masks (1 = knocked out); an all-zero row is the clean model
 * @param options - ablation (default zero), pass size, batching, progress callback
 * @returns the metric per mask and the cost
 * @throws `InvalidArgumentError` (`@attnlab/core`) when the masks or capability do not fit the
 *   model; `ConfigError` (`@attnlab/core`) for a bad pass size; errors of the ablation (e.g. resample with
 *   misaligned lengths)
 * @example
 * ```ts
 * const masks = randomMasks(model.config, { count: 100, fraction: 0.02, seed: 0 })
 * const { values } = await scoreMasks(model, capability, masks) // 100 metric values
 * ```
 * @category Scoring
 */
export async function scoreMasks(
  model: Transformer,
  capability: Capability,
  masks: KnockoutMasks,
  options: ScoreOptions = {},
): Promise<MaskScores> {
  const settings = parseConfig(scoreOptionsSchema, options, 'scoreMasks')
  const started = performance.now()
  const { nLayers, nHeads, dVocab } = model.config
  checkMasks(masks, { nLayers, nHeads })
  checkCapability(capability, model.config)
  const maxTokens = settings.maxTokensPerPass
  const ownAblation = options.ablation === undefined
  const ablation = options.ablation ?? (await HeadAblation.create(model, 'zero'))
  try {
    const { data, metric } = capability
    const { count, length } = data
    const n = nLayers * nHeads
    const M = masks.count
    const sources = ablation.pairing(count, length)
    // Scored positions grouped by sequence.
    const firstScored = new Int32Array(count + 1)
    for (let s = 0; s < data.scoredPositions.length; s++) {
      const b = Math.floor((data.scoredPositions[s] as number) / length)
      firstScored[b + 1] = (firstScored[b + 1] as number) + 1
    }
    for (let b = 0; b < count; b++) firstScored[b + 1] = (firstScored[b + 1] as number) + (firstScored[b] as number)
    const order = Int32Array.from({ length: data.scoredPositions.length }, (_, s) => s).sort(
      (a, b) => (data.scoredPositions[a] as number) - (data.scoredPositions[b] as number),
    )
    const rowsPerPass = Math.max(1, Math.min(Math.floor(maxTokens / length), Math.floor((1 << 23) / (length * dVocab))))
    const totalRows = M * count
    const sums = new Float64Array(M)
    const scoredPerMask = data.scoredPositions.length
    const width = data.targetWidth ?? 0
    let passes = 0
    let done = 0
    const batched = settings.batched
    // Rows are (mask j, sequence b) in mask-major order; a pass never straddles masks when unbatched.
    let row = 0
    while (row < totalRows) {
      let end = Math.min(totalRows, row + rowsPerPass)
      if (!batched) end = Math.min(end, (Math.floor(row / count) + 1) * count)
      const rows = end - row
      const tokens = new Int32Array(rows * length)
      const knocked = new Uint8Array(rows * n)
      const rowSources = new Int32Array(rows)
      const gather: number[] = []
      const targets: number[] = []
      const soft: number[] = []
      const owner: number[] = []
      const weight: number[] = []
      for (let r = 0; r < rows; r++) {
        const j = Math.floor((row + r) / count)
        const b = (row + r) % count
        tokens.set(data.inputs.subarray(b * length, (b + 1) * length), r * length)
        knocked.set(masks.data.subarray(j * n, (j + 1) * n), r * n)
        rowSources[r] = sources[b] as number
        for (let k = firstScored[b] as number; k < (firstScored[b + 1] as number); k++) {
          const s = order[k] as number
          gather.push(r * length + ((data.scoredPositions[s] as number) - b * length))
          targets.push(data.targets[s] as number)
          soft.push(s)
          owner.push(j)
          weight.push(data.scoreWeights === undefined ? 1 / scoredPerMask : (data.scoreWeights[s] as number))
        }
      }
      const [values, predictions] = tf.tidy(() => {
        const input = tf.tensor2d(tokens, [rows, length], 'int32')
        const logits = ablation.forward(model, input, knocked, rowSources) // [rows, length, dVocab]
        const flat = tf.reshape(logits, [rows * length, dVocab])
        const picked = tf.gather(flat, tf.tensor1d(Int32Array.from(gather), 'int32')) as tf.Tensor2D // [scored, dVocab]
        const logProbabilities = tf.logSoftmax(picked) // [scored, dVocab]
        let targetWeights: tf.Tensor2D
        if (data.targetDistributions !== undefined) {
          const distributions = new Float32Array(soft.length * dVocab)
          soft.forEach((s, i) => {
            distributions.set(
              (data.targetDistributions as Float32Array).subarray(s * width, (s + 1) * width),
              i * dVocab,
            )
          })
          targetWeights = tf.tensor2d(distributions, [soft.length, dVocab])
        } else {
          targetWeights = oneHotFloat(tf.tensor1d(Int32Array.from(targets), 'int32'), dVocab) as tf.Tensor2D
        }
        const logProbability = tf.sum(tf.mul(logProbabilities, targetWeights), 1) // [scored]: sum_y P(y) log q(y)
        return [logProbability, tf.argMax(picked, 1)] // [scored], [scored]
      })
      const logProbabilityValues = (await values.data()) as Float32Array
      const argmax = (await predictions.data()) as Int32Array
      tf.dispose([values, predictions])
      for (let i = 0; i < owner.length; i++) {
        const j = owner[i] as number
        const v =
          metric === 'accuracy'
            ? (argmax[i] as number) === (targets[i] as number)
              ? 1
              : 0
            : metric === 'loss'
              ? -(logProbabilityValues[i] as number)
              : (logProbabilityValues[i] as number)
        sums[j] = (sums[j] as number) + (weight[i] as number) * v
      }
      passes += 1
      done += rows
      row = end
      settings.onProgress?.(done, totalRows)
    }
    const values = sums
    for (let j = 0; j < M; j++) {
      if (!Number.isFinite(values[j] as number)) {
        throw new NonFiniteError(
          `capability '${capability.name}': the ${metric} under mask ${j} is ${values[j]} (the model produced ` +
            'non-finite logits)',
        )
      }
    }
    return {
      values,
      evaluations: M,
      forwardPasses: passes,
      sequences: totalRows,
      seconds: (performance.now() - started) / 1000,
    }
  } finally {
    if (ownAblation) ablation.dispose()
  }
}
