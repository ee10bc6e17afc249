/**
 * `sparse-frontier`: The Sparse Frontier's evaluation (Nawrot et al., arXiv 2504.17768 [v2],
 * sections 4.2 and 4.3) on a needle-in-a-haystack model trained here, whose retrieval circuit is
 * known: the training-free sparse methods of `@attnlab/sparse-attention` against target sparsity
 * and context length, and the study's claims about them tested on these scores.
 *
 * @module
 */
import type { JsonValue } from '../json.ts'
import type { TrialRecord } from '../record.ts'
import {
  formatNumber,
  metricOf,
  paramOf,
  type Study,
  type StudyContext,
  type StudyFinding,
  type StudyPart,
  type StudySize,
  type StudyTable,
} from './study.ts'

/** The prefill methods and the decode methods of the evaluation, in the study's order. */
const PREFILL = ['vertical-slash', 'flexprefill', 'block-sparse'] as const
const DECODE = ['quest', 'snapkv', 'ada-snapkv'] as const
const METHODS: readonly string[] = [...PREFILL, ...DECODE]

/**
 * A sparse score is "tolerated" when it is at least dense minus this many standard errors of the
 * difference (`sqrt((sd_dense^2 + sd_sparse^2) / n)`, sequences treated as independent).
 */
const TOLERANCE_SE = 2
/** The trained model counts as retrieving when its dense score at the longest length is at least this. */
const LEARNED = 0.9
/** Below this dense score (chance is 1/64) the sparsity findings are not decided: there is little to lose. */
const DECIDABLE = 0.5

/** The model of every stage: the documented recipe's 2-layer attention-only llama (RoPE), 2 heads of width 32. */
const MODEL = { nLayers: 2, dModel: 64, nHeads: 2, attnOnly: true }
/** AdamW without weight decay, as in the recipe. */
const OPTIMIZER = { kind: 'adamw', weightDecay: 0 }
/** The study's vocabulary (1,024 keys, 64 values) and needle count. */
const TASK = { kind: 'niah-tokens', needles: 4, keyTokens: 1024, valueTokens: 64 }

interface Stage {
  readonly name: string
  readonly description: string
  readonly task: Readonly<Record<string, JsonValue>>
  readonly batchSize: number
  readonly steps: number
  readonly evalEvery: number
  readonly validationSize: number
  readonly schedule?: Readonly<Record<string, JsonValue>>
  /** The learning rate (default 3e-3). */
  readonly lr?: number
}

/** The recipe's stages (pre-pretraining on a tiny vocabulary, the full vocabulary, then longer contexts). */
const STAGES: Record<StudySize, readonly Stage[]> = {
  default: [
    {
      name: 'lookup',
      description: 'pre-pretraining: the lookup on 8 keys and 8 values, 4 pairs all queried, 16 positions, 400 steps',
      task: { ...TASK, nCtx: 16, keyTokens: 8, valueTokens: 8 },
      batchSize: 128,
      steps: 400,
      evalEvery: 100,
      validationSize: 256,
    },
    {
      name: 'vocabulary',
      description:
        "the study's vocabulary (1,024 keys, 64 values) at 16 positions from the lookup's attention, 400 steps",
      task: { ...TASK, nCtx: 16 },
      batchSize: 128,
      steps: 400,
      evalEvery: 50,
      validationSize: 256,
    },
    {
      name: 'context-64',
      description: '64 positions from the previous stage (every weight copied), 300 steps',
      task: { ...TASK, nCtx: 64 },
      batchSize: 64,
      steps: 300,
      evalEvery: 50,
      validationSize: 128,
    },
  ],
  full: [],
}
STAGES.default = [
  ...STAGES.default,
  {
    name: 'context-256',
    description: '256 positions from the previous stage, 400 steps of 64 sequences, warmup-cosine',
    task: { ...TASK, nCtx: 256 },
    batchSize: 64,
    steps: 400,
    evalEvery: 50,
    validationSize: 128,
    schedule: { kind: 'warmup-cosine', warmupSteps: 10 },
  },
]
STAGES.full = [
  ...STAGES.default,
  {
    name: 'context-512',
    description: '512 positions from the previous stage, lr 1e-3, 400 steps of 32 sequences, warmup-cosine',
    task: { ...TASK, nCtx: 512 },
    batchSize: 32,
    steps: 400,
    evalEvery: 50,
    validationSize: 64,
    lr: 0.001,
    schedule: { kind: 'warmup-cosine', warmupSteps: 10 },
  },
]

const EVALUATION: Record<StudySize, { lengths: number[]; sparsities: number[]; samples: number }> = {
  default: { lengths: [64, 256], sparsities: [0, 0.5, 0.8, 0.9, 0.95], samples: 50 },
  full: { lengths: [64, 256, 512], sparsities: [0, 0.5, 0.7, 0.8, 0.9, 0.95], samples: 100 },
}

/** `[target sparsity, score, sample std, exact sparsity]`. */
type Point = readonly [number, number, number, number]

/** One method's scores at one length, by target sparsity (0 = dense). */
interface Curve {
  readonly method: string
  readonly length: number
  readonly samples: number
  /**
   * `[target sparsity, score, sample std, exact sparsity]`, ascending target; target 0 is the
   * dense reference. A short prompt caps what a method can skip, so the exact sparsity (from its
   * masks) can stay below the target, and several targets then run the same configuration.
   */
  readonly points: readonly Point[]
}

/** The methods a sparse-eval trial ran (its `methods` list, `dense` left out). */
function methodsOf(record: TrialRecord): string[] {
  const methods = paramOf(record, 'methods')
  if (!Array.isArray(methods)) return []
  return methods.filter((m): m is string => typeof m === 'string' && m !== 'dense')
}

/**
 * A score's metric key: `<method>:scoreL<length>S<sparsity>` for a sparse row, `scoreL<length>S0` for the dense
 * reference row (see `sparseEvalMetricKey`); records written before every sparse row named its method have plain
 * sparse keys, read as the trial's one method.
 */
const SCORE_KEY = /^(?:([a-z0-9-]+):)?scoreL(\d+)S([0-9.e-]+)$/

/** Every (method, length) curve of the finished evaluation trials, a trial of several methods giving several. */
export function curvesOfEvaluation(records: readonly TrialRecord[]): Curve[] {
  const curves: Curve[] = []
  for (const record of records) {
    const methods = methodsOf(record)
    if (methods.length === 0 || record.status !== 'done') continue
    const only = methods.length === 1 ? methods[0] : undefined
    const byCurve = new Map<string, { method: string; length: number; points: Point[] }>()
    const add = (method: string, length: number, point: Point): void => {
      const id = `${method} ${length}`
      const curve = byCurve.get(id) ?? { method, length, points: [] }
      curve.points.push(point)
      byCurve.set(id, curve)
    }
    const dense = new Map<number, Point>()
    for (const key of Object.keys(record.metrics)) {
      const match = SCORE_KEY.exec(key)
      if (match === null) continue
      const prefix = match[1] === undefined ? '' : `${match[1]}:`
      const length = Number(match[2])
      const sparsity = Number(match[3])
      const score = metricOf(record, key)
      if (score === null || !Number.isFinite(sparsity)) continue
      const sd = metricOf(record, `${prefix}scoreStdL${length}S${match[3]}`) ?? 0
      const exact = metricOf(record, `${prefix}exactSparsityL${length}S${match[3]}`) ?? sparsity
      const point: Point = [sparsity, score, sd, exact]
      if (match[1] === undefined && sparsity === 0) {
        dense.set(length, point)
        continue
      }
      const method = match[1] ?? only
      if (method === undefined || !methods.includes(method)) continue
      add(method, length, point)
    }
    // the dense reference row belongs to every method's curve at its length
    for (const [length, point] of dense) for (const method of methods) add(method, length, point)
    const samples = metricOf(record, 'samples') ?? 1
    for (const { method, length, points } of byCurve.values())
      curves.push({ method, length, samples, points: points.sort((a, b) => a[0] - b[0]) })
  }
  return curves.sort((a, b) => a.length - b.length || METHODS.indexOf(a.method) - METHODS.indexOf(b.method))
}

/** The dense point of a curve (sparsity 0), or null. */
const denseOf = (curve: Curve): Point | null => curve.points.find((p) => p[0] === 0) ?? null

/** The standard error of the difference of two means over `n` sequences with sample stds `a` and `b`. */
const differenceSe = (a: number, b: number, n: number): number => Math.sqrt((a ** 2 + b ** 2) / Math.max(1, n))

/** Whether a point's score is within {@link TOLERANCE_SE} standard errors below dense (or above it). */
function withinDense(curve: Curve, point: Point): boolean {
  const dense = denseOf(curve)
  if (dense === null) return false
  const se = differenceSe(dense[2], point[2], curve.samples)
  return point[1] >= dense[1] - TOLERANCE_SE * se
}

/**
 * The highest exact sparsity (what the method's masks skipped, rounded to 3 decimals) up to which
 * every tested target keeps the score within {@link TOLERANCE_SE} standard errors of dense; 0
 * when the lowest target tested already falls below.
 */
export function toleratedSparsity(curve: Curve): number {
  let tolerated = 0
  for (const point of curve.points) {
    if (point[0] === 0) continue
    if (!withinDense(curve, point)) break
    tolerated = Math.max(tolerated, Math.round(point[3] * 1000) / 1000)
  }
  return tolerated
}

/** Whether every sparse point of a curve is within {@link TOLERANCE_SE} standard errors of dense. */
const toleratesAll = (curve: Curve): boolean => curve.points.every((p) => p[0] === 0 || withinDense(curve, p))

/** The mean score over the sparse points (sparsity > 0) of a curve; NaN without any. */
const sparseMean = (curve: Curve): number => {
  const sparse = curve.points.filter((p) => p[0] > 0)
  return sparse.length === 0 ? Number.NaN : sparse.reduce((a, p) => a + p[1], 0) / sparse.length
}

/** The curves at the longest length evaluated, by method. */
function atLongest(curves: readonly Curve[]): { length: number; byMethod: Map<string, Curve> } | null {
  if (curves.length === 0) return null
  const length = Math.max(...curves.map((c) => c.length))
  return { length, byMethod: new Map(curves.filter((c) => c.length === length).map((c) => [c.method, c])) }
}

/** The dense score at a length (from any curve: every trial runs the same dense reference). */
function denseScore(curves: readonly Curve[], length: number): number | null {
  for (const c of curves) if (c.length === length) return denseOf(c)?.[1] ?? null
  return null
}

function learnedFinding(curves: readonly Curve[]): StudyFinding {
  const longest = atLongest(curves)
  const claim = `The trained model retrieves: dense per-needle exact match at least ${LEARNED} at the longest length`
  if (longest === null) return { claim, holds: null, evidence: 'no evaluation trial finished' }
  const dense = denseScore(curves, longest.length)
  if (dense === null) return { claim, holds: null, evidence: 'no dense score was recorded' }
  return {
    claim,
    holds: dense >= LEARNED,
    evidence: `dense score ${formatNumber(dense, 3)} at ${longest.length} positions (chance 1/64)`,
  }
}

/** Null with the reason when the sparsity findings cannot be decided on these curves. */
function undecided(curves: readonly Curve[], needed: readonly string[]): string | null {
  const longest = atLongest(curves)
  if (longest === null) return 'no evaluation trial finished'
  const missing = needed.filter((m) => !longest.byMethod.has(m))
  if (missing.length > 0) return `the evaluation of ${missing.join(', ')} did not finish`
  const dense = denseScore(curves, longest.length) ?? 0
  if (dense < DECIDABLE)
    return (
      `the model scores ${formatNumber(dense, 3)} dense at ${longest.length} positions (below ${DECIDABLE}): ` +
      'too little to lose'
    )
  return null
}

function questFinding(curves: readonly Curve[]): StudyFinding {
  const claim = 'Decode-phase Quest tolerates a higher sparsity than the prefill methods ([v2] section 4.2)'
  const reason = undecided(curves, ['quest', ...PREFILL])
  if (reason !== null) return { claim, holds: null, evidence: reason }
  const { length, byMethod } = atLongest(curves) as NonNullable<ReturnType<typeof atLongest>>
  const quest = toleratedSparsity(byMethod.get('quest') as Curve)
  const prefill = PREFILL.map((m) => [m, toleratedSparsity(byMethod.get(m) as Curve)] as const)
  const best = Math.max(...prefill.map(([, t]) => t))
  const evidence =
    `highest exact sparsity tolerated at ${length} positions: quest ${quest}; ` +
    prefill.map(([m, t]) => `${m} ${t}`).join(', ')
  const questCurve = byMethod.get('quest') as Curve
  if (toleratesAll(questCurve) && PREFILL.some((m) => toleratesAll(byMethod.get(m) as Curve)))
    return { claim, holds: null, evidence: `${evidence} (both tolerate every target tested: no difference to see)` }
  return { claim, holds: quest > best, evidence }
}

/**
 * The standard error of the difference of two curves' sparse means: the mean over their shared
 * targets of `sqrt((sd_a^2 + sd_b^2) / n)` (conservative: the points share their sequences).
 */
function sparseMeanDifferenceSe(a: Curve, b: Curve): number {
  const ses: number[] = []
  for (const p of a.points) {
    if (p[0] === 0) continue
    const q = b.points.find((x) => x[0] === p[0])
    if (q !== undefined) ses.push(differenceSe(p[2], q[2], a.samples))
  }
  return ses.length === 0 ? 0 : ses.reduce((x, y) => x + y, 0) / ses.length
}

function verticalSlashFinding(curves: readonly Curve[]): StudyFinding {
  const claim = 'Vertical-Slash is the best prefill method on retrieval (NIAH) ([v2] section 4.2)'
  const reason = undecided(curves, PREFILL)
  if (reason !== null) return { claim, holds: null, evidence: reason }
  const { length, byMethod } = atLongest(curves) as NonNullable<ReturnType<typeof atLongest>>
  const vsCurve = byMethod.get('vertical-slash') as Curve
  const vs = sparseMean(vsCurve)
  const others = PREFILL.slice(1).map((m) => {
    const curve = byMethod.get(m) as Curve
    return { method: m, mean: sparseMean(curve), margin: TOLERANCE_SE * sparseMeanDifferenceSe(vsCurve, curve) }
  })
  const evidence =
    `mean score over the sparse settings at ${length} positions: vertical-slash ${formatNumber(vs, 3)}, ` +
    others.map((o) => `${o.method} ${formatNumber(o.mean, 3)}`).join(', ')
  const above = others.filter((o) => o.mean > vs + o.margin)
  if (above.length > 0)
    return {
      claim,
      holds: false,
      evidence: `${evidence}; ${above.map((o) => o.method).join(', ')} above it by more than ${TOLERANCE_SE} SE`,
    }
  const tied = others.filter((o) => o.mean >= vs - o.margin)
  if (tied.length > 0) {
    const names = tied.map((o) => `${o.method} (${formatNumber(o.margin, 3)})`).join(', ')
    return { claim, holds: null, evidence: `${evidence}; within ${TOLERANCE_SE} SE of ${names}: no best to name` }
  }
  return { claim, holds: true, evidence: `${evidence}; above each of them by more than ${TOLERANCE_SE} SE` }
}

const aggregationFinding: StudyFinding = {
  claim: 'Block-Sparse is the best prefill method on aggregation and multi-hop tasks ([v2] section 4.2)',
  holds: null,
  evidence: 'this study trains a retrieval (niah-tokens) model only; no aggregation or multi-hop model is evaluated',
}

function adaFinding(curves: readonly Curve[]): StudyFinding {
  const claim = 'Ada-SnapKV at least matches SnapKV at every sparsity and length ([v2] section 4.2)'
  const reason = undecided(curves, ['snapkv', 'ada-snapkv'])
  if (reason !== null) return { claim, holds: null, evidence: reason }
  const worse: string[] = []
  let compared = 0
  for (const ada of curves.filter((c) => c.method === 'ada-snapkv')) {
    const snap = curves.find((c) => c.method === 'snapkv' && c.length === ada.length)
    if (snap === undefined) continue
    for (const point of ada.points) {
      if (point[0] === 0) continue
      const other = snap.points.find((p) => p[0] === point[0])
      if (other === undefined) continue
      compared++
      const se = differenceSe(point[2], other[2], ada.samples)
      if (point[1] < other[1] - TOLERANCE_SE * se)
        worse.push(`${ada.length}/${point[0]}: ${formatNumber(point[1], 3)} < ${formatNumber(other[1], 3)}`)
    }
  }
  if (compared === 0) return { claim, holds: null, evidence: 'no sparsity was evaluated for both' }
  return {
    claim,
    holds: worse.length === 0,
    evidence:
      worse.length === 0
        ? `at ${compared} (length, sparsity) settings Ada-SnapKV is never more than ${TOLERANCE_SE} standard errors ` +
          'below SnapKV'
        : `below SnapKV by more than ${TOLERANCE_SE} standard errors at (length/sparsity) ${worse.join('; ')}`,
  }
}

/**
 * Mean relative error `(dense - sparse) / dense` over every method's sparse points at a length,
 * with its standard error: the mean of the points' standard errors
 * `sqrt((sd_dense^2 + sd_sparse^2) / n) / dense` (conservative: the points share their sequences,
 * so their errors are not independent). NaN without any point.
 */
function meanRelativeError(curves: readonly Curve[], length: number): { mean: number; se: number } {
  const errors: number[] = []
  const ses: number[] = []
  for (const c of curves) {
    if (c.length !== length) continue
    const dense = denseOf(c)
    if (dense === null || !(dense[1] > 0)) continue
    for (const p of c.points) {
      if (p[0] === 0) continue
      errors.push((dense[1] - p[1]) / dense[1])
      ses.push(differenceSe(dense[2], p[2], c.samples) / dense[1])
    }
  }
  const mean = (xs: number[]): number => (xs.length === 0 ? Number.NaN : xs.reduce((a, b) => a + b, 0) / xs.length)
  return { mean: mean(errors), se: mean(ses) }
}

function lengthFinding(curves: readonly Curve[]): StudyFinding {
  const claim =
    'Longer sequences tolerate higher sparsity: the relative error (dense - sparse) / dense falls with length ' +
    '([v2] section 4.3)'
  const lengths = [...new Set(curves.map((c) => c.length))].sort((a, b) => a - b)
  if (lengths.length < 2) return { claim, holds: null, evidence: 'fewer than two lengths were evaluated' }
  const reason = undecided(curves, [])
  if (reason !== null) return { claim, holds: null, evidence: reason }
  const shortest = lengths[0] as number
  const longest = lengths[lengths.length - 1] as number
  const dense = denseScore(curves, shortest) ?? 0
  if (dense < DECIDABLE)
    return { claim, holds: null, evidence: `dense scores ${formatNumber(dense, 3)} at ${shortest} positions` }
  const errors = lengths.map((l) => [l, meanRelativeError(curves, l)] as const)
  const first = errors[0]?.[1] ?? { mean: Number.NaN, se: Number.NaN }
  const last = errors[errors.length - 1]?.[1] ?? { mean: Number.NaN, se: Number.NaN }
  // It falls only when the drop exceeds 2 standard errors of the difference: a smaller one is noise.
  const margin = TOLERANCE_SE * Math.sqrt(first.se ** 2 + last.se ** 2)
  return {
    claim,
    holds: last.mean < first.mean - margin,
    evidence:
      'mean relative error over the six methods and the sparse settings (standard error): ' +
      errors.map(([l, e]) => `${formatNumber(e.mean, 3)} (${formatNumber(e.se, 2)}) at ${l}`).join(', ') +
      `; a fall counts beyond ${TOLERANCE_SE} standard errors of the difference (${formatNumber(margin, 3)})` +
      `; highest exact sparsity tolerated at ${shortest} -> ${longest}: ` +
      METHODS.map((m) => {
        const a = curves.find((c) => c.method === m && c.length === shortest)
        const b = curves.find((c) => c.method === m && c.length === longest)
        return a === undefined || b === undefined
          ? `${m} n/a`
          : `${m} ${toleratedSparsity(a)} -> ${toleratedSparsity(b)}`
      }).join(', '),
  }
}

/**
 * Which heads retrieve in the evaluated model, from the first finished evaluation trial's
 * `retrievalL{L}B{l}H{h}` metrics (every trial measures the same model and sequences).
 */
function headsTable(records: readonly TrialRecord[]): StudyTable {
  const record = records.find((r) => r.status === 'done')
  const rows: (string | number | null)[][] = []
  if (record !== undefined) {
    const found: [number, number, number, number][] = []
    for (const key of Object.keys(record.metrics)) {
      const match = /^retrievalL(\d+)B(\d+)H(\d+)$/.exec(key)
      const value = metricOf(record, key)
      if (match !== null && value !== null) found.push([Number(match[1]), Number(match[2]), Number(match[3]), value])
    }
    found.sort((a, b) => a[0] - b[0] || a[1] - b[1] || a[2] - b[2])
    for (const [length, layer, head, retrieval] of found) {
      const at = `L${length}B${layer}H${head}`
      rows.push([
        length,
        `L${layer}H${head}`,
        formatNumber(retrieval, 3),
        formatNumber(metricOf(record, `uniformL${length}`), 3),
        formatNumber(metricOf(record, `previousToken${at}`), 3),
      ])
    }
  }
  return {
    title:
      'Which heads retrieve (dense, teacher-forced): attention at each answer-predicting position on the prompt ' +
      "positions holding the answer's value, what uniform attention gives there, and attention to the previous " +
      'position',
    columns: ['length', 'head', 'retrieval', 'uniform', 'previous-token'],
    rows,
  }
}

/** Trial 0's run directory of a part (a placeholder without a context). */
const trialOf = (context: StudyContext | undefined, part: string): string =>
  context?.trialDirectory(part, 0) ?? `<study directory>/${part}/trials/<trial 0>`

function scoreChart(curves: readonly Curve[]): Readonly<Record<string, JsonValue>> {
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title: 'Per-needle exact match against target sparsity (0 = dense), per context length',
    data: {
      values: curves.flatMap((c) =>
        c.points.map(([sparsity, score]) => ({ method: c.method, length: c.length, sparsity, score })),
      ),
    },
    facet: { column: { field: 'length', type: 'ordinal', title: 'context length (tokens)' } },
    spec: {
      width: 260,
      height: 200,
      mark: { type: 'line', point: true },
      encoding: {
        x: { field: 'sparsity', type: 'quantitative', scale: { domain: [0, 1] }, title: 'target sparsity' },
        y: { field: 'score', type: 'quantitative', scale: { domain: [0, 1] }, title: 'score' },
        color: { field: 'method', type: 'nominal', title: 'method' },
        order: { field: 'sparsity' },
      },
    },
  }
}

/**
 * The Sparse Frontier study. Training parts (one seed each, `train` trials, each stage `initFrom`
 * the previous one's checkpoint): the documented `niah-tokens` recipe, a 2-layer attention-only
 * `llama` (dModel 64, 2 heads), AdamW lr 3e-3 without weight decay: `lookup` (8 keys, 8 values,
 * 16 positions), `vocabulary` (1,024 keys, 64 values), `context-64`, `context-256`; `full` adds
 * `context-512`. Part `evaluation`: `sparse-eval` trials on the last stage's model, one per method
 * (Vertical-Slash, FlexPrefill, Block-Sparse, Quest, SnapKV, Ada-SnapKV), default lengths 64 and
 * 256, target sparsities 0 to 0.95, 50 sequences (full: 64 to 512 positions, 100 sequences).
 *
 * @category Studies
 */
export const sparseFrontier: Study = {
  name: 'sparse-frontier',
  title: 'The Sparse Frontier on a needle-in-a-haystack model trained here',
  source: 'Nawrot et al., The Sparse Frontier, arXiv 2504.17768 [v2], sections 4.2 and 4.3',
  description:
    'The study evaluates training-free sparse attention over target sparsity and context length. Here a 2-layer ' +
    'attention-only llama is trained on niah-tokens (4 key-value needles queried after a haystack of pairs) with a ' +
    'curriculum (a tiny vocabulary first, then the full one, then a longer context), and each method is scored by ' +
    'greedy per-needle exact match. A prefill method sparsifies the prompt (the first answer is read from it; the ' +
    'other answers are decoded densely), a decode method every answer step. A sparsity is tolerated when the score ' +
    `stays within ${TOLERANCE_SE} standard errors of dense at it and at every lower one tested. Default: up to 256 ` +
    'positions, against the study’s 16K-128K; full adds a 512-position stage.',
  parts(size, context) {
    const stages = STAGES[size]
    const parts: StudyPart[] = []
    stages.forEach((stage, index) => {
      const previous = index === 0 ? null : (stages[index - 1] as Stage)
      const initFrom = previous === null ? null : `${trialOf(context, previous.name)}/checkpoint`
      parts.push({
        name: stage.name,
        description: stage.description,
        spec: {
          name: `sparse-frontier-${stage.name}${size === 'full' ? '-full' : ''}`,
          description: stage.description,
          experiment: 'train',
          base: {
            task: stage.task,
            preset: 'llama',
            model: MODEL,
            optimizer: OPTIMIZER,
            lr: stage.lr ?? 0.003,
            steps: stage.steps,
            batchSize: stage.batchSize,
            evalEvery: stage.evalEvery,
            validationSize: stage.validationSize,
            ...(stage.schedule === undefined ? {} : { schedule: stage.schedule }),
            ...(initFrom === null ? {} : { initFrom }),
          },
          seeds: 1,
        },
      })
    })
    const last = stages[stages.length - 1] as Stage
    const e = EVALUATION[size]
    parts.push({
      name: 'evaluation',
      description:
        `each method at lengths ${e.lengths.join(', ')}, sparsity ${e.sparsities.join(', ')}, ` +
        `${e.samples} sequences`,
      spec: {
        name: `sparse-frontier-evaluation${size === 'full' ? '-full' : ''}`,
        description: 'the six methods on the trained model, one per trial',
        experiment: 'sparse-eval',
        base: {
          model: `${trialOf(context, last.name)}/checkpoint`,
          task: { kind: 'niah-tokens' },
          sparsities: e.sparsities,
          lengths: e.lengths,
          samples: e.samples,
        },
        grid: { methods: METHODS.map((m) => [m]) },
        seeds: 1,
      },
    })
    return parts
  },
  assess(records, size) {
    const curves = curvesOfEvaluation(records.evaluation ?? [])
    const stages = STAGES[size]
    const training: StudyTable = {
      title: 'Training stages (final validation loss, nats; chance at the full vocabulary ln 64 = 4.16)',
      columns: ['stage', 'what it trains', 'final validation loss', 'training tokens/s'],
      rows: stages.map((stage) => {
        const record = (records[stage.name] ?? []).find((r) => r.status === 'done')
        return [
          stage.name,
          stage.description,
          formatNumber(record === undefined ? null : metricOf(record, 'finalValidationLoss')),
          formatNumber(record === undefined ? null : metricOf(record, 'tokensPerSecond'), 3),
        ]
      }),
    }
    const sparsities = [...new Set(curves.flatMap((c) => c.points.map((p) => p[0])))].sort((a, b) => a - b)
    const scores: StudyTable = {
      title:
        'Score (per-needle exact match; sample std) at each target sparsity, "at" the exact sparsity reached; ' +
        `tolerated: the highest exact sparsity within ${TOLERANCE_SE} SE of dense`,
      columns: ['length', 'method', ...sparsities.map((s) => (s === 0 ? 'dense' : `target ${s}`)), 'tolerated'],
      rows: curves.map((c) => [
        c.length,
        c.method,
        ...sparsities.map((s) => {
          const p = c.points.find((q) => q[0] === s)
          if (p === undefined) return null
          const cell = `${formatNumber(p[1], 3)} (${formatNumber(p[2], 2)})`
          return s === 0 ? cell : `${cell} at ${p[3].toFixed(2)}`
        }),
        toleratedSparsity(c),
      ]),
    }
    return {
      findings: [
        learnedFinding(curves),
        questFinding(curves),
        verticalSlashFinding(curves),
        aggregationFinding,
        adaFinding(curves),
        lengthFinding(curves),
      ],
      tables: [training, scores, headsTable(records.evaluation ?? [])],
      charts: curves.length === 0 ? [] : [scoreChart(curves) as never],
    }
  },
}
