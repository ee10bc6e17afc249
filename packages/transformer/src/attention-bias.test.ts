import * as tf from '@tensorflow/tfjs-core'
import { ConfigError, InvalidCheckpointError, Rng, ShapeError, type TrueAttention } from '@attnlab/core'
import { describeWithBackends, expectArraysClose, expectNoLeaks } from '@attnlab/core/testing'
import { IclMarkovTask, LinearMapTask, SparseMarkovTask } from '@attnlab/markov'
import { describe, expect, it } from 'vitest'
import { attentionBias } from './attention-bias.ts'
import { createConfig, presetConfig } from './config.ts'
import { hookName, type HookName } from './hooks.ts'
import { createTransformer, type Transformer } from './model.ts'
import { Trainer, train, type TrainerState } from './train.ts'
import { randomTokens, randomizeWeights } from './test-utils.test-utils.ts'

// Linear map S = 4, s = 2, two states: 8 tokens, 7 model inputs.
const task = new LinearMapTask({ stateSize: 4, onesPerRow: 2 })
const gptConfig = createConfig({
  architecture: 'gpt',
  dVocab: 2,
  nCtx: 7,
  dModel: 8,
  nLayers: 2,
  nHeads: 2,
  dHead: 4,
  dMlp: 16,
})
const minimalConfig = createConfig({ architecture: 'minimal', dVocab: 2, nCtx: 7, nHeads: 3, queryInit: 0.5 })

/** Every layer's hook_attn_scores of a pass, `[layer][batch * nHeads * pos * pos]`. */
function scoresOf(
  model: Transformer,
  tokens: number[][],
  hooks: ReturnType<typeof attentionBias>['hooks'],
): number[][] {
  const names: HookName[] = Array.from({ length: model.config.nLayers }, (_, l) => hookName.attnScores(l))
  const { logits, cache } = model.runWithCache(tokens, { namesFilter: names, fwdHooks: hooks })
  const out = names.map((name) => Array.from(cache.get(name).dataSync()))
  logits.dispose()
  cache.dispose()
  return out
}

/** The expected change of one layer's scores: beta * G on the targeted heads, `[batch * nHeads * pos * pos]`. */
function expectedChange(
  attention: TrueAttention,
  beta: number,
  batch: number,
  nHeads: number,
  pos: number,
  headMaps: ReadonlyMap<number, number>,
): number[] {
  const out: number[] = []
  const { size } = attention
  for (let b = 0; b < batch; b++)
    for (let h = 0; h < nHeads; h++)
      for (let q = 0; q < pos; q++)
        for (let k = 0; k < pos; k++) {
          const map = headMaps.get(h)
          out.push(map === undefined ? 0 : beta * (attention.maps[map]!.weights[q * size + k] as number))
        }
  return out
}

/** Finite differences where both are finite; both -Infinity (masked) elsewhere. */
function difference(biased: number[], plain: number[]): number[] {
  return biased.map((value, i) => {
    const base = plain[i] as number
    if (!Number.isFinite(base)) {
      expect(value).toBe(base)
      return 0
    }
    return value - base
  })
}

describeWithBackends('attention bias', () => {
  it('adds exactly beta * G to hook_attn_scores of the targeted heads and layers, nothing elsewhere', async () => {
    const model = createTransformer(gptConfig)
    randomizeWeights(model)
    const tokens = randomTokens(3, 7, 2, 4)
    const attention = task.trueAttention()
    const beta = 2.5
    const bias = attentionBias({ beta, layers: [1], heads: [0] }, model.config, attention)
    expect(bias.maps).toEqual(['rows of M'])
    const plain = scoresOf(model, tokens, [])
    const biased = await expectNoLeaks(() => scoresOf(model, tokens, bias.hooks))
    // Layer 0 is not targeted (and layer 1's raw scores depend on layer 0 only): unchanged.
    expectArraysClose(difference(biased[0]!, plain[0]!), 0, 1e-6)
    const change = difference(biased[1]!, plain[1]!)
    expectArraysClose(change, expectedChange(attention, beta, 3, 2, 7, new Map([[0, 0]])), 1e-5)
    // The change is not trivially zero: each determined cell has s = 2 true keys.
    expect(change.filter((x) => Math.abs(x - beta) < 1e-4).length).toBe(3 * 4 * 2)
    model.dispose()
  })

  it('on the minimal model (its structured path) every head by default; spans go to heads in importance order', () => {
    const chain = new SparseMarkovTask({ vocabSize: 4, spans: [1, 2], genLen: 4 })
    const config = createConfig({ architecture: 'minimal', dVocab: 4, nCtx: 6, nHeads: 3, queryInit: 0.5 })
    const model = createTransformer(config)
    const tokens = randomTokens(2, 6, 4, 1)
    const attention = chain.trueAttention()
    const bias = attentionBias({ beta: 1.5 }, config, attention)
    // Head 0: the newest span (most important), head 1: the oldest, head 2: the newest again.
    expect(bias.maps).toEqual([attention.maps[0]!.name, attention.maps[1]!.name, attention.maps[0]!.name])
    const change = difference(scoresOf(model, tokens, bias.hooks)[0]!, scoresOf(model, tokens, [])[0]!)
    expectArraysClose(
      change,
      expectedChange(
        attention,
        1.5,
        2,
        3,
        6,
        new Map([
          [0, 0],
          [1, 1],
          [2, 0],
        ]),
      ),
      1e-5,
    )
    model.dispose()
  })

  it('throws a ShapeError in a pass longer than the maps', () => {
    const model = createTransformer(createConfig({ ...gptConfig, nCtx: 12 }))
    const bias = attentionBias({ beta: 1 }, model.config, task.trueAttention())
    expect(() => model.forward(randomTokens(1, 10, 2), { fwdHooks: bias.hooks })).toThrow(ShapeError)
    model.dispose()
  })

  it('lets gradients flow: they stay finite and change with the bias', () => {
    const model = createTransformer(minimalConfig)
    randomizeWeights(model) // the minimal model starts with zero values: zero gradients
    const tokens = tf.tensor2d(randomTokens(4, 7, 2, 2), [4, 7], 'int32')
    const bias = attentionBias({ beta: 3, heads: [1] }, model.config, task.trueAttention())
    const variables = [...model.getWeights().values()]
    const gradients = (hooks: typeof bias.hooks): Float32Array[] => {
      const { value, grads } = tf.variableGrads(
        () => tf.sum(tf.square(model.forward(tokens, { fwdHooks: hooks }))) as tf.Scalar,
        variables,
      )
      const out = Object.values(grads).map((g) => g.dataSync() as Float32Array)
      tf.dispose([value, ...Object.values(grads)])
      return out
    }
    const plain = gradients([])
    const biased = gradients(bias.hooks)
    expect(biased.every((g) => g.every(Number.isFinite))).toBe(true)
    expect(plain.some((g) => g.some((x) => Math.abs(x) > 1e-3))).toBe(true)
    expect(biased.some((g, i) => g.some((x, j) => Math.abs(x - (plain[i]![j] as number)) > 1e-4))).toBe(true)
    tokens.dispose()
    model.dispose()
  })
})

describe('attention bias options', () => {
  const attention = task.trueAttention()
  it('refuses NaN, negative and huge beta, layers and heads outside the model or twice, bad maps', () => {
    const refuse = (options: Parameters<typeof attentionBias>[0], pattern: RegExp, what = attention): void => {
      let error: unknown
      try {
        attentionBias(options, gptConfig, what)
      } catch (e) {
        error = e
      }
      expect(error).toBeInstanceOf(ConfigError)
      expect((error as Error).message).toMatch(pattern)
    }
    refuse({ beta: Number.NaN }, /beta/)
    refuse({ beta: -1 }, /beta.*-1/)
    refuse({ beta: 1e6 }, /beta.*100/)
    refuse({ beta: 1, layers: [2] }, /2 is not a block of this model; expected 0 \.\. 1/)
    refuse({ beta: 1, heads: [1, 1] }, /head 1 twice/)
    refuse({ beta: 1, heads: [] }, /heads/)
    refuse({ beta: 1, size: 3 } as never, /size/)
    refuse({ beta: 1 }, /no ground-truth/, { size: 8, maps: [] })
    refuse({ beta: 1 }, /8 x 8/, { size: 8, maps: [{ name: 'x', weights: new Float32Array(10) }] })
    expect(() => attentionBias({ beta: 1 }, presetConfig('mixer', { nCtx: 7 }), attention)).toThrow(
      /mixer model has no attention scores/,
    )
  })
})

describe('a trainer with an attention bias', () => {
  const options = { steps: 6, batchSize: 16, lr: 0.01, evalEvery: 3, validation: 32, analysis: { size: 16 } } as const
  it('trains differently, records the bias in its state and resumes only with the same bias, exactly', async () => {
    const run = async (steps: number, bias: { beta: number } | undefined, resume?: TrainerState) => {
      const model = createTransformer(gptConfig)
      let state: TrainerState | undefined
      const result = await train(model, task, {
        ...options,
        steps,
        ...(bias === undefined ? {} : { attentionBias: bias }),
        ...(resume === undefined ? {} : { resume }),
        onCheckpoint: (s) => {
          state = s
        },
        checkpointEvery: 3,
      })
      const weights = await model.getWeightData()
      model.dispose()
      return { result, state: state as TrainerState, weights }
    }
    const plain = await run(6, undefined)
    const biased = await run(6, { beta: 4 })
    expect(biased.result.losses).not.toEqual(plain.result.losses)
    expect(biased.state.settings.attentionBias).toEqual({ beta: 4, layers: [0, 1], heads: [0, 1] })
    expect(plain.state.settings.attentionBias).toBeUndefined()
    // 3 + 3 steps with the same bias equal 6: the bias is applied after the resume.
    const half = await run(3, { beta: 4 })
    const model = createTransformer(gptConfig)
    model.setWeights(half.weights)
    const resumed = await train(model, task, { ...options, attentionBias: { beta: 4 }, resume: half.state })
    if (tf.getBackend() === 'cpu') {
      expect(resumed.losses).toEqual(biased.result.losses.slice(3))
      const weights = await model.getWeightData()
      for (const [name, w] of biased.weights) expect(weights.get(name)!.data, name).toEqual(w.data)
    }
    for (const bias of [undefined, { beta: 3 }]) {
      expect(
        () =>
          new Trainer(model, task, {
            ...options,
            ...(bias === undefined ? {} : { attentionBias: bias }),
            resume: half.state,
          }),
      ).toThrow(InvalidCheckpointError)
    }
    expect(() => new Trainer(model, task, { ...options, resume: half.state })).toThrow(/attention bias/)
    model.dispose()
  })

  it('refuses a task without ground-truth attention and a finite dataset without a built bias', () => {
    const icl = new IclMarkovTask({ vocabSize: 2, seqLength: 8 })
    const model = createTransformer(gptConfig)
    expect(() => new Trainer(model, icl, { ...options, attentionBias: { beta: 1 } })).toThrow(
      /'icl-markov' has no ground-truth attention map/,
    )
    const dataset = task.sample(32, Rng.fromSeed(0))
    expect(() => new Trainer(model, dataset, { ...options, validation: dataset, attentionBias: { beta: 1 } })).toThrow(
      /a finite dataset has no ground-truth/,
    )
    const built = attentionBias({ beta: 1 }, model.config, task.trueAttention())
    new Trainer(model, dataset, { ...options, validation: dataset, attentionBias: built }).dispose()
    model.dispose()
  })
})
