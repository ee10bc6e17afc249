import { useBackend } from '@attnlab/core'
import { SparseMarkovTask } from '@attnlab/markov'
import { createTransformer, presetConfig, train } from '@attnlab/transformer'

await useBackend('wasm')
const task = new SparseMarkovTask({ vocabSize: 50, spans: [2, 2, 2], m: 1.7, tau: 0.1 })
const model = createTransformer(presetConfig('minimal'))
const result = await train(model, task, {
  steps: 1500, batchSize: 1024, lr: 0.08, optimizer: { kind: 'adamw', weightDecay: 0.01 }, gradClip: 1,
  evalEvery: 25,
  onEval: (r) => console.log(r.step, r.validationLoss, r.metrics?.offsetGroupMass),
})
