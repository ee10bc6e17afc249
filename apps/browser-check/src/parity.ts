/**
 * Backend parity: the same work on `cpu`, `wasm`, `webgl` and `webgpu`, each compared with `cpu`
 * (run first): a forward pass of the minimal model and of `gpt-nano`, a few training steps of each
 * (losses and the trained minimal model's logits), Block-Sparse attention (`applyPrefill`), and
 * the attention over Block-Sparse's selection (`attendWithMask`). Reports the largest absolute
 * differences, tfjs' tensor count before and after, training steps per second, and the typed error
 * of every op a backend does not run (`webgpu`: no synchronous read-back).
 */
import * as tf from '@tensorflow/tfjs-core'
import { Rng, kernelsInUse, useBackend, type BackendName, type UseBackendOptions } from '@attnlab/core'
import { SparseMarkovTask } from '@attnlab/markov'
import { applyPrefill, attendWithMask, blockSparse, dense } from '@attnlab/sparse-attention'
import { Trainer, createTransformer, presetConfig, type TransformerConfig } from '@attnlab/transformer'

/** The backends compared, `cpu` first (the reference). */
const BACKENDS: readonly BackendName[] = ['cpu', 'wasm', 'webgl', 'webgpu']

/** What one backend's parity run measured (differences are the largest absolute ones against `cpu`). */
export interface ParityResult {
  backend: BackendName
  kernels: string
  /** The page's error if the run stopped, else absent. */
  error?: string
  numTensorsBefore: number
  numTensorsAfter: number
  forwardMaxDiff: { minimal: number; gptNano: number }
  train: {
    steps: number
    lossesMinimal: number[]
    lossMaxDiffMinimal: number
    trainedLogitsMaxDiff: number
    lossesGptNano: number[]
    lossMaxDiffGptNano: number
  }
  /** Training steps per second of the minimal model (after the parity steps compiled every kernel). */
  speed: { steps: number; seconds: number; stepsPerSecond: number }
  /** Block-Sparse through `applyPrefill`: its largest difference, or the error it threw. */
  blockSparse: { maxDiff: number | null; exactSparsity: number | null; error: string | null }
  /** The attention over Block-Sparse's cpu selection (`attendWithMask`), against cpu's Block-Sparse output. */
  maskedMaxDiff: number
  /** Dense prefill over tiles (`applyPrefill(dense())`): its largest difference, or the error it threw. */
  densePrefill: { maxDiff: number | null; error: string | null }
  seconds: number
}

/** The reference values from `cpu`. */
interface Reference {
  minimal: Float32Array
  gptNano: Float32Array
  lossesMinimal: number[]
  trainedLogits: Float32Array
  lossesGptNano: number[]
  blockSparse: Float32Array
  mask: Uint8Array
  dense: Float32Array
}

const PARITY_STEPS = 3
const SPEED_STEPS = 3

function maxAbsDiff(a: ArrayLike<number>, b: ArrayLike<number> | undefined): number {
  if (b === undefined || a.length !== b.length) return Number.POSITIVE_INFINITY
  let max = 0
  for (let i = 0; i < a.length; i++) {
    const d = Math.abs((a[i] as number) - (b[i] as number))
    max = Number.isNaN(d) ? Number.POSITIVE_INFINITY : Math.max(max, d)
  }
  return max
}

const describe = (error: unknown): string =>
  error instanceof Error ? `${error.name} ${(error as { code?: string }).code ?? ''}: ${error.message}` : String(error)

/** Random normal values of a fixed seed (the same on every backend: made in JavaScript). */
function normalValues(count: number, seed: number): Float32Array {
  const rng = Rng.fromSeed(seed)
  return Float32Array.from({ length: count }, () => rng.normal())
}

async function logitsOf(config: TransformerConfig, rows: number[][]): Promise<Float32Array> {
  const model = createTransformer(config)
  const logits = model.forward(rows)
  const values = (await logits.data()) as Float32Array
  logits.dispose()
  model.dispose()
  return values
}

async function train(
  config: TransformerConfig,
  task: SparseMarkovTask,
  steps: number,
  rows: number[][] | null,
): Promise<{ losses: number[]; seconds: number; logits: Float32Array | null }> {
  const model = createTransformer(config)
  const trainer = new Trainer(model, task, { steps, batchSize: 32, lr: 0.05, validation: 32, evalEvery: 0, seed: 0 })
  try {
    const result = await trainer.run()
    let logits: Float32Array | null = null
    if (rows !== null) {
      const out = model.forward(rows)
      logits = (await out.data()) as Float32Array
      out.dispose()
    }
    return { losses: [...result.losses], seconds: result.seconds, logits }
  } finally {
    trainer.dispose()
    model.dispose()
  }
}

function qkv(): { q: tf.Tensor3D; k: tf.Tensor3D; v: tf.Tensor3D } {
  const shape: [number, number, number] = [2, 32, 8]
  return {
    q: tf.tensor3d(normalValues(512, 1), shape),
    k: tf.tensor3d(normalValues(512, 2), shape),
    v: tf.tensor3d(normalValues(512, 3), shape),
  }
}

async function runOne(
  name: BackendName,
  task: SparseMarkovTask,
  nanoTask: SparseMarkovTask,
  options: UseBackendOptions,
  reference: Reference | null,
  status: (text: string) => void,
): Promise<{ result: ParityResult; reference: Reference }> {
  const start = performance.now()
  await useBackend(name, options)
  const numTensorsBefore = tf.memory().numTensors
  const probe = task.sample(4, Rng.fromSeed(7).split('parity'))
  const rows: number[][] = []
  for (let b = 0; b < probe.batchSize; b++)
    rows.push(Array.from(probe.tokens.subarray(b * probe.seqLength, (b + 1) * probe.seqLength - 1)))
  const nanoProbe = nanoTask.sample(4, Rng.fromSeed(8).split('parity'))
  const nanoRows: number[][] = []
  for (let b = 0; b < nanoProbe.batchSize; b++)
    nanoRows.push(Array.from(nanoProbe.tokens.subarray(b * nanoProbe.seqLength, (b + 1) * nanoProbe.seqLength - 1)))

  const minimalConfig = presetConfig('minimal', { seed: 0 })
  const nanoConfig = presetConfig('gpt-nano', { seed: 0, dVocab: nanoTask.vocabSize, nCtx: nanoTask.seqLength })
  status(`parity: ${name}: forward`)
  const minimal = await logitsOf(minimalConfig, rows)
  const gptNano = await logitsOf(nanoConfig, nanoRows)
  status(`parity: ${name}: training`)
  const trainedMinimal = await train(minimalConfig, task, PARITY_STEPS, rows)
  status(`parity: ${name}: training gpt-nano`)
  const trainedNano = await train(nanoConfig, nanoTask, PARITY_STEPS, null)
  status(`parity: ${name}: timed training`)
  const timed = await train(minimalConfig, task, SPEED_STEPS, null)

  // Block-Sparse on one sequence; webgpu: its estimation reads q and k back, so it must throw.
  status(`parity: ${name}: sparse attention`)
  const inputs = qkv()
  let blockSparseValues: Float32Array | null = null
  let mask: Uint8Array | null = null
  let exactSparsity: number | null = null
  let blockSparseError: string | null = null
  try {
    const prefill = applyPrefill(blockSparse({ blockSize: 8, topK: 3 }), inputs)
    blockSparseValues = (await prefill.output.data()) as Float32Array
    prefill.output.dispose()
    exactSparsity = prefill.sparsity.exact
    mask = prefill.mask
  } catch (error) {
    blockSparseError = describe(error)
  }
  // The attention over Block-Sparse's selection (cpu's), with the mask given: no read-back.
  const selection = reference?.mask ?? mask
  if (selection === null) throw new Error(`${name}: Block-Sparse failed on the reference backend: ${blockSparseError}`)
  const masked = tf.tidy(() => {
    const [q, k, v] = [inputs.q, inputs.k, inputs.v].map((x) => tf.expandDims(x, 0) as tf.Tensor4D) as [
      tf.Tensor4D,
      tf.Tensor4D,
      tf.Tensor4D,
    ]
    return attendWithMask(q, k, v, selection, 1 / Math.sqrt(8))
  })
  const maskedValues = (await masked.data()) as Float32Array
  masked.dispose()
  let denseValues: Float32Array | null = null
  let denseError: string | null = null
  try {
    const prefill = applyPrefill(dense(), inputs)
    denseValues = (await prefill.output.data()) as Float32Array
    prefill.output.dispose()
  } catch (error) {
    denseError = describe(error)
  }
  tf.dispose([inputs.q, inputs.k, inputs.v])

  const own: Reference = {
    minimal,
    gptNano,
    lossesMinimal: trainedMinimal.losses,
    trainedLogits: trainedMinimal.logits as Float32Array,
    lossesGptNano: trainedNano.losses,
    blockSparse: blockSparseValues ?? new Float32Array(0),
    mask: selection,
    dense: denseValues ?? new Float32Array(0),
  }
  const ref = reference ?? own
  const result: ParityResult = {
    backend: name,
    kernels: kernelsInUse(name),
    numTensorsBefore,
    numTensorsAfter: tf.memory().numTensors,
    forwardMaxDiff: { minimal: maxAbsDiff(minimal, ref.minimal), gptNano: maxAbsDiff(gptNano, ref.gptNano) },
    train: {
      steps: PARITY_STEPS,
      lossesMinimal: trainedMinimal.losses,
      lossMaxDiffMinimal: maxAbsDiff(trainedMinimal.losses, ref.lossesMinimal),
      trainedLogitsMaxDiff: maxAbsDiff(own.trainedLogits, ref.trainedLogits),
      lossesGptNano: trainedNano.losses,
      lossMaxDiffGptNano: maxAbsDiff(trainedNano.losses, ref.lossesGptNano),
    },
    speed: { steps: SPEED_STEPS, seconds: timed.seconds, stepsPerSecond: SPEED_STEPS / timed.seconds },
    blockSparse: {
      maxDiff: blockSparseValues === null ? null : maxAbsDiff(blockSparseValues, ref.blockSparse),
      exactSparsity,
      error: blockSparseError,
    },
    maskedMaxDiff: maxAbsDiff(maskedValues, ref.blockSparse),
    densePrefill: { maxDiff: denseValues === null ? null : maxAbsDiff(denseValues, ref.dense), error: denseError },
    seconds: (performance.now() - start) / 1000,
  }
  return { result, reference: ref }
}

/**
 * Runs the parity suite on every backend, `cpu` first. A backend whose run throws is reported with
 * its error (and the runner fails); the others still run.
 *
 * @param task - the minimal model's task (its vocabulary and length fix the preset's sizes)
 * @param wasmPaths - the tfjs wasm binaries' URLs
 * @param status - progress line for the page
 */
export async function runParity(
  task: SparseMarkovTask,
  wasmPaths: NonNullable<UseBackendOptions['wasmPaths']>,
  status: (text: string) => void,
): Promise<ParityResult[]> {
  const nanoTask = new SparseMarkovTask({ vocabSize: 16, spans: [2, 2], m: 1.5, tau: 0.1, teacherSeed: 0 })
  const results: ParityResult[] = []
  let reference: Reference | null = null
  for (const name of BACKENDS) {
    status(`parity: ${name}...`)
    try {
      const run = await runOne(name, task, nanoTask, name === 'wasm' ? { wasmPaths } : {}, reference, status)
      reference = run.reference
      results.push(run.result)
    } catch (error) {
      results.push({ backend: name, error: describe(error) } as ParityResult)
      if (reference === null) break
    }
  }
  return results
}
