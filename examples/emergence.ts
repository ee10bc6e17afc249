// The emergence experiment as a library call (what `attnlab emergence` runs): the documented default
// on a smaller chain for 300 steps, then its stages. Run: pnpm example examples/emergence.ts
import { useBackend } from '@attnlab/core'
import { defaultEmergenceConfig, describeLearned, describePlateau, runEmergence } from '@attnlab/experiments'

await useBackend('wasm')
const config = defaultEmergenceConfig() // d = 50, spans [2, 2, 2], m = 1.5, 1500 steps of 1024 sequences
const task = { kind: 'sparse-markov', vocabSize: 8, spans: [1, 1], m: 1.5, tau: 0.3 } as const
const training = { ...config.training, steps: 300, batchSize: 256, validationSize: 256, evalEvery: 10 }
const { summary, seeds } = await runEmergence({ ...config, task, training })
for (const stage of seeds[0]?.analysis.stages ?? []) {
  const { step, stage: j } = stage
  console.log(`stage ${j} at step ${Math.round(step)}: ${describePlateau(stage)} nats, ${describeLearned(stage)}`)
}
const final = summary.seeds[0]?.finalValidationLoss
console.log(`final loss ${final?.toFixed(3)}, teacher entropy ${summary.oracles.floor?.toFixed(3)}`)
