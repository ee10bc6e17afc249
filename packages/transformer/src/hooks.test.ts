import * as tf from '@tensorflow/tfjs-core'
import { AttnlabError, ShapeError } from '@attnlab/core'
import { describeWithBackends, expectArraysClose, expectNoLeaks } from '@attnlab/core/testing'
import { describe, expect, it } from 'vitest'
import { createConfig, presetConfig } from './config.ts'
import { BLOCK_HOOK_POINTS, getActName, parseHookName, type HookName } from './hooks.ts'
import { createTransformer } from './model.ts'
import { randomTokens, randomizeWeights } from './test-utils.test-utils.ts'

describe('hook names', () => {
  it('getActName follows TransformerLens', () => {
    expect(getActName('pattern', 0)).toBe('blocks.0.attn.hook_pattern')
    expect(getActName('attn', 2)).toBe('blocks.2.attn.hook_pattern')
    expect(getActName('attn_logits', 1)).toBe('blocks.1.attn.hook_attn_scores')
    expect(getActName('resid_pre', 3)).toBe('blocks.3.hook_resid_pre')
    expect(getActName('z', 0)).toBe('blocks.0.attn.hook_z')
    expect(getActName('post', 1)).toBe('blocks.1.mlp.hook_post')
    expect(getActName('embed')).toBe('hook_embed')
    expect(getActName('pos_embed')).toBe('hook_pos_embed')
    expect(getActName('ln_final')).toBe('ln_final.hook_normalized')
    expect(getActName('normalized', 1, 'ln2')).toBe('blocks.1.ln2.hook_normalized')
  })

  it('getActName rejects unknown names and missing layers', () => {
    expect(() => getActName('q')).toThrow(/needs a layer index/)
    expect(() => getActName('q', -1)).toThrow(AttnlabError)
    expect(() => getActName('normalized', 0)).toThrow(/layerType/)
    expect(() => getActName('nope' as never, 0)).toThrow(/not an activation name/)
  })

  it('parseHookName splits block hooks and rejects others', () => {
    expect(parseHookName('blocks.12.attn.hook_q')).toEqual({ layer: 12, point: 'attn.hook_q' })
    expect(parseHookName('hook_embed')).toEqual({ layer: undefined, point: 'hook_embed' })
    expect(parseHookName('blocks.0.attn.hook_nothing')).toBeUndefined()
    expect(parseHookName('embed')).toBeUndefined()
    expect(BLOCK_HOOK_POINTS).toContain('mlp.hook_pre_linear')
  })
})

describeWithBackends('hooks', () => {
  const archs = {
    gpt: createConfig({
      architecture: 'gpt',
      dVocab: 9,
      nCtx: 8,
      dModel: 8,
      nLayers: 2,
      nHeads: 2,
      dHead: 4,
      dMlp: 12,
    }),
    llama: createConfig({
      architecture: 'llama',
      dVocab: 9,
      nCtx: 8,
      dModel: 8,
      nLayers: 2,
      nHeads: 4,
      nKvHeads: 2,
      dHead: 4,
      dMlp: 12,
    }),
    minimal: createConfig({ architecture: 'minimal', dVocab: 6, nCtx: 6, nHeads: 3, queryInit: 0.5 }),
  }

  it('runWithCache records every hook point with TransformerLens shapes', async () => {
    for (const [name, config] of Object.entries(archs)) {
      const model = createTransformer(config)
      randomizeWeights(model)
      const tokens = randomTokens(2, 5, Math.min(config.dVocab, 6))
      const { logits, cache } = model.runWithCache(tokens)
      const { dModel, nHeads, nKvHeads, dHead, dMlp } = config
      const shape = (n: string): number[] => cache.get(n as HookName).shape
      expect(shape('hook_embed'), name).toEqual([2, 5, dModel])
      expect(shape('blocks.0.hook_resid_pre')).toEqual([2, 5, dModel])
      expect(shape('blocks.0.attn.hook_q')).toEqual([2, 5, nHeads, dHead])
      expect(shape('blocks.0.attn.hook_k')).toEqual([2, 5, nKvHeads, dHead])
      expect(shape('blocks.0.attn.hook_pattern')).toEqual([2, nHeads, 5, 5])
      expect(shape('blocks.0.attn.hook_attn_scores')).toEqual([2, nHeads, 5, 5])
      expect(shape('blocks.0.attn.hook_z')[2]).toBe(nHeads)
      expect(shape('blocks.0.attn.hook_result')).toEqual([2, 5, nHeads, dModel])
      expect(shape('blocks.0.hook_attn_out')).toEqual([2, 5, dModel])
      if (name !== 'minimal') {
        expect(shape('blocks.1.mlp.hook_post')).toEqual([2, 5, dMlp])
        expect(shape('blocks.1.hook_resid_mid')).toEqual([2, 5, dModel])
        expect(shape('ln_final.hook_normalized')).toEqual([2, 5, dModel])
        expect(shape('blocks.0.ln1.hook_normalized')).toEqual([2, 5, dModel])
      }
      if (name === 'llama') {
        expect(shape('blocks.0.attn.hook_rot_q')).toEqual([2, 5, nHeads, dHead])
        expect(shape('blocks.0.mlp.hook_pre_linear')).toEqual([2, 5, dMlp])
      }
      if (name === 'gpt') expect(cache.has('hook_pos_embed')).toBe(true)
      // Patterns are causal probability distributions; scores are -Infinity above the diagonal.
      const pattern = (await cache.get('blocks.0.attn.hook_pattern').array()) as number[][][][]
      const scores = (await cache.get('blocks.0.attn.hook_attn_scores').array()) as number[][][][]
      for (const row of pattern[0]![0]!) expect(row.reduce((a, b) => a + b, 0)).toBeCloseTo(1, 5)
      expect(pattern[1]![0]![1]![3]).toBe(0)
      expect(scores[1]![0]![1]![3]).toBe(-Infinity)
      // hook_result sums to hook_attn_out (minus b_O for gpt)
      const summed = tf.sum(cache.get('blocks.0.attn.hook_result'), 2)
      const out = cache.get('blocks.0.hook_attn_out')
      const bias = model.getWeights().get('blocks.0.attn.b_O')
      const expected = bias === undefined ? out : tf.sub(out, bias)
      expectArraysClose(await summed.data(), await expected.data(), 1e-4)
      tf.dispose([summed, expected === out ? [] : expected].flat())
      logits.dispose()
      cache.dispose()
      expect(() => cache.get('hook_embed')).toThrow(/disposed/)
      model.dispose()
    }
  })

  it('runWithCache keeps only the filtered names and leaks nothing', async () => {
    const model = createTransformer(archs.gpt)
    const tokens = randomTokens(1, 4, 9)
    await expectNoLeaks(() => {
      const { logits, cache } = model.runWithCache(tokens, {
        namesFilter: ['blocks.1.attn.hook_pattern', 'hook_embed'],
      })
      expect(cache.names()).toEqual(['hook_embed', 'blocks.1.attn.hook_pattern'])
      expect(() => cache.get('blocks.0.attn.hook_q')).toThrow(
        /not in the cache; cached: hook_embed, blocks.1.attn.hook_pattern/,
      )
      logits.dispose()
      cache.dispose()
    })
    await expectNoLeaks(() => {
      const { logits, cache } = model.runWithCache(tokens, { namesFilter: (n) => n.endsWith('hook_z') })
      expect(cache.size).toBe(2)
      logits.dispose()
      cache.dispose()
    })
    await expectNoLeaks(() => {
      const { logits, cache } = model.runWithCache(tokens, { namesFilter: 'blocks.0.hook_resid_post' })
      expect(cache.names()).toEqual(['blocks.0.hook_resid_post'])
      logits.dispose()
      cache.dispose()
    })
    model.dispose()
  })

  it('a hook can replace an activation: zeroing hook_z of every head equals a zero head mask', async () => {
    for (const config of Object.values(archs)) {
      const model = createTransformer(config)
      randomizeWeights(model)
      const tokens = randomTokens(2, 4, 6)
      const zeroed = model.runWithHooks(tokens, {
        fwdHooks: [[(n) => n.endsWith('attn.hook_z'), (z) => tf.zerosLike(z)]],
      })
      const masked = model.forward(tokens, { headMask: tf.zeros([config.nLayers, config.nHeads]) })
      expectArraysClose(await zeroed.data(), await masked.data(), 1e-5)
      tf.dispose([zeroed, masked])
      model.dispose()
    }
  })

  it('a batched [batch, nLayers, nHeads] head mask equals separate runs with each pattern', async () => {
    for (const config of Object.values(archs)) {
      const model = createTransformer(config)
      randomizeWeights(model)
      const row = randomTokens(1, 5, 6)[0]!
      const { nLayers, nHeads } = config
      const patterns = [0, 1, 2].map((k) =>
        Array.from({ length: nLayers }, (_, l) =>
          Array.from({ length: nHeads }, (_, h) => ((h + l + k) % 3 === 0 ? 0 : 1)),
        ),
      )
      const batched = model.forward([row, row, row], { headMask: tf.tensor3d(patterns) })
      const batchedValues = (await batched.array()) as number[][][]
      for (let k = 0; k < 3; k++) {
        const single = model.forward([row], { headMask: tf.tensor2d(patterns[k]!) })
        expectArraysClose(((await single.array()) as number[][][])[0]!.flat(), batchedValues[k]!.flat(), 1e-5)
        single.dispose()
      }
      // Knocking out a head changes the output (the mask is not a no-op).
      const full = model.forward([row])
      expect(
        Math.max(...((await tf.abs(tf.sub(full, tf.slice(batched, [0, 0, 0], [1, -1, -1]))).data()) as Float32Array)),
      ).toBeGreaterThan(1e-4)
      tf.dispose([batched, full])
      model.dispose()
    }
  })

  it('head masks are validated', () => {
    const model = createTransformer(archs.gpt)
    expect(() => model.forward([[1, 2]], { headMask: tf.ones([3, 2]) })).toThrow(
      /headMask has shape \[3, 2\]; expected \[nLayers, nHeads\] = \[2, 2\]/,
    )
    expect(() => model.forward([[1, 2]], { headMask: tf.ones([2, 2, 2]) })).toThrow(ShapeError)
    model.dispose()
  })

  it('hooks are gone after runWithHooks returns or throws; a wrong-shape replacement is a ShapeError', async () => {
    const model = createTransformer(archs.llama)
    const tokens = randomTokens(1, 4, 9)
    const reference = model.forward(tokens)
    const before = tf.memory().numTensors
    expect(() =>
      model.runWithHooks(tokens, {
        fwdHooks: [
          [
            'blocks.0.attn.hook_pattern',
            () => {
              throw new Error('boom')
            },
          ],
        ],
      }),
    ).toThrow('boom')
    expect(tf.memory().numTensors).toBe(before)
    expect(() =>
      model.runWithHooks(tokens, { fwdHooks: [['blocks.0.hook_resid_pre', () => tf.zeros([1, 1, 1])]] }),
    ).toThrow(/hook at 'blocks.0.hook_resid_pre' returned shape \[1, 1, 1\] but the activation has shape \[1, 4, 8\]/)
    expect(model.hookCount).toBe(0)
    const after = model.forward(tokens)
    expectArraysClose(await after.data(), await reference.data(), 0)
    tf.dispose([reference, after])
    model.dispose()
  })

  it('permanent hooks run until removed; reading hooks see every layer in order', async () => {
    const model = createTransformer(archs.gpt)
    const seen: string[] = []
    const handle = model.addHook(
      (n) => n.endsWith('hook_resid_pre'),
      (x, context) => {
        seen.push(`${context.name}@${context.layer}`)
        expect(x.shape).toEqual([1, 3, 8])
      },
    )
    model.forward([[1, 2, 3]]).dispose()
    expect(seen).toEqual(['blocks.0.hook_resid_pre@0', 'blocks.1.hook_resid_pre@1'])
    handle.remove()
    handle.remove()
    model.forward([[1, 2, 3]]).dispose()
    expect(seen.length).toBe(2)
    model.addHook('hook_embed', () => undefined)
    expect(model.hookCount).toBe(1)
    model.resetHooks()
    expect(model.hookCount).toBe(0)
    model.dispose()
  })

  it('hooks on scores change the pattern (an attention intervention)', async () => {
    const model = createTransformer(presetConfig('gpt-nano'))
    randomizeWeights(model)
    // Force every query to attend to position 0 only.
    const { cache, logits } = model.runWithCache([[1, 2, 3, 4]], {
      namesFilter: ['blocks.0.attn.hook_pattern'],
      fwdHooks: [
        [
          'blocks.0.attn.hook_attn_scores',
          (s) =>
            tf.add(
              s,
              tf.tensor2d([
                [0, -1e9, -1e9, -1e9],
                [0, -1e9, -1e9, -1e9],
                [0, -1e9, -1e9, -1e9],
                [0, -1e9, -1e9, -1e9],
              ]),
            ),
        ],
      ],
    })
    const pattern = (await cache.get('blocks.0.attn.hook_pattern').array()) as number[][][][]
    for (const row of pattern[0]![1]!) expect(row[0]).toBeCloseTo(1, 6)
    cache.dispose()
    logits.dispose()
    model.dispose()
  })
})
