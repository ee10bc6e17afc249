// Sparse attention on the shared real models: compareWithDense (what `attnlab sparse compare` runs) with a
// prefill method (Block-Sparse) and a decode method (SnapKV) on stories260K (llama2.c) and tinystories656K
// (Hugging Face, tokenizer.json), both grouped-query attention. At sparsity 0 every method is dense (the same
// next-token distributions); at 0.8 it skips pairs and stays a distribution over the vocabulary.
import { existsSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import * as tf from '@tensorflow/tfjs-core'
import { describeWithBackends } from '@attnlab/core/testing'
import { loadModel, type LoadModelOptions } from '@attnlab/transformer'
import { expect, it } from 'vitest'
import { compareWithDense } from './index.ts'

const SHARED = resolve(dirname(fileURLToPath(import.meta.url)), '../../../../shared/models')
const MODELS: readonly { name: string; path: string; options: LoadModelOptions }[] = [
  {
    name: 'stories260K',
    path: join(SHARED, 'stories260K/stories260K.bin'),
    options: { tokenizer: join(SHARED, 'stories260K/tok512.bin') },
  },
  { name: 'tinystories656K', path: join(SHARED, 'tinystories656K'), options: { dummyPrefix: false } },
]
const STORY =
  'Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her dog, Max. ' +
  'One day, Lily and Max found a big red ball under a tree. They played with the ball all day long.'

describeWithBackends('sparse methods on the shared real models', () => {
  for (const { name, path, options } of MODELS) {
    const present = existsSync(path)
    if (!present) console.warn(`[attnlab] ${path} is absent: its sparse-attention test is skipped`)
    it.skipIf(!present)(`${name}: Block-Sparse and SnapKV against dense`, async () => {
      const { model, tokenizer } = await loadModel(path, options)
      try {
        const prompt = (tokenizer as NonNullable<typeof tokenizer>).encode(STORY)
        expect(prompt.length).toBeGreaterThan(24)
        const before = tf.memory().numTensors
        const result = await compareWithDense(model, prompt, ['block-sparse', 'snapkv'], {
          sparsities: [0, 0.8],
          decodeSteps: 4,
          flags: { blockSize: 8 },
        })
        expect(tf.memory().numTensors).toBe(before)
        expect(result.promptTokens).toBe(prompt.length)
        for (const row of result.rows) {
          expect(Number.isFinite(row.klDenseSparse), JSON.stringify(row)).toBe(true)
          if (row.targetSparsity === 0) {
            expect(row.top1Agreement).toBe(1)
            expect(row.klDenseSparse).toBeLessThan(1e-4)
          } else {
            expect(row.exactSparsity).toBeGreaterThan(0)
          }
        }
      } finally {
        model.dispose()
      }
    })
  }
})
