/**
 * `@attnlab/sweeps/node`: running a sweep's trials in Node.
 *
 * - {@link runTrial}: one trial in this process, into `DIR/trials/<id>/`, returning its record
 *   (what a queue worker or a SLURM array task calls);
 * - {@link runSweep}: every trial in N worker processes, records appended to `DIR/trials.jsonl`,
 *   resume, retries, a clean stop; {@link initSweep} writes `DIR/sweep.json` alone;
 * - {@link readTrials}, {@link readSweepFile}, {@link appendTrialRecord}: the sweep directory's files;
 * - {@link buildSweepReport} (main entry) turns the records into HTML and CSV.
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
