import { describe, expect, it } from 'vitest'
import { expandTrials } from '../trial.ts'
import { sparseEvalMetricKey } from '../experiments.ts'
import { TRIAL_RECORD_FORMAT, type TrialRecord } from '../record.ts'
import { buildStudyReport, resolveStudySweeps, studySweeps } from './index.ts'
import { curvesOfEvaluation, sparseFrontier, toleratedSparsity } from './sparse-frontier.ts'

const SPARSITIES = [0, 0.5, 0.8, 0.9, 0.95]

/** The metric key of a method's row at a length and sparsity, as the sparse-eval experiment writes it. */
const key = (name: string, method: string, length: number | string, s: number) =>
  sparseEvalMetricKey(name, Number(length), s, s === 0 ? 'dense' : method)

/** A finished sparse-eval trial of one method: scores by length, at SPARSITIES, all with std `sd`. */
function evaluation(method: string, scores: Record<number, number[]>, sd = 0.1, samples = 50): TrialRecord {
  const metrics: Record<string, number | null> = { samples, evalSeconds: 1 }
  for (const [length, list] of Object.entries(scores)) {
    list.forEach((score, i) => {
      metrics[key('score', method, length, SPARSITIES[i] as number)] = score
      metrics[key('scoreStd', method, length, SPARSITIES[i] as number)] = sd
    })
  }
  return {
    format: TRIAL_RECORD_FORMAT,
    sweep: 'sparse-frontier-evaluation',
    id: method,
    index: 0,
    experiment: 'sparse-eval',
    params: { methods: [method] },
    seed: 0,
    settings: { methods: [method] },
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
    runDirectory: `trials/${method}`,
  }
}

const verdicts = (records: TrialRecord[]) =>
  sparseFrontier.assess({ evaluation: records }, 'default').findings.map((f) => f.holds)

describe('the sparse-frontier study', () => {
  it('chains each stage to the previous checkpoint and evaluates the last one, one method per trial', async () => {
    const sweeps = await resolveStudySweeps(sparseFrontier, 'default', {}, '/runs/sf')
    expect(sweeps.map((s) => s.part)).toEqual(['lookup', 'vocabulary', 'context-64', 'context-256', 'evaluation'])
    const ids = new Map<string, string>()
    for (const { part, spec } of sweeps) ids.set(part, ((await expandTrials(spec))[0] as { id: string }).id)
    expect(sweeps[1]?.spec.base.initFrom).toBe(`/runs/sf/lookup/trials/${ids.get('lookup')}/checkpoint`)
    expect(sweeps[2]?.spec.base.initFrom).toBe(`/runs/sf/vocabulary/trials/${ids.get('vocabulary')}/checkpoint`)
    expect(sweeps[3]?.spec.base.initFrom).toBe(`/runs/sf/context-64/trials/${ids.get('context-64')}/checkpoint`)
    expect(sweeps[4]?.spec.base.model).toBe(`/runs/sf/context-256/trials/${ids.get('context-256')}/checkpoint`)
    const trials = await expandTrials(sweeps[4]?.spec as never)
    expect(trials.map((t) => t.settings.methods)).toEqual([
      ['vertical-slash'],
      ['flexprefill'],
      ['block-sparse'],
      ['quest'],
      ['snapkv'],
      ['ada-snapkv'],
    ])
    // A steps override shortens the training parts and leaves the evaluation alone.
    const short = studySweeps(sparseFrontier, 'default', { steps: 20 })
    expect(short.map((s) => s.spec.base.steps)).toEqual([20, 20, 20, 20, undefined])
    expect(studySweeps(sparseFrontier, 'full').map((s) => s.part)).toContain('context-512')
  })

  it('reads curves from the metrics and finds the tolerated sparsity', () => {
    const [curve] = curvesOfEvaluation([evaluation('quest', { 64: [0.9, 0.9, 0.88, 0.7, 0.5] })])
    expect(curve?.points.map((p) => p[0])).toEqual(SPARSITIES)
    // SE of the difference sqrt(2 * 0.01 / 50) = 0.02: 0.88 is within 2 SE of 0.9, 0.7 is not.
    expect(toleratedSparsity(curve as never)).toBe(0.8)
    // The exact sparsity the masks reached, not the target, is what is tolerated.
    const base = evaluation('quest', { 64: [0.9, 0.9, 0.9, 0.9, 0.9] })
    const exact = Object.fromEntries(SPARSITIES.map((s) => [key('exactSparsity', 'quest', 64, s), Math.min(s, 0.62)]))
    const capped = { ...base, metrics: { ...base.metrics, ...exact } }
    expect(toleratedSparsity(curvesOfEvaluation([capped])[0] as never)).toBe(0.62)
    const [noisy] = curvesOfEvaluation([evaluation('quest', { 64: [0.9, 0.5, 0.9, 0.9, 0.9] })])
    expect(toleratedSparsity(noisy as never)).toBe(0) // the first failure stops it
  })

  it('reads one curve per method from a trial of several, and plain keys of older one-method records', () => {
    const quest = evaluation('quest', { 64: [0.9, 0.9, 0.88, 0.7, 0.5] })
    const snapkv = evaluation('snapkv', { 64: [0.9, 0.6, 0.5, 0.4, 0.3] })
    const both: TrialRecord = {
      ...quest,
      params: { methods: ['quest', 'snapkv'] },
      settings: { methods: ['quest', 'snapkv'] },
      metrics: { ...quest.metrics, ...snapkv.metrics },
    }
    const curves = curvesOfEvaluation([both])
    expect(curves.map((c) => c.method)).toEqual(['quest', 'snapkv'])
    expect(curves.map((c) => c.points.map((p) => p[1]))).toEqual([
      [0.9, 0.9, 0.88, 0.7, 0.5],
      [0.9, 0.6, 0.5, 0.4, 0.3],
    ])
    // a record of one method from before every sparse row named its method: `scoreL64S0.9` is quest's
    const legacy = {
      ...quest,
      metrics: Object.fromEntries(Object.entries(quest.metrics).map(([k, v]) => [k.replace(/^quest:/, ''), v])),
    }
    expect(curvesOfEvaluation([legacy])).toEqual(curvesOfEvaluation([quest]))
    // a prefix naming a method the trial did not run is no curve of it
    const stray = { ...quest, metrics: { ...quest.metrics, 'snapkv:scoreL64S0.9': 0.1 } }
    expect(curvesOfEvaluation([stray]).map((c) => c.method)).toEqual(['quest'])
  })

  it('decides the findings: reproduced, not reproduced, and undetermined', () => {
    const good = [
      evaluation('vertical-slash', { 32: [0.95, 0.95, 0.9, 0.8, 0.6], 64: [0.95, 0.95, 0.95, 0.9, 0.8] }),
      evaluation('flexprefill', { 32: [0.95, 0.95, 0.85, 0.7, 0.6], 64: [0.95, 0.95, 0.9, 0.85, 0.7] }),
      evaluation('block-sparse', { 32: [0.95, 0.8, 0.7, 0.6, 0.5], 64: [0.95, 0.9, 0.8, 0.7, 0.6] }),
      evaluation('quest', { 32: [0.95, 0.95, 0.95, 0.9, 0.8], 64: [0.95, 0.95, 0.95, 0.95, 0.9] }),
      evaluation('snapkv', { 32: [0.95, 0.7, 0.5, 0.3, 0.2], 64: [0.95, 0.8, 0.6, 0.4, 0.3] }),
      evaluation('ada-snapkv', { 32: [0.95, 0.75, 0.55, 0.35, 0.2], 64: [0.95, 0.85, 0.65, 0.45, 0.3] }),
    ]
    // learned, quest > prefill, VS best prefill, aggregation (never tested), Ada >= SnapKV, longer tolerates more
    expect(verdicts(good)).toEqual([true, true, true, null, true, true])
    const bad = [
      evaluation('vertical-slash', { 32: [0.95, 0.9, 0.9, 0.9, 0.9], 64: [0.85, 0.5, 0.4, 0.3, 0.2] }),
      evaluation('flexprefill', { 32: [0.95, 0.9, 0.9, 0.9, 0.9], 64: [0.85, 0.85, 0.8, 0.6, 0.5] }),
      evaluation('block-sparse', { 32: [0.95, 0.9, 0.9, 0.9, 0.9], 64: [0.85, 0.85, 0.85, 0.85, 0.8] }),
      evaluation('quest', { 32: [0.95, 0.9, 0.9, 0.9, 0.9], 64: [0.85, 0.6, 0.5, 0.4, 0.3] }),
      evaluation('snapkv', { 32: [0.95, 0.9, 0.9, 0.9, 0.9], 64: [0.85, 0.8, 0.7, 0.6, 0.5] }),
      evaluation('ada-snapkv', { 32: [0.95, 0.9, 0.9, 0.9, 0.9], 64: [0.85, 0.5, 0.4, 0.3, 0.2] }),
    ]
    expect(verdicts(bad)).toEqual([false, false, false, null, false, false])
    // A fall of the relative error within noise is no fall: 64 as 32 with one point 0.05 higher
    // moves the mean by 0.002, well inside 2 SE of the difference (about 0.06 here).
    const flat = good.map((r) => {
      const metrics = { ...r.metrics }
      for (const s of SPARSITIES) metrics[key('score', r.id, 64, s)] = metrics[key('score', r.id, 32, s)] ?? null
      if (r.id === 'quest') metrics['quest:scoreL64S0.95'] = 0.85
      return { ...r, metrics }
    })
    // Vertical-Slash within noise of FlexPrefill (0.01 below, 2 SE = 0.04): no best to name.
    const tie = good.map((r) =>
      r.id === 'flexprefill'
        ? evaluation('flexprefill', { 32: [0.95, 0.95, 0.85, 0.7, 0.6], 64: [0.95, 0.96, 0.96, 0.91, 0.81] })
        : r,
    )
    const tieFinding = sparseFrontier.assess({ evaluation: tie }, 'default').findings[2]
    expect(tieFinding?.holds).toBeNull()
    expect(tieFinding?.evidence).toMatch(/within 2 SE of flexprefill \(0\.04\): no best to name/)
    const flatLength = sparseFrontier.assess({ evaluation: flat }, 'default').findings[5]
    expect(flatLength?.holds).toBe(false)
    expect(flatLength?.evidence).toMatch(/beyond 2 standard errors of the difference \(0\.0\d+\)/)
    // A model at chance decides nothing but its own failure; no evaluation at all decides nothing.
    const chance = good.map((r) => ({
      ...r,
      metrics: Object.fromEntries(Object.entries(r.metrics).map(([k, v]) => [k, k.startsWith('score') ? 0.02 : v])),
    }))
    expect(verdicts(chance)).toEqual([false, null, null, null, null, null])
    expect(verdicts([])).toEqual([null, null, null, null, null, null])
    // A method missing: the findings that need it are undetermined, with the reason.
    const findings = sparseFrontier.assess({ evaluation: good.slice(0, 3) }, 'default').findings
    expect(findings[1]?.holds).toBeNull()
    expect(findings[1]?.evidence).toMatch(/evaluation of quest did not finish/)
  })

  it('writes a report with the training table, the score table and the figure', async () => {
    const records = [evaluation('quest', { 32: [0.9, 0.9, 0.8, 0.7, 0.5], 64: [0.95, 0.9, 0.9, 0.8, 0.6] })]
    const report = await buildStudyReport(sparseFrontier, 'default', { evaluation: records })
    expect(report.tables[1]?.rows).toHaveLength(2)
    // 0.9 at 0.5 is 2.5 SE below dense 0.95 (SE 0.02): nothing is tolerated at 64.
    expect(report.tables[1]?.rows[1]).toEqual([
      64,
      'quest',
      '0.95 (0.1)',
      '0.9 (0.1) at 0.50',
      '0.9 (0.1) at 0.80',
      '0.8 (0.1) at 0.90',
      '0.6 (0.1) at 0.95',
      0,
    ])
    expect(report.html).toContain('<svg')
    // Which heads retrieve, from the trial's metrics, sorted by length, layer and head.
    expect(report.tables[2]?.rows).toEqual([])
    const record = records[0] as TrialRecord
    const withHeads = {
      ...record,
      metrics: {
        ...record.metrics,
        retrievalL64B1H1: 0.873,
        retrievalL64B0H1: 0.001,
        previousTokenL64B0H1: 0.5,
        previousTokenL64B1H1: 0.004,
        uniformL64: 0.008,
      },
    }
    const headsReport = await buildStudyReport(sparseFrontier, 'default', { evaluation: [withHeads] })
    expect(headsReport.tables[2]?.rows).toEqual([
      [64, 'L0H1', '0.001', '0.008', '0.5'],
      [64, 'L1H1', '0.873', '0.008', '0.004'],
    ])
    expect(headsReport.html).toContain('Which heads retrieve')
    expect(report.html).toContain('Vertical-Slash is the best prefill method')
  })
})
