import { describe, expect, it } from 'vitest'
import * as tf from '@tensorflow/tfjs-core'
import { describeWithBackends, expectNoLeaks } from '@attnlab/core/testing'
import { ShapeError } from '@attnlab/core'
import {
  applyPrefill,
  blockSparse,
  blockSparseSparsity,
  buildVerticalSlashIndex,
  dense,
  flexPrefill,
  verticalSlash,
  type SparseAttentionKernel,
} from './index.ts'
import {
  maxAbsDiff,
  randomQkv,
  referenceAttention,
  referenceWindowProbabilities,
  tensors,
  type Qkv,
} from './__fixtures__/reference.ts'

function run(kernel: SparseAttentionKernel, x: Qkv) {
  const t = tensors(x)
  try {
    const result = applyPrefill(kernel, t)
    const output = result.output.dataSync().slice()
    result.output.dispose()
    return { ...result, output }
  } finally {
    tf.dispose([t.q, t.k, t.v])
  }
}

function expectCausal(mask: Uint8Array, H: number, T: number): void {
  for (let h = 0; h < H; h++)
    for (let i = 0; i < T; i++) for (let j = i + 1; j < T; j++) expect(mask[(h * T + i) * T + j]).toBe(0)
}

function exactSparsityOf(mask: Uint8Array, H: number, T: number): number {
  let count = 0
  for (const m of mask) count += m
  return 1 - count / (H * ((T * (T + 1)) / 2))
}

/** Independent Vertical-Slash selection from float64 window probabilities. */
function referenceLines(
  x: Qkv,
  h: number,
  W: number,
  V: number,
  S: number,
  sinks: number,
  local: number,
  normalise = false,
) {
  const P = referenceWindowProbabilities(x, W)
  const { T } = x
  const vertical = new Array<number>(T).fill(0)
  const slash = new Array<number>(T).fill(0)
  for (let i = 0; i < W; i++) {
    const pos = T - W + i
    for (let j = 0; j <= pos; j++) {
      const p = P[(h * W + i) * T + j] as number
      vertical[j] = (vertical[j] as number) + (normalise ? p / W : p)
      slash[pos - j] = (slash[pos - j] as number) + (normalise ? p / W : p)
    }
  }
  const pick = (scores: number[], count: number, forced: number) => {
    const order = scores.map((s, i) => ({ s: i < forced ? Infinity : s, i }))
    order.sort((a, b) => (a.s === b.s ? a.i - b.i : b.s - a.s))
    return order.slice(0, Math.min(count, scores.length)).map((o) => o.i)
  }
  return { verticals: pick(vertical, V, sinks), slashes: pick(slash, S, local), vertical, slash }
}

describeWithBackends('prefill methods', () => {
  const x = randomQkv(7, 4, 2, 40, 8)

  it('dense equals softmax attention and reports zero sparsity', async () => {
    const r = await expectNoLeaks(() => run(dense(), x))
    expect(maxAbsDiff(r.output, referenceAttention(x, null))).toBeLessThan(1e-5)
    expect(r.sparsity).toEqual({ exact: 0, reported: 0 })
  })

  describe('vertical-slash', () => {
    const small = { verticalSize: 6, slashSize: 6, window: 8, sinks: 2, local: 3, kernelBlockSize: 8 } as const

    it('with a budget covering everything equals dense (both mask modes)', async () => {
      for (const maskMode of ['kernel', 'exact'] as const) {
        const r = await expectNoLeaks(() =>
          run(verticalSlash({ ...small, verticalSize: 40, slashSize: 40, maskMode }), x),
        )
        expect(maxAbsDiff(r.output, referenceAttention(x, null))).toBeLessThan(1e-5)
        expect(r.sparsity.exact).toBe(0)
      }
    })

    it('selects the study lines per query head (exact mode equals an independent selection)', () => {
      const r = run(verticalSlash({ ...small, maskMode: 'exact' }), x)
      const { H, T } = x
      for (let h = 0; h < H; h++) {
        const { verticals, slashes } = referenceLines(x, h, 8, 6, 6, 2, 3)
        for (let i = 0; i < T; i++) {
          for (let j = 0; j <= i; j++) {
            const expected = verticals.includes(j) || slashes.includes(i - j) ? 1 : 0
            expect(r.mask[(h * T + i) * T + j], `head ${h} pair (${i}, ${j})`).toBe(expected)
          }
        }
      }
      // query heads 0 and 1 share KV head 0 yet estimate separately
      const perHead = (h: number) => r.mask.subarray(h * T * T, (h + 1) * T * T).join('')
      expect(perHead(0)).not.toBe(perHead(1))
    })

    it('kernel mode computes the index blocks and columns, a superset of the exact lines', () => {
      const kernelRun = run(verticalSlash(small), x)
      const exactRun = run(verticalSlash({ ...small, maskMode: 'exact' }), x)
      const { H, T } = x
      expectCausal(kernelRun.mask, H, T)
      for (let n = 0; n < kernelRun.mask.length; n++) if (exactRun.mask[n]) expect(kernelRun.mask[n]).toBe(1)
      expect(kernelRun.sparsity.exact).toBeLessThan(exactRun.sparsity.exact)
      // reported = the kernel accounting of the same lines, averaged over heads
      let reported = 0
      for (let h = 0; h < H; h++) {
        const { verticals, slashes } = referenceLines(x, h, 8, 6, 6, 2, 3)
        reported += buildVerticalSlashIndex(verticals, slashes, T, 8).reportedSparsity / H
      }
      expect(kernelRun.sparsity.reported).toBeCloseTo(reported, 12)
      expect(exactRun.sparsity.reported).toBeCloseTo(reported, 12)
    })

    it('keeps the forced sinks and local distances, and equals attention restricted to its own mask', () => {
      for (const maskMode of ['kernel', 'exact'] as const) {
        const r = run(verticalSlash({ ...small, maskMode }), x)
        const { H, T } = x
        for (let h = 0; h < H; h++) {
          for (let i = 0; i < T; i++) {
            for (let j = 0; j < Math.min(2, i + 1); j++) expect(r.mask[(h * T + i) * T + j]).toBe(1)
            for (let d = 0; d < Math.min(3, i + 1); d++) expect(r.mask[(h * T + i) * T + i - d]).toBe(1)
          }
        }
        expect(r.sparsity.exact).toBeCloseTo(exactSparsityOf(r.mask, H, T), 12)
        expect(r.sparsity.exact).toBeGreaterThan(maskMode === 'exact' ? 0.3 : 0.1)
        expect(maxAbsDiff(r.output, referenceAttention(x, r.mask))).toBeLessThan(1e-5)
      }
    })

    it('does not leak tensors', async () => {
      await expectNoLeaks(() => run(verticalSlash(small), x))
    })
  })

  describe('flexprefill (tau = 0, as evaluated)', () => {
    const base = { window: 8, sinks: 2, local: 3, kernelBlockSize: 8 } as const

    it('alpha = 0 is uniform Vertical-Slash with V = S = minBudget', () => {
      const flex = run(flexPrefill({ ...base, alpha: 0, minBudget: 5 }), x)
      const vs = run(verticalSlash({ ...base, verticalSize: 5, slashSize: 5 }), x)
      // identical selection (mean vs sum scores rank the same)
      expect(Array.from(flex.mask)).toEqual(Array.from(vs.mask))
      expect(flex.sparsity.reported).toBeCloseTo(vs.sparsity.reported, 12)
    })

    it('sizes each head by coverage alpha (max with minBudget) and forces after sizing', () => {
      const alpha = 0.5
      const r = run(flexPrefill({ ...base, alpha, minBudget: 3, maskMode: 'exact' }), x)
      const { H, T } = x
      let verticals = 0
      for (let h = 0; h < H; h++) {
        const { vertical, slash } = referenceLines(x, h, 8, 0, 0, 0, 0, true)
        const cover = (s: number[]) => {
          const sorted = [...s].sort((a, b) => b - a)
          let sum = 0
          let k = 0
          for (const v of sorted) {
            sum += v
            if (sum <= alpha) k++
            else break
          }
          return Math.min(T, k + 1)
        }
        const V = Math.max(3, cover(vertical))
        const S = Math.max(3, cover(slash))
        verticals += V / H
        const expected = referenceLines(x, h, 8, V, S, 2, 3, true)
        for (let i = 0; i < T; i++) {
          for (let j = 0; j <= i; j++) {
            const e = expected.verticals.includes(j) || expected.slashes.includes(i - j) ? 1 : 0
            expect(r.mask[(h * T + i) * T + j]).toBe(e)
          }
        }
      }
      expect(r.extra.verticals).toBeCloseTo(verticals, 12)
      expect(maxAbsDiff(r.output, referenceAttention(x, r.mask))).toBeLessThan(1e-5)
    })

    it('alpha = 1 covers everything and equals dense', async () => {
      const r = await expectNoLeaks(() => run(flexPrefill({ ...base, alpha: 1, minBudget: 3 }), x))
      expect(maxAbsDiff(r.output, referenceAttention(x, null))).toBeLessThan(1e-5)
    })
  })

  describe('flexprefill (tau > 0, original block level)', () => {
    const y = randomQkv(11, 4, 2, 64, 8)
    const base = { blockSize: 8, minBudget: 8, window: 8, sinks: 2, local: 3 } as const

    it('falls back to dense for short sequences', () => {
      const r = run(flexPrefill({ ...base, tau: 0.1, blockSize: 32 }), y)
      expect(r.extra.denseFallback).toBe(1)
      expect(maxAbsDiff(r.output, referenceAttention(y, null))).toBeLessThan(1e-5)
    })

    it('covers everything with alpha = 1 (equals dense)', () => {
      const r = run(flexPrefill({ ...base, tau: 1e-9, alpha: 1 }), y)
      expect(r.extra.denseFallback).toBe(0)
      expect(maxAbsDiff(r.output, referenceAttention(y, null))).toBeLessThan(1e-5)
    })

    it('switches heads to query-aware below tau; keeps the first and diagonal blocks; exact over its mask', () => {
      const { H, T } = y
      for (const [tau, fraction] of [
        [10, 1],
        [1e-9, 0],
      ] as const) {
        const r = run(flexPrefill({ ...base, tau, alpha: 0.3 }), y)
        expect(r.extra.queryAwareFraction).toBe(fraction)
        expectCausal(r.mask, H, T)
        for (let h = 0; h < H; h++) {
          for (let i = 0; i < T; i++) {
            const m0 = Math.floor(i / 8) * 8
            for (let j = 0; j < Math.min(8, i + 1); j++) expect(r.mask[(h * T + i) * T + j]).toBe(1)
            for (let j = m0; j <= i; j++) expect(r.mask[(h * T + i) * T + j]).toBe(1)
          }
        }
        expect(r.sparsity.exact).toBeGreaterThan(0)
        expect(maxAbsDiff(r.output, referenceAttention(y, r.mask))).toBeLessThan(1e-5)
      }
    })
  })

  describe('block-sparse', () => {
    const y = randomQkv(5, 4, 2, 60, 8) // 8 blocks of 8, the last one partial

    it('with K >= number of blocks equals dense', async () => {
      const r = await expectNoLeaks(() => run(blockSparse({ blockSize: 8, topK: 8 }), y))
      expect(maxAbsDiff(r.output, referenceAttention(y, null))).toBeLessThan(1e-5)
      expect(r.sparsity.exact).toBe(0)
      expect(r.sparsity.reported).toBe(0)
    })

    it('K = 3 keeps exactly the first, sub-diagonal and diagonal blocks', () => {
      const r = run(blockSparse({ blockSize: 8, topK: 3 }), y)
      const { H, T } = y
      for (let h = 0; h < H; h++) {
        for (let i = 0; i < T; i++) {
          const m = Math.floor(i / 8)
          for (let j = 0; j <= i; j++) {
            const b = Math.floor(j / 8)
            expect(r.mask[(h * T + i) * T + j]).toBe(b === 0 || b === m || b === m - 1 ? 1 : 0)
          }
        }
      }
      expect(r.sparsity.reported).toBeCloseTo(blockSparseSparsity(60, 8, 3), 12)
      expect(maxAbsDiff(r.output, referenceAttention(y, r.mask))).toBeLessThan(1e-5)
    })

    it('K = 4 adds the block with the best raw pooled score, per query head (GQA-aware)', () => {
      const r = run(blockSparse({ blockSize: 8, topK: 4 }), y)
      const { H, Hkv, T, d } = y
      const pool = (data: Float32Array, head: number, block: number) => {
        const out = new Array<number>(d).fill(0)
        for (let t = block * 8; t < Math.min(T, block * 8 + 8); t++)
          for (let c = 0; c < d; c++) out[c] = (out[c] as number) + (data[(head * T + t) * d + c] as number) / 8
        return out
      }
      const heads: string[] = []
      for (let h = 0; h < H; h++) {
        const kv = Math.floor(h / (H / Hkv))
        let signature = ''
        for (let m = 3; m < 8; m++) {
          const qb = pool(y.q, h, m)
          let best = -1
          let bestScore = -Infinity
          for (let j = 1; j < m - 1; j++) {
            const kb = pool(y.k, kv, j)
            const s = qb.reduce((a, v, c) => a + v * (kb[c] as number), 0)
            if (s > bestScore) {
              bestScore = s
              best = j
            }
          }
          signature += best
          const i = m * 8 // first row of the query block
          for (let j = 8; j < (m - 1) * 8; j++) {
            expect(r.mask[(h * T + i) * T + j], `head ${h} block ${m} key ${j}`).toBe(
              Math.floor(j / 8) === best ? 1 : 0,
            )
          }
        }
        heads.push(signature)
      }
      expect(heads[0]).not.toBe(heads[1]) // same KV head, own selection
      expect(maxAbsDiff(r.output, referenceAttention(y, r.mask))).toBeLessThan(1e-5)
    })
  })

  it('rejects inconsistent shapes naming the tensor', () => {
    const q = tf.zeros([1, 3, 8, 4]) as tf.Tensor4D
    const k = tf.zeros([1, 2, 8, 4]) as tf.Tensor4D
    const v = tf.zeros([1, 2, 8, 4]) as tf.Tensor4D
    const k2 = tf.zeros([1, 2, 7, 4]) as tf.Tensor4D
    const q2 = tf.zeros([1, 2, 8, 4]) as tf.Tensor4D
    try {
      expect(() => dense().prefill({ q, k, v, scale: 0.5, layer: 0 }, { hooks: {}, needsPattern: false })).toThrow(
        /multiple of nKvHeads/,
      )
      expect(() => verticalSlash().prefillWithMask({ q: q2, k: k2, v, scale: 0.5, layer: 0 })).toThrow(ShapeError)
      expect(() => verticalSlash().prefillWithMask({ q: q2, k: k2, v, scale: 0.5, layer: 0 })).toThrow(
        /'k' has shape|k has shape/,
      )
      expect(() => verticalSlash().prefillWithMask({ q: q2, k, v, scale: NaN, layer: 0 })).toThrow(/scale/)
    } finally {
      tf.dispose([q, k, v, k2, q2])
    }
  })
})
