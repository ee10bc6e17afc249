// runTraining as a library call: a tiny run (evaluations, checkpoints through save, no leaked
// tensors), an exact resume from a saved state on cpu, and resolveTrainingConfig's typed errors.
import * as tf from '@tensorflow/tfjs-core'
import { beforeAll, describe, expect, it } from 'vitest'
import { ConfigError, useBackend } from '@attnlab/core'
import type { TrainerState } from '@attnlab/transformer'
import { TRAINING_DEFAULTS, defaultTrainingConfig, resolveTrainingConfig, runTraining } from './index.ts'

const TINY = {
  task: { kind: 'sparse-markov' as const, vocabSize: 8, spans: [1, 1], genLen: 6, tau: 0.3 },
  steps: 12,
  batchSize: 8,
  validationSize: 16,
  evalEvery: 4,
}

beforeAll(async () => {
  await useBackend('cpu')
})

describe('resolveTrainingConfig', () => {
  it("has attnlab train's defaults", () => {
    const config = defaultTrainingConfig()
    expect(config).toMatchObject({
      preset: 'minimal',
      seed: 0,
      steps: TRAINING_DEFAULTS.steps,
      batchSize: TRAINING_DEFAULTS.batch,
      lr: TRAINING_DEFAULTS.lr,
      evalEvery: TRAINING_DEFAULTS.evalEvery,
      checkpointEvery: 0,
      optimizer: { kind: 'adamw', weightDecay: 0.01 },
    })
  })

  it('refuses unknown keys, values out of range and a training set below one batch', () => {
    expect(() => resolveTrainingConfig({ ...TINY, stps: 3 } as never)).toThrow(/did you mean 'steps'/)
    expect(() => resolveTrainingConfig({ ...TINY, lr: -1 })).toThrow(ConfigError)
    expect(() => resolveTrainingConfig({ ...TINY, trainSize: 4 })).toThrow(
      'Invalid trainSize: 4 is smaller than batchSize 8; expected 0 (fresh sequences) or at least one batch',
    )
    expect(() => resolveTrainingConfig({ ...TINY, task: { kind: 'sparse-markov', vocabSize: 1 } })).toThrow(ConfigError)
  })
})

describe('runTraining', () => {
  it('trains, saves through the callback, and resumes exactly (cpu)', async () => {
    const { task, model, settings } = resolveTrainingConfig(TINY)
    const before = tf.memory().numTensors
    const saved: { state: TrainerState; weights: Map<string, { shape: number[]; data: Float32Array }> }[] = []
    const whole = await runTraining(task, model, settings, {
      steps: 12,
      evalEvery: 4,
      checkpointEvery: 6,
      save: async (trained, state) => {
        const weights = new Map<string, { shape: number[]; data: Float32Array }>()
        for (const [name, variable] of trained.getWeights())
          weights.set(name, { shape: [...variable.shape], data: new Float32Array(await variable.data()) })
        // Copied as a checkpoint file would hold them (the trainer keeps using its own objects).
        saved.push({ state: structuredClone(state), weights })
      },
    })
    expect(tf.memory().numTensors).toBe(before)
    expect(whole.evaluations.map((e) => e.step)).toEqual([4, 8, 12])
    expect(saved.map((s) => s.state.step)).toEqual([6, 12])
    const half = saved[0] as (typeof saved)[number]
    const resumed = await runTraining(task, model, settings, {
      steps: 12,
      evalEvery: 4,
      checkpointEvery: 0,
      resume: { state: half.state, weights: half.weights, evaluations: whole.evaluations.slice(0, 1) },
    })
    expect(resumed.finalValidationLoss).toBe(whole.finalValidationLoss)
    // Train losses are means over a session's steps since its last evaluation; validation is exact.
    const validation = (run: typeof whole) => run.evaluations.map((e) => [e.step, e.validationLoss])
    expect(validation(resumed)).toEqual(validation(whole))
    expect(tf.memory().numTensors).toBe(before)
  })
})
