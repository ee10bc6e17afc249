/**
 * `emergence-time`: the distribution of emergence steps over many seeds, and how it shifts with
 * context length (Baherwani et al., arXiv 2606.25010: emergence is a random search for a sparse
 * attention pattern, so its time spreads over seeds and grows with the context).
 *
 * @module
 */
import { sampleRankCorrelation } from 'simple-statistics'
import type { TrialRecord } from '../record.ts'
import {
  censoredMedian,
  censoredSteps,
  emergenceEcdfChart,
  describe,
  formatNumber,
  groupBy,
  metricOf,
  numberOf,
  type Study,
  type StudyFinding,
  type StudyPart,
  type StudySize,
  type StudyTable,
} from './study.ts'

/** The spread the first finding asks for: the slowest seed emerges at least this many times later than the fastest. */
const SPREAD_RATIO = 1.5

interface Size {
  readonly seeds: number
  readonly markov: { readonly genLens: number[]; readonly steps: number; readonly task: Record<string, unknown> }
  readonly linear: { readonly stateSizes: number[]; readonly steps: number; readonly onesPerRow: number }
}

const SIZES: Record<StudySize, Size> = {
  default: {
    seeds: 20,
    markov: { genLens: [8, 16, 32], steps: 200, task: { vocabSize: 8, spans: [1, 1], tau: 0.3 } },
    linear: { stateSizes: [8], steps: 600, onesPerRow: 2 },
  },
  full: {
    seeds: 30,
    markov: { genLens: [10, 20, 40], steps: 1500, task: {} },
    linear: { stateSizes: [8, 16], steps: 10_000, onesPerRow: 2 },
  },
}

/** The context axis of each part. */
const CONTEXT: Record<string, { path: string; label: string }> = {
  'sparse-markov': { path: 'task.genLen', label: 'generated length' },
  'linear-map': { path: 'task.stateSize', label: 'state size S' },
}

interface Row {
  readonly part: string
  readonly context: number
  readonly seeds: number
  readonly emerged: number[]
  readonly budget: number
}

function rowsOf(part: string, records: readonly TrialRecord[]): Row[] {
  const axis = CONTEXT[part]?.path ?? 'task.genLen'
  const done = records.filter((r) => r.status === 'done')
  return [...groupBy(done, (r) => numberOf(r, axis)).entries()]
    .map(([context, group]) => ({
      part,
      context,
      seeds: group.length,
      emerged: group.map((r) => metricOf(r, 'emergenceStep')).filter((v): v is number => v !== null),
      budget: Math.max(...group.map((r) => numberOf(r, 'training.steps'))),
    }))
    .sort((a, b) => a.context - b.context)
}

function spreadFinding(rows: readonly Row[]): StudyFinding {
  const claim = `Emergence time spreads over seeds (the slowest seed at least ${SPREAD_RATIO}x the fastest)`
  const usable = rows.filter((row) => row.emerged.length >= 3)
  if (usable.length === 0) return { claim, holds: null, evidence: 'fewer than 3 seeds emerged in every setting' }
  const ratios = usable.map((row) => {
    const d = describe(row.emerged)
    return { row, ratio: d === null || d.min <= 0 ? Number.POSITIVE_INFINITY : d.max / d.min, d }
  })
  const evidence = ratios
    .map(
      ({ row, ratio, d }) =>
        `${row.part} ${CONTEXT[row.part]?.label ?? 'context'} ${row.context}: steps ${formatNumber(d?.min)} to ` +
        `${formatNumber(d?.max)} (x${formatNumber(ratio, 3)}), ${row.emerged.length}/${row.seeds} seeds emerged`,
    )
    .join('; ')
  return { claim, holds: ratios.every((r) => r.ratio >= SPREAD_RATIO), evidence }
}

/**
 * Emergence grows with the context: the rank correlation of context and emergence step over all
 * seeds (a seed that did not emerge counts as the budget, a lower bound), positive and medians
 * non-decreasing.
 */
function contextFinding(part: string, rows: readonly Row[]): StudyFinding {
  const label = CONTEXT[part]?.label ?? 'context'
  const claim = `${part}: emergence takes longer at a longer context (${label})`
  if (rows.length < 2) return { claim, holds: null, evidence: `only ${rows.length} ${label} value(s) at this size` }
  const xs: number[] = []
  const ys: number[] = []
  for (const row of rows) {
    for (const step of censoredSteps(row.emerged, row.seeds, row.budget)) {
      xs.push(row.context)
      ys.push(step)
    }
  }
  const rho = sampleRankCorrelation(xs, ys)
  const medians = rows.map((row) => censoredMedian(row.emerged, row.seeds, row.budget))
  const rising = medians.every((m, k) => k === 0 || m >= (medians[k - 1] as number))
  return {
    claim,
    holds: Number.isFinite(rho) ? rho > 0 && rising : null,
    evidence:
      `median emergence step ${rows.map((row, k) => `${formatNumber(medians[k])} at ${row.context}`).join(', ')} ` +
      `(seeds that did not emerge count as the budget); Spearman rank correlation ${formatNumber(rho, 3)}`,
  }
}

/**
 * The emergence-time study: many seeds of two tasks, the emergence step of each (the first
 * stage's step: for the sparse Markov chain the first span stage, for the linear map the first
 * evaluation at which the validation loss stays below the midpoint of chance and floor), as a
 * histogram and an empirical CDF per context length. Default: 20 seeds of a small sparse Markov
 * chain (vocabulary 8, two singleton spans) at generated lengths 8, 16 and 32, and of the linear
 * map at S = 8, s = 2.
 *
 * @category Studies
 */
export const emergenceTime: Study = {
  name: 'emergence-time',
  title: 'The distribution of emergence steps over seeds, and its shift with context length',
  source: 'Baherwani et al., arXiv 2606.25010 (emergence steps over seeds: Figure 1; against the context: Figure 4)',
  description:
    'Emergence is a random search for the sparse attention pattern: the step at which it happens varies from ' +
    'seed to seed and grows with the context length. Each part runs many seeds; the emergence step is the ' +
    "first stage's step of attnlab emergence (a seed with no stage by the budget did not emerge; it enters the " +
    'context comparison as the budget, a lower bound).',
  parts(size) {
    const { seeds, markov, linear } = SIZES[size]
    const markovPart: StudyPart = {
      name: 'sparse-markov',
      description: `generated lengths ${markov.genLens.join(', ')}, ${seeds} seeds, ${markov.steps} steps`,
      spec: {
        name: `emergence-time-sparse-markov${size === 'full' ? '-full' : ''}`,
        description: 'emergence steps of the sparse Markov chain over seeds and generated lengths',
        experiment: 'emergence',
        base: {
          task: { kind: 'sparse-markov', ...(markov.task as Record<string, never>) },
          training:
            size === 'full'
              ? { steps: markov.steps }
              : { steps: markov.steps, batchSize: 64, lr: 0.08, validationSize: 128, analysisSize: 64, evalEvery: 5 },
        },
        grid: { 'task.genLen': markov.genLens },
        seeds,
      },
    }
    const linearPart: StudyPart = {
      name: 'linear-map',
      description:
        `S = ${linear.stateSizes.join(', ')}, s = ${linear.onesPerRow}, ${seeds} seeds, ` + `${linear.steps} steps`,
      spec: {
        name: `emergence-time-linear-map${size === 'full' ? '-full' : ''}`,
        description: 'emergence steps of the linear map over seeds and state sizes',
        experiment: 'emergence',
        base: {
          task: { kind: 'linear-map', onesPerRow: linear.onesPerRow },
          training: { steps: linear.steps, validationSize: 512, analysisSize: 128 },
        },
        grid: { 'task.stateSize': linear.stateSizes },
        seeds,
      },
    }
    return [markovPart, linearPart]
  },
  assess(records) {
    const parts = ['sparse-markov', 'linear-map']
    const rows = parts.flatMap((part) => rowsOf(part, records[part] ?? []))
    const findings = [
      spreadFinding(rows),
      ...parts.map((part) =>
        contextFinding(
          part,
          rows.filter((r) => r.part === part),
        ),
      ),
    ]
    const table: StudyTable = {
      title: 'Emergence steps per task and context',
      columns: ['task', 'context', 'seeds', 'emerged', 'min', 'median', 'mean', 'max', 'sd', 'budget'],
      rows: rows.map((row) => {
        const d = describe(row.emerged)
        return [
          row.part,
          `${CONTEXT[row.part]?.label ?? 'context'} ${row.context}`,
          row.seeds,
          row.emerged.length,
          formatNumber(d?.min),
          formatNumber(d?.median),
          formatNumber(d?.mean),
          formatNumber(d?.max),
          formatNumber(d?.sd, 3),
          row.budget,
        ]
      }),
    }
    const values = rows.flatMap((row) =>
      row.emerged.map((step) => ({ task: row.part, context: `${row.part} ${row.context}`, step })),
    )
    const histogram = {
      $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
      title: 'Emergence steps over seeds (seeds that did not emerge are left out)',
      data: { values },
      facet: { row: { field: 'context', type: 'nominal', title: null } },
      spec: {
        width: 480,
        height: 90,
        mark: 'bar',
        encoding: {
          x: { field: 'step', type: 'quantitative', bin: { maxbins: 30 }, title: 'emergence step' },
          y: { aggregate: 'count', type: 'quantitative', title: 'seeds' },
        },
      },
      resolve: { scale: { x: 'independent' } },
    }
    const ecdf = emergenceEcdfChart(
      values,
      'context',
      'Empirical CDF of the emergence step (share of the seeds that emerged)',
    )
    return { findings, tables: [table], charts: values.length === 0 ? [] : [histogram as never, ecdf] }
  },
}
