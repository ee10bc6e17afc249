/**
 * Training throughput of attnlab next to PyTorch, in one run (issue 4; the baseline for issue 9).
 *
 * Configurations:
 * - `minimal`: the minimal preset (d = 50, spans [2,2,2]: 25 input positions, 3 heads), batch
 *   1024, AdamW lr 0.08, weight decay 0.01, grad clip 1.0 (the emergence setting).
 * - `gpt`: 2 layers, 4 heads, dModel 64, dMlp 256, T 64, vocab 64, batch 64, AdamW lr 1e-3.
 *
 * attnlab runs the real trainer (`train()` on a fixed dataset, so no sampling cost) and the
 * median step time after warm-up gives tokens/s (`batch * positions / step`). The PyTorch peer
 * (`tools/transformer/bench_torch.py`, Debian python3-torch + OpenBLAS) trains the same models with
 * the same optimizer at 1 and 2 threads; for the minimal model both the dense one-hot form (the
 * paper's code) and the gather form are run, and ratios are against the fastest PyTorch number.
 *
 *   node --conditions=@attnlab/source --import tsx bench/train-throughput.ts [--backends wasm,cpu] [--steps 15] [--json]
 *
 * Time it alone on the machine (`flock /work/locks/bench pnpm bench` here).
 */
import { execFileSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Rng, useBackend, type BackendName } from '@attnlab/core'
import type { TokenBatch } from '@attnlab/markov'
import { createConfig, presetConfig, type TransformerConfig } from '../src/config.ts'
import { createTransformer } from '../src/model.ts'
import { train } from '../src/train.ts'

function flag(name: string, fallback: string): string {
  const index = process.argv.indexOf(`--${name}`)
  return index >= 0 ? (process.argv[index + 1] ?? fallback) : fallback
}
const backends = flag('backends', 'wasm').split(',') as BackendName[]
const steps = Number(flag('steps', '15'))
const json = process.argv.includes('--json')
const here = dirname(fileURLToPath(import.meta.url))
const torchScript = join(here, '..', '..', '..', 'tools', 'transformer', 'bench_torch.py')

interface Row {
  model: string
  implementation: string
  tokensPerSecond: number
  stepSeconds: number
  rssMiB?: number
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
    config: createConfig({ architecture: 'gpt', dVocab: 64, nCtx: 64, dModel: 64, nLayers: 2, nHeads: 4, dHead: 16, dMlp: 256 }),
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

async function attnlab(setting: Setting, backend: BackendName): Promise<Row> {
  await useBackend(backend)
  const model = createTransformer(setting.config)
  const data = dataset(setting)
  const warmup = 3
  const total = backend === 'cpu' ? Math.min(steps, 6) : steps
  const stepTimes: number[] = []
  let previous = 0
  await train(model, data, {
    steps: warmup + total,
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
  return {
    model: setting.name,
    implementation: `attnlab ${backend}`,
    tokensPerSecond: (setting.batch * setting.positions) / median,
    stepSeconds: median,
    rssMiB: process.memoryUsage().rss / 2 ** 20,
  }
}

function pytorch(setting: Setting, threads: number, form?: 'dense' | 'gather'): Row | undefined {
  try {
    const args = [torchScript, '--model', setting.name, '--threads', String(threads), '--steps', String(steps), '--batch', String(setting.batch)]
    if (form !== undefined) args.push('--form', form)
    const out = execFileSync('/usr/bin/python3', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] })
    const result = JSON.parse(out.trim().split('\n').pop() as string) as { tokensPerSecond: number; stepSeconds: number }
    return {
      model: setting.name,
      implementation: `pytorch ${threads} thread${threads > 1 ? 's' : ''}${form === undefined ? '' : ` (${form})`}`,
      tokensPerSecond: result.tokensPerSecond,
      stepSeconds: result.stepSeconds,
    }
  } catch (error) {
    if (!json) console.warn(`PyTorch peer unavailable (${(error as Error).message.split('\n')[0]}); install python3-torch and libopenblas0-openmp`)
    return undefined
  }
}

const rows: Row[] = []
for (const setting of settings) {
  for (const backend of backends) rows.push(await attnlab(setting, backend))
  if (existsSync('/usr/bin/python3')) {
    for (const threads of [1, 2]) {
      const forms = setting.name === 'minimal' ? (['dense', 'gather'] as const) : ([undefined] as const)
      for (const form of forms) {
        const row = pytorch(setting, threads, form)
        if (row !== undefined) rows.push(row)
      }
    }
  }
}

const report = settings.map((setting) => {
  const own = rows.filter((r) => r.model === setting.name)
  const torch = own.filter((r) => r.implementation.startsWith('pytorch'))
  const best = torch.length > 0 ? Math.max(...torch.map((r) => r.tokensPerSecond)) : Number.NaN
  return { model: setting.name, rows: own.map((r) => ({ ...r, ratioToBestPytorch: r.tokensPerSecond / best })) }
})
if (json) {
  console.log(JSON.stringify({ steps, report }, null, 2))
} else {
  for (const { model, rows: own } of report) {
    console.log(`\n${model}: training tokens/s (median step after 3 warm-up steps)`)
    for (const r of own) {
      console.log(
        `  ${r.implementation.padEnd(30)} ${r.tokensPerSecond.toFixed(0).padStart(9)} tokens/s  ${(r.stepSeconds * 1000).toFixed(1).padStart(8)} ms/step  ratio ${r.ratioToBestPytorch.toFixed(2)}` +
          (r.rssMiB === undefined ? '' : `  rss ${r.rssMiB.toFixed(0)} MiB`),
      )
    }
  }
}
