import { describe, expect, it } from 'vitest'
import { NonFiniteError, Rng } from '@attnlab/core'
import { expectArraysClose } from '@attnlab/core/testing'
import { resolveDynamicsConfig, type DynamicsConfig } from './config.ts'
import { GradientFlowSystem } from './system.ts'
import { buildTarget } from './target.ts'

/** Independent loss L(V, S) = 1/2 ||G - sum_k V_k s_k^T||^2 with V [h, F], S [h, T]. */
function lossOf(G: Float64Array, V: number[], S: number[], h: number, F: number, T: number): number {
  let sum = 0
  for (let f = 0; f < F; f++) {
    for (let p = 0; p < T; p++) {
      let r = G[f * T + p] as number
      for (let k = 0; k < h; k++) r -= (V[k * F + f] as number) * (S[k * T + p] as number)
      sum += r * r
    }
  }
  return 0.5 * sum
}

function softmaxRows(u: number[], h: number, T: number): number[] {
  const out: number[] = []
  for (let k = 0; k < h; k++) {
    const row = u.slice(k * T, (k + 1) * T)
    const max = Math.max(...row)
    const e = row.map((x) => Math.exp(x - max))
    const z = e.reduce((a, b) => a + b, 0)
    out.push(...e.map((x) => x / z))
  }
  return out
}

function randomState(system: GradientFlowSystem, seed: number): number[] {
  const rng = Rng.fromSeed(seed)
  return Array.from({ length: system.dimension }, () => rng.normal())
}

function setup(partial: Partial<DynamicsConfig>) {
  const config = resolveDynamicsConfig({ nHeads: 2, nCtx: 6, spans: [1, 2], importanceRatio: 1.7, ...partial })
  const system = new GradientFlowSystem(config)
  const G = buildTarget(config).matrix
  return { config, system, G, h: 2, F: 2, T: 6 }
}

describe('GradientFlowSystem', () => {
  it('logit variant is the exact gradient flow of L + lambda/2 (|V|^2 + |u|^2) (finite differences)', () => {
    for (const lambda of [0, 0.3]) {
      const { system, G, h, F, T } = setup({ variant: 'logit', weightDecay: lambda })
      const y = randomState(system, 1)
      const objective = (state: number[]): number => {
        const V = state.slice(0, h * F)
        const u = state.slice(h * F)
        return lossOf(G, V, softmaxRows(u, h, T), h, F, T) + 0.5 * lambda * state.reduce((a, x) => a + x * x, 0)
      }
      const numeric = y.map((_, i) => {
        const step = 1e-6
        const plus = [...y]
        const minus = [...y]
        plus[i] = (plus[i] as number) + step
        minus[i] = (minus[i] as number) - step
        return -(objective(plus) - objective(minus)) / (2 * step)
      })
      expectArraysClose(system.derivative(y), numeric, 1e-6, 1e-6)
    }
  })

  it('replicator variant gives ds/dt = J(s) (R^T V - lambda s) and dV/dt = R s - lambda V', () => {
    for (const lambda of [0, 0.2]) {
      const { system, G, h, F, T } = setup({ variant: 'replicator', weightDecay: lambda })
      const y = randomState(system, 2)
      const V = y.slice(0, h * F)
      const S = softmaxRows(y.slice(h * F), h, T)
      const dy = system.derivative(y)
      // -dL/dV and -dL/ds by finite differences of the independent loss.
      const grad = (which: 'V' | 'S', i: number): number => {
        const step = 1e-6
        const a = which === 'V' ? [...V] : [...S]
        const b = which === 'V' ? [...V] : [...S]
        a[i] = (a[i] as number) + step
        b[i] = (b[i] as number) - step
        const la = which === 'V' ? lossOf(G, a, S, h, F, T) : lossOf(G, V, a, h, F, T)
        const lb = which === 'V' ? lossOf(G, b, S, h, F, T) : lossOf(G, V, b, h, F, T)
        return -(la - lb) / (2 * step)
      }
      expectArraysClose(
        dy.slice(0, h * F),
        V.map((v, i) => grad('V', i) - lambda * v),
        1e-6,
        1e-6,
      )
      for (let k = 0; k < h; k++) {
        const s = S.slice(k * T, (k + 1) * T)
        const w = s.map((sp, p) => grad('S', k * T + p) - lambda * sp)
        const mean = s.reduce((a, sp, p) => a + sp * (w[p] as number), 0)
        const expected = s.map((sp, p) => sp * ((w[p] as number) - mean)) // J(s) w
        const du = dy.slice(h * F + k * T, h * F + (k + 1) * T)
        const duMean = s.reduce((a, sp, p) => a + sp * (du[p] as number), 0)
        const ds = s.map((sp, p) => sp * ((du[p] as number) - duMean)) // ds = J(s) du
        expectArraysClose(ds, expected, 1e-6, 1e-6)
      }
    }
  })

  it('fast-value limit: V is the ridge optimum (dV would vanish) and the state holds only logits', () => {
    const { system, G, h, F, T } = setup({ fastValue: true, weightDecay: 0.05, initNoise: 1e-3 })
    expect(system.dimension).toBe(h * T)
    const y = randomState(system, 3)
    const { values, attention } = system.evaluate(y)
    // Gradient of L + lambda/2 |V|^2 w.r.t. V vanishes at the optimum.
    for (let k = 0; k < h; k++) {
      for (let f = 0; f < F; f++) {
        let g = 0.05 * (values[k * F + f] as number)
        for (let p = 0; p < T; p++) {
          let r = G[f * T + p] as number
          for (let j = 0; j < h; j++) r -= (values[j * F + f] as number) * (attention[j * T + p] as number)
          g -= r * (attention[k * T + p] as number)
        }
        expect(Math.abs(g)).toBeLessThan(1e-10)
      }
    }
  })

  it('fast-value limit without weight decay: V = G pinv(S^T), identical heads split it equally', () => {
    const { system } = setup({ fastValue: true, initNoise: 0 })
    const y = randomState(system, 4)
    const same = [...y.slice(0, 6), ...y.slice(0, 6)] // two bit-identical heads
    const { values, loss } = system.evaluate(same)
    expect(Array.from(values.slice(0, 2))).toEqual(Array.from(values.slice(2, 4)))
    // One distinct attention column: the best rank-1 fit leaves the loss of projecting G on s.
    expect(loss).toBeGreaterThan(0)
    const distinct = system.evaluate(y)
    expect(distinct.loss).toBeLessThan(loss)
  })

  it('starts from V = 0 and softmax(eps T z): eps = 0 gives exactly uniform identical heads', () => {
    const { system } = setup({ initNoise: 0 })
    const y0 = system.initialState()
    expect(y0.every((v) => v === 0)).toBe(true)
    const noisy = new GradientFlowSystem(
      resolveDynamicsConfig({ nHeads: 2, nCtx: 6, spans: [1, 2], initNoise: 1e-3, seed: 7 }),
    )
    const { attention } = noisy.evaluate(noisy.initialState())
    for (const s of attention) expect(Math.abs(s - 1 / 6)).toBeLessThan(1e-2)
    expect(attention[0]).not.toBe(attention[6])
    // Head k's noise does not depend on the number of heads.
    const three = new GradientFlowSystem(
      resolveDynamicsConfig({ nHeads: 3, nCtx: 6, spans: [1, 2], initNoise: 1e-3, seed: 7 }),
    )
    expect(three.initialState().slice(3 * 2, 3 * 2 + 12)).toEqual(noisy.initialState().slice(2 * 2))
  })

  it('throws NonFiniteError on a diverged state', () => {
    const { system } = setup({})
    const y = system.initialState()
    y[system.logitOffset] = Number.NaN
    expect(() => system.derivative(y)).toThrow(NonFiniteError)
    const big = system.initialState()
    big[0] = Number.POSITIVE_INFINITY
    expect(() => system.evaluate(big)).toThrow(NonFiniteError)
  })
})
