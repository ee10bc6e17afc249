/**
 * `attnlab train`: train a `minimal`, `gpt` or `llama` model (`@attnlab/transformer`) on a task of
 * `@attnlab/markov`, write checkpoints (safetensors + config + optimizer/trainer state), resume
 * exactly, and report final train/validation loss and training tokens per second.
 */
import { Command, Option } from 'commander'
import { AttnlabError, Rng } from '@attnlab/core'
import { TASK_KINDS, createTask, type AnyTask, type TaskDescription } from '@attnlab/markov'
import {
  createConfig,
  createTransformer,
  presetConfig,
  train,
  type EvalRecord,
  type OptimizerOptions,
  type PresetName,
  type ScheduleOptions,
  type TeacherSource,
  type TrainResult,
  type TransformerConfig,
  type TrainerState,
} from '@attnlab/transformer'
import { loadCheckpoint, saveCheckpoint } from '@attnlab/transformer/node'
import { UsageError } from '../errors.ts'
import { activateBackend, backendOption, intListParser, intParser, numberListParser, numberParser } from '../options.ts'
import { taskFromFlags } from './markov.ts'

const PRESETS = ['minimal', 'gpt', 'gpt-nano', 'llama'] as const

/** Flags of `attnlab train` (commander's camelCase keys). */
interface TrainFlags {
  preset: (typeof PRESETS)[number]
  task: string
  taskSeed: number
  vocab?: number
  spans?: number[]
  m?: number
  tau?: number
  reverse?: boolean
  stride?: number
  positionWeights?: number[]
  genLen?: number
  stateSize?: number
  onesPerRow?: number
  states?: number
  cells?: number
  rules?: number[]
  bos?: boolean
  scoreInitial?: boolean
  order?: number
  alpha?: number
  length?: number
  dModel?: number
  nHeads?: number
  nKvHeads?: number
  nLayers?: number
  dMlp?: number
  attnOnly?: boolean
  dropout?: number
  queryInit?: string
  batch: number
  lr: number
  steps: number
  optimizer: 'adamw' | 'sgd'
  weightDecay?: number
  momentum: number
  gradClip: number
  schedule: 'constant' | 'warmup-cosine' | 'plateau'
  warmup: number
  evalEvery: number
  trainSize: number
  validationSize: number
  seed: number
  out?: string
  resume?: string
  checkpointEvery: number
  backend?: string
  json?: boolean
}

/** What a checkpoint written by this command stores in `extra` (to resume with the same run). */
interface StoredRun {
  readonly command: 'train'
  readonly preset: string
  readonly task: TaskDescription
  readonly train: {
    batch: number
    lr: number
    optimizer: OptimizerOptions
    schedule: ScheduleOptions
    gradClip: number
    seed: number
    trainSize: number
    validationSize: number
  }
  readonly evaluations: { step: number; trainLoss: number; validationLoss: number }[]
}

const MODEL_FLAGS = ['dModel', 'nHeads', 'nKvHeads', 'nLayers', 'dMlp', 'attnOnly', 'dropout', 'queryInit'] as const
const TASK_KEYS = ['task', 'taskSeed', 'vocab', 'spans', 'm', 'tau', 'reverse', 'stride', 'positionWeights', 'genLen', 'stateSize', 'onesPerRow', 'states', 'cells', 'rules', 'bos', 'scoreInitial', 'order', 'alpha', 'length'] as const
const RUN_KEYS = ['preset', 'batch', 'lr', 'optimizer', 'weightDecay', 'momentum', 'gradClip', 'schedule', 'warmup', 'trainSize', 'validationSize', 'seed'] as const

function kebab(key: string): string {
  return `--${key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`
}

/** The model configuration for a preset and task, with the model flags applied. */
function modelConfig(flags: TrainFlags, task: AnyTask): TransformerConfig {
  const dVocab = task.vocabSize
  const nCtx = task.seqLength - 1
  const overrides: Record<string, unknown> = {}
  if (flags.dModel !== undefined) overrides.dModel = flags.dModel
  if (flags.nHeads !== undefined) overrides.nHeads = flags.nHeads
  if (flags.nKvHeads !== undefined) overrides.nKvHeads = flags.nKvHeads
  if (flags.nLayers !== undefined) overrides.nLayers = flags.nLayers
  if (flags.dMlp !== undefined) overrides.dMlp = flags.dMlp
  if (flags.attnOnly === true) overrides.attnOnly = true
  if (flags.dropout !== undefined) overrides.dropout = flags.dropout
  if (flags.queryInit !== undefined) {
    if (flags.preset !== 'minimal') throw new UsageError('--query-init applies to --preset minimal only')
    const value = flags.queryInit === 'xavier' ? 'xavier' : Number(flags.queryInit)
    if (value !== 'xavier' && !(Number.isFinite(value) && value >= 0)) throw new UsageError(`--query-init must be a number >= 0 or 'xavier', got '${flags.queryInit}'`)
    overrides.queryInit = value
  }
  if (flags.preset === 'minimal') {
    for (const key of ['dModel', 'nKvHeads', 'nLayers', 'dMlp', 'attnOnly'] as const) {
      if (overrides[key] !== undefined) throw new UsageError(`${kebab(key)} does not apply to --preset minimal (its width is dVocab + nCtx, one attention-only layer)`)
    }
    return createConfig({ architecture: 'minimal', dVocab, nCtx, seed: flags.seed, ...overrides })
  }
  const base = presetConfig(flags.preset as PresetName)
  const merged: Record<string, unknown> = { ...overrides }
  // Heads and width changed together keep dHead = dModel / nHeads.
  if ((overrides.dModel !== undefined || overrides.nHeads !== undefined) && overrides.dHead === undefined) {
    const dModel = (overrides.dModel as number | undefined) ?? base.dModel
    const nHeads = (overrides.nHeads as number | undefined) ?? base.nHeads
    if (dModel % nHeads !== 0) throw new UsageError(`--d-model ${dModel} is not divisible by --n-heads ${nHeads}`)
    merged.dHead = dModel / nHeads
    if (overrides.dMlp === undefined && base.dMlp > 0 && overrides.attnOnly !== true) merged.dMlp = base.architecture === 'llama' ? Math.round((8 * dModel) / 3) : 4 * dModel
  }
  if (overrides.nHeads !== undefined && overrides.nKvHeads === undefined) merged.nKvHeads = overrides.nHeads
  const { attnScale: _derived, ...rest } = base // recomputed from dHead
  void _derived
  return createConfig({ ...rest, dVocab, nCtx, seed: flags.seed, ...merged })
}

function optimizerOf(flags: TrainFlags): OptimizerOptions {
  return flags.optimizer === 'sgd'
    ? { kind: 'sgd', momentum: flags.momentum, weightDecay: flags.weightDecay ?? 0 }
    : { kind: 'adamw', weightDecay: flags.weightDecay ?? 0.01 }
}

function scheduleOf(flags: TrainFlags): ScheduleOptions {
  switch (flags.schedule) {
    case 'constant':
      return { kind: 'constant' }
    case 'warmup-cosine':
      return { kind: 'warmup-cosine', warmupSteps: flags.warmup }
    case 'plateau':
      return { kind: 'reduce-on-plateau', patience: 10, factor: 0.5 }
  }
}

function formatTokens(perSecond: number): string {
  return perSecond >= 1e6 ? `${(perSecond / 1e6).toFixed(2)}M` : `${(perSecond / 1e3).toFixed(1)}k`
}

type TrainOffsetGroups = readonly { readonly name: string; readonly offsets: readonly number[] }[]

function isTeacher(task: AnyTask): task is AnyTask & TeacherSource {
  return typeof (task as Partial<TeacherSource>).teacherProbabilities === 'function' && (task as Partial<TeacherSource>).teacher !== undefined
}

/** Runs `attnlab train` (exported for tests). */
export async function runTrain(flags: TrainFlags, command: Command): Promise<Record<string, unknown>> {
  if (flags.out === undefined) throw new UsageError('--out DIR is required (the checkpoint directory)')
  let task: AnyTask
  let config: TransformerConfig
  let run: StoredRun
  let resumeState: TrainerState | undefined
  let weights: Map<string, { shape: number[]; data: Float32Array }> | undefined
  if (flags.resume !== undefined) {
    const changed = [...TASK_KEYS, ...MODEL_FLAGS, ...RUN_KEYS].filter((key) => command.getOptionValueSource(key) === 'cli')
    if (changed.length > 0) {
      throw new UsageError(`${changed.map(kebab).join(', ')} cannot change when resuming (the run's settings come from ${flags.resume}); only --steps, --out, --eval-every, --checkpoint-every, --backend and --json may be given`)
    }
    const checkpoint = await loadCheckpoint(flags.resume)
    const stored = checkpoint.extra as Partial<StoredRun>
    if (stored.command !== 'train' || stored.task === undefined || stored.train === undefined || checkpoint.trainerState === null) {
      throw new UsageError(`${flags.resume} was not written by 'attnlab train' (no task and training settings to resume with)`)
    }
    run = { ...(stored as StoredRun), evaluations: [...(stored.evaluations ?? [])] }
    task = createTask(run.task)
    config = checkpoint.config
    resumeState = checkpoint.trainerState
    weights = checkpoint.weights
    if (flags.steps < resumeState.step) throw new UsageError(`--steps ${flags.steps} is below the checkpoint's step ${resumeState.step}`)
  } else {
    task = taskFromFlags({ ...flags, seed: flags.taskSeed } as Parameters<typeof taskFromFlags>[0], command)
    config = modelConfig(flags, task)
    run = {
      command: 'train',
      preset: flags.preset,
      task: task.describe() as TaskDescription,
      train: {
        batch: flags.batch,
        lr: flags.lr,
        optimizer: optimizerOf(flags),
        schedule: scheduleOf(flags),
        gradClip: flags.gradClip,
        seed: flags.seed,
        trainSize: flags.trainSize,
        validationSize: flags.validationSize,
      },
      evaluations: [],
    }
  }
  const backend = await activateBackend(flags.backend)
  const model = createTransformer(config)
  if (weights !== undefined) model.setWeights(weights)
  const settings = run.train
  const root = Rng.fromSeed(settings.seed)
  const source = settings.trainSize > 0 ? task.sample(settings.trainSize, root.split('dataset')) : task
  const validation = task.sample(settings.validationSize, root.split('validation'))
  const controller = new AbortController()
  const onSignal = (): void => controller.abort()
  process.once('SIGINT', onSignal)
  const started = performance.now()
  const out = flags.out
  const save = async (state: TrainerState): Promise<void> => {
    await saveCheckpoint(out, model, state, { ...run })
  }
  let result: TrainResult
  try {
    result = await train(model, source, {
      steps: flags.steps,
      batchSize: settings.batch,
      lr: settings.lr,
      optimizer: settings.optimizer,
      schedule: settings.schedule,
      gradClip: settings.gradClip,
      seed: settings.seed,
      evalEvery: flags.evalEvery,
      validation,
      ...(source === task ? {} : { analysis: { offsetGroups: (task as { offsetGroups?: TrainOffsetGroups }).offsetGroups ?? [], ...(isTeacher(task) ? { teacher: task } : {}) } }),
      checkpointEvery: flags.checkpointEvery,
      onCheckpoint: save,
      signal: controller.signal,
      ...(resumeState === undefined ? {} : { resume: resumeState }),
      onEval: (record: EvalRecord) => {
        run.evaluations.push({ step: record.step, trainLoss: record.trainLoss, validationLoss: record.validationLoss })
        if (!flags.json) {
          const metrics = record.metrics
          const masses = metrics?.offsetGroupMass?.[0]?.map((groups) => groups.map((m) => m.toFixed(2)).join('/')).join(' ')
          console.log(
            `step ${record.step}/${flags.steps}  train ${Number.isNaN(record.trainLoss) ? '-' : record.trainLoss.toFixed(4)}  val ${record.validationLoss.toFixed(4)} nats` +
              (masses === undefined ? '' : `  span mass per head ${masses}`) +
              `  lr ${record.lr.toPrecision(3)}`,
          )
        }
      },
    })
  } finally {
    process.removeListener('SIGINT', onSignal)
    model.dispose()
  }
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
  }
  if (flags.json) console.log(JSON.stringify(summary, null, 2))
  if (result.stopped) {
    throw new AttnlabError('INTERRUPTED', `interrupted at step ${result.steps} of ${flags.steps}; the checkpoint in ${out} holds it: continue with --resume ${out} --out ${out}`, { step: result.steps })
  }
  if (!flags.json) {
    console.log(
      `done at step ${result.steps}: train ${result.finalTrainLoss?.toFixed(4) ?? '-'}  val ${result.finalValidationLoss.toFixed(4)} nats, ` +
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
    .addOption(new Option('--preset <name>', 'model preset').choices([...PRESETS]).default('minimal'))
    .addOption(new Option('--task <kind>', 'task family').choices([...TASK_KINDS]).default('sparse-markov'))
    .option('--task-seed <n>', 'seed of the task\'s fixed parameters (teacher, matrix M)', intParser('--task-seed'), 0)
    .option('--vocab <d>', 'sparse-markov: vocabulary d (default 50); icl-markov: states k', intParser('--vocab', 2, 4096))
    .option('--spans <list>', 'sparse-markov: span lengths, oldest first (default 2,2,2)', intListParser('--spans', 1))
    .option('--m <x>', 'sparse-markov: importance base, c_i = m^i (default 1.7)', numberParser('--m', 0))
    .option('--tau <x>', 'sparse-markov: softmax temperature (default 0.1)', numberParser('--tau', 0))
    .option('--reverse', 'sparse-markov: make the oldest span the most important')
    .option('--stride <n>', 'sparse-markov: start-to-start distance of spans', intParser('--stride', 1))
    .option('--position-weights <list>', 'sparse-markov: within-span token weights', numberListParser('--position-weights'))
    .option('--gen-len <n>', 'sparse-markov: generated tokens per sequence (default 20)', intParser('--gen-len', 1))
    .option('--state-size <S>', 'linear-map: cells per state', intParser('--state-size', 2))
    .option('--ones-per-row <s>', 'linear-map: ones per row of M', intParser('--ones-per-row', 1))
    .option('--states <T>', 'linear-map / cellular-automaton: states per sequence', intParser('--states', 2))
    .option('--cells <S>', 'cellular-automaton: cells per state', intParser('--cells', 3))
    .option('--rules <list>', 'cellular-automaton: Wolfram rules to draw from', intListParser('--rules', 0))
    .option('--bos', 'linear-map / cellular-automaton: prepend a BOS token')
    .option('--no-score-initial', 'linear-map / cellular-automaton: do not score the initial state')
    .option('--order <n>', 'icl-markov: chain order', intParser('--order', 1))
    .option('--alpha <x>', 'icl-markov: Dirichlet concentration', numberParser('--alpha', 0))
    .option('--length <n>', 'icl-markov: tokens per sequence', intParser('--length', 2))
    .option('--d-model <n>', 'residual width (gpt/llama)', intParser('--d-model', 1))
    .option('--n-heads <n>', 'attention heads', intParser('--n-heads', 1))
    .option('--n-kv-heads <n>', 'key/value heads (llama grouped-query attention)', intParser('--n-kv-heads', 1))
    .option('--n-layers <n>', 'blocks (gpt/llama)', intParser('--n-layers', 1))
    .option('--d-mlp <n>', 'MLP width (gpt/llama)', intParser('--d-mlp', 1))
    .option('--attn-only', 'attention-only blocks (gpt/llama)')
    .option('--dropout <p>', 'dropout probability', numberParser('--dropout', 0, 0.99))
    .option('--query-init <eps>', "minimal: W_Q ~ U(-eps, eps) (0 = exactly zero) or 'xavier' (default 1e-5)")
    .option('--batch <n>', 'sequences per step', intParser('--batch', 1), 1024)
    .option('--lr <x>', 'peak learning rate', numberParser('--lr', 0), 0.08)
    .option('--steps <n>', 'total optimizer steps (a resumed run continues up to this)', intParser('--steps', 0), 1500)
    .addOption(new Option('--optimizer <name>', 'optimizer').choices(['adamw', 'sgd']).default('adamw'))
    .option('--weight-decay <x>', 'AdamW decoupled weight decay (default 0.01) / SGD L2 (default 0)', numberParser('--weight-decay', 0))
    .option('--momentum <x>', 'SGD momentum', numberParser('--momentum', 0, 0.999), 0.9)
    .option('--grad-clip <x>', 'global gradient-norm clip', numberParser('--grad-clip', 0), 1)
    .addOption(new Option('--schedule <name>', 'learning-rate schedule').choices(['constant', 'warmup-cosine', 'plateau']).default('constant'))
    .option('--warmup <n>', 'warmup steps for warmup-cosine', intParser('--warmup', 0), 100)
    .option('--eval-every <n>', 'evaluate every N steps (0: only at the end)', intParser('--eval-every', 0), 50)
    .option('--train-size <n>', 'train on a fixed dataset of N sequences (0: fresh sequences every step)', intParser('--train-size', 0), 0)
    .option('--validation-size <n>', 'validation sequences', intParser('--validation-size', 1), 1024)
    .option('--seed <n>', 'seed of initialisation, data and validation', intParser('--seed'), 0)
    .option('--out <dir>', 'checkpoint directory (written atomically)')
    .option('--resume <dir>', 'continue a run from its checkpoint (bit-identical on cpu)')
    .option('--checkpoint-every <n>', 'also write the checkpoint every N steps (0: only at the end)', intParser('--checkpoint-every', 0), 0)
    .addOption(backendOption())
    .option('--json', 'print a JSON summary (final train/validation loss in nats, training tokens/s)')
  command.action(async (flags: TrainFlags) => {
    if (flags.schedule !== 'warmup-cosine' && command.getOptionValueSource('warmup') === 'cli') throw new UsageError('--warmup applies to --schedule warmup-cosine')
    if (flags.optimizer !== 'sgd' && command.getOptionValueSource('momentum') === 'cli') throw new UsageError('--momentum applies to --optimizer sgd')
    if (flags.gradClip <= 0) throw new UsageError(`--grad-clip must be > 0, got ${flags.gradClip}`)
    if (flags.lr <= 0) throw new UsageError(`--lr must be > 0, got ${flags.lr}`)
    if (flags.trainSize > 0 && flags.trainSize < flags.batch) throw new UsageError(`--train-size ${flags.trainSize} is smaller than --batch ${flags.batch}`)
    await runTrain(flags, command)
  })
}
