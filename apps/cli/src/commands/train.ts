/**
 * `attnlab train`: train a `minimal`, `gpt` or `llama` model (`@attnlab/transformer`) on a task of
 * `@attnlab/markov`, write checkpoints (safetensors + config + optimizer/trainer state), resume
 * exactly, and report final train/validation loss and training tokens per second. The training
 * itself is `@attnlab/experiments`' `runTraining`; this parses the flags, checks `--out` /
 * `--resume`, calls it with a checkpoint writer and prints.
 */
import { basename, dirname, resolve } from 'node:path'
import type { Command } from 'commander'
import { InterruptedError } from '@attnlab/core'
import {
  TRAINING_DEFAULTS,
  runTraining,
  type EmergenceTransfer,
  type TrainingRunResult,
  type TrainingSettings,
} from '@attnlab/experiments'
import { createTask, type AnyTask, type MarkovTaskDescription } from '@attnlab/markov'
import type {
  EvalRecord,
  OptimizerOptions,
  ScheduleOptions,
  TransformerConfig,
  TrainerState,
} from '@attnlab/transformer'
import { removeStaleTemporaries } from '@attnlab/core/node'
import { loadCheckpoint, saveCheckpoint } from '@attnlab/transformer/node'
import { UsageError } from '../errors.ts'
import { checkWritable, pathState } from '../out-dir.ts'
import { onStopSignal, yieldToEventLoop } from '../signals.ts'
import { activateBackend, backendOption, intParser } from '../options.ts'
import {
  addModelFlags,
  addOptimizationFlags,
  addInitFromFlag,
  addTaskFlags,
  attentionBiasOf,
  batchOf,
  initFromOf,
  checkAttentionBiasFlags,
  checkOptimizationFlags,
  givenFlags,
  resumableText,
  runDefiningKeys,
  kebab,
  modelConfigOf,
  optimizerOf,
  scheduleOf,
  taskOf,
  type ModelFlags,
  type OptimizationFlags,
  type TaskFlags,
} from '../run-flags.ts'

/** Flags of `attnlab train` (commander's camelCase keys). */
interface TrainFlags extends TaskFlags, ModelFlags, OptimizationFlags {
  seed: number
  initFrom?: string
  out?: string
  resume?: string
  force?: boolean
  checkpointEvery: number
  backend?: string
  json?: boolean
}

/** What a checkpoint written by this command stores in `extra` (to resume with the same run). */
interface StoredRun {
  readonly command: 'train'
  readonly preset: string
  readonly task: MarkovTaskDescription
  readonly train: {
    batch: number
    lr: number
    optimizer: OptimizerOptions
    schedule: ScheduleOptions
    gradClip: number
    seed: number
    trainSize: number
    validationSize: number
    /** The attention bias (absent in checkpoints of runs without one, or older than it). */
    attentionBias?: TrainingSettings['attentionBias']
    /** `--init-from`'s path (absolute), when given. */
    initFrom?: string
  }
  /** With `--init-from`: the checkpoint read and the parameters copied / re-initialised. */
  readonly transfer?: EmergenceTransfer
  readonly evaluations: { step: number; trainLoss: number; validationLoss: number }[]
  /** The run's target steps, evaluation and checkpoint intervals (a resume without the flags keeps them). */
  readonly steps?: number
  readonly evalEvery?: number
  readonly checkpointEvery?: number
  /** The run-defining flags' values (commander keys), to accept a resume that repeats one unchanged. */
  readonly flags?: Readonly<Record<string, unknown>>
}

/**
 * The flags a resume may give (commander keys); every other flag of `train` defines the run and is
 * fixed when resuming (repeating one with its value is fine).
 */
const RESUMABLE_KEYS = ['resume', 'steps', 'out', 'force', 'evalEvery', 'checkpointEvery', 'backend', 'json'] as const

/** The values of the run-defining flags (what a resume compares given flags against). */
function runFlagValues(flags: TrainFlags, command: Command): Record<string, unknown> {
  const values: Record<string, unknown> = {}
  for (const key of runDefiningKeys(command, RESUMABLE_KEYS)) {
    const value = (flags as unknown as Record<string, unknown>)[key]
    if (value !== undefined) values[key] = value
  }
  return values
}

const sameValue = (a: unknown, b: unknown): boolean => JSON.stringify(a) === JSON.stringify(b)

function formatTokens(perSecond: number): string {
  return perSecond >= 1e6 ? `${(perSecond / 1e6).toFixed(2)}M` : `${(perSecond / 1e3).toFixed(1)}k`
}

/**
 * Checks that the checkpoint can go to `out` without destroying anything the user did not ask to
 * replace: a missing path or an empty directory is fine; a file, a checkpoint or any other
 * non-empty directory needs `--force` (the checkpoint then replaces it atomically).
 */
async function checkOut(out: string, force: boolean): Promise<void> {
  const state = await pathState(out)
  if (!force) {
    if (state.kind === 'file')
      throw new UsageError(
        `--out ${out} is a file; pick another path, or pass --force to replace it with the checkpoint directory`,
      )
    if (state.kind === 'directory' && state.entries.length > 0) {
      if (state.entries.includes('manifest.json')) {
        throw new UsageError(
          `--out ${out} holds a checkpoint; continue it with --resume ${out}, pick another --out, or replace it with ` +
            `--force`,
        )
      }
      throw new UsageError(
        `--out ${out} is not empty; pick another directory, or pass --force to replace it and everything in it`,
      )
    }
  }
  // The checkpoint is written next to `out` and renamed into place: its parent must be writable.
  await checkWritable(dirname(resolve(out)), '--out', out)
}

/** Runs `attnlab train` (exported for tests). */
export async function runTrain(flags: TrainFlags, command: Command): Promise<Record<string, unknown>> {
  // --resume DIR continues in place unless --out says otherwise.
  const out = flags.out ?? flags.resume
  if (out === undefined)
    throw new UsageError('--out DIR is required (the checkpoint directory; with --resume DIR it defaults to DIR)')
  let task: AnyTask
  let config: TransformerConfig
  let run: StoredRun
  let resumeState: TrainerState | undefined
  let weights: Map<string, { shape: number[]; data: Float32Array }> | undefined
  let initial: Awaited<ReturnType<typeof initFromOf>> = null
  if (flags.resume !== undefined) {
    const checkpoint = await loadCheckpoint(flags.resume)
    const stored = checkpoint.extra as Partial<StoredRun>
    if (
      stored.command !== 'train' ||
      stored.task === undefined ||
      stored.train === undefined ||
      checkpoint.trainerState === null
    ) {
      throw new UsageError(
        `${flags.resume} was not written by 'attnlab train' (no task and training settings to resume with)`,
      )
    }
    // A flag given with the value the run already has is no change (checkpoints that predate
    // the stored flag values accept none).
    const values = flags as unknown as Record<string, unknown>
    const changed = givenFlags(command, runDefiningKeys(command, RESUMABLE_KEYS)).filter(
      (key) => stored.flags === undefined || !sameValue(values[key], stored.flags[key]),
    )
    if (changed.length > 0) {
      const had = changed
        .filter((key) => stored.flags?.[key] !== undefined)
        .map((key) => `${kebab(key)} ${String(stored.flags?.[key])}`)
      const hadText = had.length > 0 ? `the run has ${had.join(', ')}; ` : ''
      throw new UsageError(
        `${changed.map(kebab).join(', ')} cannot change when resuming (${hadText}` +
          `its settings come from ${flags.resume}); ${resumableText(RESUMABLE_KEYS)}`,
      )
    }
    run = { ...(stored as StoredRun), evaluations: [...(stored.evaluations ?? [])] }
    task = createTask(run.task)
    config = checkpoint.config
    resumeState = checkpoint.trainerState
    weights = checkpoint.weights
    // --steps, --eval-every and --checkpoint-every not given: the run's own.
    const given = (key: string): boolean => command.getOptionValueSource(key) === 'cli'
    if (!given('steps')) {
      if (run.steps === undefined) {
        throw new UsageError(
          `--resume ${flags.resume}: this checkpoint does not record the run's --steps; ` +
            `give --steps N (above its step ${resumeState.step})`,
        )
      }
      flags.steps = run.steps
    }
    if (!given('evalEvery') && run.evalEvery !== undefined) flags.evalEvery = run.evalEvery
    if (!given('checkpointEvery') && run.checkpointEvery !== undefined) flags.checkpointEvery = run.checkpointEvery
    if (flags.steps < resumeState.step)
      throw new UsageError(`--steps ${flags.steps} is below the checkpoint's step ${resumeState.step}`)
    if (flags.steps === resumeState.step) {
      throw new UsageError(
        `--resume ${flags.resume}: the run already finished ` +
          `(its checkpoint is at step ${resumeState.step} of ${flags.steps}); ` +
          `give --steps N above ${resumeState.step} to train it further`,
      )
    }
    run = { ...run, steps: flags.steps, evalEvery: flags.evalEvery, checkpointEvery: flags.checkpointEvery }
  } else {
    task = taskOf(flags, command)
    config = modelConfigOf(flags, task, flags.seed)
    checkAttentionBiasFlags(flags, task, config)
    const bias = attentionBiasOf(flags)
    initial = await initFromOf(flags.initFrom, config)
    run = {
      command: 'train',
      preset: flags.preset,
      task: task.describe() as MarkovTaskDescription,
      train: {
        batch: batchOf(flags, task),
        lr: flags.lr,
        optimizer: optimizerOf(flags),
        schedule: scheduleOf(flags),
        gradClip: flags.gradClip,
        seed: flags.seed,
        trainSize: flags.trainSize,
        validationSize: flags.validationSize,
        ...(bias === null ? {} : { attentionBias: bias }),
        ...(initial === null ? {} : { initFrom: initial.path }),
      },
      ...(initial === null ? {} : { transfer: { source: initial.source, ...initial.plan } }),
      evaluations: [],
      steps: flags.steps,
      evalEvery: flags.evalEvery,
      checkpointEvery: flags.checkpointEvery,
      flags: runFlagValues(flags, command),
    }
  }
  // Continuing in place rewrites the run's own checkpoint; anywhere else must be free (or --force).
  const inPlace = flags.resume !== undefined && resolve(out) === resolve(flags.resume)
  if (inPlace) await checkWritable(dirname(resolve(out)), '--out', out)
  else await checkOut(out, flags.force === true)
  const backend = await activateBackend(flags.backend)
  // Temporaries of a checkpoint write that was killed (SIGKILL, power loss) in an earlier run.
  await removeStaleTemporaries(dirname(resolve(out)), basename(resolve(out)))
  const controller = new AbortController()
  const removeSignalListeners = onStopSignal(() => controller.abort())
  const started = performance.now()
  let result: TrainingRunResult
  try {
    result = await runTraining(task, config, run.train, {
      steps: flags.steps,
      evalEvery: flags.evalEvery,
      checkpointEvery: flags.checkpointEvery,
      ...(resumeState === undefined || weights === undefined
        ? {}
        : { resume: { state: resumeState, weights, evaluations: run.evaluations } }),
      // checkOut refused anything but a missing path, an empty directory or (in place) this run's
      // own checkpoint unless --force, which asked to replace whatever is there.
      save: (model, state, evaluations) =>
        saveCheckpoint(
          out,
          model,
          state,
          { ...run, evaluations: [...evaluations] },
          { overwrite: flags.force === true },
        ),
      ...(initial === null
        ? {}
        : { loadInitialWeights: async () => ({ source: initial.source, weights: initial.weights }) }),
      signal: controller.signal,
      // Lets a stop signal be seen after every step (see yieldToEventLoop).
      onStep: yieldToEventLoop,
      onEval: (record: EvalRecord) => {
        if (!flags.json) {
          const metrics = record.metrics
          const masses = metrics?.offsetGroupMass?.[0]
            ?.map((groups) => groups.map((m) => m.toFixed(2)).join('/'))
            .join(' ')
          console.log(
            `step ${record.step}/${flags.steps}  ` +
              `train ${Number.isNaN(record.trainLoss) ? '-' : record.trainLoss.toFixed(4)}  ` +
              `val ${record.validationLoss.toFixed(4)} nats` +
              (masses === undefined ? '' : `  span mass per head ${masses}`) +
              `  lr ${record.lr.toPrecision(3)}`,
          )
        }
      },
    })
  } finally {
    removeSignalListeners()
  }
  run = { ...run, evaluations: [...result.evaluations] }
  const summary = {
    preset: run.preset,
    task: run.task,
    config,
    backend,
    out,
    steps: result.steps,
    stopped: result.stopped,
    finalTrainLoss: result.finalTrainLoss,
    finalValidationLoss: result.finalValidationLoss,
    trainingTokens: result.tokens,
    tokensPerSecond: result.tokensPerSecond,
    trainingSeconds: result.seconds,
    wallSeconds: (performance.now() - started) / 1000,
    evaluations: run.evaluations,
    transfer: run.transfer ?? null,
  }
  if (flags.json) console.log(JSON.stringify(summary, null, 2))
  if (result.stopped) {
    throw new InterruptedError(
      `interrupted at step ${result.steps} of ${flags.steps}; the checkpoint in ${out} holds it: continue with ` +
        `--resume ${out}`,
      { step: result.steps },
    )
  }
  if (!flags.json) {
    console.log(
      `done at step ${result.steps}: train ${result.finalTrainLoss?.toFixed(4) ?? '-'}  ` +
        `val ${result.finalValidationLoss.toFixed(4)} nats, ` +
        `${formatTokens(result.tokensPerSecond)} training tokens/s on ${backend}; checkpoint in ${out}`,
    )
  }
  return summary
}

/** `attnlab train`. */
export function registerTrain(program: Command): void {
  const command = program
    .command('train')
    .description('train a minimal / gpt / llama model on a task; checkpoints in --out, exact --resume')
  addModelFlags(command)
  addInitFromFlag(command)
  addTaskFlags(command)
  addOptimizationFlags(command, { ...TRAINING_DEFAULTS, allowZero: true })
  command
    .option('--seed <n>', 'seed of initialisation, data and validation', intParser('--seed', 0), 0)
    .option(
      '--out <dir>',
      'checkpoint directory (written atomically); must be new or empty unless --force (default with --resume: the ' +
        'resumed directory)',
    )
    .option(
      '--resume <dir>',
      'continue a run from its checkpoint (bit-identical on cpu), in place unless --out is given',
    )
    .option('--force', 'replace what is in --out (a file, an earlier checkpoint, any directory) with the checkpoint')
    .option(
      '--checkpoint-every <n>',
      'also write the checkpoint every N steps (0: only at the end)',
      intParser('--checkpoint-every', 0),
      0,
    )
    .addOption(backendOption())
    .option('--json', 'print a JSON summary (final train/validation loss in nats, training tokens/s)')
  command.action(async (flags: TrainFlags) => {
    checkOptimizationFlags(flags, command)
    await runTrain(flags, command)
  })
}
