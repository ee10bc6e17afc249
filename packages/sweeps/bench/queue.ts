/**
 * The queue's overhead per trial: the same tiny trials run (a) one after another with
 * `runTrial` in this process and (b) through the queue (submitSweep, one in-process
 * `startQueueWorker`, collectSweep polling every 50 ms) on a redis-server of the benchmark's own
 * (a free localhost port, `--save ''`). Overhead per trial = (queued wall - direct wall) / trials:
 * what BullMQ (fetch, lock, complete), the record's trip back and the collector add per trial,
 * also given as a share of a 30-second trial.
 *
 *   node --conditions=@attnlab/source --import tsx bench/queue.ts [--trials 24] [--repeats 3] [--json]
 *
 * Both sides pay the same tfjs work (the backend is activated once before either). Repeats are
 * interleaved (direct, queued, direct, ...) and the fastest of each kept; on a loaded machine
 * the difference of two noisy walls says little: time it alone on the machine.
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { availableParallelism, loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { useBackend } from '@attnlab/core'
import { expandTrials, parseSweepSpec } from '../src/index.ts'
import { collectSweep, runTrial, startQueueWorker, submitSweep } from '../src/node.ts'
import { startRedis } from '../src/queue/__fixtures__/redis.ts'

const { values } = parseArgs({
  options: {
    trials: { type: 'string', default: '24' },
    repeats: { type: 'string', default: '3' },
    json: { type: 'boolean', default: false },
  },
})
const trialCount = Number(values.trials)
const repeats = Number(values.repeats)

/** A spec of `trialCount` tiny trials (seeds), named per repeat so that no trial is found done. */
function spec(name: string) {
  return parseSweepSpec(
    [
      `name: ${name}`,
      'experiment: emergence',
      'base:',
      '  task: { kind: sparse-markov, vocabSize: 8, spans: [1, 1], genLen: 4, tau: 0.3 }',
      '  training: { steps: 6, batchSize: 8, validationSize: 16, analysisSize: 16, evalEvery: 3 }',
      `seeds: ${trialCount}`,
      '',
    ].join('\n'),
    `${name}.yaml`,
  )
}

const redis = await startRedis()
if (redis === null) {
  console.log('queue bench skipped: redis-server is not installed (Debian: apt-get install redis-server)')
  process.exit(0)
}
const root = await mkdtemp(join(tmpdir(), 'attnlab-queue-bench-'))
await useBackend('cpu')
const direct: number[] = []
const queued: number[] = []
try {
  for (let r = 0; r < repeats; r++) {
    // (a) one after another in this process.
    const trials = await expandTrials(spec(`direct${r}`))
    let start = performance.now()
    for (const trial of trials) await runTrial(join(root, `direct${r}`), trial, { sweep: `direct${r}` })
    direct.push((performance.now() - start) / 1000)
    // (b) through the queue. The trial ids are those of (a) (same settings): fresh artifacts.
    const worker = await startQueueWorker({ queue: redis.url, artifacts: join(root, `artifacts${r}`), name: 'bench' })
    start = performance.now()
    const out = join(root, `queued${r}`)
    await submitSweep(spec(`queued${r}`), { queue: redis.url, out, backend: 'cpu' })
    const result = await collectSweep(out, { queue: redis.url, pollSeconds: 0.05 })
    queued.push((performance.now() - start) / 1000)
    await worker.close()
    if (result.done !== trialCount) throw new Error(`queued run: ${result.done} of ${trialCount} done`)
    // The next repeat's trials have the same ids: empty the queue (a new sweep would find them done).
    await redisFlush(redis.url)
  }
} finally {
  await redis.dispose()
  await rm(root, { recursive: true, force: true })
}

async function redisFlush(url: string): Promise<void> {
  const { Redis } = await import('ioredis')
  const client = new Redis(url)
  await client.flushdb()
  client.disconnect()
}

const best = (xs: number[]): number => Math.min(...xs)
const overhead = (best(queued) - best(direct)) / trialCount
const result = {
  trials: trialCount,
  repeats,
  directSeconds: best(direct),
  queuedSeconds: best(queued),
  overheadSecondsPerTrial: overhead,
  overheadOf30sTrial: overhead / 30,
  machine: { cores: availableParallelism(), loadavg1: loadavg()[0] ?? 0 },
}
if (values.json) console.log(JSON.stringify(result, null, 2))
else {
  console.log(
    `${trialCount} tiny trials: direct ${result.directSeconds.toFixed(2)} s, through the queue ` +
      `${result.queuedSeconds.toFixed(2)} s (fastest of ${repeats}); overhead ${(overhead * 1000).toFixed(1)} ms per ` +
      `trial = ${(result.overheadOf30sTrial * 100).toFixed(3)} % of a 30 s trial ` +
      `(load average ${result.machine.loadavg1.toFixed(1)} on ${result.machine.cores} cores)`,
  )
}
