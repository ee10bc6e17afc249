import { describe, expect, it } from 'vitest'
import { SWEEP_EXPERIMENTS, sparseEvalMetricKey } from './experiments.ts'

const experiment = SWEEP_EXPERIMENTS['sparse-eval']

describe('the sparse-eval sweep experiment', () => {
  it('validates settings with the experiment validator', () => {
    expect(() => experiment?.validate({ ...experiment.defaults(() => undefined), model: 'runs/m' })).not.toThrow()
    expect(() => experiment?.validate(experiment.defaults(() => undefined))).toThrow(/Invalid model/)
  })

  it('gives one metric per row, keyed by length and target sparsity', () => {
    const row = (targetSparsity: number, score: number, cost: { relative: number } | null) => ({
      task: 'niah-tokens',
      length: 128,
      samples: 10,
      targetSparsity,
      score,
      scoreStd: 0.1,
      strict: 0.5,
      iou: 0.6,
      exactSparsity: targetSparsity,
      reportedSparsity: targetSparsity,
      cost,
    })
    const head = { task: 'niah-tokens', length: 128, samples: 10, layer: 1, head: 0, self: 0.1 }
    const heads = [{ ...head, retrieval: 0.87, uniform: 0.01, previousToken: 0.02 }]
    const metrics = experiment?.metrics({
      rows: [row(0, 0.9, { relative: 1 }), row(0.9, 0.4, null)],
      heads,
      seconds: 3,
    })
    expect(metrics?.retrievalL128B1H0).toBe(0.87)
    expect(metrics?.previousTokenL128B1H0).toBe(0.02)
    expect(metrics?.uniformL128).toBe(0.01)
    expect(metrics?.[sparseEvalMetricKey('score', 128, 0.9)]).toBe(0.4)
    expect(metrics?.scoreL128S0).toBe(0.9)
    expect(metrics?.relativeCostL128S0).toBe(1)
    expect(metrics?.['relativeCostL128S0.9']).toBeNull()
    expect(metrics?.samples).toBe(10)
    expect(metrics?.evalSeconds).toBe(3)
  })
})
