/**
 * Helpers shared by @attnlab/knockout's tests (not part of the package build).
 */
import * as tf from '@tensorflow/tfjs-core'
import { Rng } from '@attnlab/core'
import type { HookName, Transformer } from '@attnlab/transformer'
import type { Capability } from '../src/capability.ts'

/** Overwrites every parameter with N(0, scale^2) values (norm weights around 1), so every head matters. */
export function randomizeWeights(model: Transformer, seed = 1, scale = 0.4): void {
  const rng = Rng.fromSeed(seed)
  const weights = new Map<string, { shape: number[]; data: Float32Array }>()
  for (const [name, variable] of model.getWeights()) {
    const data = rng.fillNormal(new Float32Array(variable.size), 0, scale)
    if (/(ln1|ln2|ln_final)\.w$/.test(name)) for (let i = 0; i < data.length; i++) data[i] = 1 + (data[i] as number) / 3
    weights.set(name, { shape: [...variable.shape], data })
  }
  model.setWeights(weights)
}

/** The capability's metric computed directly from logits `[count, length, dVocab]` (float64 in JS). */
export function metricFromLogits(capability: Capability, logits: Float32Array, dVocab: number): number {
  const { data, metric } = capability
  let sum = 0
  for (let s = 0; s < data.scoredPositions.length; s++) {
    const flat = data.scoredPositions[s] as number
    const row = logits.subarray(flat * dVocab, (flat + 1) * dVocab)
    let max = -Infinity
    let argmax = 0
    for (let y = 0; y < dVocab; y++)
      if ((row[y] as number) > max) {
        max = row[y] as number
        argmax = y
      }
    let z = 0
    for (let y = 0; y < dVocab; y++) z += Math.exp((row[y] as number) - max)
    const logZ = max + Math.log(z)
    let logProbability: number
    if (data.targetDistributions !== undefined) {
      const width = data.targetWidth as number
      logProbability = 0
      for (let y = 0; y < width; y++)
        logProbability += (data.targetDistributions[s * width + y] as number) * ((row[y] as number) - logZ)
    } else {
      logProbability = (row[data.targets[s] as number] as number) - logZ
    }
    const w = data.scoreWeights === undefined ? 1 / data.scoredPositions.length : (data.scoreWeights[s] as number)
    sum +=
      w *
      (metric === 'accuracy'
        ? argmax === data.targets[s]
          ? 1
          : 0
        : metric === 'loss'
          ? -logProbability
          : logProbability)
  }
  return sum
}

/**
 * Runs the model on the capability's inputs with hooks that replace knocked-out heads' `hook_z` by `replacement(layer)`
 * (`[count, length, nHeads, dHead]` values), and returns the metric.
 */
export async function manualMetric(
  model: Transformer,
  capability: Capability,
  knocked: ReadonlySet<string>,
  replacement: (layer: number) => tf.Tensor | null,
): Promise<number> {
  const { count, length, inputs } = capability.data
  const { nLayers, nHeads, dVocab } = model.config
  const logits = tf.tidy(() => {
    const hooks = Array.from(
      { length: nLayers },
      (_, l) =>
        [
          `blocks.${l}.attn.hook_z` as HookName,
          (z: tf.Tensor) => {
            const keep = new Float32Array(nHeads).map((_, h) => (knocked.has(`${l}.${h}`) ? 0 : 1))
            const keepT = tf.reshape(tf.tensor1d(keep), [1, 1, nHeads, 1])
            const kept = tf.mul(z, keepT)
            const source = replacement(l)
            return source === null ? kept : tf.add(kept, tf.mul(tf.sub(1, keepT), source))
          },
        ] as const,
    )
    return model.runWithHooks(tf.tensor2d(inputs, [count, length], 'int32'), { fwdHooks: hooks })
  })
  const values = (await logits.data()) as Float32Array
  logits.dispose()
  return metricFromLogits(capability, values, dVocab)
}
