import { describe, expect, it } from 'vitest'
import type { SparseMethodName } from '@attnlab/sparse-attention'
import {
  isoCostPoints,
  relativeErrors,
  sparseEvalIsoCostSpec,
  sparseEvalRelativeErrorSpec,
  sparseEvalReportHtml,
} from './sparse-eval-report.ts'
import type { SparseEvalRow } from './sparse-eval.ts'

/** A row with what the reports read; the rest fixed. */
function row(
  method: SparseMethodName,
  targetSparsity: number,
  score: number,
  relative: number | null,
  length = 64,
  task = 'niah-tokens',
): SparseEvalRow {
  const decode = method === 'quest' || method === 'snapkv' || method === 'ada-snapkv'
  return {
    task,
    length,
    promptTokens: length - 8,
    method,
    phase: method === 'dense' || targetSparsity === 0 ? null : decode ? 'decode' : 'prefill',
    targetSparsity,
    samples: 10,
    score,
    scoreStd: 0.1,
    strict: score,
    strictStd: 0.1,
    iou: score,
    exactSparsity: targetSparsity,
    reportedSparsity: targetSparsity,
    targetReached: true,
    budget: {},
    config: {},
    cost:
      relative === null
        ? null
        : { metric: decode ? 'decode-memory' : 'prefill-flops', value: relative * 100, dense: 100, relative },
  }
}

describe('relative error against length', () => {
  it('is (dense - sparse) / dense per task and length, without dense rows or a dense score of 0', () => {
    const rows = [
      row('dense', 0, 0.8, 1, 32),
      row('quest', 0, 0.8, 1, 32),
      row('quest', 0.9, 0.4, 0.2, 32),
      row('dense', 0, 0.5, 1, 64),
      row('quest', 0.9, 0.6, 0.15, 64),
      row('dense', 0, 0, 1, 128),
      row('quest', 0.9, 0.1, 0.12, 128),
    ]
    const points = relativeErrors(rows)
    expect(points.map((p) => [p.length, p.targetSparsity])).toEqual([
      [32, 0.9],
      [64, 0.9],
    ])
    expect(points[0]?.relativeError).toBeCloseTo(0.5, 12)
    expect(points[1]?.relativeError).toBeCloseTo(-0.2, 12) // better than dense: below 0
    const spec = sparseEvalRelativeErrorSpec(rows, 't') as { data: { values: unknown[] } }
    expect(spec.data.values).toEqual(points)
  })
})

describe('isoCost frontier', () => {
  it('marks the points no cheaper-and-better point dominates, per task, length and cost metric', () => {
    const rows = [
      row('dense', 0, 0.8, 1),
      row('vertical-slash', 0.5, 0.8, 0.6), // as good as dense, cheaper: dominates dense
      row('vertical-slash', 0.9, 0.5, 0.3), // cheaper, worse: on the frontier
      row('block-sparse', 0.9, 0.4, 0.35), // dearer and worse than VS 0.9: dominated
      row('quest', 0.9, 0.3, 0.2), // decode: its own set, with its own dense point
      row('snapkv', 0.9, 0.1, 0.1),
      row('snapkv', 0.95, 0.1, 0.05), // equal score, cheaper: dominates snapkv 0.9
      row('ada-snapkv', 0.5, 0.9, null), // no cost: left out
    ]
    const points = isoCostPoints(rows)
    const by = (method: string, s: number, metric: string) =>
      points.find((p) => p.method === method && p.targetSparsity === s && p.metric === metric)
    expect(points).toHaveLength(8) // 6 sparse points with a cost + dense once per metric
    expect(by('dense', 0, 'prefill-flops')?.frontier).toBe(false)
    expect(by('vertical-slash', 0.5, 'prefill-flops')?.frontier).toBe(true)
    expect(by('vertical-slash', 0.9, 'prefill-flops')?.frontier).toBe(true)
    expect(by('block-sparse', 0.9, 'prefill-flops')?.frontier).toBe(false)
    expect(by('dense', 0, 'decode-memory')?.frontier).toBe(true) // nothing in decode scores 0.8
    expect(by('quest', 0.9, 'decode-memory')?.frontier).toBe(true)
    expect(by('snapkv', 0.9, 'decode-memory')?.frontier).toBe(false)
    expect(by('snapkv', 0.95, 'decode-memory')?.frontier).toBe(true)
    expect(points.some((p) => p.method === 'ada-snapkv')).toBe(false)
    const spec = sparseEvalIsoCostSpec(rows, 't') as { data: { values: unknown[] } }
    expect(spec.data.values).toEqual(points)
  })
})

describe('report.html', () => {
  it('holds the three figures, or says why one is missing', async () => {
    const two = [
      row('dense', 0, 0.8, 1, 32),
      row('quest', 0.9, 0.4, 0.2, 32),
      row('dense', 0, 0.6, 1, 64),
      row('quest', 0.9, 0.5, 0.15, 64),
    ]
    const html = await sparseEvalReportHtml({ context: 64, decoding: 'greedy', seed: 0, rows: two }, 'two lengths')
    expect(html.match(/<svg/g)?.length).toBe(3)
    const one = await sparseEvalReportHtml(
      { context: 64, decoding: 'greedy', seed: 0, rows: [row('dense', 0, 0.8, null), row('quest', 0.9, 0.4, null)] },
      'one length, no cost',
    )
    expect(one.match(/<svg/g)?.length).toBe(1)
    expect(one).toContain('needs at least two lengths')
    expect(one).toContain('no row has a cost')
  })
})
