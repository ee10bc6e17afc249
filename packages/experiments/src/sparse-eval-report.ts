/**
 * Reports of {@link runSparseEval}: its text table, the Vega-Lite spec of score against sparsity
 * per task (the axes of The Sparse Frontier's figures, Nawrot et al., arXiv 2504.17768 [v2],
 * section 4) and a self-contained `report.html`.
 *
 * @module
 */
import { renderSvg, type PlotSpec } from './plot.ts'
import type { SparseEvalResult, SparseEvalRow, runSparseEval } from './sparse-eval.ts'

/**
 * The rows of a {@link runSparseEval} result as a fixed-width text table: task, length, method,
 * target, exact and reported sparsity, score +- sample std, strict, the budget and the cost
 * relative to dense.
 *
 * @param rows - the rows of {@link runSparseEval}
 * @returns the lines, a header first
 */
export function sparseEvalTable(rows: readonly SparseEvalRow[]): string[] {
  const lines = [
    'task             length  method          target  exact  reported  score +- std     strict  cost/dense  budget',
  ]
  for (const r of rows) {
    const budget = Object.entries(r.budget)
      .map(([k, v]) => `${k}=${Number.isInteger(v) ? v : v.toFixed(3)}`)
      .join(' ')
    const cost = r.cost === null ? '-' : r.cost.relative.toFixed(3)
    lines.push(
      `${r.task.padEnd(16)} ${String(r.length).padStart(6)}  ${r.method.padEnd(15)} ` +
        `${r.targetSparsity.toFixed(2).padStart(6)} ${r.exactSparsity.toFixed(3).padStart(6)} ` +
        `${Math.max(0, r.reportedSparsity).toFixed(3).padStart(9)}  ` +
        `${r.score.toFixed(3)} +- ${r.scoreStd.toFixed(3)}  ${r.strict.toFixed(3).padStart(6)}  ` +
        `${cost.padStart(10)}  ${budget}`,
    )
  }
  return lines
}

/**
 * The figure of a {@link runSparseEval} result: score against target sparsity, one line per
 * method, one panel per task and length (columns: tasks; rows: lengths). Dense is the point at 0
 * of every method's line.
 *
 * @param rows - the rows of {@link runSparseEval}
 * @param title - the figure title
 * @returns a Vega-Lite (v6) spec with inline data
 */
export function sparseEvalSpec(rows: readonly SparseEvalRow[], title: string): PlotSpec {
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
        y: { field: 'score', type: 'quantitative', scale: { domain: [0, 1] }, title: 'score' },
        color: { field: 'method', type: 'nominal', title: 'method' },
        order: { field: 'targetSparsity' },
      },
    },
  } as PlotSpec
}

const escapeHtml = (text: string): string =>
  text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;')

/**
 * The `report.html` of a {@link runSparseEval} run: the figure ({@link sparseEvalSpec}) as inline
 * SVG and the table ({@link sparseEvalTable}); one self-contained page, no scripts.
 *
 * @param result - what {@link runSparseEval} returned
 * @param title - the page title (model and command)
 * @returns the HTML text
 */
export async function sparseEvalReportHtml(result: SparseEvalResult, title: string): Promise<string> {
  const svg = await renderSvg(sparseEvalSpec(result.rows, title))
  const table = sparseEvalTable(result.rows).map(escapeHtml).join('\n')
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(title)}</title>
<style>body{font-family:system-ui,sans-serif;margin:2em}pre{font-size:12px}</style></head><body>
<h1>${escapeHtml(title)}</h1>
<p>Score of greedy answers against target sparsity (sparsity 0 is dense), ${result.rows[0]?.samples ?? 0} sequences
per point, seed ${result.seed}; the Sparse Frontier evaluation (arXiv 2504.17768) on a model trained here.</p>
<figure>${svg}</figure>
<pre>${table}</pre>
</body></html>
`
}
