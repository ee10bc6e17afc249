/**
 * The experiments a sweep runs, by name: for each, its default settings, its own validator and
 * the summary metrics of one trial. Running an experiment writes files, so it lives in
 * `@attnlab/sweeps/node`; what is here runs anywhere (spec validation in a browser).
 *
 * @module
 */
import {
  defaultEmergenceConfig,
  defaultTrainingConfig,
  resolveEmergenceConfig,
  resolveSparseEvalTrialConfig,
  resolveTrainingConfig,
  sparseEvalTrialSchema,
  type EmergenceConfig,
  type EmergenceSummary,
  type SparseEvalResult,
  type TrainingConfig,
} from '@attnlab/experiments'
import { schemaDefaults } from '@attnlab/core/schema'
import type { JsonObject, JsonValue } from './json.ts'

/**
 * What a sweep needs to know about one experiment.
 *
 * @category Sweeps
 */
export interface SweepExperiment {
  /** The name a spec's `experiment` gives. */
  readonly name: string
  /** One line for help texts. */
  readonly description: string
  /**
   * The default settings that a spec's `base` and swept values edit. `choices` are the dotted
   * keys set so far (base and the trial's values), for experiments whose defaults depend on one
   * (emergence: each task kind has its own defaults).
   */
  defaults(choices: (path: string) => JsonValue | undefined): JsonObject
  /** The settings with the trial's seed in place (the one place a seed goes). */
  withSeed(settings: JsonObject, seed: number): JsonObject
  /** Keys a spec may not set in `base` or sweep: they are the sweep's own (the seeds). */
  readonly reservedKeys: readonly string[]
  /**
   * Validates resolved settings with the experiment's own validator.
   *
   * @throws `ConfigError` (`@attnlab/core`) naming the field
   */
  validate(settings: JsonObject): void
  /** The summary metrics of one trial (numbers; null when the trial did not reach one). */
  metrics(summary: unknown): Record<string, number | null>
}

/**
 * How much of the gap between the first plateau (chance, for the linear map and the cellular
 * automaton; the unigram loss for the sparse Markov chain) and the Bayes floor is left at the end:
 * `(final - floor) / (plateau - floor)`, 0 when the task is solved, 1 when nothing was learned;
 * null when either oracle is unknown or the gap is not positive.
 */
function normalizedResidual(run: EmergenceSummary, final: number | undefined): number | null {
  const plateau = run.oracles.plateaus[0]
  const floor = run.oracles.floor
  if (final === undefined || plateau === null || plateau === undefined || floor === null) return null
  return plateau - floor > 1e-9 ? (final - floor) / (plateau - floor) : null
}

/** Most stage steps a trial's metrics list (`stage1Step` .. `stage6Step`). */
const MAX_STAGE_METRICS = 6

/**
 * The emergence experiment (`@attnlab/experiments`' `runEmergence`, Yüksel et al., arXiv
 * 2602.19143; Baherwani et al., arXiv 2606.25010): settings are an `EmergenceConfig`
 * (`task`, `preset`, `model`, `training`), the defaults `defaultEmergenceConfig(task.kind)`,
 * `seeds` replaced by `[seed]` per trial. Metrics (one seed per trial): `finalValidationLoss`
 * and `finalMinusFloor` (nats), `emergenceStep` (the first stage's step), `stages` (how many),
 * `stage1Step` ..., `eachSpanOwnHead` (1 or 0), `normalizedResidual` (the share of the gap from the
 * first plateau to the Bayes floor left at the end: 0 solved, 1 nothing learned), `positionsLearned`
 * (how many scored output positions emerged: the linear map and the cellular automaton),
 * `firstPositionStep` (the earliest of those positions' emergence steps: where the loss plateau ends),
 * `completedSteps`, `odeScale` (steps per unit of ODE time), `odeRmse`, `tokensPerSecond`,
 * `trainingSeconds`.
 */
const emergence: SweepExperiment = {
  name: 'emergence',
  description: 'runEmergence of @attnlab/experiments: settings are an EmergenceConfig (task, preset, model, training)',
  defaults(choices) {
    const kind = (choices('task.kind') ?? 'sparse-markov') as Parameters<typeof defaultEmergenceConfig>[0]
    return defaultEmergenceConfig(kind) as unknown as JsonObject
  },
  withSeed: (settings, seed) => ({ ...settings, seeds: [seed] }),
  reservedKeys: ['seeds'],
  validate(settings) {
    resolveEmergenceConfig(settings as unknown as EmergenceConfig)
  },
  metrics(summary) {
    const run = summary as EmergenceSummary
    const seed = run.seeds[0]
    const metrics: Record<string, number | null> = {
      finalValidationLoss: seed?.finalValidationLoss ?? null,
      finalMinusFloor: seed?.finalMinusFloor ?? null,
      emergenceStep: seed?.emergenceStep ?? null,
      stages: seed?.stages.length ?? null,
    }
    for (let k = 0; k < MAX_STAGE_METRICS; k++) {
      const stage = seed?.stages[k]
      if (stage !== undefined) metrics[`stage${k + 1}Step`] = stage.step
    }
    metrics.eachSpanOwnHead = seed === undefined ? null : seed.eachSpanOwnHead ? 1 : 0
    metrics.normalizedResidual = normalizedResidual(run, seed?.finalValidationLoss ?? undefined)
    const positions = seed?.positionEmergence ?? []
    metrics.positionsLearned = positions.length === 0 ? null : positions.filter((p) => p !== null).length
    const learned = positions.filter((p): p is number => p !== null)
    metrics.firstPositionStep = learned.length === 0 ? null : Math.min(...learned)
    metrics.completedSteps = seed?.completedSteps ?? null
    metrics.odeScale = seed?.ode?.scale ?? null
    metrics.odeRmse = seed?.ode?.rmse ?? null
    metrics.tokensPerSecond = seed?.tokensPerSecond ?? null
    metrics.trainingSeconds = seed?.trainingSeconds ?? null
    return metrics
  },
}

/**
 * The training experiment (`@attnlab/experiments`' `runTraining`, what `attnlab train` runs):
 * settings are a `TrainingConfig` (`task`, `preset`, `model`, `seed`, `steps`, `batchSize`, `lr`,
 * `optimizer`, `schedule`, `gradClip`, `trainSize`, `validationSize`, `evalEvery`,
 * `checkpointEvery`, `probe`), the defaults `defaultTrainingConfig()`, `seed` replaced per trial. Metrics:
 * `finalValidationLoss` (nats), `steps`, `tokensPerSecond`, `trainingSeconds` (the trainer's final
 * train loss is a mean over the last session's steps, so a resumed trial's would differ: it is in
 * the trial's `summary.json`, not in the metrics); with `probe: 'induction'` also the induction
 * probe's metrics (`inductionStep`, `finalInductionGain`, `inductionGainStep<N>`, `headDamage<LlHh>`).
 */
const train: SweepExperiment = {
  name: 'train',
  description: 'runTraining of @attnlab/experiments: settings are a TrainingConfig (task, preset, model, steps, ...)',
  defaults: () => defaultTrainingConfig() as unknown as JsonObject,
  withSeed: (settings, seed) => ({ ...settings, seed }),
  reservedKeys: ['seed'],
  validate(settings) {
    resolveTrainingConfig(settings as unknown as TrainingConfig)
  },
  metrics(summary) {
    const run = summary as {
      finalValidationLoss: number
      steps: number
      tokensPerSecond: number
      trainingSeconds: number
    }
    return {
      finalValidationLoss: run.finalValidationLoss,
      steps: run.steps,
      tokensPerSecond: run.tokensPerSecond,
      trainingSeconds: run.trainingSeconds,
      ...inductionMetrics(summary as InductionSummary),
    }
  },
}

/** What a train trial's summary holds with `probe: 'induction'`. */
interface InductionSummary {
  readonly evaluations?: readonly { readonly step: number; readonly inductionGain?: number }[]
  readonly induction?: {
    readonly step: number | null
    readonly finalGain: number | null
    readonly heads: readonly { readonly head: string; readonly damage: number }[]
  }
}

/**
 * The induction probe's trial metrics (none without the probe): `inductionStep` (null when induction never
 * appeared), `finalInductionGain` (nats), `inductionGainStep<N>` per evaluation step N and `headDamage<L1H2>` per
 * head (nats the gain falls when that head is zero-ablated on the final model).
 */
function inductionMetrics(summary: InductionSummary): Record<string, number | null> {
  const induction = summary.induction
  if (induction === undefined) return {}
  const metrics: Record<string, number | null> = {
    inductionStep: induction.step,
    finalInductionGain: induction.finalGain,
  }
  for (const e of summary.evaluations ?? [])
    if (typeof e.inductionGain === 'number') metrics[`inductionGainStep${e.step}`] = e.inductionGain
  for (const h of induction.heads) metrics[`headDamage${h.head}`] = h.damage
  return metrics
}

/**
 * The metric key of one row of a sparse evaluation: `<method>:<name>L<length>S<target sparsity>`, e.g.
 * `quest:scoreL256S0.9`, for a sparse method's row, and `<name>L<length>S0`, e.g. `scoreL256S0`, for the dense
 * reference row (`method` undefined or `'dense'`). Every sparse row names its method, so a sweep mixing trials of
 * one and of several methods gives a method's row the same key in each.
 *
 * @category Sweeps
 */
export function sparseEvalMetricKey(name: string, length: number, sparsity: number, method?: string): string {
  return `${method === undefined || method === 'dense' ? '' : `${method}:`}${name}L${length}S${sparsity}`
}

/**
 * The sparse evaluation (`@attnlab/experiments`' `runSparseEval` on a saved model, what
 * `attnlab sparse eval` runs; The Sparse Frontier, Nawrot et al., arXiv 2504.17768 [v2], section 4):
 * settings are a `SparseEvalTrialConfig` (`model`, `task`, `methods`, `sparsities`, `lengths`,
 * `samples`, `seed`), the defaults `sparseEvalTrialSchema`'s, `seed` (of the evaluation sequences)
 * replaced per trial. Metrics, per row of the trial's one task and every length L and target
 * sparsity S (key {@link sparseEvalMetricKey}: every sparse row's keys carry its method, `quest:scoreL256S0.9`,
 * the dense reference row's do not, `scoreL256S0`): `score`, `scoreStd` (sample std over sequences), `strict`, `iou`,
 * `exactSparsity`, `reportedSparsity` and `relativeCost` (the cost model's price over dense, attention-only
 * models priced without an MLP term), and for the text tasks (`ruler-niah`, ...: `runTextSparseEval` with the model's
 * tokenizer, settings `tokenizer`, `dummyPrefix`, `maxNewTokens`) `agreement` (with the dense output), `tagged` and
 * `skipped`; NaN values are null; per length L, layer l and head h (key `retrievalL{L}B{l}H{h}`,
 * `previousTokenL{L}B{l}H{h}`) which heads retrieve (`measureRetrievalHeads` of `@attnlab/experiments`), with
 * `uniformL{L}`; `samples` and `evalSeconds`. Every row is in the trial's `results.json`.
 */
const sparseEval: SweepExperiment = {
  name: 'sparse-eval',
  description: 'runSparseEval of @attnlab/experiments on a saved model: settings are a SparseEvalTrialConfig',
  defaults: () => schemaDefaults(sparseEvalTrialSchema, 'sparse-eval') as unknown as JsonObject,
  withSeed: (settings, seed) => ({ ...settings, seed }),
  reservedKeys: ['seed'],
  validate(settings) {
    resolveSparseEvalTrialConfig(settings)
  },
  metrics(summary) {
    const run = summary as SparseEvalResult & { readonly seconds?: number }
    const metrics: Record<string, number | null> = {}
    for (const row of run.rows) {
      // the dense reference row (one per length) gets the plain keys, every sparse row its method's
      const key = (name: string): string => sparseEvalMetricKey(name, row.length, row.targetSparsity, row.method)
      // NaN (a text task's IoU when it is scored by accuracy, a score when every sample was skipped) is null.
      const value = (x: number | undefined): number | null => (x === undefined || Number.isNaN(x) ? null : x)
      metrics[key('score')] = value(row.score)
      metrics[key('scoreStd')] = value(row.scoreStd)
      metrics[key('strict')] = row.strict
      metrics[key('iou')] = value(row.iou)
      metrics[key('exactSparsity')] = row.exactSparsity
      metrics[key('reportedSparsity')] = row.reportedSparsity
      metrics[key('relativeCost')] = row.cost?.relative ?? null
      if (row.agreement !== undefined) {
        metrics[key('agreement')] = row.agreement
        metrics[key('tagged')] = value(row.tagged)
        metrics[key('skipped')] = value(row.skipped)
      }
    }
    for (const head of run.heads ?? []) {
      const at = `L${head.length}B${head.layer}H${head.head}`
      metrics[`retrieval${at}`] = head.retrieval
      metrics[`previousToken${at}`] = head.previousToken
      metrics[`uniformL${head.length}`] = head.uniform
    }
    metrics.samples = run.rows[0]?.samples ?? null
    metrics.evalSeconds = run.seconds ?? null
    return metrics
  },
}

/**
 * The experiments a sweep spec's `experiment` names.
 *
 * @category Sweeps
 */
export const SWEEP_EXPERIMENTS: Readonly<Record<string, SweepExperiment>> = Object.freeze({
  emergence,
  train,
  'sparse-eval': sparseEval,
})

/**
 * The names of {@link SWEEP_EXPERIMENTS}.
 *
 * @category Sweeps
 */
export const SWEEP_EXPERIMENT_NAMES: readonly string[] = Object.freeze(Object.keys(SWEEP_EXPERIMENTS))
