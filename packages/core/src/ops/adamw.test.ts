import * as tf from '@tensorflow/tfjs-core'
import { expect, it } from 'vitest'
import { ConfigError, ShapeError } from '../errors.ts'
import { activeKernels } from '../kernels/register.ts'
import { Rng } from '../rng.ts'
import { describeWithBackends, expectArraysClose, expectNoLeaks } from '../testing.ts'
import { adamwUpdate } from './adamw.ts'
import { randomArray } from './reference.test-utils.ts'

/** PyTorch's AdamW in doubles (torch.optim.AdamW, decoupled decay first). */
function reference(
  p: number[],
  g: number[],
  m: number[],
  v: number[],
  h: { lr: number; beta1: number; beta2: number; eps: number; weightDecay: number; step: number },
): void {
  for (let i = 0; i < p.length; i++) {
    p[i] = p[i]! * (1 - h.lr * h.weightDecay)
    m[i] = h.beta1 * m[i]! + (1 - h.beta1) * g[i]!
    v[i] = h.beta2 * v[i]! + (1 - h.beta2) * g[i]! ** 2
    const mHat = m[i]! / (1 - h.beta1 ** h.step)
    const vHat = v[i]! / (1 - h.beta2 ** h.step)
    p[i] = p[i]! - (h.lr * mHat) / (Math.sqrt(vHat) + h.eps)
  }
}

describeWithBackends('adamwUpdate', () => {
  it('matches PyTorch AdamW over several steps, in place when kernels are registered', async () => {
    const rng = Rng.fromSeed(5)
    const n = 37
    const p0 = Array.from(randomArray(rng, n))
    // Created in tidy so the variables own their memory alone (as a trainer's do).
    const [parameter, m, v] = tf.tidy(() => [
      tf.variable(tf.tensor1d(p0)),
      tf.variable(tf.zeros([n])),
      tf.variable(tf.zeros([n])),
    ])
    const expected = { p: [...p0], m: new Array<number>(n).fill(0), v: new Array<number>(n).fill(0) }
    for (let step = 1; step <= 4; step++) {
      const gv = randomArray(rng, n)
      const g = tf.tensor1d(gv)
      const hyper = { lr: 0.05, beta1: 0.9, beta2: 0.99, eps: 1e-8, weightDecay: 0.1, step }
      const inPlace = await expectNoLeaks(() => adamwUpdate(parameter, g, m, v, hyper))
      expect(inPlace).toBe(activeKernels() !== undefined)
      reference(expected.p, Array.from(gv), expected.m, expected.v, hyper)
      g.dispose()
    }
    expectArraysClose(parameter.dataSync(), expected.p, 1e-6, 1e-5)
    expectArraysClose(m.dataSync(), expected.m, 1e-7, 1e-5)
    expectArraysClose(v.dataSync(), expected.v, 1e-9, 1e-5)
    tf.dispose([parameter, m, v])
  })

  it('falls back to the composite when the parameter shares its memory (no aliasing surprises)', () => {
    const [parameter, m, v] = tf.tidy(() => [
      tf.variable(tf.tensor1d([1, 2, 3])),
      tf.variable(tf.zeros([3])),
      tf.variable(tf.zeros([3])),
    ])
    const alias = tf.reshape(parameter, [3]) // shares the buffer on every backend
    const g = tf.tensor1d([1, 1, 1])
    adamwUpdate(parameter, g, m, v, { lr: 0.1, beta1: 0.9, beta2: 0.999, eps: 1e-8, weightDecay: 0, step: 1 })
    expectArraysClose(alias.dataSync(), [1, 2, 3], 0, 0)
    expectArraysClose(parameter.dataSync(), [0.9, 1.9, 2.9], 1e-6)
    tf.dispose([parameter, alias, m, v, g])
  })

  it('rejects mismatched shapes and bad hyperparameters', () => {
    const parameter = tf.variable(tf.zeros([2]))
    const m = tf.variable(tf.zeros([2]))
    const v = tf.variable(tf.zeros([2]))
    const hyper = { lr: 0.1, beta1: 0.9, beta2: 0.999, eps: 1e-8, weightDecay: 0, step: 1 }
    expect(() => adamwUpdate(parameter, tf.zeros([3]), m, v, hyper)).toThrow(ShapeError)
    expect(() => adamwUpdate(parameter, tf.zeros([2]), m, v, { ...hyper, beta1: 1 })).toThrow(ConfigError)
    expect(() => adamwUpdate(parameter, tf.zeros([2]), m, v, { ...hyper, step: 0 })).toThrow(/step/)
    expect(() => adamwUpdate(parameter, tf.zeros([2]), m, v, { ...hyper, lr: -1 })).toThrow(/lr/)
    tf.dispose([parameter, m, v])
  })
})
