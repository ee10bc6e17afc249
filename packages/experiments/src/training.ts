/**
 * The training experiment as a library call: train a `minimal`, `gpt` or `llama` model
 * (`@attnlab/transformer`) on a task of `@attnlab/markov` with checkpoints and an exact resume;
 * what `attnlab train` and a sweep's `train` trials run. Runs in any runtime: where checkpoints go
 * is the caller's `save` callback.
 *
 * @module
 */
import { ConfigError, Rng } from '@attnlab/core'
import { configSchema, customField, enumField, integerField, parseConfig } from '@attnlab/core/schema'
import { TEXT_UNKNOWN_ID } from '@attnlab/markov'
import { createTask, type AnyTask, type MarkovTaskDescription } from '@attnlab/markov'
import {
  createTransformer,
  presetConfig,
  train,
  type EvalRecord,
  type OptimizerOptions,
  type ScheduleOptions,
  type StepRecord,
  type TeacherSource,
  type Transformer,
  type TransformerConfig,
  type TrainerState,
  type WeightData,
  transferWeights,
} from '@attnlab/transformer'
import { ExperimentInputError } from './errors.ts'
import { inductionHeadDamage, inductionProbes, inductionStep, scoreInduction } from './induction-probe.ts'
import type { EmergenceTransfer } from './emergence/run.ts'
import {
  EMERGENCE_PRESETS,
  batchFromTokens,
  checkAttentionBias,
  checkOptimizerAndSchedule,
  trainingSettingsSchema,
  type EmergenceModelOverrides,
  type TrainingSettings,
} from './emergence/config.ts'

/**
 * `attnlab train`'s documented defaults where they differ from the training schema's (the
 * emergence setting of the minimal model: batch 1024, lr 0.08, 1500 steps), evaluating every 50
 * steps.
 *
 * @category Training
 */
export const TRAINING_DEFAULTS = Object.freeze({ batch: 1024, lr: 0.08, steps: 1500, evalEvery: 50 } as const)

/**
 * One evaluation of a training run (nats; `trainLoss` NaN when the step had none).
 *
 * @category Training
 */
export interface TrainingEvaluation {
  readonly step: number
  readonly trainLoss: number
  readonly validationLoss: number
  /**
   * With the induction probe ({@link TrainingRunOptions.inductionProbe}): mean log-probability of the second
   * copy of repeated random blocks (nats).
   */
  readonly inductionLogprob?: number
  /** With the induction probe: the second copy's log-probability minus the first copy's (nats). */
  readonly inductionGain?: number
}

/**
 * How a training run trains: what a checkpoint of `attnlab train` stores as `extra.train`.
 *
 * @category Training
 */
export interface TrainingRunSettings {
  /** Sequences per step. */
  readonly batch: number
  /** Peak learning rate. */
  readonly lr: number
  readonly optimizer: OptimizerOptions
  readonly schedule: ScheduleOptions
  /** Global gradient-norm clip. */
  readonly gradClip: number
  /** Seed of initialisation, data and validation. */
  readonly seed: number
  /** 0: fresh sequences every step; else a fixed training set of this many sequences. */
  readonly trainSize: number
  /** Validation sequences. */
  readonly validationSize: number
  /**
   * The attention-bias intervention (`{ beta, layers, heads }`, see the training settings'
   * `attentionBias`), applied in every pass of the run; absent or null: none.
   */
  readonly attentionBias?: TrainingSettings['attentionBias']
  /**
   * Pre-pretraining: the run directory or checkpoint whose weights a fresh run starts from (see
   * the training settings' `initFrom`; read by {@link TrainingRunOptions.loadInitialWeights}); absent or null: none.
   */
  readonly initFrom?: string | null
}

/**
 * Options of {@link runTraining}.
 *
 * @category Training
 */
export interface TrainingRunOptions {
  /** Total steps (a resumed run continues up to this). */
  readonly steps: number
  /** Evaluate every N steps (0: only at the end). */
  readonly evalEvery: number
  /** Also call `save` every N steps (0: only at the end). */
  readonly checkpointEvery: number
  /** Continue a run: its trainer state, weights and evaluations so far (exact on cpu). */
  readonly resume?: {
    readonly state: TrainerState
    readonly weights: Map<string, { shape: number[]; data: Float32Array }>
    readonly evaluations: readonly TrainingEvaluation[]
  }
  /** Stops after the current step (then `save` is called and the result has `stopped: true`). */
  readonly signal?: AbortSignal
  /** Called after each step (the CLI lets pending events, such as a stop signal, run here). */
  readonly onStep?: (record: StepRecord) => void | Promise<void>
  /** Called with each evaluation, after it was added to the evaluations. */
  readonly onEval?: (record: EvalRecord) => void
  /**
   * Reads the weights of `settings.initFrom` (`@attnlab/experiments/node`'s `loadInitialWeights`);
   * needed for a fresh run with `initFrom` (a resumed run starts from its checkpoint).
   */
  readonly loadInitialWeights?: (initFrom: string) => Promise<{ readonly source: string; readonly weights: WeightData }>
  /**
   * Score `@attnlab/knockout`'s induction probe at every evaluation (into the evaluations'
   * `inductionLogprob` and `inductionGain`) and knock out each head on it at the end (the result's
   * `induction`); default false.
   */
  readonly inductionProbe?: boolean
  /** Keeps a checkpoint: every `checkpointEvery` steps and at the end, with the evaluations so far. */
  readonly save?: (model: Transformer, state: TrainerState, evaluations: readonly TrainingEvaluation[]) => Promise<void>
}

/**
 * What {@link runTraining} returns.
 *
 * @category Training
 */
export interface TrainingRunResult {
  /** The step reached. */
  readonly steps: number
  /** Whether the signal stopped the run before `steps`. */
  readonly stopped: boolean
  /** Nats (null when no step ran). */
  readonly finalTrainLoss: number | null
  /** Nats. */
  readonly finalValidationLoss: number
  /** Training tokens of this session, and per second of training. */
  readonly tokens: number
  readonly tokensPerSecond: number
  /** Seconds of training in this session. */
  readonly seconds: number
  /** Every evaluation of the run, earlier sessions' included, one per step. */
  readonly evaluations: readonly TrainingEvaluation[]
  /** A fresh run with `initFrom`: the checkpoint it started from and the parameters copied / re-initialised. */
  readonly transfer: EmergenceTransfer | null
  /**
   * With the induction probe: the step induction appeared ({@link inductionStep}, null when it did not),
   * the final gain (nats) and each head's damage to it (single-head zero ablation, largest first); else null.
   */
  readonly induction: {
    readonly step: number | null
    readonly finalGain: number | null
    readonly heads: readonly { readonly head: string; readonly damage: number }[]
  } | null
}

type OffsetGroups = readonly { readonly name: string; readonly offsets: readonly number[] }[]

function isTeacher(task: AnyTask): task is AnyTask & TeacherSource {
  return (
    typeof (task as Partial<TeacherSource>).teacherProbabilities === 'function' &&
    (task as Partial<TeacherSource>).teacher !== undefined
  )
}

/**
 * Trains a model of `config` on `task`: data and validation from `settings.seed` (a fixed
 * training set when `trainSize` > 0, with the span-mass and teacher metrics of the task; fresh
 * sequences every step otherwise), `@attnlab/transformer`'s `train` with evaluations every
 * `evalEvery` steps and `save` every `checkpointEvery` steps and at the end. The model is
 * disposed before it returns. Choose a tensor backend first (`useBackend` of `@attnlab/core`);
 * the numbers are those of `attnlab train` with the same settings.
 *
 * @param task - the task (`createTask(description)` of `@attnlab/markov`)
 * @param config - the model configuration (`presetConfig(preset, { dVocab, nCtx, seed, ... })`)
 * @param settings - batch, learning rate, optimizer, schedule, clip, seed, data sizes
 * @param options - steps, evaluation and checkpoint intervals, resume, signal, callbacks
 * @returns the final losses, throughput and every evaluation
 * @throws `ConfigError` (`@attnlab/core`) for settings the trainer refuses; `NonFiniteError` for a
 *   diverging loss
 * @category Training
 */
export async function runTraining(
  task: AnyTask,
  config: TransformerConfig,
  settings: TrainingRunSettings,
  options: TrainingRunOptions,
): Promise<TrainingRunResult> {
  const model = createTransformer(config)
  const evaluations: TrainingEvaluation[] = [...(options.resume?.evaluations ?? [])]
  let transfer: EmergenceTransfer | null = null
  try {
    if (options.resume !== undefined) model.setWeights(options.resume.weights)
    else if (settings.initFrom !== undefined && settings.initFrom !== null) {
      if (options.loadInitialWeights === undefined) {
        throw new ExperimentInputError(
          'initFrom',
          `cannot read ${settings.initFrom}: give options.loadInitialWeights (@attnlab/experiments/node's ` +
            'loadInitialWeights)',
        )
      }
      const loaded = await options.loadInitialWeights(settings.initFrom)
      transfer = { source: loaded.source, ...transferWeights(model, loaded.weights) }
    }
    const root = Rng.fromSeed(settings.seed)
    const source = settings.trainSize > 0 ? task.sample(settings.trainSize, root.split('dataset')) : task
    // A task with a held-out split (a text's validation chapters) validates on it.
    const held = task as { sampleValidation?: AnyTask['sample'] }
    const validation =
      typeof held.sampleValidation === 'function'
        ? held.sampleValidation.call(task, settings.validationSize, root.split('validation'))
        : task.sample(settings.validationSize, root.split('validation'))
    // Random blocks of the probe: the task's tokens (a text's characters without the unknown id).
    const pool = Array.from({ length: task.vocabSize }, (_, i) => i).filter(
      (t) => task.kind !== 'text-chars' || t !== TEXT_UNKNOWN_ID,
    )
    const probes = options.inductionProbe === true ? inductionProbes(model.config, pool) : null
    const save = options.save
    const result = await train(model, source, {
      steps: options.steps,
      batchSize: settings.batch,
      lr: settings.lr,
      optimizer: settings.optimizer,
      schedule: settings.schedule,
      gradClip: settings.gradClip,
      seed: settings.seed,
      evalEvery: options.evalEvery,
      validation,
      ...(source === task
        ? {}
        : {
            analysis: {
              offsetGroups: (task as { offsetGroups?: OffsetGroups }).offsetGroups ?? [],
              ...(isTeacher(task) ? { teacher: task } : {}),
            },
          }),
      checkpointEvery: options.checkpointEvery,
      ...(settings.attentionBias === undefined || settings.attentionBias === null
        ? {}
        : { attentionBias: settings.attentionBias }),
      ...(save === undefined ? {} : { onCheckpoint: (state: TrainerState) => save(model, state, evaluations) }),
      ...(options.signal === undefined ? {} : { signal: options.signal }),
      ...(options.onStep === undefined ? {} : { onStep: options.onStep }),
      ...(options.resume === undefined ? {} : { resume: options.resume.state }),
      onEval: async (record: EvalRecord) => {
        // A session stopped before its first evaluation reports one at its step, off the schedule: shown, not kept
        // in the run's evaluations (an uninterrupted run has none there).
        if (record.step !== options.steps && (options.evalEvery === 0 || record.step % options.evalEvery !== 0)) {
          options.onEval?.(record)
          return
        }
        // One row per step (a run stopped right after resuming evaluates its checkpoint's step again).
        while (
          evaluations.length > 0 &&
          (evaluations[evaluations.length - 1] as TrainingEvaluation).step >= record.step
        )
          evaluations.pop()
        const scores = probes === null ? null : await scoreInduction(model, probes)
        evaluations.push({
          step: record.step,
          trainLoss: record.trainLoss,
          validationLoss: record.validationLoss,
          ...(scores === null ? {} : { inductionLogprob: scores.logprob, inductionGain: scores.gain }),
        })
        options.onEval?.(record)
      },
    })
    const last = evaluations[evaluations.length - 1]
    const induction =
      probes === null
        ? null
        : {
            step: inductionStep(evaluations),
            finalGain: last?.inductionGain ?? null,
            heads: await inductionHeadDamage(model, probes),
          }
    return {
      induction,
      steps: result.steps,
      stopped: result.stopped,
      finalTrainLoss: result.finalTrainLoss,
      finalValidationLoss: result.finalValidationLoss,
      tokens: result.tokens,
      tokensPerSecond: result.tokensPerSecond,
      seconds: result.seconds,
      evaluations,
      transfer,
    }
  } finally {
    model.dispose()
  }
}

const training = trainingSettingsSchema.shape

/**
 * The schema of a {@link TrainingConfig}: a training run as plain JSON (what a sweep's `train`
 * trial settings are), with `attnlab train`'s defaults ({@link TRAINING_DEFAULTS}, the training
 * schema's for the rest). The task and the model overrides are checked by their packages.
 *
 * @category Training
 */
export const trainingConfigSchema = configSchema({
  /** The task, as `@attnlab/markov`'s `createTask` reads it: `{ kind, ...overrides }`. */
  task: customField<MarkovTaskDescription>('the task, { kind, ...overrides }').default(
    (): MarkovTaskDescription => ({ kind: 'sparse-markov' }),
  ),
  /** The model preset. */
  preset: enumField('model preset', EMERGENCE_PRESETS as unknown as ['minimal', 'gpt', 'gpt-nano', 'llama']).default(
    'minimal',
  ),
  /** Overrides of the preset's configuration. */
  model: customField<EmergenceModelOverrides>("overrides of the preset's model configuration").default(() => ({})),
  /** Seed of initialisation, data and validation. */
  seed: integerField('seed of initialisation, data and validation', { min: 0 }).default(0),
  steps: integerField('total optimizer steps', { min: 1 }).default(TRAINING_DEFAULTS.steps),
  batchSize: training.batchSize.default(TRAINING_DEFAULTS.batch),
  lr: training.lr.default(TRAINING_DEFAULTS.lr),
  optimizer: training.optimizer,
  schedule: training.schedule,
  gradClip: training.gradClip,
  trainSize: training.trainSize,
  validationSize: training.validationSize,
  attentionBias: training.attentionBias,
  initFrom: training.initFrom,
  batchTokens: training.batchTokens,
  evalEvery: integerField('evaluate every N steps (0: only at the end)', { min: 0 }).default(
    TRAINING_DEFAULTS.evalEvery,
  ),
  checkpointEvery: integerField('also write the checkpoint every N steps (0: only at the end)', { min: 0 }).default(0),
  /**
   * `'induction'`: score `@attnlab/knockout`'s induction probe at every evaluation and knock out each head on it at
   * the end (Baherwani et al., arXiv 2606.25010, the language-model observation); null (default): no probe.
   */
  probe: enumField('a probe scored at every evaluation', ['induction']).nullable().default(null),
})

/**
 * A training run as plain JSON ({@link trainingConfigSchema}; {@link defaultTrainingConfig}).
 *
 * @category Training
 */
export type TrainingConfig = ReturnType<typeof defaultTrainingConfig>

/**
 * `attnlab train`'s default run as a {@link TrainingConfig}: the sparse Markov chain of
 * `@attnlab/markov` (the papers' settings) on the minimal model, AdamW lr 0.08, 1500 steps of 1024
 * fresh sequences, seed 0.
 *
 * @returns a fresh config (edit it freely)
 * @category Training
 */
export function defaultTrainingConfig() {
  return parseConfig(trainingConfigSchema, {}, 'training config')
}

/**
 * Validates a training run and derives what it runs on: the task built, the model configuration
 * from `presetConfig(preset, { dVocab, nCtx, seed, ...model })`, the settings {@link runTraining}
 * takes.
 *
 * @param config - the run (partial: missing fields take their defaults)
 * @returns the task, the model configuration, the settings, the steps and intervals
 * @throws `ConfigError` (`@attnlab/core`, code `INVALID_CONFIG`) naming the field: an unknown key
 *   (with did-you-mean), a value out of range, a bad task or model configuration,
 *   `trainSize` below one batch
 * @category Training
 */
export function resolveTrainingConfig(config: Partial<TrainingConfig>): {
  readonly task: AnyTask
  readonly model: TransformerConfig
  readonly settings: TrainingRunSettings
  readonly config: TrainingConfig
} {
  const parsed = parseConfig(trainingConfigSchema, config, 'training config')
  const task = createTask(parsed.task)
  const model = presetConfig(parsed.preset, {
    dVocab: task.vocabSize,
    nCtx: task.seqLength - 1,
    seed: parsed.seed,
    ...parsed.model,
  })
  checkAttentionBias(parsed.attentionBias, task, model, 'attentionBias')
  checkOptimizerAndSchedule(parsed, '')
  const batch =
    parsed.batchTokens === null ? parsed.batchSize : batchFromTokens(parsed.batchTokens, task.seqLength, 'batchTokens')
  if (parsed.trainSize > 0 && parsed.trainSize < batch) {
    throw new ConfigError(
      'trainSize',
      `${parsed.trainSize} is smaller than batchSize ${batch}; expected 0 (fresh sequences) or at least ` + 'one batch',
      { value: parsed.trainSize },
    )
  }
  const settings: TrainingRunSettings = {
    batch,
    lr: parsed.lr,
    optimizer: parsed.optimizer,
    schedule: parsed.schedule,
    gradClip: parsed.gradClip,
    seed: parsed.seed,
    trainSize: parsed.trainSize,
    validationSize: parsed.validationSize,
    ...(parsed.attentionBias === null ? {} : { attentionBias: parsed.attentionBias }),
    ...(parsed.initFrom === null ? {} : { initFrom: parsed.initFrom }),
  }
  return Object.freeze({ task, model, settings, config: parsed })
}
