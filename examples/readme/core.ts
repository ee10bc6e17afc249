import * as tf from '@tensorflow/tfjs-core'
import { Rng, assertShape, useBackend } from '@attnlab/core'

await useBackend('wasm') // returns the backend actually selected; throws BackendUnavailableError if it cannot start
const rng = Rng.fromSeed(0)
const init = rng.split('init') // one stream per purpose: the same numbers whatever 'data' draws
const data = rng.split('data')
const x = tf.randomNormal([2, 8, 16], 0, 1, 'float32', init.int(2 ** 31))
assertShape(x, [2, 8, 16]) // throws ShapeError naming the tensor and the dimension
console.log(x.shape, data.float())
