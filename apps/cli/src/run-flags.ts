/**
 * Flags shared by the commands that train a model on a task (`attnlab train`,
 * `attnlab emergence`): task flags (the task's fixed parameters), model flags, and training
 * flags, with their conversion into `@attnlab/markov` / `@attnlab/transformer` configurations.
 */
import { type Command, Option } from 'commander'
import { fieldInfo, type FieldInfo, type z } from '@attnlab/core/schema'
import { TASK_KINDS, TASK_SCHEMAS, type AnyTask, type TaskKind } from '@attnlab/markov'
import {
  adamwOptionsSchema,
  attentionBiasSchema,
  DEFAULT_MINIMAL_QUERY_INIT,
  presetConfig,
  resolveOptimizerOptions,
  resolveScheduleOptions,
  sgdOptionsSchema,
  transformerConfigSchema,
  warmupCosineScheduleSchema,
  planWeightTransfer,
  type OptimizerOptions,
  type ScheduleOptions,
  type TransformerConfig,
  type WeightData,
  type WeightTransfer,
} from '@attnlab/transformer'
import { resolve } from 'node:path'
import { AttnlabError } from '@attnlab/core'
import { loadInitialWeights } from '@attnlab/experiments/node'
import { UsageError } from './errors.ts'
import { intParser, withFlagNames } from './options.ts'
import { fieldParser, rangeListParser, rangeParser, showDefault, unionRange } from './schema-flags.ts'
import {
  ExperimentInputError,
  MAX_EMERGENCE_SEQUENCES,
  batchFromTokens,
  checkAttentionBias,
  trainingSettingsSchema,
  type TrainingSettings,
} from '@attnlab/experiments'
import { taskFromFlags } from './commands/markov.ts'

/** Model presets a training command accepts. */
export const TRAIN_PRESETS = ['minimal', 'gpt', 'gpt-nano', 'llama', 'mixer'] as const

/**
 * The task flags: for each (commander camelCase key), the configuration field it sets in each task
 * kind it applies to, and its value placeholder. Meanings, ranges and defaults come from those
 * fields' schemas (`@attnlab/markov`'s `TASK_SCHEMAS`); a `negate` flag (`--no-score-initial`)
 * sets its boolean field to false.
 */
export const TASK_FLAG_FIELDS = {
  vocab: { placeholder: 'd', fields: { 'sparse-markov': 'vocabSize', 'icl-markov': 'vocabSize' } },
  spans: { placeholder: 'list', fields: { 'sparse-markov': 'spans' } },
  m: { placeholder: 'x', fields: { 'sparse-markov': 'm' } },
  tau: { placeholder: 'x', fields: { 'sparse-markov': 'tau' } },
  reverse: { fields: { 'sparse-markov': 'reverse' } },
  stride: { placeholder: 'n', fields: { 'sparse-markov': 'stride' } },
  positionWeights: { placeholder: 'list', fields: { 'sparse-markov': 'positionWeights' } },
  genLen: { placeholder: 'n', fields: { 'sparse-markov': 'genLen' } },
  stateSize: { placeholder: 'S', fields: { 'linear-map': 'stateSize' } },
  onesPerRow: { placeholder: 's', fields: { 'linear-map': 'onesPerRow' } },
  states: { placeholder: 'T', fields: { 'linear-map': 'states', 'cellular-automaton': 'states' } },
  cells: { placeholder: 'S', fields: { 'cellular-automaton': 'cells' } },
  rules: { placeholder: 'list', fields: { 'cellular-automaton': 'rules' } },
  bos: { fields: { 'linear-map': 'bos', 'cellular-automaton': 'bos' } },
  scoreInitial: {
    negate: true,
    fields: { 'linear-map': 'scoreInitialState', 'cellular-automaton': 'scoreInitialState' },
  },
  order: { placeholder: 'n', fields: { 'icl-markov': 'order' } },
  alpha: { placeholder: 'x', fields: { 'icl-markov': 'alpha' } },
  length: { placeholder: 'n', fields: { 'icl-markov': 'seqLength', 'text-chars': 'seqLength' } },
  nCtx: {
    placeholder: 'n',
    fields: { 'niah-tokens': 'nCtx', 'vt-tokens': 'nCtx', 'cwe-tokens': 'nCtx', 'multihop-tokens': 'nCtx' },
  },
  needles: { placeholder: 'n', fields: { 'niah-tokens': 'needles', 'multihop-tokens': 'queries' } },
  keyTokens: { placeholder: 'n', fields: { 'niah-tokens': 'keyTokens', 'multihop-tokens': 'nameTokens' } },
  valueTokens: {
    placeholder: 'n',
    fields: { 'niah-tokens': 'valueTokens', 'vt-tokens': 'valueTokens', 'multihop-tokens': 'valueTokens' },
  },
  questionFirst: {
    fields: { 'niah-tokens': 'questionFirst', 'vt-tokens': 'questionFirst', 'multihop-tokens': 'questionFirst' },
  },
} as const satisfies Record<
  string,
  { readonly placeholder?: string; readonly negate?: true; readonly fields: Partial<Record<TaskKind, string>> }
>

/** The configuration field `--task-seed` sets, per task kind that has a fixed random part. */
export const TASK_SEED_FIELDS: Readonly<Partial<Record<TaskKind, string>>> = {
  'sparse-markov': 'teacherSeed',
  'linear-map': 'matrixSeed',
}

/** A task flag's key. */
export type TaskFlagKey = keyof typeof TASK_FLAG_FIELDS

type TaskConfigOf<K extends TaskKind> = z.output<(typeof TASK_SCHEMAS)[K]>
/** The value type of a task flag: that of the configuration fields it sets. */
type TaskFlagValue<F extends TaskFlagKey> = {
  [K in keyof (typeof TASK_FLAG_FIELDS)[F]['fields'] & TaskKind]: NonNullable<
    TaskConfigOf<K>[(typeof TASK_FLAG_FIELDS)[F]['fields'][K] & keyof TaskConfigOf<K>]
  >
}[keyof (typeof TASK_FLAG_FIELDS)[F]['fields'] & TaskKind]

/** Task flags (commander camelCase keys), typed from the task schemas. */
export type TaskFlags = { task: string; taskSeed: number } & { [F in TaskFlagKey]?: TaskFlagValue<F> }

/**
 * The model flags: for each (commander camelCase key, the name of the transformer configuration
 * field it sets), its value placeholder (none for a boolean flag). Meanings and ranges come from
 * `@attnlab/transformer`'s `transformerConfigSchema`; the defaults are the preset's.
 */
export const MODEL_FLAG_FIELDS = {
  dModel: { placeholder: 'n' },
  nHeads: { placeholder: 'n' },
  nKvHeads: { placeholder: 'n' },
  nLayers: { placeholder: 'n' },
  dMlp: { placeholder: 'n' },
  attnOnly: {},
  dropout: { placeholder: 'p' },
  queryInit: { placeholder: 'eps' },
} as const satisfies Partial<Record<keyof TransformerConfig, { readonly placeholder?: string }>>

/** A model flag's key (= the configuration field it sets). */
export type ModelFlagKey = keyof typeof MODEL_FLAG_FIELDS

/**
 * Model flags, typed from the configuration fields they set (`--query-init` is kept as written:
 * a number or `xavier`, parsed by {@link modelOverridesOf}).
 */
export type ModelFlags = { preset: (typeof TRAIN_PRESETS)[number]; queryInit?: string } & {
  [K in Exclude<ModelFlagKey, 'queryInit'>]?: TransformerConfig[K]
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
  /** `--batch-tokens`: tokens per step (the batch is derived from the sequence length); absent: `--batch`. */
  batchTokens?: number
  /** `--attention-bias`: the bias's beta (nats); absent: no bias. */
  attentionBias?: number
  /** `--bias-layers`: the blocks the bias targets (default all). */
  biasLayers?: number[]
  /** `--bias-heads`: the heads the bias targets (default all). */
  biasHeads?: number[]
}

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

/** The schema fields a task flag sets, with their task kinds. */
function taskFlagFields(key: TaskFlagKey): { readonly kind: TaskKind; readonly info: FieldInfo }[] {
  const fields: Partial<Record<TaskKind, string>> = TASK_FLAG_FIELDS[key].fields
  return Object.entries(fields).map(([kind, field]) => {
    const shape = TASK_SCHEMAS[kind as TaskKind].shape as Record<string, z.ZodType>
    return { kind: kind as TaskKind, info: fieldInfo(shape[field as string] as z.ZodType) }
  })
}

/**
 * The help text of each task flag: each task kind's meaning of it (from the task's schema) with
 * the default the command really uses, its own per-task defaults over `@attnlab/markov`'s. Flags
 * listed in `commanderDefaults` get no "(default ...)" here, because commander appends
 * "(default: ...)" for them; boolean flags and fields whose default is "not given" state none.
 */
export function taskFlagDescriptions(
  taskDefaults: TaskFlagDefaults = {},
  commanderDefaults: readonly string[] = [],
): Record<TaskFlagKey, string> {
  const descriptions = {} as Record<TaskFlagKey, string>
  for (const key of Object.keys(TASK_FLAG_FIELDS) as TaskFlagKey[]) {
    const negate = 'negate' in TASK_FLAG_FIELDS[key]
    const parts = taskFlagFields(key).map(({ kind, info }) => {
      const value = info.kind === 'boolean' ? undefined : showDefault(taskDefaults[kind]?.[key] ?? info.defaultValue)
      const stated = value === undefined || commanderDefaults.includes(key) ? '' : ` (default ${value})`
      return { kind, text: `${negate ? 'do not ' : ''}${info.help}${stated}` }
    })
    // Kinds with the same meaning and default share one entry ("linear-map / cellular-automaton: ...").
    descriptions[key] =
      parts.length >= 2 && parts.every((p) => p.text === parts[0]?.text)
        ? `${parts.map((p) => p.kind).join(' / ')}: ${parts[0]?.text}`
        : parts.map((p) => `${p.kind}: ${p.text}`).join('; ')
  }
  return descriptions
}

/** `--no-score-initial`, `--bos`, `--spans <list>`: a task flag as commander declares it. */
function taskFlagSpec(key: TaskFlagKey): string {
  const entry: { readonly placeholder?: string; readonly negate?: true; readonly fields: object } =
    TASK_FLAG_FIELDS[key]
  const flag = entry.negate === true ? `--no-${kebab(key).slice(2)}` : kebab(key)
  return entry.placeholder === undefined ? flag : `${flag} <${entry.placeholder}>`
}

/**
 * Adds the task flags, each derived from the task schemas' fields it sets (help, default, parser
 * with the field's range). `--task-seed` (the seed of the task's fixed parameters) is added unless
 * `options.taskSeed` is false (`attnlab markov` uses one `--seed` for both). `options.m` makes
 * `--m` default to that value; `options.taskDefaults` are the per-task defaults the command
 * applies itself, restated in the help; `options.kinds` limits `--task` (default every kind).
 */
export function addTaskFlags(
  command: Command,
  defaultTask = 'sparse-markov',
  options: {
    readonly taskSeed?: boolean
    readonly m?: number
    readonly taskDefaults?: TaskFlagDefaults
    readonly kinds?: readonly string[]
  } = {},
): Command {
  const help = taskFlagDescriptions(options.taskDefaults, options.m === undefined ? [] : ['m'])
  const kinds = options.kinds ?? TASK_KINDS
  command.addOption(new Option('--task <kind>', 'task family').choices([...kinds]).default(defaultTask))
  if (options.taskSeed !== false)
    command.option(
      '--task-seed <n>',
      "seed of the task's fixed parameters (teacher, matrix M)",
      intParser('--task-seed', 0),
      0,
    )
  for (const key of Object.keys(TASK_FLAG_FIELDS) as TaskFlagKey[]) {
    const spec = taskFlagSpec(key)
    const option = new Option(spec, help[key])
    const parser = fieldParser(
      spec.split(' ')[0] as string,
      taskFlagFields(key).map(({ info }) => info),
    )
    if (parser !== undefined) option.argParser(parser)
    if (key === 'm' && options.m !== undefined) option.default(options.m)
    command.addOption(option)
  }
  return command
}

/**
 * Adds the model flags, each derived from the transformer configuration field it sets (help and
 * parser with the field's range); a flag not given leaves the preset's value (and what
 * `presetConfig` derives from the others).
 */
export function addModelFlags(command: Command): Command {
  command.addOption(new Option('--preset <name>', 'model preset').choices([...TRAIN_PRESETS]).default('minimal'))
  for (const [key, entry] of Object.entries(MODEL_FLAG_FIELDS) as [ModelFlagKey, { placeholder?: string }][]) {
    const flag = kebab(key)
    const info = fieldInfo(transformerConfigSchema.shape[key])
    const spec = entry.placeholder === undefined ? flag : `${flag} <${entry.placeholder}>`
    const help =
      key === 'queryInit' ? `${info.help} (default ${DEFAULT_MINIMAL_QUERY_INIT.toExponential()})` : info.help
    const option = new Option(spec, help)
    // --query-init takes a number or 'xavier' (checked by modelOverridesOf), booleans commander's own.
    if (info.kind === 'integer' || info.kind === 'number') option.argParser(rangeParser(flag, info.range ?? {}))
    command.addOption(option)
  }
  return command
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

/** A training setting's schema field (`@attnlab/experiments`' `trainingSettingsSchema`). */
function trainingField(key: keyof typeof trainingSettingsSchema.shape): FieldInfo {
  return fieldInfo(trainingSettingsSchema.shape[key])
}

/**
 * A training-setting flag: help and range from the setting's schema field, the default the
 * command gives (or the schema's); `min` overrides the range's minimum (`--steps 0` for `train`).
 */
export function trainingOption(
  spec: string,
  key: keyof typeof trainingSettingsSchema.shape,
  value?: number,
  min?: number,
): Option {
  const info = trainingField(key)
  const flag = spec.split(' ')[0] as string
  // The sampling limit is checked after parsing, by checkOptimizationFlags, with its reason.
  const { max, ...bounds } = info.range ?? {}
  const range = {
    ...bounds,
    ...(max === MAX_EMERGENCE_SEQUENCES ? {} : { max }),
    ...(min === undefined ? {} : { min }),
  }
  const help = min === 0 && key === 'evalEvery' ? `${info.help} (0: only at the end)` : info.help
  return new Option(spec, help).argParser(rangeParser(flag, range)).default(value ?? info.defaultValue)
}

/** The optimizers `--optimizer` chooses from (the kinds of `@attnlab/transformer`'s optimizer schemas). */
const OPTIMIZER_KINDS = [adamwOptionsSchema, sgdOptionsSchema].flatMap(
  (schema) => fieldInfo(schema.shape.kind).choices ?? [],
)

/**
 * The defaults of the optimizer and schedule flags that are the CLI's own (the library's SGD momentum is
 * PyTorch's 0; paper (b)'s SGD runs use 0.9); the other settings default as `@attnlab/transformer`'s schemas say.
 */
const OPTIMIZER_FLAG_DEFAULTS = { momentum: 0.9, warmup: 100 } as const

/** A number flag whose help and range are those of one schema field. */
function schemaOption(spec: string, field: z.ZodType): Option {
  const info = fieldInfo(field)
  return new Option(spec, info.help).argParser(rangeParser(spec.split(' ')[0] as string, info.range ?? {}))
}

/** `--weight-decay`: AdamW's decoupled decay or SGD's L2 term, each with its library default. */
function weightDecayOption(): Option {
  const infos = [adamwOptionsSchema, sgdOptionsSchema].map((schema) => fieldInfo(schema.shape.weightDecay))
  const help = infos.map((info) => `${info.help} (default ${showDefault(info.defaultValue)})`).join(' / ')
  return new Option('--weight-decay <x>', help).argParser(
    rangeParser('--weight-decay', unionRange(infos.map((info) => info.range))),
  )
}

/** Adds the optimisation flags (help, ranges and the defaults no command sets from the training schema). */
export function addOptimizationFlags(command: Command, defaults: OptimizationDefaults): Command {
  const zero = defaults.allowZero === true ? 0 : undefined
  return command
    .addOption(trainingOption('--batch <n>', 'batchSize', defaults.batch))
    .addOption(
      new Option(
        '--batch-tokens <n>',
        'tokens per step, fixed across context sizes: the batch is N / sequence length (instead of --batch)',
      ).argParser(rangeParser('--batch-tokens', { min: 1, integer: true })),
    )
    .addOption(trainingOption('--lr <x>', 'lr', defaults.lr))
    .addOption(trainingOption('--steps <n>', 'steps', defaults.steps, zero))
    .addOption(new Option('--optimizer <name>', 'optimizer').choices(OPTIMIZER_KINDS).default('adamw'))
    .addOption(weightDecayOption())
    .addOption(
      schemaOption('--momentum <x>', sgdOptionsSchema.shape.momentum).default(OPTIMIZER_FLAG_DEFAULTS.momentum),
    )
    .addOption(trainingOption('--grad-clip <x>', 'gradClip'))
    .addOption(
      new Option('--schedule <name>', 'learning-rate schedule')
        .choices(['constant', 'warmup-cosine', 'plateau'])
        .default('constant'),
    )
    .addOption(
      schemaOption('--warmup <n>', warmupCosineScheduleSchema.shape.warmupSteps).default(
        OPTIMIZER_FLAG_DEFAULTS.warmup,
      ),
    )
    .addOption(trainingOption('--eval-every <n>', 'evalEvery', defaults.evalEvery, zero))
    .addOption(trainingOption('--train-size <n>', 'trainSize'))
    .addOption(trainingOption('--validation-size <n>', 'validationSize'))
    .addOption(
      new Option(
        '--attention-bias <beta>',
        `${fieldInfo(attentionBiasSchema.shape.beta).help}, in every pass of the run: the attention-bias ` +
          "intervention (Baherwani et al., arXiv 2606.25010), toward the task's ground-truth map (linear-map, " +
          'cellular-automaton, sparse-markov)',
      ).argParser(rangeParser('--attention-bias', fieldInfo(attentionBiasSchema.shape.beta).range ?? {})),
    )
    .addOption(
      new Option('--bias-layers <list>', 'blocks whose heads get --attention-bias (default all), e.g. 0,1').argParser(
        rangeListParser('--bias-layers', { min: 0, integer: true }),
      ),
    )
    .addOption(
      new Option('--bias-heads <list>', 'heads that get --attention-bias (default all), e.g. 0,2').argParser(
        rangeListParser('--bias-heads', { min: 0, integer: true }),
      ),
    )
}

/**
 * Adds `--init-from RUN_OR_CHECKPOINT` (pre-pretraining): a run directory of `attnlab emergence`, a
 * checkpoint directory (`attnlab train --out`, `seeds/<seed>/checkpoint`) or a file in one.
 */
export function addInitFromFlag(command: Command): Command {
  return command.option(
    '--init-from <path>',
    'start from the weights of another run (emergence run directory, checkpoint, or a file in one): parameters ' +
      'whose name and shape fit are copied, the others initialised fresh (pre-pretraining); recorded in the run',
  )
}

/**
 * `--init-from RUN_OR_CHECKPOINT`'s path, absolute, checked before any work: its weights are read
 * (`@attnlab/experiments/node`'s `loadInitialWeights`) and compared with the model
 * (`planWeightTransfer`), so a missing or invalid source, or one with nothing in common with the
 * model, is a usage error.
 *
 * @returns the absolute path and the loaded source (null without the flag)
 * @throws {@link UsageError} naming `--init-from`; `CheckpointError` for a corrupt checkpoint (exit 2)
 */
export async function initFromOf(
  path: string | undefined,
  config: TransformerConfig,
): Promise<{
  readonly path: string
  readonly source: string
  readonly weights: WeightData
  readonly plan: WeightTransfer
} | null> {
  if (path === undefined) return null
  if (path.trim() === '') throw new UsageError('--init-from needs a run directory or checkpoint path')
  try {
    const { source, weights } = await loadInitialWeights(path)
    return { path: resolve(path), source, weights, plan: planWeightTransfer(config, weights) }
  } catch (error) {
    if (error instanceof ExperimentInputError || (error instanceof AttnlabError && error.code === 'INVALID_ARGUMENT'))
      throw new UsageError(`--init-from: ${error.message}`)
    throw error
  }
}

/**
 * The batch the flags give for a task: `--batch`, or `--batch-tokens N` / the task's sequence length.
 *
 * @throws {@link UsageError} naming `--batch-tokens` when the sequence length does not divide it, or it
 *   gives less than one sequence, or a `--train-size` below the batch
 */
export function batchOf(flags: OptimizationFlags, task: AnyTask): number {
  if (flags.batchTokens === undefined) return flags.batch
  const tokens = flags.batchTokens
  const batch = withFlagNames({ batchTokens: '--batch-tokens' }, () =>
    batchFromTokens(tokens, task.seqLength, 'batchTokens'),
  )
  if (flags.trainSize > 0 && flags.trainSize < batch)
    throw new UsageError(
      `--train-size ${flags.trainSize} is smaller than the batch of --batch-tokens ${tokens} (${batch})`,
    )
  return batch
}

/** The attention bias the flags describe (`--attention-bias`, `--bias-layers`, `--bias-heads`), or null. */
export function attentionBiasOf(flags: OptimizationFlags): TrainingSettings['attentionBias'] {
  if (flags.attentionBias === undefined) return null
  return { beta: flags.attentionBias, layers: flags.biasLayers ?? null, heads: flags.biasHeads ?? null }
}

/**
 * Checks the attention bias of the flags against the task and model before any work, with the
 * flags' names in the messages (`--bias-heads: 4 is not a head of this model; expected 0 .. 2`).
 *
 * @throws {@link UsageError} for a task without a ground-truth map, or targets the model lacks
 */
export function checkAttentionBiasFlags(flags: OptimizationFlags, task: AnyTask, config: TransformerConfig): void {
  withFlagNames(
    {
      attentionBias: '--attention-bias',
      'attentionBias.beta': '--attention-bias',
      'attentionBias.layers': '--bias-layers',
      'attentionBias.heads': '--bias-heads',
    },
    () => checkAttentionBias(attentionBiasOf(flags), task, config, 'attentionBias'),
  )
}

/** Checks the optimisation flags' sampling limit and cross-constraints (before any work). */
export function checkOptimizationFlags(flags: OptimizationFlags, command: Command): void {
  if (flags.schedule !== 'warmup-cosine' && command.getOptionValueSource('warmup') === 'cli')
    throw new UsageError('--warmup applies to --schedule warmup-cosine')
  if (flags.optimizer !== 'sgd' && command.getOptionValueSource('momentum') === 'cli')
    throw new UsageError('--momentum applies to --optimizer sgd')
  if (flags.batchTokens !== undefined && command.getOptionValueSource('batch') === 'cli')
    throw new UsageError(
      '--batch-tokens fixes the batch (N / sequence length); give --batch or --batch-tokens, not both',
    )
  for (const flag of ['biasLayers', 'biasHeads'] as const) {
    if (flags[flag] !== undefined && flags.attentionBias === undefined)
      throw new UsageError(`${kebab(flag)} applies to --attention-bias BETA (give the bias too)`)
  }
  for (const [flag, value] of [
    ['--batch', flags.batch],
    ['--train-size', flags.trainSize],
    ['--validation-size', flags.validationSize],
  ] as const) {
    if (value > MAX_EMERGENCE_SEQUENCES) {
      throw new UsageError(`${flag} ${value} is above the ${MAX_EMERGENCE_SEQUENCES} sequences a task samples at once`)
    }
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
    // W_Q entries are attention scores of the one-hot input: beyond 100 the first softmax saturates.
    if (
      value !== 'xavier' &&
      !(flags.queryInit.trim() !== '' && Number.isFinite(value) && value >= 0 && value <= 100)
    ) {
      throw new UsageError(`--query-init must be a number >= 0 (at most 100) or 'xavier', got '${flags.queryInit}'`)
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
  // weightDecay is always recorded (the library's default when not given), as in a run's config.json.
  return flags.optimizer === 'sgd'
    ? {
        kind: 'sgd',
        momentum: flags.momentum,
        weightDecay: flags.weightDecay ?? resolveOptimizerOptions({ kind: 'sgd' }).weightDecay,
      }
    : { kind: 'adamw', weightDecay: flags.weightDecay ?? resolveOptimizerOptions({ kind: 'adamw' }).weightDecay }
}

/** The learning-rate schedule the flags describe. */
export function scheduleOf(flags: OptimizationFlags): ScheduleOptions {
  switch (flags.schedule) {
    case 'constant':
      return { kind: 'constant' }
    case 'warmup-cosine':
      return { kind: 'warmup-cosine', warmupSteps: flags.warmup }
    case 'plateau': {
      // Paper (b)'s settings, the library's defaults (recorded in the run's configuration).
      const { patience, factor } = resolveScheduleOptions({ kind: 'reduce-on-plateau' })
      return { kind: 'reduce-on-plateau', patience, factor }
    }
  }
}

/** Flags given on the command line among `keys`. */
export function givenFlags(command: Command, keys: readonly string[]): string[] {
  return keys.filter((key) => command.getOptionValueSource(key) === 'cli')
}

/**
 * The keys of the flags that define a run (what a resume may not change): every option `command`
 * declares but the `resumable` ones, so a flag added to the command is run-defining without a key
 * list to update.
 *
 * @param command - the registered command (`train`, `emergence`)
 * @param resumable - the commander keys a resume may give (`--resume` itself among them)
 */
export function runDefiningKeys(command: Command, resumable: readonly string[]): string[] {
  return command.options.map((option) => option.attributeName()).filter((key) => !resumable.includes(key))
}

/** `only --steps, --backend and --json may be given`, for the resumable keys (`--resume` itself left out). */
export function resumableText(resumable: readonly string[]): string {
  const flags = resumable.filter((key) => key !== 'resume').map(kebab)
  const listed = flags.length > 1 ? `${flags.slice(0, -1).join(', ')} and ${flags.at(-1)}` : (flags[0] ?? 'no flag')
  return `only ${listed} may be given`
}
