import * as tf from '@tensorflow/tfjs-core'
import { InvalidArgumentError } from '@attnlab/core'
import { describeWithBackends, expectArraysClose, expectNoLeaks } from '@attnlab/core/testing'
import { expect, it } from 'vitest'
import { createConfig, type TransformerConfig } from './config.ts'
import { createTransformer } from './model.ts'
import { randomTokens, randomizeWeights } from './test-utils.test-utils.ts'
import { planWeightTransfer, transferWeights } from './transfer.ts'

const gpt = (dVocab: number, seed: number): TransformerConfig =>
  createConfig({ architecture: 'gpt', dVocab, nCtx: 8, dModel: 8, nLayers: 2, nHeads: 2, dHead: 4, dMlp: 16, seed })

describeWithBackends('transferWeights', () => {
  it('a model of the same configuration becomes the source: the same logits', async () => {
    const source = createTransformer(gpt(7, 1))
    randomizeWeights(source, 3)
    const target = createTransformer(gpt(7, 2))
    const tokens = randomTokens(2, 8, 7)
    const before = target.forward(tokens)
    const expected = source.forward(tokens)
    const transfer = await expectNoLeaks(async () => transferWeights(target, await source.getWeightData()))
    expect(transfer.copied).toEqual([...target.getWeights().keys()])
    expect(transfer.reinitialized).toEqual([])
    expect(transfer.unused).toEqual([])
    const after = target.forward(tokens)
    expectArraysClose(after, expected)
    // The check can fail: the fresh target's logits were not the source's.
    expect(Math.max(...(tf.abs(tf.sub(before, expected)).dataSync() as Float32Array))).toBeGreaterThan(1e-3)
    tf.dispose([before, expected, after])
    source.dispose()
    target.dispose()
  })

  it('another vocabulary: the blocks are the source, the embedding keeps its fresh initialisation', async () => {
    const source = createTransformer(gpt(7, 1))
    randomizeWeights(source, 3)
    const target = createTransformer(gpt(5, 2))
    const twin = createTransformer(gpt(5, 2))
    const fresh = await twin.getWeightData()
    twin.dispose()
    const transfer = transferWeights(target, await source.getWeightData())
    // This gpt ties the unembedding to W_E: the one vocabulary-sized parameter.
    expect(transfer.reinitialized.map((r) => r.name)).toEqual(['embed.W_E'])
    expect(transfer.reinitialized.find((r) => r.name === 'embed.W_E')?.reason).toBe(
      "the source's shape [7, 8] is not [5, 8]",
    )
    const got = await target.getWeightData()
    const from = await source.getWeightData()
    for (const name of transfer.copied) {
      expect(name.startsWith('blocks.') || name.startsWith('ln_final') || name === 'pos_embed.W_pos', name).toBe(true)
      expect(got.get(name)!.data, name).toEqual(from.get(name)!.data)
    }
    for (const { name } of transfer.reinitialized) expect(got.get(name)!.data, name).toEqual(fresh.get(name)!.data)
    expect(transfer.copied.length).toBe(got.size - 1)
    // The plan without a model is the same.
    expect(planWeightTransfer(gpt(5, 9), from)).toEqual(transfer)
    source.dispose()
    target.dispose()
  })

  it('refuses a source with nothing in common, or values that do not fill their shape', () => {
    const target = createTransformer(gpt(5, 0))
    const weights = new Map([['something.else', { shape: [2], data: new Float32Array(2) }]])
    expect(() => transferWeights(target, weights)).toThrow(InvalidArgumentError)
    expect(() => transferWeights(target, weights)).toThrow(/no parameter of the source fits/)
    const bad = new Map([['embed.W_E', { shape: [5, 8], data: new Float32Array(3) }]])
    expect(() => transferWeights(target, bad)).toThrow(/has 3 values for shape \[5, 8\]/)
    target.dispose()
  })
})
