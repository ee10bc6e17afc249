/**
 * Reports of {@link runSparseEval}: its text table, the Vega-Lite specs of The Sparse Frontier's
 * three readings (Nawrot et al., arXiv 2504.17768 [v2]): score against sparsity per task (section
 * 4.2), relative error against length at fixed sparsity (section 4.3, Fig. 3) and score against
 * cost with its Pareto frontier (isoCost, section 4.1, Fig. 1), and a self-contained `report.html`.
 *
 * @module
 */
import { renderSvg, type PlotSpec } from './plot.ts'
import { retrievalHeadsTable } from './retrieval-heads.ts'
import type { SparseEvalResult, SparseEvalRow, runSparseEval } from './sparse-eval.ts'
import type { runTextSparseEval } from './text-eval.ts'

/** A sparse row whose method did not reach its target sparsity. */
const missed = (r: SparseEvalRow): boolean => r.targetSparsity > 0 && r.method !== 'dense' && !r.targetReached

/**
 * The rows of a {@link runSparseEval} result as a fixed-width text table: task, length, method,
 * target (marked `!` when the method did not reach it, with a note below), exact and reported sparsity,
 * score +- sample std, strict, the cost relative to dense,
 * for text tasks ({@link runTextSparseEval}) the agreement with the dense output, the fraction of tagged
 * answers and the mean tokens generated, and the budget.
 *
 * @param rows - the rows of {@link runSparseEval}
 * @returns the lines, a header first
 */
export function sparseEvalTable(rows: readonly SparseEvalRow[]): string[] {
  const text = rows.some((r) => r.agreement !== undefined)
  const lines = [
    'task             length  method          target  exact  reported  score +- std     strict  cost/dense  ' +
      (text ? 'agree  tagged    new  ' : '') +
      'budget',
  ]
  for (const r of rows) {
    const budget = Object.entries(r.budget)
      .map(([k, v]) => `${k}=${Number.isInteger(v) ? v : v.toFixed(3)}`)
      .join(' ')
    const cost = r.cost === null ? '-' : r.cost.relative.toFixed(3)
    lines.push(
      `${r.task.padEnd(16)} ${String(r.length).padStart(6)}  ${r.method.padEnd(15)} ` +
        `${r.targetSparsity.toFixed(2).padStart(6)}${missed(r) ? '!' : ' '}${r.exactSparsity.toFixed(3).padStart(6)} ` +
        `${Math.max(0, r.reportedSparsity).toFixed(3).padStart(9)}  ` +
        `${r.score.toFixed(3)} +- ${r.scoreStd.toFixed(3)}  ${r.strict.toFixed(3).padStart(6)}  ` +
        `${cost.padStart(10)}  ` +
        (text
          ? `${(r.agreement ?? Number.NaN).toFixed(3)}  ${(r.tagged ?? Number.NaN).toFixed(2).padStart(6)}  ` +
            `${(r.newTokens ?? Number.NaN).toFixed(1).padStart(5)}  `
          : '') +
        budget,
    )
  }
  if (rows.some(missed))
    lines.push('! the method did not reach the target at this length (exact and reported sparsity both short of it)')
  return lines
}

/**
 * The figure of a {@link runSparseEval} result: score against target sparsity, one line per
 * method, one panel per task and length (columns: tasks; rows: lengths). Dense is the point at 0
 * of every method's line.
 *
 * @param rows - the rows of {@link runSparseEval}
 * @param title - the figure title
 * @param measure - what the y axis shows: the task score (default) or, for text tasks
 *   ({@link runTextSparseEval}), the agreement with the dense output
 * @returns a Vega-Lite (v6) spec with inline data
 */
export function sparseEvalSpec(
  rows: readonly SparseEvalRow[],
  title: string,
  measure: 'score' | 'agreement' = 'score',
): PlotSpec {
  const values = rows
    .filter((r) => r.method !== 'dense')
    .map((r) => ({
      task: r.task,
      length: r.length,
      method: r.method,
      targetSparsity: r.targetSparsity,
      exactSparsity: r.exactSparsity,
      score: r.score,
      strict: r.strict,
      agreement: r.agreement ?? null,
    }))
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title,
    data: { values },
    facet: {
      column: { field: 'task', type: 'nominal', title: 'task' },
      row: { field: 'length', type: 'ordinal', title: 'context length (tokens)' },
    },
    spec: {
      width: 260,
      height: 180,
      mark: { type: 'line', point: true },
      encoding: {
        x: { field: 'targetSparsity', type: 'quantitative', scale: { domain: [0, 1] }, title: 'target sparsity' },
        y: {
          field: measure,
          type: 'quantitative',
          scale: { domain: [0, 1] },
          title: measure === 'score' ? 'score' : 'agreement with the dense output',
        },
        color: { field: 'method', type: 'nominal', title: 'method' },
        order: { field: 'targetSparsity' },
      },
    },
  } as PlotSpec
}

/** One point of {@link relativeErrors}. */
export interface RelativeErrorPoint {
  /** The task's kind. */
  readonly task: string
  /** The context length (tokens). */
  readonly length: number
  /** The method. */
  readonly method: string
  /** The target sparsity (> 0). */
  readonly targetSparsity: number
  /** `(dense - score) / dense` of the mean scores (below 0 when the method beats dense). */
  readonly relativeError: number
}

/**
 * The study's relative error of each sparse row against the dense row of the same task and
 * length: `(p_dense - p_sparse) / p_dense` of the mean scores ([v2] section 4.3). Rows at sparsity
 * 0 (dense) and (task, length) pairs whose dense score is 0 (the error is undefined) are left out.
 *
 * @param rows - the rows of {@link runSparseEval}
 * @returns one point per sparse row with a dense score above 0, in row order
 */
export function relativeErrors(rows: readonly SparseEvalRow[]): RelativeErrorPoint[] {
  const dense = new Map<string, number>()
  for (const r of rows) if (r.method === 'dense') dense.set(`${r.task}\u0000${r.length}`, r.score)
  const points: RelativeErrorPoint[] = []
  for (const r of rows) {
    if (r.method === 'dense' || r.targetSparsity === 0) continue
    const reference = dense.get(`${r.task}\u0000${r.length}`)
    if (reference === undefined || !(reference > 0)) continue
    points.push({
      task: r.task,
      length: r.length,
      method: r.method,
      targetSparsity: r.targetSparsity,
      relativeError: (reference - r.score) / reference,
    })
  }
  return points
}

/**
 * The figure of relative error against context length, one line per method, one panel per task
 * (rows) and target sparsity (columns): the study's Fig. 3 reading (do longer sequences tolerate
 * more sparsity?) for the lengths evaluated.
 *
 * @param rows - the rows of {@link runSparseEval}
 * @param title - the figure title
 * @returns a Vega-Lite (v6) spec with inline data ({@link relativeErrors})
 */
export function sparseEvalRelativeErrorSpec(rows: readonly SparseEvalRow[], title: string): PlotSpec {
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title,
    data: { values: relativeErrors(rows) },
    facet: {
      column: { field: 'targetSparsity', type: 'ordinal', title: 'target sparsity' },
      row: { field: 'task', type: 'nominal', title: 'task' },
    },
    spec: {
      width: 200,
      height: 160,
      mark: { type: 'line', point: true },
      encoding: {
        x: { field: 'length', type: 'quantitative', scale: { type: 'log', base: 2 }, title: 'context length (tokens)' },
        y: { field: 'relativeError', type: 'quantitative', title: 'relative error (dense - sparse) / dense' },
        color: { field: 'method', type: 'nominal', title: 'method' },
        order: { field: 'length' },
      },
    },
  } as PlotSpec
}

/** One point of {@link isoCostPoints}. */
export interface IsoCostPoint {
  /** The task's kind. */
  readonly task: string
  /** The context length (tokens). */
  readonly length: number
  /** The method (`dense` for the reference, at relative cost 1). */
  readonly method: string
  /** The target sparsity. */
  readonly targetSparsity: number
  /** What the cost counts: prefill FLOPs or memory read per decode step. */
  readonly metric: 'prefill-flops' | 'decode-memory'
  /** The cost relative to dense in the same metric. */
  readonly relativeCost: number
  /** The mean score. */
  readonly score: number
  /**
   * Whether it is on the Pareto frontier: no other point of the same task, length and metric
   * costs at most as much and scores at least as high (one of them strictly).
   */
  readonly frontier: boolean
}

/**
 * Score against cost, with the Pareto frontier marked: per (task, length, cost metric), the
 * points no other point dominates (cheaper or equal and better or equal, one strictly). Dense
 * enters each metric's set at relative cost 1. The study's isoCost reading ([v2] section 4.1,
 * Fig. 1) compares a model's sparse configurations with smaller dense models at equal cost; with
 * one model this is the frontier among its configurations. Rows without a cost are left out.
 *
 * @param rows - the rows of {@link runSparseEval}
 * @returns the points, in row order (dense once per metric that has sparse rows)
 */
export function isoCostPoints(rows: readonly SparseEvalRow[]): IsoCostPoint[] {
  const groups = new Map<string, Omit<IsoCostPoint, 'frontier'>[]>()
  const add = (point: Omit<IsoCostPoint, 'frontier'>): void => {
    const key = `${point.task}\u0000${point.length}\u0000${point.metric}`
    const group = groups.get(key) ?? []
    group.push(point)
    groups.set(key, group)
  }
  for (const r of rows) {
    if (r.method === 'dense' || r.cost === null || r.targetSparsity === 0) continue
    const { task, length, method, targetSparsity, score } = r
    const key = `${task}\u0000${length}\u0000${r.cost.metric}`
    if (!groups.has(key)) {
      const dense = rows.find((d) => d.method === 'dense' && d.task === task && d.length === length)
      if (dense !== undefined)
        add({
          task,
          length,
          method: 'dense',
          targetSparsity: 0,
          metric: r.cost.metric,
          relativeCost: 1,
          score: dense.score,
        })
    }
    add({ task, length, method, targetSparsity, metric: r.cost.metric, relativeCost: r.cost.relative, score })
  }
  const points: IsoCostPoint[] = []
  for (const group of groups.values()) {
    for (const p of group) {
      const dominated = group.some(
        (q) =>
          q !== p &&
          q.relativeCost <= p.relativeCost &&
          q.score >= p.score &&
          (q.relativeCost < p.relativeCost || q.score > p.score),
      )
      points.push({ ...p, frontier: !dominated })
    }
  }
  return points
}

/**
 * The isoCost figure: score against cost relative to dense (log scale), one panel per task
 * (columns) and length (rows), colour by method, shape by cost metric, frontier points joined.
 *
 * @param rows - the rows of {@link runSparseEval}
 * @param title - the figure title
 * @returns a Vega-Lite (v6) spec with inline data ({@link isoCostPoints})
 */
export function sparseEvalIsoCostSpec(rows: readonly SparseEvalRow[], title: string): PlotSpec {
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title,
    data: { values: isoCostPoints(rows) },
    facet: {
      column: { field: 'task', type: 'nominal', title: 'task' },
      row: { field: 'length', type: 'ordinal', title: 'context length (tokens)' },
    },
    spec: {
      width: 260,
      height: 180,
      layer: [
        {
          transform: [{ filter: 'datum.frontier' }],
          mark: { type: 'line', color: '#888', strokeDash: [4, 3] },
          encoding: {
            x: { field: 'relativeCost', type: 'quantitative', scale: { type: 'log' } },
            y: { field: 'score', type: 'quantitative' },
            detail: { field: 'metric' },
            order: { field: 'relativeCost' },
          },
        },
        {
          mark: { type: 'point', filled: true, size: 50 },
          encoding: {
            x: { field: 'relativeCost', type: 'quantitative', scale: { type: 'log' }, title: 'cost / dense' },
            y: { field: 'score', type: 'quantitative', scale: { domain: [0, 1] }, title: 'score' },
            color: { field: 'method', type: 'nominal', title: 'method' },
            shape: { field: 'metric', type: 'nominal', title: 'cost' },
            opacity: { condition: { test: 'datum.frontier', value: 1 }, value: 0.4 },
          },
        },
      ],
    },
  } as PlotSpec
}

const escapeHtml = (text: string): string =>
  text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;')

/**
 * The `report.html` of a {@link runSparseEval} run: the figures (score against sparsity
 * {@link sparseEvalSpec}, relative error against length, score against cost) as inline SVG, the
 * table ({@link sparseEvalTable}) and which heads retrieve ({@link retrievalHeadsTable}); one
 * self-contained page, no scripts.
 *
 * @param result - what {@link runSparseEval} returned
 * @param title - the page title (model and command)
 * @returns the HTML text
 */
export async function sparseEvalReportHtml(result: SparseEvalResult, title: string): Promise<string> {
  const svg = await renderSvg(sparseEvalSpec(result.rows, title))
  const errors = relativeErrors(result.rows)
  const errorSvg =
    errors.length === 0 || new Set(errors.map((p) => p.length)).size < 2
      ? '<p>Relative error against length: needs at least two lengths with a dense score above 0.</p>'
      : `<figure>${await renderSvg(sparseEvalRelativeErrorSpec(result.rows, 'relative error against length'))}</figure>`
  const cost = isoCostPoints(result.rows)
  const costSvg =
    cost.length === 0
      ? '<p>Score against cost: no row has a cost.</p>'
      : `<figure>${await renderSvg(sparseEvalIsoCostSpec(result.rows, 'score against cost (isoCost)'))}</figure>`
  const table = sparseEvalTable(result.rows).map(escapeHtml).join('\n')
  const text = result.rows.some((r) => r.agreement !== undefined)
  const where = text ? ' on its text tasks' : ' on a model trained here'
  const agreement = text
    ? `<h2>Agreement with the dense output</h2>
<p>The fraction of the dense greedy output each method reproduced from its start: how far the method changes what
the model says, whether or not the model solves the task.</p>
<figure>${await renderSvg(sparseEvalSpec(result.rows, 'agreement with dense', 'agreement'))}</figure>
<h2>Outputs (the first prompt of each row)</h2>
${result.rows
  .filter((r) => r.method === 'dense' || r.targetSparsity > 0)
  .map(
    (r) =>
      `<h3>${escapeHtml(`${r.task} ${r.length} ${r.method} ${r.targetSparsity}`)}</h3>` +
      `<pre>${escapeHtml(r.example ?? '')}</pre>`,
  )
  .join('\n')}`
    : ''
  const heads =
    result.heads === undefined || result.heads.length === 0
      ? `<p>${text ? 'Not measured for text tasks (no answer positions to probe).' : 'Not measured in this run.'}</p>`
      : `<pre>${retrievalHeadsTable(result.heads).map(escapeHtml).join('\n')}</pre>`
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(title)}</title>
<style>body{font-family:system-ui,sans-serif;margin:2em}pre{font-size:12px}</style></head><body>
<h1>${escapeHtml(title)}</h1>
<p>Score of greedy answers against target sparsity (sparsity 0 is dense), ${result.rows[0]?.samples ?? 0} sequences
per point, seed ${result.seed}; the Sparse Frontier evaluation (arXiv 2504.17768)${where}.</p>
<figure>${svg}</figure>
<h2>Relative error against length</h2>
<p>(dense - sparse) / dense of the mean scores at each target sparsity (arXiv 2504.17768 [v2], section 4.3).</p>
${errorSvg}
<h2>Score against cost</h2>
<p>Cost from the cost model relative to dense: prefill FLOPs for prefill methods, memory read per decode step for
decode methods, indexing included ([v2] appendix B); frontier points (no configuration cheaper and better) are joined
and opaque.</p>
${costSvg}
<pre>${table}</pre>
${agreement}
<h2>Which heads retrieve</h2>
<p>Dense, teacher-forced, on the same sequences: per head, the attention at each answer-predicting position on
the prompt positions holding the gold answer token (retrieval), what uniform attention would give there, and the
head's mean attention to the previous position and to itself over the prompt; * marks the strongest retriever.</p>
${heads}
</body></html>
`
}
