/**
 * Training throughput of attnlab next to PyTorch, in one run.
 *
 * Configurations:
 * - `minimal`: the minimal preset (d = 50, spans [2,2,2]: 25 input positions, 3 heads), batch
 *   1024, AdamW lr 0.08, weight decay 0.01, grad clip 1.0 (the emergence setting).
 * - `gpt`: 2 layers, 4 heads, dModel 64, dMlp 256, T 64, vocab 64, batch 64, AdamW lr 1e-3.
 *
 * attnlab runs the real trainer (`train()` on a fixed dataset, so no sampling cost) on the wasm
 * backend once per kernels mode (`none`: stock tfjs-wasm; `wasm`: the AssemblyScript kernels;
 * `native`: the C++ kernels, when built, at 1 and 2 threads), each in a fresh child process so its
 * peak memory is its own. The median step time after warm-up gives tokens/s (`batch * positions / step`). The PyTorch
 * peer (`tools/transformer/bench_torch.py`, Debian python3-torch + OpenBLAS) trains the same models
 * with the same optimizer at 1 and 2 threads; for the minimal model both the dense one-hot form
 * (the paper's code) and the gather form are run. Ratios are against the fastest PyTorch run.
 *
 * Debian's OpenBLAS 0.3.21 does not recognise some recent CPUs and then uses its SSE3 kernels,
 * which halves PyTorch's speed here; when that happens the peer runs with OPENBLAS_CORETYPE set to
 * what the CPU supports (SKYLAKEX for AVX-512, HASWELL for AVX2) and the report says so.
 *
 *   node --conditions=@attnlab/source --import tsx bench/train-throughput.ts \
 *     [--kernels none,wasm,native,native@2] [--steps 15] [--repeats 2] [--json]
 *
 * Each measurement is repeated (`--repeats`, default 2, interleaved over the configurations) and
 * the fastest repeat is reported: on a shared machine a run can lose a core to other work.
 *
 * (`mode@N` runs a kernels mode with N threads; only the native kernels use threads.)
 *
 * Time it alone on the machine (`flock /work/locks/bench pnpm --filter @attnlab/transformer bench`).
 */
import { execFileSync, spawnSync } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { cpus } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import * as tf from '@tensorflow/tfjs-core'
import { KERNELS_MODES, Rng, kernelsInUse, useBackend, type KernelsMode } from '@attnlab/core'
import { nativeKernelsStatus } from '@attnlab/core/node'
import type { TokenBatch } from '@attnlab/markov'
import { createConfig, presetConfig, type TransformerConfig } from '../src/config.ts'
import { createTransformer } from '../src/model.ts'
import { train } from '../src/train.ts'

function flag(name: string, fallback: string): string {
  const index = process.argv.indexOf(`--${name}`)
  return index >= 0 ? (process.argv[index + 1] ?? fallback) : fallback
}
const steps = Number(flag('steps', '15'))
const repeats = Number(flag('repeats', '2'))
const threads = Number(flag('threads', '1'))
const json = process.argv.includes('--json')
const here = dirname(fileURLToPath(import.meta.url))
const torchScript = join(here, '..', '..', '..', 'tools', 'transformer', 'bench_torch.py')
const warmup = 3

interface Row {
  model: string
  implementation: string
  tokensPerSecond: number
  stepSeconds: number
  peakRssMiB?: number
  wasmHeapMiB?: number
}

interface Setting {
  name: 'minimal' | 'gpt'
  config: TransformerConfig
  batch: number
  positions: number
  lr: number
  scoredFrom: number
}

const settings: Setting[] = [
  { name: 'minimal', config: presetConfig('minimal'), batch: 1024, positions: 25, lr: 0.08, scoredFrom: 6 },
  {
    name: 'gpt',
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
  },
]

function dataset(setting: Setting): TokenBatch {
  const rng = Rng.fromSeed(1)
  const L = setting.positions + 1
  const tokens = new Int32Array(setting.batch * L)
  for (let i = 0; i < tokens.length; i++) tokens[i] = rng.int(setting.config.dVocab)
  const lossMask = new Uint8Array(setting.batch * L)
  for (let b = 0; b < setting.batch; b++) lossMask.fill(1, b * L + setting.scoredFrom, (b + 1) * L)
  return { tokens, lossMask, batchSize: setting.batch, seqLength: L }
}

/** One attnlab measurement, in this process (the child side). */
async function measure(setting: Setting, kernels: KernelsMode): Promise<Row> {
  await useBackend('wasm', { kernels, threads })
  const model = createTransformer(setting.config)
  const data = dataset(setting)
  const stepTimes: number[] = []
  let previous = 0
  await train(model, data, {
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
      previous = record.seconds
    },
  })
  model.dispose()
  stepTimes.sort((a, b) => a - b)
  const median = stepTimes[Math.floor(stepTimes.length / 2)] as number
  const heap = (tf.backend() as unknown as { wasm?: { HEAPU8?: Uint8Array } }).wasm?.HEAPU8?.buffer.byteLength ?? 0
  return {
    model: setting.name,
    implementation: `attnlab wasm, kernels ${kernelsInUse('wasm')}${threads > 1 ? ` (${threads} threads)` : ''}`,
    tokensPerSecond: (setting.batch * setting.positions) / median,
    stepSeconds: median,
    peakRssMiB: process.resourceUsage().maxRSS / 1024,
    wasmHeapMiB: heap / 2 ** 20,
  }
}

/** Runs {@link measure} in a fresh child process (honest peak memory per mode). */
function attnlab(setting: Setting, kernels: KernelsMode, modeThreads: number): Row | undefined {
  const child = spawnSync(
    process.execPath,
    [
      ...process.execArgv,
      fileURLToPath(import.meta.url),
      '--child',
      setting.name,
      kernels,
      '--steps',
      String(steps),
      '--threads',
      String(modeThreads),
    ],
    {
      encoding: 'utf8',
      maxBuffer: 1 << 24,
    },
  )
  if (child.status !== 0) {
    console.warn(
      `attnlab ${setting.name} with kernels ${kernels} failed: ` +
        `${(child.stderr || '').trim().split('\n').slice(-3).join(' | ')}`,
    )
    return undefined
  }
  return JSON.parse(child.stdout.trim().split('\n').pop() as string) as Row
}

/** The OpenBLAS core type to force for the PyTorch peer, when Debian's OpenBLAS picks a generic one. */
function openblasCoreType(): { coretype?: string; detected: string } {
  const probe = spawnSync('/usr/bin/python3', ['-c', 'import torch; a = torch.ones(64, 64); (a @ a).sum()'], {
    encoding: 'utf8',
    env: { ...process.env, OPENBLAS_VERBOSE: '2' },
  })
  const detected = /Core:\s*(\S+)/.exec(`${probe.stdout}${probe.stderr}`)?.[1] ?? 'unknown'
  if (process.env.OPENBLAS_CORETYPE) return { coretype: process.env.OPENBLAS_CORETYPE, detected }
  const flags = existsSync('/proc/cpuinfo') ? readFileSync('/proc/cpuinfo', 'utf8') : ''
  const generic = /^(Prescott|Core2|Penryn|Dunnington|Nehalem|Atom|generic|unknown)$/i.test(detected)
  if (!generic) return { detected }
  if (/\bavx512f\b/.test(flags)) return { coretype: 'SKYLAKEX', detected }
  if (/\bavx2\b/.test(flags)) return { coretype: 'HASWELL', detected }
  return { detected }
}

function pytorch(
  setting: Setting,
  torchThreads: number,
  coretype: string | undefined,
  form?: 'dense' | 'gather',
): Row | undefined {
  try {
    const args = [
      torchScript,
      '--model',
      setting.name,
      '--threads',
      String(torchThreads),
      '--steps',
      String(steps),
      '--batch',
      String(setting.batch),
    ]
    if (form !== undefined) args.push('--form', form)
    const env = coretype === undefined ? process.env : { ...process.env, OPENBLAS_CORETYPE: coretype }
    const out = execFileSync('/usr/bin/python3', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], env })
    const result = JSON.parse(out.trim().split('\n').pop() as string) as {
      tokensPerSecond: number
      stepSeconds: number
      peakRssMiB?: number
    }
    return {
      model: setting.name,
      implementation:
        `pytorch ${torchThreads} ` + `thread${torchThreads > 1 ? 's' : ''}${form === undefined ? '' : ` (${form})`}`,
      tokensPerSecond: result.tokensPerSecond,
      stepSeconds: result.stepSeconds,
      ...(result.peakRssMiB === undefined ? {} : { peakRssMiB: result.peakRssMiB }),
    }
  } catch (error) {
    if (!json)
      console.warn(
        `PyTorch peer unavailable (${(error as Error).message.split('\n')[0]}); install python3-torch and ` +
          'libopenblas0-openmp',
      )
    return undefined
  }
}

async function parent(): Promise<void> {
  const requested = flag('kernels', 'none,wasm,native,native@2')
    .split(',')
    .map((entry) => {
      const [mode, count] = entry.split('@') as [KernelsMode, string | undefined]
      if (!(KERNELS_MODES as readonly string[]).includes(mode))
        throw new Error(`--kernels: '${mode}' is not one of ${KERNELS_MODES.join(', ')}`)
      return { mode, threads: count === undefined ? threads : Number(count) }
    })
  const native = await nativeKernelsStatus()
  const modes = requested.filter(({ mode }) => mode !== 'native' || native.state === 'loadable')
  const notes: string[] = []
  if (modes.length < requested.length)
    notes.push(`native kernels not built (${native.state}): run pnpm attnlab kernels build to include them`)
  const haveTorch = existsSync('/usr/bin/python3')
  const blas = haveTorch ? openblasCoreType() : { detected: 'n/a' }
  if (blas.coretype !== undefined) {
    notes.push(
      `PyTorch ran with OPENBLAS_CORETYPE=${blas.coretype}: Debian's OpenBLAS 0.3.21 picked its '${blas.detected}' ` +
        `kernels on this CPU (${cpus()[0]?.model ?? 'unknown'}), which would halve PyTorch's speed`,
    )
  }
  // Best of `repeats` per configuration (repeats interleaved, so a burst of other work on the
  // machine hits one repeat of several configurations rather than every repeat of one).
  const best = new Map<string, Row>()
  const keep = (row: Row | undefined): void => {
    if (row === undefined) return
    const key = `${row.model}\u0000${row.implementation}`
    const previous = best.get(key)
    if (previous === undefined || row.tokensPerSecond > previous.tokensPerSecond) best.set(key, row)
  }
  for (let repeat = 0; repeat < repeats; repeat++) {
    for (const setting of settings) {
      for (const { mode, threads: modeThreads } of modes) keep(attnlab(setting, mode, modeThreads))
      if (haveTorch) {
        for (const torchThreads of [1, 2]) {
          const forms = setting.name === 'minimal' ? (['dense', 'gather'] as const) : ([undefined] as const)
          for (const form of forms) keep(pytorch(setting, torchThreads, blas.coretype, form))
        }
      }
    }
  }
  const rows = [...best.values()]
  const report = settings.map((setting) => {
    const own = rows.filter((r) => r.model === setting.name)
    const torch = own.filter((r) => r.implementation.startsWith('pytorch'))
    const best = torch.length > 0 ? Math.max(...torch.map((r) => r.tokensPerSecond)) : Number.NaN
    const bestOf = (n: number): number =>
      Math.max(...torch.filter((r) => r.implementation.startsWith(`pytorch ${n} thread`)).map((r) => r.tokensPerSecond))
    return {
      model: setting.name,
      bestPytorchTokensPerSecond: best,
      rows: own.map((r) => ({
        ...r,
        ratioToBestPytorch: r.tokensPerSecond / best,
        ratioToPytorch1: r.tokensPerSecond / bestOf(1),
        ratioToPytorch2: r.tokensPerSecond / bestOf(2),
      })),
    }
  })
  if (json) {
    console.log(JSON.stringify({ steps, repeats, cpu: cpus()[0]?.model, openblas: blas, notes, report }, null, 2))
    return
  }
  for (const { model, rows: own } of report) {
    console.log(
      `\n${model}: training tokens/s (median of ${steps} steps after ${warmup} warm-up steps, best of ${repeats} ` +
        'runs); ratios vs PyTorch (best of any form) at 1 thread / 2 threads / best',
    )
    for (const r of own) {
      const ratios =
        `${r.ratioToPytorch1.toFixed(2)} / ${r.ratioToPytorch2.toFixed(2)} / ` + `${r.ratioToBestPytorch.toFixed(2)}`
      const memory =
        r.peakRssMiB === undefined
          ? ''
          : `  peak rss ${r.peakRssMiB.toFixed(0)} ` +
            `MiB${r.wasmHeapMiB === undefined ? '' : ` (wasm heap ${r.wasmHeapMiB.toFixed(0)} MiB)`}`
      console.log(
        `  ${r.implementation.padEnd(42)} ${r.tokensPerSecond.toFixed(0).padStart(8)} tokens/s ` +
          `${(r.stepSeconds * 1000).toFixed(1).padStart(8)} ms/step  ratio ${ratios}${memory}`,
      )
    }
  }
  for (const note of notes) console.log(`\nnote: ${note}`)
}

const childIndex = process.argv.indexOf('--child')
if (childIndex >= 0) {
  const setting = settings.find((s) => s.name === process.argv[childIndex + 1])
  if (setting === undefined) throw new Error(`unknown setting ${process.argv[childIndex + 1]}`)
  console.log(JSON.stringify(await measure(setting, process.argv[childIndex + 2] as KernelsMode)))
} else {
  await parent()
}
