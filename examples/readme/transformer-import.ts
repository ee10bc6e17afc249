import { useBackend } from '@attnlab/core'
import { generate, loadModel, saveModelDirectory } from '@attnlab/transformer'

await useBackend('wasm')
// A llama2.c .bin (its tokenizer.bin beside it is found), a Hugging Face directory
// (config.json + model.safetensors), an attnlab-native directory or an attnlab training checkpoint.
const { model, tokenizer, format, specialTokens, notes } = await loadModel('../shared/models/aidreams260K/model.bin')
console.log(format, model.config.architecture, model.config.nLayers, 'layers', notes)
const prompt = [specialTokens.bos ?? 1, ...tokenizer!.encode('I dreamed')]
const { tokens } = await generate(model, prompt, { maxTokens: 20, temperature: 0, eosToken: specialTokens.eos ?? [] })
console.log(tokenizer!.decode(tokens[0]!))
// Export: a Hugging Face LlamaForCausalLM directory (or attnlab-native when HF cannot hold the model).
const saved = await saveModelDirectory('runs/aidreams-hf', { config: model.config, weights: await model.getWeightData() })
console.log(saved.format, saved.files)
model.dispose()
