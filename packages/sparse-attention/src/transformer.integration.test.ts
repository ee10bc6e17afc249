// The methods inside a real attnlab model (@attnlab/transformer): prefill through forward(), and
// KV-cached generation through prefill -> afterPrefill -> decode.
import { expect, it } from 'vitest'
import { describeWithBackends, expectNoLeaks } from '@attnlab/core/testing'
import { Rng } from '@attnlab/core'
import { createConfig, createTransformer, generate, type AttentionReport } from '@attnlab/transformer'
import { adaSnapKV, blockSparse, combine, flexPrefill, quest, snapKV, verticalSlash } from './index.ts'
import { maxAbsDiff } from './__fixtures__/reference.ts'

const config = createConfig({
  architecture: 'llama',
  dVocab: 32,
  nCtx: 96,
  dModel: 32,
  nLayers: 2,
  nHeads: 4,
  nKvHeads: 2,
  dHead: 8,
  dMlp: 48,
  initRange: 0.3,
  seed: 3,
})
const rng = Rng.fromSeed(5)
const prompt = Array.from({ length: 64 }, () => rng.int(32))

describeWithBackends('inside @attnlab/transformer', () => {
  it('prefill methods with budgets covering everything give the dense logits', async () => {
    const model = createTransformer(config)
    try {
      const logits = (attention?: NonNullable<Parameters<typeof model.forward>[1]>['attention']) => {
        const out = model.forward([prompt], attention === undefined ? {} : { attention })
        const data = out.dataSync().slice()
        out.dispose()
        return data
      }
      const reference = logits()
      for (const kernel of [
        verticalSlash({ verticalSize: 64, slashSize: 64, window: 16 }),
        flexPrefill({ alpha: 1, minBudget: 64, window: 16 }),
        blockSparse({ blockSize: 8, topK: 8 }),
      ]) {
        expect(maxAbsDiff(await expectNoLeaks(() => logits(kernel)), reference), kernel.name).toBeLessThan(1e-4)
      }
      const reports: AttentionReport[] = []
      const out = model.forward([prompt], {
        attention: verticalSlash({ verticalSize: 8, slashSize: 8, local: 4, window: 8, kernelBlockSize: 8 }),
        attentionReports: reports,
      })
      expect(maxAbsDiff(out.dataSync(), reference)).toBeGreaterThan(1e-3)
      out.dispose()
      expect(reports).toHaveLength(2)
      for (const r of reports) {
        expect(r.kernel).toBe('vertical-slash')
        expect(r.computedPairs).toBeLessThan(r.totalPairs)
        expect(r.extra?.exactSparsity).toBeCloseTo(1 - r.computedPairs / r.totalPairs, 12)
        expect(r.extra?.reportedSparsity).toBeTypeOf('number')
      }
    } finally {
      model.dispose()
    }
  })

  it('decode methods generate like dense when nothing is evicted, and run sparse without leaks', async () => {
    const model = createTransformer(config)
    try {
      const dense = await generate(model, [prompt], { maxTokens: 6, temperature: 0 })
      for (const kernel of [
        snapKV({ capacity: 64, local: 8, prefix: 2, window: 8 }),
        adaSnapKV({ capacity: 64, local: 8, prefix: 2, window: 8 }),
      ]) {
        const same = await generate(model, [prompt], { maxTokens: 6, temperature: 0, attention: kernel })
        expect(same.tokens, kernel.name).toEqual(dense.tokens)
      }
      for (const kernel of [
        snapKV({ capacity: 16, local: 4, prefix: 2, window: 8, kernelSize: 5 }),
        adaSnapKV({ capacity: 16, local: 4, prefix: 2, window: 8, kernelSize: 5 }),
        quest({ tokenBudget: 16, pageSize: 8 }),
        combine(
          verticalSlash({ verticalSize: 8, slashSize: 8, local: 4, window: 8, kernelBlockSize: 8 }),
          quest({ tokenBudget: 16, pageSize: 8 }),
        ),
      ]) {
        const result = await expectNoLeaks(() =>
          generate(model, [prompt], { maxTokens: 6, temperature: 0, attention: kernel }),
        )
        expect(result.tokens[0]).toHaveLength(6)
        const decodeReports = result.attentionReports.filter((r) => r.totalPairs < 4 * 64 * 10)
        expect(decodeReports.length).toBe(2 * 5)
        for (const r of decodeReports) expect(r.extra?.reportedSparsity, kernel.name).toBeCloseTo(1 - 16 / 64, 12)
      }
    } finally {
      model.dispose()
    }
  })
})
