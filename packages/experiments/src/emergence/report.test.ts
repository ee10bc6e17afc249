import { describe, expect, it } from 'vitest'
import { buildReport, type ReportInput, type SeedReport } from './report.ts'
import type { MetricLine, RunAnalysis } from './stages.ts'

const heads = ['L0H0', 'L0H1']
const groupNames = ['span 1 (newest, c=1.500)', 'span 0 (oldest, c=1.000)']

function line(step: number, loss: number): MetricLine {
  return {
    seed: 0,
    step,
    tokens: step,
    seconds: step,
    trainLoss: loss,
    validationLoss: loss,
    lr: 0.01,
    spanMass: [
      [0.6, 0.2],
      [0.3, 0.6],
    ],
    attentionEntropy: [1, 1],
    teacherKL: null,
    valueAlignment: null,
    perPositionLoss: [],
  }
}

const analysis: RunAnalysis = {
  method: 'spans',
  stages: [],
  phases: [],
  finalHolders: [],
  eachSpanOwnHead: false,
  emergenceStep: null,
  positionEmergence: [],
  entropyDrops: [],
  headSimilarity: [],
}

/** A 4-position pattern per head: uniform over the causal keys. */
const pattern = Array.from({ length: 4 }, (_, q) => Array.from({ length: 4 }, (_, k) => (k <= q ? 1 / (q + 1) : 0)))

function input(): ReportInput {
  const seed: SeedReport = {
    seed: 0,
    lines: [line(0, 2), line(10, 1.5), line(20, 1)],
    analysis,
    snapshots: [{ seed: 0, step: 20, label: 'end', patterns: [pattern, pattern] }],
    ode: {
      config: { nHeads: 2, nCtx: 4, spans: [1, 1], m: 1.5, initNoise: 1e-6, variant: 'replicator' },
      fit: { scale: 3, rmse: 0.1, transitions: [] } as never,
      curve: { step: [0, 10, 20], loss: [2, 1.4, 1.05] },
      runPlateaus: [2, 1.5, 1],
      odePlateaus: [1.6, 0.5, 0],
    },
  }
  return {
    title: 't',
    description: 'd',
    settings: {},
    oracles: [],
    oracleNote: 'n',
    groupNames,
    groupOffsets: [[0], [1]],
    heads,
    seeds: [seed],
    headline: [],
    interrupted: false,
  }
}

/** The SVG of the figure whose heading starts with `title`. */
function figureSvg(html: string, title: string): string {
  const start = html.indexOf(`<h2>${title}`)
  expect(start).toBeGreaterThan(0)
  return html.slice(start, html.indexOf('</figure>', start))
}

describe('buildReport', () => {
  it('gives the ODE-vs-run chart a legend naming both curves', async () => {
    const svg = figureSvg(await buildReport(input()), '4. The reduced ODE model')
    expect(svg).toMatch(/<text[^>]*>transformer \(validation\)<\/text>/)
    expect(svg).toMatch(/<text[^>]*>reduced ODE \(x3\.0 steps per unit time\)<\/text>/)
  }, 300_000)

  it('outlines the span positions on the attention-pattern heatmaps, with a legend', async () => {
    const svg = figureSvg(await buildReport(input()), '3. Attention patterns')
    for (const name of groupNames) expect(svg).toContain(`>${name}</text>`)
    expect(svg).toMatch(/span positions/)
  }, 300_000)

  it('keeps section 4 without an ODE fit and says why in one line (2 of 3 stages found)', async () => {
    const base = input()
    const stage: RunAnalysis['stages'][number] = {
      stage: 1,
      step: 10,
      spans: [0],
      spanNames: ['span 0'],
      heads: ['L0H0'],
      plateauLoss: 1,
      plateauEvaluations: 1,
      nearestOracle: null,
    }
    const first = base.seeds[0] as SeedReport
    const seeds: SeedReport[] = [
      { ...first, ode: null, analysis: { ...analysis, stages: [stage, stage] } },
      { ...first, seed: 1, ode: null },
    ]
    const html = await buildReport({ ...base, groupNames: [...groupNames, 'span 2'], seeds })
    const headings = [...html.matchAll(/<h2>(\d)\. /g)].map((match) => match[1])
    expect(headings).toEqual(['1', '2', '3', '4', '5'])
    expect(html).toContain(
      '<h2>4. The reduced ODE model against the run</h2><p>No ODE fit for seed 0: 2 of 3 stages found, ' +
        "fewer than the ODE's 3 transitions",
    )
    const noted = await buildReport({ ...base, seeds: [{ ...first, ode: null, odeNote: 'not on this task.' }] })
    expect(noted).toContain('<p>No ODE fit: not on this task.</p>')
  }, 300_000)
})
