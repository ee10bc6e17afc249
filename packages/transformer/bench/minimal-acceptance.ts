/**
 * Acceptance experiment of the minimal model: train the `minimal` preset on sparse-markov (d = 50, spans
 * [2,2,2], m = 1.7, tau = 0.1) with AdamW lr 0.08, weight decay 0.01, grad clip 1.0, and report
 * the loss trajectory, when the validation loss comes within 0.1 nat of the teacher entropy,
 * head separation and per-head span masses.
 *
 *   node --conditions=@attnlab/source --import tsx bench/minimal-acceptance.ts \
 *     [--backend wasm] [--query-init 1e-5] [--batch 1024] [--steps 1500] [--train-size 0] [--seed 0] [--eval-every 25]
 *     [--lr 0.08] [--task-seed 0] [--out DIR (checkpoint every 100 steps)] [--resume DIR]
 *
 * `--train-size N` trains on a fixed dataset of N sequences (the paper: 9000 with batch 3000);
 * 0 (default) samples fresh sequences every step. Run under `flock /work/locks/bench` when timing.
 */
import { Rng, useBackend, type BackendName } from '@attnlab/core'
import { SparseMarkovTask } from '@attnlab/markov'
import { presetConfig } from '../src/config.ts'
import { headSeparation } from '../src/metrics.ts'
import { createTransformer } from '../src/model.ts'
import { train, type TrainerState } from '../src/train.ts'
import { loadCheckpoint, saveCheckpoint } from '../src/checkpoint.ts'

function flag(name: string, fallback: string): string {
  const index = process.argv.indexOf(`--${name}`)
  return index >= 0 ? (process.argv[index + 1] ?? fallback) : fallback
}

const backend = flag('backend', 'wasm') as BackendName
const queryInitFlag = flag('query-init', '1e-5')
const queryInit = queryInitFlag === 'xavier' ? 'xavier' : Number(queryInitFlag)
const batchSize = Number(flag('batch', '1024'))
const steps = Number(flag('steps', '1500'))
const trainSize = Number(flag('train-size', '0'))
const seed = Number(flag('seed', '0'))
const evalEvery = Number(flag('eval-every', '25'))
const lr = Number(flag('lr', '0.08'))
const taskSeed = Number(flag('task-seed', '0'))
const out = flag('out', '')
const resume = flag('resume', '')

await useBackend(backend)
const task = new SparseMarkovTask({ vocabSize: 50, spans: [2, 2, 2], m: 1.7, tau: 0.1, teacherSeed: taskSeed })
const model = createTransformer(presetConfig('minimal', { queryInit, seed }))
let resumeState: TrainerState | undefined
if (resume !== '') {
  const checkpoint = await loadCheckpoint(resume)
  model.setWeights(checkpoint.weights)
  resumeState = checkpoint.trainerState ?? undefined
}
const validation = task.sample(2000, Rng.fromSeed(seed).split('validation'))
const source = trainSize > 0 ? task.sample(trainSize, Rng.fromSeed(seed).split('dataset')) : task
console.log(
  `minimal preset, backend ${backend}, queryInit ${queryInit}, batch ${batchSize}, lr ${lr}, ` +
    `${trainSize > 0 ? `fixed dataset of ${trainSize}` : 'online sampling'}, seed ${seed}, teacher seed ${taskSeed}`,
)
const started = performance.now()
let teacherEntropy = Number.NaN
let reached: { step: number; seconds: number } | null = null
const result = await train(model, source, {
  steps,
  batchSize,
  lr,
  seed,
  optimizer: { kind: 'adamw', weightDecay: 0.01 },
  gradClip: 1,
  evalEvery,
  validation,
  analysis: { size: 512, teacher: task, offsetGroups: task.offsetGroups },
  ...(resumeState === undefined ? {} : { resume: resumeState }),
  ...(out === ''
    ? {}
    : { checkpointEvery: 100, onCheckpoint: (state: TrainerState) => saveCheckpoint(out, model, state) }),
  onEval: async (record) => {
    const metrics = record.metrics!
    teacherEntropy = metrics.teacherEntropy ?? teacherEntropy
    const masses = metrics.offsetGroupMass![0]!.map((groups) => groups.map((m) => m.toFixed(2)).join('/')).join('  ')
    const separation = await headSeparation(model)
    const wall = (performance.now() - started) / 1000
    if (reached === null && record.validationLoss <= teacherEntropy + 0.1)
      reached = { step: record.step, seconds: wall }
    console.log(
      `step ${String(record.step).padStart(5)}  train ${record.trainLoss.toFixed(3)}  val ` +
        `${record.validationLoss.toFixed(3)}  ` +
        `KL(k=1,2,3) ${metrics.teacherKL!.map((k) => k.toFixed(2)).join('/')}  mass[head: ` +
        `${metrics.offsetGroupNames!.join('/')}] ${masses}  ` +
        `sep ${separation.toExponential(1)}  lr ${record.lr}  ${wall.toFixed(0)}s`,
    )
  },
})
console.log(
  JSON.stringify({
    teacherEntropy,
    finalValidationLoss: result.finalValidationLoss,
    reachedWithin0_1Nat: reached,
    steps: result.steps,
    wallSeconds: (performance.now() - started) / 1000,
    trainingSeconds: result.seconds,
    tokensPerSecond: result.tokensPerSecond,
  }),
)
model.dispose()
