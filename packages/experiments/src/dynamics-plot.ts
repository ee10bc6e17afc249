/**
 * The plot of a reduced gradient-flow trajectory (`@attnlab/dynamics`; Yüksel et al., arXiv
 * 2602.19143, sec. 3-4): a Vega-Lite spec, rendered by {@link renderSvg}.
 */
import type { StageAnalysis, Trajectory } from '@attnlab/dynamics'
import type { PlotSpec } from './plot.ts'

/**
 * The Vega-Lite spec of a trajectory of the reduced gradient flow (Yüksel et al., arXiv
 * 2602.19143, sec. 3-4): above, the loss (`1/2` squared Frobenius norm) against ODE time
 * (dimensionless), both on log axes, with the stage plateaus `L_j` as dashed rules and the stage
 * transitions `t1, t2, ...` as labelled red rules; below, one row per head (`L0H0`, ... : the
 * model has one layer) of its attention mass per span (in `[0, 1]`) against time. Spans are
 * numbered oldest first (`span 0` = oldest), as in the CLI's `--spans`, although the trajectory
 * lists them most important (newest) first. Samples at `t <= 0` are left out (log axis) and the
 * loss is floored at `1e-8`.
 *
 * @param trajectory - a trajectory from `simulate`: `times` `[P]`, `loss` `[P]`, `spanMass` `[P, nHeads, K]` flattened
 * @param analysis - its `analyzeTrajectory` result (plateaus and transition times)
 * @returns the spec, inline data (`data: { values }`) in each layer
 * @example
 * ```ts
 * const trajectory = simulate({ nHeads: 2, nCtx: 12 }, { tMax: 400 })
 * const svg = await renderSvg(dynamicsPlotSpec(trajectory, analyzeTrajectory(trajectory)))
 * ```
 */
export function dynamicsPlotSpec(trajectory: Trajectory, analysis: StageAnalysis): PlotSpec {
  const { nHeads: h, spans } = trajectory.config
  const K = spans.length
  const lossRows: { t: number; loss: number }[] = []
  const massRows: { t: number; head: string; span: string; mass: number }[] = []
  for (let i = 0; i < trajectory.times.length; i++) {
    const t = trajectory.times[i] as number
    if (t <= 0) continue
    lossRows.push({ t, loss: Math.max(trajectory.loss[i] as number, 1e-8) })
    for (let k = 0; k < h; k++) {
      for (let j = 0; j < K; j++) {
        massRows.push({
          t,
          head: `L0H${k}`,
          // Span j of the package (most important first) is span K - 1 - j oldest first.
          span: `span ${K - 1 - j}`,
          mass: trajectory.spanMass[(i * h + k) * K + j] as number,
        })
      }
    }
  }
  const plateauRows = analysis.plateaus.filter((p) => p > 0).map((p, j) => ({ loss: p, label: `L_${j}` }))
  const transitionRows = analysis.transitions
    .filter((t) => t.time !== null)
    .map((t) => ({ t: t.time as number, label: `t${t.stage}` }))
  const time = {
    field: 't',
    type: 'quantitative' as const,
    scale: { type: 'log' as const },
    title: 'ODE time (dimensionless)',
  }
  const c = trajectory.config
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title:
      `Reduced gradient flow (${c.variant}): h=${c.nHeads}, T=${c.nCtx}, ` +
      `spans=[${[...c.spans].reverse().join(',')}] (oldest first), m=${c.importanceRatio}, eps=${c.initNoise}, ` +
      `seed=${c.seed}`,
    vconcat: [
      {
        width: 640,
        height: 260,
        layer: [
          {
            data: { values: lossRows },
            mark: { type: 'line', color: '#1f4e79' },
            encoding: {
              x: time,
              y: { field: 'loss', type: 'quantitative', scale: { type: 'log' }, title: 'loss (1/2 squared Frobenius)' },
            },
          },
          {
            data: { values: plateauRows },
            mark: { type: 'rule', strokeDash: [4, 4], color: '#888' },
            encoding: { y: { field: 'loss', type: 'quantitative' } },
          },
          {
            data: { values: transitionRows },
            mark: { type: 'rule', color: '#c0392b' },
            encoding: { x: { field: 't', type: 'quantitative' } },
          },
          {
            data: { values: transitionRows },
            mark: { type: 'text', align: 'left', dx: 3, dy: -120, color: '#c0392b' },
            encoding: { x: { field: 't', type: 'quantitative' }, text: { field: 'label' } },
          },
        ],
      },
      {
        data: { values: massRows },
        facet: { row: { field: 'head', type: 'nominal', title: null } },
        spec: {
          width: 640,
          height: 90,
          mark: { type: 'line' },
          encoding: {
            x: time,
            y: { field: 'mass', type: 'quantitative', scale: { domain: [0, 1] }, title: 'attention mass' },
            color: { field: 'span', type: 'nominal', title: 'span (0 = oldest)' },
          },
        },
      },
    ],
  }
}
