// A downstream project's script against the packed attnlab packages (installed from tarballs with
// plain npm): type-checked against the shipped .d.ts files, compiled, and run by run.mjs.
// (skipLibCheck: tfjs-core's own .d.ts files need @types/long and clash with lib.dom's WebGPU
// types; errors in this file against attnlab's declarations are still reported.)
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import * as tf from '@tensorflow/tfjs-core'
import { Rng, useBackend, type BackendName } from '@attnlab/core'
import { STRUCTURED_KERNELS, linear } from '@attnlab/core/kernels'
import { writeFileAtomic } from '@attnlab/core/node'
import { analyzeTrajectory, simulate } from '@attnlab/dynamics'
import { compareWithDense } from '@attnlab/experiments'
import '@attnlab/experiments/node'
import { exhaustiveSweep, inductionCapability } from '@attnlab/knockout'
import { buildSweepReport, parseSweepSpec } from '@attnlab/sweeps'
import { readTrials, runSweep } from '@attnlab/sweeps/node'
import { SparseMarkovTask, restrictedContextEntropy } from '@attnlab/markov'
import { applyPrefill, blockSparse } from '@attnlab/sparse-attention'
import { createTransformer, presetConfig, train } from '@attnlab/transformer'
import { loadModel } from '@attnlab/transformer/io'
import { loadCheckpointModel, saveCheckpoint } from '@attnlab/transformer/node'
import { train as trainSubpath } from '@attnlab/transformer/train'

function check(condition: boolean, what: string): void {
  if (!condition) throw new Error(`consumer: ${what}`)
}

check(trainSubpath === train && typeof loadModel === 'function', 'the ./train and ./io subpaths')

const dir = await mkdtemp(join(tmpdir(), 'attnlab-consumer-'))
try {
  for (const backend of ['cpu', 'wasm'] as const satisfies readonly BackendName[]) {
    console.log('backend', await useBackend(backend))
    const before = tf.memory().numTensors
    check(tf.getKernel(STRUCTURED_KERNELS.pairScores, backend) !== undefined, 'useBackend registers the kernels')
    const product = tf.tidy(() => linear(tf.ones([2, 3]) as tf.Tensor2D, tf.ones([3, 4]) as tf.Tensor2D).dataSync())
    check(product.length === 8 && product.every((x) => x === 3), 'the ./kernels subpath (linear)')

    const task = new SparseMarkovTask({ vocabSize: 8, spans: [1, 1], genLen: 6 })
    const oracles = restrictedContextEntropy(task).pooled
    check(oracles.length === 3 && oracles.every(Number.isFinite), 'markov oracles')
    const model = createTransformer(presetConfig('minimal', { dVocab: 8, nCtx: 7, nHeads: 2 }))
    const result = await train(model, task, { steps: 20, batchSize: 64, lr: 0.08, validation: 128 })
    check(Number.isFinite(result.finalValidationLoss), 'training loss')
    console.log(`  markov + transformer: validation loss ${result.finalValidationLoss.toFixed(3)} nats after 20 steps`)

    const checkpoint = join(dir, `checkpoint-${backend}`)
    await saveCheckpoint(checkpoint, model)
    const loaded = await loadCheckpointModel(checkpoint)
    const batch = task.sample(2, Rng.fromSeed(0))
    const tokens = tf.tensor2d(batch.tokens, [2, batch.seqLength], 'int32')
    const input = tf.slice(tokens, [0, 0], [2, batch.seqLength - 1]) as tf.Tensor2D
    const a = model.forward(input)
    const b = loaded.forward(input)
    const largest = tf.tidy(() => tf.max(tf.abs(tf.sub(a, b))))
    const difference = (await largest.data())[0]!
    check(difference === 0, `checkpoint round trip differs by ${difference}`)
    tf.dispose([tokens, input, a, b, largest])
    loaded.dispose()
    console.log('  checkpoint: saved and loaded, same logits')

    const gpt = createTransformer(presetConfig('gpt-nano', { nCtx: 64 }))
    const sweep = await exhaustiveSweep(gpt, inductionCapability({ vocabSize: gpt.config.dVocab, blockLength: 8 }), {
      top: 2,
    })
    check(sweep.top.length <= 2, 'knockout sweep')
    console.log(`  knockout: exhaustive sweep over ${gpt.config.nLayers * gpt.config.nHeads} heads`)
    gpt.dispose()

    const q = tf.randomNormal<tf.Rank.R3>([2, 256, 16], 0, 1, 'float32', 1)
    const k = tf.randomNormal<tf.Rank.R3>([2, 256, 16], 0, 1, 'float32', 2)
    const v = tf.randomNormal<tf.Rank.R3>([2, 256, 16], 0, 1, 'float32', 3)
    const sparse = applyPrefill(blockSparse({ blockSize: 32, topK: 3 }), { q, k, v })
    check(sparse.sparsity.exact > 0 && sparse.output.shape.join() === '2,256,16', 'block-sparse prefill')
    console.log(`  sparse-attention: block-sparse prefill, exact sparsity ${sparse.sparsity.exact.toFixed(3)}`)
    tf.dispose([q, k, v, sparse.output])

    const tiny = createTransformer(presetConfig('gpt-nano', { nCtx: 32 }))
    const prompt = Array.from({ length: 24 }, (_, i) => i % 10)
    const options = { sparsities: [0.5], decodeSteps: 4 }
    const comparison = await compareWithDense(tiny, prompt, ['block-sparse', 'snapkv'], options)
    const finite = comparison.rows.every((r) => Number.isFinite(r.klDenseSparse) && r.top1Agreement >= 0)
    check(comparison.rows.length === 2 && finite, 'experiments: compareWithDense')
    const kl = comparison.rows.map((r) => `${r.method} KL ${r.klDenseSparse.toExponential(2)}`)
    console.log(`  experiments: compareWithDense, ${kl.join(', ')}`)
    tiny.dispose()
    model.dispose()
    check(tf.memory().numTensors === before, `tensors leaked: ${tf.memory().numTensors - before}`)
  }

  const trajectory = simulate({ nHeads: 3, nCtx: 40, spans: [1, 1, 1], importanceRatio: 1.7, initNoise: 1e-6, seed: 0 })
  const stages = analyzeTrajectory(trajectory)
  check(stages.transitions.length === 3, `dynamics: ${stages.transitions.length} transitions`)
  console.log(`dynamics: transitions at ODE times ${stages.transitions.map((t) => t.time?.toFixed(1)).join(', ')}`)

  // A one-trial sweep in a worker process forked from the installed package's dist/worker.js.
  const sweepSpec = parseSweepSpec(
    'name: consumer\nexperiment: emergence\nbase:\n  task: { kind: sparse-markov, vocabSize: 8, spans: [1, 1], ' +
      'genLen: 4 }\n  training: { steps: 4, batchSize: 8, validationSize: 16, analysisSize: 8, evalEvery: 2 }\n',
    'consumer.yaml',
  )
  const swept = await runSweep(sweepSpec, { out: join(dir, 'sweep'), workers: 1, backend: 'cpu' })
  const sweepRecords = await readTrials(join(dir, 'sweep'))
  check(swept.done === 1 && sweepRecords.length === 1, `sweeps: ${swept.done} trials done, ${swept.failed} failed`)
  const sweepReport = await buildSweepReport(sweepRecords)
  check(sweepReport.html.includes('<svg') && sweepReport.csv.split('\n').length === 3, 'sweeps: report')
  console.log(`sweeps: 1 trial in a worker process, final loss ${sweepRecords[0]?.metrics.finalValidationLoss}`)

  await writeFileAtomic(join(dir, 'done.txt'), 'ok\n')
  console.log('consumer: all packages work')
} finally {
  await rm(dir, { recursive: true, force: true })
}
