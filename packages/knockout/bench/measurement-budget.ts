// Recall against evaluations for compressed-sensing localization with the default measurement
// design (measurementPlan: M = ceil(2 k ln(1 + N/k)) balanced masks, each head knocked out in
// about 3), against the exhaustive single-head sweep (N + 1 evaluations) and the paper's README
// setting (M = 100, fraction 0.02).
//
// Ground truth per capability: the sweep's top-k heads (k = 5, or fewer: only heads whose knockout
// hurts; with --min-drop, only those that cost at least that much). Recall = found / truth over the
// top-k of each compressed-sensing run (k = --top, as a user who does not know the truth runs it),
// for seeds 0..S-1.
//
// Usage (from packages/knockout; one model per run, ~1-2 minutes on 2 cores; MODELS: the models' directory):
//   node --conditions=@attnlab/source --import tsx bench/measurement-budget.ts --model planted-mixture
//   node --conditions=@attnlab/source --import tsx bench/measurement-budget.ts \
//     --model $MODELS/aidreams260K/model.bin --capabilities text,repeat-text
//   ... --model $MODELS/stories260K/stories260K.bin \
//     --tokenizer $MODELS/stories260K/tok512.bin --capabilities text,induction
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { useBackend, type BackendName } from '@attnlab/core'
import { loadModel } from '@attnlab/transformer'
import { createTransformer, type Transformer } from '@attnlab/transformer'
import { loadCheckpoint } from '@attnlab/transformer/node'
import {
  builtinCapability,
  compressedSensing,
  defaultHeadsPerMask,
  exhaustiveSweep,
  measurementPlan,
  precisionRecall,
  sweepHeads,
  taskCapability,
  taskFromDescription,
  type Capability,
  type MixtureTask,
} from '../src/index.ts'

const { values: args } = parseArgs({
  options: {
    backend: { type: 'string', default: 'wasm' },
    model: { type: 'string', default: 'planted-mixture' },
    tokenizer: { type: 'string' },
    capabilities: { type: 'string', default: 'text' },
    top: { type: 'string', default: '5' },
    seeds: { type: 'string', default: '3' },
    'min-drop': { type: 'string', default: '0' },
    paper: { type: 'boolean', default: false },
    masks: { type: 'string' },
  },
})
await useBackend(args.backend as BackendName)
const top = Number(args.top)
const seeds = Number(args.seeds)
const minDrop = Number(args['min-drop'])

let model: Transformer
let capabilities: Capability[]
if (args.model === 'planted-mixture') {
  const checkpoint = await loadCheckpoint(
    fileURLToPath(new URL('../src/__fixtures__/planted-mixture-gpt', import.meta.url)),
  )
  model = createTransformer(checkpoint.config)
  model.setWeights(checkpoint.weights)
  const mixture = taskFromDescription(checkpoint.extra.task) as MixtureTask
  capabilities = mixture.components.map((c) =>
    taskCapability(mixture.only(c.name), { name: c.name, count: 48, seed: 1 }),
  )
} else {
  const loaded = await loadModel(args.model, args.tokenizer === undefined ? {} : { tokenizer: args.tokenizer })
  model = loaded.model
  const tokenizer = loaded.tokenizer
  const specials = [loaded.specialTokens.bos, ...(loaded.specialTokens.eos ?? [])].filter(
    (t): t is number => t !== undefined,
  )
  const context = {
    dVocab: model.config.dVocab,
    nCtx: model.config.nCtx,
    exclude: specials,
    ...(tokenizer === undefined ? {} : { encode: (text: string) => tokenizer.encode(text) }),
    ...(loaded.specialTokens.bos === undefined ? {} : { bos: loaded.specialTokens.bos }),
  }
  capabilities = (args.capabilities as string).split(',').map((name) => builtinCapability(name, context))
}

const layout = { nLayers: model.config.nLayers, nHeads: model.config.nHeads }
const rows: Record<string, unknown>[] = []
for (const capability of capabilities) {
  const sweep = await exhaustiveSweep(model, capability, { top })
  const truth = sweepHeads(sweep, { minDrop }).slice(0, top)
  const plan = measurementPlan(layout, top)
  const runs: [string, { masks?: number; fraction?: number }][] = [['default', {}]]
  if (args.paper) runs.push(['paper', { masks: 100, fraction: 0.02 }])
  for (const m of args.masks === undefined ? [] : args.masks.split(',').map(Number)) runs.push([`M=${m}`, { masks: m }])
  for (const [label, design] of runs) {
    const recalls: number[] = []
    let evaluations = 0
    for (let seed = 0; seed < seeds; seed++) {
      const found = await compressedSensing(model, capability, { ...design, seed, top })
      recalls.push(precisionRecall(found.top, truth).recall)
      evaluations = found.evaluations
    }
    rows.push({
      capability: capability.name,
      truth: truth.length,
      run: label,
      evaluations,
      headsPerMask:
        design.fraction === undefined
          ? defaultHeadsPerMask(plan.heads, evaluations)
          : Math.max(1, Math.floor(design.fraction * plan.heads)),
      exhaustive: sweep.evaluations,
      useExhaustive: plan.useExhaustive,
      recall: recalls.map((r) => r.toFixed(2)).join(' '),
      meanRecall: Number((recalls.reduce((a, b) => a + b, 0) / recalls.length).toFixed(2)),
    })
  }
}
console.table(rows)
model.dispose()
