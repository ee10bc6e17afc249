/**
 * Benchmark: sampling the sparse Markov chain (d = 50, spans [2,2,2], tau = 0.1, 20 generated
 * tokens per sequence), in generated tokens per second, next to the numpy implementation of the
 * same process in tools/markov/sample_bench.py (run with /usr/bin/python3 in the same process).
 *
 * Run: `pnpm bench` at the repository root (turbo runs every package's bench script), or
 * `pnpm --filter @attnlab/markov bench`. Take `flock /work/locks/bench` around it on shared
 * machines. Options via env: MARKOV_BENCH_SECONDS (default 3), MARKOV_BENCH_BATCH (default 4096).
 */
import { spawnSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { Rng } from '@attnlab/core'
import { SparseMarkovTask } from '../src/index.ts'

const seconds = Number(process.env.MARKOV_BENCH_SECONDS ?? 3)
const batch = Number(process.env.MARKOV_BENCH_BATCH ?? 4096)
const task = new SparseMarkovTask({ vocabSize: 50, spans: [2, 2, 2], m: 1.7, tau: 0.1, genLen: 20 })
const rng = Rng.fromSeed(0).split('bench')

function ours(): number {
  task.sample(batch, rng) // warm-up (also builds the tables)
  let sequences = 0
  const start = performance.now()
  for (;;) {
    task.sample(batch, rng)
    sequences += batch
    const elapsed = (performance.now() - start) / 1000
    if (elapsed >= seconds) return (sequences * task.config.genLen) / elapsed
  }
}

interface NumpyResult {
  readonly tokensPerSecond: number
  readonly numpy: string
  readonly productTokensPerSecond: number
  readonly pairTableTokensPerSecond: number
  readonly softmaxTokensPerSecond: number
}

function numpy(): NumpyResult | string {
  const python = '/usr/bin/python3'
  const script = fileURLToPath(new URL('../../../tools/markov/sample_bench.py', import.meta.url))
  if (!existsSync(python))
    return `${python} not found: install python3 and python3-numpy (Debian) to compare with numpy`
  if (!existsSync(script)) return `${script} not found`
  const env = { ...process.env }
  // Older-CPU OpenBLAS overrides slow a current numpy down; unset them for this run only.
  delete env.OPENBLAS_CORETYPE
  delete env.OPENBLAS_L2_SIZE
  const run = spawnSync(python, [script, '--json', '--seconds', String(seconds), '--sequences', String(batch)], {
    encoding: 'utf8',
    env,
  })
  if (run.status !== 0) {
    const reason = (run.stderr || run.error?.message || '').trim().split('\n').pop() ?? ''
    return /No module named 'numpy'/.test(run.stderr ?? '')
      ? 'numpy is not installed for /usr/bin/python3 (apt-get install python3-numpy)'
      : `the numpy benchmark failed: ${reason}`
  }
  return JSON.parse(run.stdout.trim().split('\n').pop() as string) as NumpyResult
}

const format = (x: number): string => Math.round(x).toLocaleString('en-US')
const ourRate = ours()
const reference = numpy()
console.log(
  `sparse-markov sampling, d = 50, spans [2,2,2], genLen 20, batch ${batch}, ${seconds} s each (generated tokens/s)`,
)
console.log(`  @attnlab/markov (TypeScript, ${process.version}): ${format(ourRate)} tokens/s`)
if (typeof reference === 'string') {
  console.log(`  numpy: skipped (${reference})`)
} else {
  console.log(
    `  numpy ${reference.numpy} (best of: product ${format(reference.productTokensPerSecond)}, pair tables ` +
      `${format(reference.pairTableTokensPerSecond)}, softmax ${format(reference.softmaxTokensPerSecond)}): ` +
      `${format(reference.tokensPerSecond)} tokens/s`,
  )
  console.log(`  ratio ours / numpy: ${(ourRate / reference.tokensPerSecond).toFixed(2)}x`)
}
