/**
 * Flags shared by the commands that train a model on a task (`attnlab train`,
 * `attnlab emergence`): task flags (the task's fixed parameters), model flags, and training
 * flags, with their conversion into `@attnlab/markov` / `@attnlab/transformer` configurations.
 */
import { Command, Option } from 'commander'
import { TASK_KINDS, type AnyTask } from '@attnlab/markov'
import { createConfig, presetConfig, type OptimizerOptions, type PresetName, type ScheduleOptions, type TransformerConfig } from '@attnlab/transformer'
import { UsageError } from './errors.ts'
import { intListParser, intParser, numberListParser, numberParser } from './options.ts'
import { taskFromFlags } from './commands/markov.ts'

/** Model presets a training command accepts. */
export const TRAIN_PRESETS = ['minimal', 'gpt', 'gpt-nano', 'llama'] as const

/** Task flags (commander camelCase keys). */
export interface TaskFlags {
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
}

/** Model flags. */
export interface ModelFlags {
  preset: (typeof TRAIN_PRESETS)[number]
  dModel?: number
  nHeads?: number
  nKvHeads?: number
  nLayers?: number
  dMlp?: number
  attnOnly?: boolean
  dropout?: number
  queryInit?: string
}

/** Optimisation flags. */
export interface OptimizationFlags {
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
}

/** Keys of the task flags (to detect flags given on the command line). */
export const TASK_KEYS = ['task', 'taskSeed', 'vocab', 'spans', 'm', 'tau', 'reverse', 'stride', 'positionWeights', 'genLen', 'stateSize', 'onesPerRow', 'states', 'cells', 'rules', 'bos', 'scoreInitial', 'order', 'alpha', 'length'] as const
/** Keys of the model flags. */
export const MODEL_KEYS = ['preset', 'dModel', 'nHeads', 'nKvHeads', 'nLayers', 'dMlp', 'attnOnly', 'dropout', 'queryInit'] as const
/** Keys of the optimisation flags that define a run (not `steps` / `evalEvery`). */
export const OPTIMIZATION_KEYS = ['batch', 'lr', 'optimizer', 'weightDecay', 'momentum', 'gradClip', 'schedule', 'warmup', 'trainSize', 'validationSize'] as const

/** `--foo-bar` for a camelCase key. */
export function kebab(key: string): string {
  return `--${key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`
}

/**
 * Adds the task flags. `--task-seed` (the seed of the task's fixed parameters) is added unless
 * `options.taskSeed` is false (`attnlab markov` uses one `--seed` for both).
 */
export function addTaskFlags(
  command: Command,
  defaultTask = 'sparse-markov',
  options: { readonly taskSeed?: boolean; readonly m?: number } = {},
): Command {
  command.addOption(new Option('--task <kind>', 'task family').choices([...TASK_KINDS]).default(defaultTask))
  if (options.taskSeed !== false) command.option('--task-seed <n>', "seed of the task's fixed parameters (teacher, matrix M)", intParser('--task-seed'), 0)
  return command
    .option('--vocab <d>', 'sparse-markov: vocabulary d (default 50); icl-markov: states k', intParser('--vocab', 2, 4096))
    .option('--spans <list>', 'sparse-markov: span lengths, oldest first (default 2,2,2)', intListParser('--spans', 1))
    .option(
      '--m <x>',
      `sparse-markov: importance base, c_i = m^i (default ${options.m ?? 1.7})`,
      numberParser('--m', 0),
      ...(options.m === undefined ? [] : [options.m]),
    )
    .option('--tau <x>', 'sparse-markov: softmax temperature (default 0.1)', numberParser('--tau', 0))
    .option('--reverse', 'sparse-markov: make the oldest span the most important')
    .option('--stride <n>', 'sparse-markov: start-to-start distance of spans', intParser('--stride', 1))
    .option('--position-weights <list>', 'sparse-markov: within-span token weights', numberListParser('--position-weights'))
    .option('--gen-len <n>', 'sparse-markov: generated tokens per sequence (default 20)', intParser('--gen-len', 1))
    .option('--state-size <S>', 'linear-map: cells per state, the context length S (default 16)', intParser('--state-size', 2))
    .option('--ones-per-row <s>', 'linear-map: ones per row of M, the pattern sparsity s (default 3)', intParser('--ones-per-row', 1))
    .option('--states <T>', 'linear-map / cellular-automaton: states per sequence', intParser('--states', 2))
    .option('--cells <S>', 'cellular-automaton: cells per state', intParser('--cells', 3))
    .option('--rules <list>', 'cellular-automaton: Wolfram rules to draw from', intListParser('--rules', 0))
    .option('--bos', 'linear-map / cellular-automaton: prepend a BOS token')
    .option('--no-score-initial', 'linear-map / cellular-automaton: do not score the initial state')
    .option('--order <n>', 'icl-markov: chain order', intParser('--order', 1))
    .option('--alpha <x>', 'icl-markov: Dirichlet concentration', numberParser('--alpha', 0))
    .option('--length <n>', 'icl-markov: tokens per sequence', intParser('--length', 2))
}

/** Adds the model flags. */
export function addModelFlags(command: Command): Command {
  return command
    .addOption(new Option('--preset <name>', 'model preset').choices([...TRAIN_PRESETS]).default('minimal'))
    .option('--d-model <n>', 'residual width (gpt/llama)', intParser('--d-model', 1))
    .option('--n-heads <n>', 'attention heads', intParser('--n-heads', 1))
    .option('--n-kv-heads <n>', 'key/value heads (llama grouped-query attention)', intParser('--n-kv-heads', 1))
    .option('--n-layers <n>', 'blocks (gpt/llama)', intParser('--n-layers', 1))
    .option('--d-mlp <n>', 'MLP width (gpt/llama)', intParser('--d-mlp', 1))
    .option('--attn-only', 'attention-only blocks (gpt/llama)')
    .option('--dropout <p>', 'dropout probability', numberParser('--dropout', 0, 0.99))
    .option('--query-init <eps>', "minimal: W_Q ~ U(-eps, eps) (0 = exactly zero) or 'xavier' (default 1e-5)")
}

/** Default values of the optimisation flags (differ per command). */
export interface OptimizationDefaults {
  readonly batch: number
  readonly lr: number
  readonly steps: number
  readonly evalEvery: number
  /** Whether `--eval-every 0` (evaluate only at the end) and `--steps 0` are allowed. */
  readonly allowZero?: boolean
}

/** Adds the optimisation flags. */
export function addOptimizationFlags(command: Command, defaults: OptimizationDefaults): Command {
  return command
    .option('--batch <n>', 'sequences per step', intParser('--batch', 1), defaults.batch)
    .option('--lr <x>', 'peak learning rate', numberParser('--lr', 0), defaults.lr)
    .option('--steps <n>', 'total optimizer steps (a resumed run continues up to this)', intParser('--steps', defaults.allowZero === true ? 0 : 1), defaults.steps)
    .addOption(new Option('--optimizer <name>', 'optimizer').choices(['adamw', 'sgd']).default('adamw'))
    .option('--weight-decay <x>', 'AdamW decoupled weight decay (default 0.01) / SGD L2 (default 0)', numberParser('--weight-decay', 0))
    .option('--momentum <x>', 'SGD momentum', numberParser('--momentum', 0, 0.999), 0.9)
    .option('--grad-clip <x>', 'global gradient-norm clip', numberParser('--grad-clip', 0), 1)
    .addOption(new Option('--schedule <name>', 'learning-rate schedule').choices(['constant', 'warmup-cosine', 'plateau']).default('constant'))
    .option('--warmup <n>', 'warmup steps for warmup-cosine', intParser('--warmup', 0), 100)
    .option(
      '--eval-every <n>',
      defaults.allowZero === true ? 'evaluate every N steps (0: only at the end)' : 'evaluate every N steps',
      intParser('--eval-every', defaults.allowZero === true ? 0 : 1),
      defaults.evalEvery,
    )
    .option('--train-size <n>', 'train on a fixed dataset of N sequences (0: fresh sequences every step)', intParser('--train-size', 0), 0)
    .option('--validation-size <n>', 'validation sequences', intParser('--validation-size', 1), 1024)
}

/** Checks the optimisation flags' cross-constraints (before any work). */
export function checkOptimizationFlags(flags: OptimizationFlags, command: Command): void {
  if (flags.schedule !== 'warmup-cosine' && command.getOptionValueSource('warmup') === 'cli') throw new UsageError('--warmup applies to --schedule warmup-cosine')
  if (flags.optimizer !== 'sgd' && command.getOptionValueSource('momentum') === 'cli') throw new UsageError('--momentum applies to --optimizer sgd')
  if (flags.gradClip <= 0) throw new UsageError(`--grad-clip must be > 0, got ${flags.gradClip}`)
  if (flags.lr <= 0) throw new UsageError(`--lr must be > 0, got ${flags.lr}`)
  if (flags.trainSize > 0 && flags.trainSize < flags.batch) throw new UsageError(`--train-size ${flags.trainSize} is smaller than --batch ${flags.batch}`)
}

/** The task the task flags describe. */
export function taskOf(flags: TaskFlags, command: Command): AnyTask {
  return taskFromFlags({ ...flags, seed: flags.taskSeed } as Parameters<typeof taskFromFlags>[0], command)
}

/** The model configuration for a preset and task, with the model flags applied. */
export function modelConfigOf(flags: ModelFlags, task: AnyTask, seed: number): TransformerConfig {
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
    if (value !== 'xavier' && !(flags.queryInit.trim() !== '' && Number.isFinite(value) && value >= 0)) {
      throw new UsageError(`--query-init must be a number >= 0 or 'xavier', got '${flags.queryInit}'`)
    }
    overrides.queryInit = value
  }
  if (flags.preset === 'minimal') {
    for (const key of ['dModel', 'nKvHeads', 'nLayers', 'dMlp', 'attnOnly'] as const) {
      if (overrides[key] !== undefined) throw new UsageError(`${kebab(key)} does not apply to --preset minimal (its width is dVocab + nCtx, one attention-only layer)`)
    }
    return createConfig({ architecture: 'minimal', dVocab, nCtx, seed, ...overrides })
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
  return createConfig({ ...rest, dVocab, nCtx, seed, ...merged })
}

/** The optimizer the flags describe. */
export function optimizerOf(flags: OptimizationFlags): OptimizerOptions {
  return flags.optimizer === 'sgd'
    ? { kind: 'sgd', momentum: flags.momentum, weightDecay: flags.weightDecay ?? 0 }
    : { kind: 'adamw', weightDecay: flags.weightDecay ?? 0.01 }
}

/** The learning-rate schedule the flags describe. */
export function scheduleOf(flags: OptimizationFlags): ScheduleOptions {
  switch (flags.schedule) {
    case 'constant':
      return { kind: 'constant' }
    case 'warmup-cosine':
      return { kind: 'warmup-cosine', warmupSteps: flags.warmup }
    case 'plateau':
      return { kind: 'reduce-on-plateau', patience: 10, factor: 0.5 }
  }
}

/** Flags given on the command line among `keys`. */
export function givenFlags(command: Command, keys: readonly string[]): string[] {
  return keys.filter((key) => command.getOptionValueSource(key) === 'cli')
}
