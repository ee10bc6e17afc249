// The reports of compareWithDense: notes under the table and the Vega-Lite spec (notes tests
// moved from apps/cli's sparse tests, assertions unchanged).
import { describe, expect, it } from 'vitest'
import { clampReportedSparsity, compareNotes, compareSpec, targetReached, type CompareRow } from './index.ts'

const row = (method: CompareRow['method'], target: number, exact: number, reported: number): CompareRow => {
  const { clamped, budgetExceedsPrompt } = clampReportedSparsity(reported)
  return {
    method,
    phase: 'prefill',
    targetSparsity: target,
    config: {},
    exactSparsity: exact,
    reportedSparsity: reported,
    reportedSparsityClamped: clamped,
    budgetExceedsPrompt,
    targetReached: Math.max(exact, clamped) >= target - 0.02,
    top1Agreement: 1,
    klDenseSparse: 0,
    positions: 1,
  }
}

const NEGATIVE_NOTE =
  /^\* budget exceeds the prompt: the study's reported sparsity is < 0 \(vertical-slash -1\.050\).*109-token prompt/

describe('reported sparsity below 0 and unreachable targets', () => {
  it('clampReportedSparsity clamps at 0 and says when the budget exceeds the prompt', () => {
    expect(clampReportedSparsity(-0.2451)).toEqual({ clamped: 0, budgetExceedsPrompt: true })
    expect(clampReportedSparsity(0.6)).toEqual({ clamped: 0.6, budgetExceedsPrompt: false })
  })

  it('targetReached allows the tolerance in either accounting', () => {
    expect(targetReached(0.8, 0.781, 0)).toBe(true)
    expect(targetReached(0.8, 0.5, 0.79)).toBe(true)
    expect(targetReached(0.8, 0.77, 0.7)).toBe(false)
  })

  const title =
    'compare notes explain negative reported sparsities and warn about unreached targets with the achieved value'
  it(title, () => {
    const rows = [
      row('vertical-slash', 0.5, 0.498, -1.05),
      row('vertical-slash', 0.95, 0.861, -1.05),
      row('block-sparse', 0.8, 0.661, 0.64),
      row('block-sparse', 0.95, 0.661, 0.64),
    ]
    const notes = compareNotes(rows, 109)
    expect(notes[0]).toMatch(NEGATIVE_NOTE)
    expect(notes.slice(1)).toEqual([
      'warning: vertical-slash does not reach target sparsity 0.95 at 109 tokens: achieved 0.861 exact, 0.000 reported',
      'warning: block-sparse does not reach target sparsity 0.80 at 109 tokens: achieved 0.661 exact, 0.640 reported',
      'warning: block-sparse does not reach target sparsity 0.95 at 109 tokens: achieved 0.661 exact, 0.640 reported',
    ])
    expect(compareNotes([row('quest', 0.5, 0.49, 0.5)], 109)).toEqual([])
  })
})

describe('compareSpec', () => {
  it('is a two-panel Vega-Lite spec of KL and top-1 against the exact sparsity, one value per row', () => {
    const spec = compareSpec([row('snapkv', 0.5, 0.5, 0.5), row('quest', 0.8, 0.79, 0.8)], 'title')
    expect(spec.$schema).toMatch(/vega-lite\/v6/)
    expect(spec.title).toBe('title')
    expect(spec.data.values).toEqual([
      { method: 'snapkv', exactSparsity: 0.5, kl: 0, top1: 1 },
      { method: 'quest', exactSparsity: 0.79, kl: 0, top1: 1 },
    ])
    expect(spec.hconcat.map((p) => [p.encoding.x.field, p.encoding.y.field, p.encoding.y.title])).toEqual([
      ['exactSparsity', 'kl', 'KL(dense || sparse), nats'],
      ['exactSparsity', 'top1', 'top-1 agreement with dense'],
    ])
    expect(spec.hconcat[1]?.encoding.y.scale).toEqual({ nice: true, zero: true, domain: [0, 1] })
    expect(JSON.parse(JSON.stringify(spec))).toEqual(spec)
  })
})
