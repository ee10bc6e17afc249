import { describeWithBackends } from '@attnlab/core/testing'
import { SparseMarkovTask } from '@attnlab/markov'
import { expect, it } from 'vitest'
import { DEFAULT_MINIMAL_QUERY_INIT, createConfig, type QueryInit } from './config.ts'
import { headSeparation } from './metrics.ts'
import { createTransformer } from './model.ts'
import { train } from './train.ts'

// The symmetry trap: with W_V = 0 every head of the minimal model gets
// the same gradient, so heads can only come apart through their query initialisation.
const task = new SparseMarkovTask({ vocabSize: 8, spans: [1, 1, 1], genLen: 8, tau: 0.2 })

async function separationAfterTraining(queryInit: QueryInit): Promise<number> {
  const model = createTransformer(createConfig({ architecture: 'minimal', dVocab: 8, nCtx: 10, nHeads: 3, queryInit }))
  await train(model, task, {
    steps: 100,
    batchSize: 64,
    lr: 0.08,
    validation: 16,
    analysis: false,
    optimizer: { kind: 'adamw', weightDecay: 0.01 },
  })
  const separation = await headSeparation(model)
  model.dispose()
  return separation
}

describeWithBackends('minimal model head symmetry', () => {
  it(
    `heads separate from the default query init (U(-${DEFAULT_MINIMAL_QUERY_INIT}, ` +
      `${DEFAULT_MINIMAL_QUERY_INIT}))`,
    async () => {
      expect(await separationAfterTraining(DEFAULT_MINIMAL_QUERY_INIT)).toBeGreaterThan(0.3)
    },
  )

  it('heads never separate from an exactly-zero query init (the first plateau)', async () => {
    expect(await separationAfterTraining(0)).toBe(0)
  })

  it("the paper's 1e-9 is below float32 resolution: the heads' differences never grow (the trap)", async () => {
    // The 1e-9 differences survive only in entries that never move; the updates are identical.
    expect(await separationAfterTraining(1e-9)).toBeLessThan(1e-6)
  })
})
