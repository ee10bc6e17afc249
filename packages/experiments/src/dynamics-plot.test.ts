import { analyzeTrajectory, simulate } from '@attnlab/dynamics'
import { describe, expect, it } from 'vitest'
import { dynamicsPlotSpec, renderSvg } from './index.ts'

// The run of the CLI's `dynamics simulate --plot` test: spans [1, 1, 1] (h = 2, T = 12), logit variant.
const trajectory = simulate(
  { nHeads: 2, nCtx: 12, spans: [1, 1, 1], importanceRatio: 1.7, initNoise: 1e-6, seed: 0, variant: 'logit' },
  { tMax: 400, points: 40 },
)
const analysis = analyzeTrajectory(trajectory)

interface Layer {
  data: { values: Record<string, unknown>[] }
  mark: { type: string }
  encoding: Record<string, { field?: string; type?: string; scale?: unknown }>
}
interface Spec {
  title: string
  vconcat: [{ layer: Layer[] }, Layer & { facet: { row: { field: string } }; spec: Omit<Layer, 'data'> }]
}

describe('dynamicsPlotSpec', () => {
  const spec = dynamicsPlotSpec(trajectory, analysis) as unknown as Spec
  const [lossPanel, massPanel] = spec.vconcat
  const [loss, plateaus, rules, labels] = lossPanel.layer as [Layer, Layer, Layer, Layer]

  it('plots the loss on log axes at every positive time (floored at 1e-8)', () => {
    const positive = [...trajectory.times].filter((t) => t > 0)
    expect(loss.data.values.map((r) => r.t)).toEqual(positive)
    const first = trajectory.times.findIndex((t) => t > 0)
    expect(loss.data.values[0]).toEqual({
      t: trajectory.times[first],
      loss: Math.max(trajectory.loss[first] as number, 1e-8),
    })
    expect(loss.mark.type).toBe('line')
    expect(loss.encoding.x).toMatchObject({ field: 't', type: 'quantitative', scale: { type: 'log' } })
    expect(loss.encoding.y).toMatchObject({ field: 'loss', type: 'quantitative', scale: { type: 'log' } })
  })

  it('draws the positive plateaus and the reached transitions as rules', () => {
    expect(plateaus.data.values).toEqual(
      analysis.plateaus.filter((p) => p > 0).map((p, j) => ({ loss: p, label: `L_${j}` })),
    )
    expect(plateaus.mark.type).toBe('rule')
    const reached = analysis.transitions.filter((t) => t.time !== null)
    expect(reached.length).toBeGreaterThan(0)
    expect(rules.data.values).toEqual(reached.map((t) => ({ t: t.time, label: `t${t.stage}` })))
    expect(labels.mark.type).toBe('text')
    expect(labels.encoding.text).toEqual({ field: 'label' })
  })

  it('has one mass row per time, head and span: heads L0H*, spans numbered oldest first', () => {
    const P = loss.data.values.length
    const rows = massPanel.data.values
    expect(rows).toHaveLength(P * 2 * 3)
    expect(new Set(rows.map((r) => r.head))).toEqual(new Set(['L0H0', 'L0H1']))
    // The package's span 0 is the most important (newest): span 2 oldest first.
    const first = trajectory.times.findIndex((t) => t > 0)
    expect(rows[0]).toEqual({
      t: trajectory.times[first],
      head: 'L0H0',
      span: 'span 2',
      mass: trajectory.spanMass[first * 6],
    })
    expect(rows[2]?.span).toBe('span 0')
    expect(massPanel.facet.row.field).toBe('head')
    expect(massPanel.spec.encoding.y).toMatchObject({ field: 'mass', scale: { domain: [0, 1] } })
    expect(massPanel.spec.encoding.color).toMatchObject({ field: 'span', type: 'nominal' })
    expect(spec.title).toBe(
      'Reduced gradient flow (logit): h=2, T=12, spans=[1,1,1] (oldest first), m=1.7, eps=0.000001, seed=0',
    )
  })

  it('renders to SVG', async () => {
    const svg = await renderSvg(dynamicsPlotSpec(trajectory, analysis))
    expect(svg.startsWith('<svg')).toBe(true)
    expect(svg).toContain('L0H1')
  })
})
