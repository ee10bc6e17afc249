import { describe, expect, it } from 'vitest'
import { ConfigError } from '@attnlab/core'
import { TRIAL_RECORD_FORMAT, type TrialRecord } from '../record.ts'
import { expandTrials } from '../trial.ts'
import { STUDIES, buildStudyReport, getStudy, resolveStudySweeps, studySweeps } from './index.ts'
import type { JsonObject } from '../json.ts'

/** A done (or failed) trial record with the given settings and metrics. */
function record(
  settings: JsonObject,
  metrics: Record<string, number | null>,
  seed = 0,
  status: TrialRecord['status'] = 'done',
): TrialRecord {
  return {
    format: TRIAL_RECORD_FORMAT,
    sweep: 'test',
    id: `${JSON.stringify(settings)}-${seed}`,
    index: 0,
    experiment: 'emergence',
    params: {},
    seed,
    settings,
    status,
    attempts: 1,
    error: null,
    attnlabVersion: '0.0.0',
    backend: 'cpu',
    host: 'test',
    startedAt: '',
    finishedAt: '',
    durationSeconds: 1,
    metrics: status === 'done' ? metrics : {},
    runDirectory: 'trials/x',
  }
}

const linear = (S: number, s: number, residual: number, seed = 0): TrialRecord =>
  record(
    { task: { kind: 'linear-map', stateSize: S, onesPerRow: s }, training: { steps: 1000 } },
    { finalValidationLoss: 0.33 + residual * 0.36, normalizedResidual: residual },
    seed,
  )

describe('the shipped studies', () => {
  it('every study expands at both sizes into specs every trial of which its experiment accepts', async () => {
    const counts: Record<string, number[]> = {}
    for (const study of Object.values(STUDIES)) {
      for (const size of ['default', 'full'] as const) {
        const sweeps = studySweeps(study, size)
        expect(sweeps.length).toBeGreaterThan(0)
        let trials = 0
        for (const { spec } of sweeps) trials += (await expandTrials(spec)).length
        counts[study.name] = [...(counts[study.name] ?? []), trials]
        // Each part's name is a directory name, and distinct.
        expect(new Set(sweeps.map((s) => s.part)).size).toBe(sweeps.length)
        for (const { part } of sweeps) expect(part).toMatch(/^[a-z0-9-]+$/)
      }
    }
    expect(counts).toEqual({
      'linear-map-sparsity': [24, 72],
      'emergence-time': [80, 150],
      width: [20, 48],
      architecture: [12, 18],
      'ca-context': [12, 48],
      'pre-pretraining': [21, 41],
      'lm-induction': [4, 10],
      'sparse-frontier': [10, 11],
    })
  })

  it('names an unknown study with the closest one', () => {
    expect(() => getStudy('linear-map-sparsty')).toThrow(ConfigError)
    expect(() => getStudy('linear-map-sparsty')).toThrow(/not a study; did you mean 'linear-map-sparsity'/)
    expect(() => getStudy('toString')).toThrow(/not a study/)
    // nothing close: no did-you-mean, only the list
    expect(() => getStudy('nosuch')).toThrow(/'nosuch' is not a study; expected one of linear-map-sparsity, /)
    expect(() => getStudy('nosuch')).not.toThrow(/did you mean/)
  })
})

describe('linear-map-sparsity assessment', () => {
  const study = getStudy('linear-map-sparsity')

  it('reproduces when S = 8 is solved everywhere and S = 16 only at the extremes', () => {
    const records = [
      ...[1, 3, 5, 7].flatMap((s) => [linear(8, s, 0.01, 0), linear(8, s, 0.02, 1)]),
      linear(16, 1, 0.01),
      linear(16, 15, 0.05),
      linear(16, 5, 0.8),
      linear(16, 8, 0.95),
    ]
    const { findings, tables } = study.assess({ 'linear-map': records }, 'default')
    expect(findings.map((f) => f.holds)).toEqual([true, true, true, null])
    expect(tables[0]?.rows.map((r) => r.slice(0, 2))).toEqual([
      [8, 1],
      [8, 3],
      [8, 5],
      [8, 7],
      [16, 1],
      [16, 5],
      [16, 8],
      [16, 15],
    ])
    expect(tables[0]?.rows[6]?.[7]).toBe('unlearnt')
  })

  it('says plainly when S = 8 is not solved at some s, and when S = 16 is solved in the middle', () => {
    const records = [linear(8, 1, 0.01), linear(8, 3, 0.6), linear(16, 8, 0.02)]
    const { findings } = study.assess({ 'linear-map': records }, 'default')
    expect(findings[0]?.holds).toBe(false)
    expect(findings[0]?.evidence).toMatch(/s = 3: partial \(0\.6\)/)
    expect(findings[1]?.holds).toBe(false)
  })

  it('leaves every finding undetermined when no configuration learned anything (a budget too small)', () => {
    const records = [linear(8, 1, 0.99), linear(8, 3, 1.01), linear(16, 8, 0.97), linear(16, 1, 0.95)]
    const { findings } = study.assess({ 'linear-map': records }, 'default')
    expect(findings.map((f) => f.holds)).toEqual([null, null, null, null])
    expect(findings[1]?.evidence).toMatch(/no trial learned anything within 1000 steps/)
  })

  it('leaves every finding undetermined without finished trials, and failed trials do not count', () => {
    const failed = record({ task: { stateSize: 8, onesPerRow: 1 } }, {}, 0, 'failed')
    const { findings } = study.assess({ 'linear-map': [failed] }, 'default')
    expect(findings.every((f) => f.holds === null)).toBe(true)
  })
})

describe('emergence-time assessment', () => {
  const study = getStudy('emergence-time')
  const markov = (genLen: number, step: number | null, seed: number): TrialRecord =>
    record({ task: { kind: 'sparse-markov', genLen }, training: { steps: 200 } }, { emergenceStep: step }, seed)

  it('finds the spread and the growth with context, counting seeds that never emerged as the budget', () => {
    const records = [
      ...[20, 30, 45, 60].map((step, seed) => markov(8, step, seed)),
      ...[40, 70, 90, null].map((step, seed) => markov(16, step, seed)),
    ]
    const { findings, tables } = study.assess({ 'sparse-markov': records, 'linear-map': [] }, 'default')
    expect(findings[0]?.holds).toBe(true)
    expect(findings[1]?.holds).toBe(true)
    // Medians: 37.5 at 8; (70, 90) with the budget 200 for the censored seed: 80 at 16.
    expect(findings[1]?.evidence).toMatch(/median emergence step 37\.5 at 8, 80 at 16/)
    expect(findings[2]?.holds).toBeNull()
    expect(tables[0]?.rows[1]?.slice(2, 4)).toEqual([4, 3])
  })

  it('does not reproduce when emergence gets faster with context or does not spread', () => {
    const records = [
      ...[100, 101, 102].map((step, seed) => markov(8, step, seed)),
      ...[50, 51, 52].map((step, seed) => markov(16, step, seed)),
    ]
    const { findings } = study.assess({ 'sparse-markov': records }, 'default')
    expect(findings[0]?.holds).toBe(false)
    expect(findings[1]?.holds).toBe(false)
  })
})

describe('width assessment', () => {
  const study = getStudy('width')
  const trial = (heads: number, dModel: number, residual: number): TrialRecord =>
    record(
      { task: { kind: 'linear-map' }, model: { nHeads: heads, dModel } },
      { finalValidationLoss: 0.3 + residual * 0.4, normalizedResidual: residual },
    )

  it('leaves both findings undetermined when no head count learned anything', () => {
    const head = [trial(1, 8, 0.99), trial(16, 128, 0.95)]
    const fixed = [trial(1, 64, 1.02), trial(16, 64, 0.93)]
    const { findings } = study.assess({ 'fixed-head-size': head, 'fixed-width': fixed }, 'default')
    expect(findings.map((f) => f.holds)).toEqual([null, null])
  })

  it('compares the fewest and the most heads in each part', () => {
    const head = [trial(1, 8, 0.9), trial(4, 32, 0.4), trial(16, 128, 0.05)]
    const fixed = [trial(1, 64, 0.3), trial(16, 64, 0.5)]
    const { findings, tables } = study.assess({ 'fixed-head-size': head, 'fixed-width': fixed }, 'default')
    expect(findings.map((f) => f.holds)).toEqual([true, false])
    expect(tables[1]?.rows.map((r) => r.slice(0, 2))).toEqual([
      [1, 64],
      [16, 4],
    ])
  })
})

describe('architecture assessment', () => {
  const study = getStudy('architecture')
  const trial = (preset: string, s: number, loss: number, step: number | null, seed = 0): TrialRecord =>
    record(
      { preset, task: { kind: 'linear-map', stateSize: 8, onesPerRow: s } },
      { finalValidationLoss: loss, emergenceStep: step },
      seed,
    )

  it('reproduces when the mixer is lower and at least twice as fast at every s', () => {
    const records = [
      trial('gpt', 3, 0.5, 900),
      trial('mixer', 3, 0.34, 300),
      trial('gpt', 5, 0.69, null),
      trial('mixer', 5, 0.45, 700),
    ]
    const { findings, tables } = study.assess({ 'linear-map': records }, 'default')
    expect(findings.map((f) => f.holds)).toEqual([true, true])
    expect(findings[1]?.evidence).toMatch(/s = 5: only the mixer emerged/)
    expect(tables[0]?.rows.map((r) => r.slice(0, 2))).toEqual([
      [3, 'transformer (gpt)'],
      [3, 'MLP-Mixer'],
      [5, 'transformer (gpt)'],
      [5, 'MLP-Mixer'],
    ])
  })

  it('does not reproduce when the transformer is as good and as fast', () => {
    const records = [trial('gpt', 3, 0.34, 400), trial('mixer', 3, 0.35, 300)]
    const { findings } = study.assess({ 'linear-map': records }, 'default')
    expect(findings.map((f) => f.holds)).toEqual([false, false])
  })
})

describe('ca-context assessment', () => {
  const study = getStudy('ca-context')
  const trial = (S: number, biased: boolean, step: number | null, seed = 0): TrialRecord =>
    record(
      {
        task: { kind: 'cellular-automaton', cells: S },
        training: { steps: 800, attentionBias: biased ? { beta: 3 } : null },
      },
      { firstPositionStep: step, emergenceStep: 0 },
      seed,
    )

  it('reproduces a plateau that grows without the bias and stays flat and shorter with it', () => {
    const records = [
      trial(4, false, 60),
      trial(8, false, 300),
      trial(16, false, null),
      trial(4, true, 60),
      trial(8, true, 150),
      trial(16, true, 170),
    ]
    const { findings, tables } = study.assess({ 'cellular-automaton': records }, 'default')
    expect(findings.map((f) => f.holds)).toEqual([true, true, true])
    // The seed that never emerged counts as the budget (800).
    expect(findings[0]?.evidence).toMatch(/S = 16: 800 \(0\/1 emerged\)/)
    expect(tables[0]?.rows.map((r) => r.slice(0, 2))).toEqual([
      [4, 'none'],
      [8, 'none'],
      [16, 'none'],
      [4, '3 nats'],
      [8, '3 nats'],
      [16, '3 nats'],
    ])
  })

  it('does not reproduce when the bias does not help', () => {
    const records = [trial(4, false, 60), trial(16, false, 200), trial(4, true, 60), trial(16, true, 400)]
    const { findings } = study.assess({ 'cellular-automaton': records }, 'default')
    expect(findings.map((f) => f.holds)).toEqual([true, false, false])
  })

  it('leaves the growth undetermined when no seed emerged without the bias', () => {
    const records = [trial(4, false, null), trial(16, false, null), trial(4, true, 0), trial(16, true, 0)]
    const { findings } = study.assess({ 'cellular-automaton': records }, 'default')
    expect(findings[0]?.holds).toBeNull()
    expect(findings[0]?.evidence).toMatch(/no seed emerged without the bias/)
    expect(findings[1]?.holds).toBeNull()
    // Shorter with the bias still holds: 0 steps against at least the budget.
    expect(findings[2]?.holds).toBe(true)
  })
})

describe('pre-pretraining', () => {
  const study = getStudy('pre-pretraining')
  const trial = (initFrom: string | null, step: number | null, seed: number): TrialRecord =>
    record({ task: { kind: 'linear-map' }, training: { steps: 600, initFrom } }, { emergenceStep: step }, seed)

  it("resolves the target's initFrom to the source trial's run directory in the study directory", async () => {
    const sweeps = await resolveStudySweeps(study, 'default', {}, '/runs/ppt/')
    const [source, target] = sweeps
    const [sourceTrial] = await expandTrials(source?.spec as never)
    const targets = await expandTrials(target?.spec as never)
    const starts = [...new Set(targets.map((t) => (t.settings.training as { initFrom: unknown }).initFrom))]
    expect(starts).toEqual([null, `/runs/ppt/source/trials/${sourceTrial?.id}`])
    // Without a study directory the path is a placeholder (for validation and printing).
    expect(JSON.stringify(study.parts('default')[1]?.spec)).toContain('<study directory>/source/trials/<trial 0>')
  })

  it('reproduces when the pre-pretrained seeds emerge sooner, counting seeds that never did as the budget', () => {
    const records = [
      ...[300, 400, null].map((step, seed) => trial(null, step, seed)),
      ...[100, 150, 500].map((step, seed) => trial('/runs/ppt/source/trials/x', step, seed)),
    ]
    const { findings, tables } = study.assess({ target: records }, 'default')
    expect(findings[0]?.holds).toBe(true)
    expect(findings[0]?.evidence).toMatch(/median emergence step 150 pre-pretrained \(3\/3 emerged\) against 400/)
    expect(tables[0]?.rows.map((r) => r[0])).toEqual(['scratch', 'cellular-automaton weights'])
    const slower = study.assess({ target: [trial(null, 100, 0), trial('/x', 300, 0)] }, 'default')
    expect(slower.findings[0]?.holds).toBe(false)
  })
})

describe('buildStudyReport', () => {
  it('writes the findings, tables and figures into one page', async () => {
    const study = getStudy('linear-map-sparsity')
    const records = [linear(8, 1, 0.01), linear(8, 3, 0.02), linear(16, 8, 0.95)]
    const report = await buildStudyReport(study, 'default', { 'linear-map': records })
    expect(report.html).toContain("Study 'linear-map-sparsity' (default)")
    expect(report.html).toContain('<b>reproduced</b>')
    expect(report.html).toContain('<b>undetermined</b>')
    expect(report.html).toContain('<svg')
    expect(report.html).toContain('3 done of 3 recorded')
  })

  it('builds a page without figures when nothing finished', async () => {
    const report = await buildStudyReport(getStudy('width'), 'default', {})
    expect(report.html).not.toContain('<svg')
    expect(report.findings.every((f) => f.holds === null)).toBe(true)
  })
})
