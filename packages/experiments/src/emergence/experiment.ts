/**
 * The emergence experiment as a library call: train the minimal transformer (Yüksel et al.,
 * arXiv 2602.19143) on the sparse high-order Markov chain (or another task of `@attnlab/markov`)
 * over one or more seeds, and find its stages against the Bayes oracles and the reduced ODE model;
 * several seeds show that the emergence step is random across seeds (Baherwani et al., arXiv
 * 2606.25010). Runs in any runtime; where its results are kept is an {@link EmergenceStore}.
 *
 * @module
 */
import * as tf from '@tensorflow/tfjs-core'
import { InterruptedError, type Task } from '@attnlab/core'
import { SparseMarkovTask } from '@attnlab/markov'
import { hasAttention, planWeightTransfer, type StepRecord, type WeightData } from '@attnlab/transformer'
import { ExperimentInputError } from '../errors.ts'
import { resolveEmergenceConfig, type EmergenceConfig, type ResolvedEmergenceConfig } from './config.ts'
import { EMERGENCE_DEFINITIONS, type HeadEntropyDrop } from './emergence-steps.ts'
import { odeOverlay, type OdeOverlay } from './ode.ts'
import { computeOracles, type OracleLine, type Oracles } from './oracles.ts'
import type { PatternSnapshot, SeedReport } from './report.ts'
import {
  runSeed,
  type EmergenceControl,
  type EmergenceRecord,
  type EmergenceStore,
  type KnockoutEvaluation,
  type EmergenceTransfer,
  type SeedCheckpoint,
  type SeedRun,
} from './run.ts'
import { analyzeRun, headNames, type MetricLine, type RunAnalysis, type RunStage } from './stages.ts'

/**
 * What {@link runEmergence} reports while it runs (for a progress bar or a log).
 *
 * - `oracles`: the oracle lines were computed (before anything is stored);
 * - `seed`: a seed starts, `fromStep` > 0 when it continues from its checkpoint (`resumed`:
 *   `'checkpoint'`; `'none'` when resuming a seed that had no checkpoint yet; null for a fresh run);
 * - `step`: one optimizer step; `evaluation`: one evaluation, with the stage reached (`stage 2/3`,
 *   or `positions 3/8` for tasks without spans); `saved`: a checkpoint was stored;
 * - `seed-end`: a seed finished or stopped; `warning`: something was skipped (the ODE overlay).
 *
 * @category Emergence
 */
export type EmergenceProgress =
  | { readonly kind: 'oracles'; readonly oracles: Oracles }
  | {
      readonly kind: 'seed'
      readonly seed: number
      readonly index: number
      readonly seeds: number
      readonly totalSteps: number
      readonly fromStep: number
      /** The step of the seed's checkpoint when it continues from one, else null. */
      readonly checkpointStep: number | null
      readonly resumed: 'checkpoint' | 'none' | null
    }
  | { readonly kind: 'step'; readonly seed: number; readonly record: StepRecord }
  | {
      readonly kind: 'evaluation'
      readonly seed: number
      readonly line: MetricLine
      readonly stage: string
      /** Every head's mean attention pattern at this step, `[head][query][key]` (heads `L{layer}H{head}` in order). */
      readonly patterns: readonly (readonly (readonly number[])[])[]
      /** With `control.knockout`: the validation loss with those heads knocked out, else null. */
      readonly knockout: KnockoutEvaluation | null
    }
  | { readonly kind: 'saved'; readonly seed: number; readonly step: number }
  | { readonly kind: 'seed-end'; readonly seed: number; readonly stopped: boolean }
  | { readonly kind: 'warning'; readonly message: string }

/**
 * Options of {@link runEmergence}.
 *
 * @category Emergence
 */
export interface EmergenceRunOptions {
  /** Called synchronously with each {@link EmergenceProgress} event. */
  readonly onProgress?: (event: EmergenceProgress) => void
  /**
   * Stops the run after the current step: the result then has `summary.interrupted: true`
   * (aborted before any training: an `INTERRUPTED` error).
   */
  readonly signal?: AbortSignal
  /** Where evaluations and checkpoints are kept (default: nowhere but the result). */
  readonly store?: EmergenceStore
  /** Continue the run the store holds, each seed from its checkpoint (exact on cpu). */
  readonly resume?: boolean
  /** Pause between steps, knock heads out at evaluations ({@link EmergenceControl}). */
  readonly control?: EmergenceControl
}

/**
 * One seed's line of the summary (`summary.json`'s `seeds`).
 *
 * @category Emergence
 */
export interface EmergenceSeedSummary {
  readonly seed: number
  readonly completedSteps: number
  readonly stopped: boolean
  /** Nats. */
  readonly finalValidationLoss: number | null
  /** Final validation loss minus the floor (teacher entropy / Bayes loss), nats. */
  readonly finalMinusFloor: number | null
  readonly stages: readonly RunStage[]
  readonly emergenceStep: number | null
  /** Per predicted position (index 0 = token 1): its emergence step (`definitions.positionEmergence`), or null. */
  readonly positionEmergence: readonly (number | null)[]
  /** Per head: its attention-entropy drop (`definitions.entropyDrop`); empty for a model without attention. */
  readonly entropyDrops: readonly HeadEntropyDrop[]
  readonly phases: readonly {
    readonly phase: string
    readonly start: number
    readonly end: number
    readonly span: string | number | null
    readonly meanSimilarity: number
  }[]
  readonly finalHolders: readonly {
    readonly span: string | undefined
    readonly head: string | null
    readonly mass: number | null
  }[]
  readonly eachSpanOwnHead: boolean
  /** The ODE fit: steps per unit of ODE time, progress RMSE (stages), predicted transitions. */
  readonly ode: { readonly scale: number; readonly rmse: number; readonly transitions: unknown } | null
  readonly tokensPerSecond: number
  readonly trainingSeconds: number
}

/**
 * The summary of a run (`summary.json` without the file paths).
 *
 * @category Emergence
 */
export interface EmergenceSummary {
  readonly task: EmergenceRecord['task']
  readonly preset: string
  readonly backend: string
  /** Whether the signal stopped the run before its last step. */
  readonly interrupted: boolean
  readonly oracles: {
    readonly lines: readonly OracleLine[]
    readonly plateaus: readonly (number | null)[]
    readonly floor: number | null
    readonly note: string
  }
  readonly seeds: readonly EmergenceSeedSummary[]
  /** Per seed: the first stage's step (or the loss-drop step). */
  readonly emergenceSteps: readonly (number | null)[]
  /** Per seed: every stage's step. */
  readonly stageSteps: readonly (readonly number[])[]
  /** With `training.initFrom`: the checkpoint the seeds started from, and which parameters were copied. */
  readonly transfer: EmergenceTransfer | null
  /** How the emergence steps above are defined ({@link EMERGENCE_DEFINITIONS}). */
  readonly definitions: typeof EMERGENCE_DEFINITIONS
  readonly wallSeconds: number
}

/**
 * Everything a run computed: the summary, and what the report shows.
 *
 * @category Emergence
 */
export interface EmergenceResult {
  readonly summary: EmergenceSummary
  /** What `config.json` holds. */
  readonly record: EmergenceRecord
  readonly oracles: Oracles
  /** Per seed: evaluations, stage analysis, the attention snapshots the report shows, the ODE overlay. */
  readonly seeds: readonly SeedReport[]
  /** Span (offset group) names, most important first; empty for tasks without spans. */
  readonly groupNames: readonly string[]
  /** Relative offsets of each span (offset 0: the query's own position). */
  readonly groupOffsets: readonly (readonly number[])[]
  /** Head names `L{layer}H{head}`. */
  readonly heads: readonly string[]
  /** Training tokens per second, per seed. */
  readonly tokensPerSecond: readonly number[]
}

/**
 * Picks the attention snapshots the report shows: start, each stage once settled (at most four,
 * spread over the stages), end.
 */
function pickSnapshots(seed: SeedRun, analysis: RunAnalysis): PatternSnapshot[] {
  const all = seed.snapshots
  if (all.length === 0) return []
  const nearestTo = (step: number): PatternSnapshot =>
    all.reduce(
      (best, s) => (Math.abs(s.step - step) < Math.abs(best.step - step) ? s : best),
      all[0] as PatternSnapshot,
    )
  const last = all[all.length - 1] as PatternSnapshot
  const picked: PatternSnapshot[] = [{ ...(all[0] as PatternSnapshot), label: 'start' }]
  const stages = analysis.stages
  const shown =
    stages.length <= 4 ? stages.map((_, i) => i) : [0, 1, 2, 3].map((k) => Math.round((k * (stages.length - 1)) / 3))
  for (const index of new Set(shown)) {
    const stage = stages[index] as (typeof stages)[number]
    const end = stages[index + 1]?.step ?? last.step
    const snapshot = nearestTo(0.5 * (stage.step + end))
    if (!picked.some((p) => p.step === snapshot.step)) picked.push({ ...snapshot, label: `stage ${stage.stage}` })
  }
  if (!picked.some((p) => p.step === last.step)) picked.push({ ...last, label: 'end' })
  else
    picked[picked.length - 1] = {
      ...(picked[picked.length - 1] as PatternSnapshot),
      label: `${(picked[picked.length - 1] as PatternSnapshot).label}, end`,
    }
  return picked
}

/**
 * The run plateaus `P_0 .. P_K` (nats) the reduced ODE is fitted through ({@link odeOverlay}): the
 * run's initial validation loss, then each stage's plateau once all `K` stages were found, else
 * the oracle plateaus (Yüksel et al., arXiv 2602.19143, sec. 4); null when neither is known.
 *
 * @param lines - the run's evaluations so far
 * @param analysis - their stage analysis ({@link analyzeRun})
 * @param oracles - the task's oracle lines
 * @param K - the task's number of spans
 * @category Emergence
 */
export function runPlateaus(
  lines: readonly MetricLine[],
  analysis: RunAnalysis,
  oracles: Oracles,
  K: number,
): number[] | null {
  const first = lines[0]?.validationLoss
  if (first === undefined) return null
  if (analysis.stages.length === K) return [first, ...analysis.stages.map((s) => s.plateauLoss)]
  if (oracles.plateaus.every((p) => p !== null)) return [first, ...(oracles.plateaus.slice(1) as number[])]
  return null
}

/** A store that keeps nothing (a run without one). */
const NO_STORE: EmergenceStore = {
  begin: async () => {},
  readMetrics: async () => [],
  writeMetrics: async () => {},
  appendMetric: async () => {},
  loadCheckpoint: async () => null,
  readSnapshots: async () => [],
  saveCheckpoint: async () => {},
  writeSnapshots: async () => {},
}

/**
 * The error of a run stopped before its training started (code `INTERRUPTED`,
 * `details.beforeStart: true`): nothing was stored, or a resumed run's store is unchanged.
 */
function interruptedBeforeStart(): InterruptedError {
  return new InterruptedError('interrupted before the training started', { beforeStart: true })
}

/**
 * Runs the emergence experiment: validates `config`, computes the oracle lines, trains every
 * seed (evaluating every `evalEvery` steps: validation loss, span masses, attention patterns,
 * checkpoints every 4 evaluations into `options.store`), then finds each seed's stages (the span
 * criterion of `@attnlab/dynamics`' `detectSpanStages`, or the loss drops of `detectCrossing`),
 * its phases, and, for the sparse Markov chain on the minimal model, the reduced ODE fitted to
 * the run (Yüksel et al., arXiv 2602.19143, Eq. 4 and sec. 4).
 *
 * Choose a tensor backend first (`useBackend` of `@attnlab/core`); the numbers are those of
 * `attnlab emergence` on the same backend and seeds.
 *
 * @param config - the experiment ({@link defaultEmergenceConfig} and edits), or a resolved one
 *   ({@link resolveEmergenceConfig}, {@link resolveEmergenceRecord} to resume a recorded run)
 * @param options - progress callback, abort signal, store, resume
 * @returns the summary and what the report shows ({@link buildEmergenceReport})
 * @throws `ConfigError` (`@attnlab/core`, `INVALID_CONFIG`) for a bad config, before any work
 * @throws `InterruptedError` (code `INTERRUPTED`) (`details.beforeStart`) when the signal aborted before the
 *   training started
 * @example
 * ```ts
 * const config = defaultEmergenceConfig()
 * const { summary } = await runEmergence({ ...config, training: { ...config.training, steps: 300 } })
 * console.log(summary.stageSteps[0]) // e.g. [14, 112, ...]
 * ```
 * @category Emergence
 */
export async function runEmergence(
  config: EmergenceConfig | ResolvedEmergenceConfig,
  options: EmergenceRunOptions = {},
): Promise<EmergenceResult> {
  const started = performance.now()
  const resolved = 'record' in config ? config : resolveEmergenceConfig(config)
  const { task, model: modelConfig } = resolved
  const store = options.store ?? NO_STORE
  const resume = options.resume === true
  const signal = options.signal
  const aborted = (): boolean => signal?.aborted === true
  const progress = options.onProgress ?? ((): void => {})
  // Pre-pretraining: the source's weights, read (and checked against the model) before anything is stored.
  const initFrom = resolved.record.training.initFrom
  let initial: { readonly source: string; readonly weights: WeightData } | null = null
  const loadInitial = async (): Promise<{ readonly source: string; readonly weights: WeightData } | null> => {
    if (initFrom === null) return null
    if (initial === null) {
      if (store.loadInitialWeights === undefined) {
        throw new ExperimentInputError(
          'training.initFrom',
          `cannot read ${initFrom}: this run's store reads no files (use @attnlab/experiments/node's ` +
            'emergenceDirectoryStore)',
        )
      }
      initial = await store.loadInitialWeights(initFrom)
    }
    return initial
  }
  let transfer: EmergenceTransfer | undefined = resolved.record.transfer
  if (initFrom !== null && !resume) {
    const loaded = (await loadInitial()) as { readonly source: string; readonly weights: WeightData }
    transfer = { source: loaded.source, ...planWeightTransfer(modelConfig, loaded.weights) }
  }
  const record: EmergenceRecord = {
    ...resolved.record,
    ...(transfer === undefined ? {} : { transfer }),
    backend: tf.getBackend(),
    created: resolved.record.created !== '' ? resolved.record.created : new Date().toISOString(),
  }
  const groupNames = ((task as Task).offsetGroups ?? []).map((g) => g.name)
  // A model without attention (the mixer) has no heads to report.
  const heads = hasAttention(modelConfig) ? headNames(modelConfig.nLayers, modelConfig.nHeads) : []
  const runs: SeedRun[] = []
  const keptLines: MetricLine[] = []
  let saved = false

  // The oracle plateau lines (before anything is stored: they can be slow or fail).
  const oracles = computeOracles(task, record.seeds[0] ?? 0)
  progress({ kind: 'oracles', oracles })
  if (aborted()) throw interruptedBeforeStart()
  await store.begin(record, { resume })
  const existing = resume ? await store.readMetrics() : []

  // Train every seed.
  for (const [index, seed] of record.seeds.entries()) {
    if (aborted()) break
    let previous: { lines: MetricLine[]; snapshots: PatternSnapshot[]; checkpoint: SeedCheckpoint } | null = null
    const checkpoint = resume ? await store.loadCheckpoint(seed) : null
    if (checkpoint !== null) {
      const step = checkpoint.trainerState?.step ?? 0
      previous = {
        lines: existing.filter((l) => l.seed === seed && l.step <= step),
        snapshots: (await store.readSnapshots(seed)).filter((s) => s.step <= step),
        checkpoint,
      }
    }
    keptLines.push(...(previous?.lines ?? []))
    if (resume) {
      // Rewrite the log without lines past the checkpoints (they are recomputed exactly).
      const later = record.seeds.slice(index + 1)
      const rest = existing.filter((l) => later.includes(l.seed))
      await store.writeMetrics([...keptLines, ...rest])
    }
    const total = record.training.steps
    progress({
      kind: 'seed',
      seed,
      index,
      seeds: record.seeds.length,
      totalSteps: total,
      fromStep: previous?.lines.at(-1)?.step ?? 0,
      checkpointStep: checkpoint === null ? null : (checkpoint.trainerState?.step ?? 0),
      resumed: resume ? (checkpoint !== null ? 'checkpoint' : 'none') : null,
    })
    // The first evaluation's loss per output position (the loss method's reference).
    let initialPositions: readonly (number | null)[] | null = previous?.lines[0]?.perPositionLoss ?? null
    const stageLabel = (line: MetricLine): string => {
      if (line.spanMass === null || groupNames.length === 0) {
        // Tasks without spans: output positions whose loss is below half its initial value
        // (the loss method of the stage analysis, without its persistence check).
        initialPositions ??= line.perPositionLoss
        const start = initialPositions
        const scored = start.filter((x) => x !== null).length
        const learned = line.perPositionLoss.filter(
          (x, p) => x !== null && start[p] != null && x <= 0.5 * (start[p] as number),
        ).length
        return `positions ${learned}/${scored}`
      }
      const spanMass = line.spanMass
      const held = groupNames.filter((_name: string, g: number) => spanMass.some((row) => (row[g] as number) > 0.5))
      return `stage ${held.length}/${groupNames.length}`
    }
    const run = await runSeed({
      store,
      seed,
      task,
      config: modelConfig,
      training: record.training,
      previous,
      initialWeights: previous === null ? ((await loadInitial())?.weights ?? null) : null,
      signal,
      callbacks: {
        onSaved: (step) => {
          saved = true
          progress({ kind: 'saved', seed, step })
        },
        onStep: (stepRecord) => progress({ kind: 'step', seed, record: stepRecord }),
        onEval: (line, patterns, knockout) =>
          progress({ kind: 'evaluation', seed, line, stage: stageLabel(line), patterns, knockout }),
      },
      control: options.control,
    })
    progress({ kind: 'seed-end', seed, stopped: run.stopped })
    runs.push(run)
    keptLines.push(...run.lines.slice(previous?.lines.length ?? 0))
  }
  const interrupted = aborted()
  if (interrupted && !resume && !saved) throw interruptedBeforeStart()

  // Stages, phases, the ODE overlay.
  const seedReports: SeedReport[] = []
  const seedSummaries: EmergenceSeedSummary[] = []
  for (const run of runs) {
    const analysis = analyzeRun(run.lines, groupNames, heads, oracles.lines)
    let ode: OdeOverlay | null = null
    // Why there is no fit, for the report's section 4 (it words the too-few-stages case itself).
    let odeNote: string | undefined
    if (!(task instanceof SparseMarkovTask) || modelConfig.architecture !== 'minimal') {
      odeNote =
        'the reduced ODE models the minimal model on the sparse Markov chain ' +
        `(this run: ${task.describe().kind} on the ${modelConfig.architecture} model).`
    } else {
      const plateaus = runPlateaus(run.lines, analysis, oracles, task.config.spans.length)
      if (plateaus !== null) {
        try {
          ode = odeOverlay(
            task,
            modelConfig.nHeads,
            modelConfig.nCtx,
            run.lines.map((l) => l.step),
            run.lines.map((l) => l.validationLoss),
            plateaus,
            run.seed,
          )
        } catch (error) {
          progress({ kind: 'warning', message: `(the ODE overlay was skipped: ${(error as Error).message})` })
          odeNote = `the ODE overlay failed (${(error as Error).message}).`
        }
      }
    }
    seedReports.push({
      seed: run.seed,
      lines: run.lines,
      analysis,
      snapshots: pickSnapshots(run, analysis),
      ode,
      ...(odeNote === undefined ? {} : { odeNote }),
    })
    const final = run.lines[run.lines.length - 1]
    seedSummaries.push({
      seed: run.seed,
      completedSteps: run.completedSteps,
      stopped: run.stopped,
      finalValidationLoss: final?.validationLoss ?? null,
      finalMinusFloor: final !== undefined && oracles.floor !== null ? final.validationLoss - oracles.floor : null,
      stages: analysis.stages,
      emergenceStep: analysis.emergenceStep,
      positionEmergence: analysis.positionEmergence,
      entropyDrops: analysis.entropyDrops,
      phases: analysis.phases.map((p) => ({
        phase: p.phase,
        start: p.start,
        end: p.end,
        span: p.span === null ? null : (groupNames[p.span] ?? p.span),
        meanSimilarity: p.meanSimilarity,
      })),
      finalHolders: analysis.finalHolders.map((h, g) => ({
        span: groupNames[g],
        head: h?.head ?? null,
        mass: h?.mass ?? null,
      })),
      eachSpanOwnHead: analysis.eachSpanOwnHead,
      ode: ode === null ? null : { scale: ode.fit.scale, rmse: ode.fit.rmse, transitions: ode.fit.transitions },
      tokensPerSecond: run.tokensPerSecond,
      trainingSeconds: run.trainingSeconds,
    })
  }
  const summary: EmergenceSummary = {
    task: record.task,
    preset: record.preset,
    backend: record.backend,
    interrupted,
    oracles: { lines: oracles.lines, plateaus: oracles.plateaus, floor: oracles.floor, note: oracles.note },
    seeds: seedSummaries,
    emergenceSteps: seedReports.map((s) => s.analysis.emergenceStep),
    stageSteps: seedReports.map((s) => s.analysis.stages.map((st) => st.step)),
    definitions: EMERGENCE_DEFINITIONS,
    transfer: record.transfer ?? null,
    wallSeconds: (performance.now() - started) / 1000,
  }
  return {
    summary,
    record,
    oracles,
    seeds: seedReports,
    groupNames,
    groupOffsets: ((task as Task).offsetGroups ?? []).map((g) => g.offsets),
    heads,
    tokensPerSecond: runs.map((r) => r.tokensPerSecond),
  }
}
