/**
 * `width`: the linear map's final loss against the number of heads H, at a fixed head size and at
 * a fixed total width (Baherwani et al., arXiv 2606.25010, Figure 5).
 *
 * @module
 */
import type { TrialRecord } from '../record.ts'
import {
  describe,
  formatNumber,
  groupBy,
  metricOf,
  nothingLearned,
  numberOf,
  undetermined,
  type Study,
  type StudyFinding,
  type StudyPart,
  type StudySize,
  type StudyTable,
} from './study.ts'

interface Size {
  readonly heads: number[]
  readonly dHead: number
  readonly totalWidth: number
  readonly widthHeads: number[]
  readonly stateSize: number
  readonly onesPerRow: number
  readonly steps: number
  readonly seeds: number
}

const SIZES: Record<StudySize, Size> = {
  default: {
    heads: [1, 2, 4, 8, 16],
    dHead: 8,
    totalWidth: 64,
    widthHeads: [1, 2, 4, 8, 16],
    stateSize: 8,
    onesPerRow: 2,
    steps: 600,
    seeds: 2,
  },
  full: {
    heads: [1, 2, 4, 8, 16, 32, 64, 128],
    dHead: 8,
    totalWidth: 128,
    widthHeads: [1, 2, 4, 8, 16, 32, 64, 128],
    stateSize: 16,
    onesPerRow: 3,
    steps: 10_000,
    seeds: 3,
  },
}

interface Row {
  readonly part: string
  readonly heads: number
  readonly dHead: number
  readonly loss: ReturnType<typeof describe>
  readonly residual: number | null
}

function rowsOf(part: string, records: readonly TrialRecord[]): Row[] {
  return [...groupBy(records, (r) => numberOf(r, 'model.nHeads')).entries()]
    .map(([heads, group]) => {
      const dModel = numberOf(group[0] as TrialRecord, 'model.dModel')
      const losses = group.map((r) => metricOf(r, 'finalValidationLoss')).filter((v): v is number => v !== null)
      const residuals = group.map((r) => metricOf(r, 'normalizedResidual')).filter((v): v is number => v !== null)
      return {
        part,
        heads,
        dHead: dModel / heads,
        loss: describe(losses),
        residual: describe(residuals)?.median ?? null,
      }
    })
    .sort((a, b) => a.heads - b.heads)
}

/** More heads help: the widest setting leaves less of the gap than H = 1 (and the widest is solved, for `solved`). */
function headsFinding(claim: string, rows: readonly Row[], requireSolved: boolean): StudyFinding {
  const measured = rows.filter((row) => row.residual !== null)
  const fewest = measured[0]
  const most = measured[measured.length - 1]
  if (fewest === undefined || most === undefined || fewest === most) {
    return { claim, holds: null, evidence: 'fewer than two head counts finished at this size' }
  }
  const gain = (most.residual as number) < (fewest.residual as number)
  const solved = (most.residual as number) < 0.1
  return {
    claim,
    holds: gain && (!requireSolved || solved),
    evidence:
      `median share of the gap left: ` +
      `${measured.map((row) => `H = ${row.heads}: ${formatNumber(row.residual, 2)}`).join(', ')}; ` +
      `final loss at H = ${fewest.heads}: ${formatNumber(fewest.loss?.mean)}, ` +
      `at H = ${most.heads}: ${formatNumber(most.loss?.mean)} nats`,
  }
}

/**
 * The width study on the linear map (a one-layer `gpt`): H heads of a fixed dHead (dModel = H x
 * dHead), and H heads at a fixed total width dModel (dHead = dModel / H). Default: S = 8, s = 2,
 * 600 steps, 2 seeds, H up to 16 (the paper: up to 128 heads, 10,000 steps).
 *
 * @category Studies
 */
export const width: Study = {
  name: 'width',
  title: 'Linear map: final loss against the number of heads',
  source: 'Baherwani et al., arXiv 2606.25010, Figure 5',
  description:
    "More heads search more routing patterns at once. The paper: the linear map's final loss falls from chance at " +
    'H = 1 to the floor once H >= 16, for every head size; at a fixed total width many small heads beat a few ' +
    'large ones. Two parts: a fixed head size (dModel = H x dHead) and a fixed total width (dHead = dModel / H).',
  parts(size) {
    const s = SIZES[size]
    const base = (steps: number) => ({
      task: { kind: 'linear-map', stateSize: s.stateSize, onesPerRow: s.onesPerRow },
      training: { steps, validationSize: 512, analysisSize: 128, evalEvery: Math.max(10, steps / 40) },
    })
    const fixedHead: StudyPart = {
      name: 'fixed-head-size',
      description: `H in ${s.heads.join(', ')} heads of dHead ${s.dHead}`,
      spec: {
        name: `width-fixed-head-size${size === 'full' ? '-full' : ''}`,
        description: 'final loss against the number of heads at a fixed head size',
        experiment: 'emergence',
        base: base(s.steps),
        zip: { 'model.nHeads': s.heads, 'model.dModel': s.heads.map((h) => h * s.dHead) },
        seeds: s.seeds,
      },
    }
    const fixedWidth: StudyPart = {
      name: 'fixed-width',
      description: `H in ${s.widthHeads.join(', ')} heads sharing dModel ${s.totalWidth}`,
      spec: {
        name: `width-fixed-width${size === 'full' ? '-full' : ''}`,
        description: 'final loss against the number of heads at a fixed total width',
        experiment: 'emergence',
        base: { ...base(s.steps), model: { dModel: s.totalWidth } },
        grid: { 'model.nHeads': s.widthHeads },
        seeds: s.seeds,
      },
    }
    return [fixedHead, fixedWidth]
  },
  assess(records) {
    const head = rowsOf('fixed-head-size', records['fixed-head-size'] ?? [])
    const total = rowsOf('fixed-width', records['fixed-width'] ?? [])
    const all = [...(records['fixed-head-size'] ?? []), ...(records['fixed-width'] ?? [])]
    const none = nothingLearned(all.filter((r) => r.status === 'done'))
    const measured = [
      headsFinding('At a fixed head size, more heads reach the floor (the widest setting solves the task)', head, true),
      headsFinding('At a fixed total width, many small heads beat a few large ones', total, false),
    ]
    const findings = none === null ? measured : undetermined(measured, none)
    const table = (title: string, rows: readonly Row[]): StudyTable => ({
      title,
      columns: ['H', 'dHead', 'seeds', 'mean loss', 'sd', 'median share of gap left'],
      rows: rows.map((row) => [
        row.heads,
        row.dHead,
        row.loss?.n ?? 0,
        formatNumber(row.loss?.mean),
        formatNumber(row.loss?.sd, 3),
        formatNumber(row.residual, 3),
      ]),
    })
    const values = [...(records['fixed-head-size'] ?? []), ...(records['fixed-width'] ?? [])].flatMap((r) => {
      const loss = metricOf(r, 'finalValidationLoss')
      const part = (records['fixed-width'] ?? []).includes(r) ? 'fixed total width' : 'fixed head size'
      return loss === null ? [] : [{ heads: numberOf(r, 'model.nHeads'), loss, part }]
    })
    const chart = {
      $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
      title: 'Final loss against the number of heads (points: seeds; lines: means)',
      width: 480,
      height: 280,
      data: { values },
      encoding: {
        x: { field: 'heads', type: 'quantitative', scale: { type: 'log', base: 2 }, title: 'heads H' },
        color: { field: 'part', type: 'nominal', title: null },
      },
      layer: [
        { mark: { type: 'point', opacity: 0.6 }, encoding: { y: { field: 'loss', type: 'quantitative' } } },
        {
          mark: 'line',
          encoding: { y: { aggregate: 'mean', field: 'loss', type: 'quantitative', title: 'final loss (nats)' } },
        },
      ],
    }
    return {
      findings,
      tables: [table('Fixed head size', head), table('Fixed total width', total)],
      charts: values.length === 0 ? [] : [chart as never],
    }
  },
}
