// Validation of the knockout localization on planted ground truth, the long version of
// src/planted.test.ts:
//
// 1. the trained minimal model of src/__fixtures__/planted-minimal (3 heads, each owning one span
//    of a sparse Markov chain; tools/knockout/planted-fixtures.ts);
// 2. the planted mixture gpt of src/__fixtures__/planted-mixture-gpt (2 layers x 8 heads, dModel
//    32): a MixtureTask of three @attnlab/markov task families, each sequence marked by a prefix
//    token (a sparse Markov chain whose next token depends on the token 3 back, "near"; an
//    in-context Markov chain, "icl"; a linear map that permutes the first state, "linear"),
//    trained so that each task owns three heads (always on for its sequences, every other head
//    off with probability 1/2; tools/knockout/planted-fixtures.ts);
// 3. unless --natural none: a larger gpt (2 x 8 heads, dModel 64) trained here the ordinary way
//    (no head dropout) on a prefix-marked mixture, where which heads a task uses is whatever
//    training produced: `near-icl-far` (default; "far" depends on the token 6 back) or
//    `near-icl-linear`.
//
// For every capability: the exhaustive single-head sweep defines the ground truth (heads whose
// knockout costs at least 25% of the largest single-head drop and at least `--min-drop` nats);
// compressed sensing (the paper's default M = 100, fraction 0.02, and a budget run with M = 10% of
// the evaluations an exhaustive search over all heads and pairs needs, and a lean run with M = 2N)
// and the greedy search are
// scored by precision/recall against it; knocking out the top-k heads of the default compressed
// sensing run (k = number of true heads) is compared on the target and on the other capabilities
// (the controls).
//
// Usage (from packages/knockout; the gpt is trained once and cached under --out):
//   node --conditions=@attnlab/source --import tsx bench/planted-validation.ts [--backend wasm]
//     [--out ../../runs/knockout] [--retrain] [--steps 4000] [--min-drop 0.01] [--count 256]
//     [--natural near-icl-far|near-icl-linear|none]
import { existsSync } from 'node:fs'
import { mkdir } from 'node:fs/promises'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { Rng, useBackend, type BackendName } from '@attnlab/core'
import { writeFileAtomic } from '@attnlab/core/node'
import { IclMarkovTask, LinearMapTask, SparseMarkovTask, createTask, randomOrthogonalMatrix } from '@attnlab/markov'
import { createTransformer, presetConfig, train, type Transformer } from '@attnlab/transformer'
import { loadCheckpoint, saveCheckpoint } from '@attnlab/transformer/node'
import {
  MixtureTask,
  compressedSensing,
  exhaustivePairBudget,
  exhaustiveSweep,
  formatHead,
  greedySearch,
  headCount,
  knockoutEffects,
  precisionRecall,
  sparseMarkovSpanCapability,
  sweepHeads,
  taskCapability,
  taskFromDescription,
  type Capability,
  type HeadRef,
} from '../src/index.ts'

const { values: args } = parseArgs({
  options: {
    backend: { type: 'string', default: 'wasm' },
    out: { type: 'string', default: fileURLToPath(new URL('../../../runs/knockout', import.meta.url)) },
    retrain: { type: 'boolean', default: false },
    steps: { type: 'string', default: '4000' },
    'min-drop': { type: 'string', default: '0.01' },
    count: { type: 'string', default: '256' },
    natural: { type: 'string', default: 'near-icl-far' },
  },
})
const MIXTURES = ['near-icl-far', 'near-icl-linear', 'none'] as const
if (!(MIXTURES as readonly string[]).includes(args.natural))
  throw new Error(`--natural must be one of ${MIXTURES.join(', ')}`)
await useBackend(args.backend as BackendName)
await mkdir(args.out, { recursive: true })
const minDrop = Number(args['min-drop'])
const count = Number(args.count)

/**
 * The mixture of three tasks with disjoint vocabularies: `near-icl-far` (8 + 3 + 8 tokens + 3
 * prefixes) or `near-icl-linear` (8 + 3 + 2 + 3): the far chain replaced by a linear map with one
 * 1 per row (the second state is a fixed permutation of the first: an absolute-position copy).
 */
function mixtureTask(): MixtureTask {
  const d = 8
  const zero = new Array<number>(d * d).fill(0)
  const oldestOnly = (spans: number, seed: number): number[][] => [
    Array.from(randomOrthogonalMatrix(d, Rng.fromSeed(seed))),
    ...new Array(spans - 1).fill(zero),
  ]
  // Spans [1,1,1] with only the oldest span's teacher non-zero: the next token depends on the token 3 back.
  const near = new SparseMarkovTask({
    vocabSize: d,
    spans: [1, 1, 1],
    m: 1,
    tau: 0.3,
    genLen: 15,
    teacherMatrices: oldestOnly(3, 5),
  })
  const far = new SparseMarkovTask({
    vocabSize: d,
    spans: [1, 1, 1, 1, 1, 1],
    m: 1,
    tau: 0.3,
    genLen: 12,
    teacherMatrices: oldestOnly(6, 6),
  })
  const icl = new IclMarkovTask({ vocabSize: 3, order: 1, seqLength: 18 })
  const third =
    args.natural === 'near-icl-far'
      ? { name: 'far', task: far }
      : { name: 'linear', task: new LinearMapTask({ stateSize: 8, onesPerRow: 1, states: 2, matrixSeed: 3 }) }
  return new MixtureTask([{ name: 'near', task: near }, { name: 'icl', task: icl }, third], { vocabulary: 'disjoint' })
}

async function mixtureModel(): Promise<{ model: Transformer; task: MixtureTask; training: unknown }> {
  const dir = join(args.out, `mixture-gpt-${args.natural}`)
  if (!args.retrain && existsSync(join(dir, 'manifest.json'))) {
    const checkpoint = await loadCheckpoint(dir)
    const model = createTransformer(checkpoint.config)
    model.setWeights(checkpoint.weights)
    console.log(`loaded the mixture gpt from ${dir}`)
    return {
      model,
      task: taskFromDescription(checkpoint.extra.task) as MixtureTask,
      training: checkpoint.extra.training,
    }
  }
  const task = mixtureTask()
  const config = presetConfig('gpt', {
    dVocab: task.vocabSize,
    nCtx: task.seqLength - 1,
    nLayers: 2,
    nHeads: 8,
    dModel: 64,
    dHead: 8,
    dMlp: 128,
    seed: 0,
  })
  const model = createTransformer(config)
  const steps = Number(args.steps)
  const started = performance.now()
  const result = await train(model, task, {
    steps,
    batchSize: 128,
    lr: 3e-3,
    seed: 0,
    schedule: { kind: 'warmup-cosine', warmupSteps: 100 },
    evalEvery: 500,
    validation: 1024,
    analysis: false,
    onEval: (e) =>
      console.log(
        `  step ${e.step}: validation loss ${e.validationLoss.toFixed(4)} ` +
          `(${((performance.now() - started) / 1000).toFixed(0)} s)`,
      ),
  })
  const training = {
    steps,
    batchSize: 128,
    lr: 3e-3,
    schedule: 'warmup-cosine 100',
    finalValidationLoss: result.finalValidationLoss,
    seconds: result.seconds,
  }
  await saveCheckpoint(dir, model, null, { task: task.describe(), training })
  console.log(`trained the mixture gpt in ${result.seconds.toFixed(0)} s; saved to ${dir}`)
  return { model, task, training }
}

interface CapabilityReport {
  capability: string
  baseline: number
  truth: string[]
  sweep: { head: string; drop: number }[]
  evaluations: {
    exhaustive: number
    exhaustivePairs: number
    greedy: number
    csDefault: number
    csBudget: number
    csLean: number
  }
  csDefault: { top: string[]; precision: number; recall: number; r2: number; headsPerMask: number }
  csBudget: {
    masks: number
    fraction: number
    top: string[]
    precision: number
    recall: number
    r2: number
    headsPerMask: number
  }
  csLean: {
    masks: number
    fraction: number
    top: string[]
    precision: number
    recall: number
    r2: number
    headsPerMask: number
  }
  greedy: { top: string[]; precision: number; recall: number }
  effects: { heads: string[]; target: number; controls: Record<string, number>; ratio: number | null }
}

async function validate(model: Transformer, capabilities: Capability[], label: string): Promise<CapabilityReport[]> {
  const layout = { nLayers: model.config.nLayers, nHeads: model.config.nHeads }
  const n = headCount(layout)
  const pairs = exhaustivePairBudget(layout)
  const budgetMasks = Math.max(1, Math.floor(0.1 * pairs))
  // A budget design that knocks out about n/8 heads per mask (at least 1), so every head is tested ~M n/8 / n times.
  const budgetFraction = Math.max(1, Math.round(n / 8)) / n
  // A lean run for models too small for the 10% budget to hold even one informative mask: M = 2N masks.
  const leanMasks = 2 * n
  const leanFraction = n <= 4 ? 1 / n : budgetFraction
  const reports: CapabilityReport[] = []
  console.log(
    `\n== ${label}: ${layout.nLayers} x ${layout.nHeads} = ${n} heads; exhaustive sweep ${n + 1} evaluations, ` +
      `all heads and pairs ${pairs} (10% = ${(0.1 * pairs).toFixed(1)})`,
  )
  for (const capability of capabilities) {
    const sweep = await exhaustiveSweep(model, capability, { top: n })
    const truth = sweepHeads(sweep, { minDrop, relative: 0.25 })
    const k = Math.max(1, truth.length)
    const csDefault = await compressedSensing(model, capability, { masks: 100, fraction: 0.02, seed: 0, top: k })
    const csBudget = await compressedSensing(model, capability, {
      masks: budgetMasks,
      fraction: budgetFraction,
      design: 'balanced',
      seed: 0,
      top: k,
    })
    const csLean = await compressedSensing(model, capability, {
      masks: leanMasks,
      fraction: leanFraction,
      design: 'balanced',
      seed: 0,
      top: k,
    })
    const greedy = await greedySearch(model, capability, { top: k })
    const controls = capabilities.filter((c) => c.name !== capability.name)
    // The effect of the heads compressed sensing found with the paper's default setting.
    const effects = await knockoutEffects(model, csDefault.top, capabilities, { target: capability.name })
    const pr = (found: readonly HeadRef[]) => precisionRecall(found, truth)
    const headsPerMask = (masks: { count: number; data: Uint8Array }) =>
      masks.data.reduce((s, v) => s + v, 0) / masks.count
    const report: CapabilityReport = {
      capability: capability.name,
      baseline: sweep.baseline,
      truth: truth.map(formatHead),
      sweep: sweep.ranking.slice(0, Math.min(n, 6)).map((h) => ({ head: formatHead(h), drop: h.score })),
      evaluations: {
        exhaustive: sweep.evaluations,
        exhaustivePairs: pairs,
        greedy: greedy.evaluations,
        csDefault: csDefault.evaluations,
        csBudget: csBudget.evaluations,
        csLean: csLean.evaluations,
      },
      csDefault: {
        top: csDefault.top.map(formatHead),
        ...pick(pr(csDefault.top)),
        r2: csDefault.fit.r2,
        headsPerMask: headsPerMask(csDefault.masks),
      },
      csBudget: {
        masks: budgetMasks,
        fraction: budgetFraction,
        top: csBudget.top.map(formatHead),
        ...pick(pr(csBudget.top)),
        r2: csBudget.fit.r2,
        headsPerMask: headsPerMask(csBudget.masks),
      },
      csLean: {
        masks: leanMasks,
        fraction: leanFraction,
        top: csLean.top.map(formatHead),
        ...pick(pr(csLean.top)),
        r2: csLean.fit.r2,
        headsPerMask: headsPerMask(csLean.masks),
      },
      greedy: { top: greedy.top.map(formatHead), ...pick(pr(greedy.top)) },
      effects: {
        heads: effects.heads.map(formatHead),
        target: effects.targetHurt ?? 0,
        controls: Object.fromEntries(
          effects.rows.filter((r) => r.role === 'control').map((r) => [r.capability, r.hurt]),
        ),
        ratio: effects.ratio,
      },
    }
    reports.push(report)
    void controls
    const sweepText = report.sweep.map((s) => `${s.head} ${s.drop.toFixed(3)}`).join(', ')
    console.log(
      `${capability.name.padEnd(7)} baseline ${sweep.baseline.toFixed(3)} | sweep: ${sweepText} ` +
        `| truth {${report.truth.join(', ')}}`,
    )
    const { csDefault: d, csBudget: b, csLean: l } = report
    console.log(
      `        cs M=100 f=0.02 (${d.headsPerMask.toFixed(1)} heads/mask): {${d.top.join(', ')}} ` +
        `P ${d.precision.toFixed(2)} R ${d.recall.toFixed(2)} R2 ${d.r2.toFixed(3)}` +
        ` | cs M=${budgetMasks} (${b.headsPerMask.toFixed(1)} heads/mask): {${b.top.join(', ')}} ` +
        `P ${b.precision.toFixed(2)} R ${b.recall.toFixed(2)} R2 ${b.r2.toFixed(3)}` +
        ` | cs M=${leanMasks} (${l.headsPerMask.toFixed(1)} heads/mask): {${l.top.join(', ')}} ` +
        `P ${l.precision.toFixed(2)} R ${l.recall.toFixed(2)}` +
        ` | greedy (${greedy.evaluations} evals): {${report.greedy.top.join(', ')}} ` +
        `R ${report.greedy.recall.toFixed(2)}`,
    )
    const controlsText = Object.entries(report.effects.controls)
      .map(([name, hurt]) => `${name} ${hurt >= 0 ? '+' : ''}${hurt.toFixed(3)}`)
      .join(', ')
    const ratio = report.effects.ratio
    const ratioText = ratio === null ? 'n/a' : ratio === Infinity ? 'inf' : ratio.toFixed(1)
    console.log(
      `        knocking out {${report.effects.heads.join(', ')}}: target +${report.effects.target.toFixed(3)} nats, ` +
        `controls ${controlsText}; ratio ${ratioText}`,
    )
  }
  return reports
}

function pick(result: { precision: number; recall: number }): { precision: number; recall: number } {
  return { precision: result.precision, recall: result.recall }
}

function summarize(label: string, reports: CapabilityReport[]): Record<string, unknown> {
  const mean = (xs: number[]) => xs.reduce((s, v) => s + v, 0) / xs.length
  const summary = {
    model: label,
    csDefault: {
      recall: mean(reports.map((r) => r.csDefault.recall)),
      precision: mean(reports.map((r) => r.csDefault.precision)),
      evaluations: reports[0]?.evaluations.csDefault,
    },
    csBudget: {
      recall: mean(reports.map((r) => r.csBudget.recall)),
      precision: mean(reports.map((r) => r.csBudget.precision)),
      evaluations: reports[0]?.evaluations.csBudget,
    },
    csLean: {
      recall: mean(reports.map((r) => r.csLean.recall)),
      precision: mean(reports.map((r) => r.csLean.precision)),
      evaluations: reports[0]?.evaluations.csLean,
    },
    greedy: { recall: mean(reports.map((r) => r.greedy.recall)), evaluations: reports[0]?.evaluations.greedy },
    exhaustive: reports[0]?.evaluations.exhaustive,
    exhaustivePairs: reports[0]?.evaluations.exhaustivePairs,
    minRatio: Math.min(...reports.filter((r) => r.truth.length > 0).map((r) => r.effects.ratio ?? 0)),
  }
  console.log(
    `summary ${label}: ${JSON.stringify(summary, (_key, value: unknown) => (value === Infinity ? 'Infinity' : value))}`,
  )
  return summary
}

// 1. The planted minimal model.
const fixture = await loadCheckpoint(fileURLToPath(new URL('../src/__fixtures__/planted-minimal', import.meta.url)))
const minimal = createTransformer(fixture.config)
minimal.setWeights(fixture.weights)
const chain = createTask(fixture.extra.task as Record<string, unknown>) as SparseMarkovTask
const spanReports = await validate(
  minimal,
  [0, 1, 2].map((i) => sparseMarkovSpanCapability(chain, i, { count, seed: 1 })),
  'planted minimal model (head h owns span h)',
)
const planted = fixture.extra.planted as Record<string, HeadRef[]>
for (const report of spanReports) {
  const expected = (planted[report.capability] ?? []).map(formatHead)
  console.log(
    `  ${report.capability}: planted owner {${expected.join(', ')}}, exhaustive truth {${report.truth.join(', ')}}` +
      `${expected.join() === report.truth.join() ? ' (agree)' : ' (DISAGREE)'}`,
  )
}
minimal.dispose()

// 2. The planted mixture gpt.
const plantedGpt = await loadCheckpoint(
  fileURLToPath(new URL('../src/__fixtures__/planted-mixture-gpt', import.meta.url)),
)
const gptPlanted = createTransformer(plantedGpt.config)
gptPlanted.setWeights(plantedGpt.weights)
const plantedTask = taskFromDescription(plantedGpt.extra.task) as MixtureTask
const plantedReports = await validate(
  gptPlanted,
  plantedTask.components.map((c) => taskCapability(plantedTask.only(c.name), { name: c.name, count, seed: 1 })),
  'planted mixture gpt (near / icl / linear, prefix-marked, 3 owned heads per task)',
)
const owned = plantedGpt.extra.planted as Record<string, HeadRef[]>
for (const report of plantedReports) {
  const own = new Set((owned[report.capability] ?? []).map(formatHead))
  const outside = report.truth.filter((h) => !own.has(h))
  console.log(
    `  ${report.capability}: owns {${[...own].join(', ')}}; exhaustive truth {${report.truth.join(', ')}}` +
      `${outside.length === 0 ? ' (within the owned heads)' : ` (outside the owned heads: ${outside.join(', ')})`}`,
  )
}
gptPlanted.dispose()

// 3. A gpt trained the ordinary way on a mixture.
let natural: {
  design: string
  training: unknown
  reports: CapabilityReport[]
  summary: Record<string, unknown>
} | null = null
if (args.natural !== 'none') {
  const { model: gpt, task: mixture, training } = await mixtureModel()
  const components = mixture.components.map((c) =>
    taskCapability(mixture.only(c.name), { name: c.name, count, seed: 1 }),
  )
  const reports = await validate(gpt, components, `ordinarily trained mixture gpt (${args.natural}, prefix-marked)`)
  gpt.dispose()
  natural = { design: args.natural, training, reports, summary: summarize(`natural ${args.natural}`, reports) }
}

const out = {
  generated: new Date().toISOString(),
  backend: args.backend,
  minDrop,
  count,
  minimal: { reports: spanReports, summary: summarize('minimal', spanReports) },
  plantedMixture: {
    training: plantedGpt.extra.training,
    owned,
    reports: plantedReports,
    summary: summarize('planted mixture gpt', plantedReports),
  },
  natural,
}
const json = JSON.stringify(out, (_key, value: unknown) => (value === Infinity ? 'Infinity' : value), 2)
await writeFileAtomic(join(args.out, 'planted-validation.json'), `${json}\n`)
console.log(`\nwrote ${join(args.out, 'planted-validation.json')}`)
