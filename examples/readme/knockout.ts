import { existsSync } from 'node:fs'
import { useBackend } from '@attnlab/core'
import { compressedSensing, exhaustiveSweep, inductionCapability, textCapability, knockoutEffects, HELD_OUT_SENTENCES } from '@attnlab/knockout'
import { loadModel } from '@attnlab/transformer'

await useBackend('wasm')
// The model: a llama2.c .bin (its tokenizer.bin beside it is found), a Hugging Face directory
// (config.json + model.safetensors), an attnlab-native directory or an attnlab training checkpoint.
// Default: aidreams260K where this project's tests keep it (outside the repository: a clone has none).
const usage = 'pnpm example examples/readme/knockout.ts MODEL [TOKENIZER]'
const [path = '../shared/models/aidreams260K/model.bin', tokenizerPath] = process.argv.slice(2)
if (!existsSync(path)) {
  console.error(`no model at ${path}; pass one: ${usage}`)
  console.error('(e.g. stories260K.bin and tok512.bin from huggingface.co/karpathy/tinyllamas)')
  process.exit(2)
}
const loaded = await loadModel(path, tokenizerPath === undefined ? {} : { tokenizer: tokenizerPath })
const { model, tokenizer } = loaded
if (tokenizer === undefined) {
  console.error(`no tokenizer.bin beside ${path}; pass its tokenizer: ${usage}`)
  process.exit(2)
}
const probe = inductionCapability({ vocabSize: 512, prefix: [1], blockLength: 16 })   // repeat a random block, score the 2nd copy
const text = textCapability(HELD_OUT_SENTENCES.map((s) => tokenizer.encode(s)))     // ordinary next-token loss

const found = await compressedSensing(model, probe, { masks: 100, fraction: 0.02, seed: 0, top: 5 })
console.log(found.top)          // heads with the most negative Lasso coefficients: [{ layer, head, index, score }]
console.log(found.evaluations)  // 100 (one per mask), run in ~13 batched forward passes
console.log(found.fit.r2)       // in-sample R^2 of the Lasso
const sweep = await exhaustiveSweep(model, probe, { top: 5 }) // N + 1 = 17 evaluations: the ground truth here
console.log(sweep.top.map((h) => `${h.layer}.${h.head}`))
const effects = await knockoutEffects(model, found.top, [probe, text], { target: probe.name })
console.log(effects.rows, effects.ratio) // before / after per capability; ratio = target hurt / worst control hurt
