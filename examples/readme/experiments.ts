import { useBackend } from '@attnlab/core'
import { compareNotes, compareSpec, compareWithDense } from '@attnlab/experiments'
import { createTransformer, presetConfig } from '@attnlab/transformer'

await useBackend('wasm')
const model = createTransformer(presetConfig('gpt-nano', { nCtx: 64 }))
const prompt = Array.from({ length: 48 }, (_, i) => (i * 7) % model.config.dVocab)
// each method sized for each target sparsity on this prompt, measured against dense attention
const result = await compareWithDense(model, prompt, ['vertical-slash', 'block-sparse', 'snapkv', 'quest'], {
  sparsities: [0.5, 0.8],
  decodeSteps: 8,
})
for (const r of result.rows) {
  console.log(r.method, r.targetSparsity, r.exactSparsity.toFixed(3), r.klDenseSparse.toExponential(2), r.top1Agreement)
}
for (const line of compareNotes(result.rows, result.promptTokens)) console.log(line)
const spec = compareSpec(result.rows, 'gpt-nano: 48-token prompt vs dense') // a Vega-Lite spec, plain JSON
console.log(JSON.stringify(spec).length, 'characters of Vega-Lite')
model.dispose()
