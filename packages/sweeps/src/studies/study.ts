/**
 * A study: a paper's figure as one or more sweeps shipped with attnlab, and the test of the
 * paper's finding on the trials' own numbers. `attnlab study run NAME` runs it (locally; through
 * the queue with `attnlab study spec` and `attnlab sweep submit`), `attnlab study report DIR`
 * states which findings held.
 *
 * @module
 */
import { max, mean, median, min, sampleStandardDeviation } from 'simple-statistics'
import type { PlotSpec } from '@attnlab/experiments'
import type { JsonValue } from '../json.ts'
import type { TrialRecord } from '../record.ts'

/**
 * A study's size: `default` finishes in at most about 20 minutes on a 2-core machine (its budgets
 * are smaller than the paper's and say so); `full` is the paper's grid and budget.
 *
 * @category Studies
 */
export type StudySize = 'default' | 'full'

/**
 * One sweep of a study, run into `DIR/<name>/`.
 *
 * @category Studies
 */
export interface StudyPart {
  /** The part's name (its subdirectory), e.g. `linear-map`. */
  readonly name: string
  /** What the part varies, one line. */
  readonly description: string
  /** The sweep spec (plain JSON, validated by `validateSweepSpec` when the study is run). */
  readonly spec: SweepSpecInput
}

/**
 * A sweep spec as a plain object, the way a YAML file spells it (`seeds` a count or a list, `zip`
 * one group or a list).
 *
 * @category Studies
 */
export type SweepSpecInput = { readonly [key: string]: JsonValue }

/**
 * Where a running study's trials are, for a part that starts from an earlier part's weights
 * (`training.initFrom`).
 *
 * @category Studies
 */
export interface StudyContext {
  /** The run directory of trial `index` (expansion order) of an earlier part. */
  trialDirectory(part: string, index: number): string
}

/**
 * One claim of the paper and whether the trials bear it out.
 *
 * @category Studies
 */
export interface StudyFinding {
  /** The paper's claim, in a sentence. */
  readonly claim: string
  /** `true` held, `false` did not, `null` undetermined (its trials were not run or did not finish). */
  readonly holds: boolean | null
  /** The numbers behind the verdict, in a sentence. */
  readonly evidence: string
}

/**
 * A table of a study's numbers (a header row and rows of cells).
 *
 * @category Studies
 */
export interface StudyTable {
  readonly title: string
  readonly columns: readonly string[]
  readonly rows: readonly (readonly (string | number | null)[])[]
}

/**
 * What a study makes of its trials.
 *
 * @category Studies
 */
export interface StudyAssessment {
  readonly findings: readonly StudyFinding[]
  readonly tables: readonly StudyTable[]
  /** The study's figures (Vega-Lite, inline data). */
  readonly charts: readonly PlotSpec[]
}

/**
 * A study of a paper's figure.
 *
 * @category Studies
 */
export interface Study {
  /** Its name on the command line (`linear-map-sparsity`). */
  readonly name: string
  /** A title for the report. */
  readonly title: string
  /** The paper and figure it reproduces (arXiv id, section or figure). */
  readonly source: string
  /** What it measures and how its default size differs from the paper's, a few sentences. */
  readonly description: string
  /**
   * Its sweeps at a size, in run order.
   *
   * @param context - where earlier parts' trials run (for a part that starts from their weights); without it
   *   those paths are placeholders (fine for validating and printing the specs)
   */
  parts(size: StudySize, context?: StudyContext): readonly StudyPart[]
  /**
   * Tests the paper's findings on the trials.
   *
   * @param records - each part's trial records by part name (a part not run yet: an empty list)
   * @param size - the size that was run
   */
  assess(records: Readonly<Record<string, readonly TrialRecord[]>>, size: StudySize): StudyAssessment
}

/** A swept value of a record at a dotted path (`task.stateSize`), or its seed. */
export function paramOf(record: TrialRecord, path: string): JsonValue | undefined {
  if (path === 'seed') return record.seed
  if (Object.hasOwn(record.params, path)) return record.params[path]
  let value: JsonValue | undefined = record.settings
  for (const key of path.split('.')) {
    if (value === null || typeof value !== 'object' || Array.isArray(value)) return undefined
    value = (value as { readonly [key: string]: JsonValue })[key]
  }
  return value
}

/** A number at a path of a record's settings or params (NaN when it is not a number). */
export function numberOf(record: TrialRecord, path: string): number {
  const value = paramOf(record, path)
  return typeof value === 'number' ? value : Number.NaN
}

/** A finite metric of a done trial, else null. */
export function metricOf(record: TrialRecord, metric: string): number | null {
  const value = record.status === 'done' ? record.metrics[metric] : undefined
  return typeof value === 'number' && Number.isFinite(value) ? value : null
}

/**
 * Summary statistics of a list of numbers (simple-statistics): n, mean, sample standard
 * deviation (0 for one value), median, min, max; null when the list is empty.
 */
export function describe(
  values: readonly number[],
): { n: number; mean: number; sd: number; median: number; min: number; max: number } | null {
  if (values.length === 0) return null
  const list = [...values]
  return {
    n: list.length,
    mean: mean(list),
    sd: list.length < 2 ? 0 : sampleStandardDeviation(list),
    median: median(list),
    min: min(list),
    max: max(list),
  }
}

/**
 * Emergence steps with the seeds that did not emerge counted as the step budget (right-censored:
 * a lower bound on their emergence step), for medians and rank correlations over all seeds.
 *
 * @param emerged - the emergence steps of the seeds that emerged
 * @param seeds - how many seeds ran (at least `emerged.length`)
 * @param budget - the steps each seed trained
 */
export function censoredSteps(emerged: readonly number[], seeds: number, budget: number): number[] {
  return [...emerged, ...Array<number>(Math.max(0, seeds - emerged.length)).fill(budget)]
}

/**
 * The median emergence step over all seeds, a seed that did not emerge counting as the budget
 * ({@link censoredSteps}); NaN when no seed ran.
 */
export function censoredMedian(emerged: readonly number[], seeds: number, budget: number): number {
  return describe(censoredSteps(emerged, seeds, budget))?.median ?? Number.NaN
}

/**
 * A vega-lite chart of the empirical CDF of the emergence step per group: for each value of
 * `group`, the share of its points at or below each step (a step line).
 *
 * @param values - one point per seed that emerged: `{ step, [group]: label }`
 * @param group - the field that names a point's group (one line each)
 * @param title - the chart's title
 */
export function emergenceEcdfChart(
  values: readonly Readonly<Record<string, JsonValue>>[],
  group: string,
  title: string,
): PlotSpec {
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title,
    width: 480,
    height: 260,
    data: { values: [...values] },
    transform: [{ window: [{ op: 'cume_dist', as: 'share' }], sort: [{ field: 'step' }], groupby: [group] }],
    mark: { type: 'line', interpolate: 'step-after', point: true },
    encoding: {
      x: { field: 'step', type: 'quantitative', title: 'emergence step' },
      y: { field: 'share', type: 'quantitative', title: 'cumulative share' },
      color: { field: group, type: 'nominal', title: null },
    },
  } as never
}

/**
 * Whether a part learned nothing at all: every finished trial still has more than 90% of the gap
 * from the first plateau to the Bayes floor left (`normalizedResidual` > 0.9). A budget that small
 * cannot test a finding either way, so the studies call their findings undetermined then.
 *
 * @returns an evidence sentence when nothing was learned, else null
 */
export function nothingLearned(records: readonly TrialRecord[]): string | null {
  const residuals = records.map((r) => metricOf(r, 'normalizedResidual'))
  if (residuals.length === 0 || residuals.some((v) => v === null || v <= 0.9)) return null
  const steps = Math.max(...records.map((r) => numberOf(r, 'training.steps')))
  return (
    `no trial learned anything within ${steps} steps (each still has more than 90% of the gap from chance ` +
    'to the floor left): the budget is too small to test this finding'
  )
}

/** Every finding undetermined, with the same evidence. */
export function undetermined(findings: readonly StudyFinding[], evidence: string): StudyFinding[] {
  return findings.map((f) => ({ ...f, holds: null, evidence }))
}

/** Groups records by a key, in first-seen order. */
export function groupBy<K>(records: readonly TrialRecord[], key: (record: TrialRecord) => K): Map<K, TrialRecord[]> {
  const groups = new Map<K, TrialRecord[]>()
  for (const record of records) {
    const k = key(record)
    const list = groups.get(k) ?? []
    list.push(record)
    groups.set(k, list)
  }
  return groups
}

/** A number for a table cell or a sentence: 4 significant digits, `n/a` for null or NaN. */
export function formatNumber(value: number | null | undefined, digits = 4): string {
  return value === null || value === undefined || !Number.isFinite(value)
    ? 'n/a'
    : Number(value.toPrecision(digits)).toString()
}
