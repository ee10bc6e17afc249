import * as tf from '@tensorflow/tfjs-core'
import { useBackend } from '@attnlab/core'
import { applyDecode, applyPrefill, combine, quest, verticalSlash } from '@attnlab/sparse-attention'
import { createTransformer, generate, presetConfig } from '@attnlab/transformer'

await useBackend('wasm')
// one sequence: q [H, T, dHead], k/v [Hkv, T, d] (here H = 4, Hkv = 2, T = 1024, d = 16)
const q = tf.randomNormal<tf.Rank.R3>([4, 1024, 16]), k = tf.randomNormal<tf.Rank.R3>([2, 1024, 16]), v = tf.randomNormal<tf.Rank.R3>([2, 1024, 16])
const { output, mask, maskShape, sparsity } = applyPrefill(verticalSlash({ verticalSize: 164, slashSize: 164 }), { q, k, v })
console.log(output.shape, maskShape, mask.length, sparsity) // mask: Uint8Array [H, T, T], 1 = computed; { exact, reported }
// one decode step: qNew [H, dHead], kNew/vNew [Hkv, d]; mask [H, T + 1]
const qNew = tf.randomNormal<tf.Rank.R2>([4, 16]), kNew = tf.randomNormal<tf.Rank.R2>([2, 16]), vNew = tf.randomNormal<tf.Rank.R2>([2, 16])
const step = applyDecode(quest({ tokenBudget: 816 }), { q, k, v }, { qNew, kNew, vNew })
console.log(step.output.shape, step.maskShape, step.sparsity)

// any attnlab model: the kernel implements AttentionKernel (prefill / afterPrefill / decode)
// (Quest decodes only contexts of at least tokenBudget + pageSize tokens: size it to the prompt)
const kernel = combine(verticalSlash(), quest({ tokenBudget: 32, pageSize: 16 }))
const model = createTransformer(presetConfig('gpt-nano', { nCtx: 64 }), { attention: kernel })
const prompt = Array.from({ length: 48 }, (_, i) => i % 10)
const { tokens } = await generate(model, prompt, { maxTokens: 5, temperature: 0 })
console.log(tokens)
