// runSparseEval on a tiny niah-tokens model trained here for a few seconds: dense scores equal
// an independent teacher-forced accuracy, sparsity 0 equals dense, sparsities and costs are
// consistent, the same seed gives the same rows, bad input is typed, no tensors leak.
import * as tf from '@tensorflow/tfjs-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ConfigError, Rng, useBackend } from '@attnlab/core'
import { NiahTokensTask } from '@attnlab/markov'
import { createTransformer, type Transformer } from '@attnlab/transformer'
import { ExperimentInputError, resolveTrainingConfig, runSparseEval, runTraining } from './index.ts'

const TASK = { kind: 'niah-tokens', nCtx: 48, needles: 1, keyTokens: 24, valueTokens: 4 } as const
let model: Transformer

beforeAll(async () => {
  await useBackend('cpu')
  const {
    task,
    model: config,
    settings,
  } = resolveTrainingConfig({
    task: TASK,
    preset: 'llama',
    model: { dModel: 32, nHeads: 2, nLayers: 2 },
    steps: 20,
    batchSize: 8,
    lr: 0.01,
    validationSize: 16,
    evalEvery: 0,
  })
  model = createTransformer(config)
  await runTraining(task, config, settings, {
    steps: 20,
    evalEvery: 0,
    checkpointEvery: 0,
    // the trainer disposes its model at the end: copy the trained weights into ours
    save: async (trained) => {
      const weights = new Map<string, { shape: number[]; data: Float32Array }>()
      for (const [name, variable] of trained.getWeights())
        weights.set(name, { shape: [...variable.shape], data: new Float32Array(await variable.data()) })
      model.setWeights(weights)
    },
  })
}, 600_000) // seconds idle; minutes when every package's tests share 2 cores in CI

/** Teacher-forced dense accuracy: argmax of one forward pass at the answer position (1 needle: the same as greedy). */
function teacherForcedAccuracy(samples: number, seed: number, length: number): number[] {
  const { kind: _, ...config } = TASK
  const task = new NiahTokensTask({ ...config, nCtx: length })
  const batch = task.sample(samples, Rng.fromSeed(seed).split(`sparse-eval/niah-tokens/${length}`))
  const L = task.seqLength
  const p = task.answerPositions[0] as number
  const right: number[] = []
  for (let b = 0; b < samples; b++) {
    const tokens = Array.from(batch.tokens.subarray(b * L, b * L + p))
    const logits = model.forward([tokens])
    const last = tf.tidy(() => tf.argMax(tf.slice(logits, [0, p - 1, 0], [1, 1, -1]), -1))
    right.push((last.dataSync()[0] as number) === batch.tokens[b * L + p] ? 1 : 0)
    tf.dispose([logits, last])
  }
  return right
}

describe('runSparseEval', () => {
  it('dense equals the teacher-forced accuracy, sparsity 0 equals dense, consistent sparsities and costs', async () => {
    const before = tf.memory().numTensors
    const options = {
      tasks: [TASK],
      methods: ['snapkv', 'block-sparse'] as const,
      sparsities: [0, 0.5, 0.8],
      lengths: [40, 48],
      samples: 6,
      seed: 2,
    }
    const result = await runSparseEval(model, options)
    expect(tf.memory().numTensors).toBe(before)
    expect(result.rows.length).toBe(2 * (1 + 2 * 3))
    for (const length of [40, 48]) {
      const rows = result.rows.filter((r) => r.length === length)
      const dense = rows.find((r) => r.method === 'dense')
      const reference = teacherForcedAccuracy(6, 2, length)
      const mean = reference.reduce((a, b) => a + b, 0) / 6
      const std = Math.sqrt(reference.reduce((a, b) => a + (b - mean) ** 2, 0) / 5)
      expect(dense?.score).toBeCloseTo(mean, 12)
      expect(dense?.strict).toBeCloseTo(mean, 12)
      expect(dense?.scoreStd).toBeCloseTo(std, 12)
      expect(dense?.exactSparsity).toBe(0)
      for (const row of rows.filter((r) => r.targetSparsity === 0)) {
        expect(row.score).toBe(dense?.score)
        expect(row.cost?.relative).toBeCloseTo(1, 12)
      }
      for (const row of rows.filter((r) => r.targetSparsity > 0)) {
        expect(row.phase).toBe(row.method === 'snapkv' ? 'decode' : 'prefill')
        expect(row.exactSparsity).toBeGreaterThan(0)
        expect(row.cost?.metric).toBe(row.method === 'snapkv' ? 'decode-memory' : 'prefill-flops')
        expect(row.cost?.relative).toBeLessThan(1)
        expect(Object.keys(row.budget).length).toBeGreaterThan(0)
        expect(row.score).toBeGreaterThanOrEqual(0)
        expect(row.score).toBeLessThanOrEqual(1)
      }
      const snap = rows.filter((r) => r.method === 'snapkv' && r.targetSparsity > 0)
      expect((snap[1] as (typeof snap)[number]).exactSparsity).toBeGreaterThan(
        (snap[0] as (typeof snap)[number]).exactSparsity,
      )
      expect(dense?.promptTokens).toBe(length)
    }
    // Which heads retrieve: one row per layer and head at each length, measured on the same sequences.
    expect(result.heads?.map((h) => `${h.length}:L${h.layer}H${h.head}`)).toEqual(
      [40, 48].flatMap((l) => [`${l}:L0H0`, `${l}:L0H1`, `${l}:L1H0`, `${l}:L1H1`]),
    )
    for (const head of result.heads ?? []) expect(head.samples).toBe(6)
    const again = await runSparseEval(model, options)
    expect(again.rows).toEqual(result.rows)
    expect(again.heads).toEqual(result.heads)
    const without = await runSparseEval(model, { ...options, methods: ['dense'] as const, lengths: [40], heads: false })
    expect(without.heads).toEqual([])
  }, 600_000) // 8 s idle; minutes when every package's tests share 2 cores

  it('refuses bad input with typed errors', async () => {
    const base = { tasks: [TASK], methods: ['quest' as const], lengths: [48], samples: 2 }
    await expect(runSparseEval(model, { ...base, lengths: [49] })).rejects.toThrow(
      /length 49 is not an integer in \[1, 48\]: the model's context \(nCtx\) is 48/,
    )
    await expect(runSparseEval(model, { ...base, lengths: [49] })).rejects.toBeInstanceOf(ExperimentInputError)
    await expect(runSparseEval(model, { ...base, methods: ['questt' as never] })).rejects.toThrow(/'questt'/)
    await expect(runSparseEval(model, { ...base, sparsities: [1] })).rejects.toThrow(/sparsities/)
    await expect(runSparseEval(model, { ...base, samples: 0 })).rejects.toThrow(/samples/)
    await expect(runSparseEval(model, { ...base, tasks: [{ kind: 'linear-map' }] })).rejects.toThrow(
      /has no answer positions/,
    )
    await expect(runSparseEval(model, { ...base, tasks: [{ ...TASK, valueTokens: 40 }] })).rejects.toThrow(
      /uses 66 token ids but the model's vocabulary is 30/,
    )
    await expect(runSparseEval(model, { ...base, methods: ['quest', 'quest'] })).rejects.toThrow(
      /methods lists quest twice/,
    )
    await expect(runSparseEval(model, { ...base, sparsities: [0.5, 0.9, 0.5] })).rejects.toThrow(
      /sparsities lists 0.5 twice/,
    )
    await expect(runSparseEval(model, { ...base, lengths: [48, 48] })).rejects.toBeInstanceOf(ExperimentInputError)
    await expect(runSparseEval(model, { ...base, tasks: [TASK, { ...TASK }] })).rejects.toThrow(
      /tasks lists niah-tokens {"nCtx":48,.*} twice/,
    )
    const tooShort = { ...base, tasks: [{ ...TASK, needles: 4 }], lengths: [8] }
    await expect(runSparseEval(model, tooShort)).rejects.toBeInstanceOf(ConfigError)
  })
})

afterAll(() => model?.dispose())
