/**
 * Submitting a sweep to the queue and collecting its records (Node): `DIR/sweep.json` written as
 * for a local run, one BullMQ job per trial (job id = trial id), and each finished job's record
 * appended once to `DIR/trials.jsonl`.
 *
 * @module
 */
import { checkRange, type BackendName } from '@attnlab/core'
import { Queue, type Job } from 'bullmq'
import { appendTrialRecord, readSweepFile, readTrials, type SweepFile } from '../directory.ts'
import { TRIAL_RECORD_FORMAT, type TrialRecord } from '../record.ts'
import { SWEEPS_VERSION } from '../run-trial.ts'
import type { SweepSpec } from '../spec.ts'
import { initSweep } from '../sweep.ts'
import type { Trial } from '../trial.ts'
import { checkQueueConnection, parseQueueUrl, queueClient, type QueueUrl } from './connection.ts'
import {
  DEFAULT_QUEUE_NAME,
  QUEUE_PREFIX,
  TRIAL_JOB_FORMAT,
  sweepId,
  type QueuedTrialRecord,
  type TrialJobData,
} from './jobs.ts'

/**
 * Options of {@link submitSweep}.
 *
 * @category Queue
 */
export interface SubmitSweepOptions {
  /** The queue's Redis URL, `redis://HOST:PORT/DB`. */
  readonly queue: string
  /** The sweep directory (on this machine): `sweep.json` and, as the collector fills it, `trials.jsonl`. */
  readonly out: string
  /** The trials' tensor backend (default `wasm`); every worker activates it. */
  readonly backend?: BackendName
  /** Extra attempts of a trial that fails (default 0), by BullMQ's `attempts`. */
  readonly retries?: number
  /** Start in a directory that holds another sweep (or other files); trials with the same ids are kept. */
  readonly force?: boolean
  /** The BullMQ queue name (default {@link DEFAULT_QUEUE_NAME}). */
  readonly queueName?: string
}

/**
 * What {@link submitSweep} did.
 *
 * @category Queue
 */
export interface SubmitResult {
  /** What `sweep.json` holds. */
  readonly file: SweepFile
  /** The sweep's id ({@link sweepId}). */
  readonly sweepId: string
  /** Trials already `done` in `trials.jsonl` (not queued). */
  readonly skipped: number
  /** Trials queued now. */
  readonly added: number
  /** Trials already in the queue (waiting, running or finished: queued once, by id). */
  readonly queued: number
  /** Trials whose job had failed, queued again (BullMQ `retry`). */
  readonly retried: number
}

/** The sweeps queue on its own connection, and how to close both. */
export function openQueue(
  url: QueueUrl,
  queueName: string | undefined,
  role: string,
): { queue: Queue<TrialJobData, QueuedTrialRecord>; close(): Promise<void> } {
  const client = queueClient(url, `attnlab-${role}`)
  const queue = new Queue<TrialJobData, QueuedTrialRecord>(queueName ?? DEFAULT_QUEUE_NAME, {
    connection: client,
    prefix: QUEUE_PREFIX,
  })
  return {
    queue,
    close: async () => {
      await queue.close()
      client.disconnect()
    },
  }
}

/** One job's data and options. */
function trialJob(file: SweepFile, id: string, trial: Trial, retries: number) {
  return {
    name: file.spec.name,
    data: {
      format: TRIAL_JOB_FORMAT,
      sweep: file.spec.name,
      sweepId: id,
      trial,
      backend: file.backend,
      attnlabVersion: SWEEPS_VERSION,
    } satisfies TrialJobData,
    // Finished jobs stay in Redis: a resubmission finds them by id, the collector reads them.
    opts: { jobId: trial.id, attempts: retries + 1, removeOnComplete: false, removeOnFail: false },
  }
}

/**
 * Submits a sweep to the queue: checks that Redis answers (before writing anything), writes
 * `DIR/sweep.json` as `runSweep` does (a directory holding the same spec continues it; another
 * spec needs `force`), then adds one job per trial that `trials.jsonl` does not hold as `done`.
 * The job id is the trial id, and BullMQ adds a job id only once: submitting the same sweep
 * again (or a bigger one that contains its trials) queues nothing twice; a trial whose job
 * failed is queued again. Returns at once; {@link collectSweep} gathers the records.
 *
 * @param spec - a validated spec ({@link parseSweepSpec})
 * @param options - queue URL, directory, backend, retries, force
 * @returns what was queued
 * @throws {@link QueueUrlError}, {@link QueueConnectionError} (nothing written);
 *   {@link SweepDirectoryError} for a directory that holds something else; `ConfigError` for
 *   `retries` out of range
 * @example
 * ```ts
 * const submitted = await submitSweep(spec, { queue: 'redis://127.0.0.1:6379/0', out: 'runs/genlen', backend: 'cpu' })
 * const collected = await collectSweep('runs/genlen', { queue: 'redis://127.0.0.1:6379/0' })
 * ```
 * @category Queue
 */
export async function submitSweep(spec: SweepSpec, options: SubmitSweepOptions): Promise<SubmitResult> {
  const url = parseQueueUrl(options.queue)
  const retries = checkRange('retries', options.retries ?? 0, { integer: true, min: 0, max: 100 })
  await checkQueueConnection(url)
  const file = await initSweep(spec, {
    out: options.out,
    ...(options.backend === undefined ? {} : { backend: options.backend }),
    resume: true,
    force: options.force === true,
  })
  const id = sweepId(spec)
  const done = new Set((await readTrials(options.out)).filter((r) => r.status === 'done').map((r) => r.id))
  const { queue, close } = openQueue(url, options.queueName, 'submit')
  let queued = 0
  let retried = 0
  try {
    const toAdd: ReturnType<typeof trialJob>[] = []
    for (const trial of file.trials) {
      if (done.has(trial.id)) continue
      const job = await queue.getJob(trial.id)
      if (job === undefined) toAdd.push(trialJob(file, id, trial, retries))
      else if ((await job.getState()) === 'failed') {
        await job.retry('failed')
        retried++
      } else queued++
    }
    if (toAdd.length > 0) await queue.addBulk(toAdd)
    return { file, sweepId: id, skipped: done.size, added: toAdd.length, queued, retried }
  } finally {
    await close()
  }
}

/**
 * What {@link collectSweep} reports: a record appended to `trials.jsonl`.
 *
 * @category Queue
 */
export type CollectProgress = { readonly kind: 'record'; readonly record: QueuedTrialRecord }

/**
 * Options of {@link collectSweep}.
 *
 * @category Queue
 */
export interface CollectSweepOptions {
  /** The queue's Redis URL. */
  readonly queue: string
  /** Wait until every trial has a record (default true); false: collect what is finished now and return. */
  readonly wait?: boolean
  /** Seconds between two looks at the queue while waiting (default 1). */
  readonly pollSeconds?: number
  /**
   * Queue again, with this many retries, the trials whose job is not in Redis and that have no
   * record (a Redis restarted without persistence loses its jobs); default: leave them missing.
   */
  readonly requeueMissing?: { readonly retries: number }
  /** Stops waiting (the jobs stay queued; collect again later). */
  readonly signal?: AbortSignal
  /** Called with each record appended. */
  readonly onProgress?: (event: CollectProgress) => void
  /** The BullMQ queue name (default {@link DEFAULT_QUEUE_NAME}). */
  readonly queueName?: string
}

/**
 * What {@link collectSweep} returns: the sweep's trials by where they are.
 *
 * @category Queue
 */
export interface CollectResult {
  /** Records appended to `trials.jsonl` by this call. */
  readonly appended: number
  /** Trials with a `done` / `failed` record in `trials.jsonl` now. */
  readonly done: number
  readonly failed: number
  /** Trials still waiting or running (or not in the queue: `missing`). */
  readonly pending: number
  readonly missing: number
  /** Whether `signal` stopped the wait. */
  readonly stopped: boolean
}

/** The record of a job that failed: the worker's last failed attempt, or one made from BullMQ's reason. */
function failedRecord(job: Job<TrialJobData, QueuedTrialRecord>): QueuedTrialRecord {
  const failure = job.data.failure
  if (failure !== undefined && job.failedReason === `[${failure.error?.code}] ${failure.error?.message}`) {
    return failure
  }
  // Failed without a record: stalled more often than allowed (its workers died), or not a trial.
  const finished = new Date(job.finishedOn ?? Date.now()).toISOString()
  const trial = job.data.trial
  return {
    format: TRIAL_RECORD_FORMAT,
    sweep: job.data.sweep,
    id: trial.id,
    index: trial.index,
    experiment: trial.experiment,
    params: trial.params,
    seed: trial.seed,
    settings: trial.settings,
    status: 'failed',
    attempts: job.attemptsStarted,
    error: { code: 'WORKER_EXIT', name: 'WorkerExit', message: job.failedReason },
    attnlabVersion: job.data.attnlabVersion,
    backend: job.data.backend,
    host: job.processedBy ?? '',
    startedAt: new Date(job.processedOn ?? job.timestamp).toISOString(),
    finishedAt: finished,
    durationSeconds: 0,
    metrics: {},
    runDirectory: `trials/${trial.id}`,
  }
}

/** Whether `trials.jsonl` already holds this outcome (a `done` record, or this very failure). */
function recorded(previous: TrialRecord | undefined, record: TrialRecord): boolean {
  if (previous === undefined) return false
  if (previous.status === 'done') return true
  return record.status === 'failed' && previous.finishedAt === record.finishedAt
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms)
    function done(): void {
      clearTimeout(timer)
      signal?.removeEventListener('abort', done)
      resolve()
    }
    signal?.addEventListener('abort', done, { once: true })
  })
}

/**
 * Collects a submitted sweep's records from the queue: for every trial of `DIR/sweep.json`
 * without a final record in `trials.jsonl`, reads its job; a completed job's return value (the
 * worker's record) and a failed job's record (its typed error and attempt count) are appended
 * to `trials.jsonl` with {@link appendTrialRecord}, each once: a trial already recorded `done`,
 * or with this same failure, is not appended again, so any number of collects (and a submit's
 * own) give one line per outcome. The records keep this sweep's name and index (a trial queued
 * by another sweep with the same settings is the same trial). With `wait` (default) it looks
 * again every `pollSeconds` until every trial has a record, or `signal` aborts.
 *
 * @param dir - the sweep directory `submitSweep` wrote
 * @param options - queue URL, wait, poll interval, signal, progress
 * @returns the counts
 * @throws {@link QueueUrlError}, {@link QueueConnectionError}; {@link SweepDirectoryError} when
 *   `dir` holds no sweep
 * @category Queue
 */
export async function collectSweep(dir: string, options: CollectSweepOptions): Promise<CollectResult> {
  const url = parseQueueUrl(options.queue)
  const pollMs = checkRange('pollSeconds', options.pollSeconds ?? 1, { min: 0.01, max: 3600 }) * 1000
  const file = await readSweepFile(dir)
  await checkQueueConnection(url)
  const id = sweepId(file.spec)
  const { queue, close } = openQueue(url, options.queueName, 'collect')
  const progress = options.onProgress ?? ((): void => {})
  let appended = 0
  try {
    for (;;) {
      const previous = new Map((await readTrials(dir)).map((r) => [r.id, r]))
      let pending = 0
      let missing = 0
      for (const trial of file.trials) {
        const before = previous.get(trial.id)
        if (before?.status === 'done') continue
        // One round trip per unfinished trial; the job itself only once it has finished.
        const state = await queue.getJobState(trial.id)
        const job = state === 'completed' || state === 'failed' ? await queue.getJob(trial.id) : undefined
        if (state === 'unknown' || ((state === 'completed' || state === 'failed') && job === undefined)) {
          if (before !== undefined) continue
          missing++
          if (options.requeueMissing !== undefined) {
            const { name, data, opts } = trialJob(file, id, trial, options.requeueMissing.retries)
            await queue.add(name, data, opts)
          }
          continue
        }
        if (job === undefined) {
          pending++
          continue
        }
        const record: QueuedTrialRecord = state === 'completed' ? job.returnvalue : failedRecord(job)
        if (recorded(before, record)) continue
        const own: QueuedTrialRecord = { ...record, sweep: file.spec.name, index: trial.index }
        await appendTrialRecord(dir, own)
        appended++
        progress({ kind: 'record', record: own })
      }
      const stopped = options.signal?.aborted === true
      if (pending + missing === 0 || options.wait === false || stopped) {
        const records = await readTrials(dir)
        const ids = new Set(file.trials.map((t) => t.id))
        const mine = records.filter((r) => ids.has(r.id))
        return {
          appended,
          done: mine.filter((r) => r.status === 'done').length,
          failed: mine.filter((r) => r.status === 'failed').length,
          pending,
          missing,
          stopped: stopped && pending + missing > 0,
        }
      }
      await sleep(pollMs, options.signal)
    }
  } finally {
    await close()
  }
}
