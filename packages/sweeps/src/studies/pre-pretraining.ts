/**
 * `pre-pretraining`: the linear map's emergence step over seeds, from scratch and starting from the
 * weights of a model trained on cellular automata (Baherwani et al., arXiv 2606.25010:
 * pre-pretraining on a synthetic task speeds emergence up).
 *
 * @module
 */
import type { TrialRecord } from '../record.ts'
import {
  censoredMedian,
  emergenceEcdfChart,
  describe,
  formatNumber,
  groupBy,
  metricOf,
  numberOf,
  paramOf,
  type Study,
  type StudyFinding,
  type StudyPart,
  type StudySize,
  type StudyTable,
} from './study.ts'

/** Both tasks' model: one `gpt` block of width 64 with 8 heads, so every parameter transfers. */
const MODEL = { nLayers: 1, dModel: 64, nHeads: 8 }

const SIZES: Record<
  StudySize,
  { sourceSteps: number; stateSize: number; onesPerRow: number; steps: number; seeds: number }
> = {
  default: { sourceSteps: 1000, stateSize: 8, onesPerRow: 2, steps: 600, seeds: 10 },
  full: { sourceSteps: 10_000, stateSize: 16, onesPerRow: 3, steps: 10_000, seeds: 20 },
}

interface Row {
  readonly pretrained: boolean
  readonly seeds: number
  readonly emerged: number[]
  readonly budget: number
  readonly loss: ReturnType<typeof describe>
}

function rowsOf(records: readonly TrialRecord[]): Row[] {
  const done = records.filter((r) => r.status === 'done')
  const pretrained = (r: TrialRecord): boolean => typeof paramOf(r, 'training.initFrom') === 'string'
  return [...groupBy(done, pretrained).entries()]
    .map(([isPretrained, group]) => ({
      pretrained: isPretrained,
      seeds: group.length,
      emerged: group.map((r) => metricOf(r, 'emergenceStep')).filter((v): v is number => v !== null),
      budget: Math.max(...group.map((r) => numberOf(r, 'training.steps'))),
      loss: describe(group.map((r) => metricOf(r, 'finalValidationLoss')).filter((v): v is number => v !== null)),
    }))
    .sort((a, b) => Number(a.pretrained) - Number(b.pretrained))
}

/** The median emergence step, a seed that did not emerge counting as the budget. */
const rowMedian = (row: Row): number => censoredMedian(row.emerged, row.seeds, row.budget)

function speedFinding(rows: readonly Row[]): StudyFinding {
  const claim = 'Pre-pretraining on cellular automata makes the linear map emerge sooner (median over seeds)'
  const scratch = rows.find((r) => !r.pretrained)
  const pretrained = rows.find((r) => r.pretrained)
  if (scratch === undefined || pretrained === undefined) {
    return { claim, holds: null, evidence: 'the runs from scratch or the pre-pretrained runs did not finish' }
  }
  if (scratch.emerged.length === 0 && pretrained.emerged.length === 0) {
    return { claim, holds: null, evidence: `no seed emerged within ${scratch.budget} steps either way` }
  }
  const a = rowMedian(scratch)
  const b = rowMedian(pretrained)
  return {
    claim,
    holds: b < a,
    evidence:
      `median emergence step ${formatNumber(b)} pre-pretrained (${pretrained.emerged.length}/${pretrained.seeds} ` +
      `emerged) against ${formatNumber(a)} from scratch (${scratch.emerged.length}/${scratch.seeds}); seeds that ` +
      'did not emerge count as the budget',
  }
}

/**
 * The pre-pretraining study. Part `source`: one model trained on binary cellular automata (8 cells,
 * 2 states per sequence: 16 tokens, the linear map's length, so every parameter transfers). Part
 * `target`: the linear map (default S = 8, s = 2, 600 steps, 10 seeds) from scratch and from the
 * source's final weights (`training.initFrom`, resolved to the source trial's run directory when
 * the study runs). Full: a 10,000-step source, S = 16 with s = 3, 20 seeds.
 *
 * @category Studies
 */
export const prePretraining: Study = {
  name: 'pre-pretraining',
  title: 'Pre-pretraining on cellular automata against training from scratch (linear map)',
  source: 'Baherwani et al., arXiv 2606.25010 (pre-pretraining on synthetic tasks speeds emergence up)',
  description:
    'The paper reports that pre-pretraining on a synthetic task speeds up the emergence of the sparse attention ' +
    'pattern. Here a one-block gpt (width 64, 8 heads) is trained on cellular automata whose sequences have the ' +
    "linear map's length, then the linear map is trained from those weights (all parameters copied) and from " +
    'scratch, over seeds; the emergence step is the first evaluation from which the validation loss stays below ' +
    'the midpoint of chance and floor.',
  parts(size, context) {
    const s = SIZES[size]
    const sourceDirectory = context?.trialDirectory('source', 0) ?? '<study directory>/source/trials/<trial 0>'
    const source: StudyPart = {
      name: 'source',
      description: `cellular automata, 8 cells x 2 states, one seed, ${s.sourceSteps} steps`,
      spec: {
        name: `pre-pretraining-source${size === 'full' ? '-full' : ''}`,
        description: 'the pre-pretraining run on cellular automata',
        experiment: 'emergence',
        base: {
          task: { kind: 'cellular-automaton', cells: s.stateSize, states: 2 },
          preset: 'gpt',
          model: MODEL,
          training: { steps: s.sourceSteps, evalEvery: Math.max(10, s.sourceSteps / 40), validationSize: 256 },
        },
        seeds: 1,
      },
    }
    const target: StudyPart = {
      name: 'target',
      description:
        `the linear map S = ${s.stateSize}, s = ${s.onesPerRow}, from scratch and pre-pretrained, ` +
        `${s.seeds} seeds`,
      spec: {
        name: `pre-pretraining-target${size === 'full' ? '-full' : ''}`,
        description: 'the linear map from scratch and from the cellular-automaton weights',
        experiment: 'emergence',
        base: {
          task: { kind: 'linear-map', stateSize: s.stateSize, onesPerRow: s.onesPerRow },
          preset: 'gpt',
          model: MODEL,
          training: { steps: s.steps, validationSize: 512, analysisSize: 128 },
        },
        grid: { 'training.initFrom': [null, sourceDirectory] },
        seeds: s.seeds,
      },
    }
    return [source, target]
  },
  assess(records) {
    const rows = rowsOf(records.target ?? [])
    const table: StudyTable = {
      title: 'Emergence of the linear map, from scratch and pre-pretrained',
      columns: ['start', 'seeds', 'emerged', 'median step (censored at the budget)', 'min', 'max', 'mean final loss'],
      rows: rows.map((row) => {
        const d = describe(row.emerged)
        return [
          row.pretrained ? 'cellular-automaton weights' : 'scratch',
          row.seeds,
          row.emerged.length,
          formatNumber(rowMedian(row)),
          formatNumber(d?.min),
          formatNumber(d?.max),
          formatNumber(row.loss?.mean),
        ]
      }),
    }
    const values = (records.target ?? []).flatMap((r) => {
      const step = metricOf(r, 'emergenceStep')
      const start = typeof paramOf(r, 'training.initFrom') === 'string' ? 'pre-pretrained' : 'scratch'
      return step === null ? [] : [{ start, step }]
    })
    const chart = emergenceEcdfChart(values, 'start', 'Empirical CDF of the emergence step (seeds that emerged)')
    return { findings: [speedFinding(rows)], tables: [table], charts: values.length === 0 ? [] : [chart] }
  },
}
