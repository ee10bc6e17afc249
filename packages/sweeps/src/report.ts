/**
 * The sweep report: any summary metric against any swept parameter (every seed a point, with
 * the mean and its spread), faceted by a second parameter, as one self-contained HTML page
 * (Vega-Lite, rendered to inline SVG), and a CSV of every trial.
 *
 * @module
 */
import { stringify } from 'csv-stringify/sync'
import { ConfigError } from '@attnlab/core'
import { renderSvg, type PlotSpec } from '@attnlab/experiments'
import { canonicalJson, type JsonValue } from './json.ts'
import type { TrialRecord } from './record.ts'

/**
 * Options of {@link buildSweepReport}.
 *
 * @category Sweeps
 */
export interface SweepReportOptions {
  /** The metrics to plot (default: every metric some done trial has a number for). */
  readonly metrics?: readonly string[]
  /** The swept parameter on the x axis (default: the first one with more than one value; else `seed`). */
  readonly x?: string
  /** A second swept parameter to facet by (default: the next one with more than one value, if any). */
  readonly facet?: string
  /** The page's title (default: the sweep's name). */
  readonly title?: string
}

/**
 * What {@link buildSweepReport} returns.
 *
 * @category Sweeps
 */
export interface SweepReport {
  /** The HTML page (inline SVG, opens offline). */
  readonly html: string
  /** Every trial, one row each: index, id, status, attempts, seed, the swept values, the metrics, the error, times. */
  readonly csv: string
  /** The parameter on the x axis and the facet (null: none). */
  readonly x: string
  readonly facet: string | null
  /** The metrics plotted. */
  readonly metrics: readonly string[]
  /** What the charts show, as numbers: per metric, x value and facet value, the seeds' mean and spread. */
  readonly groups: readonly SweepReportGroup[]
  /**
   * Per plotted metric that some done trials lack (no key, or null), the indices of those trials: their points are
   * missing from the chart and the means, so a metric named differently in some trials does not vanish silently.
   */
  readonly absent: Readonly<Record<string, readonly number[]>>
}

/**
 * One point of a report's mean line: a metric over the done trials that share an x value (and a
 * facet value).
 *
 * @category Sweeps
 */
export interface SweepReportGroup {
  readonly metric: string
  /** The x value and the facet value, as the axis labels show them. */
  readonly x: string
  readonly facet: string | null
  /** Done trials with a number for the metric. */
  readonly n: number
  readonly mean: number
  /** Sample standard deviation (n - 1 in the denominator, as Vega-Lite's `stdev`); 0 for one trial. */
  readonly sd: number
  readonly min: number
  readonly max: number
}

/** The mean line's points of one metric. */
function groupsOf(
  records: readonly TrialRecord[],
  metric: string,
  x: string,
  facet: string | null,
): SweepReportGroup[] {
  const byKey = new Map<string, { x: string; facet: string | null; values: number[] }>()
  for (const record of records) {
    const y = record.metrics[metric]
    if (typeof y !== 'number' || !Number.isFinite(y)) continue
    const xLabel = label(parameterValue(record, x))
    const facetLabel = facet === null ? null : label(parameterValue(record, facet))
    const key = `${facetLabel ?? ''}\u0000${xLabel}`
    const group = byKey.get(key) ?? { x: xLabel, facet: facetLabel, values: [] }
    group.values.push(y)
    byKey.set(key, group)
  }
  return [...byKey.values()].map(({ x: xLabel, facet: facetLabel, values }) => {
    const n = values.length
    const mean = values.reduce((a, b) => a + b, 0) / n
    const sd = n < 2 ? 0 : Math.sqrt(values.reduce((a, b) => a + (b - mean) ** 2, 0) / (n - 1))
    return { metric, x: xLabel, facet: facetLabel, n, mean, sd, min: Math.min(...values), max: Math.max(...values) }
  })
}

/** Escapes text for HTML (the study report shares it). */
export const escapeHtml = (text: string): string =>
  text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;')

/** The report pages' style sheet (the study report shares it). */
export const CSS = [
  'body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:2rem auto;max-width:1100px;' +
    'color:#222;line-height:1.45;padding:0 1rem}',
  'h1{font-size:1.5rem}h2{font-size:1.15rem;margin-top:2rem}',
  'table{border-collapse:collapse;margin:.5rem 0 1rem}td,th{border:1px solid #ddd;padding:.25rem .6rem;' +
    'text-align:left;font-size:.9rem}th{background:#f6f6f6}td{overflow-wrap:anywhere}',
  'figure{margin:1rem 0 2rem}figcaption{color:#555;font-size:.9rem;max-width:900px}svg{max-width:100%;height:auto}',
].join('\n')

/** A swept value as a cell or axis label: numbers and strings as they are, anything else as JSON. */
function label(value: JsonValue | undefined): string {
  if (value === undefined) return ''
  return typeof value === 'string' ? value : canonicalJson(value)
}

/** Each swept parameter (and `seed`) with its distinct values, in first-seen order. */
function parameterValues(records: readonly TrialRecord[]): Map<string, JsonValue[]> {
  const values = new Map<string, JsonValue[]>()
  for (const record of records) {
    for (const [key, value] of Object.entries(record.params)) {
      const list = values.get(key) ?? []
      if (!list.some((v) => canonicalJson(v) === canonicalJson(value))) list.push(value)
      values.set(key, list)
    }
  }
  values.set('seed', [...new Set(records.map((r) => r.seed))])
  return values
}

/** The value of a parameter (or `seed`) in a record. */
function parameterValue(record: TrialRecord, parameter: string): JsonValue | undefined {
  return parameter === 'seed' ? record.seed : record.params[parameter]
}

/** One metric against `x`: every trial a point, the mean a line, mean ± one standard deviation a bar. */
function metricSpec(
  records: readonly TrialRecord[],
  metric: string,
  x: string,
  facet: string | null,
  numericX: boolean,
): PlotSpec {
  const rows = records.flatMap((record) => {
    const y = record.metrics[metric]
    if (typeof y !== 'number' || !Number.isFinite(y)) return []
    const xValue = parameterValue(record, x)
    return [
      {
        x: numericX ? xValue : label(xValue),
        y,
        seed: record.seed,
        ...(facet === null ? {} : { facet: label(parameterValue(record, facet)) }),
      },
    ]
  })
  const xEncoding = { field: 'x', type: numericX ? 'quantitative' : 'ordinal', title: x } as const
  const layer = {
    width: 320,
    height: 200,
    layer: [
      {
        mark: { type: 'point', filled: true, opacity: 0.55, color: '#4c78a8' },
        encoding: {
          x: xEncoding,
          y: { field: 'y', type: 'quantitative', title: metric, scale: { zero: false } },
          tooltip: [{ field: 'seed' }, { field: 'y', title: metric }],
        },
      },
      {
        mark: { type: 'errorbar', extent: 'stdev', color: '#e45756', ticks: true },
        encoding: { x: xEncoding, y: { field: 'y', type: 'quantitative', title: metric } },
      },
      {
        mark: { type: 'line', color: '#e45756', point: { color: '#e45756' } },
        encoding: { x: xEncoding, y: { aggregate: 'mean', field: 'y', type: 'quantitative', title: metric } },
      },
    ],
  }
  const spec =
    facet === null
      ? { ...layer, data: { values: rows } }
      : {
          data: { values: rows },
          facet: { field: 'facet', type: 'ordinal', title: facet },
          columns: 3,
          spec: layer,
        }
  return { $schema: 'https://vega.github.io/schema/vega-lite/v6.json', ...spec } as unknown as PlotSpec
}

/** The CSV of every trial. */
function trialsCsv(records: readonly TrialRecord[], parameters: readonly string[], metrics: readonly string[]): string {
  const header = [
    'index',
    'id',
    'status',
    'attempts',
    'seed',
    ...parameters,
    ...metrics,
    'error_code',
    'error_message',
    'duration_seconds',
    'backend',
    'attnlab_version',
    'host',
    'started_at',
    'finished_at',
  ]
  const rows = records.map((r) => [
    r.index,
    r.id,
    r.status,
    r.attempts,
    r.seed,
    ...parameters.map((p) => label(r.params[p])),
    ...metrics.map((m) => r.metrics[m] ?? ''),
    r.error?.code ?? '',
    r.error?.message ?? '',
    r.durationSeconds,
    r.backend,
    r.attnlabVersion,
    r.host,
    r.startedAt,
    r.finishedAt,
  ])
  return stringify([header, ...rows])
}

/**
 * Builds a sweep's report from its records ({@link TrialRecord}, e.g. `readTrials(DIR)`): for
 * each metric, a chart of the metric against the swept parameter `x` (every done trial a point,
 * so each seed shows; the mean over seeds a line, mean ± one standard deviation a bar), faceted by
 * a second parameter; a table of failed trials with their errors; and a CSV of all trials.
 * Numeric `x` values get a quantitative axis, anything else (lists, strings) an ordinal one.
 *
 * @param records - the trials' records (any status; only `done` ones are plotted)
 * @param options - metrics, x, facet, title
 * @returns the HTML page and the CSV, with the axes chosen
 * @throws `ConfigError` (`@attnlab/core`, parameter `x`, `facet` or `metrics`) for a parameter or
 *   metric that no done record has (a metric every done trial records as null is charted empty and listed in
 *   `absent`), naming the ones there are
 * @example
 * ```ts
 * const { html, csv } = await buildSweepReport(await readTrials('runs/sweep'), { x: 'task.genLen' })
 * ```
 * @category Sweeps
 */
export async function buildSweepReport(
  records: readonly TrialRecord[],
  options: SweepReportOptions = {},
): Promise<SweepReport> {
  const values = parameterValues(records)
  const swept = [...values.keys()].filter((k) => k !== 'seed')
  const varying = swept.filter((k) => (values.get(k)?.length ?? 0) > 1)
  const done = records.filter((r) => r.status === 'done')
  const allMetrics = [...new Set(done.flatMap((r) => Object.keys(r.metrics)))].filter((m) =>
    done.some((r) => typeof r.metrics[m] === 'number'),
  )
  const refuse = (path: string, given: string, known: readonly string[]): never => {
    throw new ConfigError(
      path,
      `'${given}' is not in these records; expected one of ${known.length > 0 ? known.join(', ') : '(none)'}`,
      { value: given, allowed: [...known] },
    )
  }
  const x = options.x ?? varying[0] ?? 'seed'
  if (!values.has(x)) refuse('x', x, [...values.keys()])
  const facet = options.facet ?? varying.find((k) => k !== x) ?? null
  if (facet !== null && facet === x) {
    const others = [...values.keys()].filter((k) => k !== x)
    const listed = others.length > 0 ? others.join(', ') : '(none)'
    throw new ConfigError('facet', `'${facet}' is already the x axis; expected another parameter: ${listed}`, {
      value: facet,
      allowed: others,
    })
  }
  if (facet !== null && !values.has(facet)) refuse('facet', facet, [...values.keys()])
  // a metric asked for by name may be one the done trials record only as null (a NaN): charted empty, named absent
  const recorded = [...new Set(done.flatMap((r) => Object.keys(r.metrics)))]
  const metrics = options.metrics === undefined ? allMetrics : [...new Set(options.metrics)]
  for (const metric of metrics) if (!recorded.includes(metric)) refuse('metrics', metric, allMetrics)
  const numericX = (values.get(x) ?? []).every((v) => typeof v === 'number')
  const name = records[0]?.sweep ?? ''
  const title = options.title ?? `Sweep ${name === '' ? '' : `'${name}'`}`.trim()

  const absent: Record<string, number[]> = {}
  for (const metric of metrics) {
    const lacking = done.filter((r) => typeof r.metrics[metric] !== 'number').map((r) => r.index)
    if (lacking.length > 0) absent[metric] = lacking
  }
  const figures: string[] = []
  for (const metric of metrics) {
    const svg = await renderSvg(metricSpec(done, metric, x, facet, numericX))
    const lacking = absent[metric]
    const caption =
      `${metric} of each done trial (blue points: one per seed and setting) against ${x}` +
      `${facet === null ? '' : `, one panel per ${facet}`}; red: the mean over the seeds, with a bar of ± one ` +
      'standard deviation.' +
      (lacking === undefined
        ? ''
        : ` ${lacking.length} of ${done.length} done trial${done.length === 1 ? '' : 's'} ${
            lacking.length === 1 ? 'has' : 'have'
          } no number for it (trial${lacking.length === 1 ? '' : 's'} ${lacking.join(', ')}) and ${
            lacking.length === 1 ? 'is' : 'are'
          } not shown.`)
    figures.push(`<figure><h2>${escapeHtml(metric)}</h2>${svg}<figcaption>${escapeHtml(caption)}</figcaption></figure>`)
  }
  const counts = ['done', 'failed', 'interrupted'].map((s) => `${records.filter((r) => r.status === s).length} ${s}`)
  const parameterRows = [...values.entries()]
    .map(([k, v]) => `<tr><td>${escapeHtml(k)}</td><td>${escapeHtml(v.map(label).join(', '))}</td></tr>`)
    .join('')
  const failed = records.filter((r) => r.status === 'failed')
  const failedTable =
    failed.length === 0
      ? ''
      : '<h2>Failed trials</h2><table><tr><th>trial</th><th>id</th><th>attempts</th><th>error</th></tr>' +
        failed
          .map(
            (r) =>
              `<tr><td>${r.index}</td><td>${r.id}</td><td>${r.attempts}</td><td>${escapeHtml(
                `[${r.error?.code ?? ''}] ${r.error?.name ?? ''}: ${r.error?.message ?? ''}`,
              )}</td></tr>`,
          )
          .join('') +
        '</table>'
  const versions = [...new Set(records.map((r) => r.attnlabVersion))].join(', ')
  const backends = [...new Set(records.map((r) => r.backend))].join(', ')
  const html =
    `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(title)}</title>
<style>
${CSS}
</style></head><body>
<h1>${escapeHtml(title)}</h1>
<p>${records.length} trials (${counts.join(', ')}) of the ${escapeHtml(records[0]?.experiment ?? '')} experiment; ` +
    `backend ${escapeHtml(backends)}; @attnlab/sweeps ${escapeHtml(versions)}.</p>
<table><tr><th>parameter</th><th>values</th></tr>${parameterRows}</table>
${figures.join('\n')}
${failedTable}
</body></html>
`
  const groups = metrics.flatMap((metric) => groupsOf(done, metric, x, facet))
  return { html, csv: trialsCsv(records, swept, allMetrics), x, facet, metrics, groups, absent }
}
