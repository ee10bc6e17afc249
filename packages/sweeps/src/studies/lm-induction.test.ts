import { describe, expect, it } from 'vitest'
import { TRIAL_RECORD_FORMAT, type TrialRecord } from '../record.ts'
import { buildStudyReport, getStudy, studySweeps } from './index.ts'
import { curvesOf, riseIntervals } from './lm-induction.ts'

const STEPS = 600

/** A done train trial of the study with an induction-gain curve (one value per 50 steps) and head damages. */
function trial(seed: number, gains: readonly number[], step: number | null, damages: Record<string, number> = {}) {
  const metrics: Record<string, number | null> = {
    finalValidationLoss: 1.7,
    steps: STEPS,
    inductionStep: step,
    finalInductionGain: gains[gains.length - 1] ?? null,
  }
  gains.forEach((g, i) => {
    metrics[`inductionGainStep${50 * (i + 1)}`] = g
  })
  for (const [head, damage] of Object.entries(damages)) metrics[`headDamage${head}`] = damage
  const record: TrialRecord = {
    format: TRIAL_RECORD_FORMAT,
    sweep: 'lm-induction',
    id: `t${seed}`,
    index: seed,
    experiment: 'train',
    params: {},
    seed,
    settings: { task: { kind: 'text-chars' }, steps: STEPS },
    status: 'done',
    attempts: 1,
    error: null,
    attnlabVersion: '0.0.0',
    backend: 'cpu',
    host: 'test',
    startedAt: '',
    finishedAt: '',
    durationSeconds: 1,
    metrics,
    runDirectory: `trials/t${seed}`,
  }
  return record
}

/** A curve that sits at 0 and jumps to 3 nats at evaluation `at` (1-based), within `width` evaluations. */
function jump(at: number, width = 1): number[] {
  return Array.from({ length: STEPS / 50 }, (_, i) => {
    const k = i + 1
    return k < at ? 0 : k >= at + width - 1 ? 3 : (3 * (k - at + 1)) / width
  })
}

describe('lm-induction', () => {
  const study = getStudy('lm-induction')

  it('runs a 2-layer gpt on the text task with the induction probe, 4 seeds by default', () => {
    const [sweep] = studySweeps(study, 'default')
    expect(sweep?.part).toBe('text')
    expect(sweep?.spec.experiment).toBe('train')
    expect(sweep?.spec.base).toMatchObject({ task: { kind: 'text-chars' }, preset: 'gpt', probe: 'induction' })
    expect(sweep?.spec.base).toMatchObject({ model: { nLayers: 2 } })
    // --steps reaches a train trial's top-level steps and evaluation interval.
    const [quick] = studySweeps(study, 'default', { seeds: 1, steps: 8 })
    expect(quick?.spec.base).toMatchObject({ steps: 8, evalEvery: 2 })
  })

  it('measures the rise from 20% to 80% of the final gain in evaluations', () => {
    expect(riseIntervals(jump(4).map((g, i) => [50 * (i + 1), g]))).toBe(1)
    // 0, 0, 0.5, 1, 1.5, 2, 2.5, 3: last below 0.6 at the 3rd, first at or above 2.4 at the 7th.
    expect(riseIntervals(jump(3, 6).map((g, i) => [50 * (i + 1), g]))).toBe(4)
    expect(riseIntervals([[50, 0]])).toBeNull()
    // Above 20% from the first evaluation: no rise seen.
    expect(
      riseIntervals([
        [50, 2],
        [100, 3],
      ]),
    ).toBeNull()
  })

  it('reproduces the findings on abrupt, spread, head-carried induction', async () => {
    const records = [
      trial(0, jump(3), 150, { L1H2: 2.5, L0H1: 2, L1H0: 0.1 }),
      trial(1, jump(8), 400, { L1H3: 2.8, L0H0: 1.5 }),
      trial(2, jump(5, 2), 300, { L1H1: 2, L0H2: 1 }),
    ]
    const curves = curvesOf(records)
    expect(curves.map((c) => c.inductionStep)).toEqual([150, 400, 300])
    expect(curves[0]?.heads[0]).toEqual({ head: 'L1H2', damage: 2.5 })
    expect(curves[0]?.gains[0]).toEqual([50, 0])
    const { findings, tables, charts } = study.assess({ text: records }, 'default')
    expect(findings.map((f) => f.holds)).toEqual([true, true, true])
    expect(findings[1]?.evidence).toMatch(/slowest \/ fastest = 2.67/)
    expect(tables[0]?.rows[0]?.slice(0, 5)).toEqual([0, 150, '3', 1, 'L1H2 (2.5)'])
    expect(charts).toHaveLength(1)
    const report = await buildStudyReport(study, 'default', { text: records })
    expect(report.html).toContain('<svg')
  })

  it('says not reproduced for a gradual rise, equal steps and a gain spread over many heads', () => {
    const records = [
      trial(0, jump(2, 8), 250, { L1H2: 0.5, L0H1: 0.4 }),
      trial(1, jump(2, 8), 250, { L1H3: 0.6, L0H0: 0.5 }),
    ]
    const { findings } = study.assess({ text: records }, 'default')
    expect(findings.map((f) => f.holds)).toEqual([false, false, false])
  })

  it('is undetermined when no seed induced, and counts seeds without induction at the budget', () => {
    const flat = Array<number>(STEPS / 50).fill(0.01)
    const none = study.assess({ text: [trial(0, flat, null), trial(1, flat, null)] }, 'default')
    expect(none.findings.map((f) => f.holds)).toEqual([null, null, null])
    expect(none.findings[1]?.evidence).toMatch(/0 of 2 seed\(s\)/)
    const one = study.assess({ text: [trial(0, jump(3), 150, { L1H0: 3 }), trial(1, flat, null)] }, 'default')
    // 600 / 150 = 4, a lower bound.
    expect(one.findings[1]).toMatchObject({ holds: true })
    expect(one.findings[1]?.evidence).toMatch(/= 4 \(a lower bound: 1 seed\(s\) counted at the budget\)/)
    expect(one.findings[0]?.holds).toBeNull()
    expect(study.assess({ text: [] }, 'default').charts).toEqual([])
  })
})
