/**
 * Training: a generic trainer (minGPT's `Trainer` shape: options with defaults, event callbacks,
 * nothing model-specific) over a finite dataset or an online {@link Task} (the contract of `@attnlab/core`).
 *
 * One step: draw a batch, feed `tokens[:, :-1]`, score `tokens[:, 1:]` where `lossMask[:, 1:]`
 * is 1 (mean cross-entropy in nats), backpropagate, clip the global gradient norm, check the
 * loss and norm are finite (`NonFiniteError` (`@attnlab/core`) names the step otherwise; the update is not
 * applied), update with AdamW or SGD at the schedule's learning rate. Evaluations every
 * `evalEvery` steps compute the validation loss and the analysis metrics ({@link analyze}).
 *
 * Deterministic on `cpu`: data, dropout and validation come from `Rng.fromSeed(seed)` streams
 * (`'data'`, `'dropout'`, `'validation'`), and a run resumed from {@link Trainer.getState}
 * continues bit-for-bit.
 *
 * @module
 */
import * as tf from '@tensorflow/tfjs-core'
import {
  ConfigError,
  InvalidArgumentError,
  InvalidCheckpointError,
  NonFiniteError,
  Rng,
  type RngState,
  type Task,
  TooLargeError,
  type TokenBatch,
} from '@attnlab/core'
import { configSchema, customField, integerField, numberField, parseConfig, showValue, z } from '@attnlab/core/schema'
import { attentionBias, type AttentionBias, type AttentionBiasOptions } from './attention-bias.ts'
import type { ForwardHook } from './hooks.ts'
import { analyze, analyzeOptionsSchema, type AnalysisMetrics, type TeacherSource } from './metrics.ts'
import type { Transformer } from './model.ts'
import { maskedCrossEntropy } from './ops.ts'
import {
  clipByGlobalNorm,
  createOptimizer,
  decayMatrices,
  type Optimizer,
  type OptimizerOptions,
  type OptimizerState,
} from './optimizers.ts'
import { createSchedule, type Schedule, type ScheduleOptions, type ScheduleState } from './schedules.ts'

/**
 * What to train on: an online task (fresh sequences every step) or a finite dataset (sampled
 * without replacement, reshuffled every epoch; a final partial batch is dropped).
 *
 * @category Training
 */
export type TrainingSource = Task | TokenBatch

/** One training step, reported to the `onStep` callback of {@link TrainOptions}. @category Training */
export interface StepRecord {
  /** Steps completed (1 after the first update). */
  readonly step: number
  /** Training loss of this step's batch (nats, before the update). */
  readonly loss: number
  /** Learning rate used. */
  readonly lr: number
  /** Global gradient norm before clipping. */
  readonly gradNorm: number
  /** Training tokens processed so far (inputs, `batch * (seqLength - 1)` per step). */
  readonly tokens: number
  /** Seconds spent in training steps so far (excluding evaluation and callbacks). */
  readonly seconds: number
  /** `tokens / seconds`. */
  readonly tokensPerSecond: number
}

/** One evaluation, reported to the `onEval` callback of {@link TrainOptions}. @category Training */
export interface EvalRecord {
  /** Steps completed at evaluation time. */
  readonly step: number
  /** Mean training loss since the previous evaluation (nats). */
  readonly trainLoss: number
  /** Mean validation loss (nats) over the whole validation set. */
  readonly validationLoss: number
  /** Analysis metrics on the first `analysisSize` validation sequences (absent when disabled). */
  readonly metrics?: AnalysisMetrics
  /** Learning rate after the schedule saw this evaluation. */
  readonly lr: number
}

/**
 * The schema of the `analysis` option of {@link TrainOptions} (when it is not `false`): each
 * option's meaning and default, declared once.
 *
 * @category Training
 */
export const trainAnalysisOptionsSchema = configSchema({
  /** Validation sequences the analysis metrics are computed on (default 512, at most the validation set). */
  size: integerField('validation sequences the analysis metrics are computed on', { min: 1 }).default(512),
  /** The teacher, for value alignment and KL (default: the task, when it is a {@link TeacherSource}). */
  teacher: analyzeOptionsSchema.shape.teacher,
  /** Offset groups for the attention-mass metrics (default: the task's). */
  offsetGroups: analyzeOptionsSchema.shape.offsetGroups,
})

/** `> 0`, `Infinity` included (a clip of `Infinity` disables clipping). */
const positiveOrInfinity = z.custom<number>((value) => typeof value === 'number' && value > 0, {
  error: (issue) => `must be > 0 (Infinity disables clipping), got ${showValue(issue.input)}`,
})

/**
 * The schema of {@link TrainOptions}: each option's meaning, range and default, declared once.
 * Required: `steps`, `batchSize`, `lr`.
 *
 * @category Training
 */
export const trainOptionsSchema = configSchema({
  /** Total optimizer steps of the run (a resumed run continues up to this). */
  steps: integerField('total optimizer steps of the run', { min: 0 }),
  /** Sequences per step. */
  batchSize: integerField('sequences per step', { min: 1 }),
  /** Peak learning rate. */
  lr: numberField('peak learning rate', { min: 0, minExclusive: true }),
  /** Optimizer (default AdamW, weight decay 0.01; checked by `resolveOptimizerOptions`). */
  optimizer: customField<OptimizerOptions>('optimizer (default AdamW, weight decay 0.01)').optional(),
  /** Which parameters weight decay applies to (default: rank >= 2). */
  weightDecayFilter: customField<(name: string, variable: tf.Variable) => boolean>(
    'which parameters weight decay applies to (default: rank >= 2)',
  ).optional(),
  /** Schedule (default constant; checked by `resolveScheduleOptions`). */
  schedule: customField<ScheduleOptions>('learning-rate schedule (default constant)').optional(),
  /** Global gradient-norm clip (default 1.0, paper (b)); `Infinity` disables. */
  gradClip: positiveOrInfinity.default(1),
  /** Seed of data, dropout and validation streams (default 0). */
  seed: integerField('seed of data, dropout and validation streams').default(0),
  /** Evaluate every N steps (0: only at the end; default 0). */
  evalEvery: integerField('evaluate every N steps (0: only at the end)', { min: 0 }).default(0),
  /**
   * Validation data: a dataset, or (for a task source) the number of sequences to draw once
   * (default 1024; a positive integer).
   */
  validation: customField<TokenBatch | number>(
    'validation data: a dataset, or the number of sequences to draw once from the task',
  ).default(1024),
  /** Sequences per evaluation forward pass (default 1024). */
  evalBatchSize: integerField('sequences per evaluation forward pass', { min: 1 }).default(1024),
  /**
   * Analysis metrics at each evaluation: `false` disables; default on, on 512 validation
   * sequences, with the task's offset groups and teacher when the source is a task (pass them
   * here for a finite dataset). See {@link trainAnalysisOptionsSchema}.
   */
  analysis: customField<false | Readonly<z.input<typeof trainAnalysisOptionsSchema>>>(
    'analysis metrics at each evaluation (false disables)',
  ).optional(),
  /** Called after every step (awaited). */
  onStep: customField<(record: StepRecord) => void | Promise<void>>('called after every step (awaited)').optional(),
  /**
   * Called after every evaluation (awaited): every `evalEvery` steps and at the last step, and once more when a
   * session stops (signal) or has nothing to train before any of those, to report a validation loss; that one is
   * off the schedule (its step is neither a multiple of `evalEvery` nor `steps`), and an uninterrupted run does not
   * make it: a log that must equal the uninterrupted run's leaves it out.
   */
  onEval: customField<(record: EvalRecord) => void | Promise<void>>(
    'called after every evaluation (awaited)',
  ).optional(),
  /** Called with the full state every `checkpointEvery` steps and at the end (awaited), e.g. to save a checkpoint. */
  onCheckpoint: customField<(state: TrainerState) => void | Promise<void>>(
    'called with the full state every checkpointEvery steps and at the end (awaited)',
  ).optional(),
  /** Steps between `onCheckpoint` calls (default 0: only at the end). */
  checkpointEvery: integerField('steps between onCheckpoint calls (0: only at the end)', { min: 0 }).default(0),
  /** Stop early (after the current step) when aborted; the result has `stopped: true`. */
  signal: customField<AbortSignal>('stop early (after the current step) when aborted').optional(),
  /** Continue from a saved state (see {@link Trainer.getState}); the model must hold that state's weights. */
  resume: customField<TrainerState>('continue from a saved trainer state').optional(),
  /**
   * The attention-bias intervention (Baherwani et al., arXiv 2606.25010; see `attentionBias`):
   * `beta * G` added to `hook_attn_scores` of the targeted heads, `G` the task's ground-truth map
   * (`task.trueAttention()`), or a bias built with `attentionBias` (needed for a finite dataset).
   * Applied in every pass of the run: training steps, the validation loss and the analysis
   * metrics (the model is evaluated as it is trained; {@link Trainer.forwardHooks} gives the hooks
   * to other passes). Recorded in the trainer state: a resume must give the same bias.
   */
  attentionBias: customField<AttentionBiasOptions | AttentionBias>(
    'the attention-bias intervention: options of attentionBias, or a bias it built',
  ).optional(),
})

/**
 * Training options (see {@link trainOptionsSchema}). Required: `steps`, `batchSize`, `lr`.
 *
 * @category Training
 */
export type TrainOptions = Readonly<z.input<typeof trainOptionsSchema>>

/** Training options with their defaults, checked. */
type TrainSettings = z.output<typeof trainOptionsSchema>

/**
 * Everything needed to continue a run exactly (besides the model weights): JSON-serialisable
 * except the optimizer's slot arrays.
 *
 * @category Training
 */
export interface TrainerState {
  /** Format version (1). */
  readonly version: 1
  /** Steps completed. */
  readonly step: number
  /** Optimizer moments and step count. */
  readonly optimizer: OptimizerState
  /** Schedule state. */
  readonly schedule: ScheduleState
  /** The data stream (task sampling or epoch shuffles). */
  readonly dataRng: RngState
  /** The dropout stream. */
  readonly dropoutRng: RngState
  /** Finite datasets: the current epoch's order and position. */
  readonly dataset: { readonly permutation: readonly number[]; readonly cursor: number; readonly epoch: number } | null
  /** Identifies the data source (task description or dataset hash); checked on resume. */
  readonly source: Readonly<Record<string, unknown>>
  /** Settings that must match on resume. */
  readonly settings: {
    readonly batchSize: number
    readonly seed: number
    readonly lr: number
    readonly gradClip: number
    /** The attention bias (`beta`, blocks, heads); absent or null: none. */
    readonly attentionBias?: {
      readonly beta: number
      readonly layers: readonly number[]
      readonly heads: readonly number[]
    } | null
  }
  /** Training tokens processed. */
  readonly tokens: number
  /** Seconds spent in training steps. */
  readonly seconds: number
  /** Last validation loss, if any. */
  readonly lastValidationLoss: number | null
  /**
   * The training losses since the last evaluation: their sum (nats, float64, added in step order) and count, so
   * that the next evaluation's `trainLoss` after a resume is the uninterrupted run's, bit for bit. Absent (a
   * state written before this field existed): the resumed run starts with none, and its first evaluation's
   * `trainLoss` covers only the steps trained since the resume.
   */
  readonly sinceEval?: { readonly lossSum: number; readonly steps: number }
  /**
   * The training losses of the last `min(10, step)` steps (nats, oldest first), from which
   * {@link TrainResult.finalTrainLoss} is computed over the whole run. Absent (a state written before this field
   * existed): `finalTrainLoss` covers only the steps trained since the resume.
   */
  readonly recentLosses?: readonly number[]
}

/** Steps whose mean training loss is {@link TrainResult.finalTrainLoss}. */
const FINAL_LOSS_STEPS = 10

/** What {@link train} returns. @category Training */
export interface TrainResult {
  /** Steps completed (including steps before a resume). */
  readonly steps: number
  /** True if the run was stopped by `signal` before `steps`. */
  readonly stopped: boolean
  /**
   * Mean loss of the last `min(10, steps)` steps of the whole run (nats; a resumed run's earlier sessions count, see
   * {@link TrainerState.recentLosses}), or null if no step ran.
   */
  readonly finalTrainLoss: number | null
  /** Validation loss of the final evaluation (nats). */
  readonly finalValidationLoss: number
  /** Training loss of every step of this run (nats). */
  readonly losses: readonly number[]
  /** Every evaluation of this run. */
  readonly evaluations: readonly EvalRecord[]
  /** Training tokens processed (whole run, including before a resume). */
  readonly tokens: number
  /** Seconds in training steps (whole run). */
  readonly seconds: number
  /** Training tokens per second of this session's steps. */
  readonly tokensPerSecond: number
}

/** FNV-1a over a dataset's tokens and mask: detects resuming on other data. */
function fingerprint(batch: TokenBatch): string {
  let h = 0x811c9dc5
  const mix = (value: number): void => {
    h ^= value & 0xff
    h = Math.imul(h, 0x01000193) >>> 0
    h ^= (value >>> 8) & 0xff
    h = Math.imul(h, 0x01000193) >>> 0
  }
  for (let i = 0; i < batch.tokens.length; i++) mix(batch.tokens[i] as number)
  for (let i = 0; i < batch.lossMask.length; i++) mix(batch.lossMask[i] as number)
  return `${batch.batchSize}x${batch.seqLength}:${(h >>> 0).toString(16)}`
}

function isTask(source: TrainingSource): source is Task {
  return typeof (source as Task).sample === 'function'
}

function checkBatch(batch: TokenBatch, what: string): void {
  if (
    !(batch.tokens instanceof Int32Array) ||
    !(batch.lossMask instanceof Uint8Array) ||
    !Number.isSafeInteger(batch.batchSize) ||
    !Number.isSafeInteger(batch.seqLength) ||
    batch.batchSize < 1 ||
    batch.seqLength < 2 ||
    batch.tokens.length !== batch.batchSize * batch.seqLength ||
    batch.lossMask.length !== batch.tokens.length
  ) {
    throw new ConfigError(
      what,
      `expected { tokens: Int32Array, lossMask: Uint8Array } of batchSize * seqLength (>= 2) entries`,
    )
  }
}

/**
 * A training run over one model. Create, `run()`, read `getState()` for checkpoints, `dispose()`
 * (frees optimizer state; the model stays).
 *
 * @example
 * ```ts
 * const trainer = new Trainer(model, task, { steps: 1000, batchSize: 1024, lr: 0.08, evalEvery: 50 })
 * const result = await trainer.run()
 * trainer.dispose()
 * ```
 * @category Training
 */
export class Trainer {
  private readonly optimizer: Optimizer
  private readonly schedule: Schedule
  private dataRng: Rng
  private dropoutRng: Rng
  private readonly gradClip: number
  private readonly seed: number
  private readonly validation: TokenBatch
  private readonly sourceDescription: Readonly<Record<string, unknown>>
  private readonly variableNames = new Map<string, string>()
  private step: number
  private tokens: number
  private seconds: number
  private lastValidationLoss: number | null
  /** Sum (float64, in step order) and count of the training losses since the last evaluation. */
  private sinceEval = { lossSum: 0, steps: 0 }
  /** The last FINAL_LOSS_STEPS training losses of the run, oldest first. */
  private recentLosses: number[] = []
  private dataset: { permutation: number[]; cursor: number; epoch: number } | null = null
  private readonly bias: AttentionBias | null
  private readonly options: TrainSettings
  private readonly analysis: z.output<typeof trainAnalysisOptionsSchema> | null

  /**
   * @param model - the model to train (its weights change)
   * @param source - an online task or a finite dataset
   * @param options - see {@link TrainOptions}
   * @throws `ConfigError` (`@attnlab/core`) for invalid options (a misspelled option name such as `evalEvey` included)
   * or data that does not fit the model;
   *   `InvalidCheckpointError` (`@attnlab/core`) when `resume` does not fit this run
   */
  constructor(
    private readonly model: Transformer,
    private readonly source: TrainingSource,
    options: TrainOptions,
  ) {
    const settings = parseConfig(trainOptionsSchema, options, 'train')
    this.options = settings
    this.analysis =
      settings.analysis === false
        ? null
        : parseConfig(trainAnalysisOptionsSchema, settings.analysis ?? {}, 'train analysis')
    const { steps, batchSize, lr } = settings
    this.gradClip = settings.gradClip
    this.seed = settings.seed
    const root = Rng.fromSeed(this.seed)
    const { dVocab, nCtx } = model.config
    let seqLength: number
    if (isTask(source)) {
      seqLength = source.seqLength
      if (source.vocabSize > dVocab)
        throw new ConfigError('task', `the task has ${source.vocabSize} tokens but the model's dVocab is ${dVocab}`)
      this.sourceDescription = { kind: 'task', ...source.describe() }
    } else {
      checkBatch(source, 'dataset')
      seqLength = source.seqLength
      if (batchSize > source.batchSize)
        throw new ConfigError('batchSize', `${batchSize} exceeds the dataset's ${source.batchSize} sequences`)
      this.sourceDescription = { kind: 'dataset', fingerprint: fingerprint(source) }
    }
    if (seqLength - 1 > nCtx)
      throw new ConfigError(
        'task',
        `sequences of ${seqLength} tokens need nCtx >= ${seqLength - 1} (the model has ${nCtx})`,
      )
    this.bias = Trainer.resolveBias(model, source, settings.attentionBias)
    // Validation set.
    const validation = settings.validation
    if (typeof validation === 'number') {
      if (!isTask(source))
        throw new ConfigError(
          'validation',
          'a finite dataset needs an explicit validation dataset (or pass the dataset itself)',
        )
      if (!Number.isSafeInteger(validation) || validation < 1)
        throw new ConfigError('validation', `${validation} must be a positive integer`)
      this.validation = source.sample(validation, root.split('validation'))
    } else {
      checkBatch(validation, 'validation')
      if (validation.seqLength !== seqLength)
        throw new ConfigError(
          'validation',
          `validation sequences have ${validation.seqLength} tokens, training ones ${seqLength}`,
        )
      this.validation = validation
    }
    this.checkTokens(this.validation, 'validation')
    if (!isTask(source)) this.checkTokens(source, 'dataset')
    const variables = model.getWeights()
    for (const [name, variable] of variables) this.variableNames.set(variable.name, name)
    this.optimizer = createOptimizer(
      variables,
      settings.optimizer ?? { kind: 'adamw' }, // the library's AdamW defaults
      settings.weightDecayFilter ?? decayMatrices,
    )
    this.schedule = createSchedule(settings.schedule ?? { kind: 'constant' }, lr, Math.max(steps, 1))
    this.dataRng = root.split('data')
    this.dropoutRng = root.split('dropout')
    this.step = 0
    this.tokens = 0
    this.seconds = 0
    this.lastValidationLoss = null
    if (settings.resume !== undefined) {
      try {
        this.restore(settings.resume)
      } catch (error) {
        this.optimizer.dispose()
        throw error
      }
    }
  }

  private static resolveBias(
    model: Transformer,
    source: TrainingSource,
    option: TrainOptions['attentionBias'],
  ): AttentionBias | null {
    if (option === undefined) return null
    if ('hooks' in option) return option
    if (!isTask(source) || typeof source.trueAttention !== 'function') {
      const what = isTask(source) ? `the task '${source.kind}'` : 'a finite dataset'
      throw new ConfigError(
        'attentionBias',
        `${what} has no ground-truth attention map (Task.trueAttention); expected a task with a fixed routing ` +
          'pattern (linear-map, cellular-automaton, sparse-markov) or a bias built with attentionBias()',
      )
    }
    return attentionBias(option, model.config, source.trueAttention())
  }

  /**
   * The hooks every pass of this run applies (the attention bias's, else none): give them to a
   * pass outside the trainer (`fwdHooks`) to see the model as it is trained.
   */
  get forwardHooks(): readonly ForwardHook[] {
    return this.bias?.hooks ?? []
  }

  /** The attention bias of the run as the trainer state records it, or null. */
  private biasSettings(): NonNullable<TrainerState['settings']['attentionBias']> | null {
    const bias = this.bias
    return bias === null ? null : { beta: bias.beta, layers: [...bias.layers], heads: [...bias.heads] }
  }

  private checkTokens(batch: TokenBatch, what: string): void {
    const dVocab = this.model.config.dVocab
    for (let i = 0; i < batch.tokens.length; i++) {
      const t = batch.tokens[i] as number
      if (!(t >= 0 && t < dVocab)) {
        throw new InvalidArgumentError(
          `${what}: token ${t} at sequence ${Math.floor(i / batch.seqLength)}, position ${i % batch.seqLength} is ` +
            `outside [0, ${dVocab})`,
          { value: t },
        )
      }
    }
  }

  private restore(state: TrainerState): void {
    const fail = (field: string, message: string): never => {
      throw new InvalidCheckpointError(`cannot resume: ${message}`, { field })
    }
    if (state === null || typeof state !== 'object' || state.version !== 1)
      fail(
        'version',
        `unsupported trainer state version ${String((state as { version?: unknown })?.version)} (expected 1)`,
      )
    if (!Number.isSafeInteger(state.step) || state.step < 0)
      fail('step', `step ${String(state.step)} is not a non-negative integer`)
    if (state.step > this.options.steps)
      fail('step', `the checkpoint is at step ${state.step}, past the requested ${this.options.steps} steps`)
    const settings = state.settings ?? ({} as TrainerState['settings'])
    if (settings.batchSize !== this.options.batchSize)
      fail('settings.batchSize', `the run used batch size ${settings.batchSize}, this one ${this.options.batchSize}`)
    if (settings.seed !== this.seed) fail('settings.seed', `the run used seed ${settings.seed}, this one ${this.seed}`)
    const bias = JSON.stringify(settings.attentionBias ?? null)
    if (bias !== JSON.stringify(this.biasSettings()))
      fail(
        'settings.attentionBias',
        `the run used attention bias ${bias}, this one ${JSON.stringify(this.biasSettings())}`,
      )
    if (!sameSource(state.source, this.sourceDescription)) {
      fail(
        'source',
        `the checkpoint was trained on ${JSON.stringify(state.source)}, not on ` +
          `${JSON.stringify(this.sourceDescription)}`,
      )
    }
    this.optimizer.setState(state.optimizer)
    this.schedule.setState(state.schedule)
    try {
      this.dataRng = Rng.fromState(state.dataRng)
      this.dropoutRng = Rng.fromState(state.dropoutRng)
    } catch (error) {
      fail('dataRng', `malformed random-stream state (${(error as Error).message})`)
    }
    if (isTask(this.source)) {
      if (state.dataset !== null) fail('dataset', 'the checkpoint has a dataset position but the source is a task')
    } else {
      const d = state.dataset
      const n = (this.source as TokenBatch).batchSize
      if (
        d === null ||
        !Array.isArray(d.permutation) ||
        d.permutation.length !== n ||
        !Number.isSafeInteger(d.cursor) ||
        d.cursor < 0 ||
        d.cursor > n
      ) {
        fail('dataset', `dataset position is missing or does not fit a dataset of ${n} sequences`)
      }
      const position = d as NonNullable<TrainerState['dataset']>
      this.dataset = { permutation: [...position.permutation], cursor: position.cursor, epoch: position.epoch }
    }
    const since = state.sinceEval
    if (since !== undefined) {
      if (
        since === null ||
        typeof since !== 'object' ||
        typeof since.lossSum !== 'number' ||
        !Number.isFinite(since.lossSum) ||
        since.lossSum < 0 ||
        !Number.isSafeInteger(since.steps) ||
        since.steps < 0 ||
        since.steps > state.step ||
        (since.steps === 0 && since.lossSum !== 0)
      ) {
        fail(
          'sinceEval',
          `sinceEval is ${JSON.stringify(since)}; expected { lossSum: a finite number >= 0 (0 when steps is 0), ` +
            `steps: an integer in [0, ${state.step}] }`,
        )
      }
      this.sinceEval = { lossSum: since.lossSum, steps: since.steps }
    }
    const recent = state.recentLosses
    if (recent !== undefined) {
      if (
        !Array.isArray(recent) ||
        recent.length > Math.min(FINAL_LOSS_STEPS, state.step) ||
        !recent.every((loss) => typeof loss === 'number' && Number.isFinite(loss) && loss >= 0)
      ) {
        fail(
          'recentLosses',
          `recentLosses is ${JSON.stringify(recent)}; expected at most ${Math.min(FINAL_LOSS_STEPS, state.step)} ` +
            'finite numbers >= 0',
        )
      }
      this.recentLosses = [...recent]
    }
    this.step = state.step
    this.tokens = state.tokens
    this.seconds = state.seconds
    this.lastValidationLoss = state.lastValidationLoss
  }

  /** Steps completed. */
  get completedSteps(): number {
    return this.step
  }

  /** The next training batch (advances the data stream). */
  private nextBatch(): TokenBatch {
    const { batchSize } = this.options
    if (isTask(this.source)) {
      const batch = this.source.sample(batchSize, this.dataRng)
      this.checkTokens(batch, 'task batch')
      return batch
    }
    const data = this.source
    const n = data.batchSize
    if (this.dataset === null || this.dataset.cursor + batchSize > n) {
      const permutation = Array.from({ length: n }, (_, i) => i)
      if (batchSize < n) this.dataRng.shuffle(permutation)
      this.dataset = { permutation, cursor: 0, epoch: (this.dataset?.epoch ?? -1) + 1 }
    }
    const L = data.seqLength
    const tokens = new Int32Array(batchSize * L)
    const lossMask = new Uint8Array(batchSize * L)
    for (let b = 0; b < batchSize; b++) {
      const index = this.dataset.permutation[this.dataset.cursor + b] as number
      tokens.set(data.tokens.subarray(index * L, (index + 1) * L), b * L)
      lossMask.set(data.lossMask.subarray(index * L, (index + 1) * L), b * L)
    }
    this.dataset.cursor += batchSize
    return { tokens, lossMask, batchSize, seqLength: L }
  }

  /**
   * Splits a batch into model inputs `[B, T]`, and targets / weights `[B * (T - from)]` for the
   * positions `from .. T - 1`, where `from` is the first input position whose next token some
   * sequence scores (earlier logits are not computed).
   */
  private static tensors(
    batch: TokenBatch,
    start = 0,
    count = batch.batchSize,
  ): { inputs: tf.Tensor2D; targets: tf.Tensor1D; weights: tf.Tensor1D; from: number } {
    const L = batch.seqLength
    const T = L - 1
    let from = T - 1
    for (let b = 0; b < count && from > 0; b++) {
      const row = (start + b) * L
      for (let p = 0; p < from; p++) {
        if (batch.lossMask[row + p + 1] !== 0) {
          from = p
          break
        }
      }
    }
    const inputs = new Int32Array(count * T)
    const kept = T - from
    const targets = new Int32Array(count * kept)
    const weights = new Float32Array(count * kept)
    for (let b = 0; b < count; b++) {
      const row = (start + b) * L
      for (let p = 0; p < T; p++) inputs[b * T + p] = batch.tokens[row + p] as number
      for (let p = from; p < T; p++) {
        targets[b * kept + p - from] = batch.tokens[row + p + 1] as number
        weights[b * kept + p - from] = batch.lossMask[row + p + 1] as number
      }
    }
    return {
      inputs: tf.tensor2d(inputs, [count, T], 'int32'),
      targets: tf.tensor1d(targets, 'int32'),
      weights: tf.tensor1d(weights, 'float32'),
      from,
    }
  }

  /**
   * Runs `work` (a step's forward and backward, or a validation forward); a WebAssembly trap inside the tfjs
   * `wasm` backend ("memory access out of bounds", "null function or function signature mismatch"), which is how
   * its 4 GiB heap running out shows, becomes a `TooLargeError` naming the step's attention sizes.
   *
   * @throws `TooLargeError` (`@attnlab/core`) for such a trap; the backend may be unusable in this process after it
   */
  private heapGuard<T>(what: string, batch: number, seqLength: number, work: () => T): T {
    try {
      return work()
    } catch (error) {
      // (the package's `lib` has no WebAssembly types: the class is looked up at run time)
      const trap = (globalThis as { WebAssembly?: { RuntimeError?: new () => Error } }).WebAssembly?.RuntimeError
      if (trap === undefined || !(error instanceof trap)) throw error
      const { nHeads, nLayers } = this.model.config
      const T = seqLength - 1
      const bytes = batch * nHeads * T * T * 4
      throw new TooLargeError(
        `${what} stopped inside the ${tf.getBackend()} backend (${error.message}), most likely because its heap ` +
          `(at most 4 GiB) ran out: each [batch, nHeads, nCtx, nCtx] = [${batch}, ${nHeads}, ${T}, ${T}] float32 ` +
          `attention tensor is ${(bytes / 2 ** 20).toFixed(0)} MiB, and training keeps several per layer ` +
          `(${nLayers} layers) for the backward pass; use a smaller batch or a shorter nCtx (the backend may be ` +
          'unusable in this process after such a trap)',
        { batch, nHeads, nCtx: T, nLayers, bytesPerAttentionTensor: bytes },
        { cause: error },
      )
    }
  }

  /** Mean validation loss over the whole validation set (nats, weighted by scored positions). */
  async validationLoss(): Promise<number> {
    const chunk = this.options.evalBatchSize
    let sum = 0
    let count = 0
    for (let start = 0; start < this.validation.batchSize; start += chunk) {
      const size = Math.min(chunk, this.validation.batchSize - start)
      const { inputs, targets, weights, from } = Trainer.tensors(this.validation, start, size)
      const [lossSum, scored] = this.heapGuard('the validation loss', size, this.validation.seqLength, () =>
        tf.tidy(() => {
          const logits = this.model.forwardTrusted(inputs, { logitsFrom: from, fwdHooks: this.forwardHooks })
          const rows = tf.reshape(logits, [-1, this.model.config.dVocab]) as tf.Tensor2D
          const mean = maskedCrossEntropy(rows, targets, weights)
          const total = tf.sum(weights)
          return [tf.mul(mean, total), total]
        }),
      )
      sum += (await lossSum.data())[0] as number
      count += (await scored.data())[0] as number
      tf.dispose([inputs, targets, weights, lossSum, scored])
    }
    if (count === 0)
      throw new InvalidArgumentError('the validation set has no scored positions (lossMask[:, 1:] is all 0)')
    return sum / count
  }

  /**
   * Trains until `options.steps` steps are completed (or `signal` aborts).
   *
   * @returns the run's summary
   * @throws `NonFiniteError` (`@attnlab/core`) naming the step whose loss or gradient norm is NaN/infinite;
   *   `TooLargeError` (`@attnlab/core`) when the `wasm` backend's heap runs out inside a step (a WebAssembly trap)
   */
  async run(): Promise<TrainResult> {
    const { steps, batchSize, onStep, onEval, onCheckpoint, signal } = this.options
    const { evalEvery, checkpointEvery } = this.options
    const names = [...this.model.getWeights().keys()]
    const variables = names.map((n) => this.model.getWeights().get(n) as tf.Variable)
    const losses: number[] = []
    const evaluations: EvalRecord[] = []
    let sessionTokens = 0
    let sessionSeconds = 0
    let stopped = false
    const dVocab = this.model.config.dVocab
    while (this.step < steps) {
      if (signal?.aborted) {
        stopped = true
        break
      }
      const batch = this.nextBatch()
      const started = performance.now()
      const { inputs, targets, weights, from } = Trainer.tensors(batch)
      const lr = this.schedule.learningRate(this.step)
      const { value, grads } = this.heapGuard(`training step ${this.step + 1}`, batchSize, batch.seqLength, () =>
        tf.variableGrads(() => {
          // [B, T - from, dVocab]
          const logits = this.model.forwardTrusted(inputs, {
            training: true,
            rng: this.dropoutRng,
            logitsFrom: from,
            fwdHooks: this.forwardHooks,
          })
          return maskedCrossEntropy(tf.reshape(logits, [-1, dVocab]) as tf.Tensor2D, targets, weights)
        }, variables),
      )
      const named = new Map<string, tf.Tensor>()
      for (const [variableName, grad] of Object.entries(grads))
        named.set(this.variableNames.get(variableName) as string, grad)
      const { grads: clipped, norm } = clipByGlobalNorm(named, this.gradClip)
      tf.dispose(Object.values(grads))
      const loss = (await value.data())[0] as number
      const gradNorm = (await norm.data())[0] as number
      if (!Number.isFinite(loss) || !Number.isFinite(gradNorm)) {
        tf.dispose([value, norm, inputs, targets, weights, ...clipped.values()])
        const what = !Number.isFinite(loss) ? `loss is ${loss}` : `gradient norm is ${gradNorm} (loss ${loss})`
        throw new NonFiniteError(
          `training diverged at step ${this.step + 1}: ${what}; the update was not applied (try a lower learning ` +
            'rate or gradient clipping)',
          {
            step: this.step + 1,
            loss,
            gradNorm,
          },
        )
      }
      this.optimizer.step(clipped, lr)
      tf.dispose([value, norm, inputs, targets, weights, ...clipped.values()])
      const elapsed = (performance.now() - started) / 1000
      this.step += 1
      const stepTokens = batchSize * (batch.seqLength - 1)
      this.tokens += stepTokens
      this.seconds += elapsed
      sessionTokens += stepTokens
      sessionSeconds += elapsed
      losses.push(loss)
      this.sinceEval = { lossSum: this.sinceEval.lossSum + loss, steps: this.sinceEval.steps + 1 }
      this.recentLosses = [...this.recentLosses, loss].slice(-FINAL_LOSS_STEPS)
      if (onStep !== undefined) {
        await onStep({
          step: this.step,
          loss,
          lr,
          gradNorm,
          tokens: this.tokens,
          seconds: this.seconds,
          tokensPerSecond: this.seconds > 0 ? this.tokens / this.seconds : 0,
        })
      }
      const last = this.step === steps
      if ((evalEvery > 0 && this.step % evalEvery === 0) || last) {
        const record = await this.evaluate()
        this.sinceEval = { lossSum: 0, steps: 0 }
        evaluations.push(record)
        if (onEval !== undefined) await onEval(record)
      }
      if (onCheckpoint !== undefined && ((checkpointEvery > 0 && this.step % checkpointEvery === 0) || last)) {
        await onCheckpoint(await this.getState())
      }
    }
    if (evaluations.length === 0) {
      // Stopped early or nothing to do: still report a validation loss. The uninterrupted run does not evaluate
      // here: the losses since the last evaluation are kept and the schedule does not see this loss (a
      // reduce-on-plateau schedule resumes as it was).
      const record = await this.evaluate(false)
      evaluations.push(record)
      if (onEval !== undefined) await onEval(record)
      if (onCheckpoint !== undefined && stopped) await onCheckpoint(await this.getState())
    } else if (stopped && onCheckpoint !== undefined) {
      await onCheckpoint(await this.getState())
    }
    const tail = this.recentLosses
    return {
      steps: this.step,
      stopped,
      finalTrainLoss: tail.length > 0 ? tail.reduce((a, b) => a + b, 0) / tail.length : null,
      finalValidationLoss: (evaluations[evaluations.length - 1] as EvalRecord).validationLoss,
      losses,
      evaluations,
      tokens: this.tokens,
      seconds: this.seconds,
      tokensPerSecond: sessionSeconds > 0 ? sessionTokens / sessionSeconds : 0,
    }
  }

  /** One evaluation; `scheduled` false for the report of a stopped run, which the schedule does not see. */
  private async evaluate(scheduled = true): Promise<EvalRecord> {
    const validationLoss = await this.validationLoss()
    if (scheduled) {
      this.lastValidationLoss = validationLoss
      this.schedule.onValidation(validationLoss)
    }
    const analysis = this.analysis
    let metrics: AnalysisMetrics | undefined
    if (analysis !== null) {
      const size = Math.min(analysis.size, this.validation.batchSize)
      const L = this.validation.seqLength
      const subset: TokenBatch = {
        tokens: this.validation.tokens.subarray(0, size * L),
        lossMask: this.validation.lossMask.subarray(0, size * L),
        batchSize: size,
        seqLength: L,
      }
      const groups = analysis.offsetGroups ?? (isTask(this.source) ? this.source.offsetGroups : undefined)
      const teacher =
        analysis.teacher ??
        (isTask(this.source) && typeof (this.source as unknown as TeacherSource).teacherProbabilities === 'function'
          ? (this.source as unknown as TeacherSource)
          : undefined)
      metrics = await analyze(this.model, subset, {
        ...(groups === undefined ? {} : { offsetGroups: groups }),
        ...(teacher === undefined ? {} : { teacher }),
        ...(this.bias === null ? {} : { fwdHooks: this.bias.hooks }),
      })
    }
    return {
      step: this.step,
      trainLoss: this.sinceEval.steps > 0 ? this.sinceEval.lossSum / this.sinceEval.steps : Number.NaN,
      validationLoss,
      ...(metrics === undefined ? {} : { metrics }),
      lr: this.schedule.learningRate(this.step),
    }
  }

  /** The state needed to continue exactly (see {@link TrainerState}). */
  async getState(): Promise<TrainerState> {
    return {
      version: 1,
      step: this.step,
      optimizer: await this.optimizer.getState(),
      schedule: this.schedule.getState(),
      dataRng: this.dataRng.getState(),
      dropoutRng: this.dropoutRng.getState(),
      dataset:
        this.dataset === null
          ? null
          : { permutation: [...this.dataset.permutation], cursor: this.dataset.cursor, epoch: this.dataset.epoch },
      source: this.sourceDescription,
      settings: {
        batchSize: this.options.batchSize,
        seed: this.seed,
        lr: this.options.lr,
        gradClip: this.gradClip,
        ...(this.bias === null ? {} : { attentionBias: this.biasSettings() }),
      },
      tokens: this.tokens,
      seconds: this.seconds,
      lastValidationLoss: this.lastValidationLoss,
      sinceEval: { ...this.sinceEval },
      recentLosses: [...this.recentLosses],
    }
  }

  /** Frees the optimizer's state (the model is not touched). */
  dispose(): void {
    this.optimizer.dispose()
  }
}

/**
 * Trains `model` on `source` (see {@link Trainer}, {@link TrainOptions}).
 *
 * @returns the summary: final train/validation loss (nats), evaluations, tokens/s
 * @throws `ConfigError` (`@attnlab/core`) for invalid options (a misspelled option name such as `evalEvey` included,
 * naming it and listing the allowed ones); `NonFiniteError` (`@attnlab/core`) when the loss diverges
 *   (naming the step); `InvalidCheckpointError` (`@attnlab/core`) for a resume state that does not fit
 * @example
 * ```ts
 * const task = new SparseMarkovTask({ vocabSize: 50, spans: [2, 2, 2] })
 * const model = createTransformer(presetConfig('minimal'))
 * const result = await train(model, task, { steps: 1300, batchSize: 1024, lr: 0.08, evalEvery: 25 })
 * ```
 * @category Training
 */
export async function train(model: Transformer, source: TrainingSource, options: TrainOptions): Promise<TrainResult> {
  const trainer = new Trainer(model, source, options)
  try {
    return await trainer.run()
  } finally {
    trainer.dispose()
  }
}

/**
 * Whether a checkpoint's recorded source is the run's: equal descriptions, where a setting the
 * checkpoint lacks counts as equal when the run's value is `false` (a boolean option added to a task
 * after the checkpoint was written, off by default, such as `questionFirst` of the token-level
 * retrieval tasks).
 */
function sameSource(stored: unknown, current: unknown): boolean {
  if (JSON.stringify(stored) === JSON.stringify(current)) return true
  if (stored === null || typeof stored !== 'object' || current === null || typeof current !== 'object') return false
  const trimmed: Record<string, unknown> = {}
  for (const [key, value] of Object.entries(current)) {
    if (!Object.hasOwn(stored, key)) {
      if (value !== false) return false
      continue
    }
    trimmed[key] = value
  }
  return JSON.stringify(stored) === JSON.stringify(trimmed)
}
