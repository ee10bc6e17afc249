import * as tf from '@tensorflow/tfjs-core'
import { ConfigError, Rng, ShapeError } from '@attnlab/core'
import { describeWithBackends, expectNoLeaks } from '@attnlab/core/testing'
import { describe, expect, it } from 'vitest'
import { createConfig, presetConfig } from './config.ts'
import { generate, sampleToken } from './generate.ts'
import { createTransformer } from './model.ts'
import { randomizeWeights } from './test-utils.test-utils.ts'

describe('sampleToken', () => {
  const logits = [0.1, 2.0, 1.9, -1, 2.0]
  it('greedy picks the argmax (ties to the lowest id)', () => {
    expect(sampleToken(logits, { temperature: 0 }, Rng.fromSeed(0))).toBe(1)
  })
  it('top-k = 1 and a tiny top-p are greedy', () => {
    const rng = Rng.fromSeed(1)
    for (let i = 0; i < 20; i++) {
      expect(sampleToken(logits, { temperature: 1, topK: 1 }, rng)).toBe(1)
      expect(sampleToken(logits, { temperature: 1, topP: 1e-6 }, rng)).toBe(1)
    }
  })
  it('samples in proportion to softmax(logits / T), restricted to top-k / top-p', () => {
    const rng = Rng.fromSeed(2)
    const counts = new Array(5).fill(0)
    const n = 20000
    for (let i = 0; i < n; i++) counts[sampleToken(logits, { temperature: 0.5 }, rng)] += 1
    const weights = logits.map((l) => Math.exp(l / 0.5))
    const total = weights.reduce((a, b) => a + b)
    counts.forEach((c, i) => {
      expect(Math.abs(c / n - weights[i]! / total)).toBeLessThan(0.015)
    })
    const topK = new Set<number>()
    for (let i = 0; i < 2000; i++) topK.add(sampleToken(logits, { topK: 3 }, rng))
    expect([...topK].sort()).toEqual([1, 2, 4])
    // top-p 0.6 of softmax(logits) keeps {1, 4} (0.35 + 0.35 >= 0.6), never 2.
    const topP = new Set<number>()
    for (let i = 0; i < 2000; i++) topP.add(sampleToken(logits, { topP: 0.6 }, rng))
    expect([...topP].sort()).toEqual([1, 4])
  })
})

describeWithBackends('generate', () => {
  const config = createConfig({
    architecture: 'llama',
    dVocab: 13,
    nCtx: 12,
    dModel: 8,
    nLayers: 2,
    nHeads: 2,
    dHead: 4,
    dMlp: 12,
  })

  it('greedy generation equals the argmax of the full forward pass at every step', async () => {
    for (const c of [
      config,
      presetConfig('gpt-nano'),
      createConfig({ architecture: 'minimal', dVocab: 6, nCtx: 10, queryInit: 0.5 }),
    ]) {
      const model = createTransformer(c)
      randomizeWeights(model, 8, 0.5)
      const prompt = [1, 2, 3]
      const { tokens, stopReasons } = await generate(model, prompt, { maxTokens: 5, temperature: 0 })
      expect(stopReasons).toEqual(['max-tokens'])
      const sequence = [...prompt, ...tokens[0]!]
      const logits = model.forward([sequence])
      const argmax = (await tf.argMax(logits, -1).array()) as number[][]
      logits.dispose()
      expect(tokens[0]).toEqual(argmax[0]!.slice(prompt.length - 1, prompt.length - 1 + 5))
      model.dispose()
    }
  })

  it('is seeded, batched, and leaks nothing', async () => {
    const model = createTransformer(config)
    randomizeWeights(model, 9, 0.5)
    await expectNoLeaks(async () => {
      const a = await generate(
        model,
        [
          [1, 2],
          [3, 4],
        ],
        { maxTokens: 6, temperature: 1, seed: 5 },
      )
      const b = await generate(
        model,
        [
          [1, 2],
          [3, 4],
        ],
        { maxTokens: 6, temperature: 1, seed: 5 },
      )
      const c = await generate(
        model,
        [
          [1, 2],
          [3, 4],
        ],
        { maxTokens: 6, temperature: 1, seed: 6 },
      )
      expect(a.tokens).toEqual(b.tokens)
      expect(a.tokens).not.toEqual(c.tokens)
      expect(a.tokens.length).toBe(2)
    })
    model.dispose()
  })

  it('stops at EOS (included), at maxTokens, and when the context is full', async () => {
    const model = createTransformer(config)
    randomizeWeights(model, 10, 0.5)
    const free = await generate(model, [5], { maxTokens: 6, temperature: 0 })
    const eos = free.tokens[0]![2]!
    const stopped = await generate(model, [5], { maxTokens: 6, temperature: 0, eosToken: [eos] })
    expect(stopped.stopReasons).toEqual(['eos'])
    expect(stopped.tokens[0]![stopped.tokens[0]!.length - 1]).toBe(eos)
    expect(stopped.tokens[0]!.length).toBeLessThanOrEqual(3)
    const context = await generate(model, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], { maxTokens: 50, temperature: 0 })
    expect(context.stopReasons).toEqual(['context'])
    expect(context.tokens[0]!.length).toBe(3) // positions 10, 11 fit in nCtx 12, plus the last prediction
    const none = await generate(model, [1], { maxTokens: 0 })
    expect(none.tokens).toEqual([[]])
    const seen: number[][] = []
    await generate(model, [1], { maxTokens: 2, temperature: 0, onToken: (t) => seen.push([...t]) })
    expect(seen.length).toBe(2)
    model.dispose()
  })

  it('rejects bad options and prompts', async () => {
    const model = createTransformer(config)
    await expect(generate(model, [], { maxTokens: 1 })).rejects.toThrow(ShapeError)
    await expect(generate(model, [[1], [1, 2]], { maxTokens: 1 })).rejects.toThrow(/equal lengths/)
    await expect(generate(model, new Array(13).fill(1), { maxTokens: 1 })).rejects.toThrow(/nCtx is 12/)
    await expect(generate(model, [1], { maxTokens: -1 })).rejects.toThrow(ConfigError)
    await expect(generate(model, [1], { maxTokens: -1 })).rejects.toThrow(
      /^Invalid maxTokens: must be an integer >= 0, got -1$/,
    )
    await expect(generate(model, [1], {} as never)).rejects.toThrow(
      /^Invalid maxTokens: must be an integer >= 0, got undefined$/,
    )
    await expect(generate(model, [1], { maxTokens: 1, temperature: -1 })).rejects.toThrow(
      /^Invalid temperature: must be >= 0, got -1$/,
    )
    await expect(generate(model, [1], { maxTokens: 1, topK: 0 })).rejects.toThrow(
      /^Invalid topK: must be an integer >= 1, got 0$/,
    )
    await expect(generate(model, [1], { maxTokens: 1, topP: 1.5 })).rejects.toThrow(
      /^Invalid topP: must be in \(0, 1\], got 1.5$/,
    )
    await expect(generate(model, [1], { maxTokens: 1, seed: 0.5 })).rejects.toThrow(
      /^Invalid seed: must be an integer, got 0.5$/,
    )
    await expect(generate(model, [1], { maxTokens: 1, eosToken: 99 })).rejects.toThrow(/eosToken/)
    await expect(generate(model, [99], { maxTokens: 1 })).rejects.toThrow(/outside the vocabulary/)
    await expect(generate(model, [1], { maxTokens: 1, temprature: 0 } as never)).rejects.toThrow(
      new RegExp(
        /Invalid temprature: is not a generate parameter \(did you mean 'temperature'\?\); expected one of /.source +
          /maxTokens, temperature, topK, topP, seed, eosToken, attention, onToken/.source,
      ),
    )
    expect(() => sampleToken([0, 1], { temperature: -1 }, Rng.fromSeed(0))).toThrow(
      /^Invalid temperature: must be >= 0, got -1$/,
    )
    model.dispose()
  })
})
