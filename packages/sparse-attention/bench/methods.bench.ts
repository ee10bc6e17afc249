// Wall-clock speed-up of each method over attnlab's dense attention (the same sparseAttention
// kernel over every causal pair) at 8 heads, dHead 64, per T and sparsity, in one run: prefill
// (estimation included, and the attention alone) and one decode step. Run with `pnpm bench`
// (under `flock /work/locks/bench` on shared machines). Sizes: ATTNLAB_BENCH_T (comma-separated,
// default 1024,2048,4096,8192,16384; ATTNLAB_BENCH_QUICK=1 gives 1024,2048,4096), backend
// ATTNLAB_BENCH_BACKEND (default wasm with the fastest attnlab kernels), ATTNLAB_BENCH_THREADS.
// Not yet here: the PyTorch peer of dense attention.
import * as tf from '@tensorflow/tfjs-core'
import { Rng, useBackend, kernelsInUse, type BackendName } from '@attnlab/core'
import {
  applyDecode,
  applyPrefill,
  blockSparse,
  blockSparseTopKForSparsity,
  dense,
  quest,
  questBudgetForSparsity,
  snapKV,
  verticalSlash,
  type SparseAttentionKernel,
} from '../src/index.ts'

const quick = process.env.ATTNLAB_BENCH_QUICK === '1'
const lengths = (process.env.ATTNLAB_BENCH_T ?? (quick ? '1024,2048,4096' : '1024,2048,4096,8192,16384'))
  .split(',')
  .map(Number)
const sparsities = [0.5, 0.8, 0.9, 0.95]
const backend = (process.env.ATTNLAB_BENCH_BACKEND ?? 'wasm') as BackendName
const threads = Number(process.env.ATTNLAB_BENCH_THREADS ?? 1)
const H = 8
const d = 64
await useBackend(backend, { threads })
console.log(`backend ${backend}, kernels ${kernelsInUse()}, threads ${threads}, H = ${H}, dHead = ${d}`)

function time(run: () => { output: tf.Tensor; timing: { estimationSeconds: number; attentionSeconds: number } }) {
  run().output.dispose() // warm-up
  const start = performance.now()
  const r = run()
  r.output.dataSync()
  const total = (performance.now() - start) / 1000
  r.output.dispose()
  return { total, attention: r.timing.attentionSeconds, estimation: r.timing.estimationSeconds }
}

for (const T of lengths) {
  const rng = Rng.fromSeed(T)
  const data = () => rng.fillNormal(new Float32Array(H * T * d))
  const qkv = {
    q: tf.tensor3d(data(), [H, T, d]),
    k: tf.tensor3d(data(), [H, T, d]),
    v: tf.tensor3d(data(), [H, T, d]),
  }
  const one = () => tf.tensor2d(rng.fillNormal(new Float32Array(H * d)), [H, d])
  const step = { qNew: one(), kNew: one(), vNew: one() }
  const densePrefill = time(() => applyPrefill(dense(), qkv))
  const denseDecode = time(() => applyDecode(dense(), qkv, step))
  console.log(
    `T ${T}: dense prefill ${densePrefill.total.toFixed(3)} s, ` +
      `dense decode ${(denseDecode.attention * 1e3).toFixed(2)} ms attention`,
  )
  console.log('  method          s     ideal  speed-up(total)  speed-up(attention)  estimation s  exact sparsity')
  for (const s of sparsities) {
    const budget = Math.max(64, Math.round((1 - s) * T))
    const prefill: SparseAttentionKernel[] = [
      blockSparse({ blockSize: 16, topK: Math.max(3, blockSparseTopKForSparsity(T, 16, s)) }),
      verticalSlash({ verticalSize: Math.round(budget / 2), slashSize: Math.max(64, Math.round(budget / 2)) }),
    ]
    for (const kernel of prefill) {
      const t = time(() => applyPrefill(kernel, qkv))
      const r = applyPrefill(kernel, qkv)
      const exact = r.sparsity.exact
      r.output.dispose()
      console.log(
        `  ${kernel.method.padEnd(15)} ${s.toFixed(2)}  ${(1 / (1 - s)).toFixed(1).padStart(5)}  ` +
          `${(densePrefill.total / t.total).toFixed(2).padStart(15)}  ` +
          `${(densePrefill.attention / t.attention).toFixed(2).padStart(19)}  ` +
          `${t.estimation.toFixed(4).padStart(12)}  ` +
          `${exact.toFixed(3)}`,
      )
    }
    const tokenBudget = Math.max(16, Math.floor(questBudgetForSparsity(T, s) / 16) * 16)
    const decoders: SparseAttentionKernel[] = [
      quest({ tokenBudget: Math.min(tokenBudget, T - 16 - (T % 16)) }),
      snapKV({ capacity: Math.max(200, Math.round((1 - s) * T)), window: 64, local: 32 }),
    ]
    for (const kernel of decoders) {
      const t = time(() => applyDecode(kernel, qkv, step))
      console.log(
        `  ${`${kernel.method} decode`.padEnd(15)} ${s.toFixed(2)}  ${(1 / (1 - s)).toFixed(1).padStart(5)}  ` +
          `${(denseDecode.total / t.total).toFixed(2).padStart(15)}  ` +
          `${(denseDecode.attention / t.attention).toFixed(2).padStart(19)}  ${t.estimation.toFixed(4).padStart(12)}`,
      )
    }
  }
  tf.dispose([qkv.q, qkv.k, qkv.v, step.qNew, step.kNew, step.vNew])
}
