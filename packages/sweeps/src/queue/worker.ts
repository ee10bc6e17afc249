/**
 * A queue worker (Node): a BullMQ `Worker` on the sweeps queue that runs each queued trial with
 * `runTrial` into its own artifacts directory and returns the trial's record as the job's
 * return value. Any number of them, on any number of machines, share one queue.
 *
 * @module
 */
import { hostname } from 'node:os'
import { join, resolve } from 'node:path'
import { DelayedError, UnrecoverableError, WaitingError, Worker, type Job } from 'bullmq'
import { checkRange, useBackend, type BackendName, type UseBackendOptions } from '@attnlab/core'
import { TRIAL_RECORD_FORMAT, trialError, type TrialError } from '../record.ts'
import { SWEEPS_VERSION, runTrial, trialDirectory } from '../run-trial.ts'
import { checkQueueConnection, parseQueueUrl, queueClient } from './connection.ts'
import { QueueVersionError } from './errors.ts'
import {
  DEFAULT_QUEUE_NAME,
  DEFAULT_QUEUE_TIMINGS,
  QUEUE_PREFIX,
  TRIAL_JOB_FORMAT,
  type QueueTimings,
  type QueuedTrialRecord,
  type TrialJobData,
} from './jobs.ts'

/**
 * What a {@link QueueWorker} reports (for a log):
 *
 * - `trial-start`: it took a trial (`attempt` counts every start, a stalled run's included);
 * - `trial-end`: the trial ended `done`, or `failed` this attempt (BullMQ retries it if the sweep
 *   allows more attempts);
 * - `refused`: a trial submitted by another attnlab version, failed without running;
 * - `requeued`: a trial stopped by {@link QueueWorker.close} went back to the queue, its state kept;
 * - `connection-lost` / `connection-restored`: Redis went away (a restart) and came back.
 *
 * @category Queue
 */
export type QueueWorkerEvent =
  | {
      readonly kind: 'trial-start'
      readonly sweep: string
      readonly trial: TrialJobData['trial']
      readonly attempt: number
    }
  | { readonly kind: 'trial-end'; readonly record: QueuedTrialRecord }
  | { readonly kind: 'refused'; readonly sweep: string; readonly trialId: string; readonly error: TrialError }
  | { readonly kind: 'requeued'; readonly sweep: string; readonly trialId: string }
  | { readonly kind: 'connection-lost'; readonly message: string }
  | { readonly kind: 'connection-restored' }

/**
 * Options of {@link startQueueWorker}.
 *
 * @category Queue
 */
export interface QueueWorkerOptions {
  /** The queue's Redis URL, `redis://HOST:PORT/DB`. */
  readonly queue: string
  /**
   * Where trials write their run directories: `ARTIFACTS/<sweep id>/trials/<trial id>/` (default
   * `attnlab-artifacts`, relative to the working directory). On a file system every worker sees, a
   * trial whose worker died continues from its state on the next one.
   */
  readonly artifacts?: string
  /** Trials run at once in this process (default 1; one per core is the most that helps). */
  readonly concurrency?: number
  /** The worker's name in `sweep status` and in each job's `processedBy` (default `HOST:PID`). */
  readonly name?: string
  /** Options of `useBackend` (kernels, threads; default one native thread). */
  readonly backendOptions?: UseBackendOptions
  /** Lock and stall settings (see {@link QueueTimings}); the defaults suit trials of any length. */
  readonly timings?: Partial<QueueTimings>
  /** The BullMQ queue name (default {@link DEFAULT_QUEUE_NAME}). */
  readonly queueName?: string
  /** Called with each {@link QueueWorkerEvent}. */
  readonly onEvent?: (event: QueueWorkerEvent) => void
}

/**
 * A running queue worker.
 *
 * @category Queue
 */
export interface QueueWorker {
  /** Its name (each job's `processedBy`). */
  readonly name: string
  /** The absolute artifacts directory. */
  readonly artifacts: string
  /**
   * Stops the worker: takes no new trial, stops the running ones at their next step (their
   * state kept in their run directories), puts them back in the queue for any worker, and closes
   * its Redis connections. Resolves when all that is done.
   */
  close(): Promise<void>
}

/** The error a failed attempt throws to BullMQ (its message is the trial error's, with its code). */
class TrialAttemptError extends Error {
  constructor(error: TrialError) {
    super(`[${error.code}] ${error.message}`)
    this.name = error.name
  }
}

/** A failed record for a trial that did not run (refused by version, or its backend would not start). */
function notRunRecord(data: TrialJobData, error: TrialError, attempt: number, artifacts: string): QueuedTrialRecord {
  const now = new Date().toISOString()
  return {
    format: TRIAL_RECORD_FORMAT,
    sweep: data.sweep,
    id: data.trial.id,
    index: data.trial.index,
    experiment: data.trial.experiment,
    params: data.trial.params,
    seed: data.trial.seed,
    settings: data.trial.settings,
    status: 'failed',
    attempts: attempt,
    error,
    attnlabVersion: SWEEPS_VERSION,
    backend: data.backend,
    host: hostname(),
    startedAt: now,
    finishedAt: now,
    durationSeconds: 0,
    metrics: {},
    runDirectory: join('trials', data.trial.id),
    artifacts: { host: hostname(), path: trialDirectory(join(artifacts, data.sweepId), data.trial.id) },
  }
}

/**
 * Starts a queue worker: checks that the queue's Redis answers, then runs queued trials, one
 * at a time (or `concurrency` at once) until {@link QueueWorker.close}. For each job it
 *
 * 1. refuses a trial submitted by another `@attnlab/sweeps` version (the job fails at once, not
 *    retried, with a {@link QueueVersionError} in its record: no trial is run by a version that
 *    may not reproduce it);
 * 2. activates the trial's tensor backend with `useBackend` (once: the first trial's);
 * 3. runs `runTrial` into `ARTIFACTS/<sweep id>/` (a run left by a killed worker there is
 *    continued from its checkpoints; a finished one is not run again);
 * 4. returns the record, with `artifacts: { host, path }`, as the job's return value; a trial
 *    that fails throws its typed error to BullMQ, which retries it as many times as the sweep
 *    allows (the collector records the last attempt's error and the attempt count).
 *
 * A worker killed mid-trial (SIGKILL, a lost machine) stops renewing its lock: after the
 * lock expires the other workers' stall check puts the trial back in the queue (see
 * {@link QueueTimings}). When Redis restarts, the worker reconnects by itself and goes on.
 *
 * @param options - queue URL, artifacts directory, concurrency, name, backend options
 * @returns the running worker
 * @throws {@link QueueUrlError} for a malformed URL, {@link QueueConnectionError} when Redis
 *   cannot be reached (before anything runs); `ConfigError` for `concurrency` out of range
 * @example
 * ```ts
 * const worker = await startQueueWorker({ queue: 'redis://127.0.0.1:6379/0', artifacts: '/shared/attnlab' })
 * process.on('SIGTERM', () => void worker.close().then(() => process.exit(143)))
 * ```
 * @category Queue
 */
export async function startQueueWorker(options: QueueWorkerOptions): Promise<QueueWorker> {
  const url = parseQueueUrl(options.queue)
  const concurrency = checkRange('concurrency', options.concurrency ?? 1, { integer: true, min: 1, max: 64 })
  const timings = { ...DEFAULT_QUEUE_TIMINGS, ...options.timings }
  await checkQueueConnection(url)
  const name = options.name ?? `${hostname()}:${process.pid}`
  const artifacts = resolve(options.artifacts ?? 'attnlab-artifacts')
  const emit = options.onEvent ?? ((): void => {})
  const controller = new AbortController()
  let connected = true
  const lost = (error: Error): void => {
    if (!connected) return
    connected = false
    emit({ kind: 'connection-lost', message: error.message })
  }
  const connection = queueClient(url, `attnlab-worker:${name}`, lost)
  connection.on('ready', () => {
    if (connected) return
    connected = true
    emit({ kind: 'connection-restored' })
  })

  // The backend: the first trial's, activated once (a trial on another backend waits until the
  // running ones end, then the worker switches).
  let backend: BackendName | null = null
  let activating: Promise<void> = Promise.resolve()
  let running = 0
  const ensureBackend = async (wanted: BackendName): Promise<boolean> => {
    await activating
    if (backend === wanted) return true
    if (running > 1) return false
    const started = useBackend(wanted, options.backendOptions ?? {}).then(() => {
      backend = wanted
    })
    activating = started.catch(() => {})
    await started
    return true
  }

  const processor = async (job: Job<TrialJobData, QueuedTrialRecord>, token?: string): Promise<QueuedTrialRecord> => {
    const data = job.data
    if (data?.format !== TRIAL_JOB_FORMAT) {
      throw new UnrecoverableError(`job ${job.id} is not an attnlab trial (format ${String(data?.format)})`)
    }
    const attempt = job.attemptsStarted
    if (data.attnlabVersion !== SWEEPS_VERSION) {
      const error = trialError(new QueueVersionError(data.attnlabVersion, SWEEPS_VERSION, `worker ${name}`))
      await job.updateData({ ...data, failure: notRunRecord(data, error, attempt, artifacts) })
      emit({ kind: 'refused', sweep: data.sweep, trialId: data.trial.id, error })
      throw new UnrecoverableError(`[${error.code}] ${error.message}`)
    }
    running++
    try {
      let ready: boolean
      try {
        ready = await ensureBackend(data.backend)
      } catch (thrown) {
        // The backend would not start here (BACKEND_UNAVAILABLE): a failed attempt, with its error.
        const error = trialError(thrown)
        const failure = notRunRecord(data, error, attempt, artifacts)
        await job.updateData({ ...data, failure })
        emit({ kind: 'trial-end', record: failure })
        throw new TrialAttemptError(error)
      }
      if (!ready) {
        await job.moveToDelayed(Date.now() + 1000, token)
        throw new DelayedError()
      }
      emit({ kind: 'trial-start', sweep: data.sweep, trial: data.trial, attempt })
      const sweepDir = join(artifacts, data.sweepId)
      let lastProgress = 0
      const record = await runTrial(sweepDir, data.trial, {
        signal: controller.signal,
        sweep: data.sweep,
        attempt,
        onProgress: (event) => {
          const now = performance.now()
          if (now - lastProgress < 2000) return
          lastProgress = now
          job.updateProgress({ step: event.step, totalSteps: event.totalSteps }).catch(() => {})
        },
      })
      if (record.status === 'interrupted') {
        await job.moveToWait(token)
        emit({ kind: 'requeued', sweep: data.sweep, trialId: data.trial.id })
        throw new WaitingError()
      }
      const queued: QueuedTrialRecord = {
        ...record,
        artifacts: { host: hostname(), path: trialDirectory(sweepDir, data.trial.id) },
      }
      emit({ kind: 'trial-end', record: queued })
      if (record.status === 'failed') {
        await job.updateData({ ...data, failure: queued })
        throw new TrialAttemptError(record.error as TrialError)
      }
      return queued
    } finally {
      running--
    }
  }

  const worker = new Worker<TrialJobData, QueuedTrialRecord>(options.queueName ?? DEFAULT_QUEUE_NAME, processor, {
    connection,
    prefix: QUEUE_PREFIX,
    name,
    concurrency,
    lockDuration: timings.lockDuration,
    stalledInterval: timings.stalledInterval,
    maxStalledCount: timings.maxStalledCount,
    autorun: true,
  })
  worker.on('error', lost)
  await worker.waitUntilReady()
  let closing: Promise<void> | null = null
  return {
    name,
    artifacts,
    close: () => {
      closing ??= (async () => {
        controller.abort()
        await worker.close()
        connection.disconnect()
      })()
      return closing
    },
  }
}
