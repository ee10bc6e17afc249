/**
 * Flags shared by the commands that train a model on a task (`attnlab train`,
 * `attnlab emergence`): task flags (the task's fixed parameters), model flags, and training
 * flags, with their conversion into `@attnlab/markov` / `@attnlab/transformer` configurations.
 */
import { type Command, Option } from 'commander'
import {
  TASK_KINDS,
  defaultCellularAutomatonConfig,
  defaultIclMarkovConfig,
  defaultLinearMapConfig,
  defaultSparseMarkovConfig,
  type AnyTask,
  type TaskKind,
} from '@attnlab/markov'
import { presetConfig, type OptimizerOptions, type ScheduleOptions, type TransformerConfig } from '@attnlab/transformer'
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
export const TASK_KEYS = [
  'task',
  'taskSeed',
  'vocab',
  'spans',
  'm',
  'tau',
  'reverse',
  'stride',
  'positionWeights',
  'genLen',
  'stateSize',
  'onesPerRow',
  'states',
  'cells',
  'rules',
  'bos',
  'scoreInitial',
  'order',
  'alpha',
  'length',
] as const
/** Keys of the model flags. */
export const MODEL_KEYS = [
  'preset',
  'dModel',
  'nHeads',
  'nKvHeads',
  'nLayers',
  'dMlp',
  'attnOnly',
  'dropout',
  'queryInit',
] as const
/** Keys of the optimisation flags that define a run (not `steps` / `evalEvery`). */
export const OPTIMIZATION_KEYS = [
  'batch',
  'lr',
  'optimizer',
  'weightDecay',
  'momentum',
  'gradClip',
  'schedule',
  'warmup',
  'trainSize',
  'validationSize',
] as const

/** `--foo-bar` for a camelCase key. */
export function kebab(key: string): string {
  return `--${key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`
}

/**
 * Per-task defaults a command applies to the task flags not given on the command line, keyed by
 * task kind, then by flag key (e.g. `attnlab emergence` runs the linear map with
 * `{ 'linear-map': { stateSize: 8, onesPerRow: 2 } }`). Keys that are not task flags are ignored.
 */
export type TaskFlagDefaults = Readonly<Record<string, Readonly<Record<string, unknown>>>>

/** The task flags' defaults in `@attnlab/markov` (what a command without its own defaults uses). */
function packageTaskDefaults(): Partial<Record<TaskKind, Record<string, unknown>>> {
  const sparse = defaultSparseMarkovConfig()
  const linear = defaultLinearMapConfig()
  const automaton = defaultCellularAutomatonConfig()
  const icl = defaultIclMarkovConfig()
  return {
    'sparse-markov': {
      vocab: sparse.vocabSize,
      spans: sparse.spans,
      m: sparse.m,
      tau: sparse.tau,
      genLen: sparse.genLen,
    },
    'linear-map': { stateSize: linear.stateSize, onesPerRow: linear.onesPerRow, states: linear.states },
    'cellular-automaton': { cells: automaton.cells, states: automaton.states, rules: automaton.rules ?? 'all 256' },
    'icl-markov': { vocab: icl.vocabSize, order: icl.order, alpha: icl.alpha, length: icl.seqLength },
  }
}

/** What each task flag means, per task kind it applies to (the help text, without defaults). */
const TASK_FLAG_MEANINGS = {
  vocab: [
    ['sparse-markov', 'vocabulary d'],
    ['icl-markov', 'states k'],
  ],
  spans: [['sparse-markov', 'span lengths, oldest first']],
  m: [['sparse-markov', 'importance base, c_i = m^i']],
  tau: [['sparse-markov', 'softmax temperature']],
  genLen: [['sparse-markov', 'generated tokens per sequence']],
  stateSize: [['linear-map', 'cells per state, the context length S']],
  onesPerRow: [['linear-map', 'ones per row of M, the pattern sparsity s']],
  states: [
    ['linear-map', 'states per sequence'],
    ['cellular-automaton', 'states per sequence'],
  ],
  cells: [['cellular-automaton', 'cells per state']],
  rules: [['cellular-automaton', 'Wolfram rules to draw from']],
  order: [['icl-markov', 'chain order']],
  alpha: [['icl-markov', 'Dirichlet concentration']],
  length: [['icl-markov', 'tokens per sequence']],
} as const satisfies Record<string, ReadonlyArray<readonly [TaskKind, string]>>

/** A task flag whose help states a default. */
export type DefaultedTaskFlag = keyof typeof TASK_FLAG_MEANINGS

/**
 * The help text of each task flag with the defaults the command really uses: its own per-task
 * defaults over `@attnlab/markov`'s. Flags listed in `commanderDefaults` get no "(default ...)"
 * here, because commander appends "(default: ...)" for them.
 */
export function taskFlagDescriptions(
  taskDefaults: TaskFlagDefaults = {},
  commanderDefaults: readonly string[] = [],
): Record<DefaultedTaskFlag, string> {
  const base = packageTaskDefaults()
  const show = (value: unknown): string => (Array.isArray(value) ? value.join(',') : String(value))
  const descriptions = {} as Record<DefaultedTaskFlag, string>
  for (const key of Object.keys(TASK_FLAG_MEANINGS) as DefaultedTaskFlag[]) {
    const meanings: ReadonlyArray<readonly [TaskKind, string]> = TASK_FLAG_MEANINGS[key]
    const parts = meanings.map(([kind, meaning]) => {
      const value = taskDefaults[kind]?.[key] ?? base[kind]?.[key]
      const stated = value === undefined || commanderDefaults.includes(key) ? '' : ` (default ${show(value)})`
      return { kind, text: `${meaning}${stated}` }
    })
    // Two kinds with the same meaning and default share one entry ("linear-map / cellular-automaton: ...").
    descriptions[key] =
      parts.length === 2 && parts[0]?.text === parts[1]?.text
        ? `${parts[0]?.kind} / ${parts[1]?.kind}: ${parts[0]?.text}`
        : parts.map((p) => `${p.kind}: ${p.text}`).join('; ')
  }
  return descriptions
}

/**
 * Adds the task flags. `--task-seed` (the seed of the task's fixed parameters) is added unless
 * `options.taskSeed` is false (`attnlab markov` uses one `--seed` for both). `options.m` makes
 * `--m` default to that value; `options.taskDefaults` are the per-task defaults the command
 * applies itself, restated in the help.
 */
export function addTaskFlags(
  command: Command,
  defaultTask = 'sparse-markov',
  options: { readonly taskSeed?: boolean; readonly m?: number; readonly taskDefaults?: TaskFlagDefaults } = {},
): Command {
  const help = taskFlagDescriptions(options.taskDefaults, options.m === undefined ? [] : ['m'])
  command.addOption(new Option('--task <kind>', 'task family').choices([...TASK_KINDS]).default(defaultTask))
  if (options.taskSeed !== false)
    command.option(
      '--task-seed <n>',
      "seed of the task's fixed parameters (teacher, matrix M)",
      intParser('--task-seed'),
      0,
    )
  return command
    .option('--vocab <d>', help.vocab, intParser('--vocab', 2, 4096))
    .option('--spans <list>', help.spans, intListParser('--spans', 1))
    .option(
      '--m <x>',
      help.m,
      numberParser('--m', 0, 100, { minExclusive: true }),
      ...(options.m === undefined ? [] : [options.m]),
    )
    .option('--tau <x>', help.tau, numberParser('--tau', 0, 1000, { minExclusive: true }))
    .option('--reverse', 'sparse-markov: make the oldest span the most important')
    .option('--stride <n>', 'sparse-markov: start-to-start distance of spans', intParser('--stride', 1))
    .option(
      '--position-weights <list>',
      'sparse-markov: within-span token weights',
      numberListParser('--position-weights'),
    )
    .option('--gen-len <n>', help.genLen, intParser('--gen-len', 1))
    .option('--state-size <S>', help.stateSize, intParser('--state-size', 2))
    .option('--ones-per-row <s>', help.onesPerRow, intParser('--ones-per-row', 1))
    .option('--states <T>', help.states, intParser('--states', 2))
    .option('--cells <S>', help.cells, intParser('--cells', 3))
    .option('--rules <list>', help.rules, intListParser('--rules', 0))
    .option('--bos', 'linear-map / cellular-automaton: prepend a BOS token')
    .option('--no-score-initial', 'linear-map / cellular-automaton: do not score the initial state')
    .option('--order <n>', help.order, intParser('--order', 1))
    .option('--alpha <x>', help.alpha, numberParser('--alpha', 0))
    .option('--length <n>', help.length, intParser('--length', 2))
}

/** Adds the model flags. */
export function addModelFlags(command: Command): Command {
  return command
    .addOption(new Option('--preset <name>', 'model preset').choices([...TRAIN_PRESETS]).default('minimal'))
    .option('--d-model <n>', 'residual width (gpt/llama)', intParser('--d-model', 1))
    .option('--n-heads <n>', 'attention heads', intParser('--n-heads', 1))
    .option('--n-kv-heads <n>', 'key/value heads (llama grouped-query attention)', intParser('--n-kv-heads', 1))
    .option('--n-layers <n>', 'blocks (gpt/llama)', intParser('--n-layers', 1))
    .option(
      '--d-mlp <n>',
      'MLP width (gpt/llama; default 4 d-model, llama 8/3; 0 = --attn-only)',
      intParser('--d-mlp', 0),
    )
    .option('--attn-only', 'attention-only blocks, no MLP (gpt/llama)')
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
    .option('--lr <x>', 'peak learning rate', numberParser('--lr', 0, Infinity, { minExclusive: true }), defaults.lr)
    .option(
      '--steps <n>',
      'total optimizer steps (a resumed run continues up to this)',
      intParser('--steps', defaults.allowZero === true ? 0 : 1),
      defaults.steps,
    )
    .addOption(new Option('--optimizer <name>', 'optimizer').choices(['adamw', 'sgd']).default('adamw'))
    .option(
      '--weight-decay <x>',
      'AdamW decoupled weight decay (default 0.01) / SGD L2 (default 0)',
      numberParser('--weight-decay', 0),
    )
    .option('--momentum <x>', 'SGD momentum', numberParser('--momentum', 0, 0.999), 0.9)
    .option('--grad-clip <x>', 'global gradient-norm clip', numberParser('--grad-clip', 0), 1)
    .addOption(
      new Option('--schedule <name>', 'learning-rate schedule')
        .choices(['constant', 'warmup-cosine', 'plateau'])
        .default('constant'),
    )
    .option('--warmup <n>', 'warmup steps for warmup-cosine', intParser('--warmup', 0), 100)
    .option(
      '--eval-every <n>',
      defaults.allowZero === true ? 'evaluate every N steps (0: only at the end)' : 'evaluate every N steps',
      intParser('--eval-every', defaults.allowZero === true ? 0 : 1),
      defaults.evalEvery,
    )
    .option(
      '--train-size <n>',
      'train on a fixed dataset of N sequences (0: fresh sequences every step)',
      intParser('--train-size', 0),
      0,
    )
    .option('--validation-size <n>', 'validation sequences', intParser('--validation-size', 1), 1024)
}

/** Most sequences a task samples in one batch (`@attnlab/markov` refuses more). */
export const MAX_SEQUENCES = 1 << 24

/** Checks the optimisation flags' limits and cross-constraints (before any work). */
export function checkOptimizationFlags(flags: OptimizationFlags, command: Command): void {
  if (flags.schedule !== 'warmup-cosine' && command.getOptionValueSource('warmup') === 'cli')
    throw new UsageError('--warmup applies to --schedule warmup-cosine')
  if (flags.optimizer !== 'sgd' && command.getOptionValueSource('momentum') === 'cli')
    throw new UsageError('--momentum applies to --optimizer sgd')
  if (flags.gradClip <= 0) throw new UsageError(`--grad-clip must be > 0, got ${flags.gradClip}`)
  if (flags.lr <= 0) throw new UsageError(`--lr must be > 0, got ${flags.lr}`)
  for (const [flag, value] of [
    ['--batch', flags.batch],
    ['--train-size', flags.trainSize],
    ['--validation-size', flags.validationSize],
  ] as const) {
    if (value > MAX_SEQUENCES)
      throw new UsageError(`${flag} ${value} is above the ${MAX_SEQUENCES} sequences a task samples at once`)
  }
  if (flags.trainSize > 0 && flags.trainSize < flags.batch)
    throw new UsageError(`--train-size ${flags.trainSize} is smaller than --batch ${flags.batch}`)
}

/** The task the task flags describe. */
export function taskOf(flags: TaskFlags, command: Command): AnyTask {
  return taskFromFlags({ ...flags, seed: flags.taskSeed } as Parameters<typeof taskFromFlags>[0], command)
}

/**
 * The model configuration for a preset and task, with the model flags applied: the preset's
 * configuration with the flags as overrides, derived by `@attnlab/transformer`'s `presetConfig`
 * alone (`--attn-only` or `--d-mlp 0` give dMlp 0; `--d-model` rederives dHead and dMlp).
 *
 * @throws {@link UsageError} for a flag that does not apply to the preset or contradicts another
 * @throws `ConfigError` (`@attnlab/core`) for a configuration the library rejects
 */
export function modelConfigOf(flags: ModelFlags, task: AnyTask, seed: number): TransformerConfig {
  const overrides = modelOverridesOf(flags)
  return presetConfig(flags.preset, { dVocab: task.vocabSize, nCtx: task.seqLength - 1, seed, ...overrides })
}

/**
 * The model flags as overrides of the preset's configuration (what {@link modelConfigOf} hands
 * to `presetConfig`, and `@attnlab/experiments`' emergence config takes as `model`).
 *
 * @throws {@link UsageError} for a flag that does not apply to the preset or contradicts another
 */
export function modelOverridesOf(flags: ModelFlags): Partial<Omit<TransformerConfig, 'architecture'>> {
  const overrides: Record<string, unknown> = {}
  if (flags.dModel !== undefined) overrides.dModel = flags.dModel
  if (flags.nHeads !== undefined) overrides.nHeads = flags.nHeads
  if (flags.nKvHeads !== undefined) overrides.nKvHeads = flags.nKvHeads
  if (flags.nLayers !== undefined) overrides.nLayers = flags.nLayers
  if (flags.dMlp !== undefined && flags.dMlp > 0) overrides.dMlp = flags.dMlp
  if (flags.attnOnly === true || flags.dMlp === 0) overrides.attnOnly = true
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
      if (overrides[key] !== undefined) {
        throw new UsageError(
          `${kebab(key)} does not apply to --preset minimal (its width is dVocab + nCtx, one attention-only layer)`,
        )
      }
    }
  } else {
    if (flags.attnOnly === true && flags.dMlp !== undefined && flags.dMlp > 0) {
      throw new UsageError(`--d-mlp ${flags.dMlp} contradicts --attn-only (an attention-only model has no MLP: dMlp 0)`)
    }
    const base = presetConfig(flags.preset)
    const dModel = flags.dModel ?? base.dModel
    const nHeads = flags.nHeads ?? base.nHeads
    if ((flags.dModel !== undefined || flags.nHeads !== undefined) && dModel % nHeads !== 0) {
      throw new UsageError(`--d-model ${dModel} is not divisible by --n-heads ${nHeads}`)
    }
  }
  return overrides as Partial<Omit<TransformerConfig, 'architecture'>>
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
