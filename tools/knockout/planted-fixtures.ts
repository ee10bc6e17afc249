// Trains the tiny planted-ground-truth models the @attnlab/knockout tests use and writes them as
// committed fixtures (attnlab checkpoint directories):
//
//   packages/knockout/src/__fixtures__/planted-minimal/      (~10 KB)
//   packages/knockout/src/__fixtures__/planted-mixture-gpt/  (~90 KB)
//
// 1. Yüksel et al.'s minimal model (arXiv 2602.19143) with 3 heads, trained on a sparse Markov
//    chain with three single-token spans of equal importance (m = 1, tau = 0.3, d = 8). Each head
//    ends up attending to one span (> 0.9 attention mass), so the head a span capability needs is
//    known. The head -> span assignment is read from the attention masses after training and
//    stored in the checkpoint's `extra.planted`, together with the task description.
// 2. A 2-layer, 8-head gpt (dModel 32) trained on a MixtureTask of three @attnlab/markov task
//    families, each sequence marked by a prefix token: a sparse Markov chain whose next token
//    depends on the token 3 back ("near"), an in-context Markov chain ("icl"), and a linear map
//    whose second state is a fixed permutation of the first ("linear"). The structure is planted
//    by training: each task owns three heads, which are always on for its sequences, while every
//    other head is knocked out (batched headMask) with probability 1/2 per sequence. A task can
//    therefore rely only on its own heads; the others are present half of the time, so the model
//    also learns to tolerate them (no interference at evaluation, when every head is on). The
//    assignment is stored in `extra.planted`; the tests check it against exhaustive knockouts.
//
// Run by hand from the repo root (minimal: about a minute on wasm; gpt: about ten):
//   node --conditions=@attnlab/source --import tsx tools/knockout/planted-fixtures.ts [minimal|mixture-gpt|all]
import { createRequire } from 'node:module'
import { join } from 'node:path'
import { Rng, useBackend } from '../../packages/core/src/index.ts'
import {
  IclMarkovTask,
  LinearMapTask,
  SparseMarkovTask,
  randomOrthogonalMatrix,
} from '../../packages/markov/src/index.ts'
import {
  clipByGlobalNorm,
  createOptimizer,
  createSchedule,
  createTransformer,
  maskedCrossEntropy,
  presetConfig,
  train,
} from '../../packages/transformer/src/index.ts'
import { saveCheckpoint } from '../../packages/transformer/src/node.ts'
import { MixtureTask, formatHead } from '../../packages/knockout/src/index.ts'

const knockoutDir = join(import.meta.dirname, '..', '..', 'packages', 'knockout')
const fixtures = join(knockoutDir, 'src', '__fixtures__')
// tfjs-core as the packages resolve it (tools/ has no node_modules of its own): the same module instance.
const tf = createRequire(join(knockoutDir, 'package.json'))(
  '@tensorflow/tfjs-core',
) as typeof import('@tensorflow/tfjs-core')
const which = process.argv[2] ?? 'all'
await useBackend('wasm')

if (which === 'minimal' || which === 'all') await minimalFixture()
if (which === 'mixture-gpt' || which === 'all') await mixtureFixture()

async function minimalFixture(): Promise<void> {
  const out = join(fixtures, 'planted-minimal')
  const task = new SparseMarkovTask({ vocabSize: 8, spans: [1, 1, 1], m: 1, tau: 0.3, genLen: 8, teacherSeed: 0 })
  const model = createTransformer(
    presetConfig('minimal', { dVocab: 8, nCtx: task.seqLength - 1, nHeads: 3, queryInit: 1e-3, seed: 0 }),
  )
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
      console.log(
        `step ${e.step}: validation loss ${e.validationLoss.toFixed(4)} (teacher entropy ` +
          `${e.metrics?.teacherEntropy?.toFixed(4)})`,
      )
    },
  })
  // offsetGroups are ordered most important first (ties: newer first); map each group back to its span index.
  const groupSpan = task.offsetGroups.map((g) => Number(/^span (\d+)/.exec(g.name)?.[1]))
  const owners: Record<string, number> = {}
  mass.forEach((row, head) => {
    const best = row.indexOf(Math.max(...row))
    console.log(`head ${head}: mass ${row.map((m, g) => `${names[g]}=${m.toFixed(3)}`).join(', ')}`)
    if ((row[best] as number) < 0.9)
      throw new Error(`head ${head} is not specialised (max mass ${row[best]}); train longer`)
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
}

async function mixtureFixture(): Promise<void> {
  const out = join(fixtures, 'planted-mixture-gpt')
  const d = 8
  const zero = new Array<number>(d * d).fill(0)
  const near = new SparseMarkovTask({
    vocabSize: d,
    spans: [1, 1, 1],
    m: 1,
    tau: 0.3,
    genLen: 15,
    teacherMatrices: [Array.from(randomOrthogonalMatrix(d, Rng.fromSeed(5))), zero, zero],
  })
  const icl = new IclMarkovTask({ vocabSize: 3, order: 1, seqLength: 18 })
  const linear = new LinearMapTask({ stateSize: 8, onesPerRow: 1, states: 2, matrixSeed: 3 })
  const task = new MixtureTask(
    [
      { name: 'near', task: near },
      { name: 'icl', task: icl },
      { name: 'linear', task: linear },
    ],
    { vocabulary: 'disjoint' },
  )
  const config = presetConfig('gpt', {
    dVocab: task.vocabSize,
    nCtx: task.seqLength - 1,
    nLayers: 2,
    nHeads: 8,
    dModel: 32,
    dHead: 4,
    dMlp: 64,
    seed: 0,
  })
  const { nLayers, nHeads } = config
  // Each task owns two heads of layer 0 and one of layer 1; heads 0.6, 0.7, 1.3 .. 1.7 belong to nobody.
  const owned: Record<string, { layer: number; head: number }[]> = {
    near: [
      { layer: 0, head: 0 },
      { layer: 0, head: 1 },
      { layer: 1, head: 0 },
    ],
    icl: [
      { layer: 0, head: 2 },
      { layer: 0, head: 3 },
      { layer: 1, head: 1 },
    ],
    linear: [
      { layer: 0, head: 4 },
      { layer: 0, head: 5 },
      { layer: 1, head: 2 },
    ],
  }
  const model = createTransformer(config)
  const variables = model.getWeights()
  const names = new Map<string, string>()
  for (const [name, variable] of variables) names.set(variable.name, name)
  const steps = 4000
  const batchSize = 128
  const optimizer = createOptimizer(variables, { kind: 'adamw', weightDecay: 0.01 })
  const schedule = createSchedule({ kind: 'warmup-cosine', warmupSteps: 100 }, 3e-3, steps)
  const rng = Rng.fromSeed(0)
  const dataRng = rng.split('data')
  const maskRng = rng.split('head dropout')
  const L = task.seqLength
  const T = L - 1
  const started = performance.now()
  let recent: number[] = []
  for (let step = 0; step < steps; step++) {
    const batch = task.sample(batchSize, dataRng)
    const inputs = new Int32Array(batchSize * T)
    const targets = new Int32Array(batchSize * T)
    const weights = new Float32Array(batchSize * T)
    const keep = new Float32Array(batchSize * nLayers * nHeads)
    for (let b = 0; b < batchSize; b++) {
      for (let p = 0; p < T; p++) {
        inputs[b * T + p] = batch.tokens[b * L + p] as number
        targets[b * T + p] = batch.tokens[b * L + p + 1] as number
        weights[b * T + p] = batch.lossMask[b * L + p + 1] as number
      }
      const component = task.components[(batch.tokens[b * L] as number) - task.prefixBase]!.name
      const own = new Set(owned[component]!.map((h) => h.layer * nHeads + h.head))
      for (let i = 0; i < nLayers * nHeads; i++)
        keep[b * nLayers * nHeads + i] = own.has(i) || maskRng.float() < 0.5 ? 1 : 0
    }
    const x = tf.tensor2d(inputs, [batchSize, T], 'int32')
    const y = tf.tensor1d(targets, 'int32')
    const w = tf.tensor1d(weights)
    const headMask = tf.tensor3d(keep, [batchSize, nLayers, nHeads])
    const { value, grads } = tf.variableGrads(() => {
      const logits = model.forward(x, { headMask, training: true })
      return maskedCrossEntropy(
        tf.reshape(logits, [-1, config.dVocab]) as import('@tensorflow/tfjs-core').Tensor2D,
        y,
        w,
      )
    }, [...variables.values()])
    const named = new Map<string, import('@tensorflow/tfjs-core').Tensor>()
    for (const [variableName, grad] of Object.entries(grads)) named.set(names.get(variableName) as string, grad)
    const { grads: clipped, norm } = clipByGlobalNorm(named, 1)
    optimizer.step(clipped, schedule.learningRate(step))
    recent.push((await value.data())[0] as number)
    tf.dispose([x, y, w, headMask, value, norm, ...Object.values(grads), ...clipped.values()])
    if ((step + 1) % 500 === 0) {
      console.log(
        `step ${step + 1}: training loss ${(recent.reduce((a, b) => a + b, 0) / recent.length).toFixed(4)} ` +
          `(${((performance.now() - started) / 1000).toFixed(0)} s)`,
      )
      recent = []
    }
  }
  optimizer.dispose()
  await saveCheckpoint(out, model, null, {
    task: task.describe(),
    planted: owned,
    training: {
      steps,
      batchSize,
      lr: 3e-3,
      schedule: 'warmup-cosine 100',
      headDropout: 'own heads always on, every other head off with probability 1/2 per sequence',
      seed: 0,
    },
  })
  console.log(
    `wrote ${out}: ${Object.entries(owned)
      .map(([name, heads]) => `${name} {${heads.map(formatHead).join(', ')}}`)
      .join('; ')}`,
  )
  model.dispose()
}
