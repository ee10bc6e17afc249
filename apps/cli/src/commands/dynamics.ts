/**
 * `attnlab dynamics`: the reduced gradient-flow model of stage-wise learning (`@attnlab/dynamics`;
 * Yüksel et al., arXiv 2602.19143).
 *
 * - `dynamics simulate`: integrate the ODE, print plateaus, transitions (which head took which
 *   span), phases; `--plot FILE.svg` draws the loss and each head's attention mass per span.
 */
import type { Command } from 'commander'
import { writeFileAtomic } from '@attnlab/core/node'
import { fieldInfo, type z } from '@attnlab/core/schema'
import {
  analyzeTrajectory,
  dynamicsConfigSchema,
  integratorOptionsSchema,
  resolveDynamicsConfig,
  sampleTimes,
  simulate,
  simulateOptionsSchema,
  type DynamicsVariant,
  type StageAnalysis,
  type Trajectory,
} from '@attnlab/dynamics'
import { dynamicsPlotSpec } from '@attnlab/experiments'
import { checkOutputFile, forceOption, numberParser, withFlagNames } from '../options.ts'
import { renderSvg } from '../plot.ts'
import { schemaFieldOption } from '../schema-flags.ts'

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

/** A `dynamics simulate` flag: the schema field it sets, with the help and upper bound the CLI adds. */
interface SimulateFlag {
  readonly spec: string
  /** The field's key in its schema (what the library's messages name). */
  readonly key: string
  readonly field: z.ZodType
  readonly help?: string
  /** An upper bound where the schema has none: a value only a typo gives is refused before any work. */
  readonly max?: number
}

const configFields = dynamicsConfigSchema.shape
const samplingFields = simulateOptionsSchema.shape

/**
 * The `dynamics simulate` flags, each setting one field of `dynamicsConfigSchema` or
 * `simulateOptionsSchema` (help, default, range or choices from the field).
 */
const SIMULATE_FLAGS: readonly SimulateFlag[] = [
  { spec: '--heads <n>', key: 'nHeads', field: configFields.nHeads, max: 64 },
  { spec: '--T <n>', key: 'nCtx', field: configFields.nCtx, max: 100_000 },
  {
    spec: '--spans <list>',
    key: 'spans',
    field: configFields.spans,
    help: 'span lengths, oldest first (as in train / markov / emergence)',
  },
  {
    spec: '--m <x>',
    key: 'importanceRatio',
    field: configFields.importanceRatio,
    help:
      `${fieldInfo(configFields.importanceRatio).help}: span i (oldest first) has weight c_i = m^i, ` +
      'the newest the most important',
    max: 1e6,
  },
  { spec: '--eps <x>', key: 'initNoise', field: configFields.initNoise, max: 1e3 },
  { spec: '--seed <n>', key: 'seed', field: configFields.seed },
  { spec: '--variant <name>', key: 'variant', field: configFields.variant },
  { spec: '--lambda <x>', key: 'weightDecay', field: configFields.weightDecay, max: 1e6 },
  { spec: '--fast-value', key: 'fastValue', field: configFields.fastValue },
  { spec: '--t-max <x>', key: 'tMax', field: samplingFields.tMax, max: 1e9 },
  { spec: '--points <n>', key: 'points', field: samplingFields.points, max: 1_000_000 },
  { spec: '--spacing <kind>', key: 'spacing', field: samplingFields.spacing },
]

/** The flag that sets each `resolveDynamicsConfig` / `sampleTimes` parameter, for their errors. */
const DYNAMICS_FLAGS: Readonly<Record<string, string>> = {
  ...Object.fromEntries(SIMULATE_FLAGS.map((f) => [f.key, f.spec.split(' ')[0] as string])),
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
  const simulateCommand = dynamics
    .command('simulate')
    .description('integrate L = 1/2 ||G - sum_k V_k s_k^T||^2 and report plateaus, transitions and phases')
  for (const f of SIMULATE_FLAGS) {
    simulateCommand.addOption(
      schemaFieldOption(f.spec, f.field, {
        ...(f.help === undefined ? {} : { help: f.help }),
        ...(f.max === undefined ? {} : { max: f.max }),
      }),
    )
  }
  simulateCommand
    // One flag for both tolerances (the same default); its range is the CLI's: tighter than 1e-14 or looser than
    // 0.1 is not a useful integration of this flow.
    .option(
      '--tolerance <x>',
      'relative and absolute error tolerance of the integrator',
      numberParser('--tolerance', 1e-14, 0.1),
      fieldInfo(integratorOptionsSchema.shape.relativeTolerance).defaultValue as number,
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
