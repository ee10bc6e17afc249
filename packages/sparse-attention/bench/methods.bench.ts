// Times every method on one random sequence (prefill: q/k/v [H, T, d]; decode: one step over a
// T-token prompt) and prints both sparsities. Run with `pnpm bench` (under `flock
// /work/locks/bench` on shared machines). Usage: methods.bench.ts [T=1024] [backends=cpu,wasm]
import * as tf from '@tensorflow/tfjs-core'
import { Rng, useBackend, type BackendName } from '@attnlab/core'
import {
  adaSnapKV,
  applyDecode,
  applyPrefill,
  blockSparse,
  dense,
  flexPrefill,
  quest,
  snapKV,
  verticalSlash,
  type SparseAttentionKernel,
} from '../src/index.ts'

const T = Number(process.argv[2] ?? 1024)
const backends = (process.argv[3] ?? 'cpu,wasm').split(',') as BackendName[]
const H = 8
const Hkv = 2
const d = 64
const rng = Rng.fromSeed(1)
const q = rng.split('q').fillNormal(new Float32Array(H * T * d))
const k = rng.split('k').fillNormal(new Float32Array(Hkv * T * d))
const v = rng.split('v').fillNormal(new Float32Array(Hkv * T * d))

const budget = Math.round(T / 10)
const prefill: SparseAttentionKernel[] = [
  dense(),
  verticalSlash({ verticalSize: budget, slashSize: budget, window: 64 }),
  flexPrefill({ alpha: 0.65, minBudget: 64, window: 64 }),
  flexPrefill({ alpha: 0.9, minBudget: 128, tau: 0.1, blockSize: 64 }),
  blockSparse({ blockSize: 16, topK: Math.round(T / 16 / 10) }),
]
const decode: SparseAttentionKernel[] = [
  dense(),
  snapKV({ capacity: budget, window: 64, local: 32 }),
  adaSnapKV({ capacity: budget, window: 64, local: 32 }),
  quest({ tokenBudget: Math.floor(budget / 16) * 16 }),
]

for (const backend of backends) {
  await useBackend(backend)
  const qkv = { q: tf.tensor3d(q, [H, T, d]), k: tf.tensor3d(k, [Hkv, T, d]), v: tf.tensor3d(v, [Hkv, T, d]) }
  const step = {
    qNew: tf.tensor2d(q.subarray(0, H * d), [H, d]),
    kNew: tf.tensor2d(k.subarray(0, Hkv * d), [Hkv, d]),
    vNew: tf.tensor2d(v.subarray(0, Hkv * d), [Hkv, d]),
  }
  console.log(`backend ${backend}, T = ${T}, H = ${H}, Hkv = ${Hkv}, dHead = ${d}`)
  for (const kernel of prefill) {
    applyPrefill(kernel, qkv).output.dispose() // warm-up
    const start = performance.now()
    const r = applyPrefill(kernel, qkv)
    r.output.dataSync()
    const ms = performance.now() - start
    r.output.dispose()
    console.log(
      `  prefill ${kernel.name.padEnd(15)} ${ms.toFixed(0).padStart(6)} ms   exact ${r.sparsity.exact.toFixed(3)}   ` +
        `reported ${r.sparsity.reported.toFixed(3)}`,
    )
  }
  for (const kernel of decode) {
    applyDecode(kernel, qkv, step).output.dispose()
    const start = performance.now()
    const r = applyDecode(kernel, qkv, step)
    r.output.dataSync()
    const ms = performance.now() - start
    r.output.dispose()
    console.log(
      `  decode  ${kernel.name.padEnd(15)} ${ms.toFixed(0).padStart(6)} ms   exact ${r.sparsity.exact.toFixed(3)}   ` +
        `reported ${r.sparsity.reported.toFixed(3)}`,
    )
  }
  tf.dispose([qkv.q, qkv.k, qkv.v, step.qNew, step.kNew, step.vNew])
}
