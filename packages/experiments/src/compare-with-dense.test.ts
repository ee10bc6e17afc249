// compareWithDense and its metrics (moved from apps/cli's sparse compare tests, assertions
// unchanged), plus bad input and leaks.
import { expect, it } from 'vitest'
import * as tf from '@tensorflow/tfjs-core'
import { Rng } from '@attnlab/core'
import { describeWithBackends, expectNoLeaks } from '@attnlab/core/testing'
import { createKernel } from '@attnlab/sparse-attention'
import { createConfig, createTransformer, type AttentionReport } from '@attnlab/transformer'
import { ExperimentInputError, compareDistributions, compareWithDense, sizedConfig } from './index.ts'

const config = createConfig({
  architecture: 'llama',
  dVocab: 32,
  nCtx: 80,
  dModel: 32,
  nLayers: 2,
  nHeads: 4,
  nKvHeads: 2,
  dHead: 8,
  dMlp: 48,
  initRange: 0.3,
  seed: 3,
})
const ALL_METHODS = ['dense', 'vertical-slash', 'flexprefill', 'block-sparse', 'snapkv', 'ada-snapkv', 'quest'] as const
const rng = Rng.fromSeed(9)
const prompt = Array.from({ length: 64 }, () => rng.int(32))

it('KL and top-1 agreement', () => {
  const p = Float64Array.from([Math.log(0.6), Math.log(0.4), 0, -Infinity, Math.log(0.6), Math.log(0.4)])
  const q = Float64Array.from([Math.log(0.55), Math.log(0.45), 0, -Infinity, Math.log(0.3), Math.log(0.7)])
  const r = compareDistributions(p, q, 3, 2)
  const kl = (a: number, b: number) => a * Math.log(a / b) + (1 - a) * Math.log((1 - a) / (1 - b))
  expect(r.kl).toBeCloseTo((kl(0.6, 0.55) + 0 + kl(0.6, 0.3)) / 3, 12)
  expect(r.top1).toBeCloseTo(2 / 3, 12)
  expect(compareDistributions(new Float64Array(0), new Float64Array(0), 0, 2)).toEqual({ kl: 0, top1: 1 })
})

describeWithBackends('compareWithDense', () => {
  it('sizedConfig (generate --attention) calibrates Vertical-Slash on the prompt, keeps user values', async () => {
    const model = createTransformer(config)
    try {
      const before = tf.memory().numTensors
      const vs = sizedConfig(model, prompt, 'vertical-slash', 0.5)
      expect(tf.memory().numTensors).toBe(before)
      const reports: AttentionReport[] = []
      const kernel = createKernel('vertical-slash', vs as never)
      model.forward([prompt], { attention: kernel, attentionReports: reports }).dispose()
      const exact = reports.reduce((sum, r) => sum + (r.extra?.exactSparsity ?? 0), 0) / reports.length
      expect(Math.abs(exact - 0.5)).toBeLessThan(0.1)
      const given = sizedConfig(model, prompt, 'vertical-slash', 0.5, { verticalSize: 9 })
      expect(given).toMatchObject({ verticalSize: 9, slashSize: 9 })
      expect(sizedConfig(model, prompt, 'quest', 0.75)).toMatchObject({ pageSize: 8, tokenBudget: 16 })
    } finally {
      model.dispose()
    }
  })

  it('measures every method against dense: no loss without sparsity, loss growing with it', async () => {
    const model = createTransformer(config)
    try {
      const result = await expectNoLeaks(() =>
        compareWithDense(model, prompt, ALL_METHODS, { sparsities: [0, 0.8], decodeSteps: 6 }),
      )
      expect(result).toMatchObject({ promptTokens: 64, context: 80, decodeSteps: 6 })
      const rows = result.rows
      expect(rows).toHaveLength(12)
      for (const r of rows) {
        expect(r.klDenseSparse).toBeGreaterThanOrEqual(0)
        expect(r.top1Agreement).toBeGreaterThanOrEqual(0)
        expect(r.positions).toBe(r.phase === 'prefill' ? 64 : 6)
        if (r.targetSparsity === 0 && r.method !== 'quest') {
          expect(r.klDenseSparse, r.method).toBeLessThan(1e-6)
          expect(r.top1Agreement, r.method).toBe(1)
          expect(r.exactSparsity, r.method).toBeCloseTo(0, 6)
        }
        if (r.targetSparsity === 0.8) {
          // 64 tokens make only 8 blocks of 8 for Block-Sparse, 3 of them forced: about 0.42 at most
          expect(r.exactSparsity, r.method).toBeGreaterThan(r.method === 'block-sparse' ? 0.4 : 0.5)
          const low = rows.find((x) => x.method === r.method && x.targetSparsity === 0) as typeof r
          expect(r.klDenseSparse, r.method).toBeGreaterThan(low.klDenseSparse)
        }
      }
      // the calibrated prefill methods land near the target exact sparsity
      for (const m of ['vertical-slash', 'snapkv', 'ada-snapkv']) {
        const row = rows.find((r) => r.method === m && r.targetSparsity === 0.8) as (typeof rows)[number]
        expect(Math.abs(row.exactSparsity - 0.8), m).toBeLessThan(0.06)
      }
    } finally {
      model.dispose()
    }
  })

  it('rejects prompts that do not fit', async () => {
    const model = createTransformer(config)
    const options = { sparsities: [0.5], decodeSteps: 4 }
    try {
      await expect(compareWithDense(model, [1], ['quest'], options)).rejects.toThrow(/at least 2/)
      const long = Array.from({ length: 81 }, () => 1)
      await expect(compareWithDense(model, long, ['quest'], options)).rejects.toThrow(/context is 80/)
      const full = Array.from({ length: 80 }, () => 1)
      await expect(compareWithDense(model, full, ['quest'], options)).rejects.toThrow(/no room for decode steps/)
    } finally {
      model.dispose()
    }
  })

  it('rejects bad input with ExperimentInputError naming the input, leaking nothing', async () => {
    const model = createTransformer(config)
    try {
      const cases: [string, Promise<unknown>, RegExp][] = [
        ['tokens', compareWithDense(model, [1], ['quest']), /the prompt has 1 token\(s\); comparing needs at least 2/],
        ['tokens', compareWithDense(model, [1, 32, 2], ['block-sparse']), /token id 32 at position 1 is outside/],
        ['tokens', compareWithDense(model, [1, 2.5], ['block-sparse']), /token id 2.5 at position 1/],
        ['methods', compareWithDense(model, prompt, ['h2o' as never]), /methods must be .*; got 'h2o'/],
        ['methods', compareWithDense(model, prompt, []), /methods must be a non-empty list .*; got none/],
        ['sparsities', compareWithDense(model, prompt, ['quest'], { sparsities: [0.5, 1] }), /in \[0, 1\); got 1/],
        ['sparsities', compareWithDense(model, prompt, ['quest'], { sparsities: [Number.NaN] }), /got NaN/],
        ['decodeSteps', compareWithDense(model, prompt, ['quest'], { decodeSteps: 0 }), /an integer >= 1; got 0/],
      ]
      for (const [parameter, call, message] of cases) {
        const before = tf.memory().numTensors
        const error = await call.then(
          () => undefined,
          (e: unknown) => e,
        )
        expect(error, parameter).toBeInstanceOf(ExperimentInputError)
        expect((error as ExperimentInputError).code).toBe('INVALID_ARGUMENT')
        expect((error as ExperimentInputError).parameter).toBe(parameter)
        expect((error as Error).message).toMatch(message)
        expect(tf.memory().numTensors).toBe(before)
      }
    } finally {
      model.dispose()
    }
  })
})
