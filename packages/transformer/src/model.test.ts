import * as tf from '@tensorflow/tfjs-core'
import { readFileSync } from 'node:fs'
import { AttnlabError, ConfigError, KernelsUnavailableError, ShapeError, useBackend } from '@attnlab/core'
import { ATTNLAB_KERNELS, kernelsActive } from '@attnlab/core/kernels'
import { describeWithBackends, expectArraysClose, expectNoLeaks } from '@attnlab/core/testing'
import { describe, expect, it } from 'vitest'
import { createConfig, presetConfig, type TransformerConfigInput } from './config.ts'
import { KVCache } from './kv-cache.ts'
import { createTransformer, parameterShapes, type AttentionReport, type ForwardOptions } from './model.ts'
import { checkGradients, probeLoss, randomTokens, randomizeWeights } from './test-utils.test-utils.ts'

interface GoldenCase {
  name: string
  config: TransformerConfigInput
  weights: Record<string, { shape: number[]; data: number[] }>
  tokens: number[][]
  logits: { shape: number[]; data: number[] }
}
const golden = JSON.parse(readFileSync(new URL('./__fixtures__/golden.json', import.meta.url), 'utf8')) as {
  cases: GoldenCase[]
}

const tiny: Record<string, TransformerConfigInput> = {
  minimal: { architecture: 'minimal', dVocab: 5, nCtx: 4, nHeads: 2, queryInit: 0.3 },
  gpt: {
    architecture: 'gpt',
    dVocab: 7,
    nCtx: 6,
    dModel: 8,
    nLayers: 2,
    nHeads: 2,
    dHead: 4,
    dMlp: 12,
    tiedEmbeddings: false,
  },
  'gpt-attn-only-tied': {
    architecture: 'gpt',
    dVocab: 7,
    nCtx: 6,
    dModel: 8,
    nLayers: 1,
    nHeads: 2,
    dHead: 4,
    attnOnly: true,
    actFn: 'gelu',
  },
  llama: {
    architecture: 'llama',
    dVocab: 9,
    nCtx: 8,
    dModel: 8,
    nLayers: 2,
    nHeads: 4,
    nKvHeads: 2,
    dHead: 4,
    dMlp: 10,
    tiedEmbeddings: false,
  },
}

describeWithBackends('transformer golden logits', () => {
  for (const testCase of golden.cases) {
    it(`${testCase.name} matches the PyTorch reference (tools/transformer/golden.py)`, async () => {
      const model = createTransformer(createConfig(testCase.config))
      model.setWeights(
        Object.fromEntries(
          Object.entries(testCase.weights).map(([n, w]) => [n, { shape: w.shape, data: Float32Array.from(w.data) }]),
        ),
      )
      const logits = model.forward(testCase.tokens)
      expect(logits.shape).toEqual(testCase.logits.shape)
      expectArraysClose(await logits.data(), testCase.logits.data, 2e-4, 2e-4)
      logits.dispose()
      model.dispose()
    })
  }
})

describeWithBackends('transformer gradients (finite differences)', () => {
  for (const [name, input] of Object.entries(tiny)) {
    it(`${name}: every parameter's gradient matches a central difference`, async () => {
      const model = createTransformer(createConfig(input))
      randomizeWeights(model, 3, input.architecture === 'minimal' ? 0.5 : 0.3)
      const tokens = randomTokens(2, input.nCtx as number, input.dVocab as number, 5)
      await checkGradients(model, probeLoss(model, tokens))
      model.dispose()
    })
  }

  it('gpt: the fused attention path and the hooked (unfused) path agree in logits and gradients', async () => {
    const model = createTransformer(
      createConfig({ architecture: 'gpt', dVocab: 7, nCtx: 6, dModel: 12, nLayers: 2, nHeads: 3, dMlp: 10 }),
    )
    randomizeWeights(model, 5, 0.3)
    const tokens = randomTokens(2, 6, 7, 8)
    // A no-op hook inside the attention forces the unfused path (q/k/v, kernel, W_O).
    const unfusedHooks = [
      ['blocks.0.attn.hook_z', () => undefined],
      ['blocks.1.attn.hook_z', () => undefined],
    ] as const
    const r = tf.randomNormal([2, 6, 7], 0, 1, 'float32', 2)
    const vars = [...model.getWeights().values()]
    const fused = tf.variableGrads(() => tf.sum(tf.mul(model.forward(tokens), r)) as tf.Scalar, vars)
    const unfused = tf.variableGrads(
      () => tf.sum(tf.mul(model.forward(tokens, { fwdHooks: unfusedHooks }), r)) as tf.Scalar,
      vars,
    )
    expectArraysClose(await fused.value.data(), await unfused.value.data(), 1e-4)
    for (const v of vars)
      expectArraysClose(await fused.grads[v.name]!.data(), await unfused.grads[v.name]!.data(), 1e-4)
    tf.dispose([fused.value, unfused.value, ...Object.values(fused.grads), ...Object.values(unfused.grads), r])
    model.dispose()
  })

  it('gpt: the default dense kernel runs the fused attention op when the pass reads no head apart', async () => {
    const model = createTransformer(
      createConfig({ architecture: 'gpt', dVocab: 7, nCtx: 6, dModel: 12, nLayers: 1, nHeads: 3, dMlp: 10 }),
    )
    const tokens = randomTokens(2, 6, 7, 8)
    const kernelsOf = async (options: ForwardOptions): Promise<string[]> => {
      const info = await tf.profile(() => model.forward(tokens, options))
      tf.dispose(info.result as tf.Tensor)
      return info.kernelNames
    }
    const headMask = tf.tensor2d([[1, 0, 1]])
    const fusedName = ATTNLAB_KERNELS.attention
    // The fused op is one kernel only with a provider registered; its composite otherwise.
    if (kernelsActive()) {
      expect(await kernelsOf({})).toContain(fusedName)
      expect(await kernelsOf({ fwdHooks: [['blocks.0.attn.hook_z', () => undefined]] })).not.toContain(fusedName)
      expect(await kernelsOf({ headMask })).not.toContain(fusedName)
      expect(await kernelsOf({ fwdHooks: [['blocks.0.attn.hook_pattern', () => undefined]] })).not.toContain(fusedName)
    }
    const reports: AttentionReport[] = []
    tf.dispose(model.forward(tokens, { attentionReports: reports }))
    expect(reports).toEqual([{ layer: 0, kernel: 'dense', computedPairs: 2 * 3 * 21, totalPairs: 2 * 3 * 21 }])
    headMask.dispose()
    model.dispose()
  })

  it('minimal: the structured path and the literal path agree in logits and gradients', async () => {
    const model = createTransformer(
      createConfig({ architecture: 'minimal', dVocab: 6, nCtx: 5, nHeads: 3, queryInit: 0.5 }),
    )
    randomizeWeights(model, 4, 0.5)
    const tokens = randomTokens(3, 5, 6, 6)
    // Any hook outside q/scores/pattern forces the literal computation.
    const literalHook = [['blocks.0.hook_resid_pre', () => undefined]] as const
    const r = tf.randomNormal([3, 5, 6], 0, 1, 'float32', 1)
    const weights = model.getWeights()
    const vars = [...weights.values()]
    const structured = tf.variableGrads(() => tf.sum(tf.mul(model.forward(tokens), r)) as tf.Scalar, vars)
    const literal = tf.variableGrads(
      () => tf.sum(tf.mul(model.forward(tokens, { fwdHooks: literalHook }), r)) as tf.Scalar,
      vars,
    )
    expectArraysClose(await structured.value.data(), await literal.value.data(), 1e-4)
    for (const v of vars)
      expectArraysClose(await structured.grads[v.name]!.data(), await literal.grads[v.name]!.data(), 1e-4)
    tf.dispose([
      structured.value,
      literal.value,
      ...Object.values(structured.grads),
      ...Object.values(literal.grads),
      r,
    ])
    model.dispose()
  })
})

describeWithBackends('transformer forward', (backend) => {
  it('gives [batch, pos, dVocab] logits for every preset and leaks nothing', async () => {
    for (const preset of ['minimal', 'gpt', 'gpt-nano', 'llama'] as const) {
      const model = createTransformer(presetConfig(preset))
      const tokens = randomTokens(2, 5, Math.min(model.config.dVocab, 50))
      await expectNoLeaks(() => {
        const logits = model.forward(tokens)
        expect(logits.shape).toEqual([2, 5, model.config.dVocab])
        logits.dispose()
      })
      model.dispose()
    }
  })

  it('accepts an int32 tensor and rejects other token inputs with typed errors', () => {
    const model = createTransformer(presetConfig('gpt-nano'))
    const ok = tf.tensor2d([[1, 2]], [1, 2], 'int32')
    model.forward(ok).dispose()
    ok.dispose()
    const floats = tf.tensor2d([[1, 2]])
    expect(() => model.forward(floats)).toThrow(ShapeError)
    floats.dispose()
    const rank1 = tf.tensor1d([1, 2], 'int32') as unknown as tf.Tensor2D
    expect(() => model.forward(rank1)).toThrow(/\[batch, pos\]/)
    rank1.dispose()
    expect(() => model.forward([[1, 99]])).toThrow(/outside the vocabulary \[0, 16\)/)
    expect(() => model.forward([[1, -1]])).toThrow(AttnlabError)
    expect(() => model.forward([[1.5]])).toThrow(/not an integer/)
    expect(() => model.forward([[1, 2], [3]])).toThrow(/equal length/)
    expect(() => model.forward([])).toThrow(ShapeError)
    expect(() => model.forward([new Array(17).fill(0)])).toThrow(/exceeds the context length nCtx = 16/)
    model.dispose()
    expect(() => model.forward([[1]])).toThrow(/disposed/)
    void backend
  })

  it('logitsFrom computes only the later positions, equal to the full logits there', async () => {
    for (const config of [createConfig(tiny.minimal!), createConfig(tiny.gpt!), createConfig(tiny.llama!)]) {
      const model = createTransformer(config)
      randomizeWeights(model, 2, 0.4)
      const tokens = randomTokens(2, 4, 5, 9)
      const full = model.forward(tokens)
      const tail = model.forward(tokens, { logitsFrom: 2 })
      expect(tail.shape).toEqual([2, 2, config.dVocab])
      const expected = tf.slice(full, [0, 2, 0], [-1, -1, -1])
      expectArraysClose(await tail.data(), await expected.data(), 1e-5)
      // also through the literal minimal path
      const literal = model.forward(tokens, { logitsFrom: 3, fwdHooks: [['hook_embed', () => undefined]] })
      expectArraysClose(await literal.data(), await tf.slice(full, [0, 3, 0], [-1, -1, -1]).data(), 1e-5)
      expect(() => model.forward(tokens, { logitsFrom: 4 })).toThrow(/logitsFrom 4 must be an integer in \[0, 3\]/)
      tf.dispose([full, tail, expected, literal])
      model.dispose()
    }
  })

  it('is deterministic in its initialisation seed', async () => {
    const a = createTransformer(presetConfig('gpt-nano', { seed: 3 }))
    const b = createTransformer(presetConfig('gpt-nano', { seed: 3 }))
    const c = createTransformer(presetConfig('gpt-nano', { seed: 4 }))
    const wa = await a.getWeightData()
    const wb = await b.getWeightData()
    const wc = await c.getWeightData()
    expect(wa.get('embed.W_E')!.data).toEqual(wb.get('embed.W_E')!.data)
    expect(wa.get('embed.W_E')!.data).not.toEqual(wc.get('embed.W_E')!.data)
    ;[a, b, c].forEach((m) => {
      m.dispose()
    })
  })
})

describe('transformer parameters', () => {
  it('uses TransformerLens names and shapes', () => {
    const gpt = Object.fromEntries(parameterShapes(presetConfig('gpt')))
    expect(gpt['embed.W_E']).toEqual([64, 64])
    expect(gpt['pos_embed.W_pos']).toEqual([64, 64])
    expect(gpt['blocks.1.attn.W_Q']).toEqual([4, 64, 16])
    expect(gpt['blocks.1.attn.W_O']).toEqual([4, 16, 64])
    expect(gpt['blocks.0.attn.b_Q']).toEqual([4, 16])
    expect(gpt['blocks.0.mlp.W_in']).toEqual([64, 256])
    expect(gpt['blocks.0.ln1.b']).toEqual([64])
    expect(gpt['unembed.W_U']).toBeUndefined() // tied
    const llama = Object.fromEntries(parameterShapes(presetConfig('llama', { nKvHeads: 2, tiedEmbeddings: false })))
    expect(llama['blocks.0.attn.W_K']).toEqual([2, 64, 16])
    expect(llama['blocks.0.mlp.W_gate']).toEqual([64, 172])
    expect(llama['blocks.0.ln1.b']).toBeUndefined()
    expect(llama['unembed.W_U']).toEqual([64, 512])
    expect(llama['pos_embed.W_pos']).toBeUndefined()
    const minimal = parameterShapes(presetConfig('minimal'))
    expect(minimal).toEqual([
      ['blocks.0.attn.W_Q', [3, 75, 75]],
      ['blocks.0.attn.W_V', [3, 75, 75]],
    ])
  })

  it('initialises the minimal model as the paper: W_Q ~ U(-eps, eps), W_V = 0', async () => {
    await import('@attnlab/core').then((core) => core.useBackend('cpu'))
    for (const eps of [0, 1e-3]) {
      const model = createTransformer(presetConfig('minimal', { queryInit: eps }))
      const w = await model.getWeightData()
      const q = w.get('blocks.0.attn.W_Q')!.data
      const v = w.get('blocks.0.attn.W_V')!.data
      expect(Math.max(...Array.from(q, Math.abs))).toBeLessThanOrEqual(eps)
      if (eps > 0) expect(Math.max(...Array.from(q, Math.abs))).toBeGreaterThan(eps / 2)
      expect(v.every((x) => x === 0)).toBe(true)
      model.dispose()
    }
    const xavier = createTransformer(presetConfig('minimal', { queryInit: 'xavier' }))
    const q = (await xavier.getWeightData()).get('blocks.0.attn.W_Q')!.data
    expect(Math.max(...Array.from(q, Math.abs))).toBeLessThanOrEqual(Math.sqrt(6 / 150))
    xavier.dispose()
  })

  it('setWeights checks names and shapes before assigning anything', async () => {
    await import('@attnlab/core').then((core) => core.useBackend('cpu'))
    const model = createTransformer(presetConfig('gpt-nano'))
    const before = await model.getWeightData()
    const good = new Map(
      [...before].map(([n, w]) => [n, { shape: w.shape, data: new Float32Array(w.data.length).fill(0.5) }]),
    )
    const badShape = new Map(good)
    badShape.set('blocks.0.attn.W_Q', { shape: [2, 16, 4], data: new Float32Array(128) })
    expect(() => model.setWeights(badShape)).toThrow(
      /'blocks.0.attn.W_Q' has shape \[2, 16, 8\] but the value has shape \[2, 16, 4\]/,
    )
    expect((await model.getWeightData()).get('embed.W_E')!.data).toEqual(before.get('embed.W_E')!.data) // unchanged
    expect(() => model.setWeights({ 'embed.W_X': tf.zeros([1]) })).toThrow(/unknown parameter 'embed.W_X'/)
    expect(() => model.setWeights({ 'embed.W_E': { shape: [16, 16], data: new Float32Array(3) } })).toThrow(/3 values/)
    expect(() => model.setWeights({ 'embed.W_E': { shape: [16, 16], data: new Float32Array(256) } })).toThrow(
      /missing parameters/,
    )
    model.setWeights({ 'embed.W_E': { shape: [16, 16], data: new Float32Array(256).fill(2) } }, { strict: false })
    expect((await model.getWeightData()).get('embed.W_E')!.data[0]).toBe(2)
    model.setWeights(good)
    expect((await model.getWeightData()).get('ln_final.w')!.data[0]).toBe(0.5)
    model.dispose()
  })

  it('rejects an unresolved configuration', () => {
    expect(() => createTransformer({ ...presetConfig('gpt') })).toThrow(ConfigError)
  })

  it('rejects misspelled option names of createTransformer, forward and runWithCache', () => {
    expect(() => createTransformer(presetConfig('gpt-nano'), { atention: undefined } as never)).toThrow(
      /^Invalid atention: is not a createTransformer parameter \(did you mean 'attention'\?\); expected one of /,
    )
    const model = createTransformer(presetConfig('gpt-nano'))
    const before = tf.memory().numTensors
    expect(() => model.forward([[1, 2]], { headmask: undefined } as never)).toThrow(
      /^Invalid headmask: is not a forward parameter \(did you mean 'headMask'\?\); expected one of fwdHooks, /,
    )
    expect(() => model.forward([[1, 2]], { training: 'yes' } as never)).toThrow(
      /^Invalid training: got 'yes'; expected true or false$/,
    )
    expect(() => model.forward([[1, 2]], null as never)).toThrow(
      /^Invalid config: got null; expected an object of forward parameters$/,
    )
    expect(() => model.runWithCache([[1, 2]], { names: ['hook_embed'] } as never)).toThrow(
      /^Invalid names: is not a runWithCache parameter; expected one of namesFilter, headMask, fwdHooks, attention$/,
    )
    expect(tf.memory().numTensors).toBe(before)
    model.dispose()
  })

  it('rejects misspelled or bad options of setWeights and forwardCached before any work', async () => {
    await useBackend('cpu')
    const model = createTransformer(presetConfig('gpt-nano'))
    const weights = await model.getWeightData()
    const before = tf.memory().numTensors
    expect(() => model.setWeights(weights, { strct: false } as never)).toThrow(
      /^Invalid strct: is not a setWeights parameter \(did you mean 'strict'\?\); expected one of strict$/,
    )
    expect(() => model.setWeights(weights, { strict: 'no' } as never)).toThrow(
      /^Invalid strict: got 'no'; expected true or false$/,
    )
    const cache = new KVCache(model.config.nLayers)
    const call = (options: unknown): void => model.forwardCached([[1, 2]], cache, options as never).dispose()
    const used = new KVCache(model.config.nLayers)
    model.forwardCached([[1, 2]], used, undefined).dispose() // undefined options are the defaults
    expect(used.positions).toBe(2)
    used.dispose()
    expect(() => call({ atention: undefined })).toThrow(ConfigError)
    expect(() => call({ atention: undefined })).toThrow(
      /^Invalid atention: is not a forwardCached parameter \(did you mean 'attention'\?\); expected one of fwdHooks, /,
    )
    // A cached pass never trains: training and rng are not its options.
    expect(() => call({ training: true })).toThrow(/^Invalid training: is not a forwardCached parameter/)
    expect(() => call(7)).toThrow(/^Invalid config: got 7; expected an object of forwardCached parameters$/)
    expect(cache.positions).toBe(0) // nothing was cached by a refused call
    cache.dispose()
    expect(tf.memory().numTensors).toBe(before)
    model.dispose()
  })
})

describe('a backend not started by useBackend', () => {
  it('makes the model throw KernelsUnavailableError naming useBackend', async () => {
    const { MathBackendCPU } = await import('@tensorflow/tfjs-backend-cpu')
    await useBackend('cpu')
    const model = createTransformer(presetConfig('minimal', { dVocab: 4, nCtx: 3, nHeads: 2 }))
    tf.registerBackend('bare-cpu', () => new MathBackendCPU())
    try {
      await tf.setBackend('bare-cpu')
      expect(() => model.forward([[0, 1, 2]])).toThrow(KernelsUnavailableError)
      expect(() => model.forward([[0, 1, 2]])).toThrow(/useBackend\('bare-cpu'\)/)
    } finally {
      await tf.setBackend('cpu')
      tf.removeBackend('bare-cpu')
      model.dispose()
    }
  })
})
