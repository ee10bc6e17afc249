import { describe, expect, it } from 'vitest'
import * as tf from '@tensorflow/tfjs-core'
import { describeWithBackends, expectNoLeaks } from '@attnlab/core/testing'
import { Rng, type LayerKVCache } from '@attnlab/core'
import {
  EvictionState,
  SequenceTooShortError,
  adaSnapKV,
  applyDecode,
  combine,
  dense,
  quest,
  snapKV,
  verticalSlash,
  type SparseAttentionKernel,
} from './index.ts'
import {
  appendToken,
  maxAbsDiff,
  randomQkv,
  referenceAttention,
  referenceDecode,
  referenceWindowProbabilities,
  tensors,
  type Qkv,
} from './__fixtures__/reference.ts'

interface Step {
  qNew: Float32Array
  kNew: Float32Array
  vNew: Float32Array
}

function randomStep(seed: number, x: Qkv): Step {
  const rng = Rng.fromSeed(seed)
  return {
    qNew: rng.split('q').fillNormal(new Float32Array(x.H * x.d)),
    kNew: rng.split('k').fillNormal(new Float32Array(x.Hkv * x.d)),
    vNew: rng.split('v').fillNormal(new Float32Array(x.Hkv * x.dv)),
  }
}

function runDecodeStep(kernel: SparseAttentionKernel, x: Qkv, step: Step) {
  const t = tensors(x)
  const s = {
    qNew: tf.tensor2d(step.qNew, [x.H, x.d]),
    kNew: tf.tensor2d(step.kNew, [x.Hkv, x.d]),
    vNew: tf.tensor2d(step.vNew, [x.Hkv, x.dv]),
  }
  try {
    const r = applyDecode(kernel, t, s)
    const output = r.output.dataSync().slice()
    r.output.dispose()
    return { ...r, output }
  } finally {
    tf.dispose([t.q, t.k, t.v, s.qNew, s.kNew, s.vNew])
  }
}

function reference(x: Qkv, step: Step, mask: Uint8Array | null): Float64Array {
  const keys = appendToken(x.k, step.kNew, x.Hkv, x.T, x.d)
  const values = appendToken(x.v, step.vNew, x.Hkv, x.T, x.dv)
  return referenceDecode(step.qNew, keys, values, mask, x.H, x.Hkv, x.T + 1, x.d, x.dv)
}

const pick = (scores: number[], count: number) =>
  scores
    .map((s, i) => ({ s, i }))
    .sort((a, b) => (a.s === b.s ? a.i - b.i : b.s - a.s))
    .slice(0, count)
    .map((o) => o.i)

/** Independent SnapKV / Ada-SnapKV importance per KV head (float64). */
function referenceImportance(
  x: Qkv,
  W: number,
  kernel: number,
  prefix: number,
  local: number,
  aggregation: 'mean' | 'max',
): number[][] {
  const P = referenceWindowProbabilities(x, W)
  const { H, Hkv, T } = x
  const group = H / Hkv
  const out: number[][] = []
  for (let kv = 0; kv < Hkv; kv++) {
    const importance = new Array<number>(T).fill(0)
    for (let g = 0; g < group; g++) {
      const h = kv * group + g
      for (let j = 0; j < T; j++) {
        let agg = 0
        for (let i = 0; i < W; i++) {
          const p = P[(h * W + i) * T + j] as number
          agg = aggregation === 'mean' ? agg + p : Math.max(agg, p)
        }
        importance[j] =
          aggregation === 'mean' ? (importance[j] as number) + agg / group : Math.max(importance[j] as number, agg)
      }
    }
    const half = Math.floor(kernel / 2)
    const pooled = importance.map((_, j) => {
      let s = 0
      for (let t = j - half; t <= j + half; t++) if (t >= 0 && t < T) s += importance[t] as number
      return s / kernel
    })
    for (let j = 0; j < T; j++) if (j < prefix || j >= T - local) pooled[j] = Infinity
    out.push(pooled)
  }
  return out
}

function promptPart(mask: Uint8Array, h: number, T: number): number[] {
  const kept: number[] = []
  for (let j = 0; j < T; j++) if (mask[h * (T + 1) + j]) kept.push(j)
  return kept
}

describeWithBackends('decode methods', () => {
  const x = randomQkv(3, 4, 2, 48, 8)
  const step = randomStep(4, x)

  it('dense decode equals softmax attention over the whole cache', async () => {
    const r = await expectNoLeaks(() => runDecodeStep(dense(), x, step))
    expect(maxAbsDiff(r.output, reference(x, step, null))).toBeLessThan(1e-5)
    expect(r.sparsity).toEqual({ exact: 0, reported: 0 })
    expect(r.maskShape).toEqual([4, 49])
  })

  it('prefill methods decode densely', () => {
    const r = runDecodeStep(verticalSlash({ verticalSize: 4, slashSize: 4, local: 2, window: 4 }), x, step)
    expect(maxAbsDiff(r.output, reference(x, step, null))).toBeLessThan(1e-5)
  })

  describe('snapkv', () => {
    const config = { capacity: 12, window: 6, kernelSize: 3, local: 4, prefix: 2 } as const

    it('with capacity >= prompt keeps everything and equals dense', async () => {
      const r = await expectNoLeaks(() => runDecodeStep(snapKV({ ...config, capacity: 48 }), x, step))
      expect(maxAbsDiff(r.output, reference(x, step, null))).toBeLessThan(1e-5)
      expect(r.sparsity.reported).toBe(0)
    })

    it('keeps the top-C pooled tokens per KV head (mean over the group), forced ends, the new token', async () => {
      const r = await expectNoLeaks(() => runDecodeStep(snapKV(config), x, step))
      const { H, T } = x
      const importance = referenceImportance(x, 6, 3, 2, 4, 'mean')
      for (let h = 0; h < H; h++) {
        const kv = Math.floor(h / 2)
        const expected = pick(importance[kv] as number[], 12).sort((a, b) => a - b)
        expect(promptPart(r.mask, h, T), `head ${h}`).toEqual(expected)
        expect(r.mask[h * (T + 1) + T]).toBe(1) // the new token
        for (const j of [0, 1, 44, 45, 46, 47]) expect(r.mask[h * (T + 1) + j]).toBe(1)
      }
      expect(r.sparsity.reported).toBeCloseTo(1 - 12 / 48, 12)
      expect(r.sparsity.exact).toBeCloseTo(1 - 13 / 49, 12)
      expect(maxAbsDiff(r.output, reference(x, step, r.mask))).toBeLessThan(1e-5)
    })
  })

  describe('ada-snapkv', () => {
    const config = { capacity: 12, window: 6, kernelSize: 3, local: 4, prefix: 2, minHeadRatio: 0.2 } as const

    it('with capacity >= prompt keeps everything and equals dense', async () => {
      const r = await expectNoLeaks(() => runDecodeStep(adaSnapKV({ ...config, capacity: 60 }), x, step))
      expect(maxAbsDiff(r.output, reference(x, step, null))).toBeLessThan(1e-5)
    })

    it('takes per-head floors then the global top (max aggregation); head lengths differ', () => {
      const y = randomQkv(21, 4, 2, 48, 8, 8, 2.5) // peaky attention so heads differ
      const r = runDecodeStep(adaSnapKV(config), y, step)
      const { T } = y
      const importance = referenceImportance(y, 6, 3, 2, 4, 'max')
      const floor = Math.max(Math.floor(12 * 0.2), 6)
      const kept = importance.map((s) => pick(s, floor))
      const flat: number[] = []
      importance.forEach((s, kv) => {
        s.forEach((v, j) => {
          flat.push(kept[kv]?.includes(j) ? -Infinity : v)
        })
      })
      for (const i of pick(flat, 2 * 12 - 2 * floor)) kept[Math.floor(i / T)]?.push(i % T)
      const lengths: number[] = []
      for (let kv = 0; kv < 2; kv++) {
        const expected = [...(kept[kv] as number[])].sort((a, b) => a - b)
        lengths.push(expected.length)
        for (const h of [2 * kv, 2 * kv + 1]) expect(promptPart(r.mask, h, T), `head ${h}`).toEqual(expected)
        for (const j of [0, 1, 44, 45, 46, 47]) expect(r.mask[2 * kv * (T + 1) + j]).toBe(1)
      }
      expect(lengths[0]! + lengths[1]!).toBe(24)
      expect(lengths[0]).not.toBe(lengths[1])
      expect(Math.min(...lengths)).toBeGreaterThanOrEqual(floor)
      expect(r.sparsity.reported).toBeCloseTo(1 - 24 / (48 * 2), 12)
      expect(maxAbsDiff(r.output, reference(y, step, r.mask))).toBeLessThan(1e-5)
    })

    it('aggregates differently from SnapKV (max vs mean)', () => {
      const y = randomQkv(21, 4, 2, 48, 8, 8, 2.5)
      const a = runDecodeStep(adaSnapKV({ ...config, minHeadRatio: 1 }), y, step)
      const { minHeadRatio: _, ...snap } = config
      const s = runDecodeStep(snapKV(snap), y, step)
      expect(Array.from(a.mask)).not.toEqual(Array.from(s.mask))
    })
  })

  describe('quest', () => {
    const x64 = randomQkv(9, 4, 2, 64, 8)
    const step64 = randomStep(10, x64)

    function referencePages(y: Qkv, s: Step, P: number, pages: number, share: boolean): number[][] {
      const { H, Hkv, T, d } = y
      const keys = appendToken(y.k, s.kNew, Hkv, T, d)
      const current = Math.floor(T / P)
      const perHead: number[][] = []
      const scores = (h: number) => {
        const kv = Math.floor(h / (H / Hkv))
        const out: number[] = []
        for (let p = 0; p < current; p++) {
          let score = 0
          for (let c = 0; c < d; c++) {
            let lo = Infinity
            let hi = -Infinity
            for (let t = p * P; t < (p + 1) * P; t++) {
              lo = Math.min(lo, keys[(kv * (T + 1) + t) * d + c] as number)
              hi = Math.max(hi, keys[(kv * (T + 1) + t) * d + c] as number)
            }
            const qc = s.qNew[h * d + c] as number
            score += Math.max(qc * lo, qc * hi)
          }
          out.push(score)
        }
        return out
      }
      for (let h = 0; h < H; h++) {
        if (share) {
          const g0 = h - (h % (H / Hkv))
          const summed = scores(g0).map((v, p) => v + (scores(g0 + 1)[p] as number))
          perHead.push(pick(summed, pages))
        } else perHead.push(pick(scores(h), pages))
      }
      return perHead
    }

    it('reads the top pages by the min/max bound plus the current page (shared within a GQA group)', async () => {
      for (const sharePages of [true, false]) {
        const r = await expectNoLeaks(() =>
          runDecodeStep(quest({ tokenBudget: 16, pageSize: 8, sharePages }), x64, step64),
        )
        const { H, T } = x64
        const expectedPages = referencePages(x64, step64, 8, 2, sharePages)
        for (let h = 0; h < H; h++) {
          const expected: number[] = []
          for (const p of (expectedPages[h] as number[]).sort((a, b) => a - b))
            for (let t = p * 8; t < p * 8 + 8; t++) expected.push(t)
          expected.push(64) // current page 8 holds only the new token
          const got: number[] = []
          for (let j = 0; j <= T; j++) if (r.mask[h * (T + 1) + j]) got.push(j)
          expect(got, `head ${h} share ${sharePages}`).toEqual(expected)
        }
        expect(r.sparsity.reported).toBeCloseTo(1 - 16 / 64, 12)
        expect(maxAbsDiff(r.output, reference(x64, step64, r.mask))).toBeLessThan(1e-5)
        const heads = [0, 1].map((h) => r.mask.subarray(h * (T + 1), (h + 1) * (T + 1)).join(''))
        if (sharePages) expect(heads[0]).toBe(heads[1])
      }
    })

    it('with the largest budget the prompt allows drops exactly one page', () => {
      // budget (c - 1) pages is the maximum: Quest can never read every page (c >= budget + 1)
      const r = runDecodeStep(quest({ tokenBudget: 56, pageSize: 8 }), x64, step64)
      for (let h = 0; h < 4; h++) {
        let count = 0
        for (let j = 0; j <= 64; j++) count += r.mask[h * 65 + j] as number
        expect(count).toBe(57)
      }
      expect(maxAbsDiff(r.output, reference(x64, step64, r.mask))).toBeLessThan(1e-5)
    })

    it('needs the prompt longer than budget/page + 1 pages', () => {
      expect(() => runDecodeStep(quest({ tokenBudget: 64, pageSize: 8 }), x64, step64)).toThrow(SequenceTooShortError)
      expect(() => runDecodeStep(quest({ tokenBudget: 64, pageSize: 8 }), x64, step64)).toThrow(
        /needs at least 72 tokens/,
      )
      // 64 = (7 + 1) * 8 is just enough for a budget of 7 pages... and 56 tokens
      expect(() => runDecodeStep(quest({ tokenBudget: 56, pageSize: 8 }), x64, step64)).not.toThrow()
    })
  })

  describe('generation through the kernel contract', () => {
    // What a model does: prefill, afterPrefill, then append each new token and decode.
    function generate(kernel: SparseAttentionKernel, y: Qkv, steps: Step[]) {
      const keysAll = [y.k]
      const q4 = tf.tensor4d(y.q, [1, y.H, y.T, y.d])
      const k4 = tf.tensor4d(y.k, [1, y.Hkv, y.T, y.d])
      const v4 = tf.tensor4d(y.v, [1, y.Hkv, y.T, y.dv])
      const cache: LayerKVCache = {
        keys: tf.keep(tf.clone(k4)),
        values: tf.keep(tf.clone(v4)),
        positions: y.T,
        promptLength: y.T,
        kernelState: null,
      }
      const results: { output: Float32Array; mask: Uint8Array }[] = []
      try {
        const pre = kernel.prefill(
          { q: q4, k: k4, v: v4, scale: 1 / Math.sqrt(y.d), layer: 0 },
          { hooks: {}, needsPattern: false },
        )
        pre.z.dispose()
        kernel.afterPrefill?.({ q: q4, k: k4, v: v4, scale: 1 / Math.sqrt(y.d), layer: 0 }, cache)
        steps.forEach((s, n) => {
          const position = y.T + n
          const append = (stored: tf.Tensor4D | null, data: Float32Array, width: number) => {
            const next = tf.keep(
              tf.concat([stored as tf.Tensor4D, tf.tensor4d(data, [1, y.Hkv, 1, width])], 2) as tf.Tensor4D,
            )
            stored?.dispose()
            return next
          }
          tf.tidy(() => {
            cache.keys = append(cache.keys, s.kNew, y.d)
            cache.values = append(cache.values, s.vNew, y.dv)
          })
          cache.positions = position + 1
          const q = tf.tensor4d(s.qNew, [1, y.H, 1, y.d])
          const r = (kernel as SparseAttentionKernel).decodeWithMask({
            q,
            cache,
            position,
            scale: 1 / Math.sqrt(y.d),
            layer: 0,
          })
          results.push({ output: r.z.dataSync() as Float32Array, mask: r.mask })
          tf.dispose([q, r.z])
        })
      } finally {
        tf.dispose([q4, k4, v4, cache.keys as tf.Tensor, cache.values as tf.Tensor])
        cache.kernelState?.dispose()
      }
      void keysAll
      return results
    }

    it('never evicts generated tokens and matches the masked reference at every step', async () => {
      const steps = [randomStep(31, x), randomStep(32, x), randomStep(33, x)]
      for (const kernel of [
        snapKV({ capacity: 10, window: 6, kernelSize: 3, local: 4, prefix: 2 }),
        adaSnapKV({ capacity: 10, window: 6, kernelSize: 3, local: 4, prefix: 2 }),
        quest({ tokenBudget: 16, pageSize: 8 }),
      ]) {
        const results = await expectNoLeaks(() => generate(kernel, x, steps))
        let keys = x.k
        let values = x.v
        results.forEach((r, n) => {
          const P = x.T + n + 1
          keys = appendToken(keys, steps[n]!.kNew, x.Hkv, P - 1, x.d)
          values = appendToken(values, steps[n]!.vNew, x.Hkv, P - 1, x.dv)
          for (let h = 0; h < x.H; h++)
            for (let j = x.T; j < P; j++) expect(r.mask[h * P + j], `${kernel.name} step ${n}`).toBe(1)
          const expected = referenceDecode(steps[n]!.qNew, keys, values, r.mask, x.H, x.Hkv, P, x.d, x.dv)
          expect(maxAbsDiff(r.output, expected), kernel.name).toBeLessThan(1e-5)
        })
        if (kernel.method !== 'quest') {
          // the kept prompt set does not change between steps
          const prompt = (m: Uint8Array, P: number) =>
            Array.from({ length: x.H * x.T }, (_, n) => m[Math.floor(n / x.T) * P + (n % x.T)])
          expect(prompt(results[2]!.mask, x.T + 3)).toEqual(prompt(results[0]!.mask, x.T + 1))
        }
      }
    })

    it('hooks see [batch, nHeads, 1, position + 1] tensors and give the same output', () => {
      const kernel = adaSnapKV({ capacity: 10, window: 6, kernelSize: 3, local: 4, prefix: 2 })
      const q4 = tf.tensor4d(x.q, [1, x.H, x.T, x.d])
      const k4 = tf.tensor4d(x.k, [1, x.Hkv, x.T, x.d])
      const v4 = tf.tensor4d(x.v, [1, x.Hkv, x.T, x.dv])
      const cache: LayerKVCache = {
        keys: tf.keep(tf.clone(k4)),
        values: tf.keep(tf.clone(v4)),
        positions: x.T,
        promptLength: x.T,
        kernelState: null,
      }
      const scale = 1 / Math.sqrt(x.d)
      try {
        kernel.afterPrefill?.({ q: q4, k: k4, v: v4, scale, layer: 0 }, cache)
        expect(cache.kernelState).toBeInstanceOf(EvictionState)
        const state = cache.kernelState as EvictionState
        expect(cache.keys?.shape).toEqual([1, 2, state.width, 8])
        const newKeys = tf.keep(
          tf.concat([cache.keys as tf.Tensor4D, tf.tensor4d(step.kNew, [1, 2, 1, 8])], 2) as tf.Tensor4D,
        )
        const newValues = tf.keep(
          tf.concat([cache.values as tf.Tensor4D, tf.tensor4d(step.vNew, [1, 2, 1, 8])], 2) as tf.Tensor4D,
        )
        cache.keys?.dispose()
        cache.values?.dispose()
        cache.keys = newKeys
        cache.values = newValues
        const q = tf.tensor4d(step.qNew, [1, 4, 1, 8])
        const plain = kernel.decodeWithMask({ q, cache, position: x.T, scale, layer: 0 })
        const shapes: number[][] = []
        let patternSum = 0
        const hooked = kernel.decodeWithMask(
          { q, cache, position: x.T, scale, layer: 0 },
          {
            needsPattern: true,
            hooks: {
              attnScores: (s) => {
                shapes.push(s.shape)
                return s
              },
              pattern: (p) => {
                shapes.push(p.shape)
                patternSum = tf.sum(p).dataSync()[0] as number
                return p
              },
            },
          },
        )
        expect(shapes).toEqual([
          [1, 4, 1, 49],
          [1, 4, 1, 49],
        ])
        expect(patternSum).toBeCloseTo(4, 4)
        expect(maxAbsDiff(hooked.z.dataSync(), plain.z.dataSync())).toBeLessThan(1e-6)
        expect(Array.from(hooked.mask)).toEqual(Array.from(plain.mask))
        tf.dispose([q, plain.z, hooked.z])
      } finally {
        tf.dispose([q4, k4, v4, cache.keys as tf.Tensor, cache.values as tf.Tensor])
      }
    })

    it('rejects a decode on a cache that afterPrefill did not compact', () => {
      const k4 = tf.tensor4d(appendToken(x.k, step.kNew, 2, 48, 8), [1, 2, 49, 8])
      const v4 = tf.tensor4d(appendToken(x.v, step.vNew, 2, 48, 8), [1, 2, 49, 8])
      const q = tf.tensor4d(step.qNew, [1, 4, 1, 8])
      const cache: LayerKVCache = { keys: k4, values: v4, positions: 49, promptLength: 48, kernelState: null }
      try {
        expect(() =>
          snapKV({ capacity: 10, local: 4, prefix: 2 }).decode(
            { q, cache, position: 48, scale: 1, layer: 0 },
            { hooks: {}, needsPattern: false },
          ),
        ).toThrow(/afterPrefill/)
        expect(() =>
          dense().decode({ q, cache, position: 50, scale: 1, layer: 0 }, { hooks: {}, needsPattern: false }),
        ).toThrow(/dense decode needs the full cache/)
        expect(() =>
          dense().decode(
            { q, cache: { ...cache, keys: null }, position: 48, scale: 1, layer: 0 },
            { hooks: {}, needsPattern: false },
          ),
        ).toThrow(/null/)
        expect(() =>
          dense().decode({ q, cache, position: 20, scale: 1, layer: 0 }, { hooks: {}, needsPattern: false }),
        ).toThrow(/cache holds 49 entries/)
      } finally {
        tf.dispose([k4, v4, q])
      }
    })
  })

  it('combine() runs a prefill method and a decode method in one kernel', () => {
    const kernel = combine(
      verticalSlash({ verticalSize: 4, slashSize: 4, local: 2, window: 4, kernelBlockSize: 8 }),
      quest({ tokenBudget: 16, pageSize: 8 }),
    )
    expect(kernel.name).toBe('vertical-slash+quest')
    expect(kernel.phases).toEqual(['prefill', 'decode'])
    const x64 = randomQkv(9, 4, 2, 64, 8)
    const step64 = randomStep(10, x64)
    const r = runDecodeStep(kernel, x64, step64)
    const q = runDecodeStep(quest({ tokenBudget: 16, pageSize: 8 }), x64, step64)
    expect(Array.from(r.mask)).toEqual(Array.from(q.mask))
    const t = tensors(x64)
    try {
      const pre = kernel.prefillWithMask({
        q: tf.expandDims(t.q, 0) as tf.Tensor4D,
        k: tf.expandDims(t.k, 0) as tf.Tensor4D,
        v: tf.expandDims(t.v, 0) as tf.Tensor4D,
        scale: 1 / Math.sqrt(8),
        layer: 0,
      })
      expect(pre.sparsity.exact).toBeGreaterThan(0)
      expect(maxAbsDiff(pre.z.dataSync(), referenceAttention(x64, pre.mask))).toBeLessThan(1e-5)
      pre.z.dispose()
    } finally {
      tf.dispose([t.q, t.k, t.v])
    }
    expect(() => combine(snapKV(), quest())).toThrow(/prefillKernel/)
    expect(() => combine(verticalSlash(), verticalSlash())).toThrow(/decodeKernel/)
    expect(combine(dense(), snapKV()).name).toBe('dense+snapkv')
  })

  it('applyDecode names the offending tensor', () => {
    const t = tensors(x)
    const bad = {
      qNew: tf.zeros([4, 7]) as tf.Tensor2D,
      kNew: tf.zeros([2, 8]) as tf.Tensor2D,
      vNew: tf.zeros([2, 8]) as tf.Tensor2D,
    }
    try {
      expect(() => applyDecode(dense(), t, bad)).toThrow(/q_new/)
      expect(() =>
        applyDecode(dense(), t, {
          ...bad,
          qNew: tf.zeros([4, 8]) as tf.Tensor2D,
          kNew: tf.zeros([3, 8]) as tf.Tensor2D,
        }),
      ).toThrow(/k_new/)
    } finally {
      tf.dispose([t.q, t.k, t.v, bad.qNew, bad.kNew, bad.vNew])
    }
  })
})
