/**
 * Running a sweep locally (Node): its trials in worker processes, records appended by this
 * process to `trials.jsonl`, resume, retries, and a clean stop.
 *
 * @module
 */
import { fork, type ChildProcess } from 'node:child_process'
import { existsSync } from 'node:fs'
import { createRequire } from 'node:module'
import { availableParallelism, hostname } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { checkRange, type BackendName, type UseBackendOptions } from '@attnlab/core'
import {
  appendTrialRecord,
  lockSweepDirectory,
  prepareSweepDirectory,
  type SweepLock,
  readTrials,
  SWEEP_FILE_FORMAT,
  type SweepFile,
} from './directory.ts'
import { SweepWorkersError } from './errors.ts'
import type { TrialError, TrialRecord } from './record.ts'
import { SWEEPS_VERSION, type TrialProgress } from './run-trial.ts'
import type { SweepSpec } from './spec.ts'
import { expandTrials, type Trial } from './trial.ts'

/**
 * What {@link runSweep} reports while it runs (for a progress bar or a log).
 *
 * - `start`: the trials to run now (`total` in the sweep, `skipped` already finished);
 * - `trial-start`: a worker started a trial (`attempt` 1, 2, ... with retries);
 * - `trial-progress`: a step or an evaluation of a running trial;
 * - `retry`: a trial failed and is queued again;
 * - `trial-end`: a trial ended (`done`, `failed` after its last attempt, or `interrupted`).
 *
 * @category Sweeps
 */
export type SweepProgress =
  | { readonly kind: 'start'; readonly total: number; readonly skipped: number; readonly toRun: number }
  | { readonly kind: 'trial-start'; readonly trial: Trial; readonly attempt: number; readonly worker: number }
  | { readonly kind: 'trial-progress'; readonly trial: Trial; readonly event: TrialProgress }
  | { readonly kind: 'retry'; readonly trial: Trial; readonly attempt: number; readonly error: TrialError }
  | { readonly kind: 'trial-end'; readonly record: TrialRecord }

/**
 * Options of {@link runSweep}.
 *
 * @category Sweeps
 */
export interface RunSweepOptions {
  /** The sweep directory. */
  readonly out: string
  /** Worker processes (default: the machine's cores, `os.availableParallelism()`; at most the trials to run). */
  readonly workers?: number
  /** Continue the sweep `out` holds: finished trials are skipped, interrupted ones continue from their state. */
  readonly resume?: boolean
  /** Start in a directory that holds another sweep (or other files); trials with the same ids are kept. */
  readonly force?: boolean
  /** Extra attempts of a failed trial (default 0). */
  readonly retries?: number
  /** The tensor backend of the workers (default `wasm`), activated with `useBackend`. */
  readonly backend?: BackendName
  /** Options of `useBackend` in each worker (kernels, threads; default: one native thread). */
  readonly backendOptions?: UseBackendOptions
  /** Stops the sweep: running trials stop at their next step (their state kept), no new one starts. */
  readonly signal?: AbortSignal
  /** Called with each {@link SweepProgress} event. */
  readonly onProgress?: (event: SweepProgress) => void
}

/**
 * What {@link runSweep} returns.
 *
 * @category Sweeps
 */
export interface SweepResult {
  /** The sweep directory's records after the run ({@link readTrials}), one per finished trial id. */
  readonly records: readonly TrialRecord[]
  /** Trials of this run by outcome (skipped: finished before it started). */
  readonly done: number
  readonly failed: number
  readonly interrupted: number
  readonly skipped: number
  /** Whether the signal stopped the sweep before every trial ended. */
  readonly stopped: boolean
  /** Wall-clock seconds. */
  readonly wallSeconds: number
}

/**
 * Expands a spec into its trials and writes `DIR/sweep.json` (see {@link SweepFile}), checking
 * the directory first: a missing or empty one starts fresh; one holding the same spec needs
 * `resume`; another spec (or other files) needs `force`.
 *
 * @param spec - a validated spec
 * @param options - the directory, backend, resume, force
 * @returns what `sweep.json` now holds
 * @throws {@link SweepDirectoryError} for a directory that holds something else
 * @category Sweeps
 */
export async function initSweep(
  spec: SweepSpec,
  options: Pick<RunSweepOptions, 'out' | 'backend' | 'resume' | 'force'>,
): Promise<SweepFile> {
  const file: SweepFile = {
    format: SWEEP_FILE_FORMAT,
    spec,
    backend: options.backend ?? 'wasm',
    created: new Date().toISOString(),
    trials: await expandTrials(spec),
  }
  await prepareSweepDirectory(options.out, file, { resume: options.resume === true, force: options.force === true })
  return file
}

/** How to start the worker file: the TypeScript source with tsx (in the workspace), else the build. */
function workerEntry(): { path: string; execArgv: string[] } {
  const source = import.meta.url.endsWith('.ts')
  const path = fileURLToPath(new URL(source ? './worker.ts' : './worker.js', import.meta.url))
  if (!source) return { path, execArgv: [] }
  const tsx = createRequire(import.meta.url).resolve('tsx')
  return { path, execArgv: ['--conditions=@attnlab/source', '--import', tsx] }
}

/** A worker process's message. */
type WorkerMessage =
  | { readonly type: 'ready' }
  | { readonly type: 'progress'; readonly id: string; readonly event: TrialProgress }
  | { readonly type: 'record'; readonly record: TrialRecord }
  | { readonly type: 'init-failed' | 'crashed'; readonly error: TrialError }

/** One queued run of a trial. */
interface Job {
  readonly trial: Trial
  readonly attempt: number
}

/**
 * Runs a sweep's trials in worker processes (`node:child_process` `fork` of this package's
 * worker file; each runs one trial at a time in-process with `runTrial`) and appends each
 * trial's record to `DIR/trials.jsonl` (this process is its only writer; one complete line per
 * write). Writes `DIR/sweep.json` first ({@link initSweep}). A trial that fails is recorded as
 * `failed` with its typed error and attempt count after `1 + retries` attempts, and the sweep
 * goes on; a worker that dies fails its trial (`WORKER_EXIT`) and is replaced. With `resume`,
 * trials with a `done` record are skipped and the others run (an interrupted one continues from
 * its run directory's state). When `signal` aborts, every running trial stops at its next step
 * (its state kept, no record appended), no new trial starts, and the result has `stopped: true`.
 * One runner per directory at a time: `DIR/sweep.lock` names the process that holds it and its
 * workers (a lock left by a process that died on this machine is taken over once the workers it
 * names have exited: they stop their trials at their next step).
 *
 * Trials are handed out in index order; the records and the trial directories do not depend on
 * the number of workers (same seeds, same numbers on cpu).
 *
 * @param spec - a validated spec ({@link parseSweepSpec})
 * @param options - directory, workers, resume, force, retries, backend, signal, progress
 * @returns the counts and the directory's records
 * @throws {@link SweepDirectoryError} for a directory that holds something else, or that another
 *   runner is running (before any work)
 * @throws `ConfigError` for `workers` or `retries` out of range; {@link SweepWorkersError}
 *   (`BACKEND_UNAVAILABLE`) when the workers cannot start the backend
 * @example
 * ```ts
 * const spec = parseSweepSpec(await readFile('sweep.yaml', 'utf8'), 'sweep.yaml')
 * const result = await runSweep(spec, { out: 'runs/sweep', workers: 2, backend: 'cpu' })
 * console.log(result.done, result.failed)
 * ```
 * @category Sweeps
 */
export async function runSweep(spec: SweepSpec, options: RunSweepOptions): Promise<SweepResult> {
  const started = performance.now()
  const retries = checkRange('retries', options.retries ?? 0, { integer: true, min: 0, max: 100 })
  const requested = checkRange('workers', options.workers ?? availableParallelism(), { integer: true, min: 1 })
  // One local runner per sweep directory: a directory that already holds a sweep is locked before
  // its sweep.json is checked and rewritten; a new one right after it is written.
  const existing = existsSync(join(options.out, 'sweep.json'))
  let lock = existing ? await lockSweepDirectory(options.out) : null
  try {
    const file = await initSweep(spec, options)
    lock ??= await lockSweepDirectory(options.out)
    return await runTrials(spec, file, options, { retries, requested, started, lock })
  } finally {
    await lock?.release()
  }
}

/** The body of {@link runSweep} once `sweep.json` is written and the directory locked. */
async function runTrials(
  spec: SweepSpec,
  file: SweepFile,
  options: RunSweepOptions,
  settings: {
    readonly retries: number
    readonly requested: number
    readonly started: number
    readonly lock: SweepLock
  },
): Promise<SweepResult> {
  const { retries, requested, started, lock } = settings
  const out = options.out
  const progress = options.onProgress ?? ((): void => {})
  const previous = new Map((await readTrials(out)).map((r) => [r.id, r]))
  const queue: Job[] = []
  let skipped = 0
  for (const trial of file.trials) {
    const before = previous.get(trial.id)
    if (before?.status === 'done') skipped++
    else queue.push({ trial, attempt: (before?.attempts ?? 0) + 1 })
  }
  progress({ kind: 'start', total: file.trials.length, skipped, toRun: queue.length })
  const counts = { done: 0, failed: 0, interrupted: 0 }
  const signal = options.signal
  // One writer of trials.jsonl: appends are chained.
  let writes: Promise<void> = Promise.resolve()
  const finish = (record: TrialRecord): void => {
    counts[record.status]++
    if (record.status !== 'interrupted') writes = writes.then(() => appendTrialRecord(out, record))
    progress({ kind: 'trial-end', record })
  }
  // A trial that failed its attempt: queued again, or recorded.
  const failedAttempt = (job: Job, record: TrialRecord): void => {
    if (job.attempt <= retries + (previous.get(job.trial.id)?.attempts ?? 0) && signal?.aborted !== true) {
      queue.unshift({ trial: job.trial, attempt: job.attempt + 1 })
      progress({ kind: 'retry', trial: job.trial, attempt: job.attempt + 1, error: record.error as TrialError })
    } else finish(record)
  }
  const entry = workerEntry()
  const workerCount = Math.min(requested, queue.length)
  const children = new Set<ChildProcess>()
  let startFailure: TrialError | null = null
  const stopAll = (): void => {
    for (const child of children) if (child.connected) child.send({ type: 'stop' })
  }
  signal?.addEventListener('abort', stopAll, { once: true })

  const runWorker = (slot: number): Promise<void> =>
    new Promise<void>((resolve) => {
      let job: Job | null = null
      let ready = false
      const child = fork(entry.path, [], { execArgv: entry.execArgv, stdio: ['ignore', 'ignore', 'inherit', 'ipc'] })
      children.add(child)
      const next = (): void => {
        job = signal?.aborted === true || startFailure !== null ? null : (queue.shift() ?? null)
        if (job === null) {
          if (child.connected) child.send({ type: 'stop' })
          return
        }
        progress({ kind: 'trial-start', trial: job.trial, attempt: job.attempt, worker: slot })
        child.send({ type: 'run', sweepDir: out, trial: job.trial, sweep: spec.name, attempt: job.attempt })
      }
      child.on('message', (message: WorkerMessage) => {
        switch (message.type) {
          case 'ready':
            ready = true
            next()
            break
          case 'progress':
            if (job !== null && job.trial.id === message.id) {
              progress({ kind: 'trial-progress', trial: job.trial, event: message.event })
            }
            break
          case 'record': {
            const current = job
            job = null
            if (current !== null) {
              if (message.record.status === 'failed') failedAttempt(current, message.record)
              else finish(message.record)
            }
            next()
            break
          }
          case 'init-failed':
            startFailure ??= message.error
            break
          case 'crashed':
            break
        }
      })
      child.on('exit', (code, exitSignal) => {
        children.delete(child)
        if (child.pid !== undefined) void lock.removeWorker(child.pid).catch(() => {})
        const current = job
        job = null
        if (!ready && signal?.aborted !== true) {
          // It died before it could run anything (a module that fails to load, out of memory): no worker would
          // do better, so the sweep stops with the error instead of ending with its trials silently not run.
          startFailure ??= {
            code: 'WORKER_EXIT',
            name: 'WorkerExit',
            message:
              `a worker process exited (${exitSignal ?? `code ${code}`}) before it was ready ` +
              '(its error output is above)',
          }
        }
        if (current !== null) {
          // The worker died with a trial: fail this attempt, and go on in a new worker.
          const now = new Date().toISOString()
          failedAttempt(current, {
            ...crashRecord(current, spec.name, file.backend, now),
            error: {
              code: 'WORKER_EXIT',
              name: 'WorkerExit',
              message: `the worker process exited (${exitSignal ?? `code ${code}`}) while running the trial`,
            },
          })
          if (signal?.aborted !== true && queue.length > 0) {
            void runWorker(slot).then(resolve)
            return
          }
        }
        resolve()
      })
      // The lock names the worker before it can start a trial: a runner that takes over this one's lock after a
      // SIGKILL waits for it (it stops its trial at its next step) instead of running the same trial beside it.
      const init = { type: 'init', backend: file.backend, backendOptions: options.backendOptions ?? {} }
      const registered = child.pid === undefined ? Promise.resolve() : lock.addWorker(child.pid)
      registered.then(
        () => {
          if (child.connected) child.send(init)
        },
        () => child.kill('SIGKILL'),
      )
    })

  try {
    await Promise.all(Array.from({ length: workerCount }, (_, slot) => runWorker(slot)))
  } finally {
    signal?.removeEventListener('abort', stopAll)
    for (const child of children) child.kill('SIGKILL')
  }
  await writes
  if (startFailure !== null) {
    const failure: TrialError = startFailure
    throw new SweepWorkersError(file.backend, `the sweep's workers could not start: ${failure.message}`)
  }
  return {
    records: await readTrials(out),
    ...counts,
    skipped,
    stopped: signal?.aborted === true && counts.done + counts.failed + skipped < file.trials.length,
    wallSeconds: (performance.now() - started) / 1000,
  }
}

/** The record of an attempt whose worker died (the error is filled in by the caller). */
function crashRecord(job: Job, sweep: string, backend: string, now: string): TrialRecord {
  return {
    format: 'attnlab-sweep-record/1',
    sweep,
    id: job.trial.id,
    index: job.trial.index,
    experiment: job.trial.experiment,
    params: job.trial.params,
    seed: job.trial.seed,
    settings: job.trial.settings,
    status: 'failed',
    attempts: job.attempt,
    error: null,
    attnlabVersion: SWEEPS_VERSION,
    backend,
    host: hostname(),
    startedAt: now,
    finishedAt: now,
    durationSeconds: 0,
    metrics: {},
    runDirectory: `trials/${job.trial.id}`,
  }
}
