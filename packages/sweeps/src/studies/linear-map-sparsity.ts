/**
 * `linear-map-sparsity`: the linear map's final loss against the pattern sparsity s/S for several
 * state sizes S (Baherwani et al., arXiv 2606.25010, Figure 4 left).
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

/** Below this share of the gap (first plateau to floor) left, a configuration counts as solved. */
const SOLVED_RESIDUAL = 0.1
/** Above this share left (the loss is still near chance), a configuration counts as unlearnt. */
const UNLEARNT_RESIDUAL = 0.9

/** The (S, s) pairs and the budget of each size. */
const SIZES: Record<StudySize, { pairs: [number, number][]; steps: number; seeds: number }> = {
  default: {
    pairs: [
      [8, 1],
      [8, 3],
      [8, 5],
      [8, 7],
      [16, 1],
      [16, 5],
      [16, 8],
      [16, 15],
    ],
    steps: 1000,
    seeds: 3,
  },
  full: {
    pairs: [8, 16, 32].flatMap((S) =>
      Array.from({ length: 8 }, (_, k) => [S, Math.max(1, Math.round(((k + 1) * S) / 8))] as [number, number]),
    ),
    steps: 10_000,
    seeds: 3,
  },
}

/** A configuration's verdict from its trials' median residual. */
function verdictOf(residual: number | null): 'solved' | 'partial' | 'unlearnt' | 'n/a' {
  if (residual === null) return 'n/a'
  return residual < SOLVED_RESIDUAL ? 'solved' : residual > UNLEARNT_RESIDUAL ? 'unlearnt' : 'partial'
}

interface Row {
  readonly S: number
  readonly s: number
  readonly ratio: number
  readonly n: number
  readonly loss: ReturnType<typeof describe>
  readonly residual: number | null
  readonly verdict: ReturnType<typeof verdictOf>
}

function rowsOf(records: readonly TrialRecord[]): Row[] {
  const groups = groupBy(records, (r) => `${numberOf(r, 'task.stateSize')},${numberOf(r, 'task.onesPerRow')}`)
  return [...groups.values()].map((group) => {
    const first = group[0] as TrialRecord
    const S = numberOf(first, 'task.stateSize')
    const s = numberOf(first, 'task.onesPerRow')
    const losses = group.map((r) => metricOf(r, 'finalValidationLoss')).filter((v): v is number => v !== null)
    const residuals = group.map((r) => metricOf(r, 'normalizedResidual')).filter((v): v is number => v !== null)
    const residual = describe(residuals)?.median ?? null
    return { S, s, ratio: s / S, n: losses.length, loss: describe(losses), residual, verdict: verdictOf(residual) }
  })
}

/** One finding over the rows a predicate selects. */
function finding(
  claim: string,
  rows: readonly Row[],
  select: (row: Row) => boolean,
  expected: (row: Row) => boolean,
): StudyFinding {
  const chosen = rows.filter(select).filter((row) => row.residual !== null)
  if (chosen.length === 0) return { claim, holds: null, evidence: 'no finished trials in this range at this size' }
  const failing = chosen.filter((row) => !expected(row))
  const list = chosen.map((row) => `s = ${row.s}: ${row.verdict} (${formatNumber(row.residual, 2)})`).join(', ')
  return {
    claim,
    holds: failing.length === 0,
    evidence: `S = ${chosen[0]?.S}, median share of the gap left: ${list}`,
  }
}

/**
 * The linear-map sparsity study: a one-layer transformer (the task's default preset: `gpt`,
 * dModel 64, 8 heads) on x_{t+1} = M x_t mod 2 with s ones per row of M, final loss against s/S
 * for S = 8 and 16 (and 32 in `full`), 3 seeds each. Default: 1,000 steps per trial (the paper
 * trains 10,000), four values of s per S.
 *
 * @category Studies
 */
export const linearMapSparsity: Study = {
  name: 'linear-map-sparsity',
  title: 'Linear map: final loss against pattern sparsity s/S',
  source: 'Baherwani et al., arXiv 2606.25010, Figure 4 (left)',
  description:
    'The linear map x(t+1) = M x(t) mod 2 with s ones per row of M: the search space of a row is C(S, s), ' +
    'largest at s = S/2. The paper trains 10,000 steps: S = 8 is solved at every s, S = 16 stays at a loss ' +
    'of 0.60-0.67 for s/S of about 0.3 to 0.75, S = 32 stays at chance for 0.1 < s/S < 0.9. The default ' +
    `size trains 1,000 steps (full: 10,000). A configuration is solved when its seeds' median share of the ` +
    `gap from chance to the Bayes floor left at the end is below ${SOLVED_RESIDUAL}, ` +
    `unlearnt above ${UNLEARNT_RESIDUAL}.`,
  parts(size) {
    const { pairs, steps, seeds } = SIZES[size]
    const part: StudyPart = {
      name: 'linear-map',
      description: `S and s in ${pairs.length} pairs, ${seeds} seeds, ${steps} steps`,
      spec: {
        name: size === 'full' ? 'linear-map-sparsity-full' : 'linear-map-sparsity',
        description: 'final loss of the linear map against s/S (Baherwani et al., Figure 4 left)',
        experiment: 'emergence',
        base: {
          task: { kind: 'linear-map' },
          training: { steps, evalEvery: Math.max(10, steps / 40), validationSize: 512, analysisSize: 128 },
        },
        zip: { 'task.stateSize': pairs.map((p) => p[0]), 'task.onesPerRow': pairs.map((p) => p[1]) },
        seeds,
      },
    }
    return [part]
  },
  assess(records) {
    const rows = rowsOf(records['linear-map'] ?? []).sort((a, b) => a.S - b.S || a.s - b.s)
    const findings: StudyFinding[] = [
      finding(
        'S = 8 is solved at every s',
        rows,
        (row) => row.S === 8,
        (row) => row.verdict === 'solved',
      ),
      finding(
        'S = 16 is not solved for s/S between 0.3 and 0.75',
        rows,
        (row) => row.S === 16 && row.ratio >= 0.3 && row.ratio <= 0.75,
        (row) => row.verdict !== 'solved',
      ),
      finding(
        'S = 16 is solved at the extremes (s = 1 and s = S - 1)',
        rows,
        (row) => row.S === 16 && (row.s === 1 || row.s === row.S - 1),
        (row) => row.verdict === 'solved',
      ),
      finding(
        'S = 32 stays at chance for 0.1 < s/S < 0.9',
        rows,
        (row) => row.S === 32 && row.ratio > 0.1 && row.ratio < 0.9,
        (row) => row.verdict === 'unlearnt',
      ),
    ]
    const none = nothingLearned((records['linear-map'] ?? []).filter((r) => r.status === 'done'))
    const table: StudyTable = {
      title: 'Final validation loss (nats) per configuration',
      columns: ['S', 's', 's/S', 'seeds', 'mean loss', 'sd', 'median share of gap left', 'verdict'],
      rows: rows.map((row) => [
        row.S,
        row.s,
        formatNumber(row.ratio, 3),
        row.n,
        formatNumber(row.loss?.mean),
        formatNumber(row.loss?.sd, 3),
        formatNumber(row.residual, 3),
        row.verdict,
      ]),
    }
    const points = (records['linear-map'] ?? []).flatMap((r) => {
      const loss = metricOf(r, 'finalValidationLoss')
      const S = numberOf(r, 'task.stateSize')
      return loss === null ? [] : [{ S: `S = ${S}`, ratio: numberOf(r, 'task.onesPerRow') / S, loss, seed: r.seed }]
    })
    const chart = {
      $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
      title: 'Final loss against s/S (points: seeds; lines: means)',
      width: 520,
      height: 300,
      data: { values: points },
      encoding: {
        x: { field: 'ratio', type: 'quantitative', title: 's / S', scale: { domain: [0, 1] } },
        color: { field: 'S', type: 'nominal', title: 'state size' },
      },
      layer: [
        { mark: { type: 'point', opacity: 0.6 }, encoding: { y: { field: 'loss', type: 'quantitative' } } },
        {
          mark: { type: 'line' },
          encoding: { y: { aggregate: 'mean', field: 'loss', type: 'quantitative', title: 'final loss (nats)' } },
        },
      ],
    }
    return {
      findings: none === null ? findings : undetermined(findings, none),
      tables: [table],
      charts: points.length === 0 ? [] : [chart as never],
    }
  },
}
