// The capability report of docs/experiments/capabilities.md: for one real model, every capability of the suite
// (the story probes with a known answer, random-sequence and natural-text repetition, the ordinary next-token loss)
// is measured on the clean model, and for each capability the model has, its heads are localized two ways at the
// same number of evaluations: the exhaustive single-head sweep (N + 1 evaluations: the ground truth, its top-k
// hurting heads) and compressed sensing with M = N + 1 balanced masks (seeds 0..S-1); recall = the fraction of the
// sweep's top-k that compressed sensing's top-k names. Then the top-k heads of each method are knocked out (zero
// ablation, the paper's) and the damage on the target is set against the off-target controls (every other
// capability of the suite). Bair, Xu, Sun & Kolter, arXiv 2603.03335, sections 3-4.
//
// Usage (from packages/knockout; a few minutes per model on 2 cores; MODELS: the directory holding the models):
//   node --conditions=@attnlab/source --import tsx bench/capability-report.ts \
//     --model $MODELS/stories260K/stories260K.bin \
//     --tokenizer $MODELS/stories260K/tok512.bin
//   node --conditions=@attnlab/source --import tsx bench/capability-report.ts \
//     --model $MODELS/tinystories656K --no-dummy-prefix
// --json FILE writes every number; the markdown tables go to stdout. --baselines-only: the clean scores alone.
import { writeFileSync } from 'node:fs'
import { parseArgs } from 'node:util'
import { useBackend, type BackendName } from '@attnlab/core'
import { loadModel } from '@attnlab/transformer'
import {
  STORY_CAPABILITY_NAMES,
  absentCapability,
  builtinCapability,
  chanceLevel,
  compressedSensing,
  exhaustiveSweep,
  formatHead,
  knockoutEffects,
  measurementPlan,
  precisionRecall,
  scoreMasks,
  storyCapability,
  sweepHeads,
  type Capability,
  type HeadRef,
} from '../src/index.ts'

const { values: args } = parseArgs({
  options: {
    backend: { type: 'string', default: 'wasm' },
    model: { type: 'string' },
    tokenizer: { type: 'string' },
    'no-dummy-prefix': { type: 'boolean', default: false },
    top: { type: 'string', default: '5' },
    seeds: { type: 'string', default: '3' },
    count: { type: 'string', default: '64' },
    json: { type: 'string' },
    'baselines-only': { type: 'boolean', default: false },
  },
})
if (args.model === undefined) throw new Error('--model PATH is required')
await useBackend(args.backend as BackendName)
const top = Number(args.top)
const seeds = Number(args.seeds)
const count = Number(args.count)
const loaded = await loadModel(args.model, {
  ...(args.tokenizer === undefined ? {} : { tokenizer: args.tokenizer }),
  ...(args['no-dummy-prefix'] ? { dummyPrefix: false } : {}),
})
const { model, tokenizer, specialTokens } = loaded
if (tokenizer === undefined) throw new Error(`no tokenizer for ${args.model}: pass --tokenizer`)
const { dVocab, nCtx, nLayers, nHeads } = model.config
const N = nLayers * nHeads
const encode = (text: string) => tokenizer.encode(text)
const pool: number[] = []
for (let id = 0; id < Math.min(dVocab, tokenizer.vocabSize); id++)
  if (!tokenizer.isSpecial(id) && !/^<.*>$/.test(tokenizer.tokenText(id) ?? '<none>')) pool.push(id)
const context = {
  dVocab,
  nCtx,
  encode,
  tokenPool: pool,
  ...(specialTokens.bos === undefined ? {} : { bos: specialTokens.bos }),
}
const clean = { count: 1, heads: N, data: new Uint8Array(N) }
const cleanScore = async (capability: Capability): Promise<number> =>
  (await scoreMasks(model, capability, clean)).values[0] as number

// The suite: each story probe as a gain (the target), random-token and natural-text repetition as gains, and the
// ordinary next-token loss (a control only).
const suite: Capability[] = [
  ...STORY_CAPABILITY_NAMES.map((name) => storyCapability(name, encode, { count: count / 2, nCtx })),
  builtinCapability('induction-gain', context, { count }),
  builtinCapability('repeat-gain', context),
  builtinCapability('text', context),
]
const targets = suite.filter((c) => c.name !== 'text')

const baselines: Record<string, unknown>[] = []
for (const name of STORY_CAPABILITY_NAMES) {
  const parts: Record<string, number> = {}
  for (const part of ['informative', 'counterfactual'] as const) {
    parts[part] = await cleanScore(storyCapability(name, encode, { count: count / 2, nCtx, part }))
    parts[`${part}Accuracy`] = await cleanScore(
      storyCapability(name, encode, { count: count / 2, nCtx, part, metric: 'accuracy' }),
    )
  }
  baselines.push({ capability: name, ...parts, gain: (parts.informative as number) - (parts.counterfactual as number) })
}
for (const name of ['induction', 'repeat-text']) {
  const capability = builtinCapability(name, context, name === 'induction' ? { count } : {})
  baselines.push({ capability: name, informative: await cleanScore(capability), chance: capability.chance })
}
const cleanScores = new Map<string, number>()
for (const capability of suite) cleanScores.set(capability.name, await cleanScore(capability))

const localization: Record<string, unknown>[] = []
const damage: Record<string, unknown>[] = []
for (const target of args['baselines-only'] ? [] : targets) {
  const before = cleanScores.get(target.name) as number
  const absent = absentCapability(target, before)
  const sweep = await exhaustiveSweep(model, target, { top })
  const truth = sweepHeads(sweep, { relative: 0 }).slice(0, top)
  const recalls: number[] = []
  let csTop: string[] = []
  let csHeads: readonly HeadRef[] = truth
  let r2 = 0
  for (let seed = 0; seed < seeds; seed++) {
    const found = await compressedSensing(model, target, { masks: sweep.evaluations, seed, top })
    recalls.push(precisionRecall(found.top, truth).recall)
    if (seed === 0) {
      csTop = found.top.map(formatHead)
      csHeads = found.top
      r2 = found.fit.r2
    }
  }
  const plan = measurementPlan({ nLayers, nHeads }, top)
  const small: number[] = []
  for (let seed = 0; seed < seeds; seed++) {
    const found = await compressedSensing(model, target, { seed, top })
    small.push(precisionRecall(found.top, truth).recall)
  }
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length
  localization.push({
    capability: target.name,
    clean: before,
    present: absent === null,
    exhaustiveEvaluations: sweep.evaluations,
    exhaustiveTop: truth.map(formatHead),
    exhaustiveDrops: sweep.ranking.slice(0, top).map((h) => Number(h.score.toFixed(3))),
    csEvaluations: sweep.evaluations,
    csTop,
    csR2: r2,
    recallEqual: recalls,
    meanRecallEqual: mean(recalls),
    defaultMasks: plan.masks,
    recallDefault: small,
    meanRecallDefault: mean(small),
  })
  for (const [method, heads] of [
    ['exhaustive', truth],
    ['cs', csHeads],
  ] as const) {
    const effects = await knockoutEffects(model, heads, suite, { target: target.name })
    damage.push({
      target: target.name,
      method,
      heads: heads.map(formatHead),
      rows: effects.rows.map((row) => ({
        capability: row.capability,
        role: row.role,
        metric: row.metric,
        before: row.before,
        after: row.after,
        hurt: row.hurt,
      })),
      targetHurt: effects.targetHurt,
      maxControlHurt: effects.maxControlHurt,
      ratio: effects.ratio,
      relativeRatio: effects.relativeRatio,
    })
  }
}

const f = (x: unknown, digits = 3) => (typeof x === 'number' ? x.toFixed(digits) : String(x))
console.log(
  `## ${args.model} (${nLayers} layers x ${nHeads} heads = ${N}; vocabulary ${dVocab}, chance logprob ` +
    `${f(chanceLevel('logprob', dVocab), 2)})\n`,
)
console.log('| capability | informative | counterfactual | gain | informative top-1 | counterfactual top-1 |')
console.log('| --- | --- | --- | --- | --- | --- |')
for (const b of baselines) {
  console.log(
    `| ${b.capability} | ${f(b.informative)} | ${f(b.counterfactual ?? `(chance ${f(b.chance, 2)})`)} | ` +
      `${f(b.gain ?? '-')} | ${f(b.informativeAccuracy ?? '-', 2)} | ${f(b.counterfactualAccuracy ?? '-', 2)} |`,
  )
}
console.log(`| text (loss, nats/token) | ${f(cleanScores.get('text'))} | (chance ${f(Math.log(dVocab), 2)}) | | | |\n`)
console.log(
  '| target | clean gain | present | exhaustive top (N + 1 evals) | CS top, M = N + 1 | recall (seeds) | ' +
    'default M | recall (seeds) |',
)
console.log('| --- | --- | --- | --- | --- | --- | --- | --- |')
for (const l of localization) {
  const recalls = (xs: unknown) => (xs as number[]).map((r) => f(r, 2)).join(' ')
  console.log(
    `| ${l.capability} | ${f(l.clean)} | ${l.present ? 'yes' : 'no'} | ${(l.exhaustiveTop as string[]).join(' ')} ` +
      `(${l.exhaustiveEvaluations}) | ${(l.csTop as string[]).join(' ')} | ${recalls(l.recallEqual)} | ` +
      `${l.defaultMasks} | ${recalls(l.recallDefault)} |`,
  )
}
// Capabilities are on different scales (a story gain of 6 nats, a copying gain of 0.3): the relative hurt
// (hurt / |clean|) is the comparable number.
console.log('\n| target | method | heads | target hurt (relative) | worst control, relative hurt | relative ratio |')
console.log('| --- | --- | --- | --- | --- | --- |')
for (const d of damage) {
  const rows = d.rows as { capability: string; role: string; hurt: number; before: number }[]
  const relative = (r: { hurt: number; before: number }) => (r.before === 0 ? 0 : r.hurt / Math.abs(r.before))
  const target = rows.find((r) => r.role === 'target')
  const worst = rows.filter((r) => r.role === 'control').sort((a, b) => relative(b) - relative(a))[0]
  console.log(
    `| ${d.target} | ${d.method} | ${(d.heads as string[]).join(' ')} | ${f(d.targetHurt)} ` +
      `(${f(target === undefined ? 0 : relative(target), 2)}) | ${worst?.capability} ` +
      `(${f(worst === undefined ? 0 : relative(worst), 2)}) | ${f(d.relativeRatio, 1)} |`,
  )
}
if (args.json !== undefined) {
  const clean = Object.fromEntries(cleanScores)
  const report = {
    model: args.model,
    nLayers,
    nHeads,
    dVocab,
    top,
    seeds,
    count,
    clean,
    baselines,
    localization,
    damage,
  }
  writeFileSync(args.json, `${JSON.stringify(report, null, 2)}\n`)
}
model.dispose()
