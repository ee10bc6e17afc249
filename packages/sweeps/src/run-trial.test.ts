// runTrial in this process: the run directory and record, a finished trial not run again, an
// interrupted trial continued exactly (cpu), a failing trial recorded with its typed error.
import { readFile, readdir, writeFile, mkdir, mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import * as tf from '@tensorflow/tfjs-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { useBackend } from '@attnlab/core'
import { expandTrials, parseSweepSpec, type Trial } from './index.ts'
import { SWEEPS_VERSION, runTrial, trialDirectory } from './node.ts'
import { tinySpec } from './__fixtures__/tiny.ts'

let dir = ''
let trials: Trial[] = []
beforeAll(async () => {
  await useBackend('cpu')
  dir = await mkdtemp(join(tmpdir(), 'attnlab-run-trial-'))
  trials = await expandTrials(tinySpec((t) => t.replace('steps: 6', 'steps: 12')))
})
afterAll(async () => {
  await rm(dir, { recursive: true, force: true })
})

describe('runTrial', () => {
  it('runs a trial into trials/<id>/ and returns its record; a finished trial is not run again', async () => {
    const trial = trials[0] as Trial
    const before = tf.memory().numTensors
    const record = await runTrial(join(dir, 'a'), trial, { sweep: 'tiny' })
    expect(tf.memory().numTensors).toBe(before)
    expect(record).toMatchObject({
      format: 'attnlab-sweep-record/1',
      sweep: 'tiny',
      id: trial.id,
      index: 0,
      status: 'done',
      attempts: 1,
      error: null,
      attnlabVersion: SWEEPS_VERSION,
      backend: 'cpu',
      params: { 'task.genLen': 4 },
      seed: 0,
      runDirectory: `trials/${trial.id}`,
    })
    expect(record.metrics.completedSteps).toBe(12)
    expect(record.metrics.finalValidationLoss).toBeGreaterThan(0)
    // The share of the gap left, from the run's own summary: (final - floor) / (first plateau - floor).
    const summary = JSON.parse(await readFile(join(trialDirectory(join(dir, 'a'), trial.id), 'summary.json'), 'utf8'))
    const { plateaus, floor } = summary.oracles as { plateaus: number[]; floor: number }
    const final = summary.seeds[0].finalValidationLoss as number
    expect(record.metrics.normalizedResidual).toBeCloseTo((final - floor) / ((plateaus[0] as number) - floor), 12)
    const learned = (summary.seeds[0].positionEmergence as (number | null)[]).filter((p) => p !== null) as number[]
    expect(record.metrics.positionsLearned ?? 0).toBe(learned.length)
    expect(record.metrics.firstPositionStep).toBe(learned.length === 0 ? null : Math.min(...learned))
    const files = await readdir(trialDirectory(join(dir, 'a'), trial.id))
    expect(files).toEqual(
      expect.arrayContaining(['config.json', 'metrics.jsonl', 'seeds', 'summary.json', 'report.html', 'record.json']),
    )
    const again = await runTrial(join(dir, 'a'), trial, { sweep: 'tiny' })
    expect(again).toEqual(record)
  })

  it('continues an interrupted trial from its state, to the same numbers (cpu)', async () => {
    const trial = trials[0] as Trial
    const controller = new AbortController()
    const stopped = await runTrial(join(dir, 'b'), trial, {
      signal: controller.signal,
      onProgress: (event) => {
        if (event.kind === 'step' && event.step === 5) controller.abort()
      },
    })
    expect(stopped.status).toBe('interrupted')
    const config = JSON.parse(await readFile(join(trialDirectory(join(dir, 'b'), trial.id), 'config.json'), 'utf8'))
    expect(config.format).toBe('attnlab-emergence/1')
    const steps: number[] = []
    const resumed = await runTrial(join(dir, 'b'), trial, {
      onProgress: (event) => {
        if (event.kind === 'step') steps.push(event.step)
      },
    })
    expect(resumed.status).toBe('done')
    expect(steps[0]).toBeGreaterThan(1)
    const uninterrupted = JSON.parse(
      await readFile(join(trialDirectory(join(dir, 'a'), trial.id), 'record.json'), 'utf8'),
    )
    expect(resumed.metrics).toEqual({
      ...uninterrupted.metrics,
      tokensPerSecond: expect.any(Number),
      trainingSeconds: expect.any(Number),
    })
  })

  it('records a trial that throws as failed, with its typed error', async () => {
    const trial = trials[1] as Trial
    // The run directory's place is taken by a file: the experiment cannot write there.
    await mkdir(join(dir, 'c', 'trials'), { recursive: true })
    await writeFile(trialDirectory(join(dir, 'c'), trial.id), 'not a directory')
    const record = await runTrial(join(dir, 'c'), trial, { attempt: 3 })
    expect(record.status).toBe('failed')
    expect(record.attempts).toBe(3)
    expect(record.error).toMatchObject({ code: expect.any(String), name: expect.any(String) })
    expect(record.error?.message).toContain(trial.id)
    expect(record.metrics).toEqual({})
  })
})

describe('runTrial: the train experiment', () => {
  const TRAIN = [
    'name: train-tiny',
    'experiment: train',
    'base:',
    '  task: { kind: sparse-markov, vocabSize: 8, spans: [1, 1], genLen: 6, tau: 0.3 }',
    '  steps: 12',
    '  batchSize: 8',
    '  validationSize: 16',
    '  evalEvery: 4',
    '  checkpointEvery: 4',
    'grid:',
    '  lr: [0.05, 0.1]',
    'seeds: 1',
    '',
  ].join('\n')

  it('validates train settings with the experiment (seed per trial, a bad value named)', () => {
    expect(() => parseSweepSpec(TRAIN.replace('[0.05, 0.1]', '[0.05, -1]'), 't.yaml')).toThrow(
      /grid\.lr: value -1 refused by the train experiment \(trial 1: lr = -1, seed 0\): Invalid .*lr/,
    )
    expect(() => parseSweepSpec(TRAIN.replace('  steps: 12', '  seed: 3'), 't.yaml')).toThrow(
      "base.seed: 'seed' is set per trial",
    )
  })

  it('trains into trials/<id>/checkpoint, and continues an interrupted trial to the same numbers (cpu)', async () => {
    const [trial] = await expandTrials(parseSweepSpec(TRAIN, 't.yaml'))
    if (trial === undefined) throw new Error('no trial')
    expect(trial.settings).toMatchObject({ seed: 0, lr: 0.05, preset: 'minimal', steps: 12 })
    const before = tf.memory().numTensors
    const whole = await runTrial(join(dir, 't1'), trial)
    expect(tf.memory().numTensors).toBe(before)
    expect(whole).toMatchObject({ status: 'done', metrics: { steps: 12 } })
    expect(whole.metrics.finalValidationLoss).toBeGreaterThan(0)
    expect(await readdir(trialDirectory(join(dir, 't1'), trial.id))).toEqual(
      expect.arrayContaining(['checkpoint', 'summary.json', 'record.json']),
    )
    const controller = new AbortController()
    const stopped = await runTrial(join(dir, 't2'), trial, {
      signal: controller.signal,
      onProgress: (event) => {
        if (event.kind === 'step' && event.step === 6) controller.abort()
      },
    })
    expect(stopped.status).toBe('interrupted')
    const resumed = await runTrial(join(dir, 't2'), trial)
    expect(resumed.status).toBe('done')
    expect(resumed.metrics.finalValidationLoss).toBe(whole.metrics.finalValidationLoss)
    expect(resumed.metrics).toEqual({
      ...whole.metrics,
      tokensPerSecond: expect.any(Number),
      trainingSeconds: expect.any(Number),
    })
    // The summary's finalTrainLoss (the mean of the last 10 steps' losses) spans both sessions, as uninterrupted.
    const summary = async (sweepDir: string) =>
      JSON.parse(await readFile(join(trialDirectory(sweepDir, trial.id), 'summary.json'), 'utf8'))
    const [a, b] = [await summary(join(dir, 't1')), await summary(join(dir, 't2'))]
    expect(b.finalTrainLoss).toBe(a.finalTrainLoss)
    // Known gap, in @attnlab/transformer's trainer: an evaluation's trainLoss (the mean loss since the previous
    // evaluation) covers only the resumed session's steps when the run stopped between two evaluations.
    const validation = (summary: { evaluations: { step: number; validationLoss: number }[] }) =>
      summary.evaluations.map(({ step, validationLoss }) => [step, validationLoss])
    expect(validation(b)).toEqual(validation(a))
    // Finished, then killed before its summary and record were written: run again, it trains nothing and
    // writes the uninterrupted summary (the last evaluation keeps its training loss).
    await rm(join(trialDirectory(join(dir, 't1'), trial.id), 'summary.json'))
    await rm(join(trialDirectory(join(dir, 't1'), trial.id), 'record.json'))
    const steps: number[] = []
    const again = await runTrial(join(dir, 't1'), trial, {
      onProgress: (event) => {
        if (event.kind === 'step') steps.push(event.step)
      },
    })
    expect(steps).toEqual([])
    expect(again.metrics.finalValidationLoss).toBe(whole.metrics.finalValidationLoss)
    const c = await summary(join(dir, 't1'))
    expect([c.finalTrainLoss, c.evaluations, c.steps]).toEqual([a.finalTrainLoss, a.evaluations, a.steps])
  })
})
