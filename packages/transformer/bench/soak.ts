/**
 * Soak benchmark: a long training run with a checkpoint every 500 steps (the emergence setting's
 * minimal model on a small sparse Markov chain, fresh sequences every step, AdamW), sampling the
 * process's memory every 100 steps. Reports the slope per 1,000 steps (least squares after the
 * first 1,000 steps of warm-up) of the resident set size, the V8 heap, the array buffers, the
 * backend's heap (the wasm module's memory on `wasm`) and the live tensor count. Flat is the goal:
 * a slope of a few hundred KB per 1,000 steps is noise of the allocator; a leak of one tensor per
 * step shows as a steady climb of numTensors and of the backend heap.
 *
 *   node --conditions=@attnlab/source --import tsx bench/soak.ts [--steps 10000] [--backend wasm] [--json]
 *
 * Time it alone on the machine; the slopes do not depend on speed.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { useBackend, type BackendName } from '@attnlab/core'
import { SparseMarkovTask } from '@attnlab/markov'
import * as tf from '@tensorflow/tfjs-core'
import { saveCheckpoint } from '../src/checkpoint.ts'
import { presetConfig } from '../src/config.ts'
import { createTransformer } from '../src/model.ts'
import { train } from '../src/train.ts'

const { values } = parseArgs({
  options: {
    steps: { type: 'string', default: '10000' },
    backend: { type: 'string', default: 'wasm' },
    json: { type: 'boolean', default: false },
  },
})
const steps = Number(values.steps)
const backend = await useBackend(values.backend as BackendName)
const task = new SparseMarkovTask({ vocabSize: 16, spans: [1, 1, 1], genLen: 12, tau: 0.3 })
const config = presetConfig('minimal', { dVocab: task.vocabSize, nCtx: task.seqLength - 1 })
const model = createTransformer(config)
const dir = mkdtempSync(join(tmpdir(), 'attnlab-soak-'))

/** The backend's own heap in bytes: the wasm module's memory, else tf.memory().numBytes. */
function backendHeap(): number {
  const wasm = (tf.backend() as unknown as { wasm?: { HEAPU8?: Uint8Array } }).wasm
  return wasm?.HEAPU8?.byteLength ?? tf.memory().numBytes
}

interface Sample {
  step: number
  rss: number
  heapUsed: number
  arrayBuffers: number
  backendHeap: number
  numTensors: number
}
const samples: Sample[] = []
const sample = (step: number): void => {
  const memory = process.memoryUsage()
  samples.push({
    step,
    rss: memory.rss,
    heapUsed: memory.heapUsed,
    arrayBuffers: memory.arrayBuffers,
    backendHeap: backendHeap(),
    numTensors: tf.memory().numTensors,
  })
}

const started = performance.now()
let checkpoints = 0
sample(0)
await train(model, task, {
  steps,
  batchSize: 64,
  lr: 0.05,
  validation: 128,
  evalEvery: 500,
  analysis: false,
  checkpointEvery: 500,
  onStep: (record) => {
    if (record.step % 100 === 0) sample(record.step)
  },
  onCheckpoint: async (state) => {
    await saveCheckpoint(join(dir, 'checkpoint'), model, state, { soak: true }, { overwrite: true })
    checkpoints++
  },
})
const seconds = (performance.now() - started) / 1000
model.dispose()
rmSync(dir, { recursive: true, force: true })

/** Least-squares slope of `key` against the step, per 1,000 steps, after the first 1,000 steps. */
function slope(key: keyof Omit<Sample, 'step'>): number {
  const points = samples.filter((s) => s.step >= Math.min(1000, steps / 2))
  const n = points.length
  const mx = points.reduce((a, s) => a + s.step, 0) / n
  const my = points.reduce((a, s) => a + s[key], 0) / n
  let sxy = 0
  let sxx = 0
  for (const s of points) {
    sxy += (s.step - mx) * (s[key] - my)
    sxx += (s.step - mx) ** 2
  }
  return sxx === 0 ? 0 : (1000 * sxy) / sxx
}

const keys = ['rss', 'heapUsed', 'arrayBuffers', 'backendHeap', 'numTensors'] as const
const result = {
  backend,
  steps,
  checkpoints,
  seconds,
  slopesPer1000Steps: Object.fromEntries(keys.map((key) => [key, slope(key)])),
  first: samples[0],
  last: samples.at(-1),
}
if (values.json) console.log(JSON.stringify(result, null, 2))
else {
  const mb = (bytes: number): string => `${(bytes / 2 ** 20).toFixed(3)} MB`
  console.log(`soak: ${steps} steps on ${backend}, ${checkpoints} checkpoints, ${seconds.toFixed(0)} s`)
  for (const key of keys) {
    const value = result.slopesPer1000Steps[key] as number
    const first = result.first?.[key] ?? 0
    const last = result.last?.[key] ?? 0
    const shown = key === 'numTensors' ? `${value.toFixed(3)} tensors` : mb(value)
    const range = key === 'numTensors' ? `${first} -> ${last}` : `${mb(first)} -> ${mb(last)}`
    console.log(`  ${key.padEnd(12)} slope ${shown} per 1,000 steps (${range})`)
  }
}
