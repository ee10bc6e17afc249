// A script of your own against the attnlab packages: copy this file, edit it, and run it from the
// repository root with `npx -y pnpm@12.4.2 example examples/hello.ts` (see examples/README.md).
import * as tf from '@tensorflow/tfjs-core'
import { Rng, useBackend } from '@attnlab/core'
import { SparseMarkovTask } from '@attnlab/markov'
import { createTransformer, presetConfig, train } from '@attnlab/transformer'

console.log('backend', await useBackend('wasm'))
const task = new SparseMarkovTask({ vocabSize: 8, spans: [1, 1], genLen: 6 })
const model = createTransformer(presetConfig('minimal', { dVocab: 8, nCtx: 7, nHeads: 2 }))
const result = await train(model, task, { steps: 50, batchSize: 64, lr: 0.08, validation: 256 })
console.log('validation loss', result.finalValidationLoss.toFixed(3), 'nats')

// tfjs-core's Node build has no chained ops: tf.sum(x), not x.sum().
const batch = task.sample(2, Rng.fromSeed(0)) // tokens: Int32Array [2, seqLength]
const tokens = tf.slice(tf.tensor2d(batch.tokens, [2, batch.seqLength], 'int32'), [0, 0], [2, batch.seqLength - 1])
const logits = model.forward(tokens as tf.Tensor2D) // [2, seqLength - 1, dVocab]
const total = tf.sum(tf.softmax(logits))
console.log('logits', logits.shape, 'probabilities sum to', (await total.data())[0]) // 2 * (seqLength - 1) = 14
tf.dispose([tokens, logits, total])
model.dispose()
