import { useBackend } from '@attnlab/core'
import { compressedSensing, exhaustiveSweep, inductionCapability, textCapability, knockoutEffects, HELD_OUT_SENTENCES } from '@attnlab/knockout'
import { loadModel } from '@attnlab/transformer'

await useBackend('wasm')
// A llama2.c .bin, a Hugging Face directory or an attnlab checkpoint; this path (from the
// repository root) is where the repository's tests look for aidreams260K.
const { model, tokenizer } = await loadModel('../shared/models/aidreams260K/model.bin')
const probe = inductionCapability({ vocabSize: 512, prefix: [1], blockLength: 16 })   // repeat a random block, score the 2nd copy
const text = textCapability(HELD_OUT_SENTENCES.map((s) => tokenizer!.encode(s)))     // ordinary next-token loss

const found = await compressedSensing(model, probe, { masks: 100, fraction: 0.02, seed: 0, top: 5 })
console.log(found.top)          // heads with the most negative Lasso coefficients: [{ layer, head, index, score }]
console.log(found.evaluations)  // 100 (one per mask), run in ~13 batched forward passes
console.log(found.fit.r2)       // in-sample R^2 of the Lasso
const sweep = await exhaustiveSweep(model, probe, { top: 5 }) // N + 1 = 17 evaluations: the ground truth here
console.log(sweep.top.map((h) => `${h.layer}.${h.head}`))
const effects = await knockoutEffects(model, found.top, [probe, text], { target: probe.name })
console.log(effects.rows, effects.ratio) // before / after per capability; ratio = target hurt / worst control hurt
