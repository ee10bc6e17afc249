import { AttnlabError, ConfigError } from '@attnlab/core'
import { describeWithBackends } from '@attnlab/core/testing'
import { createConfig, createTransformer, presetConfig, type Transformer } from '@attnlab/transformer'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { randomizeWeights } from '../test/helpers.ts'
import { inductionCapability, textCapability, type Capability } from './capability.ts'
import { compressedSensing, exhaustiveSweep, greedySearch } from './localize.ts'
import { randomMasks } from './masks.ts'
import { headHeatmap, heatmapSpec, knockoutEffects, precisionRecall, sweepHeads } from './report.ts'

describe('precision, recall and sweep heads', () => {
  const a = { layer: 0, head: 1 }
  const b = { layer: 1, head: 0 }
  const c = { layer: 2, head: 3 }
  it('counts hits once', () => {
    expect(precisionRecall([a, b], [b, c])).toEqual({ precision: 0.5, recall: 0.5, hits: [b] })
    expect(precisionRecall([a, a], [a])).toEqual({ precision: 1, recall: 1, hits: [a] })
    expect(precisionRecall([], [a]).precision).toBe(1)
    expect(precisionRecall([], [a]).recall).toBe(0)
    expect(precisionRecall([a], []).recall).toBe(1)
  })
  it('sweepHeads keeps heads above max(minDrop, relative * largest drop)', () => {
    const ranking = [
      { ...a, score: 1 },
      { ...b, score: 0.3 },
      { ...c, score: 0.1 },
    ]
    expect(sweepHeads({ ranking })).toEqual([a, b])
    expect(sweepHeads({ ranking }, { relative: 0.5 })).toEqual([a])
    expect(sweepHeads({ ranking }, { minDrop: 0.05, relative: 0 })).toEqual([a, b, c])
    expect(sweepHeads({ ranking: [{ ...a, score: -1 }] })).toEqual([])
    expect(() => sweepHeads({ ranking }, { relative: 2 })).toThrow(ConfigError)
    expect(() => sweepHeads({ ranking }, { minDrop: -1 })).toThrow(/minDrop/)
  })
})

describeWithBackends('localization and effects on a random model', () => {
  let model: Transformer
  let induction: Capability
  let text: Capability
  beforeAll(() => {
    model = createTransformer(
      createConfig({
        architecture: 'gpt',
        dVocab: 13,
        nCtx: 16,
        dModel: 16,
        nLayers: 2,
        nHeads: 4,
        dHead: 4,
        dMlp: 24,
      }),
    )
    randomizeWeights(model, 3)
    induction = inductionCapability({ vocabSize: 13, blockLength: 6, count: 8, seed: 1 })
    text = textCapability([
      [1, 2, 3, 4, 5, 6, 7],
      [8, 9, 10, 11, 12],
    ])
  })
  afterAll(() => model.dispose())

  it('knockoutEffects reports before/after for every capability, with target and control roles', async () => {
    const heads = [{ layer: 1, head: 2 }]
    const report = await knockoutEffects(model, heads, [induction, text], { target: 'induction' })
    expect(report.rows.map((r) => [r.capability, r.role])).toEqual([
      ['induction', 'target'],
      ['text', 'control'],
    ])
    const sweep = await exhaustiveSweep(model, induction)
    const row = report.rows[0]!
    expect(row.before).toBeCloseTo(sweep.baseline, 5)
    expect(row.after).toBeCloseTo(sweep.knockedOut[6] as number, 5)
    expect(row.hurt).toBeCloseTo(row.before - row.after, 10) // logprob: higher is better
    expect(report.targetHurt).toBe(row.hurt)
    expect(report.maxControlHurt).toBe(report.rows[1]!.hurt)
    const expectedRatio =
      report.maxControlHurt! <= 0 ? (row.hurt > 0 ? Infinity : 0) : row.hurt / report.maxControlHurt!
    expect(report.ratio).toBe(expectedRatio)
    expect(report.evaluations).toBe(4)
    const none = await knockoutEffects(model, [], [induction])
    expect(none.rows[0]!.change).toBe(0)
    expect(none.ratio).toBeNull()
    const mean = await knockoutEffects(model, heads, [induction, text], { mode: 'mean' })
    expect(mean.mode).toBe('mean')
    expect(mean.rows[0]!.after).not.toBeCloseTo(row.after, 6)
  })

  it('knockoutEffects rejects duplicates, unknown targets and heads outside the model', async () => {
    await expect(knockoutEffects(model, [], [induction, induction])).rejects.toThrow(/'induction' is listed twice/)
    await expect(knockoutEffects(model, [], [induction], { target: 'math' })).rejects.toThrow(
      /'math' is not among the capabilities \(induction\)/,
    )
    await expect(knockoutEffects(model, [{ layer: 2, head: 0 }], [induction])).rejects.toThrow(AttnlabError)
  })

  it(
    'compressed sensing: M evaluations, coefficients and R^2 from the Lasso, top-k only negative coefficients, ' +
      'optional CV',
    async () => {
      const found = await compressedSensing(model, induction, { masks: 24, fraction: 0.25, seed: 2, top: 3 })
      expect(found.evaluations).toBe(24)
      expect(found.measurements).toHaveLength(24)
      expect(found.masks.count).toBe(24)
      expect(found.top.length).toBeLessThanOrEqual(3)
      expect(found.top.every((h) => h.score < 0)).toBe(true)
      expect(found.ranking.map((h) => h.score)).toEqual([...found.ranking.map((h) => h.score)].sort((x, y) => x - y))
      expect(Math.abs(found.standardized.reduce((s, v) => s + v, 0))).toBeLessThan(1e-9)
      expect(found.fit.alpha).toBe(0.01)
      expect([...found.knockoutCounts].reduce((s, v) => s + v, 0)).toBe(24 * 2)
      const cv = await compressedSensing(model, induction, {
        masks: 24,
        fraction: 0.25,
        seed: 2,
        crossValidate: { folds: 3 },
      })
      expect(cv.crossValidation?.alphas.length).toBe(100)
      expect(cv.fit.alpha).toBe(
        cv.crossValidation?.alphas[cv.crossValidation.meanMse.indexOf(Math.min(...cv.crossValidation.meanMse))],
      )
      const custom = await compressedSensing(model, induction, {
        customMasks: randomMasks(model.config, { count: 5, seed: 9 }),
      })
      expect(custom.evaluations).toBe(5)
      const heatmap = headHeatmap(found)
      expect(heatmap.values).toHaveLength(2)
      expect(heatmap.values[1]![2]).toBe(found.scores[6])
      expect(heatmap.label).toMatch(/Lasso coefficient/)
      expect(heatmap.highlighted).toEqual(found.top.map(({ layer, head }) => ({ layer, head })))
      const spec = heatmapSpec(heatmap, 'title') as { title: string; data: { values: { top: boolean }[] } }
      expect(spec.title).toBe('title')
      expect(spec.data.values.filter((v) => v.top)).toHaveLength(found.top.length)
    },
  )

  it('greedy records its rounds and marginal drops', async () => {
    const greedy = await greedySearch(model, text, { top: 3 })
    expect(greedy.rounds).toHaveLength(3)
    expect(greedy.evaluations).toBe(1 + 8 + 7 + 6)
    expect(greedy.ranking).toHaveLength(8)
    expect(greedy.top.map((h) => h.index)).toEqual(greedy.rounds.map((r) => r.head.index))
    expect(headHeatmap(greedy).label).toMatch(/performance drop/)
  })

  it('rejects a bad top-k', async () => {
    await expect(exhaustiveSweep(model, induction, { top: 0 })).rejects.toThrow(/top/)
    await expect(compressedSensing(model, induction, { top: 1.5 })).rejects.toThrow(ConfigError)
    await expect(compressedSensing(model, induction, { fraction: 2 })).rejects.toThrow(/fraction/)
  })
})

describeWithBackends('compressed sensing on a model whose heads do nothing', () => {
  it('constant scores give zero coefficients and no heads, not noise', async () => {
    // W_V = 0: every head outputs 0
    const model = createTransformer(presetConfig('minimal', { dVocab: 5, nCtx: 8, nHeads: 3 }))
    const probe = inductionCapability({ vocabSize: 5, blockLength: 4, count: 4 })
    const found = await compressedSensing(model, probe, { masks: 10, fraction: 0.34, seed: 0 })
    expect(found.constantScores).toBe(true)
    expect(found.scoreSd).toBe(0)
    expect([...found.scores]).toEqual([0, 0, 0])
    expect(found.top).toEqual([])
    model.dispose()
  })
})
