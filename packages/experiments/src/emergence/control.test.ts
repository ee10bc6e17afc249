// runEmergence driven from outside (EmergenceControl): a run paused between steps resumes where
// it stopped, knocked-out heads give a second validation loss at each evaluation, the evaluation
// events carry every head's pattern, and runPlateaus gives the ODE's plateaus.
import { describe, expect, it } from 'vitest'
import { describeWithBackends, expectNoLeaks } from '@attnlab/core/testing'
import type { HeadRef } from '@attnlab/knockout'
import {
  analyzeRun,
  computeOracles,
  defaultEmergenceConfig,
  headNames,
  resolveEmergenceConfig,
  runEmergence,
  runPlateaus,
  type EmergenceConfig,
  type EmergenceProgress,
} from '../index.ts'

const TINY: EmergenceConfig = {
  task: { kind: 'sparse-markov', vocabSize: 8, spans: [1, 1], genLen: 6, tau: 0.3 },
  preset: 'minimal',
  model: {},
  training: {
    ...defaultEmergenceConfig().training,
    steps: 8,
    batchSize: 32,
    validationSize: 64,
    analysisSize: 32,
    evalEvery: 2,
    lr: 0.2,
  },
  seeds: [0],
}

describeWithBackends('runEmergence control', () => {
  it('pauses between steps until afterStep settles, and the numbers match an uncontrolled run', async () => {
    const plain = await runEmergence(TINY)
    let release: () => void = () => {}
    let pausedAt = -1
    const steps: number[] = []
    const run = expectNoLeaks(() =>
      runEmergence(TINY, {
        onProgress: (e) => {
          if (e.kind === 'step') steps.push(e.record.step)
        },
        control: {
          afterStep: (step) => {
            if (step !== 3) return
            pausedAt = step
            return new Promise<void>((resolve) => {
              release = resolve
            })
          },
        },
      }),
    )
    // While paused, no further step runs.
    for (let i = 0; i < 50 && pausedAt < 0; i++) await new Promise((r) => setTimeout(r, 10))
    expect(pausedAt).toBe(3)
    await new Promise((r) => setTimeout(r, 50))
    expect(steps).toEqual([1, 2, 3])
    release()
    const result = await run
    expect(steps).toEqual([1, 2, 3, 4, 5, 6, 7, 8])
    expect(result.seeds[0]?.lines.map((l) => l.validationLoss)).toEqual(
      plain.seeds[0]?.lines.map((l) => l.validationLoss),
    )
  })

  it('reports the knockout loss at each evaluation while heads are knocked out, and every head pattern', async () => {
    const { model, task } = resolveEmergenceConfig(TINY)
    let knocked: HeadRef[] = []
    const evaluations: Extract<EmergenceProgress, { kind: 'evaluation' }>[] = []
    await expectNoLeaks(() =>
      runEmergence(TINY, {
        onProgress: (e) => {
          if (e.kind !== 'evaluation') return
          evaluations.push(e)
          if (e.line.step === 2) knocked = [{ layer: 0, head: 0 }]
          if (e.line.step === 4) knocked = Array.from({ length: model.nHeads }, (_, head) => ({ layer: 0, head }))
          if (e.line.step === 6) knocked = []
        },
        control: { knockout: () => knocked },
      }),
    )
    expect(evaluations.map((e) => e.line.step)).toEqual([0, 2, 4, 6, 8])
    expect(evaluations.map((e) => e.knockout?.heads.length ?? 0)).toEqual([0, 0, 1, model.nHeads, 0])
    const [one, all] = [evaluations[2], evaluations[3]]
    expect(one?.knockout?.heads).toEqual([{ layer: 0, head: 0 }])
    expect(Number.isFinite(one?.knockout?.validationLoss)).toBe(true)
    expect(one?.knockout?.validationLoss).not.toBe(one?.line.validationLoss)
    // The minimal model is attention only: with every head knocked out its logits are 0, so the
    // loss is that of the uniform prediction, ln d.
    expect(all?.knockout?.validationLoss).toBeCloseTo(Math.log(task.vocabSize), 4)
    // Patterns: [head][query][key], rows sum to 1.
    const patterns = evaluations[0]?.patterns ?? []
    expect(patterns).toHaveLength(model.nHeads)
    expect(patterns[0]).toHaveLength(task.seqLength - 1)
    const row = patterns[1]?.[3] ?? []
    expect(row.reduce((a, b) => a + b, 0)).toBeCloseTo(1, 3)
  })
})

describe('runPlateaus', () => {
  it('starts at the initial loss and falls back to the oracle plateaus before the stages are found', () => {
    const { task } = resolveEmergenceConfig(TINY)
    const oracles = computeOracles(task, 0)
    const line = { seed: 0, step: 0, tokens: 0, seconds: 0, trainLoss: null, validationLoss: 2.5, lr: 0.1 }
    const lines = [
      {
        ...line,
        spanMass: [
          [0.1, 0.1],
          [0.1, 0.1],
        ],
        attentionEntropy: [1, 1],
        teacherKL: null,
        valueAlignment: null,
        perPositionLoss: [],
      },
    ]
    const analysis = analyzeRun(lines, ['newest', 'oldest'], headNames(1, 2), oracles.lines)
    const plateaus = runPlateaus(lines, analysis, oracles, 2)
    expect(plateaus?.[0]).toBe(2.5)
    expect(plateaus?.slice(1)).toEqual(oracles.plateaus.slice(1))
    expect(runPlateaus([], analysis, oracles, 2)).toBeNull()
  })
})
