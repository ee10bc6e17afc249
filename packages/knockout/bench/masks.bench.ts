// Wall time of 100 knockout-mask evaluations, batched (rows of different masks share forward
// passes through the batched headMask) vs one mask per forward pass (the authors' released code's cost
// model, minus its model reload). Both must give the same scores.
//
// Run with `pnpm bench` in packages/knockout (on shared machines under `flock /work/locks/bench`).
// Usage: masks.bench.ts [backends=wasm] (cpu is slow: minutes for aidreams)
//   [model=path of a model; default: aidreams260K where the tests keep it] [masks=100]
import { fileURLToPath } from 'node:url'
import { useBackend, type BackendName } from '@attnlab/core'
import { loadModel, type Transformer } from '@attnlab/transformer'
import { loadCheckpoint } from '@attnlab/transformer/node'
import { createTransformer } from '@attnlab/transformer'
import { createTask, type SparseMarkovTask } from '@attnlab/markov'
import {
  HeadAblation,
  inductionCapability,
  randomMasks,
  scoreMasks,
  sparseMarkovSpanCapability,
  type Capability,
} from '../src/index.ts'

const backends = (process.argv[2] ?? 'wasm').split(',') as BackendName[]
const modelPath =
  process.argv[3] ?? fileURLToPath(new URL('../../../../shared/models/aidreams260K/model.bin', import.meta.url))
const count = Number(process.argv[4] ?? 100)

interface Case {
  name: string
  model: Transformer
  capability: Capability
  fraction: number
}

async function cases(): Promise<Case[]> {
  const out: Case[] = []
  const { model, tokenizer } = await loadModel(modelPath)
  const bos = tokenizer?.bosId
  out.push({
    name:
      `aidreams260K (${model.config.nLayers}x${model.config.nHeads} heads), induction probe 64 x ` +
      `${2 * 16 + (bos === undefined ? 0 : 1) - 1} tokens`,
    model,
    capability: inductionCapability({
      vocabSize: model.config.dVocab,
      blockLength: 16,
      count: 64,
      ...(bos === undefined ? {} : { prefix: [bos] }),
    }),
    fraction: 0.02,
  })
  // A small evaluation set: per-pass overhead dominates, which is where batching masks pays.
  out.push({
    name: `aidreams260K, induction probe 4 x ${2 * 16 + (bos === undefined ? 0 : 1) - 1} tokens`,
    model,
    capability: inductionCapability({
      vocabSize: model.config.dVocab,
      blockLength: 16,
      count: 4,
      ...(bos === undefined ? {} : { prefix: [bos] }),
    }),
    fraction: 0.02,
  })
  const checkpoint = await loadCheckpoint(
    fileURLToPath(new URL('../src/__fixtures__/planted-minimal', import.meta.url)),
  )
  const minimal = createTransformer(checkpoint.config)
  minimal.setWeights(checkpoint.weights)
  const task = createTask(checkpoint.extra.task as Record<string, unknown>) as SparseMarkovTask
  out.push({
    name: 'planted minimal (1x3 heads), span-0 capability 128 x 10 tokens',
    model: minimal,
    capability: sparseMarkovSpanCapability(task, 0, { count: 128 }),
    fraction: 0.34,
  })
  out.push({
    name: 'planted minimal (1x3 heads), span-0 capability 8 x 10 tokens',
    model: minimal,
    capability: sparseMarkovSpanCapability(task, 0, { count: 8 }),
    fraction: 0.34,
  })
  return out
}

for (const backend of backends) {
  await useBackend(backend)
  const all = await cases()
  for (const c of all) {
    const masks = randomMasks(c.model.config, { count, fraction: c.fraction, seed: 0 })
    for (const mode of ['zero', 'mean'] as const) {
      const ablation = await HeadAblation.create(c.model, mode, mode === 'zero' ? {} : { reference: c.capability.data })
      await scoreMasks(c.model, c.capability, masks, { ablation }) // warm-up (kernels, caches)
      const batched = await scoreMasks(c.model, c.capability, masks, { ablation })
      const single = await scoreMasks(c.model, c.capability, masks, { ablation, batched: false })
      ablation.dispose()
      let diff = 0
      for (let j = 0; j < count; j++)
        diff = Math.max(diff, Math.abs((batched.values[j] as number) - (single.values[j] as number)))
      console.log(
        `[${backend}] ${c.name}, ${mode} ablation, ${count} masks: batched ${batched.seconds.toFixed(2)} s ` +
          `(${batched.forwardPasses} passes), ` +
          `one at a time ${single.seconds.toFixed(2)} s (${single.forwardPasses} passes), speedup ` +
          `${(single.seconds / batched.seconds).toFixed(2)}x, max |difference| ${diff.toExponential(1)}`,
      )
    }
  }
  for (const model of new Set(all.map((c) => c.model))) model.dispose()
}
