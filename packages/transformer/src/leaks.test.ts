// Tensor leaks of the library flows a script uses directly (the CLI's flows are audited in apps/cli):
// training with evaluation and analysis, runWithCache, runWithHooks, generation with the KV cache
// (greedy and sampled, one and several prompts), on every architecture. Each call leaves
// tf.memory().numTensors where it found it, once the results the caller owns are disposed.
import { useBackend } from '@attnlab/core'
import { SparseMarkovTask } from '@attnlab/markov'
import * as tf from '@tensorflow/tfjs-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { presetConfig, type PresetName } from './config.ts'
import { generate } from './generate.ts'
import { createTransformer } from './model.ts'
import { train } from './train.ts'

const task = new SparseMarkovTask({ vocabSize: 8, spans: [1, 1], genLen: 6, tau: 0.3 })
const audited: string[] = []
beforeAll(async () => {
  await useBackend('cpu')
})
afterAll(() => console.info(`transformer leak audit: ${audited.length} flows flat`))

async function expectFlat(name: string, flow: () => Promise<void>): Promise<void> {
  await flow() // first call: lazily created state (kernels, caches) may stay; the second must not grow
  const before = tf.memory().numTensors
  await flow()
  expect(tf.memory().numTensors - before, `${name} left tensors`).toBe(0)
  audited.push(name)
}

describe.each(['minimal', 'gpt-nano', 'llama'] as PresetName[])('no leaked tensors: %s', (preset) => {
  const small = preset === 'llama' ? { dModel: 16, nHeads: 2, nLayers: 1 } : {}
  const config = presetConfig(preset, { dVocab: 8, nCtx: 7, ...small })

  it('train (evaluation, analysis, checkpoints), runWithCache, runWithHooks, generate with the KV cache', async () => {
    const before = tf.memory().numTensors
    const model = createTransformer(config)
    await expectFlat(`${preset} train`, async () => {
      await train(model, task, {
        steps: 3,
        batchSize: 4,
        lr: 0.01,
        validation: 8,
        evalEvery: 1,
        analysis: { size: 4 },
        checkpointEvery: 2,
        onCheckpoint: () => {},
      })
    })
    const tokens = [
      [1, 2, 3, 4],
      [4, 3, 2, 1],
    ]
    await expectFlat(`${preset} runWithCache`, async () => {
      const { logits, cache } = model.runWithCache(tokens, { namesFilter: (name) => name.endsWith('hook_pattern') })
      expect(cache.names().length).toBeGreaterThan(0)
      logits.dispose()
      cache.dispose()
    })
    await expectFlat(`${preset} runWithHooks`, async () => {
      const logits = model.runWithHooks(tokens, {
        fwdHooks: [[(name: string) => name.endsWith('hook_z'), (z: tf.Tensor) => tf.mul(z, 0.5)]],
      })
      logits.dispose()
    })
    await expectFlat(`${preset} generate greedy (KV cache)`, async () => {
      await generate(model, [1, 2, 3], { maxTokens: 3, temperature: 0 })
    })
    await expectFlat(`${preset} generate sampled, two prompts (KV cache)`, async () => {
      await generate(model, tokens, { maxTokens: 2, temperature: 1, topK: 4, seed: 3 })
    })
    model.dispose()
    expect(tf.memory().numTensors).toBe(before)
  })
})
