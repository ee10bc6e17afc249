/**
 * `ca-context`: the cellular automaton's plateau length against the state size S, with and
 * without the attention bias toward the ground-truth neighbourhood, at a fixed number of tokens
 * per batch (Baherwani et al., arXiv 2606.25010, Figure 4 middle and right).
 *
 * @module
 */
import { sampleRankCorrelation } from 'simple-statistics'
import type { JsonValue } from '../json.ts'
import type { TrialRecord } from '../record.ts'
import {
  censoredMedian,
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

/** States per sequence (so a sequence is 4 S tokens). */
const STATES = 4
/** The bias (nats added to the score of each ground-truth key of every head). */
const BETA = 3

const SIZES: Record<StudySize, { cells: number[]; tokens: number; steps: number; seeds: number }> = {
  default: { cells: [4, 8, 16], tokens: 4096, steps: 800, seeds: 2 },
  full: { cells: [4, 8, 16, 32, 64, 128, 256, 512], tokens: 16_384, steps: 10_000, seeds: 3 },
}

interface Row {
  readonly S: number
  readonly biased: boolean
  readonly seeds: number
  readonly emerged: number
  /** Median plateau (emergence step), a seed that never emerged counting as the budget. */
  readonly median: number
  readonly budget: number
}

function rowsOf(records: readonly TrialRecord[]): Row[] {
  const done = records.filter((r) => r.status === 'done')
  const biasOf = (r: TrialRecord): boolean => {
    const bias = paramOf(r, 'training.attentionBias') as JsonValue | undefined
    return bias !== null && bias !== undefined
  }
  return [...groupBy(done, (r) => `${numberOf(r, 'task.cells')},${biasOf(r)}`).values()]
    .map((group) => {
      const first = group[0] as TrialRecord
      const budget = Math.max(...group.map((r) => numberOf(r, 'training.steps')))
      const steps = group.map((r) => metricOf(r, 'firstPositionStep'))
      const emerged = steps.filter((v): v is number => v !== null)
      return {
        S: numberOf(first, 'task.cells'),
        biased: biasOf(first),
        seeds: group.length,
        emerged: emerged.length,
        median: censoredMedian(emerged, group.length, budget),
        budget,
      }
    })
    .sort((a, b) => Number(a.biased) - Number(b.biased) || a.S - b.S)
}

const list = (rows: readonly Row[]): string =>
  rows.map((r) => `S = ${r.S}: ${formatNumber(r.median)} (${r.emerged}/${r.seeds} emerged)`).join(', ')

/** Without the bias the plateau grows with S: positive rank correlation and medians that do not fall. */
function growthFinding(rows: readonly Row[]): StudyFinding {
  const claim = 'Without the bias, the plateau grows with S (the paper: it doubles per doubling of S from S = 32 on)'
  const plain = rows.filter((r) => !r.biased)
  if (plain.length < 2) return { claim, holds: null, evidence: 'fewer than two state sizes finished without the bias' }
  if (plain.every((r) => r.emerged === 0)) {
    return { claim, holds: null, evidence: `no seed emerged without the bias within the budget: ${list(plain)}` }
  }
  const rho = sampleRankCorrelation(
    plain.map((r) => r.S),
    plain.map((r) => r.median),
  )
  const rising = plain.every((r, k) => k === 0 || r.median >= (plain[k - 1] as Row).median)
  return {
    claim,
    holds: rho > 0 && rising,
    evidence:
      `median plateau without the bias: ${list(plain)}; ` +
      `Spearman rank correlation of the medians ${formatNumber(rho, 3)}`,
  }
}

/** With the bias the plateau grows by fewer steps from the smallest to the largest S than without it. */
function flatFinding(rows: readonly Row[]): StudyFinding {
  const claim = 'With the bias, the plateau stays about flat in S (it grows less than without the bias)'
  const plain = rows.filter((r) => !r.biased)
  const biased = rows.filter((r) => r.biased)
  const shared = biased.filter((b) => plain.some((p) => p.S === b.S)).map((b) => b.S)
  if (shared.length < 2) return { claim, holds: null, evidence: 'fewer than two state sizes finished both ways' }
  if (plain.every((r) => r.emerged === 0)) {
    return {
      claim,
      holds: null,
      evidence: 'no seed emerged without the bias within the budget, so its growth is unknown',
    }
  }
  const at = (set: readonly Row[], S: number): number => (set.find((r) => r.S === S) as Row).median
  const first = shared[0] as number
  const last = shared[shared.length - 1] as number
  const growthBiased = at(biased, last) - at(biased, first)
  const growthPlain = at(plain, last) - at(plain, first)
  return {
    claim,
    holds: growthBiased < growthPlain,
    evidence:
      `median plateau with the bias: ${list(biased)}; from S = ${first} to S = ${last} it grows by ` +
      `${formatNumber(growthBiased)} steps with the bias, by ${formatNumber(growthPlain)} without`,
  }
}

/** The bias shortens the plateau at every S from 8 on. */
function shortenFinding(rows: readonly Row[]): StudyFinding {
  const claim = 'The bias shortens the plateau at every S >= 8'
  const pairs = rows
    .filter((r) => r.biased && r.S >= 8)
    .flatMap((b) => {
      const p = rows.find((r) => !r.biased && r.S === b.S)
      return p === undefined ? [] : [{ S: b.S, biased: b.median, plain: p.median }]
    })
  if (pairs.length === 0) return { claim, holds: null, evidence: 'no S >= 8 finished both ways' }
  return {
    claim,
    holds: pairs.every((p) => p.biased < p.plain),
    evidence: pairs
      .map((p) => `S = ${p.S}: ${formatNumber(p.biased)} with, ${formatNumber(p.plain)} without`)
      .join('; '),
  }
}

/**
 * The cellular-automaton context study: the default two-layer `gpt` of the task (dModel 64, 8
 * heads) on binary automata with a rule drawn per sequence from all 256 elementary rules, 4 states
 * per sequence, a fixed number of tokens per batch (`batchTokens`: sequences = tokens / 4 S), without and with an
 * attention bias of 3 nats on every head's ground-truth keys (the three-cell neighbourhood of the
 * previous state). The plateau ends at the first output position's emergence step (its loss drops
 * from its plateau to its final value, crossing the midpoint for the last time: the trial metric
 * `firstPositionStep`), a loss criterion: the run's span criterion (a head with more than half its
 * attention on the window) would be met by the bias itself at small S. Default: S in {4, 8, 16}, 4,096
 * tokens per batch, 800 steps, 2 seeds (the paper: S up to 512, 10,000 steps).
 *
 * @category Studies
 */
export const caContext: Study = {
  name: 'ca-context',
  title: 'Cellular automata: plateau length against S, with and without the attention bias',
  source: 'Baherwani et al., arXiv 2606.25010, Figure 4 (middle and right)',
  description:
    'The paper, at a fixed token batch size: the plateau lasts about 60 steps at S = 4, 400 at S = 16, 650 at ' +
    'S = 32, 1,400 at S = 64, 3,300 at S = 128 and 8,700 at S = 256 (no progress in 10k steps at S = 512); with ' +
    'the attention bias toward the ground-truth map it is about 170 steps from S = 32 on. The bias here adds ' +
    `${BETA} nats to the pre-softmax score of each head's ground-truth keys (the paper's exact form is not ` +
    `public). The plateau ends where the first output position's loss drops (a loss criterion; the bias alone ` +
    `puts half of a head's attention on the window at small S). Sequences are ${STATES} states of S cells; seeds ` +
    'with no position learned count as the budget.',
  parts(size) {
    const { cells, tokens, steps, seeds } = SIZES[size]
    const part: StudyPart = {
      name: 'cellular-automaton',
      description:
        `S in ${cells.join(', ')}, ${tokens} tokens per batch, bias 0 or ${BETA} nats, ` +
        `${seeds} seeds, ${steps} steps`,
      spec: {
        name: `ca-context${size === 'full' ? '-full' : ''}`,
        description: 'plateau length of the cellular automaton against S, with and without the attention bias',
        experiment: 'emergence',
        base: {
          task: { kind: 'cellular-automaton', states: STATES },
          training: {
            steps,
            batchTokens: tokens,
            evalEvery: Math.max(10, steps / 80),
            validationSize: 256,
            analysisSize: 64,
          },
        },
        grid: { 'task.cells': cells, 'training.attentionBias': [null, { beta: BETA }] },
        seeds,
      },
    }
    return [part]
  },
  assess(records) {
    const rows = rowsOf(records['cellular-automaton'] ?? [])
    const table: StudyTable = {
      title: 'Median plateau (emergence step) per S, without and with the bias',
      columns: ['S', 'bias', 'seeds', 'emerged', 'median plateau (steps)', 'budget'],
      rows: rows.map((r) => [
        r.S,
        r.biased ? `${BETA} nats` : 'none',
        r.seeds,
        r.emerged,
        formatNumber(r.median),
        r.budget,
      ]),
    }
    const values = rows.map((r) => ({ S: r.S, plateau: r.median, bias: r.biased ? `bias ${BETA} nats` : 'no bias' }))
    const chart = {
      $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
      title: 'Median plateau length against S (seeds that never emerged count as the budget)',
      width: 460,
      height: 280,
      data: { values },
      mark: { type: 'line', point: true },
      encoding: {
        x: { field: 'S', type: 'quantitative', scale: { type: 'log', base: 2 }, title: 'cells per state S' },
        y: { field: 'plateau', type: 'quantitative', title: 'plateau (steps)' },
        color: { field: 'bias', type: 'nominal', title: null },
      },
    }
    return {
      findings: [growthFinding(rows), flatFinding(rows), shortenFinding(rows)],
      tables: [table],
      charts: values.length === 0 ? [] : [chart as never],
    }
  },
}
