import { describe, expect, it } from 'vitest'
import type { OracleLine } from './oracles.ts'
import { analyzeRun, describeLearned, describePlateau, learnedHeader, type MetricLine } from './stages.ts'

const oracles: OracleLine[] = [
  { label: 'chance (ln 2)', kind: 'chance', value: Math.LN2, standardError: null, bounds: null, method: 'closed-form' },
  { label: 'Bayes floor', kind: 'floor', value: 0, standardError: null, bounds: null, method: 'closed-form' },
]

/** An evaluation of a run without span masses (the loss method). */
function line(step: number, perPositionLoss: number[]): MetricLine {
  const scored = perPositionLoss.length
  return {
    seed: 0,
    step,
    tokens: step * 100,
    seconds: step,
    trainLoss: null,
    validationLoss: perPositionLoss.reduce((a, b) => a + b, 0) / scored,
    lr: 0.001,
    spanMass: null,
    attentionEntropy: [],
    teacherKL: null,
    valueAlignment: null,
    perPositionLoss,
  }
}

describe('analyzeRun (loss method)', () => {
  it('gives a stage passed between two evaluations the loss at its middle, not the final loss', () => {
    const L = Math.LN2
    // Positions 1 and 2 both drop between steps 20 and 30 (two stages in one interval),
    // position 3 at step 60-70; the run ends near 0.
    const lines = [
      line(0, [L, L, L]),
      line(10, [L, L, L]),
      line(20, [L, L, L]),
      line(30, [0.05, 0.05, L]),
      line(40, [0.05, 0.05, L]),
      line(50, [0.05, 0.05, L]),
      line(60, [0.05, 0.05, L]),
      line(70, [0.01, 0.01, 0.01]),
      line(80, [0.01, 0.01, 0.01]),
    ]
    const analysis = analyzeRun(lines, [], [], oracles)
    expect(analysis.method).toBe('loss')
    expect(analysis.stages).toHaveLength(3)
    const [first, second, third] = analysis.stages
    // Both first drops are interpolated inside (20, 30).
    expect(first!.step).toBeGreaterThan(20)
    expect(second!.step).toBeLessThanOrEqual(30)
    // Stage 1 has no evaluation inside it: its plateau lies between the losses at 20 and 30.
    expect(first!.plateauLoss).toBeLessThan(lines[2]!.validationLoss)
    expect(first!.plateauLoss).toBeGreaterThan(lines[3]!.validationLoss)
    expect(first!.plateauLoss).not.toBeCloseTo(lines.at(-1)!.validationLoss, 2)
    expect(first!.plateauEvaluations).toBe(0)
    // Stage 2 holds from 30 to 60: the median over its evaluations.
    expect(second!.plateauEvaluations).toBeGreaterThan(0)
    expect(second!.plateauLoss).toBeCloseTo(lines[5]!.validationLoss, 6)
    expect(third!.plateauLoss).toBeCloseTo(0.01, 6)
    // The table marks the interpolated plateau and names positions, not spans and heads.
    expect(describePlateau(first!)).toMatch(/^~\d\.\d{3}$/)
    expect(describePlateau(second!)).toMatch(/^\d\.\d{3}$/)
    expect(learnedHeader(analysis.method)).toBe('learned (output position)')
    expect(describeLearned(third!)).toBe('position 3')
    // Plateaus never go back up.
    const plateaus = analysis.stages.map((s) => s.plateauLoss)
    for (let j = 1; j < plateaus.length; j++) expect(plateaus[j]).toBeLessThanOrEqual(plateaus[j - 1] as number)
  })
})
