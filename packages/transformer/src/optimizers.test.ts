import * as tf from '@tensorflow/tfjs-core'
import { AttnlabError, ConfigError } from '@attnlab/core'
import { describeWithBackends, expectArraysClose } from '@attnlab/core/testing'
import { describe, expect, it } from 'vitest'
import { clipByGlobalNorm, createOptimizer, decayMatrices, type OptimizerOptions } from './optimizers.ts'
import { createSchedule } from './schedules.ts'

function run(options: OptimizerOptions, grads: number[][], lr = 0.1, decayed = () => true): number[] {
  const w = tf.variable(tf.tensor1d([1, -2]))
  const optimizer = createOptimizer(new Map([['w', w]]), options, decayed)
  for (const g of grads) {
    const grad = tf.tensor1d(g)
    optimizer.step(new Map([['w', grad]]), lr)
    grad.dispose()
  }
  const values = Array.from(w.dataSync())
  optimizer.dispose()
  w.dispose()
  return values
}

describeWithBackends('optimizers', () => {
  it('AdamW matches a hand-computed two-step update (decoupled weight decay, bias correction)', () => {
    // w = [1, -2]; g1 = [0.5, -1]; g2 = [0.1, 0.2]; lr 0.1, betas (0.9, 0.999), eps 1e-8, lambda 0.01.
    // Step 1: w <- 0.999 w - 0.1 * g/|g|                      = [0.899000002, -1.898000001]
    // Step 2: m = [0.055, -0.07], v = [0.00025975, 0.001039], m_hat = m / 0.19, v_hat = v / 0.001999
    //         w <- 0.999 w - 0.1 m_hat / (sqrt(v_hat) + eps) = [0.817796906, -1.844999394]
    // (torch.optim.AdamW gives the same: 0.8177969063826518, -1.8449993939894944.)
    const adamw: OptimizerOptions = { kind: 'adamw', beta1: 0.9, beta2: 0.999, epsilon: 1e-8, weightDecay: 0.01 }
    expectArraysClose(run(adamw, [[0.5, -1]]), [0.899000002, -1.898000001], 1e-6, 0)
    expectArraysClose(
      run(adamw, [
        [0.5, -1],
        [0.1, 0.2],
      ]),
      [0.817796906, -1.844999394],
      1e-6,
      0,
    )
    // Weight decay is decoupled: with a zero gradient only the decay acts (Adam's update is 0/eps = 0).
    expectArraysClose(run(adamw, [[0, 0]]), [0.999, -1.998], 1e-7, 0)
    // ... and is skipped for parameters the filter excludes.
    expectArraysClose(
      run(adamw, [[0, 0]], 0.1, () => false),
      [1, -2],
      0,
      0,
    )
  })

  it('SGD with momentum, dampening, L2 decay and Nesterov matches torch.optim.SGD', () => {
    expectArraysClose(
      run({ kind: 'sgd', momentum: 0.9, dampening: 0.1, weightDecay: 0.05 }, [
        [0.5, -1],
        [0.1, 0.2],
        [0.3, 0.3],
      ]),
      [0.79480013625, -1.7388382725],
      1e-6,
      0,
    )
    expectArraysClose(
      run({ kind: 'sgd', momentum: 0.9, nesterov: true }, [
        [0.5, -1],
        [0.1, 0.2],
        [0.3, 0.3],
      ]),
      [0.74395, -1.7673],
      1e-6,
      0,
    )
    expectArraysClose(run({ kind: 'sgd' }, [[0.5, -1]]), [0.95, -1.9], 1e-7, 0)
  })

  it('exports and restores state exactly; rejects state that does not fit', async () => {
    const w = tf.variable(tf.tensor1d([1, -2]))
    const a = createOptimizer(new Map([['w', w]]), { kind: 'adamw' })
    a.step(new Map([['w', tf.tensor1d([0.5, -1])]]), 0.1)
    const state = await a.getState()
    expect(state.step).toBe(1)
    expect([...state.slots.keys()].sort()).toEqual(['exp_avg.w', 'exp_avg_sq.w'])
    const w2 = tf.variable(tf.tensor1d([1, -2]))
    const b = createOptimizer(new Map([['w', w2]]), { kind: 'adamw' })
    b.setState(state)
    const copy = tf.tensor1d(w.dataSync()) // a real copy (tf.clone shares the buffer on cpu)
    w2.assign(copy)
    copy.dispose() // w2 owns its memory alone, like w, so both take the same (in-place) update path
    a.step(new Map([['w', tf.tensor1d([0.1, 0.2])]]), 0.1)
    b.step(new Map([['w', tf.tensor1d([0.1, 0.2])]]), 0.1)
    expect(Array.from(w2.dataSync())).toEqual(Array.from(w.dataSync()))
    const sgd = createOptimizer(new Map([['w', w]]), { kind: 'sgd', momentum: 0.9 })
    expect(() => sgd.setState(state)).toThrow(/'adamw' but this optimizer is 'sgd'/)
    const badSlot = { ...state, slots: new Map([['exp_avg.v', { shape: [2], data: new Float32Array(2) }]]) }
    expect(() => b.setState(badSlot)).toThrow(AttnlabError)
    const badShape = { ...state, slots: new Map([['exp_avg.w', { shape: [3], data: new Float32Array(3) }]]) }
    expect(() => b.setState(badShape)).toThrow(/has shape \[3\] but parameter 'w' has \[2\]/)
    expect(() => b.setState({ ...state, step: -1 })).toThrow(/step/)
    expect(() => b.step(new Map([['nope', tf.zeros([2])]]), 0.1)).toThrow(/unknown parameter 'nope'/)
    expect(() => b.step(new Map([['w', tf.zeros([3])]]), 0.1)).toThrow(/shape/)
    ;[a, b, sgd].forEach((o) => {
      o.dispose()
    })
    tf.dispose([w, w2])
  })

  it('rejects invalid hyperparameters', () => {
    const vars = new Map([['w', tf.variable(tf.zeros([1]))]])
    expect(() => createOptimizer(vars, { kind: 'adamw', beta1: 1 })).toThrow(ConfigError)
    expect(() => createOptimizer(vars, { kind: 'adamw', weightDecay: -1 })).toThrow(/weightDecay/)
    expect(() => createOptimizer(vars, { kind: 'sgd', momentum: 1.5 })).toThrow(/momentum/)
    expect(() => createOptimizer(vars, { kind: 'sgd', nesterov: true })).toThrow(/Nesterov/)
    expect(() => createOptimizer(vars, { kind: 'rmsprop' } as never)).toThrow(
      /Invalid kind: got 'rmsprop'; expected one of adamw, sgd/,
    )
    vars.get('w')!.dispose()
  })

  it('clips by the global norm as clip_grad_norm_ and reports the norm', async () => {
    const grads = new Map([
      ['a', tf.tensor1d([3, 0])],
      ['b', tf.tensor1d([0, 4])],
    ])
    const clipped = clipByGlobalNorm(grads, 1)
    expect((await clipped.norm.data())[0]).toBeCloseTo(5, 6)
    expectArraysClose(await clipped.grads.get('a')!.data(), [3 / (5 + 1e-6), 0], 1e-7)
    const unclipped = clipByGlobalNorm(grads, 10)
    expectArraysClose(await unclipped.grads.get('b')!.data(), [0, 4], 0)
    const disabled = clipByGlobalNorm(grads, Infinity)
    expectArraysClose(await disabled.grads.get('a')!.data(), [3, 0], 0)
    expect(() => clipByGlobalNorm(grads, 0)).toThrow(ConfigError)
    tf.dispose([
      ...grads.values(),
      ...clipped.grads.values(),
      clipped.norm,
      ...unclipped.grads.values(),
      unclipped.norm,
      ...disabled.grads.values(),
      disabled.norm,
    ])
  })

  it('sums the squares of many gradients (more than one addN takes on webgpu) in order', async () => {
    for (const count of [0, 1, 7, 8, 20]) {
      const grads = new Map(Array.from({ length: count }, (_, i) => [`g${i}`, tf.tensor1d([i + 1, 1])] as const))
      const before = tf.memory().numTensors
      const { grads: clipped, norm } = clipByGlobalNorm(grads, Infinity)
      let expected = 0
      for (let i = 0; i < count; i++) expected += (i + 1) ** 2 + 1
      expect((await norm.data())[0]).toBeCloseTo(Math.sqrt(expected), 4)
      tf.dispose([...clipped.values(), norm])
      expect(tf.memory().numTensors).toBe(before)
      tf.dispose([...grads.values()])
    }
  })

  it('decays matrices only by default', () => {
    const matrix = tf.variable(tf.zeros([2, 2]))
    const vector = tf.variable(tf.zeros([2]))
    expect(decayMatrices('w', matrix)).toBe(true)
    expect(decayMatrices('b', vector)).toBe(false)
    tf.dispose([matrix, vector])
  })
})

describe('schedules', () => {
  it('constant', () => {
    const s = createSchedule({ kind: 'constant' }, 0.08, 100)
    expect(s.learningRate(0)).toBe(0.08)
    expect(s.learningRate(99)).toBe(0.08)
    expect(s.onValidation(1)).toBe(false)
  })

  it('warmup + cosine', () => {
    const s = createSchedule({ kind: 'warmup-cosine', warmupSteps: 10, minLr: 0.01 }, 0.1, 110)
    expect(s.learningRate(0)).toBeCloseTo(0.01, 12)
    expect(s.learningRate(9)).toBeCloseTo(0.1, 12)
    expect(s.learningRate(10)).toBeCloseTo(0.1, 12)
    expect(s.learningRate(60)).toBeCloseTo(0.055, 12)
    expect(s.learningRate(110)).toBe(0.01)
    expect(s.learningRate(500)).toBe(0.01)
    expect(() => createSchedule({ kind: 'warmup-cosine', warmupSteps: 10, totalSteps: 5 }, 0.1, 100)).toThrow(
      /totalSteps/,
    )
    expect(() => createSchedule({ kind: 'warmup-cosine', warmupSteps: -1 }, 0.1, 100)).toThrow(/warmupSteps/)
    expect(() => createSchedule({ kind: 'warmup-cosine', warmupSteps: 1, minLr: 1 }, 0.1, 100)).toThrow(/minLr/)
  })

  it('reduce-on-plateau follows torch ReduceLROnPlateau (mode min, rel threshold)', () => {
    const s = createSchedule(
      { kind: 'reduce-on-plateau', patience: 2, factor: 0.5, threshold: 0.01, minLr: 0.02 },
      0.1,
      100,
    )
    const losses = [1.0, 0.995, 0.999, 0.998, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5]
    const lrs = losses.map((l) => {
      s.onValidation(l)
      return s.learningRate(0)
    })
    // 0.995 is not a 1% improvement: bad evaluations 1, 2, 3 (> patience 2) -> halve at the 4th.
    expect(lrs.slice(0, 5)).toEqual([0.1, 0.1, 0.1, 0.05, 0.05])
    expect(lrs[7]).toBe(0.025)
    expect(lrs[10]).toBe(0.02) // floored at minLr
    const state = s.getState()
    const t = createSchedule(
      { kind: 'reduce-on-plateau', patience: 2, factor: 0.5, threshold: 0.01, minLr: 0.02 },
      0.1,
      100,
    )
    t.setState(state)
    expect(t.getState()).toEqual(state)
    expect(() => t.setState({ ...state, kind: 'constant' })).toThrow(/'constant' but the run uses 'reduce-on-plateau'/)
    expect(() => t.setState({ ...state, currentLr: -1 })).toThrow(AttnlabError)
    expect(() => createSchedule({ kind: 'reduce-on-plateau', factor: 1 }, 0.1, 10)).toThrow(/factor/)
    expect(() => createSchedule({ kind: 'constant' }, 0, 10)).toThrow(/lr/)
    expect(() => createSchedule({ kind: 'nope' } as never, 0.1, 10)).toThrow(
      /Invalid kind: got 'nope'; expected one of constant, warmup-cosine, reduce-on-plateau/,
    )
  })
})
