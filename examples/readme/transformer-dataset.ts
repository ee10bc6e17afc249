import { Rng, useBackend } from '@attnlab/core'
import { SparseMarkovTask } from '@attnlab/markov'
import { createTransformer, presetConfig, train } from '@attnlab/transformer'
import { loadCheckpointModel, saveCheckpoint } from '@attnlab/transformer/node'

await useBackend('wasm')
const task = new SparseMarkovTask({ vocabSize: 8, spans: [1, 1], genLen: 6 })
const rng = Rng.fromSeed(0)
const data = task.sample(4096, rng.split('train')) // a TokenBatch: a finite dataset
const heldOut = task.sample(512, rng.split('validation'))
const model = createTransformer(presetConfig('minimal', { dVocab: 8, nCtx: 7, nHeads: 2 }))
// A finite dataset needs `validation` (a TokenBatch): only an online task can sample its own.
const result = await train(model, data, { steps: 200, batchSize: 64, lr: 0.08, validation: heldOut })
console.log(result.finalValidationLoss)
await saveCheckpoint('runs/readme-checkpoint', model, null) // replaces only an empty dir or an earlier checkpoint
const again = await loadCheckpointModel('runs/readme-checkpoint')
