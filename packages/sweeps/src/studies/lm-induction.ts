/**
 * `lm-induction`: induction in a small character-level language model on real English text, over
 * seeds (Baherwani et al., arXiv 2606.25010, the language-model observation: induction appears
 * abruptly during training, at a seed-dependent step, once a sparse attention pattern, a
 * previous-token head and an induction head, is found).
 *
 * @module
 */
import type { JsonValue } from '../json.ts'
import type { TrialRecord } from '../record.ts'
import {
  censoredSteps,
  describe,
  formatNumber,
  metricOf,
  numberOf,
  type Study,
  type StudyFinding,
  type StudySize,
  type StudyTable,
} from './study.ts'

/** The spread the step finding asks for: the slowest seed at least this many times the fastest. */
const SPREAD_RATIO = 1.5
/** Abrupt: the gain rises from 20% to 80% of its final value within at most this many evaluation intervals. */
const ABRUPT_INTERVALS = 3
/** Carried by few heads: knocking out the most damaging head removes at least this share of the final gain. */
const TOP_HEAD_SHARE = 0.5

/** A 2-layer `gpt` (induction needs two: a previous-token head, then an induction head). */
const MODEL = { nLayers: 2, dModel: 64, nHeads: 4 }

const SIZES: Record<StudySize, { readonly seeds: number; readonly steps: number; readonly evalEvery: number }> = {
  default: { seeds: 4, steps: 1200, evalEvery: 50 },
  full: { seeds: 10, steps: 6000, evalEvery: 100 },
}

/** One seed's curve and knockouts, from its trial metrics. */
export interface SeedCurve {
  readonly seed: number
  /** `[step, gain]` per evaluation, in step order (nats). */
  readonly gains: readonly (readonly [number, number])[]
  readonly inductionStep: number | null
  readonly finalGain: number | null
  /** Heads by damage, largest first (nats). */
  readonly heads: readonly { readonly head: string; readonly damage: number }[]
  readonly budget: number
  readonly finalValidationLoss: number | null
}

/** The curves of the finished trials, by seed. */
export function curvesOf(records: readonly TrialRecord[]): SeedCurve[] {
  return records
    .filter((r) => r.status === 'done')
    .map((r) => {
      const gains: [number, number][] = []
      const heads: { head: string; damage: number }[] = []
      for (const [key, value] of Object.entries(r.metrics)) {
        if (typeof value !== 'number' || !Number.isFinite(value)) continue
        const step = /^inductionGainStep(\d+)$/.exec(key)
        if (step !== null) gains.push([Number(step[1]), value])
        const head = /^headDamage(L\d+H\d+)$/.exec(key)
        if (head !== null) heads.push({ head: head[1] as string, damage: value })
      }
      return {
        seed: r.seed,
        gains: gains.sort((a, b) => a[0] - b[0]),
        inductionStep: metricOf(r, 'inductionStep'),
        finalGain: metricOf(r, 'finalInductionGain'),
        heads: heads.sort((a, b) => b.damage - a.damage),
        budget: numberOf(r, 'steps'),
        finalValidationLoss: metricOf(r, 'finalValidationLoss'),
      }
    })
    .sort((a, b) => a.seed - b.seed)
}

/**
 * The rise of a curve: the steps from the last evaluation below 20% of the final gain to the first evaluation
 * at or above 80% of it after that, in evaluation intervals; null without a positive final gain.
 */
export function riseIntervals(gains: readonly (readonly [number, number])[]): number | null {
  const final = gains[gains.length - 1]?.[1]
  if (final === undefined || !(final > 0)) return null
  let low = -1
  for (let i = 0; i < gains.length; i++) if ((gains[i]?.[1] as number) < 0.2 * final) low = i
  let high = gains.length - 1
  for (let i = low + 1; i < gains.length; i++) {
    if ((gains[i]?.[1] as number) >= 0.8 * final) {
      high = i
      break
    }
  }
  return low < 0 ? null : high - low
}

function abruptFinding(curves: readonly SeedCurve[]): StudyFinding {
  const claim =
    `Induction appears abruptly: the probe's gain rises from 20% to 80% of its final value within ` +
    `${ABRUPT_INTERVALS} evaluations`
  const induced = curves.filter((c) => c.inductionStep !== null)
  if (induced.length < 2) {
    return {
      claim,
      holds: null,
      evidence: `${induced.length} of ${curves.length} seed(s) reached the induction threshold; need at least 2`,
    }
  }
  const rises = induced.map((c) => ({ seed: c.seed, rise: riseIntervals(c.gains) }))
  const measured = rises.filter((r): r is { seed: number; rise: number } => r.rise !== null)
  if (measured.length < 2) {
    return {
      claim,
      holds: null,
      evidence: 'the gain was already above 20% of its final value at the first evaluation in most seeds',
    }
  }
  return {
    claim,
    holds: measured.every((r) => r.rise <= ABRUPT_INTERVALS),
    evidence:
      `rise in evaluation intervals per seed: ${measured.map((r) => `seed ${r.seed}: ${r.rise}`).join(', ')} ` +
      `(${measured.length} of ${curves.length} seeds induced with a measurable rise)`,
  }
}

function spreadFinding(curves: readonly SeedCurve[]): StudyFinding {
  const claim = `The induction step varies over seeds (the slowest seed at least ${SPREAD_RATIO}x the fastest)`
  const steps = curves.map((c) => c.inductionStep).filter((v): v is number => v !== null)
  if (steps.length === 0 || curves.length < 2) {
    return {
      claim,
      holds: null,
      evidence: `${steps.length} of ${curves.length} seed(s) reached the induction threshold`,
    }
  }
  const budget = Math.max(...curves.map((c) => c.budget))
  const all = censoredSteps(steps, curves.length, budget)
  const fastest = Math.min(...all)
  const slowest = Math.max(...all)
  const ratio = fastest > 0 ? slowest / fastest : Number.POSITIVE_INFINITY
  const censored = curves.length - steps.length
  return {
    claim,
    holds: ratio >= SPREAD_RATIO,
    evidence:
      `induction steps ${curves.map((c) => `seed ${c.seed}: ${c.inductionStep ?? `none by ${c.budget}`}`).join(', ')}` +
      '; ' +
      `slowest / fastest = ${formatNumber(ratio, 3)}` +
      (censored > 0 ? ` (a lower bound: ${censored} seed(s) counted at the budget)` : ''),
  }
}

function headsFinding(curves: readonly SeedCurve[]): StudyFinding {
  const claim =
    `Induction is carried by a sparse set of heads: knocking out the most damaging head removes at least ` +
    `${TOP_HEAD_SHARE * 100}% of the final gain`
  const induced = curves.filter((c) => c.inductionStep !== null && c.finalGain !== null && c.heads.length > 0)
  if (induced.length === 0) return { claim, holds: null, evidence: 'no seed reached the induction threshold' }
  const shares = induced.map((c) => ({
    seed: c.seed,
    head: c.heads[0]?.head ?? 'n/a',
    share: (c.heads[0]?.damage ?? 0) / (c.finalGain as number),
  }))
  return {
    claim,
    holds: shares.every((s) => s.share >= TOP_HEAD_SHARE),
    evidence: shares.map((s) => `seed ${s.seed}: ${s.head} removes ${formatNumber(100 * s.share, 3)}%`).join(', '),
  }
}

function gainChart(curves: readonly SeedCurve[]): Readonly<Record<string, JsonValue>> {
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title: 'Induction gain (second copy minus first copy, nats) against the training step, per seed',
    width: 480,
    height: 260,
    data: { values: curves.flatMap((c) => c.gains.map(([step, gain]) => ({ step, gain, seed: `seed ${c.seed}` }))) },
    mark: { type: 'line', point: true },
    encoding: {
      x: { field: 'step', type: 'quantitative', title: 'step' },
      y: { field: 'gain', type: 'quantitative', title: 'induction gain (nats)' },
      color: { field: 'seed', type: 'nominal', title: null },
    },
  }
}

/**
 * The language-model induction study: a 2-layer `gpt` (dModel 64, 4 heads, context 64 characters) trained on
 * Moby-Dick at character level (`text-chars`), with the induction probe (random character blocks repeated) scored
 * at every evaluation and each head knocked out on it at the end. Default: 4 seeds, 1,200 steps of 64 sequences;
 * full: 10 seeds, 6,000 steps.
 *
 * @category Studies
 */
export const lmInduction: Study = {
  name: 'lm-induction',
  title: 'Induction in a character-level language model on English text, over seeds',
  source: 'Baherwani et al., arXiv 2606.25010 (the language-model observation: induction appears abruptly)',
  description:
    'The paper observes that in language models induction appears abruptly during training, at a seed-dependent ' +
    'step, once a previous-token head and an induction head are found. Here a 2-layer gpt (dModel 64, 4 heads) is ' +
    'trained on Moby-Dick at character level (every tenth chapter held out for validation); at every evaluation the ' +
    'induction probe scores random 16-character blocks repeated once (gain: log-probability of the second copy minus ' +
    'the first, nats). The induction step is the first evaluation from which the gain stays at or above 1 nat. On ' +
    "each seed's final model every head is zero-ablated on the probe.",
  parts(size) {
    const s = SIZES[size]
    return [
      {
        name: 'text',
        description: `Moby-Dick characters, a 2-layer gpt, ${s.seeds} seeds, ${s.steps} steps`,
        spec: {
          name: `lm-induction${size === 'full' ? '-full' : ''}`,
          description: 'a 2-layer gpt on Moby-Dick characters, the induction probe at every evaluation',
          experiment: 'train',
          base: {
            task: { kind: 'text-chars', corpus: 'moby-dick', seqLength: 65 },
            preset: 'gpt',
            model: MODEL,
            steps: s.steps,
            batchSize: 64,
            lr: 0.003,
            evalEvery: s.evalEvery,
            validationSize: 256,
            probe: 'induction',
          },
          seeds: s.seeds,
        },
      },
    ]
  },
  assess(records) {
    const curves = curvesOf(records.text ?? [])
    const table: StudyTable = {
      title: 'Induction per seed (gain in nats; damage: how much the gain falls when the head is knocked out)',
      columns: [
        'seed',
        'induction step',
        'final gain',
        'rise (evaluations)',
        'top head (damage)',
        'second head (damage)',
        'final validation loss',
      ],
      rows: curves.map((c) => [
        c.seed,
        c.inductionStep ?? `none by ${c.budget}`,
        formatNumber(c.finalGain),
        riseIntervals(c.gains) ?? 'n/a',
        c.heads[0] === undefined ? 'n/a' : `${c.heads[0].head} (${formatNumber(c.heads[0].damage)})`,
        c.heads[1] === undefined ? 'n/a' : `${c.heads[1].head} (${formatNumber(c.heads[1].damage)})`,
        formatNumber(c.finalValidationLoss),
      ]),
    }
    const steps = describe(curves.map((c) => c.inductionStep).filter((v): v is number => v !== null))
    const summary: StudyTable = {
      title: 'Induction step over the seeds that reached the threshold',
      columns: ['seeds', 'induced', 'median', 'min', 'max'],
      rows: [
        [curves.length, steps?.n ?? 0, formatNumber(steps?.median), formatNumber(steps?.min), formatNumber(steps?.max)],
      ],
    }
    const hasCurves = curves.some((c) => c.gains.length > 0)
    return {
      findings: [abruptFinding(curves), spreadFinding(curves), headsFinding(curves)],
      tables: [table, summary],
      charts: hasCurves ? [gainChart(curves) as never] : [],
    }
  },
}
