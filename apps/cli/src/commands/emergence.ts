/**
 * `attnlab emergence`: the main job. Trains the minimal transformer (Yüksel et al., arXiv
 * 2602.19143) on the sparse high-order Markov chain (or another task of `@attnlab/markov`) and
 * shows, with numbers and pictures, that it learns in stages, one sparse attention pattern at a
 * time, against the Bayes oracles and the reduced ODE model; `--seeds N` repeats it to show that
 * the emergence step is random across seeds (Baherwani et al., arXiv 2606.25010).
 *
 * Writes `DIR/config.json`, `DIR/metrics.jsonl` (one line per evaluation), per-seed checkpoints
 * and attention patterns under `DIR/seeds/<seed>/`, `DIR/summary.json` and `DIR/report.html`.
 */
import { readdir, stat } from 'node:fs/promises'
import { join, resolve } from 'node:path'
import { type Command, Help } from 'commander'
import cliProgress from 'cli-progress'
import { AttnlabError, InterruptedError, InvalidCheckpointError } from '@attnlab/core'
import {
  EMERGENCE_DEFAULTS,
  EMERGENCE_TASK_DEFAULTS,
  ExperimentInputError,
  describeOracleValue,
  emergenceSummaryLines,
  resolveEmergenceConfig,
  resolveEmergenceRecord,
  runEmergence,
  type EmergenceConfig,
  type EmergencePreset,
  type EmergenceProgress,
  type EmergenceRecord,
  type EmergenceResult,
  type ResolvedEmergenceConfig,
} from '@attnlab/experiments'
import {
  checkResumable,
  emergenceDirectoryStore,
  readEmergenceRecord,
  writeEmergenceResult,
} from '@attnlab/experiments/node'
import { defaultLinearMapConfig, defaultSparseMarkovConfig, type MarkovTaskDescription } from '@attnlab/markov'
import { transformerConfigSchema } from '@attnlab/transformer'
import { UsageError } from '../errors.ts'
import { checkWritable, createDirectory, discardCreated, pathState } from '../out-dir.ts'
import { onStopSignal } from '../signals.ts'
import { activateBackend, backendOption, intParser, withFlagNames } from '../options.ts'
import {
  addModelFlags,
  addOptimizationFlags,
  addInitFromFlag,
  addTaskFlags,
  attentionBiasOf,
  initFromOf,
  checkOptimizationFlags,
  givenFlags,
  resumableText,
  runDefiningKeys,
  kebab,
  modelOverridesOf,
  optimizerOf,
  scheduleOf,
  taskOf,
  trainingOption,
  type ModelFlags,
  type OptimizationFlags,
  type TaskFlags,
} from '../run-flags.ts'

/** Flags of `attnlab emergence`. */
interface EmergenceFlags extends TaskFlags, ModelFlags, OptimizationFlags {
  seeds: number
  seed: number
  initFrom?: string
  out?: string
  resume?: string
  force?: boolean
  backend?: string
  json?: boolean
  analysisSize: number
}

export { EMERGENCE_DEFAULTS, EMERGENCE_TASK_DEFAULTS }

/** Applies the task's documented defaults to the flags not given on the command line. */
function applyTaskDefaults(flags: EmergenceFlags, command: Command): void {
  const defaults = EMERGENCE_TASK_DEFAULTS[flags.task]
  if (defaults === undefined) return
  const presetGiven = command.getOptionValueSource('preset') === 'cli'
  for (const [key, value] of Object.entries(defaults)) {
    if (command.getOptionValueSource(key) === 'cli') continue
    // Model-shape defaults (fields of the transformer configuration) belong to the default preset only.
    if (presetGiven && Object.hasOwn(transformerConfigSchema.shape, key)) continue
    ;(flags as unknown as Record<string, unknown>)[key] = value
  }
}

const DEFAULT_OUT = 'runs/emergence'

async function exists(path: string): Promise<boolean> {
  try {
    await stat(path)
    return true
  } catch {
    return false
  }
}

/**
 * Picks the output directory, refusing to overwrite a previous run or other files unless --force.
 * Creates nothing.
 */
async function chooseOut(flags: EmergenceFlags): Promise<string> {
  if (flags.resume !== undefined) {
    if (flags.out !== undefined && resolve(flags.out) !== resolve(flags.resume)) {
      throw new UsageError(`--resume continues in place: --out must be omitted or equal to --resume (${flags.resume})`)
    }
    return flags.resume
  }
  let out = flags.out ?? DEFAULT_OUT
  if (flags.out === undefined) {
    // Never overwrite an earlier default run: runs/emergence, runs/emergence-2, ...
    for (let i = 2; (await exists(join(out, 'config.json'))) && i < 10_000; i++) out = `${DEFAULT_OUT}-${i}`
  } else if (await exists(join(out, 'config.json'))) {
    if (flags.force !== true) {
      throw new UsageError(
        `${out} holds an earlier run; continue it with --resume ${out}, pick another --out, or replace it with --force`,
      )
    }
  } else if (await exists(out)) {
    const entries = await readdir(out).catch(() => {
      throw new UsageError(`--out ${out} is not a directory`)
    })
    if (entries.length > 0 && flags.force !== true)
      throw new UsageError(`--out ${out} is not empty; pick another directory or pass --force`)
  }
  return out
}

function formatDuration(seconds: number): string {
  if (!Number.isFinite(seconds) || seconds < 0) return '?'
  const m = Math.floor(seconds / 60)
  const s = Math.round(seconds % 60)
  return m > 0 ? `${m}m${String(s).padStart(2, '0')}s` : `${s}s`
}

/**
 * The flags a resume may give (commander keys; `--out` only as the run directory itself); every other
 * flag defines the run, whose settings come from its `config.json`.
 */
const RESUMABLE_KEYS = ['resume', 'steps', 'out', 'force', 'backend', 'json'] as const

/** Task flags whose record field has another name. */
const TASK_RECORD_FIELDS: Readonly<Record<string, string>> = {
  task: 'kind',
  vocab: 'vocabSize',
  taskSeed: 'teacherSeed',
}

/** Training flags whose record field has another name (`training.<field>`). */
const TRAINING_RECORD_FIELDS: Readonly<Record<string, string>> = { batch: 'batchSize' }

/**
 * The value a run-defining flag had for the run `record` describes, in the flag's parsed form, or `undefined` when
 * it cannot be read back from the record (a resume then refuses the flag whatever its value). `--eval-every` is
 * among them: the evaluation grid is what the stage detection and the reduced ODE's fit read, so a resumed run
 * keeps its grid (unlike `train`, where it only paces the printed evaluations).
 */
function recordedFlagValue(record: EmergenceRecord, key: string): unknown {
  const task = record.task as unknown as Record<string, unknown>
  const training = record.training as unknown as Record<string, unknown>
  const optimizer = record.training.optimizer as unknown as Record<string, unknown>
  if (key === 'preset') return record.preset
  if (key === 'seed') return record.seeds[0]
  if (key === 'seeds') return record.seeds.length
  if (key === 'optimizer') return optimizer.kind
  if (key === 'weightDecay' || key === 'momentum') return optimizer[key]
  if (key === 'schedule') return (record.training.schedule as unknown as Record<string, unknown>).kind
  const taskField = TASK_RECORD_FIELDS[key] ?? key
  if (Object.hasOwn(task, taskField) && task[taskField] !== null) return task[taskField]
  const trainingField = TRAINING_RECORD_FIELDS[key] ?? key
  if (Object.hasOwn(training, trainingField) && !['initFrom', 'attentionBias', 'schedule'].includes(trainingField))
    return training[trainingField] ?? undefined
  if (Object.hasOwn(record.model, key)) return record.model[key]
  return undefined
}

/** The settings of a run: from the flags, or from the run being resumed (`config.json`). */
async function settingsOf(flags: EmergenceFlags, command: Command): Promise<ResolvedEmergenceConfig> {
  if (flags.resume !== undefined) {
    const given = givenFlags(command, runDefiningKeys(command, RESUMABLE_KEYS))
    let record: EmergenceRecord
    try {
      record = await readEmergenceRecord(flags.resume)
    } catch (error) {
      // Without a readable run, any run-defining flag is a change (the record's error comes after).
      if (error instanceof ExperimentInputError && given.length === 0) throw new UsageError(`--resume ${error.message}`)
      if (!(error instanceof ExperimentInputError)) throw error
      throw new UsageError(
        `${given.map(kebab).join(', ')} cannot change when resuming (the settings come from ` +
          `${flags.resume}/config.json); ${resumableText(RESUMABLE_KEYS)}`,
      )
    }
    // A flag given with the value the run already has is no change; a flag whose value in the record is not
    // known here counts as one.
    const values = flags as unknown as Record<string, unknown>
    const changed = given.filter((key) => {
      const stored = recordedFlagValue(record, key)
      return stored === undefined || JSON.stringify(stored) !== JSON.stringify(values[key])
    })
    if (changed.length > 0) {
      const had = changed
        .map((key) => [key, recordedFlagValue(record, key)] as const)
        .filter(([, value]) => value !== undefined)
        .map(([key, value]) => `${kebab(key)} ${Array.isArray(value) ? value.join(',') : String(value)}`)
      throw new UsageError(
        `${changed.map(kebab).join(', ')} cannot change when resuming (` +
          `${had.length > 0 ? `the run has ${had.join(', ')}; ` : ''}the settings come from ` +
          `${flags.resume}/config.json); ${resumableText(RESUMABLE_KEYS)}`,
      )
    }
    return resolveEmergenceRecord(record, command.getOptionValueSource('steps') === 'cli' ? { steps: flags.steps } : {})
  }
  applyTaskDefaults(flags, command)
  checkOptimizationFlags(flags, command)
  const task = taskOf(flags, command)
  const model = modelOverridesOf(flags)
  if (flags.analysisSize > flags.validationSize) {
    // Name the flag the user gave; the other one is at its default.
    const given = (name: string): boolean => command.getOptionValueSource(name) === 'cli'
    throw new UsageError(
      given('analysisSize') || !given('validationSize')
        ? `--analysis-size ${flags.analysisSize} exceeds --validation-size ${flags.validationSize}`
        : `--validation-size ${flags.validationSize} is below --analysis-size ${flags.analysisSize} (its default; ` +
            'the analysis reads that many validation sequences): give --analysis-size at most ' +
            `${flags.validationSize} too`,
    )
  }
  const config: EmergenceConfig = {
    task: task.describe() as MarkovTaskDescription,
    preset: flags.preset as EmergencePreset,
    model,
    training: {
      steps: flags.steps,
      batchSize: flags.batch,
      lr: flags.lr,
      optimizer: optimizerOf(flags),
      schedule: scheduleOf(flags),
      gradClip: flags.gradClip,
      trainSize: flags.trainSize,
      validationSize: flags.validationSize,
      evalEvery: flags.evalEvery,
      analysisSize: flags.analysisSize,
      attentionBias: attentionBiasOf(flags),
      initFrom: flags.initFrom === undefined ? null : resolve(flags.initFrom),
      batchTokens: flags.batchTokens ?? null,
    },
    seeds: Array.from({ length: flags.seeds }, (_, i) => flags.seed + i),
  }
  const resolved = withFlagNames(
    {
      'training.batchTokens': '--batch-tokens',
      'training.attentionBias': '--attention-bias',
      'training.attentionBias.beta': '--attention-bias',
      'attentionBias.layers': '--bias-layers',
      'attentionBias.heads': '--bias-heads',
    },
    () => resolveEmergenceConfig(config),
  )
  // The source is read (and compared with the model) before any work; the run reads it again.
  await initFromOf(flags.initFrom, resolved.model)
  return resolved
}

/** `--resume`'s checks of every checkpoint, with the flags' names in the messages. */
async function checkResumableFlags(out: string, record: EmergenceRecord): Promise<void> {
  try {
    await checkResumable(out, record)
  } catch (error) {
    if (error instanceof ExperimentInputError && error.parameter === 'steps') throw new UsageError(`--${error.message}`)
    if (error instanceof AttnlabError && error.code === 'INVALID_CHECKPOINT')
      throw new InvalidCheckpointError(`--resume ${error.message}`, { ...error.details }, { cause: error.cause })
    throw error
  }
}

/**
 * Runs `attnlab emergence`: parses the flags into `@attnlab/experiments`' config (or reads the
 * run being resumed), checks `--out` / `--resume`, runs `runEmergence` into the run directory with
 * a progress bar, and prints the stage table (exported for tests).
 */
export async function runEmergenceCommand(flags: EmergenceFlags, command: Command): Promise<EmergenceResult> {
  // 1. Settings, validated before any work.
  const resolved = await settingsOf(flags, command)
  const { record } = resolved
  const fresh = flags.resume === undefined
  const out = await chooseOut(flags)
  await checkWritable(out)
  if (!fresh) await checkResumableFlags(out, record)
  // A resumed run keeps its backend unless --backend says otherwise (numbers differ across backends).
  const backend = await activateBackend(flags.backend ?? (!fresh && record.backend !== '' ? record.backend : undefined))
  const log = (text: string): void => {
    if (!flags.json) console.error(text)
  }
  log(
    `attnlab emergence: ${resolved.task.kind} (${JSON.stringify(record.task)}), ${record.preset} model, ` +
      `${record.seeds.length} seed(s), ${record.training.steps} steps of ${record.training.batchSize} sequences, ` +
      `backend ${backend}; writing ${out}`,
  )

  // Ctrl-C, SIGTERM or SIGHUP stop after the current step; what was written is kept.
  const controller = new AbortController()
  const removeSignalListeners = onStopSignal(() => {
    log('\ninterrupted: finishing the current step and saving...')
    controller.abort()
  })
  let created: string | undefined
  let wasEmpty = false
  // Set once a seed has a checkpoint: from then on a failed fresh run leaves a resumable directory.
  let saved = false
  const store = emergenceDirectoryStore(out, {
    overwrite: flags.force === true,
    // The run directory: created only once everything was validated and the oracles computed.
    prepare: async () => {
      if (!fresh) return
      const before = await pathState(out)
      wasEmpty = before.kind === 'directory' && before.entries.length === 0
      created = await createDirectory(out)
    },
  })
  const interactive = process.stderr.isTTY === true && !flags.json
  const total = record.training.steps
  let bar: cliProgress.SingleBar | null = null
  let prefix = ''
  const onProgress = (event: EmergenceProgress): void => {
    switch (event.kind) {
      case 'oracles': {
        const { oracles } = event
        const values = oracles.lines.map((o) => `${o.label} ${describeOracleValue(o)}`).join('; ')
        log(`oracle lines (${oracles.note}; ${oracles.seconds.toFixed(1)} s): ${values}`)
        break
      }
      case 'seed': {
        if (event.resumed === 'checkpoint') {
          const step = event.checkpointStep ?? 0
          const done = step >= total ? ', already complete' : ''
          log(`seed ${event.seed}: continuing from step ${step} of ${total} (its checkpoint)${done}`)
        } else if (event.resumed === 'none') log(`seed ${event.seed}: no checkpoint yet, starting from step 0`)
        prefix = event.seeds > 1 ? `seed ${event.seed} (${event.index + 1}/${event.seeds}) ` : ''
        bar = interactive
          ? new cliProgress.SingleBar(
              {
                format:
                  `${prefix}{bar} {value}/{total} | loss {loss} | val {val} | {stage} | ETA {eta_formatted} | ` +
                  `{speed} tok/s`,
                barsize: 24,
                hideCursor: true,
                etaBuffer: 50,
                fps: 5,
                stream: process.stderr,
              },
              cliProgress.Presets.shades_classic,
            )
          : null
        bar?.start(total, event.fromStep, { loss: '-', val: '-', stage: 'stage 0', speed: '-' })
        break
      }
      case 'step':
        bar?.update(event.record.step, {
          loss: event.record.loss.toFixed(3),
          speed: `${(event.record.tokensPerSecond / 1000).toFixed(0)}k`,
        })
        break
      case 'evaluation': {
        const { line } = event
        bar?.update(line.step, { val: line.validationLoss.toFixed(3), stage: event.stage })
        if (!interactive && !flags.json) {
          console.error(
            `${prefix}step ${line.step}/${total}  train ${line.trainLoss?.toFixed(4) ?? '-'}  ` +
              `val ${line.validationLoss.toFixed(4)} nats  ${event.stage}  (${formatDuration(line.seconds)} training)`,
          )
        }
        break
      }
      case 'saved':
        saved = true
        break
      case 'seed-end':
        bar?.stop()
        bar = null
        break
      case 'warning':
        log(event.message)
        break
    }
  }
  let result: EmergenceResult
  try {
    result = await runEmergence(resolved, { signal: controller.signal, onProgress, store, resume: !fresh })
  } catch (error) {
    ;(bar as cliProgress.SingleBar | null)?.stop()
    // A fresh run that fails before its first checkpoint leaves nothing to resume: remove what it
    // created, so that rerunning the same command works.
    if (fresh && !saved) await discardCreated(out, created, wasEmpty)
    if (error instanceof AttnlabError && error.code === 'INTERRUPTED' && error.details.beforeStart === true) {
      throw new InterruptedError(
        fresh
          ? `interrupted before the training started; nothing was written to ${out}`
          : `interrupted before the training continued; ${out} is unchanged`,
      )
    }
    throw error
  } finally {
    removeSignalListeners()
  }

  // The report and summary.json, then the terminal summary.
  const summary = await writeEmergenceResult(out, result)
  if (flags.json) console.log(JSON.stringify(summary, null, 2))
  else printSummary(result, out)
  if (summary.interrupted) {
    // Where --resume starts: the step of the stopped seed's checkpoint (often past its last evaluation).
    const several = result.summary.seeds.length > 1
    const at = result.summary.seeds
      .filter((seed) => seed.stopped)
      .map((seed) => `${several ? `seed ${seed.seed}'s ` : ''}checkpoint at step ${seed.completedSteps}`)
    throw new InterruptedError(
      `interrupted${at.length === 0 ? '' : ` (${at.join(', ')})`}; what was computed is in ${out} (continue with: ` +
        `pnpm attnlab emergence --resume ${out})`,
    )
  }
  return result
}

/** The stage tables and final numbers (`@attnlab/experiments`' text), then where the report is. */
function printSummary(result: EmergenceResult, out: string): void {
  for (const line of emergenceSummaryLines(result)) console.log(line)
  console.log(`\nreport: ${join(out, 'report.html')}`)
}

/**
 * Why `attnlab emergence` has its own defaults where `train` and `markov` use `@attnlab/markov`'s
 * (the papers' settings), for the help.
 */
export function emergenceDefaultsWhy(): string {
  const sparse = defaultSparseMarkovConfig()
  const linear = defaultLinearMapConfig()
  const own = EMERGENCE_TASK_DEFAULTS['linear-map'] as { stateSize: number; onesPerRow: number; steps: number }
  return (
    "Why these differ from attnlab train / markov (the @attnlab/markov defaults, the papers' settings: " +
    `--m ${sparse.m}; linear-map --state-size ${linear.stateSize} --ones-per-row ${linear.onesPerRow}): ` +
    'the main job must show every stage within its default run. ' +
    `With m = ${sparse.m} the last stage is itself a random discovery (4 of 10 seeds within 1500 steps); ` +
    `with --m ${EMERGENCE_DEFAULTS.m} every seed we ran learns all three spans within ~470 steps. ` +
    `The linear map with S = ${own.stateSize}, s = ${own.onesPerRow} learns its cells one at a time ` +
    `within ${own.steps} ` +
    `steps, so --seeds 5 takes minutes. Pass --m ${sparse.m} or --state-size ${linear.stateSize} ` +
    `--ones-per-row ${linear.onesPerRow} for the papers' settings (README, "What the main job shows").`
  )
}

/** `attnlab emergence`. */
export function registerEmergence(program: Command): void {
  const command = program
    .command('emergence')
    .description(
      'the main job: train the minimal transformer on the sparse Markov chain and watch sparse attention patterns ' +
        'emerge, stage by stage; writes a report',
    )
  // Its own per-task defaults (linear map S = 8, s = 2) are stated in the help.
  // The emergence tasks only: the retrieval tasks (niah-tokens, ...) have no loss oracle to compare against.
  addTaskFlags(command, EMERGENCE_DEFAULTS.task, {
    m: EMERGENCE_DEFAULTS.m,
    taskDefaults: EMERGENCE_TASK_DEFAULTS,
    kinds: ['sparse-markov', ...Object.keys(EMERGENCE_TASK_DEFAULTS).filter((k) => k !== 'sparse-markov')],
  })
  addModelFlags(command)
  addInitFromFlag(command)
  addOptimizationFlags(command, {
    batch: EMERGENCE_DEFAULTS.batch,
    lr: EMERGENCE_DEFAULTS.lr,
    steps: EMERGENCE_DEFAULTS.steps,
    evalEvery: EMERGENCE_DEFAULTS.evalEvery,
  })
  command
    .addOption(trainingOption('--analysis-size <n>', 'analysisSize'))
    .option(
      '--seeds <n>',
      'repeat the run with N seeds (seed, seed+1, ...) to see the spread of emergence steps',
      intParser('--seeds', 1, 1000),
      1,
    )
    .option('--seed <n>', 'first seed (initialisation, data and validation)', intParser('--seed', 0), 0)
    .option('--out <dir>', `output directory (default ${DEFAULT_OUT}, or ${DEFAULT_OUT}-2, -3, ... if taken)`)
    .option('--resume <dir>', 'continue an interrupted run in place (exact on cpu)')
    .option('--force', 'replace an earlier run in --out')
    .addOption(backendOption())
    .option('--json', 'print summary.json to stdout instead of the tables')
    .addHelpText(
      'after',
      `\nDefaults per task (for the flags not given):\n  sparse-markov: --preset minimal --m ${EMERGENCE_DEFAULTS.m} ` +
        `--lr ${EMERGENCE_DEFAULTS.lr} --batch ${EMERGENCE_DEFAULTS.batch} --steps ${EMERGENCE_DEFAULTS.steps} ` +
        `--eval-every ${EMERGENCE_DEFAULTS.evalEvery}\n` +
        Object.entries(EMERGENCE_TASK_DEFAULTS)
          .map(
            ([task, d]) =>
              `  ${task}: ${Object.entries(d)
                .map(([k, v]) => (v === true ? kebab(k) : `${kebab(k)} ${String(v)}`))
                .join(' ')}`,
          )
          .join('\n') +
        `\n\n${new Help().boxWrap(emergenceDefaultsWhy(), 100)}`,
    )
    .action(async (flags: EmergenceFlags) => {
      await runEmergenceCommand(flags, command)
    })
}
