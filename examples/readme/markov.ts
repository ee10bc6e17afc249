import { Rng } from '@attnlab/core'
import { SparseMarkovTask, restrictedContextEntropy, sampleDataset, DatasetBatches } from '@attnlab/markov'

const task = new SparseMarkovTask({ vocabSize: 50, spans: [1, 1, 1] }) // m = 1.7, tau = 0.1, 20 generated tokens
const train = sampleDataset(task, 9000, Rng.fromSeed(0).split('train'))
const batches = new DatasetBatches(train, 3000, Rng.fromSeed(0).split('batches')) // without replacement
const oracle = restrictedContextEntropy(task) // H_n for n = 0..3, nats
const teacher1 = task.teacherProbabilities(batches.next(), { keepSpans: 1 }) // for KL(teacher_1 || model)
console.log(train.batchSize, oracle, teacher1.length)
