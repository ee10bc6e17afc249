import { existsSync } from 'node:fs'
import { useBackend } from '@attnlab/core'
import { generate, loadModel, saveModelDirectory } from '@attnlab/transformer'

await useBackend('wasm')
// The model: a llama2.c .bin (its tokenizer.bin beside it is found), a Hugging Face directory
// (config.json + model.safetensors; its tokenizer.json is found), an attnlab-native directory or an
// attnlab training checkpoint.
// Default: aidreams260K where this project's tests keep it (outside the repository: a clone has none).
const usage = 'pnpm example examples/readme/transformer-import.ts MODEL [TOKENIZER]'
const [path = '../shared/models/aidreams260K/model.bin', tokenizerPath] = process.argv.slice(2)
if (!existsSync(path)) {
  console.error(`no model at ${path}; pass one: ${usage}`)
  console.error('(e.g. stories260K.bin and tok512.bin from huggingface.co/karpathy/tinyllamas)')
  process.exit(2)
}
const loaded = await loadModel(path, tokenizerPath === undefined ? {} : { tokenizer: tokenizerPath })
const { model, tokenizer, format, specialTokens, notes } = loaded
if (tokenizer === undefined) {
  console.error(`no tokenizer.bin or tokenizer.json beside ${path}; pass its tokenizer: ${usage}`)
  process.exit(2)
}
console.log(format, model.config.architecture, model.config.nLayers, 'layers', notes)
const prompt = tokenizer.encode('I dreamed') // BOS first
const { tokens } = await generate(model, prompt, { maxTokens: 20, temperature: 0, eosToken: specialTokens.eos ?? [] })
console.log(tokenizer.decode(tokens[0]!))
// Export: a Hugging Face LlamaForCausalLM directory (or attnlab-native when HF cannot hold the model).
const saved = await saveModelDirectory('runs/aidreams-hf', { config: model.config, weights: await model.getWeightData() })
console.log(saved.format, saved.files)
model.dispose()
