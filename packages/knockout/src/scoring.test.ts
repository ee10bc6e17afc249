import * as tf from '@tensorflow/tfjs-core'
import { AttnlabError, ConfigError } from '@attnlab/core'
import { describeWithBackends, expectArraysClose, expectNoLeaks } from '@attnlab/core/testing'
import { createConfig, createTransformer, type HookName, type Transformer } from '@attnlab/transformer'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { manualMetric, randomizeWeights } from '../test/helpers.ts'
import { HeadAblation } from './ablation.ts'
import { inductionCapability, textCapability, type Capability } from './capability.ts'
import { masksFromHeadSets, randomMasks } from './masks.ts'
import { scoreMasks } from './scoring.ts'
import { compressedSensing, exhaustiveSweep, greedySearch } from './localize.ts'
import { knockoutEffects } from './report.ts'
import { lasso, lassoCV } from './lasso.ts'

const gptConfig = createConfig({
  architecture: 'gpt',
  dVocab: 11,
  nCtx: 12,
  dModel: 16,
  nLayers: 2,
  nHeads: 4,
  dHead: 4,
  dMlp: 24,
})
const llamaConfig = createConfig({
  architecture: 'llama',
  dVocab: 11,
  nCtx: 12,
  dModel: 16,
  nLayers: 2,
  nHeads: 4,
  nKvHeads: 2,
  dHead: 4,
  dMlp: 24,
})

function knockedSet(masks: { data: Uint8Array; heads: number }, j: number, nHeads: number): Set<string> {
  const out = new Set<string>()
  for (let i = 0; i < masks.heads; i++)
    if (masks.data[j * masks.heads + i] === 1) out.add(`${Math.floor(i / nHeads)}.${i % nHeads}`)
  return out
}

/** Mean of hook_z over sequences and positions, per layer: [1, 1, nHeads, dHead] (computed in JS). */
async function manualMeans(model: Transformer, capability: Capability): Promise<tf.Tensor[]> {
  const { count, length, inputs } = capability.data
  const { nLayers, nHeads, dHead } = model.config
  const names = Array.from({ length: nLayers }, (_, l) => `blocks.${l}.attn.hook_z` as HookName)
  const tokens = tf.tensor2d(inputs, [count, length], 'int32')
  const { logits, cache } = model.runWithCache(tokens, { namesFilter: names })
  const means: tf.Tensor[] = []
  for (const name of names) {
    const z = (await cache.get(name).data()) as Float32Array
    const mean = new Float64Array(nHeads * dHead)
    for (let r = 0; r < count * length; r++)
      for (let k = 0; k < nHeads * dHead; k++) mean[k] = (mean[k] as number) + (z[r * nHeads * dHead + k] as number)
    means.push(
      tf.tensor4d(
        Float32Array.from(mean, (v) => v / (count * length)),
        [1, 1, nHeads, dHead],
      ),
    )
  }
  tf.dispose([tokens, logits])
  cache.dispose()
  return means
}

describeWithBackends('scoreMasks', () => {
  let gpt: Transformer
  let llama: Transformer
  let capability: Capability
  beforeAll(() => {
    gpt = createTransformer(gptConfig)
    randomizeWeights(gpt, 1)
    llama = createTransformer(llamaConfig)
    randomizeWeights(llama, 2)
    capability = inductionCapability({ vocabSize: 11, blockLength: 5, prefix: [0], count: 6, seed: 3, metric: 'loss' })
  })
  afterAll(() => {
    gpt.dispose()
    llama.dispose()
  })

  it('zero ablation: batched scores equal one forward pass per mask with a hook that zeroes hook_z', async () => {
    const masks = randomMasks(gptConfig, { count: 9, fraction: 0.3, seed: 1 })
    // A pass size that splits masks across passes and puts several masks in one pass.
    const batched = await scoreMasks(gpt, capability, masks, { maxTokensPerPass: 4 * capability.data.length })
    expect(batched.evaluations).toBe(9)
    expect(batched.sequences).toBe(54)
    expect(batched.forwardPasses).toBe(Math.ceil(54 / 4))
    const unbatched = await scoreMasks(gpt, capability, masks, { batched: false })
    expect(unbatched.forwardPasses).toBe(9)
    for (let j = 0; j < 9; j++) {
      const expected = await manualMetric(gpt, capability, knockedSet(masks, j, 4), () => null)
      expectArraysClose([batched.values[j] as number], [expected], 2e-4)
      expectArraysClose([unbatched.values[j] as number], [expected], 2e-4)
    }
    // Knockouts change the score (the test would be vacuous otherwise).
    const clean = await scoreMasks(gpt, capability, masksFromHeadSets(gptConfig, [[]]))
    expect(Math.max(...Array.from(batched.values, (v) => Math.abs(v - (clean.values[0] as number))))).toBeGreaterThan(
      1e-2,
    )
  })

  it('accuracy and logprob are computed on the same predictions', async () => {
    const masks = randomMasks(gptConfig, { count: 3, fraction: 0.25, seed: 2 })
    for (const metric of ['accuracy', 'logprob'] as const) {
      const c = { ...capability, metric }
      const scores = await scoreMasks(gpt, c, masks)
      for (let j = 0; j < 3; j++)
        expectArraysClose(
          [scores.values[j] as number],
          [await manualMetric(gpt, c, knockedSet(masks, j, 4), () => null)],
          2e-4,
        )
    }
  })

  it('weighted metrics: the in-context gain is the second copy minus the first copy', async () => {
    const blocks = [
      [1, 2, 3, 4],
      [5, 6, 7, 8],
      [9, 10, 1, 2],
    ]
    const second = inductionCapability({ blocks, prefix: [0] })
    const gain = inductionCapability({ blocks, prefix: [0], contrast: true })
    const first = {
      ...second,
      data: { ...gain.data, scoreWeights: gain.data.scoreWeights!.map((w) => (w < 0 ? -w : 0)) },
    }
    const masks = randomMasks(gptConfig, { count: 3, fraction: 0.25, seed: 8 })
    const [a, b, c] = await Promise.all([
      scoreMasks(gpt, second, masks),
      scoreMasks(gpt, gain, masks),
      scoreMasks(gpt, first, masks),
    ])
    for (let j = 0; j < 3; j++) {
      expectArraysClose([b.values[j] as number], [(a.values[j] as number) - (c.values[j] as number)], 2e-4)
      expectArraysClose(
        [b.values[j] as number],
        [await manualMetric(gpt, gain, knockedSet(masks, j, 4), () => null)],
        2e-4,
      )
    }
  })

  it('mean ablation equals replacing the knocked-out heads by their mean output', async () => {
    const means = await manualMeans(gpt, capability)
    const ablation = await HeadAblation.create(gpt, 'mean', { reference: capability.data })
    const masks = randomMasks(gptConfig, { count: 5, fraction: 0.25, seed: 4 })
    const scores = await scoreMasks(gpt, capability, masks, { ablation, maxTokensPerPass: 3 * capability.data.length })
    for (let j = 0; j < 5; j++) {
      const expected = await manualMetric(gpt, capability, knockedSet(masks, j, 4), (l) => means[l] as tf.Tensor)
      expectArraysClose([scores.values[j] as number], [expected], 2e-4)
    }
    ablation.dispose()
    tf.dispose(means)
  })

  it('resample ablation equals replacing the knocked-out heads by their output on the paired sequence', async () => {
    const { count, length, inputs } = capability.data
    const ablation = await HeadAblation.create(gpt, 'resample', { reference: capability.data, seed: 9 })
    const pairing = ablation.pairing(count, length)
    expect([...pairing].every((p, i) => p !== i)).toBe(true) // a derangement
    expect([...pairing].sort()).toEqual(Array.from({ length: count }, (_, i) => i))
    const names = [0, 1].map((l) => `blocks.${l}.attn.hook_z` as HookName)
    const { logits, cache } = gpt.runWithCache(tf.tensor2d(inputs, [count, length], 'int32'), { namesFilter: names })
    logits.dispose()
    const sources = names.map((name) => tf.gather(cache.get(name), tf.tensor1d(pairing, 'int32')))
    cache.dispose()
    const masks = randomMasks(gptConfig, { count: 4, fraction: 0.3, seed: 5 })
    const scores = await scoreMasks(gpt, capability, masks, { ablation, maxTokensPerPass: 5 * length })
    for (let j = 0; j < 4; j++) {
      const expected = await manualMetric(gpt, capability, knockedSet(masks, j, 4), (l) => sources[l] as tf.Tensor)
      expectArraysClose([scores.values[j] as number], [expected], 2e-4)
    }
    ablation.dispose()
    tf.dispose(sources)
  })

  it(
    'grouped-query attention: knocking out a query head ' + 'leaves the heads sharing its key/value head untouched',
    async () => {
      const tokens = tf.tensor2d(capability.data.inputs, [capability.data.count, capability.data.length], 'int32')
      const name = 'blocks.0.attn.hook_z' as HookName
      const clean = llama.runWithCache(tokens, { namesFilter: [name] })
      const ablation = await HeadAblation.create(llama, 'zero')
      const knocked = new Uint8Array(capability.data.count * 8)
      // layer 0, query head 1 (shares kv head 0 with query head 0)
      for (let r = 0; r < capability.data.count; r++) knocked[r * 8 + 1] = 1
      let seen: tf.Tensor | null = null
      const logits = tf.tidy(() => {
        const out = ablation.forward(llama, tokens, knocked)
        return out
      })
      // hook_z seen inside the ablated pass (headMask applied before the hook).
      const withMask = llama.runWithCache(tokens, {
        namesFilter: [name],
        headMask: tf.tensor2d([
          [1, 0, 1, 1],
          [1, 1, 1, 1],
        ]),
      })
      seen = withMask.cache.get(name)
      const z0 = (await clean.cache.get(name).data()) as Float32Array
      const z1 = (await seen.data()) as Float32Array
      const [, , H, D] = seen.shape as [number, number, number, number]
      for (let i = 0; i < z0.length; i++) {
        const head = Math.floor(i / D) % H
        if (head === 1) expect(Math.abs(z1[i] as number)).toBe(0)
        else expect(z1[i]).toBe(z0[i])
      }
      const expected = await manualMetric(llama, capability, new Set(['0.1']), () => null)
      const scores = await scoreMasks(llama, capability, masksFromHeadSets(llamaConfig, [[{ layer: 0, head: 1 }]]))
      expectArraysClose([scores.values[0] as number], [expected], 2e-4)
      tf.dispose([tokens, logits, clean.logits, withMask.logits])
      clean.cache.dispose()
      withMask.cache.dispose()
      ablation.dispose()
    },
  )

  it('leaks no tensors (zero, mean and resample)', async () => {
    const masks = randomMasks(gptConfig, { count: 4, fraction: 0.25, seed: 6 })
    await expectNoLeaks(async () => {
      await scoreMasks(gpt, capability, masks)
      for (const mode of ['mean', 'resample'] as const) {
        const ablation = await HeadAblation.create(gpt, mode, { reference: capability.data })
        await scoreMasks(gpt, capability, masks, { ablation })
        ablation.dispose()
        ablation.dispose()
      }
    })
  })

  it('text with padding: padded positions are not scored and do not enter the mean', async () => {
    const text = textCapability([
      [1, 2, 3, 4, 5, 6],
      [7, 8, 9],
    ])
    expect(text.data.length).toBe(5)
    expect(text.data.scoredPositions.length).toBe(5 + 2)
    const ablation = await HeadAblation.create(gpt, 'mean', { reference: text.data })
    const masks = masksFromHeadSets(gptConfig, [[{ layer: 1, head: 2 }]])
    const scores = await scoreMasks(gpt, text, masks, { ablation })
    ablation.dispose()
    // The same mean computed from the two sequences' real positions only.
    const names = [0, 1].map((l) => `blocks.${l}.attn.hook_z` as HookName)
    const means: tf.Tensor[] = []
    for (const l of [0, 1]) {
      const parts: Float32Array[] = []
      for (const row of [
        [1, 2, 3, 4, 5],
        [7, 8],
      ]) {
        const { logits, cache } = gpt.runWithCache([row], { namesFilter: names })
        parts.push((await cache.get(names[l] as HookName).data()) as Float32Array)
        logits.dispose()
        cache.dispose()
      }
      const mean = new Float32Array(16)
      let n = 0
      for (const part of parts)
        for (let r = 0; r < part.length / 16; r++, n++)
          for (let k = 0; k < 16; k++) mean[k] = (mean[k] as number) + (part[r * 16 + k] as number)
      means.push(
        tf.tensor4d(
          mean.map((v) => v / n),
          [1, 1, 4, 4],
        ),
      )
    }
    const expected = await manualMetric(gpt, text, new Set(['1.2']), (l) => means[l] as tf.Tensor)
    expectArraysClose([scores.values[0] as number], [expected], 2e-4)
    tf.dispose(means)
  })
})

describeWithBackends('scoreMasks errors', () => {
  let gpt: Transformer
  beforeAll(() => {
    gpt = createTransformer(gptConfig)
  })
  afterAll(() => gpt.dispose())

  it('rejects capabilities and masks that do not fit the model', async () => {
    const masks = masksFromHeadSets(gptConfig, [[]])
    const tooWide = inductionCapability({ vocabSize: 20, blockLength: 3, count: 2 })
    await expect(scoreMasks(gpt, tooWide, masks)).rejects.toThrow(/outside the model's vocabulary \[0, 11\)/)
    const tooLong = inductionCapability({ vocabSize: 11, blockLength: 8, count: 2 })
    await expect(scoreMasks(gpt, tooLong, masks)).rejects.toThrow(/exceed the model's context nCtx = 12/)
    const ok = inductionCapability({ vocabSize: 11, blockLength: 3, count: 2 })
    await expect(scoreMasks(gpt, ok, { count: 1, heads: 7, data: new Uint8Array(7) })).rejects.toThrow(
      /masks cover 7 heads; the model has 8/,
    )
    await expect(scoreMasks(gpt, ok, masks, { maxTokensPerPass: 0 })).rejects.toThrow(ConfigError)
    const badTargets: Capability = { ...ok, data: { ...ok.data, targets: ok.data.targets.map(() => 99) } }
    await expect(scoreMasks(gpt, badTargets, masks)).rejects.toThrow(/target token 99/)
    const badDistribution: Capability = {
      ...ok,
      data: { ...ok.data, targetDistributions: new Float32Array(3), targetWidth: 11 },
    }
    await expect(scoreMasks(gpt, badDistribution, masks)).rejects.toThrow(/target distributions hold 3 values/)
  })

  it('says what masks it expects for a plain array or a non-mask value (expected vs got head count)', async () => {
    const ok = inductionCapability({ vocabSize: 11, blockLength: 3, count: 2 })
    await expect(scoreMasks(gpt, ok, [[1, 0]] as never)).rejects.toThrow(
      new RegExp(
        /masks is a plain array of 1 mask\(s\) of 2 heads; expected a KnockoutMasks object /.source +
          /\{ count, heads: 8, /.source +
          /data: Uint8Array \} \(the model has 8 heads: 2 layers x 4 heads; build one with masksFromHeadSets/.source,
      ),
    )
    await expect(scoreMasks(gpt, ok, [] as never)).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      details: { expectedHeads: 8 },
    })
    await expect(scoreMasks(gpt, ok, { count: 1 } as never)).rejects.toThrow(
      /masks is not a KnockoutMasks object; expected .*heads: 8/,
    )
    await expect(scoreMasks(gpt, ok, null as never)).rejects.toThrow(/masks is not a KnockoutMasks object/)
    expect.hasAssertions()
  })

  it('rejects misspelled option names of the scoring, localization, report and lasso functions', async () => {
    const ok = inductionCapability({ vocabSize: 11, blockLength: 3, count: 2 })
    const masks = masksFromHeadSets(gptConfig, [[]])
    await expect(compressedSensing(gpt, ok, { mask: 5 } as never)).rejects.toThrow(
      new RegExp(
        /Invalid mask: is not a compressedSensing parameter \(did you mean 'masks'\?\); expected one of /.source +
          /maxTokensPerPass, batched, onProgress, top, mode, reference, resampleSeed, masks, fraction, /.source +
          /.*customMasks/.source,
      ),
    )
    await expect(compressedSensing(gpt, ok, { crossValidate: { fold: 3 } } as never)).rejects.toThrow(
      new RegExp(
        /Invalid fold: is not a compressedSensing crossValidate parameter /.source +
          /\(did you mean 'folds'\?\); expected one of folds$/.source,
      ),
    )
    // The measurement design and the Lasso fit are checked by the schema before any evaluation.
    for (const [options, message] of [
      [{ masks: 0 }, /^Invalid masks: must be an integer >= 1, got 0$/],
      [{ fraction: 0 }, /^Invalid fraction: must be in \(0, 1\], got 0$/],
      [{ design: 'stratified' }, /^Invalid design: got 'stratified'; expected one of balanced, iid$/],
      [{ seed: 1.5 }, /^Invalid seed: must be an integer, got 1.5$/],
      [{ alpha: 0 }, /^Invalid alpha: must be > 0, got 0$/],
      [{ maxIter: 0 }, /^Invalid maxIter: must be an integer >= 1, got 0$/],
      [{ crossValidate: { folds: 1 } }, /^Invalid folds: must be an integer >= 2, got 1$/],
    ] as const) {
      await expect(compressedSensing(gpt, ok, options as never)).rejects.toThrow(message)
    }
    await expect(exhaustiveSweep(gpt, ok, { topk: 3 } as never)).rejects.toThrow(
      /Invalid topk: is not an exhaustiveSweep parameter \(did you mean 'top'\?\)/,
    )
    await expect(greedySearch(gpt, ok, { modes: 'mean' } as never)).rejects.toThrow(
      /Invalid modes: is not a greedySearch parameter \(did you mean 'mode'\?\)/,
    )
    await expect(scoreMasks(gpt, ok, masks, { maxTokens: 10 } as never)).rejects.toThrow(
      /Invalid maxTokens: is not a scoreMasks parameter/,
    )
    await expect(knockoutEffects(gpt, [{ layer: 0, head: 0 }], [ok], { targt: 'x' } as never)).rejects.toThrow(
      /Invalid targt: is not a knockoutEffects parameter \(did you mean 'target'\?\)/,
    )
    await expect(HeadAblation.create(gpt, 'zero', { derang: true } as never)).rejects.toThrow(/did you mean 'derange'/)
    expect(() => randomMasks(gptConfig, { counts: 3 } as never)).toThrow(
      /Invalid counts: is not a randomMasks parameter \(did you mean 'count'\?\)/,
    )
    expect(() => inductionCapability({ vocabSize: 11, blockLenght: 3 } as never)).toThrow(/did you mean 'blockLength'/)
    const X = { rows: 4, columns: 2, data: new Uint8Array([1, 0, 0, 1, 1, 1, 0, 0]) }
    expect(() => lasso(X, [1, 2, 3, 4], { alhpa: 0.1 } as never)).toThrow(
      /Invalid alhpa: is not a lasso parameter \(did you mean 'alpha'\?\)/,
    )
    expect(() => lassoCV(X, [1, 2, 3, 4], { alpha: 0.1 } as never)).toThrow(
      /Invalid alpha: is not a lassoCV parameter \(did you mean 'alphas'\?\)/,
    )
    expect(lassoCV(X, [1, 2, 3, 4], { folds: 2, maxIter: 100 }).fit.coefficients).toHaveLength(2)
  })

  it('ablation errors: unknown mode, no reference, misaligned resample, use after dispose', async () => {
    await expect(HeadAblation.create(gpt, 'scale' as never)).rejects.toThrow(/'scale' is not an ablation mode/)
    await expect(HeadAblation.create(gpt, 'mean')).rejects.toThrow(/needs reference sequences/)
    const ok = inductionCapability({ vocabSize: 11, blockLength: 3, count: 3 })
    await expect(
      HeadAblation.create(gpt, 'resample', {
        reference: { ...ok.data, count: 1, inputs: ok.data.inputs.subarray(0, ok.data.length) },
      }),
    ).rejects.toThrow(/at least 2 sequences/)
    await expect(
      HeadAblation.create(gpt, 'mean', { reference: { inputs: new Int32Array(3), count: 2, length: 2 } }),
    ).rejects.toThrow(/expected a non-empty \[count, length\]/)
    const other = inductionCapability({ vocabSize: 11, blockLength: 4, count: 3 })
    const resample = await HeadAblation.create(gpt, 'resample', { reference: ok.data })
    const masks = masksFromHeadSets(gptConfig, [[{ layer: 0, head: 0 }]])
    await expect(scoreMasks(gpt, other, masks, { ablation: resample })).rejects.toThrow(/positions must align/)
    resample.dispose()
    expect(() => resample.forward(gpt, tf.tensor2d([[1, 2]], [1, 2], 'int32'), new Uint8Array(8))).toThrow(AttnlabError)
    const perPosition = await HeadAblation.create(gpt, 'mean', { reference: ok.data, perPosition: true })
    await expect(scoreMasks(gpt, other, masks, { ablation: perPosition })).rejects.toThrow(/per-position mean ablation/)
    perPosition.dispose()
  })
})
