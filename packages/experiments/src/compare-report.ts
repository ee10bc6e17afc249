/**
 * Reports of {@link compareWithDense}: the Vega-Lite spec of its figure and the notes printed
 * under its table. Plain data and strings: rendering the spec (to SVG, in a page) is the
 * caller's.
 *
 * @module
 */
import type { CompareRow, compareWithDense } from './compare-with-dense.ts'
import { targetWarning } from './targets.ts'

/** A quantitative encoding channel of {@link CompareSpec}. */
export interface CompareSpecAxis {
  /** The data field plotted. */
  field: 'exactSparsity' | 'kl' | 'top1'
  /** Always quantitative. */
  type: 'quantitative'
  /** The scale: a fixed domain and/or Vega's `nice` rounding from 0. */
  scale: { domain?: [number, number]; nice?: boolean; zero?: boolean }
  /** The axis title. */
  title: string
}

/** One panel of {@link CompareSpec}: a line per method against the exact sparsity. */
export interface CompareSpecPanel {
  /** Width in pixels. */
  width: number
  /** Height in pixels. */
  height: number
  /** Lines with a point at each row. */
  mark: { type: 'line'; point: boolean }
  /** x: exact sparsity; y: KL or top-1; colour: the method; points ordered by sparsity. */
  encoding: {
    x: CompareSpecAxis
    y: CompareSpecAxis
    color: { field: 'method'; type: 'nominal'; title: string }
    order: { field: 'exactSparsity' }
  }
}

/** The Vega-Lite (v6) top-level spec {@link compareSpec} returns: two panels side by side, inline data. */
export interface CompareSpec {
  /** The Vega-Lite schema URL (v6). */
  $schema: string
  /** The figure title. */
  title: string
  /** One value per row: method, exact sparsity, KL (nats) and top-1 agreement. */
  data: { values: { method: string; exactSparsity: number; kl: number; top1: number }[] }
  /** The KL panel and the top-1 panel. */
  hconcat: CompareSpecPanel[]
}

/**
 * The figure of a {@link compareWithDense} run as a Vega-Lite spec: two panels, KL(dense ||
 * sparse) (nats) and top-1 agreement with dense, against the measured exact sparsity, one line
 * per method. Axes are Vega's linear scales with `nice` domains, so ticks fall on round values
 * (0, 0.1, 0.2 ... for a KL up to 0.35), never on fractions of the largest value. The axes of The
 * Sparse Frontier's figures (arXiv 2504.17768 [v2], section 4), at one model and prompt.
 *
 * @param rows - the rows of {@link compareWithDense}
 * @param title - the figure title (model and prompt)
 * @returns the spec, plain JSON-serializable data (render it with vega-lite + vega, or vega-embed)
 */
export function compareSpec(rows: readonly CompareRow[], title: string): CompareSpec {
  const values = rows.map((r) => ({
    method: r.method,
    exactSparsity: r.exactSparsity,
    kl: r.klDenseSparse,
    top1: r.top1Agreement,
  }))
  const x: CompareSpecAxis = {
    field: 'exactSparsity',
    type: 'quantitative',
    scale: { domain: [0, 1] },
    title: 'exact sparsity',
  }
  const color = { field: 'method', type: 'nominal', title: 'method' } as const
  const panel = (field: 'kl' | 'top1', label: string, domain: [number, number] | undefined): CompareSpecPanel => ({
    width: 300,
    height: 220,
    mark: { type: 'line', point: true },
    encoding: {
      x,
      y: {
        field,
        type: 'quantitative',
        scale: { nice: true, zero: true, ...(domain === undefined ? {} : { domain }) },
        title: label,
      },
      color,
      order: { field: 'exactSparsity' },
    },
  })
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title,
    data: { values },
    hconcat: [panel('kl', 'KL(dense || sparse), nats', undefined), panel('top1', 'top-1 agreement with dense', [0, 1])],
  }
}

/**
 * The lines printed under a {@link compareWithDense} table: the note on reported sparsities below
 * 0 (shown as `0.000*`) and a warning per row whose target sparsity is not reached at this length.
 *
 * @param rows - the rows of {@link compareWithDense}
 * @param promptTokens - the prompt length (tokens)
 * @returns the lines, none when every target is reached and no budget exceeds the prompt
 */
export function compareNotes(rows: readonly CompareRow[], promptTokens: number): string[] {
  const lines: string[] = []
  const negative = rows.filter((r) => r.budgetExceedsPrompt)
  if (negative.length > 0) {
    const ranges = [...new Set(negative.map((r) => r.method))].map((method) => {
      const values = negative.filter((r) => r.method === method).map((r) => r.reportedSparsity)
      const [lo, hi] = [Math.min(...values), Math.max(...values)]
      return `${method} ${lo === hi ? lo.toFixed(3) : `${hi.toFixed(3)} to ${lo.toFixed(3)}`}`
    })
    lines.push(
      `* budget exceeds the prompt: the study's reported sparsity is < 0 (${ranges.join('; ')}), ` +
        `i.e. in its accounting (whole 64x64 kernel blocks) ` +
        `the method keeps every causal pair of this ${promptTokens}-token prompt; ` +
        `shown as 0 (raw values: --json reportedSparsity)`,
    )
  }
  for (const r of rows.filter((row) => !row.targetReached)) {
    lines.push(targetWarning(r.method, r.targetSparsity, r.exactSparsity, r.reportedSparsityClamped, promptTokens))
  }
  return lines
}
