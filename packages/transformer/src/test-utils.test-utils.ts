/**
 * Helpers shared by this package's tests (not part of the published package).
 */
import * as tf from '@tensorflow/tfjs-core'
import { Rng } from '@attnlab/core'
import { expect } from 'vitest'
import type { Transformer } from './model.ts'

/** Random token rows `[batch][pos]` in `[0, vocab)`. */
export function randomTokens(batch: number, pos: number, vocab: number, seed = 0): number[][] {
  const rng = Rng.fromSeed(seed)
  return Array.from({ length: batch }, () => Array.from({ length: pos }, () => rng.int(vocab)))
}

/** Overwrites every parameter with N(0, scale^2) values (norm weights around 1). */
export function randomizeWeights(model: Transformer, seed = 1, scale = 0.3): void {
  const rng = Rng.fromSeed(seed)
  const weights = new Map<string, { shape: number[]; data: Float32Array }>()
  for (const [name, variable] of model.getWeights()) {
    const data = rng.fillNormal(new Float32Array(variable.size), 0, scale)
    if (/\.(ln1|ln2|ln_final)\.w$|^ln_final\.w$/.test(name))
      for (let i = 0; i < data.length; i++) data[i] = 1 + (data[i] as number) / 3
    weights.set(name, { shape: [...variable.shape], data })
  }
  model.setWeights(weights)
}

/**
 * A scalar loss with non-trivial gradients: sum(logits * fixed random weights). Its `exact()`
 * evaluates the same sum in doubles from the logits (no float32 summation noise in finite
 * differences).
 */
export function probeLoss(
  model: Transformer,
  tokens: number[][],
  seed = 7,
): (() => tf.Scalar) & { exact: () => number } {
  const rng = Rng.fromSeed(seed)
  const batch = tokens.length
  const pos = tokens[0]!.length
  const r = rng.fillNormal(new Float32Array(batch * pos * model.config.dVocab))
  const loss = (): tf.Scalar =>
    tf.tidy(() => {
      const logits = model.forward(tokens)
      return tf.sum(tf.mul(logits, tf.tensor3d(r, [batch, pos, model.config.dVocab]))) as tf.Scalar
    })
  const exact = (): number => {
    const logits = model.forward(tokens)
    const values = logits.dataSync()
    logits.dispose()
    let sum = 0
    for (let i = 0; i < values.length; i++) sum += (values[i] as number) * (r[i] as number)
    return sum
  }
  return Object.assign(loss, { exact })
}

/**
 * Checks every parameter's gradient against a central finite difference along a random
 * direction: (L(w + e u) - L(w - e u)) / 2e = <grad, u>.
 */
export async function checkGradients(
  model: Transformer,
  loss: (() => tf.Scalar) & { exact?: () => number },
  options: { epsilon?: number; rtol?: number } = {},
): Promise<void> {
  const evaluate = async (): Promise<number> => (loss.exact !== undefined ? loss.exact() : (await loss().data())[0]!)
  const epsilon = options.epsilon ?? 2e-3
  // A float32 forward pass is only reproducible to ~1e-7 relative, so central differences through a
  // whole model carry ~1e-3 relative noise; every kernel mode (stock, wasm, native, js) rounds
  // differently. 2% still fails any wrong gradient (those are off by O(1)).
  const rtol = options.rtol ?? 2e-2
  const weights = model.getWeights()
  const names = [...weights.keys()]
  const { grads } = tf.variableGrads(
    loss,
    names.map((n) => weights.get(n)!),
  )
  const byVariable = new Map<string, tf.Tensor>()
  for (const name of names) byVariable.set(name, grads[weights.get(name)!.name]!)
  const rng = Rng.fromSeed(99)
  for (const name of names) {
    const variable = weights.get(name)!
    const original = tf.clone(variable)
    const values = rng.fillNormal(new Float32Array(variable.size))
    const norm = Math.hypot(...values)
    const direction = tf.tensor(
      values.map((v) => v / norm),
      variable.shape,
    ) // unit length: a small, well-conditioned step
    const analytic = (await tf.sum(tf.mul(byVariable.get(name)!, direction)).data())[0]!
    variable.assign(tf.add(original, tf.mul(direction, epsilon)))
    const plus = await evaluate()
    variable.assign(tf.sub(original, tf.mul(direction, epsilon)))
    const minus = await evaluate()
    variable.assign(original)
    const numeric = (plus - minus) / (2 * epsilon)
    const scale = Math.max(Math.abs(numeric), Math.abs(analytic), 1e-1)
    expect(Math.abs(numeric - analytic) / scale, `${name}: numeric ${numeric}, analytic ${analytic}`).toBeLessThan(rtol)
    tf.dispose([original, direction])
  }
  tf.dispose(Object.values(grads))
}
