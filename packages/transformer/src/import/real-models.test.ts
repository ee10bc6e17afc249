import { existsSync } from 'node:fs'
import { join } from 'node:path'
import * as tf from '@tensorflow/tfjs-core'
import { describeWithBackends, expectArraysClose } from '@attnlab/core/testing'
import { expect, it } from 'vitest'
import { REPO_ROOT } from '../__fixtures__/import/aidreams.ts'
import { loadModel, type LoadModelOptions } from './load.ts'

// The shared stories260K (llama2.c, 5 layers x 8 query heads on 4 kv heads) and tinystories656K (Hugging Face,
// 2 x 8 on 4, tokenizer.json) through runWithCache: every hook of the grouped-query attention has the shape
// docs/architecture/hooks.md gives, the patterns are causal distributions, and the cached logits are forward's.
const SHARED = join(REPO_ROOT, '../shared/models')
const MODELS: readonly { name: string; path: string; options: LoadModelOptions; text: string }[] = [
  {
    name: 'stories260K',
    path: join(SHARED, 'stories260K/stories260K.bin'),
    options: { tokenizer: join(SHARED, 'stories260K/tok512.bin') },
    text: 'Once upon a time, there was a little girl named Lily.',
  },
  {
    name: 'tinystories656K',
    path: join(SHARED, 'tinystories656K'),
    options: { dummyPrefix: false },
    text: 'Once upon a time, there was a little girl named Lily.',
  },
]

describeWithBackends('runWithCache on the shared real models (grouped-query attention)', () => {
  for (const { name, path, options, text } of MODELS) {
    const present = existsSync(path)
    if (!present) console.warn(`[attnlab] ${path} is absent: its runWithCache test is skipped`)
    it.skipIf(!present)(`${name}: hook shapes, causal patterns, cached logits = forward`, async () => {
      const { model, tokenizer } = await loadModel(path, options)
      try {
        const { nLayers, nHeads, nKvHeads, dHead, dModel, dVocab } = model.config
        const ids = (tokenizer as NonNullable<typeof tokenizer>).encode(text)
        const pos = ids.length
        const before = tf.memory().numTensors
        const last = nLayers - 1
        const { logits, cache } = model.runWithCache([ids], {
          namesFilter: (hook) =>
            hook.startsWith(`blocks.${last}.attn.`) ||
            hook === `blocks.${last}.hook_resid_post` ||
            hook === 'hook_embed',
        })
        expect(cache.get('hook_embed')?.shape).toEqual([1, pos, dModel])
        expect(cache.get(`blocks.${last}.attn.hook_q`)?.shape).toEqual([1, pos, nHeads, dHead])
        expect(cache.get(`blocks.${last}.attn.hook_k`)?.shape).toEqual([1, pos, nKvHeads, dHead])
        expect(cache.get(`blocks.${last}.attn.hook_v`)?.shape).toEqual([1, pos, nKvHeads, dHead])
        expect(cache.get(`blocks.${last}.attn.hook_z`)?.shape).toEqual([1, pos, nHeads, dHead])
        const pattern = cache.get(`blocks.${last}.attn.hook_pattern`) as tf.Tensor
        expect(pattern.shape).toEqual([1, nHeads, pos, pos])
        const values = (await pattern.data()) as Float32Array
        for (let h = 0; h < nHeads; h++) {
          for (let q = 0; q < pos; q++) {
            let sum = 0
            for (let k = 0; k < pos; k++) {
              const p = values[(h * pos + q) * pos + k] as number
              if (k > q) expect(p).toBe(0)
              sum += p
            }
            expect(sum).toBeCloseTo(1, 4)
          }
        }
        expect(logits.shape).toEqual([1, pos, dVocab])
        const plain = model.forward([ids])
        expectArraysClose(await logits.data(), await plain.data(), 1e-4, 1e-4)
        tf.dispose([logits, plain])
        cache.dispose()
        expect(tf.memory().numTensors).toBe(before)
      } finally {
        model.dispose()
      }
    })
  }
})
