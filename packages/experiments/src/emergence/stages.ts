/**
 * Stage detection on a real training run (Yüksel et al., arXiv 2602.19143, sec. 3-4: each stage
 * is the model learning to copy from one more span through a sparse attention pattern).
 *
 * For tasks with a fixed sparse dependency pattern (offset groups = spans), a span counts as
 * *held* once some head puts more than `focusThreshold` (0.5) of its attention on it; stage `j`
 * begins when `j` distinct spans are held, persistently (the competitive stage `1` has every head
 * on the most important span, so one span is held). The crossing step is interpolated between
 * evaluations. Each stage's plateau is the median validation loss over the second half of the
 * stage, compared with the stage's oracle (the Bayes loss given its spans). Phases (competitive /
 * cooperative) come from `@attnlab/dynamics`' `classifyPhases` on the same span masses.
 *
 * For tasks without a fixed pattern (linear map, cellular automata, in-context chains) the
 * emergence step is where the validation loss first falls, persistently, below the midpoint
 * between chance and the Bayes floor (Baherwani et al.'s abrupt drop), and each scored output
 * position gets its own emergence step where its loss drops from its plateau to its final value
 * (`positionEmergence` of {@link EMERGENCE_DEFINITIONS}: the per-token drops of their Figure 3); each
 * such drop is one stage, in order. Every run also gets each position's emergence step and each head's
 * attention-entropy drop by those definitions.
 */
import { classifyPhases, detectCrossing, detectSpanStages, headSimilarity, type PhaseSegment } from '@attnlab/dynamics'
import { curveDrop, EMERGENCE_DEFINITIONS, headEntropyDrops, type HeadEntropyDrop } from './emergence-steps.ts'
import type { OracleLine } from './oracles.ts'

/** One evaluation of a run, as stored in `metrics.jsonl`. */
export interface MetricLine {
  readonly seed: number
  readonly step: number
  /** Training tokens processed so far. */
  readonly tokens: number
  /** Seconds in training steps so far. */
  readonly seconds: number
  /** Mean training loss since the previous evaluation (nats); null at step 0. */
  readonly trainLoss: number | null
  /** Validation loss (nats). */
  readonly validationLoss: number
  readonly lr: number
  /** Attention mass of each head on each offset group, `[head][group]` (heads over all layers, `L{l}H{h}`). */
  readonly spanMass: readonly (readonly number[])[] | null
  /** Mean attention entropy of each head (nats). */
  readonly attentionEntropy: readonly number[]
  /** KL(teacher_k || model), k = 1..K (nats), for tasks with a teacher. */
  readonly teacherKL: readonly number[] | null
  /** Cosine of each head's value map with each teacher matrix, `[head][span]` (minimal model). */
  readonly valueAlignment: readonly (readonly number[])[] | null
  /** Mean loss per predicted position (nats), null where unscored. */
  readonly perPositionLoss: readonly (number | null)[]
}

/** A detected stage of a run. */
export interface RunStage {
  /** Stage number `j` (spans held after it). */
  readonly stage: number
  /** Interpolated step at which the `j`-th span became held. */
  readonly step: number
  /** The span(s) newly held, by offset-group index. */
  readonly spans: readonly number[]
  /** Names of those spans. */
  readonly spanNames: readonly string[]
  /** The head(s) holding them, e.g. `L0H2`. */
  readonly heads: readonly string[]
  /**
   * Median validation loss over the second half of the stage (nats); for a stage that began and
   * ended between two evaluations (no evaluation inside it), the loss interpolated linearly at
   * the stage's middle step.
   */
  readonly plateauLoss: number
  /**
   * Evaluations the plateau is the median of; 0 when the stage was passed between two
   * evaluations and {@link RunStage.plateauLoss} is interpolated.
   */
  readonly plateauEvaluations: number
  /**
   * The oracle of this stage (the Bayes loss given the `j` most important spans) or, without
   * one, the closest oracle line; with the plateau's distance to it (nats; 0 inside a line known
   * only by bounds). `value` is null for such a line, whose `bounds` are given instead.
   */
  readonly nearestOracle: {
    readonly label: string
    readonly value: number | null
    readonly bounds: readonly [number, number] | null
    readonly distance: number
    /**
     * False for bounds too wide to test the plateau against (see `boundsInformative` in
     * `./oracles.ts`); then `distance` (0 inside them) means nothing. True for a value.
     */
    readonly informative: boolean
  } | null
}

/** The stage picture of one run. */
export interface RunAnalysis {
  /** `'spans'` (offset groups) or `'loss'` (chance -> floor drop). */
  readonly method: 'spans' | 'loss'
  readonly stages: readonly RunStage[]
  /** Competitive / cooperative segments (span method only). */
  readonly phases: readonly PhaseSegment[]
  /** Final holder of each span: `[group] -> { head, mass }` (span method only). */
  readonly finalHolders: readonly ({ readonly head: string; readonly mass: number } | null)[]
  /** Whether every span ends held by a different head with mass above the threshold. */
  readonly eachSpanOwnHead: boolean
  /** Step of the (first) emergence: the first stage's step, or the loss-drop step. */
  readonly emergenceStep: number | null
  /**
   * Per predicted position (index 0 = token 1): the step its loss dropped, by {@link EMERGENCE_DEFINITIONS}'
   * `positionEmergence` (null: unscored, or no drop).
   */
  readonly positionEmergence: readonly (number | null)[]
  /** Per head: its attention-entropy drop ({@link EMERGENCE_DEFINITIONS}); empty for a model without attention. */
  readonly entropyDrops: readonly HeadEntropyDrop[]
  /** Mean pairwise similarity of the heads' span masses at each evaluation. */
  readonly headSimilarity: readonly number[]
}

/** Options of {@link analyzeRun}. */
export interface RunAnalysisOptions {
  /** Mass above which a head holds a span (default 0.5). */
  readonly focusThreshold?: number
  /** Evaluations a new stage must persist (default 2; fewer at the end of the run). */
  readonly persistence?: number
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  const n = sorted.length
  return n % 2 === 1
    ? (sorted[(n - 1) / 2] as number)
    : 0.5 * ((sorted[n / 2 - 1] as number) + (sorted[n / 2] as number))
}

/** Linear interpolation of `values` (at `steps`, increasing) at `step`, clamped to the ends. */
function interpolate(steps: readonly number[], values: readonly number[], step: number): number {
  const n = steps.length
  if (n === 0) return NaN
  if (step <= (steps[0] as number)) return values[0] as number
  for (let i = 1; i < n; i++) {
    const s1 = steps[i] as number
    if (step <= s1) {
      const s0 = steps[i - 1] as number
      const v0 = values[i - 1] as number
      const v1 = values[i] as number
      return s1 === s0 ? v1 : v0 + ((v1 - v0) * (step - s0)) / (s1 - s0)
    }
  }
  return values[n - 1] as number
}

/**
 * The plateau of a stage that runs over steps `[start, end)`: the median validation loss over
 * the second half of the stage, else over the whole stage, else (no evaluation inside: the
 * stage began and ended within one evaluation interval) the loss interpolated at its middle.
 */
function plateauOf(
  steps: readonly number[],
  losses: readonly number[],
  start: number,
  end: number,
): { loss: number; evaluations: number } {
  const mid = 0.5 * (start + end)
  const inside = (from: number): number[] =>
    losses.filter((_, i) => (steps[i] as number) >= from && (steps[i] as number) < end)
  let window = inside(mid)
  if (window.length === 0) window = inside(start)
  if (window.length > 0) return { loss: median(window), evaluations: window.length }
  return { loss: interpolate(steps, losses, mid), evaluations: 0 }
}

function nearest(loss: number, oracles: readonly OracleLine[]): RunStage['nearestOracle'] {
  let best: RunStage['nearestOracle'] = null
  for (const line of oracles) {
    let distance: number
    if (line.value !== null) distance = Math.abs(loss - line.value)
    else if (line.bounds !== null)
      distance = loss < line.bounds[0] ? line.bounds[0] - loss : loss > line.bounds[1] ? loss - line.bounds[1] : 0
    else continue
    if (best === null || distance < best.distance) {
      const bounds = line.value === null ? line.bounds : null
      best = {
        label: line.label,
        value: line.value,
        bounds,
        distance,
        informative: bounds === null || line.boundsInformative !== false,
      }
    }
  }
  return best
}

/**
 * The oracle of stage `j`: the Bayes loss of the best predictor that sees the `j` most important
 * spans (the plateau the papers predict for stage `j`), with the plateau's distance to it.
 */
function stageOracle(stage: number, loss: number, oracles: readonly OracleLine[]): RunStage['nearestOracle'] {
  const line = oracles.find(
    (o) => (o.kind === 'restricted-context' || o.kind === 'teacher-entropy') && o.spans === stage,
  )
  if (line === undefined) return null
  if (line.value !== null)
    return {
      label: line.label,
      value: line.value,
      bounds: null,
      distance: Math.abs(loss - line.value),
      informative: true,
    }
  if (line.bounds === null) return null
  const distance = loss < line.bounds[0] ? line.bounds[0] - loss : loss > line.bounds[1] ? loss - line.bounds[1] : 0
  return {
    label: line.label,
    value: null,
    bounds: line.bounds,
    distance,
    informative: line.boundsInformative !== false,
  }
}

/** `H_2 (newest 1 span) 1.439` or `H_4 (newest 2 spans) in [0.54, 1.14]`. */
export function describeOracle(oracle: NonNullable<RunStage['nearestOracle']>, digits = 3): string {
  if (oracle.value !== null) return `${oracle.label} ${oracle.value.toFixed(digits)}`
  if (oracle.bounds !== null)
    return `${oracle.label} in [${oracle.bounds[0].toFixed(2)}, ${oracle.bounds[1].toFixed(2)}]`
  return oracle.label
}

/**
 * The oracle of a stage with the plateau's distance to it: `H_2 (newest 1 span) 1.439 (0.012
 * away)`; a bound too wide to test the plateau says so instead of a distance of 0.
 */
export function describeStageOracle(oracle: RunStage['nearestOracle']): string {
  if (oracle === null) return '-'
  if (!oracle.informative) return `${describeOracle(oracle)} (too wide to test the plateau)`
  return `${describeOracle(oracle)} (${oracle.distance.toFixed(3)} away)`
}

/** A stage's plateau: `1.234`, or `~0.600` when interpolated (no evaluation inside the stage). */
export function describePlateau(stage: RunStage): string {
  return stage.plateauEvaluations === 0 ? `~${stage.plateauLoss.toFixed(3)}` : stage.plateauLoss.toFixed(3)
}

/** Header of the stage table's last column: spans and their heads, or output positions. */
export function learnedHeader(method: RunAnalysis['method']): string {
  return method === 'spans' ? 'learned (span <- head)' : 'learned (output position)'
}

/** What a stage learned: `span 2 <- L0H1`, or `position 3`. */
export function describeLearned(stage: RunStage): string {
  return (
    stage.spanNames
      .map((name, i) => (stage.heads[i] === undefined ? name : `${name} <- ${stage.heads[i]}`))
      .join(', ') || '-'
  )
}

/** The note under a stage table when some plateau was interpolated. */
export const INTERPOLATED_NOTE =
  '~: the stage began and ended between two evaluations; its loss is interpolated at its middle'

/** Names heads across layers: `L{layer}H{head}`. */
export function headNames(nLayers: number, nHeads: number): string[] {
  const names: string[] = []
  for (let l = 0; l < nLayers; l++) for (let h = 0; h < nHeads; h++) names.push(`L${l}H${h}`)
  return names
}

/**
 * Detects stages, phases and span ownership in a run's evaluations.
 *
 * @param lines - the run's evaluations in step order
 * @param groupNames - offset-group (span) names, most important first; empty for tasks without
 * @param heads - head names, in the order of `spanMass`
 * @param oracles - reference lines (nearest-oracle and the loss method's chance/floor)
 */
export function analyzeRun(
  lines: readonly MetricLine[],
  groupNames: readonly string[],
  heads: readonly string[],
  oracles: readonly OracleLine[],
  options: RunAnalysisOptions = {},
): RunAnalysis {
  const focus = options.focusThreshold ?? 0.5
  const persistence = options.persistence ?? 2
  const steps = lines.map((l) => l.step)
  const losses = lines.map((l) => l.validationLoss)
  const masses = lines.map((l) => l.spanMass)
  const similarity = masses.map((m) => (m === null || m.length === 0 ? 1 : headSimilarity(m)))
  const withGroups =
    groupNames.length > 0 && masses.length > 0 && masses.every((m) => m !== null && m.length === heads.length)
  if (!withGroups) return analyzeByLoss(lines, oracles, heads, similarity, persistence)
  // The span criterion (one implementation, in @attnlab/dynamics): stage j begins when j distinct
  // spans are held, persistently.
  const stages: RunStage[] = detectSpanStages(steps, masses as readonly (readonly (readonly number[])[])[], {
    focusThreshold: focus,
    persistence,
  }).map((s) => ({
    stage: s.stage,
    step: s.time,
    spans: s.spans,
    spanNames: s.spans.map((g) => groupNames[g] as string),
    heads: s.heads.map((h) => heads[h] as string),
    plateauLoss: NaN,
    plateauEvaluations: 0,
    nearestOracle: null,
  }))
  // Plateau of stage j: median loss over the second half of [start_j, start_{j+1}).
  const withPlateaus = stages.map((stage, index) => {
    const end = stages[index + 1]?.step ?? (steps[steps.length - 1] as number) + 1
    const plateau = plateauOf(steps, losses, stage.step, end)
    const plateauLoss = plateau.loss
    return {
      ...stage,
      plateauLoss,
      plateauEvaluations: plateau.evaluations,
      nearestOracle: stageOracle(stage.stage, plateauLoss, oracles) ?? nearest(plateauLoss, oracles),
    }
  })
  const last = masses[masses.length - 1] as readonly (readonly number[])[]
  const finalHolders = groupNames.map((_, g) => {
    let bestHead = 0
    for (let h = 1; h < heads.length; h++) if ((last[h]?.[g] as number) > (last[bestHead]?.[g] as number)) bestHead = h
    const mass = last[bestHead]?.[g] as number
    return mass > focus ? { head: heads[bestHead] as string, mass } : null
  })
  const owners = finalHolders.map((h) => h?.head ?? null)
  const eachSpanOwnHead = owners.every((o) => o !== null) && new Set(owners).size === owners.length
  const phases = classifyPhases(steps, masses as readonly (readonly (readonly number[])[])[], {
    focusThreshold: focus,
    minSamples: 2,
  })
  return {
    method: 'spans',
    stages: withPlateaus,
    phases,
    finalHolders,
    eachSpanOwnHead,
    emergenceStep: withPlateaus[0]?.step ?? null,
    positionEmergence: positionEmergence(lines),
    entropyDrops: entropyDrops(lines, heads),
    headSimilarity: similarity,
  }
}

/** Each predicted position's emergence step ({@link EMERGENCE_DEFINITIONS}' `positionEmergence`). */
function positionEmergence(lines: readonly MetricLine[]): (number | null)[] {
  const steps = lines.map((l) => l.step)
  const positions = Math.max(0, ...lines.map((l) => l.perPositionLoss.length))
  return Array.from(
    { length: positions },
    (_, p) =>
      curveDrop(
        steps,
        lines.map((l) => l.perPositionLoss[p] ?? null),
      )?.step ?? null,
  )
}

/** Each head's attention-entropy drop ({@link EMERGENCE_DEFINITIONS}' `entropyDrop`). */
function entropyDrops(lines: readonly MetricLine[], heads: readonly string[]): HeadEntropyDrop[] {
  return headEntropyDrops(
    lines.map((l) => l.step),
    lines.map((l) => l.attentionEntropy),
    heads,
  )
}

/** The loss method's crossing: `@attnlab/dynamics`' {@link detectCrossing}, as a step or null. */
function firstPersistentBelow(
  steps: readonly number[],
  values: readonly (number | null)[],
  level: number,
  persistence: number,
): number | null {
  return detectCrossing(steps, values, level, persistence)?.time ?? null
}

function analyzeByLoss(
  lines: readonly MetricLine[],
  oracles: readonly OracleLine[],
  heads: readonly string[],
  similarity: readonly number[],
  persistence: number,
): RunAnalysis {
  const steps = lines.map((l) => l.step)
  const losses = lines.map((l) => l.validationLoss)
  const chance = oracles.find((o) => o.kind === 'chance')?.value ?? lines[0]?.validationLoss ?? 0
  const floor = oracles.find((o) => o.kind === 'floor' || o.kind === 'teacher-entropy')?.value ?? 0
  const level = 0.5 * (chance + floor)
  const emergenceStep = firstPersistentBelow(
    steps,
    lines.map((l) => l.validationLoss),
    level,
    persistence,
  )
  const byPosition = positionEmergence(lines)
  // Each output position whose loss drops is one stage (Baherwani et al.: positions are learned
  // one at a time, each in an abrupt drop), in the order they were learned.
  const learned = byPosition
    .map((step, p) => ({ step, p }))
    .filter((x): x is { step: number; p: number } => x.step !== null)
    .sort((a, b) => a.step - b.step || a.p - b.p)
  const stages: RunStage[] = learned.map(({ step, p }, index) => {
    const end = learned[index + 1]?.step ?? (steps[steps.length - 1] as number) + 1
    const plateau = plateauOf(steps, losses, step, end)
    return {
      stage: index + 1,
      step,
      spans: [p],
      spanNames: [`position ${p + 1}`],
      heads: [],
      plateauLoss: plateau.loss,
      plateauEvaluations: plateau.evaluations,
      nearestOracle: nearest(plateau.loss, oracles),
    }
  })
  return {
    method: 'loss',
    stages,
    phases: [],
    finalHolders: [],
    eachSpanOwnHead: false,
    emergenceStep,
    positionEmergence: byPosition,
    entropyDrops: entropyDrops(lines, heads),
    headSimilarity: similarity,
  }
}
