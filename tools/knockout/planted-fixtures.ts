// Trains the tiny planted-ground-truth model the @attnlab/knockout tests use and writes it as a
// committed fixture (an attnlab checkpoint directory, ~10 KB):
//
//   packages/knockout/src/__fixtures__/planted-minimal/
//
// The model is Yüksel et al.'s minimal model (arXiv 2602.19143) with 3 heads, trained on a sparse
// Markov chain with three single-token spans of equal importance (m = 1, tau = 0.3, d = 8). Each
// head ends up attending to one span (> 0.9 attention mass), so the head a span capability needs
// is known by construction. The head -> span assignment is read from the attention masses after
// training and stored in the checkpoint's `extra.planted`, together with the task description.
//
// Run by hand from the repo root (about a minute on wasm):
//   node --conditions=@attnlab/source --import tsx tools/knockout/planted-fixtures.ts
import { join } from 'node:path'
import { useBackend } from '../../packages/core/src/index.ts'
import { SparseMarkovTask } from '../../packages/markov/src/index.ts'
import { createTransformer, presetConfig, train } from '../../packages/transformer/src/index.ts'
import { saveCheckpoint } from '../../packages/transformer/src/node.ts'

const out = join(import.meta.dirname, '..', '..', 'packages', 'knockout', 'src', '__fixtures__', 'planted-minimal')
await useBackend('wasm')
const task = new SparseMarkovTask({ vocabSize: 8, spans: [1, 1, 1], m: 1, tau: 0.3, genLen: 8, teacherSeed: 0 })
const model = createTransformer(presetConfig('minimal', { dVocab: 8, nCtx: task.seqLength - 1, nHeads: 3, queryInit: 1e-3, seed: 0 }))
let mass: readonly (readonly number[])[] = []
let names: readonly string[] = []
const result = await train(model, task, {
  steps: 300,
  batchSize: 512,
  lr: 0.08,
  seed: 0,
  evalEvery: 50,
  validation: 1024,
  onEval: (e) => {
    mass = e.metrics?.offsetGroupMass?.[0] ?? []
    names = e.metrics?.offsetGroupNames ?? []
    console.log(`step ${e.step}: validation loss ${e.validationLoss.toFixed(4)} (teacher entropy ${e.metrics?.teacherEntropy?.toFixed(4)})`)
  },
})
// offsetGroups are ordered most important first (ties: newer first); map each group back to its span index.
const groupSpan = task.offsetGroups.map((g) => Number(/^span (\d+)/.exec(g.name)?.[1]))
const owners: Record<string, number> = {}
mass.forEach((row, head) => {
  const best = row.indexOf(Math.max(...row))
  console.log(`head ${head}: mass ${row.map((m, g) => `${names[g]}=${m.toFixed(3)}`).join(', ')}`)
  if ((row[best] as number) < 0.9) throw new Error(`head ${head} is not specialised (max mass ${row[best]}); train longer`)
  owners[`span-${groupSpan[best]}`] = head
})
if (Object.keys(owners).length !== 3) throw new Error(`heads do not own distinct spans: ${JSON.stringify(owners)}`)
await saveCheckpoint(out, model, null, {
  task: task.describe(),
  planted: Object.fromEntries(Object.entries(owners).map(([span, head]) => [span, [{ layer: 0, head }]])),
  attentionMass: mass,
  training: { steps: 300, batchSize: 512, lr: 0.08, seed: 0, finalValidationLoss: result.finalValidationLoss },
})
console.log(`wrote ${out}: ${JSON.stringify(owners)}`)
model.dispose()
