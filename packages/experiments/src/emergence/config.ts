/**
 * The emergence experiment's configuration: a plain typed object, its documented defaults (the
 * main job of the README and each task's own), and its validation into what `config.json` holds.
 *
 * @module
 */
import { ConfigError, checkRange, type Task } from '@attnlab/core'
import {
  configSchema,
  customField,
  enumField,
  integerField,
  listField,
  numberField,
  parseConfig,
  showValue,
  type z,
} from '@attnlab/core/schema'
import { createTask, TASK_SCHEMAS, type AnyTask, type MarkovTaskDescription, type TaskKind } from '@attnlab/markov'
import {
  attentionBias,
  attentionBiasSchema,
  configFromJSON,
  configToJSON,
  createSchedule,
  presetConfig,
  resolveOptimizerOptions,
  transformerConfigSchema,
  type OptimizerOptions,
  type ScheduleOptions,
  type TransformerConfig,
} from '@attnlab/transformer'
import type { EmergenceRecord } from './run.ts'

/**
 * Model presets an emergence run accepts.
 *
 * @category Emergence
 */
export const EMERGENCE_PRESETS = Object.freeze(['minimal', 'gpt', 'gpt-nano', 'llama', 'mixer'] as const)

/**
 * A model preset of {@link EMERGENCE_PRESETS}.
 *
 * @category Emergence
 */
export type EmergencePreset = (typeof EMERGENCE_PRESETS)[number]

/**
 * Overrides of the preset's model configuration; the vocabulary and context come from the task,
 * the seed from each run seed, and derived fields (`dHead`, `dMlp`, `nKvHeads`) are derived again
 * by `@attnlab/transformer`'s `presetConfig` unless given.
 *
 * @category Emergence
 */
export type EmergenceModelOverrides = Partial<Omit<TransformerConfig, 'architecture' | 'dVocab' | 'nCtx' | 'seed'>>

/**
 * The documented default experiment (README, "What the main job shows"): the sparse Markov chain
 * with importance base m = 1.5 on the minimal transformer (Yüksel et al., arXiv 2602.19143),
 * chosen so the three stages are clear and the run ends within 0.1 nat of the teacher entropy,
 * one span per head. With the papers' m = 1.7 the last stage (a redundant head moving to the
 * weakest, oldest span) is itself a random discovery: 4 of 10 seeds within 1500 steps; with
 * m = 1.5 all three stages happen within ~470 steps for every seed we ran.
 *
 * @category Emergence
 */
export const EMERGENCE_DEFAULTS = Object.freeze({
  task: 'sparse-markov',
  m: 1.5,
  preset: 'minimal',
  batch: 1024,
  lr: 0.08,
  steps: 1500,
  evalEvery: 25,
  analysisSize: 256,
} as const)

/**
 * The documented defaults of the other tasks, in the CLI's flag names (Baherwani et al., arXiv
 * 2606.25010: a one-layer transformer with an MLP; the minimal model cannot compute parities).
 * The linear map with S = 8 cells and s = 2 ones per row learns its output cells one at a time
 * within a few hundred steps, so five seeds show the spread of emergence steps in minutes. The
 * model-shape entries (`nLayers`, `dModel`, `nHeads`, `attnOnly`) belong to the task's default
 * preset only.
 *
 * @category Emergence
 */
export const EMERGENCE_TASK_DEFAULTS: Readonly<Record<string, Readonly<Record<string, unknown>>>> = Object.freeze({
  'linear-map': Object.freeze({
    stateSize: 8,
    onesPerRow: 2,
    preset: 'gpt',
    nLayers: 1,
    dModel: 64,
    nHeads: 8,
    lr: 0.001,
    batch: 256,
    steps: 600,
    evalEvery: 10,
  }),
  'cellular-automaton': Object.freeze({
    preset: 'gpt',
    nLayers: 2,
    dModel: 64,
    nHeads: 8,
    lr: 0.001,
    batch: 256,
    steps: 2000,
    evalEvery: 25,
  }),
  'icl-markov': Object.freeze({
    preset: 'gpt',
    nLayers: 2,
    dModel: 64,
    nHeads: 4,
    attnOnly: true,
    lr: 0.001,
    batch: 128,
    steps: 2000,
    evalEvery: 25,
  }),
})

/**
 * The training settings of {@link EMERGENCE_TASK_DEFAULTS}, by the flag names it uses, and the
 * {@link trainingSettingsSchema} field each sets; the other entries are the preset, fields of the
 * task's schema (`@attnlab/markov`'s `TASK_SCHEMAS`) or of `transformerConfigSchema` (the model shape).
 */
const TRAINING_DEFAULT_FIELDS = { steps: 'steps', batch: 'batchSize', lr: 'lr', evalEvery: 'evalEvery' } as const

/** Most sequences a task samples in one batch (`@attnlab/markov` refuses more). */
export const MAX_EMERGENCE_SEQUENCES = 1 << 24

/**
 * The schema of {@link TrainingSettings}: each setting's meaning, range and default (the sparse
 * Markov chain's {@link EMERGENCE_DEFAULTS}), declared once; the CLI's training flags take their
 * help and ranges from it.
 *
 * @category Emergence
 */
export const trainingSettingsSchema = configSchema({
  /** Total optimizer steps. */
  steps: integerField('total optimizer steps (a resumed run continues up to this)', { min: 1 }).default(
    EMERGENCE_DEFAULTS.steps,
  ),
  /** Sequences per step. */
  batchSize: integerField('sequences per step', { min: 1, max: MAX_EMERGENCE_SEQUENCES }).default(
    EMERGENCE_DEFAULTS.batch,
  ),
  /**
   * Tokens per step, fixed across context sizes (Baherwani et al., arXiv 2606.25010, the
   * cellular-automaton study): when set, `batchSize` is derived as `batchTokens / seqLength` (the
   * task's tokens per sequence), which must divide exactly and give at least one sequence; `null`:
   * `batchSize` as given.
   */
  batchTokens: integerField('tokens per step (batch = N / sequence length), fixed across context sizes', {
    min: 1,
    max: Number.MAX_SAFE_INTEGER,
  })
    .nullable()
    .default(null),
  /**
   * Peak learning rate, in (0, 10]: AdamW moves each weight by about `lr` per step, so above 10 every model here
   * diverges at once; a bound refuses a typo (`1e300`) as a usage error instead of a run of NaN losses.
   */
  lr: numberField('peak learning rate, at most 10', { min: 0, max: 10, minExclusive: true }).default(
    EMERGENCE_DEFAULTS.lr,
  ),
  /** The optimizer (`@attnlab/transformer`'s `OptimizerOptions`, checked by the trainer). */
  optimizer: customField<OptimizerOptions>('the optimizer').default(
    // AdamW with the library's weight decay, recorded in the run's configuration.
    (): OptimizerOptions => ({ kind: 'adamw', weightDecay: resolveOptimizerOptions({ kind: 'adamw' }).weightDecay }),
  ),
  /** The learning-rate schedule (`@attnlab/transformer`'s `ScheduleOptions`, checked by the trainer). */
  schedule: customField<ScheduleOptions>('the learning-rate schedule').default(
    (): ScheduleOptions => ({ kind: 'constant' }),
  ),
  /**
   * Global gradient-norm clip, in (0, 1e6]: 1e6 is far above any gradient norm these models reach, so it
   * turns clipping off in effect; larger values (`1e300`) are refused as the typos they are.
   */
  gradClip: numberField('global gradient-norm clip, at most 1e6 (which in effect turns clipping off)', {
    min: 0,
    max: 1e6,
    minExclusive: true,
  }).default(1),
  /** 0: fresh sequences every step (online); else a fixed training set of this many sequences (at least a batch). */
  trainSize: integerField('train on a fixed dataset of N sequences (0: fresh sequences every step)', {
    min: 0,
    max: MAX_EMERGENCE_SEQUENCES,
  }).default(0),
  /** Validation sequences. */
  validationSize: integerField('validation sequences', { min: 1, max: MAX_EMERGENCE_SEQUENCES }).default(1024),
  /** Evaluate every this many steps; a checkpoint every 4 evaluations. */
  evalEvery: integerField('evaluate every N steps', { min: 1 }).default(EMERGENCE_DEFAULTS.evalEvery),
  /** Sequences for the analysis metrics and attention patterns at each evaluation (at most `validationSize`). */
  analysisSize: integerField('validation sequences for the attention metrics and patterns at each evaluation', {
    min: 1,
  }).default(EMERGENCE_DEFAULTS.analysisSize),
  /**
   * The attention-bias intervention (Baherwani et al., arXiv 2606.25010; `@attnlab/transformer`'s
   * `attentionBias`): `{ beta, layers, heads }` adds `beta` nats to the pre-softmax score of every
   * ground-truth key (`task.trueAttention()`) of the targeted heads, in every pass of the run
   * (training, validation, metrics, attention snapshots); `null`: none.
   */
  attentionBias: attentionBiasSchema.nullable().default(null),
  /**
   * Pre-pretraining (Baherwani et al., arXiv 2606.25010): start each seed from the weights of
   * another run (a run directory of `attnlab emergence`, a checkpoint directory of `attnlab
   * train` or an emergence seed's, or a file in one); parameters whose name and shape fit are
   * copied, the others keep their fresh initialisation (`@attnlab/transformer`'s
   * `transferWeights`). Read by the run's store (`@attnlab/experiments/node`); `null`: none.
   */
  initFrom: customField<string | null>('start from the weights of this run directory or checkpoint').default(null),
})

/**
 * Training settings shared by every seed (AdamW or SGD on fresh or fixed sequences; the
 * `training` of `config.json`), declared by {@link trainingSettingsSchema}.
 *
 * @category Emergence
 */
export type TrainingSettings = Readonly<z.output<typeof trainingSettingsSchema>>

/**
 * The schema of an {@link EmergenceConfig}. The task and the model overrides are checked by the
 * packages that own them (`@attnlab/markov`'s `createTask`, `@attnlab/transformer`'s
 * `presetConfig`), the rest here.
 *
 * @category Emergence
 */
export const emergenceConfigSchema = configSchema({
  /** The task, as `@attnlab/markov`'s `createTask` reads it: `{ kind, ...overrides }`. */
  task: customField<MarkovTaskDescription>('the task, { kind, ...overrides }').default(
    (): MarkovTaskDescription => ({ kind: 'sparse-markov', m: EMERGENCE_DEFAULTS.m }),
  ),
  /** The model preset. */
  preset: enumField('model preset', EMERGENCE_PRESETS as unknown as [EmergencePreset, ...EmergencePreset[]]).default(
    EMERGENCE_DEFAULTS.preset,
  ),
  /** Overrides of the preset's configuration (`{}` for the preset as it is). */
  model: customField<EmergenceModelOverrides>("overrides of the preset's model configuration").default(() => ({})),
  /** Optimizer, schedule, batch, steps, evaluation and analysis sizes. */
  training: trainingSettingsSchema.default(() => parseConfig(trainingSettingsSchema, {}, 'emergence training')),
  /** Run seeds (initialisation, data and validation), one run each; the first also seeds the oracles. */
  seeds: listField('run seeds', integerField('a run seed', { min: 0 }), 1).default(() => [0]),
})

/**
 * An emergence experiment: a task, a model, how to train it, over which seeds. Plain JSON;
 * {@link defaultEmergenceConfig} gives the documented default, {@link resolveEmergenceConfig}
 * validates it (declared by {@link emergenceConfigSchema}).
 *
 * @category Emergence
 */
export type EmergenceConfig = Readonly<z.output<typeof emergenceConfigSchema>>

/**
 * The documented default experiment for a task kind, as an {@link EmergenceConfig}: the sparse
 * Markov chain's {@link EMERGENCE_DEFAULTS}, or the task's {@link EMERGENCE_TASK_DEFAULTS} over
 * `@attnlab/markov`'s task defaults; AdamW (weight decay 0.01), constant learning rate, gradient
 * clip 1, fresh sequences every step, 1024 validation sequences, seed 0.
 *
 * @param kind - the task kind (default `'sparse-markov'`)
 * @returns a fresh config (edit it freely)
 * @throws `ConfigError` (`@attnlab/core`) for an unknown task kind
 * @example
 * ```ts
 * const config = defaultEmergenceConfig()
 * const short = { ...config, training: { ...config.training, steps: 200 } }
 * ```
 * @category Emergence
 */
export function defaultEmergenceConfig(kind: TaskKind = 'sparse-markov'): EmergenceConfig {
  const own = EMERGENCE_TASK_DEFAULTS[kind] ?? {}
  if (kind !== 'sparse-markov' && EMERGENCE_TASK_DEFAULTS[kind] === undefined) {
    throw new ConfigError(
      'task.kind',
      `'${String(kind)}' is not a task kind; expected one of sparse-markov, linear-map, cellular-automaton, icl-markov`,
    )
  }
  const task: Record<string, unknown> = { kind }
  if (kind === 'sparse-markov') task.m = EMERGENCE_DEFAULTS.m
  const model: Record<string, unknown> = {}
  const training: Record<string, unknown> = {}
  // Each entry goes where its schema declares it: the task's fields, the model's, or a training setting.
  const taskFields: object = (TASK_SCHEMAS as Readonly<Record<string, { readonly shape: object }>>)[kind]?.shape ?? {}
  for (const [key, value] of Object.entries(own)) {
    if (key === 'preset') continue
    if (Object.hasOwn(taskFields, key)) task[key] = value
    else if (Object.hasOwn(transformerConfigSchema.shape, key)) model[key] = value
    else if (Object.hasOwn(TRAINING_DEFAULT_FIELDS, key))
      training[TRAINING_DEFAULT_FIELDS[key as keyof typeof TRAINING_DEFAULT_FIELDS]] = value
    else throw new ConfigError(key, `is not a ${kind} task, model or training setting (EMERGENCE_TASK_DEFAULTS)`)
  }
  return {
    task: task as MarkovTaskDescription,
    preset: (own.preset as EmergencePreset | undefined) ?? EMERGENCE_DEFAULTS.preset,
    model: model as EmergenceModelOverrides,
    training: parseConfig(trainingSettingsSchema, training, 'emergence training'),
    seeds: [0],
  }
}

/**
 * A validated experiment: the task built, the model configuration derived, and the record that
 * `config.json` holds. Frozen.
 *
 * @category Emergence
 */
export interface ResolvedEmergenceConfig {
  /** The task (built once; rebuilt identically from `record.task`). */
  readonly task: AnyTask
  /** The model configuration of the first seed (each seed replaces `seed`). */
  readonly model: TransformerConfig
  /** What `config.json` holds (`backend` and `created` are filled in when the run starts). */
  readonly record: EmergenceRecord
}

/** The cross-field rules of a parsed experiment (the ranges are the schema's). */
function checkCrossFields(config: EmergenceConfig): void {
  const { seeds, training } = config
  if (new Set(seeds).size !== seeds.length) {
    throw new ConfigError('seeds', `lists a seed twice (${seeds.join(', ')}); expected distinct seeds`)
  }
  checkRange('training.analysisSize', training.analysisSize, { integer: true, min: 1, max: training.validationSize })
  // With batchTokens the batch is derived from the task (checked by withBatchTokens).
  if (training.batchTokens === null && training.trainSize > 0 && training.trainSize < training.batchSize) {
    throw new ConfigError(
      'training.trainSize',
      `${training.trainSize} is smaller than training.batchSize ${training.batchSize}; ` +
        'expected 0 (fresh sequences) or at least one batch',
      { value: training.trainSize },
    )
  }
  if (typeof config.task !== 'object' || config.task === null || Array.isArray(config.task)) {
    throw new ConfigError('task', `expected a task description { kind, ...overrides }, got ${showValue(config.task)}`)
  }
  if (training.initFrom !== null && (typeof training.initFrom !== 'string' || training.initFrom.trim() === '')) {
    throw new ConfigError(
      'training.initFrom',
      `expected null or the path of a run directory or checkpoint, got ${showValue(training.initFrom)}`,
    )
  }
  if (typeof training.optimizer !== 'object' || training.optimizer === null) {
    throw new ConfigError(
      'training.optimizer',
      `expected { kind: 'adamw' | 'sgd', ... }, got ${showValue(training.optimizer)}`,
    )
  }
  if (typeof training.schedule !== 'object' || training.schedule === null) {
    throw new ConfigError(
      'training.schedule',
      `expected { kind: 'constant' | ... }, got ${showValue(training.schedule)}`,
    )
  }
  checkOptimizerAndSchedule(training, 'training.')
}

/**
 * Checks the optimizer and the learning-rate schedule of a run before any work, as the trainer will (their fields'
 * ranges, and the schedule against the run's steps and learning rate): a bad value is refused with the other
 * settings, not by the trainer once a run directory exists.
 *
 * @param settings - the run's optimizer, schedule, peak learning rate and steps
 * @param prefix - the settings' place in messages (`'training.'` for an emergence configuration, `''` for a train
 *   trial's)
 * @throws `ConfigError` (`@attnlab/core`) naming `<prefix>optimizer.<field>` or `<prefix>schedule.<field>`
 * @category Emergence
 */
export function checkOptimizerAndSchedule(
  settings: {
    readonly optimizer: OptimizerOptions
    readonly schedule: ScheduleOptions
    readonly lr: number
    readonly steps: number
  },
  prefix: string,
): void {
  const within = (place: string, check: () => void): void => {
    try {
      check()
    } catch (error) {
      if (!(error instanceof ConfigError)) throw error
      const message = error.message.replace(/^Invalid [^:]*: /, '')
      const field = ['optimizer', 'schedule', 'kind'].includes(error.parameter) ? '' : `.${error.parameter}`
      throw new ConfigError(`${prefix}${place}${field}`, message)
    }
  }
  within('optimizer', () => void resolveOptimizerOptions(settings.optimizer))
  within('schedule', () => void createSchedule(settings.schedule, settings.lr, Math.max(settings.steps, 1)))
}

/**
 * Checks an attention bias against the task and model before any work: the task must expose its
 * ground-truth attention, the layers and heads must exist (`@attnlab/transformer`'s `attentionBias`).
 *
 * @throws `ConfigError` (`@attnlab/core`) naming `training.attentionBias` for a task without a
 *   ground-truth map, or the bias's own field
 */
export function checkAttentionBias(
  bias: TrainingSettings['attentionBias'],
  task: AnyTask,
  model: TransformerConfig,
  parameter = 'training.attentionBias',
): void {
  if (bias === null || bias === undefined) return
  const source: Task = task
  if (source.trueAttention === undefined) {
    throw new ConfigError(
      parameter,
      `the task '${task.kind}' has no ground-truth attention map; expected a task with a fixed routing pattern ` +
        '(linear-map, cellular-automaton, sparse-markov)',
    )
  }
  attentionBias(bias, model, source.trueAttention())
}

/**
 * The batch of a tokens-per-step budget: `batchTokens / seqLength` sequences.
 *
 * @param batchTokens - tokens per step
 * @param seqLength - the task's tokens per sequence
 * @param parameter - the setting's name in messages
 * @returns sequences per step
 * @throws `ConfigError` (`@attnlab/core`) naming `parameter` when `seqLength` does not divide
 *   `batchTokens`, or the batch is below 1 or above {@link MAX_EMERGENCE_SEQUENCES}
 * @category Emergence
 */
export function batchFromTokens(batchTokens: number, seqLength: number, parameter = 'training.batchTokens'): number {
  const batch = batchTokens / seqLength
  if (batchTokens < seqLength)
    throw new ConfigError(
      parameter,
      `${batchTokens} tokens give less than one sequence of ${seqLength} tokens; expected a multiple of ${seqLength}`,
      { value: batchTokens },
    )
  if (!Number.isInteger(batch))
    throw new ConfigError(
      parameter,
      `${batchTokens} is not a multiple of the sequence length ${seqLength} (${Math.floor(batch)} sequences would ` +
        `be ${Math.floor(batch) * seqLength} tokens); expected a multiple of ${seqLength}`,
      { value: batchTokens },
    )
  if (batch > MAX_EMERGENCE_SEQUENCES)
    throw new ConfigError(parameter, `${batchTokens} tokens are ${batch} sequences, above ${MAX_EMERGENCE_SEQUENCES}`, {
      value: batchTokens,
    })
  return batch
}

/** The training settings with `batchSize` derived from `batchTokens` (when set), checked again. */
function withBatchTokens(training: TrainingSettings, seqLength: number): TrainingSettings {
  if (training.batchTokens === null) return training
  const resolved = { ...training, batchSize: batchFromTokens(training.batchTokens, seqLength) }
  if (resolved.trainSize > 0 && resolved.trainSize < resolved.batchSize) {
    throw new ConfigError(
      'training.trainSize',
      `${resolved.trainSize} is smaller than the ${resolved.batchSize} sequences of training.batchTokens ` +
        `${resolved.batchTokens}; expected 0 (fresh sequences) or at least one batch`,
      { value: resolved.trainSize },
    )
  }
  return resolved
}

/** Parses an experiment with the schema and checks its cross-field rules. */
function parseEmergenceConfig(config: unknown): EmergenceConfig {
  const parsed = parseConfig(emergenceConfigSchema, config, 'emergence')
  checkCrossFields(parsed)
  return parsed
}

/**
 * Validates an experiment and derives what it runs on: builds the task, derives the model
 * configuration with `presetConfig(preset, { dVocab, nCtx, seed, ...model })` (vocabulary and
 * context from the task: `nCtx` = sequence length - 1), checks the training settings and seeds.
 *
 * @param config - the experiment
 * @returns the frozen resolved experiment
 * @throws `ConfigError` (`@attnlab/core`, code `INVALID_CONFIG`, `parameter` naming the field): an
 *   unknown key (with did-you-mean), a value out of range (`Invalid training.steps: must be an
 *   integer >= 1, got 0`), `analysisSize` above `validationSize`, a bad task or model configuration
 * @example
 * ```ts
 * const { task, model } = resolveEmergenceConfig(defaultEmergenceConfig())
 * // task: the sparse Markov chain, d = 50, spans [2, 2, 2]; model: minimal, 3 heads
 * ```
 * @category Emergence
 */
export function resolveEmergenceConfig(config: EmergenceConfig): ResolvedEmergenceConfig {
  const parsed = parseEmergenceConfig(config)
  const task = createTask(parsed.task)
  const model = presetConfig(parsed.preset, {
    dVocab: task.vocabSize,
    nCtx: task.seqLength - 1,
    seed: parsed.seeds[0] as number,
    ...parsed.model,
  })
  checkAttentionBias(parsed.training.attentionBias, task, model)
  const training = withBatchTokens(parsed.training, task.seqLength)
  const record: EmergenceRecord = {
    format: 'attnlab-emergence/1',
    task: task.describe() as MarkovTaskDescription,
    model: configToJSON(model),
    preset: parsed.preset,
    training,
    seeds: [...parsed.seeds],
    backend: '',
    created: '',
  }
  return Object.freeze({ task, model, record: Object.freeze(record) })
}

/**
 * The resolved experiment of a recorded run (`config.json`), to resume it: the task rebuilt from
 * its description, the model configuration as recorded, optionally with more `steps`.
 *
 * @param record - a run's `config.json` (format `attnlab-emergence/1`)
 * @param options - `steps`: continue up to this many steps instead of the recorded number
 * @returns the frozen resolved experiment
 * @throws `ConfigError` (`@attnlab/core`) for a record of another format, or a task / model /
 *   training settings / seeds the packages reject
 * @category Emergence
 */
export function resolveEmergenceRecord(
  record: EmergenceRecord,
  options: { readonly steps?: number } = {},
): ResolvedEmergenceConfig {
  if (typeof record !== 'object' || record === null || record.format !== 'attnlab-emergence/1') {
    const format = typeof record === 'object' && record !== null ? String(record.format) : String(record)
    throw new ConfigError('format', `is ${format}; expected an attnlab emergence run (format attnlab-emergence/1)`)
  }
  const task = createTask(record.task)
  const model = configFromJSON(record.model)
  const steps = options.steps
  if (steps !== undefined) checkRange('training.steps', steps, { integer: true, min: 1 })
  const resolved = steps === undefined ? record : { ...record, training: { ...record.training, steps } }
  // A recorded run is checked as a new one is: an edited or corrupt config.json fails here, not mid-run.
  const { training, seeds } = parseEmergenceConfig({
    task: resolved.task,
    preset: resolved.preset,
    model: {},
    training: resolved.training,
    seeds: resolved.seeds,
  })
  checkAttentionBias(training.attentionBias, task, model)
  const derived = withBatchTokens(training, task.seqLength)
  return Object.freeze({ task, model, record: Object.freeze({ ...resolved, training: derived, seeds }) })
}
