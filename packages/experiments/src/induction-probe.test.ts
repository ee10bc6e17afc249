// The induction probe through training: the induction step's definition on synthetic curves, the probe's scores
// (deterministic, no leaked tensors, every head ranked), and a tiny run on the text task
// that records the probe at every evaluation.
import * as tf from '@tensorflow/tfjs-core'
import { InvalidArgumentError, useBackend } from '@attnlab/core'
import { createTransformer, presetConfig } from '@attnlab/transformer'
import { beforeAll, describe, expect, it } from 'vitest'
import {
  INDUCTION_THRESHOLD,
  inductionHeadDamage,
  inductionProbes,
  inductionStep,
  scoreInduction,
} from './induction-probe.ts'
import { resolveTrainingConfig, runTraining } from './training.ts'

beforeAll(async () => {
  await useBackend('cpu')
})

const curve = (gains: readonly number[]) => gains.map((inductionGain, i) => ({ step: 10 * (i + 1), inductionGain }))

describe('inductionStep', () => {
  it('is the first evaluation from which the gain stays at or above the threshold', () => {
    expect(INDUCTION_THRESHOLD).toBe(1)
    expect(inductionStep(curve([0, 0.2, 1.5, 2, 2.5]))).toBe(30)
    // A rise that falls back does not count; the later lasting one does.
    expect(inductionStep(curve([0, 1.2, 0.4, 1, 3]))).toBe(40)
    expect(inductionStep(curve([0, 1.2, 2, 0.9]))).toBeNull()
    expect(inductionStep(curve([0, 0.5, 0.6]), 0.5)).toBe(20)
    expect(inductionStep([])).toBeNull()
    expect(inductionStep([{ step: 5 }, { step: 10, inductionGain: 2 }])).toBe(10)
    expect(() => inductionStep(curve([1]), Number.NaN)).toThrow(InvalidArgumentError)
  })
})

describe('the probe on a model', () => {
  it('scores the same numbers twice, leaks no tensor and ranks every head', async () => {
    const config = presetConfig('gpt', { dVocab: 12, nCtx: 16, nLayers: 2, dModel: 16, nHeads: 2, seed: 3 })
    const model = createTransformer(config)
    try {
      const probes = inductionProbes(
        config,
        Array.from({ length: 11 }, (_, i) => i),
      )
      const before = tf.memory().numTensors
      const a = await scoreInduction(model, probes)
      const b = await scoreInduction(model, probes)
      const heads = await inductionHeadDamage(model, probes)
      expect(tf.memory().numTensors).toBe(before)
      expect(a).toEqual(b)
      expect(a.logprob).toBeLessThan(0)
      expect(Number.isFinite(a.gain)).toBe(true)
      expect(heads.map((h) => h.head).sort()).toEqual(['L0H0', 'L0H1', 'L1H0', 'L1H1'])
      for (let i = 1; i < heads.length; i++)
        expect((heads[i - 1] as { damage: number }).damage).toBeGreaterThanOrEqual(
          (heads[i] as { damage: number }).damage,
        )
      // An untrained model does not copy: no gain to speak of.
      expect(Math.abs(a.gain)).toBeLessThan(INDUCTION_THRESHOLD)
    } finally {
      model.dispose()
    }
  })

  it('refuses a context too short for the probe', () => {
    expect(() => inductionProbes({ dVocab: 8, nCtx: 2 }, [0, 1, 2])).toThrow(/too short for an induction probe/)
  })
})

describe('runTraining with the induction probe', () => {
  it('records the probe at every evaluation on the text task and the head damage at the end', async () => {
    const resolved = resolveTrainingConfig({
      task: { kind: 'text-chars', seqLength: 33 },
      preset: 'gpt',
      model: { nLayers: 2, dModel: 16, nHeads: 2 },
      steps: 4,
      batchSize: 4,
      lr: 0.003,
      evalEvery: 2,
      validationSize: 8,
      probe: 'induction',
    })
    expect(resolved.config.probe).toBe('induction')
    const before = tf.memory().numTensors
    const run = () =>
      runTraining(resolved.task, resolved.model, resolved.settings, {
        steps: 4,
        evalEvery: 2,
        checkpointEvery: 0,
        inductionProbe: true,
      })
    const result = await run()
    expect(tf.memory().numTensors).toBe(before)
    expect(result.evaluations.map((e) => e.step)).toEqual([2, 4])
    for (const e of result.evaluations) {
      expect(e.inductionLogprob).toBeLessThan(0)
      expect(Number.isFinite(e.inductionGain)).toBe(true)
    }
    expect(result.induction?.heads).toHaveLength(4)
    expect(result.induction?.finalGain).toBe(result.evaluations[1]?.inductionGain)
    expect(result.induction?.step).toBe(inductionStep(result.evaluations))
    // Same seed, same numbers on cpu.
    expect((await run()).evaluations).toEqual(result.evaluations)
    // Without the probe: no probe fields.
    const plain = await runTraining(resolved.task, resolved.model, resolved.settings, {
      steps: 2,
      evalEvery: 2,
      checkpointEvery: 0,
    })
    expect(plain.induction).toBeNull()
    expect(plain.evaluations[0]).not.toHaveProperty('inductionGain')
  })
})
