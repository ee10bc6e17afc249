import * as tf from '@tensorflow/tfjs-core'
import { expect, it } from 'vitest'
import { ConfigError, ShapeError } from '../errors.ts'
import { Rng } from '../rng.ts'
import { describeWithBackends, expectNoLeaks } from '../testing.ts'
import { pageSelect } from './page-select.ts'

interface Case {
  batch: number
  nHeads: number
  nKvHeads: number
  dHead: number
  pages: number
  capacity: number
  budget: number
  share: boolean
}

/** Bounds `[rows, 2, d, capacity]` with min <= max (and junk past `pages`, never read). */
function randomBounds(rng: Rng, c: Case): Float32Array {
  const rows = c.batch * c.nKvHeads
  const out = new Float32Array(rows * 2 * c.dHead * c.capacity)
  for (let r = 0; r < rows; r++) {
    for (let d = 0; d < c.dHead; d++) {
      for (let p = 0; p < c.capacity; p++) {
        const a = rng.normal()
        const b = rng.normal()
        const lo = ((r * 2 + 0) * c.dHead + d) * c.capacity + p
        const hi = ((r * 2 + 1) * c.dHead + d) * c.capacity + p
        out[lo] = p < c.pages ? Math.min(a, b) : Number.NaN
        out[hi] = p < c.pages ? Math.max(a, b) : Number.NaN
      }
    }
  }
  return out
}

/** Quest's selection in doubles with a full sort (independent of the kernels' quickselect). */
function reference(q: Float32Array, bounds: Float32Array, c: Case): number[][] {
  const group = c.nHeads / c.nKvHeads
  const scores = (head: number): number[] => {
    const b = Math.floor(head / c.nHeads)
    const row = b * c.nKvHeads + Math.floor((head % c.nHeads) / group)
    return Array.from({ length: c.pages }, (_, p) => {
      let s = 0
      for (let d = 0; d < c.dHead; d++) {
        const x = q[head * c.dHead + d]!
        const lo = bounds[((row * 2 + 0) * c.dHead + d) * c.capacity + p]!
        const hi = bounds[((row * 2 + 1) * c.dHead + d) * c.capacity + p]!
        s += Math.max(x * lo, x * hi)
      }
      return s
    })
  }
  const pick = (s: number[]): number[] =>
    s
      .map((v, p) => [v, p] as const)
      .sort((x, y) => y[0] - x[0] || x[1] - y[1])
      .slice(0, c.budget)
      .map(([, p]) => p)
      .sort((x, y) => x - y)
  const out: number[][] = []
  for (let head = 0; head < c.batch * c.nHeads; head++) {
    if (!c.share) out.push(pick(scores(head)))
    else {
      const first = head - (head % group)
      const summed = new Array<number>(c.pages).fill(0)
      for (let g = 0; g < group; g++) {
        const s = scores(first + g)
        for (let p = 0; p < c.pages; p++) summed[p] = summed[p]! + s[p]!
      }
      out.push(pick(summed))
    }
  }
  return out
}

describeWithBackends('pageSelect', () => {
  const cases: Case[] = [
    { batch: 1, nHeads: 8, nKvHeads: 8, dHead: 64, pages: 512, capacity: 530, budget: 51, share: true },
    { batch: 2, nHeads: 4, nKvHeads: 2, dHead: 7, pages: 37, capacity: 37, budget: 5, share: true },
    { batch: 2, nHeads: 4, nKvHeads: 2, dHead: 9, pages: 23, capacity: 30, budget: 22, share: false },
    { batch: 1, nHeads: 3, nKvHeads: 1, dHead: 16, pages: 1, capacity: 4, budget: 1, share: true },
  ]
  for (const c of cases) {
    it(`picks the pages of a double-precision reference, leaking nothing (${JSON.stringify(c)})`, async () => {
      const rng = Rng.fromSeed(c.pages * 31 + c.dHead)
      const qValues = rng.fillNormal(new Float32Array(c.batch * c.nHeads * c.dHead))
      const boundValues = randomBounds(rng, c)
      const q = tf.tensor4d(qValues, [c.batch, c.nHeads, 1, c.dHead])
      const bounds = tf.tensor4d(boundValues, [c.batch * c.nKvHeads, 2, c.dHead, c.capacity])
      const chosen = await expectNoLeaks(() => {
        const t = pageSelect(q, bounds, c)
        const values = Array.from(t.dataSync())
        t.dispose()
        return values
      })
      tf.dispose([q, bounds])
      const expected = reference(qValues, boundValues, c)
      for (let head = 0; head < c.batch * c.nHeads; head++)
        expect(chosen.slice(head * c.budget, (head + 1) * c.budget), `head ${head}`).toEqual(expected[head])
    })
  }

  it('breaks ties to the lower page and ranks NaN scores last', () => {
    // d = 1, q = 1: the score of page p is max(min, max) = its maximum
    const maxima = [2, Number.NaN, 3, 2, 3, Number.NaN, -1]
    const c = { pages: maxima.length, capacity: maxima.length }
    const bounds = tf.tensor4d([...maxima.map(() => -5), ...maxima], [1, 2, 1, c.capacity])
    const q = tf.tensor4d([1], [1, 1, 1, 1])
    const at = (budget: number): number[] => {
      const t = pageSelect(q, bounds, { ...c, budget, share: true })
      const v = Array.from(t.dataSync())
      t.dispose()
      return v
    }
    expect(at(1)).toEqual([2])
    expect(at(3)).toEqual([0, 2, 4])
    expect(at(5)).toEqual([0, 2, 3, 4, 6])
    expect(at(6)).toEqual([0, 1, 2, 3, 4, 6])
    tf.dispose([q, bounds])
  })

  it('scores q_d (q_d < 0 ? min : max): the float32 max(q_d min, q_d max) bit for bit, special values included', () => {
    // pages whose bounds come from keys with signed zeros, infinities and ties; queries with signed
    // zeros and negative entries. The chosen pages for every budget must be those of the float32
    // maximum (`a > b ? a : b`, the kernels' max before they read one bound), which a wrong sign
    // choice or a different sum would reorder.
    const keysOfPage = [
      [0, -0],
      [-0, 0],
      [Number.POSITIVE_INFINITY, 1],
      [Number.NEGATIVE_INFINITY, -2],
      [3, 3],
      [-1.5, 2.25],
      [1e-30, -1e-30],
      [7, -7],
    ]
    const d = 3
    const pages = keysOfPage.length
    const lo: number[] = []
    const hi: number[] = []
    for (let dim = 0; dim < d; dim++) {
      for (let p = 0; p < pages; p++) {
        // dimension dim of page p's keys: the page's values, rotated by dim so dimensions differ
        const keys = keysOfPage[(p + dim) % pages] as number[]
        let [mn, mx] = [Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY]
        for (const x of keys) {
          if (x < mn) mn = x
          if (x > mx) mx = x
        }
        lo.push(mn)
        hi.push(mx)
      }
    }
    const bounds = tf.tensor4d([...lo, ...hi], [1, 2, d, pages])
    const f = Math.fround
    for (const qv of [
      [1, -0.5, 0],
      [-0, 2, -3],
      [-1, -1, 0.25],
    ]) {
      const score = Array.from({ length: pages }, (_, p) => {
        let sum = 0
        for (let dim = 0; dim < d; dim++) {
          const a = f((qv[dim] as number) * (lo[dim * pages + p] as number))
          const b = f((qv[dim] as number) * (hi[dim * pages + p] as number))
          // biome-ignore lint/complexity/useMathMinMax: the float32 `a > b ? a : b` of the kernels before
          sum = f(sum + (a > b ? a : b))
        }
        return sum
      })
      const order = Array.from({ length: pages }, (_, p) => p).sort((x, y) => {
        const [sx, sy] = [score[x] as number, score[y] as number]
        if (Number.isNaN(sx) !== Number.isNaN(sy)) return Number.isNaN(sx) ? 1 : -1
        return sx === sy || (Number.isNaN(sx) && Number.isNaN(sy)) ? x - y : sy - sx
      })
      const q = tf.tensor4d(qv, [1, 1, 1, d])
      for (let budget = 1; budget <= pages; budget++) {
        const t = pageSelect(q, bounds, { pages, budget, share: false })
        const expected = order.slice(0, budget).sort((x, y) => x - y)
        expect(Array.from(t.dataSync()), `q ${qv}, budget ${budget}`).toEqual(expected)
        t.dispose()
      }
      q.dispose()
    }
    bounds.dispose()
  })

  it('rejects bad shapes and sizes with typed errors naming the problem', () => {
    const q = tf.zeros([1, 4, 1, 8]) as tf.Tensor4D
    const bounds = tf.zeros([2, 2, 8, 10]) as tf.Tensor4D
    const ok = { pages: 10, budget: 3, share: true }
    expect(() => pageSelect(q, tf.zeros([3, 2, 8, 10]) as tf.Tensor4D, ok)).toThrow(ShapeError)
    expect(() => pageSelect(tf.zeros([1, 4, 2, 8]) as tf.Tensor4D, bounds, ok)).toThrow(/\[batch, nHeads, 1, dHead\]/)
    expect(() => pageSelect(q, bounds, { ...ok, pages: 11 })).toThrow(ConfigError)
    expect(() => pageSelect(q, bounds, { ...ok, pages: 11 })).toThrow(/pages.*\[1, 10\]/)
    expect(() => pageSelect(q, bounds, { ...ok, budget: 0 })).toThrow(/budget.*\[1, 10\]/)
    expect(() => pageSelect(q, bounds, { ...ok, budget: 11 })).toThrow(ConfigError)
    tf.dispose([q, bounds])
  })
})
