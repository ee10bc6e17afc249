import * as tf from '@tensorflow/tfjs-core'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { ConfigError, InvalidArgumentError } from '@attnlab/core'
import { describeWithBackends, expectArraysClose } from '@attnlab/core/testing'
import { LinearMapTask } from '@attnlab/markov'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { loadCheckpointModel, saveCheckpoint } from './checkpoint.ts'
import { createConfig, presetConfig, type TransformerConfigInput } from './config.ts'
import { hookName, type HookName } from './hooks.ts'
import { KVCache } from './kv-cache.ts'
import { createTransformer, parameterShapes } from './model.ts'
import { checkGradients, probeLoss, randomTokens, randomizeWeights } from './test-utils.test-utils.ts'
import { train } from './train.ts'

const tiny: TransformerConfigInput = {
  architecture: 'mixer',
  dVocab: 5,
  nCtx: 6,
  dModel: 6,
  nLayers: 2,
  nHeads: 2,
  dTokenMlp: 2,
  dMlp: 8,
  tiedEmbeddings: false,
}

describe('mixer configuration', () => {
  it('is a named preset with its own architecture, width nHeads x dHead', () => {
    const config = presetConfig('mixer')
    expect(config.architecture).toBe('mixer')
    expect(config.nHeads * config.dHead).toBe(config.dModel)
    expect(config.dTokenMlp).toBeGreaterThan(0)
    // Fixed total width: dHead follows dModel / nHeads; free width: dModel follows nHeads * dHead.
    expect(presetConfig('mixer', { dModel: 32, nHeads: 8 }).dHead).toBe(4)
    const free = presetConfig('mixer', { nHeads: 3, dHead: 5 })
    expect([free.dModel, free.dMlp]).toEqual([15, 60])
  })

  it('refuses what the mixer cannot be, naming the field', () => {
    expect(() => createConfig({ architecture: 'mixer', dModel: 16, nHeads: 2, dHead: 4 })).toThrow(
      /nHeads \* dHead must equal dModel/,
    )
    expect(() => createConfig({ architecture: 'mixer', positional: 'rotary' })).toThrow(ConfigError)
    expect(() => createConfig({ architecture: 'mixer', dTokenMlp: 0 })).toThrow(/dTokenMlp >= 1/)
    expect(() => createConfig({ architecture: 'gpt', dTokenMlp: 2 })).toThrow(/only the mixer has a token-mixing/)
  })

  it('has token-mixing parameters and no attention parameters', () => {
    const shapes = new Map(parameterShapes(createConfig(tiny)))
    expect(shapes.get('blocks.0.token_mix.W_in')).toEqual([2, 12, 6])
    expect(shapes.get('blocks.0.token_mix.W_out')).toEqual([2, 6, 12])
    expect(shapes.get('blocks.1.mlp.W_in')).toEqual([6, 8])
    expect([...shapes.keys()].some((name) => name.includes('.attn.'))).toBe(false)
  })
})

describeWithBackends('mixer', () => {
  it('forward: [batch, pos, dVocab] logits, for every prefix length up to nCtx', () => {
    const model = createTransformer(createConfig(tiny))
    for (const pos of [1, 3, 6]) {
      const logits = model.forward(randomTokens(3, pos, 5, pos))
      expect(logits.shape).toEqual([3, pos, 5])
      logits.dispose()
    }
    model.dispose()
  })

  it('is causal: changing a later token leaves every earlier position unchanged', async () => {
    const model = createTransformer(createConfig(tiny))
    randomizeWeights(model, 2, 0.5) // the masked weights become non-zero too: the mask itself is tested
    const tokens = randomTokens(1, 6, 5, 3)
    const changed = tokens.map((row) => [...row])
    changed[0]![4] = ((changed[0]![4] as number) + 1) % 5
    const a = model.forward(tokens)
    const b = model.forward(changed)
    const [before, after] = [await a.data(), await b.data()]
    expectArraysClose(before.slice(0, 4 * 5), after.slice(0, 4 * 5), 1e-6, 1e-6)
    // ...and the changed position's own output does change.
    const diff = Math.max(...Array.from(before.slice(4 * 5), (x, i) => Math.abs(x - (after[4 * 5 + i] as number))))
    expect(diff).toBeGreaterThan(1e-3)
    tf.dispose([a, b])
    model.dispose()
  })

  it('a prefix gives the same logits as the whole sequence at its positions', async () => {
    const model = createTransformer(createConfig(tiny))
    randomizeWeights(model, 4, 0.5)
    const tokens = randomTokens(2, 6, 5, 9)
    const whole = model.forward(tokens)
    const prefix = model.forward(tokens.map((row) => row.slice(0, 3)))
    const head = tf.slice(whole, [0, 0, 0], [2, 3, 5])
    expectArraysClose(await prefix.data(), await head.data(), 1e-5, 1e-5)
    tf.dispose([whole, prefix, head])
    model.dispose()
  })

  it("every parameter's gradient matches a central difference", async () => {
    const model = createTransformer(createConfig({ ...tiny, bias: true }))
    randomizeWeights(model, 3, 0.3)
    await checkGradients(model, probeLoss(model, randomTokens(2, 6, 5, 5)))
    model.dispose()
  })
})

describe('mixer on cpu', () => {
  let root: string
  beforeAll(async () => {
    const { useBackend } = await import('@attnlab/core')
    await useBackend('cpu')
    root = await mkdtemp(join(tmpdir(), 'attnlab-mixer-test-'))
  })
  afterAll(async () => {
    await rm(root, { recursive: true, force: true })
  })

  it('runWithCache: residual-stream, token-mixing and mlp hooks; no attention hooks', () => {
    const model = createTransformer(createConfig(tiny))
    const { logits, cache } = model.runWithCache(randomTokens(2, 4, 5, 1))
    const names = cache.names()
    for (const name of [
      hookName.embed,
      hookName.posEmbed,
      hookName.residPre(0),
      hookName.ln1(0),
      hookName.attnOut(0),
      hookName.residMid(0),
      hookName.mlpPre(1),
      hookName.mlpPost(1),
      hookName.mlpOut(1),
      hookName.residPost(1),
      hookName.lnFinal,
    ] as HookName[])
      expect(names, name).toContain(name)
    expect(names.some((name) => name.includes('.attn.'))).toBe(false)
    expect(cache.get(hookName.attnOut(0)).shape).toEqual([2, 4, 6])
    expect(cache.get(hookName.mlpPre(0)).shape).toEqual([2, 4, 8])
    tf.dispose([logits])
    cache.dispose()
    model.dispose()
  })

  it("a head mask of 0 removes one channel group's token mixing, and only that group's", async () => {
    const model = createTransformer(createConfig(tiny))
    randomizeWeights(model, 6, 0.5)
    const tokens = randomTokens(1, 5, 5, 2)
    const outOf = async (mask?: number[][]): Promise<Float32Array> => {
      const headMask = mask === undefined ? undefined : tf.tensor2d(mask)
      const { logits, cache } = model.runWithCache(tokens, {
        namesFilter: hookName.attnOut(0),
        ...(headMask === undefined ? {} : { headMask }),
      })
      const data = (await cache.get(hookName.attnOut(0)).data()) as Float32Array
      tf.dispose([logits, headMask])
      cache.dispose()
      return data
    }
    const full = await outOf()
    const masked = await outOf([
      [1, 0],
      [1, 1],
    ])
    for (let i = 0; i < full.length; i++) {
      const channel = i % 6
      // group 0 = channels 0..2 (kept), group 1 = channels 3..5 (zeroed)
      if (channel < 3) expect(masked[i]).toBeCloseTo(full[i] as number, 5)
      else expect(Math.abs(masked[i] as number)).toBe(0)
    }
    model.dispose()
  })

  it('trains on the linear map: the loss falls within a few steps', async () => {
    const task = new LinearMapTask({ stateSize: 4, onesPerRow: 1 })
    const model = createTransformer(
      presetConfig('mixer', { dVocab: task.vocabSize, nCtx: task.seqLength - 1, nLayers: 1, dModel: 32, nHeads: 4 }),
    )
    const result = await train(model, task, { steps: 30, batchSize: 32, lr: 0.03, seed: 1, evalEvery: 30 })
    const first = result.losses.slice(0, 3).reduce((a, b) => a + b, 0) / 3
    expect(result.finalTrainLoss).not.toBeNull()
    expect(result.finalTrainLoss as number).toBeLessThan(first - 0.1)
    model.dispose()
  })

  it('trains without leaking tensors, deterministically for a seed', async () => {
    const task = new LinearMapTask({ stateSize: 3, onesPerRow: 1 })
    const config = presetConfig('mixer', { dVocab: task.vocabSize, nCtx: task.seqLength - 1, nLayers: 1 })
    const run = async (): Promise<readonly number[]> => {
      const model = createTransformer(config)
      const result = await train(model, task, { steps: 3, batchSize: 8, lr: 0.01, seed: 4, evalEvery: 3 })
      model.dispose()
      return result.losses
    }
    await run()
    const before = tf.memory().numTensors
    const losses = await run()
    expect(tf.memory().numTensors).toBe(before)
    expect(await run()).toEqual(losses)
  })

  it('checkpoint round trip: same configuration, same logits', async () => {
    const model = createTransformer(createConfig({ ...tiny, bias: true, seed: 3 }))
    randomizeWeights(model, 8, 0.4)
    const dir = join(root, 'mixer')
    await saveCheckpoint(dir, model)
    const loaded = await loadCheckpointModel(dir)
    expect(loaded.config).toEqual(model.config)
    const tokens = randomTokens(2, 6, 5, 11)
    const [a, b] = [model.forward(tokens), loaded.forward(tokens)]
    expectArraysClose(await b.data(), await a.data(), 0, 0)
    tf.dispose([a, b])
    model.dispose()
    loaded.dispose()
  })

  it('forwardCached throws: the mixer has no KV cache', () => {
    const model = createTransformer(createConfig(tiny))
    const cache = new KVCache(model.config.nLayers)
    const before = tf.memory().numTensors
    expect(() => model.forwardCached([[1, 2]], cache)).toThrow(InvalidArgumentError)
    expect(tf.memory().numTensors).toBe(before)
    cache.dispose()
    model.dispose()
  })
})
