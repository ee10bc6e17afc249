/**
 * `@attnlab/sweeps/node`: running a sweep's trials in Node.
 *
 * - {@link runTrial}: one trial in this process, into `DIR/trials/<id>/`, returning its record
 *   (what a queue worker or a SLURM array task calls);
 * - {@link runSweep}: every trial in N worker processes, records appended to `DIR/trials.jsonl`,
 *   resume, retries, a clean stop; {@link initSweep} writes `DIR/sweep.json` alone;
 * - {@link readTrials}, {@link readSweepFile}, {@link appendTrialRecord}: the sweep directory's files;
 * - {@link buildSweepReport} (main entry) turns the records into HTML and CSV;
 * - the queue (BullMQ on Redis): {@link submitSweep} queues a sweep's trials, {@link startQueueWorker}
 *   runs them on any number of machines, {@link collectSweep} appends their records to
 *   `trials.jsonl`, {@link queueStatus} counts them per sweep and per worker.
 *
 * @module
 */
export {
  SWEEP_FILE_FORMAT,
  appendTrialRecord,
  readSweepFile,
  readTrials,
  type SweepFile,
} from './directory.ts'
export {
  SWEEPS_VERSION,
  runTrial,
  trialDirectory,
  type RunTrialOptions,
  type TrialProgress,
} from './run-trial.ts'
export {
  initSweep,
  runSweep,
  type RunSweepOptions,
  type SweepProgress,
  type SweepResult,
} from './sweep.ts'
export { checkQueueConnection, parseQueueUrl, queueClient, type QueueUrl } from './queue/connection.ts'
export { QueueConnectionError, QueueUrlError, QueueVersionError } from './queue/errors.ts'
export {
  DEFAULT_QUEUE_NAME,
  DEFAULT_QUEUE_TIMINGS,
  QUEUE_PREFIX,
  TRIAL_JOB_FORMAT,
  sweepId,
  type QueueTimings,
  type QueuedTrialRecord,
  type TrialArtifacts,
  type TrialJobData,
} from './queue/jobs.ts'
export {
  queueStatus,
  type QueueCounts,
  type QueueStatus,
  type QueueStatusOptions,
  type SweepQueueStatus,
  type WorkerQueueStatus,
} from './queue/status.ts'
export {
  collectSweep,
  submitSweep,
  type CollectProgress,
  type CollectResult,
  type CollectSweepOptions,
  type SubmitResult,
  type SubmitSweepOptions,
} from './queue/submit.ts'
export {
  startQueueWorker,
  type QueueWorker,
  type QueueWorkerEvent,
  type QueueWorkerOptions,
} from './queue/worker.ts'
