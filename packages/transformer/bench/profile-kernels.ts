/**
 * Where a training step of the bench's GPT (or minimal) config spends its time with the native
 * kernels: every addon call is timed (wall clock around the N-API call) and grouped by function
 * and shape; what is left of the step is JS / tfjs overhead and the stock kernels.
 *
 *   node --conditions=@attnlab/source --import tsx bench/profile-kernels.ts \
 *     [--model gpt|minimal|ca] [--threads 1] [--steps 10]
 *
 * `ca` is the cellular-automaton task's model at S = 32 (`attnlab train --task cellular-automaton
 * --cells 32 --preset gpt --n-heads 8 --d-model 64 --batch 256`): 2 layers, 8 heads of 8 dimensions,
 * 127 positions, batch 256, on random binary tokens. Attention GFLOP/s count the causal half of
 * `q k^T` and `P v` forward (2 T^2 dHead per head) and twice that backward.
 */
import { performance } from 'node:perf_hooks'
import { Rng, useBackend } from '@attnlab/core'
import { activeKernels, registerAttnlabKernels, type KernelProvider } from '@attnlab/core/kernels'
import type { TokenBatch } from '@attnlab/markov'
import { createConfig, presetConfig } from '../src/config.ts'
import { createTransformer } from '../src/model.ts'
import { train } from '../src/train.ts'

function flag(name: string, fallback: string): string {
  const index = process.argv.indexOf(`--${name}`)
  return index >= 0 ? (process.argv[index + 1] ?? fallback) : fallback
}
const model = flag('model', 'gpt')
const threads = Number(flag('threads', '1'))
const steps = Number(flag('steps', '10'))
const warmup = 3

const setting =
  model === 'gpt'
    ? {
        config: createConfig({
          architecture: 'gpt',
          dVocab: 64,
          nCtx: 64,
          dModel: 64,
          nLayers: 2,
          nHeads: 4,
          dHead: 16,
          dMlp: 256,
        }),
        batch: 64,
        positions: 64,
        lr: 1e-3,
        scoredFrom: 1,
      }
    : model === 'ca'
      ? {
          config: createConfig({
            architecture: 'gpt',
            dVocab: 2,
            nCtx: 127,
            dModel: 64,
            nLayers: 2,
            nHeads: 8,
            dHead: 8,
            dMlp: 256,
          }),
          batch: 256,
          positions: 127,
          lr: 0.08,
          scoredFrom: 1,
        }
      : { config: presetConfig('minimal'), batch: 1024, positions: 25, lr: 0.08, scoredFrom: 6 }

await useBackend('wasm', { kernels: 'native', threads })
const registration = activeKernels('wasm')
if (registration === undefined || registration.provider.name !== 'native') throw new Error('native kernels not active')
const totals = new Map<string, { calls: number; ms: number }>()
let recording = false
const wrapped: Record<string, unknown> = {}
for (const [name, fn] of Object.entries(registration.provider)) {
  if (typeof fn !== 'function' || name === 'threads' || name === 'setThreads') {
    wrapped[name] = fn
    continue
  }
  wrapped[name] = (...args: unknown[]) => {
    if (!recording) return (fn as (...a: unknown[]) => unknown)(...args)
    const t0 = performance.now()
    const result = (fn as (...a: unknown[]) => unknown)(...args)
    const ms = performance.now() - t0
    const shape = args
      .filter((a) => typeof a === 'number' || typeof a === 'boolean')
      .map((a) => (typeof a === 'boolean' ? (a ? 'T' : 'F') : Number.isInteger(a) ? String(a) : '~'))
      .join(',')
    const key = `${name}(${shape})`
    const entry = totals.get(key) ?? { calls: 0, ms: 0 }
    entry.calls++
    entry.ms += ms
    totals.set(key, entry)
    return result
  }
}
registerAttnlabKernels('wasm', wrapped as unknown as KernelProvider)

const rng = Rng.fromSeed(1)
const L = setting.positions + 1
const tokens = new Int32Array(setting.batch * L)
for (let i = 0; i < tokens.length; i++) tokens[i] = rng.int(setting.config.dVocab)
const lossMask = new Uint8Array(setting.batch * L)
for (let b = 0; b < setting.batch; b++) lossMask.fill(1, b * L + setting.scoredFrom, (b + 1) * L)
const data: TokenBatch = { tokens, lossMask, batchSize: setting.batch, seqLength: L }

const m = createTransformer(setting.config)
const stepTimes: number[] = []
let previous = 0
await train(m, data, {
  steps: warmup + steps,
  batchSize: setting.batch,
  lr: setting.lr,
  optimizer: { kind: 'adamw', weightDecay: 0.01 },
  gradClip: 1,
  validation: data,
  evalBatchSize: setting.batch,
  analysis: false,
  onStep: (record) => {
    if (record.step > warmup) stepTimes.push(record.seconds - previous)
    if (record.step === warmup) recording = true
    previous = record.seconds
  },
})
recording = false
m.dispose()
stepTimes.sort((a, b) => a - b)
const stepMs = (stepTimes.reduce((a, b) => a + b, 0) / stepTimes.length) * 1000
const medianMs = (stepTimes[Math.floor(stepTimes.length / 2)] as number) * 1000
const rows = [...totals.entries()]
  .map(([key, e]) => ({ key, calls: e.calls / steps, ms: e.ms / steps }))
  .sort((a, b) => b.ms - a.ms)
const kernelMs = rows.reduce((a, r) => a + r.ms, 0)
const calls = rows.reduce((a, r) => a + r.calls, 0)
console.log(
  `${model}, ${threads} thread(s): median step ${medianMs.toFixed(1)} ms, mean ${stepMs.toFixed(1)} ms; native ` +
    `kernels ${kernelMs.toFixed(1)} ms in ${calls.toFixed(0)} calls; rest ${(stepMs - kernelMs).toFixed(1)} ms`,
)
for (const r of rows)
  if (r.ms >= 0.05)
    console.log(`  ${r.ms.toFixed(2).padStart(7)} ms  ${r.calls.toFixed(1).padStart(5)} calls  ${r.key}`)
const attention = rows.filter((r) => r.key.startsWith('attention'))
if (attention.length > 0) {
  const { nHeads, dHead, nLayers } = setting.config
  const T = setting.positions
  // causal half of q k^T and P v: 2 * (T^2 / 2) * dHead * 2 FLOPs per head forward, twice that backward
  const forwardFlops = setting.batch * nHeads * nLayers * 2 * T * T * dHead
  for (const r of attention) {
    const flops = r.key.startsWith('attentionForward') ? forwardFlops : 2 * forwardFlops
    console.log(`  ${r.key}: ${(flops / (r.ms / 1000) / 1e9).toFixed(1)} GFLOP/s`)
  }
}
