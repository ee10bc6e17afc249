/**
 * Running one trial in this process (Node): its run directory `DIR/trials/<id>/` written by the
 * experiment's own directory writer, resumed when it holds an interrupted run, and its record.
 *
 * @module
 */
import { readFileSync } from 'node:fs'
import { readFile, stat } from 'node:fs/promises'
import { hostname } from 'node:os'
import { join } from 'node:path'
import * as tf from '@tensorflow/tfjs-core'
import { AttnlabError, ConfigError } from '@attnlab/core'
import { makeDirectories, removeStaleTemporaries, writeFileAtomic } from '@attnlab/core/node'
import { loadCheckpoint, saveCheckpoint } from '@attnlab/transformer/node'
import {
  resolveEmergenceConfig,
  resolveEmergenceRecord,
  resolveTrainingConfig,
  runEmergence,
  runTraining,
  type EmergenceConfig,
  type EmergenceProgress,
  type TrainingConfig,
  type TrainingEvaluation,
} from '@attnlab/experiments'
import {
  checkResumable,
  emergenceDirectoryStore,
  readEmergenceRecord,
  writeEmergenceResult,
  loadInitialWeights,
  runSparseEvalDirectory,
} from '@attnlab/experiments/node'
import { SWEEP_EXPERIMENTS, type SweepExperiment } from './experiments.ts'
import type { JsonObject } from './json.ts'
import { TRIAL_RECORD_FORMAT, trialError, type TrialRecord } from './record.ts'
import type { Trial } from './trial.ts'

/**
 * The version of `@attnlab/sweeps` (its package.json, one level above `src/` and `dist/`), which
 * every trial record carries.
 *
 * @category Sweeps
 */
export const SWEEPS_VERSION: string = (
  JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }
).version

/**
 * What {@link runTrial} reports while a trial runs: one optimizer step (`loss` in nats), one
 * evaluation (`validationLoss` in nats, `stage` as the experiment words it: `stage 2/3`).
 *
 * @category Sweeps
 */
export type TrialProgress =
  | { readonly kind: 'step'; readonly step: number; readonly totalSteps: number; readonly loss: number }
  | {
      readonly kind: 'evaluation'
      readonly step: number
      readonly totalSteps: number
      readonly validationLoss: number
      readonly stage: string
    }

/**
 * Options of {@link runTrial}.
 *
 * @category Sweeps
 */
export interface RunTrialOptions {
  /** Stops the trial after its current step; its state stays in its directory (status `interrupted`). */
  readonly signal?: AbortSignal
  /** Called with each {@link TrialProgress} event. */
  readonly onProgress?: (event: TrialProgress) => void
  /** The sweep's name, for the record (default `''`). */
  readonly sweep?: string
  /** The attempt number to record (default 1): a runner that retries passes 2, 3, ... */
  readonly attempt?: number
}

/** What an experiment's runner returns: whether a stop signal ended it, and its summary. */
interface RunnerResult {
  readonly interrupted: boolean
  readonly summary: unknown
}

type Runner = (
  directory: string,
  settings: JsonObject,
  options: { signal?: AbortSignal; onProgress: (event: TrialProgress) => void },
) => Promise<RunnerResult>

async function exists(path: string): Promise<boolean> {
  try {
    await stat(path)
    return true
  } catch {
    return false
  }
}

/** The emergence experiment into its run directory; continues an interrupted run in place. */
const runEmergenceTrial: Runner = async (directory, settings, options) => {
  const resume = await exists(join(directory, 'config.json'))
  let resolved: ReturnType<typeof resolveEmergenceConfig>
  if (resume) {
    const record = await readEmergenceRecord(directory)
    await checkResumable(directory, record)
    resolved = resolveEmergenceRecord(record)
  } else {
    resolved = resolveEmergenceConfig(settings as unknown as EmergenceConfig)
  }
  const totalSteps = resolved.record.training.steps
  const onProgress = (event: EmergenceProgress): void => {
    if (event.kind === 'step') {
      options.onProgress({ kind: 'step', step: event.record.step, totalSteps, loss: event.record.loss })
    } else if (event.kind === 'evaluation') {
      options.onProgress({
        kind: 'evaluation',
        step: event.line.step,
        totalSteps,
        validationLoss: event.line.validationLoss,
        stage: event.stage,
      })
    }
  }
  const store = emergenceDirectoryStore(directory, {
    overwrite: true,
    prepare: async () => {
      await makeDirectories(directory)
    },
  })
  try {
    const result = await runEmergence(resolved, {
      ...(options.signal === undefined ? {} : { signal: options.signal }),
      onProgress,
      store,
      resume,
    })
    await writeEmergenceResult(directory, result)
    return { interrupted: result.summary.interrupted, summary: result.summary }
  } catch (error) {
    if (error instanceof AttnlabError && error.code === 'INTERRUPTED') return { interrupted: true, summary: null }
    throw error
  }
}

/**
 * The training experiment into its run directory: `checkpoint/` (an `attnlab train` checkpoint:
 * `attnlab train --resume DIR/trials/<id>/checkpoint` continues it) and `summary.json`; continues
 * from the checkpoint when there is one.
 */
const runTrainingTrial: Runner = async (directory, settings, options) => {
  const resolved = resolveTrainingConfig(settings as unknown as Partial<TrainingConfig>)
  const { config } = resolved
  const checkpointDir = join(directory, 'checkpoint')
  await makeDirectories(directory)
  await removeStaleTemporaries(directory, 'checkpoint')
  let resume: Parameters<typeof runTraining>[3]['resume']
  // The losses of the last FINAL_LOSS_STEPS steps of the whole run (earlier sessions' too, kept in the checkpoint),
  // so that a resumed trial's finalTrainLoss is the uninterrupted run's (the trainer's covers one session).
  let recentLosses: number[] = []
  if (await exists(checkpointDir)) {
    const checkpoint = await loadCheckpoint(checkpointDir)
    const extra = checkpoint.extra as { evaluations?: TrainingEvaluation[]; recentLosses?: unknown }
    const evaluations = extra.evaluations ?? []
    if (checkpoint.trainerState !== null) {
      resume = { state: checkpoint.trainerState, weights: checkpoint.weights, evaluations }
      const kept = extra.recentLosses
      if (Array.isArray(kept) && kept.every((loss) => typeof loss === 'number' && Number.isFinite(loss))) {
        recentLosses = (kept as number[]).slice(-FINAL_LOSS_STEPS)
      }
    }
  }
  // What an `attnlab train` checkpoint stores, so that the CLI can resume a trial's run.
  const stored = {
    command: 'train',
    preset: config.preset,
    task: resolved.task.describe(),
    train: resolved.settings,
    steps: config.steps,
    evalEvery: config.evalEvery,
    checkpointEvery: config.checkpointEvery,
  }
  const totalSteps = config.steps
  const lastEvaluation = resume?.evaluations[resume.evaluations.length - 1]
  if (resume !== undefined && resume.state.step >= totalSteps && lastEvaluation?.step === resume.state.step) {
    // Finished, then killed before its summary was written: the run's numbers are all in its checkpoint. (Training
    // "on" from its last step would evaluate that step again, with no training loss since the previous evaluation.)
    const { state } = resume
    const summary = {
      steps: state.step,
      stopped: false,
      finalTrainLoss: recentLosses.length > 0 ? recentLosses.reduce((a, b) => a + b, 0) / recentLosses.length : null,
      finalValidationLoss: lastEvaluation.validationLoss,
      tokensPerSecond: state.seconds > 0 ? state.tokens / state.seconds : 0,
      trainingSeconds: state.seconds,
      evaluations: resume.evaluations,
    }
    await writeFileAtomic(join(directory, 'summary.json'), `${JSON.stringify(summary, null, 2)}\n`)
    return { interrupted: false, summary }
  }
  const result = await runTraining(resolved.task, resolved.model, resolved.settings, {
    steps: config.steps,
    evalEvery: config.evalEvery,
    checkpointEvery: config.checkpointEvery,
    inductionProbe: config.probe === 'induction',
    ...(resume === undefined ? {} : { resume }),
    ...(options.signal === undefined ? {} : { signal: options.signal }),
    // A trial with initFrom (pre-pretraining) reads its source here (an emergence trial's store does).
    loadInitialWeights,
    save: (model, state, evaluations) =>
      saveCheckpoint(
        checkpointDir,
        model,
        state,
        { ...stored, evaluations: [...evaluations], recentLosses: [...recentLosses] },
        { overwrite: true },
      ),
    onStep: async (record) => {
      recentLosses = [...recentLosses, record.loss].slice(-FINAL_LOSS_STEPS)
      options.onProgress({ kind: 'step', step: record.step, totalSteps, loss: record.loss })
      // Lets a stop message be seen after every step (the training loop awaits only settled promises).
      await new Promise((resolve) => setImmediate(resolve))
    },
    onEval: (record) =>
      options.onProgress({
        kind: 'evaluation',
        step: record.step,
        totalSteps,
        validationLoss: record.validationLoss,
        stage: '',
      }),
  })
  const summary = {
    steps: result.steps,
    stopped: result.stopped,
    // The trainer's definition (the mean of the last 10 steps' losses, summed in order), over the whole run.
    finalTrainLoss:
      recentLosses.length > 0 ? recentLosses.reduce((a, b) => a + b, 0) / recentLosses.length : result.finalTrainLoss,
    finalValidationLoss: result.finalValidationLoss,
    tokensPerSecond: result.tokensPerSecond,
    trainingSeconds: result.seconds,
    evaluations: result.evaluations,
    ...(result.induction === null ? {} : { induction: result.induction }),
  }
  if (!result.stopped) await writeFileAtomic(join(directory, 'summary.json'), `${JSON.stringify(summary, null, 2)}\n`)
  return { interrupted: result.stopped, summary }
}

/** Steps whose mean loss is a training run's `finalTrainLoss` (`@attnlab/transformer`'s `train`: the last 10). */
const FINAL_LOSS_STEPS = 10

/**
 * The sparse evaluation into its run directory (`results.json`, `report.html`); not resumable within a trial: an
 * interrupted one runs again from its first row.
 */
const runSparseEvalTrial: Runner = async (directory, settings, options) => {
  try {
    const summary = await runSparseEvalDirectory(directory, settings, {
      ...(options.signal === undefined ? {} : { signal: options.signal }),
    })
    return { interrupted: false, summary }
  } catch (error) {
    if (error instanceof AttnlabError && error.code === 'INTERRUPTED') return { interrupted: true, summary: null }
    throw error
  }
}

const RUNNERS: Readonly<Record<string, Runner>> = {
  emergence: runEmergenceTrial,
  train: runTrainingTrial,
  'sparse-eval': runSparseEvalTrial,
}

/**
 * A trial's run directory: `DIR/trials/<id>`.
 *
 * @param sweepDir - the sweep directory
 * @param id - the trial's id
 * @returns the path
 * @category Sweeps
 */
export function trialDirectory(sweepDir: string, id: string): string {
  return join(sweepDir, 'trials', id)
}

/** A trial's finished record (`trials/<id>/record.json`), if it has one. */
export async function readTrialRecord(sweepDir: string, id: string): Promise<TrialRecord | null> {
  try {
    const record = JSON.parse(await readFile(join(trialDirectory(sweepDir, id), 'record.json'), 'utf8')) as TrialRecord
    return record.format === TRIAL_RECORD_FORMAT && record.id === id ? record : null
  } catch {
    return null
  }
}

/**
 * Runs one trial in this process and returns its record. The experiment writes its run
 * directory `sweepDir/trials/<id>/` with its own Node writer (emergence: `config.json`,
 * `metrics.jsonl`, `seeds/`, `summary.json`, `report.html`); a directory that holds an
 * interrupted run is continued from its checkpoints (exact on cpu). A `done` record is also
 * written to `trials/<id>/record.json` (atomically), and a trial that has one is not run again:
 * its record is returned as it is. Appending to `trials.jsonl` is the caller's (one writer).
 *
 * Never throws for the experiment's failures: a trial that throws gives a `failed` record with
 * the typed error; one stopped by `signal` gives `interrupted` (its state kept). Choose the tensor
 * backend first (`useBackend` of `@attnlab/core`); the record names it.
 *
 * @param sweepDir - the sweep directory (created if missing)
 * @param trial - one of `expandTrials(spec)` (or of `sweep.json`'s `trials`)
 * @param options - signal, progress callback, the sweep's name and the attempt number
 * @returns the record: `done` with the experiment's metrics, `failed` with its error, or `interrupted`
 * @throws `ConfigError` (`@attnlab/core`) for an experiment this package does not know
 * @example
 * ```ts
 * await useBackend('cpu')
 * const [trial] = await expandTrials(spec)
 * const record = await runTrial('runs/sweep', trial, { sweep: spec.name })
 * console.log(record.status, record.metrics.finalValidationLoss)
 * ```
 * @category Sweeps
 */
export async function runTrial(sweepDir: string, trial: Trial, options: RunTrialOptions = {}): Promise<TrialRecord> {
  const experiment = SWEEP_EXPERIMENTS[trial.experiment] as SweepExperiment | undefined
  const runner = RUNNERS[trial.experiment]
  if (experiment === undefined || runner === undefined) {
    throw new ConfigError('experiment', `'${trial.experiment}' is not one of ${Object.keys(RUNNERS).join(', ')}`, {
      experiment: trial.experiment,
    })
  }
  const finished = await readTrialRecord(sweepDir, trial.id)
  if (finished !== null && finished.status === 'done') return finished
  const runDirectory = join('trials', trial.id)
  const directory = trialDirectory(sweepDir, trial.id)
  const startedAt = new Date()
  const started = performance.now()
  let status: TrialRecord['status'] = 'done'
  let error: TrialRecord['error'] = null
  let metrics: TrialRecord['metrics'] = {}
  try {
    const result = await runner(directory, trial.settings, {
      ...(options.signal === undefined ? {} : { signal: options.signal }),
      onProgress: options.onProgress ?? ((): void => {}),
    })
    if (result.interrupted) status = 'interrupted'
    else metrics = experiment.metrics(result.summary)
  } catch (thrown) {
    status = 'failed'
    error = trialError(thrown)
  }
  const record: TrialRecord = {
    format: TRIAL_RECORD_FORMAT,
    sweep: options.sweep ?? '',
    id: trial.id,
    index: trial.index,
    experiment: trial.experiment,
    params: trial.params,
    seed: trial.seed,
    settings: trial.settings,
    status,
    attempts: options.attempt ?? 1,
    error,
    attnlabVersion: SWEEPS_VERSION,
    backend: tf.getBackend() ?? '',
    host: hostname(),
    startedAt: startedAt.toISOString(),
    finishedAt: new Date().toISOString(),
    durationSeconds: (performance.now() - started) / 1000,
    metrics,
    runDirectory,
  }
  if (status === 'done') await writeFileAtomic(join(directory, 'record.json'), `${JSON.stringify(record, null, 2)}\n`)
  return record
}
