/**
 * The queue's overhead per trial: the same tiny trials run (a) one after another with
 * `runTrial` in this process and (b) through the queue (submitSweep, one in-process
 * `startQueueWorker`, collectSweep polling every 200 ms) on a redis-server of the benchmark's own
 * (a free localhost port, `--save ''`). Three numbers:
 *
 * - the worker's overhead per trial: its time between trials, (wall from its first trial's start
 *   to its last one's end - the trials' own seconds) / trials, less the same gap of (a): what BullMQ
 *   (fetch the next job, lock, complete with the record) costs a worker per trial, given as a share
 *   of a 30-second trial (the cost that scales with the sweep);
 * - the end-to-end overhead per trial, (queued wall - direct wall) / trials (submit, worker, and the
 *   collector polling in the same process);
 * - the collector's latency: from a trial's end to its line in trials.jsonl (mean; about half the
 *   poll interval plus the round trips).
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
const directGaps: number[] = []
const workerGaps: number[] = []
const latencies: number[] = []
try {
  for (let r = 0; r < repeats; r++) {
    // (a) one after another in this process.
    const trials = await expandTrials(spec(`direct${r}`))
    let start = performance.now()
    let own = 0
    for (const trial of trials) {
      own += (await runTrial(join(root, `direct${r}`), trial, { sweep: `direct${r}` })).durationSeconds
    }
    direct.push((performance.now() - start) / 1000)
    directGaps.push(((performance.now() - start) / 1000 - own) / trialCount)
    // (b) through the queue. The trial ids are those of (a) (same settings): fresh artifacts.
    let first = Number.POSITIVE_INFINITY
    let last = 0
    let ran = 0
    const worker = await startQueueWorker({
      queue: redis.url,
      artifacts: join(root, `artifacts${r}`),
      name: 'bench',
      onEvent: (event) => {
        if (event.kind === 'trial-start') first = Math.min(first, performance.now())
        if (event.kind === 'trial-end') {
          last = performance.now()
          ran += event.record.durationSeconds
        }
      },
    })
    start = performance.now()
    const out = join(root, `queued${r}`)
    await submitSweep(spec(`queued${r}`), { queue: redis.url, out, backend: 'cpu' })
    let latency = 0
    const result = await collectSweep(out, {
      queue: redis.url,
      pollSeconds: 0.2,
      onProgress: (event) => {
        latency += (Date.now() - Date.parse(event.record.finishedAt)) / 1000
      },
    })
    queued.push((performance.now() - start) / 1000)
    workerGaps.push(((last - first) / 1000 - ran) / trialCount)
    latencies.push(latency / trialCount)
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
const workerOverhead = best(workerGaps) - best(directGaps)
const result = {
  trials: trialCount,
  repeats,
  directSeconds: best(direct),
  queuedSeconds: best(queued),
  workerOverheadSecondsPerTrial: workerOverhead,
  workerOverheadOf30sTrial: workerOverhead / 30,
  endToEndOverheadSecondsPerTrial: overhead,
  collectorLatencySeconds: best(latencies),
  machine: { cores: availableParallelism(), loadavg1: loadavg()[0] ?? 0 },
}
if (values.json) console.log(JSON.stringify(result, null, 2))
else {
  console.log(
    `${trialCount} tiny trials: direct ${result.directSeconds.toFixed(2)} s, through the queue ` +
      `${result.queuedSeconds.toFixed(2)} s (fastest of ${repeats}); a worker's overhead ` +
      `${(workerOverhead * 1000).toFixed(1)} ms per trial = ${(result.workerOverheadOf30sTrial * 100).toFixed(3)} % ` +
      `of a 30 s trial; end to end ${(overhead * 1000).toFixed(1)} ms per trial; collector latency ` +
      `${(result.collectorLatencySeconds * 1000).toFixed(0)} ms ` +
      `(load average ${result.machine.loadavg1.toFixed(1)} on ${result.machine.cores} cores)`,
  )
}
