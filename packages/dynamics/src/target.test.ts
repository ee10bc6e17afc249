import { describe, expect, it } from 'vitest'
import { resolveDynamicsConfig } from './config.ts'
import { GradientFlowSystem } from './system.ts'
import { buildTarget, learningOrder, plateauLosses } from './target.ts'

describe('target and plateaus', () => {
  it('lays spans out from position 0 with c_j in row j and zero columns after', () => {
    const target = buildTarget(resolveDynamicsConfig({ spans: [2, 1], nCtx: 5, importanceRatio: 2 }))
    expect(Array.from(target.matrix)).toEqual([2, 2, 0, 0, 0, 0, 0, 1, 0, 0])
    expect(target.spanPositions).toEqual([[0, 1], [2]])
    expect(Array.from(target.spanOf)).toEqual([0, 0, 1, -1, -1])
  })

  it('gives the closed form L_j = 1/2 sum_{g>j} |span_g| c_g^2 (6.121, 1.945, 0.5, 0 for singletons)', () => {
    const plateaus = plateauLosses(resolveDynamicsConfig())
    expect(plateaus).toHaveLength(4)
    expect(plateaus[0]).toBeCloseTo(0.5 * (1.7 ** 4 + 1.7 ** 2 + 1), 12)
    expect(plateaus[1]).toBeCloseTo(0.5 * (1.7 ** 2 + 1), 12)
    expect(plateaus[2]).toBeCloseTo(0.5, 12)
    expect(plateaus[3]).toBe(0)
    const spans = [2, 2, 2]
    const wide = plateauLosses(resolveDynamicsConfig({ spans, importanceRatio: 1.3, nCtx: 10 }))
    expect(wide[1]).toBeCloseTo(0.5 * (2 * 1.3 ** 2 + 2), 12)
  })

  it('orders uneven spans by strength c_j^2 |span_j|', () => {
    const config = resolveDynamicsConfig({ spans: [2, 1, 3], importanceRatio: 1.5, nCtx: 12 })
    expect(learningOrder(config)).toEqual([0, 2, 1])
    const plateaus = plateauLosses(config)
    expect(plateaus[1]).toBeCloseTo(0.5 * (1.5 ** 2 + 3), 12)
    expect(plateaus[2]).toBeCloseTo(0.5 * 1.5 ** 2, 12)
  })

  it('starts the flow at L_0 (V = 0)', () => {
    const config = resolveDynamicsConfig({ nCtx: 12, spans: [1, 2, 1] })
    const system = new GradientFlowSystem(config)
    expect(system.evaluate(system.initialState()).loss).toBeCloseTo(plateauLosses(config)[0] as number, 12)
  })
})
