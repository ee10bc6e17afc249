/**
 * `report.html`: one self-contained page (inline SVG, inline CSS, no scripts, opens offline)
 * with the plots of an emergence run: Vega-Lite specs rendered to SVG by vega (`../plot.ts`), in
 * Node or a browser; the page is returned as a string.
 *
 * @module
 */
import { renderSvg, type PlotSpec } from '../plot.ts'
import { EMERGENCE_DEFINITIONS } from './emergence-steps.ts'
import type { EmergenceResult } from './experiment.ts'
import type { OdeOverlay } from './ode.ts'
import { describeOracleValue, type OracleLine } from './oracles.ts'
import {
  INTERPOLATED_NOTE,
  describeLearned,
  describePlateau,
  describeStageOracle,
  learnedHeader,
  type MetricLine,
  type RunAnalysis,
} from './stages.ts'

/**
 * Mean attention pattern of every head at one step: `[head][query][key]`.
 *
 * @category Emergence
 */
export interface PatternSnapshot {
  readonly seed: number
  readonly step: number
  /** Why it was kept: `'start'`, `'stage 2'`, `'end'`, ... */
  readonly label: string
  readonly patterns: readonly (readonly (readonly number[])[])[]
}

/**
 * Everything the report shows for one seed.
 *
 * @category Emergence
 */
export interface SeedReport {
  readonly seed: number
  readonly lines: readonly MetricLine[]
  readonly analysis: RunAnalysis
  readonly snapshots: readonly PatternSnapshot[]
  readonly ode: OdeOverlay | null
  /**
   * Why there is no ODE fit when `ode` is null (one line; without it the report says the stages
   * found were fewer than the ODE's transitions, or that none was fitted).
   */
  readonly odeNote?: string
}

/**
 * Inputs of {@link buildReport}.
 *
 * @category Emergence
 */
export interface ReportInput {
  readonly title: string
  /** One-paragraph description of the experiment (plain text). */
  readonly description: string
  /** Key settings shown in a table. */
  readonly settings: Readonly<Record<string, string>>
  readonly oracles: readonly OracleLine[]
  readonly oracleNote: string
  readonly groupNames: readonly string[]
  /**
   * Relative offsets of each span (same order as `groupNames`; offset 0 is the query's own
   * position), outlined on the attention-pattern heatmaps; empty for tasks without spans.
   */
  readonly groupOffsets: readonly (readonly number[])[]
  /** Head names `L{layer}H{head}`; empty for a model without attention (the mixer). */
  readonly heads: readonly string[]
  readonly seeds: readonly SeedReport[]
  /** Final loss minus floor etc., for the headline. */
  readonly headline: readonly string[]
  /** Whether the run was interrupted before its last step. */
  readonly interrupted: boolean
}

/** The report's style sheet (the lines between `<style>` and `</style>`). */
const REPORT_CSS = [
  'body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:2rem auto;max-width:1100px;' +
    'color:#222;line-height:1.45;padding:0 1rem}',
  'h1{font-size:1.5rem}h2{font-size:1.15rem;margin-top:2rem}h3{font-size:1rem}',
  'table{border-collapse:collapse;margin:.5rem 0 1rem}td,th{border:1px solid #ddd;padding:.25rem .6rem;' +
    'text-align:left;font-size:.9rem}',
  'th{background:#f6f6f6}figure{margin:1rem 0 2rem}figcaption{color:#555;font-size:.9rem;max-width:900px}',
  'td{overflow-wrap:anywhere}.warn{background:#fff3cd;border:1px solid #e0c36a;padding:.5rem .8rem}' +
    'svg{max-width:100%;height:auto}',
].join('\n')

const escapeHtml = (text: string): string =>
  text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;')

const fmt = (x: number | null | undefined, digits = 3): string =>
  x === null || x === undefined || !Number.isFinite(x) ? '-' : x.toFixed(digits)

function lossSpec(input: ReportInput): PlotSpec {
  const multi = input.seeds.length > 1
  const rows: Record<string, unknown>[] = []
  for (const seed of input.seeds) {
    for (const line of seed.lines) {
      rows.push({ step: line.step, loss: line.validationLoss, series: multi ? `seed ${seed.seed}` : 'validation' })
      if (!multi && line.trainLoss !== null) rows.push({ step: line.step, loss: line.trainLoss, series: 'train' })
    }
  }
  const valued = input.oracles.filter((o) => o.value !== null)
  const bands = input.oracles
    .filter((o) => o.value === null && o.bounds !== null)
    .map((o) => ({ label: `${o.label} (bounds)`, lower: o.bounds![0], upper: o.bounds![1] }))
  // One seed: its stage boundaries; several seeds: figure 5 shows them instead.
  const stageRules = multi
    ? []
    : input.seeds.flatMap((s) => s.analysis.stages.map((st) => ({ step: st.step, label: `stage ${st.stage}` })))
  const layers: Record<string, unknown>[] = []
  if (bands.length > 0) {
    layers.push({
      data: { values: bands },
      mark: { type: 'rect', opacity: 0.12, color: '#7b3294' },
      encoding: { y: { field: 'lower', type: 'quantitative' }, y2: { field: 'upper' } },
    })
  }
  layers.push({
    data: { values: valued.map((o) => ({ value: o.value, label: o.label, dashed: o.kind === 'truncated-teacher' })) },
    mark: { type: 'rule', strokeDash: [5, 4], color: '#888' },
    encoding: { y: { field: 'value', type: 'quantitative' }, tooltip: [{ field: 'label' }, { field: 'value' }] },
  })
  layers.push({
    data: { values: valued.map((o) => ({ value: o.value, label: o.label })) },
    mark: { type: 'text', align: 'left', dx: 4, fontSize: 10, color: '#555' },
    encoding: { y: { field: 'value', type: 'quantitative' }, x: { value: 650 }, text: { field: 'label' } },
  })
  if (stageRules.length > 0) {
    layers.push({
      data: { values: stageRules },
      mark: { type: 'rule', color: '#d62728', strokeWidth: 1 },
      encoding: { x: { field: 'step', type: 'quantitative' }, tooltip: [{ field: 'label' }, { field: 'step' }] },
    })
  }
  layers.push({
    data: { values: rows },
    mark: { type: 'line', strokeWidth: 1.6 },
    encoding: {
      x: { field: 'step', type: 'quantitative', title: 'step' },
      y: { field: 'loss', type: 'quantitative', title: 'loss (nats)', scale: { zero: true } },
      // Below the plot: the right margin holds the oracle lines' labels.
      color: {
        field: 'series',
        type: 'nominal',
        title: null,
        legend: { orient: 'bottom', direction: 'horizontal', columns: 5, labelLimit: 300 },
      },
    },
  })
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    width: 640,
    height: 320,
    padding: { left: 5, right: 150, top: 5, bottom: 5 },
    layer: layers,
  } as unknown as PlotSpec
}

function spanMassSpec(input: ReportInput, seed: SeedReport): PlotSpec {
  const rows: Record<string, unknown>[] = []
  for (const line of seed.lines) {
    line.spanMass?.forEach((perGroup, h) => {
      perGroup.forEach((mass, g) => {
        rows.push({ step: line.step, mass, head: input.heads[h], span: input.groupNames[g] })
      })
    })
  }
  const stageRules = seed.analysis.stages.map((st) => ({ step: st.step }))
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    data: { values: rows },
    facet: { column: { field: 'head', type: 'nominal', title: null, sort: input.heads } },
    spec: {
      width: 220,
      height: 180,
      layer: [
        {
          mark: { type: 'line', strokeWidth: 1.6 },
          encoding: {
            x: { field: 'step', type: 'quantitative' },
            y: { field: 'mass', type: 'quantitative', title: 'attention mass', scale: { domain: [0, 1] } },
            color: {
              field: 'span',
              type: 'nominal',
              sort: input.groupNames,
              title: 'span',
              legend: { labelLimit: 320 },
            },
          },
        },
        {
          data: { values: stageRules },
          mark: { type: 'rule', color: '#d62728', strokeDash: [3, 3] },
          encoding: { x: { field: 'step', type: 'quantitative' } },
        },
      ],
    },
  } as unknown as PlotSpec
}

function perPositionSpec(seed: SeedReport): PlotSpec {
  const rows: Record<string, unknown>[] = []
  for (const line of seed.lines) {
    line.perPositionLoss.forEach((loss, p) => {
      if (loss !== null) rows.push({ step: line.step, loss, position: p + 1 })
    })
  }
  // Each position's emergence step (EMERGENCE_DEFINITIONS.positionEmergence), in the position's colour.
  const marks = seed.analysis.positionEmergence.flatMap((step, p) => (step === null ? [] : [{ step, position: p + 1 }]))
  const color = { field: 'position', type: 'quantitative', title: 'position', scale: { scheme: 'viridis' } }
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    width: 640,
    height: 300,
    layer: [
      {
        data: { values: rows },
        mark: { type: 'line', strokeWidth: 1 },
        encoding: {
          x: { field: 'step', type: 'quantitative' },
          y: { field: 'loss', type: 'quantitative', title: 'loss at position (nats)' },
          color,
          detail: { field: 'position', type: 'nominal' },
        },
      },
      {
        data: { values: marks },
        mark: { type: 'rule', strokeDash: [2, 3], strokeWidth: 1 },
        encoding: {
          x: { field: 'step', type: 'quantitative' },
          color,
          tooltip: [{ field: 'position' }, { field: 'step', format: '.0f' }],
        },
      },
    ],
  } as unknown as PlotSpec
}

/** Each position's emergence step and each head's entropy drop, per seed, with the definitions. */
function emergenceStepsSection(input: ReportInput): string {
  const step = (x: number | null | undefined): string => (x === null || x === undefined ? '-' : x.toFixed(0))
  const seedTables = input.seeds
    .map((seed) => {
      const positions = seed.analysis.positionEmergence
        .map((s, p) => ({ s, p }))
        .filter(({ p }) => seed.lines.some((l) => l.perPositionLoss[p] !== null && l.perPositionLoss[p] !== undefined))
      const positionRows = positions.map(({ s, p }) => `<tr><td>${p + 1}</td><td>${step(s)}</td></tr>`).join('')
      const headRows = seed.analysis.entropyDrops
        .map(
          (d) =>
            `<tr><td>${escapeHtml(d.head)}</td><td>${step(d.step)}</td><td>${fmt(d.plateau)}</td>` +
            `<td>${fmt(d.final)}</td><td>${step(d.largestFall?.step)}</td><td>${fmt(d.largestFall?.fall)}</td></tr>`,
        )
        .join('')
      const title = input.seeds.length > 1 ? `<h3>Seed ${seed.seed}</h3>` : ''
      const heads =
        input.heads.length === 0
          ? '<p>This model has no attention (the MLP-Mixer): no attention-entropy drops.</p>'
          : '<table><thead><tr><th>head</th><th>entropy drop step</th><th>plateau entropy</th>' +
            '<th>final entropy</th><th>largest fall at</th><th>largest fall (nats)</th></tr></thead>' +
            `<tbody>${headRows}</tbody></table>`
      return (
        `${title}<table><thead><tr><th>predicted position</th><th>emergence step</th></tr></thead>` +
        `<tbody>${positionRows}</tbody></table>${heads}`
      )
    })
    .join('')
  const definitions = Object.entries(EMERGENCE_DEFINITIONS)
    .map(([name, text]) => `<li><b>${escapeHtml(name)}</b>: ${escapeHtml(text)}</li>`)
    .join('')
  return `<h2>Emergence steps per position and per head</h2>${seedTables}<ul>${definitions}</ul>`
}

function patternsSpec(input: ReportInput, seed: SeedReport): PlotSpec {
  const rows: Record<string, unknown>[] = []
  for (const snapshot of seed.snapshots) {
    const label = `${snapshot.label} (step ${snapshot.step})`
    snapshot.patterns.forEach((pattern, h) => {
      pattern.forEach((row, q) => {
        row.forEach((p, k) => {
          if (k <= q) rows.push({ snapshot: label, head: input.heads[h], query: q, key: k, p })
        })
        // The cells a span covers for this query (key = query - offset), outlined in its colour.
        input.groupOffsets.forEach((offsets, g) => {
          for (const offset of offsets) {
            if (q - offset >= 0)
              rows.push({ snapshot: label, head: input.heads[h], query: q, key: q - offset, span: input.groupNames[g] })
          }
        })
      })
    })
  }
  const order = seed.snapshots.map((s) => `${s.label} (step ${s.step})`)
  const x = { field: 'key', type: 'ordinal', title: 'key position', axis: { labels: false, ticks: false } }
  const y = { field: 'query', type: 'ordinal', title: 'query position', axis: { labels: false, ticks: false } }
  const layers: Record<string, unknown>[] = [
    {
      transform: [{ filter: 'datum.p != null' }],
      mark: { type: 'rect' },
      encoding: {
        x,
        y,
        color: { field: 'p', type: 'quantitative', title: 'attention', scale: { scheme: 'blues', domain: [0, 1] } },
      },
    },
  ]
  if (input.groupOffsets.length > 0) {
    layers.push({
      transform: [{ filter: 'datum.span != null' }],
      mark: { type: 'rect', fillOpacity: 0, strokeWidth: 1.2 },
      encoding: {
        x,
        y,
        stroke: {
          field: 'span',
          type: 'nominal',
          sort: input.groupNames,
          title: 'span positions (outlined)',
          // No blues: the attention itself is drawn in blues.
          scale: { range: ['#d62728', '#ff7f0e', '#2ca02c', '#9467bd', '#8c564b', '#e377c2', '#bcbd22', '#17becf'] },
          legend: { orient: 'bottom', direction: 'vertical', labelLimit: 400, titleLimit: 400 },
        },
      },
    })
  }
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    data: { values: rows },
    facet: {
      row: {
        field: 'snapshot',
        type: 'nominal',
        sort: order,
        title: null,
        header: { labelAngle: 0, labelAlign: 'left' },
      },
      column: { field: 'head', type: 'nominal', sort: input.heads, title: null },
    },
    spec: { width: 150, height: 150, layer: layers },
    resolve: { scale: { color: 'shared' } },
  } as unknown as PlotSpec
}

function odeSpec(seed: SeedReport): PlotSpec | null {
  if (seed.ode === null) return null
  const rows: Record<string, unknown>[] = seed.lines.map((l) => ({
    step: l.step,
    loss: l.validationLoss,
    series: 'transformer (validation)',
  }))
  seed.ode.curve.step.forEach((step, i) => {
    rows.push({
      step,
      loss: seed.ode!.curve.loss[i],
      series: `reduced ODE (x${seed.ode!.fit.scale.toFixed(1)} steps per unit time)`,
    })
  })
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    width: 640,
    height: 300,
    data: { values: rows },
    mark: { type: 'line', strokeWidth: 1.6 },
    encoding: {
      x: { field: 'step', type: 'quantitative' },
      y: { field: 'loss', type: 'quantitative', title: 'loss (nats)' },
      // One legend for both channels (a `legend: null` on one of them removes the merged legend).
      color: {
        field: 'series',
        type: 'nominal',
        title: null,
        legend: { orient: 'bottom', direction: 'vertical', labelLimit: 400 },
      },
      strokeDash: { field: 'series', type: 'nominal', title: null },
    },
  } as unknown as PlotSpec
}

function seedsSpec(input: ReportInput): PlotSpec | null {
  if (input.seeds.length < 2) return null
  const rows: Record<string, unknown>[] = []
  for (const seed of input.seeds) {
    for (const stage of seed.analysis.stages)
      rows.push({ seed: seed.seed, step: stage.step, stage: `stage ${stage.stage}`, order: stage.stage })
  }
  if (rows.length === 0) return null
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    width: 640,
    data: { values: rows },
    layer: [
      {
        mark: { type: 'boxplot', extent: 'min-max', opacity: 0.35 },
        encoding: {
          y: { field: 'stage', type: 'nominal', title: null, sort: { field: 'order', op: 'min' } },
          x: { field: 'step', type: 'quantitative', title: 'emergence step' },
        },
      },
      {
        mark: { type: 'point', filled: true, size: 50 },
        encoding: {
          y: { field: 'stage', type: 'nominal', sort: { field: 'order', op: 'min' } },
          x: { field: 'step', type: 'quantitative' },
          color: { field: 'seed', type: 'nominal' },
          tooltip: [{ field: 'seed' }, { field: 'step' }],
        },
      },
    ],
  } as unknown as PlotSpec
}

function stageTable(input: ReportInput, seed: SeedReport): string {
  if (seed.analysis.stages.length === 0) return '<p>No stage was detected.</p>'
  const rows = seed.analysis.stages
    .map(
      (s) =>
        `<tr><td>${s.stage}</td><td>${Math.round(s.step)}</td><td>${escapeHtml(describePlateau(s))}</td>` +
        `<td>${escapeHtml(describeStageOracle(s.nearestOracle))}</td><td>${escapeHtml(describeLearned(s))}</td></tr>`,
    )
    .join('')
  void input
  const note = seed.analysis.stages.some((s) => s.plateauEvaluations === 0)
    ? `<p>${escapeHtml(INTERPOLATED_NOTE)}</p>`
    : ''
  return (
    '<table><thead><tr><th>stage</th><th>step</th><th>plateau loss (nats)</th><th>oracle of the stage (distance)</th>' +
    `<th>${escapeHtml(learnedHeader(seed.analysis.method))}</th></tr></thead><tbody>${rows}</tbody></table>${note}`
  )
}

/** The one line of section 4 when a seed has no ODE fit. */
function noOdeReason(input: ReportInput, seed: SeedReport): string {
  const seedText = input.seeds.length > 1 ? ` for seed ${seed.seed}` : ''
  if (seed.odeNote !== undefined) return `No ODE fit${seedText}: ${seed.odeNote}`
  const found = seed.analysis.stages.length
  const transitions = input.groupNames.length
  if (transitions > 0 && found < transitions) {
    return (
      `No ODE fit${seedText}: ${found} of ${transitions} stages found, fewer than the ODE's ${transitions} ` +
      'transitions (train longer to fit it).'
    )
  }
  return `No ODE fit${seedText}: the run's plateaus did not give the ODE one loss per stage.`
}

/**
 * Builds the report page from its parts ({@link buildEmergenceReport} fills them from a run).
 *
 * @param input - title, settings, oracle lines, seeds
 * @returns the HTML document
 * @throws whatever vega-lite / vega throw for a spec they cannot render
 * @category Emergence
 */
export async function buildReport(input: ReportInput): Promise<string> {
  const figures: string[] = []
  const figure = async (title: string, caption: string, spec: PlotSpec | null, absent?: string): Promise<void> => {
    // A section without its chart keeps its heading and says why (the numbering never skips).
    if (spec === null) {
      if (absent !== undefined)
        figures.push(`<section><h2>${escapeHtml(title)}</h2><p>${escapeHtml(absent)}</p></section>`)
      return
    }
    const svg = await renderSvg(spec)
    figures.push(`<figure><h2>${escapeHtml(title)}</h2>${svg}<figcaption>${escapeHtml(caption)}</figcaption></figure>`)
  }
  await figure(
    '1. Validation loss and the oracle plateaus',
    `Validation loss (nats) against the restricted-context Bayes losses H_n (dashed; ${input.oracleNote}) and the ` +
      `detected stage boundaries (red).`,
    lossSpec(input),
  )
  const first = input.seeds[0]
  if (first !== undefined) {
    if (input.groupNames.length > 0) {
      await figure(
        '2. Attention mass of each head on each span',
        'Competitive phase: every head on the most important span; cooperative phase: heads specialise, one span ' +
          'each. Red: stage boundaries' +
          (input.seeds.length > 1 ? ` (seed ${first.seed}).` : '.'),
        spanMassSpec(input, first),
      )
    } else {
      await figure(
        '2. Loss at each output position',
        'Each scored position is learned at its own time (Baherwani et al.); dotted: its emergence step ' +
          '(positionEmergence, defined below the stage tables)' +
          (input.seeds.length > 1 ? ` (seed ${first.seed}).` : '.'),
        perPositionSpec(first),
      )
    }
    if (input.heads.length === 0) {
      figures.push(
        '<section><h2>3. Attention patterns of every head</h2><p>This model has no attention (the MLP-Mixer mixes ' +
          'positions with its causal token-mixing MLP): no attention patterns, span masses or attention entropy.' +
          '</p></section>',
      )
    } else if (first.snapshots.length > 0) {
      await figure(
        '3. Attention patterns of every head',
        'Mean attention (query rows, key columns) over validation sequences at the start, at each stage and ' +
          'at the end' +
          (input.groupOffsets.length > 0
            ? "; outlined: the keys each span covers for each query (the task's sparse pattern)"
            : '') +
          (input.seeds.length > 1 ? ` (seed ${first.seed}).` : '.'),
        patternsSpec(input, first),
      )
    }
    await figure(
      '4. The reduced ODE model against the run',
      first.ode
        ? `Replicator gradient flow (h = ${first.ode.config.nHeads}, T = ${first.ode.config.nCtx}, ` +
            `spans ${first.ode.config.spans.join(',')} oldest first, m = ${first.ode.config.m}), ODE time scaled ` +
            `by ${first.ode.fit.scale.toFixed(2)} steps per unit and losses mapped through the plateaus; progress ` +
            `RMSE ${first.ode.fit.rmse.toFixed(2)} stages.`
        : '',
      odeSpec(first),
      noOdeReason(input, first),
    )
  }
  await figure(
    '5. Emergence steps across seeds',
    'Each point is one seed; stage k is the k-th pattern learned (a span taken by a head, or an output position ' +
      'whose loss dropped). Emergence is random across seeds (Baherwani et al.).',
    seedsSpec(input),
  )
  const settings = Object.entries(input.settings)
    .map(([k, v]) => `<tr><th>${escapeHtml(k)}</th><td>${escapeHtml(v)}</td></tr>`)
    .join('')
  const oracleRows = input.oracles
    .map(
      (o) =>
        `<tr><td>${escapeHtml(o.label)}</td><td>${escapeHtml(describeOracleValue(o, o.value !== null ? 4 : 3))}</td>` +
        `<td>${o.standardError !== null ? fmt(o.standardError, 4) : '-'}</td><td>${o.method}</td></tr>`,
    )
    .join('')
  const tables = input.seeds
    .map((s) => `<h3>Stages${input.seeds.length > 1 ? `, seed ${s.seed}` : ''}</h3>${stageTable(input, s)}`)
    .join('')
  const interruptedNote = input.interrupted
    ? '<p class="warn">The run was interrupted; this report shows what was computed until then.</p>'
    : ''
  const oracleTable =
    '<table><thead><tr><th>line</th><th>value (nats)</th><th>standard error</th><th>method</th></tr></thead>' +
    `<tbody>${oracleRows}</tbody></table>`
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(input.title)}</title>
<style>
${REPORT_CSS}
</style></head><body>
<h1>${escapeHtml(input.title)}</h1>
<p>${escapeHtml(input.description)}</p>
${interruptedNote}
<ul>${input.headline.map((h) => `<li>${escapeHtml(h)}</li>`).join('')}</ul>
${tables}
${emergenceStepsSection(input)}
${figures.join('\n')}
<h2>Oracle lines</h2>
${oracleTable}
<h2>Settings</h2>
<table><tbody>${settings}</tbody></table>
</body></html>
`
}

/**
 * The headline of a run, one line per seed: final validation loss, its gap to the floor, the
 * number of stages and whether each span ended with its own head.
 *
 * @param result - a finished (or interrupted) run
 * @returns the lines (plain text)
 * @category Emergence
 */
export function emergenceHeadline(result: EmergenceResult): string[] {
  const floor = result.oracles.floor
  const headline: string[] = []
  for (const s of result.seeds) {
    const final = s.lines[s.lines.length - 1]
    const label = result.seeds.length > 1 ? `seed ${s.seed}: ` : ''
    if (final !== undefined) {
      const gap = final.validationLoss - (floor ?? 0)
      headline.push(
        `${label}final validation loss ${final.validationLoss.toFixed(4)} nats at step ${final.step}` +
          (floor !== null ? ` (${gap >= 0 ? '+' : ''}${gap.toFixed(4)} from the floor ${floor.toFixed(4)})` : '') +
          `; ${s.analysis.stages.length} stage(s) detected` +
          (result.groupNames.length > 0
            ? `; ${s.analysis.eachSpanOwnHead ? 'each span held by its own head' : 'spans not yet one per head'}`
            : ''),
      )
    }
  }
  return headline
}

const SPARSE_MARKOV_DESCRIPTION =
  'A transformer trained on a sparse high-order Markov chain (the next token depends on a few spans of past ' +
  'tokens, each of different importance) learns in stages: each stage is the heads learning to copy from one ' +
  'more span through a sparse attention pattern; heads first compete for the most important span, then ' +
  'cooperate (Yüksel, Alvarez Lucendo & Flammarion, arXiv 2602.19143). Each plateau is compared with the ' +
  'Bayes loss of the best predictor that sees only the spans learned so far.'
const TASK_DESCRIPTION =
  'Emergence on a synthetic task: the loss stays on a plateau until the model discovers the sparse attention ' +
  'pattern the task needs, and the step at which that happens varies across seeds (Baherwani et al., arXiv ' +
  '2606.25010).'

/**
 * The report page of a run (`report.html`): the validation loss against the oracle plateaus and
 * the stage boundaries, each head's attention mass on each span, the attention patterns at the
 * start, at each stage and at the end, the reduced ODE on the run's axes, the emergence steps
 * across seeds, and the stage, oracle and settings tables. Self-contained (inline SVG, no
 * scripts), opens offline.
 *
 * @param result - what {@link runEmergence} returned
 * @returns the HTML document
 * @throws whatever vega-lite / vega throw for a spec they cannot render
 * @example
 * ```ts
 * const html = await buildEmergenceReport(await runEmergence(config))
 * ```
 * @category Emergence
 */
export async function buildEmergenceReport(result: EmergenceResult): Promise<string> {
  const { record } = result
  return buildReport({
    title: `attnlab emergence: ${record.task.kind}, ${record.preset} model`,
    description: record.task.kind === 'sparse-markov' ? SPARSE_MARKOV_DESCRIPTION : TASK_DESCRIPTION,
    settings: {
      task: JSON.stringify(record.task),
      model: `${record.preset}: ${JSON.stringify(record.model)}`,
      training: JSON.stringify(record.training),
      seeds: record.seeds.join(', '),
      backend: record.backend,
      'training tokens/s': result.tokensPerSecond.map((t) => t.toFixed(0)).join(', '),
    },
    oracles: result.oracles.lines,
    oracleNote: result.oracles.note,
    groupNames: result.groupNames,
    groupOffsets: result.groupOffsets,
    heads: result.heads,
    seeds: result.seeds,
    headline: emergenceHeadline(result),
    interrupted: result.summary.interrupted,
  })
}
