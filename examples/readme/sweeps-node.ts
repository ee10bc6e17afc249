import { useBackend } from '@attnlab/core'
import { expandTrials, parseSweepSpec } from '@attnlab/sweeps'
import { runTrial } from '@attnlab/sweeps/node'

await useBackend('cpu')
const spec = parseSweepSpec(
  `name: tiny
experiment: emergence
base:
  task: { kind: sparse-markov, vocabSize: 8, spans: [1, 1], genLen: 6, tau: 0.3 }
  training: { steps: 20, batchSize: 16, validationSize: 32, analysisSize: 16, evalEvery: 5 }
seeds: 2
`,
  'tiny.yaml',
)
const [first] = await expandTrials(spec)
if (first === undefined) throw new Error('no trials')
const record = await runTrial('runs/sweep-readme', first, { sweep: spec.name }) // writes runs/sweep-readme/trials/<id>/
console.log(record.id, record.status, record.metrics.finalValidationLoss?.toFixed(4), 'nats')
