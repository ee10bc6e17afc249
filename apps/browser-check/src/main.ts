/**
 * The browser smoke test page: imports every package's main entry (never `./node`), runs a small
 * piece of each on the `wasm` and `cpu` backends, then the backend parity suite (`parity.ts`) on
 * `cpu`, `wasm`, `webgl` and `webgpu`, and publishes the outcome as JSON on `window.__result`
 * (and in the page) for `run.mjs`.
 */
import * as tf from '@tensorflow/tfjs-core'
import { Rng, kernelsInUse, useBackend, type BackendName } from '@attnlab/core'
import { analyzeTrajectory, simulate } from '@attnlab/dynamics'
import { buildEmergenceReport, compareWithDense, defaultEmergenceConfig, runEmergence } from '@attnlab/experiments'
import { exhaustiveSweep, sparseMarkovSpanCapability } from '@attnlab/knockout'
import { SparseMarkovTask } from '@attnlab/markov'
import { applyPrefill, blockSparse } from '@attnlab/sparse-attention'
import {
  HuggingFaceTokenizer,
  Trainer,
  createTransformer,
  loadModel,
  presetConfig,
  saveModelDirectory,
} from '@attnlab/transformer'
// The tfjs wasm binaries, emitted by vite as assets; useBackend hands their URLs to setWasmPaths.
import wasmPlain from '@tensorflow/tfjs-backend-wasm/dist/tfjs-backend-wasm.wasm?url'
import wasmSimd from '@tensorflow/tfjs-backend-wasm/dist/tfjs-backend-wasm-simd.wasm?url'
import wasmThreadedSimd from '@tensorflow/tfjs-backend-wasm/dist/tfjs-backend-wasm-threaded-simd.wasm?url'
import { runParity, type ParityResult } from './parity.ts'

const WASM_PATHS = {
  'tfjs-backend-wasm.wasm': wasmPlain,
  'tfjs-backend-wasm-simd.wasm': wasmSimd,
  'tfjs-backend-wasm-threaded-simd.wasm': wasmThreadedSimd,
}

/** What one backend's run measured. */
interface BackendResult {
  backend: BackendName
  kernels: string
  numTensorsBefore: number
  numTensorsAfter: number
  trainSteps: number
  lossFirst: number
  lossLast: number
  lossesFinite: boolean
  validationLoss: number
  pattern: { shape: number[]; rowSumMaxError: number; futureMass: number; hookCalls: number }
  sparse: { method: string; outputShape: number[]; outputFinite: boolean; exactSparsity: number }
  knockout: { baseline: number; knockedOut: number[]; finite: boolean }
  emergence: {
    steps: number[]
    evaluations: number[]
    finalLossFinite: boolean
    oracleLines: number
    reportSvgs: number
  }
  experiments: { rows: number; finite: boolean }
  seconds: number
}

interface PageResult {
  ok: boolean
  userAgent: string
  crossOriginIsolated: boolean
  markov: { shape: [number, number]; scored: number; tokensInRange: boolean }
  dynamics: { transitions: (number | null)[]; phases: string[]; seconds: number }
  backends: BackendResult[]
  /** Every browser backend against `cpu`: forward, training, a sparse method, leaks, speed. */
  parity: ParityResult[]
  /** Node-only functions of the main entries and typed errors, as `name code: message`. */
  errors: { configError: string; loadModel: string; saveModelDirectory: string }
  /** A Hugging Face tokenizer.json (through @huggingface/tokenizers) encoding and decoding in the page. */
  tokenizer: { ids: number[]; text: string }
  error?: string
  seconds: number
}

const out = document.getElementById('out') as HTMLPreElement

function status(text: string): void {
  out.textContent = text
  // progress for run.mjs (it prints these lines with the time since start)
  if (text.length < 200) console.info(`browser-check: ${text}`)
}

function finiteAll(values: ArrayLike<number>): boolean {
  for (let i = 0; i < values.length; i++) if (!Number.isFinite(values[i] as number)) return false
  return true
}

async function runBackend(name: BackendName, task: SparseMarkovTask): Promise<BackendResult> {
  const start = performance.now()
  await useBackend(name, name === 'wasm' ? { wasmPaths: WASM_PATHS } : {})
  const numTensorsBefore = tf.memory().numTensors

  // Transformer: the minimal preset, ~20 steps of its trainer.
  const model = createTransformer(presetConfig('minimal', { seed: 0 }))
  const trainer = new Trainer(model, task, {
    steps: 20,
    batchSize: 64,
    lr: 0.08,
    validation: 128,
    evalEvery: 0,
    seed: 0,
  })
  const trained = await trainer.run()
  trainer.dispose()
  const losses = trained.losses

  // Forward with a hook and with the activation cache.
  const tokens = task.sample(4, Rng.fromSeed(7).split('probe'))
  const rows: number[][] = []
  for (let b = 0; b < tokens.batchSize; b++)
    rows.push(Array.from(tokens.tokens.subarray(b * tokens.seqLength, (b + 1) * tokens.seqLength - 1)))
  let hookCalls = 0
  const hooked = model.runWithHooks(rows, {
    fwdHooks: [
      [
        'blocks.0.attn.hook_pattern',
        () => {
          hookCalls++
        },
      ],
    ],
  })
  hooked.dispose()
  const { logits, cache } = model.runWithCache(rows, { namesFilter: ['blocks.0.attn.hook_pattern'] })
  logits.dispose()
  const pattern = cache.get('blocks.0.attn.hook_pattern')
  const patternShape = pattern.shape
  const values = await pattern.data()
  cache.dispose()
  const [, , q, k] = patternShape as [number, number, number, number]
  let rowSumMaxError = 0
  let futureMass = 0
  for (let r = 0; r < values.length / k; r++) {
    const query = r % q
    let sum = 0
    for (let j = 0; j < k; j++) {
      const value = values[r * k + j] as number
      sum += value
      if (j > query) futureMass += Math.abs(value)
    }
    rowSumMaxError = Math.max(rowSumMaxError, Math.abs(sum - 1))
  }

  // Sparse attention: Block-Sparse prefill on random q/k/v of one sequence.
  const sparse = tf.tidy(() => {
    const qkv = {
      q: tf.randomNormal([2, 32, 8], 0, 1, 'float32', 1) as tf.Tensor3D,
      k: tf.randomNormal([2, 32, 8], 0, 1, 'float32', 2) as tf.Tensor3D,
      v: tf.randomNormal([2, 32, 8], 0, 1, 'float32', 3) as tf.Tensor3D,
    }
    const result = applyPrefill(blockSparse({ blockSize: 8, topK: 3 }), qkv)
    return { output: result.output, exactSparsity: result.sparsity.exact }
  })
  const sparseValues = await sparse.output.data()
  const sparseShape = sparse.output.shape
  sparse.output.dispose()

  // Knockout: each head of the trained model knocked out alone, on the newest span's capability.
  const capability = sparseMarkovSpanCapability(task, 2, { count: 32, seed: 1 })
  const sweep = await exhaustiveSweep(model, capability, { top: 1 })

  // Experiments: Block-Sparse against dense attention on one probe sequence of the trained model.
  const comparison = await compareWithDense(model, rows[0] as number[], ['block-sparse'], { sparsities: [0.5] })
  const comparisonFinite = comparison.rows.every((r) => Number.isFinite(r.klDenseSparse) && r.top1Agreement >= 0)
  model.dispose()

  // Experiments: a few steps of the emergence experiment (runEmergence, no store) and its report page.
  const emergenceConfig = defaultEmergenceConfig()
  const emergenceRun = await runEmergence({
    ...emergenceConfig,
    task: { kind: 'sparse-markov', vocabSize: 8, spans: [1, 1], genLen: 6, tau: 0.3 },
    training: {
      ...emergenceConfig.training,
      ...{ steps: 6, batchSize: 32, validationSize: 64, analysisSize: 32, evalEvery: 3 },
    },
  })
  const emergenceReport = await buildEmergenceReport(emergenceRun)
  const emergence = {
    steps: emergenceRun.summary.seeds.map((s) => s.completedSteps),
    evaluations: emergenceRun.seeds[0]?.lines.map((l) => l.step) ?? [],
    finalLossFinite: Number.isFinite(emergenceRun.summary.seeds[0]?.finalValidationLoss ?? NaN),
    oracleLines: emergenceRun.summary.oracles.lines.length,
    reportSvgs: emergenceReport.match(/<svg/g)?.length ?? 0,
  }

  return {
    backend: name,
    kernels: kernelsInUse(name),
    numTensorsBefore,
    numTensorsAfter: tf.memory().numTensors,
    trainSteps: losses.length,
    lossFirst: losses[0] ?? NaN,
    lossLast: losses[losses.length - 1] ?? NaN,
    lossesFinite: finiteAll(losses),
    validationLoss: trained.finalValidationLoss,
    pattern: { shape: [...patternShape], rowSumMaxError, futureMass, hookCalls },
    sparse: {
      method: 'block-sparse',
      outputShape: [...sparseShape],
      outputFinite: finiteAll(sparseValues),
      exactSparsity: sparse.exactSparsity,
    },
    knockout: {
      baseline: sweep.baseline,
      knockedOut: Array.from(sweep.knockedOut),
      finite: Number.isFinite(sweep.baseline) && finiteAll(sweep.knockedOut),
    },
    experiments: { rows: comparison.rows.length, finite: comparisonFinite },
    emergence,
    seconds: (performance.now() - start) / 1000,
  }
}

async function main(): Promise<PageResult> {
  const start = performance.now()
  // Markov: one sparse-markov batch (plain typed arrays, no tensors).
  const task = new SparseMarkovTask({ vocabSize: 50, spans: [2, 2, 2], m: 1.5, tau: 0.1, teacherSeed: 0 })
  const batch = task.sample(16, Rng.fromSeed(0).split('browser-check'))
  let scored = 0
  for (const flag of batch.lossMask) scored += flag
  const markov = {
    shape: [batch.batchSize, batch.seqLength] as [number, number],
    scored,
    tokensInRange: batch.tokens.every((t) => t >= 0 && t < task.vocabSize),
  }

  // Dynamics: the reduced ODE (plain JavaScript).
  status('dynamics...')
  const dynamicsStart = performance.now()
  const trajectory = simulate({ nHeads: 3, nCtx: 40, spans: [1, 1, 1], importanceRatio: 1.7, initNoise: 1e-6, seed: 0 })
  const stages = analyzeTrajectory(trajectory)
  const dynamics = {
    transitions: stages.transitions.map((t) => t.time),
    phases: stages.phases.map((p) => p.phase),
    seconds: (performance.now() - dynamicsStart) / 1000,
  }

  const backends: BackendResult[] = []
  for (const name of ['wasm', 'cpu'] as const) {
    status(`${name}...`)
    backends.push(await runBackend(name, task))
  }
  // Every browser backend against cpu (webgpu last: nothing after it depends on its device).
  status('parity...')
  const parity = await runParity(task, WASM_PATHS, status)
  // Typed errors keep their names in a minified bundle; file functions say they need Node.js.
  const describeError = (error: unknown): string =>
    error instanceof Error
      ? `${error.name} ${(error as { code?: string }).code ?? ''}: ${error.message}`
      : String(error)
  const errors = {
    configError: await useBackend('gpu' as BackendName).then(() => 'resolved', describeError),
    loadModel: await loadModel('model.bin').then(() => 'resolved', describeError),
    saveModelDirectory: await saveModelDirectory('out', { config: presetConfig('gpt-nano'), weights: new Map() }).then(
      () => 'resolved',
      describeError,
    ),
  }
  // A tokenizer.json built in the page: BPE with a Prepend('▁') normalizer, BOS from its config.
  const vocab = { '<unk>': 0, '<s>': 1, '</s>': 2, a: 3, b: 4, ab: 5, '▁': 6, '▁a': 7 }
  const hf = HuggingFaceTokenizer.fromJson(
    {
      model: { type: 'BPE', unk_token: '<unk>', vocab, merges: ['a b', '▁ a'] },
      normalizer: { type: 'Prepend', prepend: '▁' },
      decoder: {
        type: 'Sequence',
        decoders: [
          { type: 'Replace', pattern: { String: '▁' }, content: ' ' },
          { type: 'Strip', content: ' ', start: 1, stop: 0 },
        ],
      },
    },
    { bos_token: '<s>', eos_token: '</s>' },
  )
  const ids = hf.encode('ab')
  const tokenizer = { ids, text: hf.decode(ids) }
  if (tokenizer.text !== 'ab' || ids.join(' ') !== '1 6 5')
    throw new Error(`tokenizer.json: 'ab' encoded to ${ids.join(' ')} and decoded to '${tokenizer.text}'`)
  return {
    ok: true,
    userAgent: navigator.userAgent,
    crossOriginIsolated: globalThis.crossOriginIsolated === true,
    markov,
    dynamics,
    backends,
    parity,
    errors,
    tokenizer,
    seconds: (performance.now() - start) / 1000,
  }
}

declare global {
  interface Window {
    __result?: PageResult | { ok: false; error: string }
  }
}

/** `?check=wasm-default`: `useBackend('wasm')` without `wasmPaths`, to check the error it gives. */
async function wasmDefault(): Promise<{ ok: boolean; error: string }> {
  try {
    await useBackend('wasm')
    return { ok: true, error: '' }
  } catch (error) {
    return { ok: false, error: error instanceof Error ? `${error.name}: ${error.message}` : String(error) }
  }
}

if (new URLSearchParams(location.search).get('check') === 'wasm-default') {
  void wasmDefault().then((result) => {
    window.__result = result as never
    status(JSON.stringify(result, null, 2))
  })
} else
  main().then(
    (result) => {
      window.__result = result
      status(JSON.stringify(result, null, 2))
    },
    (error: unknown) => {
      const message = error instanceof Error ? `${error.name}: ${error.message}\n${error.stack ?? ''}` : String(error)
      window.__result = { ok: false, error: message }
      status(`FAILED\n${message}`)
    },
  )
