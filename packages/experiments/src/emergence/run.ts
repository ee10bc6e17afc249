/**
 * One seed of an emergence experiment: train, evaluate every N steps (validation loss, analysis
 * metrics, mean attention patterns), hand each evaluation and checkpoint to an
 * {@link EmergenceStore} (`metrics.jsonl` and `seeds/<seed>/` with `@attnlab/experiments/node`'s
 * directory store), resume exactly from a checkpoint, and stop cleanly on abort.
 *
 * @module
 */
import * as tf from '@tensorflow/tfjs-core'
import { Rng, type Task, type TokenBatch } from '@attnlab/core'
import { evaluationSetFromBatch, masksFromHeadSets, scoreMasks, type HeadRef } from '@attnlab/knockout'
import type { AnyTask, MarkovTaskDescription } from '@attnlab/markov'
import {
  Trainer,
  analyze,
  configFromJSON,
  configToJSON,
  createTransformer,
  hookName,
  type AnalysisMetrics,
  type ForwardHook,
  type HookName,
  type StepRecord,
  type TeacherSource,
  type TrainResult,
  type Transformer,
  type TransformerConfig,
  type TrainerState,
  type WeightData,
  type WeightTransfer,
  hasAttention,
  transferWeights,
} from '@attnlab/transformer'
import type { TrainingSettings } from './config.ts'
import type { PatternSnapshot } from './report.ts'
import type { MetricLine } from './stages.ts'

/**
 * Where an emergence run keeps what it computes: `@attnlab/experiments/node`'s
 * `emergenceDirectoryStore` writes the run directory (`config.json`, `metrics.jsonl`,
 * `seeds/<seed>/checkpoint`, `seeds/<seed>/patterns.json`); without one, nothing is kept but the
 * returned result. Every method may be called with the run's data as plain JSON values.
 *
 * @category Emergence
 */
export interface EmergenceStore {
  /**
   * Called once, after the configuration was validated and the oracles computed, before any
   * other method: creates the run's place and records `config.json`.
   */
  begin(record: EmergenceRecord, options: { readonly resume: boolean }): Promise<void>
  /** The evaluations recorded so far (when resuming), in the order written. */
  readMetrics(): Promise<MetricLine[]>
  /** Replaces the evaluation log (when resuming: without the lines past the checkpoints). */
  writeMetrics(lines: readonly MetricLine[]): Promise<void>
  /** Appends one evaluation to the log. */
  appendMetric(line: MetricLine): Promise<void>
  /** A seed's checkpoint, or null when it has none yet (when resuming). */
  loadCheckpoint(seed: number): Promise<SeedCheckpoint | null>
  /** A seed's attention snapshots recorded so far (when resuming). */
  readSnapshots(seed: number): Promise<PatternSnapshot[]>
  /** Saves a seed's model and trainer state (the seed can be resumed from then on). */
  saveCheckpoint(
    seed: number,
    model: Transformer,
    state: TrainerState,
    extra: Readonly<Record<string, unknown>>,
  ): Promise<void>
  /** Saves a seed's attention snapshots. */
  writeSnapshots(seed: number, snapshots: readonly PatternSnapshot[]): Promise<void>
  /**
   * The weights a run with `training.initFrom` starts from (`@attnlab/experiments/node`'s
   * `loadInitialWeights`: a run directory, a checkpoint, or a file in one), with the checkpoint
   * they came from. Optional: a store without it cannot run pre-pretraining.
   */
  loadInitialWeights?(initFrom: string): Promise<{ readonly source: string; readonly weights: WeightData }>
}

/**
 * What a pre-pretrained run started from (`config.json`'s and `summary.json`'s `transfer`): the
 * checkpoint read and, from `@attnlab/transformer`'s `planWeightTransfer`, the parameters copied,
 * re-initialised (with why) and unused. The same for every seed.
 *
 * @category Emergence
 */
export interface EmergenceTransfer extends WeightTransfer {
  /** The checkpoint directory the weights came from. */
  readonly source: string
}

/**
 * A saved seed: its weights and trainer state.
 *
 * @category Emergence
 */
export interface SeedCheckpoint {
  /** Weights by name (`Transformer.setWeights`' input). */
  readonly weights: Map<string, { shape: number[]; data: Float32Array }>
  /** The trainer state to continue from (exact resume), or null. */
  readonly trainerState: TrainerState | null
}

/**
 * What `config.json` holds: everything needed to rerun or resume (format
 * `attnlab-emergence/1`).
 *
 * @category Emergence
 */
export interface EmergenceRecord {
  readonly format: 'attnlab-emergence/1'
  /** The task's `describe()` output (`@attnlab/markov`'s `createTask` rebuilds it). */
  readonly task: MarkovTaskDescription
  /** The model configuration as JSON (`configToJSON`; seed = the first seed). */
  readonly model: Record<string, unknown>
  /** The model preset it was derived from. */
  readonly preset: string
  readonly training: TrainingSettings
  readonly seeds: readonly number[]
  /** The tensor backend the run computes on (`tf.getBackend()`). */
  readonly backend: string
  /** ISO date of the run's start. */
  readonly created: string
  /** With `training.initFrom`: what the run started from (written when it starts). */
  readonly transfer?: EmergenceTransfer
}

/**
 * Lets pending events run, so that a stop signal is seen after every step (a training loop whose
 * steps await only settled promises never returns to the event loop otherwise): `setImmediate`
 * where there is one (Node), else a zero timeout (browsers).
 */
function yieldToEventLoop(): Promise<void> {
  const immediate = (globalThis as { setImmediate?: (callback: () => void) => unknown }).setImmediate
  return new Promise((resolve) => (immediate === undefined ? setTimeout(resolve, 0) : immediate(resolve)))
}

/**
 * Drives a run from outside while it trains (a live page, a notebook): pause it between steps and
 * knock heads out at its evaluations. Every member is optional.
 *
 * @category Emergence
 */
export interface EmergenceControl {
  /**
   * Awaited after every optimizer step, before the next one: a promise that stays pending pauses
   * the run there (the abort signal is seen once it settles).
   */
  readonly afterStep?: (step: number) => Promise<void> | void
  /**
   * Read at every evaluation: the heads to knock out (zero ablation of their `hook_z` output,
   * `@attnlab/knockout`'s `scoreMasks`). When it returns any, the evaluation event also carries
   * the validation loss of the model with them knocked out ({@link KnockoutEvaluation}); the
   * training passes, the logged validation loss and the metrics are those of the intact model.
   */
  readonly knockout?: () => readonly HeadRef[]
}

/**
 * The validation loss of the model with some heads knocked out, at one evaluation.
 *
 * @category Emergence
 */
export interface KnockoutEvaluation {
  /** The heads knocked out. */
  readonly heads: readonly HeadRef[]
  /** Mean next-token loss over the validation set with them knocked out (nats). */
  readonly validationLoss: number
}

/** Callbacks for progress display. */
export interface SeedCallbacks {
  readonly onStep?: (record: StepRecord) => void
  /**
   * After each evaluation: its line, every head's mean attention pattern at that step
   * (`[head][query][key]`, as {@link meanPatterns}), and the knockout loss when heads are knocked out.
   */
  readonly onEval?: (line: MetricLine, patterns: number[][][], knockout: KnockoutEvaluation | null) => void
  /** After each checkpoint write (the seed can be resumed from then on). */
  readonly onSaved?: (step: number) => void
}

/** Result of one seed. */
export interface SeedRun {
  readonly seed: number
  readonly lines: MetricLine[]
  readonly snapshots: PatternSnapshot[]
  readonly result: TrainResult | null
  readonly stopped: boolean
  readonly tokensPerSecond: number
  readonly trainingSeconds: number
  readonly completedSteps: number
}

function isTeacher(task: AnyTask): task is AnyTask & TeacherSource {
  return (
    typeof (task as Partial<TeacherSource>).teacherProbabilities === 'function' &&
    (task as Partial<TeacherSource>).teacher !== undefined
  )
}

function subset(batch: TokenBatch, count: number): TokenBatch {
  const n = Math.min(count, batch.batchSize)
  const L = batch.seqLength
  return {
    tokens: batch.tokens.subarray(0, n * L),
    lossMask: batch.lossMask.subarray(0, n * L),
    batchSize: n,
    seqLength: L,
  }
}

/**
 * Mean attention pattern of every head (all layers) over a batch: `[head][query][key]`, in passes
 * with `fwdHooks` (a run's attention bias) when given; empty for a model without attention (the mixer).
 * The values are read back asynchronously (`data()`), so it runs on every backend, `webgpu`
 * included (a synchronous read there loses the GPU device for the reads that follow).
 */
export async function meanPatterns(
  model: Transformer,
  batch: TokenBatch,
  fwdHooks: readonly ForwardHook[] = [],
): Promise<number[][][]> {
  const { nHeads } = model.config
  const nLayers = hasAttention(model.config) ? model.config.nLayers : 0
  const L = batch.seqLength
  const T = L - 1
  const inputs = new Int32Array(batch.batchSize * T)
  for (let b = 0; b < batch.batchSize; b++) inputs.set(batch.tokens.subarray(b * L, b * L + T), b * T)
  const names: HookName[] = Array.from({ length: nLayers }, (_, l) => hookName.pattern(l))
  const means = tf.tidy(() => {
    const tokens = tf.tensor2d(inputs, [batch.batchSize, T], 'int32')
    const { cache } = model.runWithCache(tokens, { namesFilter: (name) => names.includes(name), fwdHooks })
    try {
      return names.map((name) => tf.mean(cache.get(name) as tf.Tensor4D, 0)) // [nHeads, T, T]
    } finally {
      cache.dispose()
    }
  })
  const out: number[][][] = []
  let read: tf.TypedArray[]
  try {
    read = await Promise.all(means.map((mean) => mean.data()))
  } finally {
    tf.dispose(means)
  }
  for (const data of read) {
    for (let h = 0; h < nHeads; h++) {
      const rows: number[][] = []
      for (let q = 0; q < T; q++)
        rows.push(Array.from(data.subarray((h * T + q) * T, (h * T + q + 1) * T), (x) => Math.round(x * 1e4) / 1e4))
      out.push(rows)
    }
  }
  return out
}

function lineOf(
  seed: number,
  step: number,
  tokens: number,
  seconds: number,
  trainLoss: number | null,
  validationLoss: number,
  lr: number,
  metrics: AnalysisMetrics | undefined,
): MetricLine {
  const round = (x: number): number => Math.round(x * 1e6) / 1e6
  return {
    seed,
    step,
    tokens,
    seconds: round(seconds),
    trainLoss: trainLoss === null || Number.isNaN(trainLoss) ? null : round(trainLoss),
    validationLoss: round(validationLoss),
    lr,
    spanMass: metrics?.offsetGroupMass
      ? metrics.offsetGroupMass.flatMap((layer) => layer.map((head) => head.map(round)))
      : null,
    attentionEntropy: metrics ? metrics.attentionEntropy.flatMap((layer) => layer.map(round)) : [],
    teacherKL: metrics?.teacherKL ? metrics.teacherKL.map(round) : null,
    valueAlignment: metrics?.valueAlignment ? metrics.valueAlignment.cosine.map((row) => row.map(round)) : null,
    perPositionLoss: metrics ? metrics.perPositionLoss.map((x) => (x === null ? null : round(x))) : [],
  }
}

/**
 * Trains one seed (or continues it from its checkpoint).
 *
 * @param previous - lines and snapshots already recorded for this seed (when resuming)
 */
export async function runSeed(options: {
  readonly store: EmergenceStore
  readonly seed: number
  readonly task: AnyTask
  readonly config: TransformerConfig
  readonly training: TrainingSettings
  readonly previous: {
    readonly lines: readonly MetricLine[]
    readonly snapshots: readonly PatternSnapshot[]
    readonly checkpoint: SeedCheckpoint
  } | null
  /** The weights a fresh seed starts from (pre-pretraining), transferred where name and shape fit. */
  readonly initialWeights?: WeightData | null
  readonly signal?: AbortSignal | undefined
  readonly callbacks: SeedCallbacks
  readonly control?: EmergenceControl | undefined
}): Promise<SeedRun> {
  const { store, seed, task, training, signal, callbacks, control } = options
  let resume: TrainerState | undefined
  let weights: Map<string, { shape: number[]; data: Float32Array }> | undefined
  if (options.previous !== null) {
    resume = options.previous.checkpoint.trainerState ?? undefined
    weights = options.previous.checkpoint.weights
  }
  const root = Rng.fromSeed(seed)
  const source = training.trainSize > 0 ? task.sample(training.trainSize, root.split('dataset')) : task
  const validation = task.sample(training.validationSize, root.split('validation'))
  const analysisBatch = subset(validation, training.analysisSize)
  const patternBatch = subset(validation, Math.min(64, training.analysisSize))
  const analysisOptions = {
    ...((task as Task).offsetGroups === undefined ? {} : { offsetGroups: (task as Task).offsetGroups }),
    ...(isTeacher(task) ? { teacher: task } : {}),
  }
  const lines: MetricLine[] = [...(options.previous?.lines ?? [])]
  const snapshots: PatternSnapshot[] = [...(options.previous?.snapshots ?? [])]
  // What the checkpoint records besides the model: the task (so `attnlab knockout`, `generate`,
  // ... know the task and its span capabilities, as for `attnlab train` checkpoints) and the seed.
  const extra = { command: 'emergence', seed, task: task.describe() }
  const writeSnapshots = async (): Promise<void> => {
    await store.writeSnapshots(seed, snapshots)
  }
  // The knockout evaluation set: the whole validation set, built on first use.
  let knockoutData: ReturnType<typeof evaluationSetFromBatch> | null = null
  const knockoutLoss = async (): Promise<KnockoutEvaluation | null> => {
    const heads = control?.knockout?.() ?? []
    if (heads.length === 0) return null
    knockoutData ??= evaluationSetFromBatch(validation)
    const masks = masksFromHeadSets(model.config, [heads])
    const scores = await scoreMasks(
      model,
      { name: 'validation', description: '', metric: 'loss', data: knockoutData },
      masks,
    )
    return { heads: heads.map((h) => ({ layer: h.layer, head: h.head })), validationLoss: scores.values[0] as number }
  }
  const record = async (line: MetricLine): Promise<void> => {
    lines.push(line)
    const patterns = await meanPatterns(model, patternBatch, trainer.forwardHooks)
    snapshots.push({ seed, step: line.step, label: `step ${line.step}`, patterns })
    await store.appendMetric(line)
    if (callbacks.onEval !== undefined) callbacks.onEval(line, patterns, await knockoutLoss())
  }
  // The model is the trainer's to dispose once it exists; a checkpoint that does not fit this run
  // (setWeights, or the trainer's resume checks) throws before that, so it is disposed here.
  const model = createTransformer(configFromJSON({ ...configToJSON(options.config), seed }))
  let trainer: Trainer
  try {
    if (weights !== undefined) model.setWeights(weights)
    else if (options.initialWeights !== undefined && options.initialWeights !== null)
      transferWeights(model, options.initialWeights)
    trainer = new Trainer(model, source, {
      steps: training.steps,
      batchSize: training.batchSize,
      lr: training.lr,
      optimizer: training.optimizer,
      schedule: training.schedule,
      gradClip: training.gradClip,
      seed,
      evalEvery: training.evalEvery,
      validation,
      analysis: { size: training.analysisSize, ...(isTeacher(task) ? { teacher: task } : {}) },
      checkpointEvery: training.evalEvery * 4,
      ...(training.attentionBias === null ? {} : { attentionBias: training.attentionBias }),
      ...(signal === undefined ? {} : { signal }),
      ...(resume === undefined ? {} : { resume }),
      onStep: async (record) => {
        callbacks.onStep?.(record)
        // Lets a stop signal be seen after every step, not only at the next file write.
        await yieldToEventLoop()
        await control?.afterStep?.(record.step)
      },
      onEval: async (evaluation) => {
        // A run resumed from a checkpoint at its last step has nothing to train; the trainer still reports
        // a validation loss, already logged at that step (it was appended a second time, without its train loss).
        if (lines.at(-1)?.step === evaluation.step) return
        // A session stopped before its first evaluation still reports one at its step: not one of the run's (an
        // uninterrupted run has no line there; the resumed run's next evaluation covers those steps).
        if (evaluation.step % training.evalEvery !== 0 && evaluation.step !== training.steps) return
        const state = await trainer.getState()
        await record(
          lineOf(
            seed,
            evaluation.step,
            state.tokens,
            state.seconds,
            evaluation.trainLoss,
            evaluation.validationLoss,
            evaluation.lr,
            evaluation.metrics,
          ),
        )
      },
      onCheckpoint: async (state) => {
        await store.saveCheckpoint(seed, model, state, extra)
        await writeSnapshots()
        callbacks.onSaved?.(state.step)
      },
    })
  } catch (error) {
    model.dispose()
    throw error
  }
  try {
    if (lines.length === 0) {
      // The untrained model: step 0 of every curve.
      const validationLoss = await trainer.validationLoss()
      const metrics = await analyze(model, analysisBatch, { ...analysisOptions, fwdHooks: trainer.forwardHooks })
      await record(lineOf(seed, 0, 0, 0, null, validationLoss, training.lr, metrics))
      await store.saveCheckpoint(seed, model, await trainer.getState(), extra)
      await writeSnapshots()
      callbacks.onSaved?.(0)
    }
    const result = await trainer.run()
    return {
      seed,
      lines,
      snapshots,
      result,
      stopped: result.stopped,
      tokensPerSecond: result.tokensPerSecond,
      trainingSeconds: result.seconds,
      completedSteps: result.steps,
    }
  } finally {
    trainer.dispose()
    model.dispose()
  }
}
