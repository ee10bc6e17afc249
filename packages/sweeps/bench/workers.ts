/**
 * Local sweep throughput: trials per minute of `runSweep` with 1 and 2 worker processes on the
 * same tiny sweep (the emergence experiment on the tiny sparse Markov chain, 8 trials: 2 sequence
 * lengths x 4 seeds, 30 steps each), and their ratio. Each run starts in a fresh directory, so
 * worker start-up (Node, tsx, tfjs) is part of the time, as it is for a user.
 *
 *   node --conditions=@attnlab/source --import tsx bench/workers.ts [--backend cpu|wasm] [--repeats 2] [--json]
 *
 * Each measurement is repeated (interleaved 1, 2, 1, 2, ...) and the fastest repeat is kept: on a
 * shared machine a run can lose a core to other work. Time it alone on the machine
 * (`pnpm --filter @attnlab/sweeps bench`); on a loaded machine the ratio says little.
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { availableParallelism, loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import type { BackendName } from '@attnlab/core'
import { parseSweepSpec } from '../src/index.ts'
import { runSweep } from '../src/node.ts'

const { values } = parseArgs({
  options: {
    backend: { type: 'string', default: 'cpu' },
    repeats: { type: 'string', default: '2' },
    json: { type: 'boolean', default: false },
  },
})
const backend = values.backend as BackendName
const repeats = Number(values.repeats)

const SPEC = parseSweepSpec(
  [
    'name: bench-tiny',
    'experiment: emergence',
    'base:',
    '  task: { kind: sparse-markov, vocabSize: 8, spans: [1, 1], tau: 0.3 }',
    '  training: { steps: 30, batchSize: 16, validationSize: 32, analysisSize: 16, evalEvery: 5 }',
    'grid:',
    '  task.genLen: [4, 6]',
    'seeds: 4',
    '',
  ].join('\n'),
  'bench-tiny.yaml',
)

/** Wall seconds of one fresh sweep with `workers` workers. */
async function measure(workers: number): Promise<number> {
  const dir = await mkdtemp(join(tmpdir(), 'attnlab-sweep-bench-'))
  try {
    const result = await runSweep(SPEC, { out: dir, workers, backend })
    if (result.done !== 8) throw new Error(`bench: ${result.done} of 8 trials done (${result.failed} failed)`)
    return result.wallSeconds
  } finally {
    await rm(dir, { recursive: true, force: true })
  }
}

const best = new Map<number, number>()
const load = loadavg()[0] ?? 0
for (let r = 0; r < repeats; r++) {
  for (const workers of [1, 2]) {
    const seconds = await measure(workers)
    best.set(workers, Math.min(best.get(workers) ?? Number.POSITIVE_INFINITY, seconds))
  }
}
const perMinute = (workers: number): number => (8 / (best.get(workers) as number)) * 60
const report = {
  trials: 8,
  backend,
  cores: availableParallelism(),
  loadAverageAtStart: load,
  seconds: { 1: best.get(1), 2: best.get(2) },
  trialsPerMinute: { 1: perMinute(1), 2: perMinute(2) },
  ratio: perMinute(2) / perMinute(1),
}
if (values.json) console.log(JSON.stringify(report, null, 2))
else {
  console.log(`sweep bench: 8 tiny emergence trials on ${backend}, ${report.cores} cores, load ${load.toFixed(2)}`)
  for (const workers of [1, 2]) {
    console.log(
      `  ${workers} worker(s): ${(best.get(workers) as number).toFixed(1)} s, ` +
        `${perMinute(workers).toFixed(1)} trials/min (best of ${repeats})`,
    )
  }
  console.log(`  ratio 2 / 1 workers: ${report.ratio.toFixed(2)}`)
}
