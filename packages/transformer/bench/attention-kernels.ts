/**
 * The fused training attention kernels (`causalAttention` forward and backward) alone, against
 * PyTorch CPU's `softmax(q k^T / sqrt(d) + mask) v` forward and autograd backward of the same
 * shapes (`tools/transformer/bench_attention_train_torch.py`, run first in the same run). Default
 * shape: the cellular-automaton model at S = 32 (batch 256, 127 positions, 8 heads of 8
 * dimensions); `--shape gpt` the training benchmark's GPT (64, 64, 4 heads of 16). GFLOP/s count
 * the causal half of `q k^T` and `P v` (2 T^2 dHead per head and sequence) forward and twice that
 * backward; times are the best of `--repeats` calls, wall clock and CPU time of this process.
 *
 *   node --conditions=@attnlab/source --import tsx bench/attention-kernels.ts \
 *     [--shape ca|gpt] [--kernels native,wasm] [--threads 1] [--repeats 7]
 */
import { execFileSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { Rng, useBackend } from '@attnlab/core'
import { activeKernels } from '@attnlab/core/kernels'

function flag(name: string, fallback: string): string {
  const index = process.argv.indexOf(`--${name}`)
  return index >= 0 ? (process.argv[index + 1] ?? fallback) : fallback
}
const shapes = { ca: [256, 127, 8, 8], gpt: [64, 64, 4, 16] } as const
const shapeName = flag('shape', 'ca') as keyof typeof shapes
const [B, T, H, dh] = shapes[shapeName] ?? shapes.ca
const threads = Number(flag('threads', '1'))
const repeats = Number(flag('repeats', '7'))
const modes = flag('kernels', 'native,wasm').split(',') as ('native' | 'wasm')[]
const flops = B * H * 2 * T * T * dh
const gflops = (f: number, seconds: number): string => (f / seconds / 1e9).toFixed(1).padStart(6)
const ms = (seconds: number): string => (seconds * 1e3).toFixed(1).padStart(7)

console.log(`attention ${shapeName}: batch ${B}, ${T} positions, ${H} heads of ${dh}, causal, ${threads} thread(s)`)
try {
  const script = fileURLToPath(new URL('../../../tools/transformer/bench_attention_train_torch.py', import.meta.url))
  const out = execFileSync(
    '/usr/bin/python3',
    [script, '--batch', `${B}`, '--pos', `${T}`, '--heads', `${H}`, '--d', `${dh}`, '--threads', `${threads}`],
    { encoding: 'utf8', env: { ...process.env, OPENBLAS_CORETYPE: process.env.OPENBLAS_CORETYPE ?? 'SKYLAKEX' } },
  )
  const peer = JSON.parse(out.trim()) as { torch: string; forward: number; backward: number }
  console.log(
    `  PyTorch ${peer.torch}: forward ${ms(peer.forward)} ms ${gflops(flops, peer.forward)} GFLOP/s, ` +
      `backward ${ms(peer.backward)} ms ${gflops(2 * flops, peer.backward)} GFLOP/s (wall)`,
  )
} catch (error) {
  console.log(`  PyTorch peer unavailable (${(error as Error).message.split('\n')[0]})`)
}

const rng = Rng.fromSeed(1)
const qkv = rng.fillNormal(new Float32Array(B * T * 3 * H * dh))
const dOut = rng.fillNormal(new Float32Array(B * T * H * dh))
for (const mode of modes) {
  await useBackend('wasm', { kernels: mode, threads })
  const provider = activeKernels('wasm')?.provider
  if (provider === undefined) throw new Error(`kernels ${mode} not active`)
  const saved = provider.attentionSaves === 'logSumExp' ? B * H * T : B * H * T * T
  // the wasm kernels compute on the tfjs heap: one allocation there, then views of it
  const sizes = [qkv.length, dOut.length, B * T * H * dh, saved, qkv.length]
  const [x, g, out, probs, dQkv] = (
    provider.name === 'wasm' ? await heapArrays(sizes) : sizes.map((n) => new Float32Array(n))
  ) as [Float32Array, Float32Array, Float32Array, Float32Array, Float32Array]
  x.set(qkv)
  g.set(dOut)
  const best = { f: Infinity, b: Infinity, fc: Infinity, bc: Infinity }
  const cpu = (): number => {
    const u = process.cpuUsage()
    return (u.user + u.system) / 1e6
  }
  for (let r = 0; r < repeats; r++) {
    let [t0, c0] = [performance.now(), cpu()]
    provider.attentionForward(x, out, probs, B, T, H, dh, 1 / Math.sqrt(dh), true)
    best.f = Math.min(best.f, (performance.now() - t0) / 1e3)
    best.fc = Math.min(best.fc, cpu() - c0)
    ;[t0, c0] = [performance.now(), cpu()]
    provider.attentionBackward(x, probs, g, dQkv, B, T, H, dh, 1 / Math.sqrt(dh), true, out)
    best.b = Math.min(best.b, (performance.now() - t0) / 1e3)
    best.bc = Math.min(best.bc, cpu() - c0)
  }
  console.log(
    `  attnlab ${mode.padEnd(6)}: forward ${ms(best.f)} ms ${gflops(flops, best.f)} GFLOP/s ` +
      `(CPU ${ms(best.fc)} ms ${gflops(flops, best.fc)}), backward ${ms(best.b)} ms ` +
      `${gflops(2 * flops, best.b)} GFLOP/s (CPU ${ms(best.bc)} ms ${gflops(2 * flops, best.bc)}); saves ` +
      `${provider.attentionSaves ?? 'probabilities'}`,
  )
}

/** Float32 views of one fresh allocation on the tfjs wasm heap (the wasm kernels read only that memory). */
async function heapArrays(sizes: number[]): Promise<Float32Array[]> {
  const tf = await import('@tensorflow/tfjs-core')
  const backend = tf.backend() as unknown as { wasm: { _malloc(bytes: number): number; HEAPU8: Uint8Array } }
  let offset = backend.wasm._malloc(4 * sizes.reduce((a, n) => a + n, 0))
  return sizes.map((n) => {
    const view = new Float32Array(backend.wasm.HEAPU8.buffer, offset, n)
    offset += 4 * n
    return view
  })
}
