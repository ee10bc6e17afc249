import * as tf from '@tensorflow/tfjs-core'
import {
  ShapeError,
  causalMask,
  causalPairs,
  denseAttention,
  type AttentionContext,
  type AttentionDecodeInput,
  type AttentionKernel,
  type AttentionPrefillInput,
  type LayerKVCache,
} from '@attnlab/core'
import { describeWithBackends, expectArraysClose, expectNoLeaks } from '@attnlab/core/testing'
import { expect, it } from 'vitest'
import { createConfig } from './config.ts'
import { generate } from './generate.ts'
import { KVCache } from './kv-cache.ts'
import { createTransformer, type AttentionReport } from './model.ts'
import { randomTokens, randomizeWeights } from './test-utils.test-utils.ts'

/** Reference attention by explicit loops (repeating key/value heads for GQA). */
function referenceAttention(q: number[][][][], k: number[][][][], v: number[][][][], scale: number): number[][][][] {
  const heads = q[0]!.length
  const group = heads / k[0]!.length
  return q.map((qb, b) =>
    qb.map((qh, h) =>
      qh.map((qi, i) => {
        const kh = k[b]![Math.floor(h / group)]!
        const vh = v[b]![Math.floor(h / group)]!
        const scores = kh.slice(0, i + 1).map((kj) => scale * kj.reduce((s, x, d) => s + x * qi[d]!, 0))
        const max = Math.max(...scores)
        const e = scores.map((s) => Math.exp(s - max))
        const total = e.reduce((a, c) => a + c, 0)
        return vh[0]!.map((_, d) => e.reduce((s, w, j) => s + (w / total) * vh[j]![d]!, 0))
      }),
    ),
  )
}

/**
 * A toy kernel: sliding-window attention over the last `window` keys. Prefill masks the band;
 * afterPrefill evicts keys older than the window from the cache; decode attends to the cache and
 * keeps evicting. Reports the pairs it computes.
 */
function slidingWindowKernel(window: number, calls: string[]): AttentionKernel {
  const band = (pos: number): tf.Tensor2D => {
    const values = new Float32Array(pos * pos)
    for (let i = 0; i < pos; i++)
      for (let j = 0; j < pos; j++) values[i * pos + j] = j > i || i - j >= window ? -Infinity : 0
    return tf.tensor2d(values, [pos, pos])
  }
  const attend = (
    q: tf.Tensor4D,
    k: tf.Tensor4D,
    v: tf.Tensor4D,
    scale: number,
    mask: tf.Tensor2D | null,
    context: AttentionContext,
  ): tf.Tensor4D =>
    tf.tidy(() => {
      const group = q.shape[1] / k.shape[1]
      const kr =
        group === 1
          ? k
          : tf.reshape(tf.tile(tf.expandDims(k, 2), [1, 1, group, 1, 1]), [
              k.shape[0],
              q.shape[1],
              k.shape[2],
              k.shape[3],
            ])
      const vr =
        group === 1
          ? v
          : tf.reshape(tf.tile(tf.expandDims(v, 2), [1, 1, group, 1, 1]), [
              v.shape[0],
              q.shape[1],
              v.shape[2],
              v.shape[3],
            ])
      let scores = tf.mul(tf.matMul(q, kr, false, true), scale) as tf.Tensor4D
      if (mask !== null) scores = tf.add(scores, mask)
      if (context.hooks.attnScores) scores = context.hooks.attnScores(scores)
      let pattern = tf.softmax(scores) as tf.Tensor4D
      if (context.hooks.pattern) pattern = context.hooks.pattern(pattern)
      return tf.matMul(pattern, vr) as tf.Tensor4D
    })
  const evict = (cache: LayerKVCache): void => {
    const stored = cache.keys!.shape[2]
    if (stored <= window) return
    const keys = tf.keep(tf.slice(cache.keys!, [0, 0, stored - window, 0], [-1, -1, window, -1]))
    const values = tf.keep(tf.slice(cache.values!, [0, 0, stored - window, 0], [-1, -1, window, -1]))
    cache.keys!.dispose()
    cache.values!.dispose()
    cache.keys = keys
    cache.values = values
  }
  return {
    name: 'sliding-window',
    prefill(input: AttentionPrefillInput, context: AttentionContext) {
      calls.push(`prefill:${input.layer}`)
      const pos = input.q.shape[2]
      const mask = band(pos)
      const z = attend(input.q, input.k, input.v, input.scale, mask, context)
      mask.dispose()
      let pairs = 0
      for (let i = 0; i < pos; i++) pairs += Math.min(i + 1, window)
      return {
        z,
        computedPairs: input.q.shape[0] * input.q.shape[1] * pairs,
        totalPairs: input.q.shape[0] * input.q.shape[1] * causalPairs(pos, pos),
      }
    },
    afterPrefill(input: AttentionPrefillInput, cache: LayerKVCache) {
      calls.push(`afterPrefill:${input.layer}:${cache.promptLength}`)
      evict(cache)
    },
    decode(input: AttentionDecodeInput, context: AttentionContext) {
      calls.push(`decode:${input.layer}:${input.position}`)
      evict(input.cache)
      const z = attend(input.q, input.cache.keys!, input.cache.values!, input.scale, null, context)
      return {
        z,
        computedPairs: input.q.shape[0] * input.q.shape[1] * input.cache.keys!.shape[2],
        totalPairs: input.q.shape[0] * input.q.shape[1] * (input.position + 1),
      }
    },
  }
}

describeWithBackends('attention kernels', () => {
  it('denseAttention.prefill equals softmax attention with GQA, and reports causal pairs', async () => {
    const q = tf.randomNormal([2, 4, 5, 3], 0, 1, 'float32', 1) as tf.Tensor4D
    const k = tf.randomNormal([2, 2, 5, 3], 0, 1, 'float32', 2) as tf.Tensor4D
    const v = tf.randomNormal([2, 2, 5, 6], 0, 1, 'float32', 3) as tf.Tensor4D
    const result = denseAttention.prefill({ q, k, v, scale: 0.7, layer: 0 }, { hooks: {}, needsPattern: false })
    expect(result.z.shape).toEqual([2, 4, 5, 6])
    const expected = referenceAttention(
      (await q.array()) as never,
      (await k.array()) as never,
      (await v.array()) as never,
      0.7,
    )
    expectArraysClose(await result.z.data(), expected.flat(3), 1e-5)
    expect(result.computedPairs).toBe(2 * 4 * 15)
    expect(result.totalPairs).toBe(2 * 4 * 15)
    tf.dispose([q, k, v, result.z])
  })

  it('denseAttention validates shapes and an empty cache', () => {
    const q = tf.zeros([1, 3, 4, 2]) as tf.Tensor4D
    const k = tf.zeros([1, 2, 4, 2]) as tf.Tensor4D
    expect(() =>
      denseAttention.prefill({ q, k, v: k, scale: 1, layer: 0 }, { hooks: {}, needsPattern: false }),
    ).toThrow(/not a multiple of nKvHeads/)
    const cache: LayerKVCache = { keys: null, values: null, positions: 0, promptLength: 0, kernelState: null }
    expect(() =>
      denseAttention.decode(
        { q: tf.zeros([1, 2, 1, 2]) as tf.Tensor4D, cache, position: 0, scale: 1, layer: 0 },
        { hooks: {}, needsPattern: false },
      ),
    ).toThrow(ShapeError)
    tf.dispose([q, k])
    const mask = causalMask(3)
    expect(Array.from(mask.dataSync())).toEqual([0, -Infinity, -Infinity, 0, 0, -Infinity, 0, 0, 0])
    mask.dispose()
  })

  for (const [name, input] of Object.entries({
    gpt: { architecture: 'gpt', dVocab: 11, nCtx: 16, dModel: 8, nLayers: 2, nHeads: 2, dHead: 4, dMlp: 12 },
    llama: {
      architecture: 'llama',
      dVocab: 11,
      nCtx: 16,
      dModel: 8,
      nLayers: 2,
      nHeads: 4,
      nKvHeads: 2,
      dHead: 4,
      dMlp: 12,
    },
    minimal: { architecture: 'minimal', dVocab: 7, nCtx: 12, nHeads: 3, queryInit: 0.5 },
  } as const)) {
    it(`${name}: KV-cached decoding reproduces the full forward pass's logits`, async () => {
      const model = createTransformer(createConfig(input))
      randomizeWeights(model, 2, 0.4)
      const tokens = randomTokens(2, 10, 7, 3)
      const full = model.forward(tokens)
      const fullValues = (await full.array()) as number[][][]
      full.dispose()
      await expectNoLeaks(async () => {
        const cache = new KVCache(model.config.nLayers)
        const reports: AttentionReport[] = []
        const prefill = model.forwardCached(
          tokens.map((r) => r.slice(0, 4)),
          cache,
          { attentionReports: reports },
        )
        const prefillValues = (await prefill.array()) as number[][][]
        prefill.dispose()
        for (let b = 0; b < 2; b++) expectArraysClose(prefillValues[b]!.flat(), fullValues[b]!.slice(0, 4).flat(), 1e-4)
        for (let p = 4; p < 10; p++) {
          const step = model.forwardCached(
            tokens.map((r) => [r[p]!]),
            cache,
            { attentionReports: reports },
          )
          const stepValues = (await step.array()) as number[][][]
          step.dispose()
          for (let b = 0; b < 2; b++) expectArraysClose(stepValues[b]![0]!, fullValues[b]![p]!, 1e-4)
        }
        expect(cache.positions).toBe(10)
        expect(cache.layers[0]!.promptLength).toBe(4)
        expect(cache.layers[0]!.keys!.shape).toEqual([2, model.config.nKvHeads, 10, model.config.dHead])
        expect(reports.length).toBe(model.config.nLayers * 7)
        expect(reports.every((r) => r.kernel === 'dense' && r.computedPairs === r.totalPairs)).toBe(true)
        expect(() =>
          model.forwardCached(
            [
              [1, 2],
              [3, 4],
            ],
            cache,
          ),
        ).toThrow(/one position at a time/)
        cache.dispose()
        cache.dispose()
      })
      model.dispose()
    })
  }

  it(
    'a toy kernel plugs in for prefill, afterPrefill ' + '(eviction) and decode, through forward and generate',
    async () => {
      const config = createConfig({
        architecture: 'llama',
        dVocab: 11,
        nCtx: 16,
        dModel: 8,
        nLayers: 2,
        nHeads: 4,
        nKvHeads: 2,
        dHead: 4,
        dMlp: 12,
      })
      const model = createTransformer(config)
      randomizeWeights(model, 5, 0.4)
      const calls: string[] = []
      const kernel = slidingWindowKernel(3, calls)
      const tokens = randomTokens(1, 9, 11, 4)
      // Reference: dense attention with a band mask added through the scores hook.
      const bandHook = (scores: tf.Tensor): tf.Tensor => {
        const pos = scores.shape[2] as number
        const values = new Float32Array(pos * pos)
        for (let i = 0; i < pos; i++) for (let j = 0; j <= i; j++) values[i * pos + j] = i - j >= 3 ? -Infinity : 0
        return tf.add(scores, tf.tensor2d(values, [pos, pos]))
      }
      const reference = model.runWithHooks(tokens, { fwdHooks: [[(n) => n.endsWith('hook_attn_scores'), bandHook]] })
      const referenceValues = (await reference.array()) as number[][][]
      reference.dispose()
      // Prefill through the kernel matches.
      const reports: AttentionReport[] = []
      const viaKernel = model.forward(tokens, { attention: kernel, attentionReports: reports })
      expectArraysClose(((await viaKernel.array()) as number[][][])[0]!.flat(), referenceValues[0]!.flat(), 1e-4)
      viaKernel.dispose()
      expect(calls).toEqual(['prefill:0', 'prefill:1'])
      expect(reports[0]).toMatchObject({
        layer: 0,
        kernel: 'sliding-window',
        computedPairs: 4 * (1 + 2 + 3 * 7),
        totalPairs: 4 * 45,
      })
      // Cached decoding with eviction matches the same band attention position by position.
      calls.length = 0
      const cache = new KVCache(config.nLayers)
      model.forwardCached([tokens[0]!.slice(0, 5)], cache, { attention: kernel }).dispose()
      expect(calls).toEqual(['prefill:0', 'afterPrefill:0:5', 'prefill:1', 'afterPrefill:1:5'])
      expect(cache.layers[0]!.keys!.shape[2]).toBe(3) // evicted down to the window
      for (let p = 5; p < 9; p++) {
        const step = model.forwardCached([[tokens[0]![p]!]], cache, { attention: kernel })
        expectArraysClose(((await step.array()) as number[][][])[0]![0]!, referenceValues[0]![p]!, 1e-4)
        step.dispose()
      }
      expect(cache.positions).toBe(9)
      expect(calls.filter((c) => c.startsWith('decode:0'))).toEqual([
        'decode:0:5',
        'decode:0:6',
        'decode:0:7',
        'decode:0:8',
      ])
      cache.dispose()
      // generate() routes through the same kernel and returns its accounting.
      calls.length = 0
      const result = await generate(model, tokens[0]!.slice(0, 5), { maxTokens: 3, temperature: 0, attention: kernel })
      expect(result.tokens[0]!.length).toBe(3)
      expect(calls[0]).toBe('prefill:0')
      expect(calls.some((c) => c.startsWith('decode:'))).toBe(true)
      expect(result.attentionReports.some((r) => r.computedPairs < r.totalPairs)).toBe(true)
      model.dispose()
    },
  )
})
