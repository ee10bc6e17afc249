/**
 * The trial record: what one finished (or failed) trial leaves in `trials.jsonl`, one JSON line.
 *
 * @module
 */
import { AttnlabError } from '@attnlab/core'
import type { JsonObject } from './json.ts'

/**
 * The format tag of a {@link TrialRecord}.
 *
 * @category Sweeps
 */
export const TRIAL_RECORD_FORMAT = 'attnlab-sweep-record/1'

/**
 * How a trial ended: `done` (the experiment returned), `failed` (it threw on every attempt),
 * `interrupted` (a stop signal ended it at a step; its run directory holds the state to resume
 * from; never appended to `trials.jsonl`).
 *
 * @category Sweeps
 */
export type TrialStatus = 'done' | 'failed' | 'interrupted'

/**
 * A trial's error: the `code` of an `AttnlabError` (`INVALID_CONFIG`, `IO_ERROR`, ...),
 * `ERROR` for any other error, `WORKER_EXIT` when the worker process died; its class name and
 * message.
 *
 * @category Sweeps
 */
export interface TrialError {
  readonly code: string
  readonly name: string
  readonly message: string
}

/**
 * One trial's outcome: a line of `DIR/trials.jsonl` and what `runTrial` returns.
 *
 * @category Sweeps
 */
export interface TrialRecord {
  /** {@link TRIAL_RECORD_FORMAT}. */
  readonly format: typeof TRIAL_RECORD_FORMAT
  /** The sweep's name. */
  readonly sweep: string
  /** The trial's id (`trialId`). */
  readonly id: string
  /** Its position in the sweep's expansion order. */
  readonly index: number
  readonly experiment: string
  /** The swept values (grid and zip paths to values). */
  readonly params: JsonObject
  readonly seed: number
  /** The resolved settings it ran. */
  readonly settings: JsonObject
  readonly status: TrialStatus
  /** How many times it was started (1 + retries used), counting the attempts of earlier sessions. */
  readonly attempts: number
  /** The last attempt's error (null unless `failed`). */
  readonly error: TrialError | null
  /** The version of `@attnlab/sweeps` that ran it. */
  readonly attnlabVersion: string
  /** The tensor backend it ran on (`cpu`, `wasm`, ...). */
  readonly backend: string
  /** The host name of the machine that ran it. */
  readonly host: string
  /** ISO 8601 times of the last attempt's start and end. */
  readonly startedAt: string
  readonly finishedAt: string
  /** Seconds of the last attempt (wall clock). */
  readonly durationSeconds: number
  /** The experiment's summary metrics (empty unless `done`), e.g. `finalValidationLoss` (nats). */
  readonly metrics: { readonly [metric: string]: number | null }
  /** The trial's run directory, relative to the sweep directory: `trials/<id>`. */
  readonly runDirectory: string
}

/**
 * The {@link TrialError} of anything thrown: an `AttnlabError`'s code, `ERROR` otherwise.
 *
 * @param error - what was thrown
 * @returns its code, class name and message
 * @category Sweeps
 */
export function trialError(error: unknown): TrialError {
  if (error instanceof AttnlabError) return { code: error.code, name: error.name, message: error.message }
  if (error instanceof Error) return { code: 'ERROR', name: error.name, message: error.message }
  return { code: 'ERROR', name: 'Error', message: String(error) }
}
