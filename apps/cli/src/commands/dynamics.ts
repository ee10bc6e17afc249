/**
 * `attnlab dynamics`: the reduced gradient-flow model of stage-wise learning (`@attnlab/dynamics`;
 * Yüksel et al., arXiv 2602.19143).
 *
 * - `dynamics simulate`: integrate the ODE, print plateaus, transitions (which head took which
 *   span), phases; `--plot FILE.svg` draws the loss and each head's attention mass per span.
 */
import { Option, type Command } from 'commander'
import { writeFileAtomic } from '@attnlab/core/node'
import {
  DYNAMICS_VARIANTS,
  analyzeTrajectory,
  resolveDynamicsConfig,
  sampleTimes,
  simulate,
  type DynamicsVariant,
  type StageAnalysis,
  type Trajectory,
} from '@attnlab/dynamics'
import { checkOutputFile, forceOption, intListParser, intParser, numberParser, withFlagNames } from '../options.ts'
import { renderSvg, type PlotSpec } from '../plot.ts'

interface SimulateFlags {
  heads: number
  T: number
  spans: number[]
  m: number
  eps: number
  seed: number
  variant: DynamicsVariant
  lambda: number
  fastValue?: boolean
  tMax?: number
  points: number
  spacing: 'log' | 'linear'
  tolerance: number
  json?: boolean
  plot?: string
  force?: boolean
}

/** The flag that sets each `resolveDynamicsConfig` / `sampleTimes` parameter, for their errors. */
const DYNAMICS_FLAGS: Readonly<Record<string, string>> = {
  nHeads: '--heads',
  nCtx: '--T',
  spans: '--spans',
  importanceRatio: '--m',
  initNoise: '--eps',
  seed: '--seed',
  variant: '--variant',
  weightDecay: '--lambda',
  tMax: '--t-max',
  points: '--points',
  spacing: '--spacing',
  relativeTolerance: '--tolerance',
  absoluteTolerance: '--tolerance',
}

/** Checks that `--plot` names an .svg file in an existing directory, new unless `--force` (before any work). */
function checkPlotPath(path: string, force: boolean | undefined): string {
  return checkOutputFile('--plot', path, '.svg', force)
}

/**
 * `--spans` lists spans oldest first, like `train`, `markov` and `emergence` (the newest span is
 * the most important, weight `m^i` for span `i`); `@attnlab/dynamics` lists them most important
 * first. Span `j` of the package is span `K - 1 - j` here, in every output.
 */
function flagSpan(K: number, j: number): number {
  return K - 1 - j
}

/** A head of the ODE, named as in every other output (`L0H2`: the model has one layer). */
function headName(k: number): string {
  return `L0H${k}`
}

/** The JSON summary printed by `--json` (spans indexed and listed oldest first, as `--spans`). */
function summary(trajectory: Trajectory, analysis: StageAnalysis, plot: string | null) {
  const { spanWeights, spans, weights, ...config } = trajectory.config
  const K = spans.length
  const span = (j: number): number => flagSpan(K, j)
  return {
    config: {
      ...config,
      spanOrder: 'oldest first (as --spans)',
      spans: [...spans].reverse(),
      weights: weights === null ? null : [...weights].reverse(),
      spanWeights: [...spanWeights].reverse(),
    },
    plateaus: analysis.plateaus,
    learningOrder: trajectory.learningOrder.map(span),
    transitions: analysis.transitions.map((t) => ({
      stage: t.stage,
      level: t.level,
      time: t.time,
      takenSpans: t.takenSpans.map((taken) => ({ span: span(taken.span), head: taken.head })),
      heads: t.assignment?.heads.map((h) => ({ span: span(h.span), share: h.mass })) ?? null,
    })),
    phases: analysis.phases.map((p) => ({
      phase: p.phase,
      start: p.start,
      end: p.end,
      span: p.span === null ? null : span(p.span),
      meanSimilarity: p.meanSimilarity,
    })),
    finalLoss: analysis.finalLoss,
    stagesReached: analysis.stagesReached,
    tMax: trajectory.times[trajectory.times.length - 1],
    stats: trajectory.stats,
    plot,
  }
}

/**
 * The Vega-Lite spec of a trajectory: loss vs time (log axes, plateau lines, transition rules)
 * above each head's attention mass per span vs time.
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
          head: headName(k),
          span: `span ${flagSpan(K, j)}`,
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

function printHuman(trajectory: Trajectory, analysis: StageAnalysis, plot: string | null): void {
  const c = trajectory.config
  const K = c.spans.length
  const span = (j: number): string => `span ${flagSpan(K, j)}`
  const fixed = (x: number) =>
    Math.abs(x) >= 1e4 || (Math.abs(x) < 1e-3 && x !== 0) ? x.toExponential(3) : x.toFixed(4)
  console.log(
    `reduced gradient flow (${c.variant}${c.fastValue ? ', fast values' : ''}): h=${c.nHeads} T=${c.nCtx} ` +
      `spans=[${[...c.spans].reverse().join(',')}] (oldest first) m=${c.importanceRatio} eps=${c.initNoise} ` +
      `lambda=${c.weightDecay} seed=${c.seed}`,
  )
  console.log(
    `span weights c_i (oldest first): ${[...c.spanWeights]
      .reverse()
      .map((w) => w.toFixed(3))
      .join(', ')}`,
  )
  console.log(`plateaus L_j: ${analysis.plateaus.map(fixed).join(' > ')}`)
  console.log(
    "transitions (loss crossing the midpoint between plateaus; share: the fraction of a span's target a head fits):",
  )
  for (const t of analysis.transitions) {
    if (t.time === null) {
      console.log(
        `  stage ${t.stage}: not reached by t = ${fixed(trajectory.times[trajectory.times.length - 1] as number)}`,
      )
      continue
    }
    const taken = t.takenSpans.map((s) => `${span(s.span)} <- ${headName(s.head)}`).join(', ') || 'no new span'
    const heads =
      t.assignment?.heads.map((a, k) => `${headName(k)} ${span(a.span)} share ${a.mass.toFixed(2)}`).join(', ') ?? ''
    console.log(`  stage ${t.stage}: t = ${fixed(t.time)}   ${taken}   [${heads}]`)
  }
  console.log('phases:')
  for (const p of analysis.phases) {
    const on = p.span === null ? '' : ` (all heads on ${span(p.span)})`
    console.log(
      `  ${p.phase.padEnd(11)} t = ${fixed(p.start)} .. ${fixed(p.end)}   ` +
        `similarity ${p.meanSimilarity.toFixed(3)}${on}`,
    )
  }
  console.log(
    `final loss ${fixed(analysis.finalLoss)} at t = ${fixed(trajectory.times[trajectory.times.length - 1] as number)}`,
  )
  console.log(
    `integrator: ${trajectory.stats.steps} steps, ${trajectory.stats.evaluations} ` +
      `evaluations, ${trajectory.stats.wallTimeMs.toFixed(0)} ms`,
  )
  if (plot !== null) console.log(`plot: ${plot}`)
}

/** Registers `attnlab dynamics`. */
export function registerDynamics(program: Command): void {
  const dynamics = program
    .command('dynamics')
    .description('the reduced gradient-flow model of stage-wise sparse-attention learning (Yuksel et al.)')
  dynamics
    .command('simulate')
    .description('integrate L = 1/2 ||G - sum_k V_k s_k^T||^2 and report plateaus, transitions and phases')
    .option('--heads <n>', 'number of heads h', intParser('--heads', 1, 64), 3)
    .option('--T <n>', 'context length T (positions attended over)', intParser('--T', 1, 100_000), 40)
    .option(
      '--spans <list>',
      'span lengths, oldest first (as in train / markov / emergence)',
      intListParser('--spans', 1),
      [1, 1, 1],
    )
    .option(
      '--m <x>',
      'importance base m: span i (oldest first) has weight c_i = m^i, the newest the most important',
      numberParser('--m', Number.MIN_VALUE, 1e6),
      1.7,
    )
    .option(
      '--eps <x>',
      'initial attention noise eps (0 keeps the heads identical)',
      numberParser('--eps', 0, 1e3),
      1e-6,
    )
    .option('--seed <n>', 'seed of the noise', intParser('--seed', Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER), 0)
    .addOption(new Option('--variant <name>', 'attention flow').choices([...DYNAMICS_VARIANTS]).default('replicator'))
    .option('--lambda <x>', 'weight decay', numberParser('--lambda', 0, 1e6), 0)
    .option('--fast-value', 'fast-value limit: V at its (ridge) least-squares optimum at every instant')
    .option(
      '--t-max <x>',
      'final ODE time (default 1000 replicator, 5000 logit)',
      numberParser('--t-max', Number.MIN_VALUE, 1e9),
    )
    .option('--points <n>', 'sample times after t = 0', intParser('--points', 1, 1_000_000), 1000)
    .addOption(new Option('--spacing <kind>', 'sample spacing').choices(['log', 'linear']).default('log'))
    .option(
      '--tolerance <x>',
      'relative and absolute error tolerance of the integrator',
      numberParser('--tolerance', 1e-14, 0.1),
      1e-8,
    )
    .option('--json', 'print the summary as JSON')
    .option('--plot <file.svg>', 'write an SVG plot of the loss and per-head span mass')
    .addOption(forceOption('an existing --plot file'))
    .action(async (flags: SimulateFlags) => {
      // Validate everything before integrating.
      const config = withFlagNames(DYNAMICS_FLAGS, () =>
        resolveDynamicsConfig({
          nHeads: flags.heads,
          nCtx: flags.T,
          // The package lists spans most important (newest) first.
          spans: [...flags.spans].reverse(),
          importanceRatio: flags.m,
          initNoise: flags.eps,
          seed: flags.seed,
          variant: flags.variant,
          weightDecay: flags.lambda,
          fastValue: flags.fastValue === true,
        }),
      )
      const options = {
        ...(flags.tMax === undefined ? {} : { tMax: flags.tMax }),
        points: flags.points,
        spacing: flags.spacing,
        relativeTolerance: flags.tolerance,
        absoluteTolerance: flags.tolerance,
      }
      withFlagNames(DYNAMICS_FLAGS, () => sampleTimes(config, options))
      const plot = flags.plot === undefined ? null : checkPlotPath(flags.plot, flags.force)
      const trajectory = simulate(config, options)
      const analysis = analyzeTrajectory(trajectory)
      if (plot !== null) await writeFileAtomic(plot, await renderSvg(dynamicsPlotSpec(trajectory, analysis)))
      if (flags.json) console.log(JSON.stringify(summary(trajectory, analysis, plot), null, 2))
      else printHuman(trajectory, analysis, plot)
    })
}
