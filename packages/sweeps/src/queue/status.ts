/**
 * The state of the sweeps queue (Node): jobs waiting, active, completed and failed, per sweep
 * and per worker.
 *
 * @module
 */
import type { Job } from 'bullmq'
import { readSweepFile } from '../directory.ts'
import { checkQueueConnection, parseQueueUrl } from './connection.ts'
import { DEFAULT_QUEUE_NAME, sweepId, type TrialJobData } from './jobs.ts'
import { openQueue } from './submit.ts'

/**
 * Job counts by BullMQ state (`delayed` includes prioritized and waiting-children jobs).
 *
 * @category Queue
 */
export interface QueueCounts {
  readonly waiting: number
  readonly active: number
  readonly completed: number
  readonly failed: number
  readonly delayed: number
}

/**
 * One sweep's line of {@link QueueStatus}.
 *
 * @category Queue
 */
export interface SweepQueueStatus extends QueueCounts {
  /** The sweep's name and id (name + spec hash; a trial shared by two sweeps counts for the first that queued it). */
  readonly sweep: string
  readonly sweepId: string
  /** With a sweep directory: its trials not in the queue at all (never submitted, or lost by Redis). */
  readonly notQueued?: number
}

/**
 * One worker's line of {@link QueueStatus}: its trials by state (from each job's `processedBy`),
 * and whether it is connected now.
 *
 * @category Queue
 */
export interface WorkerQueueStatus {
  readonly name: string
  readonly connected: boolean
  readonly active: number
  readonly completed: number
  readonly failed: number
}

/**
 * What {@link queueStatus} returns.
 *
 * @category Queue
 */
export interface QueueStatus {
  /** The URL, its password hidden. */
  readonly queue: string
  /** The whole queue (`Queue.getJobCounts`). */
  readonly counts: QueueCounts
  /** Per sweep, in the order first queued. */
  readonly sweeps: readonly SweepQueueStatus[]
  /** Per worker: the connected ones, then those that ran trials and are gone. */
  readonly workers: readonly WorkerQueueStatus[]
}

/**
 * Options of {@link queueStatus}.
 *
 * @category Queue
 */
export interface QueueStatusOptions {
  /** The queue's Redis URL. */
  readonly queue: string
  /** Only this sweep directory's trials (its `sweep.json`). */
  readonly dir?: string
  /** The BullMQ queue name (default {@link DEFAULT_QUEUE_NAME}). */
  readonly queueName?: string
}

type StateName = 'waiting' | 'active' | 'completed' | 'failed' | 'delayed'
const STATES: Readonly<Record<string, StateName>> = {
  waiting: 'waiting',
  active: 'active',
  completed: 'completed',
  failed: 'failed',
  delayed: 'delayed',
  prioritized: 'delayed',
  'waiting-children': 'delayed',
}

const zero = (): Record<StateName, number> => ({ waiting: 0, active: 0, completed: 0, failed: 0, delayed: 0 })

/**
 * Reads the queue's state: job counts of the whole queue, per sweep (from each job's data) and
 * per worker (connected workers from Redis' client list, trials from each job's
 * `processedBy`). With `dir`, only that sweep's trials, and how many of them are not queued.
 *
 * @param options - queue URL, optional sweep directory
 * @returns the counts
 * @throws {@link QueueUrlError}, {@link QueueConnectionError}; {@link SweepDirectoryError} for a
 *   `dir` without `sweep.json`
 * @category Queue
 */
export async function queueStatus(options: QueueStatusOptions): Promise<QueueStatus> {
  const url = parseQueueUrl(options.queue)
  const only = options.dir === undefined ? null : await readSweepFile(options.dir)
  await checkQueueConnection(url)
  const { queue, close } = openQueue(url, options.queueName, 'status')
  try {
    const raw = await queue.getJobCounts()
    const counts = zero()
    for (const [state, n] of Object.entries(raw)) {
      const name = STATES[state]
      if (name !== undefined) counts[name] += n
    }
    const ids = only === null ? null : new Set(only.trials.map((t) => t.id))
    const sweeps = new Map<string, { sweep: string; counts: Record<StateName, number> }>()
    const workers = new Map<string, Record<StateName, number>>()
    let seen = 0
    for (const [state, name] of Object.entries(STATES)) {
      const jobs = (await queue.getJobs([state as 'waiting'], 0, -1, true)) as Job<TrialJobData>[]
      for (const job of jobs) {
        if (job?.data === undefined || (ids !== null && !ids.has(String(job.id)))) continue
        seen++
        const key = job.data.sweepId ?? '?'
        const entry = sweeps.get(key) ?? { sweep: job.data.sweep ?? '?', counts: zero() }
        entry.counts[name]++
        sweeps.set(key, entry)
        if (job.processedBy !== undefined && (name === 'active' || name === 'completed' || name === 'failed')) {
          const worker = workers.get(job.processedBy) ?? zero()
          worker[name]++
          workers.set(job.processedBy, worker)
        }
      }
    }
    if (only !== null && sweeps.size === 0) sweeps.set(sweepId(only.spec), { sweep: only.spec.name, counts: zero() })
    const connected = new Set(
      (await queue.getWorkers()).map((w) => (w.rawname ?? w.name ?? '').replace(/^.*?:w:/, '')).filter((n) => n !== ''),
    )
    const workerList: WorkerQueueStatus[] = [...new Set([...connected, ...workers.keys()])].map((name) => {
      const c = workers.get(name) ?? zero()
      return { name, connected: connected.has(name), active: c.active, completed: c.completed, failed: c.failed }
    })
    workerList.sort((a, b) => Number(b.connected) - Number(a.connected) || a.name.localeCompare(b.name))
    return {
      queue: url.display,
      counts,
      sweeps: [...sweeps.entries()].map(([key, { sweep, counts: c }]) => ({
        sweep,
        sweepId: key,
        ...c,
        ...(only === null ? {} : { notQueued: only.trials.length - seen }),
      })),
      workers: workerList,
    }
  } finally {
    await close()
  }
}
