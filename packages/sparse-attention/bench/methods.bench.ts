// Wall-clock speed-up of each method over attnlab's dense attention (the same sparseAttention
// kernel over every causal pair) at 8 heads, dHead 64, per T and sparsity, in one run, and attnlab's
// dense prefill against PyTorch CPU (tools/sparse/bench_attention_torch.py, run first in the same
// process tree). Prefill: the whole call (estimation included) and the attention alone. Decode: a
// generation step on a cache prefilled once, the median of ATTNLAB_BENCH_STEPS steps (default 8),
// with the one-off `afterPrefill` (Quest's page bounds, SnapKV's selection and eviction) apart.
// ATTNLAB_BENCH_PAIRED=1 divides each decode step by a dense step run right after it on a full copy
// of the cache (immune to drift in the machine's speed, but every step then starts colder).
// Run with `pnpm bench`. Sizes: ATTNLAB_BENCH_T (comma-separated, default 1024,2048,4096,8192,16384;
// ATTNLAB_BENCH_QUICK=1 gives 1024,2048,4096), backend ATTNLAB_BENCH_BACKEND (default wasm with the
// fastest attnlab kernels), ATTNLAB_BENCH_THREADS (attnlab and PyTorch, default 1),
// ATTNLAB_BENCH_TORCH=0 skips PyTorch, ATTNLAB_BENCH_PHASE=prefill or decode runs one phase.
import { execFileSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import * as tf from '@tensorflow/tfjs-core'
import { Rng, useBackend, kernelsInUse, type BackendName, type LayerKVCache } from '@attnlab/core'
import {
  adaSnapKV,
  applyPrefill,
  blockSparse,
  budgetFor,
  calibratedRun,
  dense,
  flexPrefill,
  quest,
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
const steps = Number(process.env.ATTNLAB_BENCH_STEPS ?? 8)
const phase = process.env.ATTNLAB_BENCH_PHASE ?? 'both'
const paired = process.env.ATTNLAB_BENCH_PAIRED === '1'
const H = 8
const d = 64
const scale = 1 / Math.sqrt(d)

/** PyTorch's dense causal attention per T (seconds), or undefined when PyTorch is missing. */
type TorchRow = { T: number; explicit: number; sdpa: number | null; torch: string }
function torchPeer(): Map<number, TorchRow> | undefined {
  if (process.env.ATTNLAB_BENCH_TORCH === '0') return undefined
  const script = fileURLToPath(new URL('../../../tools/sparse/bench_attention_torch.py', import.meta.url))
  try {
    const out = execFileSync(
      '/usr/bin/python3',
      [script, '--lengths', lengths.join(','), '--heads', String(H), '--d', String(d), '--threads', String(threads)],
      {
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'pipe'],
        env: { ...process.env, OPENBLAS_CORETYPE: process.env.OPENBLAS_CORETYPE ?? 'SKYLAKEX' },
      },
    )
    const rows = out
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as TorchRow)
    return new Map(rows.map((r) => [r.T, r]))
  } catch (error) {
    console.warn(`PyTorch peer unavailable (${(error as Error).message.split('\n')[0]}); install python3-torch`)
    return undefined
  }
}

const torch = torchPeer()
await useBackend(backend, { threads })
console.log(`backend ${backend}, kernels ${kernelsInUse()}, threads ${threads}, H = ${H}, dHead = ${d}`)

type Qkv = { q: tf.Tensor3D; k: tf.Tensor3D; v: tf.Tensor3D }

/** One prefill after a warm-up (T <= 4096; longer T run once, the code already warm). */
function timePrefill(kernel: SparseAttentionKernel, qkv: Qkv, T: number) {
  if (T <= 4096) applyPrefill(kernel, qkv).output.dispose()
  const start = performance.now()
  const r = applyPrefill(kernel, qkv)
  r.output.dataSync()
  const total = (performance.now() - start) / 1000
  r.output.dispose()
  return {
    total,
    attention: r.timing.attentionSeconds,
    estimation: r.timing.estimationSeconds,
    exact: r.sparsity.exact,
  }
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.floor(s.length / 2)] as number
}

/**
 * A generation: the prompt's keys and values form the cache, `afterPrefill` runs once, then `steps`
 * decode steps append a token each; per step the wall-clock of `decode` (output read back) and its
 * estimation and attention seconds, medians. With `peer` (dense), each step is also run by the peer
 * right after, on the same cache and query, and its medians are returned as `peerStep` and
 * `peerAttention`: the ratio then compares steps taken moments apart, so a change in the machine's
 * speed during the run (memory bandwidth shared with other machines moves these ~1-3 ms steps by
 * up to 1.8x between runs here) does not enter it.
 */
function timeDecode(kernel: SparseAttentionKernel, qkv: Qkv, rng: Rng, T: number, peer?: SparseAttentionKernel) {
  const [q, k, v] = [qkv.q, qkv.k, qkv.v].map((x) => tf.expandDims(x, 0) as tf.Tensor4D) as [
    tf.Tensor4D,
    tf.Tensor4D,
    tf.Tensor4D,
  ]
  const cache: LayerKVCache = {
    keys: tf.keep(tf.clone(k)),
    values: tf.keep(tf.clone(v)),
    positions: T,
    promptLength: T,
    kernelState: null,
  }
  // the peer's own full cache (an eviction method compacts `cache`), given the same new tokens
  const peerCache: LayerKVCache | null =
    peer === undefined
      ? null
      : { keys: tf.keep(tf.clone(k)), values: tf.keep(tf.clone(v)), positions: T, promptLength: T, kernelState: null }
  const start = performance.now()
  kernel.afterPrefill?.({ q, k, v, scale, layer: 0 }, cache)
  const afterPrefill = (performance.now() - start) / 1000
  const walls: number[] = []
  const estimations: number[] = []
  const attentions: number[] = []
  const peerWalls: number[] = []
  const peerAttentions: number[] = []
  const token = () => tf.tensor4d(rng.fillNormal(new Float32Array(H * d)), [1, H, 1, d])
  for (let i = 0; i < steps + 2; i++) {
    for (const key of ['keys', 'values'] as const) {
      const x = token()
      for (const c of peerCache === null ? [cache] : [cache, peerCache]) {
        const appended = tf.keep(tf.concat([c[key] as tf.Tensor4D, x], 2) as tf.Tensor4D)
        c[key]?.dispose()
        c[key] = appended
      }
      x.dispose()
    }
    const qNew = token()
    const stepStart = performance.now()
    const r = kernel.decodeWithMask({ q: qNew, cache, position: cache.positions, scale, layer: 0 })
    r.z.dataSync()
    const wall = (performance.now() - stepStart) / 1000
    r.z.dispose()
    if (peer !== undefined && peerCache !== null) {
      const peerStart = performance.now()
      const p = peer.decodeWithMask({ q: qNew, cache: peerCache, position: peerCache.positions, scale, layer: 0 })
      p.z.dataSync()
      if (i >= 2) {
        peerWalls.push((performance.now() - peerStart) / 1000)
        peerAttentions.push(p.timing.attentionSeconds)
      }
      p.z.dispose()
    }
    cache.positions += 1
    if (peerCache !== null) peerCache.positions += 1
    qNew.dispose()
    if (i < 2) continue // warm-up steps
    walls.push(wall)
    estimations.push(r.timing.estimationSeconds)
    attentions.push(r.timing.attentionSeconds)
  }
  tf.dispose([q, k, v, cache.keys as tf.Tensor4D, cache.values as tf.Tensor4D])
  if (peerCache !== null) tf.dispose([peerCache.keys as tf.Tensor4D, peerCache.values as tf.Tensor4D])
  cache.kernelState?.dispose()
  return {
    afterPrefill,
    step: median(walls),
    estimation: median(estimations),
    attention: median(attentions),
    peerStep: peer === undefined ? NaN : median(peerWalls),
    peerAttention: peer === undefined ? NaN : median(peerAttentions),
  }
}

const f = (x: number, digits = 2, width = 7): string => x.toFixed(digits).padStart(width)
/** VS sizes and FlexPrefill's alpha per target: calibrated on the first min(T, 2048) positions, V and S scaled. */
const calibrated = new Map<string, { T: number; config: Record<string, unknown> }>()

function sized(method: 'vertical-slash' | 'flexprefill', T: number, s: number, qkv: Qkv): SparseAttentionKernel {
  const make = (config: Record<string, unknown>): SparseAttentionKernel =>
    method === 'vertical-slash' ? verticalSlash(config) : flexPrefill(config)
  const flags = { maskMode: 'kernel' }
  const key = `${method} ${s}`
  const previous = calibrated.get(key)
  if (previous !== undefined && previous.T < T && T > 2048) {
    const { config } = budgetFor(method, T, s, flags)
    const grow = T / previous.T
    const extra =
      method === 'vertical-slash'
        ? {
            verticalSize: Math.round((previous.config.verticalSize as number) * grow),
            slashSize: Math.round((previous.config.slashSize as number) * grow),
          }
        : { alpha: previous.config.alpha }
    return make({ ...config, ...extra })
  }
  // calibrated on the first min(T, 2048) positions, then scaled to T
  const at = Math.min(T, 2048)
  const part = tf.tidy(() => ({
    q: tf.slice(qkv.q, [0, 0, 0], [H, at, d]),
    k: tf.slice(qkv.k, [0, 0, 0], [H, at, d]),
    v: tf.slice(qkv.v, [0, 0, 0], [H, at, d]),
  }))
  const best = calibratedRun(method, at, s, flags, (config) => {
    const r = applyPrefill(make(config), part)
    r.output.dispose()
    return { exact: r.sparsity.exact, config }
  })
  tf.dispose([part.q, part.k, part.v])
  calibrated.set(key, { T: at, config: best.config })
  return at === T ? make(best.config) : sized(method, T, s, qkv)
}

for (const T of lengths) {
  const rng = Rng.fromSeed(T)
  const data = () => rng.fillNormal(new Float32Array(H * T * d))
  const qkv = {
    q: tf.tensor3d(data(), [H, T, d]),
    k: tf.tensor3d(data(), [H, T, d]),
    v: tf.tensor3d(data(), [H, T, d]),
  }
  const densePrefill = phase === 'decode' ? { total: NaN, attention: NaN } : timePrefill(dense(), qkv, T)
  const denseDecode = timeDecode(dense(), qkv, rng, T)
  const peer = torch?.get(T)
  console.log(
    `\nT ${T}: dense prefill ${densePrefill.total.toFixed(3)} s` +
      (peer === undefined
        ? ''
        : `, PyTorch ${peer.torch} ${peer.explicit.toFixed(3)} s softmax(q k^T / sqrt(d)) v ` +
          `(PyTorch / attnlab ${(peer.explicit / densePrefill.total).toFixed(2)})` +
          (peer.sdpa === null
            ? ''
            : `, scaled_dot_product_attention ${peer.sdpa.toFixed(3)} s ` +
              `(${(peer.sdpa / densePrefill.total).toFixed(2)})`)) +
      `; dense decode step ${(denseDecode.step * 1e3).toFixed(2)} ms`,
  )
  console.log('  prefill         s     ideal  exact s  speed-up total  speed-up attention  estimation s  attention s')
  const decodeRows: string[] = []
  for (const s of sparsities) {
    const blockConfig = budgetFor('block-sparse', T, s).config
    const prefill: SparseAttentionKernel[] =
      phase === 'decode'
        ? []
        : [blockSparse(blockConfig), sized('vertical-slash', T, s, qkv), sized('flexprefill', T, s, qkv)]
    for (const kernel of prefill) {
      const t = timePrefill(kernel, qkv, T)
      console.log(
        `  ${kernel.method.padEnd(15)} ${s.toFixed(2)}  ${f(1 / (1 - s), 1, 5)}  ${f(t.exact, 3, 7)}  ` +
          `${f(densePrefill.total / t.total, 2, 14)}  ${f(densePrefill.attention / t.attention, 2, 18)}  ` +
          `${f(t.estimation, 4, 12)}  ${f(t.attention, 4, 11)}`,
      )
    }
    const decoders: SparseAttentionKernel[] =
      phase === 'prefill'
        ? []
        : [
            quest(budgetFor('quest', T, s).config),
            snapKV(budgetFor('snapkv', T, s).config),
            adaSnapKV(budgetFor('ada-snapkv', T, s).config),
          ]
    for (const kernel of decoders) {
      const t = timeDecode(kernel, qkv, rng, T, paired ? dense() : undefined)
      const [denseStep, denseAttention] = paired
        ? [t.peerStep, t.peerAttention]
        : [denseDecode.step, denseDecode.attention]
      decodeRows.push(
        `  ${kernel.method.padEnd(15)} ${s.toFixed(2)}  ${f(1 / (1 - s), 1, 5)}  ` +
          `${f(denseStep / t.step, 2, 13)}  ${f(denseStep / (t.step + t.afterPrefill), 3, 17)}  ` +
          `${f(denseAttention / t.attention, 2, 18)}  ${f(t.step * 1e3, 3, 7)}  ` +
          `${f(t.estimation * 1e3, 3, 9)}  ` +
          `${f(t.afterPrefill, 3, 12)}` +
          (paired ? `  ${f(t.peerStep * 1e3, 3, 13)}` : ''),
      )
    }
  }
  console.log(
    `  decode step     s     ideal  speed-up step  with afterPrefill  speed-up attention  step ms  step est ms` +
      `  afterPrefill s` +
      (paired
        ? '  dense step ms   (speed-ups against the dense step run right after each step; dense alone'
        : '   (dense step') +
      ` ${(denseDecode.step * 1e3).toFixed(3)} ms, attention ${(denseDecode.attention * 1e3).toFixed(3)} ms)`,
  )
  for (const row of decodeRows) console.log(row)
  tf.dispose([qkv.q, qkv.k, qkv.v])
}
