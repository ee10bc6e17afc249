/**
 * What travels through the queue: one BullMQ queue for every sweep (`attnlab:sweeps`), one job
 * per trial whose id is the trial id (BullMQ adds a job id once: resubmitting is idempotent), the
 * job's data, its return value, and the lock settings sized for long trials.
 *
 * @module
 */
import { createHash } from 'node:crypto'
import type { BackendName } from '@attnlab/core'
import { canonicalJson, type JsonValue } from '../json.ts'
import type { TrialRecord } from '../record.ts'
import type { SweepSpec } from '../spec.ts'
import type { Trial } from '../trial.ts'

/**
 * The BullMQ key prefix and queue name: every sweep's jobs are in the queue `sweeps` under the
 * Redis keys `attnlab:sweeps:*`. One queue for all sweeps, so that a worker needs only the URL;
 * the sweep of a job is in its data, and its id is the trial id.
 *
 * @category Queue
 */
export const QUEUE_PREFIX = 'attnlab'
/** {@inheritDoc QUEUE_PREFIX} @category Queue */
export const DEFAULT_QUEUE_NAME = 'sweeps'

/**
 * The format tag of a queued trial's data.
 *
 * @category Queue
 */
export const TRIAL_JOB_FORMAT = 'attnlab-sweep-job/1'

/**
 * A queued trial (a BullMQ job's data; its job id is `trial.id`).
 *
 * @category Queue
 */
export interface TrialJobData {
  /** {@link TRIAL_JOB_FORMAT}. */
  readonly format: typeof TRIAL_JOB_FORMAT
  /** The sweep's name (for the record). */
  readonly sweep: string
  /** The sweep's id ({@link sweepId}): the name of the worker's directory for its trials. */
  readonly sweepId: string
  /** The trial, as in `sweep.json`. */
  readonly trial: Trial
  /** The tensor backend the trial runs on (the sweep's). */
  readonly backend: BackendName
  /** The `@attnlab/sweeps` version that submitted it: a worker of another version refuses it. */
  readonly attnlabVersion: string
  /** The record of the attempt that failed last (set by the worker before it fails the job). */
  readonly failure?: TrialRecord
}

/**
 * Where a queued trial's run directory is: the worker's host and the absolute path there
 * (under `--artifacts`, a shared file system or the worker's own disk).
 *
 * @category Queue
 */
export interface TrialArtifacts {
  readonly host: string
  readonly path: string
}

/**
 * What a queued trial returns (the job's return value, and the line `trials.jsonl` gets): its
 * record, plus where its run directory is.
 *
 * @category Queue
 */
export type QueuedTrialRecord = TrialRecord & { readonly artifacts?: TrialArtifacts }

/**
 * A sweep's id: its name and the first 8 hex digits of the SHA-256 of its spec's canonical JSON
 * (`genlen-seeds-1a2b3c4d`): two different specs under one name do not share a directory on the
 * workers.
 *
 * @param spec - the spec
 * @returns the id
 * @category Queue
 */
export function sweepId(spec: SweepSpec): string {
  const hash = createHash('sha256')
    .update(canonicalJson(spec as unknown as JsonValue))
    .digest('hex')
  return `${spec.name}-${hash.slice(0, 8)}`
}

/**
 * The lock and stall settings of the workers (BullMQ `lockDuration`, `stalledInterval`,
 * `maxStalledCount`), in milliseconds.
 *
 * A running trial's lock lasts `lockDuration` and the worker renews it every half of it, for as
 * long as the trial runs (a 30 s trial and a 3 h one alike): only a worker that stops renewing
 * (killed, its machine down, its event loop blocked for longer than `lockDuration`) loses it.
 * Every `stalledInterval` the workers look for active jobs whose lock has expired and put them
 * back in the queue (another worker then runs the trial: it continues from the trial's state
 * when `--artifacts` is shared, or starts it again); after `maxStalledCount` such losses the
 * trial fails. So a SIGKILLed worker's trial runs again after `lockDuration` to
 * `lockDuration + 2 * stalledInterval`.
 *
 * @category Queue
 */
export interface QueueTimings {
  /** Default 60 000: a tfjs step may block the event loop for up to a minute. */
  readonly lockDuration: number
  /** Default 30 000. */
  readonly stalledInterval: number
  /** Default 2. */
  readonly maxStalledCount: number
}

/** {@inheritDoc QueueTimings} @category Queue */
export const DEFAULT_QUEUE_TIMINGS: QueueTimings = Object.freeze({
  lockDuration: 60_000,
  stalledInterval: 30_000,
  maxStalledCount: 2,
})
