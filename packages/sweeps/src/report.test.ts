// buildSweepReport on hand-made records: the CSV rows, the plotted means and spreads, the HTML,
// and the errors for a parameter or metric the records do not have.
import { ConfigError } from '@attnlab/core'
import { describe, expect, it } from 'vitest'
import { buildSweepReport, type TrialRecord } from './index.ts'

function record(index: number, genLen: number, tau: number, seed: number, step: number | null): TrialRecord {
  return {
    format: 'attnlab-sweep-record/1',
    sweep: 'hand',
    id: `id${index}`,
    index,
    experiment: 'emergence',
    params: { 'task.genLen': genLen, 'task.tau': tau },
    seed,
    settings: {},
    status: step === null ? 'failed' : 'done',
    attempts: step === null ? 2 : 1,
    error: step === null ? { code: 'IO_ERROR', name: 'IoError', message: 'cannot write \'x, "y"\'' } : null,
    attnlabVersion: '0.1.0',
    backend: 'cpu',
    host: 'h',
    startedAt: '2026-12-01T00:00:00.000Z',
    finishedAt: '2026-12-01T00:00:01.000Z',
    durationSeconds: 1,
    metrics: step === null ? {} : { emergenceStep: step, finalValidationLoss: 1 + step / 100 },
    runDirectory: `trials/id${index}`,
  }
}

// genLen 4 and 8 x tau 0.3 and 0.5 x seeds 0, 1; one trial failed.
const RECORDS = [
  record(0, 4, 0.3, 0, 10),
  record(1, 4, 0.3, 1, 14),
  record(2, 4, 0.5, 0, 20),
  record(3, 4, 0.5, 1, 22),
  record(4, 8, 0.3, 0, 30),
  record(5, 8, 0.3, 1, null),
  record(6, 8, 0.5, 0, 40),
  record(7, 8, 0.5, 1, 50),
]

describe('buildSweepReport', () => {
  it('plots every metric against the first varying parameter, faceted by the second', async () => {
    const report = await buildSweepReport(RECORDS)
    expect(report.x).toBe('task.genLen')
    expect(report.facet).toBe('task.tau')
    expect(report.metrics).toEqual(['emergenceStep', 'finalValidationLoss'])
    const step = report.groups.filter((g) => g.metric === 'emergenceStep')
    expect(step).toEqual([
      { metric: 'emergenceStep', x: '4', facet: '0.3', n: 2, mean: 12, sd: Math.SQRT2 * 2, min: 10, max: 14 },
      { metric: 'emergenceStep', x: '4', facet: '0.5', n: 2, mean: 21, sd: Math.SQRT2, min: 20, max: 22 },
      { metric: 'emergenceStep', x: '8', facet: '0.3', n: 1, mean: 30, sd: 0, min: 30, max: 30 },
      { metric: 'emergenceStep', x: '8', facet: '0.5', n: 2, mean: 45, sd: Math.SQRT2 * 5, min: 40, max: 50 },
    ])
    expect(report.html).toMatch(/^<!doctype html>/)
    expect(report.html).toContain('<h2>emergenceStep</h2><svg')
    expect(report.html).toContain('8 trials (7 done, 1 failed, 0 interrupted)')
    expect(report.html).toContain('<h2>Failed trials</h2>')
    expect(report.html).toContain("[IO_ERROR] IoError: cannot write 'x, &quot;y&quot;'")
  })

  it('writes one CSV row per trial, quoted where needed', async () => {
    const { csv } = await buildSweepReport(RECORDS)
    const rows = csv.trimEnd().split('\n')
    expect(rows).toHaveLength(9)
    expect(rows[0]).toBe(
      'index,id,status,attempts,seed,task.genLen,task.tau,emergenceStep,finalValidationLoss,error_code,error_message,' +
        'duration_seconds,backend,attnlab_version,host,started_at,finished_at',
    )
    expect(rows[1]).toBe(
      '0,id0,done,1,0,4,0.3,10,1.1,,,1,cpu,0.1.0,h,2026-12-01T00:00:00.000Z,2026-12-01T00:00:01.000Z',
    )
    expect(rows[6]).toBe(
      '5,id5,failed,2,1,8,0.3,,,IO_ERROR,"cannot write \'x, ""y""\'",1,cpu,0.1.0,h,2026-12-01T00:00:00.000Z,' +
        '2026-12-01T00:00:01.000Z',
    )
  })

  it('takes the metric, x and facet asked for, and refuses ones the records do not have', async () => {
    const report = await buildSweepReport(RECORDS, { metrics: ['emergenceStep'], x: 'seed', facet: 'task.genLen' })
    expect(report.groups.map((g) => `${g.facet}/${g.x}: ${g.n}`)).toEqual(['4/0: 2', '4/1: 2', '8/0: 2', '8/1: 1'])
    await expect(buildSweepReport(RECORDS, { x: 'task.genlen' })).rejects.toThrow(
      "Invalid x: 'task.genlen' is not in these records; expected one of task.genLen, task.tau, seed",
    )
    await expect(buildSweepReport(RECORDS, { metrics: ['loss'] })).rejects.toBeInstanceOf(ConfigError)
    await expect(buildSweepReport(RECORDS, { x: 'task.tau', facet: 'task.tau' })).rejects.toThrow(
      "Invalid facet: 'task.tau' is already the x axis; expected another parameter: task.genLen, seed",
    )
  })

  it('names the done trials that lack a metric, so a key spelled differently in some trials shows', async () => {
    expect((await buildSweepReport(RECORDS)).absent).toEqual({})
    // trial 2 gives the score under another key (a method prefix), trial 3 a null
    const renamed = RECORDS.map((r) => {
      if (r.index === 2) return { ...r, metrics: { 'quest:emergenceStep': 20, finalValidationLoss: 1.2 } }
      if (r.index === 3) return { ...r, metrics: { ...r.metrics, emergenceStep: null } }
      return r
    })
    const report = await buildSweepReport(renamed, { metrics: ['emergenceStep'] })
    expect(report.absent).toEqual({ emergenceStep: [2, 3] })
    expect(report.groups.find((g) => g.x === '4' && g.facet === '0.5')).toBeUndefined()
    expect(report.html).toContain('2 of 7 done trials have no number for it (trials 2, 3) and are not shown.')
    // a metric every done trial records as null (a NaN) is charted empty and named, not refused as unknown
    const nulls = RECORDS.map((r) => ({ ...r, metrics: { ...r.metrics, iou: null } }))
    const empty = await buildSweepReport(nulls, { metrics: ['iou', 'iou', 'emergenceStep'] })
    expect(empty.metrics).toEqual(['iou', 'emergenceStep'])
    expect(empty.absent.iou).toEqual([0, 1, 2, 3, 4, 6, 7])
    expect(empty.html).toContain('7 of 7 done trials have no number for it')
    expect((await buildSweepReport(nulls)).metrics).toEqual(['emergenceStep', 'finalValidationLoss'])
  })
})
